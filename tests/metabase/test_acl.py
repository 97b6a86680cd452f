"""ACLs in the metabase: canonical stored form of canned ACLs and grant lists, what an ACL
permits, Put/GetObjectAcl on versions, Put/GetBucketAcl, the ACL new objects and buckets
get (a copy never takes its source's), and the change records an ACL change writes (one
UPDATE with the new `acl`; nothing for an unchanged ACL)."""

from __future__ import annotations

import hashlib
import uuid

import pytest

from ripple.changestream.tag import TransactionTag
from ripple.metabase import (
    BucketLocation,
    ObjectLocation,
    Versioning,
    commit_object,
    copy_object,
    create_bucket,
    create_project,
    delete_object,
    get_bucket_info,
    get_object,
)
from ripple.metabase.acl import (
    ALL_USERS,
    AUTHENTICATED_USERS,
    AclNotSupported,
    Grant,
    MalformedACL,
    canonical,
    get_bucket_acl,
    get_object_acl,
    permits,
    put_bucket_acl,
    put_object_acl,
)
from ripple.metabase.errors import BucketNotFound, InvalidArgument, MethodNotAllowed, ObjectNotFound
from ripple.metabase.uploads import begin_upload
from tests.changestream.conftest import Eventing, read_all, tag_of
from tests.metabase.objects import commit_inline_object
from tests.metabase.steps import World, unchanged

OWNER = "11111111-1111-1111-1111-111111111111"
OTHER = "22222222-2222-2222-2222-222222222222"


def test_canned_acls_in_stored_form() -> None:
    for name in ("private", "bucket-owner-read", "bucket-owner-full-control"):
        assert canonical(name, OWNER) is None
    owner = {"grantee": {"type": "CanonicalUser", "id": OWNER}, "permission": "FULL_CONTROL"}
    assert canonical("public-read", OWNER) == {
        "grants": [owner, {"grantee": {"type": "Group", "uri": ALL_USERS}, "permission": "READ"}]
    }
    assert canonical("public-read-write", OWNER) == {
        "grants": [
            owner,
            {"grantee": {"type": "Group", "uri": ALL_USERS}, "permission": "WRITE"},
            {"grantee": {"type": "Group", "uri": ALL_USERS}, "permission": "READ"},
        ]
    }
    assert canonical("authenticated-read", OWNER) == {
        "grants": [
            owner,
            {"grantee": {"type": "Group", "uri": AUTHENTICATED_USERS}, "permission": "READ"},
        ]
    }
    with pytest.raises(AclNotSupported) as info:
        canonical("log-delivery-write", OWNER)
    assert info.value.code == "NotImplemented"
    with pytest.raises(InvalidArgument):
        canonical("public", OWNER)


def test_grant_lists_are_deduplicated_and_ordered() -> None:
    grants = [
        Grant.group(ALL_USERS, "READ"),
        Grant.user(OTHER.upper(), "READ_ACP"),
        Grant.user(OWNER, "FULL_CONTROL"),
        Grant.group(ALL_USERS, "READ"),
        Grant.user(OTHER, "WRITE"),
    ]
    stored = canonical(grants, OWNER)
    assert stored is not None
    assert [
        (g["grantee"].get("id") or g["grantee"]["uri"], g["permission"]) for g in stored["grants"]
    ] == [
        (OWNER, "FULL_CONTROL"),
        (OTHER, "WRITE"),
        (OTHER, "READ_ACP"),
        (ALL_USERS, "READ"),
    ]
    # the same grants in another order are stored alike; the owner's grant alone is private
    assert canonical(list(reversed(grants)), OWNER) == stored
    assert canonical([Grant.user(OWNER, "FULL_CONTROL")] * 2, OWNER) is None
    # no grant at all is not private: even the owner's grant is gone
    assert canonical([], OWNER) == {"grants": []}


