"""Object tags: put, get and delete on the latest or an exact version, S3's rules for a tag
set, tags given at creation (put, multipart, copy), and the change records a tag change
writes (one UPDATE of the row, with the new tags; nothing for an unchanged tag set)."""

from __future__ import annotations

import hashlib

import pytest

from ripple.changestream.tag import TransactionTag
from ripple.metabase import (
    ObjectLocation,
    Versioning,
    commit_object,
    copy_object,
    delete_object,
    delete_object_tagging,
    get_object,
    get_object_tagging,
    put_object_tagging,
)
from ripple.metabase.errors import (
    BucketNotFound,
    InvalidTag,
    MethodNotAllowed,
    ObjectNotFound,
    TooManyTags,
    VersionNotFound,
)
from ripple.metabase.object_tagging import check_tags
from ripple.metabase.uploads import begin_upload
from tests.changestream.conftest import Eventing, read_all, tag_of
from tests.metabase.objects import commit_inline_object
from tests.metabase.steps import World, unchanged


def test_put_get_delete_on_the_latest_version(world: World) -> None:
    bucket = world.bucket()
    world.put(bucket, "a")
    loc = world.loc(bucket, "a")
    assert get_object_tagging(world.db, loc).tags == {}
    put = put_object_tagging(world.db, loc, {"colour": "red", "size": "L"})
    assert put.tags == {"colour": "red", "size": "L"}
    assert get_object_tagging(world.db, loc).tags == {"colour": "red", "size": "L"}
    assert get_object(world.db, loc).tags == {"colour": "red", "size": "L"}
    # a put replaces the whole set
    put_object_tagging(world.db, loc, [("shape", "round")])
    assert get_object_tagging(world.db, loc).tags == {"shape": "round"}
    assert delete_object_tagging(world.db, loc).tags == {}
    assert get_object_tagging(world.db, loc).tags == {}
    assert world.rows()[0].tags == {}


def test_tags_belong_to_one_version(world: World) -> None:
    bucket = world.bucket(versioning=Versioning.ENABLED)
    v1 = world.put(bucket, "a")
    v2 = world.put(bucket, "a")
    loc = world.loc(bucket, "a")
    tagged = put_object_tagging(world.db, loc, {"old": "yes"}, version_id=v1.version_id)
    assert tagged.version_id == v1.version_id
    assert get_object_tagging(world.db, loc, version_id=v1.version_id).tags == {"old": "yes"}
    assert get_object_tagging(world.db, loc).tags == {}  # the latest, v2
    latest = put_object_tagging(world.db, loc, {"new": "yes"})
    assert latest.version_id == v2.version_id
    delete_object_tagging(world.db, loc, version_id=v1.version_id)
    assert get_object_tagging(world.db, loc, version_id=v1.version_id).tags == {}
    assert get_object_tagging(world.db, loc, version_id=v2.version_id).tags == {"new": "yes"}


def test_null_version_by_id(world: World) -> None:
    bucket = world.bucket(versioning=Versioning.SUSPENDED)
    world.put(bucket, "a")
    loc = world.loc(bucket, "a")
    assert put_object_tagging(world.db, loc, {"k": "v"}, version_id="null").version_id == "null"
    assert get_object_tagging(world.db, loc).tags == {"k": "v"}


def test_missing_object_version_and_bucket(world: World) -> None:
    bucket = world.bucket(versioning=Versioning.ENABLED)
    v1 = world.put(bucket, "a")
    with unchanged(world, ObjectNotFound, "NoSuchKey"):
        put_object_tagging(world.db, world.loc(bucket, "nope"), {"k": "v"})
    with pytest.raises(ObjectNotFound) as missing:
        get_object_tagging(world.db, world.loc(bucket, "nope"))
    assert missing.value.code == "NoSuchKey"
    other = v1.version_id[:16] + "0" * 16  # right number, another stream
    with unchanged(world, VersionNotFound, "NoSuchVersion"):
        put_object_tagging(world.db, world.loc(bucket, "a"), {"k": "v"}, version_id=other)
    with unchanged(world, VersionNotFound, "NoSuchVersion"):
        delete_object_tagging(world.db, world.loc(bucket, "a"), version_id=other)
    gone = ObjectLocation(world.project.id, "gone", "a")
    with unchanged(world, BucketNotFound, "NoSuchBucket"):
        put_object_tagging(world.db, gone, {"k": "v"})
    with pytest.raises(BucketNotFound):
        get_object_tagging(world.db, gone)


def test_delete_markers_have_no_tags(world: World) -> None:
    bucket = world.bucket(versioning=Versioning.ENABLED)
    world.put(bucket, "a")
    loc = world.loc(bucket, "a")
    marker = delete_object(world.db, loc).marker
    assert marker is not None
    with unchanged(world, ObjectNotFound, "NoSuchKey"):
        put_object_tagging(world.db, loc, {"k": "v"})  # the latest is a marker
    with pytest.raises(ObjectNotFound) as latest:
        get_object_tagging(world.db, loc)
    assert latest.value.delete_marker
    with unchanged(world, MethodNotAllowed, "MethodNotAllowed"):
        put_object_tagging(world.db, loc, {"k": "v"}, version_id=marker.version_id)
    with pytest.raises(MethodNotAllowed):
        get_object_tagging(world.db, loc, version_id=marker.version_id)
    with unchanged(world, MethodNotAllowed, "MethodNotAllowed"):
        delete_object_tagging(world.db, loc, version_id=marker.version_id)


