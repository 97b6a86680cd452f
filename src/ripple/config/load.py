"""Loading the settings: the embedded defaults, then `ripple.toml` (or `--config FILE`),
then `RIPPLE_*` variables, each value read by its row of the settings table.

The value in force is the one read: a variable replaces the file's value, of which only the
TOML type is checked then. A problem in a value of the file is reported with the file's
name first.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ripple.config.settings import SETTINGS, Settings
from ripple.config.table import ConfigError
from ripple.notifications.topics import parse_topics

__all__ = ["DEFAULT_CONFIG_FILE", "load_settings"]

DEFAULT_CONFIG_FILE = "ripple.toml"

_ROWS = {row.key: row for row in SETTINGS}


@dataclass
class _File:
    """What a configuration file says: a value by key, and its topic and snapshotter
    tables as `Settings` fields."""

    where: str = ""  # how error messages name the file: "ripple.toml: "
    values: dict[str, Any] = field(default_factory=dict)
    tables: dict[str, Any] = field(default_factory=dict)


def load_settings(
    config_file: str | os.PathLike[str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> Settings:
    """Read settings: defaults, then the TOML file, then `RIPPLE_*` environment variables.

    `config_file=None` reads `ripple.toml` in the working directory if there is one; a
    named file that does not exist is an error.
    """
    env = os.environ if environ is None else environ
    if config_file is not None:
        path = Path(config_file)
        if not path.is_file():
            raise ConfigError(f"config file {path} does not exist")
        file = _read(path)
    elif Path(DEFAULT_CONFIG_FILE).is_file():
        file = _read(Path(DEFAULT_CONFIG_FILE))
    else:
        file = _File()
    values = dict(file.tables)
    for row in SETTINGS:
        if row.variable in env:
            if row.key in file.values:
                row.check_type(file.values[row.key], file.where)
            values[row.attribute] = row.parse(env[row.variable])
        elif row.key in file.values:
            values[row.attribute] = row.parse(file.values[row.key], file.where)
    settings = Settings(**values)
    settings.snapshotters  # noqa: B018 - checks every [snapshotters.NAME] table
    settings.s3_tls  # noqa: B018 - checks that s3.tls-cert and s3.tls-key come together
    settings.metrics_tls  # noqa: B018 - and metrics.tls-cert and metrics.tls-key
    return settings


def _read(path: Path) -> _File:
    """The file's values by key, unread but for its `[topics."NAME"]` tables; `ConfigError`
    for malformed TOML or an unknown key."""
    file = _File(where=f"{path}: ")
    try:
        with path.open("rb") as f:
            raw = tomllib.load(f)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
    except ValueError as exc:  # an integer of more digits than Python converts (4300)
        raise ConfigError(f"{path}: not valid TOML: an integer is too long to read") from exc
    if "topics" in raw:
        tables = raw.pop("topics")
        if not isinstance(tables, Mapping):
            raise ConfigError(f'{path}: topics must be tables, e.g. [topics."NAME"]')
        # `[topics]` also holds settings for every topic: scalars, not tables
        tables = dict(tables)
        for key in [k for k, v in tables.items() if f"topics.{k}" in _ROWS]:
            if not isinstance(tables[key], Mapping):
                raw[f"topics.{key}"] = tables.pop(key)
        try:
            file.tables["topics"] = parse_topics(tables)
        except ValueError as e:
            raise ConfigError(f"{path}: {e}") from e
    if "snapshotters" in raw:
        tables = raw.pop("snapshotters")
        if not isinstance(tables, Mapping):
            raise ConfigError(f"{path}: snapshotters must be tables, e.g. [snapshotters.NAME]")
        file.tables["snapshotter_tables"] = dict(tables)
    for key, value in _flatten(raw).items():
        if key not in _ROWS:
            known = ", ".join([*sorted(_ROWS), 'topics."NAME".ARGUMENT', "snapshotters.NAME.KEY"])
            raise ConfigError(f"{path}: unknown key {key!r} (known keys: {known})")
        file.values[key] = value
    return file


def _flatten(table: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in table.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(_flatten(value, f"{path}."))
        else:
            out[path] = value
    return out
