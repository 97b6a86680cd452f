"""Benchmark: what the change stream costs the metabase's writers, and how fast it reads.

Commits per second of PUTs (`put_object` of inline data, a new key each) for
  (a) a bucket without eventing, the change stream absent (dropped),
  (b) a bucket without eventing, the stream present: transaction exclusion,
  (c) a bucket with eventing: records written in every transaction,
  (d) only with --unordered, PostgreSQL: as (c), but each record is a plain INSERT with a
      position from the writer's own counter, not from its partition's row. No mode of
      ripple's (a reader could skip records): what the record costs without the commit
      ordering, so c/d is what taking positions in commit order costs,
on SQLite and PostgreSQL, with 1 and 8 writer processes; rounds alternate the cases and
the medians are reported. Per case it also reports where the time went, per commit: CPU of
the writer processes, and of it the commit's last step (the records built and inserted, and
the COMMIT; for (a) and (b) the COMMIT alone), which is the writer's cost of recording
measured on its own, steadier than the whole; on PostgreSQL, the server's processes' CPU
(read from /proc: the server must run on this machine) and bytes of WAL. With 8 writers on a
2-core machine the commits are CPU-bound, so c/a is about the ratio of (writer + server) CPU
per commit. Then the reader reads every record of (c) (records per second), and the stored
size of the change records (table and index) is divided by their events. Beside the ratio
of the medians, c/a of each round alone (its (a) and (c) ran back to back) shows how much a
run's own rounds spread.
The last line is one JSON object:
{"postgresql": {"excluded_ratio": b/a, "eventing_ratio": c/a, "read_records_per_s": …,
 "bytes_per_event": …, …}, "sqlite": {…}}  (ratios at 8 writers)

    .venv/bin/python bench/changestream.py [--commits 400] [--rounds 3]
        [--databases sqlite,postgresql] [--unordered]
"""

from __future__ import annotations

import argparse
import itertools
import json
import multiprocessing as mp
import queue
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import sqlalchemy as sa
from rich.console import Console
from rich.progress import Progress
from rich.table import Table
from sqlalchemy.engine import Connection

from common import (  # bench/common.py (bench/ is on sys.path)
    fresh_postgres_database,
    postgres_cpu_s,
    progress_bar,
    spent,
)
from ripple.changestream import commit_pipeline
from ripple.changestream import writer as stream_writer
from ripple.changestream.ddl import drop_change_stream
from ripple.changestream.reader import ChangeStreamReader
from ripple.metabase import (
    BucketLocation,
    Metabase,
    ObjectLocation,
    create_bucket,
    create_project,
)
from ripple.metabase.migrate import upgrade
from ripple.metabase.put_object import put_object
from ripple.metabase.rows import new_stream_id

console = Console(stderr=True)
ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
CASES = ("a", "b", "c", "d")
EVENTED = "evented"
DATA = b"x" * 64


@dataclass(frozen=True)
class Run:
    """One case's writers in one round: commits per second, and per commit the writers' CPU,
    the database server's CPU (None unless PostgreSQL on this machine) and WAL bytes."""

    commits_per_s: float
    writer_cpu_us: float
    commit_cpu_us: float
    server_cpu_us: float | None
    wal_bytes: float | None


def _record_unordered() -> None:
    """Case (d), in this writer process: insert each record with a position from a counter of
    its own (random start, so writers do not collide) instead of its partition's row,
    through the same libpq pipeline with the COMMIT as the writer's own records."""
    positions = itertools.count(uuid.uuid4().int >> 88 << 20)
    values = ", ".join(["%s"] * 14)
    unordered_insert = (
        f"INSERT INTO change_records ({stream_writer._RECORD_COLUMNS}, position) VALUES ({values})"
    )

    def insert_and_commit(conn: Connection, rows: list[tuple[Any, ...]]) -> None:
        driver = conn.connection.driver_connection
        if not isinstance(driver, psycopg.Connection) or not commit_pipeline.available(driver):
            raise RuntimeError("case (d) needs psycopg's connection, as the writer's pipeline")
        numbered = [(*row, next(positions)) for row in rows]
        commit_pipeline.insert_and_commit(driver, unordered_insert, numbered)

    stream_writer._insert_and_commit = insert_and_commit


def _time_commit_step(db: Metabase) -> list[float]:
    """Add up the CPU this writer spends in each commit's last step, the one that records
    the changes: the records built and inserted, and the COMMIT (on PostgreSQL sent with the
    INSERT; the driver's commit after it then finds nothing to do). For (a) and (b), the
    COMMIT alone. The running total, in seconds, is the list's one item."""
    total = [0.0]

    def timed(fn: Any) -> Any:
        def step(*args: Any, **kwargs: Any) -> Any:
            start = time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                total[0] += time.process_time() - start

        return step

    changestreams: Any = db.changestreams
    changestreams.flush = timed(changestreams.flush)
    dialect: Any = db.engine.dialect
    dialect.do_commit = timed(dialect.do_commit)
    return total


