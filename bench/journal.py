"""Benchmark: the bucket journal (issue 30) as a user runs it (`ripple pipeline run` on
`local[2]`, its journal at `RIPPLE_JOURNAL_LOCATION`), against a fresh PostgreSQL metabase.

The world is bench/pipeline.py's: bucket `bench-pull` notifies a pull-only topic with a
subscription, and is journaled, as is `bench-journal` (no notification); then a backlog of
`--events` PUTs into `bench-pull` (one event per transaction, bench/world.py's filler) is
committed before any pipeline starts. Each round has two phases over that same backlog,
each its own `ripple pipeline run` (fresh checkpoint), alternated from round to round:
(a) pull: the pipeline's delivery query pulls the backlog into the subscription, the
    journal's query idle at the stream's end (its consumer offsets there);
    `pull_events_per_s`: the backlog over the seconds from the start of the delivery
    query's first micro-batch that read records to the last event stored (the consumer
    offsets, followed every 0.1 s from the process's start, as bench/pipeline.py does);
(b) journal: the journal's query writes the backlog into the journal table, the delivery
    query idle at the stream's end; `journal_rows_per_s`: the journal's rows over the
    seconds from the start of the journal query's first micro-batch to the reader's read of
    the batch that completes the backlog. Rows are counted as a reader sees them: the files
    the sink's log (`_spark_metadata`) lists, `num_rows` from each file's Parquet footer,
    the log polled every 50 ms.
Both from the query's first batch, since on a 2-core machine a query may drain much of a
backlog before the pipeline says it runs (it starts its queries one by one). Each query has
the machine to itself, the other running idle beside it as in a pipeline with one journaled,
notified bucket: the fair "same run" comparison is one query's drain against the other's,
over the same records, minutes apart (both at once would split the two cores between them).

Then, in the last journal phase, visibility: writer processes commit `--rate`
single-object PUTs per second into `bench-journal` for `--seconds`; a reader thread polls the
sink's log every 50 ms and reads the keys of each newly committed file; a key's delay is
when the reader first saw its row minus when its commit returned.

Spark's progress of each query (`durationMs` per micro-batch, rows) comes from the run's
Spark event log. The last line is one JSON object: `journal_rows_per_s`,
`pull_events_per_s`, `journal_visible_p50_s`, `journal_visible_p99_s`, … and per phase.

    PYTHONPATH=src:bench .venv/bin/python bench/journal.py [--events 200000] [--rate 200]
        [--seconds 30] [--rounds 1] [--quick] [--keep-logs DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import pyarrow.parquet as pq
import sqlalchemy as sa
from rich.table import Table

from common import fresh_postgres_database, percentile, progress_bar
from pipeline import (  # bench/pipeline.py (bench/ is on sys.path)
    ADMIN_URL,
    World,
    console,
    delivered_records,
    make_world,
    paced_commits,
    pipeline_process,
    put_keys,
    reset,
    stream_ends,
    subscription_count,
    wait_until,
)
from ripple.changestream.reader import ChangeStreamReader
from ripple.metabase import BucketLocation, Metabase, create_bucket
from ripple.notifications.journal import JournalStore
from ripple.pipeline.journal import CONSUMER as JOURNAL_CONSUMER
from ripple.pipeline.journal import QUERY_NAME as JOURNAL_QUERY
from ripple.pipeline.journal import journal_table
from world import fill_puts  # bench/world.py (bench/ is on sys.path)

MASTER = "local[2]"
JOURNAL_BUCKET = "bench-journal"  # journaled, no notification: the visibility phase's
UNUSED_HOOK = "http://127.0.0.1:9/unused"  # bench/pipeline.py's webhook topic: no events here
DELIVERY_QUERY = "ripple-events"  # the pipeline's delivery query over the objects' stream
POLL_S = 0.05
TARGETS = {"journal_rows_per_s": "≥ pull_events_per_s", "journal_visible_p99_s": 2.0}
PROGRESS_EVENT = "org.apache.spark.sql.streaming.StreamingQueryListener$QueryProgressEvent"


# --- the journal as a reader sees it ---------------------------------------------------


def local_path(uri: str) -> str:
    """A `file:` URI of the sink's log as a path of this machine."""
    parsed = urlparse(uri)
    return unquote(parsed.path) if parsed.scheme in ("file", "") else uri


