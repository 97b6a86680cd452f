"""What the snapshotter's service tests share: a snapshotter over real filesystem storage
and a real SQLite index, storage and index that fail on demand, and reading pages back."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from dataclasses import replace
from typing import Any

from ripple.snapshotter.index import IndexEntry, IndexError_
from ripple.snapshotter.index.sqlite import SqliteIndex
from ripple.snapshotter.pages import decode
from ripple.snapshotter.proto import EventPage
from ripple.snapshotter.service import Snapshotter
from ripple.snapshotter.settings import SnapshotterSettings
from ripple.snapshotter.storage import StorageError, StoredObject
from ripple.snapshotter.storage.filesystem import FilesystemStorage


class Switchable:
    """Storage or an index that answers its backend's error while `down` is set, counting
    the calls it refused."""

    def __init__(self, inner: Any, error: type[Exception]) -> None:
        self.inner = inner
        self.error = error
        self.down = threading.Event()
        self.refused = 0
        self.backend = inner.backend

    def _check(self, op: str) -> None:
        if self.down.is_set():
            self.refused += 1
            raise self.error(f"{self.backend}: {op}: switched off by the test")


class SwitchableStorage(Switchable):
    def __init__(self, inner: FilesystemStorage) -> None:
        super().__init__(inner, StorageError)

    def put(
        self, key: str, data: bytes, content_type: str, metadata: Mapping[str, str]
    ) -> StoredObject:
        self._check("put")
        result: StoredObject = self.inner.put(key, data, content_type, metadata)
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class SwitchableIndex(Switchable):
    def __init__(self, inner: SqliteIndex) -> None:
        super().__init__(inner, IndexError_)

    def publish(self, entry: IndexEntry) -> None:
        self._check("publish")
        self.inner.publish(entry)

    def last_sequence(self, writer_id: str) -> int:
        self._check("last_sequence")
        result: int = self.inner.last_sequence(writer_id)
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def open_snapshotter(
    settings: SnapshotterSettings, **changes: Any
) -> tuple[Snapshotter, SwitchableStorage, SwitchableIndex]:
    settings = replace(settings, **changes)
    storage = SwitchableStorage(FilesystemStorage(settings.pages_path))
    index = SwitchableIndex(SqliteIndex(settings.index_location))
    return Snapshotter(settings, storage, index), storage, index


def stored_pages(settings: SnapshotterSettings) -> list[EventPage]:
    """Every page in the filesystem storage, by (writer, page sequence)."""
    storage = FilesystemStorage(settings.pages_path)
    found = [decode(storage.get(o.key)) for o in storage.list()]
    return sorted(found, key=lambda p: (p.metadata.writer_id, p.metadata.page_sequence))


def stored_payloads(settings: SnapshotterSettings, writer: str | None = None) -> list[bytes]:
    return [
        e.payload
        for p in stored_pages(settings)
        if writer is None or p.metadata.writer_id == writer
        for e in p.events
    ]


def pages_of(settings: SnapshotterSettings, writer: str) -> Iterator[EventPage]:
    return (p for p in stored_pages(settings) if p.metadata.writer_id == writer)
