"""Pages as files under a root directory: the embedded default storage (backend "filesystem").

A key is a relative path with "/" separators (`writer/2024-05-01/1714521600000_7.pb.zst`);
absolute keys, empty segments, "." and "..", segments starting with `.tmp-` (the names of
temporary files) and keys that would leave the root through a symbolic link are refused.

`put` is all or nothing: the data goes to a temporary file `.tmp-…` in the target directory,
which is fsynced and renamed over the key, then the directory is fsynced; a reader sees the
old content or the new, never part of either. A crash may leave a `.tmp-…` file behind;
listings skip them. `delete` removes directories it leaves empty, up to the root.

No sidecar files are written, so what a page was stored with is not all kept: `head` and
`list` infer the content type from the key's extensions (`.pb…` is
`application/x-protobuf`, `.ndjson…` is `application/x-ndjson`, anything else
`application/octet-stream`), return empty metadata, and an empty etag (`put` returns the
hex MD5 of what it wrote, as S3 does for a single-part upload).
"""

from __future__ import annotations

import builtins
import hashlib
import os
import secrets
import stat
from collections.abc import Iterator, Mapping
from contextlib import suppress
from pathlib import Path

from ripple.snapshotter.storage.base import StorageError, StoredObject

__all__ = ["TEMP_PREFIX", "FilesystemStorage", "content_type_of"]

TEMP_PREFIX = ".tmp-"
_MISSING = (FileNotFoundError, NotADirectoryError, IsADirectoryError)


def content_type_of(key: str) -> str:
    """The content type of a page, from the extensions of its key's last segment."""
    extensions = key.rsplit("/", 1)[-1].split(".")[1:]
    if "pb" in extensions:
        return "application/x-protobuf"
    if "ndjson" in extensions:
        return "application/x-ndjson"
    return "application/octet-stream"


def _show(text: str) -> str:
    """`text` as it can appear on one line of a message."""
    return text if text and text.isprintable() else repr(text)