class SinkLog:
    """The journal's committed files, from the file sink's log: `_spark_metadata/<batch id>`
    (`v1`, then a JSON line per file), every tenth batch compacted into `<id>.compact` with
    every file before it. Only files listed there are the table's (what Spark reads)."""

    def __init__(self, table: Path) -> None:
        self.directory = table / "_spark_metadata"
        self.last = -1
        self.files: set[str] = set()

    def poll(self) -> list[tuple[int, list[str]]]:
        """(batch id, its files not seen before) of each batch committed since the last
        poll, in order. Spark writes a log file whole (a rename), so one listed is done."""
        if not self.directory.is_dir():
            return []
        batches = []
        for entry in os.scandir(self.directory):
            stem = entry.name.removesuffix(".compact")
            if stem.isdigit() and int(stem) > self.last:
                batches.append((int(stem), entry.name))
        out = []
        for batch, name in sorted(batches):
            lines = (self.directory / name).read_text().splitlines()
            if not lines or lines[0] != "v1":
                raise RuntimeError(f"the sink's log {name} is not a v1 log: {lines[:1]}")
            new = []
            for line in lines[1:]:
                entry = json.loads(line)
                if entry.get("action", "add") == "add" and entry["path"] not in self.files:
                    self.files.add(entry["path"])
                    new.append(local_path(entry["path"]))
            out.append((batch, new))
            self.last = batch
        return out


@dataclass
class Batch:
    batch_id: int
    seen_ns: int  # when the reader had read it
    rows: int


@dataclass
class Watcher:
    """A reader thread polling the sink's log every POLL_S: rows per committed batch (from
    the files' footers) and, once `read_keys` is set, when each key's row was first read."""

    table: Path
    read_keys: bool = False
    rows: int = 0
    batches: list[Batch] = field(default_factory=list)
    seen: dict[str, int] = field(default_factory=dict)  # key → ns its row was first read
    error: BaseException | None = None

    def __post_init__(self) -> None:
        self.log = SinkLog(self.table)
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, name="journal-reader", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            while not self.stopping.wait(POLL_S):
                for batch, paths in self.log.poll():
                    rows = 0
                    for path in paths:
                        if self.read_keys:
                            keys = pq.ParquetFile(path).read(columns=["key"]).column("key")
                            now = time.time_ns()
                            for key in keys.to_pylist():
                                self.seen.setdefault(key, now)
                            rows += len(keys)
                        else:
                            rows += pq.read_metadata(path).num_rows
                    self.rows += rows
                    self.batches.append(Batch(batch, time.time_ns(), rows))
        except BaseException as e:  # reported by `check`
            self.error = e

    def check(self) -> None:
        if self.error is not None:
            raise RuntimeError(f"the journal reader failed: {self.error!r}")

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(10)


# --- Spark's progress, from the event log ------------------------------------------------


@contextmanager
def event_log(directory: Path) -> Iterator[dict[str, str]]:
    """The environment that makes the pipeline's Spark write its event log to `directory`
    (its queries' progress among the events)."""
    directory.mkdir(parents=True, exist_ok=True)
    yield {
        "PYSPARK_SUBMIT_ARGS": "--conf spark.eventLog.enabled=true "
        "--conf spark.eventLog.compress=false --conf spark.eventLog.rolling.enabled=false "
        f"--conf spark.eventLog.dir=file://{directory} pyspark-shell"
    }


def query_progress(directory: Path, query: str) -> list[dict[str, Any]]:
    """The progress of each micro-batch of `query` (in the order run), from the event logs,
    with `rows`, the records its sources read, and `start_s`, its trigger's wall time."""
    progress = []
    for path in sorted(p for p in directory.rglob("*") if p.is_file()):
        with path.open() as f:
            for line in f:
                if PROGRESS_EVENT not in line:
                    continue
                p = json.loads(line)["progress"]
                if p.get("name") != query:
                    continue
                p["rows"] = sum(int(s.get("numInputRows", 0)) for s in p.get("sources", []))
                p["start_s"] = datetime.fromisoformat(p["timestamp"]).timestamp()
                progress.append(p)
    return progress


def first_batch_start(progress: list[dict[str, Any]]) -> float:
    """When the first micro-batch that read records began (wall seconds)."""
    return min(p["start_s"] for p in progress if p["rows"] > 0)


