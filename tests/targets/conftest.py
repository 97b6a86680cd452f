"""Shared helpers for the target tests: realistic deliveries, and no proxies on loopback.

`delivery(...)` builds one S3 event record (2.1) the way the pipeline does and wraps it in a
`Delivery`: body `{"Records":[event]}`, attributes eventName, bucket, key, sequencer.
"""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from ripple.targets.base import Delivery

BUCKET = "photos"
SEQUENCER_BASE = 0x18EA07F04CD9E115  # 2026-11-21T10:15:30.123456789Z in UNIX ns

_PROXY_VARIABLES = (
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "grpc_proxy",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
)


@pytest.fixture(autouse=True)
def _no_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    """httpx and gRPC both honour proxy variables; these tests only talk to 127.0.0.1."""
    for name in _PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("PUBSUB_EMULATOR_HOST", raising=False)


def event_record(
    key: str,
    *,
    bucket: str = BUCKET,
    n: int = 0,
    size: int = 1024,
    event_name: str = "ObjectCreated:Put",
) -> dict[str, Any]:
    """One S3 event record as ripple emits it; `n` shifts the sequencer and the time."""
    return {
        "eventVersion": "2.1",
        "eventSource": "ripple:s3",
        "awsRegion": "",
        "eventTime": f"2026-11-21T10:15:{30 + n % 30:02d}.123Z",
        "eventName": event_name,
        "userIdentity": {"principalId": "1PublicProjectIdOfPhotos"},
        "requestParameters": {"sourceIPAddress": "127.0.0.1"},
        "responseElements": {"x-amz-request-id": f"req-{n}", "x-amz-id-2": "ripple"},
        "s3": {
            "s3SchemaVersion": "1.0",
            "configurationId": "ObjectEvents",
            "bucket": {
                "name": bucket,
                "ownerIdentity": {"principalId": "1PublicProjectIdOfPhotos"},
                "arn": f"arn:aws:s3:::{bucket}",
            },
            "object": {
                "key": key,
                "size": size,
                "eTag": hashlib.md5(f"{key}-{n}".encode()).hexdigest(),
                "sequencer": f"{SEQUENCER_BASE + n:016X}",
            },
        },
    }


def delivery(key: str = "2026/cat.jpg", *, n: int = 0, **fields: Any) -> Delivery:
    """A delivery of `event_record(key, n=n, **fields)` with a stable event id."""
    event = event_record(key, n=n, **fields)
    s3 = event["s3"]
    sequencer = s3["object"]["sequencer"]
    return Delivery.of(
        f"{s3['bucket']['name']}-{sequencer}-{n}",
        event,
        {
            "eventName": event["eventName"],
            "bucket": s3["bucket"]["name"],
            "key": key,
            "sequencer": sequencer,
        },
        batch_id=7,
    )
