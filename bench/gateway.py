"""Benchmark: the S3 gateway over HTTP, `ripple serve` (1 and 2 gateway processes) from a
light client and `ripple up` (its pipeline running) from boto3 in 8 processes; and
`ripple serve` over HTTPS beside it over HTTP, from the light client.

Per database (--database: SQLite in a temporary directory, or PostgreSQL: a database
`ripple_bench_<random>` created for each stage and dropped at its end), four stages, each
on a fresh metabase with one user (`ripple user create`) and two buckets: PLAIN, and
EVENTING with a notification (s3:ObjectCreated:*) naming a topic whose push endpoint is a
loopback webhook receiver (bench/receiver.py, its own process); both are made through the
gateway with boto3 (`sns` CreateTopic, PutBucketNotificationConfiguration). Every server is
`python -m ripple …` in a process group of its own, stopped with SIGINT (as Ctrl-C); its
delete rate limit (RIPPLE_S3_DELETE_RATE / _BURST, 100/s by default) is set to 1,000,000.

1. `ripple serve` (1 gateway process; no pipeline: PUTs into EVENTING write change records
   that nothing reads). The light client (bench/s3load.py) PUTs `--requests` new `--size`
   (4 KiB) objects into PLAIN and as many into EVENTING, in `--rounds` interleaved rounds
   of alternating order, then GETs the PLAIN ones (after a warm-up: 500 PUTs and GETs in
   each bucket). It runs in `--light-processes` processes of its own (1), each sending URLs
   it presigned (botocore's SigV4 query signing, before the timed part) over
   `--connections` keep-alive HTTP/1.1 connections (16, opened 5 ms apart) from a raw
   asyncio client. Then the bulk delete, `--repetitions` times (3), from 8 boto3 threads
   in this process: 1000 objects PUT (not timed) and deleted by ONE DeleteObjects request
   (quiet), then 1000 more PUT and deleted by 1000 DeleteObject requests.
2. HTTPS beside HTTP: two `ripple serve` (1 gateway process each, each on a fresh metabase
   of its own), one serving HTTPS (`s3.tls-cert` / `s3.tls-key`: a certificate for
   127.0.0.1 and localhost from a certificate authority this run makes with `trustme`,
   bench/https.py), the other plain HTTP, both running through the stage. To each, the
   light client (over TLS to the HTTPS one, trusting that authority only; the same
   connections, object size and requests otherwise) PUTs 500 objects and GETs them
   (warm-up), then PUTs `--requests` new objects into PLAIN in `--rounds` rounds, then GETs
   them in as many; the two servers' rounds alternated (HTTP HTTPS, then HTTPS HTTP).
   The connections are kept alive as over HTTP: the ratio is TLS's cost per request once
   connected (record encryption), not its handshakes (one per connection and phase).
3. `ripple serve --workers 2`: the same light client's PUTs (both buckets) and GETs. The
   kernel hands each connection to one of the two processes: the table's "gateway split"
   is each one's share of the gateway CPU.
4. `ripple up` on its embedded defaults (one gateway process per core, the pipeline on Spark
   `local[*]` in its own process), the eventing bucket's topic pushing to the receiver:
   `--boto3-processes` processes (8, multiprocessing spawn), each with one boto3 client
   (path-style, one attempt) PUTting `--boto3-size`-byte objects (100) one after another
   for `--duration` seconds (30), into PLAIN, then into EVENTING. Each process first PUTs
   20 objects (into EVENTING: their events warm the pipeline, and every one has arrived
   before the timed part). Event latency: an event's arrival at the receiver minus the
   return of its PUT, every event waited for after the phase. Then the light client's
   `--requests` PUTs into PLAIN and into EVENTING (the gateway's rate with the pipeline
   beside it; the events waited for, when the last arrived said, their latency not).

Rates are requests answered per second from the phase's first request to its last answer.
"CPU ms" is CPU per request: `gateway` is the whole `ripple serve` process tree (with
--workers 2: the parent and both gateway processes), or under `ripple up` its gateway
processes only, `pipeline` is the rest of `ripple up`'s tree (the driver, Spark's JVM and
its Python workers), `client` the client processes' own (the light client's presigning not
included), `PostgreSQL` every postgres process (exited backends included). "cores busy":
the whole machine's busy CPU per second, from the clients' start to their end (/proc/stat:
of 2; other work on the machine shows here).

The last line is one JSON object; SQLite's figures flat, and under --database both the same
keys for PostgreSQL under "postgresql" (--database postgresql: PostgreSQL's, flat):
  put_ops_per_s, get_ops_per_s, put_cpu_ms, get_cpu_ms: stage 1, PLAIN, gateway CPU;
  https_put_ops_per_s, https_get_ops_per_s, https_put_cpu_ms, https_get_cpu_ms: stage 2,
  over HTTPS, gateway CPU; https_put_ratio, https_get_ratio: their requests per second /
  those over HTTP in the same stage (< 1: HTTPS is slower), https_put_cpu_ratio,
  https_get_cpu_ratio: their gateway CPU per request / that over HTTP;
  workers_2_put_ops_per_s: stage 3, PLAIN;
  boto3_put_ops_per_s, boto3_eventing_put_ops_per_s: stage 4, PLAIN and EVENTING, with
  boto3_eventing_latency_p50_s / _p99_s;
  eventing_put_ratio: stage 1, PUT/s into EVENTING / into PLAIN (the writer's cost);
  http_bulk_delete_ratio: stage 1, median seconds of the 1000 single deletes / median
  seconds of the one DeleteObjects (> 1: bulk is faster).

    PYTHONPATH=src .venv/bin/python bench/gateway.py [--database sqlite|postgresql|both]
        [--requests 6000] [--duration 30] [--boto3-processes 8] [--connections 16]
        [--light-processes 1] [--size 4096] [--boto3-size 100] [--rounds 2]
        [--repetitions 3] [--quick] [--logs DIR] [--profile FILE] [--profile-clock cpu|wall]
(--quick: 1,000 requests, 5 s, 1 repetition: a check that the script works.)
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
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote_plus

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from common import (  # bench/common.py (bench/ is on sys.path)
    cpu_s,
    descendants,
    fresh_postgres_database,
    machine_cpu_s,
    postgres_cpu_s,
    progress_bar,
)
from https import Authority, alternated, authority, negotiated  # bench/https.py
from receiver import Receiver  # bench/receiver.py
from ripple.config import ENVIRONMENT_VARIABLES
from s3load import Clients, Load, boto3_client, boto3_puts, light  # bench/s3load.py

console = Console(stderr=True)
if not console.is_terminal:  # a log file: wide enough for the tables
    console = Console(stderr=True, width=200)

RIPPLE = [sys.executable, "-m", "ripple"]  # the ripple of PYTHONPATH, not only the venv's
ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
USER = "bench"
PLAIN = "bench-plain"  # the bucket without a notification
EVENTING = "bench-eventing"  # the bucket whose notification pushes to the receiver
DELETE_RATE = 1_000_000  # RIPPLE_S3_DELETE_RATE and RIPPLE_S3_DELETE_BURST of the server
BULK = 1000  # keys per DeleteObjects request
BULK_THREADS = 8
BOTO3_WARM = 20  # PUTs per boto3 process before its timed part
EXPECTED_WARNINGS = (  # what `ripple up` always logs
    "Using incubator modules",  # Spark's JVM
    "SIGINT: stopping after the batch in flight",  # the pipeline, asked to stop
)
TARGETS = {  # issue 26, on this 2-core machine: (key, at least or at most, value)
    "put_cpu_ms": ("≤", 1.5),
    "workers_2_put_ops_per_s": ("≥", 1000),
    "boto3_put_ops_per_s": ("≥", 450),
    "boto3_eventing_put_ops_per_s": ("≥", 250),
}


# --- the servers ------------------------------------------------------------------------


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
        [*RIPPLE, "user", "create", USER],
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


def _is_gateway_process(pid: int) -> bool:
    """A process multiprocessing spawned (`ripple.gateway.processes`)."""
    try:
        return b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


@dataclass
class Server:
    """A `ripple serve` or `ripple up` process (and its process group)."""

    url: str
    process: subprocess.Popen[bytes]
    log: Path
    pipeline: bool  # ripple up: its gateway processes are the gateway, the rest the pipeline
    gateways: list[int] = field(default_factory=list)

    def cpu(self) -> tuple[dict[int, float], float]:
        """CPU seconds of each gateway process, and of the rest of the process tree (ripple
        up: the pipeline; ripple serve --workers N: the parent that watches them)."""
        root = self.process.pid
        below = descendants(root)
        if not self.gateways:  # found once: a gateway process that died is not followed
            self.gateways = [p for p in below if _is_gateway_process(p)] or [root]
        gateways = {p: cpu_s(p) for p in self.gateways}
        return gateways, sum(cpu_s(p) for p in [root, *below] if p not in gateways)

    def tail(self, chars: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-chars:]


@contextmanager
def server(
    command: Sequence[str],
    log: Path,
    env: dict[str, str],
    url: str,
    up: bool,
    tls: ssl.SSLContext | None = None,
) -> Iterator[Server]:
    """`command` (`ripple serve`, or `ripple up`: `up`) answering at `url` (https://: to a
    client with the context `tls`), until the block ends; `ripple up` once its pipeline
    runs. Its output goes to `log`, in whose directory it runs."""
    with log.open("wb") as out:
        process = subprocess.Popen(
            command,
            cwd=log.parent,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its process group: Ctrl-C reaches all it started
        )
    running = Server(url, process, log, pipeline=up)
    try:
        deadline = time.monotonic() + 300  # Spark starts slowly on a busy machine
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"{command} exited with {process.returncode}:\n{running.tail()}")
            with (
                contextlib.suppress(OSError),
                urllib.request.urlopen(f"{url}/_ripple/health", timeout=1, context=tls) as r,
            ):
                if r.status == 200 and (not up or "pipeline running" in running.tail(10**6)):
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(f"{command} did not start in 300 s:\n{running.tail()}")
            time.sleep(0.2)
        yield running
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGINT)  # as Ctrl-C
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(60)
        deadline = time.monotonic() + 10
        while (left := in_group(process.pid)) and time.monotonic() < deadline:
            time.sleep(0.2)
        if left:  # what it started outlived it
            console.print(f"[yellow]ripple {log.stem}: {len(left)} processes outlived it[/]")
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(10)


def in_group(group: int) -> list[int]:
    """The processes of a process group."""
    found = []
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError, ValueError, IndexError):
            stat = (entry / "stat").read_text()
            if int(stat[stat.rfind(")") + 2 :].split()[2]) == group:
                found.append(int(entry.name))
    return found


def problems(what: str, log: Path, keep: Path | None) -> None:
    """Say what the server logged as an error or a warning (Python's logging; of a
    traceback, its last line); copy its log into `keep`."""
    if not log.exists():
        return
    text = log.read_text(errors="replace")
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        name = re.sub(r"[: -]+", "-", what)  # sqlite-ripple-serve-workers-1
        (keep / f"{name}.log").write_text(text)
    lines, said = text.splitlines(), []
    for i, line in enumerate(lines):
        if any(expected in line for expected in EXPECTED_WARNINGS):
            continue
        if line.startswith("Traceback"):
            end = next((k for k in range(i + 1, len(lines)) if lines[k][:1] not in " \t"), i)
            said.append(f"{line} … {lines[end]}")
        elif re.search(r"\b(ERROR|WARNING|CRITICAL)\b", line):
            said.append(line)
    if said:
        console.print(f"[yellow]{what} logged {len(said)} errors or warnings, e.g.:[/yellow]")
        for line in said[:5]:
            console.print(f"  {line[:300]}", highlight=False, markup=False)


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


@dataclass
class World:
    """A stage's server, its user and what the phases share."""

    kind: str
    server: Server
    access: str
    secret: str
    args: argparse.Namespace
    progress: Progress
    ca_file: str | None = None  # over HTTPS: the authority its clients trust


