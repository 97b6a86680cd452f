"""Benchmark: what the change stream costs the metabase's writers, and how fast it reads.

Commits per second of PUTs (`commit_inline_object`, a new key each) for
  (a) a bucket without eventing, the change stream absent (dropped),
  (b) a bucket without eventing, the stream present: transaction exclusion,
  (c) a bucket with eventing: records written in every transaction,
on SQLite and PostgreSQL, with 1 and 8 writer processes; rounds alternate the cases and
the medians are reported. Then the reader reads every record of (c) (records per second),
and the stored size of the change records (table and index) is divided by their events.
The last line is one JSON object:
{"postgresql": {"excluded_ratio": b/a, "eventing_ratio": c/a, "read_records_per_s": …,
 "bytes_per_event": …, …}, "sqlite": {…}}  (ratios at 8 writers)

    .venv/bin/python bench/changestream.py [--commits 400] [--rounds 3]
        [--databases sqlite,postgresql]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import sqlalchemy as sa
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from ripple.changestream.ddl import drop_change_stream
from ripple.changestream.reader import ChangeStreamReader
from ripple.metabase import (
    BucketLocation,
    Metabase,
    ObjectLocation,
    commit_inline_object,
    create_bucket,
    create_project,
)
from ripple.metabase.migrate import upgrade

console = Console(stderr=True)
ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
CASES = ("a", "b", "c")
EVENTED = "evented"


def _writer(url: str, project: str, bucket: str, prefix: str, n: int, out: Any) -> None:
    db = Metabase(url, eventing=lambda _p, b: b == EVENTED)
    loc = BucketLocation(uuid.UUID(project), bucket)
    out.put(("ready", 0.0))
    start = time.perf_counter()
    for i in range(n):
        commit_inline_object(
            db,
            ObjectLocation(loc.project_id, loc.bucket_name, f"{prefix}/{i:06}.jpg"),
            b"x" * 64,
            etag="d41d8cd98f00b204e9800998ecf8427e",
        )
    out.put(("done", time.perf_counter() - start))
    db.dispose()


def run_writers(url: str, bucket: BucketLocation, writers: int, n: int) -> float:
    """Commits per second of `writers` processes each committing `n` new objects."""
    ctx = mp.get_context("fork")
    out = ctx.Queue()
    tag = uuid.uuid4().hex[:8]
    procs = [
        ctx.Process(
            target=_writer,
            args=(url, str(bucket.project_id), bucket.bucket_name, f"{tag}-{w}", n, out),
        )
        for w in range(writers)
    ]
    for p in procs:
        p.start()
    for _ in procs:
        assert out.get()[0] == "ready"
    start = time.perf_counter()
    for _ in procs:
        kind, _elapsed = out.get()
        assert kind == "done"
    elapsed = time.perf_counter() - start
    for p in procs:
        p.join()
        if p.exitcode != 0:
            raise RuntimeError(f"a writer failed (exit code {p.exitcode})")
    return writers * n / elapsed


@contextmanager
def databases(kind: str) -> Iterator[dict[str, str]]:
    """A fresh database per case, so each grows only by its own writes."""
    if kind == "sqlite":
        with tempfile.TemporaryDirectory() as tmp:
            yield {case: f"sqlite:///{Path(tmp) / case}.db" for case in CASES}
        return
    names = {case: f"ripple_bench_{case}_{uuid.uuid4().hex[:8]}" for case in CASES}
    with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
        for db_name in names.values():
            conn.execute(f'CREATE DATABASE "{db_name}"')
    try:
        base = sa.make_url(ADMIN_URL)
        yield {k: base.set(database=v).render_as_string(False) for k, v in names.items()}
    finally:
        with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
            for db_name in names.values():
                conn.execute(f'DROP DATABASE IF EXISTS "{db_name}" WITH (FORCE)')


def prepare(url: str, drop_stream: bool) -> tuple[BucketLocation, BucketLocation]:
    db = Metabase(url)
    upgrade(db)
    if drop_stream:
        with db.write() as conn:
            drop_change_stream(conn, "bucket_eventing")
    project = create_project(db, "bench")
    plain = create_bucket(db, BucketLocation(project.id, "plain"))
    evented = create_bucket(db, BucketLocation(project.id, EVENTED))
    db.dispose()
    return (
        BucketLocation(plain.project_id, plain.name),
        BucketLocation(evented.project_id, evented.name),
    )


def stored_bytes(url: str) -> tuple[int, int]:
    """(bytes of change records and their index, events they hold)."""
    db = Metabase(url)
    with db.read() as conn:
        if db.dialect == "postgresql":
            size = conn.execute(
                sa.text("SELECT pg_total_relation_size('change_records')")
            ).scalar_one()
        else:
            size = conn.execute(
                sa.text(
                    "SELECT sum(pgsize) FROM dbstat WHERE name IN "
                    "(SELECT name FROM sqlite_schema WHERE tbl_name = 'change_records')"
                )
            ).scalar_one()
        mods = conn.execute(sa.text("SELECT mods FROM change_records")).scalars().all()
    db.dispose()
    return int(size), sum(len(json.loads(m)) for m in mods)


def read_all(url: str) -> tuple[int, float]:
    db = Metabase(url)
    reader = ChangeStreamReader(db.engine)
    start = time.perf_counter()
    count = sum(1 for p in range(reader.partitions()) for _ in reader.drain(p, limit=5000))
    elapsed = time.perf_counter() - start
    db.dispose()
    return count, elapsed


def bench(kind: str, commits: int, rounds: int, progress: Progress) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    with databases(kind) as urls:
        where = {
            "a": (urls["a"], prepare(urls["a"], drop_stream=True)[0]),
            "b": (urls["b"], prepare(urls["b"], drop_stream=False)[0]),
            "c": (urls["c"], prepare(urls["c"], drop_stream=False)[1]),
        }
        task = progress.add_task(f"{kind}: writers", total=2 * rounds * len(CASES))
        for writers in (1, 8):
            rates: dict[str, list[float]] = {c: [] for c in CASES}
            per_writer = max(1, commits // writers) if writers > 1 else commits
            for r in range(rounds):
                order = CASES if r % 2 == 0 else tuple(reversed(CASES))
                for case in order:
                    url, bucket = where[case]
                    rates[case].append(run_writers(url, bucket, writers, per_writer))
                    progress.advance(task)
            medians = {c: statistics.median(v) for c, v in rates.items()}
            figures[f"writers_{writers}"] = {
                "a_commits_per_s": round(medians["a"], 1),
                "b_commits_per_s": round(medians["b"], 1),
                "c_commits_per_s": round(medians["c"], 1),
                "excluded_ratio": round(medians["b"] / medians["a"], 3),
                "eventing_ratio": round(medians["c"] / medians["a"], 3),
            }
        count, elapsed = read_all(urls["c"])
        size, events = stored_bytes(urls["c"])
    top = figures["writers_8"]
    return {
        "excluded_ratio": top["excluded_ratio"],
        "eventing_ratio": top["eventing_ratio"],
        "read_records_per_s": round(count / elapsed, 1),
        "bytes_per_event": round(size / max(events, 1), 1),
        "records": count,
        **figures,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commits", type=int, default=400, help="commits per case and round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (medians reported)")
    parser.add_argument("--databases", default="sqlite,postgresql")
    args = parser.parse_args()
    results: dict[str, Any] = {}
    with Progress(console=console, transient=True) as progress:
        for kind in args.databases.split(","):
            results[kind] = bench(kind, args.commits, args.rounds, progress)
    table = Table(title="change stream cost (commits/s, medians)")
    for column in (
        "database",
        "writers",
        "a: no stream",
        "b: excluded",
        "c: eventing",
        "b/a",
        "c/a",
    ):
        table.add_column(column)
    for kind, r in results.items():
        for writers in (1, 8):
            f = r[f"writers_{writers}"]
            table.add_row(
                kind,
                str(writers),
                str(f["a_commits_per_s"]),
                str(f["b_commits_per_s"]),
                str(f["c_commits_per_s"]),
                str(f["excluded_ratio"]),
                str(f["eventing_ratio"]),
            )
    console.print(table)
    for kind, r in results.items():
        console.print(
            f"{kind}: reader {r['read_records_per_s']} records/s over {r['records']} "
            f"records; {r['bytes_per_event']} stored bytes per event"
        )
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
