"""Rename an object or a prefix: one transaction moving rows (and so their data, by stream
id) to new keys, with S3's conditions, refusals that change nothing, and the change records
a rename writes."""

from __future__ import annotations

import hashlib
import threading
import uuid
from datetime import timedelta

import pytest
import sqlalchemy as sa

from ripple.changestream.tag import TransactionTag
from ripple.metabase import (
    BucketLocation,
    Object,
    RenameConditions,
    Status,
    Versioning,
    get_object,
    list_objects,
    rename_object,
    rename_prefix,
)
from ripple.metabase.errors import (
    BucketNotFound,
    DestinationPrefixNotEmpty,
    InvalidArgument,
    InvalidRenameRequest,
    ObjectLocked,
    ObjectNotFound,
    PreconditionFailed,
    TooManyKeysToRename,
)
from ripple.metabase.put_object import put_object
from ripple.metabase.schema import objects
from tests.changestream.conftest import Eventing, read_all, tag_of
from tests.metabase.steps import Row, Verify, World, unchanged


def _put_file(world: World, bucket: BucketLocation, key: str, size: int = 4096) -> Object:
    """An object stored as a file (a stream id, no inline data) with metadata and tags."""
    world.tick()
    return put_object(
        world.db,
        world.loc(bucket, key),
        stream_id=uuid.uuid4(),
        size=size,
        etag=f"etag-{key}",
        content_type="image/jpeg",
        user_metadata={"origin": key, ":cache-control": "no-cache"},
        tags={"colour": "red"},
    ).object


def _keys(world: World, bucket: BucketLocation) -> list[str]:
    return [o.object_key for o in list_objects(world.db, bucket).objects]


# --- one key ---------------------------------------------------------------------------


def test_rename_moves_the_row_and_keeps_data_and_metadata(world: World) -> None:
    bucket = world.bucket()
    source = _put_file(world, bucket, "photos/a.jpg")
    world.tick(timedelta(hours=1))

    result = rename_object(world.db, world.loc(bucket, "photos/a.jpg"), "archive/a.jpg")

    moved = get_object(world.db, world.loc(bucket, "archive/a.jpg"))
    assert moved == result.object
    assert moved.stream_id == source.stream_id  # the data is not copied
    assert moved.inline_data is None
    assert (moved.etag, moved.total_plain_size, moved.content_type) == (
        "etag-photos/a.jpg",
        4096,
        "image/jpeg",
    )
    assert moved.user_metadata == {"origin": "photos/a.jpg", ":cache-control": "no-cache"}
    assert moved.tags == {"colour": "red"}
    assert moved.created_at == source.created_at  # S3 keeps the last-modified date
    assert moved.status is Status.COMMITTED_UNVERSIONED
    assert moved.version_id == "null"
    assert result.source == source
    assert result.removed == []
    with pytest.raises(ObjectNotFound):
        get_object(world.db, world.loc(bucket, "photos/a.jpg"))
    Verify([Row("archive/a.jpg", Status.COMMITTED_UNVERSIONED)]).check(world)


def test_inline_data_moves_with_the_row(world: World) -> None:
    bucket = world.bucket()
    world.put(bucket, "small", b"tiny bytes")
    rename_object(world.db, world.loc(bucket, "small"), "renamed")
    rows = world.rows()
    assert [(r.object_key, r.inline_data) for r in rows] == [("renamed", b"tiny bytes")]


def test_rename_replaces_an_existing_destination(world: World) -> None:
    bucket = world.bucket()
    old = _put_file(world, bucket, "b")
    source = world.put(bucket, "a", b"new")

    result = rename_object(world.db, world.loc(bucket, "a"), "b")

    assert result.removed == [old]  # its data is the caller's to free, as an overwrite's
    assert get_object(world.db, world.loc(bucket, "b")).inline_data == b"new"
    assert get_object(world.db, world.loc(bucket, "b")).stream_id == source.stream_id
    Verify([Row("b", Status.COMMITTED_UNVERSIONED)]).check(world)


def test_missing_source_and_bucket(world: World) -> None:
    bucket = world.bucket()
    world.put(bucket, "other")
    with unchanged(world, ObjectNotFound, "NoSuchKey"):
        rename_object(world.db, world.loc(bucket, "absent"), "b")
    with unchanged(world, BucketNotFound, "NoSuchBucket"):
        rename_object(world.db, world.loc(BucketLocation(world.project.id, "nope"), "a"), "b")


