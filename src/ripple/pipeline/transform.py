"""Change records → S3 event records, one Arrow batch at a time (`mapInArrow`).

The mapping itself is `ripple.events.s3_events`, the same function `ripple changestream tail
--events` uses; this module regroups each partition's records into whole transactions
(which may straddle Arrow batches; a task may read several partitions, one after another)
and lays the events out as Arrow columns. Transactions that are one record of one mod (a
PUT, POST, copy, multipart completion, DELETE or delete marker: most of them) are mapped
over whole columns at once by
`ripple.events.batch.simple_events`, from templates that `s3_events` writes and checks; the
others go through `s3_events` one transaction at a time. No per-row UDF: a pipeline task
hands its batches to one `BatchMapper` (ripple.pipeline.tasks, and the journal's query,
ripple.pipeline.journal).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import sqlalchemy as sa

from ripple.changestream.definition import ModType
from ripple.changestream.reader import change_record
from ripple.events import EventSettings, s3_events, timestamp_ns
from ripple.events.batch import SimpleEvents, Templates, simple_events
from ripple.metabase.schema import projects
from ripple.pipeline.source import ARROW_SCHEMA, engine_for

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


def event_id(partition: int, sequencer: str, prefix: str = "") -> str:
    """An event's id, the same however often it is delivered: commit timestamps are unique
    per transaction within a partition, and the sequencer holds it and the event's index.
    `prefix` tells the streams apart (`b` for the bucket events of `project_eventing`)."""
    return f"{prefix}{partition}-{sequencer}"


def event_ids(partitions: pa.Array, sequencers: pa.Array, prefix: str = "") -> pa.Array:
    """`event_id` of every (partition, sequencer)."""
    return pc.binary_join_element_wise(
        prefix, pc.cast(partitions, pa.string()), "-", sequencers, ""
    )


def event_rows(
    group: list[dict[str, Any]],
    owner_of: Callable[[str], str],
    settings: EventSettings,
    prefix: str = "",
) -> Iterator[dict[str, Any]]:
    """The event rows (EVENT_SCHEMA) of one transaction's records in one partition."""
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


ID_PREFIXES = {"buckets": "b"}  # a stream's table → its events' id prefix


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


class BatchMapper:
    """Maps a task's record batches in order, carrying transactions that straddle them."""

    def __init__(
        self,
        owner_of: Callable[[str], str],
        settings: EventSettings,
        table: str = "objects",
        *,
        fast: bool = True,
    ) -> None:
        self.owner_of = owner_of
        self.settings = settings
        self.table = table
        self.fast = fast
        self.prefix = ID_PREFIXES.get(table, "")
        self.templates = Templates(settings, owner_of, table)
        self.pending: dict[int, list[dict[str, Any]]] = {}  # partition → its open records

    def map(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """The events of the transactions this batch completes."""
        if batch.schema != ARROW_SCHEMA:  # e.g. Spark's large string types
            batch = batch.cast(ARROW_SCHEMA)
        n = batch.num_rows
        simple = SimpleEvents.none(n)
        if self.fast and n:
            partitions = np.asarray(batch.column("partition").to_numpy(zero_copy_only=False))
            last = np.asarray(
                batch.column("is_last_in_partition").to_numpy(zero_copy_only=False), dtype=bool
            )
            mod_types = pc.take(_MOD_TYPE_NAMES, pc.cast(batch.column("mod_type"), pa.int64()))
            alone = _alone(partitions, last, set(self.pending))
            simple = simple_events(batch, mod_types, alone, self.templates)
        rest = np.flatnonzero(~simple.handled)
        events = self._general(batch, rest)
        return _merged(batch, simple, events, self.prefix)

    def _general(self, batch: pa.RecordBatch, rows: np.ndarray) -> list[dict[str, Any]]:
        """The events of the transactions `rows` complete, through `s3_events`, each with the
        row of its transaction's last record (`row`) and its place among them."""
        if len(rows) == 0:
            return []
        records = batch.take(pa.array(rows)).to_pylist()
        out: list[dict[str, Any]] = []
        for row, raw in zip(rows.tolist(), records, strict=True):
            record = change_record(raw, self.table)
            group = self.pending.setdefault(record["partition"], [])
            group.append(record)
            if not record["is_last_record_in_transaction_in_partition"]:
                continue
            del self.pending[record["partition"]]
            events = event_rows(group, self.owner_of, self.settings, self.prefix)
            for ordinal, event in enumerate(events):
                out.append({**event, "row": row, "ordinal": ordinal})
        return out

    def finish(self) -> None:
        """The task's records must end on whole transactions."""
        if self.pending:
            partitions = ", ".join(str(p) for p in sorted(self.pending))
            raise RuntimeError(f"the records end inside a transaction (partitions {partitions})")


_MOD_TYPE_NAMES = pa.array(
    [ModType(code).name if code in {m.value for m in ModType} else None for code in range(8)],
    pa.string(),
)


def _alone(partitions: np.ndarray, last: np.ndarray, open_partitions: set[int]) -> np.ndarray:
    """Which rows are their transaction's only record in their partition: a last record
    whose previous record in the same partition (in this batch, or before it: the
    `open_partitions` have a transaction under way) ended a transaction."""
    order = np.argsort(partitions, kind="stable")
    p, ended = partitions[order], last[order]
    previous_ended = np.empty(len(order), dtype=bool)
    if len(order):
        first = np.ones(len(order), dtype=bool)
        first[1:] = p[1:] != p[:-1]
        previous_ended[1:] = ended[:-1]
        opened = np.fromiter((int(x) in open_partitions for x in p[first]), dtype=bool)
        previous_ended[first] = ~opened
    alone = np.empty(len(order), dtype=bool)
    alone[order] = previous_ended & ended
    return alone


def _merged(
    batch: pa.RecordBatch, simple: SimpleEvents, general: list[dict[str, Any]], prefix: str
) -> pa.RecordBatch:
    """The fast path's events and the general path's, in order of their last record's row
    (then their place in the transaction), as one batch of EVENT_SCHEMA."""
    parts: list[pa.Table] = []
    rows: list[np.ndarray] = []
    ordinals: list[np.ndarray] = []
    if len(simple.rows):
        take = pa.array(simple.rows)
        partition = batch.column("partition").take(take)
        columns = {
            "partition": partition,
            "position": batch.column("position").take(take),
            "commit_ns": batch.column("commit_ns").take(take),
            "event_id": event_ids(partition, simple.columns["sequencer"], prefix),
            **simple.columns,
            "rename": pa.nulls(len(simple.rows), pa.string()),
        }
        parts.append(pa.table([columns[f.name] for f in EVENT_SCHEMA], schema=EVENT_SCHEMA))
        rows.append(simple.rows)
        ordinals.append(np.zeros(len(simple.rows), dtype=np.int64))
    if general:
        parts.append(pa.Table.from_pylist(general, schema=EVENT_SCHEMA))
        rows.append(np.array([e["row"] for e in general], dtype=np.int64))
        ordinals.append(np.array([e["ordinal"] for e in general], dtype=np.int64))
    if not parts:
        return pa.RecordBatch.from_pylist([], schema=EVENT_SCHEMA)
    table = pa.concat_tables(parts) if len(parts) > 1 else parts[0]
    order = np.lexsort((np.concatenate(ordinals), np.concatenate(rows)))
    return table.take(pa.array(order)).combine_chunks().to_batches()[0]
