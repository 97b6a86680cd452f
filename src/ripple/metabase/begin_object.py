"""Begin an object: a pending row (status 1) that a later commit turns into a version.

Pending rows are invisible to reads and lists and emit no events."""

from __future__ import annotations

import uuid
from datetime import datetime

import sqlalchemy as sa

from ripple.metabase.db import Metabase
from ripple.metabase.rows import (
    insert_rows,
    new_stream_id,
    next_version,
    require_aware,
    start_key_write,
)
from ripple.metabase.types import Object, ObjectLocation, Status


def begin_object(
    db: Metabase,
    loc: ObjectLocation,
    *,
    stream_id: uuid.UUID | None = None,
    expires_at: datetime | None = None,
) -> Object:
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
