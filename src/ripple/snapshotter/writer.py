"""Sealed pages to storage, then to the index.

A page is encoded (format, compression), keyed by the template, and put to storage. A
failed put is retried with exponential backoff (`retry-base-seconds`, doubling, at most
`retry-max-seconds`); after `max-retries` retries the page goes to the dead-letter
directory (same key, plus a line in `dead-letters.ndjson`) and `snapshotter_dead_letter_pages`
counts it: alert on that. Either way the page is then done.

The index is told after the page is stored. An index failure never holds a page back: the
entry joins a retry queue, retried on every tick, and `ripple snapshot reconcile` rebuilds
whatever a crash lost of it.
"""

from __future__ import annotations

import collections
import logging
import os
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson

from ripple.snapshotter import metrics
from ripple.snapshotter.buffers import Page
from ripple.snapshotter.index import Index, IndexEntry, IndexError_
from ripple.snapshotter.pages import CONTENT_TYPES, encode_events, extension
from ripple.snapshotter.proto import PageMetadata
from ripple.snapshotter.settings import SnapshotterSettings
from ripple.snapshotter.storage import Storage, StorageError
from ripple.snapshotter.storage.filesystem import FilesystemStorage

__all__ = ["BackendHealth", "PageWriter", "Stopped"]

log = logging.getLogger(__name__)

_MAX_INDEX_QUEUE = 100_000


class Stopped(Exception):
    """The snapshotter is closing: the page stays in the write-ahead log for next time."""


@dataclass
class BackendHealth:
    """Outcomes of a backend's recent operations, for /health/storage and /health/index."""

    backend: str
    outcomes: collections.deque[tuple[bool, float]] = field(
        default_factory=lambda: collections.deque(maxlen=1000)
    )
    last_success: float | None = None
    last_error: str | None = None

    def record(self, ok: bool, seconds: float, error: str | None = None) -> None:
        self.outcomes.append((ok, seconds))
        if ok:
            self.last_success = time.time()
        else:
            self.last_error = error

    def report(self, success_key: str, rate_key: str) -> dict[str, Any]:
        attempts = list(self.outcomes)
        good = [s for ok, s in attempts if ok]
        last_ok = attempts[-1][0] if attempts else None
        return {
            "backend": self.backend,
            "status": "unknown" if last_ok is None else "healthy" if last_ok else "unhealthy",
            success_key: _iso(self.last_success),
            rate_key: round(len(good) / len(attempts), 4) if attempts else None,
            "avg_latency_ms": round(1000 * sum(good) / len(good), 3) if good else None,
            "last_error": self.last_error,
        }


