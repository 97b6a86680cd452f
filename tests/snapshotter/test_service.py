"""The Snapshotter over real filesystem storage and a real SQLite index: every flush trigger,
disconnects, shutdown, retries and dead letters, index outages, and sequences that never
repeat. Crash recovery (SIGKILL) is in test_crash.py."""

from __future__ import annotations

import threading
from pathlib import Path

import orjson
import pytest
from prometheus_client import REGISTRY

from ripple.snapshotter.pages import decode
from ripple.snapshotter.service import Backlogged, Flushed, Publish
from ripple.snapshotter.settings import SnapshotterSettings
from ripple.snapshotter.wal import WalError
from tests.snapshotter.service_helpers import open_snapshotter, pages_of, stored_pages
from tests.waiting import wait_for

QUIET = {"max_events": 1_000_000, "max_age_seconds": 3600.0}  # no trigger but the one tested


def metric(name: str, snapshotter: str) -> float:
    return REGISTRY.get_sample_value(name, {"snapshotter": snapshotter}) or 0.0


def test_max_events_seals_a_page(snapshot_settings: SnapshotterSettings) -> None:
    snap, _, _ = open_snapshotter(snapshot_settings, max_events=3, max_age_seconds=3600.0)
    with snap:
        published = [snap.publish("w", f"e{i}".encode()) for i in range(7)]
        wait_for(lambda: len(stored_pages(snapshot_settings)) == 2, "two full pages")
        assert snap.buffers_health()["total_buffered_events"] == 1
        pages = stored_pages(snapshot_settings)
        assert [[e.payload for e in p.events] for p in pages] == [
            [b"e0", b"e1", b"e2"],
            [b"e3", b"e4", b"e5"],
        ]
        assert [p.metadata.event_count for p in pages] == [3, 3]
        assert [p.metadata.page_sequence for p in pages] == [0, 1]
        assert [e.sequence for e in pages[1].events] == [0, 1, 2]
        assert [p.message_id for p in published[:4]] == ["0-0", "0-1", "0-2", "1-0"]
        assert [e.event_id for e in pages[0].events] == ["0-0", "0-1", "0-2"]


def test_max_size_bytes_seals_a_page(snapshot_settings: SnapshotterSettings) -> None:
    snap, _, _ = open_snapshotter(snapshot_settings, max_size_bytes=2000, **QUIET)
    with snap:
        for i in range(3):
            snap.publish("w", bytes([i]) * 900)
        wait_for(lambda: stored_pages(snapshot_settings), "a page sealed by size")
        (page,) = stored_pages(snapshot_settings)
        assert [e.payload[0] for e in page.events] == [0, 1, 2]  # 2 x 900 < 2000 <= 3 x 900
        assert snap.buffers_health()["total_buffered_events"] == 0


def test_max_age_seals_a_page_without_more_events(snapshot_settings: SnapshotterSettings) -> None:
    snap, _, _ = open_snapshotter(snapshot_settings, max_events=1000, max_age_seconds=0.2)
    with snap:
        snap.publish("w", b"lonely")
        assert snap.buffers_health()["total_buffered_events"] == 1
        wait_for(lambda: stored_pages(snapshot_settings), "the age trigger")
        assert [e.payload for p in stored_pages(snapshot_settings) for e in p.events] == [b"lonely"]


def test_buffered_bytes_cap_flushes_least_recently_used(
    snapshot_settings: SnapshotterSettings,
) -> None:
    snap, _, _ = open_snapshotter(snapshot_settings, max_buffered_bytes=3500, **QUIET)
    with snap:
        for writer in ("a", "b", "c"):
            snap.publish(writer, b"x" * 1000)
        snap.publish("a", b"y" * 10)  # a is now the most recently used
        assert stored_pages(snapshot_settings) == []
        snap.publish("d", b"z" * 1000)  # over the cap: b, the least recently used, goes
        wait_for(lambda: stored_pages(snapshot_settings), "the LRU flush")
        assert [p.metadata.writer_id for p in stored_pages(snapshot_settings)] == ["b"]
        writers = {g[0] for g in snap.buffer_gauges()}
        assert writers == {"a", "c", "d"}


