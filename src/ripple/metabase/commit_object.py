"""Commit an object: DELETE its pending row and INSERT the committed version, in one
transaction (never an UPDATE, so the change stream can leave updates out)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import sqlalchemy as sa

from ripple.changestream.tag import Operation, TransactionTag
from ripple.metabase.db import Metabase
from ripple.metabase.errors import PendingObjectNotFound
from ripple.metabase.rows import at_key, delete_rows, select_rows, start_key_write
from ripple.metabase.schema import objects
from ripple.metabase.store_committed import CommitResult, store_committed
from ripple.metabase.types import Checksum, Object, Retention, Status
from ripple.metabase.write_condition import WriteCondition


def commit_object(
    db: Metabase,
    pending: Object,
    *,
    size: int,
    etag: str,
    content_type: str = "",
    user_metadata: dict[str, str] | None = None,
    retention: Retention | None = None,
    legal_hold: bool = False,
    part_sizes: Sequence[int] = (),
    checksum: Checksum | None = None,
    condition: WriteCondition | None = None,
    tag: TransactionTag | None = None,
) -> CommitResult:
    """Commit the upload `begin_upload` returned as the key's newest version (a multipart
    upload's with its `part_sizes`) with its additional `checksum` (None: none, whatever
    the pending row declared); a conditional write's `condition` must still hold
    (`ConditionalRequestConflict`)."""

    def tx(conn: sa.Connection) -> CommitResult:
        bucket = start_key_write(conn, pending.location)
        rows = select_rows(
            conn,
            sa.and_(
                at_key(pending.location),
                objects.c.version == pending.version,
                objects.c.status == int(Status.PENDING),
                objects.c.stream_id == pending.stream_id,
            ),
            lock=True,
        )
        if not rows:
            raise PendingObjectNotFound(
                f"no pending upload of {pending.object_key!r} with stream {pending.stream_id}"
            )
        delete_rows(conn, rows)
        new = replace(
            rows[0],
            total_plain_size=size,
            etag=etag,
            content_type=content_type,
            user_metadata=dict(user_metadata or {}),
            retention=retention,
            legal_hold=legal_hold,
            part_sizes=tuple(part_sizes),
            checksum=checksum,
        )
        return store_committed(
            conn,
            bucket,
            new,
            db.now(),
            explicit_retention=retention is not None,
            condition=condition,
        )

    tag = (tag or TransactionTag()).defaults(operation=Operation.PUT)
    return db.run_write(tx, tag, exclude_txn_from_change_streams=False)
