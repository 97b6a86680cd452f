"""Multipart uploads in the metabase: begin (with what the object will be), get, abort, and
list a bucket's uploads in S3's order with prefix, delimiter, markers and truncation."""

from __future__ import annotations

import uuid

import pytest

from ripple.metabase import (
    BucketLocation,
    Object,
    Status,
    Versioning,
    commit_object,
    get_object,
)
from ripple.metabase.errors import (
    BucketNotFound,
    InvalidArgument,
    ObjectLockNotEnabled,
    ObjectNotFound,
    PendingObjectNotFound,
)
from ripple.metabase.uploads import abort_upload, begin_upload, get_upload, list_uploads
from tests.metabase.steps import Row, Verify, World, unchanged


def _begin(world: World, bucket: BucketLocation, key: str) -> Object:
    world.tick()
    return begin_upload(world.db, world.loc(bucket, key))


def test_begin_keeps_what_the_object_will_be(world: World) -> None:
    bucket = world.bucket("locked", lock=True)
    loc = world.loc(bucket, "a")
    retention = world.governance(days=3)
    pending = begin_upload(
        world.db,
        loc,
        content_type="text/csv",
        user_metadata={"colour": "blue"},
        retention=retention,
        legal_hold=True,
    )
    assert pending.status is Status.PENDING
    assert world.rows() == [pending]
    got = get_upload(world.db, loc, pending.stream_id)
    assert got == pending
    assert (got.content_type, got.user_metadata) == ("text/csv", {"colour": "blue"})
    assert (got.retention, got.legal_hold) == (retention, True)
    with pytest.raises(ObjectNotFound):
        get_object(world.db, loc)  # invisible until completed

    world.tick()
    committed = commit_object(
        world.db,
        got,
        size=10,
        etag="e" * 32 + "-2",
        content_type=got.content_type,
        user_metadata=got.user_metadata,
        retention=got.retention,
        legal_hold=got.legal_hold,
    ).object
    assert committed.stream_id == pending.stream_id
    assert get_object(world.db, loc) == committed
    assert committed.user_metadata == {"colour": "blue"}
    assert committed.retention == retention
    assert committed.legal_hold


def test_begin_with_a_given_stream_id(world: World) -> None:
    bucket = world.bucket()
    stream = uuid.uuid4()
    pending = begin_upload(world.db, world.loc(bucket, "a"), stream_id=stream)
    assert pending.stream_id == stream
    assert get_upload(world.db, world.loc(bucket, "a"), stream) == pending


def test_begin_refuses_object_lock_where_the_bucket_has_none(world: World) -> None:
    bucket = world.bucket()
    with unchanged(world, ObjectLockNotEnabled, "InvalidRequest"):
        begin_upload(world.db, world.loc(bucket, "a"), legal_hold=True)
    with unchanged(world, ObjectLockNotEnabled):
        begin_upload(world.db, world.loc(bucket, "a"), retention=world.governance())


def test_begin_refuses_a_retention_already_over(world: World) -> None:
    bucket = world.bucket("locked", lock=True)
    with unchanged(world, InvalidArgument):
        begin_upload(world.db, world.loc(bucket, "a"), retention=world.governance(days=-1))


def test_begin_in_a_missing_bucket(world: World) -> None:
    missing = BucketLocation(world.project.id, "missing")
    with unchanged(world, BucketNotFound):
        begin_upload(world.db, world.loc(missing, "a"))


def test_get_upload_needs_key_and_stream_to_match(world: World) -> None:
    bucket = world.bucket()
    pending = _begin(world, bucket, "a")
    with pytest.raises(PendingObjectNotFound) as info:
        get_upload(world.db, world.loc(bucket, "b"), pending.stream_id)
    assert info.value.code == "NoSuchUpload"
    with pytest.raises(PendingObjectNotFound):
        get_upload(world.db, world.loc(bucket, "a"), uuid.uuid4())
    with pytest.raises(BucketNotFound):
        get_upload(world.db, world.loc(BucketLocation(world.project.id, "x"), "a"), uuid.uuid4())


def test_a_committed_version_is_not_an_upload(world: World) -> None:
    bucket = world.bucket()
    obj = world.upload(bucket, "a")
    with pytest.raises(PendingObjectNotFound):
        get_upload(world.db, world.loc(bucket, "a"), obj.stream_id)
    with unchanged(world, PendingObjectNotFound):
        abort_upload(world.db, world.loc(bucket, "a"), obj.stream_id)


def test_abort_deletes_only_that_upload(world: World) -> None:
    bucket = world.bucket(versioning=Versioning.ENABLED)
    world.put(bucket, "a")
    first = _begin(world, bucket, "a")
    second = _begin(world, bucket, "a")
    aborted = abort_upload(world.db, world.loc(bucket, "a"), first.stream_id)
    assert aborted == first
    Verify(
        [Row("a", Status.PENDING), Row("a", Status.COMMITTED_VERSIONED)],
    ).check(world)
    assert get_upload(world.db, world.loc(bucket, "a"), second.stream_id) == second
    with unchanged(world, PendingObjectNotFound):
        abort_upload(world.db, world.loc(bucket, "a"), first.stream_id)
    # an aborted upload cannot be completed
    with unchanged(world, PendingObjectNotFound):
        commit_object(world.db, first, size=1, etag="e" * 32)


