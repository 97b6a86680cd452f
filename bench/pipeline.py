"""Benchmark: the eventing pipeline as a user runs it (`ripple pipeline run`, its tasks
delivering on Spark's executors), on `local[2]` and on real standalone clusters of one and of
two one-core workers (their JVMs started here from PySpark's own `bin/spark-class`), against
a fresh PostgreSQL metabase (a cluster needs one).

Per master, one `ripple pipeline run` process (fresh checkpoint, consumer offsets at the
backlog's start):
(a) pull: the backlog of `--events` PUTs (one event per transaction, committed once, before
    the first master) into a bucket whose pull-only topic has a subscription; events per
    second from the first event stored to the last (Spark's start and the first task's
    Python worker start are before that), and the CPU the driver's Python process (the
    `ripple` process itself: not its JVM, not the executors) spent per event meanwhile; also
    from "pipeline running" to the last event: events per second, the whole machine's CPU
    and PostgreSQL's per event, and how many cores were busy (of 2: near 2, the pull is
    CPU-bound). Delivery is followed by the pipeline's consumer offsets (a query of a few
    rows), the subscription's rows counted once at the end;
(b) latency: writer processes commit `--rate` single-object transactions per second for
    `--latency-seconds` into a bucket whose topic pushes to a loopback webhook receiver
    (an asyncio HTTP server in its own process); each event's latency is its receipt time
    minus the time its commit returned.

Baselines of the same run: the change-stream reader's raw drain of the backlog (one Python
process reading it, what the pipeline must at least do), and the receiver's own ceiling.

The last line is one JSON object:
{"local": {"pull_events_per_s", "driver_cpu_us_per_event", "latency_p50_s", "latency_p99_s",
 …}, "standalone_1": {…}, "standalone_2": {…}, "local_batches": {…}, "baselines": {…}}
(`local_batches`: `local[2]` with `--lease-seconds 0`, the design before leases.)

    .venv/bin/python bench/pipeline.py [--masters local,standalone_1,standalone_2,local_batches]
        [--events 200000] [--rate 200] [--latency-seconds 60] [--quick]
        [--max-records-per-batch 50000,200000]   # each value pulls the same backlog: local@N
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing as mp
import os
import queue
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from rich.console import Console
from rich.table import Table

from common import (  # bench/common.py (bench/ is on sys.path)
    cpu_s,
    fresh_postgres_database,
    machine_cpu_s,
    percentile,
    postgres_cpu_s,
    progress_bar,
    tree_cpu_seconds,
)
from receiver import Receiver, receiver_ceiling  # bench/receiver.py (bench/ is on sys.path)
from ripple.changestream.reader import ChangeStreamReader
from ripple.changestream.schema import change_offsets
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
from ripple.pipeline.source import DEFAULT_CONSUMER
from ripple.subscriptions.schema import subscription_events
from ripple.subscriptions.store import SubscriptionStore
from world import fill_puts  # bench/world.py (bench/ is on sys.path)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the tests' standalone-cluster launcher
from tests.pipeline.cluster import standalone_cluster  # noqa: E402

console = Console(stderr=True)
if not console.is_terminal:
    console = Console(stderr=True, width=150)
ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
RIPPLE = Path(sys.executable).with_name("ripple")
PULL_TOPIC = "projects/ripple-bench/topics/pull"
HOOK_TOPIC = "projects/ripple-bench/topics/hook"
SUBSCRIPTION = "bench-pull"
ETAG = "d41d8cd98f00b204e9800998ecf8427e"
DATA = b"x" * 64
MASTERS = ("local", "standalone_1", "standalone_2", "local_batches")
# local_batches: local[2] without leases (`--lease-seconds 0`), a micro-batch per handful of
# changes: the design before leases, as this run's baseline
TARGETS = {"pull_events_per_s": 50_000, "driver_cpu_us_per_event": 2.0, "latency_p99_s": 0.5}


@dataclass
class World:
    url: str
    writer_url: str  # synchronous_commit off: the writers keep up on a busy machine
    project_id: uuid.UUID
    directory: Path
    hook_url: str
    buckets: tuple[str, ...] = ("bench-pull",)  # where `fill_puts` commits the backlog


def make_world(url: str, directory: Path, hook_url: str) -> World:
    db = Metabase(url)
    upgrade(db)
    project = create_project(db, "bench")
    for name in ("bench-pull", "bench-hook"):
        create_bucket(db, BucketLocation(project.id, name))
    SubscriptionStore(db).create(SUBSCRIPTION, PULL_TOPIC)
    db.dispose()
    writer_url = (
        sa.make_url(url)
        .update_query_dict({"options": "-c synchronous_commit=off"})
        .render_as_string(hide_password=False)
    )
    return World(url, writer_url, project.id, directory, hook_url)


def config_file(world: World) -> Path:
    path = world.directory / "ripple.toml"
    path.write_text(
        "[bucket-eventing]\n"
        f'buckets = "{world.project_id}:bench-pull:{PULL_TOPIC},'
        f'{world.project_id}:bench-hook:{HOOK_TOPIC}"\n'
        f'[topics."{PULL_TOPIC}"]\npush-endpoint = "none"\n'
        f'[topics."{HOOK_TOPIC}"]\npush-endpoint = "{world.hook_url}"\n',
        encoding="utf-8",
    )
    return path


# --- writers (their own processes) ----------------------------------------------------


def _eventing(_project: uuid.UUID, _bucket: str) -> bool:
    return True


def _paced_writer(
    url: str, project: str, writer: int, writers: int, rate: float, seconds: float,
    prefix: str, go: Any, start_at: Any, out: Any, bucket: str = "bench-hook",
) -> None:  # fmt: skip
    """Global event j (j % writers == writer) committed into `bucket` at start + j / rate;
    reports (key, wall ns when its commit returned)."""
    db = Metabase(url, eventing=_eventing)
    project_id = uuid.UUID(project)
    commits: list[tuple[str, int]] = []
    try:
        out.put(("ready", writer))
        go.wait()
        for j in range(writer, int(rate * seconds), writers):
            wait = start_at.value + j / rate - time.time()
            if wait > 0:
                time.sleep(wait)
            key = f"{prefix}-{j:07d}"
            loc = ObjectLocation(project_id, bucket, key)
            put_object(
                db, loc, stream_id=new_stream_id(), size=len(DATA), etag=ETAG, inline_data=DATA
            )
            commits.append((key, time.time_ns()))
        out.put(("done", commits))
    except BaseException as e:
        out.put(("error", f"{type(e).__name__}: {e}"))
        raise
    finally:
        db.dispose()


# --- the pipeline process ------------------------------------------------------------


def subscription_count(engine: sa.Engine) -> int:
    with engine.connect() as conn:
        return int(
            conn.execute(
                sa.select(sa.func.count())
                .select_from(subscription_events)
                .where(subscription_events.c.subscription == SUBSCRIPTION)
            ).scalar_one()
        )


def stream_ends(engine: sa.Engine) -> dict[int, int]:
    reader = ChangeStreamReader(engine)
    return {p: reader.end(p) for p in range(reader.partitions())}


def delivered_records(engine: sa.Engine, start: dict[int, int]) -> int:
    """Records the pipeline delivered since `start`, by its consumer offsets (which its
    tasks store once their events are stored): a query of a few rows, where counting the
    subscription's rows would cost PostgreSQL CPU growing with the backlog, taken from the
    pipeline it measures."""
    offsets = ChangeStreamReader(engine).offsets(DEFAULT_CONSUMER)
    return sum(max(0, offsets.get(p, at) - at) for p, at in start.items())


def delivered_to_the_end(engine: sa.Engine, ends: dict[int, int]) -> bool:
    """Have the pipeline's consumer offsets reached `ends` (its tasks store them once their
    events are delivered)?"""
    offsets = ChangeStreamReader(engine).offsets(DEFAULT_CONSUMER)
    return all(offsets.get(p, 0) >= end for p, end in ends.items())


def reset(world: World, engine: sa.Engine, positions: dict[int, int]) -> None:
    """The subscription emptied and the consumer offsets at `positions`."""
    o = change_offsets.c
    with engine.begin() as conn:
        conn.execute(sa.delete(subscription_events))
        conn.execute(sa.delete(change_offsets).where(o.consumer == DEFAULT_CONSUMER))
    ChangeStreamReader(engine).commit_offsets(DEFAULT_CONSUMER, positions)
    # the bucket events' stream starts at its end: its records are no part of this
    reader = ChangeStreamReader(engine, "project_eventing")
    ends = {p: reader.end(p) for p in range(reader.partitions())}
    reader.commit_offsets(DEFAULT_CONSUMER, ends)


@contextmanager
def pipeline_process(
    world: World,
    master_url: str,
    name: str,
    config: Path | None = None,
    max_records: int = 0,
    env: dict[str, str] | None = None,
) -> Iterator[subprocess.Popen[str]]:
    """`ripple pipeline run` over the world's metabase (`config`: its ripple.toml, the
    world's own by default; `max_records`: its --max-records-per-batch, 0 for its default;
    `env`: more of its environment), until the block ends (Ctrl-C)."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("RIPPLE_")}
    environment.update(
        RIPPLE_DATABASE_URL=world.url,
        RIPPLE_DATA_DIR=str(world.directory / "data"),
        RIPPLE_SPARK_MASTER=master_url,
        PYSPARK_PYTHON=sys.executable,
        **(env or {}),
    )
    log = (world.directory / f"pipeline-{name}.log").open("w")
    process = subprocess.Popen(
        [
            str(RIPPLE), "--config", str(config or config_file(world)), "pipeline", "run",
            "--checkpoint", str(world.directory / f"checkpoint-{name}"),
            *(["--lease-seconds", "0"] if name.split("@")[0] == "local_batches" else []),
            *(["--max-records-per-batch", str(max_records)] if max_records else []),
        ],
        env=environment, stdout=log, stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        yield process
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, 2)
        try:
            process.wait(120)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, 9)
            process.wait()
        log.close()


