"""Change records of the `project_eventing` stream (the buckets table) → bucket events.

An INSERT of a bucket is `BucketCreated:Put` (CreateBucket), a DELETE `BucketRemoved:Delete`
(DeleteBucket); version 2.3, as S3's newer types. They go to a project's project-wide
notifications (a topic's `project-events` argument), never to a bucket's. The message is an
S3 event record whose `s3.object` names no object (`"key": ""`), so every consumer of S3
records (ordering by `sequencer`, attributes, the HDFS form) takes it unchanged, and whose
`s3.bucket` adds what the bucket was created with:

    "bucket": {"name", "ownerIdentity", "arn",
               "versioning": "Enabled" | "Off", "objectLockEnabled": true | false}

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from ripple.events.names import BUCKET_CREATED_PUT, BUCKET_REMOVED_DELETE

__all__ = ["BUCKETS_TABLE", "bucket_details", "bucket_event_name", "is_bucket_event"]

BUCKETS_TABLE: Final = "buckets"
_VERSIONING: Final = {0: "Off", 1: "Enabled", 2: "Suspended"}


def bucket_event_name(mod_type: str) -> str | None:
    """The event of a mod of the buckets table; an UPDATE (not recorded) makes none."""
    return {"INSERT": BUCKET_CREATED_PUT, "DELETE": BUCKET_REMOVED_DELETE}.get(mod_type)


def is_bucket_event(name: str) -> bool:
    """Whether an event name is a bucket event (with or without `s3:`)."""
    return name.removeprefix("s3:").startswith(("BucketCreated:", "BucketRemoved:"))


def bucket_details(values: Mapping[str, Any]) -> dict[str, Any]:
    """What `s3.bucket` says beyond name, owner and ARN: the values the record carries."""
    details: dict[str, Any] = {}
    if values.get("versioning") is not None:
        details["versioning"] = _VERSIONING.get(int(values["versioning"]), "Off")
    if values.get("object_lock_enabled") is not None:
        details["objectLockEnabled"] = bool(values["object_lock_enabled"])
    return details
