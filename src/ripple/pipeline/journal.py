"""The bucket journal: every event of a journaled bucket's objects as a row of a Parquet
table Spark SQL reads (docs/journal.md). A streaming query of its own over the objects'
change stream (consumer `journal`), whose source's tasks (`ripple.pipeline.journal_source`)
map the records they read to the events of journaled buckets
(`ripple.pipeline.journal_events`) and those to the journal's columns
(`ripple.pipeline.journal_rows`); Spark's file sink writes them, partitioned by date and
bucket, one atomic commit per micro-batch: the sink's log (`_spark_metadata`) lists the
files of each committed batch, so a batch run again after a crash never doubles a row for a
reader of the table's root. Columns: `JOURNAL_COLUMNS`, after Amazon S3 Metadata's journal.

The query starts once a bucket is journaled (`JournalQuery.start_if_journaled`), so a
pipeline without journals reads the stream once, not twice.
"""

from __future__ import annotations

import logging
import time

import sqlalchemy as sa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery

from ripple.changestream.reader import DEFAULT_STREAM
from ripple.events import EventSettings
from ripple.notifications.journal_expiry import journal_table
from ripple.pipeline.journal_events import journal_periods_of
from ripple.pipeline.journal_rows import JOURNAL_COLUMNS, PARTITIONS
from ripple.pipeline.journal_source import JOURNAL_SOURCE, journal_source
from ripple.pipeline.source import engine_for

__all__ = [
    "CONSUMER",
    "JOURNAL_COLUMNS",
    "PARTITIONS",
    "JournalQuery",
    "journal_checkpoint",
    "journal_columns",
    "journal_table",
]

log = logging.getLogger(__name__)

CONSUMER = "journal"  # the change stream's consumer whose offsets the journal query keeps
QUERY_NAME = "ripple-journal"
TRIGGER = "500 milliseconds"  # a row is visible to readers about a second after its write
# A backlog's batch takes this many times the pipeline's maxRecordsPerBatch: each batch costs
# a Spark job, its tasks' start, the slots idle at its end and the sink's commit. A task
# streams its records; only the sort before the partitioned write holds a task's rows, and
# it spills to disk past its memory (BENCHMARKS.md, "Issue 30: the journal").
BATCH_FACTOR = 4
CHECK_EVERY_S = 2.0  # how often a pipeline without a journal query looks for a journal


def journal_checkpoint(location: str) -> str:
    """The journal query's checkpoint: beside its table, not with the pipeline's, since the
    two must go together (a checkpoint started anew would number its batches from 0 again,
    and the table's sink skips the batch numbers it has committed)."""
    return f"{location.rstrip('/')}/checkpoint"


def journal_columns(rows: DataFrame) -> DataFrame:
    """A journal task's rows (TASK_SCHEMA) → the journal's columns (JOURNAL_COLUMNS), in
    Spark: the user metadata and the tags read into maps, a rename's source key decoded
    (its event's is URL-encoded, as an event's keys are)."""
    columns: dict[str, Column] = {name: F.col(name) for name in JOURNAL_COLUMNS}
    columns["user_metadata"] = F.from_json(F.col("user_metadata"), "map<string, string>")
    columns["object_tags"] = F.from_json(F.col("object_tags"), "map<string, string>")
    columns["rename_source_key"] = F.url_decode(F.col("rename_source_key"))
    return rows.select(*(columns[name].alias(name) for name in JOURNAL_COLUMNS))


class JournalQuery:
    """The journal's streaming query in a pipeline run: started once a bucket is journaled
    (checked every CHECK_EVERY_S by the driver's loop), then running until the job stops."""

    def __init__(
        self,
        spark: SparkSession,
        *,
        url: str,
        events: EventSettings,
        location: str,
        max_records_per_batch: int,
    ) -> None:
        self.spark = spark
        self.url = url
        self.events = events
        self.location = location
        self.max_records = max_records_per_batch
        self.query: StreamingQuery | None = None
        self._engine: sa.Engine | None = None
        self._checked = -float("inf")

    def start_if_journaled(self) -> StreamingQuery | None:
        """Start the query if it is not running and a bucket is journaled (looked up at
        most every CHECK_EVERY_S); the query, once started."""
        if self.query is not None or not self.location:
            return self.query
        now = time.monotonic()
        if now - self._checked < CHECK_EVERY_S:
            return None
        self._checked = now
        if self._engine is None:
            self._engine = engine_for(self.url)
        try:
            if not journal_periods_of(self.url, self._engine):
                return None
        except sa.exc.SQLAlchemyError as e:  # the database away: the next check tries again
            log.warning("journal: cannot read the journaled buckets: %s", str(e).splitlines()[0])
            return None
        self.query = self.start()
        log.info("journal: writing journaled buckets' events to %s", self.location)
        return self.query

    def start(self) -> StreamingQuery:
        # the records mapped to the journal's rows in the source's own tasks
        self.spark.dataSource.register(journal_source(self.events))
        rows = (
            self.spark.readStream.format(JOURNAL_SOURCE)
            .option("url", self.url)
            .option("stream", DEFAULT_STREAM)
            .option("consumer", CONSUMER)
            .option("maxRecordsPerBatch", str(self.max_records * BATCH_FACTOR))
            .load()
        )
        return (
            journal_columns(rows)
            .writeStream.format("parquet")
            .option("path", journal_table(self.location))
            .option("checkpointLocation", journal_checkpoint(self.location))
            .partitionBy(*PARTITIONS)
            .trigger(processingTime=TRIGGER)
            .queryName(QUERY_NAME)
            .start()
        )

    def close(self) -> None:
        if self._engine is not None:
            self._engine.dispose()
