"""Reading never skips a committed record (PostgreSQL, where transactions commit out of the
order in which they inserted their records).

Writer transactions are held up between inserting their change records and sending
COMMIT (`tests.metabase.hooks.before_commit`), while a reader polls every partition after the last
position it read; and, without hooks, they send records and COMMIT in one pipeline.
"""

from __future__ import annotations

import hashlib
import itertools
import random
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any

import pytest
import sqlalchemy as sa

from ripple.changestream.reader import ChangeStreamReader
from ripple.changestream.schema import change_records
from ripple.events import timestamp_ns
from ripple.metabase import (
    BucketLocation,
    Metabase,
    ObjectLocation,
    create_bucket,
    create_project,
)
from tests.changestream.conftest import Eventing, keys_in, partition_of_key
from tests.metabase.hooks import before_commit
from tests.metabase.objects import commit_inline_object
from tests.waiting import wait_for

pytestmark = pytest.mark.postgresql

PARTITIONS = 4
WRITERS = 8
WRITES_PER_WRITER = 15
JOIN_TIMEOUT = 60.0


@pytest.fixture
def pg(postgres_db: Metabase) -> Metabase:
    return postgres_db


@pytest.fixture
def eventing(pg: Metabase) -> Eventing:  # overrides the `db`-based fixture: PostgreSQL only
    return Eventing(pg)


@contextmanager
def commit_hook(db: Metabase, hook: Callable[[Any], None]) -> Iterator[None]:
    """`hook(connection)` runs in every write transaction of `db`, after its change records
    are written and before COMMIT."""
    with before_commit(db, hook):
        yield


def eventing_buckets(db: Metabase, eventing: Eventing, project_id: Any, count: int) -> list[str]:
    names = [f"bucket-{i}" for i in range(count)]
    for name in names:
        create_bucket(db, BucketLocation(project_id, name))
        eventing.enable(project_id, name)
    return names


def put(db: Metabase, project_id: Any, bucket: str, key: str) -> None:
    data = key.encode()
    commit_inline_object(
        db, ObjectLocation(project_id, bucket, key), data, etag=hashlib.md5(data).hexdigest()
    )


def all_positions(db: Metabase) -> list[tuple[int, int]]:
    c = change_records.c
    with db.read() as conn:
        rows = conn.execute(
            sa.select(c.partition, c.position)
            .where(c.stream_name == "bucket_eventing")
            .order_by(c.partition, c.position)
        ).all()
    return [(r.partition, r.position) for r in rows]


def key_of(record: dict[str, Any]) -> str:
    (mod,) = record["mods"]
    key = mod["keys"]["object_key"]
    assert isinstance(key, str)
    return key


@dataclass
class Reader:
    """Polls every partition after the last position it read, until told to stop and a
    final pass over all partitions finds nothing."""

    reader: ChangeStreamReader
    seen: dict[int, list[dict[str, Any]]] = field(
        default_factory=lambda: {p: [] for p in range(PARTITIONS)}
    )
    stop: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None
    passes: int = 0

    def run(self) -> None:
        try:
            last = dict.fromkeys(range(PARTITIONS), 0)
            while True:
                stopping = self.stop.is_set()  # read before the pass: a final pass is whole
                found = False
                for p in range(PARTITIONS):
                    records = self.reader.read(p, last[p], limit=7)
                    if records:
                        found = True
                        self.seen[p].extend(records)
                        last[p] = records[-1]["position"]
                self.passes += 1
                if stopping and not found:
                    return
        except BaseException as e:  # reported by the test
            self.error = e


