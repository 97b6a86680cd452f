"""Compaction over a real snapshotter's pages: fewer pages, the same replay, the index
swapped, old pages deleted only after the grace period, keys never reused, large pages
left alone and ending runs, and failures that change nothing."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import replace

import pytest

from ripple.snapshotter.compact import (
    COMPACTED_FROM,
    COMPACTED_PAGES,
    CompactError,
    compact,
    constituents,
    groups_of,
)
from ripple.snapshotter.index import IndexEntry, IndexError_
from ripple.snapshotter.index.sqlite import SqliteIndex
from ripple.snapshotter.pages import decode
from ripple.snapshotter.replay import replay
from ripple.snapshotter.service import Snapshotter
from ripple.snapshotter.settings import SnapshotterSettings
from ripple.snapshotter.storage import FilesystemStorage
from tests.snapshotter.service_helpers import SwitchableStorage

T0 = 1_760_000_000_000
QUIET = {"max_events": 1_000_000, "max_age_seconds": 3600.0}
BIG = 200_000  # bytes of random payload: a page that stays large compressed


def write(settings: SnapshotterSettings, writer: str, sizes: list[int]) -> None:
    """One page per item: 3 small events, or one random payload of that many bytes."""
    settings = replace(settings, **QUIET)  # type: ignore[arg-type]
    storage = FilesystemStorage(settings.pages_path)
    with Snapshotter(settings, storage, SqliteIndex(settings.index_location)) as snap:
        for p, size in enumerate(sizes):
            if size:
                snap.publish(writer, os.urandom(size), timestamp=T0 + p * 10_000)
            else:
                for i in range(3):
                    attributes = {"eventName": f"n{i}", "page": str(p)}
                    snap.publish(
                        writer, b"%d-%d" % (p, i), attributes, timestamp=T0 + p * 10_000 + i
                    )
            snap.flush()


def events_of(
    index: SqliteIndex, storage: FilesystemStorage, writer: str = "w"
) -> list[tuple[str, int, bytes, dict[str, str]]]:
    return [
        (e.event_id, e.timestamp, e.payload, dict(e.attributes))
        for e in replay(index, storage, writer)
    ]


@pytest.fixture
def index(snapshot_settings: SnapshotterSettings) -> Iterator[SqliteIndex]:
    opened = SqliteIndex(snapshot_settings.index_location)
    yield opened
    opened.close()


@pytest.fixture
def storage(snapshot_settings: SnapshotterSettings) -> FilesystemStorage:
    return FilesystemStorage(snapshot_settings.pages_path)


def test_small_pages_become_fewer_with_the_same_replay(
    snapshot_settings: SnapshotterSettings, index: SqliteIndex, storage: FilesystemStorage
) -> None:
    settings = replace(snapshot_settings, tags={"env": "test"})
    write(settings, "w", [0] * 10)
    write(settings, "other", [0] * 2)
    old = index.query("w")
    size = max(e.page_size_bytes for e in old)  # page 0's is smaller: proto3 omits a 0
    assert size - min(e.page_size_bytes for e in old) < size // 8
    before = events_of(index, storage)
    other_before = index.query("other")
    old_keys = {o.key for o in storage.list()}
    waited: list[float] = []

    def grace(seconds: float) -> None:  # the swap is done, the old pages still readable
        waited.append(seconds)
        assert {e.page_sequence for e in index.query("w")} == {0, 4, 8}
        assert all(storage.head(e.page_key) is not None for e in old)

    report = compact(settings, storage, index, "w", 1 << 20, 4 * size, 30.0, sleep=grace)

    assert waited == [30.0]
    assert (report.groups, report.pages_merged, report.pages_written) == (3, 10, 3)
    assert report.deleted == 10
    assert report.left_behind == []
    assert report.bytes_before == sum(e.storage_size_bytes for e in old)
    new = index.query("w")
    assert report.bytes_after == sum(e.storage_size_bytes for e in new)
    assert events_of(index, storage) == before
    assert [e.page_sequence for e in new] == [0, 4, 8]  # each its first page's sequence
    assert [e.event_count for e in new] == [12, 12, 6]
    assert [(e.start_time, e.end_time) for e in new] == [
        (T0, T0 + 30_002),
        (T0 + 40_000, T0 + 70_002),
        (T0 + 80_000, T0 + 90_002),
    ]
    for entry in old:  # every old page object is gone
        assert storage.head(entry.page_key) is None
    new_keys = {e.page_key for e in new}
    assert not new_keys & old_keys
    assert {o.key for o in storage.list()} == new_keys | {e.page_key for e in other_before}
    assert index.query("other") == other_before
    page = decode(storage.get(new[1].page_key))
    assert [e.sequence for e in page.events] == list(range(12))
    assert dict(page.metadata.tags) == {
        "env": "test",
        COMPACTED_FROM: "4-7",
        COMPACTED_PAGES: "4:3,5:3,6:3,7:3",
    }
    assert new[1].page_key.endswith("_4~c7.pb.zst")


def test_merged_pages_merge_again(
    snapshot_settings: SnapshotterSettings, index: SqliteIndex, storage: FilesystemStorage
) -> None:
    write(snapshot_settings, "w", [0] * 6)
    before = events_of(index, storage)
    size = max(e.page_size_bytes for e in index.query("w"))
    first = compact(snapshot_settings, storage, index, "w", 1 << 20, 2 * size)
    assert first.pages_written == 3
    ndjson = replace(snapshot_settings, format="ndjson", compression="gzip")
    second = compact(ndjson, storage, index, "w", 1 << 20)
    assert (second.pages_merged, second.pages_written) == (3, 1)
    (entry,) = index.query("w")
    assert (entry.format, entry.compression, entry.event_count) == ("ndjson", "gzip", 18)
    meta = decode(storage.get(entry.page_key)).metadata
    assert constituents(meta) == [(p, 3) for p in range(6)]  # the original pages
    assert meta.tags[COMPACTED_FROM] == "0-5"
    assert entry.page_key.endswith("_0~c5.ndjson.gz")
    assert events_of(index, storage) == before
    assert len(list(storage.list())) == 1


def test_a_large_page_ends_a_run(
    snapshot_settings: SnapshotterSettings, index: SqliteIndex, storage: FilesystemStorage
) -> None:
    # pages: small small LARGE small LARGE small small small
    write(snapshot_settings, "w", [0, 0, BIG, 0, BIG, 0, 0, 0])
    before = events_of(index, storage)
    large = [e for e in index.query("w") if e.storage_size_bytes > BIG // 2]
    assert [e.page_sequence for e in large] == [2, 4]

    report = compact(snapshot_settings, storage, index, "w", below_bytes=BIG // 2)

    assert (report.groups, report.pages_merged) == (2, 5)  # page 3 alone is left as it is
    after = index.query("w")
    assert [e.page_sequence for e in after] == [0, 2, 3, 4, 5]
    assert [e.event_count for e in after] == [6, 1, 3, 1, 9]
    assert [e for e in after if e.page_sequence in (2, 4)] == large
    assert events_of(index, storage) == before


def test_groups_of_stop_at_the_target_and_need_two_pages() -> None:
    def entry(sequence: int, stored: int, size: int) -> IndexEntry:
        return IndexEntry(f"k{sequence}", "w", sequence, sequence, sequence, 1, size, stored,
                          "protobuf", "zstd")  # fmt: skip

    small = [entry(s, 10, 40) for s in range(5)]
    assert [[e.page_sequence for e in g] for g in groups_of(small, 100, 100)] == [
        [0, 1],
        [2, 3],
    ]  # 4 is alone: not a group
    assert [[e.page_sequence for e in g] for g in groups_of(small, 100, 120)] == [
        [0, 1, 2],
        [3, 4],
    ]
    mixed = [entry(0, 10, 40), entry(1, 500, 40), entry(2, 10, 40), entry(3, 10, 200)]
    assert groups_of(mixed, 100, 100) == []  # 1 is large; 3 alone exceeds the target
    assert groups_of(small[:1], 100, 1000) == []


def test_a_storage_failure_during_put_leaves_everything_as_it_was(
    snapshot_settings: SnapshotterSettings, index: SqliteIndex
) -> None:
    write(snapshot_settings, "w", [0] * 4)
    inner = FilesystemStorage(snapshot_settings.pages_path)
    storage = SwitchableStorage(inner)
    before_entries = index.query("w")
    before_objects = sorted(o.key for o in inner.list())
    before = events_of(index, inner)
    storage.down.set()
    slept: list[float] = []

    with pytest.raises(CompactError, match="switched off by the test; nothing changed") as caught:
        compact(
            snapshot_settings, storage, index, "w", 1 << 20, grace_seconds=5, sleep=slept.append
        )

    assert storage.refused == 1
    assert caught.value.report.groups == 0
    assert slept == []  # nothing was swapped, so nothing waits to be deleted
    assert index.query("w") == before_entries
    assert sorted(o.key for o in inner.list()) == before_objects
    assert events_of(index, inner) == before


class ReplaceFails:
    """The index, whose `replace` fails (and is known not to have happened)."""

    def __init__(self, inner: SqliteIndex) -> None:
        self.inner = inner
        self.backend = inner.backend

    def replace(self, old: object, new: object) -> None:
        raise IndexError_("sqlite index: replace: database is locked")

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)


def test_an_index_failure_deletes_the_merged_page_again(
    snapshot_settings: SnapshotterSettings, index: SqliteIndex, storage: FilesystemStorage
) -> None:
    write(snapshot_settings, "w", [0] * 4)
    before_entries = index.query("w")
    before_objects = sorted(o.key for o in storage.list())

    with pytest.raises(CompactError, match="database is locked; nothing changed"):
        compact(snapshot_settings, storage, ReplaceFails(index), "w", 1 << 20)  # type: ignore[arg-type]

    assert index.query("w") == before_entries
    assert sorted(o.key for o in storage.list()) == before_objects


def test_a_later_group_failing_keeps_the_groups_done(
    snapshot_settings: SnapshotterSettings, index: SqliteIndex, storage: FilesystemStorage
) -> None:
    write(snapshot_settings, "w", [0] * 4)
    before = events_of(index, storage)
    entries = index.query("w")
    storage.delete(entries[3].page_key)  # the second group cannot be read
    size = max(e.page_size_bytes for e in entries)
    with pytest.raises(CompactError, match=entries[3].page_key) as caught:
        compact(snapshot_settings, storage, index, "w", 1 << 20, 2 * size)
    report = caught.value.report
    assert (report.groups, report.pages_merged, report.deleted) == (1, 2, 2)
    after = index.query("w")
    assert [e.page_sequence for e in after] == [0, 2, 3]
    assert after[1:] == entries[2:]
    readable = list(replay(index, storage, "w", None, entries[2].end_time))  # before page 3
    assert [(e.event_id, e.payload) for e in readable] == [(e[0], e[2]) for e in before[:9]]