def _writer(
    url: str,
    project: str,
    bucket: str,
    prefix: str,
    n: int,
    unordered: bool,
    out: Any,
    go: Any,
    leave: Any,
) -> None:
    if unordered:
        _record_unordered()
    db = Metabase(url, eventing=lambda _p, b: b == EVENTED)
    commit_step = _time_commit_step(db)
    loc = BucketLocation(uuid.UUID(project), bucket)
    out.put(("ready", 0.0, 0.0))
    go.wait()  # all start together (and no "done" overtakes another writer's "ready")
    with spent() as writing:
        for i in range(n):
            put_object(
                db,
                ObjectLocation(loc.project_id, loc.bucket_name, f"{prefix}/{i:06}.jpg"),
                stream_id=new_stream_id(),
                size=len(DATA),
                etag="d41d8cd98f00b204e9800998ecf8427e",
                inline_data=DATA,
            )
    out.put(("done", writing.cpu_s, commit_step[0]))
    leave.wait()  # the server's CPU is read while this writer's backend still lives
    db.dispose()


def wal_position() -> int:
    with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
        row = conn.execute("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn").fetchone()
    assert row is not None
    return int(row[0])


def _receive(out: Any, procs: list[Any]) -> tuple[str, float, float]:
    """The next writer's message; fails, instead of waiting forever, once a writer died."""
    while True:
        try:
            message: tuple[str, float, float] = out.get(timeout=1)
            return message
        except queue.Empty:
            for p in procs:
                if p.exitcode not in (None, 0):
                    for q in procs:
                        q.kill()
                    raise RuntimeError(f"a writer failed (exit code {p.exitcode})") from None


def run_writers(
    url: str, bucket: BucketLocation, writers: int, n: int, unordered: bool = False
) -> Run:
    """`writers` processes each committing `n` new objects."""
    postgres = url.startswith("postgresql")
    ctx = mp.get_context("fork")
    out, go, leave = ctx.Queue(), ctx.Event(), ctx.Event()
    tag = uuid.uuid4().hex[:8]
    procs = [
        ctx.Process(
            target=_writer,
            args=(
                url,
                str(bucket.project_id),
                bucket.bucket_name,
                f"{tag}-{w}",
                n,
                unordered,
                out,
                go,
                leave,
            ),
        )
        for w in range(writers)
    ]
    for p in procs:
        p.start()
    for _ in procs:
        assert _receive(out, procs)[0] == "ready"
    wal = wal_position() if postgres else None
    server = postgres_cpu_s() if postgres else None
    start = time.perf_counter()
    go.set()
    writer_cpu = commit_cpu = 0.0
    for _ in procs:
        kind, cpu, commit_step = _receive(out, procs)
        assert kind == "done"
        writer_cpu += cpu
        commit_cpu += commit_step
    elapsed = time.perf_counter() - start
    server_after = postgres_cpu_s() if server is not None else None
    wal_after = wal_position() if wal is not None else None
    leave.set()
    for p in procs:
        p.join()
        if p.exitcode != 0:
            raise RuntimeError(f"a writer failed (exit code {p.exitcode})")
    commits = writers * n
    return Run(
        commits_per_s=commits / elapsed,
        writer_cpu_us=writer_cpu / commits * 1e6,
        commit_cpu_us=commit_cpu / commits * 1e6,
        server_cpu_us=None
        if server is None or server_after is None
        else (server_after - server) / commits * 1e6,
        wal_bytes=None if wal is None or wal_after is None else (wal_after - wal) / commits,
    )


@contextmanager
def databases(kind: str, cases: Sequence[str]) -> Iterator[dict[str, str]]:
    """A fresh database per case, so each grows only by its own writes."""
    if kind == "sqlite":
        with tempfile.TemporaryDirectory() as tmp:
            yield {case: f"sqlite:///{Path(tmp) / case}.db" for case in cases}
        return
    with ExitStack() as stack:
        yield {
            case: stack.enter_context(
                fresh_postgres_database(ADMIN_URL, f"ripple_bench_{case}_{uuid.uuid4().hex[:8]}")
            )
            for case in cases
        }


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
        size: int
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
        mods: list[str] = list(conn.execute(sa.text("SELECT mods FROM change_records")).scalars())
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


