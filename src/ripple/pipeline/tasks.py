"""Delivery in the tasks: each Spark task reads its change records, maps them to events,
routes and delivers them, all inside the Python worker that runs it; the driver gets the
task's outcomes (`ripple.pipeline.outcomes`), never its events.

    read(ranges) → events (transform.BatchMapper), in commit order → route → deliver
      → consumer offsets of its partitions, then one small batch of outcomes

A worker builds its `Parts` (metabase pool, registry, targets, retry queue) from the
pipeline's `WorkerSetup` once per pipeline run and keeps them while Spark reuses it. A task
returns only when each of its events is acknowledged or queued, so Spark's offsets commit
is at least once. `deliver_task` is a batch's task (the `read()` of
`ripple.pipeline.deliveries`), `lease_task` a trickle's, `drain_task` the retry queues'.

Where the work runs and why: docs/pipeline.md, "Where the work runs" and "Delivery".
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from ripple.changestream.reader import ChangeStreamReader
from ripple.events import EventSettings
from ripple.metabase import Metabase
from ripple.notifications.phase1 import BucketKey
from ripple.notifications.registry import Destination, Registry
from ripple.notifications.store import EventingStore
from ripple.notifications.topics import Topic
from ripple.pipeline import outcomes
from ripple.pipeline.assemble import RoutesAndTargets
from ripple.pipeline.deliver import Deliverer
from ripple.pipeline.leases import Lease, lease_mark
from ripple.pipeline.queue import RetryQueue
from ripple.pipeline.route import route_table
from ripple.pipeline.source import DEFAULT_CONSUMER, read_ranges
from ripple.pipeline.transform import EVENT_SCHEMA, BatchMapper, Owners
from ripple.snapshotter import shared as shared_snapshotters
from ripple.snapshotter.settings import SnapshotterSettings
from ripple.subscriptions.store import SubscriptionStore
from ripple.targets.destinations import Destinations
from ripple.targets.guard import DestinationGuard, set_default_guard
from ripple.targets.retry import RetryPolicy

__all__ = [
    "WorkerSetup",
    "deliver_task",
    "drain_task",
    "fewer_collections",
    "in_commit_order",
    "lease_task",
    "warm_task",
]

log = logging.getLogger(__name__)

# Fixed targets instead of the eventing configuration (tests, embedding): called once per
# worker process with its metabase.
TargetFactory = Callable[[Metabase], Destinations]


@dataclass(frozen=True)
class WorkerSetup:
    """What a Python worker needs to route and deliver; pickled with the source, so it
    holds settings, never connections. `id` names one pipeline run: a worker keeps one set of
    targets per id."""

    id: str
    database_url: str
    events: EventSettings = field(default_factory=EventSettings)
    topics: Mapping[str, Topic] = field(default_factory=dict)  # the configuration file's
    static_routes: Mapping[BucketKey, str] = field(default_factory=dict)  # the phase-1 list
    default_policy: RetryPolicy | None = None
    guard: DestinationGuard | None = None
    snapshotters: Mapping[str, SnapshotterSettings] = field(default_factory=dict)
    # where the driver serves them (`ripple.snapshotter.shared.Served`): {name: HOST:PORT}
    snapshotter_addresses: Mapping[str, str] = field(default_factory=dict)
    # fixed routes and targets instead of following the eventing configuration
    routes: Mapping[BucketKey, Sequence[Destination]] | None = None
    targets: TargetFactory | None = None


@dataclass
class Parts:
    """One pipeline's routing and delivery in one worker process."""

    metabase: Metabase
    registry: Registry
    deliverer: Deliverer
    owners: Owners
    reconfigure: Callable[[], object] | None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def close(self) -> None:
        try:
            self.deliverer.close()
        finally:
            self.owners.close()
            self.metabase.dispose()


_parts: dict[str, Parts] = {}
_parts_lock = threading.Lock()


def parts_of(setup: WorkerSetup) -> Parts:
    """This process's parts for `setup`, built on first need. Parts of another pipeline
    run (a restarted pipeline in the same Spark session) are closed."""
    with _parts_lock:
        parts = _parts.get(setup.id)
        if parts is None:
            for old in list(_parts):
                _parts.pop(old).close()
            parts = _parts[setup.id] = _build(setup)
        return parts


def _close_and_exit(signum: int, _frame: object) -> None:
    """Spark's Python daemon ends its workers with SIGHUP when Spark stops: close the
    targets (a broker sees a clean disconnect), then exit as the worker would have."""
    with contextlib.suppress(Exception):
        for parts in list(_parts.values()):
            parts.close()
    os._exit(0)


