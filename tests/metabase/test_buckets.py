"""Buckets: naming rules, global names, object lock at creation, delete only when empty,
and the object lock configuration (default retention)."""

from __future__ import annotations

import uuid

import pytest
import sqlalchemy as sa

from ripple.metabase import (
    Bucket,
    BucketLocation,
    DefaultRetention,
    RetentionMode,
    Versioning,
    create_bucket,
    create_project,
    delete_bucket,
    delete_object,
    delete_object_version,
    get_bucket_info,
    list_buckets,
    set_bucket_versioning,
    set_object_lock_configuration,
)
from ripple.metabase.buckets import InvalidBucketName
from ripple.metabase.errors import (
    BucketAlreadyExists,
    BucketAlreadyOwnedByYou,
    BucketNotEmpty,
    BucketNotFound,
    InvalidArgument,
    InvalidBucketState,
    InvalidRetentionPeriod,
    ProjectNotFound,
)
from ripple.metabase.schema import buckets
from tests.metabase.objects import begin_object
from tests.metabase.steps import T0, World


def test_create_returns_and_stores_the_bucket(world: World) -> None:
    loc = BucketLocation(world.project.id, "photos")
    created = create_bucket(world.db, loc)
    expected = Bucket(world.project.id, "photos", Versioning.UNVERSIONED, False, None, T0)
    assert created == expected
    assert get_bucket_info(world.db, loc) == expected
    assert list_buckets(world.db, world.project.id) == [expected]


def test_create_with_versioning_enabled(world: World) -> None:
    loc = BucketLocation(world.project.id, "versioned")
    created = create_bucket(world.db, loc, versioning=Versioning.ENABLED)
    assert created.versioning is Versioning.ENABLED
    assert get_bucket_info(world.db, loc).versioning is Versioning.ENABLED


def test_list_buckets_is_per_project_and_sorted(world: World) -> None:
    other = create_project(world.db, "other")
    for name in ("charlie", "alpha", "bravo"):
        create_bucket(world.db, BucketLocation(world.project.id, name))
    create_bucket(world.db, BucketLocation(other.id, "delta"))
    assert [b.name for b in list_buckets(world.db, world.project.id)] == [
        "alpha",
        "bravo",
        "charlie",
    ]
    assert [b.name for b in list_buckets(world.db, other.id)] == ["delta"]


@pytest.mark.parametrize(
    "name",
    [
        "ab",  # too short
        "a" * 64,  # too long
        "",
        "Photos",  # upper case
        "my_bucket",  # underscore
        "-bucket",  # must begin with a letter or digit
        "bucket-",  # must end with a letter or digit
        ".bucket",
        "bucket.",
        "my..bucket",  # adjacent dots
        "my.-bucket",
        "my-.bucket",
        "192.168.1.10",  # looks like an IP address
        "xn--bucket",  # reserved prefix
        "bucket-s3alias",  # reserved suffix
        "buck et",
        "bücket",
    ],
)
def test_invalid_names_are_refused(world: World, name: str) -> None:
    with pytest.raises(InvalidBucketName) as info:
        create_bucket(world.db, BucketLocation(world.project.id, name))
    assert info.value.code == "InvalidBucketName"
    assert isinstance(info.value, InvalidArgument)
    assert list_buckets(world.db, world.project.id) == []


@pytest.mark.parametrize("name", ["abc", "a" * 63, "my.bucket-1", "1bucket9", "192.168.1.b"])
def test_valid_names_are_accepted(world: World, name: str) -> None:
    create_bucket(world.db, BucketLocation(world.project.id, name))
    assert [b.name for b in list_buckets(world.db, world.project.id)] == [name]


def test_same_name_same_project_is_already_owned_by_you(world: World) -> None:
    loc = BucketLocation(world.project.id, "photos")
    first = create_bucket(world.db, loc)
    world.tick()
    with pytest.raises(BucketAlreadyOwnedByYou) as info:
        create_bucket(world.db, loc, versioning=Versioning.ENABLED)
    assert info.value.code == "BucketAlreadyOwnedByYou"
    assert get_bucket_info(world.db, loc) == first


def test_same_name_other_project_already_exists(world: World) -> None:
    loc = BucketLocation(world.project.id, "photos")
    first = create_bucket(world.db, loc)
    other = create_project(world.db, "other")
    with pytest.raises(BucketAlreadyExists) as info:
        create_bucket(world.db, BucketLocation(other.id, "photos"))
    assert type(info.value) is BucketAlreadyExists
    assert info.value.code == "BucketAlreadyExists"
    assert list_buckets(world.db, other.id) == []
    assert get_bucket_info(world.db, loc) == first


def test_unknown_project(world: World) -> None:
    missing = uuid.uuid4()
    with pytest.raises(ProjectNotFound):
        create_bucket(world.db, BucketLocation(missing, "photos"))
    assert list_buckets(world.db, missing) == []