def test_bad_grants_are_refused() -> None:
    with pytest.raises(MalformedACL) as info:
        canonical([Grant.user(OWNER, "EVERYTHING")], OWNER)
    assert info.value.code == "MalformedACLError"
    with pytest.raises(InvalidArgument, match="Invalid id"):
        canonical([Grant.user("not-an-id", "READ")], OWNER)
    with pytest.raises(InvalidArgument, match="group"):
        canonical([Grant.group("http://acs.amazonaws.com/groups/s3/LogDelivery", "WRITE")], OWNER)


def test_what_an_acl_permits() -> None:
    assert permits(None, OWNER, "READ", OWNER)
    assert not permits(None, OWNER, "READ", OTHER)
    assert not permits(None, OWNER, "READ", None)
    public = canonical("public-read", OWNER)
    assert permits(public, OWNER, "READ", None)
    assert not permits(public, OWNER, "WRITE", OTHER)
    authenticated = canonical("authenticated-read", OWNER)
    assert permits(authenticated, OWNER, "READ", OTHER)
    assert not permits(authenticated, OWNER, "READ", None)
    full = canonical([Grant.user(OTHER, "FULL_CONTROL")], OWNER)
    for permission in ("READ", "WRITE", "READ_ACP", "WRITE_ACP"):
        assert permits(full, OWNER, permission, OTHER)
    assert not permits(full, OWNER, "READ", OWNER)  # the owner granted itself nothing


def test_put_and_get_object_acl(world: World) -> None:
    bucket = world.bucket()
    world.put(bucket, "a")
    loc = world.loc(bucket, "a")
    owner = str(world.project.public_id)
    obj, policy = get_object_acl(world.db, loc)
    assert obj.acl is None
    assert (policy.owner_id, policy.owner_name) == (owner, "test-project")
    assert policy.grants == [Grant.user(owner, "FULL_CONTROL")]

    other = create_project(world.db, "bob")
    grants = [Grant.user(owner, "FULL_CONTROL"), Grant.user(other.public_id, "READ")]
    put = put_object_acl(world.db, loc, grants)
    assert put.acl == canonical(grants, owner)
    assert get_object(world.db, loc).acl == put.acl
    _, policy = get_object_acl(world.db, loc)
    assert policy.grants == [Grant.user(owner, "FULL_CONTROL"), Grant.user(other.public_id, "READ")]
    assert policy.names == {owner: "test-project", str(other.public_id): "bob"}
    assert put_object_acl(world.db, loc, "private").acl is None
    assert world.rows()[0].acl is None


def test_unknown_canonical_user_changes_nothing(world: World) -> None:
    bucket = world.bucket()
    world.put(bucket, "a")
    with unchanged(world, InvalidArgument, "InvalidArgument"):
        put_object_acl(world.db, world.loc(bucket, "a"), [Grant.user(uuid.uuid4(), "READ")])
    with unchanged(world, MalformedACL, "MalformedACLError"):
        put_object_acl(world.db, world.loc(bucket, "a"), [Grant.user(OWNER, "OWN")])


def test_object_acls_belong_to_one_version(world: World) -> None:
    bucket = world.bucket(versioning=Versioning.ENABLED)
    v1 = world.put(bucket, "a")
    world.put(bucket, "a")
    loc = world.loc(bucket, "a")
    put_object_acl(world.db, loc, "public-read", version_id=v1.version_id)
    assert get_object_acl(world.db, loc, version_id=v1.version_id)[0].acl is not None
    assert get_object_acl(world.db, loc)[0].acl is None
    delete_object(world.db, loc)  # the latest is now a delete marker
    with unchanged(world, ObjectNotFound):
        put_object_acl(world.db, loc, "public-read")
    marker = world.rows()[0]
    with unchanged(world, MethodNotAllowed):
        put_object_acl(world.db, loc, "public-read", version_id=marker.version_id)


