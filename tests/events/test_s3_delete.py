"""Golden S3 event messages of deletes (DeleteObject, DeleteObjects) in each versioning state."""

from __future__ import annotations

import json
from typing import Any

from ripple.events import s3_events, to_json
from tests.events.golden import NO_REQUEST, s3_record
from tests.events.records import OWNERS, STREAM_A, STREAM_B, commit, row, tag


def parsed(records: list[dict[str, Any]]) -> Any:
    return json.loads(to_json(s3_events(records, owners=OWNERS)))


DELETE_TAG = tag(
    operation="delete", request_id="REQ-DEL", host_id="HOST-DEL", principal="U", source_ip="::1"
)


def test_delete_unversioned() -> None:
    records = commit([row("red flower.jpg", 1, 3, size=1024)], [], transaction_tag=DELETE_TAG)
    assert parsed(records) == {
        "Records": [
            s3_record(
                eventName="ObjectRemoved:Delete",
                userIdentity={"principalId": "U"},
                requestParameters={"sourceIPAddress": "::1"},
                responseElements={"x-amz-request-id": "REQ-DEL", "x-amz-id-2": "HOST-DEL"},
                obj={"key": "red+flower.jpg", "sequencer": "18EA07F04CD9E11500000000"},
            )
        ]
    }


def test_delete_without_version_in_enabled_bucket_creates_marker() -> None:
    enabled = tag(operation="delete", bucket_versioning={"photos": "Enabled"})
    records = commit([], [row("a.txt", 3, 5, stream_id=STREAM_B)], transaction_tag=enabled)
    assert parsed(records) == {
        "Records": [
            s3_record(
                eventName="ObjectRemoved:DeleteMarkerCreated",
                **NO_REQUEST,
                obj={
                    "key": "a.txt",
                    "versionId": "00000000000000030123abcdef014234",
                    "sequencer": "18EA07F04CD9E11500000000",
                },
            )
        ]
    }


def test_delete_without_version_in_suspended_bucket_is_only_marker_created() -> None:
    # The null object is deleted and a null delete marker takes its place: S3 reports the
    # marker only.
    suspended = tag(operation="delete", bucket_versioning={"photos": "Suspended"})
    records = commit([row("a.txt", 2, 3, size=10)], [row("a.txt", 3, 6)], transaction_tag=suspended)
    assert parsed(records) == {
        "Records": [
            s3_record(
                eventName="ObjectRemoved:DeleteMarkerCreated",
                **NO_REQUEST,
                obj={"key": "a.txt", "versionId": "null", "sequencer": "18EA07F04CD9E11500000000"},
            )
        ]
    }


def test_delete_exact_version_and_delete_marker_in_enabled_bucket() -> None:
    enabled = tag(operation="delete", bucket_versioning={"photos": "Enabled"})
    for status in (4, 5):  # an object version, a delete marker
        records = commit([row("a.txt", 7, status, size=4)], [], transaction_tag=enabled)
        assert parsed(records) == {
            "Records": [
                s3_record(
                    eventName="ObjectRemoved:Delete",
                    **NO_REQUEST,
                    obj={
                        "key": "a.txt",
                        "versionId": "00000000000000079f1c2a3b4d5e4f60",
                        "sequencer": "18EA07F04CD9E11500000000",
                    },
                )
            ]
        }, status


def test_delete_null_version_in_enabled_bucket() -> None:
    # A status-3 row from before versioning was enabled is the key's null version.
    enabled = tag(operation="delete", bucket_versioning={"photos": "Enabled"})
    records = commit([row("a.txt", 1, 3)], [], transaction_tag=enabled)
    assert parsed(records)["Records"][0]["s3"]["object"] == {
        "key": "a.txt",
        "versionId": "null",
        "sequencer": "18EA07F04CD9E11500000000",
    }


def test_delete_objects_several_keys_and_two_versions_of_one_key() -> None:
    # DeleteObjects in an enabled bucket: two versions of "a" and one of "b" by version id,
    # "c" without a version id (a marker). One DELETE record, one INSERT record.
    bulk = tag(
        operation="delete-objects", request_id="BULK", bucket_versioning={"photos": "Enabled"}
    )
    records = commit(
        [row("a", 1, 4, stream_id=STREAM_A), row("a", 2, 4, stream_id=STREAM_B), row("b", 1, 5)],
        [row("c", 1, 5, stream_id=STREAM_B)],
        transaction_tag=bulk,
    )

    def event(name: str, key: str, version_id: str, sequencer: str) -> dict[str, Any]:
        return s3_record(
            eventName=name,
            userIdentity={"principalId": ""},
            requestParameters={"sourceIPAddress": "ripple"},
            responseElements={"x-amz-request-id": "BULK", "x-amz-id-2": ""},
            obj={"key": key, "versionId": version_id, "sequencer": sequencer},
        )

    assert parsed(records) == {
        "Records": [
            event(
                "ObjectRemoved:Delete",
                "a",
                "00000000000000019f1c2a3b4d5e4f60",
                "18EA07F04CD9E11500000000",
            ),
            event(
                "ObjectRemoved:Delete",
                "a",
                "00000000000000020123abcdef014234",
                "18EA07F04CD9E11500000001",
            ),
            event(
                "ObjectRemoved:Delete",
                "b",
                "00000000000000019f1c2a3b4d5e4f60",
                "18EA07F04CD9E11500000002",
            ),
            event(
                "ObjectRemoved:DeleteMarkerCreated",
                "c",
                "00000000000000010123abcdef014234",
                "18EA07F04CD9E11500000003",
            ),
        ]
    }


def test_delete_objects_unversioned_sequencers_increase() -> None:
    records = commit(
        [row("x", 1, 3), row("y", 1, 3), row("z", 1, 1)],  # "z" was only pending: no event
        [],
        transaction_tag=tag(operation="delete-objects"),
    )
    events = s3_events(records, owners=OWNERS)
    assert [(e.key, e.event_name, e.sequencer) for e in events] == [
        ("x", "ObjectRemoved:Delete", "18EA07F04CD9E11500000000"),
        ("y", "ObjectRemoved:Delete", "18EA07F04CD9E11500000001"),
    ]
    assert all("versionId" not in e.message["s3"]["object"] for e in events)