@pytest.mark.parametrize(
    "versioning", [Versioning.UNVERSIONED, Versioning.ENABLED, Versioning.SUSPENDED]
)
def test_object_lock_at_creation_turns_versioning_on(world: World, versioning: Versioning) -> None:
    loc = BucketLocation(world.project.id, "locked")
    created = create_bucket(world.db, loc, versioning=versioning, object_lock_enabled=True)
    expected = Bucket(world.project.id, "locked", Versioning.ENABLED, True, None, T0)
    assert created == expected
    assert get_bucket_info(world.db, loc) == expected


def test_get_unknown_bucket(world: World) -> None:
    with pytest.raises(BucketNotFound) as info:
        get_bucket_info(world.db, BucketLocation(world.project.id, "missing"))
    assert info.value.code == "NoSuchBucket"


# --- delete ---------------------------------------------------------------------------


def test_delete_empty_bucket(world: World) -> None:
    loc = world.bucket("photos")
    keep = world.bucket("keep")
    delete_bucket(world.db, loc)
    with pytest.raises(BucketNotFound):
        get_bucket_info(world.db, loc)
    assert [b.name for b in list_buckets(world.db, world.project.id)] == [keep.bucket_name]


def test_deleted_name_can_be_taken_by_another_project(world: World) -> None:
    loc = world.bucket("photos")
    delete_bucket(world.db, loc)
    other = create_project(world.db, "other")
    created = create_bucket(world.db, BucketLocation(other.id, "photos"))
    assert created.project_id == other.id


def test_delete_unknown_bucket(world: World) -> None:
    with pytest.raises(BucketNotFound):
        delete_bucket(world.db, BucketLocation(world.project.id, "missing"))


def test_delete_bucket_with_object_is_refused(world: World) -> None:
    loc = world.bucket("photos")
    world.put(loc, "a")
    with pytest.raises(BucketNotEmpty) as info:
        delete_bucket(world.db, loc)
    assert info.value.code == "BucketNotEmpty"
    assert get_bucket_info(world.db, loc).name == "photos"
    assert [r.object_key for r in world.rows()] == ["a"]


def test_delete_bucket_aborts_its_uploads_in_progress(world: World) -> None:
    loc = world.bucket("photos")
    pending = begin_object(world.db, world.loc(loc, "upload"))
    other = begin_object(world.db, world.loc(loc, "other"))
    aborted = delete_bucket(world.db, loc)
    assert sorted(aborted) == sorted([pending.stream_id, other.stream_id])
    with pytest.raises(BucketNotFound):
        get_bucket_info(world.db, loc)
    assert world.rows() == []


def test_delete_bucket_with_an_object_and_an_upload_keeps_both(world: World) -> None:
    loc = world.bucket("photos")
    pending = begin_object(world.db, world.loc(loc, "upload"))
    obj = world.put(loc, "a")
    with pytest.raises(BucketNotEmpty):
        delete_bucket(world.db, loc)
    assert get_bucket_info(world.db, loc).name == "photos"
    assert sorted(world.rows(), key=lambda o: o.object_key) == [obj, pending]


def test_delete_bucket_with_only_a_delete_marker_is_refused(world: World) -> None:
    loc = world.bucket("photos", Versioning.ENABLED)
    obj = world.put(loc, "a")
    delete_object_version(world.db, world.loc(loc, "a"), obj.version_id)
    marker = delete_object(world.db, world.loc(loc, "a")).marker
    assert marker is not None
    assert world.rows() == [marker]
    with pytest.raises(BucketNotEmpty):
        delete_bucket(world.db, loc)
    assert get_bucket_info(world.db, loc).name == "photos"
    # Removing the marker empties the bucket.
    delete_object_version(world.db, world.loc(loc, "a"), marker.version_id)
    delete_bucket(world.db, loc)
    assert list_buckets(world.db, world.project.id) == []


def test_objects_in_another_bucket_do_not_count(world: World) -> None:
    empty = world.bucket("empty")
    full = world.bucket("full")
    world.put(full, "a")
    delete_bucket(world.db, empty)
    assert [b.name for b in list_buckets(world.db, world.project.id)] == ["full"]


# --- object lock configuration --------------------------------------------------------


def test_set_default_retention_days(world: World) -> None:
    loc = world.bucket("locked", lock=True)
    default = DefaultRetention(RetentionMode.GOVERNANCE, days=30)
    bucket = set_object_lock_configuration(world.db, loc, default)
    assert bucket.default_retention == default
    assert get_bucket_info(world.db, loc).default_retention == default


def test_set_default_retention_years_then_clear(world: World) -> None:
    loc = world.bucket("locked", lock=True)
    default = DefaultRetention(RetentionMode.COMPLIANCE, years=2)
    assert set_object_lock_configuration(world.db, loc, default).default_retention == default
    cleared = set_object_lock_configuration(world.db, loc, None)
    assert cleared.default_retention is None
    assert cleared.object_lock_enabled is True
    assert get_bucket_info(world.db, loc).default_retention is None


def test_replace_default_retention(world: World) -> None:
    loc = world.bucket("locked", lock=True)
    set_object_lock_configuration(world.db, loc, DefaultRetention(RetentionMode.COMPLIANCE, days=1))
    second = DefaultRetention(RetentionMode.GOVERNANCE, years=3)
    set_object_lock_configuration(world.db, loc, second)
    assert get_bucket_info(world.db, loc).default_retention == second


