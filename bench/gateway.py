"""Benchmark: the S3 gateway over HTTP, from boto3 clients in threads to `ripple serve`.

The gateway runs as the installed `ripple serve` in its own process (so client and server do
not share a GIL), over a fresh metabase: SQLite in a temporary directory, or a PostgreSQL
database created for the run and dropped at its end. A user is made first with `ripple user
create`; the server then starts with eventing on for one of the two buckets
(RIPPLE_BUCKET_EVENTING_BUCKETS), so that every write to that bucket writes its change
records in the same transaction. No pipeline runs: the cost measured is the writer's.

The server's delete rate limit (RIPPLE_S3_DELETE_RATE / RIPPLE_S3_DELETE_BURST, by default
100/s with bursts of 200 per project) would answer most of the benchmark's deletes with
503 SlowDown, so both are set to 1,000,000 in the server's environment.

`--threads` client threads (8), each with its own boto3 client (path-style, one attempt, a
connection pool of at least `--threads`), send requests with `--size`-byte bodies (4 KiB,
above the inline limit: the data goes to a file). After a warm-up of every operation:
  - PUT: `--objects` new keys into the bucket WITHOUT eventing and `--objects` into the
    bucket WITH eventing, in `--rounds` interleaved rounds whose order alternates (the two
    cases see the same server and a metabase of about the same size). eventing_put_ratio
    = PUT/s with eventing / PUT/s without.
  - GET, then DELETE (DeleteObject) of every object PUT into the bucket without eventing.
  - Bulk delete, `--repetitions` times: 1000 objects are PUT (not timed) and deleted by ONE
    DeleteObjects request (quiet), then 1000 more are PUT and deleted by 1000 DeleteObject
    requests from the same threads. http_bulk_delete_ratio = median seconds of the 1000
    single deletes / median seconds of the one DeleteObjects (> 1: bulk is faster).
Rates are requests answered per second of wall time (`time.perf_counter`) over the whole
phase. The table also gives each phase's per-request latency (p50, p99) and CPU per request
of the client process, the server process and (PostgreSQL) the whole PostgreSQL server,
exited backends included (so: on an otherwise idle machine).

The last line printed is one JSON object. With one database (the default, --database
sqlite), it is flat:
  {"put_ops_per_s": …, "get_ops_per_s": …, "delete_ops_per_s": …,
   "eventing_put_ratio": …, "http_bulk_delete_ratio": …}
With `--database both`, the same objects nested by database:
  {"sqlite": {…}, "postgresql": {…}}

    .venv/bin/python bench/gateway.py [--database sqlite|postgresql|both] [--objects 2000]
        [--threads 8] [--size 4096] [--rounds 3] [--repetitions 3]
        [--profile FILE] [--profile-clock cpu|wall]
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import contextlib
import json
import os
import re
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
import sqlalchemy as sa
from botocore.config import Config
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from common import (  # bench/common.py (bench/ is on sys.path)
    CLOCK_TICK,
    fresh_postgres_database,
    postgres_cpu_s,
    progress_bar,
)
from ripple.config import ENVIRONMENT_VARIABLES

console = Console(stderr=True)
if not console.is_terminal:  # a log file: wide enough for the tables
    console = Console(stderr=True, width=150)

RIPPLE = Path(sys.executable).with_name("ripple")
ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
USER = "bench"
PLAIN = "bench-plain"  # the bucket without eventing
EVENTING = "bench-eventing"  # the bucket with eventing
TOPIC = "projects/ripple-bench/topics/gateway"
DELETE_RATE = 1_000_000  # RIPPLE_S3_DELETE_RATE and RIPPLE_S3_DELETE_BURST of the server
BULK = 1000  # keys per DeleteObjects request


def _bar() -> Progress:
    return progress_bar(console)


# --- the database and the server --------------------------------------------------------


@contextmanager
def database(kind: str, workdir: Path, admin_url: str) -> Iterator[str]:
    """The metabase URL: SQLite in `workdir`, or a fresh PostgreSQL database dropped
    afterwards."""
    if kind == "sqlite":
        yield f"sqlite:///{workdir / 'metabase.db'}"
        return
    with fresh_postgres_database(admin_url, f"ripple_bench_{secrets.token_hex(6)}") as url:
        yield url


def environment(**env: str) -> dict[str, str]:
    """This process's environment without RIPPLE_* variables, plus `env`."""
    environ = {k: v for k, v in os.environ.items() if k not in ENVIRONMENT_VARIABLES}
    environ.update(env)
    return environ


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def create_user(workdir: Path, env: dict[str, str]) -> tuple[str, str]:
    """`ripple user create`: (access key, secret key)."""
    done = subprocess.run(
        [str(RIPPLE), "user", "create", USER],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if done.returncode != 0:
        raise RuntimeError(f"ripple user create failed: {done.stderr.strip()}")
    access = re.search(r"access key: (\S+)", done.stdout)
    secret = re.search(r"secret key: (\S+)", done.stdout)
    if access is None or secret is None:
        raise RuntimeError(f"no keys in the output of ripple user create:\n{done.stdout}")
    return access.group(1), secret.group(1)


def project_id_of(url: str) -> str:
    """The private id of the user's project (what RIPPLE_BUCKET_EVENTING_BUCKETS names)."""
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url.removeprefix("postgresql://")
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            query = sa.text("SELECT id FROM projects WHERE name = :name")
            value = conn.execute(query, {"name": USER}).scalar_one()
    finally:
        engine.dispose()
    return str(uuid.UUID(str(value)))


@dataclass
class Server:
    url: str
    process: subprocess.Popen[bytes]
    log: Path

    def cpu_s(self) -> float:
        return process_cpu_s(self.process.pid)

    def request_seconds(self, operation: str) -> float:
        """The server's own total seconds answering `operation` (its Prometheus histogram:
        from the request's arrival to the start of the response body)."""
        with urllib.request.urlopen(f"{self.url}/_ripple/metrics", timeout=10) as r:
            text = r.read().decode()
        name = f'ripple_s3_request_seconds_sum{{operation="{operation}"}} '
        for line in text.splitlines():
            if line.startswith(name):
                return float(line.removeprefix(name))
        return 0.0

    def tail(self, chars: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-chars:]


@contextmanager
def serve(
    workdir: Path, env: dict[str, str], profile: str | None, clock: str = "cpu"
) -> Iterator[Server]:
    """`ripple serve` on a free loopback port until the block ends (SIGINT, as Ctrl-C)."""
    port = free_port()
    log = workdir / "serve.log"
    command = [str(RIPPLE), "serve", "--address", f"127.0.0.1:{port}"]
    if profile:  # the same command under cProfile, every thread (see --profile)
        command = [sys.executable, "-c", PROFILED_SERVE, profile, clock, *command[1:]]
    with log.open("wb") as out:
        process = subprocess.Popen(
            command, cwd=workdir, env=env, stdout=out, stderr=subprocess.STDOUT
        )
    server = Server(f"http://127.0.0.1:{port}", process, log)
    try:
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None:
                raise RuntimeError(
                    f"ripple serve exited with {process.returncode}:\n{server.tail()}"
                )
            with (
                contextlib.suppress(OSError),
                urllib.request.urlopen(f"{server.url}/_ripple/health", timeout=1) as r,
            ):
                if r.status == 200:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(f"ripple serve did not answer in 60 s:\n{server.tail()}")
            time.sleep(0.1)
        yield server
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)  # as Ctrl-C: uvicorn stops gracefully
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)


