"""Commit an inline object: the data lives in the row, committed in one step."""

from __future__ import annotations

import hashlib
from datetime import timedelta

import pytest

from ripple.metabase import (
    BucketLocation,
    Retention,
    RetentionMode,
    Status,
    Versioning,
    get_object,
)
from ripple.metabase.errors import BucketNotFound, InvalidArgument
from tests.metabase.objects import commit_inline_object
from tests.metabase.steps import T0, Row, Verify, World, statements, unchanged


def test_data_is_stored_and_returned(world: World) -> None:
    bucket = world.bucket()
    loc = world.loc(bucket, "docs/readme.txt")
    data = b"\x00hello\xffworld\n"
    world.tick()
    result = commit_inline_object(
        world.db,
        loc,
        data,
        etag=hashlib.md5(data).hexdigest(),
        content_type="text/plain",
        user_metadata={"author": "ada", "lang": "en"},
    )
    obj = result.object
    assert result.removed == []
    assert obj.status is Status.COMMITTED_UNVERSIONED
    assert obj.version == 1
    assert obj.created_at == T0 + timedelta(seconds=1)

    got = get_object(world.db, loc)
    assert got == obj
    assert got.inline_data == data
    assert got.total_plain_size == len(data)
    assert got.etag == hashlib.md5(data).hexdigest()
    assert got.content_type == "text/plain"
    assert got.user_metadata == {"author": "ada", "lang": "en"}
    assert got.object_key == "docs/readme.txt"


def test_empty_data(world: World) -> None:
    bucket = world.bucket()
    obj = world.put(bucket, "empty", b"")
    got = get_object(world.db, world.loc(bucket, "empty"))
    assert got == obj
    assert got.inline_data == b""
    assert got.total_plain_size == 0


def test_non_ascii_key_of_exactly_1024_bytes(world: World) -> None:
    bucket = world.bucket()
    key = "é" * 512  # two bytes each in UTF-8
    assert len(key.encode()) == 1024
    obj = world.put(bucket, key, b"x")
    assert get_object(world.db, world.loc(bucket, key)) == obj


@pytest.mark.parametrize(
    "key",
    [
        "é" * 512 + "a",  # 1025 bytes in UTF-8 (513 characters)
        "a" * 1025,
        "",
    ],
)
def test_bad_key(world: World, key: str) -> None:
    bucket = world.bucket()
    world.put(bucket, "existing")
    with unchanged(world, InvalidArgument, "InvalidArgument"):
        commit_inline_object(world.db, world.loc(bucket, key), b"data", etag="0" * 32)


def test_unknown_bucket(world: World) -> None:
    world.put(world.bucket(), "a")
    missing = BucketLocation(world.project.id, "missing")
    with unchanged(world, BucketNotFound, "NoSuchBucket"):
        commit_inline_object(world.db, world.loc(missing, "a"), b"data", etag="0" * 32)


def test_naive_expiry_is_refused(world: World) -> None:
    bucket = world.bucket()
    with unchanged(world, InvalidArgument):
        commit_inline_object(
            world.db,
            world.loc(bucket, "a"),
            b"data",
            etag="0" * 32,
            expires_at=T0.replace(tzinfo=None),
        )


def test_overwrite_in_unversioned_bucket(world: World) -> None:
    bucket = world.bucket()
    first = world.put(bucket, "a", b"one")
    second = world.put(bucket, "a", b"two")
    assert world.rows() == [second]
    assert get_object(world.db, world.loc(bucket, "a")).inline_data == b"two"
    assert first.stream_id != second.stream_id


def test_a_write_is_few_statements(world: World) -> None:
    """Each statement is a round trip (PostgreSQL) and CPU in the gateway: a PUT reads the
    key's highest and `null` versions in one, and on PostgreSQL holds the bucket and the key
    in one. The replacing row takes a version above the one it replaces."""
    bucket = world.bucket()
    with statements(world.db) as new_key:
        first = world.put(bucket, "a", b"one")
    with statements(world.db) as overwrite:
        second = world.put(bucket, "a", b"two")
    # PostgreSQL: hold bucket and key, read the key, (delete,) insert; SQLite (whose BEGIN
    # IMMEDIATE goes on the driver's connection, unseen here): read the bucket, the key, …
    assert len(new_key) == 3, new_key
    assert len(overwrite) == 4, overwrite
    assert second.version > first.version
    assert world.rows() == [second]


def test_versions_in_enabled_bucket(world: World) -> None:
    bucket = world.bucket(versioning=Versioning.ENABLED)
    first = world.put(bucket, "a", b"one")
    second = world.put(bucket, "a", b"two")
    Verify(
        [
            Row("a", Status.COMMITTED_VERSIONED, second.version_id),
            Row("a", Status.COMMITTED_VERSIONED, first.version_id),
        ]
    ).check(world)
    assert get_object(world.db, world.loc(bucket, "a")).inline_data == b"two"
    assert get_object(world.db, world.loc(bucket, "a"), first.version_id).inline_data == b"one"


def test_retention_date_in_the_past(world: World) -> None:
    bucket = world.bucket("locked", lock=True)
    past = Retention(RetentionMode.GOVERNANCE, world.now - timedelta(days=1))
    with unchanged(world, InvalidArgument, "InvalidArgument"):
        commit_inline_object(
            world.db, world.loc(bucket, "a"), b"data", etag="0" * 32, retention=past
        )
