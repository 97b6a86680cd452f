"""TTL deletes: remove the rows whose `expires_at` has passed (`ripple metabase expire`).

Expired rows (committed versions, delete markers and abandoned pending uploads) are deleted
outright, in bounded batches, one bucket per transaction. They run as *system*
transactions tagged `ttl-delete`, so a change stream with `exclude_ttl_deletes` leaves them
out. A version object lock protects (legal hold, retention not yet over) is never deleted.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from itertools import groupby

import sqlalchemy as sa

from ripple.changestream.tag import Operation, TransactionTag
from ripple.metabase.db import Metabase
from ripple.metabase.errors import ObjectLocked
from ripple.metabase.objectlock import check_deletable
from ripple.metabase.rows import (
    METADATA_COLUMNS,
    at_bucket,
    delete_rows,
    key_bytes,
    key_version_in,
    lock_keys,
    object_from_row,
    select_rows,
)
from ripple.metabase.schema import objects
from ripple.metabase.types import BucketLocation, Object

TTL_DELETE = TransactionTag(operation=Operation.TTL_DELETE)


@dataclass(frozen=True)
class ExpireResult:
    deleted: int = 0
    kept_locked: int = 0  # expired, but object lock protects them


def expire_objects(
    db: Metabase,
    *,
    now: datetime | None = None,
    batch: int = 1000,
    progress: Callable[[int], None] | None = None,
) -> ExpireResult:
    """Delete every row expired at `now` (default: the metabase clock)."""
    now = now or db.now()
    deleted = kept = 0
    after: tuple[object, ...] | None = None
    while True:
        candidates = _expired(db, now, batch, after)
        if not candidates:
            return ExpireResult(deleted, kept)
        last = candidates[-1]
        after = (last.project_id, last.bucket_name, key_bytes(last.object_key), last.version)
        for (project_id, bucket_name), rows in groupby(
            candidates, key=lambda r: (r.project_id, r.bucket_name)
        ):
            removed, locked = _expire_bucket(
                db, BucketLocation(project_id, bucket_name), list(rows), now
            )
            deleted += removed
            kept += locked
            if progress:
                progress(removed)


def _expired(
    db: Metabase, now: datetime, batch: int, after: tuple[object, ...] | None
) -> list[Object]:
    """The next `batch` expired rows in key order (after the last batch's last row)."""
    key = sa.tuple_(
        objects.c.project_id, objects.c.bucket_name, objects.c.object_key, objects.c.version
    )
    query = sa.select(*METADATA_COLUMNS).where(
        objects.c.expires_at.is_not(None), objects.c.expires_at <= now
    )
    if after is not None:
        query = query.where(key > sa.tuple_(*(sa.literal(v) for v in after)))
    query = query.order_by(*key.clauses).limit(batch)
    with db.read() as conn:
        return [object_from_row(r) for r in conn.execute(query)]


def _expire_bucket(
    db: Metabase, loc: BucketLocation, rows: list[Object], now: datetime
) -> tuple[int, int]:
    def tx(conn: sa.Connection) -> tuple[int, int]:
        keys = [key_bytes(r.object_key) for r in rows]
        lock_keys(conn, loc, keys)
        current = select_rows(
            conn,
            sa.and_(
                at_bucket(loc),
                key_version_in(conn, keys, [r.version for r in rows]),
                objects.c.expires_at.is_not(None),
                objects.c.expires_at <= now,
            ),
            lock=True,
            data=False,
        )
        doomed, locked = [], 0
        for row in current:
            try:
                check_deletable(row, now, bypass=False)
            except ObjectLocked:
                locked += 1
                continue
            doomed.append(row)
        delete_rows(conn, doomed)
        return len(doomed), locked

    # not excluded as a transaction: a TTL delete is the database's own change, which
    # only a stream's `exclude_ttl_deletes` leaves out
    return db.run_write(tx, TTL_DELETE, system=True, exclude_txn_from_change_streams=False)
