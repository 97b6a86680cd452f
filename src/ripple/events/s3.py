"""Data change records of one transaction → S3 event messages (event structure version 2.1;
2.3 for `ObjectTagging:*`, as Amazon S3 sends them).

`s3_events` takes the change records of one transaction of the `bucket_eventing` stream
(docs/changestream.md) and returns one `EventRecord` per S3 event, in the transaction's
order; `message` and `to_json` wrap event records into the `{"Records": [...]}` message.
The field-by-field mapping is DESIGN.md's "Change record → S3 event message (2.1)" and
docs/events.md. Pure: no I/O, and the bucket owner comes from the caller (`owners`).
"""

from __future__ import annotations

import json
import uuid
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from ripple.events.keys import encode_key
from ripple.events.names import (
    COMMITTED_STATUSES,
    STATUS_COMMITTED_VERSIONED,
    STATUS_DELETE_MARKER_VERSIONED,
    event_name,
    tagging_event_name,
)
from ripple.events.sequencer import event_time, sequencer, timestamp_ns
from ripple.events.tag import TransactionTag, parse_transaction_tag

__all__ = [
    "DEFAULT_SETTINGS",
    "NULL_VERSION_ID",
    "EventRecord",
    "EventSettings",
    "message",
    "s3_events",
    "to_json",
    "version_id",
]

NULL_VERSION_ID: Final = "null"
EVENT_VERSION: Final = "2.1"
# Amazon S3 sends its newer event types (ACL, tagging, lifecycle, ...) as version 2.3
TAGGING_EVENT_VERSION: Final = "2.3"
S3_SCHEMA_VERSION: Final = "1.0"
_TABLE: Final = "objects"
_VERSIONED_STATUSES: Final = frozenset({STATUS_COMMITTED_VERSIONED, STATUS_DELETE_MARKER_VERSIONED})
_NULL_STATUSES: Final = frozenset(COMMITTED_STATUSES) - _VERSIONED_STATUSES  # 3 and 6


@dataclass(frozen=True)
class EventSettings:
    """What an event message says that no change record does."""

    event_source: str = "ripple:s3"
    region: str = ""
    arn_partition: str = "aws"  # bucket ARN arn:<partition>:s3:::<bucket>
    configuration_id: str = "ObjectEvents"


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


def version_id(version: int, stream_id: str) -> str:
    """The S3 version ID of a versioned row: 32 hex digits, version then half the stream id.

    The same as `ripple.metabase.types.encode_version_id`, which this package must not
    import; a test checks that the two agree.
    """
    return version.to_bytes(8, "big", signed=True).hex() + uuid.UUID(stream_id).bytes[:8].hex()


def s3_events(
    records: Sequence[Mapping[str, Any]],
    *,
    owners: Mapping[str, str] | Callable[[str], str],
    settings: EventSettings = DEFAULT_SETTINGS,
) -> list[EventRecord]:
    """The S3 events of one transaction's data change records, in the transaction's order.

    `records` may come from several partitions, in any order: they are ordered by
    `record_sequence`, then the mods of a record keep their order. `owners` gives the public
    id of a private project id (the bucket owner); a mapping without the project is a
    KeyError. Records of other tables and heartbeats make no events; an UPDATE makes one
    only when it changed an object's tags (`ObjectTagging:Put` / `ObjectTagging:Delete`).
    """
    ordered = sorted((r for r in records if "heartbeat_record" not in r), key=_record_sequence)
    transactions = {r["server_transaction_id"] for r in ordered if "server_transaction_id" in r}
    if len(transactions) > 1:
        raise ValueError(
            "s3_events takes the records of one transaction, got transactions "
            + ", ".join(sorted(map(str, transactions)))
        )
    replaced = _replaced_locations(ordered)
    owner_of = _owner_lookup(owners)
    tags: dict[str, TransactionTag] = {}
    events: list[EventRecord] = []
    for record in ordered:
        mod_type = record.get("mod_type")
        if record.get("table_name", _TABLE) != _TABLE or mod_type not in _MOD_TYPES:
            continue
        old_values = _captures_old_values(record)
        raw_tag = record.get("transaction_tag") or ""
        tag = tags.get(raw_tag)
        if tag is None:
            tag = tags[raw_tag] = parse_transaction_tag(raw_tag)
        commit_ns = timestamp_ns(record["commit_timestamp"])
        for mod in record.get("mods") or ():
            keys = mod["keys"]
            values = mod.get("old_values" if mod_type == "DELETE" else "new_values") or {}
            status = _optional_int(values.get("status"))
            if mod_type == "UPDATE":
                name = _tagging_change(mod, status, old_values=old_values)
            else:
                name = event_name(mod_type, status, tag.operation)
            if name is None:
                continue
            project_id = str(keys["project_id"])
            bucket = str(keys["bucket_name"])
            key = str(keys["object_key"])
            if mod_type == "DELETE" and (project_id, bucket, key) in replaced[status]:
                continue  # an overwrite: S3 reports only the new object or delete marker
            seq = sequencer(commit_ns, len(events))
            obj: dict[str, Any] = {"key": encode_key(key)}
            if not name.startswith("ObjectRemoved:"):  # created and tagging events
                size = _optional_int(values.get("total_plain_size"))
                if size is not None:
                    obj["size"] = size
                if tag.etag:
                    obj["eTag"] = tag.etag.strip('"')
            vid = _version_id(status, keys, values, bucket, tag)
            if vid is not None:
                obj["versionId"] = vid
            obj["sequencer"] = seq
            body = _message(settings, commit_ns, name, tag, bucket, owner_of(project_id), obj)
            events.append(
                EventRecord(
                    project_id, bucket, key, name, seq, body, _metadata(values), _tags(values)
                )
            )
    return events


