"""A metabase for the benchmarks that measure the pipeline's parts (bench/pipeline_cpu.py):
a fresh database (SQLite in a temporary directory, or PostgreSQL), one project with eventing
buckets routed to one topic, a pull subscription on it, and a filler committing PUTs from
writer processes."""

from __future__ import annotations

import multiprocessing as mp
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from rich.console import Console

from common import fresh_postgres_database, progress_bar  # bench/common.py (bench/ is on sys.path)
from ripple.metabase import (
    BucketLocation,
    Metabase,
    ObjectLocation,
    Versioning,
    create_bucket,
    create_project,
)
from ripple.metabase.migrate import upgrade
from ripple.metabase.put_object import put_object
from ripple.metabase.rows import new_stream_id
from ripple.notifications.registry import Destination, Registry
from ripple.subscriptions.store import SubscriptionStore

console = Console(stderr=True)
ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
TOPIC = "projects/bench/topics/events"
SUBSCRIPTION = "bench-pull"
ETAG = "d41d8cd98f00b204e9800998ecf8427e"
DATA = b"x" * 64


@dataclass
class World:
    """A fresh metabase with one project, the eventing buckets and the pull subscription."""

    url: str
    writer_url: str  # the writers' URL (PostgreSQL: synchronous_commit off, see --help)
    project_id: uuid.UUID
    buckets: list[str]
    registry: Registry
    db: Metabase
    store: SubscriptionStore


def registry_for(project_id: uuid.UUID, buckets: Sequence[str]) -> Registry:
    registry = Registry()
    for name in buckets:
        registry.set_bucket(project_id, name, [Destination(TOPIC)])
    return registry


@contextmanager
def database(kind: str) -> Iterator[str]:
    """SQLite in a temporary directory, or a fresh PostgreSQL database dropped afterwards."""
    if kind == "sqlite":
        with tempfile.TemporaryDirectory(prefix="ripple-bench-") as tmp:
            yield f"sqlite:///{Path(tmp) / 'metabase.db'}"
        return
    name = f"ripple_bench_pipeline_{uuid.uuid4().hex[:12]}"
    with fresh_postgres_database(ADMIN_URL, name) as url:
        yield url


def make_world(url: str, buckets: int, versioned: bool, sync_commit: bool) -> World:
    db0 = Metabase(url)
    upgrade(db0)
    project = create_project(db0, "bench")
    names = [f"bench-events-{i}" for i in range(buckets)]
    versioning = Versioning.ENABLED if versioned else Versioning.UNVERSIONED
    for name in names:
        create_bucket(db0, BucketLocation(project.id, name), versioning=versioning)
    db0.dispose()
    registry = registry_for(project.id, names)
    db = Metabase(url, eventing=registry.is_eventing)
    store = SubscriptionStore(db)
    store.create(SUBSCRIPTION, TOPIC)
    writer_url = url
    if db.dialect == "postgresql" and not sync_commit:
        writer_url = (
            sa.make_url(url)
            .update_query_dict({"options": "-c synchronous_commit=off"})
            .render_as_string(hide_password=False)
        )
    return World(url, writer_url, project.id, names, registry, db, store)


def _put_writer(
    url: str,
    project: str,
    buckets: list[str],
    writer: int,
    writers: int,
    count: int,
    done: Any,
    errors: Any,
) -> None:
    """Fill: commit `count` objects, one PUT per transaction (global index i*writers+w)."""
    try:
        project_id = uuid.UUID(project)
        db = Metabase(url, eventing=registry_for(project_id, buckets).is_eventing)
        for i in range(count):
            n = i * writers + writer
            loc = ObjectLocation(project_id, buckets[n % len(buckets)], f"obj-{n:07d}")
            put_object(
                db,
                loc,
                stream_id=new_stream_id(),
                size=len(DATA),
                etag=ETAG,
                inline_data=DATA,
            )
            if i % 50 == 49:
                with done.get_lock():
                    done.value += 50
        with done.get_lock():
            done.value += count % 50
        db.dispose()
    except BaseException as e:
        errors.put(f"writer {writer}: {type(e).__name__}: {e}")
        raise


def fill_puts(world: World, events: int, writers: int) -> float:
    """Commit `events` objects (one PUT, one event per transaction) from `writers`
    processes; returns seconds. `world` may be any with `writer_url`, `project_id` and
    `buckets` (bench/pipeline.py's is)."""
    ctx = mp.get_context("spawn")
    done = ctx.Value("q", 0)
    errors = ctx.Queue()
    shares = [events // writers + (1 if w < events % writers else 0) for w in range(writers)]
    procs = [
        ctx.Process(
            target=_put_writer,
            args=(
                world.writer_url,
                str(world.project_id),
                world.buckets,
                w,
                writers,
                shares[w],
                done,
                errors,
            ),
        )
        for w in range(writers)
    ]
    start = time.perf_counter()
    with progress_bar(console) as progress:
        task = progress.add_task(f"commit {events:,} PUTs ({writers} writers)", total=events)
        for p in procs:
            p.start()
        while any(p.is_alive() for p in procs):
            progress.update(task, completed=done.value)
            time.sleep(0.2)
    elapsed = time.perf_counter() - start
    for p in procs:
        p.join()
    if not errors.empty() or any(p.exitcode != 0 for p in procs):
        raise RuntimeError(f"a fill writer failed: {errors.get() if not errors.empty() else ''}")
    return elapsed
