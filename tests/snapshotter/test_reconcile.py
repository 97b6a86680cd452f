"""Reconcile over a real snapshotter's pages: entries lost while the index was down (or
deleted afterwards) come back exactly, objects that are not pages are reported and
skipped, a second run adds nothing, and the leftovers of a compaction are never listed
again."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ripple.snapshotter.compact import CompactError, compact
from ripple.snapshotter.formats import Compression, Format
from ripple.snapshotter.index import IndexEntry, IndexError_
from ripple.snapshotter.index.sqlite import SqliteIndex
from ripple.snapshotter.pages import decode, decompress
from ripple.snapshotter.reconcile import page_format, reconcile
from ripple.snapshotter.replay import replay
from ripple.snapshotter.service import Snapshotter
from ripple.snapshotter.settings import SnapshotterSettings
from ripple.snapshotter.storage import FilesystemStorage
from tests.snapshotter.service_helpers import open_snapshotter

T0 = 1_760_000_000_000


def entries(index: SqliteIndex) -> dict[str, IndexEntry]:
    return {e.page_key: e for w in index.writers() for e in index.query(w)}


def write(settings: SnapshotterSettings, writer: str, pages: int, per_page: int = 3) -> None:
    settings = replace(settings, max_events=1_000_000, max_age_seconds=3600.0)
    storage = FilesystemStorage(settings.pages_path)
    with Snapshotter(settings, storage, SqliteIndex(settings.index_location)) as snap:
        for p in range(pages):
            for i in range(per_page):
                snap.publish(writer, b"%d-%d" % (p, i), timestamp=T0 + p * 10_000 + i)
            snap.flush()


def test_entries_lost_while_the_index_was_down_come_back(
    snapshot_settings: SnapshotterSettings,
) -> None:
    settings = replace(
        snapshot_settings,
        format="ndjson",
        compression="gzip",
        max_events=1_000_000,
        max_age_seconds=3600.0,
    )
    snap, _, index = open_snapshotter(settings)
    with snap:
        snap.publish("w", b"a0", timestamp=T0)
        snap.flush()  # page 0: listed
        index.down.set()  # down until the process ends: its retry queue is lost with it
        for p in (1, 2):
            snap.publish("w", b"b%d" % p, {"k": "v"}, timestamp=T0 + p * 1000)
            snap.publish("v", b"c%d" % p, timestamp=T0 + p * 1000 + 1)
            snap.flush()
        assert index.refused >= 4
    storage = FilesystemStorage(settings.pages_path)
    sqlite = SqliteIndex(settings.index_location)
    try:
        before = entries(sqlite)
        assert len(before) == 1
        keys = {o.key for o in storage.list()}
        assert len(keys) == 5

        report = reconcile(storage, sqlite)

        assert (report.scanned, report.added, report.already) == (5, 4, 1)
        assert report.unreadable == []
        assert report.superseded == []
        after = entries(sqlite)
        assert set(after) == keys
        assert sorted(report.added_keys) == sorted(keys - set(before))
        for key in keys - set(before):  # each entry as the writer would have made it
            data = storage.get(key)
            meta = decode(data).metadata
            assert after[key] == IndexEntry.of(key, meta, "ndjson", len(data))
            assert after[key].compression == "gzip"
            assert after[key].event_count == 1
        assert [e.payload for e in replay(sqlite, storage, "w")] == [b"a0", b"b1", b"b2"]
        assert [e.payload for e in replay(sqlite, storage, "v")] == [b"c1", b"c2"]

        again = reconcile(storage, sqlite)
        assert (again.scanned, again.added, again.already) == (5, 0, 5)
        assert entries(sqlite) == after
    finally:
        sqlite.close()


def test_deleted_rows_are_restored_and_non_pages_are_skipped(
    snapshot_settings: SnapshotterSettings,
) -> None:
    write(snapshot_settings, "w", pages=3)
    storage = FilesystemStorage(snapshot_settings.pages_path)
    storage.put("notes/readme.txt", b"not a page", "text/plain", {})
    storage.put("w/broken.pb.zst", b"\x28\xb5\x2f\xfd truncated", "application/x-protobuf", {})
    index = SqliteIndex(snapshot_settings.index_location)
    try:
        original = entries(index)
        assert len(original) == 3
        lost = sorted(original)[1:]
        with index.engine.begin() as conn:
            conn.execute(index.table.delete().where(index.table.c.page_key.in_(lost)))
        assert len(entries(index)) == 1

        report = reconcile(storage, index)

        assert entries(index) == original  # exactly the rows that were deleted
        assert (report.scanned, report.added, report.already) == (5, 2, 1)
        assert report.added_keys == lost
        assert report.unreadable == ["notes/readme.txt", "w/broken.pb.zst"]
        assert "does not decompress" in report.reasons["w/broken.pb.zst"]
        assert reconcile(storage, index).added == 0
    finally:
        index.close()


def test_prefix_limits_the_scan(snapshot_settings: SnapshotterSettings) -> None:
    write(snapshot_settings, "a", pages=2)
    write(snapshot_settings, "b", pages=2)
    storage = FilesystemStorage(snapshot_settings.pages_path)
    index = SqliteIndex(snapshot_settings.index_location)
    try:
        with index.engine.begin() as conn:
            conn.execute(index.table.delete())
        report = reconcile(storage, index, prefix="b/")
        assert (report.scanned, report.added) == (2, 2)
        assert index.writers() == ["b"]
    finally:
        index.close()


def test_page_format_is_told_by_the_first_byte(snapshot_settings: SnapshotterSettings) -> None:
    cases: list[tuple[Format, Compression]] = [
        ("ndjson", "zstd"),
        ("protobuf", "gzip"),
        ("protobuf", "none"),
    ]
    for fmt, compression in cases:
        settings = replace(
            snapshot_settings,
            format=fmt,
            compression=compression,
            directory=snapshot_settings.directory / f"{fmt}-{compression}",
        )
        write(settings, "w", pages=1)
        (stored,) = FilesystemStorage(settings.pages_path).list()
        raw, found = decompress(FilesystemStorage(settings.pages_path).get(stored.key))
        assert (page_format(raw), found) == (fmt, compression)


def test_compaction_leftovers_are_never_listed_again(
    snapshot_settings: SnapshotterSettings,
) -> None:
    write(snapshot_settings, "w", pages=4)
    storage = FilesystemStorage(snapshot_settings.pages_path)
    index = SqliteIndex(snapshot_settings.index_location)
    try:
        old = sorted(entries(index))
        expected = [e.payload for e in replay(index, storage, "w")]
        seen: list[object] = []

        def during_grace(seconds: float) -> None:
            # the old pages are still in storage, unlisted: reconcile must leave them out
            seen.append(reconcile(storage, index))

        report = compact(
            snapshot_settings, storage, index, "w", 1 << 20, grace_seconds=5, sleep=during_grace
        )
        assert report.pages_merged == 4
        (grace_report,) = seen
        assert grace_report.added == 0  # type: ignore[attr-defined]
        assert grace_report.superseded == old  # type: ignore[attr-defined]
        assert [e.payload for e in replay(index, storage, "w")] == expected

        # the index loses the merged page after the old ones are deleted: it comes back
        (merged,) = entries(index).values()
        with index.engine.begin() as conn:
            conn.execute(index.table.delete())
        restored = reconcile(storage, index)
        assert restored.added_keys == [merged.page_key]
        assert list(entries(index).values()) == [merged]
    finally:
        index.close()


class LostAnswerIndex:
    """An index whose replace fails as a lost connection does, queries failing after it:
    the compaction cannot tell whether the swap happened."""

    def __init__(self, inner: SqliteIndex) -> None:
        self.inner = inner
        self.backend = inner.backend
        self.broken = False

    def replace(self, old: object, new: object) -> None:
        self.broken = True
        raise IndexError_("sqlite index: replace: connection lost")

    def query(self, *args: object) -> list[IndexEntry]:
        if self.broken:
            raise IndexError_("sqlite index: query: connection lost")
        return self.inner.query(*args)  # type: ignore[arg-type]

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)


def test_a_merged_page_whose_swap_never_happened_is_not_listed(
    snapshot_settings: SnapshotterSettings,
) -> None:
    write(snapshot_settings, "w", pages=3)
    write(snapshot_settings, "x", pages=1)
    storage = FilesystemStorage(snapshot_settings.pages_path)
    index = SqliteIndex(snapshot_settings.index_location)
    try:
        before = entries(index)
        with pytest.raises(CompactError, match="left in storage"):
            compact(snapshot_settings, storage, LostAnswerIndex(index), "w", 1 << 20)  # type: ignore[arg-type]
        (merged,) = {o.key for o in storage.list()} - set(before)
        assert "~c2" in merged
        (x_key,) = [k for k, e in before.items() if e.writer_id == "x"]
        with index.engine.begin() as conn:  # and an unrelated page lost its entry
            conn.execute(index.table.delete().where(index.table.c.page_key == x_key))

        report = reconcile(storage, index)

        assert report.superseded == [merged]  # its pages are listed: it is a leftover
        assert report.added_keys == [x_key]
        assert entries(index) == before
    finally:
        index.close()