@pytest.mark.parametrize("versioning", [Versioning.UNVERSIONED, Versioning.SUSPENDED])
def test_lock_configuration_needs_lock_or_enabled_versioning(
    world: World, versioning: Versioning
) -> None:
    loc = world.bucket("plain", versioning)
    with pytest.raises(InvalidBucketState) as info:
        set_object_lock_configuration(
            world.db, loc, DefaultRetention(RetentionMode.GOVERNANCE, days=1)
        )
    assert info.value.code == "InvalidBucketState"
    bucket = get_bucket_info(world.db, loc)
    assert (bucket.object_lock_enabled, bucket.default_retention) == (False, None)


def test_lock_configuration_enables_object_lock_on_a_versioned_bucket(world: World) -> None:
    """As S3 allows since 2023: a bucket with versioning Enabled gets object lock."""
    loc = world.bucket("plain", Versioning.ENABLED)
    default = DefaultRetention(RetentionMode.GOVERNANCE, days=1)
    bucket = set_object_lock_configuration(world.db, loc, default)
    assert (bucket.object_lock_enabled, bucket.default_retention) == (True, default)
    with pytest.raises(InvalidBucketState):  # and can no longer be suspended
        set_bucket_versioning(world.db, loc, enabled=False)


def test_lock_configuration_on_unknown_bucket(world: World) -> None:
    with pytest.raises(BucketNotFound):
        set_object_lock_configuration(
            world.db,
            BucketLocation(world.project.id, "missing"),
            DefaultRetention(RetentionMode.GOVERNANCE, days=1),
        )


@pytest.mark.parametrize(
    "default",
    [
        DefaultRetention(RetentionMode.GOVERNANCE),  # neither days nor years
        DefaultRetention(RetentionMode.GOVERNANCE, days=1, years=1),  # both
    ],
)
def test_invalid_default_retention(world: World, default: DefaultRetention) -> None:
    loc = world.bucket("locked", lock=True)
    existing = DefaultRetention(RetentionMode.GOVERNANCE, days=7)
    set_object_lock_configuration(world.db, loc, existing)
    with pytest.raises(InvalidArgument) as info:
        set_object_lock_configuration(world.db, loc, default)
    assert info.value.code == "InvalidArgument"
    assert get_bucket_info(world.db, loc).default_retention == existing


@pytest.mark.parametrize(
    "default",
    [
        DefaultRetention(RetentionMode.COMPLIANCE, days=0),
        DefaultRetention(RetentionMode.COMPLIANCE, days=-5),
        DefaultRetention(RetentionMode.COMPLIANCE, days=36_501),
        DefaultRetention(RetentionMode.COMPLIANCE, days=2**70),
        DefaultRetention(RetentionMode.GOVERNANCE, years=0),
        DefaultRetention(RetentionMode.GOVERNANCE, years=-1),
        DefaultRetention(RetentionMode.GOVERNANCE, years=101),
        DefaultRetention(RetentionMode.GOVERNANCE, years=7975),
    ],
)
def test_a_default_retention_period_out_of_bounds(world: World, default: DefaultRetention) -> None:
    loc = world.bucket("locked", lock=True)
    existing = DefaultRetention(RetentionMode.GOVERNANCE, days=7)
    set_object_lock_configuration(world.db, loc, existing)
    with pytest.raises(InvalidRetentionPeriod):
        set_object_lock_configuration(world.db, loc, default)
    assert get_bucket_info(world.db, loc).default_retention == existing


def test_the_longest_default_retention_periods_are_accepted(world: World) -> None:
    loc = world.bucket("locked", lock=True)
    for default in (
        DefaultRetention(RetentionMode.GOVERNANCE, days=36_500),
        DefaultRetention(RetentionMode.GOVERNANCE, years=100),
    ):
        assert set_object_lock_configuration(world.db, loc, default).default_retention == default
        assert world.put(loc, "k").retention is not None


def test_lock_bucket_stays_versioned_after_configuration(world: World) -> None:
    loc = world.bucket("locked", lock=True)
    set_object_lock_configuration(world.db, loc, DefaultRetention(RetentionMode.GOVERNANCE, days=1))
    set_bucket_versioning(world.db, loc, enabled=True)
    assert get_bucket_info(world.db, loc).versioning is Versioning.ENABLED


def test_a_stored_default_retention_past_the_last_time_still_takes_writes(world: World) -> None:
    """A period stored before its bounds were checked retains until the last representable
    time instead of failing every write to the bucket."""
    loc = world.bucket("locked", lock=True)
    for column, period in (("default_retention_days", 10**9), ("default_retention_years", 7975)):
        with world.db.write() as conn:
            conn.execute(
                sa.update(buckets)
                .where(buckets.c.name == "locked")
                .values(
                    {
                        "default_retention_mode": int(RetentionMode.GOVERNANCE),
                        "default_retention_days": None,
                        "default_retention_years": None,
                        column: period,
                    }
                )
            )
        put = world.put(loc, "k")
        assert put.retention is not None
        assert put.retention.retain_until.year == 9999
