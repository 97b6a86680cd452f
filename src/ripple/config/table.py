"""The rows of the settings table: each a setting's key in the file, its environment
variable, its parser, its default and a line of help, carried by the `Settings` field it
fills (`setting`), and the one-line `ConfigError` it makes of a bad value."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from ripple.config.parsers import Parser, Unwanted

__all__ = ["ConfigError", "Setting", "rows_of", "setting"]

T = TypeVar("T")

_ROW = "setting"  # the key of a field's metadata that holds its row


class ConfigError(ValueError):
    """A configuration value is missing, unknown or malformed."""


@dataclass(frozen=True)
class Setting(Generic[T]):
    """One row of the settings table."""

    key: str  # in ripple.toml, dotted: `s3.delete-rate` is `delete-rate` of `[s3]`
    variable: str
    parser: Parser[T]
    default: T
    help: str  # one line: what the setting is for (docs/configuration.md's "meaning")
    default_is: str = ""  # what the default means, where the value alone does not say
    attribute: str = ""  # the `Settings` field (filled in by `rows_of`)

    @property
    def name(self) -> str:
        """How messages name the setting: `s3.delete-rate (RIPPLE_S3_DELETE_RATE)`."""
        return f"{self.key} ({self.variable})"

    def parse(self, value: object, where: str = "") -> T:
        """`value` (from the file, or the variable) read; `ConfigError` beginning with
        `where` (the file's name) otherwise."""
        try:
            return self.parser.parse(value)
        except ValueError as e:
            raise self._error(e, where) from None

    def check_type(self, value: object, where: str = "") -> None:
        """`ConfigError` unless the file's `value` is of a TOML type the setting takes."""
        try:
            self.parser.check_type(value)
        except ValueError as e:
            raise self._error(e, where) from None

    def _error(self, problem: ValueError, where: str) -> ConfigError:
        if isinstance(problem, Unwanted):
            return ConfigError(f"{where}{self.name} must be {self.parser.accepts}, {problem}")
        return ConfigError(f"{where}{self.name}: {problem}")


def setting(
    key: str, variable: str, parser: Parser[T], default: T, help: str, *, default_is: str = ""
) -> T:
    """A `Settings` field that is a row of the settings table (typed as its value, so the
    field's annotation, the parser and the default must agree)."""
    row = Setting(key, variable, parser, default, help, default_is)
    return dataclasses.field(default=default, metadata={_ROW: row})


def rows_of(cls: type) -> tuple[Setting[Any], ...]:
    """The rows of a dataclass's fields, in their order, each naming its field."""
    return tuple(
        dataclasses.replace(f.metadata[_ROW], attribute=f.name)
        for f in dataclasses.fields(cls)
        if _ROW in f.metadata
    )
