"""SIGKILL after acknowledgement, then a restart: every acknowledged event is in a page.

A child process publishes events to a snapshotter whose storage refuses every write (so
nothing can reach a page before the kill), prints how many were acknowledged, and is
killed with SIGKILL. The parent reopens the same directories: the write-ahead log is
replayed into pages with the sequences the child gave them.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from ripple.snapshotter.compact import compact
from ripple.snapshotter.index.sqlite import SqliteIndex
from ripple.snapshotter.replay import replay
from ripple.snapshotter.service import Publish
from ripple.snapshotter.settings import SnapshotterSettings
from ripple.snapshotter.storage.filesystem import FilesystemStorage
from tests.snapshotter.service_helpers import open_snapshotter, stored_pages

ROOT = Path(__file__).resolve().parents[2]

CHILD = textwrap.dedent(
    """
    import sys, threading
    from pathlib import Path
    from ripple.snapshotter.service import Publish
    from ripple.snapshotter.settings import SnapshotterSettings
    from tests.snapshotter.service_helpers import open_snapshotter

    settings = SnapshotterSettings.embedded(Path(sys.argv[1]), wal_segment_bytes=2_000)
    snap, storage, _ = open_snapshotter(settings, max_events=40, max_age_seconds=3600.0)
    storage.down.set()  # no page reaches storage: only the log can keep the events
    for i in range(0, 300, 30):
        batch = [Publish(f"w{j % 3}", b"event-%d" % j) for j in range(i, i + 30)]
        snap.publish_many(batch)
        print(i + 30, flush=True)
    print("acknowledged", flush=True)
    threading.Event().wait()
    """
)


def test_sigkill_after_acknowledgement_loses_nothing(tmp_path: Path) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(tmp_path)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert child.stdout is not None
        lines = []
        for line in child.stdout:
            lines.append(line.strip())
            if line.strip() == "acknowledged":
                break
        assert lines[-1] == "acknowledged", lines
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(30)
    assert child.returncode == -signal.SIGKILL

    settings = SnapshotterSettings.embedded(tmp_path)
    assert stored_pages(settings) == []  # the child never stored anything
    segments = sorted(settings.wal_path.glob("*.wal"))
    assert len(segments) > 1  # the log rotated while storage was down, and kept every segment
    snap, _, index = open_snapshotter(settings, max_events=40, max_age_seconds=3600.0)
    snap.flush()
    after = snap.publish("w0", b"after the restart")
    snap.close()

    pages = stored_pages(settings)
    payloads = [e.payload for p in pages for e in p.events]
    expected = {b"event-%d" % j for j in range(300)} | {b"after the restart"}
    assert sorted(payloads) == sorted(expected)  # each exactly once
    for writer in ("w0", "w1", "w2"):
        mine = [p for p in pages if p.metadata.writer_id == writer]
        numbers = [
            int(e.payload.split(b"-")[1])
            for p in mine
            for e in p.events
            if e.payload.startswith(b"event-")
        ]
        assert numbers == sorted(numbers)  # publish order kept across the restart
        sequences = [p.metadata.page_sequence for p in mine]
        assert len(set(sequences)) == len(sequences)
    # the page opened after the restart takes a sequence the child never used
    child_pages = [
        p.metadata.page_sequence
        for p in pages
        if p.metadata.writer_id == "w0" and p.events[0].payload.startswith(b"event-")
    ]
    assert int(after.message_id.split("-")[0]) > max(child_pages)
    assert index.inner.count() == len(pages)


def test_a_recovered_page_already_stored_or_compacted_is_not_archived_twice(
    tmp_path: Path,
) -> None:
    """The crash came after pages were stored and indexed but before their done records
    were on disk; meanwhile (the server down) compaction merged them. The restart must
    neither write them again nor list their events twice."""
    settings = SnapshotterSettings.embedded(
        tmp_path, retry_base_seconds=0.01, retry_max_seconds=0.02, max_retries=1000
    )
    snap, storage, _ = open_snapshotter(settings, max_events=2, max_age_seconds=3600.0)
    storage.down.set()  # the events reach the log and pages, but not storage, yet
    snap.publish_many([Publish("w", b"event-%d" % i, None, None, 1000 + i) for i in range(6)])
    snap.publish("v", b"lonely", timestamp=5000)
    wal_backup = tmp_path / "wal-before-done"
    shutil.copytree(settings.wal_path, wal_backup, ignore=shutil.ignore_patterns("LOCK"))
    storage.down.clear()
    snap.close()  # stores and indexes the 4 pages, then records them done
    for path in settings.wal_path.glob("*.wal"):  # … but the crash lost the done records
        path.unlink()
    for path in wal_backup.iterdir():
        shutil.copy(path, settings.wal_path / path.name)

    index = SqliteIndex(settings.index_location)
    fs = FilesystemStorage(settings.pages_path)
    report = compact(settings, fs, index, "w", below_bytes=1 << 20)
    assert report.pages_merged == 3
    index.close()

    again, again_storage, again_index = open_snapshotter(settings, max_age_seconds=3600.0)
    again.close()
    assert again_storage.refused == 0
    payloads = [e.payload for p in stored_pages(settings) for e in p.events]
    assert sorted(payloads) == sorted([b"event-%d" % i for i in range(6)] + [b"lonely"])
    replayed = [e.payload for e in replay(again_index.inner, fs, "w")]
    assert replayed == [b"event-%d" % i for i in range(6)]