# `python -c PROFILED_SERVE FILE CLOCK ARGS…`: `ripple ARGS…` with a cProfile profiler in
# every thread (the event loop's and the thread pool's that runs the metabase calls), timed
# by each thread's CPU clock (CLOCK cpu) or by the wall clock (wall); at exit, their stats
# together are written to FILE.
PROFILED_SERVE = """
import cProfile, pstats, sys, threading, time
from ripple.cli import main
profiles = []
clock = time.thread_time if sys.argv[2] == "cpu" else time.perf_counter
def start(*_):
    profile = cProfile.Profile(clock)
    profiles.append(profile)
    profile.enable()
threading.setprofile(start)
out, sys.argv = sys.argv[1], ["ripple", *sys.argv[3:]]
start()
try:
    main()
except SystemExit:
    pass
finally:
    stats = None
    for profile in profiles:
        profile.disable()
        profile.create_stats()
        if profile.stats:
            stats = pstats.Stats(profile) if stats is None else stats.add(profile)
    if stats is not None:
        stats.dump_stats(out)
"""


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of one process (all its threads), from /proc."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        fields = f.read().rsplit(b")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICK


# --- the clients ------------------------------------------------------------------------


def make_clients(url: str, access: str, secret: str, threads: int) -> list[Any]:
    config = Config(
        s3={"addressing_style": "path"},
        retries={"max_attempts": 1},
        max_pool_connections=max(10, threads),
    )
    session = boto3.session.Session()
    return [
        session.client(
            "s3",
            endpoint_url=url,
            region_name="us-east-1",
            aws_access_key_id=access,
            aws_secret_access_key=secret,
            config=config,
        )
        for _ in range(threads)
    ]


