"""The eventing job: change stream → S3 events → destinations, as a Spark Structured
Streaming query whose tasks deliver.

    source ripple-deliveries (a task per stream partition, or one for a small batch, or
    one lease task that follows a trickle for seconds):
      each task reads, maps, routes and delivers its records (ripple.pipeline.tasks)
      → foreachBatch(handle)      the tasks' outcomes: metrics and log lines, on the driver

Spark commits a batch's offsets (checkpoint) only after `handle` returns, which is after
every task returned, and a task returns only when each of its events is acknowledged or in
its destination's retry queue: at least once. The driver never holds an event or a target.
While the query runs, its main loop watches the retry queues and, when events are due, runs a
drain task on an executor (`drain`).

A second query does the same for the `project_eventing` stream (the buckets table: bucket
events), with its own checkpoint (`<checkpoint>/project-events`, inside the first's, so
removing the checkpoint resets both).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import re
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import sqlalchemy as sa
from py4j.protocol import Py4JError, Py4JJavaError  # type: ignore[import-untyped]
from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from ripple.changestream.reader import DEFAULT_STREAM, PROJECT_STREAM
from ripple.events import EventSettings
from ripple.pipeline import metrics
from ripple.pipeline.deliveries import DELIVERIES, delivery_source
from ripple.pipeline.journal import JournalQuery
from ripple.pipeline.leases import close_leases, open_leases
from ripple.pipeline.outcomes import SPARK_OUTCOME_SCHEMA, Summary, rows_of
from ripple.pipeline.queue import RetryQueue
from ripple.pipeline.session import spark_session
from ripple.pipeline.tasks import WorkerSetup, drain_task, warm_task
from ripple.snapshotter import shared as shared_snapshotters

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class JobSettings:
    database_url: str
    checkpoint_dir: Path | str  # a local directory, or any Hadoop path (hdfs://, s3a://)
    master: str = "local[*]"
    events: EventSettings = field(default_factory=EventSettings)
    max_records_per_batch: int = 50_000
    trigger_interval: str = "0 seconds"  # as soon as the previous batch is done
    # a trickle is delivered by one task that follows the stream this long (0: a batch per
    # handful of records; ripple.pipeline.deliveries)
    lease_s: float = 5.0
    # bucket events are rare: their query looks for new ones once a second
    bucket_trigger_interval: str = "1 second"
    drain_interval_s: float = 0.5
    spark_conf: dict[str, str] = field(default_factory=dict)
    # the address the driver binds to and executors reach it at (loopback: local only)
    driver_host: str = "127.0.0.1"
    # where the journal's tables are (docs/journal.md); "" writes no journal
    journal_location: str = ""


BatchHandler = Callable[[DataFrame, int], None]
# what a batch's collect fails with only when its query or Spark is stopping: its job
# cancelled, or the wait for its result interrupted
_STOPPING = ("SPARK_JOB_CANCELLED", "java.lang.InterruptedException")


def batch_handler(stream: str = DEFAULT_STREAM, activity: Activity | None = None) -> BatchHandler:
    """foreachBatch of the query over `stream` (its log lines name it). The batch's tasks
    have delivered its events by the time its outcomes are collected here; this adds them
    to the driver's metrics and log."""

    def handle(outcomes: DataFrame, batch_id: int) -> None:
        started = time.monotonic()
        try:
            table = outcomes.toArrow()
        except Py4JJavaError as e:
            if not any(sign in str(e) for sign in _STOPPING):
                raise
            # The query is stopping: a lease is cancelled at every stop, and a Ctrl-C in a
            # terminal, which reaches Spark's processes too, can interrupt the wait for the
            # batch's result. Nothing is lost if Spark commits the batch now, as the next batch
            # starts from the consumer offsets its tasks stored (ripple.pipeline.deliveries).
            # Raising would cost more: Spark matches a regex against the error's text, which
            # overflows the stack on a Java stack trace and ends the query's thread without
            # its clean-up, and py4j prints both traces.
            log.debug("%s batch %d cancelled: the query is stopping", stream, batch_id)
            return
        summary = Summary.of(rows_of(table))
        if activity is not None:
            activity.ran()
        summary.publish()
        if summary.lag_ns >= 0:  # when the tasks delivered, not now: a lease ends seconds later
            metrics.PIPELINE_LAG.set(summary.lag_ns / 1e9)
        elif summary.newest_commit_ns:
            metrics.PIPELINE_LAG.set(max(0.0, time.time() - summary.newest_commit_ns / 1e9))
        metrics.BATCH_DURATION.observe(time.monotonic() - started)
        log.log(
            logging.INFO if summary.events else logging.DEBUG,  # a quiet lease says nothing
            "%s batch %d: %d events, %d deliveries, %d unrouted in %.3f s",
            stream,
            batch_id,
            summary.events,
            summary.count("ripple_events_triggered"),
            summary.count("ripple_events_unrouted"),
            time.monotonic() - started,
        )

    return handle


