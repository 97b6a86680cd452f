"""Bucket lifecycle: S3's rules for a configuration (nothing stored on refusal), put / get /
delete, and `run_lifecycle` applying each action in unversioned, versioning-enabled and
suspended buckets at an explicit `now` (S3's rounding to midnight UTC), object lock kept
(judged by the metabase clock, never by `now`), prefix / tag / size filters, disabled
rules, and the change records a batch writes (system transactions tagged
`lifecycle-expiration` with the rule's ID). Batches, failures, cancelling:
test_lifecycle_batches.py."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from ripple.metabase import (
    BucketLocation,
    Object,
    Status,
    Versioning,
    delete_bucket_lifecycle,
    delete_object,
    get_bucket_lifecycle,
    put_bucket_lifecycle,
    put_object_tagging,
    run_lifecycle,
    set_bucket_versioning,
)
from ripple.metabase.errors import (
    BucketNotFound,
    InvalidArgument,
    InvalidLifecycleRequest,
    LifecycleNotFound,
    LifecycleNotImplemented,
    MalformedLifecycle,
    MetabaseError,
)
from ripple.metabase.lifecycle import check_lifecycle
from ripple.metabase.uploads import begin_upload
from tests.changestream.conftest import read_all, tag_of
from tests.metabase.helpers import DAY, configure, rule, statuses
from tests.metabase.steps import T0, World

# --- the configuration ------------------------------------------------------------------


def test_put_get_delete(world: World) -> None:
    bucket = world.bucket()
    with pytest.raises(LifecycleNotFound) as caught:
        get_bucket_lifecycle(world.db, bucket)
    assert caught.value.code == "NoSuchLifecycleConfiguration"
    rules = [
        {"Status": "Enabled", "Prefix": "tmp/", "Expiration": {"Days": "3"}},
        rule(
            "tagged",
            Filter={"And": {"Prefix": "logs/", "Tags": [{"Key": "k", "Value": "v"}]}},
            Expiration={"Date": "2026-03-01T00:00:00.000Z"},
            NoncurrentVersionExpiration={"NoncurrentDays": 7, "NewerNoncurrentVersions": 2},
        ),
        rule(
            "markers",
            Status="Disabled",
            Expiration={"ExpiredObjectDeleteMarker": "true"},
            AbortIncompleteMultipartUpload={"DaysAfterInitiation": 1},
        ),
    ]
    put_bucket_lifecycle(world.db, bucket, {"Rules": rules})
    got = get_bucket_lifecycle(world.db, bucket)
    assert 20 <= len(got[0].id) <= 255  # generated
    assert [r.document for r in got] == [
        {"ID": got[0].id, "Status": "Enabled", "Prefix": "tmp/", "Expiration": {"Days": 3}},
        {
            "ID": "tagged",
            "Status": "Enabled",
            "Filter": {"And": {"Prefix": "logs/", "Tags": [{"Key": "k", "Value": "v"}]}},
            "Expiration": {"Date": "2026-03-01T00:00:00Z"},
            "NoncurrentVersionExpiration": {"NoncurrentDays": 7, "NewerNoncurrentVersions": 2},
        },
        {
            "ID": "markers",
            "Status": "Disabled",
            "Filter": {},
            "Expiration": {"ExpiredObjectDeleteMarker": True},
            "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1},
        },
    ]
    assert got[1].expiration_date == datetime(2026, 3, 1, tzinfo=UTC)
    assert got[1].filter.tags == (("k", "v"),)
    assert not got[2].enabled
    # a put replaces the whole configuration
    configure(world, bucket, rule("only", Expiration={"Days": 1}))
    assert [r.id for r in get_bucket_lifecycle(world.db, bucket)] == ["only"]
    delete_bucket_lifecycle(world.db, bucket)
    with pytest.raises(LifecycleNotFound):
        get_bucket_lifecycle(world.db, bucket)
    delete_bucket_lifecycle(world.db, bucket)  # none: not an error
    missing = BucketLocation(world.project.id, "missing")
    with pytest.raises(BucketNotFound):
        put_bucket_lifecycle(world.db, missing, {"Rules": [rule(Expiration={"Days": 1})]})
    with pytest.raises(BucketNotFound):
        get_bucket_lifecycle(world.db, missing)


TAG = {"Tag": {"Key": "k", "Value": "v"}}
REFUSED: list[tuple[Any, type[MetabaseError], str]] = [
    ([], MalformedLifecycle, "MalformedXML"),
    ([rule(Expiration={"Days": 1})] * 1001, MalformedLifecycle, "MalformedXML"),
    ([rule(Status="On", Expiration={"Days": 1})], MalformedLifecycle, "MalformedXML"),
    ([{"ID": "x", "Status": "Enabled", "Expiration": {"Days": 1}}], MalformedLifecycle, ""),
    ([rule(Prefix="a", Expiration={"Days": 1})], MalformedLifecycle, "MalformedXML"),
    ([rule(Filter={"Prefix": "a", **TAG}, Expiration={"Days": 1})], MalformedLifecycle, ""),
    ([rule(Expiration={})], MalformedLifecycle, "MalformedXML"),
    ([rule(Expiration={"Days": 1, "ExpiredObjectDeleteMarker": True})], MalformedLifecycle, ""),
    ([rule(Expiration={"Days": 1, "Date": "2026-03-01T00:00:00Z"})], MalformedLifecycle, ""),
    ([rule(Expiration={"Days": "soon"})], MalformedLifecycle, "MalformedXML"),
    ([rule(Expiration={"Days": 0})], InvalidArgument, "InvalidArgument"),
    ([rule(Expiration={"Date": "2026-03-01T10:00:00Z"})], InvalidArgument, "InvalidArgument"),
    ([rule(NoncurrentVersionExpiration={"NoncurrentDays": 0})], InvalidArgument, ""),
    (
        [rule(NoncurrentVersionExpiration={"NoncurrentDays": 1, "NewerNoncurrentVersions": 101})],
        InvalidArgument,
        "",
    ),
    ([rule(AbortIncompleteMultipartUpload={"DaysAfterInitiation": 0})], InvalidArgument, ""),
    ([rule("x" * 256, Expiration={"Days": 1})], InvalidArgument, "InvalidArgument"),
    ([rule("same", Expiration={"Days": 1})] * 2, InvalidArgument, "InvalidArgument"),
    ([rule()], InvalidLifecycleRequest, "InvalidRequest"),
    (
        [rule(Filter=TAG, AbortIncompleteMultipartUpload={"DaysAfterInitiation": 1})],
        InvalidLifecycleRequest,
        "InvalidRequest",
    ),
    (
        [rule(Filter=TAG, Expiration={"ExpiredObjectDeleteMarker": True})],
        InvalidLifecycleRequest,
        "InvalidRequest",
    ),
    (
        [
            rule(
                Filter={"And": {"Tags": [{"Key": "k", "Value": "1"}, {"Key": "k", "Value": "2"}]}},
                Expiration={"Days": 1},
            )
        ],
        InvalidLifecycleRequest,
        "InvalidRequest",
    ),
    (
        [rule(Transitions=[{"Days": 30, "StorageClass": "GLACIER"}])],
        LifecycleNotImplemented,
        "NotImplemented",
    ),
]


@pytest.mark.parametrize(("rules", "error", "code"), REFUSED)
def test_refused_configurations_store_nothing(
    world: World, rules: Any, error: type[MetabaseError], code: str
) -> None:
    bucket = world.bucket()
    configure(world, bucket, rule("kept", Expiration={"Days": 9}))
    with pytest.raises(error) as caught:
        put_bucket_lifecycle(world.db, bucket, {"Rules": rules})
    assert caught.value.code == (code or error.code)
    assert [r.document for r in get_bucket_lifecycle(world.db, bucket)] == [
        {"ID": "kept", "Status": "Enabled", "Filter": {}, "Expiration": {"Days": 9}}
    ]


def test_accepted_edge_values() -> None:
    rules = check_lifecycle(
        {
            "Rules": [
                rule("a" * 255, Expiration={"Date": datetime(2026, 3, 1, tzinfo=UTC)}),
                rule("b", Filter={"ObjectSizeGreaterThan": "0"}, Expiration={"Days": 1}),
                rule("c", Expiration={"ExpiredObjectDeleteMarker": False}),
            ]
            + [rule(f"n{i}", Expiration={"Days": 1}) for i in range(997)]
        }
    )
    assert len(rules) == 1000
    assert rules[1].filter.size_greater_than == 0
    assert rules[2].expired_object_delete_marker is False


# --- Expiration (Days, Date) of current versions ------------------------------------------


def test_days_round_up_to_midnight_unversioned(world: World, stream: str) -> None:
    bucket = world.bucket()
    world.put(bucket, "a")  # created 2026-01-01 00:00:01: expires 2026-01-03 00:00 with Days=1
    configure(world, bucket, rule(Expiration={"Days": 1}))
    almost = run_lifecycle(world.db, now=T0 + 2 * DAY - timedelta(microseconds=1))
    assert (almost.expired, almost.transactions) == (0, 0)
    assert statuses(world) == [("a", Status.COMMITTED_UNVERSIONED)]
    freed: list[Object] = []
    done = run_lifecycle(world.db, now=T0 + 2 * DAY, removed=freed.extend)
    assert (done.expired, done.delete_markers_created, done.transactions) == (1, 0, 1)
    assert world.rows() == []
    assert [r.object_key for r in freed] == ["a"]
    records = read_all(world.db, stream)
    assert [r["mod_type"] for r in records] == ["INSERT", "DELETE"]
    assert records[1]["is_system_transaction"] is True
    assert tag_of(records[1]) == {"operation": "lifecycle-expiration", "lifecycle_rule": "r1"}
    # bucket_eventing records system transactions since 0012: LifecycleExpiration events
    assert [r["mod_type"] for r in read_all(world.db)] == ["INSERT", "DELETE"]


def test_days_in_an_enabled_bucket_creates_a_delete_marker(world: World, stream: str) -> None:
    bucket = world.bucket(versioning=Versioning.ENABLED)
    world.put(bucket, "a")
    world.put(bucket, "a")
    configure(world, bucket, rule(Expiration={"Days": 1}))
    result = run_lifecycle(world.db, now=T0 + 3 * DAY)
    assert (result.expired, result.delete_markers_created) == (0, 1)
    assert statuses(world) == [
        ("a", Status.DELETE_MARKER_VERSIONED),
        ("a", Status.COMMITTED_VERSIONED),
        ("a", Status.COMMITTED_VERSIONED),
    ]
    # `now` only judges ages: the marker is stamped by the metabase clock
    assert world.rows()[0].created_at == world.now
    lifecycle_records = [r for r in read_all(world.db, stream) if r["is_system_transaction"]]
    assert [r["mod_type"] for r in lifecycle_records] == ["INSERT"]
    assert lifecycle_records[0]["mods"][0]["new_values"]["status"] == 5
    # the latest version is now a delete marker: Days does not expire it again
    again = run_lifecycle(world.db, now=T0 + 30 * DAY)
    assert (again.delete_markers_created, again.transactions) == (0, 0)
    assert len(world.rows()) == 3


def test_days_in_a_suspended_bucket_replaces_the_null_version(world: World, stream: str) -> None:
    bucket = world.bucket(versioning=Versioning.SUSPENDED)
    world.put(bucket, "a")
    configure(world, bucket, rule(Expiration={"Days": 1}))
    result = run_lifecycle(world.db, now=T0 + 2 * DAY)
    assert (result.expired, result.delete_markers_created, result.transactions) == (1, 1, 1)
    assert statuses(world) == [("a", Status.DELETE_MARKER_UNVERSIONED)]
    lifecycle_records = [r for r in read_all(world.db, stream) if r["is_system_transaction"]]
    assert [r["mod_type"] for r in lifecycle_records] == ["DELETE", "INSERT"]
    assert len({r["server_transaction_id"] for r in lifecycle_records}) == 1


def test_date_applies_from_its_midnight(world: World) -> None:
    bucket = world.bucket()
    world.put(bucket, "a")
    configure(world, bucket, rule(Expiration={"Date": "2026-01-05T00:00:00Z"}))
    assert run_lifecycle(world.db, now=datetime(2026, 1, 4, 23, 59, tzinfo=UTC)).expired == 0
    assert run_lifecycle(world.db, now=datetime(2026, 1, 5, tzinfo=UTC)).expired == 1
    assert world.rows() == []


def test_filters_prefix_tags_and_size(world: World) -> None:
    bucket = world.bucket()
    for key in ("logs/a", "logs/b", "img/c", "logs/big"):
        world.put(bucket, key, b"x" * (100 if key == "logs/big" else 1))
    put_object_tagging(world.db, world.loc(bucket, "logs/b"), {"k": "v", "other": "1"})
    put_object_tagging(world.db, world.loc(bucket, "img/c"), {"k": "v"})
    put_object_tagging(world.db, world.loc(bucket, "logs/big"), {"k": "v"})
    configure(
        world,
        bucket,
        rule(
            Filter={
                "And": {
                    "Prefix": "logs/",
                    "Tags": [{"Key": "k", "Value": "v"}],
                    "ObjectSizeLessThan": 50,
                }
            },
            Expiration={"Days": 1},
        ),
    )
    assert run_lifecycle(world.db, now=T0 + 5 * DAY).expired == 1
    assert [r.object_key for r in world.rows()] == ["img/c", "logs/a", "logs/big"]
    configure(
        world,
        bucket,
        {"ID": "legacy", "Status": "Enabled", "Prefix": "img/", "Expiration": {"Days": 1}},
    )
    assert run_lifecycle(world.db, now=T0 + 5 * DAY).expired == 1
    assert [r.object_key for r in world.rows()] == ["logs/a", "logs/big"]


def test_disabled_rule_does_nothing(world: World) -> None:
    bucket = world.bucket()
    world.put(bucket, "a")
    configure(world, bucket, rule(Status="Disabled", Expiration={"Days": 1}))
    result = run_lifecycle(world.db, now=T0 + 100 * DAY)
    assert (result.changed, result.transactions) == (0, 0)
    assert statuses(world) == [("a", Status.COMMITTED_UNVERSIONED)]


def test_one_bucket_only(world: World) -> None:
    first, second = world.bucket("first"), world.bucket("second")
    for bucket in (first, second):
        world.put(bucket, "a")
        configure(world, bucket, rule(Expiration={"Days": 1}))
    assert run_lifecycle(world.db, bucket=second, now=T0 + 5 * DAY).expired == 1
    assert [r.bucket_name for r in world.rows()] == ["first"]


# --- NoncurrentVersionExpiration, ExpiredObjectDeleteMarker --------------------------------


def test_noncurrent_days_count_from_becoming_noncurrent(world: World) -> None:
    bucket = world.bucket(versioning=Versioning.ENABLED)
    v1 = world.put(bucket, "a")  # noncurrent since v2 (day 0)
    v2 = world.put(bucket, "a")  # noncurrent since v3 (day 0)
    v3 = world.put(bucket, "a")  # noncurrent since v4 (day 3)
    world.tick(3 * DAY)
    v4 = world.put(bucket, "a")
    configure(world, bucket, rule(NoncurrentVersionExpiration={"NoncurrentDays": 2}))
    result = run_lifecycle(world.db, now=T0 + 4 * DAY)
    assert (result.noncurrent_deleted, result.transactions) == (2, 1)
    assert [r.version_id for r in world.rows()] == [v4.version_id, v3.version_id]
    assert {v1.version_id, v2.version_id}.isdisjoint(r.version_id for r in world.rows())
    assert run_lifecycle(world.db, now=T0 + 6 * DAY).noncurrent_deleted == 1
    assert [r.version_id for r in world.rows()] == [v4.version_id]


def test_newer_noncurrent_versions_are_kept(world: World) -> None:
    bucket = world.bucket(versioning=Versioning.ENABLED)
    versions = [world.put(bucket, "a") for _ in range(5)]
    configure(
        world,
        bucket,
        rule(NoncurrentVersionExpiration={"NoncurrentDays": 1, "NewerNoncurrentVersions": 2}),
    )
    assert run_lifecycle(world.db, now=T0 + 10 * DAY).noncurrent_deleted == 2
    assert [r.version_id for r in world.rows()] == [v.version_id for v in versions[:1:-1]]


def test_noncurrent_in_a_suspended_bucket(world: World) -> None:
    bucket = world.bucket("susp", versioning=Versioning.ENABLED)
    versioned = world.put(bucket, "a")
    set_bucket_versioning(world.db, bucket, enabled=False)
    world.put(bucket, "a")  # the null version, over the versioned one
    world.put(bucket, "b")
    delete_object(world.db, world.loc(bucket, "b"))  # a null marker replaces b's null version
    configure(world, bucket, rule(NoncurrentVersionExpiration={"NoncurrentDays": 1}))
    assert run_lifecycle(world.db, now=T0 + 10 * DAY).noncurrent_deleted == 1
    assert statuses(world) == [
        ("a", Status.COMMITTED_UNVERSIONED),
        ("b", Status.DELETE_MARKER_UNVERSIONED),
    ]
    assert versioned.version_id not in {r.version_id for r in world.rows()}


def test_expired_object_delete_markers(world: World) -> None:
    bucket = world.bucket(versioning=Versioning.ENABLED)
    delete_object(world.db, world.loc(bucket, "alone"))  # only a marker
    world.put(bucket, "kept")
    delete_object(world.db, world.loc(bucket, "kept"))  # a marker over a version
    world.put(bucket, "old")
    world.tick()
    delete_object(world.db, world.loc(bucket, "old"))
    configure(
        world,
        bucket,
        rule("markers", Expiration={"ExpiredObjectDeleteMarker": True}),
        rule("old", Filter={"Prefix": "old"}, NoncurrentVersionExpiration={"NoncurrentDays": 1}),
    )
    result = run_lifecycle(world.db, now=T0 + 5 * DAY)
    # "old": rule "old" deletes its noncurrent version, so "markers" finds only a marker
    # left... in the next run: rules apply in configuration order
    assert (result.delete_markers_removed, result.noncurrent_deleted) == (1, 1)
    assert statuses(world) == [
        ("kept", Status.DELETE_MARKER_VERSIONED),
        ("kept", Status.COMMITTED_VERSIONED),
        ("old", Status.DELETE_MARKER_VERSIONED),
    ]
    assert run_lifecycle(world.db, now=T0 + 5 * DAY).delete_markers_removed == 1
    assert [key for key, _ in statuses(world)] == ["kept", "kept"]


def test_one_rule_expires_noncurrent_then_the_marker_left(world: World) -> None:
    bucket = world.bucket(versioning=Versioning.ENABLED)
    world.put(bucket, "a")
    delete_object(world.db, world.loc(bucket, "a"))
    configure(
        world,
        bucket,
        rule(
            Expiration={"ExpiredObjectDeleteMarker": True},
            NoncurrentVersionExpiration={"NoncurrentDays": 1},
        ),
    )
    result = run_lifecycle(world.db, now=T0 + 5 * DAY)
    assert (result.noncurrent_deleted, result.delete_markers_removed) == (1, 1)
    assert result.transactions == 2
    assert world.rows() == []


# --- object lock -------------------------------------------------------------------------


def test_locked_versions_are_kept(world: World) -> None:
    bucket = world.bucket("locked", lock=True)
    held = world.put(bucket, "held", legal_hold=True)
    world.put(bucket, "held")
    retained = world.put(bucket, "retained", retention=world.compliance(days=30))
    world.put(bucket, "retained")
    free = world.put(bucket, "free")
    world.put(bucket, "free")
    configure(world, bucket, rule(NoncurrentVersionExpiration={"NoncurrentDays": 1}))
    result = run_lifecycle(world.db, now=T0 + 5 * DAY)
    assert (result.noncurrent_deleted, result.kept_locked) == (1, 2)
    versions = {r.version_id for r in world.rows()}
    assert {held.version_id, retained.version_id} <= versions
    assert free.version_id not in versions
    # a `now` past the retention does not end it: object lock is judged by the metabase
    # clock, which is still within the 30 days
    future = run_lifecycle(world.db, now=T0 + 400 * DAY)
    assert (future.noncurrent_deleted, future.kept_locked) == (0, 2)
    assert {held.version_id, retained.version_id} <= {r.version_id for r in world.rows()}
    # once retention is over by the clock it goes; the legal hold still keeps its version
    world.tick(40 * DAY)
    later = run_lifecycle(world.db)
    assert (later.noncurrent_deleted, later.kept_locked) == (1, 1)
    assert retained.version_id not in {r.version_id for r in world.rows()}
    # expiring the current version of a locked object makes a delete marker, as S3 does
    configure(world, bucket, rule(Filter={"Prefix": "held"}, Expiration={"Days": 1}))
    assert run_lifecycle(world.db).delete_markers_created == 1


def test_retention_is_judged_by_the_clock_not_now(world: World) -> None:
    bucket = world.bucket("locked", lock=True)
    governed = world.put(bucket, "governed", retention=world.governance(days=10))
    world.put(bucket, "governed")
    complied = world.put(bucket, "complied", retention=world.compliance(days=10))
    world.put(bucket, "complied")
    configure(
        world,
        bucket,
        rule(Expiration={"Days": 1}, NoncurrentVersionExpiration={"NoncurrentDays": 1}),
    )
    # far in the future by `now`, but the metabase clock says both retentions are active
    result = run_lifecycle(world.db, now=T0 + 1000 * DAY)
    assert result.delete_markers_created == 2  # allowed over locked versions, as in S3
    # the versions the markers made noncurrent are not locked: they go
    assert (result.noncurrent_deleted, result.kept_locked) == (2, 2)
    assert {governed.version_id, complied.version_id} <= {r.version_id for r in world.rows()}
    markers = [r for r in world.rows() if r.is_delete_marker]
    assert [r.created_at for r in markers] == [world.now] * 2  # the clock's, not `now`
    world.tick(11 * DAY)  # the clock passes the retention: the old versions go
    result = run_lifecycle(world.db, now=T0 + 1000 * DAY)
    assert (result.noncurrent_deleted, result.kept_locked) == (2, 0)
    assert statuses(world) == [
        ("complied", Status.DELETE_MARKER_VERSIONED),
        ("governed", Status.DELETE_MARKER_VERSIONED),
    ]


# --- uploads (batches, failures, cancelling: test_lifecycle_batches.py) ------------


def test_abort_incomplete_multipart_uploads(world: World, stream: str) -> None:
    bucket = world.bucket()
    old = begin_upload(world.db, world.loc(bucket, "tmp/old"))
    other = begin_upload(world.db, world.loc(bucket, "keep/old"))
    world.tick(2 * DAY)
    recent = begin_upload(world.db, world.loc(bucket, "tmp/recent"))
    configure(
        world,
        bucket,
        rule(Filter={"Prefix": "tmp/"}, AbortIncompleteMultipartUpload={"DaysAfterInitiation": 1}),
    )
    freed: list[Object] = []
    result = run_lifecycle(world.db, now=T0 + 2 * DAY + timedelta(hours=1), removed=freed.extend)
    assert (result.uploads_aborted, result.transactions) == (1, 1)
    assert [r.stream_id for r in freed] == [old.stream_id]
    assert {r.stream_id for r in world.rows()} == {other.stream_id, recent.stream_id}
    # removed as AbortMultipartUpload removes them: nothing for streams allowing exclusion
    assert read_all(world.db, stream) == []
