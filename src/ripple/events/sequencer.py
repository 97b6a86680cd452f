"""Event times and sequencers: from a change record's commit timestamp, exactly, in integers.

A data change record's `commit_timestamp` is RFC 3339 in UTC with nanoseconds
(`2026-11-21T10:15:30.123456789Z`). Events carry it twice:

- `eventTime`: ISO-8601 with milliseconds (truncated, never rounded) and `Z`;
- `s3.object.sequencer`: the commit time in UNIX nanoseconds as 16 upper-case hex digits,
  followed by 8 upper-case hex digits of the event's ordinal within its transaction. So the
  sequencers of successive events of one key strictly increase, also within one transaction,
  and comparing two of them as strings compares (commit time, ordinal).
"""

from __future__ import annotations

import functools
import re
from datetime import UTC, datetime, timedelta

__all__ = [
    "MAX_COMMIT_NS",
    "MAX_INDEX",
    "event_time",
    "sequencer",
    "timestamp_ns",
]

MAX_COMMIT_NS = (1 << 64) - 1  # 16 hex digits
MAX_INDEX = (1 << 32) - 1  # 8 hex digits

_NS_PER_S = 1_000_000_000
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?"
    r"(?:([Zz])|([+-])(\d{2}):(\d{2}))",
    re.ASCII,
)


def sequencer(commit_ns: int, index: int) -> str:
    """24 upper-case hex digits: `commit_ns` (16, zero padded) then `index` (8, zero padded).

    `index` is the event's 0-based ordinal among the events of its transaction.
    """
    if not 0 <= commit_ns <= MAX_COMMIT_NS:
        raise ValueError(f"commit time {commit_ns} ns is outside 0..2**64-1")
    if not 0 <= index <= MAX_INDEX:
        raise ValueError(f"event index {index} is outside 0..2**32-1")
    return f"{commit_ns:016X}{index:08X}"


_UTC_SECOND = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}", re.ASCII)
_DIGITS = re.compile(r"\d{1,9}", re.ASCII)


@functools.lru_cache(maxsize=4096)
def _utc_seconds(second: str) -> int | None:
    """UNIX seconds of `YYYY-MM-DDTHH:MM:SS` in UTC; None if it is not one. (Cached: the
    records of a batch share few seconds, and each is parsed once per record.)"""
    if not _UTC_SECOND.fullmatch(second):
        return None
    try:
        wall = datetime.fromisoformat(second).replace(tzinfo=UTC)
    except ValueError:
        return None
    delta = wall - _EPOCH
    return delta.days * 86_400 + delta.seconds


def timestamp_ns(rfc3339: str) -> int:
    """UNIX nanoseconds of an RFC 3339 timestamp, exactly (no float on the way).

    Takes up to nine fractional digits (fewer, or none, are right-padded with zeros) and `Z`
    or a numeric offset: `2026-11-21T10:15:30.123456789Z` → 1795256130123456789.
    """
    # The change stream's own form, `…T10:15:30.123456789Z`, the fast way.
    if len(rfc3339) > 21 and rfc3339[19] == "." and rfc3339[-1] == "Z":
        digits = rfc3339[20:-1]
        utc_seconds = _utc_seconds(rfc3339[:19])
        if utc_seconds is not None and _DIGITS.fullmatch(digits):
            return utc_seconds * _NS_PER_S + int(digits.ljust(9, "0"))
    m = _RFC3339.fullmatch(rfc3339)
    if m is None:
        raise ValueError(
            f"not an RFC 3339 timestamp: {rfc3339!r} (expected e.g. 2026-11-21T10:15:30.123456789Z)"
        )
    year, month, day, hour, minute, second = (int(g) for g in m.group(1, 2, 3, 4, 5, 6))
    try:
        wall = datetime(year, month, day, hour, minute, second, tzinfo=UTC)
    except ValueError as e:
        raise ValueError(f"not a valid time: {rfc3339!r} ({e})") from None
    delta = wall - _EPOCH
    seconds = delta.days * 86_400 + delta.seconds
    if m.group(8) is None:
        offset = int(m.group(10)) * 3600 + int(m.group(11)) * 60
        seconds += -offset if m.group(9) == "+" else offset
    fraction = int((m.group(7) or "").ljust(9, "0"))
    return seconds * _NS_PER_S + fraction


def event_time(commit_ns: int) -> str:
    """ISO-8601 UTC with exactly three fractional digits (truncated) and `Z`.

    `1795256130123456789` → `2026-11-21T10:15:30.123Z`.
    """
    seconds, ns = divmod(commit_ns, _NS_PER_S)
    return f"{_utc_text(seconds)}.{ns // 1_000_000:03d}Z"


@functools.lru_cache(maxsize=4096)
def _utc_text(seconds: int) -> str:
    return f"{_EPOCH + timedelta(seconds=seconds):%Y-%m-%dT%H:%M:%S}"
