"""The step every committing operation shares: remove what the new version replaces under
the bucket's versioning, and insert the committed row (an INSERT, never an UPDATE).

- unversioned: the key's one committed object is replaced;
- suspended: the key's `null` version (object or delete marker) is replaced, other versions stay;
- enabled: nothing is replaced; the new version becomes the latest.
The new row takes a version above every other row of the key, so "latest" is simply the
committed row with the highest version.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime

from sqlalchemy.engine import Connection

from ripple.changestream.capture import capture_of
from ripple.metabase.objectlock import (
    check_lock_allowed,
    check_retention_change,
    default_retention,
)
from ripple.metabase.rows import insert_rows, latest_committed, replace_null_version
from ripple.metabase.types import Bucket, Object, Retention, Status, Versioning
from ripple.metabase.write_condition import WriteCondition


@dataclass(frozen=True)
class CommitResult:
    object: Object
    removed: list[Object] = field(default_factory=list)  # versions it replaced (data to free)


def store_committed(
    conn: Connection,
    bucket: Bucket,
    new: Object,
    now: datetime,
    *,
    explicit_retention: bool,
    condition: WriteCondition | None = None,
) -> CommitResult:
    """Insert `new` (its version and status are chosen here) as the key's latest version.
    The caller has begun the write with `start_key_write`, so the key is held: a
    conditional write's `condition` is judged again here (`ConditionalRequestConflict`)."""
    if condition:
        condition.recheck(latest_committed(conn, new.location))
    retention: Retention | None = new.retention if explicit_retention else None
    check_lock_allowed(bucket, retention, new.legal_hold)
    if retention is None:
        retention = default_retention(bucket, now)
    else:
        check_retention_change(None, retention, now, bypass=False)  # retain-until in the future

    removed, version = replace_null_version(conn, bucket, new.location, now, bypass=False)

    status = (
        Status.COMMITTED_VERSIONED
        if bucket.versioning is Versioning.ENABLED
        else Status.COMMITTED_UNVERSIONED
    )
    committed = replace(
        new,
        version=version,
        status=status,
        created_at=now,
        retention=retention,
    )
    insert_rows(conn, [committed])
    capture_of(conn).default_etag(committed.etag)
    return CommitResult(committed, removed)
