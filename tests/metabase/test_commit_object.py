"""Begin and commit an object: pending rows, DELETE + INSERT (never UPDATE), versioning
rules, and object lock settings given at commit."""

from __future__ import annotations

import uuid
from dataclasses import replace
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
    commit_object,
    delete_object,
    get_object,
    set_bucket_versioning,
    set_object_lock_configuration,
)
from ripple.metabase.errors import (
    BucketNotFound,
    InvalidArgument,
    ObjectLockNotEnabled,
    ObjectNotFound,
    PendingObjectNotFound,
)
from tests.metabase.objects import begin_object
from tests.metabase.steps import T0, Row, Verify, World, statements, unchanged


def _commit(world: World, pending: Object, **kwargs: object) -> Object:
    kwargs.setdefault("size", 100)
    kwargs.setdefault("etag", "e" * 32)
    return commit_object(world.db, pending, **kwargs).object  # type: ignore[arg-type]


def test_begin_makes_an_invisible_pending_row(world: World) -> None:
    bucket = world.bucket()
    loc = world.loc(bucket, "a")
    pending = begin_object(world.db, loc)
    assert pending.status is Status.PENDING
    assert pending.version == 1
    assert pending.created_at == T0
    assert world.rows() == [pending]
    with pytest.raises(ObjectNotFound) as info:
        get_object(world.db, loc)
    assert info.value.delete_marker is False


def test_begin_with_a_given_stream_id_and_expiry(world: World) -> None:
    bucket = world.bucket()
    stream = uuid.uuid4()
    expires = T0 + timedelta(days=1)
    pending = begin_object(world.db, world.loc(bucket, "a"), stream_id=stream, expires_at=expires)
    assert pending.stream_id == stream
    assert world.rows() == [pending]
    assert world.rows()[0].expires_at == expires


def test_begin_in_unknown_bucket(world: World) -> None:
    with unchanged(world, BucketNotFound, "NoSuchBucket"):
        begin_object(world.db, world.loc(BucketLocation(world.project.id, "missing"), "a"))


def test_begin_takes_a_version_above_existing_rows(world: World) -> None:
    bucket = world.bucket(versioning=Versioning.ENABLED)
    first = world.put(bucket, "a")
    pending = begin_object(world.db, world.loc(bucket, "a"))
    assert pending.version == first.version + 1
    # The pending upload hides nothing: the committed version is still the latest.
    assert get_object(world.db, world.loc(bucket, "a")).stream_id == first.stream_id


def test_commit_deletes_pending_and_inserts_committed_without_update(world: World) -> None:
    bucket = world.bucket()
    loc = world.loc(bucket, "a")
    pending = begin_object(world.db, loc)
    world.tick()
    with statements(world.db) as sql:
        result = commit_object(
            world.db,
            pending,
            size=2048,
            etag="f" * 32,
            content_type="text/plain",
            user_metadata={"colour": "blue"},
        )
    verbs = [s.lstrip().split(None, 1)[0].upper() for s in sql]
    assert "UPDATE" not in verbs, sql
    assert any(s.lstrip().upper().startswith("DELETE FROM OBJECTS") for s in sql), sql
    assert any(s.lstrip().upper().startswith("INSERT INTO OBJECTS") for s in sql), sql

    expected = replace(
        pending,
        status=Status.COMMITTED_UNVERSIONED,
        created_at=T0 + timedelta(seconds=1),
        total_plain_size=2048,
        etag="f" * 32,
        content_type="text/plain",
        user_metadata={"colour": "blue"},
    )
    assert result.object == expected
    assert result.removed == []
    assert world.rows() == [expected]
    assert get_object(world.db, loc) == expected


def test_commit_twice(world: World) -> None:
    bucket = world.bucket()
    pending = begin_object(world.db, world.loc(bucket, "a"))
    _commit(world, pending)
    with unchanged(world, PendingObjectNotFound, "NoSuchUpload"):
        _commit(world, pending)


def test_commit_unknown_pending(world: World) -> None:
    bucket = world.bucket()
    pending = begin_object(world.db, world.loc(bucket, "a"))
    with unchanged(world, PendingObjectNotFound, "NoSuchUpload"):
        _commit(world, replace(pending, stream_id=uuid.uuid4()))
    with unchanged(world, PendingObjectNotFound):
        _commit(world, replace(pending, version=pending.version + 1))
    with unchanged(world, PendingObjectNotFound):
        _commit(world, replace(pending, object_key="b"))
    assert world.rows() == [pending]


