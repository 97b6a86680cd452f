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
from ripple.events import timestamp_ns
from ripple.metabase import (
    BucketLocation,
    DeleteObjectsItem,
    Metabase,
    Object,
    ObjectLocation,
    Status,
    create_bucket,
    create_project,
    delete_object,
    delete_objects,
)
from ripple.metabase.rows import insert_rows, new_stream_id
from tests.changestream.conftest import Eventing, keys_in, partition_of_key, tag_of
from tests.metabase.hooks import before_commit
from tests.metabase.objects import commit_inline_object

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
    """A project whose buckets the test creates with eventing on, and a clock. A single-key
    change of an object goes to the partition of its key (`partition`); a test that wants
    records in a partition picks keys there (`keys_in`)."""

    def __init__(self, db: Metabase, eventing: Eventing) -> None:
        self.db = db
        self.eventing = eventing
        self.clock = Clock(db)
        self.project = create_project(db, "reader-test")
        self.reader = ChangeStreamReader(db.engine, "bucket_eventing", write_engine=db.writer)

    def partition(self, bucket: str, key: str) -> int:
        """The partition of a change to `key` by a transaction changing no other key of
        `bucket`."""
        return partition_of_key(self.project.id, bucket, key, PARTITIONS)

    def keys_in(self, bucket: str, partition: int, count: int, *, prefix: str = "k") -> list[str]:
        """`count` keys `<prefix><n>` of `bucket` whose single-key changes go to `partition`."""
        return keys_in(
            self.project.id, bucket, partition, count, prefix=prefix, partitions=PARTITIONS
        )

    def key_in(self, bucket: str, partition: int, prefix: str) -> str:
        """One key `<prefix><n>` of `bucket` whose single-key changes go to `partition`."""
        (key,) = self.keys_in(bucket, partition, 1, prefix=prefix)
        return key

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
    p = 2
    keys = scene.keys_in(bucket, p, 5)
    for key in keys:
        scene.put(bucket, key)

    everything = scene.reader.read(p, 0)
    assert positions(everything) == [1, 2, 3, 4, 5]
    assert keys_of(everything) == keys
    assert all(r["partition"] == p and r["stream"] == "bucket_eventing" for r in everything)

    later = scene.reader.read(p, 2)
    assert positions(later) == [3, 4, 5]
    assert keys_of(later) == keys[2:]
    assert later == everything[2:]
    assert scene.reader.read(p, 5) == []
    assert scene.reader.read(p, 99) == []
    for other in set(range(PARTITIONS)) - {p}:
        assert scene.reader.read(other, 0) == []


def test_read_honours_the_limit(scene: Scene) -> None:
    bucket = scene.bucket("photos")
    p = 1
    for key in scene.keys_in(bucket, p, 5):
        scene.put(bucket, key)

    assert positions(scene.reader.read(p, 0, limit=2)) == [1, 2]
    assert positions(scene.reader.read(p, 2, limit=2)) == [3, 4]
    assert positions(scene.reader.read(p, 4, limit=2)) == [5]
    assert positions(scene.reader.read(p, 0, limit=1)) == [1]
    assert positions(scene.reader.read(p, 0, limit=100)) == [1, 2, 3, 4, 5]


def test_positions_are_dense_per_partition_and_commit_timestamps_increase(
    scene: Scene,
) -> None:
    # The keys of two buckets share partition `a`, those of a third are in `b`, and a
    # bucket without eventing writes keys of `a` too; the writes interleave. The clock
    # stands still, so the commit timestamps would all be equal if the stream did not
    # make them strictly increasing.
    a, b = 0, 1
    shared = [scene.bucket("shared-1"), scene.bucket("shared-2")]
    alone = scene.bucket("alone")
    quiet = scene.bucket("quiet", eventing=False)
    plan = [(bucket, a) for bucket in shared] + [(alone, b), (quiet, a)]
    keys = {bucket: scene.keys_in(bucket, p, 6, prefix=f"{bucket}/k") for bucket, p in plan}
    written: dict[int, list[str]] = {a: [], b: []}
    for i in range(6):
        for bucket, p in plan:
            key = keys[bucket][i]
            scene.put(bucket, key)
            if bucket != quiet:
                written[p].append(key)

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
    p = 3
    start = scene.clock.now
    for i, key in enumerate(scene.keys_in(bucket, p, 4)):
        scene.clock.set(start - i * HOUR)  # every write an hour "earlier"
        scene.put(bucket, key)

    records = scene.reader.read(p, 0)
    assert len(records) == 4
    stamps = [ns(r) for r in records]
    assert stamps[0] == real_ns(start)
    assert increasing(stamps), stamps


