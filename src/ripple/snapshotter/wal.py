"""The write-ahead log: an event is acknowledged only once it is here, fsynced.

The log is a directory of segments (`00000001.wal`, …), each a run of frames
`<u32 length><u32 crc32><WalBatch>`: one frame per append, so an append is recovered whole
or not at all. Appends from every publisher are gathered and written with one `fsync` per
group by a single flusher thread (group commit): a publisher waits for the fsync that
covers its append, and meanwhile the next group gathers.

Records say three things: an event of page (writer, page sequence); that a page is done (in
storage or in the dead letters); and, first in every segment, a checkpoint of each writer's
next page sequence, so sequences never repeat although old segments are deleted. A segment
is deleted once every page with an event in it is done (`release`).

After a crash, `recover` reads the segments back: the events of every page not done, by
page, in order, and the next page sequence of every writer. A torn frame at the end of the
newest segment (a write the crash cut) is cut off; nothing before it was acknowledged.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import struct
import threading
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ripple.snapshotter.pages import frame, varint
from ripple.snapshotter.proto import WalBatch, WalRecord

__all__ = [
    "Recovered",
    "WalError",
    "WriteAheadLog",
    "batch_entry",
    "done_record",
    "record_prefix",
]

log = logging.getLogger(__name__)

_FRAME = struct.Struct("<II")
_SUFFIX = ".wal"


class WalError(Exception):
    """The log cannot be written (disk full, I/O error) or is in use by another process."""


@dataclass
class Recovered:
    """What a log held that was not done: `pages[(writer, page sequence)]` = its events in
    order, framed as in a page (`ripple.snapshotter.pages.frame`);
    `next_page_sequence[writer]` = the lowest sequence never used."""

    pages: dict[tuple[str, int], list[bytes]] = field(default_factory=dict)
    next_page_sequence: dict[str, int] = field(default_factory=dict)
    torn_bytes: int = 0  # cut off the end of the newest segment


def record_prefix(writer_id: str, page_sequence: int) -> bytes:
    """The fields of a page's event records before the event: writer id, page sequence."""
    writer = writer_id.encode()
    return b"\x0a" + varint(len(writer)) + writer + b"\x18" + varint(page_sequence)


def batch_entry(record: bytes) -> bytes:
    """One `WalRecord` as an element of a `WalBatch` (what `append` takes a list of)."""
    return b"\x0a" + varint(len(record)) + record


def done_record(writer_id: str, page_sequence: int) -> bytes:
    record = WalRecord(writer_id=writer_id, page_sequence=page_sequence, page_done=True)
    return batch_entry(record.SerializeToString())


def _frame(batch: bytes) -> bytes:
    return _FRAME.pack(len(batch), zlib.crc32(batch)) + batch


