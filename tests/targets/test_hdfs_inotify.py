"""`format=hdfs-inotify`: S3 event records become HDFS inotify event batches, one message per
transaction, with golden JSON for every event kind; results map back to each event; the
wrapper is built from a topic's arguments; and a real webhook on 127.0.0.1 receives the
batches as its bodies."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from ripple.events.keys import encode_key
from ripple.notifications.topics import Topic
from ripple.targets.base import OK, Delivery, Outcome, Result
from ripple.targets.destinations import push_target
from ripple.targets.hdfs_inotify import HdfsInotifyTarget, inotify_events
from ripple.targets.pubsub import ordering_key
from ripple.targets.webhook import WebhookTarget
from tests.pipeline.fakes import RecordingTarget
from tests.receiver import receiver

COMMIT_NS = 1795255200123456789  # 2026-11-21T10:00:00.123456789Z
TIME = "2026-11-21T10:00:00.123Z"
MS = 1795255200123


def record(name: str, key: str, size: int = 0, **extra: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {"key": encode_key(key), "size": size, "eTag": "e", **extra}
    return {
        "eventVersion": "2.1",
        "eventSource": "ripple:s3",
        "eventTime": TIME,
        "eventName": name,
        "s3": {"s3SchemaVersion": "1.0", "bucket": {"name": "photos"}, "object": obj},
    }


def delivery(
    name: str, key: str, ordinal: int = 0, commit_ns: int = COMMIT_NS, **kw: Any
) -> Delivery:
    sequencer = f"{commit_ns:016X}{ordinal:08X}"
    event = record(name, key, **kw)
    event["s3"]["object"]["sequencer"] = sequencer
    attributes = {"eventName": name, "bucket": "photos", "key": key, "sequencer": sequencer}
    return Delivery.of(f"3-{sequencer}", event, attributes)


def test_golden_inotify_events_for_every_kind() -> None:
    assert inotify_events(record("ObjectCreated:Put", "2026/red flower.jpg", size=5)) == [
        {
            "eventType": "CREATE",
            "path": "/photos/2026/red flower.jpg",
            "ctime": MS,
            "iNodeType": "FILE",
            "overwrite": True,
        },
        {
            "eventType": "CLOSE",
            "path": "/photos/2026/red flower.jpg",
            "fileSize": 5,
            "timestamp": MS,
        },
    ]
    assert inotify_events(record("ObjectCreated:Put", "albums/")) == [  # mkdir: no CLOSE
        {
            "eventType": "CREATE",
            "path": "/photos/albums",
            "ctime": MS,
            "iNodeType": "DIRECTORY",
            "overwrite": True,
        },
    ]
    assert inotify_events(record("ObjectRemoved:Delete", "albums/")) == [
        {"eventType": "UNLINK", "path": "/photos/albums", "timestamp": MS}
    ]
    for removed in ("ObjectRemoved:Delete", "ObjectRemoved:DeleteMarkerCreated"):
        assert inotify_events(record(removed, "a+b=c.jpg")) == [
            {"eventType": "UNLINK", "path": "/photos/a+b=c.jpg", "timestamp": MS}
        ]
    assert inotify_events(record("ObjectTagging:Put", "a.jpg")) == [
        {"eventType": "METADATA", "path": "/photos/a.jpg", "metadataType": "XATTRS", "mtime": MS}
    ]
    assert inotify_events(record("ObjectAcl:Put", "a.jpg")) == [
        {"eventType": "METADATA", "path": "/photos/a.jpg", "metadataType": "ACLS", "mtime": MS}
    ]
    renamed = record("ObjectRenamed:Rename", "new/a.jpg", renameFromKey=encode_key("old/a b.jpg"))
    assert inotify_events(renamed) == [
        {
            "eventType": "RENAME",
            "srcPath": "/photos/old/a b.jpg",
            "destPath": "/photos/new/a.jpg",
            "timestamp": MS,
        }
    ]


def test_one_message_per_transaction_in_order_and_results_per_event() -> None:
    later = COMMIT_NS + 1000
    deliveries = [
        delivery("ObjectCreated:Put", "a.jpg", 0, size=1),
        delivery("ObjectRemoved:Delete", "b.jpg", 1),
        delivery("ObjectCreated:Copy", "c.jpg", 0, commit_ns=later, size=3),
    ]
    calls = {"n": 0}

    def answer(d: Delivery, _n: int) -> Result:
        calls["n"] += 1
        return Result(Outcome.RETRY, "busy") if b'"txid":%d' % later in d.body else OK

    inner = RecordingTarget("hook", answer)
    results = HdfsInotifyTarget(inner).publish(deliveries)
    (sent,) = inner.calls
    assert [orjson.loads(d.body) for d in sent] == [
        {
            "txid": COMMIT_NS,
            "events": [
                {
                    "eventType": "CREATE",
                    "path": "/photos/a.jpg",
                    "ctime": MS,
                    "iNodeType": "FILE",
                    "overwrite": True,
                },
                {"eventType": "CLOSE", "path": "/photos/a.jpg", "fileSize": 1, "timestamp": MS},
                {"eventType": "UNLINK", "path": "/photos/b.jpg", "timestamp": MS},
            ],
        },
        {
            "txid": later,
            "events": [
                {
                    "eventType": "CREATE",
                    "path": "/photos/c.jpg",
                    "ctime": MS,
                    "iNodeType": "FILE",
                    "overwrite": True,
                },
                {"eventType": "CLOSE", "path": "/photos/c.jpg", "fileSize": 3, "timestamp": MS},
            ],
        },
    ]
    assert [r.outcome for r in results] == [Outcome.OK, Outcome.OK, Outcome.RETRY]
    assert [d.event_id for d in sent] == [deliveries[0].event_id, deliveries[2].event_id]


def test_a_test_event_passes_unchanged() -> None:
    test_event = Delivery.raw("req-test", b'{"Service":"Amazon S3","Event":"s3:TestEvent"}', {})
    inner = RecordingTarget("hook")
    assert HdfsInotifyTarget(inner).publish([test_event]) == [OK]
    assert inner.calls[0][0].body == test_event.body


def test_topics_choose_the_format() -> None:
    wrapped = push_target(Topic("t", "http://127.0.0.1:1/hook", {"format": "hdfs-inotify"}))
    assert isinstance(wrapped, HdfsInotifyTarget)
    assert isinstance(
        push_target(Topic("t", "http://127.0.0.1:1/hook", {"format": "s3"})), WebhookTarget
    )
    with pytest.raises(ValueError, match="format is 'avro'; use one of s3, hdfs-inotify"):
        push_target(Topic("t", "http://127.0.0.1:1/hook", {"format": "avro"}))
    with pytest.raises(ValueError, match="cannot be combined with OpaqueData"):
        push_target(
            Topic("t", "http://127.0.0.1:1/hook", {"format": "hdfs-inotify", "OpaqueData": "x"})
        )
    with pytest.raises(ValueError, match="cannot be combined with a snapshot"):
        push_target(Topic("t", "snapshot://default", {"format": "hdfs-inotify"}))
    with pytest.raises(ValueError, match="namespace"):
        push_target(
            Topic(
                "t",
                "redis://127.0.0.1",
                {"format": "hdfs-inotify", "redis-format": "namespace", "redis-key": "k"},
            )
        )


def test_a_webhook_receives_the_batches_as_bodies() -> None:
    with receiver() as hook:
        target = push_target(Topic("t", hook.url, {"format": "hdfs-inotify"}))
        assert target is not None
        target.open()
        try:
            results = target.publish(
                [
                    delivery("ObjectCreated:Put", "a.jpg", 0, size=7),
                    delivery("ObjectRemoved:Delete", "z.jpg", 1),
                ]
            )
        finally:
            target.close()
        assert results == [OK, OK]
        (post,) = hook.posts
        assert post.json() == {
            "txid": COMMIT_NS,
            "events": [
                {
                    "eventType": "CREATE",
                    "path": "/photos/a.jpg",
                    "ctime": MS,
                    "iNodeType": "FILE",
                    "overwrite": True,
                },
                {"eventType": "CLOSE", "path": "/photos/a.jpg", "fileSize": 7, "timestamp": MS},
                {"eventType": "UNLINK", "path": "/photos/z.jpg", "timestamp": MS},
            ],
        }


def test_pubsub_ordering_keys_come_from_the_attributes_of_a_batch() -> None:
    batch = Delivery.raw("3-x", b'{"txid": 1, "events": []}', {"bucket": "photos", "key": "a.jpg"})
    assert ordering_key(batch) == "photos/a.jpg"
