"""Reconcile: index entries rebuilt from the pages in storage (`ripple snapshot reconcile`).

The RFC's reconciliation job for an index that lost entries (it was down when pages were
written and the writer's retry queue did not survive, or it was wiped). `reconcile` lists
storage (under `prefix`), reads every object the index does not list, and publishes an
entry made from the page's own metadata: its key, writer, sequence, times, event count,
sizes, compression, and its format (`page_format`: NDJSON if the uncompressed bytes start
with `{`, protobuf otherwise). An object that is not a page (`PageError`), or cannot be
read, is skipped and reported in `unreadable`, with the reason in `reasons`. Reconcile
adds entries, never removes or changes one: running it again adds nothing.

Compaction leaves objects the index must not list again: the old pages during its grace
period (or for good, if their deletion failed), and a merged page whose index swap never
happened. Publishing either would make replay return events twice, or replace the entry
of the page it shares a sequence with. So a page is **superseded** (reported, not added)
when one of the original pages it holds (`compact.constituents`) is already held by an
entry of the index, or by a larger merged page found unlisted in the same run, which is
added instead. Whatever holds the events stays listed; nothing is deleted.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from ripple.snapshotter.compact import constituents, looks_compacted
from ripple.snapshotter.index import Index, IndexEntry
from ripple.snapshotter.pages import PageError, decode, decompress
from ripple.snapshotter.proto import PageMetadata
from ripple.snapshotter.storage import Storage, StorageError

__all__ = ["ReconcileReport", "page_format", "reconcile"]


def page_format(raw: bytes) -> str:
    """The format of an uncompressed page: "ndjson" if it starts with `{`, else "protobuf"."""
    return "ndjson" if raw[:1] == b"{" else "protobuf"


@dataclass
class ReconcileReport:
    scanned: int = 0  # objects listed in storage
    added: int = 0  # entries published
    already: int = 0  # objects the index listed already
    unreadable: list[str] = field(default_factory=list)  # keys of objects that are not pages
    superseded: list[str] = field(default_factory=list)  # pages a listed page holds
    added_keys: list[str] = field(default_factory=list)
    reasons: dict[str, str] = field(default_factory=dict)  # unreadable key -> why


@dataclass
class _Found:
    key: str
    meta: PageMetadata
    format: str
    size: int

    @property
    def holds(self) -> set[int]:
        return {sequence for sequence, _ in constituents(self.meta)}


def reconcile(storage: Storage, index: Index, prefix: str = "") -> ReconcileReport:
    """Publish an index entry for every page in storage the index lacks (see the module
    docstring). `StorageError` or `IndexError_` if listing storage or the index fails."""
    report = ReconcileReport()
    listed = index.keys()
    found: dict[str, list[_Found]] = defaultdict(list)  # by writer
    for stored in storage.list(prefix):
        report.scanned += 1
        if stored.key in listed:
            report.already += 1
            continue
        try:
            data = storage.get(stored.key)
        except StorageError as e:
            if e.missing:  # deleted since it was listed (compaction's old pages do that)
                continue
            _unreadable(report, stored.key, str(e))
            continue
        try:
            raw, _ = decompress(data)
            page = decode(raw)
        except PageError as e:
            _unreadable(report, stored.key, str(e))
            continue
        meta = PageMetadata()
        meta.CopyFrom(page.metadata)  # the events are not kept: a wiped index means all pages
        found[meta.writer_id].append(_Found(stored.key, meta, page_format(raw), len(data)))
    for writer, pages in found.items():
        _publish_writer(storage, index, writer, pages, report)
    return report


def _unreadable(report: ReconcileReport, key: str, reason: str) -> None:
    report.unreadable.append(key)
    report.reasons[key] = reason


def _publish_writer(
    storage: Storage, index: Index, writer: str, pages: list[_Found], report: ReconcileReport
) -> None:
    """One writer's unlisted pages: the largest merged pages first, so the pages they hold
    are seen to be superseded."""
    held_by_index = _IndexHoldings(storage, index, writer)
    taken: set[int] = set()  # original sequences held by pages added in this run
    pages.sort(key=lambda p: (-len(p.holds), p.meta.start_time, p.meta.page_sequence))
    for page in pages:
        holds = page.holds
        if holds & taken or held_by_index.holds_any(page, holds):
            report.superseded.append(page.key)
            continue
        index.publish(IndexEntry.of(page.key, page.meta, page.format, page.size))
        taken |= holds
        report.added += 1
        report.added_keys.append(page.key)
    report.superseded.sort()
    report.added_keys.sort()


class _IndexHoldings:
    """Which original pages the index's entries of one writer hold, looked up by time
    range; merged pages are read (once each) for their `compacted-pages` tag."""

    def __init__(self, storage: Storage, index: Index, writer: str) -> None:
        self.storage = storage
        self.index = index
        self.writer = writer
        self._merged: dict[str, set[int]] = {}

    def holds_any(self, page: _Found, sequences: set[int]) -> bool:
        # a page holding an original overlaps it in time, so the range finds every holder
        for entry in self.index.query(self.writer, page.meta.start_time, page.meta.end_time):
            if entry.page_key == page.key:
                continue
            if entry.page_sequence in sequences or self._held(entry) & sequences:
                return True
        return False

    def _held(self, entry: IndexEntry) -> set[int]:
        if not looks_compacted(entry):
            return {entry.page_sequence}
        if entry.page_key not in self._merged:
            try:
                meta = decode(self.storage.get(entry.page_key)).metadata
                self._merged[entry.page_key] = {s for s, _ in constituents(meta)}
            except (StorageError, PageError):  # unreadable: it holds at least its own
                self._merged[entry.page_key] = {entry.page_sequence}
        return self._merged[entry.page_key]
