"""The snapshotter's Prometheus metrics, labelled by snapshotter name.

Counters and histograms are ordinary `prometheus_client` metrics in the default registry.
The per-writer buffer gauges (`snapshotter_buffer_size_bytes{writer_id}` and its kin) are
read from the live snapshotters when scraped, so publishing costs nothing for them.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from typing import Protocol

from prometheus_client import REGISTRY, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

__all__ = [
    "DEAD_LETTER_PAGES",
    "EVENTS_PUBLISHED",
    "INDEX_PUBLISH_ERRORS",
    "PAGE_SIZE",
    "PAGE_WRITES",
    "PAGE_WRITE_DURATION",
    "SESSION_DISCONNECTS",
    "STORAGE_ERRORS",
    "WAL_FSYNCS",
    "watch",
]

_LABEL = ["snapshotter"]

EVENTS_PUBLISHED = Counter(
    "snapshotter_events_published", "Events acknowledged (in the write-ahead log)", _LABEL
)
PAGE_WRITES = Counter("snapshotter_page_writes", "Pages written to storage", _LABEL)
PAGE_WRITE_DURATION = Histogram(
    "snapshotter_page_write_duration_seconds",
    "Time to encode, compress and store one page (the successful attempt)",
    _LABEL,
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
PAGE_SIZE = Histogram(
    "snapshotter_page_size_bytes",
    "Stored (compressed) page sizes",
    _LABEL,
    buckets=tuple(float(2**n) for n in range(10, 28, 2)),
)
INDEX_PUBLISH_ERRORS = Counter(
    "snapshotter_index_publish_errors", "Index publishes that failed (queued for retry)", _LABEL
)
STORAGE_ERRORS = Counter("snapshotter_storage_errors", "Storage writes that failed", _LABEL)
DEAD_LETTER_PAGES = Counter(
    "snapshotter_dead_letter_pages",
    "Pages storage refused max-retries times, kept in the dead-letter directory (alert on it)",
    _LABEL,
)
SESSION_DISCONNECTS = Counter(
    "snapshotter_session_disconnects", "Session ends whose buffers were flushed", _LABEL
)
WAL_FSYNCS = Counter("snapshotter_wal_fsyncs", "Write-ahead log group fsyncs", _LABEL)


class BufferView(Protocol):
    """What the gauges read from a snapshotter."""

    name: str

    def buffer_gauges(self) -> list[tuple[str, int, int, float]]:
        """(writer id, bytes, events, age in seconds) of each open buffer."""
        ...


class _Buffers(Collector):
    def __init__(self) -> None:
        self.live: weakref.WeakSet[BufferView] = weakref.WeakSet()

    def collect(self) -> Iterator[Metric]:
        labels = ["snapshotter", "writer_id"]
        size = GaugeMetricFamily(
            "snapshotter_buffer_size_bytes", "Bytes buffered per writer", labels=labels
        )
        count = GaugeMetricFamily(
            "snapshotter_buffer_event_count", "Events buffered per writer", labels=labels
        )
        age = GaugeMetricFamily(
            "snapshotter_buffer_age_seconds",
            "Age of the oldest buffered event per writer",
            labels=labels,
        )
        for view in list(self.live):
            for writer, nbytes, events, seconds in view.buffer_gauges():
                size.add_metric([view.name, writer], nbytes)
                count.add_metric([view.name, writer], events)
                age.add_metric([view.name, writer], seconds)
        yield size
        yield count
        yield age

    def describe(self) -> Iterator[Metric]:
        return iter(())


_BUFFERS = _Buffers()
REGISTRY.register(_BUFFERS)


def watch(view: BufferView) -> None:
    """Report `view`'s buffers in the gauges while it lives."""
    _BUFFERS.live.add(view)
