"""Golden S3 event messages of tag changes (PutObjectTagging, DeleteObjectTagging): an UPDATE
of an object's row whose `tags` changed, as the metabase records it since migration 0010
(value capture type NEW_ROW_AND_OLD_VALUES: every watched column's new value, the old value
of each changed one)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ripple.events import OBJECT_TAGGING_DELETE, OBJECT_TAGGING_PUT, s3_events, to_json
from tests.events.golden import s3_record
from tests.events.records import ETAG, OWNERS, STREAM_A, commit, record, row, tag, update

VERSIONED_TAGGING_TAG = tag(
    operation="put-object-tagging",
    request_id="7A1B2C3D4E5F6071",
    host_id="h0st1d/tagging",
    principal="AKIAUSER1",
    source_ip="192.0.2.7",
    etag=ETAG,
    bucket_versioning={"photos": "Enabled"},
)


def parsed(records: list[dict[str, Any]]) -> Any:
    return json.loads(to_json(s3_events(records, owners=OWNERS)))


def golden(name: str, obj: dict[str, Any]) -> dict[str, Any]:
    record = s3_record(
        eventVersion="2.3",
        eventName=name,
        responseElements={"x-amz-request-id": "7A1B2C3D4E5F6071", "x-amz-id-2": "h0st1d/tagging"},
        obj=obj,
    )
    return {"Records": [record]}


def test_put_tagging_unversioned() -> None:
    records = [update("red flower.jpg", 1, 3, old_tags=None, new_tags={"colour": "red"})]
    assert parsed(records) == golden(
        "ObjectTagging:Put",
        {
            "key": "red+flower.jpg",
            "size": 1024,
            "eTag": ETAG,
            "sequencer": "18EA07F04CD9E11500000000",
        },
    )


def test_put_tagging_versioned() -> None:
    records = [
        update(
            "red flower.jpg",
            3,
            4,
            old_tags={"colour": "red"},
            new_tags={"colour": "blue", "size": "L"},
            transaction_tag=VERSIONED_TAGGING_TAG,
        )
    ]
    assert parsed(records) == golden(
        "ObjectTagging:Put",
        {
            "key": "red+flower.jpg",
            "size": 1024,
            "eTag": ETAG,
            "versionId": "00000000000000039f1c2a3b4d5e4f60",
            "sequencer": "18EA07F04CD9E11500000000",
        },
    )
    assert STREAM_A.replace("-", "").startswith("9f1c2a3b4d5e4f60")


def test_delete_tagging_unversioned() -> None:
    delete_tag = tag(
        operation="delete-object-tagging",
        request_id="7A1B2C3D4E5F6071",
        host_id="h0st1d/tagging",
        principal="AKIAUSER1",
        source_ip="192.0.2.7",
        etag=ETAG,
    )
    records = [update("a.txt", 1, 3, old_tags={"k": "v"}, new_tags=None, size=5,
                      transaction_tag=delete_tag)]  # fmt: skip
    assert parsed(records) == golden(
        "ObjectTagging:Delete",
        {"key": "a.txt", "size": 5, "eTag": ETAG, "sequencer": "18EA07F04CD9E11500000000"},
    )


def test_delete_tagging_of_the_null_version_in_a_versioned_bucket() -> None:
    records = [
        update(
            "a.txt",
            2,
            3,
            old_tags={"k": "v"},
            new_tags=None,
            size=5,
            transaction_tag=VERSIONED_TAGGING_TAG,
        )
    ]
    [event] = s3_events(records, owners=OWNERS)
    assert event.event_name == OBJECT_TAGGING_DELETE
    assert event.message["s3"]["object"]["versionId"] == "null"
    assert event.message["eventVersion"] == "2.3"


def test_unchanged_tags_make_no_event() -> None:
    # the metabase records nothing then; a record that says so anyway makes no event
    same = update("a", 1, 3, old_tags={"k": "v"}, new_tags={"k": "v"})
    assert same["mods"][0]["old_values"] == {}
    assert s3_events([same], owners=OWNERS) == []


def test_other_updates_make_no_event() -> None:
    # e.g. a stream that also watched retention: an UPDATE whose tags did not change
    r = row("a", 1, 4)
    mod = {"keys": r["keys"], "new_values": {**r["values"], "tags": {"k": "v"}},
           "old_values": {"total_plain_size": 7}}  # fmt: skip
    assert (
        s3_events([record("UPDATE", [mod], capture="NEW_ROW_AND_OLD_VALUES")], owners=OWNERS) == []
    )


@pytest.mark.parametrize("status", [1, 5, 6])
def test_tag_changes_of_rows_that_are_not_objects_make_no_event(status: int) -> None:
    records = [update("a", 1, status, old_tags=None, new_tags={"k": "v"})]
    assert s3_events(records, owners=OWNERS) == []


@pytest.mark.parametrize(
    ("capture", "size"), [("NEW_VALUES", None), ("OLD_AND_NEW_VALUES", None), ("NEW_ROW", 1024)]
)
def test_other_value_capture_types(capture: str, size: int | None) -> None:
    put = update("a", 1, 3, old_tags=None, new_tags={"k": "v"}, capture=capture)
    removed = update("a", 1, 3, old_tags={"k": "v"}, new_tags=None, capture=capture)
    [put_event] = s3_events([put], owners=OWNERS)
    [removed_event] = s3_events([removed], owners=OWNERS)
    assert put_event.event_name == OBJECT_TAGGING_PUT
    assert removed_event.event_name == OBJECT_TAGGING_DELETE
    assert put_event.message["s3"]["object"].get("size") == size


def test_tagging_is_never_an_object_created_event() -> None:
    # a PutObject with x-amz-tagging is an INSERT: ObjectCreated:Put only, tags or not
    created = commit([], [row("a", 1, 3, size=3)])
    created[0]["mods"][0]["new_values"]["tags"] = {"k": "v"}
    assert [e.event_name for e in s3_events(created, owners=OWNERS)] == ["ObjectCreated:Put"]
    # and a tag change is no ObjectCreated event
    events = s3_events([update("a", 1, 3, old_tags=None, new_tags={"k": "v"})], owners=OWNERS)
    assert [e.event_name for e in events] == ["ObjectTagging:Put"]
    assert not any(e.event_name.startswith("ObjectCreated:") for e in events)
