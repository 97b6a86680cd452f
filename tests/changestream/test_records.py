"""Change records written by each metabase operation: their exact shape, the transaction
tag, transaction exclusion, rollback, and the options of the stream (on both databases)."""

from __future__ import annotations

import hashlib
import json
import uuid
from datetime import timedelta

import pytest
import sqlalchemy as sa

from ripple.changestream import Operation, TransactionTag
from ripple.changestream.definition import DEFAULT_PARTITIONS
from ripple.changestream.schema import change_partitions
from ripple.metabase import (
    BucketLocation,
    DeleteObjectsItem,
    Metabase,
    Versioning,
    commit_object,
    copy_object,
    create_bucket,
    delete_bucket,
    delete_object,
    delete_object_version,
    delete_objects,
    put_object_legal_hold,
    put_object_retention,
)
from ripple.metabase.errors import BucketNotEmpty, ConflictRetry, InvalidArgument
from ripple.metabase.expire import expire_objects
from ripple.metabase.rows import insert_rows, start_key_write
from ripple.metabase.types import Object, Status
from tests.changestream.conftest import Eventing, keys_in, partition_of_key, read_all, tag_of
from tests.metabase.objects import begin_object, commit_inline_object
from tests.metabase.steps import World

COLUMNS = ["project_id", "bucket_name", "object_key", "version", "status", "total_plain_size"]


@pytest.fixture
def world(db: Metabase) -> World:
    return World(db)


def _keys(world: World, bucket: str, key: str, version: int) -> dict[str, object]:
    return {
        "project_id": str(world.project.id),
        "bucket_name": bucket,
        "object_key": key,
        "version": version,
    }


def _values(obj: Object) -> dict[str, object]:
    return {
        "status": int(obj.status),
        "total_plain_size": obj.total_plain_size,
        "stream_id": str(obj.stream_id),
        "user_metadata": obj.user_metadata or None,
        "tags": obj.tags or None,
        "acl": obj.acl,
        "retention_mode": None if obj.retention is None else int(obj.retention.mode),
        "retain_until": None
        if obj.retention is None
        else obj.retention.retain_until.isoformat().replace("+00:00", "Z"),
        "legal_hold": obj.legal_hold,
        "etag": obj.etag,
    }


def _mods(records: list[dict[str, object]]) -> list[tuple[str, object]]:
    return [(r["mod_type"], m) for r in records for m in r["mods"]]  # type: ignore[attr-defined]


def test_put_writes_one_insert_record(world: World, eventing: Eventing) -> None:
    bucket = world.bucket("photos")
    eventing.enable(world.project.id, "photos")
    obj = world.put(bucket, "red flower.jpg", b"hello")

    [record] = read_all(world.db)
    assert record["mod_type"] == "INSERT"
    assert record["mods"] == [
        {
            "keys": _keys(world, "photos", "red flower.jpg", obj.version),
            "new_values": _values(obj),
            "old_values": {},
        }
    ]
    assert record["table_name"] == "objects"
    assert record["value_capture_type"] == "NEW_ROW_AND_OLD_VALUES"  # since 0010
    assert record["record_sequence"] == "00000000"
    assert record["number_of_records_in_transaction"] == 1
    assert record["number_of_partitions_in_transaction"] == 1
    assert record["is_last_record_in_transaction_in_partition"] is True
    assert record["is_system_transaction"] is False
    assert record["partition"] == partition_of_key(world.project.id, "photos", "red flower.jpg")
    assert record["commit_timestamp"] == world.now.strftime("%Y-%m-%dT%H:%M:%S.%f000Z")
    assert [c["name"] for c in record["column_types"]] == [
        "project_id",
        "bucket_name",
        "object_key",
        "version",
        "status",
        "total_plain_size",
        "stream_id",
        "user_metadata",
        "tags",
        "acl",
        "retention_mode",
        "retain_until",
        "legal_hold",
        "etag",
    ]
    assert [c["is_primary_key"] for c in record["column_types"]] == [True] * 4 + [False] * 10
    assert {c["name"]: c["type"]["code"] for c in record["column_types"]}["version"] == "INT64"
    assert tag_of(record) == {"operation": "put", "etag": hashlib.md5(b"hello").hexdigest()}