@pytest.mark.parametrize(
    ("tags", "code", "message"),
    [
        ([(f"k{i}", "v") for i in range(11)], "BadRequest", "cannot be greater than 10"),
        ([("", "v")], "InvalidTag", "TagKey you have provided is invalid"),
        ([("k" * 129, "v")], "InvalidTag", "TagKey you have provided is invalid"),
        ([("k", "v" * 257)], "InvalidTag", "TagValue you have provided is too long"),
        ([("aws:created", "v")], "InvalidTag", "cannot be prefixed with aws:"),
        ([("AWS:x", "v")], "InvalidTag", "cannot be prefixed with aws:"),
        ([("k", "1"), ("k", "2")], "InvalidTag", "multiple Tags with the same key"),
        ([("k*", "v")], "InvalidTag", "TagKey you have provided is invalid"),
        ([("k", "a&b")], "InvalidTag", "TagValue you have provided is invalid"),
    ],
)
def test_invalid_tag_sets_change_nothing(
    world: World, tags: list[tuple[str, str]], code: str, message: str
) -> None:
    bucket = world.bucket()
    world.put(bucket, "a")
    put_object_tagging(world.db, world.loc(bucket, "a"), {"kept": "yes"})
    with pytest.raises((InvalidTag, TooManyTags), match=message) as refused:
        put_object_tagging(world.db, world.loc(bucket, "a"), tags)
    assert refused.value.code == code
    assert get_object_tagging(world.db, world.loc(bucket, "a")).tags == {"kept": "yes"}


def test_the_limits_themselves_are_allowed() -> None:
    tags = [(f"k{i}", "") for i in range(9)] + [("k" * 128, "v" * 256)]
    assert len(check_tags(tags)) == 10
    assert check_tags({"Ünïcode key 1": "value with spaces _.:/=+-@"}) != {}


def test_tags_at_creation(world: World) -> None:
    bucket = world.bucket()
    loc = world.loc(bucket, "inline")
    obj = commit_inline_object(world.db, loc, b"x", etag="e", tags={"a": "1"}).object
    assert obj.tags == {"a": "1"}
    assert get_object_tagging(world.db, loc).tags == {"a": "1"}
    with unchanged(world, InvalidTag):
        commit_inline_object(world.db, loc, b"y", etag="e", tags={"aws:x": "1"})
    # multipart: the tags given at create, kept by the commit
    upload_loc = world.loc(bucket, "multipart")
    pending = begin_upload(world.db, upload_loc, tags={"m": "2"})
    committed = commit_object(world.db, pending, size=3, etag="e-1").object
    assert committed.tags == {"m": "2"}


def test_copy_keeps_or_replaces_tags(world: World) -> None:
    bucket = world.bucket()
    src = world.loc(bucket, "src")
    commit_inline_object(world.db, src, b"x", etag="e", tags={"a": "1"})
    kept = copy_object(world.db, src, world.loc(bucket, "copy")).object
    assert kept.tags == {"a": "1"}
    replaced = copy_object(
        world.db, src, world.loc(bucket, "new"), tagging_directive="REPLACE", tags={"b": "2"}
    ).object
    assert replaced.tags == {"b": "2"}
    cleared = copy_object(world.db, src, world.loc(bucket, "bare"), tagging_directive="REPLACE")
    assert cleared.object.tags == {}


# --- change records ----------------------------------------------------------------------


def test_a_tag_change_writes_one_update_record(world: World) -> None:
    eventing = Eventing(world.db)
    bucket = world.bucket("photos", versioning=Versioning.ENABLED)
    eventing.enable(world.project.id, "photos")
    obj = world.put(bucket, "a.jpg", b"hello")
    loc = world.loc(bucket, "a.jpg")
    request = TransactionTag(request_id="R1", principal="P1", source_ip="192.0.2.7")

    put_object_tagging(world.db, loc, {"colour": "red"}, tag=request)
    put_object_tagging(world.db, loc, {"colour": "red"})  # unchanged: no record
    delete_object_tagging(world.db, loc)
    delete_object_tagging(world.db, loc)  # no tags to remove: no record

    insert, put, removed = read_all(world.db)
    assert insert["mod_type"] == "INSERT"
    assert insert["mods"][0]["new_values"]["tags"] is None
    assert [put["mod_type"], removed["mod_type"]] == ["UPDATE", "UPDATE"]
    assert put["value_capture_type"] == "NEW_ROW_AND_OLD_VALUES"
    keys = {
        "project_id": str(world.project.id),
        "bucket_name": "photos",
        "object_key": "a.jpg",
        "version": obj.version,
    }
    row = {
        "status": 4,
        "total_plain_size": 5,
        "stream_id": str(obj.stream_id),
        "user_metadata": None,
        "acl": None,
        "retention_mode": None,
        "retain_until": None,
        "legal_hold": False,
        "etag": obj.etag,
    }
    assert put["mods"] == [
        {
            "keys": keys,
            "new_values": {**row, "tags": {"colour": "red"}},
            "old_values": {"tags": None},
        }
    ]
    assert removed["mods"] == [
        {
            "keys": keys,
            "new_values": {**row, "tags": None},
            "old_values": {"tags": {"colour": "red"}},
        }
    ]
    assert tag_of(put) == {
        "operation": "put-object-tagging",
        "request_id": "R1",
        "principal": "P1",
        "source_ip": "192.0.2.7",
        "etag": hashlib.md5(b"hello").hexdigest(),
        "bucket_versioning": {"photos": "Enabled"},
    }
    assert tag_of(removed)["operation"] == "delete-object-tagging"


def test_tag_changes_outside_eventing_buckets_write_no_record(world: World) -> None:
    Eventing(world.db)  # no bucket has eventing
    bucket = world.bucket()
    world.put(bucket, "a")
    put_object_tagging(world.db, world.loc(bucket, "a"), {"k": "v"})
    assert read_all(world.db) == []