def test_commit_timestamp_is_the_clock_at_commit(scene: Scene) -> None:
    bucket = scene.bucket("photos")
    p = scene.partition(bucket, "k")
    when = datetime.now(UTC).replace(microsecond=123456) - 2 * HOUR
    scene.clock.set(when)
    scene.put(bucket, "k")
    (record,) = scene.reader.read(p, 0)
    assert ns(record) == real_ns(when)
    assert record["commit_timestamp"].endswith("123456000Z")


# --- transactions and partitions ---------------------------------------------------------


def test_records_of_one_transaction_are_consecutive_and_marked(scene: Scene) -> None:
    bucket = scene.bucket("photos")
    p = 0
    before, photo, after = (scene.key_in(bucket, p, k) for k in ("before-", "photo-", "after-"))
    scene.put(bucket, before)
    scene.put(bucket, photo, b"v1")
    scene.put(bucket, photo, b"v2")  # an overwrite: DELETE and INSERT in one transaction
    scene.put(bucket, after)

    records = scene.reader.read(p, 0)
    assert positions(records) == [1, 2, 3, 4, 5]
    overwrite = [
        r for r in records if r["server_transaction_id"] == records[2]["server_transaction_id"]
    ]
    assert positions(overwrite) == [3, 4]
    assert keys_of(records) == [before, photo, photo, photo, after]
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
    # A transaction changing two buckets: its changes in `one` go to partition 0, that of
    # `a`, the least key it changes there (`c` alone would go to 1); those in `two` go to
    # partition 2, that of `b`.
    one, two = scene.bucket("one"), scene.bucket("two")
    first = scene.key_in(one, 0, "first-")
    a, c = scene.key_in(one, 0, "a"), scene.key_in(one, 1, "c")
    b = scene.key_in(two, 2, "b")
    scene.put(one, first)
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
        insert_rows(conn, [row(one, a), row(two, b), row(one, c)])

    in_one = scene.reader.read(0, 0)
    in_two = scene.reader.read(2, 0)
    assert positions(in_one) == [1, 2]
    assert positions(in_two) == [1]
    for p in (1, 3):
        assert scene.reader.read(p, 0) == []
    assert keys_of([in_one[0]]) == [first]
    both = [in_one[1], in_two[0]]
    assert in_one[0]["server_transaction_id"] != both[0]["server_transaction_id"]
    assert both[0]["server_transaction_id"] == both[1]["server_transaction_id"]
    assert keys_of([both[0]]) == [a, c]
    assert keys_of([both[1]]) == [b]
    for record in both:
        assert record["is_last_record_in_transaction_in_partition"] is True
        assert record["number_of_records_in_transaction"] == 2
        assert record["number_of_partitions_in_transaction"] == 2
    assert sorted(r["record_sequence"] for r in both) == ["00000000", "00000001"]


def test_single_key_changes_go_to_the_partition_of_their_key(scene: Scene) -> None:
    # Each bucket has keys in every partition: a bucket's records are spread by key.
    buckets = [scene.bucket(f"spread-{i}") for i in range(3)]
    quiet = scene.bucket("no-eventing", eventing=False)
    keys = {
        bucket: [k for p in range(PARTITIONS) for k in scene.keys_in(bucket, p, 2, prefix=f"{p}-")]
        for bucket in [*buckets, quiet]
    }
    for bucket in [*buckets, quiet]:
        for key in keys[bucket]:
            scene.put(bucket, key)
            scene.delete(bucket, key)

    seen: dict[tuple[str, str], list[int]] = {}
    for p in range(PARTITIONS):
        for record in read_partition(scene.reader, p):
            (mod,) = record["mods"]
            assert mod["keys"]["project_id"] == str(scene.project.id)
            seen.setdefault((mod["keys"]["bucket_name"], mod["keys"]["object_key"]), []).append(p)
    assert seen == {
        (b, k): [partition_of_key(scene.project.id, b, k)] * 2 for b in buckets for k in keys[b]
    }
    for bucket in buckets:
        assert {p for (b, _), (p, _) in seen.items() if b == bucket} == set(range(PARTITIONS))