_MOD_TYPES: Final = frozenset({"INSERT", "UPDATE", "DELETE"})


def _captures_old_values(record: Mapping[str, Any]) -> bool:
    """Whether the record's value capture type gives the old values of changed columns."""
    capture = record.get("value_capture_type") or "OLD_AND_NEW_VALUES"
    return capture in ("OLD_AND_NEW_VALUES", "NEW_ROW_AND_OLD_VALUES")


def _tagging_change(mod: Mapping[str, Any], status: int | None, *, old_values: bool) -> str | None:
    """The event of an UPDATE mod: a tagging event when it changed `tags`, else None.

    With old values captured, `tags` among the old values says it changed; without them
    (NEW_VALUES), `tags` among the new values does: that capture type gives only the changed
    columns. (NEW_ROW gives every watched column, so there every recorded UPDATE of an
    object counts as a tagging change.)"""
    changed = mod.get("old_values" if old_values else "new_values") or {}
    if "tags" not in changed:
        return None
    return tagging_event_name(status, (mod.get("new_values") or {}).get("tags"))


def _metadata(values: Mapping[str, Any]) -> dict[str, str] | None:
    """The user metadata a record's values carry: `{}` when the object has none, None when
    the stream did not watch `user_metadata` (the values do not name it)."""
    return _mapping(values, "user_metadata")


def _tags(values: Mapping[str, Any]) -> dict[str, str] | None:
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


def message(events: Sequence[EventRecord]) -> dict[str, Any]:
    """The S3 event message of some event records: `{"Records": [...]}`."""
    return {"Records": [e.message for e in events]}


def to_json(events: Sequence[EventRecord]) -> bytes:
    """The S3 event message of some event records as compact UTF-8 JSON."""
    return json.dumps(message(events), separators=(",", ":"), ensure_ascii=False).encode()


def _message(
    settings: EventSettings,
    commit_ns: int,
    name: str,
    tag: TransactionTag,
    bucket: str,
    owner: str,
    obj: dict[str, Any],
) -> dict[str, Any]:
    return {
        "eventVersion": TAGGING_EVENT_VERSION
        if name.startswith("ObjectTagging:")
        else EVENT_VERSION,
        "eventSource": settings.event_source,
        "awsRegion": settings.region,
        "eventTime": event_time(commit_ns),
        "eventName": name,
        "userIdentity": {"principalId": tag.principal or ""},
        "requestParameters": {"sourceIPAddress": tag.source_ip or ""},
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
    if status in _VERSIONED_STATUSES:
        stream_id = values.get("stream_id")
        if not stream_id:
            return None  # written before the stream watched stream_id
        return version_id(int(keys["version"]), str(stream_id))
    if status is not None and tag.is_versioned(bucket):
        return NULL_VERSION_ID  # status 3 or 6: the key's null version
    return None


def _replaced_locations(
    records: Sequence[Mapping[str, Any]],
) -> dict[int | None, set[tuple[str, str, str]]]:
    """Per old status, the (project, bucket, key) whose DELETE of that status is an overwrite.

    A `null` version (status 3 or 6) the transaction deletes is replaced when it inserts a new
    `null` version of the key; other versions it deletes are real deletes. A DELETE without
    old values (NEW_ROW / NEW_VALUES capture) counts as replaced by any committed row."""
    null: set[tuple[str, str, str]] = set()
    committed: set[tuple[str, str, str]] = set()
    for record in records:
        if record.get("mod_type") != "INSERT" or record.get("table_name", _TABLE) != _TABLE:
            continue
        for mod in record.get("mods") or ():
            status = _optional_int((mod.get("new_values") or {}).get("status"))
            keys = mod["keys"]
            where = (str(keys["project_id"]), str(keys["bucket_name"]), str(keys["object_key"]))
            if status in COMMITTED_STATUSES:
                committed.add(where)
            if status in _NULL_STATUSES:
                null.add(where)
    replaced: dict[int | None, set[tuple[str, str, str]]] = defaultdict(set)
    replaced.update(dict.fromkeys(_NULL_STATUSES, null))
    replaced[None] = committed
    return replaced


def _owner_lookup(owners: Mapping[str, str] | Callable[[str], str]) -> Callable[[str], str]:
    cache: dict[str, str] = {}

    def owner_of(project_id: str) -> str:
        owner = cache.get(project_id)
        if owner is None:
            if isinstance(owners, Mapping):
                if project_id not in owners:
                    raise KeyError(f"no public id for project {project_id} in owners")
                owner = owners[project_id]
            else:
                owner = owners(project_id)
            cache[project_id] = owner
        return owner

    return owner_of


def _record_sequence(record: Mapping[str, Any]) -> int:
    return int(record.get("record_sequence") or 0)


def _optional_int(value: Any) -> int | None:
    """An INT64 column value: JSON number or (as Spanner writes INT64) decimal string."""
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise ValueError(f"not an INT64 value: {value!r}")
    return int(value)
