"""Reading the change stream (`ChangeStreamReader`) on SQLite and PostgreSQL: positions,
limits, transactions, partitions, consumer offsets, starting points, heartbeats, retention,
and rolled-back transactions."""

from __future__ import annotations

import hashlib
import itertools
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from ripple.changestream import ChangeStreamError
from ripple.changestream.reader import ChangeStreamReader
from ripple.changestream.schema import change_records
from ripple.changestream.values import datetime_ns
from ripple.changestream.writer import partition_of
from ripple.events import timestamp_ns
from ripple.metabase import (
    BucketLocation,
    Metabase,
    Object,
    ObjectLocation,
    Status,
    commit_inline_object,
    create_bucket,
    create_project,
    delete_object,
)
from ripple.metabase.rows import insert_rows, new_stream_id
from tests.changestream.conftest import Eventing

PARTITIONS = 4  # bucket_eventing's partitions (migration 0002's default)
HOUR = timedelta(hours=1)

# the records of bucket_eventing (project_eventing records the buckets themselves)
OBJECT_RECORDS = (
    sa.select(sa.func.count())
    .select_from(change_records)
    .where(change_records.c.stream_name == "bucket_eventing")
)


class Clock:
    """The metabase clock, set by the test; starts an hour before real time."""

    def __init__(self, db: Metabase) -> None:
        self.now = datetime.now(UTC) - HOUR
        db.clock = lambda: self.now

    def set(self, when: datetime) -> None:
        self.now = when


class Scene:
    """A project whose buckets the test creates with eventing on, and a clock."""

    def __init__(self, db: Metabase, eventing: Eventing) -> None:
        self.db = db
        self.eventing = eventing
        self.clock = Clock(db)
        self.project = create_project(db, "reader-test")
        self.reader = ChangeStreamReader(db.engine, "bucket_eventing", write_engine=db.writer)
        self._serial = 0

    def partition(self, bucket: str) -> int:
        return partition_of([self.project.id, bucket], PARTITIONS)

    def buckets_in(self, partition: int, count: int, *, eventing: bool = True) -> list[str]:
        """`count` new buckets (eventing on unless told) whose records go to `partition`."""
        names: list[str] = []
        while len(names) < count:
            self._serial += 1
            name = f"bucket-{self._serial:04d}"
            if self.partition(name) == partition:
                names.append(self.bucket(name, eventing=eventing))
        return names

    def bucket(self, name: str, *, eventing: bool = True) -> str:
        create_bucket(self.db, BucketLocation(self.project.id, name))
        if eventing:
            self.eventing.enable(self.project.id, name)
        return name

    def loc(self, bucket: str, key: str) -> ObjectLocation:
        return ObjectLocation(self.project.id, bucket, key)

    def put(self, bucket: str, key: str, data: bytes = b"hello") -> None:
        commit_inline_object(
            self.db, self.loc(bucket, key), data, etag=hashlib.md5(data).hexdigest()
        )

    def delete(self, bucket: str, key: str) -> None:
        delete_object(self.db, self.loc(bucket, key))


@pytest.fixture
def scene(db: Metabase, eventing: Eventing) -> Scene:
    return Scene(db, eventing)


def keys_of(records: list[dict[str, Any]]) -> list[str]:
    return [m["keys"]["object_key"] for r in records for m in r["mods"]]


def positions(records: list[dict[str, Any]]) -> list[int]:
    return [r["position"] for r in records]


def ns(record: dict[str, Any]) -> int:
    """A record's commit timestamp (or a heartbeat's timestamp) in UNIX nanoseconds."""
    if "heartbeat_record" in record:
        return timestamp_ns(record["heartbeat_record"]["timestamp"])
    return timestamp_ns(record["commit_timestamp"])


def increasing(values: list[int]) -> bool:
    return all(x < y for x, y in itertools.pairwise(values))


