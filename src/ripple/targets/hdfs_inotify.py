"""`format=hdfs-inotify`: a topic's events sent as HDFS inotify event batches, not S3 records.

Consumers written for HDFS's inotify stream (`DFSInotifyEventInputStream`) get what it
yields: an `EventBatch` per transaction, `{"txid": N, "events": [...]}`, with paths
`/<bucket>/<key>` and `txid` the transaction's commit time in Unix nanoseconds.

A wrapper around the topic's push target: the deliveries of a batch are grouped by
transaction (their event ids share partition and commit time), in order, each group is sent
as one message, and every event of a group gets the group's result. A delivery that is not
an S3 event record (the `s3:TestEvent` of a new notification) passes unchanged.

Which S3 event becomes which inotify events, and why: docs/targets.md, "HDFS inotify format".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from ripple.events.keys import decode_key
from ripple.events.sequencer import timestamp_ns
from ripple.targets.base import OK, Delivery, Result, Target

__all__ = ["FORMAT", "HdfsInotifyTarget", "inotify_batch", "inotify_events"]

FORMAT = "hdfs-inotify"
_SEQUENCER_DIGITS = 24  # 16 hex digits of commit ns, then 8 of the event's ordinal


def _path(bucket: str, encoded_key: str) -> str:
    return f"/{bucket}/{decode_key(encoded_key)}"


def inotify_events(record: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The inotify events of one S3 event record (docs/targets.md, "HDFS inotify format")."""
    name = str(record["eventName"])
    s3 = record["s3"]
    bucket = s3["bucket"]["name"]
    obj = s3["object"]
    path = _path(bucket, obj["key"])
    when = timestamp_ns(record["eventTime"]) // 1_000_000
    kind, _, _ = name.partition(":")
    if kind == "BucketCreated":
        return [
            {
                "eventType": "CREATE",
                "path": f"/{bucket}",
                "ctime": when,
                "iNodeType": "DIRECTORY",
                "overwrite": False,
            }
        ]
    if kind == "BucketRemoved":
        return [{"eventType": "UNLINK", "path": f"/{bucket}", "timestamp": when}]
    if path.endswith("/") and path.count("/") > 2:  # a "directory" key, e.g. albums/
        path, directory = path.rstrip("/"), True
    else:
        directory = False
    if kind == "ObjectCreated":
        create = {
            "eventType": "CREATE",
            "path": path,
            "ctime": when,
            "iNodeType": "DIRECTORY" if directory else "FILE",
            "overwrite": True,
        }
        if directory:  # HDFS's mkdir closes no file
            return [create]
        close = {"eventType": "CLOSE", "path": path, "fileSize": int(obj.get("size", 0))}
        return [create, {**close, "timestamp": when}]
    if kind in ("ObjectRemoved", "LifecycleExpiration"):
        return [{"eventType": "UNLINK", "path": path, "timestamp": when}]
    if kind == "ObjectRenamed":
        source = _path(bucket, obj.get("renameFromKey") or record.get("renameFromKey", ""))
        if directory:  # a prefix rename: directory paths, without their '/'
            source = source.rstrip("/")
        return [
            {
                "eventType": "RENAME",
                "srcPath": source,
                "destPath": path,
                "timestamp": when,
            }
        ]
    metadata_type = {"ObjectAcl": "ACLS", "ObjectTagging": "XATTRS", "ObjectMetadata": "XATTRS"}
    if kind in metadata_type:
        return [
            {
                "eventType": "METADATA",
                "path": path,
                "metadataType": metadata_type[kind],
                "mtime": when,
            }
        ]
    return []  # an S3 event HDFS has no counterpart for


def _transaction(delivery: Delivery) -> str:
    """Partition and commit time: the event id without the event's ordinal."""
    return delivery.event_id[:-8] if len(delivery.event_id) > 8 else delivery.event_id


def _txid(delivery: Delivery) -> int:
    sequencer = delivery.attributes.get("sequencer") or delivery.event_id.rpartition("-")[2]
    try:
        return int(sequencer[:16], 16)
    except ValueError:
        return 0


def inotify_batch(deliveries: Sequence[Delivery]) -> bytes:
    """One transaction's deliveries as an inotify `EventBatch` message."""
    events: list[dict[str, Any]] = []
    for delivery in deliveries:
        events.extend(inotify_events(delivery.event))
    return orjson.dumps({"txid": _txid(deliveries[0]), "events": events})


def _is_record(delivery: Delivery) -> bool:
    return delivery.message is not delivery.__dict__.get("body") and delivery.message[:1] == b"{"


class HdfsInotifyTarget:
    def __init__(self, target: Target) -> None:
        self.target = target
        self.name = target.name

    def open(self) -> None:
        self.target.open()

    def publish(self, deliveries: Sequence[Delivery]) -> list[Result]:
        groups: list[list[int]] = []  # indexes of the deliveries of each message, in order
        keys: dict[str, int] = {}
        for i, delivery in enumerate(deliveries):
            if not _is_record(delivery):
                groups.append([i])
                continue
            key = _transaction(delivery)
            if key in keys:
                groups[keys[key]].append(i)
            else:
                keys[key] = len(groups)
                groups.append([i])
        messages = []
        for group in groups:
            first = deliveries[group[0]]
            if not _is_record(first):
                messages.append(first)
                continue
            body = inotify_batch([deliveries[i] for i in group])
            messages.append(Delivery.raw(first.event_id, body, first.attributes))
        results = self.target.publish(messages)
        answers: list[Result] = [OK] * len(deliveries)  # each is set below
        for group, result in zip(groups, results, strict=True):
            for i in group:
                answers[i] = result
        return answers

    def close(self) -> None:
        self.target.close()
