"""Pull subscription tests, and the deliveries they store: realistic S3 event records."""

from __future__ import annotations

from typing import Any

from ripple.events import encode_key
from ripple.targets.base import Delivery
from tests.events.golden import s3_record

TOPIC = "projects/my-team/topics/events"
OTHER_TOPIC = "projects/my-team/topics/audit"
OWNER = "1PublicProjectIdOfPhotos"
ETAG = "d41d8cd98f00b204e9800998ecf8427e"
VERSION_ID = "000000000000000c9f1c2a3b4d5e4f60"


def s3_event(
    key: str,
    *,
    name: str = "ObjectCreated:Put",
    bucket: str = "photos",
    time: str = "2026-11-21T10:15:30.123Z",
    sequencer: str = "18EA07F04CD9E11500000000",
    size: int = 1234,
    version_id: str | None = None,
) -> dict[str, Any]:
    """One S3 event record (2.1) as the pipeline makes it."""
    obj: dict[str, Any] = {"key": encode_key(key)}
    if name.startswith("ObjectCreated:"):
        obj["size"] = size
        obj["eTag"] = ETAG
    if version_id is not None:
        obj["versionId"] = version_id
    obj["sequencer"] = sequencer
    return s3_record(eventTime=time, eventName=name, bucket=bucket, owner=OWNER, obj=obj)


def delivery(event: dict[str, Any], event_id: str, batch_id: int = 7) -> Delivery:
    attributes = {
        "eventName": event["eventName"],
        "bucket": event["s3"]["bucket"]["name"],
        "key": event["s3"]["object"]["key"],
        "sequencer": event["s3"]["object"]["sequencer"],
    }
    return Delivery.of(event_id, event, attributes, batch_id)


def deliveries(count: int, *, batch_id: int = 7, first: int = 0) -> list[Delivery]:
    """`count` put events of keys `photo-<n>.jpg`, event ids `evt-<n>` (n from `first`)."""
    return [
        delivery(
            s3_event(f"photo-{n}.jpg", sequencer=f"18EA07F04CD9E115{n:08X}"),
            f"evt-{n:04d}",
            batch_id,
        )
        for n in range(first, first + count)
    ]
