"""The reference transform the tests hold the pipeline's to: every transaction through
`s3_events`, one at a time (the pipeline's `BatchMapper` maps most of them over whole
columns)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from ripple.changestream.reader import change_record
from ripple.changestream.tail import transactions
from ripple.events import EventSettings
from ripple.pipeline.transform import ID_PREFIXES, event_rows


def events_of_rows(
    rows: Iterable[Mapping[str, Any]],
    owner_of: Callable[[str], str],
    settings: EventSettings,
    table: str = "objects",
) -> Iterator[dict[str, Any]]:
    """Event rows (EVENT_SCHEMA) of source rows given in position order per partition
    (partitions may follow or interleave each other), all through `s3_events`; a
    transaction's events come out once its last record in the partition has been seen.
    `table` is the stream's: `objects` (bucket_eventing) or `buckets` (project_eventing)."""
    prefix = ID_PREFIXES.get(table, "")
    records = (change_record(row, table) for row in rows)
    for group in transactions(records, strict=True):
        yield from event_rows(group, owner_of, settings, prefix)
