"""Change stream definitions: a named stream over a table and its watched columns, with
Spanner's options, validated as Spanner validates `CREATE CHANGE STREAM`.

A definition is created and changed only by migration steps (`ripple.changestream.ddl`);
each change makes a new version, and every record names the version it was written under.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any

MIN_RETENTION = timedelta(days=1)
MAX_RETENTION = timedelta(days=30)
DEFAULT_RETENTION = timedelta(days=1)
DEFAULT_PARTITIONS = 4
MAX_PARTITIONS = 1024
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,63}$")
_DURATION = re.compile(r"^(\d+)([dhms])$")
_UNITS = {"d": "days", "h": "hours", "m": "minutes", "s": "seconds"}


class ChangeStreamError(ValueError):
    """A change stream definition or option is invalid (Spanner: INVALID_ARGUMENT)."""


class ValueCaptureType(enum.Enum):
    """Which values a record carries (Spanner's value capture types)."""

    OLD_AND_NEW_VALUES = "OLD_AND_NEW_VALUES"
    NEW_ROW = "NEW_ROW"
    NEW_VALUES = "NEW_VALUES"
    NEW_ROW_AND_OLD_VALUES = "NEW_ROW_AND_OLD_VALUES"

    @property
    def old_values(self) -> bool:
        return self in (
            ValueCaptureType.OLD_AND_NEW_VALUES,
            ValueCaptureType.NEW_ROW_AND_OLD_VALUES,
        )

    @property
    def new_row(self) -> bool:
        return self in (ValueCaptureType.NEW_ROW, ValueCaptureType.NEW_ROW_AND_OLD_VALUES)


class ModType(enum.IntEnum):
    INSERT = 1
    UPDATE = 2
    DELETE = 3


def parse_duration(value: str) -> timedelta | None:
    """`7d`, `36h`, `15m`, `86400s` as a timedelta; None if it is not one."""
    match = _DURATION.match(value.strip())
    return None if match is None else timedelta(**{_UNITS[match[2]]: int(match[1])})


def parse_retention(value: str | timedelta) -> timedelta:
    """`7d`, `36h`, `10080m`, `86400s` or a timedelta; 1 to 30 days."""
    period = value if isinstance(value, timedelta) else parse_duration(value)
    if period is None:
        raise ChangeStreamError(
            f"retention_period {value!r} is not a duration: use e.g. '1d', '36h' or '7d'"
        )
    if not MIN_RETENTION <= period <= MAX_RETENTION:
        raise ChangeStreamError(
            f"retention_period {format_retention(period)} is out of range: 1 to 30 days"
        )
    return period


def format_retention(period: timedelta) -> str:
    seconds = int(period.total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


@dataclass(frozen=True)
class StreamOptions:
    exclude_insert: bool = False
    exclude_update: bool = False
    exclude_delete: bool = False
    exclude_ttl_deletes: bool = False
    allow_txn_exclusion: bool = False
    value_capture_type: ValueCaptureType = ValueCaptureType.OLD_AND_NEW_VALUES
    retention_period: timedelta = DEFAULT_RETENTION

    @property
    def retention_ns(self) -> int:
        """The retention period in nanoseconds (exactly: it is whole seconds)."""
        return int(self.retention_period.total_seconds()) * 1_000_000_000

    def excludes(self, mod_type: ModType) -> bool:
        return {
            ModType.INSERT: self.exclude_insert,
            ModType.UPDATE: self.exclude_update,
            ModType.DELETE: self.exclude_delete,
        }[mod_type]

    def with_changes(self, changes: Mapping[str, Any]) -> StreamOptions:
        """These options with `changes` (option name -> value, as in `SET OPTIONS`)."""
        values: dict[str, Any] = {}
        for name, value in changes.items():
            if name == "value_capture_type":
                try:
                    values[name] = ValueCaptureType(
                        value.value if isinstance(value, ValueCaptureType) else value
                    )
                except ValueError:
                    known = ", ".join(v.value for v in ValueCaptureType)
                    raise ChangeStreamError(
                        f"value_capture_type {value!r} is not one of {known}"
                    ) from None
            elif name == "retention_period":
                values[name] = parse_retention(value)
            elif name in _BOOLEAN_OPTIONS:
                if not isinstance(value, bool):
                    raise ChangeStreamError(f"option {name} must be TRUE or FALSE, not {value!r}")
                values[name] = value
            else:
                known = ", ".join(
                    sorted((*_BOOLEAN_OPTIONS, "value_capture_type", "retention_period"))
                )
                raise ChangeStreamError(f"unknown change stream option {name!r} (known: {known})")
        return replace(self, **values)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {name: getattr(self, name) for name in _BOOLEAN_OPTIONS}
        out["value_capture_type"] = self.value_capture_type.value
        out["retention_period"] = format_retention(self.retention_period)
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> StreamOptions:
        return cls().with_changes(data)


_BOOLEAN_OPTIONS = (
    "exclude_insert",
    "exclude_update",
    "exclude_delete",
    "exclude_ttl_deletes",
    "allow_txn_exclusion",
)


@dataclass(frozen=True)
class StreamDefinition:
    """One version of a change stream: what it watches and how."""

    name: str
    table: str
    columns: tuple[str, ...]  # watched non-key columns; the key columns are always recorded
    options: StreamOptions = field(default_factory=StreamOptions)
    partitions: int = DEFAULT_PARTITIONS
    version: int = 1


def validate(
    name: str,
    table: str,
    columns: Sequence[str],
    partitions: int,
    *,
    table_columns: Sequence[str],
    key_columns: Sequence[str],
) -> tuple[str, ...]:
    """Check a definition against its table; returns the watched columns, deduplicated."""
    if not _NAME.match(name):
        raise ChangeStreamError(
            f"change stream name {name!r} must start with a letter and hold at most 64 "
            "letters, digits and underscores"
        )
    if not table_columns:
        raise ChangeStreamError(f"table {table!r} does not exist")
    if not 1 <= partitions <= MAX_PARTITIONS:
        raise ChangeStreamError(f"partitions must be 1 to {MAX_PARTITIONS}, not {partitions}")
    watched: list[str] = []
    for column in columns:
        if column in key_columns:
            raise ChangeStreamError(
                f"column {column!r} is part of the primary key of {table!r}; key columns "
                "are always recorded and must not be listed"
            )
        if column not in table_columns:
            raise ChangeStreamError(f"table {table!r} has no column {column!r}")
        if column not in watched:
            watched.append(column)
    return tuple(watched)
