"""The eventing job: change stream → S3 events → destinations, as a Spark Structured
Streaming query.

    source (ripple-changestream, a task per stream partition, or one for a small batch)
      → mapInArrow(events_of_batches)      change records → event records
      → foreachBatch(handle)               route to destinations, deliver or queue

Spark commits a batch's offsets (checkpoint) only after `handle` returns, and `handle`
returns only when every event is acknowledged or in its destination's retry queue: at least
once. While the query runs, the driver's main loop drains the retry queues.

A second query does the same for the `project_eventing` stream (the buckets table: bucket
events), with its own checkpoint (`<checkpoint>/project-events`, inside the first's, so
removing the checkpoint resets both); the two share the deliverer, whose lock keeps their
batches apart.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from py4j.protocol import Py4JError  # type: ignore[import-untyped]
from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from ripple.changestream.reader import DEFAULT_STREAM, PROJECT_STREAM, ChangeStreamReader
from ripple.events import EventSettings
from ripple.notifications.registry import Registry
from ripple.pipeline import metrics
from ripple.pipeline.deliver import Deliverer
from ripple.pipeline.route import route_table
from ripple.pipeline.source import DEFAULT_CONSUMER, NAME, ChangeStreamSource, engine_for
from ripple.pipeline.transform import SPARK_EVENT_SCHEMA, events_of_batches

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class JobSettings:
    database_url: str
    checkpoint_dir: Path
    master: str = "local[*]"
    events: EventSettings = field(default_factory=EventSettings)
    max_records_per_batch: int = 50_000
    trigger_interval: str = "0 seconds"  # as soon as the previous batch is done
    # bucket events are rare: their query looks for new ones once a second
    bucket_trigger_interval: str = "1 second"
    drain_interval_s: float = 0.5
    spark_conf: dict[str, str] = field(default_factory=dict)


def spark_session(master: str, conf: dict[str, str] | None = None) -> SparkSession:
    """A Spark session tuned for small, frequent micro-batches on few cores."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # loopback only, and no warning
    builder = (
        SparkSession.builder.master(master)
        .appName("ripple-pipeline")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.sql.streaming.noDataMicroBatches.enabled", "false")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.python.worker.reuse", "true")
        .config("spark.sql.streaming.minBatchesToRetain", "20")
    )
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    spark.dataSource.register(ChangeStreamSource)
    return spark


BatchHandler = Callable[[DataFrame, int], None]


def in_commit_order(events: pa.Table) -> pa.Table:
    """A batch's events in commit order across partitions: a key's events are in one
    partition unless a DeleteObjects or a rename of several keys recorded one of them in its
    least key's. (A stable sort: a transaction's events keep their order.)"""
    return events.take(pc.sort_indices(events, [("commit_ns", "ascending")]))


# While a batch is handled, the collector's first generation is collected every this many
# allocations (net of those freed) instead of Python's default 700.
BATCH_COLLECTION_THRESHOLD = 100_000


class _Batches:
    """The batches being handled (the two queries' handlers run in their own threads and
    may overlap), and the collector threshold to put back when the last one ends."""

    lock = threading.Lock()
    running = 0
    restore: tuple[int, ...] | None = None


@contextlib.contextmanager
def fewer_collections() -> Iterator[None]:
    """Python's cyclic garbage collector runs less often while batches are handled. The
    handler makes objects by the event (rows, deliveries): at the default threshold the
    collector ran every 700 of them, its fuller passes walking the driver's whole heap
    (Spark's, py4j's, SQLAlchemy's objects), a fifth of a 50,000-event batch (BENCHMARKS.md).
    It still runs, every `BATCH_COLLECTION_THRESHOLD` allocations, which limits what a long
    batch (a slow destination) can pile up. The first of overlapping batches raises the
    threshold and the last to end puts it back; a threshold of 0 (automatic collection off)
    or one already as high is left as it is."""
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


def batch_handler(
    registry: Registry,
    deliverer: Deliverer,
    delivered: Callable[[dict[int, int]], None] | None = None,
    reconfigure: Callable[[], object] | None = None,
    stream: str = DEFAULT_STREAM,
) -> BatchHandler:
    """foreachBatch of the query over `stream` (its log lines name it): apply a changed
    eventing configuration (`reconfigure`), route the batch's events and deliver them (or
    queue them); then tell `delivered` the last position handled per partition. (Spark
    tells the source only when it plans the next batch, so without this a pipeline that lost
    its checkpoint would deliver its last batch again.)"""

    def handle(events: DataFrame, batch_id: int) -> None:
        with fewer_collections():
            handle_batch(events, batch_id)

    def handle_batch(events: DataFrame, batch_id: int) -> None:
        started = time.monotonic()
        table = in_commit_order(events.toArrow())
        with deliverer.exclusive():  # routes and targets stay as they are until delivered
            if reconfigure is not None:
                reconfigure()
            routed = route_table(table, registry, batch_id)
            deliverer.deliver(routed.by_topic)
        if delivered is not None and table.num_rows:
            ends = table.group_by("partition").aggregate([("position", "max")])
            delivered(
                dict(
                    zip(
                        ends.column("partition").to_pylist(),
                        ends.column("position_max").to_pylist(),
                        strict=True,
                    )
                )
            )
        if routed.newest_commit_ns:
            metrics.PIPELINE_LAG.set(max(0.0, time.time() - routed.newest_commit_ns / 1e9))
        metrics.BATCH_DURATION.observe(time.monotonic() - started)
        log.info(
            "%s batch %d: %d events, %d deliveries, %d unrouted in %.3f s",
            stream,
            batch_id,
            table.num_rows,
            sum(len(v) for v in routed.by_topic.values()),
            routed.unrouted,
            time.monotonic() - started,
        )

    return handle


