"""Data change records of one transaction → S3 event messages (event structure version 2.1;
2.3 for the newer types, `ObjectTagging:*`, `ObjectAcl:*`, `LifecycleExpiration:*`, as Amazon
S3 sends them, and ripple's own `ObjectMetadata:Update` and `ObjectRenamed:Rename`).

`s3_events` takes the change records of one transaction of the `bucket_eventing` stream
(docs/changestream.md), or of the `project_eventing` stream (bucket events,
`ripple.events.buckets`), and returns one `EventRecord` per S3 event, in the transaction's
order; each record's message is built by `ripple.events.record`; `message` and `to_json`
wrap event records into the `{"Records": [...]}` message.
The field-by-field mapping is DESIGN.md's "Change record → S3 event message (2.1)" and
docs/events.md. Pure: no I/O, and the bucket owner comes from the caller (`owners`).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Final

from ripple.changestream.tag import Operation, TransactionTag
from ripple.events.buckets import BUCKETS_TABLE, bucket_details, bucket_event_name
from ripple.events.keys import encode_key
from ripple.events.names import (
    COMMITTED_STATUSES,
    OBJECT_METADATA_UPDATE,
    OBJECT_RENAMED_RENAME,
    OBJECT_STATUSES,
    changed_columns,
    event_name,
    update_event_names,
)
from ripple.events.record import (
    DEFAULT_SETTINGS,
    NO_OBJECT,
    NULL_VERSION_ID,
    VERSIONED_STATUSES,
    EventRecord,
    EventSettings,
    EventShape,
    event_message,
    object_details,
    optional_int,
    version_id,
)
from ripple.events.sequencer import sequencer, timestamp_ns

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

_TABLE: Final = "objects"
_NULL_STATUSES: Final = frozenset(COMMITTED_STATUSES) - VERSIONED_STATUSES  # 3 and 6


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
    per kind of change (tags, ACL, lock settings: `update_event_names`). A rename makes its
    events both ways, each marked with its `rename` mode, and routing sends each
    notification one of them (docs/events.md, "Renames").
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
    prefix_rename: tuple[EventShape, str, str, str] | None = None  # shape, project, bucket, key
    for record in ordered:
        mod_type = record.get("mod_type")
        table = record.get("table_name", _TABLE)
        if table == BUCKETS_TABLE:
            events.extend(_bucket_events(record, owner_of, settings, len(events)))
            continue
        if table != _TABLE or mod_type not in _MOD_TYPES:
            continue
        old_values = _captures_old_values(record)
        raw_tag = record.get("transaction_tag") or ""
        tag = tags.get(raw_tag)
        if tag is None:
            tag = tags[raw_tag] = TransactionTag.decode(raw_tag)
        commit_ns = timestamp_ns(record["commit_timestamp"])
        rename = tag.operation in _RENAMES
        mode = _S3_MODE if rename else None  # of the events every notification could get
        for mod in record.get("mods") or ():
            keys = mod["keys"]
            values = mod.get("old_values" if mod_type == "DELETE" else "new_values") or {}
            status = optional_int(values.get("status"))
            changed: frozenset[str] | None = None
            if mod_type == "UPDATE":
                known = _changed_columns(mod) if old_values else None
                changed = changed_columns(known, values, tag.operation)
                names = update_event_names(changed, status, values)
            else:
                name = event_name(mod_type, status, tag.operation)
                names = [] if name is None else [name]
            if not names:
                continue
            project_id = str(keys["project_id"])
            bucket = str(keys["bucket_name"])
            key = str(keys["object_key"])
            if mod_type == "DELETE" and (project_id, bucket, key) in replaced[status]:
                continue  # an overwrite: S3 reports only the new object or delete marker
            owner = owner_of(project_id)
            if _copied_onto_itself(mod_type, status, tag, bucket, key):
                names.append(OBJECT_METADATA_UPDATE)
            shape = EventShape(settings, commit_ns, tag, owner, keys, values, status)
            for name in names:
                extra = object_details(name, shape, changed)
                events.append(shape.event(name, project_id, bucket, key, len(events), extra, mode))
            if rename and mod_type == "INSERT" and status in OBJECT_STATUSES:
                if tag.operation is Operation.RENAME:  # one key: its own rename event
                    events.append(_renamed(shape, project_id, bucket, key, len(events)))
                elif prefix_rename is None:  # a prefix: one event, after the keys' events
                    whole = replace(shape, whole=False)
                    prefix_rename = (whole, project_id, bucket, tag.rename_to)
    if prefix_rename is not None:
        events.append(_renamed(*prefix_rename, len(events)))
    return events


def _renamed(shape: EventShape, project_id: str, bucket: str, key: str, index: int) -> EventRecord:
    """The `ObjectRenamed:Rename` event of a rename: of one key, or (`key` the destination
    prefix) of a whole prefix."""
    extra = {"renameFromKey": encode_key(shape.tag.rename_from)}
    return shape.event(OBJECT_RENAMED_RENAME, project_id, bucket, key, index, extra, _SINGLE_MODE)


_MOD_TYPES: Final = frozenset({"INSERT", "UPDATE", "DELETE"})
_RENAMES: Final = frozenset({Operation.RENAME, Operation.RENAME_PREFIX})
_S3_MODE: Final = "s3"
_SINGLE_MODE: Final = "single"


def _bucket_events(
    record: Mapping[str, Any], owner_of: Callable[[str], str], settings: EventSettings, first: int
) -> list[EventRecord]:
    """The bucket events of one record of the buckets table (`ripple.events.buckets`)."""
    name = bucket_event_name(str(record.get("mod_type")))
    if name is None:
        return []
    tag = TransactionTag.decode(record.get("transaction_tag"))
    commit_ns = timestamp_ns(record["commit_timestamp"])
    events: list[EventRecord] = []
    for mod in record.get("mods") or ():
        keys = mod["keys"]
        values = mod.get("new_values") or mod.get("old_values") or {}
        project_id, bucket = str(keys["project_id"]), str(keys["name"])
        seq = sequencer(commit_ns, first + len(events))
        obj = {"key": "", **NO_OBJECT, "sequencer": seq}
        body = event_message(settings, commit_ns, name, tag, bucket, owner_of(project_id), obj)
        body["s3"]["bucket"].update(bucket_details(values))
        events.append(EventRecord(project_id, bucket, "", name, seq, body))
    return events


def _copied_onto_itself(
    mod_type: str, status: int | None, tag: TransactionTag, bucket: str, key: str
) -> bool:
    return (
        mod_type == "INSERT"
        and tag.operation is Operation.COPY
        and status in OBJECT_STATUSES
        and tag.copy_source == f"{bucket}/{key}"
    )


def _changed_columns(mod: Mapping[str, Any]) -> frozenset[str]:
    """The watched columns an UPDATE changed: those its old values name."""
    return frozenset(mod.get("old_values") or {})


def _captures_old_values(record: Mapping[str, Any]) -> bool:
    """Whether the record's value capture type gives the old values of changed columns."""
    capture = record.get("value_capture_type") or "OLD_AND_NEW_VALUES"
    return capture in ("OLD_AND_NEW_VALUES", "NEW_ROW_AND_OLD_VALUES")


def message(events: Sequence[EventRecord]) -> dict[str, Any]:
    """The S3 event message of some event records: `{"Records": [...]}`."""
    return {"Records": [e.message for e in events]}


def to_json(events: Sequence[EventRecord]) -> bytes:
    """The S3 event message of some event records as compact UTF-8 JSON."""
    return json.dumps(message(events), separators=(",", ":"), ensure_ascii=False).encode()


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
            status = optional_int((mod.get("new_values") or {}).get("status"))
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
