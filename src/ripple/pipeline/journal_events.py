"""The bucket journal's events, in a task: a task's change records mapped to events by the
pipeline's transform (`BatchMapper`, one Arrow batch at a time), kept when committed within
their bucket's journal period (`bucket_journals`). The `ripple-journal` source's tasks run
it (`ripple.pipeline.journal_source`); the journal's query and table are
`ripple.pipeline.journal`'s."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import sqlalchemy as sa

from ripple.events import EventSettings
from ripple.notifications.journal import journal_periods
from ripple.pipeline.source import engine_for
from ripple.pipeline.transform import BatchMapper, Owners

__all__ = ["FOREVER", "journal_events", "journal_periods_of", "keep_journaled"]

FOREVER = 2**63 - 1  # the end of a journal still enabled, in ns


def journal_periods_of(
    url: str, engine: sa.Engine | None = None
) -> dict[tuple[str, str], tuple[int, int]]:
    """(project id, bucket) → (from, until) ns of its journal's period (until: the largest
    int64 while it is enabled), for every bucket journaled now or before."""
    owned = engine is None
    engine = engine or engine_for(url)
    try:
        with engine.connect() as conn:
            periods = journal_periods(conn)
    finally:
        if owned:
            engine.dispose()
    return {
        (str(project), bucket): (enabled, FOREVER if disabled is None else disabled)
        for (project, bucket), (enabled, disabled) in periods.items()
    }


def journal_events(
    url: str, settings: EventSettings
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """A `ripple-journal` task's function (or `mapInArrow`'s): its change records → the
    events (EVENT_SCHEMA) of buckets committed within their journal's period; a rename's
    once, as one event (`single`). The periods are read after the records, so a record
    committed after a journal was enabled always finds it, and a disabled journal keeps its
    period's events."""

    def transform(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        owners = Owners(url)
        mapper = BatchMapper(owners, settings, "objects")
        engine = engine_for(url)  # the task's, for the journaled buckets
        try:
            for batch in batches:
                events = mapper.map(batch)
                if events.num_rows:
                    kept = keep_journaled(events, journal_periods_of(url, engine))
                    if kept.num_rows:
                        yield kept
            mapper.finish()
        finally:
            owners.close()
            engine.dispose()

    return transform


def keep_journaled(
    events: pa.RecordBatch, periods: dict[tuple[str, str], tuple[int, int]]
) -> pa.RecordBatch:
    """The events (EVENT_SCHEMA) committed within their bucket's journal period (from
    inclusive, until exclusive), a rename's single event only."""
    if not periods:
        return events.slice(0, 0)
    projects = events.column("project_id").to_pylist()
    buckets = events.column("bucket").to_pylist()
    within = [periods.get((p, b), (0, 0)) for p, b in zip(projects, buckets, strict=True)]
    start = np.array([since for since, _ in within], dtype=np.int64)
    end = np.array([until for _, until in within], dtype=np.int64)
    commit = events.column("commit_ns").to_numpy(zero_copy_only=False)
    keep = pa.array((start <= commit) & (commit < end))
    rename = events.column("rename")
    one_way = pc.fill_null(pc.not_equal(rename, "s3"), True)  # no rename, or its single event
    return events.filter(keep if rename.null_count == len(rename) else pc.and_(keep, one_way))
