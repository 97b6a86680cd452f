"""The `ripple-deliveries` source: the change stream read by tasks that deliver it
(`ripple.pipeline.tasks.deliver_task`); its rows are the tasks' outcomes
(`ripple.pipeline.outcomes`), not records.

Kept light on purpose: Spark plans the source's batches in a Python helper beside the driver,
which imports this module (and the change-stream source's planning), not the delivery code;
only `read()`, on the executors, imports that. So the pipeline's `WorkerSetup` travels
pickled, as bytes, and is unpickled (once per worker process) by the first task.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark import cloudpickle  # Spark's own copy, as it pickles functions
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition

from ripple.pipeline.outcomes import SPARK_OUTCOME_SCHEMA
from ripple.pipeline.source import ChangeStreamSource, ChangeStreamStreamReader, RangePartition

if TYPE_CHECKING:
    from ripple.pipeline.tasks import WorkerSetup

__all__ = ["DELIVERIES", "DeliverySource", "delivery_source"]

DELIVERIES = "ripple-deliveries"


_setups: dict[bytes, WorkerSetup] = {}  # digest of the pickled setup -> the setup


def _setup_of(pickled: bytes) -> WorkerSetup:
    digest = hashlib.sha256(pickled).digest()
    if digest not in _setups:
        _setups[digest] = cloudpickle.loads(pickled)
    return _setups[digest]


class DeliveryStreamReader(ChangeStreamStreamReader):
    """The change-stream reader whose tasks deliver."""

    def __init__(self, options: Mapping[str, str], setup: bytes, table: str) -> None:
        super().__init__(options)
        self.setup = setup  # a pickled WorkerSetup
        self.table = table

    def commit(self, end: Mapping[str, int]) -> None:
        """Nothing to store: each task stored its partitions' consumer offsets once their
        events were delivered (`deliver_task`), so the metabase is at `end` already. (Spark
        calls this in the next batch's critical path: a write transaction a batch saved.)"""

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        from ripple.pipeline.tasks import deliver_task  # the executors' side only

        assert isinstance(partition, RangePartition)
        yield deliver_task(_setup_of(self.setup), self.stream, self.table, partition.ranges)


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
    pickled: bytes = cloudpickle.dumps(setup)  # type: ignore[no-untyped-call]
    return type("PipelineDeliveries", (DeliverySource,), {"SETUP": pickled})