def on_workers(
    spark: SparkSession, tasks: int, description: str, work: Callable[[], pa.RecordBatch]
) -> list[dict[str, Any]]:
    """Run `work` in `tasks` Spark tasks and collect the rows it returns. It goes through
    `mapInArrow`, so its tasks use the Python workers the pipeline's source uses (Spark
    keeps one pool for SQL's Python work and another for RDDs'): those that hold the
    targets."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for _ in batches:
            pass
        yield work()

    context = spark.sparkContext
    context.setJobDescription(description)
    try:
        table = spark.range(0, tasks, 1, tasks).mapInArrow(run, SPARK_OUTCOME_SCHEMA).toArrow()
    finally:
        context.setJobDescription(None)  # type: ignore[arg-type]
    return list(rows_of(table))


def drain(spark: SparkSession, setup: WorkerSetup, budget_s: float) -> Summary:
    """Run `drain_task` as a one-task Spark job (on an executor, whose Python worker holds
    the targets); its outcomes, published."""
    rows = on_workers(spark, 1, "ripple: retry-queue drain", lambda: drain_task(setup, budget_s))
    summary = Summary.of(rows)
    summary.publish()
    return summary


def warm(spark: SparkSession, setup: WorkerSetup) -> int:
    """Start a Python worker on every executor core and build its routes and targets, so the
    first events after a start (or an idle spell: Spark ends Python workers idle for a
    minute) do not wait for a worker to start; how many distinct workers answered."""
    cores = max(1, spark.sparkContext.defaultParallelism)
    rows = on_workers(spark, cores, "ripple: warm the Python workers", lambda: warm_task(setup))
    Summary.of(rows).publish()
    return len({row["value"] for row in rows if row["kind"] == "worker"})


class Activity:
    """When a batch last ran: the driver keeps the Python workers warm after a quiet spell
    (`KEEP_WARM_S`)."""

    KEEP_WARM_S = 30.0

    def __init__(self) -> None:
        self.last = time.monotonic()

    def ran(self) -> None:
        self.last = time.monotonic()

    def quiet(self) -> bool:
        return time.monotonic() - self.last >= self.KEEP_WARM_S


class QueueWatch:
    """The driver's view of the retry queues: whether a drain is due, and their lengths for
    `ripple_retry_queue_length` (a destination whose queue emptied goes to 0)."""

    def __init__(self, engine: sa.Engine) -> None:
        self.queue = RetryQueue(engine)
        self.known: set[str] = set()

    def due(self) -> bool:
        return self.queue.any_due(time.time_ns())

    def update_lengths(self) -> None:
        lengths = self.queue.lengths()
        for name in self.known - set(lengths):
            metrics.RETRY_QUEUE_LENGTH.labels(name).set(0)
        for name, length in lengths.items():
            metrics.RETRY_QUEUE_LENGTH.labels(name).set(length)
        self.known = set(lengths)


# the streams the job reads: (stream, the table it is over, query name, checkpoint subdirectory)
STREAMS = (
    (DEFAULT_STREAM, "objects", "ripple-events", ""),
    (PROJECT_STREAM, "buckets", "ripple-bucket-events", "project-events"),
)


def is_hadoop_path(location: Path | str) -> bool:
    """A checkpoint location Hadoop resolves (`hdfs://…`, `s3a://…`, `file:/…`), not a
    local path of this machine."""
    return (
        isinstance(location, str) and re.match(r"[A-Za-z][A-Za-z0-9+.-]*:/", location) is not None
    )


def checkpoint_root(settings: JobSettings) -> str:
    """The job's checkpoint location: a Hadoop path as given, a local directory absolute."""
    root = settings.checkpoint_dir
    return str(root).rstrip("/") if is_hadoop_path(root) else str(Path(root).resolve())


