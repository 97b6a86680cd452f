"""Replay over pages a real snapshotter wrote: time ranges whose edges fall inside pages and
on event timestamps, open ranges, archive order, writers kept apart, a page compaction
replaced mid-replay, a page gone for good; and the CLI's time parser."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace

import pytest

from ripple.snapshotter.compact import compact
from ripple.snapshotter.index.sqlite import SqliteIndex
from ripple.snapshotter.replay import Replay, ReplayError, parse_time, replay
from ripple.snapshotter.service import Snapshotter
from ripple.snapshotter.settings import SnapshotterSettings
from ripple.snapshotter.storage import FilesystemStorage

T0 = 1_760_000_000_000  # 2025-10-09T08:53:20Z
QUIET = {"max_events": 1_000_000, "max_age_seconds": 3600.0}  # pages end where flush() says


def write_pages(settings: SnapshotterSettings, pages: dict[str, Sequence[Sequence[int]]]) -> None:
    """Each writer's pages, one list of event timestamps per page; round i writes every
    writer's i-th page. Payloads are b"<writer>@<timestamp>"."""
    settings = replace(settings, **QUIET)  # type: ignore[arg-type]
    storage = FilesystemStorage(settings.pages_path)
    with Snapshotter(settings, storage, SqliteIndex(settings.index_location)) as snap:
        for round_ in range(max(len(p) for p in pages.values())):
            for writer, its_pages in pages.items():
                for timestamp in its_pages[round_] if round_ < len(its_pages) else ():
                    snap.publish(writer, f"{writer}@{timestamp}".encode(), timestamp=timestamp)
            snap.flush()


@pytest.fixture
def archive(
    snapshot_settings: SnapshotterSettings,
) -> Iterator[tuple[SqliteIndex, FilesystemStorage]]:
    """Writer "w": 12 events one second apart in pages of 4; writer "x": events at the same
    times, interleaved with them."""
    times = [T0 + i * 1000 for i in range(12)]
    write_pages(
        snapshot_settings,
        {"w": [times[0:4], times[4:8], times[8:12]], "x": [times[0:6], times[6:12]]},
    )
    index = SqliteIndex(snapshot_settings.index_location)
    yield index, FilesystemStorage(snapshot_settings.pages_path)
    index.close()


