"""Put and get object retention (S3 PutObjectRetention / GetObjectRetention).

Only in buckets created with object lock, and only on object versions (not delete markers).
The rules are `objectlock.check_retention_change`: compliance never shortened or removed
while active; governance only with an allowed bypass. A change is an UPDATE the change
stream records (an `ObjectMetadata:Update` event); setting the retention a version already
has changes nothing and records nothing."""

from __future__ import annotations

import sqlalchemy as sa

from ripple.changestream.capture import capture_of
from ripple.changestream.tag import Operation, TransactionTag
from ripple.metabase.db import Metabase
from ripple.metabase.errors import MethodNotAllowed, ObjectLockNotEnabled
from ripple.metabase.get_object import resolve_object
from ripple.metabase.objectlock import bypass_allowed, check_retention_change
from ripple.metabase.rows import get_bucket, start_key_write, update_row
from ripple.metabase.types import Bucket, Object, ObjectLocation, Retention


def lockable_version(
    conn: sa.Connection, loc: ObjectLocation, version_id: str | None, what: str, *, write: bool
) -> tuple[Bucket, Object]:
    """The bucket and the object version a lock setting applies to; with `write`, the key
    is locked first, so the setting is judged on a version no one else is changing."""
    bucket = start_key_write(conn, loc) if write else get_bucket(conn, loc.bucket)
    if not bucket.object_lock_enabled:
        raise ObjectLockNotEnabled(
            f"bucket {loc.bucket_name!r} has no object lock configuration, so it has no {what}"
        )
    obj = resolve_object(conn, loc, version_id)
    if obj.is_delete_marker:
        raise MethodNotAllowed(f"a delete marker has no {what}")
    return bucket, obj


def put_object_retention(
    db: Metabase,
    loc: ObjectLocation,
    retention: Retention | None,
    *,
    version_id: str | None = None,
    bypass_governance: bool = False,
    can_bypass_governance: bool = False,
    tag: TransactionTag | None = None,
) -> Object:
    """Set (or with None, remove) the retention of a version; returns the version."""
    bypass = bypass_allowed(bypass_governance, can_bypass_governance)

    def tx(conn: sa.Connection) -> Object:
        _, obj = lockable_version(conn, loc, version_id, "retention", write=True)
        check_retention_change(obj.retention, retention, db.now(), bypass=bypass)
        if obj.retention == retention:
            return obj  # nothing changes, so nothing is recorded
        capture_of(conn).default_etag(obj.etag)
        update_row(
            conn,
            obj,
            retention_mode=None if retention is None else int(retention.mode),
            retain_until=None if retention is None else retention.retain_until,
        )
        return resolve_object(conn, loc, obj.version_id)

    tag = (tag or TransactionTag()).defaults(operation=Operation.PUT_OBJECT_RETENTION)
    return db.run_write(tx, tag, exclude_txn_from_change_streams=False)


def get_object_retention(
    db: Metabase, loc: ObjectLocation, *, version_id: str | None = None
) -> Retention | None:
    """The version's retention as set (it may have expired: compare with the time)."""
    with db.read() as conn:
        _, obj = lockable_version(conn, loc, version_id, "retention", write=False)
    return obj.retention
