"""Benchmark: where the pipeline's CPU goes per event, against the 2-core budget of the pull
target (50,000 events/s leaves 2 cores x 1 s / 50,000 = 40 µs of CPU per event).

N events (one PUT per transaction) are committed into a fresh metabase, then each case runs
the same records as one Spark batch job (`local[2]`, warm Python workers) `--rounds` times;
it reports the median wall time and the median CPU the whole machine spent (from
/proc/stat: the JVM, the Python workers and the driver alike), per event. Each round runs
every case in turn, so a machine that slows down slows them alike. The cases go from Spark
alone to the pipeline's whole batch, and three rearrangements of it:

  spark-only      ready-made event batches (made once per Python worker, no database)
                  through an identity mapInArrow into toArrow: Spark's own share
  source          the change-stream source's read of the records into toArrow
  transform       source → mapInArrow(transform) → toArrow: what the job's handler collects
  batch           transform, then the driver's sort, route and pull-subscription store:
                  one micro-batch of the pipeline as `ripple pipeline run` does it
  fused           the transform inside the source's read() (one Python stage fewer)
  executors       route and store inside a second mapInArrow, on the executors
  halves          batch as two jobs at once over halves of the stream partitions (as two
                  queries would run), so one's driver work overlaps the other's executors
  own-code        ripple's read, transform, route and store in this process, no Spark
  journal-map     source → mapInArrow(the journal's task: events of journaled buckets,
                  then their rows, `journal_rows`) → toArrow (the bucket is journaled
                  before the fill)
  journal-rows    journal-map, then the journal's last columns in Spark
                  (`journal_columns`: metadata and tags into maps) into the `noop` sink
  journal-write   journal-rows into Parquet files partitioned as the journal's (a batch
                  write of Spark's file writer), rows counted from the files' footers

The source and transform are ripple's (`read_ranges`, `events_of_batches`) behind a batch
data source over fixed position ranges, so there is no streaming bookkeeping in the figures.
The machine should be otherwise idle: CPU is counted for the whole machine. Last line JSON.

    .venv/bin/python bench/pipeline_cpu.py [--events 50000] [--database sqlite|postgresql]
        [--rounds 5] [--cases spark-only,transform,…] [--conf spark.key=value …]
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.pandas.types import from_arrow_schema
from rich.console import Console

import ripple
from common import machine_cpu_s, progress_bar  # bench/common.py
from ripple.changestream.reader import DEFAULT_STREAM, ChangeStreamReader
from ripple.events import EventSettings
from ripple.metabase import Metabase
from ripple.notifications.journal import JournalStore
from ripple.notifications.registry import Destination, Registry
from ripple.pipeline.journal import journal_columns
from ripple.pipeline.journal_events import journal_events
from ripple.pipeline.journal_rows import PARTITIONS, TASK_SCHEMA, journal_rows
from ripple.pipeline.route import route_table
from ripple.pipeline.session import spark_session
from ripple.pipeline.source import SPARK_SCHEMA, RangePartition, read_ranges
from ripple.pipeline.tasks import in_commit_order
from ripple.pipeline.transform import EVENT_SCHEMA, BatchMapper, Owners
from ripple.subscriptions.schema import subscription_events
from ripple.subscriptions.store import SubscriptionStore
from world import TOPIC, database, fill_puts, make_world  # bench/world.py

console = Console(stderr=True)
if not console.is_terminal:  # a log file: wide enough for the lines
    console = Console(stderr=True, width=150)
CORES = 2
TARGET_EVENTS_PER_S = 50_000
BUDGET_US = CORES * 1e6 / TARGET_EVENTS_PER_S  # CPU µs per event at the target
CASES = ("spark-only", "source", "transform", "batch", "fused", "executors", "halves", "own-code")
JOURNAL_CASES = ("journal-map", "journal-rows", "journal-write")


SPARK_EVENT_SCHEMA = (  # EVENT_SCHEMA, as Spark spells it
    "partition int, position bigint, commit_ns bigint, event_id string, project_id string, "
    "bucket string, key string, event_name string, sequencer string, version_id string, "
    "message binary, metadata string, tags string, rename string"
)


def events_of_batches(
    url: str, settings: EventSettings, table: str = "objects", *, fast: bool = True
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The `mapInArrow` function: one task's record batches (of a stream over `table`) →
    event batches (one per record batch that completes a transaction with events), the
    events in the order of their transactions' last records. `fast` False maps every
    transaction through `s3_events` (the comparison's slow side)."""

    def transform(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        owners = Owners(url)
        mapper = BatchMapper(owners, settings, table, fast=fast)
        try:
            for batch in batches:
                out = mapper.map(batch)
                if out.num_rows:
                    yield out
            mapper.finish()
        finally:
            owners.close()

    return transform


class RecordsSource(DataSource):
    """A batch source over fixed ranges of the change stream: `ranges` (JSON) is a list of
    [partition, start, end]; `fused` maps the records to events inside read();
    `synthetic` hands out ready-made event batches instead (no database)."""

    @classmethod
    def name(cls) -> str:
        return "ripple-bench-records"

    def schema(self) -> str:
        fused = self.options.get("fused") or self.options.get("synthetic")
        return SPARK_EVENT_SCHEMA if fused else SPARK_SCHEMA

    def reader(self, schema: Any) -> DataSourceReader:
        return RecordsReader(dict(self.options))


def synthetic_events(partition: int, n: int) -> pa.RecordBatch:
    """`n` made-up events of a partition, made once per Python worker. (The cache hangs on
    an imported module: this module's globals travel to the workers by value, anew with
    every task.)"""
    cache = ripple.__dict__.setdefault("_bench_synthetic_events", {})
    if (partition, n) not in cache:
        message = (
            b'{"eventVersion":"2.1","eventSource":"ripple:s3",' + b'"x":"' + b"x" * 540 + b'"}'
        )
        ids = [f"{partition}-{i:020d}" for i in range(n)]
        columns = {
            "partition": pa.array([partition] * n, pa.int32()),
            "position": pa.array(range(n), pa.int64()),
            "commit_ns": pa.array(range(n), pa.int64()),
            "event_id": pa.array(ids),
            "project_id": pa.array([str(uuid.UUID(int=1))] * n),
            "bucket": pa.array(["bench-events-0"] * n),
            "key": pa.array([f"obj-{i:07d}" for i in range(n)]),
            "event_name": pa.array(["ObjectCreated:Put"] * n),
            "sequencer": pa.array([f"{i:020X}" for i in range(n)]),
            "version_id": pa.nulls(n, pa.string()),
            "message": pa.array([message] * n, pa.binary()),
            "metadata": pa.nulls(n, pa.string()),
            "tags": pa.nulls(n, pa.string()),
            "rename": pa.nulls(n, pa.string()),
        }
        cache[partition, n] = pa.RecordBatch.from_arrays(
            list(columns.values()), schema=EVENT_SCHEMA
        )
    return cache[partition, n]


class RecordsReader(DataSourceReader):
    def __init__(self, options: dict[str, str]) -> None:
        self.url = options["url"]
        self.ranges = [tuple(r) for r in json.loads(options["ranges"])]
        self.fused = bool(options.get("fused"))
        self.synthetic = bool(options.get("synthetic"))

    def partitions(self) -> list[InputPartition]:
        return [RangePartition([r]) for r in self.ranges]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, RangePartition)
        if self.synthetic:
            [(number, start, end)] = partition.ranges
            batch = synthetic_events(number, end - start)
            return iter(batch.slice(i, 10_000) for i in range(0, batch.num_rows, 10_000))
        records = read_ranges(self.url, DEFAULT_STREAM, partition.ranges)
        if self.fused:
            return events_of_batches(self.url, EventSettings(), "objects")(records)
        return records


