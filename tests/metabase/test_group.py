"""Group commit (`Metabase.write_together`): several write transactions committed as one,
each a savepoint that fails alone, on SQLite and PostgreSQL."""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import orjson
import pytest
import sqlalchemy as sa

from ripple.changestream.schema import change_records
from ripple.changestream.tag import Operation, TransactionTag
from ripple.metabase import Metabase, Object, ObjectLocation, Status, WriteCondition
from ripple.metabase.errors import CommitTooLate, ConditionalRequestConflict
from ripple.metabase.group import AgainAlone, GroupBroken
from ripple.metabase.put_object import put_object
from ripple.metabase.rows import new_stream_id, start_key_write
from ripple.metabase.store_committed import CommitResult, store_committed
from tests.metabase.hooks import before_commit
from tests.metabase.steps import World


def _put(
    world: World, key: str, data: bytes, request_id: str = "", **kwargs: object
) -> Callable[[], CommitResult]:
    loc = ObjectLocation(world.project.id, "bucket", key)
    return lambda: put_object(
        world.db,
        loc,
        stream_id=new_stream_id(),
        size=len(data),
        etag=hashlib.md5(data).hexdigest(),
        inline_data=data,
        tag=TransactionTag(request_id=request_id),
        **kwargs,  # type: ignore[arg-type]
    )


@contextmanager
def commits_counted(db: Metabase) -> Iterator[list[int]]:
    """How many write transactions reach their commit, while the block runs."""
    count = [0]

    def hook(_conn: sa.Connection) -> None:
        count[0] += 1

    with before_commit(db, hook):
        yield count


def _inline(world: World) -> dict[str, bytes]:
    return {o.object_key: o.inline_data or b"" for o in world.rows()}


def test_members_commit_once_and_fail_alone(world: World) -> None:
    world.put(world.bucket(), "taken")
    with commits_counted(world.db) as commits:
        outcomes = world.db.write_together(
            [
                _put(world, "a", b"first"),
                # refused in the commit: its writes, and only its, are rolled back
                _put(world, "taken", b"lost", condition=WriteCondition(if_none_match="*")),
                _put(world, "a", b"second"),  # sees the first: it replaces it
                _put(world, "b", b"third"),
            ]
        )
    errors = [type(o.error) for o in outcomes]
    assert errors == [type(None), ConditionalRequestConflict, type(None), type(None)]
    assert commits[0] == 1
    first = outcomes[0].result()
    assert [o.stream_id for o in outcomes[2].result().removed] == [first.object.stream_id]
    assert _inline(world) == {"a": b"second", "b": b"third", "taken": b"hello"}


def test_each_member_has_change_records_of_its_own(world: World) -> None:
    world.bucket()
    world.db.eventing = lambda _project, _bucket: True
    outcomes = world.db.write_together(
        [_put(world, f"k{i}", b"x", request_id=f"request-{i}") for i in range(3)]
    )
    assert all(o.error is None for o in outcomes)
    with world.db.read() as conn:
        rows = conn.execute(
            sa.select(change_records.c.transaction_id, change_records.c.transaction_tag)
        ).all()
    puts = [(r.transaction_id, orjson.loads(r.transaction_tag)) for r in rows]
    ids = {txn: tag["request_id"] for txn, tag in puts if tag["operation"] == "put"}
    assert sorted(ids.values()) == ["request-0", "request-1", "request-2"]


def test_a_failed_commit_commits_no_member(world: World) -> None:
    world.bucket()

    def fail(_conn: sa.Connection) -> None:
        raise RuntimeError("the disk is gone")

    with before_commit(world.db, fail):
        outcomes = world.db.write_together([_put(world, "a", b"1"), _put(world, "b", b"2")])
    assert [str(o.error) for o in outcomes] == ["the disk is gone"] * 2
    assert _inline(world) == {}


@pytest.mark.parametrize("db", ["sqlite"], indirect=True)
def test_a_member_that_ends_the_transaction_breaks_the_group(world: World) -> None:
    """SQLite rolls a whole transaction back on some errors (a full disk): the members after
    it must not run outside one, each committing on its own."""
    world.bucket()

    def roll_back() -> None:
        with world.db.write() as conn:
            conn.connection.driver_connection.execute("ROLLBACK")  # type: ignore[union-attr]

    outcomes = world.db.write_together([_put(world, "a", b"1"), roll_back, _put(world, "b", b"2")])
    assert [type(o.error) for o in outcomes] == [GroupBroken] * 3
    assert _inline(world) == {}


def test_a_deadline_passed_before_the_commit_commits_no_member(world: World) -> None:
    world.bucket()
    deadline = time.monotonic() + 1.0

    def in_time() -> CommitResult:
        with world.db.commit_deadline(deadline):
            return _put(world, "a", b"1")()

    def slow() -> CommitResult:
        time.sleep(max(0.0, deadline - time.monotonic()) + 0.01)  # the member after is slow
        return _put(world, "b", b"2")()

    outcomes = world.db.write_together([in_time, slow])
    assert [type(o.error) for o in outcomes] == [CommitTooLate, CommitTooLate]
    assert _inline(world) == {}