def test_disconnect_flushes_a_short_buffer_before_returning(
    snapshot_settings: SnapshotterSettings,
) -> None:
    snap, _, _ = open_snapshotter(snapshot_settings, **QUIET)
    with snap:
        before = metric("snapshotter_session_disconnects_total", snap.name)
        with snap.session() as session:
            session.publish("w1", b"one")
            session.publish("w2", b"two")
            session.publish("w1", b"three")
            other = snap.publish("bystander", b"stays")
        assert other.sequence == 0
        flushed = session.close()  # a second close flushes nothing new
        assert flushed.writer_ids == ["w1", "w2"]
        # pages are in storage when the session's end returns: no waiting
        assert {
            p.metadata.writer_id: [e.payload for e in p.events]
            for p in stored_pages(snapshot_settings)
        } == {
            "w1": [b"one", b"three"],
            "w2": [b"two"],
        }
        assert snap.buffers_health()["total_buffered_events"] == 1  # the bystander's
        assert metric("snapshotter_session_disconnects_total", snap.name) == before + 2


def test_shutdown_flushes_every_buffer(snapshot_settings: SnapshotterSettings) -> None:
    snap, _, index = open_snapshotter(snapshot_settings, **QUIET)
    snap.publish_many([Publish("a", b"1"), Publish("b", b"2"), Publish("a", b"3")])
    snap.close()
    assert [(p.metadata.writer_id, len(p.events)) for p in stored_pages(snapshot_settings)] == [
        ("a", 2),
        ("b", 1),
    ]
    assert index.inner.count() == 2
    with pytest.raises(RuntimeError, match="closed"):
        snap.publish("a", b"late")


def test_storage_failures_are_retried_until_it_comes_back(
    snapshot_settings: SnapshotterSettings,
) -> None:
    snap, storage, index = open_snapshotter(
        snapshot_settings,
        max_retries=1000,
        retry_base_seconds=0.01,
        retry_max_seconds=0.02,
        **QUIET,
    )
    with snap:
        errors = metric("snapshotter_storage_errors_total", snap.name)
        storage.down.set()
        snap.publish("w", b"patient")
        flushed: list[Flushed] = []
        disconnect = threading.Thread(target=lambda: flushed.append(snap.disconnect(["w"])))
        disconnect.start()
        wait_for(lambda: storage.refused >= 3, "three refused writes")
        assert stored_pages(snapshot_settings) == []
        assert flushed == []  # the disconnect waits for the page
        storage.down.clear()
        disconnect.join(30)
        assert flushed[0].pages_written == 1
        assert [e.payload for p in stored_pages(snapshot_settings) for e in p.events] == [
            b"patient"
        ]
        assert metric("snapshotter_storage_errors_total", snap.name) >= errors + 3
        health = snap.storage_health()
        assert health["status"] == "healthy"
        assert 0 < health["write_success_rate"] < 1
        assert health["last_write_success"] is not None
        assert index.inner.count() == 1


def test_storage_down_past_max_retries_dead_letters_the_page(
    snapshot_settings: SnapshotterSettings,
) -> None:
    snap, storage, index = open_snapshotter(snapshot_settings, max_retries=2, **QUIET)
    dead_before = metric("snapshotter_dead_letter_pages_total", snap.name)
    storage.down.set()
    with snap:
        snap.publish("w", b"doomed")
        flushed = snap.disconnect(["w"])
        assert flushed.pages_written == 0
        assert storage.refused == 3  # the first attempt and two retries
        assert snap.buffers_health()["dead_letter_pages"] == 1
        assert snap.storage_health()["status"] == "unhealthy"
    assert metric("snapshotter_dead_letter_pages_total", snap.name) == dead_before + 1
    dead = snapshot_settings.dead_letter_path
    (line,) = (dead / "dead-letters.ndjson").read_bytes().splitlines()
    record = orjson.loads(line)
    assert (record["writer_id"], record["event_count"]) == ("w", 1)
    assert "switched off by the test" in record["error"]
    page = decode((dead / record["key"]).read_bytes())
    assert [e.payload for e in page.events] == [b"doomed"]
    assert index.inner.count() == 0
    # the page is done: a restart does not write it again
    storage.down.clear()
    again, _, _ = open_snapshotter(snapshot_settings, **QUIET)
    again.close()
    assert stored_pages(snapshot_settings) == []