@pytest.mark.parametrize(
    ("src", "dst"),
    [("a", "a"), ("dir/", "b"), ("a", "dir/")],
)
def test_invalid_requests_change_nothing(world: World, src: str, dst: str) -> None:
    bucket = world.bucket()
    world.put(bucket, src)
    with unchanged(world, InvalidRenameRequest, "InvalidRequest"):
        rename_object(world.db, world.loc(bucket, src), dst)


def test_a_too_long_destination_changes_nothing(world: World) -> None:
    bucket = world.bucket()
    world.put(bucket, "a")
    with unchanged(world, InvalidArgument, "InvalidArgument"):
        rename_object(world.db, world.loc(bucket, "a"), "k" * 1025)


@pytest.mark.parametrize("versioning", [Versioning.ENABLED, Versioning.SUSPENDED])
def test_versioned_buckets_are_refused(world: World, versioning: Versioning) -> None:
    bucket = world.bucket(versioning=versioning)
    world.put(bucket, "a")
    world.put(bucket, "dir/x")
    with unchanged(world, InvalidRenameRequest, "InvalidRequest"):
        rename_object(world.db, world.loc(bucket, "a"), "b")
    with unchanged(world, InvalidRenameRequest, "InvalidRequest"):
        rename_prefix(world.db, bucket, "dir/", "new/")


def test_object_lock_buckets_are_versioned_so_refused(world: World) -> None:
    bucket = world.bucket(lock=True)
    world.put(bucket, "a", legal_hold=True)
    with unchanged(world, InvalidRenameRequest):
        rename_object(world.db, world.loc(bucket, "a"), "b")


def _hold(world: World, key: str) -> None:
    """Put a legal hold on an unversioned row. No API can (object lock buckets are always
    versioned): this checks the rename's own lock rule, kept in case that ever changes."""
    with world.db.write() as conn:
        conn.execute(
            sa.update(objects).where(objects.c.object_key == key.encode()).values(legal_hold=True)
        )


def test_a_locked_source_is_refused(world: World) -> None:
    bucket = world.bucket()
    world.put(bucket, "a")
    world.put(bucket, "dir/x")
    _hold(world, "a")
    _hold(world, "dir/x")
    with unchanged(world, ObjectLocked, "AccessDenied"):
        rename_object(world.db, world.loc(bucket, "a"), "b")
    with unchanged(world, ObjectLocked, "AccessDenied"):
        rename_prefix(world.db, bucket, "dir/", "new/")


# --- conditions ------------------------------------------------------------------------


def test_destination_conditions(world: World) -> None:
    bucket = world.bucket()
    dst = world.put(bucket, "dst", b"old")
    world.put(bucket, "a", b"one")
    world.put(bucket, "b", b"two")
    etag = dst.etag
    before, after = dst.created_at - timedelta(seconds=1), dst.created_at + timedelta(seconds=1)

    for refused in (
        RenameConditions(if_none_match="*"),
        RenameConditions(if_none_match=f'"{etag}"'),
        RenameConditions(if_match='"other"'),
        RenameConditions(if_modified_since=after),
        RenameConditions(if_unmodified_since=before),
    ):
        with unchanged(world, PreconditionFailed, "PreconditionFailed"):
            rename_object(world.db, world.loc(bucket, "a"), "dst", conditions=refused)
    # a missing destination fails If-Match and If-Modified-Since, passes If-None-Match: *
    for refused in (RenameConditions(if_match="*"), RenameConditions(if_modified_since=before)):
        with unchanged(world, PreconditionFailed):
            rename_object(world.db, world.loc(bucket, "a"), "fresh", conditions=refused)
    rename_object(
        world.db, world.loc(bucket, "a"), "fresh", conditions=RenameConditions(if_none_match="*")
    )
    rename_object(
        world.db,
        world.loc(bucket, "b"),
        "dst",
        conditions=RenameConditions(
            if_match=f'W/"{etag}"', if_unmodified_since=after, if_modified_since=before
        ),
    )
    assert get_object(world.db, world.loc(bucket, "dst")).inline_data == b"two"
    assert get_object(world.db, world.loc(bucket, "fresh")).inline_data == b"one"


