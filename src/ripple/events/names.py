"""S3 event names: which change (mod type, row status, operation) is which event, and matching.

Names in event messages have no `s3:` prefix (`ObjectCreated:Put`); the event types of a
notification configuration do (`s3:ObjectCreated:*`, `s3:ObjectRemoved:Delete`).

- INSERT of a row with new status 3 or 4: `ObjectCreated:Put`, or `ObjectCreated:Copy`,
  `ObjectCreated:CompleteMultipartUpload`, `ObjectCreated:Post` when the transaction tag's
  operation is `copy`, `complete-multipart-upload` or `post`.
- INSERT, new status 5 or 6: `ObjectRemoved:DeleteMarkerCreated`.
- DELETE, old status 3, 4, 5 or 6: `ObjectRemoved:Delete`; also when the old status is
  unknown (value capture types without old values).
- UPDATE of an object (new status 3 or 4, or unknown) whose `tags` changed:
  `ObjectTagging:Put` when it has tags afterwards, `ObjectTagging:Delete` when it has none
  (`tagging_event_name`). Other UPDATEs make no event.
- DELETE of a pending row (old status 1), INSERT of a pending row: no event.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "ALL_EVENT_NAMES",
    "COMMITTED_STATUSES",
    "DELETE_MARKER_STATUSES",
    "OBJECT_CREATED_COMPLETE_MULTIPART_UPLOAD",
    "OBJECT_CREATED_COPY",
    "OBJECT_CREATED_POST",
    "OBJECT_CREATED_PUT",
    "OBJECT_REMOVED_DELETE",
    "OBJECT_REMOVED_DELETE_MARKER_CREATED",
    "OBJECT_STATUSES",
    "OBJECT_TAGGING_DELETE",
    "OBJECT_TAGGING_PUT",
    "STATUS_COMMITTED_UNVERSIONED",
    "STATUS_COMMITTED_VERSIONED",
    "STATUS_DELETE_MARKER_UNVERSIONED",
    "STATUS_DELETE_MARKER_VERSIONED",
    "STATUS_PENDING",
    "event_name",
    "is_created",
    "matches",
    "tagging_event_name",
]

OBJECT_CREATED_PUT: Final = "ObjectCreated:Put"
OBJECT_CREATED_POST: Final = "ObjectCreated:Post"
OBJECT_CREATED_COPY: Final = "ObjectCreated:Copy"
OBJECT_CREATED_COMPLETE_MULTIPART_UPLOAD: Final = "ObjectCreated:CompleteMultipartUpload"
OBJECT_REMOVED_DELETE: Final = "ObjectRemoved:Delete"
OBJECT_REMOVED_DELETE_MARKER_CREATED: Final = "ObjectRemoved:DeleteMarkerCreated"
OBJECT_TAGGING_PUT: Final = "ObjectTagging:Put"
OBJECT_TAGGING_DELETE: Final = "ObjectTagging:Delete"

ALL_EVENT_NAMES: Final = (
    OBJECT_CREATED_PUT,
    OBJECT_CREATED_POST,
    OBJECT_CREATED_COPY,
    OBJECT_CREATED_COMPLETE_MULTIPART_UPLOAD,
    OBJECT_REMOVED_DELETE,
    OBJECT_REMOVED_DELETE_MARKER_CREATED,
    OBJECT_TAGGING_PUT,
    OBJECT_TAGGING_DELETE,
)

# Row statuses of the `objects` table (DESIGN.md "Objects and statuses"), repeated here
# because `ripple.events` imports nothing from the metabase.
STATUS_PENDING: Final = 1
STATUS_COMMITTED_UNVERSIONED: Final = 3
STATUS_COMMITTED_VERSIONED: Final = 4
STATUS_DELETE_MARKER_VERSIONED: Final = 5
STATUS_DELETE_MARKER_UNVERSIONED: Final = 6

OBJECT_STATUSES: Final = frozenset({STATUS_COMMITTED_UNVERSIONED, STATUS_COMMITTED_VERSIONED})
DELETE_MARKER_STATUSES: Final = frozenset(
    {STATUS_DELETE_MARKER_VERSIONED, STATUS_DELETE_MARKER_UNVERSIONED}
)
COMMITTED_STATUSES: Final = OBJECT_STATUSES | DELETE_MARKER_STATUSES

_CREATED_BY_OPERATION: Final = {
    "copy": OBJECT_CREATED_COPY,
    "complete-multipart-upload": OBJECT_CREATED_COMPLETE_MULTIPART_UPLOAD,
    "post": OBJECT_CREATED_POST,
}

_PREFIX: Final = "s3:"


def event_name(mod_type: str, status: int | None, operation: str | None = None) -> str | None:
    """The event name of one mod, or None when the mod makes no event.

    `status` is the new status for an INSERT and the old status for a DELETE; None when the
    record does not carry it (a DELETE under the NEW_ROW or NEW_VALUES value capture types,
    which is then taken for the delete of a committed row). `operation` is the transaction
    tag's `operation`; any other value than the three named above gives `ObjectCreated:Put`.
    """
    if mod_type == "INSERT":
        if status in OBJECT_STATUSES:
            return _CREATED_BY_OPERATION.get(operation or "", OBJECT_CREATED_PUT)
        if status in DELETE_MARKER_STATUSES:
            return OBJECT_REMOVED_DELETE_MARKER_CREATED
        return None
    if mod_type == "DELETE" and (status is None or status in COMMITTED_STATUSES):
        return OBJECT_REMOVED_DELETE
    return None


def tagging_event_name(status: int | None, tags_after: object) -> str | None:
    """The event of an UPDATE that changed an object's tags: `ObjectTagging:Put` when it
    has tags afterwards (`tags_after`, the new `tags` value, is a non-empty object),
    `ObjectTagging:Delete` when it has none. None for a row that is not an object (a delete
    marker or a pending upload has no tags); `status` None (not recorded) counts as an
    object."""
    if status is not None and status not in OBJECT_STATUSES:
        return None
    return OBJECT_TAGGING_PUT if tags_after else OBJECT_TAGGING_DELETE


def is_created(name: str) -> bool:
    """Whether the event name is an `ObjectCreated:*` one (those carry size and eTag)."""
    return name.removeprefix(_PREFIX).startswith("ObjectCreated:")


def matches(pattern: str, name: str) -> bool:
    """Whether an event type of a notification configuration selects an event name.

    `s3:ObjectCreated:*` selects every `ObjectCreated:…` name; `s3:ObjectRemoved:Delete` only
    `ObjectRemoved:Delete`. The `s3:` prefix is optional on both sides, and a `*` is only a
    wildcard as the whole last part (as in S3).
    """
    pattern = pattern.removeprefix(_PREFIX)
    name = name.removeprefix(_PREFIX)
    if pattern.endswith(":*"):
        return name.startswith(pattern[:-1]) and len(name) > len(pattern) - 1
    return pattern == name