def test_index_down_never_blocks_pages_and_catches_up(
    snapshot_settings: SnapshotterSettings,
) -> None:
    snap, _, index = open_snapshotter(
        snapshot_settings, retry_base_seconds=0.05, max_age_seconds=0.1
    )
    with snap:
        errors = metric("snapshotter_index_publish_errors_total", snap.name)
        index.down.set()
        snap.publish("w", b"a")
        snap.publish("v", b"b")
        wait_for(lambda: len(stored_pages(snapshot_settings)) == 2, "pages while the index is down")
        wait_for(lambda: snap.index_health()["retry_queue_length"] == 2, "queued index entries")
        assert index.inner.count() == 0
        assert metric("snapshotter_index_publish_errors_total", snap.name) >= errors + 2
        index.down.clear()
        wait_for(lambda: index.inner.count() == 2, "the retry queue to drain")
        assert snap.index_health()["retry_queue_length"] == 0
        entries = index.inner.query("w")
        (page,) = pages_of(snapshot_settings, "w")
        assert entries[0].page_sequence == page.metadata.page_sequence
        assert entries[0].event_count == 1


def test_page_sequences_never_repeat_across_restarts(
    snapshot_settings: SnapshotterSettings,
) -> None:
    for _ in range(2):
        snap, _, _ = open_snapshotter(snapshot_settings, **QUIET)
        snap.publish("w", b"x")
        snap.close()
    # a wiped write-ahead log: the index still knows the last sequence
    for path in snapshot_settings.wal_path.iterdir():
        path.unlink()
    snap, _, _ = open_snapshotter(snapshot_settings, **QUIET)
    snap.publish("w", b"x")
    snap.close()
    assert [p.metadata.page_sequence for p in stored_pages(snapshot_settings)] == [0, 1, 2]


def test_log_segments_are_released_once_their_pages_are_stored(
    snapshot_settings: SnapshotterSettings,
) -> None:
    snap, _, _ = open_snapshotter(
        snapshot_settings, wal_segment_bytes=4096, max_events=10, max_age_seconds=3600.0
    )
    with snap:
        for i in range(200):
            snap.publish("w", b"%d" % i * 100)
        snap.flush()
        wait_for(lambda: snap.wal.segment_count <= 2, "old segments to be deleted")
        wait_for(
            lambda: len(list(snapshot_settings.wal_path.glob("*.wal"))) == snap.wal.segment_count,
            "the files of deleted segments to go",
        )
    assert sum(len(p.events) for p in stored_pages(snapshot_settings)) == 200


def test_a_log_in_use_is_refused(snapshot_settings: SnapshotterSettings) -> None:
    snap, _, _ = open_snapshotter(snapshot_settings)
    with snap, pytest.raises(WalError, match="in use by another process"):
        open_snapshotter(snapshot_settings)


def test_an_empty_writer_id_is_refused(snapshot_settings: SnapshotterSettings) -> None:
    snap, _, _ = open_snapshotter(snapshot_settings)
    with snap, pytest.raises(ValueError, match="writer id"):
        snap.publish("", b"x")


def test_a_bad_event_in_a_batch_changes_nothing(snapshot_settings: SnapshotterSettings) -> None:
    snap, _, _ = open_snapshotter(snapshot_settings, max_events=2, max_age_seconds=3600.0)
    with snap:
        snap.publish("a", b"first")
        bad_batches = {
            "event 1 of the batch: bad payload": [Publish("a", b"x"), Publish("a", "text")],  # type: ignore[arg-type]
            "timestamp must be Unix milliseconds": [Publish("a", b"x", None, None, -(10**15))],
            "event 0 of the batch: bad attributes": [Publish("a", b"x", {"n": 1})],  # type: ignore[dict-item]
            "writer id": [Publish("", b"x")],
        }
        for message, batch in bad_batches.items():
            with pytest.raises(ValueError, match=message):
                snap.publish_many(batch)
        assert snap.buffers_health()["total_buffered_events"] == 1
        assert stored_pages(snapshot_settings) == []
        snap.publish("a", b"second")  # the page of two is sealed and written as ever
        wait_for(lambda: stored_pages(snapshot_settings), "the page")
    assert [e.payload for p in stored_pages(snapshot_settings) for e in p.events] == [
        b"first",
        b"second",
    ]


