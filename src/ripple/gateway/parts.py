"""The parts of multipart uploads on the filesystem, until the upload completes or is
aborted: `objects/parts/<upload>/<part number>.<MD5 hex>`, or
`<part number>.<MD5 hex>.<checksum hex>` for an upload that declared a checksum algorithm
(the part's checksum in that algorithm).

A part's data, ETag and checksum arrive in one rename (`DataWriter.place`), so a crash
leaves either the whole part or none of it; size and LastModified are the file's. A part
uploaded again replaces the older file (of two racing uploads of one part, the newer file
stays). The completes of one upload queue on a lock file in its parts directory
(`lock_upload`).

An upload's UploadId is its stream id in hex (`upload_id_of`); its parts are numbered 1 to
`MAX_PART_NUMBER`.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from ripple.gateway.data import ObjectData
from ripple.gateway.errors import S3Error
from ripple.gateway.request import S3Request

LOCK_NAME = "complete.lock"
MAX_PART_NUMBER = 10_000  # S3's most parts in a multipart upload
_HEX = frozenset("0123456789abcdef")


@dataclass(frozen=True)
class Part:
    number: int
    etag: str
    size: int
    modified_ns: int
    path: Path
    checksum: bytes = b""  # in the algorithm the upload declared (none: b"")

    @property
    def rank(self) -> tuple[int, str]:
        """Of two files of one part number, the greater rank is the newer."""
        return self.modified_ns, self.path.name


def upload_id_of(req: S3Request) -> uuid.UUID:
    """The upload named by `uploadId`: exactly the 32 hex digits this gateway gave out (not
    the other spellings `uuid.UUID` would take for the same upload)."""
    upload = parse_upload_id(req.query.get("uploadId", ""))
    if upload is None:
        raise S3Error("NoSuchUpload", "the specified multipart upload does not exist")
    return upload


def parse_upload_id(text: str) -> uuid.UUID | None:
    if len(text) != 32 or not _HEX.issuperset(text):
        return None
    return uuid.UUID(hex=text)


def part_file(
    data: ObjectData, upload: uuid.UUID, number: int, etag: str, checksum: bytes = b""
) -> Path:
    path = data.part_path(upload, number)
    name = f"{path.name}.{etag}" + (f".{checksum.hex()}" if checksum else "")
    return path.with_name(name)


def stored_parts(data: ObjectData, upload: uuid.UUID) -> dict[int, Part]:
    """The parts of an upload by number; of several files of one number, the newest."""
    found: dict[int, Part] = {}
    try:
        entries = list(os.scandir(data.part_path(upload, 1).parent))
    except FileNotFoundError:
        return found
    for entry in entries:
        number, dot, rest = entry.name.partition(".")
        etag, _, checksum = rest.partition(".")
        if not dot or not number.isdigit() or len(etag) != 32 or not _is_hex(checksum):
            continue  # the lock file, or a stray
        try:
            stat = entry.stat()
        except FileNotFoundError:
            continue  # replaced meanwhile
        part = Part(
            int(number),
            etag,
            stat.st_size,
            stat.st_mtime_ns,
            Path(entry.path),
            bytes.fromhex(checksum),
        )
        current = found.get(part.number)
        if current is None or part.rank > current.rank:
            found[part.number] = part
    return found


def _is_hex(text: str) -> bool:
    return len(text) % 2 == 0 and all(c in "0123456789abcdef" for c in text)


def drop_older(path: Path) -> None:
    """Remove the files of the same part number older than the one just placed."""
    number = path.name.partition(".")[0]
    mine = (path.stat().st_mtime_ns, path.name)
    for entry in os.scandir(path.parent):
        if entry.name.startswith(number + ".") and entry.name != path.name:
            with contextlib.suppress(FileNotFoundError):
                if (entry.stat().st_mtime_ns, entry.name) < mine:
                    os.unlink(entry.path)


def multipart_etag(parts: list[Part]) -> str:
    """S3's ETag of a multipart object: the MD5 of the parts' binary MD5s, `-` part count."""
    digest = hashlib.md5(b"".join(bytes.fromhex(p.etag) for p in parts), usedforsecurity=False)
    return f"{digest.hexdigest()}-{len(parts)}"


def lock_upload(data: ObjectData, upload: uuid.UUID) -> IO[bytes] | None:
    """Hold the upload's complete lock (waiting for another complete); None when it has no
    parts directory (no part was uploaded, or it was completed or aborted)."""
    try:
        file = (data.part_path(upload, 1).parent / LOCK_NAME).open("ab")
    except FileNotFoundError:
        return None
    fcntl.flock(file.fileno(), fcntl.LOCK_EX)
    return file
