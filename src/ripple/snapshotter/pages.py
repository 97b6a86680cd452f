"""Pages to bytes and back: protobuf or NDJSON, uncompressed or gzip or zstd.

A protobuf page is one serialized `EventPage`. An NDJSON page is a metadata line
(`{"metadata": {...}}`) then one event per line, the payload in base64. `page_size_bytes`
in the metadata is the size of the serialized page before compression, itself included.

`decode` needs no hint: compression is told by its magic bytes and the format by the first
byte, so pages written under another configuration (or merged by compaction) still read.
"""

from __future__ import annotations

import base64
import gzip
import zlib
from collections.abc import Callable, Iterator, Sequence

import orjson
import zstandard

from ripple.snapshotter.formats import COMPRESSIONS, Compression, Format
from ripple.snapshotter.proto import Event, EventPage, PageMetadata

__all__ = [
    "FORMAT_VERSION",
    "PageError",
    "compress",
    "decode",
    "decompress",
    "encode",
    "encode_events",
    "extension",
    "frame",
    "iter_events",
    "unframe",
    "varint",
]

FORMAT_VERSION = "v1"
CONTENT_TYPES = {"protobuf": "application/x-protobuf", "ndjson": "application/x-ndjson"}

_GZIP_MAGIC = b"\x1f\x8b"
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_ZSTD_LEVEL = 3
_GZIP_LEVEL = 6


class PageError(ValueError):
    """Bytes that are not a page (truncated, corrupt, or not a snapshotter page at all)."""


def extension(page_format: Format, compression: Compression) -> str:
    """The usual file extension: `.pb`, `.ndjson`, plus `.gz` or `.zst`."""
    base = ".pb" if page_format == "protobuf" else ".ndjson"
    return base + {"none": "", "gzip": ".gz", "zstd": ".zst"}[compression]


def compress(data: bytes, compression: Compression) -> bytes:
    if compression == "none":
        return data
    if compression == "gzip":
        return gzip.compress(data, compresslevel=_GZIP_LEVEL, mtime=0)
    if compression == "zstd":
        return zstandard.ZstdCompressor(level=_ZSTD_LEVEL).compress(data)
    raise ValueError(f"unknown compression {compression!r}; use one of {', '.join(COMPRESSIONS)}")


def decompress(data: bytes) -> tuple[bytes, Compression]:
    """The bytes uncompressed, and the compression they had (told by magic bytes)."""
    try:
        if data.startswith(_GZIP_MAGIC):
            return gzip.decompress(data), "gzip"
        if data.startswith(_ZSTD_MAGIC):
            # pages are written with their size in the frame header; stream otherwise
            stream = zstandard.ZstdDecompressor().decompressobj()
            raw = stream.decompress(data)
            if not stream.eof:  # streaming returns a truncated frame's prefix without error
                raise PageError("page does not decompress: truncated zstd frame")
            return raw, "zstd"
    except (OSError, EOFError, zlib.error, zstandard.ZstdError) as e:
        raise PageError(f"page does not decompress: {e}") from None
    return data, "none"


def encode(page: EventPage, page_format: Format, compression: Compression) -> tuple[bytes, int]:
    """The page serialized and compressed, and its uncompressed size. Sets the metadata's
    `event_count`, `format_version`, `compression` and `page_size_bytes`."""
    meta = page.metadata
    meta.event_count = len(page.events)
    meta.format_version = FORMAT_VERSION
    meta.compression = compression
    serialize: Callable[[], bytes]
    if page_format == "protobuf":
        serialize = page.SerializeToString
    elif page_format == "ndjson":
        events = _ndjson_events(page)

        def serialize() -> bytes:
            return _ndjson_metadata(meta) + events

    else:
        raise ValueError(f"unknown page format {page_format!r}; use protobuf or ndjson")
    # page_size_bytes is the size of the page that holds it: a fixed point, reached in at
    # most three rounds since each round can only lengthen the number by a digit or byte
    meta.page_size_bytes = 0
    raw = serialize()
    while meta.page_size_bytes != len(raw):
        meta.page_size_bytes = len(raw)
        raw = serialize()
    return compress(raw, compression), len(raw)


def frame(event: bytes) -> bytes:
    """A serialized `Event` as it sits in a page (and in its log record): tag, length, bytes."""
    return b"\x12" + varint(len(event)) + event


