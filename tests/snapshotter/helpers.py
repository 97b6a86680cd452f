"""An index entry as a snapshotter publishes it, for the index tests and the other
processes they start (the service tests' helpers are in service_helpers.py)."""

from __future__ import annotations

from ripple.snapshotter.index import IndexEntry


def entry(
    writer: str, seq: int, start: int, end: int | None = None, key: str | None = None
) -> IndexEntry:
    return IndexEntry(
        page_key=key or f"{writer}/{start}_{seq}.pb.zst",
        writer_id=writer,
        page_sequence=seq,
        start_time=start,
        end_time=start if end is None else end,
        event_count=seq + 1,
        page_size_bytes=1000 + seq,
        storage_size_bytes=500 + seq,
        format="protobuf",
        compression="zstd",
    )
