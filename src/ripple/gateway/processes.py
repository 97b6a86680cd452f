"""The gateway in processes of its own: several uvicorn servers on one listening socket.

`ripple serve --workers N` and `ripple up` bind the S3 address once, then start gateway
processes that each serve that socket (the kernel hands each new connection to one of
them), so S3 requests use every core and never share an interpreter with the pipeline's
driver. The processes are started fresh (multiprocessing's `spawn`: nothing of the parent,
neither its threads nor Spark's bridge, is inherited); each opens its own metabase pool and
builds its services from the settings.

A process that dies (a crash, SIGKILL, the OOM killer) is replaced, and one line says so;
one that ends on SIGINT or SIGTERM was asked to stop (Ctrl-C and a service manager's stop
reach the whole process group) and exits 0, so it is not. A replacement that dies again
soon waits longer each time (up to `MOST_BACKOFF_S`), its reason logged. A process that
fails before it serves at the start, say a malformed setting, stops the start with its
one-line reason: the next would fail the same way. A process whose parent is gone stops:
a killed `ripple up` leaves no gateway holding its address.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import socket
import sys
import threading
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.context import SpawnProcess
from typing import Any

from ripple.config import Settings
from ripple.gateway.server import Gateway, GatewayError, build_services, certificate, url_of
from ripple.metabase import Metabase
from ripple.notifications.registry import Registry

__all__ = ["GatewayProcesses", "serve_process"]

log = logging.getLogger(__name__)

_spawn = multiprocessing.get_context("spawn")
READY_TIMEOUT_S = 120.0  # a loaded machine imports the gateway in seconds
STOP_TIMEOUT_S = 10.0  # uvicorn's graceful shutdown takes up to 5
WATCH_INTERVAL_S = 0.5
SOON_S = 10.0  # a replacement that dies sooner than this after its start backs off
MOST_BACKOFF_S = 30.0


def _one_line(error: Exception) -> str:
    return str(error).splitlines()[0] if str(error) else type(error).__name__


def serve_process(settings: Settings, sock: socket.socket, report: Connection) -> None:
    """A gateway process: build the services, serve `sock` until SIGINT or SIGTERM. It
    sends ("ready", pid) once it serves, or ("failed", reason) if it cannot start."""
    logging.basicConfig(  # warnings only, as `ripple serve`: no line per refused request
        level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    # uvicorn ends gracefully on SIGINT / SIGTERM, then raises the signal again with the
    # handler it found: this one, so a process asked to stop exits 0
    signal.signal(signal.SIGTERM, lambda _signum, _frame: sys.exit(0))
    parent = os.getppid()
    try:
        registry = Registry(settings.eventing_buckets)  # kept current by the gateway
        db = Metabase(settings.effective_database_url, eventing=registry.is_eventing)
        gateway = Gateway(build_services(settings, db, registry), sock, tls=certificate(settings))
    except Exception as e:
        report.send(("failed", _one_line(e)))
        raise SystemExit(3) from None

    def announce_then_follow_the_parent() -> None:
        while not gateway.started:
            time.sleep(0.01)
        report.send(("ready", os.getpid()))
        while os.getppid() == parent:
            time.sleep(1.0)
        os.kill(os.getpid(), signal.SIGTERM)  # the parent is gone: stop serving its address

    threading.Thread(target=announce_then_follow_the_parent, daemon=True).start()
    try:
        gateway.run()
    except KeyboardInterrupt:  # uvicorn shut down on SIGINT, then raised it again
        pass
    except Exception as e:  # before it served (its first look at the metabase): one line
        if gateway.started:
            raise
        report.send(("failed", _one_line(e)))
        raise SystemExit(3) from None
    finally:
        db.dispose()


@dataclass
class _Process:
    process: SpawnProcess
    report: Connection  # the parent's end
    started: float  # time.monotonic() at its start
    due: float | None = None  # once it died: when its replacement starts


def _crashed(code: int | None) -> bool:
    """Whether a process's exit code says it died rather than was asked to stop (0; or
    a SIGINT / SIGTERM that came before its handlers were in place)."""
    return code is not None and code not in (0, -signal.SIGINT, -signal.SIGTERM)


class GatewayProcesses:
    """`workers` gateway processes on the bound `sock`, kept at that number until `stop`."""

    def __init__(self, settings: Settings, sock: socket.socket, workers: int) -> None:
        if workers < 1:
            raise GatewayError("the gateway needs at least 1 worker process")
        self.settings = settings
        self.socket = sock
        self.workers = workers
        tls = certificate(settings)  # a certificate that cannot be served stops the start here
        self.url = url_of(sock, tls=tls is not None)
        self.processes: list[_Process] = []
        self.restarts = 0
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._watch: threading.Thread | None = None
        self._backoff_s = 0.0  # the last replacement's wait

    def _spawn(self) -> _Process:
        parent, child = _spawn.Pipe(duplex=False)
        process = _spawn.Process(
            target=serve_process,
            args=(self.settings, self.socket, child),
            name="ripple-gateway",
            daemon=False,
        )
        process.start()
        child.close()
        return _Process(process, parent, time.monotonic())

    @staticmethod
    def _wait_ready(started: _Process, timeout: float) -> None:
        """Until the process serves; `GatewayError` with its reason if it cannot."""
        if not started.report.poll(timeout):
            raise GatewayError(f"a gateway process did not start within {timeout:.0f} s")
        try:
            kind, detail = started.report.recv()
        except EOFError:
            started.process.join(1.0)
            code = started.process.exitcode
            raise GatewayError(f"a gateway process exited while starting (code {code})") from None
        if kind != "ready":
            raise GatewayError(str(detail))

    def start(self) -> None:
        """Start the processes and wait until each serves; then watch them."""
        try:
            for _ in range(self.workers):
                self.processes.append(self._spawn())
            for started in self.processes:
                self._wait_ready(started, READY_TIMEOUT_S)
        except BaseException:
            self.stop()
            raise
        self._watch = threading.Thread(target=self._keep, name="gateway-processes", daemon=True)
        self._watch.start()

    def _keep(self) -> None:
        while not self._stopping.wait(WATCH_INTERVAL_S):
            with self._lock:
                for i, running in enumerate(self.processes):
                    if self._stopping.is_set():
                        break
                    if not _crashed(running.process.exitcode):
                        continue
                    if running.due is None:  # seen dead for the first time
                        running.due = self._schedule(running)
                    if time.monotonic() >= running.due:
                        try:
                            self.processes[i] = self._spawn()
                            self.restarts += 1
                        except OSError as e:  # none could be started: at the next tick
                            log.warning("cannot start a gateway process: %s", e)

    def _schedule(self, ended: _Process) -> float:
        """Log why `ended` died; when its replacement starts (later each time one dies
        soon after its start)."""
        code = ended.process.exitcode
        if code is None:
            raise RuntimeError("a gateway process that is still running was taken for dead")
        reason = ""
        try:
            if ended.report.poll():
                kind, detail = ended.report.recv()
                reason = f": {detail}" if kind == "failed" else ""
        except (EOFError, OSError):
            pass
        ended.report.close()
        soon = time.monotonic() - ended.started < SOON_S
        self._backoff_s = min(MOST_BACKOFF_S, max(1.0, self._backoff_s * 2)) if soon else 0.0
        log.warning(
            "gateway process %s ended (%s%s); starting another%s",
            ended.process.pid,
            f"signal {-code}" if code < 0 else f"exit code {code}",
            reason,
            f" in {self._backoff_s:.0f} s" if self._backoff_s else "",
        )
        return time.monotonic() + self._backoff_s

    def alive(self) -> bool:
        """Whether any process still serves or is to be replaced (all end without a crash
        when Ctrl-C or a service manager's SIGTERM reached them)."""
        with self._lock:
            return any(
                p.process.exitcode is None or _crashed(p.process.exitcode) for p in self.processes
            )

    def reload(self) -> None:
        """Have every serving process read its TLS certificate again (SIGHUP)."""
        with self._lock:
            for running in self.processes:
                if running.process.exitcode is None and running.process.pid is not None:
                    os.kill(running.process.pid, signal.SIGHUP)

    def pids(self) -> list[int]:
        with self._lock:
            return [p.process.pid for p in self.processes if p.process.pid is not None]

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> None:
        """SIGTERM every process (uvicorn ends its connections gracefully), then SIGKILL
        those still there after `timeout`; close the socket."""
        self._stopping.set()
        if self._watch is not None:
            self._watch.join()
        with self._lock:
            for running in self.processes:
                if running.process.exitcode is None:
                    running.process.terminate()
            deadline = time.monotonic() + timeout
            for running in self.processes:
                running.process.join(max(0.0, deadline - time.monotonic()))
                if running.process.exitcode is None:
                    log.warning("gateway process %s did not stop; killed", running.process.pid)
                    running.process.kill()
                    running.process.join()
                running.report.close()
        self.socket.close()

    def __enter__(self) -> GatewayProcesses:
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()
