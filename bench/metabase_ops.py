"""Benchmark: the metabase's CPU per PutObject and GetObject, in this process, without HTTP.

On a fresh metabase (SQLite in a temporary directory; PostgreSQL: a database
`ripple_bench_<random>` created for the run and dropped at its end), one bucket with eventing
(every PUT writes its change record): `--ops` `put_object` calls (4 KiB, data placed
elsewhere: only the commit) over `--keys` keys, so most replace the key's version, then as
many `get_object` calls; after `--warmup` of each. Reported per operation: CPU of this
process (`time.process_time`: the client side, what a gateway pays) and wall time; on
PostgreSQL also the server's CPU (its processes' /proc times: it must run on this machine).
Baseline, same run: an empty write transaction (`db.write()` running `SELECT 1`), the
floor every write pays.

The last line is one JSON object: {"sqlite": {"put_cpu_ms", "get_cpu_ms",
"empty_write_cpu_ms", "put_wall_ms", …}, "postgresql": {…}}

    PYTHONPATH=src .venv/bin/python bench/metabase_ops.py [--ops 3000] [--keys 500]
        [--warmup 300] [--databases sqlite,postgresql]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from common import fresh_postgres_database, postgres_cpu_s, spent  # bench/common.py (on sys.path)
from ripple.metabase import (
    BucketLocation,
    Metabase,
    ObjectLocation,
    create_bucket,
    create_project,
    get_object,
)
from ripple.metabase.migrate import upgrade
from ripple.metabase.put_object import put_object

ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"


@contextmanager
def metabase(kind: str) -> Iterator[Metabase]:
    if kind == "sqlite":
        with tempfile.TemporaryDirectory() as directory:
            db = Metabase(f"sqlite:///{directory}/metabase.db")
            yield db
            db.dispose()
        return
    with fresh_postgres_database(ADMIN_URL, f"ripple_bench_{uuid.uuid4().hex[:12]}") as url:
        db = Metabase(url)
        yield db
        db.dispose()


def measure(kind: str, n: int, step: Callable[[int], object]) -> dict[str, float]:
    server = postgres_cpu_s() if kind == "postgresql" else 0.0
    with spent() as took:
        for i in range(n):
            step(i)
    found = {"cpu_ms": took.cpu_s / n * 1000, "wall_ms": took.wall_s / n * 1000}
    if kind == "postgresql":
        found["server_cpu_ms"] = (postgres_cpu_s() - server) / n * 1000
    return {k: round(v, 3) for k, v in found.items()}


def run(kind: str, ops: int, keys: int, warmup: int) -> dict[str, float]:
    with metabase(kind) as db:
        upgrade(db)
        project = create_project(db, "bench")
        bucket = BucketLocation(project.id, "bench-bucket")
        create_bucket(db, bucket)
        db.eventing = lambda _project, _bucket: True

        def put(i: int) -> None:
            loc = ObjectLocation(project.id, bucket.bucket_name, f"key-{i % keys:05}")
            put_object(db, loc, stream_id=uuid.uuid4(), size=4096, etag="0" * 32)

        def get(i: int) -> None:
            get_object(db, ObjectLocation(project.id, bucket.bucket_name, f"key-{i % keys:05}"))

        def empty_write(_: int) -> None:
            with db.write() as conn:
                conn.exec_driver_sql("SELECT 1")

        figures: dict[str, float] = {}
        for name, step in (("put", put), ("get", get), ("empty_write", empty_write)):
            measure(kind, warmup, step)
            for figure, value in measure(kind, ops, step).items():
                figures[f"{name}_{figure}"] = value
        return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", type=int, default=3000)
    parser.add_argument("--keys", type=int, default=500)
    parser.add_argument("--warmup", type=int, default=300)
    parser.add_argument("--databases", default="sqlite,postgresql")
    args = parser.parse_args()
    results = {}
    for kind in args.databases.split(","):
        results[kind] = run(kind, args.ops, args.keys, args.warmup)
        print(kind, " ".join(f"{k}={v}" for k, v in results[kind].items()), flush=True)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