def progress_summary(
    progress: list[dict[str, Any]], since: float = 0.0, until: float = float("inf")
) -> dict[str, Any]:
    """The micro-batches that read records and began in [since, until): how many, the
    records read and rows written, the seconds of each `durationMs` part summed, the
    records per second of the batches' own time (`triggerExecution`), the mean batch's
    parts in ms, and the first batches' `addBatch` seconds."""
    batches = [p for p in progress if p["rows"] > 0 and since <= p["start_s"] < until]
    if not batches:
        return {"batches": 0}
    parts: dict[str, float] = {}
    for p in batches:
        for part, ms in p.get("durationMs", {}).items():
            parts[part] = parts.get(part, 0.0) + ms / 1000
    records = sum(p["rows"] for p in batches)
    written = sum(int((p.get("sink") or {}).get("numOutputRows", -1)) for p in batches)
    trigger = parts.get("triggerExecution", 0.0)
    return {
        "batches": len(batches),
        "input_records": records,
        "output_rows": written,
        "seconds": {k: round(v, 2) for k, v in sorted(parts.items())},
        "mean_ms": {k: round(v * 1000 / len(batches)) for k, v in sorted(parts.items())},
        "records_per_s_of_batch_time": round(records / trigger, 1) if trigger else None,
        "add_batch_s_first_20": [
            round(p["durationMs"].get("addBatch", 0) / 1000, 2) for p in batches[:20]
        ],
    }


# --- the phases ----------------------------------------------------------------------------


def load() -> float:
    return round(os.getloadavg()[0], 2)


