"""One S3 event record: the message (event structure 2.1, or 2.3 for the newer types) and
what each event type adds to `s3.object` (`EventShape`), for `ripple.events.s3` and
`ripple.events.buckets`.

`ObjectAcl:Put` adds `grants`, `ObjectMetadata:Update` `metadataUpdate`,
`LifecycleExpiration:*` `lifecycleEventData`. Events about no one object (a prefix's
`ObjectRenamed:Rename`, bucket events) have `size` 0 and an empty `eTag`, so that typed
consumers requiring both take them; `sourceIPAddress` is never empty (the system's name for
a change no request made). Pure: no I/O.

Every field and why: docs/events.md, "Fields", "Renames, ACLs, metadata updates, lifecycle
and bucket events" and "Typed AWS consumers".
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from ripple.changestream.tag import Operation, TransactionTag
from ripple.events.keys import encode_key
from ripple.events.names import (
    EXPIRATIONS,
    OBJECT_ACL_PUT,
    OBJECT_METADATA_UPDATE,
    STATUS_COMMITTED_VERSIONED,
    STATUS_DELETE_MARKER_VERSIONED,
    event_version,
)
from ripple.events.sequencer import event_time, sequencer, timestamp_ns

__all__ = [
    "AWS_EVENT_SOURCE",
    "DEFAULT_REGION",
    "DEFAULT_SETTINGS",
    "NO_OBJECT",
    "NULL_VERSION_ID",
    "SYSTEM_PRINCIPAL",
    "VERSIONED_STATUSES",
    "EventRecord",
    "EventSettings",
    "EventShape",
    "event_message",
    "object_details",
    "object_metadata",
    "object_tags",
    "optional_int",
    "version_id",
]

NULL_VERSION_ID: Final = "null"
DEFAULT_REGION: Final = "us-east-1"
AWS_EVENT_SOURCE: Final = "aws:s3"
AWS_SYSTEM_NAME: Final = "s3.amazonaws.com"


S3_SCHEMA_VERSION: Final = "1.0"


VERSIONED_STATUSES: Final = frozenset({STATUS_COMMITTED_VERSIONED, STATUS_DELETE_MARKER_VERSIONED})


@dataclass(frozen=True)
class EventSettings:
    """What an event message says that no change record does."""

    event_source: str = "ripple:s3"
    region: str = DEFAULT_REGION  # the gateway's; none configured: us-east-1, as S3 says
    arn_partition: str = "aws"  # bucket ARN arn:<partition>:s3:::<bucket>
    configuration_id: str = "ObjectEvents"

    @property
    def system_name(self) -> str:
        """Who made a change no request made, as principal and source: `ripple`, or, when
        the events speak as Amazon S3's (`aws:s3`), `s3.amazonaws.com`, as S3 names itself."""
        return AWS_SYSTEM_NAME if self.event_source == AWS_EVENT_SOURCE else SYSTEM_PRINCIPAL


DEFAULT_SETTINGS: Final = EventSettings()


@dataclass(frozen=True)
class EventRecord:
    """One S3 event and what routing needs to know about it without reading the message."""

    project_id: str  # private project id (routing key), from the mod keys
    bucket: str
    key: str  # the raw (unencoded) key
    event_name: str  # e.g. "ObjectCreated:Put"
    sequencer: str
    message: dict[str, Any]  # the single S3 event record (an element of "Records")
    # the object's user metadata (names without x-amz-meta-) and tags, when the record
    # carries them (None: the stream did not watch the column): for S3Metadata and S3Tags
    # filter rules and for the topics that add them to events; not part of the message
    metadata: Mapping[str, str] | None = None
    tags: Mapping[str, str] | None = None
    # a rename's events come both ways: "s3" (ObjectRemoved:Delete + ObjectCreated:Put per
    # key) and "single" (ObjectRenamed:Rename); a notification gets those of its
    # `rename-events` setting. None: not a rename's, for every notification.
    rename: str | None = None


