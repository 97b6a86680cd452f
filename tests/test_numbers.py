"""The one parser of whole numbers from untrusted text (`ripple.numbers`)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ripple.numbers import NumberError, whole_number


@pytest.mark.parametrize(
    ("text", "least", "most", "expected"),
    [
        ("0", 0, 10, 0),
        ("10", 0, 10, 10),
        ("007", 0, 10, 7),
        ("-5", -10, 10, -5),
        ("-10", -10, 10, -10),
        ("9" * 18, 0, 10**18, 10**18 - 1),
    ],
)
def test_numbers_within_bounds_are_read(text: str, least: int, most: int, expected: int) -> None:
    assert whole_number(text, "n", least=least, most=most) == expected


@pytest.mark.parametrize(
    "text",
    ["", "-", " 7", "7 ", "+7", "1_000", "0x10", "1e3", "1.0", "²", "\u0661\u0662", "7\n", "--1"],
)
def test_text_that_is_not_a_whole_number_is_refused(text: str) -> None:
    with pytest.raises(NumberError, match="must be a whole number") as refused:
        whole_number(text, "max-keys", most=1000)
    assert not refused.value.out_of_range
    assert "max-keys" in str(refused.value)


@pytest.mark.parametrize("text", ["1001", "9" * 5000, "1" + "0" * 4400, "-1"])
def test_numbers_out_of_bounds_are_refused_without_converting_them(text: str) -> None:
    with pytest.raises(NumberError) as refused:
        whole_number(text, "max-keys", most=1000)
    message = str(refused.value)
    assert "max-keys" in message
    assert len(message) < 200  # 5,000 digits are not echoed back


def test_out_of_range_is_told_apart_from_not_a_number() -> None:
    with pytest.raises(NumberError) as refused:
        whole_number("5" * 5000, "partNumber", least=1, most=10_000)
    assert refused.value.out_of_range
    with pytest.raises(NumberError) as low:
        whole_number("0", "partNumber", least=1, most=10_000)
    assert low.value.out_of_range


def test_negative_numbers_need_a_negative_least() -> None:
    with pytest.raises(NumberError, match="whole number"):
        whole_number("-3", "days", most=100)
    assert whole_number("-3", "offset", least=-5, most=100) == -3
    with pytest.raises(NumberError) as refused:
        whole_number("-" + "9" * 5000, "offset", least=-5, most=100)
    assert refused.value.out_of_range


@given(st.integers(min_value=-(10**30), max_value=10**30), st.integers(0, 10**20))
def test_any_integer_is_read_back_or_refused_by_its_bounds(value: int, most: int) -> None:
    least = -most
    if least <= value <= most:
        assert whole_number(str(value), "n", least=least, most=most) == value
    else:
        with pytest.raises(NumberError):
            whole_number(str(value), "n", least=least, most=most)


@given(st.text(max_size=30))
def test_any_text_is_a_number_or_a_number_error(text: str) -> None:
    try:
        value = whole_number(text, "n", least=-(10**9), most=10**9)
    except NumberError:
        return
    assert str(value) == (text.lstrip("0") or "0") or text.startswith("-")
