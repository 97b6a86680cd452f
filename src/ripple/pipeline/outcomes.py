"""What a delivery task tells the driver: per-task outcomes, never the events.

A task (`ripple.pipeline.tasks`) routes and delivers its events inside a Python worker, whose
Prometheus counters nobody scrapes. So each task reports, as a few rows of `OUTCOME_SCHEMA`:

| kind | name | label | value | text |
|---|---|---|---|---|
| `count` | a counter (`ripple_push_ok`, …) | its destination, or "" | the task's increment | |
| `position` | | a stream partition | the last position the task delivered | |
| `newest` | | | the newest commit time (ns) among its events | |
| `lag` | | | its last delivery's time less its newest event's commit time (ns) | |
| `events` | | | how many events it mapped | |
| `worker` | | | a warm-up task's: its worker's process id | |
| `log` | the logger's name | | the level | a warning or error the task logged |

`Report` records a task's outcomes (the counters' increments are what they moved by during
the task: a Python worker runs one task at a time); `Summary.of` adds up a batch's rows on
the driver, and `Summary.publish` moves the driver's counters and logs the task's messages
there, so `/metrics` and the log of `ripple up` show what the executors did.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from prometheus_client import Counter

from ripple.pipeline import metrics

__all__ = ["OUTCOME_SCHEMA", "SPARK_OUTCOME_SCHEMA", "Report", "Summary"]

OUTCOME_SCHEMA = pa.schema(
    [
        ("kind", pa.string()),
        ("name", pa.string()),
        ("label", pa.string()),
        ("value", pa.int64()),
        ("text", pa.string()),
    ]
)
SPARK_OUTCOME_SCHEMA = "kind string, name string, label string, value bigint, text string"

# the counters a task moves, by name
COUNTERS: dict[str, Counter] = {
    "ripple_events_triggered": metrics.EVENTS_TRIGGERED,
    "ripple_events_lost": metrics.EVENTS_LOST,
    "ripple_events_unrouted": metrics.EVENTS_UNROUTED,
    "ripple_push_ok": metrics.PUSH_OK,
    "ripple_push_fail": metrics.PUSH_FAIL,
    "ripple_deadletter": metrics.DEADLETTER,
}
MAX_LOG_LINES = 50  # per task; more are counted in one line


def counter_values() -> dict[tuple[str, str], float]:
    """Every counter's value per label: {(name, destination or ""): value}."""
    values: dict[tuple[str, str], float] = {}
    for name, counter in COUNTERS.items():
        for family in counter.collect():
            for sample in family.samples:
                if sample.name.endswith("_total"):
                    values[(name, sample.labels.get("destination", ""))] = sample.value
    return values


class _Captured(logging.Handler):
    """Keeps the warnings and errors of ripple's loggers for the next report."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[tuple[str, int, str]] = []
        self.dropped = 0
        self.guard = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        with self.guard:
            if len(self.lines) < MAX_LOG_LINES:
                self.lines.append((record.name, record.levelno, record.getMessage()))
            else:
                self.dropped += 1

    def take(self) -> tuple[list[tuple[str, int, str]], int]:
        with self.guard:
            lines, dropped = self.lines, self.dropped
            self.lines, self.dropped = [], 0
        return lines, dropped


_captured: _Captured | None = None


def capture_logs() -> None:
    """In a Python worker: ripple's warnings and errors go into the task's report (and so
    to the driver's log), not to the worker's stderr."""
    global _captured
    if _captured is None:
        _captured = _Captured()
        logger = logging.getLogger("ripple")
        logger.addHandler(_captured)
        logger.propagate = False
        if logger.level == logging.NOTSET:
            logger.setLevel(logging.INFO)


@dataclass
class Report:
    """One task's outcomes; `rows` once it has done its work."""

    before: dict[tuple[str, str], float] = field(default_factory=counter_values)
    positions: dict[int, int] = field(default_factory=dict)
    newest_commit_ns: int = 0
    lag_ns: int = -1  # -1: it delivered nothing
    events: int = 0
    worker: int = 0  # a warm-up's: the worker's process id

    def batch(self) -> pa.RecordBatch:
        rows: list[tuple[str, str, str, int, str | None]] = []
        for (name, label), value in counter_values().items():
            moved = round(value - self.before.get((name, label), 0.0))
            if moved:
                rows.append(("count", name, label, moved, None))
        for partition, position in sorted(self.positions.items()):
            rows.append(("position", "", str(partition), position, None))
        if self.newest_commit_ns:
            rows.append(("newest", "", "", self.newest_commit_ns, None))
        if self.lag_ns >= 0:
            rows.append(("lag", "", "", self.lag_ns, None))
        rows.append(("events", "", "", self.events, None))
        if self.worker:
            rows.append(("worker", "", "", self.worker, None))
        if _captured is not None:
            lines, dropped = _captured.take()
            rows.extend(("log", logger, "", level, text) for logger, level, text in lines)
            if dropped:
                message = f"{dropped} more warnings of this task not shown"
                rows.append(("log", "ripple.pipeline", "", logging.WARNING, message))
        columns = list(zip(*rows, strict=True))
        return pa.RecordBatch.from_arrays(
            [pa.array(c, type=f.type) for c, f in zip(columns, OUTCOME_SCHEMA, strict=True)],
            schema=OUTCOME_SCHEMA,
        )


@dataclass
class Summary:
    """A batch's outcomes, added up over its tasks (on the driver)."""

    counts: dict[tuple[str, str], int] = field(default_factory=dict)
    positions: dict[int, int] = field(default_factory=dict)
    newest_commit_ns: int = 0
    lag_ns: int = -1  # the largest of its tasks', -1: none delivered
    events: int = 0
    logs: list[tuple[str, int, str]] = field(default_factory=list)

    @classmethod
    def of(cls, rows: Iterable[Mapping[str, Any]]) -> Summary:
        summary = cls()
        for row in rows:
            kind, value = row["kind"], int(row["value"])
            if kind == "count":
                key = (row["name"], row["label"])
                summary.counts[key] = summary.counts.get(key, 0) + value
            elif kind == "position":
                partition = int(row["label"])
                summary.positions[partition] = max(value, summary.positions.get(partition, 0))
            elif kind == "newest":
                summary.newest_commit_ns = max(summary.newest_commit_ns, value)
            elif kind == "lag":
                summary.lag_ns = max(summary.lag_ns, value)
            elif kind == "events":
                summary.events += value
            elif kind == "log":
                summary.logs.append((row["name"], value, row["text"] or ""))
        return summary

    def count(self, name: str) -> int:
        """A counter's increment over every label."""
        return sum(v for (n, _), v in self.counts.items() if n == name)

    def publish(self) -> None:
        """Move the driver's counters by the batch's increments and log its tasks' lines."""
        for (name, label), value in self.counts.items():
            counter = COUNTERS.get(name)
            if counter is None or value <= 0:
                continue
            (counter.labels(label) if label else counter).inc(value)
        for logger, level, text in self.logs:
            logging.getLogger(logger).log(level, "%s", text)


def rows_of(table: pa.Table) -> Iterator[dict[str, Any]]:
    """The rows of a batch's outcomes (as the driver collects them)."""
    if table.schema != OUTCOME_SCHEMA:
        table = table.cast(OUTCOME_SCHEMA)
    return iter(table.to_pylist())
