"""s3_events beyond the golden messages: ordering, owners, settings, value captures, errors."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ripple.events import EventRecord, EventSettings, message, s3_events, to_json, version_id
from ripple.metabase.types import encode_version_id
from tests.events.records import (
    BUCKET,
    OWNERS,
    PROJECT,
    TS,
    commit,
    delete,
    insert,
    record,
    row,
    tag,
)


def names(events: list[EventRecord]) -> list[tuple[str, str, str]]:
    return [(e.key, e.event_name, e.sequencer[16:]) for e in events]


def test_event_record_fields() -> None:
    [event] = s3_events(commit([], [row("a b", 1, 3)]), owners=OWNERS)
    assert event.project_id == PROJECT
    assert event.bucket == BUCKET
    assert event.key == "a b"  # raw; the message has it encoded
    assert event.message["s3"]["object"]["key"] == "a+b"
    assert event.event_name == "ObjectCreated:Put"
    assert event.sequencer == "18EA07F04CD9E11500000000"
    assert message([event]) == {"Records": [event.message]}


def test_records_are_ordered_by_record_sequence_across_partitions() -> None:
    first = record("DELETE", delete(row("a", 1, 3)), sequence=0, records=3, partition=1)
    second = record("INSERT", insert(row("b", 1, 3), row("c", 1, 3)), sequence=1, records=3)
    third = record("DELETE", delete(row("d", 1, 3)), sequence=2, records=3, partition=2)
    events = s3_events([third, first, second], owners=OWNERS)
    assert names(events) == [
        ("a", "ObjectRemoved:Delete", "00000000"),
        ("b", "ObjectCreated:Put", "00000001"),
        ("c", "ObjectCreated:Put", "00000002"),
        ("d", "ObjectRemoved:Delete", "00000003"),
    ]


def test_overwrite_rule_is_per_project_bucket_and_key() -> None:
    other_project = "00000000-0000-4000-8000-000000000001"
    records = commit(
        [
            row("a", 1, 3),  # replaced: no event
            row("b", 1, 3),  # another key
            row("a", 1, 3, bucket="other"),  # another bucket
            row("a", 1, 3, project=other_project),  # another project
        ],
        [row("a", 2, 3)],
    )
    events = s3_events(records, owners={**OWNERS, other_project: "P2"})
    assert [(e.project_id, e.bucket, e.key, e.event_name) for e in events] == [
        (PROJECT, BUCKET, "b", "ObjectRemoved:Delete"),
        (PROJECT, "other", "a", "ObjectRemoved:Delete"),
        (other_project, BUCKET, "a", "ObjectRemoved:Delete"),
        (PROJECT, BUCKET, "a", "ObjectCreated:Put"),
    ]
    assert events[2].message["s3"]["bucket"]["ownerIdentity"] == {"principalId": "P2"}


def test_insert_of_pending_row_does_not_hide_a_delete() -> None:
    # Only a committed row replaces: a pending INSERT leaves the DELETE's event.
    events = s3_events(commit([row("a", 1, 3)], [row("a", 2, 1)]), owners=OWNERS)
    assert names(events) == [("a", "ObjectRemoved:Delete", "00000000")]


def test_new_row_capture_has_no_old_values() -> None:
    # NEW_ROW: DELETE mods carry no values. A commit's DELETE is hidden by its INSERT; a lone
    # DELETE is taken for a committed row (documented limitation) and has no versionId.
    def deleted(key: str) -> dict[str, Any]:
        return {"keys": row(key, 1, 1)["keys"], "new_values": {}, "old_values": {}}

    versioned = tag(bucket_versioning={BUCKET: "Enabled"})
    records = [
        record("DELETE", [deleted("a"), deleted("b")], records=2, capture="NEW_ROW",
               transaction_tag=versioned),
        record("INSERT", insert(row("a", 1, 4)), sequence=1, records=2, capture="NEW_ROW",
               transaction_tag=versioned),
    ]  # fmt: skip
    events = s3_events(records, owners=OWNERS)
    assert names(events) == [
        ("b", "ObjectRemoved:Delete", "00000000"),
        ("a", "ObjectCreated:Put", "00000001"),
    ]
    assert events[0].message["s3"]["object"] == {"key": "b", "sequencer": events[0].sequencer}


def test_int64_values_as_strings() -> None:
    # Spanner writes INT64 columns as JSON strings; both forms give the same events.
    as_numbers = commit([], [row("a", 12, 4, size=5)])
    as_strings = commit([], [row("a", 12, 4, size=5)])
    mod = as_strings[0]["mods"][0]
    mod["keys"]["version"] = "12"
    mod["new_values"] = {k: str(v) for k, v in mod["new_values"].items()}
    assert to_json(s3_events(as_strings, owners=OWNERS)) == to_json(
        s3_events(as_numbers, owners=OWNERS)
    )
    obj = s3_events(as_strings, owners=OWNERS)[0].message["s3"]["object"]
    assert obj["size"] == 5
    assert obj["versionId"] == "000000000000000c9f1c2a3b4d5e4f60"


def test_updates_other_tables_and_heartbeats_make_no_events() -> None:
    update = record("UPDATE", [{"keys": row("a", 1, 3)["keys"], "new_values": {"status": 3},
                                "old_values": {"status": 3}}])  # fmt: skip
    other = record("INSERT", insert(row("a", 1, 3)), sequence=1)
    other["table_name"] = "segments"
    heartbeat = {"stream": "bucket_eventing", "partition": 0, "heartbeat_record": {"timestamp": TS}}
    assert s3_events([update, other, heartbeat], owners=OWNERS) == []


def test_settings() -> None:
    settings = EventSettings(
        event_source="acme:s3", region="eu-central-1", arn_partition="ripple",
        configuration_id="my-config",
    )  # fmt: skip
    [event] = s3_events(commit([], [row("a", 1, 3)]), owners=OWNERS, settings=settings)
    m = event.message
    assert (m["eventSource"], m["awsRegion"]) == ("acme:s3", "eu-central-1")
    assert m["s3"]["configurationId"] == "my-config"
    assert m["s3"]["bucket"]["arn"] == "arn:ripple:s3:::photos"


def test_owners_callable_is_asked_once_per_project() -> None:
    asked: list[str] = []

    def owner(project_id: str) -> str:
        asked.append(project_id)
        return "public-" + project_id[:4]

    events = s3_events(commit([row("a", 1, 3)], [row("b", 1, 3)]), owners=owner)
    assert [e.message["s3"]["bucket"]["ownerIdentity"]["principalId"] for e in events] == [
        "public-4d04",
        "public-4d04",
    ]
    assert asked == [PROJECT]


def test_unknown_owner_is_a_key_error() -> None:
    with pytest.raises(KeyError, match=PROJECT):
        s3_events(commit([], [row("a", 1, 3)]), owners={})


def test_records_of_two_transactions_are_refused() -> None:
    one = record("INSERT", insert(row("a", 1, 3)))
    two = record("INSERT", insert(row("b", 1, 3)), transaction="another")
    with pytest.raises(ValueError, match="one transaction"):
        s3_events([one, two], owners=OWNERS)


@pytest.mark.parametrize("bad", ["{", "[1]", '{"etag": 5}', '{"bucket_versioning": ["x"]}'])
def test_malformed_transaction_tag_is_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="transaction_tag"):
        s3_events(commit([], [row("a", 1, 3)], transaction_tag=bad), owners=OWNERS)


def test_unknown_versioning_state_is_off() -> None:
    records = commit([row("a", 1, 3)], [], transaction_tag=tag(bucket_versioning={BUCKET: "Off"}))
    assert "versionId" not in s3_events(records, owners=OWNERS)[0].message["s3"]["object"]


def test_to_json_is_compact_utf8() -> None:
    owners = {PROJECT: "owner-ü"}
    data = to_json(s3_events(commit([], [row("a", 1, 3)]), owners=owners))
    assert b" " not in data
    assert b"\n" not in data
    assert "owner-ü".encode() in data
    assert json.loads(data)["Records"][0]["s3"]["bucket"]["ownerIdentity"]["principalId"] == (
        "owner-ü"
    )
    assert to_json([]) == b'{"Records":[]}'


@given(version=st.integers(1, 2**63 - 1), stream=st.uuids())
def test_version_id_agrees_with_metabase(version: int, stream: uuid.UUID) -> None:
    expected = encode_version_id(version, stream)
    assert version_id(version, str(stream)) == expected
    assert version_id(version, stream.hex) == expected


def test_version_id_literal() -> None:
    stream = "9f1c2a3b-4d5e-4f60-8a7b-9c0d1e2f3a4b"
    assert version_id(2, stream) == "00000000000000029f1c2a3b4d5e4f60"
    assert version_id(2, stream) == encode_version_id(2, uuid.UUID(stream))
