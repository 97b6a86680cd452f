"""Multipart uploads in the metabase: a pending row (status 1) per upload, named by its
stream id. Begin one with what its object will be (content type, metadata, object lock),
find one, abort one, list a bucket's. Completing an upload is `commit_object`; its parts
live with the object data, not in the metabase.

The pending row carries the content type, user metadata, retention, legal hold, tags,
ACL and checksum algorithm (and type) given at create, so completing needs nothing but the
row. Uploads begun here never
expire by TTL (`expires_at` is unset), so the lock settings on a pending row never keep
`expire` from removing it.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass

import sqlalchemy as sa

from ripple.metabase.acl import AclSpec, check_spec, resolve_acl
from ripple.metabase.db import Metabase
from ripple.metabase.errors import InvalidArgument, PendingObjectNotFound
from ripple.metabase.listing import common_prefix, past, scan, start_position
from ripple.metabase.object_tagging import check_tags
from ripple.metabase.objectlock import check_lock_allowed, check_retention_change
from ripple.metabase.rows import (
    at_bucket,
    at_key,
    delete_rows,
    get_bucket,
    insert_rows,
    key_bytes,
    new_stream_id,
    next_version,
    select_rows,
    start_key_write,
)
from ripple.metabase.schema import objects
from ripple.metabase.types import (
    COMMITTED_STATUSES,
    BucketLocation,
    Checksum,
    Object,
    ObjectLocation,
    Retention,
    Status,
)

MAX_UPLOADS = 1000
_NO_SUCH_UPLOAD = (
    "the specified multipart upload does not exist: it may have been aborted or completed, "
    "or the upload ID is wrong"
)

_PENDING = (int(Status.PENDING),)


def begin_upload(
    db: Metabase,
    loc: ObjectLocation,
    *,
    content_type: str = "",
    user_metadata: dict[str, str] | None = None,
    retention: Retention | None = None,
    legal_hold: bool = False,
    stream_id: uuid.UUID | None = None,
    tags: Mapping[str, str] | None = None,
    acl: AclSpec | None = None,
    checksum: Checksum | None = None,
) -> Object:
    """Begin a multipart upload: a pending row holding what the completed object will be,
    and the `checksum` algorithm and type (no value) its parts and completion must use.

    Object lock settings are checked now, as S3 checks them at CreateMultipartUpload (the
    bucket must have object lock; a retain-until date must be in the future)."""
    key_bytes(loc.object_key)
    object_tags = check_tags(tags or {})
    acl = None if acl is None else check_spec(acl)
    sid = stream_id or new_stream_id()

    def tx(conn: sa.Connection) -> Object:
        bucket = start_key_write(conn, loc)
        now = db.now()
        check_lock_allowed(bucket, retention, legal_hold)
        if retention is not None:
            check_retention_change(None, retention, now, bypass=False)
        pending = Object(
            project_id=loc.project_id,
            bucket_name=loc.bucket_name,
            object_key=loc.object_key,
            version=next_version(conn, loc),
            stream_id=sid,
            status=Status.PENDING,
            created_at=now,
            content_type=content_type,
            user_metadata=dict(user_metadata or {}),
            retention=retention,
            legal_hold=legal_hold,
            tags=object_tags,
            acl=resolve_acl(conn, loc.project_id, acl),  # the completed object's
            checksum=checksum,
        )
        insert_rows(conn, [pending])
        return pending

    return db.run_write(tx)


def _pending(loc: ObjectLocation, stream_id: uuid.UUID) -> sa.ColumnElement[bool]:
    return sa.and_(
        at_key(loc),
        objects.c.status == int(Status.PENDING),
        objects.c.stream_id == stream_id,
    )


def get_upload(db: Metabase, loc: ObjectLocation, stream_id: uuid.UUID) -> Object:
    """The pending row of an upload in progress; `PendingObjectNotFound` if there is none."""
    key_bytes(loc.object_key)
    with db.read() as conn:
        get_bucket(conn, loc.bucket)
        rows = select_rows(conn, _pending(loc, stream_id), data=False)
    if not rows:
        raise PendingObjectNotFound(_NO_SUCH_UPLOAD)
    return rows[0]


def completed_upload(db: Metabase, loc: ObjectLocation, stream_id: uuid.UUID) -> Object:
    """The version an upload became when it was completed (completing keeps the upload's
    stream id), while the key still holds it: a CompleteMultipartUpload retried after it
    succeeded answers the same result, as S3 does. `PendingObjectNotFound` otherwise."""
    key_bytes(loc.object_key)
    committed = sa.and_(
        at_key(loc),
        objects.c.status.in_(COMMITTED_STATUSES),
        objects.c.stream_id == stream_id,
    )
    with db.read() as conn:
        get_bucket(conn, loc.bucket)
        rows = select_rows(conn, committed, data=False)
    if not rows:
        raise PendingObjectNotFound(_NO_SUCH_UPLOAD)
    return rows[0]


def abort_upload(db: Metabase, loc: ObjectLocation, stream_id: uuid.UUID) -> Object:
    """Delete an upload's pending row; its parts are the caller's to remove afterwards.

    Like a commit it holds the bucket and the key first, so an abort and a complete of the
    same upload queue, and exactly one of them finds the row."""
    key_bytes(loc.object_key)

    def tx(conn: sa.Connection) -> Object:
        start_key_write(conn, loc)
        rows = select_rows(conn, _pending(loc, stream_id), lock=True, data=False)
        if not rows:
            raise PendingObjectNotFound(_NO_SUCH_UPLOAD)
        delete_rows(conn, rows)
        return rows[0]

    return db.run_write(tx)


@dataclass(frozen=True)
class ListUploadsResult:
    uploads: list[Object]
    common_prefixes: list[str]
    is_truncated: bool
    # when truncated: the last key (or common prefix) and upload listed, to go on from
    next_key_marker: str = ""
    next_upload_marker: uuid.UUID | None = None


def list_uploads(
    db: Metabase,
    loc: BucketLocation,
    *,
    prefix: str = "",
    delimiter: str = "",
    key_marker: str = "",
    upload_marker: uuid.UUID | None = None,
    max_uploads: int = MAX_UPLOADS,
) -> ListUploadsResult:
    """Uploads in progress, by key, then by the order they began in (S3's order).

    With a delimiter, keys roll up into common prefixes as in ListObjects. `upload_marker`
    counts only with `key_marker`: the listing goes on with the uploads of that key that
    began after it (all of that key's uploads, if the marker upload is gone), then the
    following keys. Without it, the keys after `key_marker` follow (all of a common prefix
    skipped when the marker is one)."""
    if max_uploads < 0:
        raise InvalidArgument(f"max-uploads must be 0 or more, got {max_uploads}")
    limit = min(max_uploads, MAX_UPLOADS)
    raw_prefix = prefix.encode("utf-8")
    found: list[Object] = []
    prefixes: list[str] = []
    truncated = False
    last_key = ""  # the last entry listed: an upload, or a common prefix (with no upload)
    last_upload: uuid.UUID | None = None
    with db.read() as conn:
        get_bucket(conn, loc)
        after_key: bytes | None = None
        after_version: int | None = None
        if key_marker and upload_marker is not None:
            after_key = key_marker.encode("utf-8")
            after_version = _version_of(conn, loc, after_key, upload_marker) or 0
        elif key_marker:
            after_key = start_position(key_marker, prefix, delimiter)
        exhausted = limit == 0
        while not exhausted and not truncated:
            rows = _scan(conn, loc, raw_prefix, after_key, after_version)
            exhausted = not rows
            for row in rows:
                after_key, after_version = row.object_key.encode("utf-8"), row.version
                if len(found) + len(prefixes) == limit:
                    truncated = True
                    break
                rolled = common_prefix(row.object_key, prefix, delimiter)
                if rolled is None:
                    found.append(row)
                    last_key, last_upload = row.object_key, row.stream_id
                    continue
                prefixes.append(rolled)
                last_key, last_upload = rolled, None
                after_key, after_version = past(rolled.encode("utf-8")), None
                break  # scan again from after the common prefix
    if not truncated:
        return ListUploadsResult(found, prefixes, False)
    return ListUploadsResult(found, prefixes, True, last_key, last_upload)


def _version_of(
    conn: sa.Connection, loc: BucketLocation, key: bytes, stream_id: uuid.UUID
) -> int | None:
    """The version of the pending row of `key` with `stream_id`, if it is still there."""
    query = sa.select(objects.c.version).where(
        at_bucket(loc),
        objects.c.object_key == key,
        objects.c.status == int(Status.PENDING),
        objects.c.stream_id == stream_id,
    )
    version = conn.execute(query).scalar()
    return None if version is None else int(version)


def _scan(
    conn: sa.Connection,
    loc: BucketLocation,
    prefix: bytes,
    after_key: bytes | None,
    after_version: int | None,
) -> list[Object]:
    """Pending rows under `prefix` after (`after_key`, `after_version`): with a version,
    the later uploads of that key first; without, the next key's."""
    return scan(conn, loc, prefix, after_key, after_version, statuses=_PENDING, newest_first=False)