def test_commit_does_not_take_a_committed_row_for_pending(world: World) -> None:
    bucket = world.bucket()
    obj = world.put(bucket, "a")
    with unchanged(world, PendingObjectNotFound):
        _commit(world, replace(obj, status=Status.PENDING))


# --- versioning -----------------------------------------------------------------------


def test_unversioned_overwrite_replaces(world: World) -> None:
    bucket = world.bucket()
    first = world.upload(bucket, "a")
    world.tick()
    result = commit_object(
        world.db, begin_object(world.db, world.loc(bucket, "a")), size=7, etag="1" * 32
    )
    assert result.removed == [first]
    second = result.object
    assert second.status is Status.COMMITTED_UNVERSIONED
    assert world.rows() == [second]
    assert get_object(world.db, world.loc(bucket, "a")).stream_id == second.stream_id
    Verify([Row("a", Status.COMMITTED_UNVERSIONED, "null")]).check(world)


def test_enabled_keeps_every_version(world: World) -> None:
    bucket = world.bucket(versioning=Versioning.ENABLED)
    v1 = world.upload(bucket, "a", size=1)
    v2 = world.upload(bucket, "a", size=2)
    v3 = world.upload(bucket, "a", size=3)
    assert [v.version for v in (v1, v2, v3)] == [1, 2, 3]
    Verify(
        [
            Row("a", Status.COMMITTED_VERSIONED, v3.version_id),
            Row("a", Status.COMMITTED_VERSIONED, v2.version_id),
            Row("a", Status.COMMITTED_VERSIONED, v1.version_id),
        ]
    ).check(world)
    latest = get_object(world.db, world.loc(bucket, "a"))
    assert latest == v3
    assert latest.total_plain_size == 3


def test_suspended_replaces_only_the_null_version(world: World) -> None:
    bucket = world.bucket(versioning=Versioning.ENABLED)
    v1 = world.upload(bucket, "a")
    v2 = world.upload(bucket, "a")
    other = world.upload(bucket, "b")
    set_bucket_versioning(world.db, bucket, enabled=False)

    n1 = world.upload(bucket, "a")
    assert n1.status is Status.COMMITTED_UNVERSIONED
    assert n1.version_id == "null"

    world.tick()
    result = commit_object(
        world.db, begin_object(world.db, world.loc(bucket, "a")), size=9, etag="2" * 32
    )
    n2 = result.object
    assert result.removed == [n1]
    Verify(
        [
            Row("a", Status.COMMITTED_UNVERSIONED, "null"),
            Row("a", Status.COMMITTED_VERSIONED, v2.version_id),
            Row("a", Status.COMMITTED_VERSIONED, v1.version_id),
            Row("b", Status.COMMITTED_VERSIONED, other.version_id),
        ]
    ).check(world)
    assert world.rows()[0].stream_id == n2.stream_id
    assert get_object(world.db, world.loc(bucket, "a")) == n2


def test_suspended_replaces_a_null_delete_marker(world: World) -> None:
    bucket = world.bucket(versioning=Versioning.ENABLED)
    v1 = world.upload(bucket, "a")
    set_bucket_versioning(world.db, bucket, enabled=False)
    marker = delete_object(world.db, world.loc(bucket, "a")).marker
    assert marker is not None
    Verify(
        [
            Row("a", Status.DELETE_MARKER_UNVERSIONED, "null"),
            Row("a", Status.COMMITTED_VERSIONED, v1.version_id),
        ]
    ).check(world)

    world.tick()
    result = commit_object(
        world.db, begin_object(world.db, world.loc(bucket, "a")), size=1, etag="3" * 32
    )
    assert result.removed == [marker]
    Verify(
        [
            Row("a", Status.COMMITTED_UNVERSIONED, "null"),
            Row("a", Status.COMMITTED_VERSIONED, v1.version_id),
        ]
    ).check(world)
    assert get_object(world.db, world.loc(bucket, "a")) == result.object


@pytest.mark.parametrize("versioning", [Versioning.ENABLED, Versioning.UNVERSIONED])
def test_pending_uploads_committed_in_reverse_order(world: World, versioning: Versioning) -> None:
    bucket = world.bucket(versioning=versioning)
    loc = world.loc(bucket, "a")
    first = begin_object(world.db, loc)
    world.tick()
    second = begin_object(world.db, loc)
    assert (first.version, second.version) == (1, 2)

    world.tick()
    committed_second = _commit(world, second, size=2)
    world.tick()
    committed_first = _commit(world, first, size=1)

    assert committed_first.stream_id == first.stream_id
    latest = get_object(world.db, loc)
    assert latest == committed_first
    assert latest.total_plain_size == 1
    if versioning is Versioning.ENABLED:
        assert committed_first.version > committed_second.version
        Verify(
            [
                Row("a", Status.COMMITTED_VERSIONED, committed_first.version_id),
                Row("a", Status.COMMITTED_VERSIONED, committed_second.version_id),
            ]
        ).check(world)
        older = get_object(world.db, loc, committed_second.version_id)
        assert older.stream_id == second.stream_id
    else:
        Verify([Row("a", Status.COMMITTED_UNVERSIONED, "null")]).check(world)
        assert world.rows() == [committed_first]


