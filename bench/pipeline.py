"""Benchmark: the eventing pipeline's throughput and latency, end to end.

(a) Throughput. N events (one PUT per transaction by default) are committed up front into a
bucket with eventing; then the pipeline (Spark, in a thread of this process, with a fresh
checkpoint) runs twice over the same records, each run alone with one target:
  - pull: {topic: [SubscriptionTarget]}, until the subscription holds all N events;
  - webhook: {topic: [WebhookTarget]} to a loopback HTTP receiver (an asyncio HTTP/1.1
    keep-alive server in its own process), until it has received all N.
Events per second are reported excluding Spark's start (from the first micro-batch's start,
with Spark's Python workers re-warmed just before) and including it (as if started cold with
the events waiting: the SparkSession's start plus the first database's warm-up run, whose
Python workers start cold, plus the measured run's seconds).
Baselines of the same run: the change-stream reader's raw drain of the records; the
receiver's own ceiling (a pipelining raw client); the webhook target's ceiling without
Spark (`WebhookTarget.publish` of synthetic events); and the pipeline's stages run in this
process without Spark (read_range, transform, sort, route, SubscriptionStore.store).
(b) Latency. With the pipeline running against the receiver, writer processes commit
`--rate` single-object transactions per second for `--latency-seconds`; each event's
latency is the receiver's receipt time minus the time its commit returned to the writer.

On SQLite (a temporary file) and PostgreSQL (a fresh database, dropped at the end). The
last line is one JSON object:
{"sqlite": {"pull_events_per_s": …, "webhook_events_per_s": …, "latency_p50_s": …,
 "latency_p99_s": …, …}, "postgresql": {…}}

    .venv/bin/python bench/pipeline.py [--events 200000] [--rate 200] [--latency-seconds 60]
        [--databases sqlite,postgresql] [--fill puts|bulk] [--buckets 1] [--quick]
        [--profile | --cprofile]
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import json
import multiprocessing as mp
import pstats
import queue
import shutil
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import sqlalchemy as sa
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from common import fresh_postgres_database, progress_bar  # bench/common.py (bench/ is on sys.path)
from receiver import Receiver, receiver_ceiling  # bench/receiver.py (bench/ is on sys.path)
from ripple.changestream.reader import DEFAULT_STREAM, ChangeStreamReader
from ripple.changestream.schema import change_offsets
from ripple.events import EventSettings
from ripple.metabase import (
    BucketLocation,
    DeleteObjectsItem,
    Metabase,
    ObjectLocation,
    Versioning,
    commit_inline_object,
    create_bucket,
    create_project,
    delete_objects,
)
from ripple.metabase.migrate import upgrade
from ripple.notifications.registry import Destination, Registry
from ripple.pipeline import job
from ripple.pipeline.deliver import Deliverer, RetryPolicy
from ripple.pipeline.job import JobSettings
from ripple.pipeline.queue import RetryQueue
from ripple.pipeline.route import delivery, route_table
from ripple.pipeline.source import DEFAULT_CONSUMER, SINGLE_TASK_RECORDS, read_range
from ripple.pipeline.transform import EVENT_SCHEMA, events_of_batches
from ripple.subscriptions.schema import subscription_events
from ripple.subscriptions.store import SubscriptionStore
from ripple.targets.base import OK, Delivery, Result, Target
from ripple.targets.subscription import SubscriptionTarget
from ripple.targets.webhook import WebhookConfig, WebhookTarget

console = Console(stderr=True)
if not console.is_terminal:  # a log file: wide enough for the tables
    console = Console(stderr=True, width=150)
ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
TOPIC = "projects/bench/topics/events"
SUBSCRIPTION = "bench-pull"
REPLAY_TOPIC = "projects/bench/topics/replay"
REPLAY_SUBSCRIPTION = "bench-replay"
ETAG = "d41d8cd98f00b204e9800998ecf8427e"
DATA = b"x" * 64
TARGET_PULL_EVENTS_PER_S = 50_000
TARGET_P99_S = 1.5


def _bar() -> Progress:
    return progress_bar(console)


# --- the loopback HTTP receiver (its own process) ----------------------------------------


def sample_event(n: int) -> dict[str, Any]:
    """An S3 event record shaped like the pipeline's (for the baselines without Spark)."""
    return {
        "eventVersion": "2.1",
        "eventSource": "aws:s3",
        "awsRegion": "",
        "eventTime": "2026-11-21T12:00:00.000Z",
        "eventName": "ObjectCreated:Put",
        "userIdentity": {"principalId": ""},
        "requestParameters": {"sourceIPAddress": ""},
        "responseElements": {"x-amz-request-id": "", "x-amz-id-2": ""},
        "s3": {
            "s3SchemaVersion": "1.0",
            "configurationId": "ObjectEvents",
            "bucket": {
                "name": "bench-events-0",
                "ownerIdentity": {"principalId": str(uuid.UUID(int=n))},
                "arn": "arn:aws:s3:::bench-events-0",
            },
            "object": {
                "key": f"obj-w0-{n:07d}",
                "size": 64,
                "eTag": ETAG,
                "sequencer": f"{n:032X}",
            },
        },
    }


def webhook_ceiling(receiver: Receiver, count: int) -> float:
    """Deliveries per second of `WebhookTarget.publish` alone (one call, as a batch)."""
    deliveries = [delivery(f"ceiling-{n}", sample_event(n), 0) for n in range(count)]
    target = WebhookTarget(WebhookConfig(url=receiver.url))
    target.open()
    try:
        start = time.perf_counter()
        results = target.publish(deliveries)
        elapsed = time.perf_counter() - start
    finally:
        target.close()
    if not all(r.ok for r in results):
        raise RuntimeError("the receiver refused deliveries of the ceiling run")
    receiver.reset()
    return count / elapsed


