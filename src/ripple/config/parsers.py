"""How a setting's value is read: one parser per kind of value, each saying what it accepts.

A value comes from the TOML file (a string, number, boolean or list) or from a variable
(always a string); strings are stripped of surrounding whitespace first. A parser returns
the typed value or raises one of two errors, which the setting's row
(`ripple.config.table.Setting`) turns into one line naming the key and the variable:

- `Unwanted`, when the value is not of the kind at all; its message says what was given
  ("got 'fast'", "not a boolean (true)"), and the row's line says what the kind accepts;
- any other `ValueError`, whose message explains the problem in full (the eventing list
  quotes the tuple at fault, the allow list the entry).

Numbers are bounded, and text is judged before anything converts it, so 5,000 digits are
refused at once: never parsed slowly, never an overflow where the value is used.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar

import sqlalchemy as sa

from ripple.metabase.db import normalize_url
from ripple.notifications.phase1 import parse_eventing_buckets
from ripple.numbers import NumberError, whole_number
from ripple.targets.guard import SETTING as GUARD_SETTING
from ripple.targets.guard import DestinationGuard

__all__ = [
    "AllowList",
    "Choice",
    "DatabaseURL",
    "Directory",
    "EventingList",
    "Flag",
    "Matching",
    "Number",
    "Parser",
    "Text",
    "Unwanted",
    "WholeNumber",
]

T = TypeVar("T")

# what a flag's string says (case-insensitive); an empty one is false
TRUE = ("true", "yes", "on", "1")
FALSE = ("false", "no", "off", "0", "")
# a number with a fraction, as a variable writes it: ASCII digits and one `.`, 30 a side
_DECIMAL = re.compile(r"[0-9]{1,30}(?:\.[0-9]{0,30})?|\.[0-9]{1,30}")


class Unwanted(ValueError):
    """A value not of the kind a parser reads; the message says what was given."""


class Parser(ABC, Generic[T]):
    """One kind of value: what it accepts (for error messages and docs/configuration.md),
    the TOML types it takes, and how it reads a value into a `T`."""

    takes: ClassVar[tuple[type, ...]] = (str,)

    @property
    @abstractmethod
    def accepts(self) -> str:
        """What the kind accepts, as "must be …" ends: "a whole number from 1 to 10"."""

    def check_type(self, value: object) -> None:
        """`Unwanted` unless `value` is of a TOML type this kind takes."""
        if isinstance(value, bool) and bool not in self.takes:  # Python counts it an int
            raise Unwanted(f"not a boolean ({str(value).lower()})")
        if not isinstance(value, self.takes):
            raise Unwanted(f"got a TOML {type(value).__name__}")

    def parse(self, value: object) -> T:
        """`value` read, or `Unwanted` / `ValueError` saying why not."""
        self.check_type(value)
        return self.read(value.strip() if isinstance(value, str) else value)

    @abstractmethod
    def read(self, value: Any) -> T:
        """A value of a type in `takes`, a string already stripped, read."""


def shown(value: object) -> str:
    """A value as an error message shows it: short, whatever its size."""
    if isinstance(value, int) and abs(value) >= 10**30:
        return "a number of more than 30 digits"
    text = repr(value)
    return text if len(text) <= 40 else text[:40] + "…"


def _note(note: str) -> str:
    return f" ({note})" if note else ""


@dataclass(frozen=True)
class Text(Parser[str]):
    """Any string: an address, a host, a Spark master, a region."""

    accepts = "a string"

    def read(self, value: str) -> str:
        return value


@dataclass(frozen=True)
class Directory(Parser[Path]):
    """A directory's path, not empty."""

    accepts = "a directory's path"

    def read(self, value: str) -> Path:
        if not value:
            raise Unwanted("not an empty string")
        return Path(value)


@dataclass(frozen=True)
class WholeNumber(Parser[int]):
    """A whole number within bounds: a TOML integer, or a string of ASCII digits."""

    least: int
    most: int
    note: str = ""  # the unit, and what a special value means
    takes = (int, float, str)  # a float only to say it is not whole

    @property
    def accepts(self) -> str:
        return f"a whole number from {self.least} to {self.most}{_note(self.note)}"

    def read(self, value: int | float | str) -> int:
        if isinstance(value, str):
            try:  # ASCII digits only, their count bounded before converting
                return whole_number(value, "", least=self.least, most=self.most)
            except NumberError:
                raise Unwanted(f"got {shown(value)}") from None
        if isinstance(value, float) or not self.least <= value <= self.most:
            raise Unwanted(f"got {shown(value)}")
        return value


