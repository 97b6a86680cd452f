"""Per-writer buffers and the triggers that seal them into pages.

A writer's open page gathers its events until one of the limits is reached: `max_events`,
`max_size_bytes` (serialized events), or `max_age_seconds` since its first event; a
disconnect or a shutdown seals it too. Above all of them, `max_buffered_bytes` caps the
open pages together: past it, the least recently used writers' pages are sealed first.

A sealed page (`Page`) goes to the page writer; it remembers the oldest write-ahead log
ticket of its events, so the log keeps every segment a page not yet done needs.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["BufferLimits", "Buffers", "Page"]


@dataclass(frozen=True)
class BufferLimits:
    max_events: int = 1000
    max_size_bytes: int = 10 * 1024 * 1024
    max_age_seconds: float = 300.0
    max_buffered_bytes: int = 256 * 1024 * 1024


@dataclass(eq=False)
class Page:
    """A writer's page: open while it gathers events, then sealed and written."""

    writer_id: str
    page_sequence: int
    first_ticket: int  # the oldest write-ahead log ticket among its events
    opened: float = field(default_factory=time.monotonic)
    events: list[bytes] = field(default_factory=list)  # framed `Event`s (`pages.frame`)
    start_time: int = 0  # first event's timestamp (Unix ms)
    end_time: int = 0  # last event's
    nbytes: int = 0
    record_prefix: bytes = b""  # its events' log records start so (`wal.record_prefix`)
    reason: str = ""  # why it was sealed: events, bytes, age, lru, disconnect, shutdown, recovery
    done: threading.Event = field(default_factory=threading.Event)
    stored: bool = False  # in storage (False once done: in the dead letters)

    def add(self, event: bytes, timestamp: int) -> None:
        if not self.events:
            self.start_time = self.end_time = timestamp
        elif timestamp < self.start_time:
            self.start_time = timestamp
        elif timestamp > self.end_time:
            self.end_time = timestamp
        self.events.append(event)
        self.nbytes += len(event)


class Buffers:
    """The open pages of every writer. Not thread-safe: the snapshotter holds its lock."""

    def __init__(self, limits: BufferLimits, clock: Callable[[], float] = time.monotonic) -> None:
        self.limits = limits
        self.clock = clock
        self.open: OrderedDict[str, Page] = OrderedDict()  # least recently used first
        self.total_bytes = 0

    def page_for(self, writer_id: str, new_page: Callable[[str], Page]) -> Page:
        """The writer's open page (`new_page(writer_id)` if it has none), now most recently
        used."""
        page = self.open.get(writer_id)
        if page is None:
            page = self.open[writer_id] = new_page(writer_id)
            page.opened = self.clock()
        else:
            self.open.move_to_end(writer_id)
        return page

    def add(self, page: Page, event: bytes, timestamp: int) -> list[Page] | None:
        """Add an event to `page` (from `page_for`); the pages that must be sealed now, if any."""
        page.add(event, timestamp)
        self.total_bytes += len(event)
        limits = self.limits
        if (
            len(page.events) < limits.max_events
            and page.nbytes < limits.max_size_bytes
            and self.total_bytes <= limits.max_buffered_bytes
        ):
            return None
        sealed = []
        if len(page.events) >= limits.max_events:
            sealed.append(self._seal(page.writer_id, "events"))
        elif page.nbytes >= limits.max_size_bytes:
            sealed.append(self._seal(page.writer_id, "bytes"))
        while self.total_bytes > limits.max_buffered_bytes and self.open:
            sealed.append(self._seal(next(iter(self.open)), "lru"))
        return sealed

    def _seal(self, writer_id: str, reason: str) -> Page:
        page = self.open.pop(writer_id)
        self.total_bytes -= page.nbytes
        page.reason = reason
        return page

    def seal(self, writer_id: str, reason: str) -> Page | None:
        return self._seal(writer_id, reason) if writer_id in self.open else None

    def seal_aged(self) -> list[Page]:
        """The pages whose first event is `max_age_seconds` old or older, sealed."""
        deadline = self.clock() - self.limits.max_age_seconds
        aged = [w for w, p in self.open.items() if p.opened <= deadline]
        return [self._seal(w, "age") for w in aged]

    def seal_all(self, reason: str) -> list[Page]:
        return [self._seal(w, reason) for w in list(self.open)]

    def gauges(self) -> list[tuple[str, int, int, float]]:
        """(writer, bytes, events, age in seconds) of each open page."""
        now = self.clock()
        return [(w, p.nbytes, len(p.events), now - p.opened) for w, p in self.open.items()]