# --- the metabase ------------------------------------------------------------------------


@dataclass
class World:
    """A fresh metabase with one project, the eventing buckets and the pull subscription."""

    url: str
    writer_url: str  # the writers' URL (PostgreSQL: synchronous_commit off, see --help)
    project_id: uuid.UUID
    buckets: list[str]
    registry: Registry
    db: Metabase
    store: SubscriptionStore


def registry_for(project_id: uuid.UUID, buckets: Sequence[str]) -> Registry:
    registry = Registry()
    for name in buckets:
        registry.set_bucket(project_id, name, [Destination(TOPIC)])
    return registry


@contextmanager
def database(kind: str) -> Iterator[str]:
    """SQLite in a temporary directory, or a fresh PostgreSQL database dropped afterwards."""
    if kind == "sqlite":
        with tempfile.TemporaryDirectory(prefix="ripple-bench-") as tmp:
            yield f"sqlite:///{Path(tmp) / 'metabase.db'}"
        return
    name = f"ripple_bench_pipeline_{uuid.uuid4().hex[:12]}"
    with fresh_postgres_database(ADMIN_URL, name) as url:
        yield url


def make_world(url: str, buckets: int, versioned: bool, sync_commit: bool) -> World:
    db0 = Metabase(url)
    upgrade(db0)
    project = create_project(db0, "bench")
    names = [f"bench-events-{i}" for i in range(buckets)]
    versioning = Versioning.ENABLED if versioned else Versioning.UNVERSIONED
    for name in names:
        create_bucket(db0, BucketLocation(project.id, name), versioning=versioning)
    db0.dispose()
    registry = registry_for(project.id, names)
    db = Metabase(url, eventing=registry.is_eventing)
    store = SubscriptionStore(db)
    store.create(SUBSCRIPTION, TOPIC)
    writer_url = url
    if db.dialect == "postgresql" and not sync_commit:
        writer_url = (
            sa.make_url(url)
            .update_query_dict({"options": "-c synchronous_commit=off"})
            .render_as_string(hide_password=False)
        )
    return World(url, writer_url, project.id, names, registry, db, store)


def _put_writer(
    url: str,
    project: str,
    buckets: list[str],
    writer: int,
    writers: int,
    count: int,
    done: Any,
    errors: Any,
) -> None:
    """Fill: commit `count` objects, one PUT per transaction (global index i*writers+w)."""
    try:
        project_id = uuid.UUID(project)
        db = Metabase(url, eventing=registry_for(project_id, buckets).is_eventing)
        for i in range(count):
            n = i * writers + writer
            loc = ObjectLocation(project_id, buckets[n % len(buckets)], f"obj-{n:07d}")
            commit_inline_object(db, loc, DATA, etag=ETAG)
            if i % 50 == 49:
                with done.get_lock():
                    done.value += 50
        with done.get_lock():
            done.value += count % 50
        db.dispose()
    except BaseException as e:
        errors.put(f"writer {writer}: {type(e).__name__}: {e}")
        raise


