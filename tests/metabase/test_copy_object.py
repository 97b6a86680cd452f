"""Copy an object: a new version at the destination, from the latest or an exact source
version, under the destination's versioning and object lock defaults."""

from __future__ import annotations

import hashlib
from datetime import timedelta

import pytest

from ripple.metabase import (
    BucketLocation,
    DefaultRetention,
    Object,
    Retention,
    RetentionMode,
    Status,
    Versioning,
    copy_object,
    delete_object,
    get_object,
    set_object_lock_configuration,
)
from ripple.metabase.errors import (
    BucketNotFound,
    InvalidArgument,
    ObjectLockNotEnabled,
    ObjectNotFound,
    VersionNotFound,
)
from tests.metabase.objects import commit_inline_object
from tests.metabase.steps import Row, Verify, World, unchanged


def _put(
    world: World,
    bucket: BucketLocation,
    key: str,
    data: bytes,
    *,
    content_type: str = "text/plain",
    user_metadata: dict[str, str] | None = None,
    retention: Retention | None = None,
    legal_hold: bool = False,
) -> Object:
    world.tick()
    return commit_inline_object(
        world.db,
        world.loc(bucket, key),
        data,
        etag=hashlib.md5(data).hexdigest(),
        content_type=content_type,
        user_metadata={"origin": key} if user_metadata is None else user_metadata,
        retention=retention,
        legal_hold=legal_hold,
    ).object


def test_copy_latest(world: World) -> None:
    src_bucket = world.bucket("source")
    dst_bucket = world.bucket("destination")
    src = _put(world, src_bucket, "a", b"payload", user_metadata={"k": "v"})
    copied_at = world.tick()

    result = copy_object(world.db, world.loc(src_bucket, "a"), world.loc(dst_bucket, "b"))
    copy = result.object
    assert result.source == src
    assert result.removed == []
    assert copy.bucket_name == "destination"
    assert copy.object_key == "b"
    assert copy.stream_id != src.stream_id
    assert copy.status is Status.COMMITTED_UNVERSIONED
    assert copy.created_at == copied_at
    assert copy.total_plain_size == len(b"payload")
    assert copy.etag == hashlib.md5(b"payload").hexdigest()
    assert copy.inline_data == b"payload"
    assert copy.content_type == "text/plain"
    assert copy.user_metadata == {"k": "v"}
    assert get_object(world.db, world.loc(dst_bucket, "b")) == copy
    # The source is untouched.
    assert get_object(world.db, world.loc(src_bucket, "a")) == src
    Verify(
        [
            Row("b", Status.COMMITTED_UNVERSIONED, "null", bucket="destination"),
            Row("a", Status.COMMITTED_UNVERSIONED, "null", bucket="source"),
        ]
    ).check(world)


def test_copy_latest_picks_newest_version(world: World) -> None:
    src_bucket = world.bucket("source", Versioning.ENABLED)
    dst_bucket = world.bucket("destination")
    _put(world, src_bucket, "a", b"one")
    newest = _put(world, src_bucket, "a", b"two")
    result = copy_object(world.db, world.loc(src_bucket, "a"), world.loc(dst_bucket, "b"))
    assert result.source == newest
    assert result.object.inline_data == b"two"


def test_copy_specific_source_version(world: World) -> None:
    src_bucket = world.bucket("source", Versioning.ENABLED)
    dst_bucket = world.bucket("destination")
    old = _put(world, src_bucket, "a", b"one", content_type="text/old")
    _put(world, src_bucket, "a", b"two", content_type="text/new")
    result = copy_object(
        world.db,
        world.loc(src_bucket, "a"),
        world.loc(dst_bucket, "b"),
        source_version_id=old.version_id,
    )
    assert result.source == old
    copy = get_object(world.db, world.loc(dst_bucket, "b"))
    assert copy.inline_data == b"one"
    assert copy.etag == hashlib.md5(b"one").hexdigest()
    assert copy.content_type == "text/old"


def test_copy_null_source_version(world: World) -> None:
    src_bucket = world.bucket("source")
    dst_bucket = world.bucket("destination")
    src = _put(world, src_bucket, "a", b"one")
    result = copy_object(
        world.db,
        world.loc(src_bucket, "a"),
        world.loc(dst_bucket, "b"),
        source_version_id="null",
    )
    assert result.source == src
    assert result.object.inline_data == b"one"


