"""The table of settings in docs/configuration.md, rendered from the settings table, so the
page says what the code reads: `python -m ripple.config` writes it between the page's
markers (tests/test_config_table.py fails while the page differs)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ripple.config.settings import SETTINGS
from ripple.config.table import Setting

__all__ = ["BEGIN", "END", "PAGE", "render", "rewritten"]

PAGE = Path("docs/configuration.md")  # from the repository's root
BEGIN = "<!-- settings table: written by `python -m ripple.config`, do not edit -->"
END = "<!-- end of settings table -->"

# the file's tables, which have no variable: (key, default, takes, meaning)
_TABLES = (
    (
        '`topics."NAME".*`',
        "none",
        "a table per topic",
        "a topic's push endpoint and arguments (below)",
    ),
    (
        "`snapshotters.NAME.*`",
        "`default`, under `<data-dir>/snapshots/default`",
        "a table per snapshotter",
        "a snapshotter's pages, storage, index and buffers: see "
        "[docs/snapshotter.md](snapshotter.md#configuration)",
    ),
)


def render(rows: Iterable[Setting[Any]] = SETTINGS) -> str:
    """The Markdown table: a line per setting, then the file's tables."""
    lines = ["| TOML key | variable | default | takes | meaning |", "|---|---|---|---|---|"]
    for row in rows:
        cells = (f"`{row.key}`", f"`{row.variable}`", _default(row), row.parser.accepts, row.help)
        lines.append(_line(cells))
    for key, default, takes, meaning in _TABLES:
        lines.append(_line((key, "none", default, takes, meaning)))
    return "\n".join(lines) + "\n"


def rewritten(page: str) -> str:
    """`page` with the table between its markers rendered afresh; `ValueError` if it has
    no markers."""
    head, begin, rest = page.partition(BEGIN)
    _, end, tail = rest.partition(END)
    if not (begin and end):
        raise ValueError(f"the page has no {BEGIN!r} … {END!r} markers")
    return f"{head}{BEGIN}\n\n{render()}\n{END}{tail}"  # blank lines: the table a block


def _default(row: Setting[Any]) -> str:
    value = row.default
    if value == "":
        shown = "empty"
    elif isinstance(value, bool):
        shown = f"`{str(value).lower()}`"
    elif isinstance(value, float):
        shown = f"`{value:g}`"
    else:
        shown = f"`{value}`"
    return f"{shown}: {row.default_is}" if row.default_is else shown


def _line(cells: Iterable[str]) -> str:
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"