def test_overwrite_deletes_then_inserts_in_one_transaction(
    world: World, eventing: Eventing
) -> None:
    bucket = world.bucket("photos")
    eventing.enable(world.project.id, "photos")
    old = world.put(bucket, "a.txt", b"one")
    new = world.put(bucket, "a.txt", b"second")

    records = read_all(world.db)[1:]
    assert [r["mod_type"] for r in records] == ["DELETE", "INSERT"]
    assert [r["record_sequence"] for r in records] == ["00000000", "00000001"]
    assert {r["server_transaction_id"] for r in records} != set()
    assert len({r["server_transaction_id"] for r in records}) == 1
    assert len({r["commit_timestamp"] for r in records}) == 1
    assert [r["number_of_records_in_transaction"] for r in records] == [2, 2]
    assert [r["is_last_record_in_transaction_in_partition"] for r in records] == [False, True]
    assert records[0]["mods"] == [
        {
            "keys": _keys(world, "photos", "a.txt", old.version),
            "new_values": {},
            "old_values": _values(old),
        }
    ]
    assert records[1]["mods"][0]["new_values"] == _values(new)


def test_upload_commit_deletes_the_pending_row_and_begin_writes_nothing(
    world: World, eventing: Eventing
) -> None:
    bucket = world.bucket("photos", Versioning.ENABLED)
    eventing.enable(world.project.id, "photos")
    pending = begin_object(world.db, world.loc(bucket, "big.bin"))
    assert read_all(world.db) == []  # begin is not an event-making transaction: excluded

    done = commit_object(
        world.db,
        pending,
        size=4096,
        etag="e" * 32,
        tag=TransactionTag(Operation.COMPLETE_MULTIPART_UPLOAD),
    ).object
    delete, insert = read_all(world.db)
    assert delete["mods"][0]["old_values"]["status"] == int(Status.PENDING)
    assert insert["mods"][0]["new_values"] == _values(done)
    assert insert["mods"][0]["new_values"]["status"] == int(Status.COMMITTED_VERSIONED)
    assert tag_of(insert) == {
        "operation": "complete-multipart-upload",
        "etag": "e" * 32,
        "bucket_versioning": {"photos": "Enabled"},
    }


@pytest.mark.parametrize(
    ("versioning", "mods"),
    [
        (Versioning.UNVERSIONED, [("DELETE", Status.COMMITTED_UNVERSIONED)]),
        (Versioning.ENABLED, [("INSERT", Status.DELETE_MARKER_VERSIONED)]),
        (
            Versioning.SUSPENDED,
            [
                ("DELETE", Status.COMMITTED_UNVERSIONED),
                ("INSERT", Status.DELETE_MARKER_UNVERSIONED),
            ],
        ),
    ],
)
def test_delete_object_records_per_versioning(
    world: World, eventing: Eventing, versioning: Versioning, mods: list[tuple[str, Status]]
) -> None:
    bucket = world.bucket("photos", versioning)
    eventing.enable(world.project.id, "photos")
    world.put(bucket, "a.txt")
    before = len(read_all(world.db))
    delete_object(world.db, world.loc(bucket, "a.txt"))

    records = read_all(world.db)[before:]
    got = [
        (kind, Status(m["new_values" if kind == "INSERT" else "old_values"]["status"]))
        for kind, m in _mods(records)
    ]
    assert got == mods
    assert all(tag_of(r)["operation"] == "delete" for r in records)