@contextmanager
def stage(
    kind: str,
    name: str,
    args: argparse.Namespace,
    hook: str,
    progress: Progress,
    workers: int = 1,
    tls: Authority | None = None,
    tag: str = "",
) -> Iterator[World]:
    """A fresh metabase, user and buckets; `ripple serve --workers N`, or `ripple up`
    (`name` "up"), on them until the block ends; with `tls`, serving HTTPS with its
    certificate. `tag` tells its log from another stage's of the same command."""
    with contextlib.ExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="ripple-bench-")))
        if kind == "sqlite":
            url = f"sqlite:///{workdir / 'metabase.db'}"
        else:
            database = f"ripple_bench_{secrets.token_hex(6)}"
            url = stack.enter_context(fresh_postgres_database(args.postgres_url, database))
        port = free_port()
        env = environment(
            RIPPLE_DATA_DIR=str(workdir / "data"),
            RIPPLE_DATABASE_URL=url,
            RIPPLE_S3_ADDRESS=f"127.0.0.1:{port}",
            RIPPLE_METRICS_ADDRESS=f"127.0.0.1:{free_port()}",
            RIPPLE_S3_DELETE_RATE=str(DELETE_RATE),
            RIPPLE_S3_DELETE_BURST=str(DELETE_RATE),
            **(tls.env() if tls is not None else {}),
        )
        access, secret = create_user(workdir, env)
        log = workdir / ("up.log" if name == "up" else "serve.log")
        label = "ripple up" if name == "up" else f"ripple serve --workers {workers}"
        label += f" {tag}" if tag else ""
        stack.callback(problems, f"{kind}: {label}", log, args.logs)  # once it has stopped
        if name == "up":
            command = [*RIPPLE, "up"]
        else:
            command = [*RIPPLE, "serve", "--workers", str(workers)]
            if args.profile and workers == 1:  # the same command under cProfile
                profile = f"{args.profile}.{kind}"
                command = [sys.executable, "-c", PROFILED_SERVE, profile, args.profile_clock]
                command += ["serve", "--workers", "1"]
                stack.callback(console.print, f"{kind}: server profile written to {profile}")
        task = progress.add_task(f"{kind}: starting {label}", total=1)
        endpoint = f"{'https' if tls else 'http'}://127.0.0.1:{port}"
        context = tls.context() if tls is not None else None
        running = stack.enter_context(server(command, log, env, endpoint, name == "up", context))
        progress.remove_task(task)
        ca_file = str(tls.ca_file) if tls is not None else None
        s3 = boto3_client(running.url, access, secret, ca_file=ca_file)
        for bucket in (PLAIN, EVENTING):
            s3.create_bucket(Bucket=bucket)
        sns = boto3_client(running.url, access, secret, "sns", ca_file)
        arn = sns.create_topic(Name="hook", Attributes={"push-endpoint": hook})["TopicArn"]
        notification = {"Id": "hook", "TopicArn": arn, "Events": ["s3:ObjectCreated:*"]}
        s3.put_bucket_notification_configuration(
            Bucket=EVENTING, NotificationConfiguration={"TopicConfigurations": [notification]}
        )
        # their idle keep-alive connections, closed: one over TLS held the server's stop
        # for its graceful timeout (5 s), and it logged an error
        s3.close()
        sns.close()
        time.sleep(2.5)  # the other gateway processes see it within a second (their watchers)
        yield World(kind, running, access, secret, args, progress, ca_file)


