"""Object data on the local filesystem, addressed by stream id, never by the user's key.

Layout under the data directory's `objects/`:
- `tmp/`: uploads in progress (a random name); a crash leaves them here for `ripple data gc`;
- `ab/cd/<stream id>`: committed data of the object version whose stream id it is;
- `parts/<upload stream id>/<part number>`: multipart upload parts until complete or abort.

Data is written to a temporary file, fsynced, then renamed into place before the metabase
commit that makes it visible; it is removed only after the metabase transaction that
deleted its version has committed. So a crash can leave a file no row names (an orphan,
which `gc` finds), never a row without its file. New data is committed within
`COMMIT_WINDOW_S` of its last write or not at all (`DataWriter.commit_by`), and `gc` looks
only at files older than twice that, so it never takes a file whose commit is to come
(`commit_within`). A copy reads a version's data from its row or its file (`write_range`).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, TypeVar

if TYPE_CHECKING:
    from ripple.gateway.checksums import Hasher
    from ripple.metabase import Metabase, Object

T = TypeVar("T")

# seconds from a file's last write by which its commit must be made (or refused)
COMMIT_WINDOW_S = 30.0
COPY_CHUNK = 1 << 20  # bytes of a version's data copied at a time


class DataWriter:
    """A file being uploaded: bytes in, size (and MD5, unless the caller computes it) out,
    then placed or dropped."""

    def __init__(self, path: Path, *, digest: bool = True) -> None:
        self.path = path
        self._file: BinaryIO | None = path.open("xb")
        self._md5 = hashlib.md5(usedforsecurity=False) if digest else None
        self.size = 0
        self.last_write = time.monotonic()

    def write(self, data: bytes) -> None:
        if self._file is None:
            raise ValueError("write after close")
        self._file.write(data)
        if self._md5 is not None:
            self._md5.update(data)
        self.size += len(data)
        self.last_write = time.monotonic()

    @property
    def md5(self) -> bytes:
        if self._md5 is None:
            raise RuntimeError("a writer made with digest=False has no MD5")
        return self._md5.digest()

    @property
    def commit_by(self) -> float:
        """When (`time.monotonic()`) the metabase commit naming this data must be made by."""
        return self.last_write + COMMIT_WINDOW_S

    def _close(self) -> None:
        if self._file is not None:
            self._file.flush()
            os.fsync(self._file.fileno())
            self._file.close()
            self._file = None

    def place(self, destination: Path) -> None:
        """fsync, then rename to `destination` (and fsync its directory: the new entry is
        durable; a directory made for it, and its own entry, too). An fsync slow enough to
        eat into the commit window (a large file on a network filesystem) restarts it, the
        file's mtime stamped anew by the filesystem's clock, which `gc` judges by."""
        started = time.monotonic()
        self._close()
        if time.monotonic() - started > 1.0:
            os.utime(self.path)
            self.last_write = time.monotonic()
        try:
            os.replace(self.path, destination)
        except FileNotFoundError:  # its directory is not there yet (mostly it is)
            _make_durable_dirs(destination.parent)
            os.replace(self.path, destination)
        _fsync_dir(destination.parent)

    def abort(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        self.path.unlink(missing_ok=True)


def commit_within(
    deadline: float | None, fn: Callable[..., T], db: Metabase, *args: object, **kwargs: object
) -> T:
    """`fn(db, …)`, a metabase write naming new data, committed by `deadline` (the data's
    `DataWriter.commit_by`; None: the data is not in a file) or refused: `CommitTooLate`."""
    if deadline is None:
        return fn(db, *args, **kwargs)
    with db.commit_deadline(deadline):
        return fn(db, *args, **kwargs)


def write_range(
    data: ObjectData,
    obj: Object,
    writer: DataWriter,
    start: int,
    length: int,
    checksum: Hasher | None = None,
) -> None:
    """Write `length` bytes of a version's data from `start` (through `checksum` too, if
    any); `FileNotFoundError` if its file is gone (the version was deleted since it was
    read)."""
    if obj.inline_data is not None:
        chunk = obj.inline_data[start : start + length]
        writer.write(chunk)
        if checksum is not None:
            checksum.update(chunk)
        return
    with data.open(obj.stream_id) as f:
        f.seek(start)
        while length > 0:
            chunk = f.read(min(COPY_CHUNK, length))
            if not chunk:
                raise RuntimeError(f"the data of stream {obj.stream_id} is shorter than its size")
            writer.write(chunk)
            if checksum is not None:
                checksum.update(chunk)
            length -= len(chunk)


def copy_file(
    data: ObjectData, obj: Object, stream_id: uuid.UUID, checksum: Hasher | None = None
) -> float:
    """Copy the whole data of a version stored as a file to `stream_id`'s path; when its
    commit must be made by (`DataWriter.commit_by`)."""
    writer = data.writer()
    try:
        write_range(data, obj, writer, 0, obj.total_plain_size, checksum)
        writer.place(data.path_of(stream_id))
    except BaseException:
        writer.abort()
        raise
    return writer.commit_by


def _make_durable_dirs(path: Path) -> None:
    """Make `path` and any missing parents, fsyncing the parent of each one made, so that
    a power loss keeps the entries of the directories a placed file is reached through."""
    missing: list[Path] = []
    while not path.is_dir():
        missing.append(path)
        path = path.parent
    for directory in reversed(missing):
        with contextlib.suppress(FileExistsError):  # another upload made it meanwhile
            directory.mkdir()
        _fsync_dir(directory.parent)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class ObjectData:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.tmp = root / "tmp"
        self.parts = root / "parts"
        self.tmp.mkdir(parents=True, exist_ok=True)
        self.parts.mkdir(parents=True, exist_ok=True)

    def writer(self, *, digest: bool = True) -> DataWriter:
        """A new upload; `digest=False` when the caller computes the MD5 itself."""
        return DataWriter(self.tmp / uuid.uuid4().hex, digest=digest)

    def path_of(self, stream_id: uuid.UUID) -> Path:
        name = stream_id.hex
        return Path(f"{self.root}/{name[:2]}/{name[2:4]}/{name}")  # one Path, not three joins

    def part_path(self, upload: uuid.UUID, part_number: int) -> Path:
        return self.parts / upload.hex / f"{part_number:05d}"

    def open(self, stream_id: uuid.UUID) -> BinaryIO:
        return self.path_of(stream_id).open("rb")

    def exists(self, stream_id: uuid.UUID) -> bool:
        return self.path_of(stream_id).is_file()

    def remove(self, stream_ids: Iterable[uuid.UUID]) -> None:
        """Drop the data of versions a committed transaction deleted."""
        for stream_id in stream_ids:
            self.path_of(stream_id).unlink(missing_ok=True)

    def remove_parts(self, upload: uuid.UUID) -> None:
        shutil.rmtree(self.parts / upload.hex, ignore_errors=True)

    def concatenate(self, sources: Iterable[Path], writer: DataWriter) -> None:
        for source in sources:
            with source.open("rb") as f:
                while chunk := f.read(1 << 20):
                    writer.write(chunk)

    # --- garbage collection -------------------------------------------------------------

    def stored(self) -> Iterator[tuple[uuid.UUID, Path]]:
        """Every committed data file, with the stream id its name says."""
        for first in self.root.iterdir():
            if len(first.name) != 2 or not first.is_dir():
                continue
            for second in first.iterdir():
                for path in second.iterdir():
                    with contextlib.suppress(ValueError):
                        yield uuid.UUID(hex=path.name), path

    def uploads(self) -> Iterator[tuple[uuid.UUID, Path]]:
        for path in self.parts.iterdir():
            with contextlib.suppress(ValueError):
                yield uuid.UUID(hex=path.name), path

    def clock(self) -> float:
        """The time by the clock that stamps this directory's files (a network
        filesystem's server, whatever the clock of this machine says): a new file's mtime."""
        probe = self.tmp / f"clock-{uuid.uuid4().hex}"
        try:
            probe.touch(exist_ok=False)
            return probe.stat().st_mtime
        finally:
            probe.unlink(missing_ok=True)

    def stale_temporaries(self, cutoff: float) -> Iterator[Path]:
        """Temporary files last written before `cutoff` (by `clock`)."""
        for path in list(self.tmp.iterdir()):
            with contextlib.suppress(FileNotFoundError):
                if path.stat().st_mtime < cutoff:
                    yield path