def test_a_multi_key_transaction_goes_to_the_partition_of_its_least_key(
    db: Metabase, scene: Scene
) -> None:
    bucket = scene.bucket("photos")
    # one key per partition; the least key is neither the first written nor the first deleted
    keys = [scene.key_in(bucket, p, f"{p}-") for p in (2, 0, 3, 1)]
    least = min(keys)
    assert least == keys[1]
    for key in keys:
        scene.put(bucket, key)
    assert {scene.partition(bucket, k) for k in keys} == set(range(PARTITIONS))

    delete_objects(
        db, BucketLocation(scene.project.id, bucket), [DeleteObjectsItem(k) for k in keys]
    )

    everything = [r for p in range(PARTITIONS) for r in read_partition(scene.reader, p)]
    puts = [r for r in everything if tag_of(r).get("operation") != "delete-objects"]
    assert sorted((r["partition"], *keys_of([r])) for r in puts) == sorted(
        (scene.partition(bucket, k), k) for k in keys
    )
    (deleted,) = [r for r in everything if tag_of(r).get("operation") == "delete-objects"]
    assert deleted["mod_type"] == "DELETE"
    assert sorted(keys_of([deleted])) == sorted(keys)
    assert deleted["partition"] == scene.partition(bucket, least)
    assert deleted["number_of_partitions_in_transaction"] == 1
    assert deleted["is_last_record_in_transaction_in_partition"] is True


def test_a_rolled_back_transaction_leaves_no_record_and_takes_no_position(
    db: Metabase, scene: Scene
) -> None:
    bucket = scene.bucket("photos")
    p = 1
    # all four keys in `p`: the rolled-back ones would have taken positions there
    kept_1, gone_1, gone_2, kept_2 = (
        scene.key_in(bucket, p, k) for k in ("kept-1-", "gone-1-", "gone-2-", "kept-2-")
    )

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

    scene.put(bucket, kept_1)
    with pytest.raises(Boom):
        write_then_fail(gone_1)

    # Also after the records were inserted (on SQLite their positions already taken).
    def fail_before_commit(conn: sa.Connection) -> None:
        assert conn.execute(OBJECT_RECORDS).scalar() == 2
        raise Boom

    with (
        before_commit(db, fail_before_commit),
        pytest.raises(Boom),
        db.write(exclude_txn_from_change_streams=False) as conn,
    ):
        insert_rows(conn, [row(gone_2)])
    scene.put(bucket, kept_2)

    records = scene.reader.read(p, 0)
    assert keys_of(records) == [kept_1, kept_2]
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
    p = 2
    old = scene.keys_in(bucket, p, 2, prefix="old-")
    new = scene.keys_in(bucket, p, 2, prefix="new-")
    now = datetime.now(UTC)
    scene.clock.set(now - 3 * HOUR)
    for key in old:
        scene.put(bucket, key)
    scene.clock.set(now - HOUR)
    for key in new:
        scene.put(bucket, key)

    since = real_ns(now - 2 * HOUR)
    after = scene.reader.start_after(p, since)
    assert after == 2
    assert keys_of(scene.reader.read(p, after)) == new
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
    p = scene.partition(bucket, "k")
    scene.put(bucket, "k")
    too_old = real_ns(datetime.now(UTC) - timedelta(days=1, hours=1))
    with pytest.raises(ChangeStreamError, match="retention"):
        scene.reader.start_after(p, too_old)
    # within the retention period is fine
    assert scene.reader.start_after(p, real_ns(datetime.now(UTC) - timedelta(hours=23))) == 0


def test_end_then_read_returns_only_later_records(scene: Scene) -> None:
    bucket = scene.bucket("photos")
    p = 3
    other = (p + 1) % PARTITIONS
    assert scene.reader.end(p) == 0
    for key in scene.keys_in(bucket, p, 3, prefix="old-"):
        scene.put(bucket, key)
    end = scene.reader.end(p)
    assert end == 3
    assert scene.reader.read(p, end) == []
    new = scene.keys_in(bucket, p, 2, prefix="new-")
    for key in new:
        scene.put(bucket, key)
    assert keys_of(scene.reader.read(p, end)) == new
    assert scene.reader.end(other) == 0
    with pytest.raises(ChangeStreamError):
        scene.reader.end(PARTITIONS)


