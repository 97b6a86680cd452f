"""Bucket versioning: enable, suspend, never back to unversioned; object lock forbids
suspending."""

from __future__ import annotations

import pytest

from ripple.metabase import (
    BucketLocation,
    Versioning,
    get_bucket_info,
    set_bucket_versioning,
)
from ripple.metabase.errors import BucketNotFound, InvalidBucketState
from tests.metabase.steps import World


def _state(world: World, loc: BucketLocation) -> Versioning:
    return get_bucket_info(world.db, loc).versioning


def test_new_bucket_is_unversioned(world: World) -> None:
    assert _state(world, world.bucket()) is Versioning.UNVERSIONED


def test_enable(world: World) -> None:
    loc = world.bucket()
    bucket = set_bucket_versioning(world.db, loc, enabled=True)
    assert bucket.versioning is Versioning.ENABLED
    assert _state(world, loc) is Versioning.ENABLED


def test_enable_twice_stays_enabled(world: World) -> None:
    loc = world.bucket()
    set_bucket_versioning(world.db, loc, enabled=True)
    assert set_bucket_versioning(world.db, loc, enabled=True).versioning is Versioning.ENABLED
    assert _state(world, loc) is Versioning.ENABLED


def test_suspend_after_enable(world: World) -> None:
    loc = world.bucket()
    set_bucket_versioning(world.db, loc, enabled=True)
    bucket = set_bucket_versioning(world.db, loc, enabled=False)
    assert bucket.versioning is Versioning.SUSPENDED
    assert _state(world, loc) is Versioning.SUSPENDED


def test_suspended_can_be_enabled_again(world: World) -> None:
    loc = world.bucket(versioning=Versioning.SUSPENDED)
    assert _state(world, loc) is Versioning.SUSPENDED
    assert set_bucket_versioning(world.db, loc, enabled=True).versioning is Versioning.ENABLED
    assert _state(world, loc) is Versioning.ENABLED


def test_suspend_twice_stays_suspended(world: World) -> None:
    loc = world.bucket(versioning=Versioning.SUSPENDED)
    assert set_bucket_versioning(world.db, loc, enabled=False).versioning is Versioning.SUSPENDED
    assert _state(world, loc) is Versioning.SUSPENDED


def test_an_unversioned_bucket_can_be_suspended_straight_away(world: World) -> None:
    """As in S3: GetBucketVersioning answers Suspended from then on; writes still make the
    key's one null version."""
    loc = world.bucket()
    bucket = set_bucket_versioning(world.db, loc, enabled=False)
    assert bucket.versioning is Versioning.SUSPENDED
    assert _state(world, loc) is Versioning.SUSPENDED
    first = world.put(loc, "k")
    second = world.put(loc, "k")
    assert (first.version_id, second.version_id) == ("null", "null")
    assert [r.etag for r in world.rows()] == [second.etag]


def test_never_returns_to_unversioned(world: World) -> None:
    """Once enabled, every further change lands on enabled or suspended."""
    loc = world.bucket()
    seen = []
    for enabled in (True, False, False, True, False):
        seen.append(set_bucket_versioning(world.db, loc, enabled=enabled).versioning)
    assert seen == [
        Versioning.ENABLED,
        Versioning.SUSPENDED,
        Versioning.SUSPENDED,
        Versioning.ENABLED,
        Versioning.SUSPENDED,
    ]
    assert _state(world, loc) is Versioning.SUSPENDED


def test_object_lock_bucket_cannot_be_suspended(world: World) -> None:
    loc = world.bucket("locked", lock=True)
    with pytest.raises(InvalidBucketState) as info:
        set_bucket_versioning(world.db, loc, enabled=False)
    assert info.value.code == "InvalidBucketState"
    assert _state(world, loc) is Versioning.ENABLED


def test_object_lock_bucket_can_be_enabled_again(world: World) -> None:
    loc = world.bucket("locked", lock=True)
    assert set_bucket_versioning(world.db, loc, enabled=True).versioning is Versioning.ENABLED
    assert get_bucket_info(world.db, loc).object_lock_enabled is True


def test_versioning_is_per_bucket(world: World) -> None:
    a = world.bucket("alpha")
    b = world.bucket("bravo")
    set_bucket_versioning(world.db, a, enabled=True)
    assert _state(world, a) is Versioning.ENABLED
    assert _state(world, b) is Versioning.UNVERSIONED


@pytest.mark.parametrize("enabled", [True, False])
def test_unknown_bucket(world: World, enabled: bool) -> None:
    with pytest.raises(BucketNotFound):
        set_bucket_versioning(
            world.db, BucketLocation(world.project.id, "missing"), enabled=enabled
        )
