"""Which pipeline run's lease tasks may deliver: the lease mark.

A lease task (`ripple.pipeline.tasks.lease_task`) follows the change stream for seconds. When
its pipeline stops, Spark cancels it, but ends its Python worker only a moment later, and the
task would deliver until then, perhaps beside the next run's. So the driver keeps a mark in
the metabase: each run opens the leases with a new number, which its source plans every
lease with (`Lease.run`), and closes them when it stops (the number negated). A lease checks
the mark before each step and delivers only while it is its run's number.

The mark is stored as the offset of partition 0 of the consumer `pipeline-leases` of the
stream (`ripple.changestream.reader`), so it needs no table of its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import sqlalchemy as sa

from ripple.changestream.reader import ChangeStreamReader

__all__ = ["LEASE_CONSUMER", "Lease", "close_leases", "lease_mark", "open_leases"]

LEASE_CONSUMER = "pipeline-leases"


@dataclass(frozen=True)
class Lease:
    """A lease task's terms, as its batch was planned: its run's number (the mark it
    delivers under), how long it follows the stream, the most records that may wait before
    it hands over to a batch, and where delivery stood ({partition: position}, as Spark's
    offsets spell partitions), for a partition without consumer offsets yet."""

    run: int
    seconds: float
    most_records: int
    begin: Mapping[str, int] = field(default_factory=dict)


def lease_mark(reader: ChangeStreamReader) -> int:
    """The mark: a run's number while it runs, negated once it stopped, 0 before any."""
    return reader.offsets(LEASE_CONSUMER).get(0, 0)


def open_leases(engine: sa.Engine, stream: str) -> int:
    """A new run's number, as the mark: leases of an earlier run stop delivering."""
    reader = ChangeStreamReader(engine, stream)
    number = abs(lease_mark(reader)) + 1
    reader.commit_offsets(LEASE_CONSUMER, {0: number})
    return number


def close_leases(engine: sa.Engine, stream: str, number: int) -> None:
    """The run `number` stopped: its leases end at their next step."""
    ChangeStreamReader(engine, stream).commit_offsets(LEASE_CONSUMER, {0: -number})
