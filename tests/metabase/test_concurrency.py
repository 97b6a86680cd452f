"""Concurrent writers of the same key: every write lands with its own version.

Versions are computed from what a transaction reads; on PostgreSQL two writers can compute
the same one, and the loser retries (`Metabase.run_write`); on SQLite writers queue on the
write lock (`BEGIN IMMEDIATE`)."""

from __future__ import annotations

import threading

from ripple.metabase import (
    DeleteObjectsItem,
    Status,
    Versioning,
    begin_object,
    commit_object,
    delete_object,
    delete_objects,
)
from tests.metabase.steps import World

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