def test_delete_exact_version_and_copy(world: World, eventing: Eventing) -> None:
    bucket = world.bucket("photos", Versioning.ENABLED)
    eventing.enable(world.project.id, "photos")
    first = world.put(bucket, "a.txt", b"one")
    world.put(bucket, "a.txt", b"two")
    copy_object(world.db, world.loc(bucket, "a.txt"), world.loc(bucket, "b.txt"))
    delete_object_version(world.db, world.loc(bucket, "a.txt"), first.version_id)

    records = read_all(world.db)
    copy, delete = records[-2], records[-1]
    assert tag_of(copy)["operation"] == "copy"
    assert tag_of(copy)["etag"] == hashlib.md5(b"two").hexdigest()
    assert copy["mods"][0]["keys"]["object_key"] == "b.txt"
    assert delete["mod_type"] == "DELETE"
    assert delete["mods"][0]["old_values"] == _values(first)
    assert tag_of(delete)["operation"] == "delete"


def test_delete_objects_writes_one_record_per_mod_type(world: World, eventing: Eventing) -> None:
    bucket = world.bucket("photos", Versioning.SUSPENDED)
    eventing.enable(world.project.id, "photos")
    # three keys whose single-key changes go to three partitions
    keys = [keys_in(world.project.id, "photos", p, 1, prefix=f"{p}-")[0] for p in (2, 0, 1)]
    for key in keys:
        world.put(bucket, key)
    assert len({r["partition"] for r in read_all(world.db)}) == 3
    tag = TransactionTag(request_id="R1", host_id="H1", principal="P1", source_ip="127.0.0.1")
    delete_objects(world.db, bucket, [DeleteObjectsItem(k) for k in [*keys, "missing"]], tag=tag)

    records = [r for r in read_all(world.db) if tag_of(r)["operation"] == "delete-objects"]
    assert [r["mod_type"] for r in records] == ["DELETE", "INSERT"]
    assert [m["keys"]["object_key"] for m in records[0]["mods"]] == keys
    assert [m["keys"]["object_key"] for m in records[1]["mods"]] == sorted([*keys, "missing"])
    # the whole transaction in one partition: that of the least key it changed
    assert {r["partition"] for r in records} == {
        partition_of_key(world.project.id, "photos", min(keys))
    }
    assert [r["number_of_partitions_in_transaction"] for r in records] == [1, 1]
    assert tag_of(records[0]) == {
        "operation": "delete-objects",
        "request_id": "R1",
        "host_id": "H1",
        "principal": "P1",
        "source_ip": "127.0.0.1",
        "bucket_versioning": {"photos": "Suspended"},
    }


def test_buckets_without_eventing_write_no_records(world: World, eventing: Eventing) -> None:
    bucket = world.bucket("plain", Versioning.ENABLED)
    obj = world.put(bucket, "a")
    world.upload(bucket, "b")
    copy_object(world.db, world.loc(bucket, "a"), world.loc(bucket, "c"))
    delete_object(world.db, world.loc(bucket, "a"))
    delete_object_version(world.db, world.loc(bucket, "a"), obj.version_id)
    delete_objects(world.db, bucket, [DeleteObjectsItem("b"), DeleteObjectsItem("c")])
    assert len(world.rows()) > 0
    assert read_all(world.db) == []


def _insert(world: World, conn: sa.Connection, bucket: str, key: str) -> None:
    """Insert a committed row by hand, as an operation would, in `conn`'s transaction."""
    loc = world.loc(BucketLocation(world.project.id, bucket), key)
    start_key_write(conn, loc)
    row = Object(
        project_id=loc.project_id,
        bucket_name=loc.bucket_name,
        object_key=key,
        version=1,
        stream_id=uuid.uuid4(),
        status=Status.COMMITTED_UNVERSIONED,
        created_at=world.now,
    )
    insert_rows(conn, [row])


def test_transaction_touching_both_kinds_records_only_the_eventing_bucket(
    world: World, eventing: Eventing
) -> None:
    world.bucket("evented")
    world.bucket("plain")
    eventing.enable(world.project.id, "evented")
    with world.db.write(
        TransactionTag(Operation.PUT), exclude_txn_from_change_streams=False
    ) as conn:
        _insert(world, conn, "evented", "k")
        _insert(world, conn, "plain", "k")

    [record] = read_all(world.db)
    assert [m["keys"]["bucket_name"] for m in record["mods"]] == ["evented"]
    assert len(world.rows()) == 2