def test_source_conditions(world: World) -> None:
    bucket = world.bucket()
    src = world.put(bucket, "a", b"one")
    before, after = src.created_at - timedelta(seconds=1), src.created_at + timedelta(seconds=1)
    for refused in (
        RenameConditions(source_if_match='"nope"'),
        RenameConditions(source_if_none_match=src.etag),
        RenameConditions(source_if_none_match="*"),
        RenameConditions(source_if_modified_since=after),
        RenameConditions(source_if_unmodified_since=before),
    ):
        with unchanged(world, PreconditionFailed, "PreconditionFailed"):
            rename_object(world.db, world.loc(bucket, "a"), "b", conditions=refused)
    rename_object(
        world.db,
        world.loc(bucket, "a"),
        "b",
        conditions=RenameConditions(
            source_if_match=f'"{src.etag}", "x"',
            source_if_none_match="other",
            source_if_modified_since=before,
            source_if_unmodified_since=after,
        ),
    )
    assert _keys(world, bucket) == ["b"]


def test_a_missing_source_is_not_found_before_any_condition(world: World) -> None:
    bucket = world.bucket()
    with unchanged(world, ObjectNotFound):
        rename_object(
            world.db,
            world.loc(bucket, "a"),
            "b",
            conditions=RenameConditions(source_if_match="x", if_match="y"),
        )


# --- prefixes --------------------------------------------------------------------------


def test_rename_prefix_moves_every_key(world: World) -> None:
    bucket = world.bucket()
    small = world.put(bucket, "logs/2026/a", b"aaa")
    large = _put_file(world, bucket, "logs/2026/b/c")
    world.put(bucket, "logs/2027/x")
    world.put(bucket, "logs/2026")  # not under "logs/2026/"

    result = rename_prefix(world.db, bucket, "logs/2026/", "archive/2026/")

    assert [o.object_key for o in result.objects] == ["archive/2026/a", "archive/2026/b/c"]
    assert [o.object_key for o in result.sources] == ["logs/2026/a", "logs/2026/b/c"]
    assert _keys(world, bucket) == [
        "archive/2026/a",
        "archive/2026/b/c",
        "logs/2026",
        "logs/2027/x",
    ]
    moved = get_object(world.db, world.loc(bucket, "archive/2026/b/c"))
    assert moved.stream_id == large.stream_id
    assert moved.tags == {"colour": "red"}
    assert moved.created_at == large.created_at
    assert get_object(world.db, world.loc(bucket, "archive/2026/a")).inline_data == b"aaa"
    assert get_object(world.db, world.loc(bucket, "archive/2026/a")).etag == small.etag


@pytest.mark.parametrize(
    ("src", "dst"),
    [
        ("", "b/"),
        ("a/", ""),
        ("a", "b/"),
        ("a/", "b"),
        ("a/", "a/"),
        ("a/", "a/b/"),
        ("a/b/", "a/"),
    ],
)
def test_bad_prefixes_are_refused(world: World, src: str, dst: str) -> None:
    bucket = world.bucket()
    world.put(bucket, "a/b/c")
    world.put(bucket, "a/x")
    with unchanged(world, InvalidRenameRequest, "InvalidRequest"):
        rename_prefix(world.db, bucket, src, dst)


def test_an_empty_source_prefix_is_not_found(world: World) -> None:
    bucket = world.bucket()
    world.put(bucket, "a/x")
    with unchanged(world, ObjectNotFound, "NoSuchKey"):
        rename_prefix(world.db, bucket, "b/", "c/")


def test_more_keys_than_the_limit_change_nothing(world: World) -> None:
    bucket = world.bucket()
    for i in range(4):
        world.put(bucket, f"dir/{i}")
    with unchanged(world, TooManyKeysToRename, "InvalidRequest"):
        rename_prefix(world.db, bucket, "dir/", "new/", max_keys=3)
    with pytest.raises(TooManyKeysToRename) as info:
        rename_prefix(world.db, bucket, "dir/", "new/", max_keys=2)
    assert "holds 4 keys" in info.value.message
    assert "at most 2" in info.value.message
    assert "s3.max-rename-keys" in info.value.message
    rename_prefix(world.db, bucket, "dir/", "new/", max_keys=4)  # the limit itself is allowed
    assert _keys(world, bucket) == ["new/0", "new/1", "new/2", "new/3"]


def test_an_occupied_destination_prefix_changes_nothing(world: World) -> None:
    bucket = world.bucket()
    world.put(bucket, "src/a")
    world.put(bucket, "src/b")
    world.put(bucket, "dst/zzz")  # no collision with a renamed key, still refused
    before = _keys(world, bucket)
    with unchanged(world, DestinationPrefixNotEmpty, "DestinationPrefixNotEmpty"):
        rename_prefix(world.db, bucket, "src/", "dst/")
    assert _keys(world, bucket) == before