@dataclass(frozen=True)
class Number(Parser[float]):
    """A number within bounds, fractions too: a TOML integer or float, or a string of
    ASCII digits with at most one `.` (no exponent, sign, `_`, `inf` or `nan`)."""

    least: int
    most: int
    above: bool = False  # every value above `least`, not `least` itself
    note: str = ""
    takes = (int, float, str)

    @property
    def accepts(self) -> str:
        bounds = f"above {self.least}, at most" if self.above else f"from {self.least} to"
        return f"a number {bounds} {self.most}{_note(self.note)}"

    def read(self, value: int | float | str) -> float:
        number: int | float
        if isinstance(value, str):
            if not _DECIMAL.fullmatch(value):
                raise Unwanted(f"got {shown(value)}")
            number = float(value)
        else:
            number = value
        low = number > self.least if self.above else number >= self.least
        if not (low and number <= self.most):  # false for NaN too
            raise Unwanted(f"got {shown(number)}")
        return float(number)


@dataclass(frozen=True)
class Flag(Parser[bool]):
    """True or false: a TOML boolean, or a string such as "true", "no" or "1"."""

    accepts = "true or false"
    takes = (bool, str)

    def read(self, value: bool | str) -> bool:
        if isinstance(value, bool):
            return value
        if value.lower() not in TRUE + FALSE:
            raise Unwanted(f"got {shown(value)}")
        return value.lower() in TRUE


@dataclass(frozen=True)
class Choice(Parser[str]):
    """One of a few words, exactly as written."""

    choices: tuple[str, ...]

    @property
    def accepts(self) -> str:
        return f"one of {', '.join(self.choices)}"

    def read(self, value: str) -> str:
        if value not in self.choices:
            raise Unwanted(f"got {shown(value)}")
        return value


@dataclass(frozen=True)
class Matching(Parser[str]):
    """A string the regular expression `pattern` matches whole."""

    pattern: str
    description: str  # what the pattern accepts, in words

    @property
    def accepts(self) -> str:
        return self.description

    def read(self, value: str) -> str:
        if not re.fullmatch(self.pattern, value):
            raise Unwanted(f"got {shown(value)}")
        return value


@dataclass(frozen=True)
class DatabaseURL(Parser[str]):
    """A metabase URL ripple can use, kept as written; empty for the embedded SQLite."""

    accepts = "sqlite:///PATH or postgresql://USER[:PASSWORD]@HOST:PORT/DATABASE"

    def read(self, value: str) -> str:
        if value:
            try:
                normalize_url(value)
            except ValueError as e:
                raise Unwanted(f"got {_masked(value)!r}: {e}") from None
        return value


def _masked(url: str) -> str:
    """The URL with any password hidden, for error messages."""
    try:
        return sa.make_url(url).render_as_string(hide_password=True)
    except sa.exc.ArgumentError:
        return url


@dataclass(frozen=True)
class EventingList(Parser[str]):
    """The phase-1 eventing list (`ripple.notifications.phase1`), checked and kept as
    written; the file may give it as a TOML list, which is joined with commas."""

    accepts = "project_id:bucket_name:topic_id tuples, comma-separated"
    takes = (str, list)

    def read(self, value: str | list[Any]) -> str:
        text = ",".join(str(v) for v in value).strip() if isinstance(value, list) else value
        parse_eventing_buckets(text)  # EventingConfigError quoting the tuple at fault
        return text


@dataclass(frozen=True)
class AllowList(Parser[str]):
    """The destination guard's allow list (`ripple.targets.guard`), checked and kept as
    written."""

    accepts = "comma-separated CIDRs, host patterns, pubsub:projects/P and unix:PATH sockets"

    def read(self, value: str) -> str:
        try:
            DestinationGuard(value)
        except ValueError as e:  # the guard names the setting itself; the row does here
            raise ValueError(str(e).removeprefix(f"{GUARD_SETTING}: ")) from None
        return value
