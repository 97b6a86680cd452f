"""Put and get object retention: the object lock rules for changing a retention period."""

from __future__ import annotations

from datetime import timedelta

import pytest

from ripple.metabase import (
    Retention,
    RetentionMode,
    Versioning,
    delete_object,
    get_object_retention,
    put_object_retention,
)
from ripple.metabase.errors import (
    InvalidArgument,
    MethodNotAllowed,
    ObjectLocked,
    ObjectLockNotEnabled,
    VersionNotFound,
)
from tests.metabase.steps import World, unchanged

GOV = RetentionMode.GOVERNANCE
COMP = RetentionMode.COMPLIANCE


def test_set_and_get_on_latest_and_exact_version(world: World) -> None:
    bucket = world.bucket(lock=True)
    v1 = world.put(bucket, "a")
    world.put(bucket, "a")
    loc = world.loc(bucket, "a")
    r1 = Retention(GOV, world.now + timedelta(days=5))
    put_object_retention(world.db, loc, r1, version_id=v1.version_id)
    assert get_object_retention(world.db, loc, version_id=v1.version_id) == r1
    assert get_object_retention(world.db, loc) is None  # the latest version has none
    r2 = Retention(COMP, world.now + timedelta(days=1))
    updated = put_object_retention(world.db, loc, r2)
    assert updated.retention == r2
    assert get_object_retention(world.db, loc) == r2


def test_compliance_can_be_extended(world: World) -> None:
    bucket = world.bucket(lock=True)
    world.put(bucket, "a", retention=world.compliance(days=1))
    longer = Retention(COMP, world.now + timedelta(days=30))
    put_object_retention(world.db, world.loc(bucket, "a"), longer)
    assert get_object_retention(world.db, world.loc(bucket, "a")) == longer


@pytest.mark.parametrize(
    "change",
    ["shorten", "to-governance", "remove"],
)
def test_compliance_never_shortened_changed_or_removed(world: World, change: str) -> None:
    bucket = world.bucket(lock=True)
    current = world.compliance(days=10)
    world.put(bucket, "a", retention=current)
    new = {
        "shorten": Retention(COMP, current.retain_until - timedelta(days=1)),
        "to-governance": Retention(GOV, current.retain_until + timedelta(days=1)),
        "remove": None,
    }[change]
    with unchanged(world, ObjectLocked, "AccessDenied"):
        put_object_retention(
            world.db,
            world.loc(bucket, "a"),
            new,
            bypass_governance=True,
            can_bypass_governance=True,
        )
    assert get_object_retention(world.db, world.loc(bucket, "a")) == current


def test_expired_compliance_can_be_replaced(world: World) -> None:
    bucket = world.bucket(lock=True)
    world.put(bucket, "a", retention=world.compliance(days=1))
    world.tick(timedelta(days=2))
    put_object_retention(world.db, world.loc(bucket, "a"), None)
    assert get_object_retention(world.db, world.loc(bucket, "a")) is None


@pytest.mark.parametrize(("bypass", "allowed"), [(False, False), (True, False), (False, True)])
@pytest.mark.parametrize("change", ["shorten", "remove"])
def test_governance_weakened_only_with_allowed_bypass(
    world: World, change: str, bypass: bool, allowed: bool
) -> None:
    bucket = world.bucket(lock=True)
    current = world.governance(days=10)
    world.put(bucket, "a", retention=current)
    new = None if change == "remove" else Retention(GOV, world.now + timedelta(days=1))
    with unchanged(world, ObjectLocked):
        put_object_retention(
            world.db,
            world.loc(bucket, "a"),
            new,
            bypass_governance=bypass,
            can_bypass_governance=allowed,
        )


@pytest.mark.parametrize("change", ["shorten", "remove"])
def test_governance_weakened_with_allowed_bypass(world: World, change: str) -> None:
    bucket = world.bucket(lock=True)
    world.put(bucket, "a", retention=world.governance(days=10))
    new = None if change == "remove" else Retention(GOV, world.now + timedelta(days=1))
    put_object_retention(
        world.db,
        world.loc(bucket, "a"),
        new,
        bypass_governance=True,
        can_bypass_governance=True,
    )
    assert get_object_retention(world.db, world.loc(bucket, "a")) == new


def test_governance_extended_without_bypass_made_compliance_only_with_it(world: World) -> None:
    """S3: governance lock settings are altered only with a bypass, its mode included
    (even to the stricter compliance); extending the period needs none."""
    bucket = world.bucket(lock=True)
    current = world.governance(days=10)
    world.put(bucket, "a", retention=current)
    longer = Retention(GOV, current.retain_until + timedelta(days=1))
    put_object_retention(world.db, world.loc(bucket, "a"), longer)
    stricter = Retention(COMP, longer.retain_until)
    with unchanged(world, ObjectLocked, "AccessDenied"):
        put_object_retention(world.db, world.loc(bucket, "a"), stricter)
    put_object_retention(
        world.db,
        world.loc(bucket, "a"),
        stricter,
        bypass_governance=True,
        can_bypass_governance=True,
    )
    assert get_object_retention(world.db, world.loc(bucket, "a")) == stricter


def test_retain_until_must_be_in_the_future(world: World) -> None:
    bucket = world.bucket(lock=True)
    world.put(bucket, "a")
    with unchanged(world, InvalidArgument):
        put_object_retention(world.db, world.loc(bucket, "a"), Retention(GOV, world.now))


def test_bucket_without_object_lock(world: World) -> None:
    bucket = world.bucket(versioning=Versioning.ENABLED)
    world.put(bucket, "a")
    with unchanged(world, ObjectLockNotEnabled, "InvalidRequest"):
        put_object_retention(world.db, world.loc(bucket, "a"), world.governance())
    with pytest.raises(ObjectLockNotEnabled):
        get_object_retention(world.db, world.loc(bucket, "a"))


def test_delete_marker_has_no_retention(world: World) -> None:
    bucket = world.bucket(lock=True)
    world.put(bucket, "a")
    marker = delete_object(world.db, world.loc(bucket, "a")).marker
    assert marker is not None
    with unchanged(world, MethodNotAllowed, "MethodNotAllowed"):
        put_object_retention(
            world.db, world.loc(bucket, "a"), world.governance(), version_id=marker.version_id
        )


def test_missing_version(world: World) -> None:
    bucket = world.bucket(lock=True)
    obj = world.put(bucket, "a")
    other = obj.version_id[:16] + "f" * 16
    with unchanged(world, VersionNotFound, "NoSuchVersion"):
        put_object_retention(world.db, world.loc(bucket, "a"), world.governance(), version_id=other)
