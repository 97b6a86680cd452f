"""The job's streaming queries start one at a time: a query starts only once the one before
it has started its source (Spark shares the Python data source's environment map between a
starting source and a running query's tasks; `ripple.pipeline.job.start_one_by_one`)."""

from __future__ import annotations

import threading
from typing import Any

from ripple.pipeline.job import start_one_by_one


class FakeQuery:
    """Initializing its sources for the first `reads` status reads, then waiting for data."""

    def __init__(self, name: str, log: list[str], reads: int = 3) -> None:
        self.name = name
        self.log = log
        self.reads = reads
        self.isActive = True

    @property
    def status(self) -> dict[str, Any]:
        self.reads -= 1
        if self.reads > 0:
            return {"message": "Initializing sources"}
        self.log.append(f"{self.name} started")
        return {"message": "Waiting for data to arrive"}


def test_each_query_starts_once_the_one_before_has_started() -> None:
    log: list[str] = []

    def starter(name: str) -> Any:
        def start() -> FakeQuery:
            log.append(f"start {name}")
            return FakeQuery(name, log)

        return start

    queries: list[Any] = []
    start_one_by_one([starter("deliveries"), starter("buckets")], threading.Event(), queries)

    assert [q.name for q in queries] == ["deliveries", "buckets"]
    assert log == ["start deliveries", "deliveries started", "start buckets", "buckets started"]


def test_a_query_that_ends_while_starting_does_not_hold_up_the_next() -> None:
    log: list[str] = []
    ended = FakeQuery("deliveries", log, reads=10**9)
    ended.isActive = False  # it failed: the caller looks at why

    starts: list[Any] = [lambda: ended, lambda: FakeQuery("buckets", log)]
    queries: list[Any] = []
    start_one_by_one(starts, threading.Event(), queries)

    assert [q.name for q in queries] == ["deliveries", "buckets"]
    assert log == ["buckets started"]