def test_reads_together_share_a_connection_not_a_snapshot(world: World) -> None:
    bucket = world.bucket()
    checkouts = [0]

    def count(*_args: object) -> None:
        checkouts[0] += 1

    def keys() -> list[str]:
        return [o.object_key for o in world.rows()]

    sa.event.listen(world.db.engine, "checkout", count)
    try:
        outcomes = world.db.read_together([keys, lambda: world.put(bucket, "new"), keys])
    finally:
        sa.event.remove(world.db.engine, "checkout", count)
    assert [outcomes[0].result(), outcomes[2].result()] == [[], ["new"]]
    assert checkouts[0] == 2  # the reads' one connection, and the write's own


@pytest.mark.parametrize("db", ["sqlite"], indirect=True)
def test_no_change_record_is_written_once_the_group_has_ended(world: World) -> None:
    """The transaction ends inside a member's write after its row changes were captured,
    and the member goes on as if nothing happened: its change records must not be written
    (outside the group they would commit alone, for a change that never committed)."""
    bucket = world.bucket()
    world.db.eventing = lambda _project, _bucket: True
    loc = ObjectLocation(world.project.id, bucket.bucket_name, "ghost")

    def ghost() -> None:
        tag = TransactionTag(operation=Operation.PUT, request_id="ghost")
        with world.db.write(tag, exclude_txn_from_change_streams=False) as conn:
            found = start_key_write(conn, loc)
            now = world.db.now()
            new = Object(
                project_id=loc.project_id,
                bucket_name=loc.bucket_name,
                object_key=loc.object_key,
                version=0,
                stream_id=new_stream_id(),
                status=Status.PENDING,
                created_at=now,
                total_plain_size=1,
                etag="0" * 32,
                inline_data=b"x",
            )
            store_committed(conn, found, new, now, explicit_retention=False)
            conn.connection.driver_connection.execute("ROLLBACK")  # type: ignore[union-attr]

    outcomes = world.db.write_together([_put(world, "a", b"1"), ghost])
    assert [type(o.error) for o in outcomes] == [GroupBroken] * 2
    with world.db.read() as conn:
        tags = conn.execute(sa.select(change_records.c.transaction_tag)).scalars().all()
    assert not [t for t in tags if "ghost" in t]


@pytest.mark.parametrize("db", ["postgresql"], indirect=True)
def test_a_member_that_waits_for_a_lock_is_undone_whole_for_a_run_alone(world: World) -> None:
    """Another transaction (another gateway's PUT of the same key, held before its commit)
    holds a key a call writes: the call gives up waiting, everything it wrote is rolled
    back (its write before, as a DeleteObject's rate-limit token), its outcome says to make
    it again alone, and the rest of the group commits while the key is still held."""
    world.bucket()  # no eventing: the held transaction would hold its partition's row
    holding, release = threading.Event(), threading.Event()
    holder: list[threading.Thread] = []  # the thread of the first commit: it waits

    def hold(_conn: sa.Connection) -> None:
        if not holder:
            holder.append(threading.current_thread())
        if threading.current_thread() is holder[0]:
            holding.set()
            release.wait(30)

    def two_writes() -> CommitResult:
        _put(world, "before", b"x", request_id="before")()  # committed, as a member
        return _put(world, "held", b"2")()  # waits for the key

    with before_commit(world.db, hold), ThreadPoolExecutor(1) as pool:
        other = pool.submit(_put(world, "held", b"other"))
        assert holding.wait(30)
        outcomes = world.db.write_together(
            [_put(world, "a", b"1"), two_writes, _put(world, "b", b"3")]
        )
        assert _inline(world) == {"a": b"1", "b": b"3"}  # the key is still held
        release.set()
        other.result(timeout=30)
    assert [type(o.error) for o in outcomes] == [type(None), AgainAlone, type(None)]
    assert _inline(world) == {"a": b"1", "b": b"3", "held": b"other"}


def test_a_failed_member_takes_the_records_of_writes_within_it_along(world: World) -> None:
    world.bucket()
    world.db.eventing = lambda _project, _bucket: True

    def outer() -> None:
        with world.db.write():
            _put(world, "inner", b"x", request_id="inner")()  # a write within the member
            raise RuntimeError("refused after the write within it")

    outcomes = world.db.write_together([_put(world, "a", b"1", request_id="a"), outer])
    assert [type(o.error) for o in outcomes] == [type(None), RuntimeError]
    assert _inline(world) == {"a": b"1"}
    with world.db.read() as conn:
        tags = conn.execute(sa.select(change_records.c.transaction_tag)).scalars().all()
    assert [orjson.loads(t)["request_id"] for t in tags if '"put"' in t] == ["a"]
