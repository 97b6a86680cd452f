"""Whole numbers from text a stranger wrote: a header, a query parameter, an XML element, a
setting. One parser for all of them, bounded before it converts anything, so 5,000 digits,
`²`, `١٢٣`, `+7`, ` 7` or `1_000` are a clear refusal naming the field, never Python's own
`ValueError` (or its 4,300-digit limit) escaping as a 500.

Only ASCII digits are digits here (`str.isdigit` also takes `²` and Arabic-Indic digits),
with one leading `-` where negatives are allowed. Leading zeros are fine (`007` is 7), as
S3 reads them.

`whole_number` raises `NumberError`, a `ValueError` carrying a one-line reason; callers turn
it into their own error (S3's `InvalidArgument`, `MalformedXML`, a settings error) and may
tell out-of-range values (`NumberError.out_of_range`) from text that is not a number.
"""

from __future__ import annotations

__all__ = ["INT64_MAX", "NumberError", "whole_number"]

_DIGITS = frozenset("0123456789")
# the largest size, position or count any object has: S3's Long, and the databases' BIGINT
INT64_MAX = 2**63 - 1


class NumberError(ValueError):
    """Text that is not a whole number within its bounds; the message names the field."""

    def __init__(self, message: str, *, out_of_range: bool) -> None:
        super().__init__(message)
        self.out_of_range = out_of_range


def whole_number(text: str, name: str, *, least: int = 0, most: int) -> int:
    """`text` as an int in `least..most`, or `NumberError` naming `name`.

    The length is judged before any conversion, so the work is bounded by `most`'s own
    size whatever `text` holds."""
    negative = text.startswith("-")
    digits = text[1:] if negative else text
    if not digits or not _DIGITS.issuperset(digits) or (negative and least >= 0):
        shown = text if len(text) <= 40 else text[:40] + "…"
        raise NumberError(
            f"{name} must be a whole number from {least} to {most}, not {shown!r}",
            out_of_range=False,
        )
    significant = digits.lstrip("0")
    bound = most if not negative else -least
    if len(significant) > len(str(abs(bound))):
        raise _out_of_range(name, least, most, text)
    value = -int(digits) if negative else int(digits)
    if not least <= value <= most:
        raise _out_of_range(name, least, most, text)
    return value


def _out_of_range(name: str, least: int, most: int, text: str) -> NumberError:
    shown = text if len(text) <= 40 else f"a number of {len(text)} digits"
    return NumberError(f"{name} must be from {least} to {most}, not {shown}", out_of_range=True)