def test_list_orders_by_key_then_by_when_begun(world: World) -> None:
    bucket = world.bucket()
    b1 = _begin(world, bucket, "b")
    a1 = _begin(world, bucket, "a")
    b2 = _begin(world, bucket, "b")
    world.put(bucket, "c")  # committed objects are not uploads
    other = world.bucket("other")
    _begin(world, other, "a")
    found = list_uploads(world.db, bucket)
    assert [u.stream_id for u in found.uploads] == [a1.stream_id, b1.stream_id, b2.stream_id]
    assert found.common_prefixes == []
    assert not found.is_truncated
    assert (found.next_key_marker, found.next_upload_marker) == ("", None)


def test_list_with_prefix_and_delimiter(world: World) -> None:
    bucket = world.bucket()
    for key in ("photos/2024/a", "photos/2024/b", "photos/2025/c", "photos/x", "video/y"):
        _begin(world, bucket, key)
    found = list_uploads(world.db, bucket, prefix="photos/", delimiter="/")
    assert [u.object_key for u in found.uploads] == ["photos/x"]
    assert found.common_prefixes == ["photos/2024/", "photos/2025/"]
    everything = list_uploads(world.db, bucket, delimiter="/")
    assert everything.uploads == []
    assert everything.common_prefixes == ["photos/", "video/"]


def test_list_pages_with_markers(world: World) -> None:
    bucket = world.bucket()
    a1 = _begin(world, bucket, "a")
    a2 = _begin(world, bucket, "a")
    a3 = _begin(world, bucket, "a")
    b1 = _begin(world, bucket, "b")

    first = list_uploads(world.db, bucket, max_uploads=2)
    assert [u.stream_id for u in first.uploads] == [a1.stream_id, a2.stream_id]
    assert first.is_truncated
    assert (first.next_key_marker, first.next_upload_marker) == ("a", a2.stream_id)

    second = list_uploads(
        world.db,
        bucket,
        key_marker=first.next_key_marker,
        upload_marker=first.next_upload_marker,
        max_uploads=2,
    )
    assert [u.stream_id for u in second.uploads] == [a3.stream_id, b1.stream_id]
    assert not second.is_truncated

    # a key marker alone goes on after every upload of that key
    after_a = list_uploads(world.db, bucket, key_marker="a")
    assert [u.stream_id for u in after_a.uploads] == [b1.stream_id]
    # a marker upload that is gone: all of the marker key's uploads again, nothing missed
    abort_upload(world.db, world.loc(bucket, "a"), a2.stream_id)
    gone = list_uploads(world.db, bucket, key_marker="a", upload_marker=a2.stream_id)
    assert [u.stream_id for u in gone.uploads] == [a1.stream_id, a3.stream_id, b1.stream_id]


def test_list_pages_over_common_prefixes(world: World) -> None:
    bucket = world.bucket()
    for key in ("a/1", "a/2", "b", "c/1", "d"):
        _begin(world, bucket, key)
    pages = []
    key_marker, upload_marker = "", None
    while True:
        page = list_uploads(
            world.db,
            bucket,
            delimiter="/",
            key_marker=key_marker,
            upload_marker=upload_marker,
            max_uploads=1,
        )
        pages.append(([u.object_key for u in page.uploads], page.common_prefixes))
        if not page.is_truncated:
            break
        key_marker, upload_marker = page.next_key_marker, page.next_upload_marker
    assert pages == [([], ["a/"]), (["b"], []), ([], ["c/"]), (["d"], [])]


def test_list_limits(world: World) -> None:
    bucket = world.bucket()
    for i in range(3):
        _begin(world, bucket, f"k{i}")
    assert list_uploads(world.db, bucket, max_uploads=0).uploads == []
    assert not list_uploads(world.db, bucket, max_uploads=0).is_truncated
    assert len(list_uploads(world.db, bucket, max_uploads=5000).uploads) == 3
    with pytest.raises(InvalidArgument):
        list_uploads(world.db, bucket, max_uploads=-1)
    with pytest.raises(BucketNotFound):
        list_uploads(world.db, BucketLocation(world.project.id, "missing"))


def test_uploads_of_one_key_list_in_begin_order(world: World) -> None:
    bucket = world.bucket()
    # stream ids sort against the begin order: the listing must not order by them
    streams = sorted((uuid.uuid4() for _ in range(5)), reverse=True)
    begun = []
    for stream in streams:
        world.tick()
        begun.append(begin_upload(world.db, world.loc(bucket, "same"), stream_id=stream))
    found = list_uploads(world.db, bucket)
    assert [u.stream_id for u in found.uploads] == streams
    assert [u.created_at for u in found.uploads] == [u.created_at for u in begun]
