"""The `ripple-journal` source: the change stream read as the bucket journal's rows
(`ripple.pipeline.journal`). Its batches, offsets and consumer are the change stream's
(`ripple-changestream`, whose reader it is); only a task's `read` differs: it maps the
records it reads to the events of journaled buckets (`journal_events`) and those to the
journal's columns (`journal_rows`) in the same Python worker, so a task runs one Python
stage, not two, and neither the records nor the events' JSON cross into the JVM
(BENCHMARKS.md, "Issue 30: the journal").

Kept light as `ripple.pipeline.deliveries` is: Spark plans the batches in a Python helper
beside the driver, which imports this module, not the transform; the event settings travel
pickled and are unpickled once per worker process.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition

from ripple.pipeline.pickled import pickled, unpickled
from ripple.pipeline.source import (
    ChangeStreamSource,
    ChangeStreamStreamReader,
    RangePartition,
    read_ranges,
)

if TYPE_CHECKING:
    from ripple.events import EventSettings

__all__ = ["JOURNAL_SOURCE", "JournalSource", "journal_source"]

JOURNAL_SOURCE = "ripple-journal"


class JournalStreamReader(ChangeStreamStreamReader):
    """The change-stream reader whose tasks return the journal's rows (TASK_SCHEMA)."""

    def __init__(self, options: Mapping[str, str], settings: bytes) -> None:
        super().__init__(options)
        self.settings = settings  # pickled EventSettings

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        # the executors' side only
        from ripple.pipeline.journal_events import journal_events
        from ripple.pipeline.journal_rows import journal_rows

        if not isinstance(partition, RangePartition):
            raise TypeError(f"not a partition of ranges: {type(partition).__name__}")
        records = read_ranges(self.url, self.stream, partition.ranges)
        settings: EventSettings = unpickled(self.settings)
        return map(journal_rows, journal_events(self.url, settings)(records))


class JournalSource(ChangeStreamSource):
    """`ripple-journal`. Options as `ripple-changestream`'s."""

    SETTINGS: bytes = b""  # pickled EventSettings

    @classmethod
    def name(cls) -> str:
        return JOURNAL_SOURCE

    def schema(self) -> Any:
        from pyspark.sql.pandas.types import from_arrow_schema

        from ripple.pipeline.journal_rows import TASK_SCHEMA

        return from_arrow_schema(TASK_SCHEMA)

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        if not self.SETTINGS:
            raise ValueError("register the source made by journal_source(settings)")
        return JournalStreamReader(self.options, self.SETTINGS)


def journal_source(settings: EventSettings) -> type[JournalSource]:
    """The `ripple-journal` source of one pipeline run, to register with Spark (which
    pickles the class, and with it the settings, to the planner and the workers)."""
    return type("PipelineJournal", (JournalSource,), {"SETTINGS": pickled(settings)})
