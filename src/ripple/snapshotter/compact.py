"""Compaction: a writer's small pages merged into fewer, larger ones (`ripple snapshot compact`).

`compact` groups runs of consecutive pages stored in under `below_bytes` (in replay order)
into groups of two or more of at most `target_bytes` uncompressed; each group becomes one
page that keeps its **first page's sequence**, at that key with `~c<last>` appended, and
names the pages it stands for in its `compacted-pages` tag (which replay and reconcile
read). Per group the merged page is stored, then `index.replace(old, new)` swaps the entries
atomically; a failure before that undoes the group and raises `CompactError` with the report
so far. The old objects are deleted `grace_seconds` after the last swap. Run one compaction
per writer at a time. `parse_size` reads sizes such as `1MiB`.

The metadata of a merged page and the failure cases: docs/snapshotter.md, "Compaction".
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass, field

from ripple.snapshotter.index import Index, IndexEntry, IndexError_
from ripple.snapshotter.pages import CONTENT_TYPES, PageError, decode, encode, extension
from ripple.snapshotter.proto import Event, EventPage, PageMetadata
from ripple.snapshotter.settings import SnapshotterSettings
from ripple.snapshotter.storage import Storage, StorageError

__all__ = [
    "COMPACTED_FROM",
    "COMPACTED_PAGES",
    "CompactError",
    "CompactReport",
    "compact",
    "constituents",
    "groups_of",
    "parse_size",
]

COMPACTED_FROM = "compacted-from"
COMPACTED_PAGES = "compacted-pages"
KEY_SUFFIX = "~c"


def constituents(meta: PageMetadata) -> list[tuple[int, int]]:
    """(page sequence, event count) of each original page a page holds, in order: those
    its `compacted-pages` tag lists, or the page itself if it was never merged (or the tag
    cannot be read)."""
    text = meta.tags.get(COMPACTED_PAGES, "")
    if text:
        try:
            pairs = [part.split(":") for part in text.split(",")]
            return [(int(sequence), int(count)) for sequence, count in pairs]
        except ValueError:
            pass
    return [(meta.page_sequence, meta.event_count)]


_SIZE = re.compile(r"^(\d+(?:\.\d+)?)\s*([kmgt]i?b?|b)?$", re.IGNORECASE)
_POWERS = {"": 1, "b": 1, "k": 1000, "m": 1000**2, "g": 1000**3, "t": 1000**4}


def parse_size(text: str) -> int:
    """Bytes from `1000`, `512KiB`, `1MiB`, `10MB`, `1.5GiB` (KiB = 1024, KB = 1000)."""
    match = _SIZE.match(text.strip())
    if not match:
        raise ValueError(f"{text!r} is not a size: use e.g. 1000, 512KiB, 1MiB, 10MB")
    number, unit = match.groups()
    unit = (unit or "").lower()
    factor = 1024 ** ("kmgt".index(unit[0]) + 1) if "i" in unit else _POWERS[unit[:1]]
    size = round(float(number) * factor)
    if size < 1:
        raise ValueError(f"{text!r} is not a size of 1 byte or more")
    return size


def looks_compacted(entry: IndexEntry) -> bool:
    """Whether an entry's key may be a merged page's (`<sequence>~c<last>`): a cheap test
    that only ever errs on the side of yes."""
    return f"{entry.page_sequence}{KEY_SUFFIX}" in entry.page_key


class CompactError(Exception):
    """A group could not be merged; `report` says what was done before."""

    def __init__(self, message: str, report: CompactReport) -> None:
        super().__init__(message)
        self.report = report


@dataclass
class CompactReport:
    groups: int = 0  # merged pages made (each from one group)
    pages_merged: int = 0  # old pages they replaced
    pages_written: int = 0
    bytes_before: int = 0  # stored size of the old pages
    bytes_after: int = 0  # … and of the merged ones
    deleted: int = 0  # old page objects deleted after the grace period
    left_behind: list[str] = field(default_factory=list)  # old objects that would not delete


def groups_of(
    entries: Sequence[IndexEntry], below_bytes: int, target_bytes: int
) -> list[list[IndexEntry]]:
    """Runs of consecutive small entries (stored size < `below_bytes`; a large one ends a
    run), cut into groups of at least two whose uncompressed sizes add up to at most
    `target_bytes`."""
    groups: list[list[IndexEntry]] = []
    current: list[IndexEntry] = []
    size = 0

    def close() -> None:
        if len(current) >= 2:
            groups.append(list(current))
        current.clear()

    for entry in entries:
        if entry.storage_size_bytes >= below_bytes:
            close()
            size = 0
            continue
        if current and size + entry.page_size_bytes > target_bytes:
            close()
            size = 0
        current.append(entry)
        size += entry.page_size_bytes
    close()
    return groups


def compact(
    settings: SnapshotterSettings,
    storage: Storage,
    index: Index,
    writer_id: str,
    below_bytes: int,
    target_bytes: int | None = None,
    grace_seconds: float = 0.0,
    *,
    sleep: Callable[[float], None] = time.sleep,
) -> CompactReport:
    """Merge the writer's small pages (see the module docstring). `target_bytes` defaults
    to the settings' `max_size_bytes`; `sleep` waits the grace period."""
    target = settings.max_size_bytes if target_bytes is None else target_bytes
    if below_bytes < 1 or target < 1:
        raise ValueError("compact: below_bytes and target_bytes must be 1 or more")
    if grace_seconds < 0:
        raise ValueError("compact: grace_seconds must be 0 or more")
    report = CompactReport()
    try:
        entries = index.query(writer_id)
    except IndexError_ as e:
        raise CompactError(f"cannot list the pages of writer {writer_id!r}: {e}", report) from e
    replaced: list[IndexEntry] = []
    try:
        for group in groups_of(entries, below_bytes, target):
            merged = _merge_group(settings, storage, index, group, report)
            replaced.extend(group)
            report.groups += 1
            report.pages_merged += len(group)
            report.pages_written += 1
            report.bytes_before += sum(e.storage_size_bytes for e in group)
            report.bytes_after += merged.storage_size_bytes
    finally:
        if replaced:
            if grace_seconds > 0:
                sleep(grace_seconds)
            for entry in replaced:
                try:
                    storage.delete(entry.page_key)
                except StorageError:
                    report.left_behind.append(entry.page_key)
                else:
                    report.deleted += 1
    return report