def test_commit_leaves_other_pending_uploads(world: World) -> None:
    bucket = world.bucket()
    loc = world.loc(bucket, "a")
    first = begin_object(world.db, loc)
    second = begin_object(world.db, loc)
    committed = _commit(world, first)
    # The committed row takes a version above the remaining pending one.
    assert committed.version == second.version + 1
    assert world.rows() == [committed, second]
    Verify([Row("a", Status.COMMITTED_UNVERSIONED, "null"), Row("a", Status.PENDING)]).check(world)


# --- object lock ----------------------------------------------------------------------


def test_default_retention_days_applies_to_new_objects(world: World) -> None:
    bucket = world.bucket("locked", lock=True)
    set_object_lock_configuration(
        world.db, bucket, DefaultRetention(RetentionMode.GOVERNANCE, days=10)
    )
    pending = begin_object(world.db, world.loc(bucket, "a"))
    committed_at = world.tick(timedelta(hours=5))
    obj = _commit(world, pending)
    expected = Retention(RetentionMode.GOVERNANCE, committed_at + timedelta(days=10))
    assert obj.retention == expected
    assert obj.status is Status.COMMITTED_VERSIONED
    assert get_object(world.db, world.loc(bucket, "a")).retention == expected


def test_default_retention_years(world: World) -> None:
    bucket = world.bucket("locked", lock=True)
    set_object_lock_configuration(
        world.db, bucket, DefaultRetention(RetentionMode.COMPLIANCE, years=2)
    )
    obj = world.upload(bucket, "a")
    committed_at = T0 + timedelta(seconds=1)
    assert obj.retention == Retention(
        RetentionMode.COMPLIANCE, committed_at.replace(year=committed_at.year + 2)
    )


def test_explicit_retention_wins_over_default(world: World) -> None:
    bucket = world.bucket("locked", lock=True)
    set_object_lock_configuration(
        world.db, bucket, DefaultRetention(RetentionMode.GOVERNANCE, days=10)
    )
    explicit = world.compliance(days=3)
    obj = _commit(world, begin_object(world.db, world.loc(bucket, "a")), retention=explicit)
    assert obj.retention == explicit
    assert get_object(world.db, world.loc(bucket, "a")).retention == explicit


def test_lock_bucket_without_default_has_no_retention(world: World) -> None:
    bucket = world.bucket("locked", lock=True)
    obj = world.upload(bucket, "a")
    assert obj.retention is None
    assert obj.legal_hold is False


def test_legal_hold_on_lock_bucket(world: World) -> None:
    bucket = world.bucket("locked", lock=True)
    obj = _commit(world, begin_object(world.db, world.loc(bucket, "a")), legal_hold=True)
    assert obj.legal_hold is True
    assert get_object(world.db, world.loc(bucket, "a")).legal_hold is True


def test_retention_on_bucket_without_object_lock(world: World) -> None:
    bucket = world.bucket(versioning=Versioning.ENABLED)
    pending = begin_object(world.db, world.loc(bucket, "a"))
    with unchanged(world, ObjectLockNotEnabled, "InvalidRequest"):
        _commit(world, pending, retention=world.governance())
    assert world.rows() == [pending]


def test_legal_hold_on_bucket_without_object_lock(world: World) -> None:
    bucket = world.bucket()
    pending = begin_object(world.db, world.loc(bucket, "a"))
    with unchanged(world, ObjectLockNotEnabled, "InvalidRequest"):
        _commit(world, pending, legal_hold=True)
    assert world.rows() == [pending]


@pytest.mark.parametrize(
    "mode", [RetentionMode.GOVERNANCE, RetentionMode.COMPLIANCE], ids=["governance", "compliance"]
)
def test_retention_date_in_the_past(world: World, mode: RetentionMode) -> None:
    bucket = world.bucket("locked", lock=True)
    pending = begin_object(world.db, world.loc(bucket, "a"))
    past = Retention(mode, world.now - timedelta(days=1))
    with unchanged(world, InvalidArgument, "InvalidArgument"):
        _commit(world, pending, retention=past)
    assert world.rows() == [pending]
