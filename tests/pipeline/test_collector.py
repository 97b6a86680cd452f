"""The batch handler runs with Python's cyclic garbage collector off, and always turns it
back on (`ripple.pipeline.job.collector_paused`). No Spark here: the handler is given an
object with Spark's `toArrow` and a deliverer that notes the collector's state."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pyarrow as pa
import pytest

from ripple.notifications.registry import Registry
from ripple.pipeline.job import batch_handler, collector_paused
from ripple.pipeline.transform import EVENT_SCHEMA


class Events:
    """A batch as foreachBatch gives it: `toArrow` answers the events (or fails)."""

    def __init__(self, table: pa.Table | None = None, error: Exception | None = None) -> None:
        self.table = table if table is not None else EVENT_SCHEMA.empty_table()
        self.error = error

    def toArrow(self) -> pa.Table:  # Spark's name
        if self.error is not None:
            raise self.error
        return self.table


class NotingDeliverer:
    """Notes whether the collector was on when the batch's deliveries came."""

    def __init__(self) -> None:
        self.collector_on: list[bool] = []

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        yield

    def deliver(self, by_topic: dict[str, Any]) -> None:
        self.collector_on.append(gc.isenabled())


@pytest.fixture(autouse=True)
def collector_on() -> Iterator[None]:
    assert gc.isenabled()
    yield
    gc.enable()  # whatever a failing test left


def test_a_batch_is_delivered_with_the_collector_off_and_it_is_on_after() -> None:
    deliverer = NotingDeliverer()
    handle = batch_handler(Registry(), deliverer)  # type: ignore[arg-type]
    handle(Events(), 7)  # type: ignore[arg-type]
    handle(Events(), 8)  # type: ignore[arg-type]
    assert deliverer.collector_on == [False, False]
    assert gc.isenabled()


def test_a_failing_batch_turns_the_collector_back_on() -> None:
    handle = batch_handler(Registry(), NotingDeliverer())  # type: ignore[arg-type]
    with pytest.raises(ConnectionError, match="executor lost"):
        handle(Events(error=ConnectionError("executor lost")), 1)  # type: ignore[arg-type]
    assert gc.isenabled()


@pytest.mark.parametrize("first_to_end", ["first", "second"])
def test_overlapping_batches_leave_the_collector_on(first_to_end: str) -> None:
    """The two queries' handlers run in their own threads and may overlap."""
    first_in, second_in = threading.Event(), threading.Event()
    release = {"first": threading.Event(), "second": threading.Event()}
    inside: dict[str, bool] = {}

    def batch(name: str, entered: threading.Event) -> None:
        with collector_paused():
            inside[name] = gc.isenabled()
            entered.set()
            release[name].wait(10)

    threads = [
        threading.Thread(target=batch, args=("first", first_in)),
        threading.Thread(target=batch, args=("second", second_in)),
    ]
    threads[0].start()
    assert first_in.wait(10)
    threads[1].start()
    assert second_in.wait(10)
    assert inside == {"first": False, "second": False}
    order = ["first", "second"] if first_to_end == "first" else ["second", "first"]
    for name in order:
        release[name].set()
        threads[0 if name == "first" else 1].join(10)
    assert gc.isenabled()


def test_a_collector_turned_off_elsewhere_stays_off() -> None:
    gc.disable()
    with collector_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()