def _build(setup: WorkerSetup) -> Parts:
    if _in_spark_task():
        outcomes.capture_logs()
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGHUP, _close_and_exit)
    if setup.guard is not None:
        set_default_guard(setup.guard)
    shared_snapshotters.configure(setup.snapshotters)
    shared_snapshotters.configure_remote(setup.snapshotter_addresses)
    registry = Registry()  # its routes are set before any write
    metabase = Metabase(setup.database_url, eventing=registry.is_eventing)
    queue = RetryQueue(metabase.writer)
    routes_and_targets: RoutesAndTargets | None = None
    try:
        if setup.targets is not None:
            registry.replace_static(setup.static_routes)
            registry.replace_api(setup.routes or {})
            built = setup.targets(metabase)
        else:
            routes_and_targets = RoutesAndTargets(
                setup.topics,
                setup.static_routes,
                registry,
                EventingStore(metabase),
                SubscriptionStore(metabase),
                setup.default_policy,
            )
            built = routes_and_targets.assemble()
        deliverer = Deliverer(
            built.targets, queue, built.policies, default_policy=setup.default_policy
        )
        if routes_and_targets is not None:
            routes_and_targets.deliverer = deliverer
        deliverer.open()
    except BaseException:
        metabase.dispose()
        raise
    reconfigure = routes_and_targets.check if routes_and_targets is not None else None
    return Parts(metabase, registry, deliverer, Owners(setup.database_url), reconfigure)


def _in_spark_task() -> bool:
    from pyspark import TaskContext

    return TaskContext.get() is not None


def _batch_id() -> int:
    """The Spark batch this task belongs to (a local property Spark gives each task of a
    streaming batch), or -1."""
    from pyspark import TaskContext

    context = TaskContext.get()
    value = context.getLocalProperty("streaming.sql.batchId") if context else None
    return int(value) if value and value.lstrip("-").isdigit() else -1


def in_commit_order(events: pa.Table) -> pa.Table:
    """A task's events in commit order across its partitions: a key's events are in one
    partition unless a DeleteObjects or a rename of several keys recorded one of them in its
    least key's (then the batch is one task). A stable sort: a transaction's events keep
    their order."""
    return events.take(pc.sort_indices(events, [("commit_ns", "ascending")]))


# While a task's events are handled, the collector's first generation is collected every
# this many allocations (net of those freed) instead of Python's default 700.
BATCH_COLLECTION_THRESHOLD = 100_000


class _Batches:
    """The batches being handled (tasks and drains may overlap in a process's threads),
    and the collector threshold to put back when the last one ends."""

    lock = threading.Lock()
    running = 0
    restore: tuple[int, ...] | None = None


@contextlib.contextmanager
def fewer_collections() -> Iterator[None]:
    """Python's cyclic garbage collector runs less often while events are handled. Routing
    and delivery make objects by the event (rows, deliveries): at the default threshold the
    collector ran every 700 of them, its fuller passes walking the process's whole heap, a
    large share of a batch (BENCHMARKS.md, "The transform's fast path, columnar routing and
    fewer collections"). It still runs, every
    `BATCH_COLLECTION_THRESHOLD` allocations, which limits what a long batch (a slow
    destination) can pile up. The first of overlapping batches raises the threshold and the
    last to end puts it back; a threshold of 0 (automatic collection off) or one already as
    high is left as it is."""
    with _Batches.lock:
        _Batches.running += 1
        if _Batches.running == 1:
            threshold = gc.get_threshold()
            if 0 < threshold[0] < BATCH_COLLECTION_THRESHOLD:
                gc.set_threshold(BATCH_COLLECTION_THRESHOLD, *threshold[1:])
                _Batches.restore = threshold
    try:
        yield
    finally:
        with _Batches.lock:
            _Batches.running -= 1
            if _Batches.running == 0 and _Batches.restore is not None:
                gc.set_threshold(*_Batches.restore)
                _Batches.restore = None


def deliver_task(
    setup: WorkerSetup,
    stream: str,
    table: str,
    ranges: Sequence[tuple[int, int, int]],
    batch_id: int | None = None,
) -> pa.RecordBatch:
    """Read, map, route and deliver the records of `ranges` ((partition, after, upto) per
    stream partition, whole transactions); store the consumer offsets of the partitions;
    return the task's outcomes. Raises if an event could be neither delivered nor queued
    (the task fails, and Spark runs the batch again)."""
    parts = parts_of(setup)
    report = outcomes.Report()
    batch = _batch_id() if batch_id is None else batch_id
    _deliver(parts, setup, stream, table, ranges, batch, report)
    return report.batch()