@pytest.mark.parametrize("held", [True, False], ids=["held-before-commit", "pipelined"])
def test_concurrent_writers_and_a_polling_reader(
    pg: Metabase, eventing: Eventing, held: bool
) -> None:
    project = create_project(pg, "no-skip")
    # eight writers over four partitions: each partition's writers contend
    targets = eventing_buckets(pg, eventing, project.id, 3)
    bucket_of: dict[str, str] = {}

    local = threading.local()
    hook_started: dict[str, float] = {}
    commit_returned: dict[str, float] = {}
    errors: list[BaseException] = []

    def slow_commit(_conn: Any) -> None:
        key = getattr(local, "key", None)
        if key is None:  # not one of the writers' transactions
            return
        hook_started[key] = time.monotonic()  # the last attempt's, if it was retried
        time.sleep(random.uniform(0, 0.02))

    def writer(n: int) -> None:
        rng = random.Random(n)
        try:
            for i in range(WRITES_PER_WRITER):
                key = f"w{n}/k{i}"
                local.key = key
                if not held:  # no hook: the transaction starts no earlier than this
                    hook_started[key] = time.monotonic()
                bucket_of[key] = rng.choice(targets)
                put(pg, project.id, bucket_of[key], key)
                commit_returned[key] = time.monotonic()
                local.key = None
        except BaseException as e:
            errors.append(e)

    polling = Reader(ChangeStreamReader(pg.engine, "bucket_eventing", write_engine=pg.writer))
    reader_thread = threading.Thread(target=polling.run, name="reader")
    writers = [threading.Thread(target=writer, args=(n,), name=f"w{n}") for n in range(WRITERS)]
    with commit_hook(pg, slow_commit) if held else nullcontext():
        reader_thread.start()
        for t in writers:
            t.start()
        for t in writers:
            t.join(JOIN_TIMEOUT)
        assert not any(t.is_alive() for t in writers), "a writer hangs"
        polling.stop.set()
        reader_thread.join(JOIN_TIMEOUT)
        assert not reader_thread.is_alive(), "the reader hangs"
    assert errors == []
    assert polling.error is None, polling.error
    assert polling.passes > 1

    # every record in the table, exactly once
    table = all_positions(pg)
    read = [(p, r["position"]) for p in range(PARTITIONS) for r in polling.seen[p]]
    assert sorted(read) == table
    assert len(set(read)) == len(read)
    assert len(table) == WRITERS * WRITES_PER_WRITER

    # per partition: positions 1..N in the order read, commit timestamps increasing
    records_of: dict[str, dict[str, Any]] = {}
    for p, records in polling.seen.items():
        assert [r["position"] for r in records] == list(range(1, len(records) + 1)), p
        stamps = [timestamp_ns(r["commit_timestamp"]) for r in records]
        assert all(x < y for x, y in itertools.pairwise(stamps)), p
        for r in records:
            assert r["partition"] == p
            records_of[key_of(r)] = r

    # every write was read, in its key's partition
    assert set(records_of) == set(commit_returned)
    for key, record in records_of.items():
        (mod,) = record["mods"]
        assert mod["keys"]["bucket_name"] == bucket_of[key]
        assert partition_of_key(project.id, bucket_of[key], key) == record["partition"], key
    assert {r["partition"] for r in records_of.values()} == set(range(PARTITIONS))

    # real-time order: a transaction that committed before another began to commit has
    # the lower position in their common partition
    checked = 0
    for first, second in itertools.permutations(records_of, 2):
        a, b = records_of[first], records_of[second]
        if a["partition"] != b["partition"]:
            continue
        if commit_returned[first] < hook_started[second]:
            checked += 1
            assert a["position"] < b["position"], (first, second)
    assert checked > 0


@dataclass
class Writer:
    """A writer in its own thread whose commit can be held up in the commit hook."""

    name: str
    run: Callable[[], None]
    hold: bool = False
    in_hook: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    done: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None
    thread: threading.Thread | None = None

    def start(self, local: threading.local) -> None:
        def body() -> None:
            local.writer = self
            try:
                self.run()
            except BaseException as e:
                self.error = e
            finally:
                local.writer = None
                self.done.set()

        self.thread = threading.Thread(target=body, name=self.name)
        self.thread.start()

    def join(self) -> None:
        assert self.thread is not None
        self.thread.join(JOIN_TIMEOUT)
        assert not self.thread.is_alive(), f"{self.name} hangs"
        assert self.error is None, self.error


