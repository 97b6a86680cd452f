"""Sequencers, commit timestamps and event times: exact integers, fixed widths, truncation."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ripple.events import event_time, sequencer, timestamp_ns
from ripple.events.sequencer import MAX_COMMIT_NS, MAX_INDEX

commit_ns = st.integers(0, MAX_COMMIT_NS)
index = st.integers(0, MAX_INDEX)


def test_sequencer_digits() -> None:
    assert sequencer(1795256130123456789, 0) == "18EA07F04CD9E115" + "00000000"
    assert sequencer(1795256130123456789, 0x2A) == "18EA07F04CD9E115" + "0000002A"
    assert sequencer(0, 0) == "0" * 24
    assert sequencer(255, 1) == "00000000000000FF00000001"
    assert sequencer(MAX_COMMIT_NS, MAX_INDEX) == "F" * 24


@pytest.mark.parametrize(
    ("ns", "i"), [(-1, 0), (MAX_COMMIT_NS + 1, 0), (0, -1), (0, MAX_INDEX + 1)]
)
def test_sequencer_out_of_range(ns: int, i: int) -> None:
    with pytest.raises(ValueError, match="outside"):
        sequencer(ns, i)


def test_sequencer_order_examples() -> None:
    # Upper-case hex: "A" sorts after "9" (lower-case would too, but mixed case would not).
    assert sequencer(9, 0) < sequencer(10, 0) < sequencer(16, 0)
    assert sequencer(10, 0xF) < sequencer(10, 0x10) < sequencer(11, 0)


@given(a=st.tuples(commit_ns, index), b=st.tuples(commit_ns, index))
def test_sequencer_string_order_is_tuple_order(a: tuple[int, int], b: tuple[int, int]) -> None:
    sa, sb = sequencer(*a), sequencer(*b)
    assert len(sa) == len(sb) == 24
    assert (sa < sb) == (a < b)
    assert (sa == sb) == (a == b)


@given(ns=commit_ns, i=index)
def test_sequencer_decodes_back(ns: int, i: int) -> None:
    s = sequencer(ns, i)
    assert s == s.upper()
    assert (int(s[:16], 16), int(s[16:], 16)) == (ns, i)


@pytest.mark.parametrize(
    ("text", "ns"),
    [
        ("2026-11-21T10:15:30.123456789Z", 1795256130123456789),
        ("2026-11-21T10:15:30.123456000Z", 1795256130123456000),
        ("2026-11-21T10:15:30.1Z", 1795256130100000000),
        ("2026-11-21T10:15:30.000000001Z", 1795256130000000001),
        ("2026-11-21T10:15:30Z", 1795256130000000000),
        ("2026-11-21T11:15:30.5+01:00", 1795256130500000000),
        ("2026-11-21T09:45:30.5-00:30", 1795256130500000000),
        ("1970-01-01T00:00:00.000000000Z", 0),
    ],
)
def test_timestamp_ns(text: str, ns: int) -> None:
    assert timestamp_ns(text) == ns


def test_timestamp_ns_keeps_every_nanosecond() -> None:
    # A float holds ~16 significant digits: 1795256130.123456789 would lose the last ones.
    a = timestamp_ns("2026-11-21T10:15:30.123456789Z")
    b = timestamp_ns("2026-11-21T10:15:30.123456790Z")
    assert b - a == 1


@given(st.datetimes(min_value=datetime(1970, 1, 1), max_value=datetime(2500, 1, 1)),
       st.integers(0, 999))  # fmt: skip
def test_timestamp_ns_matches_datetime(dt: datetime, extra_ns: int) -> None:
    text = dt.strftime("%Y-%m-%dT%H:%M:%S.%f") + f"{extra_ns:03d}Z"
    expected = (
        int((dt.replace(tzinfo=UTC) - datetime(1970, 1, 1, tzinfo=UTC)).total_seconds()) * 10**9
        + dt.microsecond * 1000
        + extra_ns
    )
    assert timestamp_ns(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "2026-11-21 10:15:30",  # no zone
        "2026-11-21T10:15:30.1234567890Z",  # ten fractional digits
        "2026-11-21T10:15:30.Z",
        "2026-13-21T10:15:30Z",  # month 13
        "2026-11-21T24:00:00Z",
        "2026-11-21T10:15:30ZZ",
        "٢٠٢٦-11-21T10:15:30Z",  # non-ASCII digits
    ],
)
def test_timestamp_ns_refuses(text: str) -> None:
    with pytest.raises(ValueError, match="time"):
        timestamp_ns(text)


@pytest.mark.parametrize(
    ("ns", "text"),
    [
        (1795256130123456789, "2026-11-21T10:15:30.123Z"),
        (1795256130999999999, "2026-11-21T10:15:30.999Z"),  # truncated, not rounded up
        (1795256130005000000, "2026-11-21T10:15:30.005Z"),
        (1795256130000999999, "2026-11-21T10:15:30.000Z"),
        (0, "1970-01-01T00:00:00.000Z"),
    ],
)
def test_event_time(ns: int, text: str) -> None:
    assert event_time(ns) == text


@given(commit_ns)
def test_event_time_is_the_millisecond_of_the_timestamp(ns: int) -> None:
    assert timestamp_ns(event_time(ns)) == ns - ns % 1_000_000
