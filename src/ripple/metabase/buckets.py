"""Buckets: create, get, list, delete (only when it holds no object; uploads in progress are
aborted), and the object lock configuration.

S3 bucket names are global: a name another project holds is `BucketAlreadyExists`, one the
same project holds is `BucketAlreadyOwnedByYou`. Object lock can only be chosen at
creation, and turns versioning on. Creating and deleting a bucket are recorded by the
`project_eventing` change stream (`BucketCreated:Put` / `BucketRemoved:Delete` events).
"""

from __future__ import annotations

import re
import uuid
from dataclasses import replace

import sqlalchemy as sa
from sqlalchemy import exc

from ripple.changestream.capture import capture_of
from ripple.changestream.tag import Operation, TransactionTag
from ripple.metabase.acl import AclSpec, check_spec, resolve_acl
from ripple.metabase.db import Metabase
from ripple.metabase.errors import (
    BucketAlreadyExists,
    BucketAlreadyOwnedByYou,
    BucketNotEmpty,
    InvalidArgument,
    InvalidBucketState,
    InvalidRetentionPeriod,
    ProjectNotFound,
)
from ripple.metabase.rows import (
    at_bucket,
    bucket_from_row,
    delete_rows,
    get_bucket,
    select_rows,
)
from ripple.metabase.schema import buckets, objects, projects
from ripple.metabase.types import Bucket, BucketLocation, DefaultRetention, Status, Versioning

_BUCKET_NAME = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_IP_ADDRESS = re.compile(r"^\d+\.\d+\.\d+\.\d+$")
# S3's reserved names: punycode, S3 internals, documentation examples, access point and
# Object Lambda aliases, directory buckets, table buckets, Multi-Region Access Points
RESERVED_PREFIXES = ("xn--", "sthree-", "amzn-s3-demo-")
RESERVED_SUFFIXES = ("-s3alias", "--ol-s3", "--x-s3", "--table-s3", ".mrap")


class InvalidBucketName(InvalidArgument):
    code = "InvalidBucketName"


def validate_bucket_name(name: str) -> None:
    """S3's bucket naming rules; raise `InvalidBucketName` saying which one is broken."""
    if not _BUCKET_NAME.match(name):
        raise InvalidBucketName(
            f"bucket name {name!r} must be 3 to 63 characters of lower-case letters, digits, "
            "dots and hyphens, beginning and ending with a letter or digit"
        )
    if ".." in name or ".-" in name or "-." in name:
        raise InvalidBucketName(f"bucket name {name!r} must not have adjacent dots or dot-hyphens")
    if _IP_ADDRESS.match(name):
        raise InvalidBucketName(f"bucket name {name!r} must not look like an IP address")
    if name.startswith(RESERVED_PREFIXES) or name.endswith(RESERVED_SUFFIXES):
        raise InvalidBucketName(f"bucket name {name!r} uses a prefix or suffix S3 reserves")


def create_bucket(
    db: Metabase,
    loc: BucketLocation,
    *,
    versioning: Versioning = Versioning.UNVERSIONED,
    object_lock_enabled: bool = False,
    acl: AclSpec | None = None,
    tag: TransactionTag | None = None,
) -> Bucket:
    validate_bucket_name(loc.bucket_name)
    acl = None if acl is None else check_spec(acl)
    if object_lock_enabled:
        versioning = Versioning.ENABLED
    bucket = Bucket(
        loc.project_id, loc.bucket_name, versioning, object_lock_enabled, None, db.now()
    )
    tag = (tag or TransactionTag()).defaults(operation=Operation.CREATE_BUCKET)
    try:
        with db.write(tag) as conn:
            if (
                conn.execute(
                    sa.select(projects.c.id).where(projects.c.id == loc.project_id)
                ).first()
                is None
            ):
                raise ProjectNotFound(f"project {loc.project_id} does not exist")
            owner = _owner(conn, loc.bucket_name)
            if owner is not None:
                raise _exists_error(loc, owner == loc.project_id)
            bucket = replace(bucket, acl=resolve_acl(conn, loc.project_id, acl))
            row = _recorded(bucket)
            conn.execute(sa.insert(buckets).values(**row, acl=bucket.acl))
            capture_of(conn).insert("buckets", row, (loc.project_id, loc.bucket_name))
    except exc.IntegrityError as e:  # a concurrent create won the name
        raise _exists_error(loc, mine=False) from e
    return bucket


def _recorded(bucket: Bucket) -> dict[str, object]:
    """The bucket's key and the columns `project_eventing` watches, for its records."""
    return {
        "project_id": bucket.project_id,
        "name": bucket.name,
        "versioning": int(bucket.versioning),
        "object_lock_enabled": bucket.object_lock_enabled,
        "created_at": bucket.created_at,
    }