def per_commit(runs: list[Run]) -> dict[str, float]:
    """Medians over the rounds of what one commit cost."""
    figures = {
        name: round(statistics.median(getattr(r, name) for r in runs), 1)
        for name in ("writer_cpu_us", "commit_cpu_us")
    }
    for name in ("server_cpu_us", "wal_bytes"):
        values = [v for r in runs if (v := getattr(r, name)) is not None]
        if values:
            figures[name] = round(statistics.median(values), 1)
    return figures


def bench(
    kind: str, commits: int, rounds: int, unordered: bool, progress: Progress
) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    cases = CASES if unordered and kind == "postgresql" else CASES[:3]
    with databases(kind, cases) as urls:
        where = {
            "a": (urls["a"], prepare(urls["a"], drop_stream=True)[0]),
            "b": (urls["b"], prepare(urls["b"], drop_stream=False)[0]),
            "c": (urls["c"], prepare(urls["c"], drop_stream=False)[1]),
        }
        if "d" in cases:
            where["d"] = (urls["d"], prepare(urls["d"], drop_stream=False)[1])
        task = progress.add_task(f"{kind}: writers", total=2 * rounds * len(cases))
        for writers in (1, 8):
            runs: dict[str, list[Run]] = {c: [] for c in cases}
            per_writer = max(1, commits // writers) if writers > 1 else commits
            for r in range(rounds):
                order = cases if r % 2 == 0 else tuple(reversed(cases))
                for case in order:
                    url, bucket = where[case]
                    runs[case].append(
                        run_writers(url, bucket, writers, per_writer, unordered=case == "d")
                    )
                    progress.advance(task)
            medians = {c: statistics.median(r.commits_per_s for r in v) for c, v in runs.items()}
            # c/a of each round alone: (a) and (c) ran minutes apart at most, so the spread
            # of these is the run's own noise
            paired = [
                round(c.commits_per_s / a.commits_per_s, 3)
                for a, c in zip(runs["a"], runs["c"], strict=True)
            ]
            figures[f"writers_{writers}"] = {
                "a_commits_per_s": round(medians["a"], 1),
                "b_commits_per_s": round(medians["b"], 1),
                "c_commits_per_s": round(medians["c"], 1),
                "excluded_ratio": round(medians["b"] / medians["a"], 3),
                "eventing_ratio": round(medians["c"] / medians["a"], 3),
                "eventing_ratio_per_round": paired,
                "per_commit": {c: per_commit(v) for c, v in runs.items()},
            }
            if "d" in medians:
                figures[f"writers_{writers}"] |= {
                    "d_commits_per_s": round(medians["d"], 1),
                    "unordered_ratio": round(medians["d"] / medians["a"], 3),
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


COSTS = ("writer_cpu_us", "commit_cpu_us", "server_cpu_us", "wal_bytes")


def _cell(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commits", type=int, default=400, help="commits per case and round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (medians reported)")
    parser.add_argument("--databases", default="sqlite,postgresql")
    parser.add_argument(
        "--unordered",
        action="store_true",
        help="PostgreSQL: also case (d), records without commit-ordered positions (d/a)",
    )
    args = parser.parse_args()
    results: dict[str, Any] = {}
    with progress_bar(console) as progress:
        for kind in args.databases.split(","):
            results[kind] = bench(kind, args.commits, args.rounds, args.unordered, progress)
    table = Table(
        "database",
        "writers",
        "a: no stream",
        "b: excluded",
        "c: eventing",
        "b/a",
        "c/a",
        "d: unordered",
        "d/a",
        title="change stream cost (commits/s, medians)",
    )
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
                str(f.get("d_commits_per_s", "-")),
                str(f.get("unordered_ratio", "-")),
            )
    console.print(table)
    costs = Table(
        "database",
        "writers",
        "case",
        "writer CPU µs",
        "of it, last step",
        "server CPU µs",
        "WAL bytes",
        title="per commit (medians)",
    )
    for kind, r in results.items():
        for writers in (1, 8):
            cost = r[f"writers_{writers}"]["per_commit"]
            for case in cost:
                costs.add_row(kind, str(writers), case, *(_cell(cost[case].get(n)) for n in COSTS))
            extra = (
                _cell(None if n not in cost["a"] else cost["c"][n] - cost["a"][n]) for n in COSTS
            )
            costs.add_row(kind, str(writers), "c - a", *extra, end_section=True)
    console.print(costs)
    for kind, r in results.items():
        for writers in (1, 8):
            rounds = r[f"writers_{writers}"]["eventing_ratio_per_round"]
            console.print(f"{kind}, {writers} writers: c/a per round {rounds}")
        console.print(
            f"{kind}: reader {r['read_records_per_s']} records/s over {r['records']} "
            f"records; {r['bytes_per_event']} stored bytes per event"
        )
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