# --- the phases -------------------------------------------------------------------------


@dataclass
class Phase:
    """What one timed phase (or several, merged) measured."""

    ops: int
    seconds: float
    latencies: list[float]
    errors: Counter[int]
    client_cpu_s: float
    gateway_cpu_s: list[float]  # per gateway process
    other_cpu_s: float  # the rest of the server's tree
    pipeline: bool  # ripple up: the rest is the pipeline; ripple serve: the gateway's too
    postgres_cpu_s: float | None
    machine_cpu_s: float  # over machine_s of wall time (the clients' start and end too)
    machine_s: float
    prepare_cpu_s: float = 0.0  # the light client's presigning, before the timed part
    events: Events | None = None

    @property
    def ops_per_s(self) -> float:
        return self.ops / self.seconds

    @property
    def gateway_s(self) -> float:
        return sum(self.gateway_cpu_s) + (0.0 if self.pipeline else self.other_cpu_s)

    def ms(self, cpu: float | None) -> str:
        return "-" if cpu is None else f"{cpu / max(self.ops, 1) * 1000:.2f}"

    def percentile(self, q: float) -> float:
        return percentile(sorted(self.latencies), q)


def percentile(ordered: Sequence[float], q: float) -> float:
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


@dataclass
class Events:
    """The eventing phase's events at the receiver."""

    expected: int
    arrived: int
    latencies: list[float]  # seconds, sorted
    drain_s: float  # from the last PUT's return to the last event's arrival