def _cause(error: OSError) -> str:
    cause = error.strerror or str(error) or type(error).__name__
    if error.filename is not None:
        cause = f"{cause}: {_show(os.fsdecode(error.filename))}"
    return " ".join(cause.split())


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class FilesystemStorage:
    """Pages as files under `root`, which is created when the first page is written."""

    backend = "filesystem"

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def __repr__(self) -> str:
        return f"FilesystemStorage({str(self.root)!r})"

    # -- the Storage protocol -------------------------------------------------------------

    def put(
        self, key: str, data: bytes, content_type: str, metadata: Mapping[str, str]
    ) -> StoredObject:
        path = self._path("put", key)
        try:
            temp, created = self._write_temporary(path.parent, data)
            try:
                os.replace(temp, path)
            except BaseException:
                temp.unlink(missing_ok=True)
                raise
            _fsync_directory(path.parent)
            for directory in created:
                _fsync_directory(directory.parent)
            modified = path.stat().st_mtime
        except OSError as e:
            raise self._error("put", key, e) from e
        return StoredObject(
            key=key,
            size=len(data),
            last_modified=modified,
            etag=hashlib.md5(data, usedforsecurity=False).hexdigest(),
            content_type=content_type,
            metadata=dict(metadata),
        )

    def get(self, key: str) -> bytes:
        path = self._path("get", key)
        try:
            return path.read_bytes()
        except _MISSING as e:
            raise self._error("get", key, e, missing=True) from e
        except OSError as e:
            raise self._error("get", key, e) from e

    def head(self, key: str) -> StoredObject | None:
        path = self._path("head", key)
        try:
            info = path.stat()
        except _MISSING:
            return None
        except OSError as e:
            raise self._error("head", key, e) from e
        if not stat.S_ISREG(info.st_mode):  # a directory is not a page
            return None
        return self._described(key, info)

    def delete(self, key: str) -> None:
        path = self._path("delete", key)
        try:
            try:
                path.unlink()
            except _MISSING:
                return
            directory = path.parent
            while directory != self.root and self.root in directory.parents:
                try:
                    directory.rmdir()
                except OSError:  # not empty (or gone, or not ours to remove): stop there
                    break
                directory = directory.parent
            with suppress(FileNotFoundError):  # removed by a delete of its last other page
                _fsync_directory(directory)
        except OSError as e:
            raise self._error("delete", key, e) from e

    def list(self, prefix: str = "") -> Iterator[StoredObject]:
        """Every page whose key starts with `prefix`, in key order (that of the keys as
        strings, so `a-b` comes before `a/b`); temporary files and symbolic links are
        skipped."""
        head, _, _ = prefix.rpartition("/")
        start = self._path("list", head, allow_root=True) if head else self.root
        top = f"{head}/" if head else ""
        try:
            yield from self._walk(start, top, prefix)
        except OSError as e:
            raise self._error("list", prefix, e) from e

    def close(self) -> None:
        """Nothing to release: every operation opens and closes its own files."""

    # -- helpers --------------------------------------------------------------------------

    def _walk(self, directory: Path, top: str, prefix: str) -> Iterator[StoredObject]:
        """The files under `directory`, whose keys start with `top`, that match `prefix`."""
        try:
            with os.scandir(directory) as scan:
                entries = list(scan)
        except (FileNotFoundError, NotADirectoryError):  # no pages yet, or removed meanwhile
            return
        named: builtins.list[tuple[str, os.DirEntry[str], bool]] = []
        for entry in entries:
            if entry.name.startswith(TEMP_PREFIX) or entry.is_symlink():
                continue
            is_dir = entry.is_dir(follow_symlinks=False)
            if not is_dir and not entry.is_file(follow_symlinks=False):
                continue
            # A directory sorts as its name and "/", as its keys do among the others.
            named.append((f"{top}{entry.name}/" if is_dir else f"{top}{entry.name}", entry, is_dir))
        named.sort(key=lambda item: item[0])
        for key, entry, is_dir in named:
            if is_dir:
                if key.startswith(prefix) or prefix.startswith(key):
                    yield from self._walk(Path(entry.path), key, prefix)
            elif key.startswith(prefix):
                try:
                    info = entry.stat(follow_symlinks=False)
                except FileNotFoundError:  # deleted since the directory was read
                    continue
                yield self._described(key, info)

    def _described(self, key: str, info: os.stat_result) -> StoredObject:
        return StoredObject(
            key=key,
            size=info.st_size,
            last_modified=info.st_mtime,
            content_type=content_type_of(key),
        )

    def _path(self, op: str, key: str, *, allow_root: bool = False) -> Path:
        """The file of `key`, or `StorageError` if the key is not a path inside the root."""
        problem = ""
        segments = key.split("/")
        if not key:
            problem = "a key must not be empty"
        elif key.startswith("/"):
            problem = "a key must be a relative path, not an absolute one"
        elif "\0" in key:
            problem = "a key must not contain a NUL character"
        elif "" in segments:
            problem = "a key must not have empty segments ('//' or a '/' at either end)"
        elif "." in segments or ".." in segments:
            problem = "a key must not have '.' or '..' segments"
        elif any(segment.startswith(TEMP_PREFIX) for segment in segments):
            problem = f"a key's segments must not start with {TEMP_PREFIX!r} (temporary files)"
        if problem:
            raise StorageError(f"filesystem storage {self.root}: {op} {_show(key)}: {problem}")
        path = self.root.joinpath(*segments)
        try:
            real_root = self.root.resolve()
            real = path.resolve()
        except (OSError, RuntimeError) as e:  # RuntimeError: a symbolic link loop
            cause = _cause(e) if isinstance(e, OSError) else str(e)
            raise StorageError(f"filesystem storage {self.root}: {op} {_show(key)}: {cause}") from e
        if (real == real_root and not allow_root) or not real.is_relative_to(real_root):
            raise StorageError(
                f"filesystem storage {self.root}: {op} {_show(key)}: "
                f"the key leads out of the root (to {real})"
            )
        return path

    def _open_temporary(self, directory: Path) -> tuple[int, Path, builtins.list[Path]]:
        """A new temporary file in `directory`, made with its missing parents: its open
        descriptor, its path and the directories created."""
        attempts = 5
        for attempt in range(attempts):
            created: builtins.list[Path] = []
            missing = directory
            while not missing.exists() and missing != missing.parent:
                created.append(missing)
                missing = missing.parent
            temp = directory / f"{TEMP_PREFIX}{secrets.token_hex(8)}"
            try:
                directory.mkdir(parents=True, exist_ok=True)
                fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
            except (FileNotFoundError, FileExistsError):
                # A delete removed a directory as it became empty, while this made it or
                # before the file was in it: make it again. (If a file is in the way, the
                # last attempt fails like the first.)
                if attempt == attempts - 1:
                    raise
                continue
            return fd, temp, created
        raise AssertionError("unreachable")

    def _write_temporary(self, directory: Path, data: bytes) -> tuple[Path, builtins.list[Path]]:
        """`data` in a new, fsynced temporary file in `directory`; its path and the
        directories created for it."""
        fd, temp, created = self._open_temporary(directory)
        try:
            with os.fdopen(fd, "wb") as file:
                file.write(data)
                file.flush()
                os.fsync(file.fileno())
        except BaseException:
            temp.unlink(missing_ok=True)
            raise
        return temp, created

    def _error(self, op: str, key: str, error: OSError, *, missing: bool = False) -> StorageError:
        return StorageError(
            f"filesystem storage {self.root}: {op} {_show(key)}: {_cause(error)}", missing=missing
        )
