"""DeleteObject with a version ID: removal for good, delete markers, and object lock."""

from __future__ import annotations

from datetime import timedelta

import pytest

from ripple.metabase import (
    Status,
    Versioning,
    delete_object,
    delete_object_version,
    get_object,
    set_bucket_versioning,
)
from ripple.metabase.errors import InvalidVersionId, ObjectLocked
from ripple.metabase.types import encode_version_id
from tests.metabase.steps import Row, Verify, World, unchanged

S = Status


def test_deletes_exactly_that_version(world: World) -> None:
    bucket = world.bucket(versioning=Versioning.ENABLED)
    v1 = world.put(bucket, "a", b"one")
    v2 = world.put(bucket, "a", b"two")
    result = delete_object_version(world.db, world.loc(bucket, "a"), v1.version_id)
    assert [r.version_id for r in result.removed] == [v1.version_id]
    assert result.marker is None
    Verify([Row("a", S.COMMITTED_VERSIONED, v2.version_id)]).check(world)


def test_deleting_latest_delete_marker_restores_previous_version(world: World) -> None:
    bucket = world.bucket(versioning=Versioning.ENABLED)
    obj = world.put(bucket, "a", b"kept")
    m1 = delete_object(world.db, world.loc(bucket, "a")).marker
    m2 = delete_object(world.db, world.loc(bucket, "a")).marker
    assert m1 is not None
    assert m2 is not None
    delete_object_version(world.db, world.loc(bucket, "a"), m2.version_id)
    delete_object_version(world.db, world.loc(bucket, "a"), m1.version_id)
    latest = get_object(world.db, world.loc(bucket, "a"))
    assert latest.version_id == obj.version_id
    assert latest.inline_data == b"kept"


def test_deleting_latest_version_makes_previous_latest(world: World) -> None:
    bucket = world.bucket(versioning=Versioning.ENABLED)
    v1 = world.put(bucket, "a", b"one")
    v2 = world.put(bucket, "a", b"two")
    delete_object_version(world.db, world.loc(bucket, "a"), v2.version_id)
    assert get_object(world.db, world.loc(bucket, "a")).version_id == v1.version_id


def test_null_version_by_id(world: World) -> None:
    bucket = world.bucket()
    world.put(bucket, "a")
    set_bucket_versioning(world.db, bucket, enabled=True)
    v = world.put(bucket, "a")
    result = delete_object_version(world.db, world.loc(bucket, "a"), "null")
    assert [r.version_id for r in result.removed] == ["null"]
    Verify([Row("a", S.COMMITTED_VERSIONED, v.version_id)]).check(world)


def test_missing_version_is_not_an_error(world: World) -> None:
    bucket = world.bucket(versioning=Versioning.ENABLED)
    obj = world.put(bucket, "a")
    missing = encode_version_id(obj.version + 7, obj.stream_id)
    before = world.rows()
    result = delete_object_version(world.db, world.loc(bucket, "a"), missing)
    assert result.removed == []
    assert world.rows() == before


@pytest.mark.parametrize("bad", ["", "xyz", "00", "0" * 32, "f" * 31, "NULL"])
def test_malformed_version_id(world: World, bad: str) -> None:
    bucket = world.bucket(versioning=Versioning.ENABLED)
    world.put(bucket, "a")
    with unchanged(world, InvalidVersionId, "InvalidArgument"):
        delete_object_version(world.db, world.loc(bucket, "a"), bad)


def test_stale_version_id_never_names_a_new_object(world: World) -> None:
    """Deleting the newest version frees its number; the next write may take it again, but
    the old version ID carries the old stream and must not delete the new object."""
    bucket = world.bucket(versioning=Versioning.ENABLED)
    old = world.put(bucket, "a", b"old")
    delete_object_version(world.db, world.loc(bucket, "a"), old.version_id)
    new = world.put(bucket, "a", b"new")
    assert new.version == old.version
    assert new.version_id != old.version_id
    result = delete_object_version(world.db, world.loc(bucket, "a"), old.version_id)
    assert result.removed == []
    Verify([Row("a", S.COMMITTED_VERSIONED, new.version_id)]).check(world)


# --- object lock ---------------------------------------------------------------------


def test_legal_hold_is_never_deleted(world: World) -> None:
    bucket = world.bucket(lock=True)
    obj = world.put(bucket, "a", legal_hold=True)
    for bypass in (False, True):
        with unchanged(world, ObjectLocked, "AccessDenied"):
            delete_object_version(
                world.db,
                world.loc(bucket, "a"),
                obj.version_id,
                bypass_governance=bypass,
                can_bypass_governance=bypass,
            )


def test_compliance_is_never_deleted_before_retain_until(world: World) -> None:
    bucket = world.bucket(lock=True)
    obj = world.put(bucket, "a", retention=world.compliance(days=1))
    with unchanged(world, ObjectLocked):
        delete_object_version(
            world.db,
            world.loc(bucket, "a"),
            obj.version_id,
            bypass_governance=True,
            can_bypass_governance=True,
        )
    world.tick(timedelta(hours=23))
    with unchanged(world, ObjectLocked):
        delete_object_version(world.db, world.loc(bucket, "a"), obj.version_id)
    world.tick(timedelta(hours=1))  # retain-until reached: expired retention forbids nothing
    result = delete_object_version(world.db, world.loc(bucket, "a"), obj.version_id)
    assert [r.version_id for r in result.removed] == [obj.version_id]
    Verify([]).check(world)


@pytest.mark.parametrize(
    ("bypass", "allowed"),
    [(False, False), (True, False), (False, True)],
    ids=["no-bypass", "bypass-not-allowed", "allowed-not-requested"],
)
def test_governance_refused_without_allowed_bypass(
    world: World, bypass: bool, allowed: bool
) -> None:
    bucket = world.bucket(lock=True)
    obj = world.put(bucket, "a", retention=world.governance(days=3))
    with unchanged(world, ObjectLocked):
        delete_object_version(
            world.db,
            world.loc(bucket, "a"),
            obj.version_id,
            bypass_governance=bypass,
            can_bypass_governance=allowed,
        )


def test_governance_deleted_with_allowed_bypass(world: World) -> None:
    bucket = world.bucket(lock=True)
    obj = world.put(bucket, "a", retention=world.governance(days=3))
    result = delete_object_version(
        world.db,
        world.loc(bucket, "a"),
        obj.version_id,
        bypass_governance=True,
        can_bypass_governance=True,
    )
    assert [r.version_id for r in result.removed] == [obj.version_id]


def test_expired_governance_deleted_without_bypass(world: World) -> None:
    bucket = world.bucket(lock=True)
    obj = world.put(bucket, "a", retention=world.governance(days=1))
    world.tick(timedelta(days=2))
    delete_object_version(world.db, world.loc(bucket, "a"), obj.version_id)
    Verify([]).check(world)


def test_delete_marker_in_lock_bucket_always_deletable(world: World) -> None:
    bucket = world.bucket(lock=True)
    obj = world.put(bucket, "a", legal_hold=True, retention=world.compliance(days=30))
    marker = delete_object(world.db, world.loc(bucket, "a")).marker
    assert marker is not None
    delete_object_version(world.db, world.loc(bucket, "a"), marker.version_id)
    Verify([Row("a", S.COMMITTED_VERSIONED, obj.version_id)]).check(world)
