"""Golden S3 event messages of writes (put, post, copy, multipart) in each versioning state."""

from __future__ import annotations

import json
from typing import Any

from ripple.events import s3_events, to_json
from tests.events.golden import NO_REQUEST, s3_record
from tests.events.records import (
    ETAG,
    OWNERS,
    PUT_TAG,
    STREAM_A,
    STREAM_B,
    commit,
    row,
    tag,
)


def parsed(records: list[dict[str, Any]]) -> Any:
    """The JSON message of a transaction's events, parsed back."""
    return json.loads(to_json(s3_events(records, owners=OWNERS)))


def test_put_new_key_unversioned_inline_commit() -> None:
    # An inline commit has no pending row: one INSERT of the committed row.
    records = commit([], [row("red flower.jpg", 1, 3, size=1024)])
    assert parsed(records) == {"Records": [s3_record()]}


def test_put_overwrite_unversioned_is_one_created_event() -> None:
    # Commit: DELETE the pending row (v2) and the old object (v1), INSERT the new one (v2).
    records = commit(
        [row("dir/sub dir/ü+=.txt", 2, 1), row("dir/sub dir/ü+=.txt", 1, 3, size=7)],
        [row("dir/sub dir/ü+=.txt", 2, 3, size=11)],
    )
    assert parsed(records) == {
        "Records": [
            s3_record(
                obj={
                    "key": "dir/sub+dir/%C3%BC%2B%3D.txt",
                    "size": 11,
                    "eTag": "d41d8cd98f00b204e9800998ecf8427e",
                    "sequencer": "18EA07F04CD9E11500000000",
                }
            )
        ]
    }


def test_put_versioning_enabled_has_the_version_id() -> None:
    enabled = tag(operation="put", etag=ETAG, bucket_versioning={"photos": "Enabled"})
    records = commit(
        [row("a.txt", 3, 1, stream_id=STREAM_B)],
        [row("a.txt", 3, 4, size=5, stream_id=STREAM_B)],
        transaction_tag=enabled,
    )
    assert parsed(records) == {
        "Records": [
            s3_record(
                **NO_REQUEST,
                obj={
                    "key": "a.txt",
                    "size": 5,
                    "eTag": "d41d8cd98f00b204e9800998ecf8427e",
                    "versionId": "00000000000000030123abcdef014234",
                    "sequencer": "18EA07F04CD9E11500000000",
                },
            )
        ]
    }


def test_put_versioning_suspended_replaces_null_version() -> None:
    suspended = tag(operation="put", etag=ETAG, bucket_versioning={"photos": "Suspended"})
    for old_null_status in (3, 6):  # the null version was an object or a delete marker
        records = commit(
            [row("a.txt", 4, 1), row("a.txt", 2, old_null_status, size=3)],
            [row("a.txt", 4, 3, size=9)],
            transaction_tag=suspended,
        )
        assert parsed(records) == {
            "Records": [
                s3_record(
                    **NO_REQUEST,
                    obj={
                        "key": "a.txt",
                        "size": 9,
                        "eTag": "d41d8cd98f00b204e9800998ecf8427e",
                        "versionId": "null",
                        "sequencer": "18EA07F04CD9E11500000000",
                    },
                )
            ]
        }, old_null_status


def test_copy_into_enabled_bucket() -> None:
    copy = tag(
        operation="copy",
        request_id="R2",
        host_id="H2",
        principal="P2",
        source_ip="2001:db8::1",
        etag='"0cc175b9c0f1b6a831c399e269772661"',  # quoted as in HTTP: the event drops quotes
        bucket_versioning={"photos": "Enabled", "other": "Suspended"},
    )
    records = commit([], [row("copy of a", 1, 4, size=1, stream_id=STREAM_A)], transaction_tag=copy)
    assert parsed(records) == {
        "Records": [
            s3_record(
                eventName="ObjectCreated:Copy",
                userIdentity={"principalId": "P2"},
                requestParameters={"sourceIPAddress": "2001:db8::1"},
                responseElements={"x-amz-request-id": "R2", "x-amz-id-2": "H2"},
                obj={
                    "key": "copy+of+a",
                    "size": 1,
                    "eTag": "0cc175b9c0f1b6a831c399e269772661",
                    "versionId": "00000000000000019f1c2a3b4d5e4f60",
                    "sequencer": "18EA07F04CD9E11500000000",
                },
            )
        ]
    }


def test_complete_multipart_upload_and_post_unversioned() -> None:
    for operation, name in (
        ("complete-multipart-upload", "ObjectCreated:CompleteMultipartUpload"),
        ("post", "ObjectCreated:Post"),
    ):
        records = commit(
            [row("big.bin", 1, 1)],
            [row("big.bin", 1, 3, size=5368709120)],
            transaction_tag=tag(operation=operation, etag="abc-3"),
        )
        assert parsed(records) == {
            "Records": [
                s3_record(
                    eventName=name,
                    **NO_REQUEST,
                    obj={
                        "key": "big.bin",
                        "size": 5368709120,
                        "eTag": "abc-3",
                        "sequencer": "18EA07F04CD9E11500000000",
                    },
                )
            ]
        }, operation


def test_put_enabled_without_stream_id_has_no_version_id() -> None:
    # Records written before migration 0003 do not carry stream_id.
    enabled = tag(operation="put", bucket_versioning={"photos": "Enabled"})
    records = commit(
        [row("old", 2, 1, stream_id=None)],
        [row("old", 2, 4, size=0, stream_id=None)],
        transaction_tag=enabled,
    )
    assert parsed(records)["Records"][0]["s3"]["object"] == {
        "key": "old",
        "size": 0,
        "sequencer": "18EA07F04CD9E11500000000",
    }


def test_put_with_empty_tag() -> None:
    records = commit([], [row("k", 1, 3, size=2)], transaction_tag="")
    event = parsed(records)["Records"][0]
    assert event["eventName"] == "ObjectCreated:Put"
    assert event["userIdentity"] == {"principalId": ""}
    # no request made it known: the system's name, never an empty address
    assert event["requestParameters"] == {"sourceIPAddress": "ripple"}
    assert event["responseElements"] == {"x-amz-request-id": "", "x-amz-id-2": ""}
    assert event["s3"]["object"] == {"key": "k", "size": 2, "sequencer": "18EA07F04CD9E11500000000"}


def test_begin_object_makes_no_event() -> None:
    # BeginObject inserts a pending row; aborting the upload deletes it.
    assert parsed(commit([], [row("k", 1, 1)])) == {"Records": []}
    assert parsed(commit([row("k", 1, 1)], [])) == {"Records": []}


def test_put_tag_is_what_records_use() -> None:
    # Guards the constants the literals above were written from.
    assert json.loads(PUT_TAG)["etag"] == ETAG
    assert STREAM_A.replace("-", "")[:16] == "9f1c2a3b4d5e4f60"
    assert STREAM_B.replace("-", "")[:16] == "0123abcdef014234"
