"""Test shortcuts for writing objects: a bare pending row (`begin_object`), and a PUT of
small data stored in the row (`commit_inline_object`).

Neither is an operation of the gateway: `begin_object` makes a pending row as
`begin_upload` does but without its checks (object lock, tags, ACL) or what it records, and
`commit_inline_object` is `put_object` with the data inline and a fresh stream id."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import datetime

import sqlalchemy as sa

from ripple.changestream.tag import TransactionTag
from ripple.metabase.acl import AclSpec
from ripple.metabase.db import Metabase
from ripple.metabase.put_object import put_object
from ripple.metabase.rows import (
    insert_rows,
    new_stream_id,
    next_version,
    require_aware,
    start_key_write,
)
from ripple.metabase.store_committed import CommitResult
from ripple.metabase.types import Object, ObjectLocation, Retention, Status


def begin_object(
    db: Metabase,
    loc: ObjectLocation,
    *,
    stream_id: uuid.UUID | None = None,
    expires_at: datetime | None = None,
) -> Object:
    """A pending row (status 1) for `loc`, which `commit_object` can turn into a version.
    Pending rows are invisible to reads and lists and emit no events."""
    require_aware(expires_at, "expires_at")
    sid = stream_id or new_stream_id()

    def tx(conn: sa.Connection) -> Object:
        start_key_write(conn, loc)
        pending = Object(
            project_id=loc.project_id,
            bucket_name=loc.bucket_name,
            object_key=loc.object_key,
            version=next_version(conn, loc),
            stream_id=sid,
            status=Status.PENDING,
            created_at=db.now(),
            expires_at=expires_at,
        )
        insert_rows(conn, [pending])
        return pending

    return db.run_write(tx)


def commit_inline_object(
    db: Metabase,
    loc: ObjectLocation,
    data: bytes,
    *,
    etag: str,
    content_type: str = "",
    user_metadata: dict[str, str] | None = None,
    retention: Retention | None = None,
    legal_hold: bool = False,
    expires_at: datetime | None = None,
    tags: Mapping[str, str] | None = None,
    acl: AclSpec | None = None,
    tag: TransactionTag | None = None,
) -> CommitResult:
    """`put_object` of `data` stored in the row, under a new stream id."""
    return put_object(
        db,
        loc,
        stream_id=new_stream_id(),
        size=len(data),
        etag=etag,
        content_type=content_type,
        user_metadata=user_metadata,
        retention=retention,
        legal_hold=legal_hold,
        expires_at=expires_at,
        inline_data=data,
        tags=tags,
        acl=acl,
        tag=tag,
    )