def test_explicitly_excluded_transaction_writes_no_record(world: World, eventing: Eventing) -> None:
    world.bucket("evented")
    eventing.enable(world.project.id, "evented")
    with world.db.write(TransactionTag(Operation.PUT)) as conn:  # excluded unless it says otherwise
        _insert(world, conn, "evented", "k")
    assert len(world.rows()) == 1
    assert read_all(world.db) == []


def _write_then_fail(world: World) -> None:
    with world.db.write(exclude_txn_from_change_streams=False) as conn:
        _insert(world, conn, "photos", "k")
        raise RuntimeError("client went away")


def test_rolled_back_transaction_leaves_no_record(world: World, eventing: Eventing) -> None:
    bucket = world.bucket("photos")
    eventing.enable(world.project.id, "photos")
    with pytest.raises(RuntimeError, match="client went away"):
        _write_then_fail(world)
    assert world.rows() == []
    assert read_all(world.db) == []
    world.put(bucket, "k")
    assert [r["position"] for r in read_all(world.db)] == [1]  # no position was used up


def test_a_record_without_its_partition_fails_the_whole_write(
    world: World, eventing: Eventing
) -> None:
    bucket = world.bucket("photos")
    eventing.enable(world.project.id, "photos")
    part = partition_of_key(world.project.id, "photos", "k", DEFAULT_PARTITIONS)
    row = {"stream_name": "bucket_eventing", "partition": part}
    where = sa.text("stream_name = :stream_name AND partition = :partition")
    with world.db.write() as conn:  # a damaged stream: its partition row is gone
        conn.execute(sa.delete(change_partitions).where(where), row)
    try:
        with pytest.raises((sa.exc.DBAPIError, RuntimeError), match=r"(?i)null|partition"):
            world.put(bucket, "k")
    finally:
        with world.db.write() as conn:
            conn.execute(
                sa.insert(change_partitions).values(**row, next_position=0, last_commit_ns=0)
            )
    assert world.rows() == []  # the object was not committed without its record
    assert read_all(world.db) == []


def test_a_record_whose_position_is_taken_fails_the_whole_write(
    world: World, eventing: Eventing
) -> None:
    """The records' INSERT (straight to the driver on both databases) fails as it would
    through SQLAlchemy, and the object is not committed without its record."""
    bucket = world.bucket("photos")
    eventing.enable(world.project.id, "photos")
    part = partition_of_key(world.project.id, "photos", "a", DEFAULT_PARTITIONS)
    first, second = keys_in(world.project.id, "photos", part, 2, prefix="a")
    world.put(bucket, first)
    where = sa.and_(
        change_partitions.c.stream_name == "bucket_eventing", change_partitions.c.partition == part
    )
    with world.db.write() as conn:  # a damaged stream: its partition forgot position 1
        conn.execute(sa.update(change_partitions).where(where).values(next_position=0))
    # SQLite: the unique violation itself; PostgreSQL's writers retry it, then give up
    failure = sa.exc.IntegrityError if world.db.dialect == "sqlite" else ConflictRetry
    with pytest.raises(failure):
        world.put(bucket, second)
    assert [row.object_key for row in world.rows()] == [first]
    assert [r["position"] for r in read_all(world.db)] == [1]


def test_read_only_transaction_cannot_set_exclusion(db: Metabase) -> None:
    with (
        pytest.raises(InvalidArgument, match="read-only"),
        db.read(exclude_txn_from_change_streams=True),
    ):
        pass