def version_id(version: int, stream_id: str) -> str:
    """The S3 version ID of a versioned row: 32 hex digits, version then half the stream id.

    The same as `ripple.metabase.types.encode_version_id`, which this package must not
    import; a test checks that the two agree.
    """
    return version.to_bytes(8, "big", signed=True).hex() + uuid.UUID(stream_id).bytes[:8].hex()


# events that describe the object as it is afterwards (size, eTag)
_DESCRIBED_KINDS: Final = (
    "ObjectCreated:",
    "ObjectTagging:",
    "ObjectAcl:",
    "ObjectMetadata:",
    "ObjectRenamed:",
)


_RETENTION_MODES: Final = {1: "GOVERNANCE", 2: "COMPLIANCE"}


# transactions no request made (lifecycle): the principal and source S3 names itself as
SYSTEM_PRINCIPAL: Final = "ripple"
# the size and eTag of an event about no one object (a prefix's rename, a bucket)
NO_OBJECT: Final = {"size": 0, "eTag": ""}


@dataclass(frozen=True)
class EventShape:
    """What every event of one mod shares."""

    settings: EventSettings
    commit_ns: int
    tag: TransactionTag
    owner: str
    keys: Mapping[str, Any]
    values: Mapping[str, Any]
    status: int | None
    whole: bool = True  # about one object (not a prefix): its size, eTag and version

    def event(
        self,
        name: str,
        project_id: str,
        bucket: str,
        key: str,
        ordinal: int,
        extra: Mapping[str, Any],
        rename: str | None = None,
    ) -> EventRecord:
        seq = sequencer(self.commit_ns, ordinal)
        obj: dict[str, Any] = {"key": encode_key(key)}
        if self.whole and name.startswith(_DESCRIBED_KINDS):
            size = optional_int(self.values.get("total_plain_size"))
            if size is not None:
                obj["size"] = size
            etag = self.values.get("etag") or self.tag.etag  # the row's, since 0011
            if etag:
                obj["eTag"] = str(etag).strip('"')
        elif not self.whole:  # a prefix: no one object, size 0 and an empty eTag
            obj.update(NO_OBJECT)
        vid = _version_id(self.status, self.keys, self.values, bucket, self.tag)
        if vid is not None and self.whole:
            obj["versionId"] = vid
        obj["sequencer"] = seq
        obj.update(extra)
        body = event_message(self.settings, self.commit_ns, name, self.tag, bucket, self.owner, obj)
        if name.startswith("LifecycleExpiration:"):
            rule = {"ruleId": self.tag.lifecycle_rule}
            body["lifecycleEventData"] = {"expirationEventData": rule}
        return EventRecord(
            project_id,
            bucket,
            key,
            name,
            seq,
            body,
            # a prefix's event is about no one object: no metadata or tag rule holds for it
            object_metadata(self.values) if self.whole else None,
            object_tags(self.values) if self.whole else None,
            rename,
        )


def object_details(name: str, shape: EventShape, changed: frozenset[str] | None) -> dict[str, Any]:
    """The members an event type adds to `s3.object`."""
    if name == OBJECT_ACL_PUT:
        return {"grants": _grants(shape.values.get("acl"), shape.owner)}
    if name == OBJECT_METADATA_UPDATE:
        return {"metadataUpdate": _metadata_update(shape, changed)}
    return {}


def _grants(acl: Any, owner: str) -> list[Any]:
    """The grants of a stored ACL; NULL is the canned private ACL: the owner's alone."""
    if isinstance(acl, Mapping) and isinstance(acl.get("grants"), list):
        return list(acl["grants"])
    return [{"grantee": {"type": "CanonicalUser", "id": owner}, "permission": "FULL_CONTROL"}]


