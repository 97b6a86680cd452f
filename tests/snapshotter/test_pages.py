"""Pages to bytes and back: every format and compression, their layout, and corrupt input."""

from __future__ import annotations

import base64
import gzip
import json
import random

import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from ripple.snapshotter import formats
from ripple.snapshotter.pages import PageError, decode, decompress, encode, extension, iter_events
from ripple.snapshotter.proto import Event, EventPage, PageMetadata

COMBINATIONS = [(f, c) for f in ("protobuf", "ndjson") for c in ("none", "gzip", "zstd")]
COMPRESSED = [(f, c) for f, c in COMBINATIONS if c != "none"]
INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
RFC_METADATA_FIELDS = {
    "writer_id",
    "page_sequence",
    "start_time",
    "end_time",
    "event_count",
    "page_size_bytes",
    "format_version",
    "compression",
    "tags",
}

# arbitrary bytes, plus bytes built from the pieces most likely to break a line format
payloads = st.binary(max_size=300) | st.lists(
    st.sampled_from([b"\n", b"\r\n", b"\r", b"\xff\xfe", b"\x00", b"{", b'"', b"\xc3("]),
    max_size=20,
).map(b"".join)
string_maps = st.dictionaries(st.text(max_size=12), st.text(max_size=24), max_size=5)
events = st.builds(
    Event,
    event_id=st.text(max_size=20),
    timestamp=INT64,
    payload=payloads,
    attributes=string_maps,
    sequence=INT64,
)
event_pages = st.builds(
    lambda meta, evs: EventPage(metadata=meta, events=evs),
    st.builds(
        PageMetadata,
        writer_id=st.text(min_size=1, max_size=30),
        page_sequence=INT64,
        start_time=INT64,
        end_time=INT64,
        tags=string_maps,
    ),
    st.lists(events, max_size=50),
)


def _copy(page: EventPage) -> EventPage:
    copy = EventPage()
    copy.CopyFrom(page)
    return copy


def _sample_page(count: int = 5, payload_size: int = 200, seed: int = 1) -> EventPage:
    rng = random.Random(seed)
    page = EventPage(
        metadata=PageMetadata(
            writer_id="bucket-a",
            page_sequence=7,
            start_time=1_760_054_399_999,
            end_time=1_760_054_400_500,
            tags={"env": "prod", "région": "é"},
        )
    )
    for i in range(count):
        page.events.add(
            event_id=f"7-{i}",
            timestamp=1_760_054_399_999 + i,
            payload=rng.randbytes(payload_size),
            attributes={"key": f"obj-{i}", "ünï": "cödé"},
            sequence=i,
        )
    return page


@pytest.mark.parametrize(("page_format", "compression"), COMBINATIONS)
@settings(max_examples=60, deadline=None)
@given(page=event_pages)
def test_round_trip(page_format, compression, page: EventPage) -> None:
    original = _copy(page)
    data, size = encode(page, page_format, compression)
    raw, detected = decompress(data)
    assert detected == compression
    assert size == len(raw)

    expected = _copy(original)
    expected.metadata.event_count = len(original.events)
    expected.metadata.format_version = "v1"
    expected.metadata.compression = compression
    expected.metadata.page_size_bytes = len(raw)
    decoded = decode(data)
    assert decoded == expected
    # the events themselves are untouched, in order
    assert list(decoded.events) == list(original.events)
    assert list(iter_events(data)) == list(original.events)


@pytest.mark.parametrize(("page_format", "compression"), COMBINATIONS)
def test_page_size_bytes_is_the_decompressed_size(page_format, compression) -> None:
    for count in (0, 1, 9, 10, 120):  # sizes around digit and varint boundaries
        data, _ = encode(_sample_page(count, payload_size=37), page_format, compression)
        raw, _ = decompress(data)
        assert decode(data).metadata.page_size_bytes == len(raw)


@pytest.mark.parametrize("page_format", ["protobuf", "ndjson"])
def test_gzip_is_applied(page_format) -> None:
    data, size = encode(_sample_page(), page_format, "gzip")
    assert data[:2] == b"\x1f\x8b"
    raw = gzip.decompress(data)  # the standard library reads it unaided
    assert len(raw) == size
    assert decode(raw) == decode(data)


@pytest.mark.parametrize("page_format", ["protobuf", "ndjson"])
def test_zstd_is_applied(page_format) -> None:
    data, size = encode(_sample_page(), page_format, "zstd")
    assert data[:4] == b"\x28\xb5\x2f\xfd"
    # one-shot decompression needs the content size in the frame header
    raw = zstandard.ZstdDecompressor().decompress(data)
    assert len(raw) == size
    assert decode(raw) == decode(data)


def test_compression_shrinks_a_repetitive_page() -> None:
    page = _sample_page()
    for event in page.events:
        event.payload = b"the same bytes again " * 50
    plain, _ = encode(_copy(page), "ndjson", "none")
    for compression in ("gzip", "zstd"):
        packed, _ = encode(_copy(page), "ndjson", compression)
        assert len(packed) < len(plain) / 5


def test_uncompressed_pages_are_raw() -> None:
    ndjson, _ = encode(_sample_page(), "ndjson", "none")
    assert ndjson.startswith(b'{"metadata":')
    protobuf, _ = encode(_sample_page(), "protobuf", "none")
    parsed = EventPage.FromString(protobuf)  # plain protobuf, nothing around it
    assert parsed.metadata.writer_id == "bucket-a"
    assert len(parsed.events) == 5


