"""A real Spark standalone cluster on loopback, started from the PySpark installation's own
launcher (`bin/spark-class`): a master and workers of one core each, every one its own JVM,
and a Python for the executors that does not have ripple installed (`python_without_ripple`).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import sysconfig
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pyspark

from tests.ports import free_port

SPARK_HOME = Path(pyspark.__file__).resolve().parent
START_TIMEOUT_S = 120.0


def python_without_ripple(directory: Path) -> Path:
    """A Python that has ripple's dependencies but not ripple: this interpreter without its
    site initialisation (so the editable install's path file is not read), its
    site-packages given on PYTHONPATH instead."""
    site = sysconfig.get_paths()["purelib"]
    script = directory / "python-without-ripple"
    script.write_text(
        "#!/bin/sh\n"
        f'PYTHONPATH="{site}${{PYTHONPATH:+:$PYTHONPATH}}" exec "{sys.executable}" -S "$@"\n'
    )
    script.chmod(0o755)
    return script


@dataclass
class StandaloneCluster:
    """`master_url` (spark://127.0.0.1:PORT) and the JVMs behind it."""

    directory: Path
    cores_per_worker: int = 1
    master_url: str = ""
    web_port: int = 0
    master: subprocess.Popen[bytes] | None = None
    workers: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK")}
        env.update(
            SPARK_HOME=str(SPARK_HOME),
            SPARK_LOCAL_IP="127.0.0.1",
            SPARK_LOG_DIR=str(self.directory / "logs"),
            SPARK_WORKER_DIR=str(self.directory / "work"),
        )
        return env

    def _launch(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        log = (self.directory / f"{name}.log").open("wb")
        return subprocess.Popen(
            [str(SPARK_HOME / "bin" / "spark-class"), *args],
            env=self._env(),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def start_master(self) -> None:
        port, self.web_port = free_port(), free_port()
        self.master = self._launch(
            "master",
            "org.apache.spark.deploy.master.Master",
            "--host", "127.0.0.1", "--port", str(port), "--webui-port", str(self.web_port),
        )  # fmt: skip
        self.master_url = f"spark://127.0.0.1:{port}"

    def add_worker(self) -> subprocess.Popen[bytes]:
        worker = self._launch(
            f"worker-{len(self.workers)}",
            "org.apache.spark.deploy.worker.Worker",
            "--host", "127.0.0.1", "--cores", str(self.cores_per_worker), "--memory", "1g",
            "--webui-port", str(free_port()), self.master_url,
        )  # fmt: skip
        self.workers.append(worker)
        return worker

    def state(self) -> dict[str, Any]:
        """The master's own account of the cluster (its web UI's JSON)."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.web_port}/json/", timeout=5) as r:
            state: dict[str, Any] = orjson.loads(r.read())
        return state

    def alive_workers(self) -> int:
        try:
            return sum(1 for w in self.state()["workers"] if w["state"] == "ALIVE")
        except (OSError, orjson.JSONDecodeError):  # not up yet; or up, but not its JSON yet
            return 0

    def wait_for_workers(self, n: int) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while self.alive_workers() < n:
            if time.monotonic() > deadline:
                logs = "\n".join(
                    p.read_text(errors="replace")[-2000:] for p in self.directory.glob("*.log")
                )
                raise AssertionError(f"{n} Spark workers did not register:\n{logs}")
            time.sleep(0.2)

    def kill_worker(self, worker: subprocess.Popen[bytes]) -> None:
        """SIGKILL the worker's JVM and the executor JVM it started (its process group)."""
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait()

    def stop(self) -> None:
        for process in [*self.workers, self.master]:
            if process is not None and process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in [*self.workers, self.master]:
            if process is not None:
                try:
                    process.wait(30)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()


@contextmanager
def standalone_cluster(directory: Path, workers: int = 2) -> Iterator[StandaloneCluster]:
    """A master and `workers` one-core workers, until the block ends."""
    directory.mkdir(parents=True, exist_ok=True)
    cluster = StandaloneCluster(directory)
    try:
        cluster.start_master()
        for _ in range(workers):
            cluster.add_worker()
        cluster.wait_for_workers(workers)
        yield cluster
    finally:
        cluster.stop()
