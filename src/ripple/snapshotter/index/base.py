"""The index backend protocol and its entry: one page's metadata and where it is.

An entry is published after its page is in storage. Queries answer a writer's pages that
overlap a time range, ordered by (start_time, page_sequence). `replace` swaps pages for the
page compaction merged them into, atomically for readers: a query sees the old entries or
the new one, never both and never neither. Every failure is `IndexError_` with one line
naming the backend and the cause.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol

import orjson

from ripple.snapshotter.proto import PageMetadata

__all__ = ["Index", "IndexEntry", "IndexError_"]


class IndexError_(Exception):  # the trailing _ : IndexError is a builtin
    """An index operation failed."""


@dataclass(frozen=True)
class IndexEntry:
    page_key: str
    writer_id: str
    page_sequence: int
    start_time: int  # Unix milliseconds of the first event
    end_time: int  # … and of the last
    event_count: int
    page_size_bytes: int  # uncompressed
    storage_size_bytes: int  # as stored
    format: str  # "protobuf" or "ndjson"
    compression: str  # "none", "gzip" or "zstd"

    @classmethod
    def of(cls, key: str, meta: PageMetadata, page_format: str, stored_size: int) -> IndexEntry:
        return cls(
            page_key=key,
            writer_id=meta.writer_id,
            page_sequence=meta.page_sequence,
            start_time=meta.start_time,
            end_time=meta.end_time,
            event_count=meta.event_count,
            page_size_bytes=meta.page_size_bytes,
            storage_size_bytes=stored_size,
            format=page_format,
            compression=meta.compression,
        )

    def to_json(self) -> bytes:
        return orjson.dumps(asdict(self))

    @classmethod
    def from_json(cls, data: bytes | str) -> IndexEntry:
        value: dict[str, Any] = orjson.loads(data)
        return cls(**value)

    def overlaps(self, since: int | None, until: int | None) -> bool:
        """Whether the page may hold events in [since, until] (milliseconds, inclusive)."""
        return (since is None or self.end_time >= since) and (
            until is None or self.start_time <= until
        )


class Index(Protocol):
    backend: str  # "sqlite", "redis", "postgresql"

    def publish(self, entry: IndexEntry) -> None:
        """Add (or replace: same writer and page_sequence) one entry."""
        ...

    def query(
        self, writer_id: str, since: int | None = None, until: int | None = None
    ) -> list[IndexEntry]:
        """The writer's pages overlapping [since, until], by (start_time, page_sequence)."""
        ...

    def writers(self) -> list[str]:
        """Every writer with at least one entry, sorted."""
        ...

    def keys(self) -> set[str]:
        """The page key of every entry (what reconcile compares storage with)."""
        ...

    def last_sequence(self, writer_id: str) -> int:
        """The writer's highest page sequence, -1 if it has none."""
        ...

    def replace(self, old: Sequence[IndexEntry], new: IndexEntry) -> None:
        """Remove `old` and add `new` in one step (see the module docstring)."""
        ...

    def count(self) -> int: ...

    def close(self) -> None: ...