# Spark writes two small files a batch, its offset and commit logs. On the local file system
# Hadoop's defaults (FileContext, checksummed) start six processes per file when Hadoop's
# native library is missing, as it is from pip's PySpark: a `chmod` for the file and for its
# .crc, a `readlink` either side of both renames, a large share of every batch. A local
# checkpoint is written through Spark's FileSystem-based manager (a plain rename, atomic on
# POSIX) over the raw local file system (no .crc): one `chmod` (BENCHMARKS.md, "Issue 25,
# second session: a batch's fixed cost, the pull store").
LOCAL_CHECKPOINT_CONF = {
    "spark.hadoop.fs.file.impl": "org.apache.hadoop.fs.RawLocalFileSystem",
    "spark.sql.streaming.checkpointFileManagerClass": (
        "org.apache.spark.sql.execution.streaming.checkpointing."
        "FileSystemBasedCheckpointFileManager"
    ),
}


def spark_conf(settings: JobSettings) -> dict[str, str]:
    """The session's settings: `LOCAL_CHECKPOINT_CONF` for a checkpoint on this machine's
    file system, then the job's own (which win)."""
    root = checkpoint_root(settings)
    local = not is_hadoop_path(root) or root.startswith("file:")
    return {**(LOCAL_CHECKPOINT_CONF if local else {}), **settings.spark_conf}


def checkpoint_of(settings: JobSettings, stream: str) -> str:
    """Where the query over `stream` keeps its checkpoint: the job's checkpoint location,
    or a subdirectory of it (Spark leaves directories it does not know alone)."""
    _, _, _, subdirectory = next(s for s in STREAMS if s[0] == stream)
    root = checkpoint_root(settings)
    return f"{root}/{subdirectory}" if subdirectory else root


def start_query(
    spark: SparkSession,
    settings: JobSettings,
    handler: BatchHandler,
    stream: str = DEFAULT_STREAM,
    lease_run: int = 0,
) -> StreamingQuery:
    """Start the query over `stream` (the registered `ripple-deliveries` source's); its
    leases deliver under the run number `lease_run` (`ripple.pipeline.leases`; 0: none)."""
    _, table, name, _ = next(s for s in STREAMS if s[0] == stream)
    trigger = settings.trigger_interval if stream == DEFAULT_STREAM else None
    lease_s = settings.lease_s if stream == DEFAULT_STREAM and lease_run > 0 else 0
    outcomes = (
        spark.readStream.format(DELIVERIES)
        .option("url", settings.database_url)
        .option("stream", stream)
        .option("table", table)
        .option("maxRecordsPerBatch", str(settings.max_records_per_batch))
        .option("leaseSeconds", str(lease_s))
        .option("leaseRun", str(lease_run))
        .load()
    )
    return (
        outcomes.writeStream.foreachBatch(handler)
        .option("checkpointLocation", checkpoint_of(settings, stream))
        .trigger(processingTime=trigger or settings.bucket_trigger_interval)
        .queryName(name)
        .start()
    )


# a query's status once its source has answered: its first batch under way, or nothing to do
STARTED = ("Processing new data", "Waiting for data to arrive", "Waiting for next trigger")


def wait_until_started(query: StreamingQuery, stop: threading.Event, timeout: float = 300) -> None:
    """Return once the query's source is initialized and its first batch is planned (or
    there is nothing to do), so that "running" means running: a query starts its source
    (the planner's Python helper) after `start()` returns. Returns early if the query ends
    or `stop` is set (the caller looks at why)."""
    deadline = time.monotonic() + timeout
    while not stop.is_set() and time.monotonic() < deadline and query.isActive:
        if str(query.status.get("message", "")) in STARTED:
            return
        time.sleep(0.05)


def start_one_by_one(
    starts: Sequence[Callable[[], StreamingQuery]],
    stop: threading.Event,
    queries: list[StreamingQuery],
) -> None:
    """Start each query once the one before it has started (`wait_until_started`), adding
    each to `queries` as it starts (so that the caller stops those that did if one fails).

    Every query reads the one registered Python data source, and Spark shares that source's
    environment map (a Java HashMap) between the function its streaming source runs on the
    driver and the read function its tasks carry. The streaming source adds Spark's worker
    settings to the map when it starts; a task serialized while another query's source adds
    to it is unreadable (`java.io.OptionalDataException` in `HashMap.readObject`, on every
    attempt: the task binary is serialized once). Once the first source has added them, the
    next ones only put the same values again, which leaves the map's shape alone."""
    for start in starts:
        query = start()
        queries.append(query)
        wait_until_started(query, stop)