def test_lock_setting_changes_are_recorded_once_each(world: World, eventing: Eventing) -> None:
    """Since 0011 bucket_eventing watches the lock settings: each change is one UPDATE in
    a transaction tagged with its operation; setting what is already set records nothing,
    and a bucket without eventing records nothing either."""
    bucket = world.bucket("locked", lock=True)
    quiet = world.bucket("quiet", lock=True)
    eventing.enable(world.project.id, "locked")
    obj = world.put(bucket, "a")
    world.put(quiet, "a")
    for where in (bucket, quiet):
        put_object_legal_hold(world.db, world.loc(where, "a"), True)
        put_object_legal_hold(world.db, world.loc(where, "a"), True)  # no change
        put_object_retention(world.db, world.loc(where, "a"), world.governance())
    records = read_all(world.db)
    assert [r["mod_type"] for r in records] == ["INSERT", "UPDATE", "UPDATE"]
    assert {m["keys"]["bucket_name"] for r in records for m in r["mods"]} == {"locked"}
    hold, retention = records[1], records[2]
    assert hold["mods"][0]["old_values"] == {"legal_hold": False}
    assert hold["mods"][0]["new_values"]["legal_hold"] is True
    assert tag_of(hold)["operation"] == "put-object-legal-hold"
    assert tag_of(hold)["etag"] == obj.etag
    assert retention["mods"][0]["old_values"] == {"retention_mode": None, "retain_until": None}
    assert retention["mods"][0]["new_values"]["retention_mode"] == 1  # GOVERNANCE
    assert tag_of(retention)["operation"] == "put-object-retention"


def test_update_records_follow_the_value_capture_type(
    world: World, eventing: Eventing, extra_stream
) -> None:
    stream = extra_stream(
        "holds", ["legal_hold", "status"], {"value_capture_type": "NEW_ROW_AND_OLD_VALUES"}
    )
    bucket = world.bucket("locked", lock=True)
    obj = world.put(bucket, "a")
    put_object_legal_hold(world.db, world.loc(bucket, "a"), True)
    put_object_retention(world.db, world.loc(bucket, "a"), world.governance())  # no watched change

    records = read_all(world.db, stream)
    assert [r["mod_type"] for r in records] == ["INSERT", "UPDATE"]
    assert records[1]["mods"] == [
        {
            "keys": _keys(world, "locked", "a", obj.version),
            "new_values": {"legal_hold": True, "status": int(obj.status)},
            "old_values": {"legal_hold": False},
        }
    ]
    assert records[1]["value_capture_type"] == "NEW_ROW_AND_OLD_VALUES"


@pytest.mark.parametrize(
    ("capture", "delete_old"),
    [("OLD_AND_NEW_VALUES", True), ("NEW_VALUES", False), ("NEW_ROW", False)],
)
def test_delete_old_values_per_value_capture_type(
    world: World, extra_stream, capture: str, delete_old: bool
) -> None:
    stream = extra_stream("captured", ["status"], {"value_capture_type": capture})
    bucket = world.bucket("plain")
    world.put(bucket, "a")
    delete_object(world.db, world.loc(bucket, "a"))
    insert, delete = read_all(world.db, stream)
    assert insert["mods"][0]["new_values"] == {"status": 3}
    assert delete["mods"][0]["new_values"] == {}
    assert delete["mods"][0]["old_values"] == ({"status": 3} if delete_old else {})


@pytest.mark.parametrize(
    ("options", "kinds"),
    [
        ({"exclude_insert": True}, ["DELETE"]),
        ({"exclude_delete": True}, ["INSERT", "INSERT"]),
        ({}, ["INSERT", "DELETE", "INSERT"]),
    ],
)
def test_mod_type_exclusion_options(
    world: World, extra_stream, options: dict[str, bool], kinds: list[str]
) -> None:
    stream = extra_stream("some", ["status"], options)
    bucket = world.bucket("plain")
    world.put(bucket, "a")
    world.put(bucket, "a")
    assert [r["mod_type"] for r in read_all(world.db, stream)] == kinds


def test_stream_without_txn_exclusion_records_every_bucket(world: World, extra_stream) -> None:
    stream = extra_stream("all_buckets", ["status"], {"allow_txn_exclusion": False})
    bucket = world.bucket("plain")
    begin_object(world.db, world.loc(bucket, "pending"))
    world.put(bucket, "a")
    assert read_all(world.db) == []  # bucket_eventing allows exclusion: nothing
    assert [r["mod_type"] for r in read_all(world.db, stream)] == ["INSERT", "INSERT"]


