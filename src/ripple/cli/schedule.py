"""What `ripple up`'s schedules share: a piece of work run now and then every `interval`
seconds on a daemon thread until `stop` (the lifecycle, `ripple.cli.lifecycle`; the
journal's upkeep, `ripple.cli.journal_upkeep`)."""

from __future__ import annotations

import logging
import threading

__all__ = ["Schedule", "Unschedulable"]

log = logging.getLogger("ripple.schedule")


class Unschedulable(Exception):
    """A run that will never succeed as configured: said once, and the schedule ends."""


class Schedule:
    """Calls `run_once` now, then every `interval` seconds on a daemon thread named `what`,
    until `stop`, which a run in progress may watch (`stopping`) to end early. A run that
    fails is logged and tried again at the next interval (the database away, say); one that
    raises `Unschedulable` ends the schedule."""

    what = "schedule"

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self.runs = 0  # completed runs
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def run_once(self) -> object:
        raise NotImplementedError

    def stopping(self) -> bool:
        return self._stop.is_set()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name=self.what, daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                log.warning(
                    "the %s did not stop within %g s; leaving it (a daemon thread)",
                    self.what,
                    timeout,
                )

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.run_once()
            except Unschedulable as e:
                log.warning("no %s: %s", self.what, e)
                return
            except Exception:  # the database is away: try again next time
                log.exception("the %s failed", self.what)
            self.runs += 1
            if self._stop.wait(self.interval):
                return