def pull_phase(
    world: World, engine: sa.Engine, start: dict[int, int], ends: dict[int, int], name: str,
    backlog: int,
) -> dict[str, Any]:  # fmt: skip
    """The delivery query pulls the backlog (the journal's consumer at the stream's end):
    events per second from the start of its first micro-batch that read records to the
    last event stored (followed by the consumer offsets every 0.1 s)."""
    reset(world, engine, start)
    ChangeStreamReader(engine).commit_offsets(JOURNAL_CONSUMER, ends)
    records = sum(ends[p] - at for p, at in start.items())
    location = world.directory / f"journal-{name}"
    events = world.directory / f"eventlog-{name}"
    figures: dict[str, Any] = {"load_before": load()}
    with (
        event_log(events) as env,
        pipeline_process(
            world, MASTER, name, env={**env, "RIPPLE_JOURNAL_LOCATION": str(location)}
        ) as process,
    ):
        started = time.time()
        log = world.directory / f"pipeline-{name}.log"
        running = 0.0
        with progress_bar(console) as bar:
            task = bar.add_task(f"{name}: pull {backlog:,} events", total=backlog)

            def all_stored() -> bool:  # followed from the start: a batch may precede running
                nonlocal running
                if not running and "pipeline running" in log.read_text():
                    running = time.time()
                n = delivered_records(engine, start)
                bar.update(task, completed=n * backlog // records)
                return n >= records

            wait_until(process, "every backlog event", all_stored, 1800, poll_s=0.1)
        done = time.time()
        wait_until(process, "pipeline running", lambda: "pipeline running" in log.read_text(), 600)
        running = running or time.time()
        figures["load_after"] = load()
    stored = subscription_count(engine)
    if stored != backlog:
        raise RuntimeError(f"the subscription holds {stored} events, not {backlog}")
    progress = query_progress(events, DELIVERY_QUERY)
    first = first_batch_start(progress)
    figures.update(
        pull_events_per_s=round(backlog / (done - first), 1),
        pull_events_per_s_from_running=round(backlog / (done - running), 1),
        seconds=round(done - first, 2),
        start_to_running_s=round(running - started, 1),
        first_batch_after_running_s=round(first - running, 2),
        progress=progress_summary(progress),
    )
    return figures


def journal_phase(
    world: World, engine: sa.Engine, start: dict[int, int], ends: dict[int, int], name: str,
    args: argparse.Namespace, visibility: bool,
) -> dict[str, Any]:  # fmt: skip
    """The journal's query writes the backlog (the delivery query at the stream's end):
    rows per second from the start of its first micro-batch that read records to the
    reader's read of the batch that completes the backlog; then, if `visibility`, the delay
    from a commit to its row read at a steady rate."""
    reset(world, engine, ends)
    ChangeStreamReader(engine).commit_offsets(JOURNAL_CONSUMER, start)
    backlog = args.events
    location = world.directory / f"journal-{name}"
    table = Path(journal_table(str(location)))
    events = world.directory / f"eventlog-{name}"
    figures: dict[str, Any] = {"load_before": load()}
    with (
        event_log(events) as env,
        pipeline_process(
            world, MASTER, name, env={**env, "RIPPLE_JOURNAL_LOCATION": str(location)}
        ) as process,
    ):
        watcher = Watcher(table)
        try:
            started = time.time()
            log = world.directory / f"pipeline-{name}.log"
            running = 0.0
            with progress_bar(console) as bar:
                task = bar.add_task(f"{name}: journal {backlog:,} events", total=backlog)

                def all_written() -> bool:  # as the pull's, from the start
                    nonlocal running
                    if not running and "pipeline running" in log.read_text():
                        running = time.time()
                    watcher.check()
                    bar.update(task, completed=watcher.rows)
                    return watcher.rows >= backlog

                wait_until(process, "every backlog row", all_written, 1800, poll_s=0.1)
            wait_until(
                process, "pipeline running", lambda: "pipeline running" in log.read_text(), 600
            )
            running = running or time.time()
            if watcher.rows != backlog:
                raise RuntimeError(f"the journal holds {watcher.rows} rows, not {backlog}")
            done = watcher.batches[-1].seen_ns / 1e9
            figures.update(
                start_to_running_s=round(running - started, 1),
                journal_batches=len(watcher.batches),
                load_after_backlog=load(),
            )
            if visibility:
                figures.update(visible(world, process, watcher, args, name))
        finally:
            watcher.stop()
    progress = query_progress(events, JOURNAL_QUERY)
    first = first_batch_start(progress)
    figures.update(
        journal_rows_per_s=round(backlog / (done - first), 1),
        journal_rows_per_s_from_running=round(backlog / (done - running), 1),
        seconds=round(done - first, 2),
        first_batch_after_running_s=round(first - running, 2),
        progress=progress_summary(progress, until=done),
    )
    if visibility:
        figures["visible_progress"] = progress_summary(progress, since=done)
    return figures


def visible(
    world: World, process: Any, watcher: Watcher, args: argparse.Namespace, name: str
) -> dict[str, Any]:
    """Warm the path, then `--rate` commits per second for `--seconds`; the delays from each
    commit to the reader's first read of its row."""
    watcher.read_keys = True
    warm = [f"warm-{name}-{i}" for i in range(20)]
    put_keys(world, JOURNAL_BUCKET, warm)
    wait_until(process, "the warm-up rows", lambda: all(k in watcher.seen for k in warm), 300)
    load_before = load()
    commits = paced_commits(
        world,
        args.rate,
        args.seconds,
        f"vis-{name}",
        f"{name}: {args.rate:g} commits/s",
        lambda: len(watcher.seen) - len(warm),
        bucket=JOURNAL_BUCKET,
    )
    load_after = load()
    try:
        wait_until(process, "the last rows", lambda: all(k in watcher.seen for k in commits), 60)
    except RuntimeError as e:
        if "timed out" not in str(e):
            raise
    watcher.check()
    delays = sorted((watcher.seen[k] - ns) / 1e9 for k, ns in commits.items() if k in watcher.seen)
    if not delays:
        raise RuntimeError("the reader saw none of the committed rows")
    return {
        "journal_visible_p50_s": round(percentile(delays, 50), 3),
        "journal_visible_p99_s": round(percentile(delays, 99), 3),
        "journal_visible_max_s": round(delays[-1], 3),
        "visible_rows": len(delays),
        "visible_missing": len(commits) - len(delays),
        "visible_load_before": load_before,
        "visible_load_after": load_after,
    }


# --- the run -------------------------------------------------------------------------------


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="Figures on a shared 2-core machine are indicative: Spark, PostgreSQL, the "
        "writers and the reader share the cores.",
    )
    parser.add_argument("--events", type=int, default=200_000, help="the backlog")
    parser.add_argument("--rate", type=float, default=200, help="visibility: commits per second")
    parser.add_argument("--seconds", type=float, default=30, help="visibility: how long")
    parser.add_argument("--rounds", type=int, default=1, help="pull and journal phases, alternated")
    parser.add_argument("--quick", action="store_true", help="smoke: 20,000 events, 10 s")
    parser.add_argument(
        "--keep-logs", type=Path, help="copy the pipelines' logs and Spark event logs here"
    )
    args = parser.parse_args()
    if args.quick:
        args.events, args.seconds = min(args.events, 20_000), min(args.seconds, 10)
    return args


