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

from collections.abc import Mapping
from typing import Final

from ripple.changestream.tag import Operation

__all__ = [
    "ALL_EVENT_NAMES",
    "BUCKET_CREATED_PUT",
    "BUCKET_EVENT_NAMES",
    "BUCKET_REMOVED_DELETE",
    "COMMITTED_STATUSES",
    "DELETE_MARKER_STATUSES",
    "EXPIRATIONS",
    "LIFECYCLE_EXPIRATION_DELETE",
    "LIFECYCLE_EXPIRATION_DELETE_MARKER_CREATED",
    "METADATA_COLUMNS",
    "OBJECT_ACL_PUT",
    "OBJECT_CREATED_COMPLETE_MULTIPART_UPLOAD",
    "OBJECT_CREATED_COPY",
    "OBJECT_CREATED_POST",
    "OBJECT_CREATED_PUT",
    "OBJECT_METADATA_UPDATE",
    "OBJECT_REMOVED_DELETE",
    "OBJECT_REMOVED_DELETE_MARKER_CREATED",
    "OBJECT_RENAMED_RENAME",
    "OBJECT_STATUSES",
    "OBJECT_TAGGING_DELETE",
    "OBJECT_TAGGING_PUT",
    "STATUS_COMMITTED_UNVERSIONED",
    "STATUS_COMMITTED_VERSIONED",
    "STATUS_DELETE_MARKER_UNVERSIONED",
    "STATUS_DELETE_MARKER_VERSIONED",
    "STATUS_PENDING",
    "changed_columns",
    "event_name",
    "event_version",
    "is_created",
    "matches",
    "tagging_event_name",
    "update_event_names",
]

OBJECT_CREATED_PUT: Final = "ObjectCreated:Put"
OBJECT_CREATED_POST: Final = "ObjectCreated:Post"
OBJECT_CREATED_COPY: Final = "ObjectCreated:Copy"
OBJECT_CREATED_COMPLETE_MULTIPART_UPLOAD: Final = "ObjectCreated:CompleteMultipartUpload"
OBJECT_REMOVED_DELETE: Final = "ObjectRemoved:Delete"
OBJECT_REMOVED_DELETE_MARKER_CREATED: Final = "ObjectRemoved:DeleteMarkerCreated"
OBJECT_TAGGING_PUT: Final = "ObjectTagging:Put"
OBJECT_TAGGING_DELETE: Final = "ObjectTagging:Delete"
OBJECT_ACL_PUT: Final = "ObjectAcl:Put"
OBJECT_METADATA_UPDATE: Final = "ObjectMetadata:Update"
OBJECT_RENAMED_RENAME: Final = "ObjectRenamed:Rename"
LIFECYCLE_EXPIRATION_DELETE: Final = "LifecycleExpiration:Delete"
LIFECYCLE_EXPIRATION_DELETE_MARKER_CREATED: Final = "LifecycleExpiration:DeleteMarkerCreated"
# bucket events, for project-wide notifications (not a bucket notification's event types)
BUCKET_CREATED_PUT: Final = "BucketCreated:Put"
BUCKET_REMOVED_DELETE: Final = "BucketRemoved:Delete"
BUCKET_EVENT_NAMES: Final = (BUCKET_CREATED_PUT, BUCKET_REMOVED_DELETE)