def route_and_store_table(events: pa.Table, registry: Registry, store: SubscriptionStore) -> int:
    """Route the events and store each topic's in its pull subscriptions, as the pipeline's
    handler does with `SubscriptionTarget`s; returns how many deliveries were stored."""
    routed = route_table(events, registry, 0)
    for topic, deliveries in routed.by_topic.items():
        store.store(topic, deliveries)
    return sum(len(deliveries) for deliveries in routed.by_topic.values())


def identity(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    yield from batches


def route_and_store(url: str, project: str, buckets: list[str], topic: str) -> Callable[..., Any]:
    """A mapInArrow function routing its task's events and storing them in the pull
    subscription; it yields only how many it stored."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        registry = Registry()  # as bench/pipeline.py's registry_for (not importable here)
        for bucket in buckets:
            registry.set_bucket(uuid.UUID(project), bucket, [Destination(topic)])
        db = Metabase(url)
        store = SubscriptionStore(db)
        stored = 0
        try:
            for batch in batches:
                stored += route_and_store_table(pa.Table.from_batches([batch]), registry, store)
        finally:
            db.dispose()
        yield pa.RecordBatch.from_pylist([{"stored": stored}])

    return run


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="Traffic goes to 127.0.0.1 only. Figures on a shared machine are indicative.",
    )
    parser.add_argument("--events", type=int, default=50_000, help="events committed up front")
    parser.add_argument("--database", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--rounds", type=int, default=5, help="timed runs per case")
    parser.add_argument(
        "--cases",
        default=",".join(CASES),
        help=f"which, in turn each round ({','.join((*CASES, *JOURNAL_CASES))})",
    )
    parser.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark setting for the session, over the job's own (repeatable)",
    )
    args = parser.parse_args()
    conf = dict(item.split("=", 1) for item in args.conf if "=" in item)
    if len(conf) != len(args.conf):
        parser.error("--conf takes KEY=VALUE")
    chosen = [name.strip() for name in args.cases.split(",") if name.strip()]
    if unknown := sorted(set(chosen) - set(CASES) - set(JOURNAL_CASES)):
        known = ", ".join((*CASES, *JOURNAL_CASES))
        parser.error(f"unknown case {unknown[0]!r}: choose from {known}")

    with database(args.database) as url:
        world = make_world(url, 1, versioned=False, sync_commit=False)
        if set(chosen) & set(JOURNAL_CASES):  # from before the fill: its events journaled
            JournalStore(world.db).put(world.project_id, world.buckets[0], None, "bench")
        fill_puts(world, args.events, 1 if args.database == "sqlite" else 2)
        reader = ChangeStreamReader(world.db.engine)
        ranges = [[p, 0, reader.end(p)] for p in range(reader.partitions())]
        events = sum(end for _, _, end in ranges)  # one record, one event per PUT
        spark = spark_session("local[2]", conf)
        try:
            results = run_cases(spark, world, url, ranges, events, args.rounds, chosen)
        finally:
            spark.stop()
            world.db.dispose()
    print_results(results, events)
    return 0


def run_cases(
    spark: Any,
    world: Any,
    url: str,
    ranges: list[list[int]],
    events: int,
    rounds: int,
    chosen: list[str],
) -> dict[str, dict[str, float]]:
    spark.dataSource.register(RecordsSource)

    def load(span: list[list[int]] = ranges, **options: str) -> DataFrame:
        frame = spark.read.format(RecordsSource.name()).option("url", url)
        frame = frame.option("ranges", json.dumps(span))
        for name, value in options.items():
            frame = frame.option(name, value)
        loaded: DataFrame = frame.load()
        return loaded

    transform = events_of_batches(url, EventSettings(), "objects")
    records = load()
    mapped = records.mapInArrow(transform, SPARK_EVENT_SCHEMA)
    share, extra = divmod(events, len(ranges))
    synthetic_ranges = [[p, 0, share + (p < extra)] for p in range(len(ranges))]
    synthetic = load(synthetic_ranges, synthetic="1")
    store = SubscriptionStore(world.db)

    def batch() -> int:
        table = in_commit_order(mapped.toArrow())
        route_and_store_table(table, world.registry, store)
        return int(table.num_rows)

    halves = [
        load(ranges[: len(ranges) // 2]).mapInArrow(transform, SPARK_EVENT_SCHEMA),
        load(ranges[len(ranges) // 2 :]).mapInArrow(transform, SPARK_EVENT_SCHEMA),
    ]
    driver = threading.Lock()  # as the job's deliverer lock: one batch routed at a time

    def half(frame: DataFrame, collected: list[int]) -> None:
        table = in_commit_order(frame.toArrow())
        with driver:
            route_and_store_table(table, world.registry, store)
        collected.append(int(table.num_rows))

    def two_queries() -> int:
        collected: list[int] = []
        threads = [threading.Thread(target=half, args=(frame, collected)) for frame in halves]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return sum(collected)

    def own_code() -> int:
        found = 0
        for r in ranges:
            span = [(r[0], r[1], r[2])]
            rows = pa.Table.from_batches(list(transform(read_ranges(url, DEFAULT_STREAM, span))))
            route_and_store_table(in_commit_order(rows), world.registry, store)
            found += rows.num_rows
        return found

    executors = mapped.mapInArrow(
        route_and_store(url, str(world.project_id), world.buckets, TOPIC), "stored long"
    )
    journal_task = journal_events(url, EventSettings())
    journaled = records.mapInArrow(
        lambda batches: map(journal_rows, journal_task(batches)), from_arrow_schema(TASK_SCHEMA)
    )
    written = tempfile.TemporaryDirectory(prefix="ripple-bench-journal-")
    writes = itertools.count()

    def journal_write() -> int:
        path = Path(written.name) / str(next(writes))
        journal_columns(journaled).write.partitionBy(*PARTITIONS).parquet(str(path))
        return sum(pq.read_metadata(f).num_rows for f in path.rglob("*.parquet"))

    def journal_noop() -> int:
        journal_columns(journaled).write.format("noop").mode("overwrite").save()
        return events  # the noop sink counts nothing: journal-map's count stands for it

    cases: dict[str, Callable[[], int]] = {
        "journal-map": lambda: journaled.toArrow().num_rows,
        "journal-rows": journal_noop,
        "journal-write": journal_write,
        "spark-only": lambda: synthetic.mapInArrow(identity, SPARK_EVENT_SCHEMA).toArrow().num_rows,
        "source": lambda: records.toArrow().num_rows,
        "transform": lambda: mapped.toArrow().num_rows,
        "batch": batch,
        "fused": lambda: load(fused="1").toArrow().num_rows,
        "executors": lambda: int(sum(executors.toArrow().column("stored").to_pylist())),
        "halves": two_queries,
        "own-code": own_code,
    }
    walls: dict[str, list[float]] = {name: [] for name in chosen}
    cpus: dict[str, list[float]] = {name: [] for name in chosen}
    with progress_bar(console) as progress:
        task = progress.add_task("cases, in turn", total=(rounds + 1) * len(chosen))
        for attempt in range(rounds + 1):  # the first round warms the Python workers
            for name in chosen:
                with world.db.engine.begin() as conn:
                    conn.execute(subscription_events.delete())
                cpu, start = machine_cpu_s(), time.perf_counter()
                rows = cases[name]()
                wall, used = time.perf_counter() - start, machine_cpu_s() - cpu
                if rows != events:
                    raise RuntimeError(f"{name}: {rows} rows, expected {events}")
                if attempt:
                    walls[name].append(wall)
                    cpus[name].append(used)
                progress.advance(task)
    written.cleanup()
    return {
        name: {
            "wall_s": round(statistics.median(walls[name]), 3),
            "cpu_us_per_event": round(statistics.median(cpus[name]) / events * 1e6, 1),
            "events_per_s": round(events / statistics.median(walls[name])),
        }
        for name in chosen
    }


def print_results(results: dict[str, dict[str, float]], events: int) -> None:
    console.print(
        f"{events:,} events; the pull target leaves {BUDGET_US:.0f} µs of CPU per event "
        f"({CORES} cores at {TARGET_EVENTS_PER_S:,} events/s)"
    )
    for name, r in results.items():
        console.print(
            f"  {name:11s} {r['wall_s']:6.3f} s  {r['events_per_s']:>8,} events/s  "
            f"CPU {r['cpu_us_per_event']:5.1f} µs/event "
            f"({r['cpu_us_per_event'] / BUDGET_US:.2f} of the budget)"
        )
    print(json.dumps({"budget_us_per_event": BUDGET_US, "events": events, **results}))


if __name__ == "__main__":
    raise SystemExit(main())
