"""Parsing a destination's string arguments (topic attributes): flags, choices and positive numbers,
each failure a `ValueError` that names the argument."""

from __future__ import annotations

from collections.abc import Callable, Sequence

__all__ = ["choice", "flag", "positive", "whole"]

_TRUE = {"true", "yes", "1", "on"}
_FALSE = {"false", "no", "0", "off"}


def flag(arg: str, value: str) -> bool:
    """`true`/`false` (also yes/no, 1/0, on/off)."""
    text = value.strip().lower()
    if text not in _TRUE | _FALSE:
        raise ValueError(f"argument {arg!r} must be true or false, not {value!r}")
    return text in _TRUE


def choice(
    arg: str, value: str, allowed: Sequence[str], fold: Callable[[str], str] = str.lower
) -> str:
    """One of `allowed`, compared stripped and case-folded by `fold`; the folded value."""
    text = fold(value.strip())
    if text not in allowed:
        raise ValueError(f"argument {arg!r} must be one of {', '.join(allowed)}, not {value!r}")
    return text


def positive(arg: str, value: str, what: str = "a number of seconds") -> float:
    """A finite number above zero."""
    try:
        number = float(value.strip())
    except ValueError:
        number = float("nan")
    if not 0 < number < float("inf"):
        raise ValueError(f"argument {arg!r} must be {what} above zero, not {value!r}")
    return number


def whole(arg: str, value: str) -> int:
    """A whole number above zero."""
    number = positive(arg, value, "a whole number")
    if number != int(number):
        raise ValueError(f"argument {arg!r} must be a whole number, not {value!r}")
    return int(number)
