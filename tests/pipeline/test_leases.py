"""Leases: a trickle of changes is delivered by one task that follows the stream for
seconds (`ripple.pipeline.tasks.lease_task`), planned by the deliveries source
(`ripple.pipeline.deliveries`), and ended by the lease mark when its pipeline stops
(`ripple.pipeline.leases`). Without Spark: the planning and the task, called directly."""

from __future__ import annotations

import hashlib
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

import orjson
import pyarrow as pa
import pytest
from pyspark.sql.streaming.datasource import ReadMaxRows

from ripple.changestream.reader import DEFAULT_STREAM, ChangeStreamReader
from ripple.metabase import (
    BucketLocation,
    Metabase,
    ObjectLocation,
    create_bucket,
    create_project,
)
from ripple.notifications.registry import Destination, Registry
from ripple.pipeline import source, tasks
from ripple.pipeline.deliveries import AGAIN, LEASE, DeliveryStreamReader, LeasePartition
from ripple.pipeline.leases import Lease, close_leases, lease_mark, open_leases
from ripple.pipeline.source import DEFAULT_CONSUMER, RangePartition
from ripple.pipeline.tasks import WorkerSetup
from tests.metabase.objects import commit_inline_object
from tests.pipeline.conftest import FixedTargets, wait_for
from tests.pipeline.fakes import RecordingTarget

TOPIC = "projects/p/topics/photos"


@dataclass
class World:
    db: Metabase
    registry: Registry = field(default_factory=Registry)

    def __post_init__(self) -> None:
        self.db.eventing = self.registry.is_eventing
        self.project = create_project(self.db, "leases")
        create_bucket(self.db, BucketLocation(self.project.id, "photos"))
        self.registry.set_bucket(self.project.id, "photos", [Destination(TOPIC)])

    @property
    def url(self) -> str:
        return self.db.url.render_as_string(hide_password=False)

    def put(self, *keys: str) -> None:
        for key in keys:
            commit_inline_object(
                self.db,
                ObjectLocation(self.project.id, "photos", key),
                key.encode(),
                etag=hashlib.md5(key.encode()).hexdigest(),
            )

    def reader(self, **options: str) -> DeliveryStreamReader:
        return DeliveryStreamReader({"url": self.url, **options}, b"", "objects")

    def stream(self) -> ChangeStreamReader:
        return ChangeStreamReader(self.db.engine, DEFAULT_STREAM, write_engine=self.db.writer)


@pytest.fixture
def world(db: Metabase) -> World:
    return World(db)


def test_a_trickle_is_planned_as_a_lease_from_the_delivered_positions(world: World) -> None:
    world.put("a", "b", "c")
    reader = world.reader(leaseSeconds="5", leaseRun="7")
    try:
        start = reader.initialOffset()
        end = reader.latestOffset(start, reader.getDefaultReadLimit())
        # its positions are where delivery stands (nothing yet), the counter makes it new
        assert end == {**start, LEASE: 1}
        (part,) = reader.partitions(start, end)
        assert isinstance(part, LeasePartition)
        assert part.lease == Lease(7, 5.0, 10_000, start)
        after = reader.latestOffset(end, reader.getDefaultReadLimit())
        assert after[LEASE] == 2  # the next lease is another batch
    finally:
        reader.stop()