@dataclass
class Phase:
    """What one timed phase measured."""

    ops: int
    seconds: float
    latencies: list[float]
    client_cpu_s: float
    server_cpu_s: float
    postgres_cpu_s: float | None

    @property
    def ops_per_s(self) -> float:
        return self.ops / self.seconds

    def percentile(self, q: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@dataclass
class Bench:
    """The clients, the server and the thread pool that a run's phases share."""

    clients: list[Any]
    server: Server
    body: bytes
    postgres: bool  # count the PostgreSQL server's CPU
    pool: cf.ThreadPoolExecutor = field(init=False)

    def __post_init__(self) -> None:
        self.pool = cf.ThreadPoolExecutor(len(self.clients), thread_name_prefix="client")

    def close(self) -> None:
        self.pool.shutdown()

    def put(self, s3: Any, bucket: str, key: str) -> None:
        s3.put_object(Bucket=bucket, Key=key, Body=self.body)

    def get(self, s3: Any, bucket: str, key: str) -> None:
        data = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
        if len(data) != len(self.body):
            raise RuntimeError(f"GET {bucket}/{key}: {len(data)} bytes, not {len(self.body)}")

    def delete(self, s3: Any, bucket: str, key: str) -> None:
        s3.delete_object(Bucket=bucket, Key=key)

    def run(
        self,
        what: str,
        op: Callable[[Any, str, str], None],
        bucket: str,
        keys: Sequence[str],
        progress: Progress | None = None,
    ) -> Phase:
        """`op` on every key, the keys shared round-robin among the threads; timed."""
        threads = len(self.clients)
        shares = [keys[t::threads] for t in range(threads)]
        done = [0] * threads
        latencies: list[list[float]] = [[] for _ in range(threads)]
        failed = threading.Event()

        def work(t: int) -> None:
            s3, mine, lat = self.clients[t], shares[t], latencies[t]
            try:
                for key in mine:
                    if failed.is_set():
                        return
                    start = time.perf_counter()
                    op(s3, bucket, key)
                    lat.append(time.perf_counter() - start)
                    done[t] += 1
            except BaseException:
                failed.set()
                raise

        task = progress.add_task(what, total=len(keys)) if progress is not None else None
        cpu0, server0 = time.process_time(), self.server.cpu_s()
        pg0 = postgres_cpu_s() if self.postgres else None
        start = time.perf_counter()
        futures = [self.pool.submit(work, t) for t in range(threads)]
        pending: set[cf.Future[None]] = set(futures)
        while pending:
            _, pending = cf.wait(pending, timeout=0.1, return_when=cf.FIRST_EXCEPTION)
            if progress is not None and task is not None:
                progress.update(task, completed=sum(done))
            if failed.is_set():
                break
        seconds = time.perf_counter() - start
        cf.wait(futures)
        for f in futures:
            if f.exception() is not None:
                raise RuntimeError(f"{what}: {f.exception()}") from f.exception()
        pg1 = postgres_cpu_s() if self.postgres else None
        if progress is not None and task is not None:
            progress.remove_task(task)
        return Phase(
            ops=len(keys),
            seconds=seconds,
            latencies=[x for lat in latencies for x in lat],
            client_cpu_s=time.process_time() - cpu0,
            server_cpu_s=self.server.cpu_s() - server0,
            postgres_cpu_s=pg1 - pg0 if pg0 is not None and pg1 is not None else None,
        )

    def bulk_delete(self, bucket: str, keys: Sequence[str]) -> tuple[float, float]:
        """One quiet DeleteObjects of `keys`: its seconds at the client, and the server's."""
        objects = [{"Key": k} for k in keys]
        server0 = self.server.request_seconds("DeleteObjects")
        start = time.perf_counter()
        answer = self.clients[0].delete_objects(
            Bucket=bucket, Delete={"Objects": objects, "Quiet": True}
        )
        seconds = time.perf_counter() - start
        if errors := answer.get("Errors"):
            raise RuntimeError(f"DeleteObjects: {len(errors)} errors, e.g. {errors[0]}")
        return seconds, self.server.request_seconds("DeleteObjects") - server0

    def count(self, bucket: str, prefix: str) -> int:
        answer = self.clients[0].list_objects_v2(Bucket=bucket, Prefix=prefix)
        return int(answer.get("KeyCount", 0))


def keys_of(prefix: str, n: int) -> list[str]:
    return [f"{prefix}/{i:07d}" for i in range(n)]


# --- one database -----------------------------------------------------------------------


@dataclass
class Result:
    put: Phase
    put_eventing: Phase
    get: Phase
    delete: Phase
    bulk_s: list[float]
    single_s: list[float]
    single_phases: list[Phase]

    def figures(self) -> dict[str, float]:
        return {
            "put_ops_per_s": round(self.put.ops_per_s, 1),
            "get_ops_per_s": round(self.get.ops_per_s, 1),
            "delete_ops_per_s": round(self.delete.ops_per_s, 1),
            "eventing_put_ratio": round(self.put_eventing.ops_per_s / self.put.ops_per_s, 3),
            "http_bulk_delete_ratio": round(
                statistics.median(self.single_s) / statistics.median(self.bulk_s), 1
            ),
        }


def merge(phases: Sequence[Phase]) -> Phase:
    pg = [p.postgres_cpu_s for p in phases]
    return Phase(
        ops=sum(p.ops for p in phases),
        seconds=sum(p.seconds for p in phases),
        latencies=[x for p in phases for x in p.latencies],
        client_cpu_s=sum(p.client_cpu_s for p in phases),
        server_cpu_s=sum(p.server_cpu_s for p in phases),
        postgres_cpu_s=None if None in pg else sum(x for x in pg if x is not None),
    )


def bench(kind: str, args: argparse.Namespace) -> Result:
    with (
        tempfile.TemporaryDirectory(prefix="ripple-bench-gateway-") as tmp,
        database(kind, Path(tmp), args.postgres_url) as url,
    ):
        workdir = Path(tmp)
        env = environment(RIPPLE_DATA_DIR=str(workdir / "data"), RIPPLE_DATABASE_URL=url)
        access, secret = create_user(workdir, env)
        project_id = project_id_of(url)
        env.update(
            RIPPLE_BUCKET_EVENTING_BUCKETS=f"{project_id}:{EVENTING}:{TOPIC}",
            RIPPLE_S3_DELETE_RATE=str(DELETE_RATE),
            RIPPLE_S3_DELETE_BURST=str(DELETE_RATE),
        )
        profile = f"{args.profile}.{kind}" if args.profile else None
        with serve(workdir, env, profile, args.profile_clock) as server:
            clients = make_clients(server.url, access, secret, args.threads)
            for bucket in (PLAIN, EVENTING):
                clients[0].create_bucket(Bucket=bucket)
            run = Bench(clients, server, os.urandom(args.size), kind == "postgresql")
            try:
                return measure(kind, run, args)
            finally:
                run.close()
                if profile:
                    console.print(f"{kind}: server profile written to {profile}")


def measure(kind: str, run: Bench, args: argparse.Namespace) -> Result:
    n, rounds, threads = args.objects, args.rounds, args.threads
    with _bar() as progress:
        # warm-up: every operation, both buckets, every client and connection
        warm = max(threads * 25, 200)
        for bucket in (PLAIN, EVENTING):
            keys = keys_of("warm", warm)
            run.run(f"{kind}: warm-up PUT {bucket}", run.put, bucket, keys, progress)
            run.run(f"{kind}: warm-up GET {bucket}", run.get, bucket, keys, progress)
            run.run(f"{kind}: warm-up DELETE {bucket}", run.delete, bucket, keys, progress)
        keys = keys_of("warm-bulk", 100)
        run.run(f"{kind}: warm-up PUT", run.put, PLAIN, keys, progress)
        run.bulk_delete(PLAIN, keys)

        # PUT with and without eventing, interleaved rounds of alternating order
        per_round = [n // rounds + (1 if r < n % rounds else 0) for r in range(rounds)]
        plain: list[Phase] = []
        eventing: list[Phase] = []
        plain_keys: list[str] = []
        for r, count in enumerate(per_round):
            keys = keys_of(f"put/r{r}", count)
            order = [(PLAIN, plain), (EVENTING, eventing)]
            for bucket, into in order if r % 2 == 0 else order[::-1]:
                what = f"{kind}: PUT {bucket} (round {r + 1}/{rounds})"
                into.append(run.run(what, run.put, bucket, keys, progress))
            plain_keys += keys

        get = run.run(f"{kind}: GET {PLAIN}", run.get, PLAIN, plain_keys, progress)
        delete = run.run(f"{kind}: DELETE {PLAIN}", run.delete, PLAIN, plain_keys, progress)
        if (left := run.count(PLAIN, "put/")) != 0:
            raise RuntimeError(f"{left} objects left after the single deletes")

        # one DeleteObjects of 1000 keys against 1000 DeleteObject requests
        bulk_s: list[float] = []
        bulk_server_s: list[float] = []
        single_s: list[float] = []
        singles: list[Phase] = []
        task = progress.add_task(f"{kind}: bulk delete", total=args.repetitions)
        for rep in range(args.repetitions):
            keys = keys_of(f"bulk/r{rep}", BULK)
            run.run(f"{kind}: fill {BULK}", run.put, PLAIN, keys)
            seconds, server_s = run.bulk_delete(PLAIN, keys)
            bulk_s.append(seconds)
            bulk_server_s.append(server_s)
            if (left := run.count(PLAIN, f"bulk/r{rep}/")) != 0:
                raise RuntimeError(f"DeleteObjects left {left} objects")
            keys = keys_of(f"single/r{rep}", BULK)
            run.run(f"{kind}: fill {BULK}", run.put, PLAIN, keys)
            phase = run.run(f"{kind}: {BULK} x DELETE", run.delete, PLAIN, keys)
            singles.append(phase)
            single_s.append(phase.seconds)
            if (left := run.count(PLAIN, f"single/r{rep}/")) != 0:
                raise RuntimeError(f"the single deletes left {left} objects")
            progress.advance(task)
    console.print(
        f"{kind}: DeleteObjects samples (s) {[round(x, 4) for x in bulk_s]} (the server's "
        f"own time: {[round(x, 4) for x in bulk_server_s]}); {BULK} x DeleteObject samples "
        f"(s) {[round(x, 3) for x in single_s]}"
    )
    return Result(merge(plain), merge(eventing), get, delete, bulk_s, single_s, singles)


# --- output -----------------------------------------------------------------------------


def table(results: dict[str, Result], args: argparse.Namespace) -> Table:
    t = Table(
        title=f"gateway over HTTP: {args.threads} boto3 threads, {args.size:,}-byte objects, "
        f"{args.objects:,} per phase (delete rate limit set to {DELETE_RATE:,}/s)",
        title_justify="left",
    )
    for column in (
        "database",
        "phase",
        "ops/s",
        "ratio",
        "p50 ms",
        "p99 ms",
        "client CPU ms/op",
        "server CPU ms/op",
        "PostgreSQL CPU ms/op",
    ):
        t.add_column(column, justify="left" if column in ("database", "phase") else "right")
    for kind, r in results.items():
        f = r.figures()
        rows: list[tuple[str, Phase, str]] = [
            ("PUT, no eventing", r.put, "1"),
            ("PUT, eventing", r.put_eventing, f"{f['eventing_put_ratio']:.3f}"),
            ("GET", r.get, ""),
            ("DELETE", r.delete, ""),
            (f"{BULK} x DELETE (bulk runs)", merge(r.single_phases), ""),
        ]
        for name, p, ratio in rows:
            pg = f"{p.postgres_cpu_s / p.ops * 1000:.2f}" if p.postgres_cpu_s is not None else "-"
            t.add_row(
                kind,
                name,
                f"{p.ops_per_s:,.0f}",
                ratio,
                f"{p.percentile(0.5) * 1000:.1f}",
                f"{p.percentile(0.99) * 1000:.1f}",
                f"{p.client_cpu_s / p.ops * 1000:.2f}",
                f"{p.server_cpu_s / p.ops * 1000:.2f}",
                pg,
            )
        bulk, single = statistics.median(r.bulk_s), statistics.median(r.single_s)
        t.add_row(
            kind,
            f"DeleteObjects of {BULK} vs {BULK} x DELETE (median of {len(r.bulk_s)})",
            f"{bulk:.3f} s vs {single:.2f} s",
            f"{f['http_bulk_delete_ratio']:.1f}x",
            "",
            "",
            "",
            "",
            "",
            end_section=True,
        )
    return t


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--database",
        choices=("sqlite", "postgresql", "both"),
        default="sqlite",
        help="the metabase (default sqlite: flat JSON; both: JSON nested by database)",
    )
    parser.add_argument(
        "--objects",
        type=int,
        default=2000,
        help="requests per timed phase: PUTs per bucket, GETs, DELETEs (default 2000)",
    )
    parser.add_argument("--threads", type=int, default=8, help="client threads (default 8)")
    parser.add_argument("--size", type=int, default=4096, help="object size, bytes (4096)")
    parser.add_argument(
        "--rounds", type=int, default=3, help="interleaved PUT rounds per bucket (default 3)"
    )
    parser.add_argument(
        "--repetitions",
        type=int,
        default=3,
        help="bulk delete repetitions; their medians are compared (default 3)",
    )
    parser.add_argument(
        "--postgres-url",
        default=ADMIN_URL,
        help="an admin URL; a fresh database ripple_bench_<random> is created beside it "
        "and dropped afterwards",
    )
    parser.add_argument(
        "--profile",
        metavar="FILE",
        help="run the server under cProfile (every thread; slows it down) and write its "
        "stats to FILE.<database> when it stops (read with pstats)",
    )
    parser.add_argument(
        "--profile-clock",
        choices=("cpu", "wall"),
        default="cpu",
        help="--profile's clock: each thread's CPU time (what burns the cores; the default) "
        "or wall time (also where requests wait: locks, fsync, the database)",
    )
    args = parser.parse_args()
    if args.objects < args.rounds or args.threads < 1 or args.size < 0:
        parser.error("--objects must be at least --rounds, --threads at least 1")
    return args


def main() -> int:
    args = parse_args()
    kinds = ["sqlite", "postgresql"] if args.database == "both" else [args.database]
    console.print(
        f"ripple serve in its own process; {args.threads} client threads, {args.size:,}-byte "
        f"objects, {args.objects:,} requests per phase; the server's delete rate limit is set "
        f"to {DELETE_RATE:,}/s (burst {DELETE_RATE:,}) so that deletes are not throttled"
    )
    results = {kind: bench(kind, args) for kind in kinds}
    console.print(table(results, args))
    figures = {kind: r.figures() for kind, r in results.items()}
    print(json.dumps(figures[kinds[0]] if len(kinds) == 1 else figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