def waiting_on_a_lock(db: Metabase) -> int:
    """How many other sessions of this database wait for a lock."""
    with db.engine.connect() as conn:
        return int(
            conn.exec_driver_sql(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid() AND wait_event_type = 'Lock'"
            ).scalar_one()
        )


@pytest.fixture
def pair(pg: Metabase, eventing: Eventing) -> tuple[Metabase, str, list[str], Any]:
    """An eventing bucket and two of its keys whose changes go to the same partition (0)."""
    project = create_project(pg, "no-skip")
    (bucket,) = eventing_buckets(pg, eventing, project.id, 1)
    return pg, bucket, keys_in(project.id, bucket, 0, 2), project.id


def test_a_committing_transaction_holds_its_partition_until_it_has_committed(
    pair: tuple[Metabase, str, list[str], Any],
) -> None:
    """A takes its position and stalls before its COMMIT; B (another key of the bucket, in
    the same partition) must wait for
    A as it takes its own position, and a reader sees neither until A is released: then A
    before B. (Without the hook, taking the position and COMMIT go to the server in one
    pipeline, so no client is in between.)"""
    db, bucket, (key_a, key_b), project_id = pair
    reader = ChangeStreamReader(db.engine, "bucket_eventing", write_engine=db.writer)
    local = threading.local()

    def hook(conn: Any) -> None:
        writer = getattr(local, "writer", None)
        if writer is None:
            return
        writer.in_hook.set()  # its records are in, with their positions
        if writer.hold:
            assert writer.release.wait(JOIN_TIMEOUT), "never released"

    a = Writer("A", lambda: put(db, project_id, bucket, key_a), hold=True)
    b = Writer("B", lambda: put(db, project_id, bucket, key_b))
    with commit_hook(db, hook):
        try:
            a.start(local)
            assert a.in_hook.wait(JOIN_TIMEOUT), "A never reached its commit"
            b.start(local)
            wait_for(lambda: waiting_on_a_lock(db) >= 1, "B waits for A's partition row")
            assert not b.in_hook.is_set(), "B took a position while A held the partition"
            assert not b.done.is_set(), "B committed while A held the partition"
            assert reader.read(0, 0) == []
        finally:
            a.release.set()
        a.join()
        b.join()

    records = reader.read(0, 0)
    assert [(key_of(r), r["position"]) for r in records] == [(key_a, 1), (key_b, 2)]
    stamps = [timestamp_ns(r["commit_timestamp"]) for r in records]
    assert stamps[0] < stamps[1]


def test_keys_of_one_bucket_in_other_partitions_do_not_wait(
    pg: Metabase, eventing: Eventing
) -> None:
    """A holds partition 0 before its COMMIT; B writes another key of the same bucket whose
    partition is 1, and commits without waiting for A: one bucket's writers of different
    keys do not queue on one partition row."""
    project = create_project(pg, "no-skip")
    (bucket,) = eventing_buckets(pg, eventing, project.id, 1)
    (key_a,), (key_b,) = keys_in(project.id, bucket, 0, 1), keys_in(project.id, bucket, 1, 1)
    reader = ChangeStreamReader(pg.engine, "bucket_eventing", write_engine=pg.writer)
    local = threading.local()

    def hook(conn: Any) -> None:
        writer = getattr(local, "writer", None)
        if writer is not None and writer.hold:
            writer.in_hook.set()
            assert writer.release.wait(JOIN_TIMEOUT), "never released"

    a = Writer("A", lambda: put(pg, project.id, bucket, key_a), hold=True)
    b = Writer("B", lambda: put(pg, project.id, bucket, key_b))
    with commit_hook(pg, hook):
        try:
            a.start(local)
            assert a.in_hook.wait(JOIN_TIMEOUT), "A never reached its commit"
            b.start(local)
            b.join()  # fails (hangs, then times out) if B queued behind A
            assert [key_of(r) for r in reader.read(1, 0)] == [key_b]
            assert reader.read(0, 0) == []
        finally:
            a.release.set()
        a.join()
    assert [key_of(r) for r in reader.read(0, 0)] == [key_a]