def test_copy_unknown_source_version(world: World) -> None:
    src_bucket = world.bucket("source", Versioning.ENABLED)
    dst_bucket = world.bucket("destination")
    _put(world, src_bucket, "a", b"one")
    with unchanged(world, VersionNotFound, "NoSuchVersion"):
        copy_object(
            world.db,
            world.loc(src_bucket, "a"),
            world.loc(dst_bucket, "b"),
            source_version_id="null",
        )


def test_replace_directive(world: World) -> None:
    src_bucket = world.bucket("source")
    dst_bucket = world.bucket("destination")
    src = _put(world, src_bucket, "a", b"payload", user_metadata={"k": "v"})
    copy = copy_object(
        world.db,
        world.loc(src_bucket, "a"),
        world.loc(dst_bucket, "b"),
        metadata_directive="REPLACE",
        content_type="application/json",
        user_metadata={"new": "yes"},
    ).object
    assert copy.content_type == "application/json"
    assert copy.user_metadata == {"new": "yes"}
    # Size, ETag and data are still the source's.
    assert (copy.total_plain_size, copy.etag, copy.inline_data) == (
        src.total_plain_size,
        src.etag,
        src.inline_data,
    )
    assert get_object(world.db, world.loc(dst_bucket, "b")) == copy


def test_replace_directive_without_values_clears_metadata(world: World) -> None:
    src_bucket = world.bucket("source")
    dst_bucket = world.bucket("destination")
    _put(world, src_bucket, "a", b"payload", user_metadata={"k": "v"})
    copy = copy_object(
        world.db,
        world.loc(src_bucket, "a"),
        world.loc(dst_bucket, "b"),
        metadata_directive="REPLACE",
    ).object
    assert copy.content_type == ""
    assert copy.user_metadata == {}


def test_copy_directive_ignores_given_metadata(world: World) -> None:
    src_bucket = world.bucket("source")
    dst_bucket = world.bucket("destination")
    _put(world, src_bucket, "a", b"payload", user_metadata={"k": "v"})
    copy = copy_object(
        world.db,
        world.loc(src_bucket, "a"),
        world.loc(dst_bucket, "b"),
        metadata_directive="COPY",
        content_type="application/json",
        user_metadata={"new": "yes"},
    ).object
    assert copy.content_type == "text/plain"
    assert copy.user_metadata == {"k": "v"}


def test_unknown_directive(world: World) -> None:
    bucket = world.bucket()
    _put(world, bucket, "a", b"x")
    with unchanged(world, InvalidArgument, "InvalidArgument"):
        copy_object(
            world.db,
            world.loc(bucket, "a"),
            world.loc(bucket, "b"),
            metadata_directive="MOVE",  # type: ignore[arg-type]
        )


# --- destination versioning -----------------------------------------------------------


def test_copy_into_unversioned_bucket_replaces(world: World) -> None:
    src_bucket = world.bucket("source")
    dst_bucket = world.bucket("destination")
    src = _put(world, src_bucket, "a", b"new")
    old = _put(world, dst_bucket, "b", b"old")
    result = copy_object(world.db, world.loc(src_bucket, "a"), world.loc(dst_bucket, "b"))
    assert result.removed == [old]
    Verify(
        [
            Row("b", Status.COMMITTED_UNVERSIONED, "null", bucket="destination"),
            Row("a", Status.COMMITTED_UNVERSIONED, "null", bucket="source"),
        ]
    ).check(world)
    assert get_object(world.db, world.loc(dst_bucket, "b")).inline_data == src.inline_data


def test_copy_into_versioned_bucket_adds_a_version(world: World) -> None:
    src_bucket = world.bucket("source")
    dst_bucket = world.bucket("destination", Versioning.ENABLED)
    _put(world, src_bucket, "a", b"new")
    old = _put(world, dst_bucket, "b", b"old")
    result = copy_object(world.db, world.loc(src_bucket, "a"), world.loc(dst_bucket, "b"))
    copy = result.object
    assert result.removed == []
    assert copy.status is Status.COMMITTED_VERSIONED
    assert copy.version == old.version + 1
    Verify(
        [
            Row("b", Status.COMMITTED_VERSIONED, copy.version_id, bucket="destination"),
            Row("b", Status.COMMITTED_VERSIONED, old.version_id, bucket="destination"),
            Row("a", Status.COMMITTED_UNVERSIONED, "null", bucket="source"),
        ]
    ).check(world)
    assert get_object(world.db, world.loc(dst_bucket, "b")) == copy