def read_partition(reader: ChangeStreamReader, partition: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    after = 0
    while records := reader.read(partition, after):
        out.extend(records)
        after = records[-1]["position"]
    return out


def real_ns(when: datetime) -> int:
    return datetime_ns(when)


# --- reading after a position, limits, density, commit order --------------------------


def test_read_after_a_position_returns_the_later_records_in_order(scene: Scene) -> None:
    bucket = scene.bucket("photos")
    p = scene.partition(bucket)
    for i in range(5):
        scene.put(bucket, f"k{i}")

    everything = scene.reader.read(p, 0)
    assert positions(everything) == [1, 2, 3, 4, 5]
    assert keys_of(everything) == ["k0", "k1", "k2", "k3", "k4"]
    assert all(r["partition"] == p and r["stream"] == "bucket_eventing" for r in everything)

    later = scene.reader.read(p, 2)
    assert positions(later) == [3, 4, 5]
    assert keys_of(later) == ["k2", "k3", "k4"]
    assert later == everything[2:]
    assert scene.reader.read(p, 5) == []
    assert scene.reader.read(p, 99) == []
    for other in set(range(PARTITIONS)) - {p}:
        assert scene.reader.read(other, 0) == []


def test_read_honours_the_limit(scene: Scene) -> None:
    bucket = scene.bucket("photos")
    p = scene.partition(bucket)
    for i in range(5):
        scene.put(bucket, f"k{i}")

    assert positions(scene.reader.read(p, 0, limit=2)) == [1, 2]
    assert positions(scene.reader.read(p, 2, limit=2)) == [3, 4]
    assert positions(scene.reader.read(p, 4, limit=2)) == [5]
    assert positions(scene.reader.read(p, 0, limit=1)) == [1]
    assert positions(scene.reader.read(p, 0, limit=100)) == [1, 2, 3, 4, 5]


def test_positions_are_dense_per_partition_and_commit_timestamps_increase(
    scene: Scene,
) -> None:
    # Two buckets share partition `a`, one is in `b`; the writes interleave. The clock
    # stands still, so the commit timestamps would all be equal if the stream did not
    # make them strictly increasing.
    a, b = 0, 1
    shared = scene.buckets_in(a, 2)
    alone = scene.buckets_in(b, 1)
    quiet = scene.buckets_in(a, 1, eventing=False)
    written: dict[int, list[str]] = {a: [], b: []}
    for i in range(6):
        for bucket in [*shared, *alone, *quiet]:
            key = f"{bucket}/k{i}"
            scene.put(bucket, key)
            if bucket not in quiet:
                written[scene.partition(bucket)].append(key)

    for p in (a, b):
        records = read_partition(scene.reader, p)
        assert positions(records) == list(range(1, len(written[p]) + 1))
        assert keys_of(records) == written[p]
        stamps = [ns(r) for r in records]
        assert increasing(stamps), stamps
    for p in set(range(PARTITIONS)) - {a, b}:
        assert scene.reader.read(p, 0) == []


def test_commit_timestamps_increase_even_when_the_clock_goes_back(scene: Scene) -> None:
    bucket = scene.bucket("photos")
    p = scene.partition(bucket)
    start = scene.clock.now
    for i in range(4):
        scene.clock.set(start - i * HOUR)  # every write an hour "earlier"
        scene.put(bucket, f"k{i}")

    records = scene.reader.read(p, 0)
    stamps = [ns(r) for r in records]
    assert stamps[0] == real_ns(start)
    assert increasing(stamps), stamps


def test_commit_timestamp_is_the_clock_at_commit(scene: Scene) -> None:
    bucket = scene.bucket("photos")
    p = scene.partition(bucket)
    when = datetime.now(UTC).replace(microsecond=123456) - 2 * HOUR
    scene.clock.set(when)
    scene.put(bucket, "k")
    (record,) = scene.reader.read(p, 0)
    assert ns(record) == real_ns(when)
    assert record["commit_timestamp"].endswith("123456000Z")


# --- transactions and partitions ---------------------------------------------------------


def test_records_of_one_transaction_are_consecutive_and_marked(scene: Scene) -> None:
    bucket = scene.bucket("photos")
    p = scene.partition(bucket)
    scene.put(bucket, "before")
    scene.put(bucket, "photo", b"v1")
    scene.put(bucket, "photo", b"v2")  # an overwrite: DELETE and INSERT in one transaction
    scene.put(bucket, "after")

    records = scene.reader.read(p, 0)
    assert positions(records) == [1, 2, 3, 4, 5]
    overwrite = [
        r for r in records if r["server_transaction_id"] == records[2]["server_transaction_id"]
    ]
    assert positions(overwrite) == [3, 4]
    assert [r["mod_type"] for r in overwrite] == ["DELETE", "INSERT"]
    assert [r["record_sequence"] for r in overwrite] == ["00000000", "00000001"]
    assert [r["is_last_record_in_transaction_in_partition"] for r in overwrite] == [False, True]
    assert {r["commit_timestamp"] for r in overwrite} == {overwrite[0]["commit_timestamp"]}
    assert {r["number_of_records_in_transaction"] for r in overwrite} == {2}
    assert {r["number_of_partitions_in_transaction"] for r in overwrite} == {1}
    others = [records[0], records[1], records[4]]
    assert len({r["server_transaction_id"] for r in records}) == 4
    assert all(r["is_last_record_in_transaction_in_partition"] for r in others)
    assert all(r["number_of_records_in_transaction"] == 1 for r in others)


def test_a_transaction_over_two_partitions(db: Metabase, scene: Scene) -> None:
    (one,) = scene.buckets_in(0, 1)
    (two,) = scene.buckets_in(2, 1)
    scene.put(one, "first")
    now = scene.clock.now

    def row(bucket: str, key: str) -> Object:
        return Object(
            project_id=scene.project.id,
            bucket_name=bucket,
            object_key=key,
            version=1,
            stream_id=new_stream_id(),
            status=Status.COMMITTED_UNVERSIONED,
            created_at=now,
        )

    with db.write(exclude_txn_from_change_streams=False) as conn:
        insert_rows(conn, [row(one, "a"), row(two, "b"), row(one, "c")])

    in_one = scene.reader.read(0, 0)
    in_two = scene.reader.read(2, 0)
    assert positions(in_one) == [1, 2]
    assert positions(in_two) == [1]
    both = [in_one[1], in_two[0]]
    assert in_one[0]["server_transaction_id"] != both[0]["server_transaction_id"]
    assert both[0]["server_transaction_id"] == both[1]["server_transaction_id"]
    assert keys_of([both[0]]) == ["a", "c"]
    assert keys_of([both[1]]) == ["b"]
    for record in both:
        assert record["is_last_record_in_transaction_in_partition"] is True
        assert record["number_of_records_in_transaction"] == 2
        assert record["number_of_partitions_in_transaction"] == 2
    assert sorted(r["record_sequence"] for r in both) == ["00000000", "00000001"]


def test_records_go_to_the_partition_of_their_bucket(scene: Scene) -> None:
    buckets = [*scene.buckets_in(0, 2), *scene.buckets_in(1, 1), *scene.buckets_in(3, 2)]
    quiet = scene.bucket("no-eventing", eventing=False)
    for bucket in [*buckets, quiet]:
        scene.put(bucket, "k")
        scene.delete(bucket, "k")

    seen: dict[str, set[int]] = {}
    for p in range(PARTITIONS):
        for record in read_partition(scene.reader, p):
            for mod in record["mods"]:
                assert mod["keys"]["project_id"] == str(scene.project.id)
                seen.setdefault(mod["keys"]["bucket_name"], set()).add(p)
    assert seen == {b: {partition_of([str(scene.project.id), b], PARTITIONS)} for b in buckets}
    assert all(seen[b] == {scene.partition(b)} for b in buckets)


def test_a_rolled_back_transaction_leaves_no_record_and_takes_no_position(
    db: Metabase, scene: Scene
) -> None:
    bucket = scene.bucket("photos")
    p = scene.partition(bucket)

    class Boom(Exception):
        pass

    def row(key: str) -> Object:
        return Object(
            project_id=scene.project.id,
            bucket_name=bucket,
            object_key=key,
            version=1,
            stream_id=new_stream_id(),
            status=Status.COMMITTED_UNVERSIONED,
            created_at=scene.clock.now,
        )

    def write_then_fail(key: str) -> None:
        with db.write(exclude_txn_from_change_streams=False) as conn:
            insert_rows(conn, [row(key)])
            raise Boom

    scene.put(bucket, "kept-1")
    with pytest.raises(Boom):
        write_then_fail("gone-1")

    # Also after the records were inserted (on SQLite their positions already taken).
    def fail_before_commit(conn: sa.Connection) -> None:
        assert conn.execute(OBJECT_RECORDS).scalar() == 2
        raise Boom

    db.before_commit.append(fail_before_commit)
    try:
        with pytest.raises(Boom), db.write(exclude_txn_from_change_streams=False) as conn:
            insert_rows(conn, [row("gone-2")])
    finally:
        db.before_commit.remove(fail_before_commit)
    scene.put(bucket, "kept-2")

    records = scene.reader.read(p, 0)
    assert keys_of(records) == ["kept-1", "kept-2"]
    assert positions(records) == [1, 2]
    with db.read() as conn:
        assert conn.execute(OBJECT_RECORDS).scalar() == 2
    assert scene.reader.end(p) == 2


# --- consumer offsets ------------------------------------------------------------------------


def test_offsets_commit_load_overwrite_and_consumers_are_independent(scene: Scene) -> None:
    reader = scene.reader
    assert reader.offsets("c1") == {}
    reader.commit_offsets("c1", {0: 3, 2: 7})
    assert reader.offsets("c1") == {0: 3, 2: 7}
    assert reader.offsets("c2") == {}

    reader.commit_offsets("c1", {2: 9})
    assert reader.offsets("c1") == {0: 3, 2: 9}
    reader.commit_offsets("c2", {0: 1, 1: 1})
    assert reader.offsets("c2") == {0: 1, 1: 1}
    assert reader.offsets("c1") == {0: 3, 2: 9}

    fresh = ChangeStreamReader(scene.db.engine, "bucket_eventing", write_engine=scene.db.writer)
    assert fresh.offsets("c1") == {0: 3, 2: 9}
    assert fresh.offsets("c2") == {0: 1, 1: 1}


def test_offsets_are_per_stream(db: Metabase, scene: Scene, extra_stream: Any) -> None:
    extra_stream("audit", ["status"], {})
    scene.reader.commit_offsets("c1", {0: 5})
    audit = ChangeStreamReader(db.engine, "audit", write_engine=db.writer)
    assert audit.offsets("c1") == {}
    audit.commit_offsets("c1", {0: 2})
    assert scene.reader.offsets("c1") == {0: 5}
    assert audit.offsets("c1") == {0: 2}


# --- where to start: a time, the end -----------------------------------------------------


def test_start_after_skips_records_committed_before_since(scene: Scene) -> None:
    bucket = scene.bucket("photos")
    p = scene.partition(bucket)
    now = datetime.now(UTC)
    scene.clock.set(now - 3 * HOUR)
    scene.put(bucket, "old-1")
    scene.put(bucket, "old-2")
    scene.clock.set(now - HOUR)
    scene.put(bucket, "new-1")
    scene.put(bucket, "new-2")

    since = real_ns(now - 2 * HOUR)
    after = scene.reader.start_after(p, since)
    assert after == 2
    assert keys_of(scene.reader.read(p, after)) == ["new-1", "new-2"]
    assert all(ns(r) >= since for r in scene.reader.read(p, after))

    # exactly at a record's commit timestamp: that record is included
    first_new = scene.reader.read(p, 2)[0]
    assert scene.reader.start_after(p, ns(first_new)) == 2
    assert scene.reader.start_after(p, ns(first_new) + 1) == 3
    assert scene.reader.start_after(p, real_ns(now - 4 * HOUR)) == 0
    assert scene.reader.start_after(p, real_ns(now)) == 4
    # a partition without records
    other = (p + 1) % PARTITIONS
    assert scene.reader.start_after(other, since) == 0


def test_start_after_refuses_a_time_before_the_retention_period(scene: Scene) -> None:
    bucket = scene.bucket("photos")
    p = scene.partition(bucket)
    scene.put(bucket, "k")
    too_old = real_ns(datetime.now(UTC) - timedelta(days=1, hours=1))
    with pytest.raises(ChangeStreamError, match="retention"):
        scene.reader.start_after(p, too_old)
    # within the retention period is fine
    assert scene.reader.start_after(p, real_ns(datetime.now(UTC) - timedelta(hours=23))) == 0


def test_end_then_read_returns_only_later_records(scene: Scene) -> None:
    bucket = scene.bucket("photos")
    p = scene.partition(bucket)
    other = (p + 1) % PARTITIONS
    assert scene.reader.end(p) == 0
    for i in range(3):
        scene.put(bucket, f"old-{i}")
    end = scene.reader.end(p)
    assert end == 3
    assert scene.reader.read(p, end) == []
    scene.put(bucket, "new-1")
    scene.put(bucket, "new-2")
    assert keys_of(scene.reader.read(p, end)) == ["new-1", "new-2"]
    assert scene.reader.end(other) == 0
    with pytest.raises(ChangeStreamError):
        scene.reader.end(PARTITIONS)


# --- heartbeats --------------------------------------------------------------------------


def test_heartbeat_is_none_while_there_are_records_to_read(scene: Scene) -> None:
    bucket = scene.bucket("photos")
    p = scene.partition(bucket)
    scene.put(bucket, "k1")
    scene.put(bucket, "k2")
    assert scene.reader.heartbeat(p, 0) is None
    assert scene.reader.heartbeat(p, 1) is None
    assert scene.reader.heartbeat(p, 2) is not None


def test_heartbeat_of_an_idle_partition_covers_its_last_record(scene: Scene) -> None:
    bucket = scene.bucket("photos")
    p = scene.partition(bucket)
    # The record's commit timestamp is an hour ahead of real time, so a heartbeat that
    # only reported the reader's clock would claim less than has been read.
    scene.clock.set(datetime.now(UTC) + HOUR)
    scene.put(bucket, "k")
    (record,) = scene.reader.read(p, 0)

    beat = scene.reader.heartbeat(p, record["position"])
    assert beat is not None
    assert beat["stream"] == "bucket_eventing"
    assert beat["partition"] == p
    assert set(beat) == {"stream", "partition", "heartbeat_record"}
    assert beat["heartbeat_record"]["timestamp"].endswith("Z")
    assert ns(beat) >= ns(record)

    early = scene.reader.heartbeat(p, record["position"], now_ns=ns(record) - 10**12)
    assert early is not None
    assert ns(early) >= ns(record)

    later_ns = ns(record) + 5 * 10**9
    late = scene.reader.heartbeat(p, record["position"], now_ns=later_ns)
    assert late is not None
    assert ns(late) >= later_ns


def test_heartbeat_of_an_empty_partition(scene: Scene) -> None:
    now = time.time_ns()
    beat = scene.reader.heartbeat(0, 0, now_ns=now)
    assert beat is not None
    assert ns(beat) >= now
    with pytest.raises(ChangeStreamError):
        scene.reader.heartbeat(PARTITIONS, 0)


def test_a_record_after_a_heartbeat_commits_after_it_whatever_the_clock(scene: Scene) -> None:
    bucket = scene.bucket("photos")
    p = scene.partition(bucket)
    scene.put(bucket, "before")
    (first,) = scene.reader.read(p, 0)

    beat_ns = time.time_ns() + 3_600 * 10**9  # the reader's clock is an hour ahead
    beat = scene.reader.heartbeat(p, first["position"], now_ns=beat_ns)
    assert beat is not None
    assert ns(beat) >= beat_ns

    scene.clock.set(datetime.now(UTC) - HOUR)  # the writer's clock: two hours before it
    scene.put(bucket, "after")
    (second,) = scene.reader.read(p, first["position"])
    assert keys_of([second]) == ["after"]
    assert ns(second) > ns(beat)

    # A heartbeat of another partition does not touch this one.
    other = (p + 1) % PARTITIONS
    assert scene.reader.heartbeat(other, 0, now_ns=beat_ns + 10**12) is not None
    scene.put(bucket, "third")
    (third,) = scene.reader.read(p, second["position"])
    assert ns(second) < ns(third) < beat_ns + 10**12


# --- retention -----------------------------------------------------------------------------


def test_prune_deletes_everything_past_retention_and_positions_go_on(scene: Scene) -> None:
    bucket = scene.bucket("photos")
    p = scene.partition(bucket)
    for i in range(3):
        scene.put(bucket, f"k{i}")
    far_future = time.time_ns() + 10 * 86_400 * 10**9

    assert scene.reader.prune(now_ns=far_future) == 3
    assert scene.reader.read(p, 0) == []
    assert scene.reader.prune(now_ns=far_future) == 0
    assert scene.reader.end(p) == 3

    scene.put(bucket, "k3")
    records = scene.reader.read(p, 0)
    assert positions(records) == [4]
    assert keys_of(records) == ["k3"]


def test_prune_keeps_records_younger_than_retention(scene: Scene) -> None:
    young_bucket, old_bucket = scene.buckets_in(1, 2)
    other = scene.buckets_in(3, 1)[0]
    now = datetime.now(UTC)
    scene.clock.set(now - timedelta(days=2))
    scene.put(old_bucket, "old-1")
    scene.put(old_bucket, "old-2")
    scene.put(other, "old-3")
    scene.clock.set(now - HOUR)
    scene.put(young_bucket, "young-1")
    scene.put(other, "young-2")

    assert scene.reader.prune() == 3
    kept_1 = scene.reader.read(1, 0)
    kept_3 = scene.reader.read(3, 0)
    assert keys_of(kept_1) == ["young-1"]
    assert positions(kept_1) == [3]
    assert keys_of(kept_3) == ["young-2"]
    assert positions(kept_3) == [2]
    assert scene.reader.prune() == 0

    # an explicit "now" just after the old records: the young ones are within retention
    assert scene.reader.prune(now_ns=real_ns(now) + 10**9) == 0
    assert keys_of(read_partition(scene.reader, 1)) == ["young-1"]


def test_prune_a_stream_that_does_not_exist(db: Metabase) -> None:
    with pytest.raises(ChangeStreamError, match="does not exist"):
        ChangeStreamReader(db.engine, "nope").prune()
