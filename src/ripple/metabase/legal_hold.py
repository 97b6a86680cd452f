"""Put and get an object version's legal hold (S3 PutObjectLegalHold / GetObjectLegalHold).

A legal hold has no expiry and stops the version from being deleted by anyone, until it is
turned off. Only in buckets created with object lock, only on object versions. A change is
an UPDATE the change stream records (an `ObjectMetadata:Update` event); setting the hold a
version already has changes nothing and records nothing."""

from __future__ import annotations

import sqlalchemy as sa

from ripple.changestream.capture import capture_of
from ripple.changestream.tag import Operation, TransactionTag
from ripple.metabase.db import Metabase
from ripple.metabase.get_object import resolve_object
from ripple.metabase.retention import lockable_version
from ripple.metabase.rows import update_row
from ripple.metabase.types import Object, ObjectLocation


def put_object_legal_hold(
    db: Metabase,
    loc: ObjectLocation,
    on: bool,
    *,
    version_id: str | None = None,
    tag: TransactionTag | None = None,
) -> Object:
    def tx(conn: sa.Connection) -> Object:
        _, obj = lockable_version(conn, loc, version_id, "legal hold", write=True)
        if obj.legal_hold == on:
            return obj  # nothing changes, so nothing is recorded
        capture_of(conn).default_etag(obj.etag)
        update_row(conn, obj, legal_hold=on)
        return resolve_object(conn, loc, obj.version_id)

    tag = (tag or TransactionTag()).defaults(operation=Operation.PUT_OBJECT_LEGAL_HOLD)
    return db.run_write(tx, tag, exclude_txn_from_change_streams=False)


def get_object_legal_hold(
    db: Metabase, loc: ObjectLocation, *, version_id: str | None = None
) -> bool:
    with db.read() as conn:
        _, obj = lockable_version(conn, loc, version_id, "legal hold", write=False)
    return obj.legal_hold
