"""Conditional writes (S3, 2024): a PutObject, CopyObject or CompleteMultipartUpload that
names `If-None-Match` (write only if the key has no object: `*`, or none with these ETags) or
`If-Match` (only if its object has one of these ETags, `*`: any object).

A condition is judged twice. When the request arrives (`judge`, by the caller, before the
body is read): one that does not hold is `PreconditionFailed` (412), or `NoSuchKey` (404)
for an `If-Match` on a key without an object. Then again inside the commit's own
transaction, under the key's lock (`store_committed`): one that held at arrival and no
longer holds means a concurrent write to the key won meanwhile, which S3 answers with
`ConditionalRequestConflict` (409); the client retries.

A key whose latest version is a delete marker has no object. ETags may be quoted, weak
(`W/`) or a comma-separated list.
"""

from __future__ import annotations

from dataclasses import dataclass

from ripple.metabase.db import Metabase
from ripple.metabase.errors import (
    ConditionalRequestConflict,
    ObjectNotFound,
    PreconditionFailed,
)
from ripple.metabase.rows import get_bucket, key_bytes, latest_committed
from ripple.metabase.types import Object, ObjectLocation


def etag_matches(header: str, etag: str) -> bool:
    """Does an `If-Match` / `If-None-Match` value name `etag` (or `*`)?"""
    candidates = [c.strip().removeprefix("W/").strip('"') for c in header.split(",")]
    return "*" in candidates or etag in candidates


@dataclass(frozen=True)
class WriteCondition:
    if_match: str = ""
    if_none_match: str = ""

    def __bool__(self) -> bool:
        return bool(self.if_match or self.if_none_match)

    def failure(self, current: Object | None) -> str | None:
        """Why the condition does not hold for the key's latest version, or None."""
        if current is not None and current.is_delete_marker:
            current = None
        if self.if_match and (current is None or not etag_matches(self.if_match, current.etag)):
            state = "has no object" if current is None else f"holds ETag {current.etag!r}"
            return f"If-Match {self.if_match!r} does not hold: the key {state}"
        if (
            self.if_none_match
            and current is not None
            and etag_matches(self.if_none_match, current.etag)
        ):
            return f"If-None-Match {self.if_none_match!r} does not hold: the key has an object"
        return None

    def judge(self, current: Object | None, key: str) -> None:
        """At the request's arrival: `PreconditionFailed`, or `ObjectNotFound` for an
        If-Match on a key without an object."""
        reason = self.failure(current)
        if reason is None:
            return
        if self.if_match and (current is None or current.is_delete_marker):
            raise ObjectNotFound(f"no such key {key!r}: {reason}")
        raise PreconditionFailed(f"at least one of the preconditions did not hold: {reason}")

    def recheck(self, current: Object | None) -> None:
        """In the commit's transaction: a condition that no longer holds lost a race."""
        reason = self.failure(current)
        if reason is not None:
            raise ConditionalRequestConflict(
                f"a concurrent write changed the key while this request was in flight ({reason}); "
                "retry the request"
            )


def check_write_condition(db: Metabase, loc: ObjectLocation, condition: WriteCondition) -> None:
    """Judge a conditional write against the key as it is now, when the request arrives."""
    if not condition:
        return
    key_bytes(loc.object_key)
    with db.read() as conn:
        get_bucket(conn, loc.bucket)
        current = latest_committed(conn, loc)
    condition.judge(current, loc.object_key)