def _merge_group(
    settings: SnapshotterSettings,
    storage: Storage,
    index: Index,
    group: Sequence[IndexEntry],
    report: CompactReport,
) -> IndexEntry:
    """One group merged, stored and swapped in the index; `CompactError` leaves all as it was."""
    first = group[0]
    writer = first.writer_id
    what = f"pages {first.page_sequence}..{group[-1].page_sequence} of writer {writer!r}"
    events: list[Event] = []
    originals: list[tuple[int, int]] = []
    for entry in group:
        try:
            page = decode(storage.get(entry.page_key))
        except (StorageError, PageError) as e:
            raise CompactError(f"compacting {what}: reading {entry.page_key}: {e}", report) from e
        meta = page.metadata
        if (meta.writer_id, meta.page_sequence) != (writer, entry.page_sequence):
            raise CompactError(
                f"compacting {what}: {entry.page_key} holds page {meta.page_sequence} of "
                f"writer {meta.writer_id!r}, not what the index says",
                report,
            )
        events.extend(sorted(page.events, key=lambda e: e.sequence))
        originals.extend(constituents(meta))
    for number, event in enumerate(events):
        event.sequence = number
    tags = dict(settings.tags)
    tags[COMPACTED_FROM] = f"{originals[0][0]}-{originals[-1][0]}"
    tags[COMPACTED_PAGES] = ",".join(f"{s}:{n}" for s, n in originals)
    meta = PageMetadata(
        writer_id=writer,
        page_sequence=first.page_sequence,
        start_time=min(e.start_time for e in group),
        end_time=max(e.end_time for e in group),
        tags=tags,
    )
    page = EventPage(metadata=meta)
    page.events.extend(events)
    data, _ = encode(page, settings.format, settings.compression)
    meta = page.metadata
    ext = extension(settings.format, settings.compression)
    key = settings.key_template.render(meta, ext, suffix=f"{KEY_SUFFIX}{originals[-1][0]}")
    new = IndexEntry.of(key, meta, settings.format, len(data))
    user_metadata = {
        "writer-id": writer,
        "page-sequence": str(meta.page_sequence),
        "event-count": str(meta.event_count),
        COMPACTED_FROM: tags[COMPACTED_FROM],
    }
    try:
        storage.put(key, data, CONTENT_TYPES[settings.format], user_metadata)
    except StorageError as e:
        with suppress(StorageError):  # a put that failed may still have stored it
            storage.delete(key)
        raise CompactError(f"compacting {what}: {e}; nothing changed", report) from e
    try:
        index.replace(group, new)
    except IndexError_ as e:
        # The replace may have been committed before its answer was lost: look before
        # deleting the merged page the index might already list.
        try:
            listed = {x.page_key for x in index.query(writer, first.start_time, first.start_time)}
        except IndexError_:
            raise CompactError(
                f"compacting {what}: {e}; whether the index took the merged page {key} is "
                "unknown, so it is left in storage (reconcile tells a leftover from a page)",
                report,
            ) from e
        if key not in listed:
            with suppress(StorageError):
                storage.delete(key)
            raise CompactError(f"compacting {what}: {e}; nothing changed", report) from e
    return new
