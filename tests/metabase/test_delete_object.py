"""DeleteObject without a version ID ("delete last committed") in each versioning state."""

from __future__ import annotations

import pytest

from ripple.metabase import (
    ObjectLocation,
    Status,
    Versioning,
    delete_object,
    get_object,
    set_bucket_versioning,
)
from ripple.metabase.errors import BucketNotFound, InvalidArgument, ObjectLocked, ObjectNotFound
from ripple.metabase.rows import at_key
from ripple.metabase.schema import objects
from tests.metabase.steps import Row, Verify, World, unchanged

S = Status


def test_unversioned_deletes_object_without_marker(world: World) -> None:
    bucket = world.bucket()
    obj = world.put(bucket, "a")
    world.put(bucket, "b")
    result = delete_object(world.db, world.loc(bucket, "a"))
    assert result.marker is None
    assert [r.stream_id for r in result.removed] == [obj.stream_id]
    Verify([Row("b", S.COMMITTED_UNVERSIONED)]).check(world)


def test_unversioned_missing_key_is_not_an_error(world: World) -> None:
    bucket = world.bucket()
    result = delete_object(world.db, world.loc(bucket, "nothing"))
    assert result.removed == []
    assert result.marker is None
    Verify([]).check(world)


def test_enabled_places_marker_and_deletes_nothing(world: World) -> None:
    bucket = world.bucket(versioning=Versioning.ENABLED)
    obj = world.put(bucket, "a")
    result = delete_object(world.db, world.loc(bucket, "a"))
    assert result.removed == []
    assert result.marker is not None
    assert result.marker.status is S.DELETE_MARKER_VERSIONED
    assert result.marker.version > obj.version
    Verify(
        [
            Row("a", S.DELETE_MARKER_VERSIONED, result.marker.version_id),
            Row("a", S.COMMITTED_VERSIONED, obj.version_id),
        ]
    ).check(world)
    with pytest.raises(ObjectNotFound) as info:
        get_object(world.db, world.loc(bucket, "a"))
    assert info.value.delete_marker
    assert info.value.version_id == result.marker.version_id


def test_enabled_places_marker_even_without_object(world: World) -> None:
    bucket = world.bucket(versioning=Versioning.ENABLED)
    result = delete_object(world.db, world.loc(bucket, "ghost"))
    assert result.marker is not None
    Verify([Row("ghost", S.DELETE_MARKER_VERSIONED)]).check(world)


def test_enabled_delete_markers_stack(world: World) -> None:
    bucket = world.bucket(versioning=Versioning.ENABLED)
    obj = world.put(bucket, "a")
    first = delete_object(world.db, world.loc(bucket, "a")).marker
    second = delete_object(world.db, world.loc(bucket, "a")).marker
    assert first is not None
    assert second is not None
    assert second.version > first.version > obj.version
    assert first.version_id != second.version_id
    Verify(
        [
            Row("a", S.DELETE_MARKER_VERSIONED, second.version_id),
            Row("a", S.DELETE_MARKER_VERSIONED, first.version_id),
            Row("a", S.COMMITTED_VERSIONED, obj.version_id),
        ]
    ).check(world)


def test_suspended_replaces_null_version_with_null_marker(world: World) -> None:
    bucket = world.bucket(versioning=Versioning.ENABLED)
    versioned = world.put(bucket, "a")
    set_bucket_versioning(world.db, bucket, enabled=False)
    null = world.put(bucket, "a")
    assert null.version_id == "null"
    result = delete_object(world.db, world.loc(bucket, "a"))
    assert [r.stream_id for r in result.removed] == [null.stream_id]
    assert result.marker is not None
    assert result.marker.version_id == "null"
    Verify(
        [
            Row("a", S.DELETE_MARKER_UNVERSIONED, "null"),
            Row("a", S.COMMITTED_VERSIONED, versioned.version_id),
        ]
    ).check(world)


def test_suspended_places_null_marker_without_object(world: World) -> None:
    bucket = world.bucket(versioning=Versioning.SUSPENDED)
    result = delete_object(world.db, world.loc(bucket, "a"))
    assert result.removed == []
    Verify([Row("a", S.DELETE_MARKER_UNVERSIONED, "null")]).check(world)
    # a second delete replaces the null marker rather than stacking another
    again = delete_object(world.db, world.loc(bucket, "a"))
    assert [r.version_id for r in again.removed] == ["null"]
    Verify([Row("a", S.DELETE_MARKER_UNVERSIONED, "null")]).check(world)


def test_locked_null_version_is_not_deleted(world: World) -> None:
    """Object lock needs versioning, so a locked null version only exists from before
    versioning was enabled; the rules still hold if one is found."""
    bucket = world.bucket(versioning=Versioning.UNVERSIONED)
    world.put(bucket, "a")
    with world.db.write() as conn:
        conn.execute(objects.update().where(at_key(world.loc(bucket, "a"))).values(legal_hold=True))
    with unchanged(world, ObjectLocked, "AccessDenied"):
        delete_object(world.db, world.loc(bucket, "a"))


def test_unknown_bucket(world: World) -> None:
    world.put(world.bucket(), "a")
    with unchanged(world, BucketNotFound, "NoSuchBucket"):
        delete_object(world.db, ObjectLocation(world.project.id, "other", "a"))


def test_key_over_1024_bytes(world: World) -> None:
    bucket = world.bucket()
    with unchanged(world, InvalidArgument):
        delete_object(world.db, world.loc(bucket, "é" * 513))
