"""The Spark data source over a change stream: `spark.readStream.format("ripple-changestream")`.

Each change-stream partition has its own offset (the last position read). The one rule the
reader relies on: `latestOffset` only ever names committed positions, and positions are
dense and taken in commit order (`ripple.changestream.writer`), so everything up to a
partition's committed `next_position` is final (nothing is skipped). A batch always ends on
a transaction's last record in its partition and takes every partition up to one commit
time, so the transform sees whole transactions and no key has a later event in an earlier
batch. `read()` is stateless; `commit(end)` also stores the positions as consumer offsets.

Input partitions, admission control and the options: docs/pipeline.md, "Source".
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa
import sqlalchemy as sa
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows
from sqlalchemy.pool import NullPool

from ripple.changestream.reader import DEFAULT_STREAM, ChangeStreamReader
from ripple.changestream.schema import change_records
from ripple.changestream.tag import Operation, TransactionTag

NAME = "ripple-changestream"
DEFAULT_MAX_RECORDS = 50_000
DEFAULT_CONSUMER = "pipeline"

# The records as the source returns them: what the transform needs, nothing more.
ARROW_SCHEMA = pa.schema(
    [
        ("partition", pa.int32()),
        ("position", pa.int64()),
        ("commit_ns", pa.int64()),
        ("transaction_id", pa.string()),
        ("record_sequence", pa.int32()),
        ("is_last_in_partition", pa.bool_()),
        ("mod_type", pa.int32()),
        ("mods", pa.string()),
        ("transaction_tag", pa.string()),
        ("is_system_transaction", pa.bool_()),
        ("stream_version", pa.int32()),  # which definition wrote it (which columns it has)
    ]
)
SPARK_SCHEMA = (
    "partition int, position bigint, commit_ns bigint, transaction_id string, "
    "record_sequence int, is_last_in_partition boolean, mod_type int, mods string, "
    "transaction_tag string, is_system_transaction boolean, stream_version int"
)
_READ_CHUNK = 10_000  # rows per Arrow batch returned by read()
SINGLE_TASK_RECORDS = 10_000  # a batch of at most this many records is read in one task

Offsets = dict[str, int]  # partition number (as a string: offsets are JSON) -> last position


def engine_for(url: str) -> sa.Engine:
    """An engine for one short task; no pool survives it."""
    return sa.create_engine(url, poolclass=NullPool)


class RangePartition(InputPartition):
    """Positions (start, end] of one or more change-stream partitions, each whole:
    `ranges` holds (partition, start, end) per stream partition."""

    def __init__(self, ranges: Sequence[tuple[int, int, int]]) -> None:
        super().__init__(tuple(ranges))
        self.ranges: tuple[tuple[int, int, int], ...] = self.value


class ChangeStreamSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> str:
        return SPARK_SCHEMA

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return ChangeStreamStreamReader(self.options)


class ChangeStreamStreamReader(DataSourceStreamReader):
    def __init__(self, options: Mapping[str, str]) -> None:
        # Spark's options are case-insensitive: look names up in lower case
        options = {k.lower(): v for k, v in options.items()}
        if not options.get("url"):
            raise ValueError("the ripple-changestream source needs option 'url' (the metabase)")
        self.url = options["url"]
        self.stream = options.get("stream", DEFAULT_STREAM)
        self.consumer = options.get("consumer", DEFAULT_CONSUMER)
        self.max_records = int(options.get("maxrecordsperbatch", DEFAULT_MAX_RECORDS))
        if self.max_records < 1:
            raise ValueError("option maxRecordsPerBatch must be a positive number of records")
        # at most half a full batch, so a backlog drained in full batches keeps its tasks
        self.single_task_records = min(SINGLE_TASK_RECORDS, self.max_records // 2)
        self.starting = options.get("startingpositions", "earliest")
        if self.starting not in ("earliest", "latest"):
            raise ValueError("option startingPositions must be 'earliest' or 'latest'")
        self._engine: sa.Engine | None = None

    # driver side -----------------------------------------------------------------------

    @property
    def engine(self) -> sa.Engine:
        if self._engine is None:
            self._engine = sa.create_engine(self.url, pool_size=1, max_overflow=1)
        return self._engine

    def _ends(self) -> Offsets:
        ends = ChangeStreamReader(self.engine, self.stream).ends()
        if not ends:
            raise ValueError(
                f"change stream {self.stream!r} does not exist (run ripple db upgrade)"
            )
        return {str(partition): end for partition, end in ends.items()}

    def initialOffset(self) -> Offsets:
        ends = self._ends()
        start = dict(ends) if self.starting == "latest" else dict.fromkeys(ends, 0)
        committed = ChangeStreamReader(self.engine, self.stream).offsets(self.consumer)
        for partition, position in committed.items():
            start[str(partition)] = position
        return start

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.max_records)

    def latestOffset(self, start: Offsets, limit: ReadLimit) -> Offsets:
        ends = self._ends()
        begin = {k: start.get(k, 0) for k in ends}
        backlog = {k: ends[k] - begin[k] for k in ends if ends[k] > begin[k]}
        if not backlog or isinstance(limit, ReadAllAvailable):
            return {k: max(ends[k], begin[k]) for k in ends}
        budget = limit.max_rows if isinstance(limit, ReadMaxRows) else self.max_records
        share = max(1, math.ceil(budget / len(backlog)))
        latest = dict(begin)
        with self.engine.connect() as conn:
            cut = []
            for k, waiting in backlog.items():
                if waiting <= share:
                    latest[k] = ends[k]
                else:
                    latest[k] = self._transaction_end(conn, int(k), begin[k], begin[k] + share)
                    cut.append(k)
            if cut:
                # One commit time for every partition: a change of several keys is recorded
                # in its least key's partition, so a key's events may be in two partitions,
                # and a batch that took a key's later event from one must hold every earlier
                # event from the other. Commit times grow with the commit order of the whole
                # stream (ripple.changestream.writer), so all up to one time is such a batch.
                upto_ns = min(self._commit_ns(conn, int(k), latest[k]) for k in cut)
                for k in backlog:
                    latest[k] = self._last_end_by(conn, int(k), begin[k], latest[k], upto_ns)
        return latest

    def _commit_ns(self, conn: sa.Connection, partition: int, position: int) -> int:
        c = change_records.c
        mine = sa.and_(c.stream_name == self.stream, c.partition == partition)
        query = sa.select(c.commit_ns).where(mine, c.position == position).limit(1)
        return int(conn.execute(query).scalar_one())

    def _last_end_by(
        self, conn: sa.Connection, partition: int, after: int, upto: int, upto_ns: int
    ) -> int:
        """The last position in (after, upto] that ends a transaction committed at or before
        `upto_ns`; `after` if there is none."""
        c = change_records.c
        last = conn.execute(
            sa.select(sa.func.max(c.position)).where(
                c.stream_name == self.stream,
                c.partition == partition,
                c.is_last_in_partition,
                c.position > after,
                c.position <= upto,
                c.commit_ns <= upto_ns,
            )
        ).scalar()
        return after if last is None else int(last)

    def _transaction_end(self, conn: sa.Connection, partition: int, after: int, upto: int) -> int:
        """The last position in (after, upto] that ends a transaction, or, if a transaction
        is larger than the whole range, the end of the transaction that starts it."""
        c = change_records.c
        mine = sa.and_(
            c.stream_name == self.stream, c.partition == partition, c.is_last_in_partition
        )
        last = conn.execute(
            sa.select(sa.func.max(c.position)).where(mine, c.position > after, c.position <= upto)
        ).scalar()
        if last is None:
            last = conn.execute(
                sa.select(sa.func.min(c.position)).where(mine, c.position > after)
            ).scalar()
        if last is None:  # cannot happen: the partition's end is a transaction's last record
            raise RuntimeError(f"partition {partition} has records but no transaction end")
        return int(last)

    def reportLatestOffset(self) -> Offsets:
        return self._ends()

    def partitions(self, start: Offsets, end: Offsets) -> Sequence[InputPartition]:
        """The ranges (start, end] of the stream partitions with records, less what the
        consumer's offsets say was delivered already, as one input partition over them all
        when they are few (`single_task_records`), else one per stream partition. A batch
        Spark runs again after a stop or crash (planned, but not in its commit log) skips
        the transactions the pipeline delivered before it stopped. Delivered offsets always
        end a transaction, so no transaction is cut."""
        delivered = ChangeStreamReader(self.engine, self.stream).offsets(self.consumer)
        ranges = []
        for k in sorted(end, key=int):
            begin = max(start.get(k, 0), delivered.get(int(k), 0))
            if end[k] > begin:
                ranges.append((int(k), begin, end[k]))
        return self.plan(ranges)

    def plan(self, ranges: Sequence[tuple[int, int, int]]) -> Sequence[InputPartition]:
        """The input partitions over `ranges` ((partition, after, upto), ordered)."""
        # A small batch is one task: each task costs Spark and its Python workers more than
        # a few hundred records do (the latency at a steady trickle). A large one is a task
        # per stream partition, for the cores.
        if sum(last - first for _, first, last in ranges) <= self.single_task_records:
            return [RangePartition(ranges)] if ranges else []
        # A change of several keys is recorded in its least key's partition: then a key's
        # events may be in two partitions, which must be delivered by one task, in order.
        if self._changes_several_keys(ranges):
            return [RangePartition(ranges)]
        return [RangePartition([r]) for r in ranges]

    def _changes_several_keys(self, ranges: Sequence[tuple[int, int, int]]) -> bool:
        """Does any record in `ranges` record a change of several keys: a record of several
        mods (DeleteObjects, lifecycle expiration), or a rename (its source and target)?"""
        c = change_records.c
        renames = (
            c.transaction_tag.contains(TransactionTag.member_text("operation", op), autoescape=True)
            for op in (Operation.RENAME, Operation.RENAME_PREFIX)
        )
        several = sa.or_(c.mods.like('%"keys"%"keys"%'), *renames)
        query = sa.select(c.position).where(c.stream_name == self.stream, _within(ranges), several)
        with self.engine.connect() as conn:
            return conn.execute(query.limit(1)).first() is not None

    def commit(self, end: Offsets) -> None:
        reader = ChangeStreamReader(self.engine, self.stream)
        reader.commit_offsets(self.consumer, {int(k): v for k, v in end.items()})

    def stop(self) -> None:
        if self._engine is not None:
            self._engine.dispose()

    # executor side ----------------------------------------------------------------------

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, RangePartition):
            raise TypeError(f"not a partition of ranges: {type(partition).__name__}")
        return read_ranges(self.url, self.stream, partition.ranges)


def read_ranges(
    database: str | sa.Engine, stream: str, ranges: Sequence[tuple[int, int, int]]
) -> Iterator[pa.RecordBatch]:
    """Records of positions (start, end] of each (partition, start, end), as Arrow batches
    of the source's schema, one partition after another, through one connection: of
    `database`'s pool when it is an engine, else of its own. Ranges of
    at most `_READ_CHUNK` records in all (a trickle's batch) are one query fetched at once;
    larger ones are streamed, a server-side cursor per partition (its round trips cost a
    small batch more than its records do)."""
    c = change_records.c
    columns = [c[name] for name in ARROW_SCHEMA.names]
    engine = engine_for(database) if isinstance(database, str) else database
    try:
        with engine.connect() as conn:
            if sum(end - start for _, start, end in ranges) <= _READ_CHUNK:
                if ranges:
                    rows = conn.execute(
                        sa.select(*columns)
                        .where(c.stream_name == stream, _within(ranges))
                        .order_by(c.partition, c.position)
                    ).all()
                    if rows:
                        yield _batch(rows)
                return
            for partition, start, end in ranges:
                query = (
                    sa.select(*columns)
                    .where(c.stream_name == stream, _within([(partition, start, end)]))
                    .order_by(c.position)
                )
                result = conn.execution_options(yield_per=_READ_CHUNK).execute(query)
                for rows in result.partitions(_READ_CHUNK):
                    yield _batch(rows)
    finally:
        if isinstance(database, str):
            engine.dispose()


def _within(ranges: Sequence[tuple[int, int, int]]) -> sa.ColumnElement[bool]:
    """Records of positions (start, end] of each (partition, start, end)."""
    c = change_records.c
    return sa.or_(
        *(
            sa.and_(c.partition == p, c.position > start, c.position <= end)
            for p, start, end in ranges
        )
    )


def _batch(rows: Sequence[Any]) -> pa.RecordBatch:
    columns: list[Sequence[Any]] = (
        list(zip(*rows, strict=True)) if rows else [[] for _ in ARROW_SCHEMA.names]
    )
    return pa.RecordBatch.from_arrays(
        [pa.array(col, type=field.type) for col, field in zip(columns, ARROW_SCHEMA, strict=True)],
        schema=ARROW_SCHEMA,
    )