def merge(phases: Sequence[Phase]) -> Phase:
    pg = [p.postgres_cpu_s for p in phases]
    return Phase(
        ops=sum(p.ops for p in phases),
        seconds=sum(p.seconds for p in phases),
        latencies=[x for p in phases for x in p.latencies],
        errors=sum((p.errors for p in phases), Counter()),
        client_cpu_s=sum(p.client_cpu_s for p in phases),
        gateway_cpu_s=[sum(xs) for xs in zip(*(p.gateway_cpu_s for p in phases), strict=True)],
        other_cpu_s=sum(p.other_cpu_s for p in phases),
        pipeline=phases[0].pipeline,
        postgres_cpu_s=None if None in pg else sum(x for x in pg if x is not None),
        machine_cpu_s=sum(p.machine_cpu_s for p in phases),
        machine_s=sum(p.machine_s for p in phases),
        prepare_cpu_s=sum(p.prepare_cpu_s for p in phases),
    )


def measured(
    world: World, clients: Clients, what: str, total: float, seconds: float | None
) -> tuple[Phase, Load]:
    """`clients` started (for `seconds`, or until done), with the CPU around them."""
    task = world.progress.add_task(what, total=total)
    pg0 = postgres_cpu_s() if world.kind == "postgresql" else None
    wall0, machine0, (gateways0, rest0) = time.monotonic(), machine_cpu_s(), world.server.cpu()

    def tick(done: int) -> None:
        completed = done if seconds is None else time.monotonic() - wall0
        world.progress.update(task, completed=completed)

    load: Load = clients.go(seconds, tick)
    gateways1, rest1 = world.server.cpu()
    machine1, wall1 = machine_cpu_s(), time.monotonic()
    pg1 = postgres_cpu_s() if pg0 is not None else None
    world.progress.remove_task(task)
    if load.errors:
        console.print(f"[yellow]{what}: errors by HTTP status {dict(load.errors)}[/yellow]")
    return Phase(
        ops=load.ops,
        seconds=load.seconds,
        latencies=load.latencies,
        errors=load.errors,
        client_cpu_s=load.client_cpu_s,
        gateway_cpu_s=[v - gateways0.get(pid, 0.0) for pid, v in sorted(gateways1.items())],
        other_cpu_s=rest1 - rest0,
        pipeline=world.server.pipeline,
        postgres_cpu_s=None if pg0 is None or pg1 is None else pg1 - pg0,
        machine_cpu_s=machine1 - machine0,
        machine_s=wall1 - wall0,
        prepare_cpu_s=load.prepare_cpu_s,
    ), load