# the streams the job reads: (stream, the table it is over, query name, checkpoint subdirectory)
STREAMS = (
    (DEFAULT_STREAM, "objects", "ripple-events", ""),
    (PROJECT_STREAM, "buckets", "ripple-bucket-events", "project-events"),
)


def checkpoint_of(settings: JobSettings, stream: str) -> Path:
    """Where the query over `stream` keeps its checkpoint: the job's checkpoint directory,
    or a subdirectory of it (Spark leaves directories it does not know alone)."""
    _, _, _, subdirectory = next(s for s in STREAMS if s[0] == stream)
    root = settings.checkpoint_dir.resolve()
    return root / subdirectory if subdirectory else root


def start_query(
    spark: SparkSession,
    settings: JobSettings,
    handler: BatchHandler,
    stream: str = DEFAULT_STREAM,
) -> StreamingQuery:
    _, table, name, _ = next(s for s in STREAMS if s[0] == stream)
    trigger = settings.trigger_interval if stream == DEFAULT_STREAM else None
    records = (
        spark.readStream.format(NAME)
        .option("url", settings.database_url)
        .option("stream", stream)
        .option("maxRecordsPerBatch", str(settings.max_records_per_batch))
        .load()
    )
    transform = events_of_batches(settings.database_url, settings.events, table)
    events = records.mapInArrow(transform, SPARK_EVENT_SCHEMA)
    return (
        events.writeStream.foreachBatch(handler)
        .option("checkpointLocation", str(checkpoint_of(settings, stream)))
        .trigger(processingTime=trigger or settings.bucket_trigger_interval)
        .queryName(name)
        .start()
    )


def run(
    settings: JobSettings,
    registry: Registry,
    deliverer: Deliverer,
    stop: threading.Event | None = None,
    on_started: Callable[[StreamingQuery], Any] | None = None,
    reconfigure: Callable[[], object] | None = None,
) -> None:
    """Run the job until `stop` is set (or the query fails, which raises). `reconfigure`
    runs at the start of every batch (`ripple.pipeline.reconfigure`)."""
    stop = stop or threading.Event()
    spark = spark_session(settings.master, settings.spark_conf)
    deliverer.open()
    engine = engine_for(settings.database_url)
    queries: list[StreamingQuery] = []
    try:
        for stream, *_ in STREAMS:
            offsets = ChangeStreamReader(engine, stream)
            handler = batch_handler(
                registry,
                deliverer,
                functools.partial(offsets.commit_offsets, DEFAULT_CONSUMER),
                reconfigure,  # the deliverer's lock keeps the two queries' calls apart
                stream,
            )
            queries.append(start_query(spark, settings, handler, stream))
        query, bucket_query = queries
        if on_started is not None:
            on_started(query)
        failure: BaseException | None
        try:
            while not stop.is_set():
                if query.awaitTermination(settings.drain_interval_s):  # type: ignore[arg-type]
                    break
                if not bucket_query.isActive:
                    break
                if reconfigure is not None:  # also when no batch comes: removed topics go
                    try:
                        reconfigure()
                    except Exception as e:  # the database away: the next batch fails
                        log.warning("cannot reload the eventing configuration: %s", e)
                deliverer.drain_for(settings.drain_interval_s)
            failure = query.exception() or bucket_query.exception()
        except (StreamingQueryException, Py4JError, ConnectionError) as e:
            failure = e
        if failure is not None:
            lines = str(failure).strip().splitlines()  # Spark's run on with the query plan
            reason = lines[0] if lines else type(failure).__name__
            if not stop.is_set():
                raise RuntimeError(f"the pipeline stopped: {reason}")
            # A signal to the whole process group (SIGTERM from a service manager) also ends
            # Spark's JVM and Python workers: the batch in flight fails, and the restart runs
            # it again, skipping what was delivered.
            log.warning("the query ended while stopping: %s", reason)
    finally:
        stopped: list[BaseException] = []
        for running in queries:  # each, even when stopping another failed
            try:
                running.stop()
            except (Py4JError, ConnectionError) as e:
                log.warning("Spark was gone when the query stopped: %s", type(e).__name__)
                stopped.append(e)
        deliverer.close()
        engine.dispose()
        if stopped and not stop.is_set() and sys.exc_info()[1] is None:
            raise stopped[0]  # unless stopping, or another failure is already on its way