def fill_puts(world: World, events: int, writers: int) -> float:
    """Commit `events` objects (one PUT, one event per transaction); returns seconds."""
    ctx = mp.get_context("spawn")
    done = ctx.Value("q", 0)
    errors = ctx.Queue()
    shares = [events // writers + (1 if w < events % writers else 0) for w in range(writers)]
    procs = [
        ctx.Process(
            target=_put_writer,
            args=(
                world.writer_url,
                str(world.project_id),
                world.buckets,
                w,
                writers,
                shares[w],
                done,
                errors,
            ),
        )
        for w in range(writers)
    ]
    start = time.perf_counter()
    with _bar() as progress:
        task = progress.add_task(f"commit {events:,} PUTs ({writers} writers)", total=events)
        for p in procs:
            p.start()
        while any(p.is_alive() for p in procs):
            progress.update(task, completed=done.value)
            time.sleep(0.2)
    elapsed = time.perf_counter() - start
    for p in procs:
        p.join()
    if not errors.empty() or any(p.exitcode != 0 for p in procs):
        raise RuntimeError(f"a fill writer failed: {errors.get() if not errors.empty() else ''}")
    return elapsed


def fill_bulk(world: World, events: int) -> float:
    """Commit `events` delete markers, 1000 per DeleteObjects transaction (versioned
    buckets: each key gets a marker, ObjectRemoved:DeleteMarkerCreated); returns seconds."""
    db = Metabase(world.writer_url, eventing=world.registry.is_eventing)
    start = time.perf_counter()
    with _bar() as progress:
        task = progress.add_task(f"commit {events:,} delete markers (DeleteObjects)", total=events)
        n = 0
        while n < events:
            chunk = min(1000, events - n)
            bucket = world.buckets[(n // 1000) % len(world.buckets)]
            items = [DeleteObjectsItem(f"obj-{n + i:07d}") for i in range(chunk)]
            result = delete_objects(db, BucketLocation(world.project_id, bucket), items, quiet=True)
            if result.errors:
                raise RuntimeError(f"DeleteObjects failed: {result.errors[0]}")
            n += chunk
            progress.update(task, completed=n)
    elapsed = time.perf_counter() - start
    db.dispose()
    return elapsed


def raw_read(world: World, after: dict[int, int]) -> tuple[int, int, float]:
    """The change-stream reader's drain of every record after the warm-up's:
    (records, events, seconds)."""
    reader = ChangeStreamReader(world.db.engine)
    records = events = 0
    start = time.perf_counter()
    for p in range(reader.partitions()):
        for record in reader.drain(p, after=after.get(p, 0), limit=5000):
            records += 1
            events += len(record["mods"])
    return records, events, time.perf_counter() - start


def set_consumer(world: World, positions: dict[int, int]) -> None:
    """Set the pipeline's offsets of the objects' stream in the metabase (where a fresh
    checkpoint starts). The bucket events' stream keeps its own: reset, its bucket-creation
    records would be read again by every run, a Spark job beside the measured one."""
    o = change_offsets.c
    with world.db.engine.begin() as conn:
        conn.execute(
            sa.delete(change_offsets).where(
                o.consumer == DEFAULT_CONSUMER, o.stream_name == DEFAULT_STREAM
            )
        )
    ChangeStreamReader(world.db.engine).commit_offsets(DEFAULT_CONSUMER, positions)


def stream_ends(world: World) -> dict[int, int]:
    reader = ChangeStreamReader(world.db.engine)
    return {p: reader.end(p) for p in range(reader.partitions())}


class NullTarget:
    """Acknowledges everything (the warm-up run's target)."""

    name = "warm-up"

    def __init__(self) -> None:
        self.acked = 0

    def open(self) -> None:
        pass

    def close(self) -> None:
        pass

    def publish(self, deliveries: Sequence[Delivery]) -> list[Result]:
        self.acked += len(deliveries)
        return [OK] * len(deliveries)


def warm_up(world: World, args: argparse.Namespace, count: int = 100) -> float:
    """Commit `count` events and run the pipeline over them, so that Spark's Python workers
    have started and imported what they need before the measured runs; returns the seconds
    from calling `run` until all were delivered (the pipeline's cold start, the JVM up)."""
    for i in range(count):
        loc = ObjectLocation(world.project_id, world.buckets[i % len(world.buckets)], f"w-{i}")
        commit_inline_object(world.db, loc, DATA, etag=ETAG)
    target = NullTarget()
    with pipeline(world, {TOPIC: [target]}, args, count) as running:
        wait_until(running, "warm-up", count, lambda: target.acked, 600)
        done_at = time.time()
    return done_at - running.called_at


def rewarm(
    world: World, args: argparse.Namespace, after: dict[int, int], n: int, records: int
) -> None:
    """Run the pipeline over the last records of the stream just before a measured run.
    Spark stops Python workers that were idle for about a minute (seen here: the same 50k
    batch took 1.3 s after 5 s idle, 2.5 s after 75 s), and the fill takes longer than
    that: without this, the measured run's first batch would include starting its Python
    workers and their imports again. The re-warm batch is just large enough to be read as
    a task per partition (more than SINGLE_TASK_RECORDS records; at most 12,000 events),
    so that it starts a worker on each core, as the measured run's batches do. (The JVM's
    JIT still warms up over the first large batch: that stays in the figure.)"""
    per_record = max(1, n // max(1, records))
    ends = stream_ends(world)
    window = max(1, min(SINGLE_TASK_RECORDS // len(ends) + 1, 12_000 // per_record))
    start = {p: max(after.get(p, 0), end - window) for p, end in ends.items()}
    expect = sum(end - start[p] for p, end in ends.items())
    set_consumer(world, start)
    target = NullTarget()
    with pipeline(world, {TOPIC: [target]}, args, expect) as running:
        wait_until(
            running, "re-warm Python workers", expect * per_record, lambda: target.acked, 600
        )


def subscription_count(world: World, name: str) -> int:
    e = subscription_events.c
    with world.db.engine.connect() as conn:
        query = sa.select(sa.func.count()).where(e.subscription == name)
        return int(conn.execute(query).scalar_one())


# --- the pipeline ------------------------------------------------------------------------


class TimedTarget:
    """A target's proxy: counts acknowledged deliveries, times `publish`, and notes the wall
    time at which `goal` deliveries had been acknowledged."""

    def __init__(self, inner: Target, goal: int = 0) -> None:
        self.inner = inner
        self.name = inner.name
        self.goal = goal
        self.acked = 0
        self.calls = 0
        self.publish_s = 0.0
        self.done_at: float | None = None
        self._lock = threading.Lock()

    def open(self) -> None:
        self.inner.open()

    def close(self) -> None:
        self.inner.close()

    def publish(self, deliveries: Sequence[Delivery]) -> list[Result]:
        start = time.perf_counter()
        results = self.inner.publish(deliveries)
        elapsed = time.perf_counter() - start
        ok = sum(1 for r in results if r.ok)
        with self._lock:
            self.calls += 1
            self.publish_s += elapsed
            self.acked += ok
            if self.goal and self.done_at is None and self.acked >= self.goal:
                self.done_at = time.time()
        return results


@dataclass
class Run:
    """One pipeline run: when it was started, its query, its progress, its errors."""

    called_at: float = 0.0  # wall time of the call to `run`
    started_at: float | None = None  # the query started (on_started)
    query: Any = None
    progress: list[Any] = field(default_factory=list)
    errors: list[BaseException] = field(default_factory=list)
    thread: threading.Thread | None = None
    expect_rows: int = 0  # the input rows whose progress to wait for before stopping

    def alive(self) -> bool:
        return self.thread is not None and self.thread.is_alive()

    def first_batch_at(self) -> float | None:
        """Wall time at which the first micro-batch with data started."""
        for p in self.progress:
            if p.numInputRows:
                return datetime.fromisoformat(p.timestamp).timestamp()
        return None


@contextmanager
def pipeline(
    world: World, targets: dict[str, list[Any]], args: argparse.Namespace, expect_rows: int = 0
) -> Iterator[Run]:
    """The pipeline (`ripple.pipeline.job.run`) in a thread until the block ends."""
    checkpoint = Path(tempfile.mkdtemp(prefix="ripple-bench-checkpoint-", dir=args.checkpoint_root))
    deliverer = Deliverer(targets, RetryQueue(world.db.engine), default_policy=RetryPolicy())
    settings = JobSettings(
        world.url,
        checkpoint,
        master=args.master,
        max_records_per_batch=args.max_records,
        spark_conf=spark_conf(),
    )
    stop = threading.Event()
    running = Run(expect_rows=expect_rows)

    def started(query: Any) -> None:
        running.query = query
        running.started_at = time.time()

    def body() -> None:
        try:
            job.run(settings, world.registry, deliverer, stop, on_started=started)
        except BaseException as e:
            running.errors.append(e)

    running.called_at = time.time()
    running.thread = threading.Thread(target=body, name="pipeline")
    running.thread.start()
    try:
        yield running
    finally:
        if running.query is not None:
            with contextlib.suppress(Exception):
                running.progress = running.query.recentProgress
                # a batch's progress is reported after its handler returned
                deadline = time.monotonic() + 30
                while (
                    sum(p.numInputRows for p in running.progress) < running.expect_rows
                    and time.monotonic() < deadline
                    and running.alive()
                ):
                    time.sleep(0.05)
                    running.progress = running.query.recentProgress
        stop.set()
        running.thread.join(300)
        shutil.rmtree(checkpoint, ignore_errors=True)
        if running.thread.is_alive():
            raise RuntimeError("the pipeline did not stop")
        if running.errors:
            raise RuntimeError(f"the pipeline failed: {running.errors[0]}") from running.errors[0]


def spark_conf() -> dict[str, str]:
    return {
        "spark.sql.streaming.numRecentProgressUpdates": "2000",
        "spark.ui.showConsoleProgress": "false",
    }


def wait_until(
    running: Run,
    what: str,
    total: int,
    count: Callable[[], int],
    timeout_s: float,
    interval_s: float = 0.05,
) -> None:
    deadline = time.monotonic() + timeout_s
    with _bar() as progress:
        task = progress.add_task(what, total=total)
        while True:
            n = count()
            progress.update(task, completed=n)
            if n >= total:
                return
            if not running.alive():
                raise RuntimeError(f"the pipeline stopped: {running.errors[:1]}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"timed out after {timeout_s:.0f} s: {what} ({n}/{total})")
            time.sleep(interval_s)


def spark_durations(progress: Sequence[Any]) -> dict[str, Any]:
    """Totals over the micro-batches with data: Spark's own phases (ms → s)."""
    batches = [p for p in progress if p.numInputRows]
    totals: dict[str, float] = defaultdict(float)
    for p in batches:
        for k, v in (p.durationMs or {}).items():
            totals[k] += v / 1000
    return {
        "batches": len(batches),
        "input_rows": sum(p.numInputRows for p in batches),
        **{k: round(v, 3) for k, v in sorted(totals.items())},
    }


@dataclass
class Throughput:
    events_per_s: float  # from the first batch's start
    # as if started cold with the events waiting: the SparkSession's start, then the
    # warm-up run's (run() until its first events were delivered), then `seconds`
    events_per_s_incl_startup: float
    seconds: float
    first_batch_s: float  # from calling `run` to the first batch's start
    spark: dict[str, Any]
    publish_s: float
    publish_calls: int
    handler: dict[str, float]


def throughput_pull(
    world: World,
    n: int,
    records: int,
    args: argparse.Namespace,
    startup_s: float,
    after: dict[int, int],
    profiler: Profiler,
) -> Throughput:
    rewarm(world, args, after, n, records)
    set_consumer(world, after)
    target = TimedTarget(SubscriptionTarget(world.store, TOPIC), goal=n)
    profiler.reset()
    with pipeline(world, {TOPIC: [target]}, args, records) as running:
        wait_until(
            running, "pull: events stored", n, lambda: target.acked, timeout_s=max(600, n / 200)
        )
    stored = subscription_count(world, SUBSCRIPTION)
    if stored != n:
        raise RuntimeError(f"the subscription holds {stored} events, not {n}")
    assert target.done_at is not None
    return _throughput(
        running, n, target.done_at, startup_s, target.publish_s, target.calls, profiler
    )


def throughput_webhook(
    world: World,
    n: int,
    records: int,
    args: argparse.Namespace,
    startup_s: float,
    after: dict[int, int],
    receiver: Receiver,
    profiler: Profiler,
) -> Throughput:
    rewarm(world, args, after, n, records)
    set_consumer(world, after)
    receiver.reset()
    target = TimedTarget(WebhookTarget(WebhookConfig(url=receiver.url)))
    profiler.reset()
    with pipeline(world, {TOPIC: [target]}, args, records) as running:
        wait_until(
            running,
            "webhook: events received",
            n,
            lambda: receiver.stats()["unique"],
            timeout_s=max(600, n / 100),
            interval_s=0.1,
        )
    done_at = receiver.stats()["last_ns"] / 1e9
    receiver.reset()
    return _throughput(running, n, done_at, startup_s, target.publish_s, target.calls, profiler)


def _throughput(
    running: Run,
    n: int,
    done_at: float,
    startup_s: float,
    publish_s: float,
    calls: int,
    profiler: Profiler,
) -> Throughput:
    first = running.first_batch_at()
    if first is None:
        raise RuntimeError("no micro-batch with data in the query's progress")
    seconds = done_at - first
    return Throughput(
        events_per_s=n / seconds,
        events_per_s_incl_startup=n / (startup_s + seconds),
        seconds=seconds,
        first_batch_s=first - running.called_at,
        spark=spark_durations(running.progress),
        publish_s=publish_s,
        publish_calls=calls,
        handler=profiler.totals(),
    )


# --- the stages without Spark ------------------------------------------------------------


def replay(
    world: World,
    max_records: int,
    after: dict[int, int],
    profiles: dict[str, cProfile.Profile] | None = None,
) -> dict[str, float]:
    """The pipeline's stages in this process, without Spark, over the same records and in
    batches of the same size: seconds per stage (the store goes to a scratch subscription,
    deleted afterwards). With `profiles`, each stage runs under its own cProfile."""
    reader = ChangeStreamReader(world.db.engine)
    transform = events_of_batches(world.url, EventSettings())
    world.store.create(REPLAY_SUBSCRIPTION, REPLAY_TOPIC)
    totals: dict[str, float] = defaultdict(float)
    events = 0

    def stage(name: str, fn: Callable[[], Any]) -> Any:
        profile = profiles.setdefault(name, cProfile.Profile()) if profiles is not None else None
        start = time.perf_counter()
        if profile is not None:
            profile.enable()
        try:
            return fn()
        finally:
            if profile is not None:
                profile.disable()
            totals[name] += time.perf_counter() - start

    try:
        for p in range(reader.partitions()):
            end = reader.end(p)
            start = after.get(p, 0)
            while start < end:
                stop = min(end, start + max_records)
                batches = stage(
                    "read_range",
                    lambda p=p, start=start, stop=stop: list(
                        read_range(world.url, DEFAULT_STREAM, p, start, stop)
                    ),
                )
                out = stage("transform", lambda b=batches: list(transform(iter(b))))
                table = stage(
                    "sort",
                    lambda o=out: job.in_commit_order(
                        pa.Table.from_batches(o, schema=EVENT_SCHEMA)
                    ),
                )
                routed = stage("route", lambda t=table: route_table(t, world.registry, 0))
                stage(
                    "store",
                    lambda r=routed: world.store.store(REPLAY_TOPIC, r.by_topic.get(TOPIC, [])),
                )
                events += table.num_rows
                start = stop
    finally:
        world.store.delete(REPLAY_SUBSCRIPTION)
    totals["events"] = events
    return dict(totals)


def print_stage_profiles(kind: str, profiles: dict[str, cProfile.Profile], lines: int) -> None:
    for name in ("transform", "route", "store"):
        if name in profiles:
            text = io.StringIO()
            pstats.Stats(profiles[name], stream=text).sort_stats("tottime").print_stats(lines)
            console.print(f"{kind}: cProfile of stage {name} (no Spark, in process):")
            console.print(text.getvalue())


# --- latency -----------------------------------------------------------------------------


def _paced_writer(
    url: str,
    project: str,
    buckets: list[str],
    writer: int,
    writers: int,
    rate: float,
    seconds: float,
    go: Any,
    start_at: Any,
    done: Any,
    out: Any,
) -> None:
    """Commit one object per transaction on a schedule: global event j (j % writers ==
    writer) at start + j / rate. Reports (key, wall ns when its commit returned)."""
    project_id = uuid.UUID(project)
    db = Metabase(url, eventing=registry_for(project_id, buckets).is_eventing)
    commits: list[tuple[str, int]] = []
    behind = 0.0
    try:
        out.put(("ready", writer))
        go.wait()
        start = start_at.value
        total = int(rate * seconds)
        for j in range(writer, total, writers):
            due = start + j / rate
            wait = due - time.time()
            if wait > 0:
                time.sleep(wait)
            else:
                behind = max(behind, -wait)
            key = f"lat-{j:07d}"
            commit_inline_object(
                db, ObjectLocation(project_id, buckets[j % len(buckets)], key), DATA, etag=ETAG
            )
            commits.append((key, time.time_ns()))
            with done.get_lock():
                done.value += 1
        out.put(("done", (commits, behind)))
    except BaseException as e:
        out.put(("error", f"{type(e).__name__}: {e}"))
        raise
    finally:
        db.dispose()


@dataclass
class Latency:
    p50: float
    p90: float
    p99: float
    max: float
    mean: float
    events: int
    missing: int
    rate_achieved: float
    max_behind_s: float
    spark: dict[str, Any]
    handler: dict[str, float]


def latency(
    world: World, args: argparse.Namespace, receiver: Receiver, profiler: Profiler
) -> Latency:
    ctx = mp.get_context("spawn")
    go, start_at, done, out = ctx.Event(), ctx.Value("d", 0.0), ctx.Value("q", 0), ctx.Queue()
    writers = args.latency_writers
    total = int(args.rate * args.latency_seconds)
    procs = [
        ctx.Process(
            target=_paced_writer,
            args=(
                world.writer_url,
                str(world.project_id),
                world.buckets,
                w,
                writers,
                args.rate,
                args.latency_seconds,
                go,
                start_at,
                done,
                out,
            ),
        )
        for w in range(writers)
    ]
    for p in procs:
        p.start()
    for _ in procs:
        kind, value = out.get(timeout=120)
        if kind != "ready":
            raise RuntimeError(f"a latency writer failed: {value}")
    target = TimedTarget(WebhookTarget(WebhookConfig(url=receiver.url)))
    receiver.reset()
    with pipeline(world, {TOPIC: [target]}, args) as running:
        # warm up: the query is running and Spark's Python workers have served a batch
        warm = 20
        for i in range(warm):
            loc = ObjectLocation(world.project_id, world.buckets[i % len(world.buckets)], f"w{i}")
            commit_inline_object(world.db, loc, DATA, etag=ETAG)
        wait_until(running, "latency: warm-up", warm, lambda: receiver.stats()["unique"], 300)
        receiver.reset()
        profiler.reset()
        progress_from = len(running.query.recentProgress)
        start_at.value = time.time() + 0.5
        go.set()
        commits: dict[str, int] = {}
        behind = 0.0
        with _bar() as progress:
            task = progress.add_task(
                f"latency: {args.rate:g} commits/s for {args.latency_seconds:g} s", total=total
            )
            finished = 0
            while finished < writers:
                progress.update(task, completed=done.value)
                try:
                    kind, value = out.get(timeout=0.2)
                except queue.Empty:
                    continue
                if kind == "error":
                    raise RuntimeError(f"a latency writer failed: {value}")
                finished += 1
                commits.update(value[0])
                behind = max(behind, value[1])
        end_commit = max(commits.values()) / 1e9
        rate_achieved = len(commits) / (end_commit - start_at.value)
        keys = set(commits)
        with contextlib.suppress(RuntimeError):  # missing events are reported, not fatal

            def received() -> int:
                return receiver.stats()["unique"]

            wait_until(running, "latency: last events received", len(keys), received, 60, 0.1)
        dump = receiver.dump()
        handler = profiler.totals()
        running_progress = running.query.recentProgress[progress_from:]
    for p in procs:
        p.join(30)
    got = {k: ns for k, ns in zip(dump["keys"], dump["ns"], strict=True) if k in keys}
    lat = sorted((got[k] - commits[k]) / 1e9 for k in got)
    if not lat:
        raise RuntimeError("the receiver got none of the latency events")
    receiver.reset()
    return Latency(
        p50=_pct(lat, 50),
        p90=_pct(lat, 90),
        p99=_pct(lat, 99),
        max=lat[-1],
        mean=statistics.fmean(lat),
        events=len(lat),
        missing=len(keys) - len(got),
        rate_achieved=rate_achieved,
        max_behind_s=behind,
        spark=spark_durations(running_progress),
        handler=handler,
    )


def _pct(values: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile of sorted values."""
    rank = max(1, min(len(values), round(pct / 100 * len(values) + 0.5)))
    return values[rank - 1]


# --- --profile: the driver side of each micro-batch --------------------------------------


class Profiler:
    """With --profile: times the foreachBatch handler's parts (toArrow: the Spark job that
    reads and transforms; route; deliver; commit_offsets; the rest is the sort and
    bookkeeping). With --cprofile also runs cProfile in the handler's thread (which slows
    the handler: read its times from a run without it). Off: does nothing."""

    def __init__(self, enabled: bool, cprofile: bool = False) -> None:
        self.enabled = enabled or cprofile
        self.cprofile = cprofile
        self.times: dict[str, float] = defaultdict(float)
        self.profile = cProfile.Profile() if cprofile else None
        if self.enabled:
            self._install()

    def reset(self) -> None:
        self.times = defaultdict(float)
        if self.cprofile:
            self.profile = cProfile.Profile()

    def totals(self) -> dict[str, float]:
        return {k: round(v, 3) for k, v in self.times.items()}

    def _timed(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*a: Any, **kw: Any) -> Any:
            start = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                self.times[name] += time.perf_counter() - start

        return wrapper

    def _install(self) -> None:
        from pyspark.sql.classic.dataframe import DataFrame  # foreachBatch's, in Spark 4

        DataFrame.toArrow = self._timed("toArrow", DataFrame.toArrow)  # type: ignore[method-assign]
        job.route_table = self._timed("route", job.route_table)  # type: ignore[attr-defined]
        original = job.batch_handler

        wrapped: set[int] = set()  # the job makes a handler per query, with one deliverer

        def batch_handler(
            registry: Any, deliverer: Any, delivered: Any = None, *more: Any, **named: Any
        ) -> Any:
            if id(deliverer) not in wrapped:
                wrapped.add(id(deliverer))
                deliverer.deliver = self._timed("deliver", deliverer.deliver)
            if delivered is not None:
                delivered = self._timed("commit_offsets", delivered)
            handle = original(registry, deliverer, delivered, *more, **named)

            def profiled(events: Any, batch_id: int) -> None:
                start = time.perf_counter()
                profile = self.profile
                if profile is not None:
                    profile.enable()
                try:
                    handle(events, batch_id)
                finally:
                    if profile is not None:
                        profile.disable()
                    self.times["handler"] += time.perf_counter() - start
                    self.times["handler_calls"] += 1

            return profiled

        job.batch_handler = batch_handler  # type: ignore[assignment]

    def top(self, lines: int = 25) -> str:
        if self.profile is None:
            return ""
        text = io.StringIO()
        stats = pstats.Stats(self.profile, stream=text)
        stats.sort_stats("tottime").print_stats(lines)
        return text.getvalue()


# --- the benchmark -----------------------------------------------------------------------


def bench(
    kind: str,
    args: argparse.Namespace,
    receiver: Receiver,
    session_start_s: float,
    baselines: dict[str, float],
    profiler: Profiler,
    cold: dict[str, float],
) -> dict[str, Any]:
    n = args.events
    with database(kind) as url:
        writers = args.writers or (1 if kind == "sqlite" else 2)
        world = make_world(url, args.buckets, args.fill == "bulk", args.pg_sync_commit)
        try:
            console.rule(f"{kind}")
            warm_s = warm_up(world, args)
            # Spark's Python workers outlive a query: only the first database's warm-up
            # starts them cold, and its time stands for the cold start of every database.
            cold_s = cold.setdefault("s", warm_s)
            startup_s = session_start_s + cold_s
            console.print(
                f"{kind}: warm-up: run() until 100 events were delivered took {warm_s:.1f} s "
                f"({'cold Python workers' if cold_s == warm_s else 'Python workers already up'}"
                f"); 'including start' counts {session_start_s:.1f} s SparkSession start + "
                f"{cold_s:.1f} s cold pipeline start"
            )
            after = stream_ends(world)
            bulk = args.fill == "bulk"
            commit_s = fill_bulk(world, n) if bulk else fill_puts(world, n, writers)
            console.print(
                f"{kind}: committed {n:,} events in {commit_s:.1f} s ({n / commit_s:,.0f}/s, "
                f"fill {args.fill}" + (f", {writers} writers)" if args.fill == "puts" else ")")
            )
            records, read_events, read_s = raw_read(world, after)
            if read_events != n:
                raise RuntimeError(f"the change stream holds {read_events} events, not {n}")
            raw_rate = read_events / read_s
            console.print(
                f"{kind}: raw read (ChangeStreamReader.drain): {records:,} records, "
                f"{read_events:,} events in {read_s:.2f} s = {raw_rate:,.0f} events/s"
            )
            pull = throughput_pull(world, n, records, args, startup_s, after, profiler)
            _print_throughput(kind, "pull", pull, raw_rate, profiler)
            hook = throughput_webhook(world, n, records, args, startup_s, after, receiver, profiler)
            _print_throughput(kind, "webhook", hook, raw_rate, profiler)
            stages = replay(world, args.max_records, after)
            _print_replay(kind, stages)
            if args.cprofile:
                profiles: dict[str, cProfile.Profile] = {}
                replay(world, args.max_records, after, profiles)
                print_stage_profiles(kind, profiles, 20)
            lat = latency(world, args, receiver, profiler)
            _print_latency(kind, lat, profiler)
        finally:
            world.db.dispose()
    return {
        "pull_events_per_s": round(pull.events_per_s, 1),
        "webhook_events_per_s": round(hook.events_per_s, 1),
        "latency_p50_s": round(lat.p50, 4),
        "latency_p99_s": round(lat.p99, 4),
        "latency_p90_s": round(lat.p90, 4),
        "latency_max_s": round(lat.max, 4),
        "pull_events_per_s_incl_startup": round(pull.events_per_s_incl_startup, 1),
        "webhook_events_per_s_incl_startup": round(hook.events_per_s_incl_startup, 1),
        "events": n,
        "fill": args.fill,
        "commit_s": round(commit_s, 1),
        "raw_read_events_per_s": round(raw_rate, 1),
        "pull_vs_raw_read": round(pull.events_per_s / raw_rate, 3),
        "webhook_vs_target_ceiling": round(hook.events_per_s / baselines["webhook_target"], 3),
        "receiver_ceiling_per_s": round(baselines["receiver"], 1),
        "webhook_target_ceiling_per_s": round(baselines["webhook_target"], 1),
        "no_spark_events_per_s": round(stages["events"] / _stage_sum(stages), 1),
        "no_spark_stages_s": {k: round(v, 3) for k, v in stages.items() if k != "events"},
        "pull_spark_s": pull.spark,
        "webhook_spark_s": hook.spark,
        "latency_events": lat.events,
        "latency_missing": lat.missing,
        "latency_rate_achieved": round(lat.rate_achieved, 1),
        "spark_session_start_s": round(session_start_s, 2),
        "pipeline_cold_start_s": round(cold_s, 2),
        "warm_up_s": round(warm_s, 2),
        "commits_per_s": round(n / commit_s, 1),
        "targets_met": {
            "pull_events_per_s": pull.events_per_s >= TARGET_PULL_EVENTS_PER_S,
            "latency_p99_s": lat.p99 <= TARGET_P99_S,
        },
    }


def _stage_sum(stages: dict[str, float]) -> float:
    return sum(v for k, v in stages.items() if k != "events")


def _print_throughput(
    kind: str, what: str, t: Throughput, raw_rate: float, profiler: Profiler
) -> None:
    console.print(
        f"{kind}: {what}: {t.events_per_s:,.0f} events/s from the first batch's start "
        f"({t.seconds:.2f} s; first batch started {t.first_batch_s:.2f} s after run()); "
        f"{t.events_per_s_incl_startup:,.0f} events/s including Spark's start; "
        f"{t.events_per_s / raw_rate:.2f}x the raw read"
    )
    console.print(
        f"{kind}: {what}: Spark (s, batches with data): {t.spark}; target publish "
        f"{t.publish_s:.2f} s in {t.publish_calls} calls"
    )
    if profiler.enabled:
        console.print(f"{kind}: {what}: driver handler (s): {t.handler}")
    if profiler.cprofile:
        console.print(profiler.top())


def _print_replay(kind: str, stages: dict[str, float]) -> None:
    total = _stage_sum(stages)
    parts = ", ".join(
        f"{k} {v:.2f} s ({stages['events'] / v:,.0f}/s)"
        for k, v in stages.items()
        if k != "events" and v > 0
    )
    console.print(
        f"{kind}: stages without Spark, {stages['events']:,.0f} events: {parts}; "
        f"together {stages['events'] / total:,.0f} events/s"
    )


def _print_latency(kind: str, lat: Latency, profiler: Profiler) -> None:
    console.print(
        f"{kind}: latency commit→receipt over {lat.events:,} events ({lat.missing} missing; "
        f"{lat.rate_achieved:.1f} commits/s achieved, writers at most {lat.max_behind_s:.2f} s "
        f"behind schedule): p50 {lat.p50:.3f} s, p90 {lat.p90:.3f} s, p99 {lat.p99:.3f} s, "
        f"max {lat.max:.3f} s, mean {lat.mean:.3f} s"
    )
    batches = max(1, lat.spark.get("batches", 0))
    per_batch = {
        k: round(v / batches, 4) for k, v in lat.spark.items() if k not in ("batches", "input_rows")
    }
    console.print(
        f"{kind}: latency: {lat.spark.get('batches', 0)} batches with data, "
        f"{lat.spark.get('input_rows', 0) / batches:.1f} records each; Spark per batch (s): "
        f"{per_batch}"
    )
    if profiler.enabled:
        console.print(f"{kind}: latency: driver handler (s): {lat.handler}")


def summary(results: dict[str, dict[str, Any]], baselines: dict[str, float]) -> Table:
    table = Table(title="eventing pipeline (indicative: shared 2-core machine)")
    for column in (
        "database",
        "pull ev/s",
        "(incl. start)",
        "webhook ev/s",
        "(incl. start)",
        "raw read ev/s",
        "no-Spark ev/s",
        "p50 s",
        "p90 s",
        "p99 s",
        "targets",
    ):
        table.add_column(column, justify="right")
    for kind, r in results.items():
        met = r["targets_met"]
        table.add_row(
            kind,
            f"{r['pull_events_per_s']:,.0f}",
            f"{r['pull_events_per_s_incl_startup']:,.0f}",
            f"{r['webhook_events_per_s']:,.0f}",
            f"{r['webhook_events_per_s_incl_startup']:,.0f}",
            f"{r['raw_read_events_per_s']:,.0f}",
            f"{r['no_spark_events_per_s']:,.0f}",
            f"{r['latency_p50_s']:.3f}",
            f"{r['latency_p90_s']:.3f}",
            f"{r['latency_p99_s']:.3f}",
            ("pull ✓" if met["pull_events_per_s"] else "pull ✗")
            + (" p99 ✓" if met["latency_p99_s"] else " p99 ✗"),
        )
    table.caption = (
        f"receiver ceiling {baselines['receiver']:,.0f} req/s; webhook target alone "
        f"{baselines['webhook_target']:,.0f} deliveries/s; targets: pull ≥ "
        f"{TARGET_PULL_EVENTS_PER_S:,} events/s, p99 ≤ {TARGET_P99_S} s"
    )
    return table


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=(
            "Phases per database: commit the events (not measured), raw read, pipeline to "
            "a pull subscription, pipeline to the webhook receiver, the stages without "
            "Spark, latency. The pull and webhook runs are separate (one target each, the "
            "consumer offsets reset in between), so neither waits for the other. The "
            "benchmark's writers (fill and latency) on PostgreSQL commit with "
            "synchronous_commit=off unless --pg-sync-commit: it lets them keep up on a "
            "busy machine, and a commit is visible to the pipeline when it returns either "
            "way. Traffic goes to 127.0.0.1 only. Figures on a shared machine are "
            "indicative."
        ),
    )
    parser.add_argument("--events", type=int, default=200_000, help="events committed up front")
    parser.add_argument("--rate", type=float, default=200, help="latency: commits per second")
    parser.add_argument(
        "--latency-seconds", type=float, default=60, help="latency: how long to commit"
    )
    parser.add_argument("--databases", default="sqlite,postgresql", help="sqlite,postgresql")
    parser.add_argument(
        "--fill",
        choices=("puts", "bulk"),
        default="puts",
        help="how the events are committed: puts = one PUT (commit_inline_object) per "
        "transaction, one change record per event (default, like real traffic); bulk = "
        "DeleteObjects of 1000 keys in versioned buckets, 1000 events per change record "
        "(fast to commit, but few records for the pipeline)",
    )
    parser.add_argument(
        "--writers", type=int, default=0, help="fill writer processes (0: SQLite 1, PG 2)"
    )
    parser.add_argument(
        "--latency-writers", type=int, default=4, help="latency: writer processes sharing --rate"
    )
    parser.add_argument("--buckets", type=int, default=1, help="eventing buckets (default 1)")
    parser.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    parser.add_argument(
        "--max-records", type=int, default=50_000, help="maxRecordsPerBatch (default 50000)"
    )
    parser.add_argument(
        "--checkpoint-root",
        default=None,
        help="where the fresh checkpoint directories go (default: the system's temp dir)",
    )
    parser.add_argument(
        "--pg-sync-commit",
        action="store_true",
        help="PostgreSQL writers keep synchronous_commit on",
    )
    parser.add_argument(
        "--quick", action="store_true", help="smoke test: 3000 events, 8 s of latency"
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="time the parts of the driver's foreachBatch handler (toArrow, route, "
        "deliver, commit_offsets)",
    )
    parser.add_argument(
        "--cprofile",
        action="store_true",
        help="--profile, plus cProfile of the handler and of the stages without Spark "
        "(slows what it profiles)",
    )
    args = parser.parse_args()
    if args.quick:
        args.events = min(args.events, 3000)
        args.latency_seconds = min(args.latency_seconds, 8)
    return args


def main() -> int:
    args = parse_args()
    profiler = Profiler(args.profile, args.cprofile)
    receiver = Receiver()
    try:
        body = orjson.dumps({"Records": [sample_event(0)]})
        baselines = {
            "receiver": receiver_ceiling(receiver, body, 1.0 if args.quick else 3.0),
            "webhook_target": webhook_ceiling(receiver, 2000 if args.quick else 20_000),
        }
        console.print(
            f"receiver ceiling (raw pipelining client, 4 connections): "
            f"{baselines['receiver']:,.0f} requests/s; WebhookTarget.publish alone (16 in "
            f"flight, no Spark): {baselines['webhook_target']:,.0f} deliveries/s"
        )
        start = time.perf_counter()
        spark = job.spark_session(args.master, spark_conf())
        session_start_s = time.perf_counter() - start
        console.print(f"SparkSession ({args.master}) started in {session_start_s:.1f} s")
        console.print(
            f"throughput: {args.events:,} events ({args.fill}), two separate pipeline runs over "
            "the same records, each with a fresh checkpoint: the pull subscription alone, then "
            "the webhook alone; events/s from the first micro-batch's start (excluding "
            "Spark's start) and including it. Latency: the webhook alone, "
            f"{args.rate:g} commits/s for {args.latency_seconds:g} s."
        )
        results: dict[str, Any] = {}
        cold: dict[str, float] = {}
        try:
            for kind in args.databases.split(","):
                results[kind] = bench(
                    kind, args, receiver, session_start_s, baselines, profiler, cold
                )
        finally:
            spark.stop()
    finally:
        receiver.close()
    console.print(summary(results, baselines))
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