def test_ndjson_layout() -> None:
    page = _sample_page(count=3)
    page.events[1].payload = b"line one\nline two\r\n\xff\xfe not utf-8"
    original = _copy(page)
    data, _ = encode(page, "ndjson", "none")
    lines = data.split(b"\n")
    assert lines[-1] == b""  # every line ends with a newline
    lines = lines[:-1]
    assert len(lines) == 1 + len(original.events)

    head = json.loads(lines[0])
    assert list(head) == ["metadata"]
    meta = head["metadata"]
    assert set(meta) == RFC_METADATA_FIELDS
    assert meta["writer_id"] == "bucket-a"
    assert meta["page_sequence"] == 7
    assert meta["start_time"] == 1_760_054_399_999
    assert meta["end_time"] == 1_760_054_400_500
    assert meta["event_count"] == 3
    assert meta["page_size_bytes"] == len(data)
    assert meta["format_version"] == "v1"
    assert meta["compression"] == "none"
    assert meta["tags"] == {"env": "prod", "région": "é"}

    for line, event in zip(lines[1:], original.events, strict=True):
        record = json.loads(line)
        assert base64.b64decode(record["payload"], validate=True) == event.payload
        assert record["event_id"] == event.event_id
        assert record["timestamp"] == event.timestamp
        assert record["sequence"] == event.sequence
        assert record["attributes"] == dict(event.attributes)


def test_ndjson_metadata_names_the_compression() -> None:
    data, _ = encode(_sample_page(), "ndjson", "zstd")
    raw, _ = decompress(data)
    assert json.loads(raw.split(b"\n")[0])["metadata"]["compression"] == "zstd"


@pytest.mark.parametrize(
    "garbage",
    [
        b"",
        b"garbage",
        b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff",
        b"{not json",
        b'{"metadata": {"writer_id": "w"}}\n',  # fields missing
        b'{"metadata": {}}',
        b"[1, 2, 3]",
        b"\x1f\x8bnot really gzip",
        b"\x28\xb5\x2f\xfdnot really zstd",
    ],
)
def test_garbage_is_a_page_error(garbage: bytes) -> None:
    with pytest.raises(PageError):
        decode(garbage)


def test_ndjson_with_a_bad_event_line_is_a_page_error() -> None:
    data, _ = encode(_sample_page(count=2), "ndjson", "none")
    head, first, _second, _ = data.split(b"\n")
    for bad in (b"not json", b"null", b"[]", b'{"event_id": "x"}'):
        with pytest.raises(PageError):
            decode(b"\n".join([head, first, bad, b""]))


@pytest.mark.parametrize(("page_format", "compression"), COMPRESSED)
def test_every_truncation_is_a_page_error(page_format, compression) -> None:
    # random payloads and little else: zstd stores such a block raw, and a streaming
    # decompressor then hands back any prefix of it, some ending between two events
    rng = random.Random(3)
    page = EventPage(metadata=PageMetadata(writer_id="w", page_sequence=1))
    for i in range(5):
        page.events.add(event_id=str(i), payload=rng.randbytes(1000), sequence=i)
    for data in (
        encode(page, page_format, compression)[0],
        encode(_sample_page(count=5), page_format, compression)[0],
    ):
        assert len(decode(data).events) == 5  # whole, it reads
        for cut in range(len(data)):
            with pytest.raises(PageError):
                decode(data[:cut])


def test_ndjson_event_count_must_match() -> None:
    data, _ = encode(_sample_page(count=3), "ndjson", "none")
    lines = data.split(b"\n")[:-1]
    missing_one = b"\n".join(lines[:-1]) + b"\n"
    with pytest.raises(PageError, match="2 events"):
        decode(missing_one)
    one_extra = b"\n".join([*lines, lines[-1]]) + b"\n"
    with pytest.raises(PageError, match="4 events"):
        decode(one_extra)
    head = json.loads(lines[0])
    head["metadata"]["event_count"] = 5
    relabelled = b"\n".join([json.dumps(head).encode(), *lines[1:]]) + b"\n"
    with pytest.raises(PageError, match="says 5"):
        decode(relabelled)


def test_protobuf_without_metadata_is_a_page_error() -> None:
    no_metadata = EventPage(events=[Event(event_id="1", payload=b"x", sequence=0)])
    with pytest.raises(PageError, match="metadata"):
        decode(no_metadata.SerializeToString())
    no_writer = EventPage(metadata=PageMetadata(page_sequence=3, event_count=0))
    with pytest.raises(PageError, match="metadata"):
        decode(gzip.compress(no_writer.SerializeToString()))


def test_protobuf_is_smaller_than_ndjson_for_binary_payloads() -> None:
    page = _sample_page(count=20, payload_size=1024, seed=8)
    protobuf, protobuf_size = encode(_copy(page), "protobuf", "none")
    ndjson, ndjson_size = encode(_copy(page), "ndjson", "none")
    assert len(protobuf) == protobuf_size
    assert len(ndjson) == ndjson_size
    assert protobuf_size < ndjson_size


def test_extensions() -> None:
    assert extension("protobuf", "none") == ".pb"
    assert extension("protobuf", "gzip") == ".pb.gz"
    assert extension("protobuf", "zstd") == ".pb.zst"
    assert extension("ndjson", "none") == ".ndjson"
    assert extension("ndjson", "gzip") == ".ndjson.gz"
    assert extension("ndjson", "zstd") == ".ndjson.zst"


def test_unknown_format_or_compression_is_refused() -> None:
    with pytest.raises(ValueError, match="page format"):
        encode(_sample_page(), "xml", "none")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="compression"):
        encode(_sample_page(), "protobuf", "lz4")  # type: ignore[arg-type]
    assert formats.FORMATS == ("protobuf", "ndjson")
    assert formats.COMPRESSIONS == ("none", "gzip", "zstd")