def _iso(when: float | None) -> str | None:
    if when is None:
        return None
    return datetime.fromtimestamp(when, tz=UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


class PageWriter:
    def __init__(
        self,
        settings: SnapshotterSettings,
        storage: Storage,
        index: Index,
        stopping: threading.Event,
        sleep: Callable[[float], bool] | None = None,
    ) -> None:
        self.settings = settings
        self.storage = storage
        self.index = index
        self.stopping = stopping
        self._sleep = sleep or stopping.wait  # True: woken because the snapshotter stops
        self.storage_health = BackendHealth(storage.backend)
        self.index_health = BackendHealth(index.backend)
        self._index_queue: collections.deque[IndexEntry] = collections.deque()
        self._index_lock = threading.Lock()
        self.dead_letters = 0
        self._label = settings.name

    def metadata(self, page: Page) -> PageMetadata:
        return PageMetadata(
            writer_id=page.writer_id,
            page_sequence=page.page_sequence,
            start_time=page.start_time,
            end_time=page.end_time,
            tags=self.settings.tags,
        )

    def key(self, meta: PageMetadata) -> str:
        s = self.settings
        return s.key_template.render(meta, extension(s.format, s.compression))

    def write(self, page: Page) -> bool:
        """Store the page (True), or put it in the dead letters (False). `Stopped` if the
        snapshotter closes while a failing put waits to be retried."""
        s = self.settings
        started = time.perf_counter()
        meta = self.metadata(page)
        data, _ = encode_events(meta, page.events, s.format, s.compression)
        key = self.key(meta)
        content_type = CONTENT_TYPES[s.format]
        user_metadata = {
            "writer-id": page.writer_id,
            "page-sequence": str(page.page_sequence),
            "event-count": str(len(page.events)),
        }
        attempt = 0
        while True:
            if self.stopping.is_set():
                raise Stopped(key)
            put_started = time.perf_counter()
            try:
                self.storage.put(key, data, content_type, user_metadata)
            except StorageError as e:
                self.storage_health.record(False, time.perf_counter() - put_started, str(e))
                metrics.STORAGE_ERRORS.labels(self._label).inc()
                if attempt >= s.max_retries:
                    self._dead_letter(key, data, page, str(e))
                    return False
                delay = min(s.retry_base_seconds * 2**attempt, s.retry_max_seconds)
                delay *= random.uniform(0.8, 1.0)
                attempt += 1
                log.warning(
                    "snapshotter %s: storing page %s failed (%s); retry %d of %d in %.2fs",
                    s.name, key, e, attempt, s.max_retries, delay,
                )  # fmt: skip
                if self._sleep(delay):
                    raise Stopped(key) from None
                continue
            self.storage_health.record(True, time.perf_counter() - put_started)
            break
        metrics.PAGE_WRITES.labels(self._label).inc()
        metrics.PAGE_SIZE.labels(self._label).observe(len(data))
        metrics.PAGE_WRITE_DURATION.labels(self._label).observe(time.perf_counter() - started)
        self.publish_index(IndexEntry.of(key, meta, s.format, len(data)))
        return True

    def _dead_letter(self, key: str, data: bytes, page: Page, error: str) -> None:
        root = self.settings.dead_letter_path
        path = root / key
        # the same all-or-nothing write as the filesystem storage's
        FilesystemStorage(root).put(key, data, CONTENT_TYPES[self.settings.format], {})
        line = {
            "key": key,
            "writer_id": page.writer_id,
            "page_sequence": page.page_sequence,
            "event_count": len(page.events),
            "error": error,
            "time": _iso(time.time()),
        }
        with (root / "dead-letters.ndjson").open("ab") as f:
            f.write(orjson.dumps(line) + b"\n")
            f.flush()
            os.fsync(f.fileno())
        self.dead_letters += 1
        metrics.DEAD_LETTER_PAGES.labels(self._label).inc()
        log.error(
            "snapshotter %s: page %s (%d events of %r) could not be stored after %d retries; "
            "it is in %s (%s)",
            self.settings.name, key, len(page.events), page.writer_id,
            self.settings.max_retries, path, error,
        )  # fmt: skip

    def publish_index(self, entry: IndexEntry) -> None:
        """Tell the index; on failure queue the entry for `retry_index`."""
        started = time.perf_counter()
        try:
            self.index.publish(entry)
        except IndexError_ as e:
            self.index_health.record(False, time.perf_counter() - started, str(e))
            metrics.INDEX_PUBLISH_ERRORS.labels(self._label).inc()
            log.warning(
                "snapshotter %s: index publish of %s failed: %s", self._label, entry.page_key, e
            )
            with self._index_lock:
                self._index_queue.append(entry)
                while len(self._index_queue) > _MAX_INDEX_QUEUE:  # reconcile restores these
                    self._index_queue.popleft()
            return
        self.index_health.record(True, time.perf_counter() - started)

    def retry_index(self) -> int:
        """Publish the queued entries again, oldest first, until one fails; how many went."""
        sent = 0
        while True:
            with self._index_lock:
                if not self._index_queue:
                    return sent
                entry = self._index_queue[0]
            started = time.perf_counter()
            try:
                self.index.publish(entry)
            except IndexError_ as e:
                self.index_health.record(False, time.perf_counter() - started, str(e))
                metrics.INDEX_PUBLISH_ERRORS.labels(self._label).inc()
                return sent
            self.index_health.record(True, time.perf_counter() - started)
            with self._index_lock:
                if self._index_queue and self._index_queue[0] is entry:
                    self._index_queue.popleft()
            sent += 1

    @property
    def index_queue_length(self) -> int:
        return len(self._index_queue)
