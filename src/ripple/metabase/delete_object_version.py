"""Delete an exact version: what S3 DeleteObject does with a version ID.

The version is removed for good. Object lock may refuse (legal hold; active retention
unless governance mode is bypassed by a caller allowed to). Deleting a delete marker is
always allowed, and makes the version below it the latest again. A version that does not
exist is not an error (S3 answers 204); a malformed version ID is `InvalidArgument`.
"""

from __future__ import annotations

import sqlalchemy as sa

from ripple.changestream.tag import Operation, TransactionTag
from ripple.metabase.db import Metabase
from ripple.metabase.delete_condition import DeleteCondition
from ripple.metabase.delete_object import DeleteResult
from ripple.metabase.objectlock import bypass_allowed, check_deletable
from ripple.metabase.rows import delete_rows, exact_version, key_bytes, start_key_write
from ripple.metabase.types import ObjectLocation, decode_version_id


def delete_object_version(
    db: Metabase,
    loc: ObjectLocation,
    version_id: str,
    *,
    bypass_governance: bool = False,
    can_bypass_governance: bool = False,
    condition: DeleteCondition | None = None,
    tag: TransactionTag | None = None,
) -> DeleteResult:
    """Delete one version; a conditional delete's `condition` is judged against it."""
    key_bytes(loc.object_key)
    ref = decode_version_id(version_id)
    bypass = bypass_allowed(bypass_governance, can_bypass_governance)

    def tx(conn: sa.Connection) -> DeleteResult:
        start_key_write(conn, loc)
        target = exact_version(conn, loc, ref, lock=True)
        if target is None:
            return DeleteResult()
        if condition:
            condition.judge(target)
        check_deletable(target, db.now(), bypass=bypass)
        delete_rows(conn, [target])
        return DeleteResult(removed=[target])

    tag = (tag or TransactionTag()).defaults(operation=Operation.DELETE)
    return db.run_write(tx, tag, exclude_txn_from_change_streams=False)