def main() -> int:
    args = parse_args()
    results: dict[str, Any] = {}
    with (
        tempfile.TemporaryDirectory(prefix="ripple-bench-journal-") as tmp,
        fresh_postgres_database(ADMIN_URL, f"ripple_bench_journal_{uuid.uuid4().hex[:12]}") as url,
    ):
        world = make_world(url, Path(tmp), UNUSED_HOOK)
        db = Metabase(url)
        create_bucket(db, BucketLocation(world.project_id, JOURNAL_BUCKET))
        for bucket in (*world.buckets, JOURNAL_BUCKET):  # from now on: before the backlog
            JournalStore(db).put(world.project_id, bucket, None, "bench")
        db.dispose()
        engine = sa.create_engine(url, pool_size=1)
        start = stream_ends(engine)
        results["load_before_fill"] = load()
        fill_s = fill_puts(world, args.events, 2)
        ends = stream_ends(engine)
        results["baselines"] = {"fill_commits_per_s": round(args.events / fill_s, 1)}
        phases: list[tuple[str, str]] = []
        for r in range(1, args.rounds + 1):
            pair = [("pull", f"pull-{r}"), ("journal", f"journal-{r}")]
            phases += pair if r % 2 else pair[::-1]
        last_journal = max(i for i, (kind, _) in enumerate(phases) if kind == "journal")
        for i, (kind, name) in enumerate(phases):
            if kind == "pull":
                results[name] = pull_phase(world, engine, start, ends, name, args.events)
            else:
                results[name] = journal_phase(
                    world, engine, start, ends, name, args, visibility=i == last_journal
                )
            shown = {k: v for k, v in results[name].items() if not k.endswith("progress")}
            console.print(f"{name}: {shown}")
        engine.dispose()
        if args.keep_logs:
            args.keep_logs.mkdir(parents=True, exist_ok=True)
            for path in Path(tmp).glob("*"):
                if path.name.startswith(("pipeline-", "eventlog-")):
                    copy = shutil.copytree if path.is_dir() else shutil.copy2
                    copy(path, args.keep_logs / path.name)
    pulls = [v for k, v in results.items() if k.startswith("pull-")]
    journals = [v for k, v in results.items() if k.startswith("journal-")]
    visibility = next(j for j in journals if "journal_visible_p99_s" in j)
    headline = {
        "pull_events_per_s": statistics.median(p["pull_events_per_s"] for p in pulls),
        "journal_rows_per_s": statistics.median(j["journal_rows_per_s"] for j in journals),
        "pull_events_per_s_from_running": statistics.median(
            p["pull_events_per_s_from_running"] for p in pulls
        ),
        "journal_rows_per_s_from_running": statistics.median(
            j["journal_rows_per_s_from_running"] for j in journals
        ),
        "journal_to_pull": 0.0,
        "journal_visible_p50_s": visibility["journal_visible_p50_s"],
        "journal_visible_p99_s": visibility["journal_visible_p99_s"],
    }
    headline["journal_to_pull"] = round(
        headline["journal_rows_per_s"] / headline["pull_events_per_s"], 3
    )
    results = {**headline, **results}
    table = Table(title=f"journal: {args.events:,}-event backlog, {args.rate:g} commits/s")
    table.add_column("figure")
    for name in (k for k in results if k.startswith(("pull-", "journal-"))):
        table.add_column(name, justify="right")
    table.add_column("target", justify="right")
    names = [k for k in results if k.startswith(("pull-", "journal-"))]
    for figure in (
        "pull_events_per_s",
        "journal_rows_per_s",
        "journal_visible_p50_s",
        "journal_visible_p99_s",
        "seconds",
        "load_before",
    ):
        cells = [results[n].get(figure) for n in names]
        target = TARGETS.get(figure)
        table.add_row(
            figure,
            *("" if c is None else f"{c:,}" for c in cells),
            "" if target is None else f"{target:,}" if not isinstance(target, str) else target,
        )
    console.print(table)
    console.print(
        f"journal ÷ pull: {results['journal_to_pull']} (target ≥ 1); "
        f"visible p99 {results['journal_visible_p99_s']} s (target ≤ 2)"
    )
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