# How often a lease looks for new records when it found none (the partitions' ends and the
# lease mark: two indexed queries).
LEASE_POLL_S = 0.02


def lease_task(
    setup: WorkerSetup,
    stream: str,
    table: str,
    lease: Lease,
    batch_id: int | None = None,
) -> pa.RecordBatch:
    """Deliver whatever the stream receives for `lease.seconds`, from where delivery stood
    when the lease was planned (`lease.begin`, or the consumer's offsets when further on),
    then return the outcomes: the steady trickle's task. Every `LEASE_POLL_S` without
    records it reads the partitions' committed ends; records up to them are final (the
    no-skip rule), so each step reads whole transactions, delivers them in commit order,
    and stores the consumer offsets before the next, as `deliver_task` does. It ends when
    its time is up, early when more than `lease.most_records` wait (a backlog goes to a
    batch of a task per stream partition, which uses every core), and at once when the lease
    mark is no longer its run's (`ripple.pipeline.leases`: its pipeline stopped)."""
    parts = parts_of(setup)
    report = outcomes.Report()
    batch = _batch_id() if batch_id is None else batch_id
    reader = ChangeStreamReader(parts.metabase.engine, stream)
    delivered = {int(partition): position for partition, position in lease.begin.items()}
    delivered.update(reader.offsets(DEFAULT_CONSUMER))
    deadline = time.monotonic() + lease.seconds
    while lease_mark(reader) == lease.run > 0 and time.monotonic() < deadline:
        ranges = [
            (partition, delivered.get(partition, 0), end)
            for partition, end in sorted(reader.ends().items())
            if end > delivered.get(partition, 0)
        ]
        if sum(end - after for _, after, end in ranges) > lease.most_records:
            break
        if ranges:
            _deliver(parts, setup, stream, table, ranges, batch, report)
            delivered.update(report.positions)
        else:
            time.sleep(LEASE_POLL_S)
    return report.batch()


def _deliver(
    parts: Parts,
    setup: WorkerSetup,
    stream: str,
    table: str,
    ranges: Sequence[tuple[int, int, int]],
    batch_id: int,
    report: outcomes.Report,
) -> None:
    """`deliver_task`'s work, added to `report`."""
    with parts.lock, fewer_collections():
        mapper = BatchMapper(parts.owners, setup.events, table)
        mapped = [mapper.map(b) for b in read_ranges(parts.metabase.engine, stream, ranges)]
        mapper.finish()
        events = in_commit_order(pa.Table.from_batches(mapped, schema=EVENT_SCHEMA))
        report.events += events.num_rows
        with parts.deliverer.exclusive():  # routes and targets stay as they are until delivered
            if parts.reconfigure is not None:
                parts.reconfigure()
            parts.deliverer.refresh_failing()
            routed = route_table(events, parts.registry, batch_id)
            parts.deliverer.deliver(routed.by_topic)
        report.newest_commit_ns = max(report.newest_commit_ns, routed.newest_commit_ns)
        if routed.newest_commit_ns:
            report.lag_ns = max(0, time.time_ns() - routed.newest_commit_ns)
        positions = {partition: upto for partition, _, upto in ranges}
        if positions:
            reader = ChangeStreamReader(
                parts.metabase.engine, stream, write_engine=parts.metabase.writer
            )
            reader.commit_offsets(DEFAULT_CONSUMER, positions)
            report.positions.update(positions)


def warm_task(setup: WorkerSetup) -> pa.RecordBatch:
    """Build this worker's parts (imports, metabase pool, targets) before any event needs
    them; outcomes with a `worker` row holding its process id."""
    report = outcomes.Report()
    parts_of(setup)
    report.worker = os.getpid()
    return report.batch()


def drain_task(setup: WorkerSetup, budget_s: float) -> pa.RecordBatch:
    """Give the retry queues' due events another attempt for up to `budget_s`; the
    outcomes."""
    parts = parts_of(setup)
    report = outcomes.Report()
    with parts.lock:
        with parts.deliverer.exclusive():
            if parts.reconfigure is not None:
                parts.reconfigure()
        parts.deliverer.drain_for(budget_s)
    return report.batch()
