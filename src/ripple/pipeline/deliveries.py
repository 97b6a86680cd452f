"""The `ripple-deliveries` source: the change stream read by tasks that deliver it
(`ripple.pipeline.tasks.deliver_task`); its rows are the tasks' outcomes
(`ripple.pipeline.outcomes`), not records.

Kept light on purpose: Spark plans the source's batches in a Python helper beside the driver,
which imports this module (and the change-stream source's planning), not the delivery code;
only `read()`, on the executors, imports that. So the pipeline's `WorkerSetup` travels
pickled, as bytes, and is unpickled (once per worker process) by the first task.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit

from ripple.changestream.reader import ChangeStreamReader
from ripple.pipeline.leases import Lease
from ripple.pipeline.outcomes import SPARK_OUTCOME_SCHEMA
from ripple.pipeline.pickled import pickled, unpickled
from ripple.pipeline.source import (
    ChangeStreamSource,
    ChangeStreamStreamReader,
    Offsets,
    RangePartition,
)

if TYPE_CHECKING:
    from ripple.pipeline.tasks import WorkerSetup

__all__ = ["DELIVERIES", "DeliverySource", "delivery_source"]

DELIVERIES = "ripple-deliveries"
# Offsets are stream partitions' positions, and two counters that make a batch of the
# same positions a new one: a lease's, and a batch run again from the consumer's offsets.
LEASE = "lease"
AGAIN = "again"


def _positions(offsets: Offsets) -> Offsets:
    return {k: v for k, v in offsets.items() if k not in (LEASE, AGAIN)}


class LeasePartition(InputPartition):
    """One task that delivers what the stream receives for a while (`lease_task`)."""

    def __init__(self, lease: Lease) -> None:
        super().__init__(lease)
        self.lease = lease


class DeliveryStreamReader(ChangeStreamStreamReader):
    """The change-stream reader whose tasks deliver.

    With a lease (`leaseSeconds` > 0) a trickle is not a batch per handful of records: when
    at most a single task's records wait, the batch is one lease task that delivers what
    arrives for that long, a few milliseconds after each commit, so an event waits for
    neither Spark's planning nor its checkpoint writes, which cost far more than a step
    (BENCHMARKS.md, "Issue 25, third session"). The lease's
    offsets are the delivered positions it started from, with a lease counter that makes
    each lease a new batch; what a lease delivered is in the consumer offsets, where the
    next batch starts (`partitions` and `latestOffset` both start from them). A backlog is
    planned as before, a task per stream partition."""

    def __init__(self, options: Mapping[str, str], setup: bytes, table: str) -> None:
        super().__init__(options)
        self.setup = setup  # a pickled WorkerSetup
        self.table = table
        options = {k.lower(): v for k, v in options.items()}
        self.lease_s = float(options.get("leaseseconds", "0"))
        if not 0 <= self.lease_s <= 3600:
            raise ValueError("option leaseSeconds must be from 0 (no lease) to 3600")
        # the run's number, which its leases deliver under (ripple.pipeline.leases)
        self.lease_run = int(options.get("leaserun", "0"))
        if self.lease_s and self.lease_run <= 0:
            raise ValueError("leases need option leaseRun, the number open_leases gave")

    def _begin(self, start: Offsets) -> Offsets:
        """Where the next batch starts: the consumer's offsets, which the tasks store once
        delivered; `start` (Spark's) only for a partition without one (a stream read from
        its end). Spark's may be ahead of them, for a batch cancelled at a stop that Spark
        committed anyway, or behind, for a lease."""
        begin = _positions(start)
        delivered = ChangeStreamReader(self.engine, self.stream).offsets(self.consumer)
        begin.update({str(partition): position for partition, position in delivered.items()})
        return begin

    def latestOffset(self, start: Offsets, limit: ReadLimit) -> Offsets:
        begin = self._begin(start)
        if self.lease_s > 0 and not isinstance(limit, ReadAllAvailable):
            ends = self._ends()
            waiting = sum(max(0, end - begin.get(k, 0)) for k, end in ends.items())
            if waiting <= self.single_task_records:
                return {**{k: begin.get(k, 0) for k in ends}, LEASE: start.get(LEASE, 0) + 1}
        latest = super().latestOffset(begin, limit)
        if latest == _positions(start) and latest != begin:
            # records behind Spark's offsets wait (a batch cancelled at a stop, committed):
            # the same offsets would be no batch at all
            return {**latest, AGAIN: start.get(AGAIN, 0) + 1}
        return latest

    def partitions(self, start: Offsets, end: Offsets) -> Sequence[InputPartition]:
        begin = self._begin(start)
        if LEASE in end and end[LEASE] != start.get(LEASE):
            lease = Lease(self.lease_run, self.lease_s, self.single_task_records, begin)
            return [LeasePartition(lease)]
        upto = _positions(end)
        ranges = [
            (int(k), begin.get(k, 0), upto[k])
            for k in sorted(upto, key=int)
            if upto[k] > begin.get(k, 0)
        ]
        return self.plan(ranges)

    def commit(self, end: Mapping[str, int]) -> None:
        """Nothing to store: each task stored its partitions' consumer offsets once their
        events were delivered (`deliver_task`), so the metabase is at `end` already. (Spark
        calls this in the next batch's critical path: a write transaction a batch saved.)"""

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        from ripple.pipeline.tasks import deliver_task, lease_task  # the executors' side only

        setup: WorkerSetup = unpickled(self.setup)
        if isinstance(partition, LeasePartition):
            yield lease_task(setup, self.stream, self.table, partition.lease)
            return
        if not isinstance(partition, RangePartition):
            raise TypeError(f"neither a lease nor ranges: {type(partition).__name__}")
        yield deliver_task(setup, self.stream, self.table, partition.ranges)


class DeliverySource(ChangeStreamSource):
    """`ripple-deliveries`. Options as `ripple-changestream`'s, and `table` (`objects` or
    `buckets`: the stream's table)."""

    SETUP: bytes = b""  # a pickled WorkerSetup

    @classmethod
    def name(cls) -> str:
        return DELIVERIES

    def schema(self) -> str:
        return SPARK_OUTCOME_SCHEMA

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        if not self.SETUP:
            raise ValueError("register the source made by delivery_source(setup)")
        table = {k.lower(): v for k, v in self.options.items()}.get("table", "objects")
        return DeliveryStreamReader(self.options, self.SETUP, table)


def delivery_source(setup: WorkerSetup) -> type[DeliverySource]:
    """The `ripple-deliveries` source of one pipeline run, to register with Spark (which
    pickles the class, and with it the setup, to the planner and the workers)."""
    return type("PipelineDeliveries", (DeliverySource,), {"SETUP": pickled(setup)})