def test_copy_into_suspended_bucket_replaces_null_version(world: World) -> None:
    src_bucket = world.bucket("source", Versioning.ENABLED)
    dst_bucket = world.bucket("destination", Versioning.SUSPENDED)
    src = _put(world, src_bucket, "a", b"new")
    null = _put(world, dst_bucket, "b", b"old")
    assert null.version_id == "null"
    result = copy_object(world.db, world.loc(src_bucket, "a"), world.loc(dst_bucket, "b"))
    assert result.removed == [null]
    assert result.object.status is Status.COMMITTED_UNVERSIONED
    Verify(
        [
            Row("b", Status.COMMITTED_UNVERSIONED, "null", bucket="destination"),
            Row("a", Status.COMMITTED_VERSIONED, src.version_id, bucket="source"),
        ]
    ).check(world)


# --- delete markers and errors --------------------------------------------------------


def test_copy_from_latest_delete_marker(world: World) -> None:
    src_bucket = world.bucket("source", Versioning.ENABLED)
    dst_bucket = world.bucket("destination")
    _put(world, src_bucket, "a", b"x")
    marker = delete_object(world.db, world.loc(src_bucket, "a")).marker
    assert marker is not None
    with unchanged(world, ObjectNotFound, "NoSuchKey"):
        copy_object(world.db, world.loc(src_bucket, "a"), world.loc(dst_bucket, "b"))


def test_copy_from_latest_delete_marker_says_so(world: World) -> None:
    src_bucket = world.bucket("source", Versioning.ENABLED)
    dst_bucket = world.bucket("destination")
    _put(world, src_bucket, "a", b"x")
    marker = delete_object(world.db, world.loc(src_bucket, "a")).marker
    assert marker is not None
    with pytest.raises(ObjectNotFound) as info:
        copy_object(world.db, world.loc(src_bucket, "a"), world.loc(dst_bucket, "b"))
    assert info.value.delete_marker is True
    assert info.value.version_id == marker.version_id


def test_copy_from_delete_marker_by_version(world: World) -> None:
    src_bucket = world.bucket("source", Versioning.ENABLED)
    dst_bucket = world.bucket("destination")
    _put(world, src_bucket, "a", b"x")
    marker = delete_object(world.db, world.loc(src_bucket, "a")).marker
    assert marker is not None
    # AWS: 400 InvalidRequest when x-amz-copy-source names a delete marker by version
    with unchanged(world, InvalidArgument, "InvalidRequest"):
        copy_object(
            world.db,
            world.loc(src_bucket, "a"),
            world.loc(dst_bucket, "b"),
            source_version_id=marker.version_id,
        )


def test_copy_from_missing_key(world: World) -> None:
    bucket = world.bucket()
    with unchanged(world, ObjectNotFound, "NoSuchKey"):
        copy_object(world.db, world.loc(bucket, "missing"), world.loc(bucket, "b"))


def test_copy_into_unknown_bucket(world: World) -> None:
    bucket = world.bucket()
    _put(world, bucket, "a", b"x")
    missing = BucketLocation(world.project.id, "missing")
    with unchanged(world, BucketNotFound, "NoSuchBucket"):
        copy_object(world.db, world.loc(bucket, "a"), world.loc(missing, "a"))


def test_copy_to_bad_destination_key(world: World) -> None:
    bucket = world.bucket()
    _put(world, bucket, "a", b"x")
    with unchanged(world, InvalidArgument, "InvalidArgument"):
        copy_object(world.db, world.loc(bucket, "a"), world.loc(bucket, "k" * 1025))


# --- copy onto itself -----------------------------------------------------------------


def test_copy_onto_itself_without_replace(world: World) -> None:
    bucket = world.bucket()
    _put(world, bucket, "a", b"x")
    with unchanged(world, InvalidArgument, "InvalidRequest"):
        copy_object(world.db, world.loc(bucket, "a"), world.loc(bucket, "a"))


def test_copy_onto_itself_with_replace(world: World) -> None:
    bucket = world.bucket()
    src = _put(world, bucket, "a", b"x", user_metadata={"k": "v"})
    result = copy_object(
        world.db,
        world.loc(bucket, "a"),
        world.loc(bucket, "a"),
        metadata_directive="REPLACE",
        content_type="image/png",
    )
    assert result.removed == [src]
    assert world.rows() == [result.object]
    got = get_object(world.db, world.loc(bucket, "a"))
    assert got.content_type == "image/png"
    assert got.user_metadata == {}
    assert got.inline_data == b"x"