ALL_EVENT_NAMES: Final = (
    OBJECT_CREATED_PUT,
    OBJECT_CREATED_POST,
    OBJECT_CREATED_COPY,
    OBJECT_CREATED_COMPLETE_MULTIPART_UPLOAD,
    OBJECT_REMOVED_DELETE,
    OBJECT_REMOVED_DELETE_MARKER_CREATED,
    OBJECT_TAGGING_PUT,
    OBJECT_TAGGING_DELETE,
    OBJECT_ACL_PUT,
    OBJECT_METADATA_UPDATE,
    OBJECT_RENAMED_RENAME,
    LIFECYCLE_EXPIRATION_DELETE,
    LIFECYCLE_EXPIRATION_DELETE_MARKER_CREATED,
)
# The names of S3's newer event types, which it sends as event structure version 2.3; ripple's
# own (`ObjectMetadata:`, `ObjectRenamed:`) are sent as 2.3 too
VERSION_2_3_KINDS: Final = (
    "ObjectTagging:",
    "ObjectAcl:",
    "ObjectMetadata:",
    "ObjectRenamed:",
    "LifecycleExpiration:",
    "BucketCreated:",
    "BucketRemoved:",
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

_CREATED_BY_OPERATION: Final[Mapping[Operation | None, str]] = {
    Operation.COPY: OBJECT_CREATED_COPY,
    Operation.COMPLETE_MULTIPART_UPLOAD: OBJECT_CREATED_COMPLETE_MULTIPART_UPLOAD,
    Operation.POST: OBJECT_CREATED_POST,
}

_PREFIX: Final = "s3:"
# transactions that expire rows: lifecycle rules and `ripple metabase expire` (TTL)
EXPIRATIONS: Final = frozenset({Operation.LIFECYCLE_EXPIRATION, Operation.TTL_DELETE})
# columns whose change is an `ObjectMetadata:Update`
METADATA_COLUMNS: Final = frozenset({"retention_mode", "retain_until", "legal_hold"})
# the operation of a transaction that changes only the column family it names
_UPDATE_OPERATIONS: Final[Mapping[Operation | None, str]] = {
    Operation.PUT_OBJECT_TAGGING: "tags",
    Operation.DELETE_OBJECT_TAGGING: "tags",
    Operation.PUT_OBJECT_ACL: "acl",
    Operation.PUT_OBJECT_RETENTION: "retention_mode",
    Operation.PUT_OBJECT_LEGAL_HOLD: "legal_hold",
}


def event_name(mod_type: str, status: int | None, operation: Operation | None = None) -> str | None:
    """The event name of one mod, or None when the mod makes no event.

    `status` is the new status for an INSERT and the old status for a DELETE; None when the
    record does not carry it (a DELETE under the NEW_ROW or NEW_VALUES value capture types,
    which is then taken for the delete of a committed row). `operation` is the transaction
    tag's `operation`; any other value than the three named above gives `ObjectCreated:Put`.
    """
    if operation in EXPIRATIONS:
        if mod_type == "INSERT" and status in DELETE_MARKER_STATUSES:
            return LIFECYCLE_EXPIRATION_DELETE_MARKER_CREATED
        if mod_type == "DELETE" and (status is None or status in COMMITTED_STATUSES):
            return LIFECYCLE_EXPIRATION_DELETE
        return None
    if mod_type == "INSERT":
        if status in OBJECT_STATUSES:
            return _CREATED_BY_OPERATION.get(operation, OBJECT_CREATED_PUT)
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


def changed_columns(
    changed: frozenset[str] | None,
    new_values: Mapping[str, object],
    operation: Operation | None,
) -> frozenset[str]:
    """The watched columns an UPDATE changed: `changed`, known when the record captures old
    values; when it does not (None), the column family the transaction's `operation` names,
    or, without one, `tags` when the new values name it (the NEW_VALUES capture gives only
    the changed columns)."""
    if changed is not None:
        return changed
    column = _UPDATE_OPERATIONS.get(operation)
    return frozenset({column} if column else {"tags"} & set(new_values))


def update_event_names(
    changed: frozenset[str], status: int | None, new_values: Mapping[str, object]
) -> list[str]:
    """The events of an UPDATE of an object's row that changed the watched columns
    `changed` (`changed_columns`), in a fixed order (tagging, ACL, metadata)."""
    if status is not None and status not in OBJECT_STATUSES:
        return []  # a delete marker or pending upload has no tags, ACL or lock settings
    names: list[str] = []
    if "tags" in changed:
        names.append(OBJECT_TAGGING_PUT if new_values.get("tags") else OBJECT_TAGGING_DELETE)
    if "acl" in changed:
        names.append(OBJECT_ACL_PUT)
    if changed & METADATA_COLUMNS:
        names.append(OBJECT_METADATA_UPDATE)
    return names


def event_version(name: str) -> str:
    """The event structure version of an event: 2.3 for the newer types, else 2.1."""
    return "2.3" if name.startswith(VERSION_2_3_KINDS) else "2.1"


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
