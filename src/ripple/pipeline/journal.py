"""The bucket journal: every event of a journaled bucket's objects as a row of a Parquet
table Spark SQL reads (docs/journal.md). A streaming query of its own over the objects'
change stream (consumer `journal`), whose source's tasks (`ripple.pipeline.journal_source`)
map the records they read to the events of journaled buckets
(`ripple.pipeline.journal_events`); Spark's file sink writes them, partitioned by date and
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
from ripple.pipeline.journal_events import journal_events, journal_periods_of, keep_journaled
from ripple.pipeline.journal_source import JOURNAL_SOURCE, journal_source
from ripple.pipeline.source import engine_for

__all__ = [
    "CONSUMER",
    "JOURNAL_COLUMNS",
    "JournalQuery",
    "journal_checkpoint",
    "journal_events",
    "journal_table",
    "keep_journaled",
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
PARTITIONS = ("record_date", "bucket")  # the table's directories: a day's, then a bucket's

# The journal's columns as a reader sees them (Amazon S3 Metadata's journal table, and the
# S3 event's name), the partition columns last, as Spark reads them.
JOURNAL_COLUMNS = (
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

# what the columns take from an S3 event record (the rest comes from the event's row)
_MESSAGE = (
    "eventTime string, userIdentity struct<principalId: string>, "
    "requestParameters struct<sourceIPAddress: string>, responseElements map<string, string>, "
    "s3 struct<object: struct<size: bigint, eTag: string, renameFromKey: string>>"
)
_PARSED = "_message"  # the parsed message, between the two projections
_DELETE_MARKERS = ("ObjectRemoved:DeleteMarkerCreated", "LifecycleExpiration:DeleteMarkerCreated")


def journal_checkpoint(location: str) -> str:
    """The journal query's checkpoint: beside its table, not with the pipeline's, since the
    two must go together (a checkpoint started anew would number its batches from 0 again,
    and the table's sink skips the batch numbers it has committed)."""
    return f"{location.rstrip('/')}/checkpoint"


def journal_rows(events: DataFrame) -> DataFrame:
    """Event rows (EVENT_SCHEMA) → journal rows (JOURNAL_COLUMNS), in Spark. The message is
    parsed once, as a column of its own: taking fields of a `from_json` directly, Spark's
    optimizer parses the JSON again for each field (OptimizeJsonExprs)."""
    events = events.withColumn(_PARSED, F.from_json(F.col("message").cast("string"), _MESSAGE))
    message = F.col(_PARSED)
    name = F.col("event_name")
    timestamp = F.to_timestamp(message["eventTime"])
    record_type = (
        F.when(name.startswith("ObjectCreated:"), F.lit("CREATE"))
        .when(
            name.startswith("ObjectRemoved:") | name.startswith("LifecycleExpiration:"),
            F.lit("DELETE"),
        )
        .otherwise(F.lit("UPDATE_METADATA"))
    )
    columns: dict[str, Column] = {
        "key": F.col("key"),
        "sequence_number": F.col("sequencer"),
        "record_type": record_type,
        "record_timestamp": timestamp,
        "version_id": F.col("version_id"),
        "is_delete_marker": name.isin(*_DELETE_MARKERS),
        "size": message["s3"]["object"]["size"],
        "last_modified_date": F.when(record_type == "CREATE", timestamp),
        "e_tag": message["s3"]["object"]["eTag"],
        "requester": message["userIdentity"]["principalId"],
        "source_ip_address": message["requestParameters"]["sourceIPAddress"],
        "request_id": message["responseElements"]["x-amz-request-id"],
        "user_metadata": F.from_json(F.col("metadata"), "map<string, string>"),
        "object_tags": F.from_json(F.col("tags"), "map<string, string>"),
        "event_name": name,
        # a rename's source key (its event's is URL-encoded, as an event's keys are)
        "rename_source_key": F.url_decode(message["s3"]["object"]["renameFromKey"]),
        # the UTC date of the event's time, whatever the session's time zone
        "record_date": F.to_date(F.substring(message["eventTime"], 1, 10)),
        "bucket": F.col("bucket"),
    }
    return events.select(*(columns[name].alias(name) for name in JOURNAL_COLUMNS))


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
        # the records mapped to events in the source's own tasks (`journal_events`)
        self.spark.dataSource.register(journal_source(self.events))
        events = (
            self.spark.readStream.format(JOURNAL_SOURCE)
            .option("url", self.url)
            .option("stream", DEFAULT_STREAM)
            .option("consumer", CONSUMER)
            .option("maxRecordsPerBatch", str(self.max_records * BATCH_FACTOR))
            .load()
        )
        return (
            journal_rows(events)
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