def light_phase(world: World, what: str, method: str, bucket: str, keys: list[str]) -> Phase:
    a = world.args
    clients = light(
        world.server.url,
        world.access,
        world.secret,
        method,
        bucket,
        keys,
        size=a.size,
        processes=a.light_processes,
        connections=a.connections,
        ca_file=world.ca_file,
    )
    return measured(world, clients, f"{world.kind}: {what}", len(keys), None)[0]


def light_puts_and_gets(world: World, label: str) -> tuple[Phase, Phase, Phase]:
    """Warm-up, then PUTs into PLAIN and EVENTING in interleaved rounds, then GETs of the
    PLAIN ones: (PUT PLAIN, PUT EVENTING, GET)."""
    n, rounds = world.args.requests, world.args.rounds
    for bucket in (PLAIN, EVENTING):
        warm = keys_of("warm", min(n, 500))
        light_phase(world, f"{label} warm-up PUT {bucket}", "PUT", bucket, warm)
        light_phase(world, f"{label} warm-up GET {bucket}", "GET", bucket, warm)
    plain: list[Phase] = []
    eventing: list[Phase] = []
    plain_keys: list[str] = []
    for r in range(rounds):
        keys = keys_of(f"put-r{r}", n // rounds + (1 if r < n % rounds else 0))
        order = [(PLAIN, plain), (EVENTING, eventing)]
        for bucket, into in order if r % 2 == 0 else order[::-1]:
            what = f"{label} PUT {bucket} (round {r + 1}/{rounds})"
            into.append(light_phase(world, what, "PUT", bucket, keys))
        plain_keys += keys
    get = light_phase(world, f"{label} GET {PLAIN}", "GET", PLAIN, plain_keys)
    return merge(plain), merge(eventing), get


def keys_of(prefix: str, n: int) -> list[str]:
    return [f"{prefix}-{i:07d}" for i in range(n)]


def https_beside_http(http: World, https: World) -> dict[str, Phase]:
    """PUTs into PLAIN then GETs of them, to `http` and to `https` alternated
    (bench/https.py): the phases by row name."""
    said = negotiated(https.server.url, ssl.create_default_context(cafile=https.ca_file))
    console.print(f"{https.kind}: ripple serve over HTTPS negotiates {said}")

    def measure(world: World, what: str, method: str, keys: list[str]) -> Phase:
        return light_phase(world, f"serve {what} {PLAIN}", method, PLAIN, keys)

    sides = {"HTTP": http, "HTTPS": https}
    done = alternated(measure, sides, keys_of, http.args.requests, http.args.rounds)
    return {
        f"serve {name} {method}": merge(done[f"{name} {method}"])
        for method in ("PUT", "GET")
        for name in sides
    }


def bulk_delete(world: World) -> tuple[list[float], list[float]]:
    """`--repetitions` times: one DeleteObjects of BULK keys, and BULK DeleteObject from
    BULK_THREADS boto3 threads: (seconds of each DeleteObjects, of each BULK deletes)."""
    clients = [boto3_client(world.server.url, world.access, world.secret) for _ in range(8)]
    bulk_s: list[float] = []
    single_s: list[float] = []

    def each(op: Callable[[Any, str], Any], keys: list[str]) -> float:
        shares = [keys[t::BULK_THREADS] for t in range(BULK_THREADS)]
        start = time.perf_counter()
        with cf.ThreadPoolExecutor(BULK_THREADS) as pool:
            done = pool.map(lambda t: [op(clients[t], k) for k in shares[t]], range(BULK_THREADS))
            list(done)
        return time.perf_counter() - start

    def put(s3: Any, key: str) -> None:
        s3.put_object(Bucket=PLAIN, Key=key, Body=b"x" * world.args.size)

    def delete(s3: Any, key: str) -> None:
        s3.delete_object(Bucket=PLAIN, Key=key)

    def left(prefix: str) -> int:
        return int(clients[0].list_objects_v2(Bucket=PLAIN, Prefix=prefix).get("KeyCount", 0))

    task = world.progress.add_task(f"{world.kind}: bulk delete", total=world.args.repetitions)
    each(put, keys_of("warm-bulk", 100))
    each(delete, keys_of("warm-bulk", 100))
    for rep in range(world.args.repetitions):
        keys = keys_of(f"bulk-r{rep}", BULK)
        each(put, keys)
        start = time.perf_counter()
        answer = clients[0].delete_objects(
            Bucket=PLAIN, Delete={"Objects": [{"Key": k} for k in keys], "Quiet": True}
        )
        bulk_s.append(time.perf_counter() - start)
        if answer.get("Errors") or left(f"bulk-r{rep}-"):
            raise RuntimeError(f"DeleteObjects left objects: {answer.get('Errors', [])[:1]}")
        keys = keys_of(f"single-r{rep}", BULK)
        each(put, keys)
        single_s.append(each(delete, keys))
        if left(f"single-r{rep}-"):
            raise RuntimeError("the single deletes left objects")
        world.progress.advance(task)
    world.progress.remove_task(task)
    console.print(
        f"{world.kind}: DeleteObjects of {BULK} (s) {[round(x, 4) for x in bulk_s]}; "
        f"{BULK} x DeleteObject (s) {[round(x, 3) for x in single_s]}"
    )
    return bulk_s, single_s


def boto3_phase(world: World, receiver: Receiver, bucket: str) -> Phase:
    """`--boto3-processes` boto3 processes PUTting into `bucket` for `--duration` s; into
    EVENTING, the events then waited for at the receiver."""
    a, eventing = world.args, bucket == EVENTING
    receiver.reset()  # (the notification's test event)
    task = world.progress.add_task(f"{world.kind}: starting boto3 processes", total=1)
    clients = boto3_puts(
        world.server.url,
        world.access,
        world.secret,
        bucket,
        phase="timed",
        size=a.boto3_size,
        processes=a.boto3_processes,
        warm=BOTO3_WARM,
        record=eventing,
    )
    world.progress.remove_task(task)
    if eventing:  # the warm-up's events: the pipeline is delivering to the receiver
        expected = BOTO3_WARM * a.boto3_processes
        wait_for_events(world, receiver, expected, "the warm-up's events", 300)
        receiver.reset()
    what = f"{world.kind}: ripple up, {a.boto3_processes} boto3 processes PUT {bucket}"
    phase, load = measured(world, clients, what, a.duration, a.duration)
    if eventing:
        wait_for_events(world, receiver, len(load.put_ns), "the events", 120 + a.duration)
        dump = receiver.dump()
        arrived = {unquote_plus(k): ns for k, ns in zip(dump["keys"], dump["ns"], strict=True)}
        latencies = sorted((arrived[k] - ns) / 1e9 for k, ns in load.put_ns.items() if k in arrived)
        last = max((arrived[k] for k in load.put_ns if k in arrived), default=0)
        phase.events = Events(
            expected=len(load.put_ns),
            arrived=len(latencies),
            latencies=latencies,
            drain_s=(last - max(load.put_ns.values(), default=0)) / 1e9,
        )
    return phase


def light_under_up(world: World, receiver: Receiver) -> tuple[Phase, Phase]:
    """The light client's PUTs into PLAIN, then into EVENTING, with the pipeline beside the
    gateway; that phase's events waited for (their latency is not measured)."""
    n = world.args.requests
    plain = light_phase(world, f"ripple up PUT {PLAIN}", "PUT", PLAIN, keys_of("light", n))
    receiver.reset()
    eventing = light_phase(world, f"ripple up PUT {EVENTING}", "PUT", EVENTING, keys_of("light", n))
    end_ns = time.time_ns()
    wait_for_events(world, receiver, n, "the events", 300)
    stats = receiver.stats()
    eventing.events = Events(n, stats["unique"], [], (stats["last_ns"] - end_ns) / 1e9)
    return plain, eventing


def wait_for_events(world: World, receiver: Receiver, n: int, what: str, timeout: float) -> None:
    task = world.progress.add_task(f"{world.kind}: waiting for {what}", total=n)
    deadline = time.monotonic() + timeout
    while (got := receiver.stats()["unique"]) < n and time.monotonic() < deadline:
        world.progress.update(task, completed=got)
        time.sleep(0.2)
    world.progress.remove_task(task)
    if got < n:
        console.print(f"[yellow]{world.kind}: {n - got} of {n} events not arrived[/yellow]")


# --- one database -----------------------------------------------------------------------


@dataclass
class Result:
    phases: dict[str, Phase]  # by row name, in the table's order
    bulk_s: list[float]
    single_s: list[float]

    def figures(self) -> dict[str, float]:
        p = self.phases
        put, get, events = p["serve PUT plain"], p["serve GET"], p["up boto3 PUT eventing"].events
        assert events is not None
        over_tls: dict[str, float] = {}  # stage 2: HTTPS, and its ratios to HTTP beside it
        for method in ("put", "get"):
            http, https = p[f"serve HTTP {method.upper()}"], p[f"serve HTTPS {method.upper()}"]
            cpu_ms = https.gateway_s / https.ops * 1000
            over_tls[f"https_{method}_ops_per_s"] = round(https.ops_per_s, 1)
            over_tls[f"https_{method}_ratio"] = round(https.ops_per_s / http.ops_per_s, 3)
            over_tls[f"https_{method}_cpu_ms"] = round(cpu_ms, 3)
            over_tls[f"https_{method}_cpu_ratio"] = round(
                cpu_ms / (http.gateway_s / http.ops * 1000), 3
            )
        return {
            "put_ops_per_s": round(put.ops_per_s, 1),
            "get_ops_per_s": round(get.ops_per_s, 1),
            "put_cpu_ms": round(put.gateway_s / put.ops * 1000, 3),
            "get_cpu_ms": round(get.gateway_s / get.ops * 1000, 3),
            "workers_2_put_ops_per_s": round(p["serve --workers 2 PUT plain"].ops_per_s, 1),
            "boto3_put_ops_per_s": round(p["up boto3 PUT plain"].ops_per_s, 1),
            "boto3_eventing_put_ops_per_s": round(p["up boto3 PUT eventing"].ops_per_s, 1),
            "eventing_put_ratio": round(p["serve PUT eventing"].ops_per_s / put.ops_per_s, 3),
            "http_bulk_delete_ratio": round(
                statistics.median(self.single_s) / statistics.median(self.bulk_s), 1
            ),
            "boto3_eventing_latency_p50_s": round(percentile(events.latencies, 0.5), 3),
            "boto3_eventing_latency_p99_s": round(percentile(events.latencies, 0.99), 3),
            **over_tls,
        }


def bench(kind: str, args: argparse.Namespace, receiver: Receiver) -> Result:
    phases: dict[str, Phase] = {}
    with progress_bar(console) as progress:
        with stage(kind, "serve", args, receiver.url, progress) as world:
            put, put_eventing, get = light_puts_and_gets(world, "serve")
            phases.update({"serve PUT plain": put, "serve PUT eventing": put_eventing})
            phases["serve GET"] = get
            bulk_s, single_s = bulk_delete(world)
        with (
            authority() as tls,
            stage(kind, "serve", args, receiver.url, progress, tag="beside HTTPS") as http,
            stage(kind, "serve", args, receiver.url, progress, tls=tls, tag="over HTTPS") as https,
        ):
            phases.update(https_beside_http(http, https))
        with stage(kind, "serve", args, receiver.url, progress, workers=2) as world:
            put, put_eventing, get = light_puts_and_gets(world, "serve --workers 2")
            phases["serve --workers 2 PUT plain"] = put
            phases["serve --workers 2 PUT eventing"] = put_eventing
            phases["serve --workers 2 GET"] = get
        with stage(kind, "up", args, receiver.url, progress) as world:
            phases["up boto3 PUT plain"] = boto3_phase(world, receiver, PLAIN)
            phases["up boto3 PUT eventing"] = boto3_phase(world, receiver, EVENTING)
            phases["up PUT plain"], phases["up PUT eventing"] = light_under_up(world, receiver)
    return Result(phases, bulk_s, single_s)


# --- output -----------------------------------------------------------------------------


def table(results: dict[str, Result], args: argparse.Namespace) -> Table:
    t = Table(
        title=f"gateway over HTTP (and HTTPS): the light client ({args.light_processes} "
        f"process(es) x {args.connections} connections, {args.size:,}-byte objects, "
        f"{args.requests:,} requests per phase) to ripple serve; {args.boto3_processes} "
        f"boto3 processes ({args.boto3_size}-byte objects, {args.duration:g} s) to ripple up. "
        "CPU: ms per request",
        title_justify="left",
    )
    columns = ["database", "phase", "ops/s", "ratio", "p50 ms", "p99 ms", "errors", "client"]
    columns += ["gateway", "gateway split", "pipeline", "PostgreSQL", "cores busy"]
    for column in columns:
        t.add_column(column, justify="left" if column in ("database", "phase") else "right")
    for kind, r in results.items():
        f = r.figures()
        ratios = {
            "serve PUT eventing": f["eventing_put_ratio"],
            "serve --workers 2 PUT plain": f["workers_2_put_ops_per_s"] / f["put_ops_per_s"],
            "up boto3 PUT eventing": f["boto3_eventing_put_ops_per_s"] / f["boto3_put_ops_per_s"],
            "up PUT eventing": r.phases["up PUT eventing"].ops_per_s
            / r.phases["up PUT plain"].ops_per_s,
            "serve HTTPS PUT": f["https_put_ratio"],
            "serve HTTPS GET": f["https_get_ratio"],
        }
        for name, p in r.phases.items():
            gateways = sum(p.gateway_cpu_s)
            split = "/".join(f"{x / gateways:.0%}" for x in p.gateway_cpu_s) if gateways else ""
            t.add_row(
                kind,
                name,
                f"{p.ops_per_s:,.0f}",
                f"{ratios[name]:.3f}" if name in ratios else "",
                f"{p.percentile(0.5) * 1000:.1f}",
                f"{p.percentile(0.99) * 1000:.1f}",
                ", ".join(f"{n} x {s}" for s, n in sorted(p.errors.items())) or "0",
                p.ms(p.client_cpu_s),
                p.ms(p.gateway_s),
                split if len(p.gateway_cpu_s) > 1 else "",
                p.ms(p.other_cpu_s) if p.pipeline else "",
                p.ms(p.postgres_cpu_s),
                f"{p.machine_cpu_s / p.machine_s:.2f}",
            )
            if p.events is not None:
                e = p.events
                t.add_row(
                    kind,
                    f"  events: {e.arrived:,}/{e.expected:,}, last {e.drain_s:+.2f} s",
                    "",
                    "",
                    f"{percentile(e.latencies, 0.5) * 1000:.0f}" if e.latencies else "-",
                    f"{percentile(e.latencies, 0.99) * 1000:.0f}" if e.latencies else "-",
                )
        bulk, single = statistics.median(r.bulk_s), statistics.median(r.single_s)
        t.add_row(
            kind,
            f"DeleteObjects({BULK}) vs {BULK} x DELETE (median of {len(r.bulk_s)})",
            f"{bulk:.3f} s vs {single:.2f} s",
            f"{f['http_bulk_delete_ratio']:.1f}x",
            end_section=True,
        )
    return t


def targets(figures: dict[str, float], kind: str) -> str:
    said = []
    for key, (sense, value) in TARGETS.items():
        met = figures[key] <= value if sense == "≤" else figures[key] >= value
        said.append(f"{key} {figures[key]:g} ({sense} {value:g}: {'met' if met else 'MISSED'})")
    return f"{kind} targets: " + "; ".join(said)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add = parser.add_argument
    add("--database", choices=("sqlite", "postgresql", "both"), default="sqlite")
    add("--requests", type=int, default=6000, help="light client requests per phase (6000)")
    add("--duration", type=float, default=30.0, help="seconds per boto3 phase (30)")
    add("--boto3-processes", type=int, default=8, help="boto3 client processes (8)")
    add("--boto3-size", type=int, default=100, help="boto3 object size, bytes (100)")
    add("--light-processes", type=int, default=1, help="light client processes (1)")
    add("--connections", type=int, default=16, help="connections per light process (16)")
    add("--size", type=int, default=4096, help="light client object size, bytes (4096)")
    add("--rounds", type=int, default=2, help="interleaved PUT rounds per bucket (2)")
    add("--repetitions", type=int, default=3, help="bulk delete repetitions (3)")
    add("--logs", type=Path, metavar="DIR", help="keep each server's log in DIR")
    add("--quick", action="store_true", help="1000 requests, 5 s, 1 repetition: a check")
    add(
        "--postgres-url",
        default=ADMIN_URL,
        help="an admin URL; a fresh database ripple_bench_<random> is created beside it "
        "for each stage and dropped afterwards",
    )
    add(
        "--profile",
        metavar="FILE",
        help="run stage 1's ripple serve under cProfile (every thread; slows it down) and "
        "write its stats to FILE.<database> when it stops (read with pstats)",
    )
    add(
        "--profile-clock",
        choices=("cpu", "wall"),
        default="cpu",
        help="--profile's clock: each thread's CPU time (what burns the cores; the default) "
        "or wall time (also where requests wait: locks, fsync, the database)",
    )
    args = parser.parse_args()
    if args.quick:
        args.requests, args.duration, args.repetitions = 1000, 5.0, 1
    if args.requests < args.rounds or min(args.light_processes, args.connections) < 1:
        parser.error("--requests must be at least --rounds, the processes and connections >= 1")
    return args


def main() -> int:
    args = parse_args()
    kinds = ["sqlite", "postgresql"] if args.database == "both" else [args.database]
    started = time.monotonic()
    receiver = Receiver()
    try:
        results = {kind: bench(kind, args, receiver) for kind in kinds}
    finally:
        receiver.close()
    console.print(table(results, args))
    figures = {kind: r.figures() for kind, r in results.items()}
    for kind, r in results.items():
        # the light client's phases over plain HTTP
        phases = [p for name, p in r.phases.items() if "boto3" not in name and "HTTPS" not in name]
        ops = sum(p.ops for p in phases)
        timed = sum(p.client_cpu_s for p in phases) / ops * 1000
        prepare = sum(p.prepare_cpu_s for p in phases) / ops * 1000
        console.print(
            f"{kind}: the light client's CPU per request: {timed:.3f} ms in the timed phases, "
            f"and {prepare:.3f} ms presigning before them"
        )
        pair = [(r.phases[f"serve {n} PUT"], r.phases[f"serve {n} GET"]) for n in ("HTTP", "HTTPS")]
        said = [sum(p.client_cpu_s for p in ps) / sum(p.ops for p in ps) * 1000 for ps in pair]
        console.print(
            f"{kind}: the light client's CPU per request over HTTPS: {said[1]:.3f} ms "
            f"(over HTTP beside it: {said[0]:.3f} ms)"
        )
        console.print(targets(figures[kind], kind))
    console.print(f"{len(kinds)} database(s) in {time.monotonic() - started:.0f} s")
    out = dict(figures[kinds[0]])
    if len(kinds) == 2:
        out["postgresql"] = figures["postgresql"]  # type: ignore[assignment]
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