# --- heartbeats --------------------------------------------------------------------------


def test_heartbeat_is_none_while_there_are_records_to_read(scene: Scene) -> None:
    bucket = scene.bucket("photos")
    p = 0
    for key in scene.keys_in(bucket, p, 2):
        scene.put(bucket, key)
    assert scene.reader.heartbeat(p, 0) is None
    assert scene.reader.heartbeat(p, 1) is None
    assert scene.reader.heartbeat(p, 2) is not None


def test_heartbeat_of_an_idle_partition_covers_its_last_record(scene: Scene) -> None:
    bucket = scene.bucket("photos")
    p = scene.partition(bucket, "k")
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
    p = 1
    before, after, third = (scene.key_in(bucket, p, k) for k in ("before-", "after-", "third-"))
    scene.put(bucket, before)
    (first,) = scene.reader.read(p, 0)

    beat_ns = time.time_ns() + 3_600 * 10**9  # the reader's clock is an hour ahead
    beat = scene.reader.heartbeat(p, first["position"], now_ns=beat_ns)
    assert beat is not None
    assert ns(beat) >= beat_ns

    scene.clock.set(datetime.now(UTC) - HOUR)  # the writer's clock: two hours before it
    scene.put(bucket, after)
    (second,) = scene.reader.read(p, first["position"])
    assert keys_of([second]) == [after]
    assert ns(second) > ns(beat)

    # A heartbeat of another partition: a later commit here is after it too (a commit is
    # later than everything the stream's partitions have recorded, so a key's changes keep
    # their order whichever partitions they were recorded in).
    other = (p + 1) % PARTITIONS
    other_beat = scene.reader.heartbeat(other, 0, now_ns=beat_ns + 10**12)
    assert other_beat is not None
    scene.put(bucket, third)
    (last,) = scene.reader.read(p, second["position"])
    assert keys_of([last]) == [third]
    assert ns(second) < ns(other_beat) < ns(last)


# --- retention -----------------------------------------------------------------------------


def test_prune_deletes_everything_past_retention_and_positions_go_on(scene: Scene) -> None:
    bucket = scene.bucket("photos")
    p = 2
    keys = scene.keys_in(bucket, p, 4)
    for key in keys[:3]:
        scene.put(bucket, key)
    far_future = time.time_ns() + 10 * 86_400 * 10**9

    assert scene.reader.prune(now_ns=far_future) == 3
    assert scene.reader.read(p, 0) == []
    assert scene.reader.prune(now_ns=far_future) == 0
    assert scene.reader.end(p) == 3

    scene.put(bucket, keys[3])
    records = scene.reader.read(p, 0)
    assert positions(records) == [4]
    assert keys_of(records) == [keys[3]]


def test_prune_keeps_records_younger_than_retention(scene: Scene) -> None:
    # partition 1: two old records, then a young one; partition 3: one of each
    photos, docs = scene.bucket("photos"), scene.bucket("docs")
    old_1, old_2 = scene.keys_in(photos, 1, 2, prefix="old-")
    young_1 = scene.key_in(docs, 1, "young-")
    old_3 = scene.key_in(docs, 3, "old-")
    young_2 = scene.key_in(photos, 3, "young-")
    now = datetime.now(UTC)
    scene.clock.set(now - timedelta(days=2))
    scene.put(photos, old_1)
    scene.put(photos, old_2)
    scene.put(docs, old_3)
    scene.clock.set(now - HOUR)
    scene.put(docs, young_1)
    scene.put(photos, young_2)

    assert scene.reader.prune() == 3
    kept_1 = scene.reader.read(1, 0)
    kept_3 = scene.reader.read(3, 0)
    assert keys_of(kept_1) == [young_1]
    assert positions(kept_1) == [3]
    assert keys_of(kept_3) == [young_2]
    assert positions(kept_3) == [2]
    assert scene.reader.prune() == 0

    # an explicit "now" just after the old records: the young ones are within retention
    assert scene.reader.prune(now_ns=real_ns(now) + 10**9) == 0
    assert keys_of(read_partition(scene.reader, 1)) == [young_1]


def test_prune_a_stream_that_does_not_exist(db: Metabase) -> None:
    with pytest.raises(ChangeStreamError, match="does not exist"):
        ChangeStreamReader(db.engine, "nope").prune()
