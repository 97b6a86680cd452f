"""The snapshot target: a topic's events archived by a snapshotter, one writer per bucket.

`snapshot://NAME` names a snapshotter of the configuration (`[snapshotters.NAME]`, or the
embedded `default`), opened in this process or, in the pipeline's tasks, the one the driver
serves (`ripple.snapshotter.shared`).
Each event is published with the bucket as writer id, the event record (JSON) as payload,
the delivery's attributes (eventName, bucket, key, versionId, sequencer), its stable event
id, and its `eventTime` as timestamp, so `ripple snapshot replay --writer BUCKET --since …`
selects by when things happened. A batch is acknowledged once it is in the snapshotter's
write-ahead log; if the log cannot take it, the whole batch is `retry`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

from ripple.events.sequencer import timestamp_ns
from ripple.snapshotter import shared
from ripple.snapshotter.service import Publish
from ripple.snapshotter.wal import WalError
from ripple.targets.base import OK, Delivery, Outcome, Result, one_line

__all__ = ["SnapshotTarget", "from_arguments"]


class SnapshotTarget:
    def __init__(self, name: str, snapshotter: str) -> None:
        self.name = name
        self.snapshotter = snapshotter
        self._snap: shared.Archive | None = None

    def open(self) -> None:
        if self._snap is None:
            self._snap = shared.acquire(self.snapshotter)

    def publish(self, deliveries: Sequence[Delivery]) -> list[Result]:
        if not deliveries:
            return []
        if self._snap is None:
            self.open()
        if self._snap is None:
            raise RuntimeError(f"snapshotter {self.snapshotter} did not open")
        events = [
            Publish(d.bucket, d.message, d.attributes, d.event_id, _event_time(d))
            for d in deliveries
        ]
        try:
            self._snap.publish_many(events)
        except (WalError, RuntimeError) as e:
            return [Result(Outcome.RETRY, f"snapshotter {self.snapshotter}: {one_line(e)}")] * len(
                deliveries
            )
        return [OK] * len(deliveries)

    def close(self) -> None:
        if self._snap is not None:
            self._snap = None
            shared.release(self.snapshotter)


def _event_time(delivery: Delivery) -> int:
    """The event record's `eventTime` in Unix milliseconds; now if it has none."""
    try:
        text = delivery.event["eventTime"]
        return timestamp_ns(text) // 1_000_000
    except (KeyError, TypeError, ValueError):
        return time.time_ns() // 1_000_000


def from_arguments(name: str, snapshotter: str, arguments: Mapping[str, str]) -> SnapshotTarget:
    """The target of topic `name`; `ValueError` for an unknown snapshotter or any argument
    (a snapshotter is configured in ripple.toml, not per topic)."""
    if arguments:
        raise ValueError(
            f"topic {name!r}: a snapshot:// topic takes no arguments "
            f"({', '.join(map(repr, arguments))}); configure [snapshotters.{snapshotter}] instead"
        )
    try:
        shared.settings_named(snapshotter)
    except ValueError as e:
        raise ValueError(f"topic {name!r}: {e}") from None
    return SnapshotTarget(name, snapshotter)
