"""The values of a lifecycle configuration, given as text (the gateway's XML) or as Python
values (boto3 shapes), read as S3 reads them: text that is not the value asked for is
`MalformedXML`, a value out of its range `InvalidArgument`.

Every integer is read by `ripple.numbers.whole_number`, bounded before it is converted, so
any length of text is a refusal, never a 500. S3 documents no upper bound for `Days`,
`NoncurrentDays` and `DaysAfterInitiation`; ripple takes at most `MAX_DAYS` (a million
days, ~2,738 years), so the expiry of any object created before year 7262 is a date Python
(and ripple) can hold, and a `Date` from 1970-01-01 to 9999-12-31: a rule whose dates would
overflow is refused when it is put.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from ripple.metabase.errors import InvalidArgument, MalformedLifecycle
from ripple.numbers import INT64_MAX, NumberError, whole_number

# Days, NoncurrentDays, DaysAfterInitiation: an object created before 7262-02-01 expires
# within year 9999, the last year a datetime holds
MAX_DAYS = 1_000_000
MAX_SIZE = INT64_MAX  # ObjectSizeGreaterThan / ObjectSizeLessThan: S3's Long
FIRST_DATE = datetime(1970, 1, 1, tzinfo=UTC)
LAST_DATE = datetime(9999, 12, 31, tzinfo=UTC)


def members(raw: Any, allowed: set[str], what: str) -> Mapping[str, Any]:
    """An element's children by name (none for an empty element), only `allowed` ones."""
    if raw is None or raw == "":
        return {}
    if not isinstance(raw, Mapping):
        raise MalformedLifecycle(f"<{what}> must be an element with children")
    unknown = set(raw) - allowed
    if unknown:
        raise MalformedLifecycle(f"unknown <{what}> member {names(unknown)}")
    return raw


def text(value: Any, what: str) -> str:
    """A text member (absent: empty)."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise MalformedLifecycle(f"<{what}> must be text")
    return value


def integer(value: Any, what: str, least: int, most: int, too_small: str, too_large: str) -> int:
    """An integer member, as text (XML) or an int (boto3 shapes), `least` to `most`:
    `MalformedLifecycle` for anything that is not a whole number, `InvalidArgument` with
    `too_small` or `too_large` outside the range. Any length of text is bounded work."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise MalformedLifecycle(f"<{what}> must be an integer")
    if isinstance(value, int):
        number = value
    else:
        bound = max(most, -least)
        try:  # a well-formed negative number is out of range, not malformed
            number = whole_number(value, f"<{what}>", least=-bound, most=bound)
        except NumberError as e:
            if not e.out_of_range:
                refusal = f"<{what}> must be an integer, got {shown(value)}"
                raise MalformedLifecycle(refusal) from None
            raise InvalidArgument(too_small if value.startswith("-") else too_large) from None
    if number < least:
        raise InvalidArgument(too_small)
    if number > most:
        raise InvalidArgument(too_large)
    return number


def days(value: Any, what: str, action: str) -> int:
    """A number of days, 1 to `MAX_DAYS`: more would take an expiry past year 9999."""
    too_small = f"'{what}' for {action} action must be a positive integer"
    if value is None:
        raise InvalidArgument(too_small)
    too_large = (
        f"'{what}' for {action} action must be at most {MAX_DAYS}: a later expiry would "
        "overflow a date"
    )
    return integer(value, what, 1, MAX_DAYS, too_small, too_large)


def boolean(value: Any, what: str) -> bool:
    if isinstance(value, bool):
        return value
    given = value.strip().lower() if isinstance(value, str) else ""
    if given not in ("true", "false"):
        raise MalformedLifecycle(f"<{what}> must be true or false, got {shown(value)}")
    return given == "true"


def midnight(value: Any) -> datetime:
    """A `Date`: midnight UTC, 1970-01-01 to 9999-12-31 (`InvalidArgument` outside, also
    for a year of five digits or an offset that takes it past either end)."""
    out_of_range = InvalidArgument(
        f"'Date' must be from {FIRST_DATE:%Y-%m-%d} to {LAST_DATE:%Y-%m-%d}, got {shown(value)}"
    )
    if isinstance(value, datetime):
        when = value
    else:
        given = value if isinstance(value, str) else ""
        try:
            when = datetime.fromisoformat(given.replace("Z", "+00:00"))
        except ValueError:
            year = _YEAR.match(given)
            try:  # a year past 9999 is a date, but not one a datetime holds
                whole_number(year[1] if year else "", "the year of <Date>", most=9999)
            except NumberError as e:
                if e.out_of_range:
                    raise out_of_range from None
            raise MalformedLifecycle(
                f"<Date> must be an ISO 8601 date, got {shown(value)}"
            ) from None
    try:
        when = when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)
    except OverflowError:  # an offset across year 1 or 9999
        raise out_of_range from None
    if (when.hour, when.minute, when.second, when.microsecond) != (0, 0, 0, 0):
        raise InvalidArgument(f"'Date' must be at midnight GMT, got {shown(value)}")
    if not FIRST_DATE <= when <= LAST_DATE:
        raise out_of_range
    return when


_YEAR = re.compile(r"[+-]?([0-9]+)-")


def shown(value: Any) -> str:
    """A refused value for a message, at most 40 characters of it."""
    given = repr(value) if isinstance(value, str) else str(value)
    return given if len(given) <= 42 else given[:40] + "…"


def names(given: Sequence[str] | set[str]) -> str:
    return ", ".join(f"<{n}>" for n in sorted(given))
