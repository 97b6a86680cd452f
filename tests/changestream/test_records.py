"""Change records written by each metabase operation: their exact shape, the transaction
tag, transaction exclusion, rollback, and the options of the stream (on both databases)."""

from __future__ import annotations

import hashlib
import json
import uuid
from datetime import timedelta

import pytest
import sqlalchemy as sa

from ripple.changestream import TransactionTag
from ripple.changestream.definition import DEFAULT_PARTITIONS
from ripple.changestream.schema import change_partitions
from ripple.changestream.writer import partition_of
from ripple.metabase import (
    BucketLocation,
    DeleteObjectsItem,
    Metabase,
    Versioning,
    begin_object,
    commit_inline_object,
    commit_object,
    copy_object,
    delete_object,
    delete_object_version,
    delete_objects,
    put_object_legal_hold,
    put_object_retention,
)
from ripple.metabase.errors import InvalidArgument
from ripple.metabase.expire import expire_objects
from ripple.metabase.rows import insert_rows, start_key_write
from ripple.metabase.types import Object, Status
from tests.changestream.conftest import Eventing, read_all, tag_of
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
    assert record["partition"] == partition_of([world.project.id, "photos"], 4)
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
    ]
    assert [c["is_primary_key"] for c in record["column_types"]] == [True] * 4 + [False] * 5
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
        world.db, pending, size=4096, etag="e" * 32, tag=TransactionTag("complete-multipart-upload")
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
    for key in ("a", "b", "c"):
        world.put(bucket, key)
    before = len(read_all(world.db))
    tag = TransactionTag(request_id="R1", host_id="H1", principal="P1", source_ip="127.0.0.1")
    delete_objects(
        world.db, bucket, [DeleteObjectsItem(k) for k in ("a", "b", "c", "missing")], tag=tag
    )

    records = read_all(world.db)[before:]
    assert [r["mod_type"] for r in records] == ["DELETE", "INSERT"]
    assert [m["keys"]["object_key"] for m in records[0]["mods"]] == ["a", "b", "c"]
    assert [m["keys"]["object_key"] for m in records[1]["mods"]] == ["a", "b", "c", "missing"]
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
    with world.db.write(TransactionTag("put"), exclude_txn_from_change_streams=False) as conn:
        _insert(world, conn, "evented", "k")
        _insert(world, conn, "plain", "k")

    [record] = read_all(world.db)
    assert [m["keys"]["bucket_name"] for m in record["mods"]] == ["evented"]
    assert len(world.rows()) == 2


def test_explicitly_excluded_transaction_writes_no_record(world: World, eventing: Eventing) -> None:
    world.bucket("evented")
    eventing.enable(world.project.id, "evented")
    with world.db.write(TransactionTag("put")) as conn:  # excluded unless it says otherwise
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
    part = partition_of([world.project.id, "photos"], DEFAULT_PARTITIONS)
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


def test_read_only_transaction_cannot_set_exclusion(db: Metabase) -> None:
    with (
        pytest.raises(InvalidArgument, match="read-only"),
        db.read(exclude_txn_from_change_streams=True),
    ):
        pass


def test_lock_setting_updates_are_excluded(world: World, eventing: Eventing) -> None:
    bucket = world.bucket("locked", lock=True)
    eventing.enable(world.project.id, "locked")
    world.put(bucket, "a")
    put_object_legal_hold(world.db, world.loc(bucket, "a"), True)
    put_object_retention(world.db, world.loc(bucket, "a"), world.governance())
    assert [r["mod_type"] for r in read_all(world.db)] == ["INSERT"]


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

    assert [r["mod_type"] for r in read_all(world.db)] == ["INSERT"]  # bucket_eventing excludes
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
        raw = conn.execute(sa.text("SELECT mods FROM change_records")).scalar_one()
    assert ", " not in raw
    assert json.loads(raw)[0]["keys"]["object_key"] == "a"
