"""The storage backend protocol: the five operations of the RFC's `storage_object`.

Keys are relative paths (`a/b/c.pb.zst`). Every failure, whatever the backend, is a
`StorageError` whose message is one line naming the backend, the key and the cause; a key
that does not exist is `StorageError` with `missing=True`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Protocol

__all__ = ["Storage", "StorageError", "StoredObject"]


class StorageError(Exception):
    """A storage operation failed (`missing`: the key does not exist)."""

    def __init__(self, message: str, *, missing: bool = False) -> None:
        super().__init__(message)
        self.missing = missing


@dataclass(frozen=True)
class StoredObject:
    key: str
    size: int
    last_modified: float  # Unix seconds
    etag: str = ""
    content_type: str = ""
    metadata: Mapping[str, str] = field(default_factory=dict)


class Storage(Protocol):
    backend: str  # "filesystem", "s3": what health checks and metrics call it

    def put(
        self, key: str, data: bytes, content_type: str, metadata: Mapping[str, str]
    ) -> StoredObject:
        """Store `data` at `key`, replacing what is there, all or nothing: a reader never
        sees part of it. Returns what was stored."""
        ...

    def get(self, key: str) -> bytes: ...

    def head(self, key: str) -> StoredObject | None:
        """The object's description, or None if there is none."""
        ...

    def delete(self, key: str) -> None:
        """Remove the key; a key that is not there is fine."""
        ...

    def list(self, prefix: str = "") -> Iterator[StoredObject]:
        """Every object whose key starts with `prefix`, in key order."""
        ...

    def close(self) -> None: ...