def test_new_objects_get_the_requested_acl_and_copies_do_not_copy_it(world: World) -> None:
    bucket = world.bucket()
    loc = world.loc(bucket, "a")
    owner = str(world.project.public_id)
    made = commit_inline_object(world.db, loc, b"x", etag="e", acl="public-read").object
    assert made.acl == canonical("public-read", owner)
    assert get_object(world.db, loc).acl == made.acl
    # an overwrite takes the request's ACL: none is private
    assert commit_inline_object(world.db, loc, b"y", etag="e").object.acl is None
    put_object_acl(world.db, loc, "authenticated-read")
    copy = copy_object(world.db, loc, world.loc(bucket, "b")).object
    assert copy.acl is None
    copy = copy_object(world.db, loc, world.loc(bucket, "c"), acl="public-read").object
    assert copy.acl == canonical("public-read", owner)
    pending = begin_upload(world.db, world.loc(bucket, "d"), acl="public-read-write")
    done = commit_object(world.db, pending, size=1, etag="e").object
    assert done.acl == canonical("public-read-write", owner)


def test_bucket_acls(world: World) -> None:
    owner = str(world.project.public_id)
    loc = BucketLocation(world.project.id, "shared")
    made = create_bucket(world.db, loc, acl="public-read")
    assert made.acl == canonical("public-read", owner)
    assert get_bucket_info(world.db, loc).acl == made.acl
    _, policy = get_bucket_acl(world.db, loc)
    assert policy.grants == [Grant.user(owner, "FULL_CONTROL"), Grant.group(ALL_USERS, "READ")]
    assert put_bucket_acl(world.db, loc, "private").acl is None
    assert get_bucket_info(world.db, loc).acl is None
    with pytest.raises(InvalidArgument):
        put_bucket_acl(world.db, loc, [Grant.user(uuid.uuid4(), "READ")])
    with pytest.raises(InvalidArgument):
        create_bucket(world.db, BucketLocation(world.project.id, "other"), acl="public")
    assert get_bucket_info(world.db, loc).acl is None


def test_an_acl_change_writes_one_update_record(world: World) -> None:
    eventing = Eventing(world.db)
    bucket = world.bucket("photos", versioning=Versioning.ENABLED)
    eventing.enable(world.project.id, "photos")
    obj = world.put(bucket, "a.jpg", b"hello")
    loc = world.loc(bucket, "a.jpg")
    owner = str(world.project.public_id)
    request = TransactionTag(request_id="R1", principal="P1", source_ip="192.0.2.7")

    put_object_acl(world.db, loc, "private")  # unchanged: no record
    put_object_acl(world.db, loc, "public-read", tag=request)
    put_object_acl(world.db, loc, "public-read")  # unchanged: no record
    put_object_acl(
        world.db, loc, [Grant.group(ALL_USERS, "READ"), Grant.user(owner, "FULL_CONTROL")]
    )
    put_bucket_acl(world.db, bucket, "public-read")  # not an object event

    insert, put = read_all(world.db)
    assert insert["mod_type"] == "INSERT"
    assert insert["mods"][0]["new_values"]["acl"] is None
    assert put["mod_type"] == "UPDATE"
    keys = {
        "project_id": str(world.project.id),
        "bucket_name": "photos",
        "object_key": "a.jpg",
        "version": obj.version,
    }
    assert put["mods"] == [
        {
            "keys": keys,
            "new_values": {
                "status": 4,
                "total_plain_size": 5,
                "stream_id": str(obj.stream_id),
                "user_metadata": None,
                "tags": None,
                "acl": canonical("public-read", owner),
                "retention_mode": None,
                "retain_until": None,
                "legal_hold": False,
                "etag": hashlib.md5(b"hello").hexdigest(),
            },
            "old_values": {"acl": None},
        }
    ]
    assert tag_of(put) == {
        "operation": "put-object-acl",
        "request_id": "R1",
        "principal": "P1",
        "source_ip": "192.0.2.7",
        "etag": hashlib.md5(b"hello").hexdigest(),
        "bucket_versioning": {"photos": "Enabled"},
    }


def test_acl_of_a_missing_bucket(world: World) -> None:
    with pytest.raises(BucketNotFound):
        put_object_acl(world.db, ObjectLocation(world.project.id, "nope", "a"), "public-read")
    with pytest.raises(BucketNotFound):
        get_bucket_acl(world.db, BucketLocation(world.project.id, "nope"))
