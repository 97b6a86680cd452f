"""A task delivers with Python's cyclic garbage collector collecting less often, and always
puts its threshold back (`ripple.pipeline.tasks.fewer_collections`). No Spark here: the task
is given parts whose deliverer notes the threshold, over an empty range of an in-memory
database."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import sqlalchemy as sa

from ripple.notifications.registry import Registry
from ripple.pipeline import tasks
from ripple.pipeline.tasks import BATCH_COLLECTION_THRESHOLD, WorkerSetup, fewer_collections


class NotingDeliverer:
    """Notes the collector's first threshold when the task's deliveries came (or fails)."""

    def __init__(self, error: Exception | None = None) -> None:
        self.thresholds: list[int] = []
        self.error = error

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        yield

    def refresh_failing(self) -> None:
        pass

    def deliver(self, by_topic: dict[str, Any]) -> None:
        self.thresholds.append(gc.get_threshold()[0])
        if self.error is not None:
            raise self.error


class Database:
    engine = writer = sa.create_engine("sqlite://")


@pytest.fixture
def deliver(monkeypatch: pytest.MonkeyPatch) -> Any:
    """`deliver(deliverer)`: one task over nothing, delivering through `deliverer`."""

    def run(deliverer: NotingDeliverer) -> None:
        parts = tasks.Parts(Database(), Registry(), deliverer, None, None)  # type: ignore[arg-type]
        monkeypatch.setattr(tasks, "parts_of", lambda _setup: parts)
        tasks.deliver_task(WorkerSetup("run", "sqlite://"), "bucket_eventing", "objects", [])

    return run


@pytest.fixture(autouse=True)
def default_threshold() -> Iterator[tuple[int, int, int]]:
    before = gc.get_threshold()
    assert before[0] < BATCH_COLLECTION_THRESHOLD
    yield before
    gc.set_threshold(*before)  # whatever a failing test left


def test_a_task_delivers_collecting_less_and_the_threshold_is_put_back(
    deliver: Any, default_threshold: tuple[int, int, int]
) -> None:
    deliverer = NotingDeliverer()
    deliver(deliverer)
    deliver(deliverer)
    assert deliverer.thresholds == [BATCH_COLLECTION_THRESHOLD, BATCH_COLLECTION_THRESHOLD]
    assert gc.get_threshold() == default_threshold
    assert gc.isenabled()  # it still collects


def test_a_failing_task_puts_the_threshold_back(
    deliver: Any, default_threshold: tuple[int, int, int]
) -> None:
    with pytest.raises(ConnectionError, match="target lost"):
        deliver(NotingDeliverer(ConnectionError("target lost")))
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
