"""The scalar functions over arrays that the transform's fast path fills its templates with
(`ripple.events.columns`): each gives, for every element, what its scalar twin gives."""

from __future__ import annotations

import uuid

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ripple.events import encode_key, event_time, sequencer, version_id
from ripple.events.columns import encode_keys, event_times, sequencers, version_ids

COMMIT_NS = st.integers(min_value=0, max_value=(1 << 63) - 1)
# keys of every kind: kept characters, spaces, characters encode_key escapes, non-ASCII
KEYS = st.text(
    alphabet=st.one_of(st.sampled_from("aZ09_.-*/ ~+=%&?#\"'\\\t\n"), st.characters(codec="utf-8")),
    max_size=40,
)


@given(st.lists(COMMIT_NS, max_size=50))
def test_sequencers_are_the_first_events_sequencers(values: list[int]) -> None:
    assert sequencers(pa.array(values, pa.int64())).to_pylist() == [sequencer(v, 0) for v in values]


@given(st.lists(st.integers(min_value=0, max_value=(1 << 62)), max_size=50))
def test_event_times_are_event_time(values: list[int]) -> None:
    assert event_times(pa.array(values, pa.int64())).to_pylist() == [event_time(v) for v in values]


def test_event_times_truncate_to_the_millisecond() -> None:
    got = event_times(pa.array([1795256130123999999, 1795256130000000000], pa.int64()))
    assert got.to_pylist() == ["2026-11-21T10:15:30.123Z", "2026-11-21T10:15:30.000Z"]


@given(st.lists(KEYS, max_size=30))
def test_encode_keys_is_encode_key(keys: list[str]) -> None:
    assert encode_keys(pa.array(keys, pa.string())).to_pylist() == [encode_key(k) for k in keys]


def test_encode_keys_keeps_plain_keys_and_spaces_over_the_column() -> None:
    keys = ["photos/2026/red flower.jpg", "a*b_c-d.e"]
    assert encode_keys(pa.array(keys)).to_pylist() == ["photos/2026/red+flower.jpg", "a*b_c-d.e"]


@given(
    st.lists(
        st.tuples(
            st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1),
            st.uuids().map(str),
        ),
        max_size=30,
    )
)
def test_version_ids_are_version_id(rows: list[tuple[int, str]]) -> None:
    versions = pa.array([v for v, _ in rows], pa.int64())
    streams = pa.array([s for _, s in rows], pa.string())
    assert version_ids(versions, streams).to_pylist() == [version_id(v, s) for v, s in rows]


@pytest.mark.parametrize(
    "stream_id",
    [str(uuid.uuid4()).upper(), "{" + str(uuid.uuid4()) + "}", "", "not a uuid"],
    ids=["upper-case", "braces", "empty", "garbage"],
)
def test_version_ids_leave_out_stream_ids_that_are_not_canonical(stream_id: str) -> None:
    """`version_id` itself accepts other spellings of a UUID; the fast path leaves their
    rows to it, so the array function answers "" for them."""
    assert version_ids(pa.array([7], pa.int64()), pa.array([stream_id])).to_pylist() == [""]
