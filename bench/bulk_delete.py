"""Benchmark: one DeleteObjects of N objects against N single DeleteObject calls.

For each database (SQLite in a temporary directory, PostgreSQL in a fresh database that is
dropped afterwards), each repetition fills an unversioned bucket with N committed objects,
times deleting them with one `delete_objects` call, fills it again and times N
`delete_object` calls. Prints the medians and their ratio; the last line is one JSON object:
{"postgresql": {"bulk_s": …, "single_s": …, "ratio": …}, "sqlite": {…}}

    .venv/bin/python bench/bulk_delete.py [--objects 1000] [--repetitions 5]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import sqlalchemy as sa
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from common import fresh_postgres_database, progress_bar  # bench/common.py (bench/ is on sys.path)
from ripple.metabase import (
    BucketLocation,
    DeleteObjectsItem,
    Metabase,
    Object,
    ObjectLocation,
    Status,
    create_bucket,
    create_project,
    delete_object,
    delete_objects,
)
from ripple.metabase.migrate import upgrade
from ripple.metabase.rows import object_values
from ripple.metabase.schema import objects

console = Console(stderr=True)


def fill(db: Metabase, bucket: BucketLocation, n: int) -> list[str]:
    """N committed objects, written in one statement (set-up, not timed)."""
    now = db.now()
    keys = [f"photos/2026/{i:05}.jpg" for i in range(n)]
    rows = [
        object_values(
            Object(
                project_id=bucket.project_id,
                bucket_name=bucket.bucket_name,
                object_key=key,
                version=1,
                stream_id=uuid.uuid4(),
                status=Status.COMMITTED_UNVERSIONED,
                created_at=now,
                total_plain_size=4096,
                etag=hashlib.md5(key.encode()).hexdigest(),
            )
        )
        for key in keys
    ]
    with db.write() as conn:
        for start in range(0, n, 1000):
            conn.execute(sa.insert(objects).values(rows[start : start + 1000]))
    return keys


def remaining(db: Metabase) -> int:
    with db.read() as conn:
        return int(conn.execute(sa.select(sa.func.count()).select_from(objects)).scalar_one())


def measure(
    db: Metabase, n: int, repetitions: int, progress: Progress, label: str
) -> dict[str, float]:
    project = create_project(db, "bench")
    bucket = BucketLocation(project.id, "bench-bucket")
    create_bucket(db, bucket)
    bulk: list[float] = []
    single: list[float] = []
    task = progress.add_task(label, total=repetitions * 2)
    for _ in range(repetitions):
        keys = fill(db, bucket, n)
        started = time.perf_counter()
        result = delete_objects(db, bucket, [DeleteObjectsItem(k) for k in keys], quiet=True)
        bulk.append(time.perf_counter() - started)
        assert not result.errors, result.errors[:3]
        assert remaining(db) == 0, "bulk delete left objects behind"
        progress.advance(task)

        keys = fill(db, bucket, n)
        started = time.perf_counter()
        for key in keys:
            delete_object(db, bucket_key(bucket, key))
        single.append(time.perf_counter() - started)
        assert remaining(db) == 0, "single deletes left objects behind"
        progress.advance(task)
    console.print(f"{label}: bulk samples (s) {[round(x, 4) for x in bulk]}")
    console.print(f"{label}: single samples (s) {[round(x, 3) for x in single]}")
    bulk_s = statistics.median(bulk)
    single_s = statistics.median(single)
    return {
        "bulk_s": round(bulk_s, 5),
        "single_s": round(single_s, 5),
        "ratio": round(single_s / bulk_s, 1),
    }


def bucket_key(bucket: BucketLocation, key: str) -> ObjectLocation:
    return ObjectLocation(bucket.project_id, bucket.bucket_name, key)


@contextmanager
def sqlite_metabase() -> Iterator[Metabase]:
    with tempfile.TemporaryDirectory() as tmp:
        db = Metabase(f"sqlite:///{Path(tmp) / 'metabase.db'}")
        upgrade(db)
        try:
            yield db
        finally:
            db.dispose()


@contextmanager
def postgres_metabase(admin_url: str) -> Iterator[Metabase]:
    with fresh_postgres_database(admin_url, f"ripple_bench_{uuid.uuid4().hex[:10]}") as url:
        db = Metabase(url)
        try:
            upgrade(db)
            yield db
        finally:
            db.dispose()


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--objects", type=int, default=1000, help="objects deleted per repetition (≤ 1000)"
    )
    parser.add_argument(
        "--repetitions", type=int, default=5, help="repetitions; medians are reported"
    )
    parser.add_argument(
        "--postgres-url",
        default="postgresql://postgres@127.0.0.1:5432/postgres",
        help="an admin URL; a fresh database is created beside it and dropped afterwards",
    )
    parser.add_argument("--databases", default="sqlite,postgresql", help="comma-separated")
    args = parser.parse_args()
    if not 1 <= args.objects <= 1000:
        parser.error("--objects must be between 1 and 1000 (one DeleteObjects request)")

    figures: dict[str, dict[str, float]] = {}
    with progress_bar(console) as progress:
        for name in args.databases.split(","):
            opener = sqlite_metabase() if name == "sqlite" else postgres_metabase(args.postgres_url)
            with opener as db:
                figures[name] = measure(db, args.objects, args.repetitions, progress, name)

    table = Table(title=f"{args.objects} deletes, median of {args.repetitions}")
    for column in ("database", "DeleteObjects (s)", f"{args.objects} x DeleteObject (s)", "ratio"):
        table.add_column(column, justify="right")
    for name, f in figures.items():
        table.add_row(name, f"{f['bulk_s']:.4f}", f"{f['single_s']:.3f}", f"{f['ratio']}x")
    console.print(table)
    print(json.dumps(dict(sorted(figures.items()))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
