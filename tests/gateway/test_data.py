"""Object data on the filesystem (`ripple.gateway.data`): what placing a file makes
durable before the commit that names it."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

import pytest

from ripple.gateway import data as data_module
from ripple.gateway.data import ObjectData


def test_placing_fsyncs_the_file_its_directory_and_every_directory_it_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[Path] = []
    real = data_module._fsync_dir
    monkeypatch.setattr(data_module, "_fsync_dir", lambda p: (synced.append(p), real(p)))
    data = ObjectData(tmp_path / "objects")
    first = data.path_of(uuid.UUID("abcd0000-0000-0000-0000-000000000001"))
    writer = data.writer()
    writer.write(b"one")
    writer.place(first)
    # the new entries of ab/ and ab/cd/ in their parents, then the file's in ab/cd/
    assert synced == [data.root, data.root / "ab", data.root / "ab" / "cd"]
    assert first.read_bytes() == b"one"

    synced.clear()
    second = data.path_of(uuid.UUID("abcd0000-0000-0000-0000-000000000002"))
    writer = data.writer()
    writer.write(b"two")
    writer.place(second)
    assert synced == [data.root / "ab" / "cd"]  # the directory was there: its entry only
    assert second.read_bytes() == b"two"


def test_a_slow_fsync_restarts_the_commit_window(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A large file's fsync on a network filesystem can take longer than the window: the
    window then starts after it, and the file's mtime (what gc judges) is stamped anew."""
    data = ObjectData(tmp_path / "objects")
    writer = data.writer()
    writer.write(b"x")
    an_hour_ago = time.time() - 3600
    os.utime(writer.path, (an_hour_ago, an_hour_ago))  # as if the last write was long ago
    ticks = iter([100.0, 102.0, 102.5])  # place starts, the fsync ends 2 s later, now
    monkeypatch.setattr(time, "monotonic", lambda: next(ticks))
    destination = data.path_of(uuid.uuid4())
    writer.place(destination)
    monkeypatch.undo()
    assert writer.commit_by == 102.5 + data_module.COMMIT_WINDOW_S
    assert destination.stat().st_mtime > an_hour_ago + 3000
