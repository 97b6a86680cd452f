"""CloudEvents 1.0 in HTTP binary mode, for webhooks with `cloudevents=true`.

The body stays the S3 event message; the event's context travels in `ce-*` headers, as a
peer object store sends them:

| header | value |
|---|---|
| `ce-specversion` | `1.0` |
| `ce-id` | `<x-amz-request-id>.<x-amz-id-2>` of the request that caused the event (*) |
| `ce-source` | `<eventSource>.<awsRegion>.<bucket>` |
| `ce-type` | `com.amazonaws.<eventName>`, e.g. `com.amazonaws.ObjectCreated:Put` |
| `ce-subject` | the object key, URL-encoded as in the event |
| `ce-time` | the event's `eventTime` |

(*) an event no request caused (an expiry, say) has no request id: its ripple event id is
its `ce-id`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["binary_headers"]


def binary_headers(event: Mapping[str, Any], event_id: str) -> dict[str, str]:
    """The `ce-*` headers of one S3 event record (an element of "Records")."""
    response = event.get("responseElements") or {}
    request_id = str(response.get("x-amz-request-id") or "")
    host_id = str(response.get("x-amz-id-2") or "")
    s3 = event.get("s3") or {}
    bucket = str((s3.get("bucket") or {}).get("name") or "")
    key = str((s3.get("object") or {}).get("key") or "")
    return {
        "ce-specversion": "1.0",
        "ce-id": f"{request_id}.{host_id}" if request_id else event_id,
        "ce-source": f"{event.get('eventSource', '')}.{event.get('awsRegion', '')}.{bucket}",
        "ce-type": f"com.amazonaws.{event.get('eventName', '')}",
        "ce-subject": key,
        "ce-time": str(event.get("eventTime", "")),
    }
