"""Put an object in one transaction, with no pending row: what a single-request PutObject
does once its data is in place (on the filesystem under its stream id, or inline in the row
for small objects)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import datetime

import sqlalchemy as sa

from ripple.changestream.tag import Operation, TransactionTag
from ripple.metabase.acl import AclSpec, check_spec, resolve_acl
from ripple.metabase.db import Metabase
from ripple.metabase.object_tagging import check_tags
from ripple.metabase.rows import key_bytes, require_aware, start_key_write
from ripple.metabase.store_committed import CommitResult, store_committed
from ripple.metabase.types import Checksum, Object, ObjectLocation, Retention, Status
from ripple.metabase.write_condition import WriteCondition


def put_object(
    db: Metabase,
    loc: ObjectLocation,
    *,
    stream_id: uuid.UUID,
    size: int,
    etag: str,
    content_type: str = "",
    user_metadata: dict[str, str] | None = None,
    retention: Retention | None = None,
    legal_hold: bool = False,
    expires_at: datetime | None = None,
    inline_data: bytes | None = None,
    tags: Mapping[str, str] | None = None,
    acl: AclSpec | None = None,
    checksum: Checksum | None = None,
    condition: WriteCondition | None = None,
    tag: TransactionTag | None = None,
) -> CommitResult:
    """Commit a new version whose data is stored under `stream_id` (or is `inline_data`),
    with object `tags` (S3's rules: `check_tags`), `acl` (None: private) and the additional
    `checksum` its upload was verified against; a conditional write's `condition` must
    still hold (`ConditionalRequestConflict`)."""
    key_bytes(loc.object_key)
    object_tags = check_tags(tags or {})
    acl = None if acl is None else check_spec(acl)
    require_aware(expires_at, "expires_at")
    if inline_data is not None and len(inline_data) != size:
        raise ValueError(f"inline data is {len(inline_data)} bytes, not {size}")

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
            total_plain_size=size,
            etag=etag,
            content_type=content_type,
            user_metadata=dict(user_metadata or {}),
            expires_at=expires_at,
            retention=retention,
            legal_hold=legal_hold,
            inline_data=inline_data,
            tags=object_tags,
            acl=resolve_acl(conn, loc.project_id, acl),
            checksum=checksum,
        )
        return store_committed(
            conn, bucket, new, now, explicit_retention=retention is not None, condition=condition
        )

    tag = (tag or TransactionTag()).defaults(operation=Operation.PUT)
    return db.run_write(tx, tag, exclude_txn_from_change_streams=False)
