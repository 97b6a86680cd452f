"""Replay: a writer's archived events read back from its pages, in a time range.

`replay(index, storage, writer_id, since, until)` yields the writer's events whose
timestamp is in `[since, until]` (Unix milliseconds, both ends included; None leaves that
end open), in the archive's order: pages as the index orders them, by (start_time,
page_sequence), then each page's events by sequence. Nothing is re-sorted by timestamp or
de-duplicated. A listed page that compaction deleted meanwhile makes replay query the index
again from that page's start, skipping the pages already read; `ReplayError` names a page
still missing then. `Replay` is the same as an object, with progress counts; `parse_time`
reads the CLI's times and `event_json` is how it prints an event.

Order and compaction while replaying: docs/snapshotter.md, "Replay".
"""

from __future__ import annotations

import base64
import re
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import orjson

from ripple.snapshotter.compact import constituents
from ripple.snapshotter.index import Index, IndexEntry
from ripple.snapshotter.pages import PageError, decode
from ripple.snapshotter.proto import Event, EventPage
from ripple.snapshotter.storage import Storage, StorageError

__all__ = ["Replay", "ReplayError", "event_json", "parse_time", "replay"]


class ReplayError(Exception):
    """A page the index lists cannot be read back."""


class Replay:
    """The events of `writer_id` in `[since, until]` (see the module docstring); the index
    is queried when this is made, the pages read as it is iterated (once)."""

    def __init__(
        self,
        index: Index,
        storage: Storage,
        writer_id: str,
        since: int | None = None,
        until: int | None = None,
    ) -> None:
        self.index = index
        self.storage = storage
        self.writer_id = writer_id
        self.since = since
        self.until = until
        self.entries: list[IndexEntry] = index.query(writer_id, since, until)
        self.events_seen = 0
        self.pages_read = 0

    @property
    def total_events(self) -> int:
        """Events in the pages the index listed (those outside the range included)."""
        return sum(e.event_count for e in self.entries)

    def __iter__(self) -> Iterator[Event]:
        return self._events()

    def _events(self) -> Iterator[Event]:
        consumed: dict[int, int] = {}  # original page sequence -> its events read
        read_keys: set[str] = set()
        entries = list(self.entries)
        position = 0
        requeried_at: str | None = None  # the missing key that made the last re-query
        while position < len(entries):
            entry = entries[position]
            position += 1
            if entry.page_key in read_keys:
                continue
            page = self._fetch(entry)
            if page is None:
                if requeried_at is not None:  # nothing read since the last re-query
                    raise ReplayError(
                        f"writer {self.writer_id!r}: the index lists page {entry.page_key} "
                        "but storage has no such object, even after querying the index "
                        "again (a compaction or deletion running now?)"
                    )
                requeried_at = entry.page_key
                since = (
                    entry.start_time if self.since is None else max(self.since, entry.start_time)
                )
                entries = self.index.query(self.writer_id, since, self.until)
                position = 0
                continue
            requeried_at = None
            read_keys.add(entry.page_key)
            self.pages_read += 1
            yield from self._page_events(page, consumed)

    def _fetch(self, entry: IndexEntry) -> EventPage | None:
        """The page of `entry`, or None if storage has no object at its key."""
        try:
            data = self.storage.get(entry.page_key)
        except StorageError as e:
            if e.missing:
                return None
            raise ReplayError(
                f"writer {self.writer_id!r}: reading page {entry.page_key}: {e}"
            ) from e
        try:
            page = decode(data)
        except PageError as e:
            raise ReplayError(f"writer {self.writer_id!r}: page {entry.page_key}: {e}") from e
        meta = page.metadata
        if meta.writer_id != self.writer_id:
            raise ReplayError(
                f"page {entry.page_key} belongs to writer {meta.writer_id!r}, not "
                f"{self.writer_id!r} as the index says"
            )
        return page

    def _page_events(self, page: EventPage, consumed: dict[int, int]) -> Iterator[Event]:
        """The page's events in range, less those of pages already read (a merged page
        holds the pages it replaced, in order, so those come first)."""
        skip = 0
        parts = constituents(page.metadata)
        for sequence, count in parts:
            done = consumed.get(sequence, 0)
            skip += min(done, count)
            if done < count:
                break
        events = sorted(page.events, key=lambda e: e.sequence)
        self.events_seen += skip
        since, until = self.since, self.until
        for event in events[skip:]:
            self.events_seen += 1
            if (since is None or event.timestamp >= since) and (
                until is None or event.timestamp <= until
            ):
                yield event
        for sequence, count in parts:
            consumed[sequence] = max(consumed.get(sequence, 0), count)


def replay(
    index: Index,
    storage: Storage,
    writer_id: str,
    since: int | None = None,
    until: int | None = None,
) -> Iterator[Event]:
    """The writer's events with `since <= timestamp <= until`, in archive order."""
    return iter(Replay(index, storage, writer_id, since, until))


def event_json(event: Event) -> bytes:
    """One event as a JSON line: the payload as text if it is UTF-8, else base64."""
    line: dict[str, object] = {
        "event_id": event.event_id,
        "timestamp": event.timestamp,
        "attributes": dict(event.attributes),
    }
    try:
        line["payload"] = event.payload.decode("utf-8")
    except UnicodeDecodeError:
        line["payload_base64"] = base64.b64encode(event.payload).decode("ascii")
    return orjson.dumps(line) + b"\n"


_RELATIVE = re.compile(r"^-?\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)$")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}


def parse_time(text: str, now_ms: int | None = None) -> int:
    """Unix milliseconds from an ISO-8601 time (`2025-10-09T12:00:00Z`; UTC if no zone),
    a date (`2025-10-09`: its midnight UTC), Unix milliseconds (`1696800000000`), `now`, or
    a duration ago (`-1h`, `-30m`, `-2d`; also `90s`, `1w`, the minus optional).
    `ValueError` with one line otherwise."""
    value = text.strip()
    now = time.time_ns() // 1_000_000 if now_ms is None else now_ms
    if value.lower() == "now":
        return now
    if value.isdigit():
        return int(value)
    relative = _RELATIVE.match(value.lower())
    if relative:
        amount, unit = relative.groups()
        return now - round(float(amount) * _UNIT_MS[unit])
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(
            f"{text!r} is not a time: use 2025-10-09T12:00:00Z, 2025-10-09, Unix milliseconds "
            "(1696800000000), now, or a duration ago (-30m, -1h, -2d)"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return (when - _EPOCH) // timedelta(milliseconds=1)
