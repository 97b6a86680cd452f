"""The settings table: each row's parser types its value and refuses a bad one with one line
naming the key and variable, and docs/configuration.md's table is the table rendered."""

from __future__ import annotations

import typing
from pathlib import Path
from typing import Any

import pytest

from ripple.config import SETTINGS, ConfigError, Setting, Settings, load_settings
from ripple.config.parsers import (
    AllowList,
    Choice,
    DatabaseURL,
    Directory,
    EventingList,
    Flag,
    Matching,
    Number,
    Parser,
    Text,
    WholeNumber,
)
from ripple.config.reference import BEGIN, END, render, rewritten

ROOT = Path(__file__).resolve().parents[1]
ROWS = {row.key: row for row in SETTINGS}

# a variable's value each kind refuses (Text takes any string: only a TOML type is wrong)
BAD: dict[type[Parser[Any]], str] = {
    Directory: "  ",
    WholeNumber: "12x",
    Number: "1e3",
    Flag: "maybe",
    Choice: "staging",
    Matching: "Not One",
    DatabaseURL: "mysql://u@h/d",
    EventingList: "photos",
    AllowList: "https://hooks.example",
}
HUGE = "9" * 5000  # past Python's 4300-digit int() limit


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def _error(config: Path | None = None, **environ: str) -> str:
    with pytest.raises(ConfigError) as info:
        load_settings(config, environ=environ)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_every_setting_has_a_field_key_and_variable_of_its_own() -> None:
    assert len({row.attribute for row in SETTINGS}) == len(SETTINGS)
    assert len(ROWS) == len(SETTINGS)
    assert len({row.variable for row in SETTINGS}) == len(SETTINGS)
    assert all(row.variable.startswith("RIPPLE_") for row in SETTINGS)
    assert all(row.help and "\n" not in row.help for row in SETTINGS)


@pytest.mark.parametrize("row", SETTINGS, ids=lambda row: row.key)
def test_a_setting_takes_its_default_written_as_a_variable(row: Setting[Any]) -> None:
    text = str(row.default).lower() if isinstance(row.default, bool) else str(row.default)
    assert load_settings(environ={row.variable: text}) == Settings()


@pytest.mark.parametrize(
    ("variable", "text", "typed"),
    [
        ("RIPPLE_DATA_DIR", "/srv/ripple", Path("/srv/ripple")),
        ("RIPPLE_S3_DELETE_RATE", "2.5", 2.5),
        ("RIPPLE_S3_DELETE_RATE", "7", 7.0),
        ("RIPPLE_S3_DELETE_BURST", "007", 7),
        ("RIPPLE_S3_WORKERS", " 3 ", 3),
        ("RIPPLE_LIFECYCLE_INTERVAL", "0", 0),
        ("RIPPLE_TOPICS_ALLOW_SECRETS_IN_CLEARTEXT", "Yes", True),
        ("RIPPLE_TOPICS_ALLOW_SECRETS_IN_CLEARTEXT", "", False),
    ],
)
def test_a_variable_is_typed_once_when_loaded(variable: str, text: str, typed: object) -> None:
    row = next(row for row in SETTINGS if row.variable == variable)
    value = getattr(load_settings(environ={variable: text}), row.attribute)
    assert value == typed
    assert type(value) is type(typed)


def test_every_field_of_the_table_has_the_type_its_parser_gives() -> None:
    hints = typing.get_type_hints(Settings)
    for row in SETTINGS:
        assert isinstance(row.default, hints[row.attribute]), row.key


def test_every_kind_of_value_has_a_bad_example() -> None:
    kinds = {type(row.parser) for row in SETTINGS}
    assert kinds - {Text} <= set(BAD)


@pytest.mark.parametrize(
    "row", [row for row in SETTINGS if type(row.parser) in BAD], ids=lambda row: row.key
)
def test_a_bad_variable_is_one_line_naming_the_setting(row: Setting[Any]) -> None:
    message = _error(**{row.variable: BAD[type(row.parser)]})
    assert message.startswith(f"{row.key} ({row.variable})")
    assert f"must be {row.parser.accepts}, " in message or message.startswith(f"{row.name}: ")
    assert len(message) < 400


@pytest.mark.parametrize("row", SETTINGS, ids=lambda row: row.key)
def test_a_file_value_of_a_wrong_type_is_one_line_naming_file_and_setting(
    tmp_path: Path, row: Setting[Any]
) -> None:
    config = tmp_path / "conf.toml"
    config.write_text(f"{row.key} = 1979-05-27T07:32:00Z\n", encoding="utf-8")
    message = _error(config)
    assert message.startswith(f"{config}: {row.key} ({row.variable}) must be ")
    assert message.endswith("got a TOML datetime")


def test_a_variable_replaces_the_file_value_whose_type_is_still_checked(tmp_path: Path) -> None:
    config = tmp_path / "conf.toml"
    config.write_text("[s3]\naddress = 9000\n", encoding="utf-8")
    message = _error(config, RIPPLE_S3_ADDRESS="127.0.0.1:9100")
    assert message.startswith(f"{config}: s3.address (RIPPLE_S3_ADDRESS) must be a string")
    config.write_text('[s3]\naddress = "0.0.0.0:9000"\n', encoding="utf-8")
    settings = load_settings(config, environ={"RIPPLE_S3_ADDRESS": "127.0.0.1:9100"})
    assert settings.s3_address == "127.0.0.1:9100"


NUMERIC = [row for row in SETTINGS if isinstance(row.parser, WholeNumber | Number)]


@pytest.mark.parametrize("row", NUMERIC, ids=lambda row: row.key)
def test_an_integer_of_5000_digits_is_refused_cleanly(tmp_path: Path, row: Setting[Any]) -> None:
    from_variable = _error(**{row.variable: HUGE})
    assert from_variable.startswith(f"{row.name} must be {row.parser.accepts}, got '999")
    assert len(from_variable) < 300
    config = tmp_path / "conf.toml"
    config.write_text(f'{row.key} = "{HUGE}"\n', encoding="utf-8")  # a string in the file
    assert _error(config).startswith(f"{config}: {row.name} must be ")
    config.write_text(f"{row.key} = {'9' * 4000}\n", encoding="utf-8")  # a TOML integer
    assert _error(config).endswith("got a number of more than 30 digits")


def test_the_settings_table_of_the_docs_is_the_rendered_table() -> None:
    page = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    assert page == rewritten(page), (
        "docs/configuration.md's settings table differs from ripple.config.settings: "
        "regenerate it with `python -m ripple.config` in the repository's root"
    )


def test_the_rendered_table_has_a_line_per_setting_and_file_table() -> None:
    lines = render().splitlines()
    assert len(lines) == 2 + len(SETTINGS) + 2
    for row, line in zip(SETTINGS, lines[2:], strict=False):
        assert line.startswith(f"| `{row.key}` | `{row.variable}` | ")
        assert row.parser.accepts in line
    with pytest.raises(ValueError, match="markers"):
        rewritten(f"# Configuration\n{BEGIN}\n")
    assert rewritten(f"a\n{BEGIN}\nstale\n{END}\nb\n") == f"a\n{BEGIN}\n\n{render()}\n{END}\nb\n"