def stamps(index: SqliteIndex, storage: FilesystemStorage, *args: int | None) -> list[int]:
    """The offsets (seconds after T0) of writer w's events replayed in [since, until]."""
    events = list(replay(index, storage, "w", *args))
    assert all(e.payload == f"w@{e.timestamp}".encode() for e in events)
    return [(e.timestamp - T0) // 1000 for e in events]


def test_everything_in_archive_order(archive: tuple[SqliteIndex, FilesystemStorage]) -> None:
    index, storage = archive
    assert len(index.query("w")) == 3
    assert stamps(index, storage) == list(range(12))
    events = list(replay(index, storage, "w"))
    assert [e.event_id for e in events[:5]] == ["0-0", "0-1", "0-2", "0-3", "1-0"]
    assert [e.sequence for e in events[:5]] == [0, 1, 2, 3, 0]


def test_edges_on_event_timestamps_are_included(
    archive: tuple[SqliteIndex, FilesystemStorage],
) -> None:
    index, storage = archive
    assert stamps(index, storage, T0 + 2000, T0 + 9000) == list(range(2, 10))
    assert stamps(index, storage, T0 + 3000, T0 + 4000) == [3, 4]  # across a page boundary
    assert stamps(index, storage, T0 + 5000, T0 + 5000) == [5]


def test_edges_between_events_inside_pages(archive: tuple[SqliteIndex, FilesystemStorage]) -> None:
    index, storage = archive
    assert stamps(index, storage, T0 + 2500, T0 + 8500) == list(range(3, 9))
    assert stamps(index, storage, T0 + 5001, T0 + 5999) == []  # inside a page, no event
    assert stamps(index, storage, T0 + 3001, T0 + 3999) == []  # between two pages


def test_open_ranges(archive: tuple[SqliteIndex, FilesystemStorage]) -> None:
    index, storage = archive
    assert stamps(index, storage, None, T0 + 5000) == list(range(6))
    assert stamps(index, storage, T0 + 10_000, None) == [10, 11]
    assert stamps(index, storage, T0 + 12_000, None) == []
    assert stamps(index, storage, None, T0 - 1) == []


def test_another_writers_events_never_appear(
    archive: tuple[SqliteIndex, FilesystemStorage],
) -> None:
    index, storage = archive
    x = list(replay(index, storage, "x", T0 + 1000, T0 + 7000))
    assert [e.payload for e in x] == [f"x@{T0 + i * 1000}".encode() for i in range(1, 8)]
    assert list(replay(index, storage, "nobody")) == []


def test_total_events_counts_the_pages_listed(
    archive: tuple[SqliteIndex, FilesystemStorage],
) -> None:
    index, storage = archive
    whole = Replay(index, storage, "w")
    assert whole.total_events == 12
    part = Replay(index, storage, "w", T0 + 5000, T0 + 6000)  # inside the second page only
    assert part.total_events == 4
    assert [(e.timestamp - T0) // 1000 for e in part] == [5, 6]
    assert part.events_seen == 4
    assert part.pages_read == 1


def test_order_is_pages_by_start_then_publish_order(
    snapshot_settings: SnapshotterSettings,
) -> None:
    # the second page starts earlier than the first: pages are ordered by start time, and
    # events inside a page stay in publish order, not sorted by timestamp
    write_pages(snapshot_settings, {"w": [[T0 + 5000, T0 + 3000, T0 + 4000], [T0 + 1000, T0]]})
    index = SqliteIndex(snapshot_settings.index_location)
    storage = FilesystemStorage(snapshot_settings.pages_path)
    try:
        assert stamps(index, storage) == [1, 0, 5, 3, 4]
        assert stamps(index, storage, T0 + 1000, T0 + 4000) == [1, 3, 4]
    finally:
        index.close()


def test_a_page_compacted_mid_replay_is_read_from_the_merged_page(
    snapshot_settings: SnapshotterSettings, archive: tuple[SqliteIndex, FilesystemStorage]
) -> None:
    index, storage = archive
    expected = list(replay(index, storage, "w", T0 + 1000, None))
    events = iter(Replay(index, storage, "w", T0 + 1000, None))  # lists the three pages
    first = [next(events), next(events)]  # the first page is read
    report = compact(snapshot_settings, storage, index, "w", below_bytes=1 << 20)
    assert (report.pages_merged, report.deleted) == (3, 3)  # the pages listed are gone
    rest = list(events)
    # the same events, once each, in the same order (only `sequence`, a position in a page,
    # is renumbered by the merge)
    assert [(e.event_id, e.timestamp, e.payload) for e in [*first, *rest]] == [
        (e.event_id, e.timestamp, e.payload) for e in expected
    ]
    assert len(expected) == 11


def test_a_page_missing_for_good_is_a_clear_error(
    archive: tuple[SqliteIndex, FilesystemStorage],
) -> None:
    index, storage = archive
    second = index.query("w")[1]
    storage.delete(second.page_key)
    events = replay(index, storage, "w")
    assert [(next(events).timestamp - T0) // 1000 for _ in range(4)] == [0, 1, 2, 3]
    with pytest.raises(ReplayError, match="even after querying the index again") as caught:
        next(events)
    assert second.page_key in str(caught.value)
    assert "\n" not in str(caught.value)


NOW = 1_760_000_000_000


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("2025-10-09T12:00:00Z", 1_760_011_200_000),
        ("2025-10-09T14:00:00+02:00", 1_760_011_200_000),
        ("2025-10-09T12:00:00", 1_760_011_200_000),  # no zone: UTC
        ("2025-10-09T12:00:00.250Z", 1_760_011_200_250),
        ("2025-10-09", 1_759_968_000_000),
        ("1696800000000", 1_696_800_000_000),
        ("now", NOW),
        ("-1h", NOW - 3_600_000),
        ("-30m", NOW - 1_800_000),
        ("-2d", NOW - 2 * 86_400_000),
        ("90s", NOW - 90_000),
        (" -1.5h ", NOW - 5_400_000),
    ],
)
def test_parse_time(text: str, ms: int) -> None:
    assert parse_time(text, now_ms=NOW) == ms


@pytest.mark.parametrize("text", ["yesterday", "", "-1y", "2025-13-01", "12:00", "-5"])
def test_parse_time_refuses_in_one_line(text: str) -> None:
    with pytest.raises(ValueError, match="is not a time") as caught:
        parse_time(text, now_ms=NOW)
    assert repr(text) in str(caught.value)
    assert "\n" not in str(caught.value)
