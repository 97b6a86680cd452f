"""Concurrent writers of the same key: every write lands with its own version.

Versions are computed from what a transaction reads; on PostgreSQL two writers can compute
the same one, and the loser retries (`Metabase.run_write`); on SQLite writers queue on the
write lock (`BEGIN IMMEDIATE`)."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest
import sqlalchemy as sa

from ripple.metabase import (
    BucketLocation,
    DeleteObjectsItem,
    Metabase,
    Retention,
    RetentionMode,
    Status,
    Versioning,
    commit_object,
    delete_bucket,
    delete_object,
    delete_objects,
    get_bucket_info,
    get_object_retention,
    put_object_retention,
)
from ripple.metabase.errors import BucketNotEmpty, BucketNotFound
from tests.metabase.objects import begin_object
from tests.metabase.steps import World

COMPLIANCE = RetentionMode.COMPLIANCE

WRITERS = 6
WRITES_EACH = 8


def run_threads(target) -> list[BaseException]:  # type: ignore[no-untyped-def]
    errors: list[BaseException] = []
    barrier = threading.Barrier(WRITERS)

    def worker(n: int) -> None:
        barrier.wait()
        try:
            target(n)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(WRITERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def test_concurrent_commits_and_deletes_of_one_key(world: World) -> None:
    bucket = world.bucket(versioning=Versioning.ENABLED)
    loc = world.loc(bucket, "hot")

    def writer(n: int) -> None:
        for i in range(WRITES_EACH):
            if i % 3 == 2:
                delete_object(world.db, loc)
            elif i % 3 == 1:
                delete_objects(world.db, bucket, [DeleteObjectsItem("hot")])
            else:
                pending = begin_object(world.db, loc)
                commit_object(world.db, pending, size=n, etag=f"{n:032x}")

    assert run_threads(writer) == []
    rows = world.rows()
    assert len(rows) == WRITERS * WRITES_EACH
    assert len({r.version for r in rows}) == len(rows)
    assert sum(r.status is Status.DELETE_MARKER_VERSIONED for r in rows) == WRITERS * (
        WRITES_EACH - (WRITES_EACH + 2) // 3
    )
    assert all(r.status is not Status.PENDING for r in rows)


def test_concurrent_overwrites_leave_one_object_unversioned(world: World) -> None:
    bucket = world.bucket()
    keys_written: list[str] = []

    def writer(n: int) -> None:
        for _ in range(WRITES_EACH):
            obj = world.put(bucket, "hot", f"writer {n}".encode())
            keys_written.append(obj.etag)

    assert run_threads(writer) == []
    rows = world.rows()
    assert [(r.object_key, r.status) for r in rows] == [("hot", Status.COMMITTED_UNVERSIONED)]
    assert len(keys_written) == WRITERS * WRITES_EACH


@pytest.mark.postgresql
def test_retention_change_is_judged_on_the_latest_value(postgres_db: Metabase) -> None:
    """Writer B (extend to day 15) reads, then pauses before its UPDATE while writer A
    (extend to day 30) runs. If B judged a stale read, A's day 30 would be overwritten by
    15, shortening an active compliance period. With the key locked, A waits for B and then
    extends B's result: the final retain-until is day 30."""
    world = World(postgres_db)
    bucket = world.bucket("locked", lock=True)
    loc = world.loc(bucket, "a")
    world.put(bucket, "a", retention=world.compliance(days=10))
    day = world.now
    b_paused, a_done = threading.Event(), threading.Event()
    pause_thread = {"name": ""}

    def pause_b(conn, cursor, statement, parameters, context, executemany):  # type: ignore[no-untyped-def]
        if threading.current_thread().name == pause_thread["name"] and statement.startswith(
            "UPDATE objects"
        ):
            b_paused.set()
            wait_until_done_or_blocked(postgres_db, a_done)

    def writer_b() -> None:
        put_object_retention(postgres_db, loc, Retention(COMPLIANCE, day + timedelta(days=15)))

    def writer_a() -> None:
        assert b_paused.wait(10)
        put_object_retention(postgres_db, loc, Retention(COMPLIANCE, day + timedelta(days=30)))
        a_done.set()

    sa.event.listen(postgres_db.engine, "before_cursor_execute", pause_b)
    try:
        b = threading.Thread(target=writer_b)
        pause_thread["name"] = b.name
        a = threading.Thread(target=writer_a)
        b.start()
        a.start()
        b.join()
        a.join()
    finally:
        sa.event.remove(postgres_db.engine, "before_cursor_execute", pause_b)
    retention = get_object_retention(postgres_db, loc)
    assert retention is not None
    assert retention.retain_until == day + timedelta(days=30)


def wait_until_done_or_blocked(db: Metabase, done: threading.Event) -> None:
    """Until `done`, or another session of this database waits on a lock (bounded)."""
    query = sa.text(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
        "AND wait_event_type = 'Lock'"
    )
    deadline = time.monotonic() + 10
    with db.engine.connect() as conn:
        while not done.wait(0.01) and time.monotonic() < deadline:
            if conn.execute(query).scalar():
                return
            conn.rollback()


def test_delete_bucket_racing_writes_answers_s3_errors(world: World) -> None:
    """Deleting a bucket while objects are written into it: each side gets BucketNotEmpty
    or NoSuchBucket, never a database error, and no object outlives its bucket."""
    for round_ in range(5):
        bucket = world.bucket(f"racing-{round_}")
        outcomes: list[str] = []

        def actor(n: int, bucket: BucketLocation = bucket, outcomes: list[str] = outcomes) -> None:
            try:
                if n == 0:
                    delete_bucket(world.db, bucket)
                else:
                    world.put(bucket, f"k{n}")
                outcomes.append("ok")
            except (BucketNotEmpty, BucketNotFound) as e:
                outcomes.append(e.code)

        assert run_threads(actor) == []
        assert len(outcomes) == WRITERS
        remaining = [r for r in world.rows() if r.bucket_name == bucket.bucket_name]
        try:
            get_bucket_info(world.db, bucket)
        except BucketNotFound:
            assert remaining == []
