"""Change records → S3 event records, one Arrow batch at a time (`mapInArrow`).

The mapping itself is `ripple.events.s3_events`, the same function `ripple changestream tail
--events` uses; this module only regroups each partition's records into whole transactions
(which may straddle Arrow batches; a task may read several partitions, one after another)
and lays the events out as Arrow columns. No per-row UDF: Spark hands each task's batches to
`events_of_batches`, which runs once per task.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import orjson
import pyarrow as pa
import sqlalchemy as sa

from ripple.changestream.reader import change_record
from ripple.changestream.tail import transactions
from ripple.events import EventSettings, s3_events, timestamp_ns
from ripple.metabase.schema import projects
from ripple.pipeline.source import engine_for

EVENT_SCHEMA = pa.schema(
    [
        ("partition", pa.int32()),
        ("position", pa.int64()),  # the last position of the event's transaction
        ("commit_ns", pa.int64()),
        ("event_id", pa.string()),
        ("project_id", pa.string()),
        ("bucket", pa.string()),
        ("key", pa.string()),
        ("event_name", pa.string()),
        ("sequencer", pa.string()),
        ("version_id", pa.string()),  # s3.object.versionId; null when unversioned
        ("message", pa.binary()),  # one S3 event record, JSON
        ("metadata", pa.string()),  # the object's user metadata, JSON; null when not known
        ("tags", pa.string()),  # the object's tags, JSON; null when not known
        ("rename", pa.string()),  # a rename's event: "s3" or "single" (EventRecord.rename)
    ]
)
SPARK_EVENT_SCHEMA = (
    "partition int, position bigint, commit_ns bigint, event_id string, project_id string, "
    "bucket string, key string, event_name string, sequencer string, version_id string, "
    "message binary, metadata string, tags string, rename string"
)


def event_id(partition: int, sequencer: str, prefix: str = "") -> str:
    """An event's id, the same however often it is delivered: commit timestamps are unique
    per transaction within a partition, and the sequencer holds it and the event's index.
    `prefix` tells the streams apart (`b` for the bucket events of `project_eventing`)."""
    return f"{prefix}{partition}-{sequencer}"


def events_of_rows(
    rows: Iterable[Mapping[str, Any]],
    owner_of: Callable[[str], str],
    settings: EventSettings,
    table: str = "objects",
) -> Iterator[dict[str, Any]]:
    """Event rows (EVENT_SCHEMA) of source rows given in position order per partition
    (partitions may follow or interleave each other); a transaction's
    events come out once its last record in the partition has been seen. `table` is the
    stream's: `objects` (bucket_eventing) or `buckets` (project_eventing)."""
    prefix = _ID_PREFIXES.get(table, "")
    records = (change_record(row, table) for row in rows)
    for group in transactions(records, strict=True):
        last = group[-1]
        commit_ns = timestamp_ns(last["commit_timestamp"])
        for event in s3_events(group, owners=owner_of, settings=settings):
            yield {
                "partition": last["partition"],
                "position": last["position"],
                "commit_ns": commit_ns,
                "event_id": event_id(last["partition"], event.sequencer, prefix),
                "project_id": event.project_id,
                "bucket": event.bucket,
                "key": event.key,
                "event_name": event.event_name,
                "sequencer": event.sequencer,
                "version_id": event.message["s3"]["object"].get("versionId"),
                "message": orjson.dumps(event.message),
                "metadata": _json(event.metadata),
                "tags": _json(event.tags),
                "rename": event.rename,
            }


_ID_PREFIXES = {"buckets": "b"}


def _json(value: Mapping[str, str] | None) -> str | None:
    return None if value is None else orjson.dumps(value).decode()


class Owners:
    """Private project id → public id (the bucket owner in events), read on first need,
    through one connection pool for the task (`close` ends it)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._engine: sa.Engine | None = None
        self._known: dict[str, str] = {}

    def __call__(self, project_id: str) -> str:
        if project_id not in self._known:
            if self._engine is None:
                self._engine = engine_for(self.url)
            with self._engine.connect() as conn:
                public = conn.execute(
                    sa.select(projects.c.public_id).where(projects.c.id == uuid.UUID(project_id))
                ).scalar()
            # A project deleted since: its events still go out, owned by nobody known.
            self._known[project_id] = str(public) if public is not None else ""
        return self._known[project_id]

    def close(self) -> None:
        if self._engine is not None:
            self._engine.dispose()


def events_of_batches(
    url: str, settings: EventSettings, table: str = "objects"
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The `mapInArrow` function: one task's record batches (of a stream over `table`) →
    event batches."""

    def transform(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        owners = Owners(url)

        def rows() -> Iterator[dict[str, Any]]:
            for batch in batches:
                yield from batch.to_pylist()

        out: list[dict[str, Any]] = []
        try:
            for event in events_of_rows(rows(), owners, settings, table):
                out.append(event)
                if len(out) >= 10_000:
                    yield pa.RecordBatch.from_pylist(out, schema=EVENT_SCHEMA)
                    out = []
            if out:
                yield pa.RecordBatch.from_pylist(out, schema=EVENT_SCHEMA)
        finally:
            owners.close()

    return transform
