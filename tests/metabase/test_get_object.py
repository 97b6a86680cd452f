"""Get an object: latest, exact version, the null version, delete markers, bad version IDs,
and version IDs that must not outlive the version they named."""

from __future__ import annotations

import pytest

from ripple.metabase import (
    BucketLocation,
    Versioning,
    delete_object,
    delete_object_version,
    get_object,
    set_bucket_versioning,
)
from ripple.metabase.errors import (
    BucketNotFound,
    InvalidArgument,
    MethodNotAllowed,
    ObjectNotFound,
    VersionNotFound,
)
from ripple.metabase.types import InvalidVersionId, encode_version_id
from tests.metabase.objects import begin_object
from tests.metabase.steps import World


def test_latest(world: World) -> None:
    bucket = world.bucket(versioning=Versioning.ENABLED)
    world.put(bucket, "a", b"one")
    second = world.put(bucket, "a", b"two")
    world.put(bucket, "b", b"other key")
    got = get_object(world.db, world.loc(bucket, "a"))
    assert got == second
    assert got.inline_data == b"two"


def test_latest_in_unversioned_bucket(world: World) -> None:
    bucket = world.bucket()
    obj = world.put(bucket, "a", b"one")
    got = get_object(world.db, world.loc(bucket, "a"))
    assert got == obj
    assert got.version_id == "null"


def test_exact_version(world: World) -> None:
    bucket = world.bucket(versioning=Versioning.ENABLED)
    first = world.put(bucket, "a", b"one")
    second = world.put(bucket, "a", b"two")
    assert get_object(world.db, world.loc(bucket, "a"), first.version_id) == first
    assert get_object(world.db, world.loc(bucket, "a"), second.version_id) == second


def test_version_id_of_another_key_is_not_found(world: World) -> None:
    bucket = world.bucket(versioning=Versioning.ENABLED)
    a = world.put(bucket, "a")
    world.put(bucket, "b")
    with pytest.raises(VersionNotFound) as info:
        get_object(world.db, world.loc(bucket, "b"), a.version_id)
    assert info.value.code == "NoSuchVersion"


def test_null_version_in_suspended_bucket(world: World) -> None:
    bucket = world.bucket(versioning=Versioning.ENABLED)
    versioned = world.put(bucket, "a", b"versioned")
    set_bucket_versioning(world.db, bucket, enabled=False)
    null = world.put(bucket, "a", b"null")
    assert null.version_id == "null"
    assert get_object(world.db, world.loc(bucket, "a"), "null") == null
    assert get_object(world.db, world.loc(bucket, "a"), versioned.version_id) == versioned
    assert get_object(world.db, world.loc(bucket, "a")) == null


def test_null_version_stays_readable_below_newer_versions(world: World) -> None:
    bucket = world.bucket()
    null = world.put(bucket, "a", b"before versioning")
    set_bucket_versioning(world.db, bucket, enabled=True)
    newer = world.put(bucket, "a", b"after")
    assert get_object(world.db, world.loc(bucket, "a")) == newer
    assert get_object(world.db, world.loc(bucket, "a"), "null") == null


def test_null_version_in_unversioned_bucket(world: World) -> None:
    bucket = world.bucket()
    obj = world.put(bucket, "a")
    assert get_object(world.db, world.loc(bucket, "a"), "null") == obj


def test_null_version_missing(world: World) -> None:
    bucket = world.bucket(versioning=Versioning.ENABLED)
    world.put(bucket, "a")
    with pytest.raises(VersionNotFound):
        get_object(world.db, world.loc(bucket, "a"), "null")


def test_latest_is_delete_marker(world: World) -> None:
    bucket = world.bucket(versioning=Versioning.ENABLED)
    world.put(bucket, "a")
    marker = delete_object(world.db, world.loc(bucket, "a")).marker
    assert marker is not None
    with pytest.raises(ObjectNotFound) as info:
        get_object(world.db, world.loc(bucket, "a"))
    assert type(info.value) is ObjectNotFound
    assert info.value.code == "NoSuchKey"
    assert info.value.delete_marker is True
    assert info.value.version_id == marker.version_id