def test_a_backlog_is_planned_as_bounded_batches_not_a_lease(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(source, "SINGLE_TASK_RECORDS", 2)
    world.put("a", "b", "c")
    reader = world.reader(leaseSeconds="5", leaseRun="1")
    try:
        start = reader.initialOffset()
        end = reader.latestOffset(start, ReadMaxRows(50_000))
        assert LEASE not in end
        assert sum(end.values()) == 3
        parts = reader.partitions(start, end)
        assert all(isinstance(p, RangePartition) for p in parts)
    finally:
        reader.stop()


def test_a_batch_starts_from_the_consumer_offsets_a_lease_moved(world: World) -> None:
    """A lease delivers beyond the positions Spark planned it with: the next batch starts
    where the consumer offsets say, and plans nothing when nothing more waits."""
    world.put("a", "b", "c")
    reader = world.reader()  # no lease: the batches Spark plans
    try:
        start = reader.initialOffset()
        ends = reader.latestOffset(start, ReadMaxRows(50_000))
        world.stream().commit_offsets(DEFAULT_CONSUMER, {int(k): v for k, v in ends.items()})
        lease = {**start, LEASE: 1}  # what a lease's offsets looked like
        assert reader.latestOffset(lease, ReadMaxRows(50_000)) == ends
        assert reader.partitions(lease, ends) == []
    finally:
        reader.stop()


def test_records_behind_the_committed_offsets_are_planned_again(world: World) -> None:
    """A batch cancelled at a stop may be committed by Spark while the consumer offsets
    stayed behind it: the same offsets again would be no batch, so a counter makes one, over
    the undelivered records."""
    world.put("a", "b", "c")
    world.stream().commit_offsets(DEFAULT_CONSUMER, dict.fromkeys(range(4), 0))
    reader = world.reader()
    try:
        start = reader.initialOffset()
        committed = reader.latestOffset(start, ReadMaxRows(50_000))
        again = reader.latestOffset(committed, ReadMaxRows(50_000))
        assert again == {**committed, AGAIN: 1}
        (part,) = reader.partitions(committed, again)
        assert isinstance(part, RangePartition)
        assert sum(upto - after for _, after, upto in part.ranges) == 3
    finally:
        reader.stop()


class RunningLease:
    """`lease_task` run in a thread, as a Python worker runs it."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.target = RecordingTarget(TOPIC)
        self.outcomes: list[pa.RecordBatch] = []
        self.setup = WorkerSetup(
            uuid.uuid4().hex,
            world.url,
            routes=world.registry.routes(),
            targets=FixedTargets({TOPIC: [self.target]}),
        )
        self.thread: threading.Thread | None = None

    def start(self, run: int, seconds: float = 600, begin: dict[str, int] | None = None) -> None:
        lease = Lease(run, seconds, 10_000, begin or {})

        def task() -> None:
            batch = tasks.lease_task(self.setup, DEFAULT_STREAM, "objects", lease, 0)
            self.outcomes.append(batch)

        self.thread = threading.Thread(target=task)
        self.thread.start()

    def ended(self) -> bool:
        assert self.thread is not None
        self.thread.join(60)
        return not self.thread.is_alive()

    def keys(self) -> list[str]:
        return [
            orjson.loads(d.body)["Records"][0]["s3"]["object"]["key"] for d in self.target.acked
        ]


@pytest.fixture
def lease(world: World) -> Iterator[RunningLease]:
    running = RunningLease(world)
    yield running
    close_leases(world.db.writer, DEFAULT_STREAM, abs(lease_mark(world.stream())))
    if running.thread is not None:
        running.thread.join(60)
    for run in list(tasks._parts):  # the worker's parts, as Spark's SIGHUP would close them
        tasks._parts.pop(run).close()


def test_a_lease_delivers_what_is_committed_while_it_runs_and_ends_at_the_stop(
    world: World, lease: RunningLease
) -> None:
    run = open_leases(world.db.writer, DEFAULT_STREAM)
    world.put("a")
    lease.start(run)
    wait_for(lambda: lease.keys() == ["a"], "the waiting event arrives")
    world.put("b", "c")  # after the lease began
    wait_for(lambda: lease.keys() == ["a", "b", "c"], "the new events arrive, in order")
    ends = {partition: end for partition, end in world.stream().ends().items() if end}
    wait_for(lambda: world.stream().offsets(DEFAULT_CONSUMER) == ends, "the offsets are stored")
    assert lease.thread is not None
    assert lease.thread.is_alive()  # a 600 s lease
    close_leases(world.db.writer, DEFAULT_STREAM, run)
    assert lease.ended()
    (report,) = lease.outcomes
    rows = report.to_pylist()
    assert {"kind": "events", "name": "", "label": "", "value": 3, "text": None} in rows
    assert [r["kind"] for r in rows].count("lag") == 1


def test_a_lease_ends_on_time_while_changes_keep_coming(world: World, lease: RunningLease) -> None:
    """Its time is up even when every poll finds records: its batch ends, its outcomes
    reach the driver, and the next is planned."""
    run = open_leases(world.db.writer, DEFAULT_STREAM)
    writing = threading.Event()
    writing.set()

    def writer() -> None:
        n = 0
        while writing.is_set():
            world.put(f"k{n}")
            n += 1

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        lease.start(run, seconds=1)
        assert lease.ended()
        assert thread.is_alive()  # the changes kept coming
    finally:
        writing.clear()
        thread.join(60)
    assert lease.keys()


def test_a_lease_starts_where_its_batch_was_planned(world: World, lease: RunningLease) -> None:
    """A stream read from its end (`startingPositions=latest`: no consumer offsets yet)
    delivers what comes after the planned positions, not the stream's history."""
    world.put("old-1", "old-2")
    reader = world.reader(leaseSeconds="5", leaseRun="1", startingPositions="latest")
    try:
        start = reader.initialOffset()
        end = reader.latestOffset(start, reader.getDefaultReadLimit())
        (part,) = reader.partitions(start, end)
        assert isinstance(part, LeasePartition)
    finally:
        reader.stop()
    run = open_leases(world.db.writer, DEFAULT_STREAM)
    lease.start(run, begin=dict(part.lease.begin))
    world.put("new")
    wait_for(lambda: lease.keys() == ["new"], "the new event arrives")
    assert lease.keys() == ["new"]


def test_a_lease_of_an_earlier_run_stops_delivering(world: World, lease: RunningLease) -> None:
    """A task Spark was still ending when the next run started: the next run's number
    ends it before it delivers what that run is for."""
    run = open_leases(world.db.writer, DEFAULT_STREAM)
    lease.start(run)
    world.put("a")
    wait_for(lambda: lease.keys() == ["a"], "the event arrives")
    open_leases(world.db.writer, DEFAULT_STREAM)  # the next run
    assert lease.ended()
    world.put("b")
    assert lease.keys() == ["a"]


def test_a_lease_planned_by_an_earlier_run_delivers_nothing(
    world: World, lease: RunningLease
) -> None:
    """A task of a stopped run that starts late, when the next run's mark is up."""
    earlier = open_leases(world.db.writer, DEFAULT_STREAM)
    close_leases(world.db.writer, DEFAULT_STREAM, earlier)
    open_leases(world.db.writer, DEFAULT_STREAM)
    world.put("a")
    lease.start(earlier)
    assert lease.ended()
    assert lease.keys() == []


def test_a_lease_under_a_stopped_pipeline_delivers_nothing(
    world: World, lease: RunningLease
) -> None:
    run = open_leases(world.db.writer, DEFAULT_STREAM)
    close_leases(world.db.writer, DEFAULT_STREAM, run)
    world.put("a")
    lease.start(run)
    assert lease.ended()
    assert lease.keys() == []
    assert world.stream().offsets(DEFAULT_CONSUMER) == {}