@pytest.mark.parametrize("exclude_ttl", [True, False])
def test_ttl_deletes_are_system_transactions(
    world: World, eventing: Eventing, extra_stream, exclude_ttl: bool
) -> None:
    stream = extra_stream("ttl", ["status"], {"exclude_ttl_deletes": exclude_ttl})
    bucket = world.bucket("photos")
    eventing.enable(world.project.id, "photos")
    commit_inline_object(
        world.db,
        world.loc(bucket, "tmp"),
        b"x",
        etag="e",
        expires_at=world.now + timedelta(hours=1),
    )
    world.tick(timedelta(hours=2))
    assert expire_objects(world.db).deleted == 1
    assert world.rows() == []

    # bucket_eventing records expirations since 0012 (LifecycleExpiration events)
    assert [r["mod_type"] for r in read_all(world.db)] == ["INSERT", "DELETE"]
    records = read_all(world.db, stream)
    if exclude_ttl:
        assert [r["mod_type"] for r in records] == ["INSERT"]
    else:
        assert [r["mod_type"] for r in records] == ["INSERT", "DELETE"]
        assert records[1]["is_system_transaction"] is True
        assert tag_of(records[1]) == {"operation": "ttl-delete"}


def test_expire_keeps_locked_versions(world: World) -> None:
    bucket = world.bucket("locked", lock=True)
    commit_inline_object(
        world.db,
        world.loc(bucket, "held"),
        b"x",
        etag="e",
        legal_hold=True,
        expires_at=world.now + timedelta(minutes=1),
    )
    world.tick(timedelta(hours=1))
    result = expire_objects(world.db)
    assert (result.deleted, result.kept_locked) == (0, 1)
    assert len(world.rows()) == 1


def test_records_are_stored_compactly(world: World, eventing: Eventing) -> None:
    """The stored mods are compact JSON, not the pretty form."""
    bucket = world.bucket("photos")
    eventing.enable(world.project.id, "photos")
    world.put(bucket, "a")
    with world.db.read() as conn:
        raw = conn.execute(
            sa.text("SELECT mods FROM change_records WHERE stream_name = 'bucket_eventing'")
        ).scalar_one()
    assert ", " not in raw
    assert json.loads(raw)[0]["keys"]["object_key"] == "a"


def test_buckets_are_recorded_in_project_eventing(world: World) -> None:
    """CreateBucket and DeleteBucket write one record each to `project_eventing` (no
    eventing needed: the stream excludes no transaction), with the request's tag; a refused
    DeleteBucket (not empty) and the bucket's objects write nothing there."""
    tag = TransactionTag(request_id="R1", principal="P1", source_ip="192.0.2.7")
    loc = BucketLocation(world.project.id, "photos")
    create_bucket(world.db, loc, object_lock_enabled=True, tag=tag)
    world.put(loc, "a")
    with pytest.raises(BucketNotEmpty):
        delete_bucket(world.db, loc)
    delete_object(world.db, world.loc(loc, "a"))  # a delete marker: still not empty
    records = read_all(world.db, "project_eventing")
    assert [r["mod_type"] for r in records] == ["INSERT"]
    [created] = records
    assert created["table_name"] == "buckets"
    assert created["mods"] == [
        {
            "keys": {"project_id": str(world.project.id), "name": "photos"},
            "new_values": {
                "versioning": 1,
                "object_lock_enabled": True,
                "created_at": created["mods"][0]["new_values"]["created_at"],
            },
            "old_values": {},
        }
    ]
    assert tag_of(created) == {
        "operation": "create-bucket",
        "request_id": "R1",
        "principal": "P1",
        "source_ip": "192.0.2.7",
    }
    empty = BucketLocation(world.project.id, "empty")
    create_bucket(world.db, empty)
    delete_bucket(world.db, empty, tag=TransactionTag(request_id="R2"))
    *_, removed = read_all(world.db, "project_eventing")
    assert removed["mod_type"] == "DELETE"
    assert removed["mods"][0]["old_values"]["versioning"] == 0
    assert tag_of(removed) == {"operation": "delete-bucket", "request_id": "R2"}