def test_latest_is_null_delete_marker(world: World) -> None:
    bucket = world.bucket(versioning=Versioning.SUSPENDED)
    world.put(bucket, "a")
    delete_object(world.db, world.loc(bucket, "a"))
    with pytest.raises(ObjectNotFound) as info:
        get_object(world.db, world.loc(bucket, "a"))
    assert info.value.delete_marker is True
    assert info.value.version_id == "null"


def test_exact_delete_marker(world: World) -> None:
    bucket = world.bucket(versioning=Versioning.ENABLED)
    obj = world.put(bucket, "a")
    marker = delete_object(world.db, world.loc(bucket, "a")).marker
    assert marker is not None
    with pytest.raises(MethodNotAllowed) as info:
        get_object(world.db, world.loc(bucket, "a"), marker.version_id)
    assert info.value.code == "MethodNotAllowed"
    # The version under the marker is still readable by its ID.
    assert get_object(world.db, world.loc(bucket, "a"), obj.version_id) == obj


def test_missing_key(world: World) -> None:
    bucket = world.bucket()
    world.put(bucket, "a")
    with pytest.raises(ObjectNotFound) as info:
        get_object(world.db, world.loc(bucket, "b"))
    assert type(info.value) is ObjectNotFound
    assert info.value.delete_marker is False
    assert info.value.version_id == ""


def test_pending_upload_is_not_returned(world: World) -> None:
    bucket = world.bucket(versioning=Versioning.ENABLED)
    committed = world.put(bucket, "a")
    pending = begin_object(world.db, world.loc(bucket, "a"))
    assert get_object(world.db, world.loc(bucket, "a")) == committed
    pending_id = encode_version_id(pending.version, pending.stream_id)
    with pytest.raises(VersionNotFound):
        get_object(world.db, world.loc(bucket, "a"), pending_id)


def test_unknown_bucket(world: World) -> None:
    missing = BucketLocation(world.project.id, "missing")
    with pytest.raises(BucketNotFound):
        get_object(world.db, world.loc(missing, "a"))
    with pytest.raises(BucketNotFound):
        get_object(world.db, world.loc(missing, "a"), "null")


@pytest.mark.parametrize(
    "version_id",
    [
        "",
        "abc",
        "NULL",
        "zz" * 16,  # not hex
        "00" * 15,  # too short
        "00" * 17,  # too long
        "00" * 16,  # version 0
        "ff" * 8 + "00" * 8,  # negative version
    ],
)
def test_malformed_version_id(world: World, version_id: str) -> None:
    bucket = world.bucket(versioning=Versioning.ENABLED)
    world.put(bucket, "a")
    with pytest.raises(InvalidVersionId) as info:
        get_object(world.db, world.loc(bucket, "a"), version_id)
    assert isinstance(info.value, InvalidArgument)
    assert info.value.code == "InvalidArgument"


def test_bad_key(world: World) -> None:
    bucket = world.bucket()
    with pytest.raises(InvalidArgument):
        get_object(world.db, world.loc(bucket, ""))
    with pytest.raises(InvalidArgument):
        get_object(world.db, world.loc(bucket, "x" * 1025))


def test_stale_version_id_does_not_name_a_new_object(world: World) -> None:
    bucket = world.bucket(versioning=Versioning.ENABLED)
    loc = world.loc(bucket, "a")
    old = world.put(bucket, "a", b"old")
    delete_object_version(world.db, loc, old.version_id)
    new = world.put(bucket, "a", b"new")
    # The key had no rows left, so the new object reuses the version number: this is the
    # case where a version ID made of the number alone would name the wrong object.
    assert new.version == old.version
    assert new.version_id != old.version_id
    with pytest.raises(VersionNotFound):
        get_object(world.db, loc, old.version_id)
    assert get_object(world.db, loc, new.version_id) == new
    assert get_object(world.db, loc) == new


def test_stale_version_id_after_deleting_newest_version(world: World) -> None:
    bucket = world.bucket(versioning=Versioning.ENABLED)
    loc = world.loc(bucket, "a")
    first = world.put(bucket, "a", b"first")
    second = world.put(bucket, "a", b"second")
    delete_object_version(world.db, loc, second.version_id)
    third = world.put(bucket, "a", b"third")
    assert third.version == second.version
    with pytest.raises(VersionNotFound):
        get_object(world.db, loc, second.version_id)
    assert get_object(world.db, loc, first.version_id) == first
    assert get_object(world.db, loc, third.version_id).inline_data == b"third"