def test_copy_old_version_onto_same_key_restores_it(world: World) -> None:
    bucket = world.bucket(versioning=Versioning.ENABLED)
    old = _put(world, bucket, "a", b"one")
    newer = _put(world, bucket, "a", b"two")
    result = copy_object(
        world.db,
        world.loc(bucket, "a"),
        world.loc(bucket, "a"),
        source_version_id=old.version_id,
    )
    restored = result.object
    Verify(
        [
            Row("a", Status.COMMITTED_VERSIONED, restored.version_id),
            Row("a", Status.COMMITTED_VERSIONED, newer.version_id),
            Row("a", Status.COMMITTED_VERSIONED, old.version_id),
        ]
    ).check(world)
    assert get_object(world.db, world.loc(bucket, "a")).inline_data == b"one"


# --- object lock ----------------------------------------------------------------------


def test_lock_settings_are_not_copied(world: World) -> None:
    src_bucket = world.bucket("source", lock=True)
    dst_bucket = world.bucket("destination", lock=True)
    src = _put(world, src_bucket, "a", b"x", retention=world.compliance(days=30), legal_hold=True)
    assert src.legal_hold is True
    copy = copy_object(world.db, world.loc(src_bucket, "a"), world.loc(dst_bucket, "b")).object
    assert copy.retention is None
    assert copy.legal_hold is False
    assert get_object(world.db, world.loc(dst_bucket, "b")).retention is None


def test_copy_from_locked_object_into_plain_bucket(world: World) -> None:
    src_bucket = world.bucket("source", lock=True)
    dst_bucket = world.bucket("destination")
    _put(world, src_bucket, "a", b"x", retention=world.governance(days=5), legal_hold=True)
    copy = copy_object(world.db, world.loc(src_bucket, "a"), world.loc(dst_bucket, "b")).object
    assert (copy.retention, copy.legal_hold) == (None, False)
    assert copy.status is Status.COMMITTED_UNVERSIONED


def test_destination_default_retention_applies(world: World) -> None:
    src_bucket = world.bucket("source", lock=True)
    dst_bucket = world.bucket("destination", lock=True)
    set_object_lock_configuration(
        world.db, dst_bucket, DefaultRetention(RetentionMode.GOVERNANCE, days=7)
    )
    _put(world, src_bucket, "a", b"x", retention=world.compliance(days=30))
    copied_at = world.tick()
    copy = copy_object(world.db, world.loc(src_bucket, "a"), world.loc(dst_bucket, "b")).object
    expected = Retention(RetentionMode.GOVERNANCE, copied_at + timedelta(days=7))
    assert copy.retention == expected
    assert get_object(world.db, world.loc(dst_bucket, "b")).retention == expected


def test_explicit_retention_on_copy(world: World) -> None:
    src_bucket = world.bucket("source")
    dst_bucket = world.bucket("destination", lock=True)
    set_object_lock_configuration(
        world.db, dst_bucket, DefaultRetention(RetentionMode.GOVERNANCE, days=7)
    )
    _put(world, src_bucket, "a", b"x")
    explicit = world.compliance(days=2)
    copy = copy_object(
        world.db,
        world.loc(src_bucket, "a"),
        world.loc(dst_bucket, "b"),
        retention=explicit,
        legal_hold=True,
    ).object
    assert copy.retention == explicit
    assert copy.legal_hold is True


def test_explicit_retention_on_copy_into_plain_bucket(world: World) -> None:
    src_bucket = world.bucket("source")
    dst_bucket = world.bucket("destination")
    _put(world, src_bucket, "a", b"x")
    with unchanged(world, ObjectLockNotEnabled, "InvalidRequest"):
        copy_object(
            world.db,
            world.loc(src_bucket, "a"),
            world.loc(dst_bucket, "b"),
            retention=world.governance(),
        )


def test_explicit_retention_in_the_past_on_copy(world: World) -> None:
    src_bucket = world.bucket("source")
    dst_bucket = world.bucket("destination", lock=True)
    _put(world, src_bucket, "a", b"x")
    past = Retention(RetentionMode.GOVERNANCE, world.now - timedelta(days=1))
    with unchanged(world, InvalidArgument, "InvalidArgument"):
        copy_object(
            world.db, world.loc(src_bucket, "a"), world.loc(dst_bucket, "b"), retention=past
        )
