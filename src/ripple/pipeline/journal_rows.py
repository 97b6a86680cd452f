"""The bucket journal's rows, in a task: a batch of events (EVENT_SCHEMA) → the journal's
columns (`JOURNAL_COLUMNS`, after Amazon S3 Metadata's journal), over whole Arrow columns.

The fields an S3 event record holds (its time, requester, source address, request id, size
and ETag) are read from the events' messages by pyarrow's JSON reader, all of a batch at
once, so what crosses from the task into the JVM is a few short columns rather than each
event's JSON text: Spark taking the ~1 KB message and parsing it there cost 7 µs of machine
CPU an event more (42.8 against 35.8 µs to Spark's noop sink), and the journal drained a
backlog at 0.97 of the pull's rate rather than 1.03-1.17 (BENCHMARKS.md, "Issue 30").
Two columns are left to Spark (`ripple.pipeline.journal`): the user metadata and the tags,
carried as the events' JSON text and read into maps by `from_json`, and the rename's source
key, carried URL-encoded as its event has it. Pure: no I/O.
"""

from __future__ import annotations

from typing import Final

import pyarrow as pa
import pyarrow.compute as pc

from ripple.events.columns import read_json_lines

__all__ = ["JOURNAL_COLUMNS", "PARTITIONS", "TASK_SCHEMA", "journal_rows"]

PARTITIONS: Final = ("record_date", "bucket")  # the table's directories: a day's, then a bucket's

# The journal's columns as a reader sees them (Amazon S3 Metadata's journal table, and the
# S3 event's name), the partition columns last, as Spark reads them.
JOURNAL_COLUMNS: Final = (
    "key",
    "sequence_number",
    "record_type",
    "record_timestamp",
    "version_id",
    "is_delete_marker",
    "size",
    "last_modified_date",
    "e_tag",
    "requester",
    "source_ip_address",
    "request_id",
    "user_metadata",
    "object_tags",
    "event_name",
    "rename_source_key",
    *PARTITIONS,
)

_TIMESTAMP: Final = pa.timestamp("us", tz="UTC")
# What a journal task returns: the journal's columns, the metadata and tags as JSON text
# (null when the event does not know them) and the rename's source key URL-encoded.
TASK_SCHEMA: Final = pa.schema(
    [
        ("key", pa.string()),
        ("sequence_number", pa.string()),
        ("record_type", pa.string()),
        ("record_timestamp", _TIMESTAMP),
        ("version_id", pa.string()),
        ("is_delete_marker", pa.bool_()),
        ("size", pa.int64()),
        ("last_modified_date", _TIMESTAMP),
        ("e_tag", pa.string()),
        ("requester", pa.string()),
        ("source_ip_address", pa.string()),
        ("request_id", pa.string()),
        ("user_metadata", pa.string()),
        ("object_tags", pa.string()),
        ("event_name", pa.string()),
        ("rename_source_key", pa.string()),
        ("record_date", pa.date32()),
        ("bucket", pa.string()),
    ]
)

# what the columns take from an S3 event record; the reader skips the rest of it
_MESSAGE: Final = pa.schema(
    [
        ("eventTime", pa.string()),
        ("userIdentity", pa.struct([("principalId", pa.string())])),
        ("requestParameters", pa.struct([("sourceIPAddress", pa.string())])),
        ("responseElements", pa.struct([("x-amz-request-id", pa.string())])),
        (
            "s3",
            pa.struct(
                [
                    (
                        "object",
                        pa.struct(
                            [
                                ("size", pa.int64()),
                                ("eTag", pa.string()),
                                ("renameFromKey", pa.string()),
                            ]
                        ),
                    )
                ]
            ),
        ),
    ]
)
_DELETE_MARKERS: Final = pa.array(
    ["ObjectRemoved:DeleteMarkerCreated", "LifecycleExpiration:DeleteMarkerCreated"]
)


def journal_rows(events: pa.RecordBatch) -> pa.RecordBatch:
    """The journal's rows (TASK_SCHEMA) of a batch of events (EVENT_SCHEMA), in order."""
    if events.num_rows == 0:
        return pa.RecordBatch.from_pylist([], schema=TASK_SCHEMA)
    lines = pc.binary_join_element_wise(events.column("message"), b"\n", b"")
    message = read_json_lines(lines, _MESSAGE).combine_chunks().to_batches()[0]
    s3_object = pc.struct_field(message.column("s3"), "object")
    name = events.column("event_name")
    created = pc.starts_with(name, "ObjectCreated:")
    removed = pc.or_(
        pc.starts_with(name, "ObjectRemoved:"), pc.starts_with(name, "LifecycleExpiration:")
    )
    record_type = pc.if_else(created, "CREATE", pc.if_else(removed, "DELETE", "UPDATE_METADATA"))
    timestamp = pc.cast(message.column("eventTime"), _TIMESTAMP)
    columns = {
        "key": events.column("key"),
        "sequence_number": events.column("sequencer"),
        "record_type": record_type,
        "record_timestamp": timestamp,
        "version_id": events.column("version_id"),
        "is_delete_marker": pc.is_in(name, _DELETE_MARKERS),
        "size": pc.struct_field(s3_object, "size"),
        "last_modified_date": pc.if_else(created, timestamp, pa.scalar(None, _TIMESTAMP)),
        "e_tag": pc.struct_field(s3_object, "eTag"),
        "requester": pc.struct_field(message.column("userIdentity"), "principalId"),
        "source_ip_address": pc.struct_field(
            message.column("requestParameters"), "sourceIPAddress"
        ),
        "request_id": pc.struct_field(message.column("responseElements"), "x-amz-request-id"),
        "user_metadata": events.column("metadata"),
        "object_tags": events.column("tags"),
        "event_name": name,
        "rename_source_key": pc.struct_field(s3_object, "renameFromKey"),
        # the UTC date of the event's time
        "record_date": pc.cast(timestamp, pa.date32()),
        "bucket": events.column("bucket"),
    }
    return pa.RecordBatch.from_arrays(
        [pc.cast(columns[f.name], f.type) for f in TASK_SCHEMA], schema=TASK_SCHEMA
    )
