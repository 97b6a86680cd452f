"""Column values as change records carry them: Spanner's JSON encoding of each type code,
and the `column_types` entry of a column.

A column's code comes from its SQLAlchemy type, or from `info={"changestream_type": CODE}`
where the stored type says less than the value means (object keys are stored as bytes so
both databases order them bytewise, but they are UTF-8 strings).
"""

from __future__ import annotations

import base64
import functools
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa

INFO_KEY = "changestream_type"


def type_code(column: sa.Column[Any]) -> str:
    code = column.info.get(INFO_KEY)
    if isinstance(code, str):
        return code
    kind = column.type
    if isinstance(kind, sa.types.TypeDecorator):
        kind = kind.impl_instance
    if isinstance(kind, sa.Boolean):
        return "BOOL"
    if isinstance(kind, sa.Integer):  # SmallInteger and BigInteger too
        return "INT64"
    if isinstance(kind, sa.DateTime):
        return "TIMESTAMP"
    if isinstance(kind, sa.JSON):
        return "JSON"
    if isinstance(kind, sa.LargeBinary):
        return "BYTES"
    if isinstance(kind, sa.Float | sa.Numeric):
        return "FLOAT64"
    return "STRING"  # String, Text, Uuid


def column_types(table: sa.Table, watched: tuple[str, ...]) -> list[dict[str, Any]]:
    """Spanner's `column_types`: the key columns, then the watched ones, with their
    ordinal positions in the table."""
    position = {c.name: i for i, c in enumerate(table.columns, start=1)}
    keys = list(table.primary_key.columns)
    return [
        {
            "name": c.name,
            "type": {"code": type_code(c)},
            "is_primary_key": c.primary_key,
            "ordinal_position": position[c.name],
        }
        for c in [*keys, *(table.c[name] for name in watched)]
    ]


def encode(code: str, value: Any) -> Any:
    """A Python column value as a record carries it."""
    return encoder(code)(value)


Encoder = Callable[[Any], Any]


@functools.cache
def encoder(code: str) -> Encoder:
    """The function that encodes a column of type `code` (writers look it up once per
    column: this runs for every watched column of every recorded row)."""
    return _ENCODERS.get(code, _as_is)


def _as_is(value: Any) -> Any:
    return value


def _string(value: Any) -> Any:
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).decode("utf-8")
    return str(value) if isinstance(value, uuid.UUID) else value


def _timestamp(value: Any) -> Any:
    if value is None:
        return None
    if not isinstance(value, datetime):
        raise TypeError(f"a timestamp column holds a {type(value).__name__}")
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _bytes(value: Any) -> Any:
    return None if value is None else base64.b64encode(bytes(value)).decode("ascii")


def _bool(value: Any) -> Any:
    return None if value is None else bool(value)


def _int(value: Any) -> Any:
    return None if value is None else int(value)


_ENCODERS: dict[str, Encoder] = {
    "STRING": _string,  # None passes through unchanged
    "TIMESTAMP": _timestamp,
    "BYTES": _bytes,
    "BOOL": _bool,
    "INT64": _int,
}


def rfc3339_ns(ns: int) -> str:
    """UNIX nanoseconds as RFC 3339 UTC with nine fractional digits."""
    seconds, fraction = divmod(ns, 1_000_000_000)
    return f"{_utc_second(seconds)}.{fraction:09d}Z"


@functools.lru_cache(maxsize=4096)
def _utc_second(seconds: int) -> str:
    """`YYYY-MM-DDTHH:MM:SS` of UNIX seconds (cached: a batch's records share few)."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S")


def datetime_ns(value: datetime) -> int:
    """An aware datetime as UNIX nanoseconds (microsecond precision, exactly)."""
    delta = value.astimezone(UTC) - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000
