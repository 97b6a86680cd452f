"""The scalar functions of `ripple.events` over Arrow arrays, for the transform's fast path
(`ripple.events.batch`): `sequencers`, `event_times`, `encode_keys` and `version_ids` give,
for every element, what `sequencer(ns, 0)`, `event_time`, `encode_key` and `version_id`
give for it (tests hold them to that); `read_json_lines` reads many JSON objects at once.
Pure: no I/O.
"""

from __future__ import annotations

from typing import Any, Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from ripple.events.keys import encode_key
from ripple.events.sequencer import _utc_text

__all__ = [
    "STREAM_ID",
    "as_bools",
    "distinct",
    "encode_keys",
    "event_times",
    "read_json_lines",
    "sequencers",
    "version_ids",
    "whole",
]

_KEPT_KEY: Final = r"^[A-Za-z0-9_.*/ -]*$"  # encode_key leaves these as they are (" " → "+")
# a stream id as the metabase writes it: a UUID in lower-case hex with hyphens
STREAM_ID: Final = r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"
_UPPER: Final = np.frombuffer(b"0123456789ABCDEF", dtype=np.uint8)
_LOWER: Final = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)
_SHIFTS: Final = np.arange(60, -4, -4, dtype=np.uint64)
_DIGITS: Final = np.frombuffer(b"0123456789", dtype=np.uint8)


def read_json_lines(lines: pa.Array | pa.ChunkedArray, schema: pa.Schema) -> pa.Table:
    """The JSON objects of a string (or binary) array whose every element is one object and
    a newline, as a table of `schema` (fields it does not name are skipped)."""
    lines = whole(lines)
    offsets = np.frombuffer(lines.buffers()[1], dtype=np.int32)
    first, last = int(offsets[lines.offset]), int(offsets[lines.offset + len(lines)])
    text = lines.buffers()[2].slice(first, last - first)
    options = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")
    read = pj.ReadOptions(use_threads=False, block_size=max(1 << 20, last - first + 1))
    return pj.read_json(pa.BufferReader(text), read_options=read, parse_options=options)


def whole(array: pa.Array | pa.ChunkedArray) -> pa.Array:
    """The array in one chunk."""
    return array.combine_chunks() if isinstance(array, pa.ChunkedArray) else array


def as_bools(array: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A boolean array without nulls as numpy booleans."""
    return np.asarray(whole(array).to_numpy(zero_copy_only=False), dtype=bool)


def distinct(*columns: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, list[tuple[Any, ...]]]:
    """The distinct combinations of the columns' values (null is a value too), in order of
    first appearance, and each row's index among them."""
    n = len(columns[0])
    if n == 0:
        return np.zeros(0, dtype=np.int64), []
    codes = np.empty((n, len(columns)), dtype=np.int64)
    for j, column in enumerate(columns):
        encoded = pc.dictionary_encode(whole(column), null_encoding="encode")
        codes[:, j] = encoded.indices.to_numpy(zero_copy_only=False)
    _, first, inverse = np.unique(codes, axis=0, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    firsts = pa.array(first[order])
    values = [whole(column).take(firsts).to_pylist() for column in columns]
    return rank[inverse.reshape(-1)], list(zip(*values, strict=True))


def _int64s(array: pa.Array | pa.ChunkedArray) -> np.ndarray:
    return np.asarray(whole(array).to_numpy(zero_copy_only=False), dtype=np.int64)


def _hex(values: np.ndarray, digits: np.ndarray) -> np.ndarray:
    """16 hex digits per 64-bit value (two's complement for negatives), as (n, 16) bytes."""
    bits = np.asarray(values, dtype=np.int64).view(np.uint64)
    return np.asarray(digits[(bits[:, None] >> _SHIFTS[None, :]) & np.uint64(0xF)])


def _strings(chars: np.ndarray) -> pa.Array:
    """An (n, width) array of ASCII bytes as an Arrow string array of n strings."""
    n, width = chars.shape
    offsets = pa.py_buffer(np.arange(0, (n + 1) * width, width, dtype=np.int32).tobytes())
    data = pa.py_buffer(np.ascontiguousarray(chars).tobytes())
    return pa.Array.from_buffers(pa.string(), n, [None, offsets, data])


def sequencers(commit_ns: pa.Array | pa.ChunkedArray) -> pa.Array:
    """`sequencer(ns, 0)` of every commit time (the first event of a transaction)."""
    ns = _int64s(commit_ns)
    if len(ns) and ns.min() < 0:
        raise ValueError("commit time outside 0..2**64-1")
    chars = np.full((len(ns), 24), ord("0"), dtype=np.uint8)
    chars[:, :16] = _hex(ns, _UPPER)
    return _strings(chars)


def event_times(commit_ns: pa.Array | pa.ChunkedArray) -> pa.Array:
    """`event_time` of every commit time: ISO-8601 UTC, milliseconds (truncated), `Z`. A
    batch's commits share few seconds: each is written once."""
    ns = _int64s(commit_ns)
    seconds, rest = np.divmod(ns, 1_000_000_000)
    unique, inverse = np.unique(seconds, return_inverse=True)
    wall = pa.array([_utc_text(int(s)) for s in unique.tolist()], pa.string())
    millis = rest // 1_000_000
    chars = np.empty((len(ns), 5), dtype=np.uint8)
    chars[:, 0] = ord(".")
    chars[:, 1] = _DIGITS[millis // 100]
    chars[:, 2] = _DIGITS[millis // 10 % 10]
    chars[:, 3] = _DIGITS[millis % 10]
    chars[:, 4] = ord("Z")
    return whole(pc.binary_join_element_wise(wall.take(pa.array(inverse)), _strings(chars), ""))


def encode_keys(keys: pa.Array | pa.ChunkedArray) -> pa.Array:
    """`encode_key` of every key: over the column for keys of the characters it keeps
    (and spaces), one by one for the others."""
    keys = whole(keys)
    kept = as_bools(pc.fill_null(pc.match_substring_regex(keys, _KEPT_KEY), True))
    encoded = whole(pc.replace_substring(keys, " ", "+"))
    if kept.all():
        return encoded
    values = encoded.to_pylist()
    others = np.flatnonzero(~kept)
    for i, raw in zip(others.tolist(), keys.take(pa.array(others)).to_pylist(), strict=True):
        values[i] = encode_key(raw)
    return pa.array(values, pa.string())


def version_ids(
    versions: pa.Array | pa.ChunkedArray, stream_ids: pa.Array | pa.ChunkedArray
) -> pa.Array:
    """`version_id(version, stream_id)` of every row whose stream id is a canonical UUID
    (`STREAM_ID`); "" for the others."""
    stream_ids = whole(stream_ids)
    head = pc.replace_substring(pc.utf8_slice_codeunits(stream_ids, 0, 18), "-", "")
    canonical = pc.fill_null(pc.match_substring_regex(stream_ids, STREAM_ID), False)
    joined = pc.binary_join_element_wise(_strings(_hex(_int64s(versions), _LOWER)), head, "")
    return whole(pc.if_else(canonical, joined, ""))
