"""Delete last committed: what S3 DeleteObject does without a version ID.

- versioning enabled: a delete marker becomes the latest version; nothing is deleted,
  even when the key has no versions at all;
- suspended: a `null` delete marker replaces the key's `null` version, if it has one;
- unversioned: the object is deleted, no marker; a missing key is not an error.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

import sqlalchemy as sa

from ripple.changestream.tag import Operation, TransactionTag
from ripple.metabase.db import Metabase
from ripple.metabase.delete_condition import DeleteCondition
from ripple.metabase.objectlock import bypass_allowed
from ripple.metabase.rows import (
    insert_rows,
    key_bytes,
    latest_committed,
    new_stream_id,
    next_version,
    remove_null_version,
    start_key_write,
)
from ripple.metabase.types import Bucket, Object, ObjectLocation, Status, Versioning


@dataclass(frozen=True)
class DeleteResult:
    removed: list[Object] = field(default_factory=list)  # rows deleted (data to free)
    marker: Object | None = None  # the delete marker created, if any


def delete_object(
    db: Metabase,
    loc: ObjectLocation,
    *,
    bypass_governance: bool = False,
    can_bypass_governance: bool = False,
    condition: DeleteCondition | None = None,
    tag: TransactionTag | None = None,
) -> DeleteResult:
    """Delete the key's latest version as the bucket's versioning says; a conditional
    delete's `condition` is judged against that latest version (a delete marker too)."""
    key_bytes(loc.object_key)
    bypass = bypass_allowed(bypass_governance, can_bypass_governance)

    def tx(conn: sa.Connection) -> DeleteResult:
        bucket = start_key_write(conn, loc)
        if condition:
            current = latest_committed(conn, loc)
            if current is None:  # nothing to delete: no error, and no delete marker either
                return DeleteResult()
            condition.judge(current)
        now = db.now()
        removed = remove_null_version(conn, bucket, loc, now, bypass=bypass)
        marker = None
        if bucket.versioning is not Versioning.UNVERSIONED:
            marker = delete_marker(bucket, loc, next_version(conn, loc), now)
            insert_rows(conn, [marker])
        return DeleteResult(removed, marker)

    tag = (tag or TransactionTag()).defaults(operation=Operation.DELETE)
    return db.run_write(tx, tag, exclude_txn_from_change_streams=False)


def delete_marker(bucket: Bucket, loc: ObjectLocation, version: int, now: datetime) -> Object:
    """A delete marker for `loc` under the bucket's versioning (never for unversioned)."""
    if bucket.versioning is Versioning.UNVERSIONED:
        raise ValueError("an unversioned bucket has no delete markers")
    status = (
        Status.DELETE_MARKER_VERSIONED
        if bucket.versioning is Versioning.ENABLED
        else Status.DELETE_MARKER_UNVERSIONED
    )
    return Object(
        project_id=loc.project_id,
        bucket_name=loc.bucket_name,
        object_key=loc.object_key,
        version=version,
        stream_id=new_stream_id(),
        status=status,
        created_at=now,
    )