def _exists_error(loc: BucketLocation, mine: bool) -> BucketAlreadyExists:
    if mine:
        return BucketAlreadyOwnedByYou(f"you already own bucket {loc.bucket_name!r}")
    return BucketAlreadyExists(f"bucket name {loc.bucket_name!r} is taken; choose another")


def _owner(conn: sa.Connection, name: str) -> uuid.UUID | None:
    """The project that holds the bucket name, if any (names are global)."""
    owner: uuid.UUID | None = conn.execute(
        sa.select(buckets.c.project_id).where(buckets.c.name == name)
    ).scalar()
    return owner


def bucket_owner(db: Metabase, name: str) -> uuid.UUID | None:
    """The project that holds the bucket name, if any project does."""
    with db.read() as conn:
        return _owner(conn, name)


def get_bucket_info(db: Metabase, loc: BucketLocation) -> Bucket:
    with db.read() as conn:
        return get_bucket(conn, loc)


def list_buckets(db: Metabase, project_id: uuid.UUID) -> list[Bucket]:
    """The project's buckets in byte order of their names, as S3 lists them and pages them
    (sorted here: a database's collation may order `a-c` after `ab`)."""
    with db.read() as conn:
        rows = conn.execute(sa.select(buckets).where(buckets.c.project_id == project_id)).all()
    return sorted((bucket_from_row(r) for r in rows), key=lambda b: b.name)


def delete_bucket(
    db: Metabase, loc: BucketLocation, *, tag: TransactionTag | None = None
) -> list[uuid.UUID]:
    """Delete a bucket that holds no object version or delete marker, aborting the multipart
    uploads still in progress in it, as S3 does. Returns the aborted uploads' stream ids:
    their parts are the caller's to remove after the commit."""
    with db.write((tag or TransactionTag()).defaults(operation=Operation.DELETE_BUCKET)) as conn:
        bucket = get_bucket(conn, loc, lock="update")
        committed = sa.and_(at_bucket(loc), objects.c.status != int(Status.PENDING))
        if conn.execute(sa.select(objects.c.version).where(committed).limit(1)).first():
            raise BucketNotEmpty(
                f"bucket {loc.bucket_name!r} is not empty: delete every object version and "
                "delete marker in it first"
            )
        uploads = select_rows(conn, at_bucket(loc), lock=True, data=False)
        delete_rows(conn, uploads)
        conn.execute(
            sa.delete(buckets).where(
                buckets.c.project_id == loc.project_id, buckets.c.name == loc.bucket_name
            )
        )
        capture_of(conn).delete("buckets", _recorded(bucket), (loc.project_id, loc.bucket_name))
    return [upload.stream_id for upload in uploads]


MAX_RETENTION_DAYS = 36_500  # S3's longest default retention: 100 years
MAX_RETENTION_YEARS = 100


def set_object_lock_configuration(
    db: Metabase, loc: BucketLocation, default: DefaultRetention | None
) -> Bucket:
    """Set (or with None, clear) the default retention of an object-lock bucket. A bucket
    created without object lock gets it here if its versioning is Enabled, as S3 allows
    since 2023; otherwise it is `InvalidBucketState`."""
    if default is not None:
        if (default.days is None) == (default.years is None):
            raise InvalidArgument("default retention needs exactly one of days or years")
        if default.days is not None and not 1 <= default.days <= MAX_RETENTION_DAYS:
            raise InvalidRetentionPeriod(
                f"the default retention period must be 1 to {MAX_RETENTION_DAYS} days, "
                f"not {default.days}"
            )
        if default.years is not None and not 1 <= default.years <= MAX_RETENTION_YEARS:
            raise InvalidRetentionPeriod(
                f"the default retention period must be 1 to {MAX_RETENTION_YEARS} years, "
                f"not {default.years}"
            )
    with db.write() as conn:
        bucket = get_bucket(conn, loc, lock="update")
        if not bucket.object_lock_enabled and bucket.versioning is not Versioning.ENABLED:
            raise InvalidBucketState(
                f"bucket {loc.bucket_name!r} has no object lock and its versioning is not "
                "Enabled: enable versioning first, or create the bucket with object lock"
            )
        conn.execute(
            sa.update(buckets)
            .where(buckets.c.project_id == loc.project_id, buckets.c.name == loc.bucket_name)
            .values(
                object_lock_enabled=True,
                default_retention_mode=None if default is None else int(default.mode),
                default_retention_days=None if default is None else default.days,
                default_retention_years=None if default is None else default.years,
            )
        )
        return get_bucket(conn, loc)