class WriteAheadLog:
    """One snapshotter's log. `checkpoint` answers the writers' next page sequences, written
    first into each new segment. Use: `recover()`, then `start()`, `append`/`wait`, `close()`."""

    def __init__(
        self,
        directory: Path,
        segment_bytes: int,
        checkpoint: Callable[[], dict[str, int]],
        on_fsync: Callable[[], None] = lambda: None,
    ) -> None:
        self.directory = directory
        self.segment_bytes = segment_bytes
        self._checkpoint = checkpoint
        self._on_fsync = on_fsync
        try:
            directory.mkdir(parents=True, exist_ok=True)
            self._lock = (directory / "LOCK").open("a+b")
        except OSError as e:
            raise WalError(f"write-ahead log {directory}: {e.strerror or e}") from None
        try:
            fcntl.flock(self._lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self._lock.close()
            raise WalError(
                f"write-ahead log {directory} is in use by another process; "
                "give each snapshotter its own wal-dir"
            ) from None
        self._cond = threading.Condition()
        self._pending: list[bytes] = []
        self._appended = 0  # tickets: appends so far (what recovery read counts as 0)
        self._synced = 0
        self._closing = False
        self._error: str | None = None
        self._segments: list[list[int]] = []  # [number, last ticket], oldest first
        self._releases: list[tuple[int, int]] = []  # (once synced, low water) to apply
        self._fd = -1
        self._size = 0
        self._thread: threading.Thread | None = None

    # -- recovery -----------------------------------------------------------------------

    def _segment_files(self) -> list[tuple[int, Path]]:
        found = []
        for path in self.directory.glob(f"*{_SUFFIX}"):
            with contextlib.suppress(ValueError):
                found.append((int(path.stem), path))
        return sorted(found)

    def recover(self) -> Recovered:
        """Read every segment back (see the module docstring)."""
        recovered = Recovered()
        done: set[tuple[str, int]] = set()
        files = self._segment_files()
        for position, (number, path) in enumerate(files):
            data = path.read_bytes()
            offset = 0
            while offset < len(data):
                if offset + _FRAME.size > len(data):
                    break
                length, crc = _FRAME.unpack_from(data, offset)
                body = data[offset + _FRAME.size : offset + _FRAME.size + length]
                if len(body) != length or zlib.crc32(body) != crc:
                    break
                offset += _FRAME.size + length
                for record in WalBatch.FromString(body).records:
                    self._apply(record, recovered, done)
            if offset < len(data):
                if position == len(files) - 1:
                    recovered.torn_bytes = len(data) - offset
                    with path.open("r+b") as f:
                        f.truncate(offset)
                        os.fsync(f.fileno())
                    log.warning(
                        "write-ahead log %s: cut a torn tail of %d bytes", path, len(data) - offset
                    )
                else:
                    log.error(
                        "write-ahead log %s: a corrupt frame at byte %d; the rest of it is skipped",
                        path,
                        offset,
                    )
            self._segments.append([number, 0])
        for key in done:
            recovered.pages.pop(key, None)
        return recovered

    @staticmethod
    def _apply(record: WalRecord, recovered: Recovered, done: set[tuple[str, int]]) -> None:
        nexts = recovered.next_page_sequence
        for writer, sequence in record.next_page_sequence.items():
            nexts[writer] = max(nexts.get(writer, 0), sequence)
        if not record.writer_id:
            return
        key = (record.writer_id, record.page_sequence)
        nexts[record.writer_id] = max(nexts.get(record.writer_id, 0), record.page_sequence + 1)
        if record.page_done:
            done.add(key)
        elif record.HasField("event"):
            recovered.pages.setdefault(key, []).append(frame(record.event.SerializeToString()))

    # -- writing ------------------------------------------------------------------------

    def start(self) -> None:
        """Open a new segment and start the flusher."""
        self._rotate()
        self._thread = threading.Thread(target=self._flusher, name="snapshotter-wal", daemon=True)
        self._thread.start()

    def _rotate(self) -> None:
        number = (self._segments[-1][0] + 1) if self._segments else 1
        path = self.directory / f"{number:08d}{_SUFFIX}"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        record = WalRecord(next_page_sequence=self._checkpoint()).SerializeToString()
        checkpoint = _frame(batch_entry(record))
        _write_all(fd, checkpoint)
        os.fsync(fd)
        _fsync_dir(self.directory)
        old = self._fd
        self._fd, self._size = fd, len(checkpoint)
        with self._cond:
            self._segments.append([number, self._synced])
        if old >= 0:
            os.close(old)

    def append(self, entries: list[bytes]) -> int:
        """Queue records for the next group, as one frame; the ticket to `wait` for.
        `entries` are `batch_entry`s, or the parts of them in order (not copied here: the
        frame is written from them as they are)."""
        length, crc = 0, 0
        for part in entries:
            length += len(part)
            crc = zlib.crc32(part, crc)
        framed = [_FRAME.pack(length, crc), *entries]
        with self._cond:
            if self._error is not None:
                raise WalError(self._error)
            if self._closing:
                raise WalError(f"write-ahead log {self.directory} is closed")
            self._pending.extend(framed)
            self._appended += 1
            self._cond.notify_all()
            return self._appended

    def wait(self, ticket: int) -> None:
        """Block until every record up to `ticket` is fsynced (`WalError` if it never will be)."""
        with self._cond:
            while self._synced < ticket:
                if self._error is not None:
                    raise WalError(self._error)
                self._cond.wait()

    @property
    def appended(self) -> int:
        return self._appended

    def _flusher(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._closing:
                    self._cond.wait()
                if not self._pending:
                    return
                batch, self._pending = self._pending, []
                upto = self._appended
            try:
                self._size += _write_parts(self._fd, batch)
                os.fsync(self._fd)
                self._on_fsync()
                with self._cond:
                    self._synced = upto
                    self._segments[-1][1] = upto
                    self._cond.notify_all()
                    due = [r for r in self._releases if r[0] <= upto]
                    if due:
                        self._releases = [r for r in self._releases if r[0] > upto]
                        self._release(max(low for _, low in due))
                if self._size >= self.segment_bytes:
                    self._rotate()
            except OSError as e:
                message = f"write-ahead log {self.directory}: {e.strerror or e}"
                log.error("%s; publishing stops", message)
                with self._cond:
                    self._error = message
                    self._cond.notify_all()
                return

    def release(self, low_water: int, once_synced: int = 0) -> None:
        """Delete the segments (not the newest) whose every record's ticket is below
        `low_water`, the oldest ticket of any page not done, as soon as everything up to
        ticket `once_synced` is fsynced: the done records that made them free must be on
        disk before the events they cover go. Never waits."""
        with self._cond:
            if self._synced >= once_synced:
                self._release(low_water)
            else:
                self._releases.append((once_synced, low_water))

    def _release(self, low_water: int) -> None:
        """`release` now (the condition's lock is held)."""
        doomed = [s for s in self._segments[:-1] if s[1] < low_water]
        if not doomed:
            return
        self._segments = [s for s in self._segments if s not in doomed]
        for number, _ in doomed:
            with contextlib.suppress(FileNotFoundError):
                (self.directory / f"{number:08d}{_SUFFIX}").unlink()

    @property
    def segment_count(self) -> int:
        return len(self._segments)

    def close(self) -> None:
        """Write what is queued, stop the flusher, release the directory."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        self._lock.close()


_IOV_MAX = min(os.sysconf("SC_IOV_MAX"), 1024)


def _write_parts(fd: int, parts: list[bytes]) -> int:
    """Write the parts in order without joining them (writev); the bytes written."""
    total = 0
    for start in range(0, len(parts), _IOV_MAX):
        chunk = parts[start : start + _IOV_MAX]
        size = sum(map(len, chunk))
        written = os.writev(fd, chunk)
        if written < size:  # a short write: finish the rest the plain way
            _write_all(fd, b"".join(chunk)[written:])
        total += size
    return total


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