def wait_until(
    process: subprocess.Popen[str], what: str, done: Any, timeout: float, poll_s: float = 0.05
) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if process.poll() is not None:
            log = Path(str(process.args[-1]).replace("checkpoint-", "pipeline-") + ".log")
            tail = log.read_text(errors="replace")[-3000:] if log.exists() else ""
            raise RuntimeError(f"the pipeline exited ({process.returncode}) before {what}:\n{tail}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(poll_s)


@dataclass
class Figures:
    pull_events_per_s: float
    driver_cpu_us_per_event: float
    driver_tree_cpu_us_per_event: float
    pull_events_per_s_from_running: float
    pull_machine_cpu_us_per_event: float  # from running to done, every process
    pull_postgres_cpu_us_per_event: float
    pull_cores_busy: float  # of os.cpu_count(): what the machine did not spend idle
    latency_p50_s: float
    latency_p99_s: float
    latency_max_s: float
    latency_events: int
    latency_missing: int
    pull_events_measured: int
    start_to_running_s: float
    running_to_first_event_s: float


def measure(
    world: World,
    master_url: str,
    name: str,
    args: argparse.Namespace,
    receiver: Receiver,
    start: dict[int, int],
    max_records: int,
) -> Figures:
    """The pull of the backlog after `start` (the stream's ends before the fill), then the
    latency at a steady rate."""
    engine = sa.create_engine(world.url, pool_size=1)
    backlog = args.events
    records = sum(stream_ends(engine)[p] - at for p, at in start.items())
    with pipeline_process(world, master_url, name, max_records=max_records) as process:
        started = time.monotonic()
        log = world.directory / f"pipeline-{name}.log"
        wait_until(process, "pipeline running", lambda: "pipeline running" in log.read_text(), 600)
        running = time.monotonic()
        machine_running, postgres_running = machine_cpu_s(), postgres_cpu_s()
        wait_until(process, "the first event", lambda: delivered_records(engine, start) > 0, 600)
        first_seen = time.monotonic()
        first_count = delivered_records(engine, start) * backlog // records  # events
        cpu_first = cpu_s(process.pid)
        tree_first = tree_cpu_seconds(process.pid)
        with progress_bar(console) as bar:
            task = bar.add_task(f"{name}: pull {backlog:,} events", total=backlog)

            def all_stored() -> bool:
                n = delivered_records(engine, start)
                bar.update(task, completed=n * backlog // records)
                return n >= records

            wait_until(process, "every backlog event", all_stored, 1800, poll_s=0.1)
        done = time.monotonic()
        if subscription_count(engine) != backlog:
            raise RuntimeError(f"the subscription holds {subscription_count(engine)} events")
        machine_used = machine_cpu_s() - machine_running
        postgres_used = postgres_cpu_s() - postgres_running
        cpu_used = cpu_s(process.pid) - cpu_first
        tree_used = tree_cpu_seconds(process.pid) - tree_first
        measured = backlog - first_count
        # from the first task's events stored; a backlog one task took whole: from running
        rate = measured / (done - first_seen) if measured else backlog / (done - running)
        latencies, missing = latency(world, process, args, receiver, name)
    engine.dispose()
    return Figures(
        pull_events_per_s=round(rate, 1),
        driver_cpu_us_per_event=round(cpu_used / max(1, measured) * 1e6, 3),
        # on a cluster the process tree is the driver's side only (its JVM, the source's
        # planner); on local[2] it holds the executors too
        driver_tree_cpu_us_per_event=round(tree_used / max(1, measured) * 1e6, 3),
        pull_events_per_s_from_running=round(backlog / (done - running), 1),
        pull_machine_cpu_us_per_event=round(machine_used / backlog * 1e6, 2),
        pull_postgres_cpu_us_per_event=round(postgres_used / backlog * 1e6, 2),
        pull_cores_busy=round(machine_used / (done - running), 2),
        latency_p50_s=round(percentile(latencies, 50), 4),
        latency_p99_s=round(percentile(latencies, 99), 4),
        latency_max_s=round(latencies[-1], 4),
        latency_events=len(latencies),
        latency_missing=missing,
        pull_events_measured=measured,
        start_to_running_s=round(running - started, 1),
        running_to_first_event_s=round(first_seen - running, 2),
    )


def put_keys(world: World, bucket: str, keys: list[str]) -> None:
    """One PUT per key into `bucket`, in this process (a warm-up)."""
    db = Metabase(world.writer_url, eventing=_eventing)
    for key in keys:
        loc = ObjectLocation(world.project_id, bucket, key)
        put_object(db, loc, stream_id=new_stream_id(), size=len(DATA), etag=ETAG, inline_data=DATA)
    db.dispose()


def latency(
    world: World,
    process: subprocess.Popen[str],
    args: argparse.Namespace,
    receiver: Receiver,
    name: str,
) -> tuple[list[float], int]:
    """Warm the webhook path, then commit at `--rate`; sorted latencies, and how many of
    the events never arrived within 60 s."""
    receiver.reset()
    put_keys(world, "bench-hook", [f"warm-{name}-{i}" for i in range(20)])
    wait_until(process, "the warm-up events", lambda: receiver.stats()["unique"] >= 20, 300)
    receiver.reset()
    commits = paced_commits(
        world,
        args.rate,
        args.latency_seconds,
        f"lat-{name.replace('@', '-')}",  # events carry keys URL-encoded
        f"{name}: {args.rate:g} commits/s",
        lambda: int(receiver.stats()["unique"]),
    )
    with contextlib.suppress(RuntimeError):
        wait_until(
            process, "the last events", lambda: receiver.stats()["unique"] >= len(commits), 60
        )
    dump = receiver.dump()
    got = {k: ns for k, ns in zip(dump["keys"], dump["ns"], strict=True) if k in commits}
    latencies = sorted((got[k] - commits[k]) / 1e9 for k in got)
    if not latencies:
        raise RuntimeError("the receiver got none of the latency events")
    return latencies, len(commits) - len(got)


def paced_commits(
    world: World,
    rate: float,
    seconds: float,
    prefix: str,
    label: str,
    arrived: Callable[[], int],
    bucket: str = "bench-hook",
    writers: int = 4,
) -> dict[str, int]:
    """`rate` single-object commits per second for `seconds` into `bucket` from `writers`
    processes (`_paced_writer`), a progress bar following `arrived()` (how many have
    arrived where they are measured); key → wall ns when its commit returned."""
    ctx = mp.get_context("spawn")
    go, start_at, out = ctx.Event(), ctx.Value("d", 0.0), ctx.Queue()
    procs = [
        ctx.Process(
            target=_paced_writer,
            args=(
                world.writer_url,
                str(world.project_id),
                w,
                writers,
                rate,
                seconds,
                prefix,
                go,
                start_at,
                out,
                bucket,
            ),
        )
        for w in range(writers)
    ]
    for p in procs:
        p.start()
    for _ in procs:
        kind, value = out.get(timeout=120)
        if kind != "ready":
            raise RuntimeError(f"a paced writer failed: {value}")
    start_at.value = time.time() + 0.5
    go.set()
    commits: dict[str, int] = {}
    with progress_bar(console) as bar:
        task = bar.add_task(label, total=int(rate * seconds))
        finished = 0
        while finished < writers:
            bar.update(task, completed=arrived())
            try:
                kind, value = out.get(timeout=0.2)
            except queue.Empty:
                continue
            if kind == "error":
                raise RuntimeError(f"a paced writer failed: {value}")
            finished += 1
            commits.update(value)
    for p in procs:
        p.join(30)
    return commits


def raw_read(engine: sa.Engine, after: dict[int, int]) -> float:
    """Records per second the change-stream reader drains in one Python process."""
    reader = ChangeStreamReader(engine)
    records = 0
    start = time.perf_counter()
    for p in range(reader.partitions()):
        for _ in reader.drain(p, after=after.get(p, 0), limit=5000):
            records += 1
    return records / (time.perf_counter() - start)


@contextmanager
def master_for(name: str, directory: Path) -> Iterator[str]:
    if name.startswith("local"):
        yield "local[2]"
        return
    workers = int(name.rsplit("_", 1)[1])
    with standalone_cluster(directory / f"spark-{name}", workers=workers) as cluster:
        yield cluster.master_url


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="Traffic goes to 127.0.0.1 only. Figures on a shared 2-core machine are "
        "indicative: the master, workers, PostgreSQL and the writers share the cores.",
    )
    parser.add_argument("--masters", default=",".join(MASTERS), help=",".join(MASTERS))
    parser.add_argument("--events", type=int, default=200_000, help="the pull backlog")
    parser.add_argument("--rate", type=float, default=200, help="latency: commits per second")
    parser.add_argument("--latency-seconds", type=float, default=60, help="latency: how long")
    parser.add_argument("--quick", action="store_true", help="smoke: 5000 events, 10 s latency")
    parser.add_argument(
        "--max-records-per-batch",
        default="0",
        metavar="N[,N…]",
        help="the pipeline's (0: its own default); several: each master pulls the same "
        "backlog once per value (named MASTER@N)",
    )
    args = parser.parse_args()
    args.masters = [m for m in args.masters.split(",") if m]
    try:
        args.max_records_per_batch = [int(n) for n in args.max_records_per_batch.split(",")]
    except ValueError:
        parser.error("--max-records-per-batch takes whole numbers, comma-separated")
    several = len(args.max_records_per_batch) > 1
    sizes = args.max_records_per_batch
    args.runs = [(f"{m}@{n}" if several else m, m, n) for m in args.masters for n in sizes]
    unknown = set(args.masters) - set(MASTERS)
    if unknown:
        parser.error(f"unknown masters {sorted(unknown)}; choose from {', '.join(MASTERS)}")
    if args.quick:
        args.events, args.latency_seconds = min(args.events, 5000), min(args.latency_seconds, 10)
    return args


def main() -> int:
    args = parse_args()
    results: dict[str, Any] = {}
    with (
        tempfile.TemporaryDirectory(prefix="ripple-bench-pipeline-") as tmp,
        fresh_postgres_database(ADMIN_URL, f"ripple_bench_pipeline_{uuid.uuid4().hex[:12]}") as url,
    ):
        receiver = Receiver()
        try:
            world = make_world(url, Path(tmp), receiver.url)
            engine = sa.create_engine(url)
            start = stream_ends(engine)
            fill_s = fill_puts(world, args.events, 2)
            results["baselines"] = {
                "fill_commits_per_s": round(args.events / fill_s, 1),
                "raw_read_records_per_s": round(raw_read(engine, start), 1),
                "receiver_ceiling_per_s": round(receiver_ceiling(receiver, b"{}", 3.0), 1),
            }
            receiver.reset()
            for name, master, max_records in args.runs:
                reset(world, engine, start)
                with master_for(master, Path(tmp)) as master_url:
                    figures = measure(world, master_url, name, args, receiver, start, max_records)
                results[name] = asdict(figures)
                console.print(f"{name}: {results[name]}")
            engine.dispose()
        finally:
            receiver.close()
    table = Table(title="pipeline: pull from a backlog, latency at a steady rate (PostgreSQL)")
    table.add_column("figure")
    for name, _, _ in args.runs:
        table.add_column(name, justify="right")
    table.add_column("target", justify="right")
    for figure in (
        "pull_events_per_s",
        "driver_cpu_us_per_event",
        "latency_p50_s",
        "latency_p99_s",
    ):
        target = TARGETS.get(figure)
        table.add_row(
            figure,
            *(f"{results[name][figure]:,}" for name, _, _ in args.runs),
            f"{target:,}" if target is not None else "",
        )
    console.print(table)
    console.print(f"baselines: {results['baselines']}")
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