def test_a_page_neither_stored_nor_dead_lettered_stays_in_the_log(
    snapshot_settings: SnapshotterSettings, tmp_path: Path
) -> None:
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("a file where the dead letters would go")
    snap, storage, _ = open_snapshotter(
        snapshot_settings,
        max_retries=0,
        wal_segment_bytes=300,  # segments rotate, so stored pages could release its events
        dead_letter_dir=blocked,
        max_events=2,
        max_age_seconds=3600.0,
    )
    storage.down.set()
    with snap:
        snap.publish_many([Publish("a", b"kept-1"), Publish("a", b"kept-2")])
        wait_for(lambda: storage.refused == 1, "the failed write")
        storage.down.clear()
        for i in range(10):  # later pages are stored and release what they can
            snap.publish_many([Publish("b", b"%d" % i), Publish("b", b"%d" % i)])
        snap.flush()
    assert [p.metadata.writer_id for p in stored_pages(snapshot_settings)].count("a") == 0
    again, _, _ = open_snapshotter(snapshot_settings)  # the next start writes it
    again.close()
    (page,) = [p for p in stored_pages(snapshot_settings) if p.metadata.writer_id == "a"]
    assert [e.payload for e in page.events] == [b"kept-1", b"kept-2"]


def test_close_does_not_try_every_queued_page_once_storage_is_down(
    snapshot_settings: SnapshotterSettings,
) -> None:
    snap, storage, _ = open_snapshotter(
        snapshot_settings, page_writers=1, max_retries=1000, retry_base_seconds=0.05, **QUIET
    )
    storage.down.set()
    snap.publish_many([Publish(f"w{i}", b"x") for i in range(20)])
    snap.close(timeout=0.2)
    tried_after_close = storage.refused
    assert tried_after_close < 20  # the queued pages were left to the log, not attempted
    again, _, _ = open_snapshotter(snapshot_settings, **QUIET)
    again.close()
    assert sorted(p.metadata.writer_id for p in stored_pages(snapshot_settings)) == sorted(
        f"w{i}" for i in range(20)
    )


def test_a_wiped_log_with_the_index_down_still_repeats_no_sequence(
    snapshot_settings: SnapshotterSettings,
) -> None:
    snap, _, _ = open_snapshotter(snapshot_settings, **QUIET)
    snap.publish("w", b"x")
    snap.close()
    for path in snapshot_settings.wal_path.iterdir():
        path.unlink()
    snap, _, index = open_snapshotter(snapshot_settings, **QUIET)
    index.down.set()
    snap.publish("w", b"y")
    index.down.clear()
    snap.close()
    sequences = [p.metadata.page_sequence for p in stored_pages(snapshot_settings)]
    assert sequences[0] == 0
    assert sequences[1] > 1_700_000_000_000  # numbered from the time: above any count
    assert len(index.inner.query("w")) == 2


def test_publishing_is_refused_while_too_many_pages_wait_for_storage(
    snapshot_settings: SnapshotterSettings,
) -> None:
    snap, storage, _ = open_snapshotter(
        snapshot_settings,
        max_events=1,
        max_pending_bytes=2500,
        max_retries=1000,
        retry_base_seconds=0.01,
        retry_max_seconds=0.02,
        max_age_seconds=3600.0,
    )
    storage.down.set()
    with snap:
        for i in range(3):  # three pages of ~1 KiB wait: over 2,500 bytes
            snap.publish("w", bytes([i]) * 1000)
        assert snap.buffers_health()["pending_bytes"] > 2500
        with pytest.raises(Backlogged, match=r"bytes of pages wait for storage \(filesystem\)"):
            snap.publish("w", b"refused")
        storage.down.clear()
        wait_for(lambda: snap.buffers_health()["pending_bytes"] == 0, "storage to catch up")
        snap.publish("w", b"accepted again")
    payloads = [e.payload for p in stored_pages(snapshot_settings) for e in p.events]
    assert b"refused" not in payloads
    assert payloads[-1] == b"accepted again"
    assert len(payloads) == 4
