"""Conditional deletes: a DeleteObject (or a DeleteObjects item) that names the ETag
(`If-Match`, `*` for any), the last-modified time or the size of what it deletes, judged in
the delete's own transaction with the key held.

What is judged is what the delete acts on: the version it names, or without one the key's
latest version, which may be a delete marker (an ETag of "", a size of 0: `*` matches it, a
real ETag does not). A key or version that does not exist is no error, as every S3 delete
of nothing: the condition is not judged and nothing happens (not even a delete marker in a
versioned bucket, which an unconditional delete of nothing places). A condition that does
not hold is `PreconditionFailed` (412) and nothing is deleted.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from ripple.metabase.errors import InvalidArgument, PreconditionFailed
from ripple.metabase.rows import require_aware
from ripple.metabase.types import Object
from ripple.metabase.write_condition import etag_matches


class UnjudgedCondition(InvalidArgument):
    """A conditional DeleteObjects item whose key an earlier item of the same request
    changed in a way the request's one read of the key cannot follow."""

    code = "InvalidRequest"


@dataclass(frozen=True)
class DeleteCondition:
    if_match: str = ""
    last_modified: datetime | None = None  # whole seconds, as HTTP and S3's XML carry it
    size: int | None = None

    def __post_init__(self) -> None:
        require_aware(self.last_modified, "last_modified")

    def __bool__(self) -> bool:
        return bool(self.if_match) or self.last_modified is not None or self.size is not None

    def judge(self, target: Object | None) -> None:
        """`PreconditionFailed` unless the condition holds for `target` (None: nothing to
        delete, which is never refused)."""
        if target is None or not self:
            return
        failed = []
        if self.if_match and not etag_matches(self.if_match, target.etag):
            failed.append(f"If-Match {self.if_match!r} (the ETag is {target.etag!r})")
        modified = target.created_at.replace(microsecond=0)
        if self.last_modified is not None and modified != self.last_modified.replace(microsecond=0):
            failed.append(f"a last-modified time of {self.last_modified.isoformat()}")
        if self.size is not None and target.total_plain_size != self.size:
            failed.append(f"a size of {self.size} (it is {target.total_plain_size})")
        if failed:
            what = "delete marker" if target.is_delete_marker else "object"
            raise PreconditionFailed(
                f"the {what} at {target.object_key!r} does not meet {', '.join(failed)}"
            )
