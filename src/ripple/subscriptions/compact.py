"""S3 event record → the compact event form of a pull subscription (the pubsub module's
non-S3 format). Pure: no I/O.

    {"id": "<event id>", "event": "OBJECT_CREATE" | "OBJECT_DELETE", "timestamp": "<eventTime>",
     "info": {"attrs": {"mtime": "<eventTime>"},
              "bucket": {"bucket_id": "<bucket name>", "name": "<bucket name>", "tenant": ""},
              "key": {"instance": "<versionId or empty>", "name": "<the raw key>"}}}

- `event`: `OBJECT_CREATE` for `ObjectCreated:*`, `OBJECT_DELETE` for `ObjectRemoved:*` and
  `LifecycleExpiration:*` (delete markers included), `OBJECT_METADATA_UPDATE` for
  `ObjectTagging:*`, `ObjectAcl:*` and `ObjectMetadata:*`; with or without the `s3:`
  prefix. Any other event keeps its S3 name (`ObjectRenamed:Rename`…), so a pull never fails
  on an event type newer than this form.
- `bucket_id`: the bucket's name. S3 bucket names are unique across ripple and the event
  record carries no other bucket id (the project's private id never leaves ripple).
- `tenant`: empty: ripple has no tenants, bucket names form one namespace.
- `key.name`: the key decoded from the record's URL-encoded `s3.object.key`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from ripple.events.keys import decode_key

__all__ = [
    "OBJECT_CREATE",
    "OBJECT_DELETE",
    "OBJECT_METADATA_UPDATE",
    "compact_event",
    "compact_event_type",
]

OBJECT_CREATE: Final = "OBJECT_CREATE"
OBJECT_DELETE: Final = "OBJECT_DELETE"
OBJECT_METADATA_UPDATE: Final = "OBJECT_METADATA_UPDATE"
_METADATA_KINDS: Final = ("ObjectTagging:", "ObjectAcl:", "ObjectMetadata:")

_PREFIX: Final = "s3:"


def compact_event_type(event_name: str) -> str:
    """The compact event type of an S3 event name (see the module docstring)."""
    name = event_name.removeprefix(_PREFIX)
    if name.startswith("ObjectCreated:"):
        return OBJECT_CREATE
    if name.startswith(("ObjectRemoved:", "LifecycleExpiration:")):
        return OBJECT_DELETE
    if name.startswith(_METADATA_KINDS):
        return OBJECT_METADATA_UPDATE
    return name


def compact_event(event: Mapping[str, Any], event_id: str) -> dict[str, Any]:
    """The compact form of one S3 event record (an element of `Records`), with its id."""
    event_time = str(event["eventTime"])
    s3 = event["s3"]
    obj = s3["object"]
    bucket = str(s3["bucket"]["name"])
    return {
        "id": event_id,
        "event": compact_event_type(str(event["eventName"])),
        "timestamp": event_time,
        "info": {
            "attrs": {"mtime": event_time},
            "bucket": {"bucket_id": bucket, "name": bucket, "tenant": ""},
            "key": {
                "instance": str(obj.get("versionId") or ""),
                "name": decode_key(str(obj["key"])),
            },
        },
    }
