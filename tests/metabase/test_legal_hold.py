"""Put and get an object version's legal hold."""

from __future__ import annotations

import pytest

from ripple.metabase import (
    Versioning,
    delete_object,
    delete_object_version,
    get_object_legal_hold,
    put_object_legal_hold,
)
from ripple.metabase.errors import MethodNotAllowed, ObjectLocked, ObjectLockNotEnabled
from tests.metabase.steps import World, unchanged


def test_hold_on_and_off_guards_deletion(world: World) -> None:
    bucket = world.bucket(lock=True)
    obj = world.put(bucket, "a")
    loc = world.loc(bucket, "a")
    assert get_object_legal_hold(world.db, loc) is False
    assert put_object_legal_hold(world.db, loc, True).legal_hold is True
    assert get_object_legal_hold(world.db, loc, version_id=obj.version_id) is True
    with unchanged(world, ObjectLocked):
        delete_object_version(
            world.db, loc, obj.version_id, bypass_governance=True, can_bypass_governance=True
        )
    put_object_legal_hold(world.db, loc, False, version_id=obj.version_id)
    assert get_object_legal_hold(world.db, loc) is False
    delete_object_version(world.db, loc, obj.version_id)
    assert world.rows() == []


def test_hold_applies_to_one_version(world: World) -> None:
    bucket = world.bucket(lock=True)
    v1 = world.put(bucket, "a")
    v2 = world.put(bucket, "a")
    loc = world.loc(bucket, "a")
    put_object_legal_hold(world.db, loc, True, version_id=v1.version_id)
    assert get_object_legal_hold(world.db, loc, version_id=v1.version_id) is True
    assert get_object_legal_hold(world.db, loc, version_id=v2.version_id) is False


def test_bucket_without_object_lock(world: World) -> None:
    bucket = world.bucket(versioning=Versioning.ENABLED)
    world.put(bucket, "a")
    with unchanged(world, ObjectLockNotEnabled):
        put_object_legal_hold(world.db, world.loc(bucket, "a"), True)
    with pytest.raises(ObjectLockNotEnabled):
        get_object_legal_hold(world.db, world.loc(bucket, "a"))


def test_delete_marker_has_no_legal_hold(world: World) -> None:
    bucket = world.bucket(lock=True)
    world.put(bucket, "a")
    marker = delete_object(world.db, world.loc(bucket, "a")).marker
    assert marker is not None
    with unchanged(world, MethodNotAllowed):
        put_object_legal_hold(world.db, world.loc(bucket, "a"), True, version_id=marker.version_id)
