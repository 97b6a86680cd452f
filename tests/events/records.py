"""Builders of data change records as the metabase writes them (docs/changestream.md)."""

from __future__ import annotations

import json
from typing import Any

PROJECT = "4d0452d9-395d-498d-927f-a54a6544764e"  # private project id
PUBLIC = "1PublicProjectIdOfPhotos"  # its public id: the bucket owner in events
OWNERS = {PROJECT: PUBLIC}
BUCKET = "photos"
TS = "2026-11-21T10:15:30.123456789Z"  # 1795256130123456789 ns = 0x18EA07F04CD9E115
TXN = "5b0c4f0e9f6a4d1e8c1d2a3b4c5d6e7f"
STREAM_A = "9f1c2a3b-4d5e-4f60-8a7b-9c0d1e2f3a4b"  # versionId suffix 9f1c2a3b4d5e4f60
STREAM_B = "0123abcd-ef01-4234-9567-89abcdef0123"  # versionId suffix 0123abcdef014234
ETAG = "d41d8cd98f00b204e9800998ecf8427e"

COLUMN_TYPES = [
    {"name": "project_id", "type": {"code": "STRING"}, "is_primary_key": True,
     "ordinal_position": 1},
    {"name": "bucket_name", "type": {"code": "STRING"}, "is_primary_key": True,
     "ordinal_position": 2},
    {"name": "object_key", "type": {"code": "STRING"}, "is_primary_key": True,
     "ordinal_position": 3},
    {"name": "version", "type": {"code": "INT64"}, "is_primary_key": True,
     "ordinal_position": 4},
    {"name": "stream_id", "type": {"code": "STRING"}, "is_primary_key": False,
     "ordinal_position": 5},
    {"name": "status", "type": {"code": "INT64"}, "is_primary_key": False,
     "ordinal_position": 6},
    {"name": "total_plain_size", "type": {"code": "INT64"}, "is_primary_key": False,
     "ordinal_position": 9},
]  # fmt: skip


def tag(**members: Any) -> str:
    """A transaction tag: the request context members given, as the JSON string."""
    return json.dumps(members, separators=(",", ":"))


PUT_TAG = tag(
    operation="put",
    request_id="C3D13FE58DE4C810",
    host_id="FMyUVURIY8/IgAtTv8xRjskZQpcIZ9KG4V5Wp6S7S",
    principal="AKIAUSER1",
    source_ip="192.0.2.7",
    etag=ETAG,
)

TAGGING_TAG = tag(
    operation="put-object-tagging",
    request_id="7A1B2C3D4E5F6071",
    host_id="h0st1d/tagging",
    principal="AKIAUSER1",
    source_ip="192.0.2.7",
    etag=ETAG,
)


def row(
    key: str,
    version: int,
    status: int,
    *,
    size: int = 0,
    stream_id: str | None = STREAM_A,
    bucket: str = BUCKET,
    project: str = PROJECT,
) -> dict[str, Any]:
    """A row of `objects`: its keys and its watched columns."""
    values: dict[str, Any] = {"status": status, "total_plain_size": size}
    if stream_id is not None:
        values["stream_id"] = stream_id
    keys = {"project_id": project, "bucket_name": bucket, "object_key": key, "version": version}
    return {"keys": keys, "values": values}


def insert(*rows: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"keys": r["keys"], "new_values": r["values"], "old_values": {}} for r in rows]


def delete(*rows: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"keys": r["keys"], "new_values": {}, "old_values": r["values"]} for r in rows]


def record(
    mod_type: str,
    mods: list[dict[str, Any]],
    *,
    sequence: int = 0,
    transaction_tag: str = PUT_TAG,
    records: int = 1,
    partition: int = 0,
    commit_timestamp: str = TS,
    transaction: str = TXN,
    capture: str = "OLD_AND_NEW_VALUES",
) -> dict[str, Any]:
    """One data change record of transaction `transaction` (one mod type, one partition)."""
    return {
        "stream": "bucket_eventing",
        "partition": partition,
        "position": 100 + sequence,
        "commit_timestamp": commit_timestamp,
        "record_sequence": f"{sequence:08d}",
        "server_transaction_id": transaction,
        "is_last_record_in_transaction_in_partition": sequence == records - 1,
        "table_name": "objects",
        "column_types": COLUMN_TYPES,
        "mods": mods,
        "mod_type": mod_type,
        "value_capture_type": capture,
        "number_of_records_in_transaction": records,
        "number_of_partitions_in_transaction": 1,
        "transaction_tag": transaction_tag,
        "is_system_transaction": False,
    }


def commit(
    deleted: list[dict[str, Any]],
    inserted: list[dict[str, Any]],
    *,
    transaction_tag: str = PUT_TAG,
) -> list[dict[str, Any]]:
    """A transaction that deletes rows then inserts rows: one record per non-empty mod type."""
    out: list[dict[str, Any]] = []
    parts = [("DELETE", delete(*deleted)), ("INSERT", insert(*inserted))]
    parts = [(t, mods) for t, mods in parts if mods]
    for i, (mod_type, mods) in enumerate(parts):
        out.append(
            record(mod_type, mods, sequence=i, records=len(parts), transaction_tag=transaction_tag)
        )
    return out


def update(
    key: str,
    version: int,
    status: int,
    *,
    old_tags: dict[str, str] | None,
    new_tags: dict[str, str] | None,
    size: int = 1024,
    transaction_tag: str = TAGGING_TAG,
    capture: str = "NEW_ROW_AND_OLD_VALUES",
) -> dict[str, Any]:
    """The UPDATE record of one tag change, under the given value capture type."""
    r = row(key, version, status, size=size)
    new_row = {**r["values"], "user_metadata": None, "tags": new_tags}
    changed = {"tags": new_tags} if old_tags != new_tags else {}
    new_values = {
        "NEW_ROW_AND_OLD_VALUES": new_row,
        "NEW_ROW": new_row,
        "NEW_VALUES": changed,
        "OLD_AND_NEW_VALUES": changed,
    }[capture]
    old_values = {"tags": old_tags} if old_tags != new_tags else {}
    if capture in ("NEW_ROW", "NEW_VALUES"):
        old_values = {}
    mod = {"keys": r["keys"], "new_values": new_values, "old_values": old_values}
    return record("UPDATE", [mod], transaction_tag=transaction_tag, capture=capture)
