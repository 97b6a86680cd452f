"""The write-ahead log on its own: what recovery reads back, a torn tail, and segments that
go only once the done records that free them are on disk."""

from __future__ import annotations

import threading
from pathlib import Path

from ripple.snapshotter.pages import frame, unframe
from ripple.snapshotter.proto import Event
from ripple.snapshotter.wal import WriteAheadLog, batch_entry, done_record, record_prefix
from tests.waiting import wait_for


def event_entry(writer: str, page: int, payload: bytes) -> bytes:
    framed = frame(Event(payload=payload, timestamp=1).SerializeToString())
    return batch_entry(record_prefix(writer, page) + framed)


def segments(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.glob("*.wal"))


def test_recovery_returns_the_pages_not_done_and_the_next_sequences(tmp_path: Path) -> None:
    wal = WriteAheadLog(tmp_path, 1 << 20, dict)
    wal.recover()
    wal.start()
    wal.wait(wal.append([event_entry("a", 0, b"a0"), event_entry("b", 4, b"b4")]))
    wal.wait(wal.append([event_entry("a", 1, b"a1"), done_record("a", 0)]))
    wal.close()

    recovered = WriteAheadLog(tmp_path, 1 << 20, dict).recover()
    pages = {
        k: [Event.FromString(unframe(e)).payload for e in v] for k, v in recovered.pages.items()
    }
    assert pages == {("b", 4): [b"b4"], ("a", 1): [b"a1"]}
    assert recovered.next_page_sequence == {"a": 2, "b": 5}
    assert recovered.torn_bytes == 0


def test_a_torn_tail_is_cut_and_what_came_before_is_kept(tmp_path: Path) -> None:
    wal = WriteAheadLog(tmp_path, 1 << 20, dict)
    wal.recover()
    wal.start()
    wal.wait(wal.append([event_entry("a", 0, b"kept")]))
    wal.close()
    (newest,) = tmp_path.glob("*.wal")
    whole = newest.stat().st_size
    with newest.open("ab") as f:
        f.write(b"\x40\x00\x00\x00garbage")  # a frame header promising 64 bytes, cut short

    recovered = WriteAheadLog(tmp_path, 1 << 20, dict).recover()
    assert recovered.torn_bytes == 11
    assert newest.stat().st_size == whole
    assert [Event.FromString(unframe(e)).payload for e in recovered.pages[("a", 0)]] == [b"kept"]


def test_segments_go_only_once_the_done_record_freeing_them_is_fsynced(tmp_path: Path) -> None:
    gate = threading.Event()
    gate.set()
    wal = WriteAheadLog(tmp_path, 200, dict, on_fsync=gate.wait)  # rotates after each append
    wal.recover()
    wal.start()
    for i in range(3):
        wal.wait(wal.append([event_entry("a", 0, b"x" * 300 + b"%d" % i)]))
    wait_for(lambda: len(segments(tmp_path)) == 4, "four segments")
    before = segments(tmp_path)

    gate.clear()  # the flusher now stops after its next fsync, before it counts as synced
    done = wal.append([done_record("a", 0)])
    wal.release(wal.appended + 1, once_synced=done)
    assert segments(tmp_path) == before  # not yet: the done record is not known on disk

    gate.set()
    wal.wait(done)
    wait_for(lambda: len(segments(tmp_path)) == 1, "the freed segments to go")
    assert segments(tmp_path) == before[-1:]
    wal.close()