def _metadata_update(shape: EventShape, changed: frozenset[str] | None) -> dict[str, Any]:
    """What an `ObjectMetadata:Update` says: which settings changed and their new values."""
    values = shape.values
    if shape.tag.operation is Operation.COPY:  # a copy onto itself rewrites metadata and times
        update: dict[str, Any] = {"changed": ["lastModified", "userMetadata"]}
        update["lastModified"] = event_time(shape.commit_ns)
        if "user_metadata" in values:
            update["userMetadata"] = object_metadata(values) or {}
        return update
    changed = changed or frozenset()  # an UPDATE's always given (`changed_columns`)
    kinds = []
    if changed & {"retention_mode", "retain_until"}:
        kinds.append("retention")
    if "legal_hold" in changed:
        kinds.append("legalHold")
    update = {"changed": kinds}
    if "legal_hold" in values:
        update["legalHold"] = "ON" if values["legal_hold"] else "OFF"
    if "retention_mode" in values:
        mode = optional_int(values.get("retention_mode"))
        until = values.get("retain_until")
        update["retention"] = (
            None
            if mode is None or not until
            else {
                "mode": _RETENTION_MODES.get(mode, str(mode)),
                "retainUntilDate": event_time(timestamp_ns(str(until))),
            }
        )
    return update


def object_metadata(values: Mapping[str, Any]) -> dict[str, str] | None:
    """The user metadata a record's values carry: `{}` when the object has none, None when
    the stream did not watch `user_metadata` (the values do not name it)."""
    return _mapping(values, "user_metadata")


def object_tags(values: Mapping[str, Any]) -> dict[str, str] | None:
    """The tags a record's values carry: those of the row as of the transaction (the new
    ones for an INSERT or UPDATE, the removed row's for a DELETE); `{}` when it has none,
    None when the stream did not watch `tags` (the values do not name it)."""
    return _mapping(values, "tags")


def _mapping(values: Mapping[str, Any], column: str) -> dict[str, str] | None:
    if column not in values:
        return None
    value = values[column]
    if not isinstance(value, Mapping):
        return {}  # NULL: none
    return {str(k): str(v) for k, v in value.items()}


def event_message(
    settings: EventSettings,
    commit_ns: int,
    name: str,
    tag: TransactionTag,
    bucket: str,
    owner: str,
    obj: dict[str, Any],
) -> dict[str, Any]:
    system = settings.system_name
    by_system = tag.operation in EXPIRATIONS
    return {
        "eventVersion": event_version(name),
        "eventSource": settings.event_source,
        "awsRegion": settings.region,
        "eventTime": event_time(commit_ns),
        "eventName": name,
        "userIdentity": {"principalId": tag.principal or (system if by_system else "")},
        "requestParameters": {"sourceIPAddress": tag.source_ip or system},
        "responseElements": {
            "x-amz-request-id": tag.request_id or "",
            "x-amz-id-2": tag.host_id or "",
        },
        "s3": {
            "s3SchemaVersion": S3_SCHEMA_VERSION,
            "configurationId": settings.configuration_id,
            "bucket": {
                "name": bucket,
                "ownerIdentity": {"principalId": owner},
                "arn": f"arn:{settings.arn_partition}:s3:::{bucket}",
            },
            "object": obj,
        },
    }


def _version_id(
    status: int | None,
    keys: Mapping[str, Any],
    values: Mapping[str, Any],
    bucket: str,
    tag: TransactionTag,
) -> str | None:
    """The event's versionId, or None to leave it out (see docs/events.md)."""
    if status in VERSIONED_STATUSES:
        stream_id = values.get("stream_id")
        if not stream_id:
            return None  # written before the stream watched stream_id
        return version_id(int(keys["version"]), str(stream_id))
    if status is not None and tag.is_versioned(bucket):
        return NULL_VERSION_ID  # status 3 or 6: the key's null version
    return None


def optional_int(value: Any) -> int | None:
    """An INT64 column value: JSON number or (as Spanner writes INT64) decimal string."""
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise ValueError(f"not an INT64 value: {value!r}")
    return int(value)