def test_a_too_long_renamed_key_changes_nothing(world: World) -> None:
    bucket = world.bucket()
    world.put(bucket, "s/a")
    world.put(bucket, "s/" + "k" * 1000)
    with unchanged(world, InvalidArgument):
        rename_prefix(world.db, bucket, "s/", "d" * 100 + "/")


def test_prefix_rename_of_many_keys_in_batches(world: World) -> None:
    bucket = world.bucket()
    count = 1100  # more than one INSERT / DELETE batch
    with world.db.write() as conn:
        conn.execute(
            sa.insert(objects),
            [
                {
                    "project_id": world.project.id,
                    "bucket_name": "bucket",
                    "object_key": f"in/{i:05d}".encode(),
                    "version": 1,
                    "stream_id": uuid.uuid4(),
                    "status": int(Status.COMMITTED_UNVERSIONED),
                    "created_at": world.now,
                    "etag": "e",
                }
                for i in range(count)
            ],
        )
    result = rename_prefix(world.db, bucket, "in/", "out/", max_keys=count)
    assert len(result.objects) == count
    keys = [r.object_key for r in world.rows()]
    assert keys == [f"out/{i:05d}" for i in range(count)]


# --- change records --------------------------------------------------------------------


def test_a_rename_is_one_transaction_of_delete_and_insert(world: World) -> None:
    eventing = Eventing(world.db)
    bucket = world.bucket("photos")
    eventing.enable(world.project.id, "photos")
    source = world.put(bucket, "a.jpg", b"hello")
    request = TransactionTag(request_id="R1", principal="P1")

    rename_object(world.db, world.loc(bucket, "a.jpg"), "b.jpg", tag=request)

    put, *renamed = read_all(world.db)
    assert put["mod_type"] == "INSERT"
    assert len(renamed) == 2
    assert len({r["server_transaction_id"] for r in renamed}) == 1
    deleted, inserted = sorted(renamed, key=lambda r: r["mod_type"])
    assert [deleted["mod_type"], inserted["mod_type"]] == ["DELETE", "INSERT"]
    assert deleted["mods"][0]["keys"]["object_key"] == "a.jpg"
    assert inserted["mods"][0]["keys"]["object_key"] == "b.jpg"
    assert inserted["mods"][0]["new_values"]["stream_id"] == str(source.stream_id)
    for record in renamed:
        assert tag_of(record) == {
            "operation": "rename",
            "rename_from": "a.jpg",
            "request_id": "R1",
            "principal": "P1",
            "etag": hashlib.md5(b"hello").hexdigest(),
        }


def test_a_prefix_rename_is_one_transaction(world: World) -> None:
    eventing = Eventing(world.db)
    bucket = world.bucket("photos")
    eventing.enable(world.project.id, "photos")
    world.put(bucket, "d/a")
    world.put(bucket, "d/b")
    first = len(read_all(world.db))

    rename_prefix(world.db, bucket, "d/", "e/")

    records = read_all(world.db)[first:]
    assert len({r["server_transaction_id"] for r in records}) == 1
    mods = sorted((r["mod_type"], m["keys"]["object_key"]) for r in records for m in r["mods"])
    assert mods == [("DELETE", "d/a"), ("DELETE", "d/b"), ("INSERT", "e/a"), ("INSERT", "e/b")]
    assert {tuple(sorted(tag_of(r).items())) for r in records} == {
        (("operation", "rename-prefix"), ("rename_from", "d/"), ("rename_to", "e/"))
    }


def test_crossing_renames_do_not_deadlock(world: World) -> None:
    """Renames a→b and b→a at once lock both keys in one sorted statement (PostgreSQL):
    each waits for the other, none deadlocks, and one object remains."""
    bucket = world.bucket()
    world.put(bucket, "a", b"data")
    errors: list[BaseException] = []

    def flip(src: str, dst: str) -> None:
        for _ in range(20):
            try:
                rename_object(world.db, world.loc(bucket, src), dst)
            except ObjectNotFound:
                pass  # the other thread holds the object under the other key
            except BaseException as e:  # reported below
                errors.append(e)

    threads = [
        threading.Thread(target=flip, args=("a", "b")),
        threading.Thread(target=flip, args=("b", "a")),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    rows = world.rows()
    assert len(rows) == 1
    assert rows[0].object_key in ("a", "b")
    assert rows[0].inline_data == b"data"
