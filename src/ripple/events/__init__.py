"""Change records → event records: S3 event messages (2.1 and 2.3), names, sequencers, key
encoding.

Pure functions, no I/O; of the other ripple packages, imports only the change stream's record
vocabulary (its transaction tag, `ripple.changestream.tag`, and values). The pipeline feeds
`s3_events` the data change records of one transaction and routes the `EventRecord`s it
returns. See docs/events.md for the message and its fields.
"""

from __future__ import annotations

from ripple.events.keys import decode_key, encode_key
from ripple.events.names import (
    ALL_EVENT_NAMES,
    BUCKET_CREATED_PUT,
    BUCKET_REMOVED_DELETE,
    LIFECYCLE_EXPIRATION_DELETE,
    LIFECYCLE_EXPIRATION_DELETE_MARKER_CREATED,
    OBJECT_ACL_PUT,
    OBJECT_CREATED_COMPLETE_MULTIPART_UPLOAD,
    OBJECT_CREATED_COPY,
    OBJECT_CREATED_POST,
    OBJECT_CREATED_PUT,
    OBJECT_METADATA_UPDATE,
    OBJECT_REMOVED_DELETE,
    OBJECT_REMOVED_DELETE_MARKER_CREATED,
    OBJECT_RENAMED_RENAME,
    OBJECT_TAGGING_DELETE,
    OBJECT_TAGGING_PUT,
    event_name,
    is_created,
    matches,
    tagging_event_name,
)
from ripple.events.s3 import (
    DEFAULT_SETTINGS,
    NULL_VERSION_ID,
    EventRecord,
    EventSettings,
    message,
    s3_events,
    to_json,
    version_id,
)
from ripple.events.sequencer import event_time, sequencer, timestamp_ns

__all__ = [
    "ALL_EVENT_NAMES",
    "BUCKET_CREATED_PUT",
    "BUCKET_REMOVED_DELETE",
    "DEFAULT_SETTINGS",
    "LIFECYCLE_EXPIRATION_DELETE",
    "LIFECYCLE_EXPIRATION_DELETE_MARKER_CREATED",
    "NULL_VERSION_ID",
    "OBJECT_ACL_PUT",
    "OBJECT_CREATED_COMPLETE_MULTIPART_UPLOAD",
    "OBJECT_CREATED_COPY",
    "OBJECT_CREATED_POST",
    "OBJECT_CREATED_PUT",
    "OBJECT_METADATA_UPDATE",
    "OBJECT_REMOVED_DELETE",
    "OBJECT_REMOVED_DELETE_MARKER_CREATED",
    "OBJECT_RENAMED_RENAME",
    "OBJECT_TAGGING_DELETE",
    "OBJECT_TAGGING_PUT",
    "EventRecord",
    "EventSettings",
    "decode_key",
    "encode_key",
    "event_name",
    "event_time",
    "is_created",
    "matches",
    "message",
    "s3_events",
    "sequencer",
    "tagging_event_name",
    "timestamp_ns",
    "to_json",
    "version_id",
]
