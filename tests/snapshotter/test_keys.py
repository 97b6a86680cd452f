"""Page keys from templates: placeholders, checks on the template, and writer ids."""

from __future__ import annotations

import calendar
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ripple.snapshotter.keys import DEFAULT_TEMPLATE, KeyTemplate
from ripple.snapshotter.proto import PageMetadata

# 2025-10-09T23:59:59.999Z, computed without floats
LAST_MS_OF_OCT_9 = calendar.timegm((2025, 10, 9, 23, 59, 59)) * 1000 + 999
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MIN_MS = calendar.timegm((1900, 1, 1, 0, 0, 0)) * 1000
MAX_MS = calendar.timegm((9999, 12, 31, 23, 59, 59)) * 1000 + 999


def meta(writer_id: str = "bucket-a", sequence: int = 42, start: int = LAST_MS_OF_OCT_9, **kw):
    return PageMetadata(writer_id=writer_id, page_sequence=sequence, start_time=start, **kw)


def test_every_placeholder() -> None:
    template = KeyTemplate("{year}|{month}|{day}|{date}|{writer_id}|{timestamp}|{sequence}{ext}")
    key = template.render(meta(), ext=".pb.zst")
    assert key == f"2025|10|09|2025-10-09|bucket-a|{LAST_MS_OF_OCT_9}|42.pb.zst"


def test_last_millisecond_of_a_day_stays_in_that_day() -> None:
    template = KeyTemplate("{writer_id}/{year}/{month}/{day}/{sequence}")
    assert template.render(meta()) == "bucket-a/2025/10/09/42"
    assert template.render(meta(start=LAST_MS_OF_OCT_9 + 1)) == "bucket-a/2025/10/10/42"


def test_month_and_day_are_zero_padded() -> None:
    start = calendar.timegm((2026, 1, 5, 12, 0, 0)) * 1000
    template = KeyTemplate("{year}-{month}-{day}/{date}/{writer_id}_{sequence}")
    key = template.render(meta(start=start))
    assert key == "2026-01-05/2026-01-05/bucket-a_42"


@given(st.integers(min_value=MIN_MS, max_value=MAX_MS))
def test_date_parts_are_the_utc_date_of_start_time(start_ms: int) -> None:
    day = (EPOCH + timedelta(milliseconds=start_ms)).date()
    key = KeyTemplate("{date} {year} {month} {day} {timestamp} {writer_id}{sequence}").render(
        meta(start=start_ms)
    )
    date, year, month, dd, timestamp, _ = key.split(" ")
    assert date == day.isoformat()
    assert (int(year), int(month), int(dd)) == (day.year, day.month, day.day)
    assert (len(month), len(dd)) == (2, 2)
    assert timestamp == str(start_ms)


def test_default_template() -> None:
    key = KeyTemplate(DEFAULT_TEMPLATE).render(meta(), ext=".ndjson.gz")
    assert key == f"bucket-a/2025-10-09/{LAST_MS_OF_OCT_9}_42.ndjson.gz"


def test_ext_is_empty_unless_given() -> None:
    template = KeyTemplate("{writer_id}/{sequence}{ext}")
    assert template.render(meta()) == "bucket-a/42"
    assert template.render(meta(), ext=".pb") == "bucket-a/42.pb"


def test_suffix_follows_the_sequence() -> None:
    template = KeyTemplate("{writer_id}/{sequence}-{date}{ext}")
    key = template.render(meta(sequence=7), ext=".pb.zst", suffix="~c12")
    assert key == "bucket-a/7~c12-2025-10-09.pb.zst"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("{writer_id}/{sequence}/{hour}", "{hour}"),
        ("{writer_id}/{Sequence}/{sequence}", "{Sequence}"),
        ("{writer_id}/{}/{sequence}", "{}"),
        ("{writer_id.upper}/{sequence}", "{writer_id.upper}"),
        ("{writer_id}/{date}.pb", "missing {sequence}"),
        ("{date}/{sequence}.pb", "missing {writer_id}"),
        ("{date}.pb", "missing {writer_id}, {sequence}"),
        ("/{writer_id}/{sequence}", "relative"),
        ("{writer_id}/../{sequence}", "'..'"),
        ("../{writer_id}/{sequence}", "'..'"),
        ("{writer_id}/{sequence}/..", "'..'"),
        ("{writer_id}/{sequence", "expected '}'"),
    ],
)
def test_bad_templates_name_the_problem(text: str, problem: str) -> None:
    with pytest.raises(ValueError, match="key template") as caught:
        KeyTemplate(text)
    assert problem in str(caught.value)
    assert text in str(caught.value)


def test_dots_that_do_not_climb_are_fine() -> None:
    template = KeyTemplate("{writer_id}/..{sequence}/v1.2/{date}")
    assert template.render(meta()) == "bucket-a/..42/v1.2/2025-10-09"


@pytest.mark.parametrize("writer_id", ["..", ".", "a/b", "../../etc", "/abs", "a/../..", "//"])
def test_writer_id_never_adds_or_climbs_a_directory(writer_id: str) -> None:
    key = KeyTemplate("{writer_id}/{sequence}").render(meta(writer_id=writer_id))
    first, second = key.split("/")
    assert first not in ("", ".", "..")
    assert second == "42"


@given(st.text(min_size=1, max_size=40))
def test_any_writer_id_is_one_segment(writer_id: str) -> None:
    template = KeyTemplate("pages/{writer_id}/{date}/{sequence}")
    segments = template.render(meta(writer_id=writer_id)).split("/")
    assert len(segments) == 4
    assert segments[0] == "pages"
    assert segments[1] not in ("", ".", "..")
    assert segments[2:] == ["2025-10-09", "42"]


def test_writers_that_differ_get_different_keys() -> None:
    template = KeyTemplate("{writer_id}/{sequence}")
    writers = ["a/b", "a%2Fb", "a%252Fb", "..", "%2E%2E", ".", "%2E"]
    keys = [template.render(meta(writer_id=w)) for w in writers]
    assert len(set(keys)) == len(writers), dict(zip(writers, keys, strict=True))


@given(st.text(min_size=1, max_size=20), st.text(min_size=1, max_size=20))
def test_distinct_writer_ids_never_share_a_key(a: str, b: str) -> None:
    template = KeyTemplate("{writer_id}/{sequence}")
    same_key = template.render(meta(writer_id=a)) == template.render(meta(writer_id=b))
    assert same_key == (a == b)


def test_same_metadata_same_key() -> None:
    template = KeyTemplate(DEFAULT_TEMPLATE)
    first = template.render(meta(), ext=".pb")
    again = template.render(meta(), ext=".pb")
    # what encode fills in afterwards, and the rest of the metadata, do not move the key
    encoded = meta(
        end_time=LAST_MS_OF_OCT_9 + 5000,
        event_count=12,
        page_size_bytes=4096,
        format_version="v1",
        compression="zstd",
        tags={"env": "prod"},
    )
    assert first == again == template.render(encoded, ext=".pb")


def test_keys_differ_by_sequence_and_writer() -> None:
    template = KeyTemplate(DEFAULT_TEMPLATE)
    base = template.render(meta())
    assert template.render(meta(sequence=43)) != base
    assert template.render(meta(writer_id="bucket-b")) != base
