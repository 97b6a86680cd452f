"""The batch handler runs with Python's cyclic garbage collector collecting less often, and
always puts its threshold back (`ripple.pipeline.job.fewer_collections`). No Spark here: the
handler is given an object with Spark's `toArrow` and a deliverer that notes the threshold."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pyarrow as pa
import pytest

from ripple.notifications.registry import Registry
from ripple.pipeline.job import BATCH_COLLECTION_THRESHOLD, batch_handler, fewer_collections
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
    """Notes the collector's first threshold when the batch's deliveries came."""

    def __init__(self) -> None:
        self.thresholds: list[int] = []

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        yield

    def deliver(self, by_topic: dict[str, Any]) -> None:
        self.thresholds.append(gc.get_threshold()[0])


@pytest.fixture(autouse=True)
def default_threshold() -> Iterator[tuple[int, int, int]]:
    before = gc.get_threshold()
    assert before[0] < BATCH_COLLECTION_THRESHOLD
    yield before
    gc.set_threshold(*before)  # whatever a failing test left


def test_a_batch_is_delivered_collecting_less_and_the_threshold_is_put_back(
    default_threshold: tuple[int, int, int],
) -> None:
    deliverer = NotingDeliverer()
    handle = batch_handler(Registry(), deliverer)  # type: ignore[arg-type]
    handle(Events(), 7)  # type: ignore[arg-type]
    handle(Events(), 8)  # type: ignore[arg-type]
    assert deliverer.thresholds == [BATCH_COLLECTION_THRESHOLD, BATCH_COLLECTION_THRESHOLD]
    assert gc.get_threshold() == default_threshold
    assert gc.isenabled()  # it still collects


def test_a_failing_batch_puts_the_threshold_back(default_threshold: tuple[int, int, int]) -> None:
    handle = batch_handler(Registry(), NotingDeliverer())  # type: ignore[arg-type]
    with pytest.raises(ConnectionError, match="executor lost"):
        handle(Events(error=ConnectionError("executor lost")), 1)  # type: ignore[arg-type]
    assert gc.get_threshold() == default_threshold


@pytest.mark.parametrize("first_to_end", ["first", "second"])
def test_overlapping_batches_collect_less_until_the_last_ends(
    first_to_end: str, default_threshold: tuple[int, int, int]
) -> None:
    """The two queries' handlers run in their own threads and may overlap: the batch still
    running when the other ends keeps the raised threshold."""
    entered = {"first": threading.Event(), "second": threading.Event()}
    release = {"first": threading.Event(), "second": threading.Event()}
    inside: dict[str, int] = {}

    def batch(name: str) -> None:
        with fewer_collections():
            inside[name] = gc.get_threshold()[0]
            entered[name].set()
            release[name].wait(10)

    threads = {name: threading.Thread(target=batch, args=(name,)) for name in entered}
    for name in ("first", "second"):
        threads[name].start()
        assert entered[name].wait(10)
    assert inside == {"first": BATCH_COLLECTION_THRESHOLD, "second": BATCH_COLLECTION_THRESHOLD}
    ending, staying = ("first", "second") if first_to_end == "first" else ("second", "first")
    release[ending].set()
    threads[ending].join(10)
    assert not threads[ending].is_alive()
    assert gc.get_threshold()[0] == BATCH_COLLECTION_THRESHOLD  # `staying` is still running
    release[staying].set()
    threads[staying].join(10)
    assert not threads[staying].is_alive()
    assert gc.get_threshold() == default_threshold


@pytest.mark.parametrize("first", [BATCH_COLLECTION_THRESHOLD * 2, 0], ids=["higher", "off"])
def test_a_threshold_chosen_elsewhere_is_left_as_it_is(
    first: int, default_threshold: tuple[int, int, int]
) -> None:
    chosen = (first, *default_threshold[1:])
    gc.set_threshold(*chosen)
    with fewer_collections():
        assert gc.get_threshold() == chosen
    assert gc.get_threshold() == chosen