def unframe(framed: bytes) -> bytes:
    """The serialized `Event` of a framed one."""
    start = 1
    while framed[start] & 0x80:
        start += 1
    return framed[start + 1 :]


def encode_events(
    meta: PageMetadata, framed: Sequence[bytes], page_format: Format, compression: Compression
) -> tuple[bytes, int]:
    """As `encode`, for events already serialized and framed (`frame`): a protobuf page is
    then put together without touching them."""
    if page_format != "protobuf":
        page = EventPage(metadata=meta)
        page.events.extend(Event.FromString(unframe(e)) for e in framed)
        data, size = encode(page, page_format, compression)
        meta.CopyFrom(page.metadata)
        return data, size
    body = b"".join(framed)
    meta.event_count = len(framed)
    meta.format_version = FORMAT_VERSION
    meta.compression = compression
    meta.page_size_bytes = 0
    size = -1
    while meta.page_size_bytes != size:  # the fixed point of `encode`
        meta.page_size_bytes = max(size, 0)
        head = meta.SerializeToString()
        size = 1 + len(varint(len(head))) + len(head) + len(body)
    head = meta.SerializeToString()
    raw = b"\x0a" + varint(len(head)) + head + body
    return compress(raw, compression), len(raw)


_VARINTS = [bytes([n]) if n < 0x80 else bytes([(n & 0x7F) | 0x80, n >> 7]) for n in range(1 << 14)]


def varint(n: int) -> bytes:
    """A protobuf base-128 varint (non-negative `n`)."""
    if n < 1 << 14:
        return _VARINTS[n]
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _ndjson_metadata(meta: PageMetadata) -> bytes:
    head = {
        "metadata": {
            "writer_id": meta.writer_id,
            "page_sequence": meta.page_sequence,
            "start_time": meta.start_time,
            "end_time": meta.end_time,
            "event_count": meta.event_count,
            "page_size_bytes": meta.page_size_bytes,
            "format_version": meta.format_version,
            "compression": meta.compression,
            "tags": dict(meta.tags),
        }
    }
    return orjson.dumps(head) + b"\n"


def _ndjson_events(page: EventPage) -> bytes:
    b64 = base64.b64encode
    return b"".join(
        orjson.dumps(
            {
                "event_id": e.event_id,
                "timestamp": e.timestamp,
                "payload": b64(e.payload).decode("ascii"),
                "attributes": dict(e.attributes),
                "sequence": e.sequence,
            }
        )
        + b"\n"
        for e in page.events
    )


def decode(data: bytes) -> EventPage:
    """A page from its stored bytes, whatever its format and compression."""
    raw, _ = decompress(data)
    if raw[:1] == b"{":
        return _from_ndjson(raw)
    page = EventPage()
    try:
        page.ParseFromString(raw)
    except Exception as e:  # protobuf's DecodeError, or a C-level parse error
        raise PageError(f"not a protobuf page: {e}") from None
    if not page.HasField("metadata") or not page.metadata.writer_id:
        raise PageError("not a snapshotter page: no metadata with a writer id")
    return page


def _from_ndjson(raw: bytes) -> EventPage:
    lines = raw.splitlines()
    try:
        head = orjson.loads(lines[0])["metadata"]
        page = EventPage(
            metadata=PageMetadata(
                writer_id=head["writer_id"],
                page_sequence=head["page_sequence"],
                start_time=head["start_time"],
                end_time=head["end_time"],
                event_count=head["event_count"],
                page_size_bytes=head["page_size_bytes"],
                format_version=head["format_version"],
                compression=head["compression"],
                tags=head.get("tags", {}),
            )
        )
        b64 = base64.b64decode
        page.events.extend(
            Event(
                event_id=e["event_id"],
                timestamp=e["timestamp"],
                payload=b64(e["payload"]),
                attributes=e.get("attributes", {}),
                sequence=e["sequence"],
            )
            for e in map(orjson.loads, lines[1:])
        )
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, IndexError) as e:
        raise PageError(f"not an NDJSON page: {type(e).__name__}: {e}") from None
    if len(page.events) != page.metadata.event_count:
        raise PageError(
            f"NDJSON page of {page.metadata.writer_id!r} #{page.metadata.page_sequence} holds "
            f"{len(page.events)} events, its metadata says {page.metadata.event_count}"
        )
    return page


def iter_events(data: bytes) -> Iterator[Event]:
    """The events of a stored page, in order."""
    yield from decode(data).events