def journal_started(
    journal: JournalQuery, queries: list[StreamingQuery], stop: threading.Event
) -> bool:
    """Start the journal's query if a bucket is journaled and it is not running (adding it
    to `queries`); False when it was running and has ended (failed)."""
    if journal.query is not None:
        return bool(journal.query.isActive)
    started = journal.start_if_journaled()
    if started is not None:
        queries.append(started)
        wait_until_started(started, stop)
    return True


def quiet(spark: SparkSession) -> None:
    """Spark's own log, from here on, only for what is fatal: a stop the user asked for
    cancels the lease in flight and kills its task, and Spark logs that at length (a task's
    Arrow buffers "leaked", job groups it cannot cancel) though nothing is wrong. A query
    that fails while stopping is still said, once, by the pipeline."""
    with contextlib.suppress(Py4JError, ConnectionError):  # the JVM may be gone already
        spark.sparkContext.setLogLevel("FATAL")


def worker_setup(settings: JobSettings, **parts: Any) -> WorkerSetup:
    """The setup the job's workers build their routes and targets from: the job's
    metabase and event settings, a new run id, and `parts` (`WorkerSetup`'s other fields)."""
    return WorkerSetup(uuid.uuid4().hex, settings.database_url, settings.events, **parts)


def run(
    settings: JobSettings,
    setup: WorkerSetup,
    stop: threading.Event | None = None,
    on_started: Callable[[StreamingQuery], Any] | None = None,
) -> None:
    """Run the job until `stop` is set (or the query fails, which raises). The workers
    route and deliver by `setup`."""
    stop = stop or threading.Event()
    spark = spark_session(settings.master, spark_conf(settings), settings.driver_host)
    # snapshot:// archives: one process may hold a snapshotter's log, so the driver serves
    # them and the workers publish through it
    served = shared_snapshotters.Served(settings.driver_host)
    setup = dataclasses.replace(
        setup,
        snapshotters=shared_snapshotters.configured(),
        snapshotter_addresses=served.addresses,
    )
    spark.dataSource.register(delivery_source(setup))
    engine = sa.create_engine(settings.database_url, pool_size=1, max_overflow=1)
    queues = QueueWatch(engine)
    activity = Activity()
    queries: list[StreamingQuery] = []
    journal: JournalQuery | None = None
    leases = 0
    try:
        leases = open_leases(engine, DEFAULT_STREAM)
        log.info("%d Python workers warmed", warm(spark, setup))
        start_one_by_one(
            [
                functools.partial(
                    start_query, spark, settings, batch_handler(stream, activity), stream, leases
                )
                for stream, *_ in STREAMS
            ],
            stop,
            queries,
        )
        query, bucket_query = queries
        journal = JournalQuery(
            spark,
            url=settings.database_url,
            events=settings.events,
            location=settings.journal_location,
            max_records_per_batch=settings.max_records_per_batch,
        )
        journal_started(journal, queries, stop)
        if on_started is not None:
            on_started(query)
        failure: BaseException | None
        try:
            while not stop.is_set():
                if query.awaitTermination(settings.drain_interval_s):  # type: ignore[arg-type]
                    break
                if not bucket_query.isActive:
                    break
                if not journal_started(journal, queries, stop):
                    break
                try:
                    if queues.due():
                        drain(spark, setup, settings.drain_interval_s)
                        activity.ran()
                    queues.update_lengths()
                    if activity.quiet():
                        warm(spark, setup)
                        activity.ran()
                except sa.exc.SQLAlchemyError as e:  # the database away: the batches fail
                    log.warning("cannot read the retry queues: %s", str(e).splitlines()[0])
            failure = (
                query.exception()
                or bucket_query.exception()
                or (journal.query.exception() if journal.query is not None else None)
            )
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
        if stop.is_set():
            quiet(spark)
        try:  # first, so that a lease ends after its step, not when Spark ends its worker
            if leases:
                close_leases(engine, DEFAULT_STREAM, leases)
        except sa.exc.SQLAlchemyError as e:
            log.warning("cannot end the leases: %s", str(e).splitlines()[0])
        stopped: list[BaseException] = []
        for running in queries:  # each, even when stopping another failed
            try:
                running.stop()
            except (Py4JError, ConnectionError) as e:
                log.warning("Spark was gone when the query stopped: %s", type(e).__name__)
                stopped.append(e)
        engine.dispose()
        if journal is not None:
            journal.close()
        served.stop()
        if stopped and not stop.is_set() and sys.exc_info()[1] is None:
            raise stopped[0]  # unless stopping, or another failure is already on its way
