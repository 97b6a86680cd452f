"""Commit an inline object: a small object whose data is stored in the row itself, written
in one transaction with no pending row."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa

from ripple.changestream.capture import TransactionTag
from ripple.metabase.db import Metabase
from ripple.metabase.rows import key_bytes, new_stream_id, require_aware, start_key_write
from ripple.metabase.store_committed import CommitResult, store_committed
from ripple.metabase.types import Object, ObjectLocation, Retention, Status


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
    tag: TransactionTag | None = None,
) -> CommitResult:
    key_bytes(loc.object_key)
    require_aware(expires_at, "expires_at")
    stream_id = new_stream_id()

    def tx(conn: sa.Connection) -> CommitResult:
        bucket = start_key_write(conn, loc)
        now = db.now()
        new = Object(
            project_id=loc.project_id,
            bucket_name=loc.bucket_name,
            object_key=loc.object_key,
            version=0,
            stream_id=stream_id,
            status=Status.PENDING,  # store_committed chooses the committed status
            created_at=now,
            total_plain_size=len(data),
            etag=etag,
            content_type=content_type,
            user_metadata=dict(user_metadata or {}),
            expires_at=expires_at,
            retention=retention,
            legal_hold=legal_hold,
            inline_data=data,
        )
        return store_committed(conn, bucket, new, now, explicit_retention=retention is not None)

    tag = (tag or TransactionTag()).defaults(operation="put")
    return db.run_write(tx, tag, exclude_txn_from_change_streams=False)
