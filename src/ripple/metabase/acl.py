"""Access control lists (S3 ACLs) of buckets and objects: the grant model, canned ACLs,
what a stored ACL permits, and Put/GetObjectAcl, Put/GetBucketAcl.

Stored form (`objects.acl`, `buckets.acl`, JSON): None is the canned `private` (the
owner's FULL_CONTROL alone); otherwise `{"grants": [{"grantee": {"type": "CanonicalUser",
"id": PUBLIC_ID} | {"type": "Group", "uri": URI}, "permission": P}, ...]}`, the full list
(the owner's own grant included, when it has one) deduplicated and in a canonical order
(`canonical`), so equal ACLs are stored alike and an ACL equal to private is stored as None.

The owner of a bucket AND of every object in it is the bucket's project (its public id).
An object written by another project's principal through a grant still belongs to the
bucket owner, like S3's "bucket owner preferred" object ownership; so the canned ACLs
`bucket-owner-read` and `bucket-owner-full-control` are `private` here.

An ACL change of an object version is an UPDATE of its row in one transaction, recorded
by the change stream (the `ObjectAcl:Put` event); setting the ACL a version already has
changes nothing and records nothing. Bucket ACL changes are not object events.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import sqlalchemy as sa

from ripple.changestream.capture import capture_of
from ripple.changestream.tag import Operation, TransactionTag
from ripple.metabase.db import Metabase
from ripple.metabase.errors import InvalidArgument, MetabaseError, ProjectNotFound
from ripple.metabase.object_tagging import tagged_version
from ripple.metabase.rows import get_bucket, start_key_write, update_row
from ripple.metabase.schema import buckets, projects
from ripple.metabase.types import Bucket, BucketLocation, Object, ObjectLocation

FULL_CONTROL = "FULL_CONTROL"
READ = "READ"
WRITE = "WRITE"
READ_ACP = "READ_ACP"
WRITE_ACP = "WRITE_ACP"
# the canonical order of permissions within one grantee (S3 lists them so)
PERMISSIONS = (FULL_CONTROL, WRITE, WRITE_ACP, READ, READ_ACP)

CANONICAL_USER = "CanonicalUser"
GROUP = "Group"
ALL_USERS = "http://acs.amazonaws.com/groups/global/AllUsers"
AUTHENTICATED_USERS = "http://acs.amazonaws.com/groups/global/AuthenticatedUsers"
GROUPS = (ALL_USERS, AUTHENTICATED_USERS)

CANNED_ACLS = (
    "private",
    "public-read",
    "public-read-write",
    "authenticated-read",
    "bucket-owner-read",
    "bucket-owner-full-control",
)
UNSUPPORTED_CANNED_ACLS = ("log-delivery-write", "aws-exec-read")
MAX_GRANTS = 100  # S3's limit on the grants of one ACL


class MalformedACL(InvalidArgument):
    """A grant S3 would not parse: an unknown permission, a grantee without an id or URI."""

    code = "MalformedACLError"


class AclAccessDenied(MetabaseError):
    """A non-owner's ACL read or change of a version whose own ACL does not grant it the
    permission (checked in the transaction, on the very version it reads or changes)."""

    code = "AccessDenied"


@dataclass(frozen=True)
class Grantee:
    """Who asks, when it is not the bucket owner: a project's public id, or None for an
    anonymous request. The owner passes no Grantee (it needs no grant)."""

    public_id: str | None


class AclNotSupported(MetabaseError):
    """A canned ACL S3 knows but ripple does not implement (its log delivery and EC2
    groups do not exist here)."""

    code = "NotImplemented"


@dataclass(frozen=True)
class Grant:
    """One grant: a grantee (`CanonicalUser` with a project public id, or `Group` with a
    group URI) and the permission it has."""

    grantee_type: str
    grantee: str  # the public id of a CanonicalUser, the URI of a Group
    permission: str

    @classmethod
    def user(cls, public_id: str | uuid.UUID, permission: str) -> Grant:
        return cls(CANONICAL_USER, str(public_id), permission)

    @classmethod
    def group(cls, uri: str, permission: str) -> Grant:
        return cls(GROUP, uri, permission)

    def stored(self) -> dict[str, Any]:
        key = "id" if self.grantee_type == CANONICAL_USER else "uri"
        return {
            "grantee": {"type": self.grantee_type, key: self.grantee},
            "permission": self.permission,
        }

    @classmethod
    def of_stored(cls, stored: dict[str, Any]) -> Grant:
        grantee = stored["grantee"]
        value = grantee.get("id") if grantee["type"] == CANONICAL_USER else grantee.get("uri")
        return cls(grantee["type"], str(value), stored["permission"])


# What a request gives as an ACL: a canned ACL's name, or the full list of grants.
AclSpec = str | Sequence[Grant]


def check_grant(grant: Grant) -> Grant:
    """The grant as stored (ids lower-cased), or `MalformedACL` / `InvalidArgument`."""
    if grant.permission not in PERMISSIONS:
        raise MalformedACL(
            f"unknown permission {grant.permission!r}: use one of {', '.join(PERMISSIONS)}"
        )
    if grant.grantee_type == CANONICAL_USER:
        try:
            return replace(grant, grantee=str(uuid.UUID(grant.grantee)))
        except ValueError:
            raise InvalidArgument(
                f"Invalid id: {grant.grantee!r} is not a canonical user id"
            ) from None
    if grant.grantee_type == GROUP:
        if grant.grantee not in GROUPS:
            raise InvalidArgument(
                f"Invalid group uri {grant.grantee!r}: ripple knows {ALL_USERS} and "
                f"{AUTHENTICATED_USERS}"
            )
        return grant
    raise MalformedACL(f"unknown grantee type {grant.grantee_type!r}: CanonicalUser or Group")


def canned(name: str, owner_id: str) -> list[Grant]:
    """The grants of a canned ACL, as S3 defines them (the object owner is the bucket
    owner here, so the bucket-owner ones are `private`)."""
    if name in UNSUPPORTED_CANNED_ACLS:
        raise AclNotSupported(f"the canned ACL {name!r} is not implemented by ripple")
    if name not in CANNED_ACLS:
        raise InvalidArgument(f"unknown canned ACL {name!r}: use one of {', '.join(CANNED_ACLS)}")
    grants = [Grant.user(owner_id, FULL_CONTROL)]
    if name in ("public-read", "public-read-write"):
        grants.append(Grant.group(ALL_USERS, READ))
    if name == "public-read-write":
        grants.append(Grant.group(ALL_USERS, WRITE))
    if name == "authenticated-read":
        grants.append(Grant.group(AUTHENTICATED_USERS, READ))
    return grants


def check_spec(spec: AclSpec) -> AclSpec:
    """Refuse a bad canned name or grant before anything is read or written."""
    if isinstance(spec, str):
        canned(spec, str(uuid.UUID(int=0)))
        return spec
    return _checked(spec)


def _checked(grants: Sequence[Grant]) -> list[Grant]:
    if len(grants) > MAX_GRANTS:
        raise MalformedACL(f"an ACL has at most {MAX_GRANTS} grants, not {len(grants)}")
    return [check_grant(g) for g in grants]


def canonical(spec: AclSpec, owner_id: str) -> dict[str, Any] | None:
    """The stored form of an ACL: the grants deduplicated, the owner's first, then other
    users by id, then groups, each grantee's permissions in `PERMISSIONS` order; None when
    it equals `private`."""
    grants = canned(spec, owner_id) if isinstance(spec, str) else _checked(spec)
    unique = set(grants)

    def order(g: Grant) -> tuple[int, str, int]:
        rank = 0 if g.grantee == owner_id else 1 if g.grantee_type == CANONICAL_USER else 2
        return rank, g.grantee, PERMISSIONS.index(g.permission)

    ordered = sorted(unique, key=order)
    if ordered == [Grant.user(owner_id, FULL_CONTROL)]:
        return None
    return {"grants": [g.stored() for g in ordered]}


def grants_of(stored: dict[str, Any] | None, owner_id: str) -> list[Grant]:
    """The grants of a stored ACL (`private` for None)."""
    if stored is None:
        return [Grant.user(owner_id, FULL_CONTROL)]
    return [Grant.of_stored(g) for g in stored.get("grants", [])]


def permits(
    stored: dict[str, Any] | None, owner_id: str, permission: str, requester: str | None
) -> bool:
    """Does the ACL give `permission` (or FULL_CONTROL) to `requester`, a project public id
    (None: an anonymous request)? AuthenticatedUsers is every signed request."""
    for grant in grants_of(stored, owner_id):
        if grant.permission not in (permission, FULL_CONTROL):
            continue
        if grant.grantee_type == GROUP:
            if grant.grantee == ALL_USERS or (
                grant.grantee == AUTHENTICATED_USERS and requester is not None
            ):
                return True
        elif requester is not None and grant.grantee == requester:
            return True
    return False


@dataclass(frozen=True)
class AccessControlPolicy:
    """An ACL as GetObjectAcl / GetBucketAcl answer it: the owner and the full grant list,
    with the display names (project names) of the CanonicalUser grantees."""

    owner_id: str
    owner_name: str
    grants: list[Grant]
    names: dict[str, str]


@dataclass(frozen=True)
class BucketOwner:
    """The project that holds a bucket name."""

    project_id: uuid.UUID
    public_id: str
    name: str


def bucket_owner_by_name(db: Metabase, bucket_name: str) -> BucketOwner | None:
    """The project holding the bucket name, if any does (bucket names are global)."""
    query = (
        sa.select(buckets.c.project_id, projects.c.public_id, projects.c.name)
        .join(projects, projects.c.id == buckets.c.project_id)
        .where(buckets.c.name == bucket_name)
    )
    with db.read() as conn:
        row = conn.execute(query).first()
    return None if row is None else BucketOwner(row.project_id, str(row.public_id), row.name)


def _owner_of(conn: sa.Connection, project_id: uuid.UUID) -> tuple[str, str]:
    row = conn.execute(
        sa.select(projects.c.public_id, projects.c.name).where(projects.c.id == project_id)
    ).first()
    if row is None:
        raise ProjectNotFound(f"project {project_id} does not exist")
    return str(row.public_id), row.name


def _names(conn: sa.Connection, ids: Iterable[str]) -> dict[str, str]:
    """Public id -> project name, for the ids that are projects."""
    wanted = {uuid.UUID(i) for i in ids}
    if not wanted:
        return {}
    rows = conn.execute(
        sa.select(projects.c.public_id, projects.c.name).where(projects.c.public_id.in_(wanted))
    ).all()
    return {str(r.public_id): r.name for r in rows}


def resolve_acl(
    conn: sa.Connection, project_id: uuid.UUID, spec: AclSpec | None
) -> dict[str, Any] | None:
    """The stored form of `spec` for a bucket or object of `project_id` (None: private),
    every CanonicalUser grantee checked to be a project (`InvalidArgument` "Invalid id")."""
    if spec is None or spec in ("private", "bucket-owner-read", "bucket-owner-full-control"):
        return None
    owner_id, _ = _owner_of(conn, project_id)
    stored = canonical(spec, owner_id)
    users = {g.grantee for g in grants_of(stored, owner_id) if g.grantee_type == CANONICAL_USER}
    unknown = sorted(users - {owner_id} - set(_names(conn, users - {owner_id})))
    if unknown:
        raise InvalidArgument(f"Invalid id: {unknown[0]} is not a known canonical user id")
    return stored


def _policy(conn: sa.Connection, project_id: uuid.UUID, stored: Any) -> AccessControlPolicy:
    owner_id, owner_name = _owner_of(conn, project_id)
    grants = grants_of(stored, owner_id)
    users = {g.grantee for g in grants if g.grantee_type == CANONICAL_USER} - {owner_id}
    names = {owner_id: owner_name, **_names(conn, users)}
    return AccessControlPolicy(owner_id, owner_name, grants, names)


def _check_grant(
    conn: sa.Connection, obj: Object, grantee: Grantee | None, permission: str
) -> None:
    """`AclAccessDenied` unless the owner asks (`grantee` None) or the version's ACL grants
    the grantee `permission`."""
    if grantee is None:
        return
    owner_id, _ = _owner_of(conn, obj.project_id)
    if not permits(obj.acl, owner_id, permission, grantee.public_id):
        raise AclAccessDenied(
            f"the ACL of version {obj.version_id} of {obj.object_key!r} does not grant you "
            f"{permission} (or {FULL_CONTROL})"
        )


def put_object_acl(
    db: Metabase,
    loc: ObjectLocation,
    acl: AclSpec,
    *,
    version_id: str | None = None,
    grantee: Grantee | None = None,
    tag: TransactionTag | None = None,
) -> Object:
    """Replace the ACL of a version (the latest without `version_id`); returns the version
    with its new ACL. A delete marker has none (as for tags). A non-owner (`grantee`) needs
    WRITE_ACP in the ACL of the version changed, as it is in this transaction."""
    spec = check_spec(acl)

    def tx(conn: sa.Connection) -> Object:
        start_key_write(conn, loc)
        obj = tagged_version(conn, loc, version_id)
        _check_grant(conn, obj, grantee, WRITE_ACP)
        new = resolve_acl(conn, loc.project_id, spec)
        if new == obj.acl:
            return obj  # nothing changes, so nothing is recorded
        update_row(conn, obj, acl=new)
        capture_of(conn).default_etag(obj.etag)
        return replace(obj, acl=new)

    transaction_tag = (tag or TransactionTag()).defaults(operation=Operation.PUT_OBJECT_ACL)
    return db.run_write(tx, transaction_tag, exclude_txn_from_change_streams=False)


def acl_version(db: Metabase, loc: ObjectLocation, version_id: str | None = None) -> Object:
    """The version whose ACL a request is judged by (never a delete marker)."""
    with db.read() as conn:
        return tagged_version(conn, loc, version_id)


def get_object_acl(
    db: Metabase,
    loc: ObjectLocation,
    *,
    version_id: str | None = None,
    grantee: Grantee | None = None,
) -> tuple[Object, AccessControlPolicy]:
    """The version asked for and its ACL with the owner and grantees' display names. A
    non-owner (`grantee`) needs READ_ACP in the ACL of the version read."""
    with db.read() as conn:
        obj = tagged_version(conn, loc, version_id)
        _check_grant(conn, obj, grantee, READ_ACP)
        return obj, _policy(conn, loc.project_id, obj.acl)


def put_bucket_acl(db: Metabase, loc: BucketLocation, acl: AclSpec) -> Bucket:
    """Replace the bucket's ACL; returns the bucket with it. Not an object event: the
    write stays excluded from change streams."""
    spec = check_spec(acl)
    where = sa.and_(buckets.c.project_id == loc.project_id, buckets.c.name == loc.bucket_name)

    def tx(conn: sa.Connection) -> Bucket:
        bucket = get_bucket(conn, loc, lock="update")
        new = resolve_acl(conn, loc.project_id, spec)
        if new != bucket.acl:
            conn.execute(sa.update(buckets).where(where).values(acl=new))
        return replace(bucket, acl=new)

    return db.run_write(tx)


def get_bucket_acl(db: Metabase, loc: BucketLocation) -> tuple[Bucket, AccessControlPolicy]:
    with db.read() as conn:
        bucket = get_bucket(conn, loc)
        return bucket, _policy(conn, loc.project_id, bucket.acl)
