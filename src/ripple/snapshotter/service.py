"""The `Snapshotter`: publish, disconnect, flush, shutdown, and recovery after a crash.

`publish` appends the event to its writer's open page and to the write-ahead log, and
returns once the log is fsynced: an acknowledged event survives a SIGKILL. Pages sealed by
a trigger (`ripple.snapshotter.buffers`) are written by a pool of page writers
(`ripple.snapshotter.writer`); when a page is stored, the log records it done and drops
segments nothing needs any more. On start, whatever the log holds that is not done is
written as pages again, with the same sequences, so the same keys.

A session (`session()`, or a gRPC `PublishStream`) is the Python form of a connection: its
end flushes the open pages of every writer it published to and waits until they are
stored, with retries, as the RFC's disconnect does.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ripple.snapshotter import metrics
from ripple.snapshotter.buffers import BufferLimits, Buffers, Page
from ripple.snapshotter.compact import constituents
from ripple.snapshotter.index import Index, IndexError_
from ripple.snapshotter.pages import decode, unframe, varint
from ripple.snapshotter.proto import Event
from ripple.snapshotter.settings import SnapshotterSettings
from ripple.snapshotter.storage import Storage
from ripple.snapshotter.wal import WalError, WriteAheadLog, done_record, record_prefix
from ripple.snapshotter.writer import PageWriter, Stopped

__all__ = ["Backlogged", "Flushed", "Publish", "Published", "Session", "Snapshotter"]

log = logging.getLogger(__name__)


class Backlogged(RuntimeError):
    """Storage is so far behind that publishing is refused until it catches up: the pages
    waiting for it would otherwise grow without bound in memory."""


class Publish(NamedTuple):
    """One event to publish. `event_id` defaults to the message id; `timestamp` (Unix ms)
    to now."""

    writer_id: str
    payload: bytes
    attributes: Mapping[str, str] | None = None
    event_id: str | None = None
    timestamp: int | None = None


class Published(NamedTuple):
    message_id: str  # "<page sequence>-<sequence>", unique per writer
    sequence: int  # position in its page


MAX_TIMESTAMP = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z: what page keys can render


def _event_body(position: int, event: Publish, now: int) -> tuple[bytes, int]:
    """The event serialized without its id and sequence (fields 1 and 5, which depend on
    its page and are appended under the lock), and its timestamp; `ValueError` naming the
    event and the field that is not what `Publish` says."""
    writer, payload, attributes, event_id, timestamp = event
    when = now if timestamp is None else timestamp
    problem = None
    if type(writer) is not str or not writer:
        problem = "a writer id (the publish topic) must be a non-empty string"
    elif event_id is not None and type(event_id) is not str:
        problem = "the event id must be a string"
    elif type(when) is not int or not 0 <= when <= MAX_TIMESTAMP:
        problem = (
            f"the timestamp must be Unix milliseconds from 0 to {MAX_TIMESTAMP}, got {timestamp!r}"
        )
    else:
        try:
            body = Event(timestamp=when, payload=payload)
            if attributes:
                target = body.attributes
                for key, value in attributes.items():
                    target[key] = value
        except (TypeError, ValueError, AttributeError) as e:
            bad = "payload" if type(payload) is not bytes else "attributes"
            problem = f"bad {bad}: {e}"
    if problem is not None:
        raise ValueError(f"event {position} of the batch: {problem}")
    return body.SerializeToString(), when


@dataclass(frozen=True)
class Flushed:
    writer_ids: list[str]
    pages_written: int  # stored; pages that went to the dead letters are not counted


class Snapshotter:
    """One snapshotter over its storage, index and write-ahead log (see the module docstring)."""

    def __init__(self, settings: SnapshotterSettings, storage: Storage, index: Index) -> None:
        self.settings = settings
        self.name = settings.name
        self.storage = storage
        self.index = index
        self._lock = threading.Lock()
        self._buffers = Buffers(
            BufferLimits(
                settings.max_events,
                settings.max_size_bytes,
                settings.max_age_seconds,
                settings.max_buffered_bytes,
            )
        )
        self._next_sequence: dict[str, int] = {}
        self._floor: dict[str, int] = {}  # the index's last sequence of writers new here
        self._inflight: dict[int, Page] = {}  # sealed pages not done, by id()
        self._failed: dict[int, Page] = {}  # pages whose write failed: kept for the next start
        self._pending_bytes = 0  # of the pages in _inflight: sealed, not yet stored
        self._stopping = threading.Event()
        self._closed = False
        self.writer = PageWriter(settings, storage, index, self._stopping)
        label = self.name
        self.wal = WriteAheadLog(
            settings.wal_path,
            settings.wal_segment_bytes,
            self._checkpoint,
            on_fsync=metrics.WAL_FSYNCS.labels(label).inc,
        )
        recovered = self.wal.recover()
        self._next_sequence.update(recovered.next_page_sequence)
        self._log_was_empty = not recovered.next_page_sequence  # new, or wiped
        self._pool = ThreadPoolExecutor(settings.page_writers, f"snapshotter-{label}-page")
        self.wal.start()
        with self._lock:
            for (writer, sequence), events in sorted(recovered.pages.items()):
                page = Page(writer, sequence, first_ticket=0, reason="recovery")
                for framed in events:
                    page.add(framed, Event.FromString(unframe(framed)).timestamp)
                self._submit(page)
        if recovered.pages:
            log.info(
                "snapshotter %s: recovered %d events in %d pages from the write-ahead log",
                label, sum(map(len, recovered.pages.values())), len(recovered.pages),
            )  # fmt: skip
        self._ticker = threading.Thread(target=self._tick, name=f"snapshotter-{label}-tick")
        self._ticker.daemon = True
        self._ticker.start()
        metrics.watch(self)

    @classmethod
    def open(cls, settings: SnapshotterSettings) -> Snapshotter:
        """A snapshotter over the storage and index its settings name."""
        from ripple.snapshotter.index import open_index
        from ripple.snapshotter.storage import open_storage

        storage = open_storage(settings)
        try:
            index = open_index(settings)
        except BaseException:
            storage.close()
            raise
        try:
            return cls(settings, storage, index)
        except BaseException:  # e.g. the log is in use by another process
            index.close()
            storage.close()
            raise

    def __enter__(self) -> Snapshotter:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # -- publishing ---------------------------------------------------------------------

    def publish(
        self,
        writer_id: str,
        payload: bytes,
        attributes: Mapping[str, str] | None = None,
        *,
        event_id: str | None = None,
        timestamp: int | None = None,
    ) -> Published:
        """Publish one event; returns once it is in the write-ahead log."""
        return self.publish_many([Publish(writer_id, payload, attributes, event_id, timestamp)])[0]

    def publish_many(self, events: Iterable[Publish]) -> list[Published]:
        """Publish events in order, with one wait for the log; returns once all are in it."""
        batch = list(events)
        now = time.time_ns() // 1_000_000
        # serialized before anything changes, so a bad event changes nothing
        bodies = [_event_body(position, event, now) for position, event in enumerate(batch)]
        for writer in {e.writer_id for e in batch}:
            if writer not in self._next_sequence and writer not in self._floor:
                self._floor[writer] = self._index_floor(writer)
        results: list[Published] = []
        records: list[bytes] = []
        with self._lock:
            if self._closed:
                raise RuntimeError(f"snapshotter {self.name} is closed")
            if self._pending_bytes > self.settings.max_pending_bytes:
                raise Backlogged(
                    f"snapshotter {self.name}: {self._pending_bytes} bytes of pages wait for "
                    f"storage ({self.storage.backend}), over max-pending-bytes "
                    f"{self.settings.max_pending_bytes}; try again once it is back"
                )
            sealed: list[Page] = []
            try:
                ticket = self._buffer(batch, bodies, records, results, sealed)
            finally:  # pages sealed by this batch are written whatever happened after
                for page in sealed:
                    self._submit(page)
        self.wal.wait(ticket)
        metrics.EVENTS_PUBLISHED.labels(self.name).inc(len(batch))
        return results

    def _buffer(
        self,
        batch: list[Publish],
        bodies: list[tuple[bytes, int]],
        records: list[bytes],
        results: list[Published],
        sealed: list[Page],
    ) -> int:
        """Add the batch to the buffers and the log (the lock is held); the log's ticket."""
        buffers, new_page = self._buffers, self._new_page
        for (writer, _, _, event_id, _), (body, when) in zip(batch, bodies, strict=True):
            page = buffers.page_for(writer, new_page)
            sequence = len(page.events)
            message_id = f"{page.page_sequence}-{sequence}"
            identity = (event_id or message_id).encode()
            # protobuf fields may come in any order: id (1) and sequence (5) after the rest
            tail = b"\x0a" + varint(len(identity)) + identity + b"\x28" + varint(sequence)
            size = len(body) + len(tail)
            framed = b"".join((b"\x12", varint(size), body, tail))  # as in its page and record
            prefix = page.record_prefix
            records.append(b"\x0a" + varint(len(prefix) + len(framed)) + prefix)
            records.append(framed)  # the log writes the parts as they are
            full = buffers.add(page, framed, when)
            if full:
                sealed.extend(full)
            results.append(Published(message_id, sequence))
        return self.wal.append(records)

    def _index_floor(self, writer: str) -> int:
        """The last page sequence the writer may have used before: none if the log knows
        every writer (it checkpoints them all), else the index's last one, so a wiped log
        repeats none. With the index unreachable then, the time in milliseconds: larger
        than any sequence a writer reaches by counting pages."""
        if not self._log_was_empty:
            return -1
        try:
            return self.index.last_sequence(writer)
        except IndexError_ as e:
            floor = time.time_ns() // 1_000_000
            log.warning(
                "snapshotter %s: index unavailable for %r's last page (%s); its pages are "
                "numbered from %d so none repeats",
                self.name, writer, e, floor + 1,
            )  # fmt: skip
            return floor

    def _new_page(self, writer: str) -> Page:
        sequence = max(self._next_sequence.get(writer, 0), self._floor.pop(writer, -1) + 1)
        self._next_sequence[writer] = sequence + 1
        return Page(
            writer,
            sequence,
            first_ticket=self.wal.appended + 1,
            record_prefix=record_prefix(writer, sequence),
        )

    def _checkpoint(self) -> dict[str, int]:
        with self._lock:
            return dict(self._next_sequence)

    # -- pages --------------------------------------------------------------------------

    def _submit(self, page: Page) -> None:
        """Hand a sealed page to the page writers (the lock is held)."""
        self._inflight[id(page)] = page
        self._pending_bytes += page.nbytes
        self._pool.submit(self._write, page)

    def _write(self, page: Page) -> None:
        try:
            if page.reason == "recovery" and self._already_stored(page):
                page.stored = True  # before the crash; only its done record was lost
            else:
                page.stored = self.writer.write(page)
        except Stopped:
            return  # still in the log: written at the next start
        except Exception:
            log.exception(
                "snapshotter %s: page %d of %r failed; its events stay in the write-ahead log "
                "and are written at the next start",
                self.name,
                page.page_sequence,
                page.writer_id,
            )
            with self._lock:  # still pins its log segments: not in _inflight, but _failed
                self._failed[id(page)] = self._unpend(page)
            page.done.set()
            return
        try:
            done = self.wal.append([done_record(page.writer_id, page.page_sequence)])
        except WalError:  # the log has said so; keep every segment
            with self._lock:
                self._unpend(page)
            page.done.set()
            return
        with self._lock:
            self._unpend(page)
            pinned = (
                *self._inflight.values(),
                *self._failed.values(),
                *self._buffers.open.values(),
            )
            low = min((p.first_ticket for p in pinned), default=self.wal.appended + 1)
        page.done.set()
        # the done record must be on disk before any segment with the page's events goes
        self.wal.release(low, once_synced=done)

    def _already_stored(self, page: Page) -> bool:
        """Whether the index lists a recovered page already: under its sequence (stored
        before the crash, or since merged by compaction as a group's first page), or inside
        a merged page (another page of a group). Writing it again would put its events in
        the archive twice. An index that cannot tell: write it (at worst once more)."""
        try:
            entries = self.index.query(page.writer_id, page.start_time, page.end_time)
            for entry in entries:
                if entry.page_sequence == page.page_sequence:
                    return True
                if "~c" in entry.page_key:
                    merged = decode(self.storage.get(entry.page_key)).metadata
                    if any(s == page.page_sequence for s, _ in constituents(merged)):
                        return True
        except Exception as e:  # index or storage down, an unreadable page
            log.warning(
                "snapshotter %s: cannot tell whether recovered page %d of %r is stored (%s); "
                "writing it",
                self.name, page.page_sequence, page.writer_id, e,
            )  # fmt: skip
        return False

    def _unpend(self, page: Page) -> Page:
        """The page is no longer waiting for storage (the lock is held)."""
        if self._inflight.pop(id(page), None) is not None:
            self._pending_bytes -= page.nbytes
        return page

    def _wait(self, pages: list[Page]) -> int:
        for page in pages:
            page.done.wait()
        return sum(p.stored for p in pages)

    def disconnect(self, writer_ids: Iterable[str]) -> Flushed:
        """A session ended: seal its writers' open pages and wait until every page of theirs
        is stored (or in the dead letters)."""
        writers = sorted(set(writer_ids))
        with self._lock:
            for writer in writers:
                page = self._buffers.seal(writer, "disconnect")
                if page is not None:
                    self._submit(page)
            pages = [p for p in self._inflight.values() if p.writer_id in writers]
        metrics.SESSION_DISCONNECTS.labels(self.name).inc()
        return Flushed(writers, self._wait(pages))

    def flush(self) -> int:
        """Seal every open page and wait until every page is done; the pages stored."""
        with self._lock:
            for page in self._buffers.seal_all("flush"):
                self._submit(page)
            pages = list(self._inflight.values())
        return self._wait(pages)

    def session(self) -> Session:
        return Session(self)

    # -- background ---------------------------------------------------------------------

    def _tick(self) -> None:
        interval = max(0.01, min(1.0, self.settings.max_age_seconds / 4))
        next_index_retry = 0.0
        while not self._stopping.wait(interval):
            with self._lock:
                for page in self._buffers.seal_aged():
                    self._submit(page)
            now = time.monotonic()
            if self.writer.index_queue_length and now >= next_index_retry:
                self.writer.retry_index()
                next_index_retry = now + self.settings.retry_base_seconds

    def close(self, timeout: float = 30.0) -> None:
        """Flush every buffer and wait up to `timeout` seconds for the pages; what is not
        stored by then stays in the write-ahead log for the next start."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            for page in self._buffers.seal_all("shutdown"):
                self._submit(page)
            pages = list(self._inflight.values())
        deadline = time.monotonic() + timeout
        for page in pages:
            page.done.wait(max(0.0, deadline - time.monotonic()))
        self._stopping.set()
        self._ticker.join()
        self._pool.shutdown(wait=True, cancel_futures=True)  # queued pages stay in the log
        self.writer.retry_index()
        self.wal.close()
        for page in pages:
            page.done.set()  # wake any session still waiting: the log keeps the page
        with contextlib.suppress(Exception):
            self.storage.close()
        with contextlib.suppress(Exception):
            self.index.close()

    # -- health and metrics -------------------------------------------------------------

    def buffer_gauges(self) -> list[tuple[str, int, int, float]]:
        with self._lock:
            return self._buffers.gauges()

    def buffers_health(self) -> dict[str, Any]:
        gauges = self.buffer_gauges()
        limit = self.settings.max_age_seconds
        with self._lock:
            pending, pending_bytes = len(self._inflight), self._pending_bytes
        return {
            "active_writers": len(gauges),
            "total_buffered_events": sum(g[2] for g in gauges),
            "total_buffer_size_bytes": sum(g[1] for g in gauges),
            "oldest_buffer_age_seconds": round(max((g[3] for g in gauges), default=0.0), 3),
            "writers_exceeding_age_limit": sum(g[3] > limit for g in gauges),
            "pages_pending": pending,
            "pending_bytes": pending_bytes,
            "dead_letter_pages": self.writer.dead_letters,
            "wal_segments": self.wal.segment_count,
        }

    def storage_health(self) -> dict[str, Any]:
        report = self.writer.storage_health.report("last_write_success", "write_success_rate")
        report["avg_write_latency_ms"] = report.pop("avg_latency_ms")
        return report

    def index_health(self) -> dict[str, Any]:
        report = self.writer.index_health.report("last_publish_success", "publish_success_rate")
        report["avg_publish_latency_ms"] = report.pop("avg_latency_ms")
        try:
            report["index_entry_count"] = self.index.count()
        except IndexError_ as e:
            report["index_entry_count"] = None
            report["status"] = "unhealthy"
            report["last_error"] = str(e)
        report["retry_queue_length"] = self.writer.index_queue_length
        return report


@dataclass
class Session:
    """A connection's worth of publishing: `close()` (or leaving the `with`) flushes the
    open pages of every writer it published to and waits for them, as a disconnect does."""

    snapshotter: Snapshotter
    writers: set[str] = field(default_factory=set)
    event_count: int = 0

    def publish(
        self, writer_id: str, payload: bytes, attributes: Mapping[str, str] | None = None
    ) -> Published:
        published = self.snapshotter.publish(writer_id, payload, attributes)
        self.writers.add(writer_id)
        self.event_count += 1
        return published

    def publish_many(self, events: Iterable[Publish]) -> list[Published]:
        batch = list(events)
        published = self.snapshotter.publish_many(batch)
        self.writers.update(e.writer_id for e in batch)
        self.event_count += len(batch)
        return published

    def close(self) -> Flushed:
        return self.snapshotter.disconnect(self.writers)

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


@contextlib.contextmanager
def opened(settings: SnapshotterSettings) -> Iterator[Snapshotter]:
    """`Snapshotter.open(settings)`, closed at the end of the `with`."""
    snapshotter = Snapshotter.open(settings)
    try:
        yield snapshotter
    finally:
        snapshotter.close()
