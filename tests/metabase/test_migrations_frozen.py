"""Migration steps are frozen: a step, and the helpers steps share, import nothing of ripple's
but those frozen helpers, so a later edit to a schema or to the change stream's code cannot
change what an old step does on a fresh database; and what the frozen steps say of each
stream's columns is what today's models say."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import sqlalchemy as sa

import ripple.metabase.migrations
from ripple.changestream.schema import change_streams
from ripple.changestream.values import column_types
from ripple.changestream.writer import load_definitions
from ripple.metabase import Metabase
from ripple.metabase.schema import buckets, objects

PACKAGE = "ripple.metabase.migrations"
HERE = Path(ripple.metabase.migrations.__file__).parent
FROZEN = f"{PACKAGE}.frozen"
STEPS = sorted((HERE / "versions").glob("[0-9]*.py"))
MODULES = [*STEPS, *sorted((HERE / "frozen").glob("*.py"))]


def imported(path: Path) -> list[str]:
    """The modules `path` imports, relative imports resolved against its package."""
    package = f"{PACKAGE}.{path.parent.name}".split(".")
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            # `from package import module` imports a module too
            names.extend(f"{module}.{alias.name}" for alias in node.names)
    return names


def test_there_are_steps_and_frozen_helpers() -> None:
    assert len(STEPS) >= 17
    assert any(p.parent.name == "frozen" and p.name != "__init__.py" for p in MODULES)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_imports_nothing_of_ripple_that_may_change(path: Path) -> None:
    live = [
        name
        for name in imported(path)
        if (name == "ripple" or name.startswith("ripple."))
        and not (name == FROZEN or name.startswith(f"{FROZEN}."))
    ]
    assert live == []


def test_the_check_sees_a_live_import(tmp_path: Path) -> None:
    """The check above is not vacuous: every way of importing a live module is seen."""
    step = tmp_path / "versions" / "9999_step.py"
    step.parent.mkdir()
    step.write_text(
        "import ripple.metabase.schema\n"
        "from ripple.changestream.ddl import alter_change_stream\n"
        "from ripple.metabase.migrations.frozen import change_streams_0002\n"
        "from .. import env\n"
    )
    assert imported(step) == [
        "ripple.metabase.schema",
        "ripple.changestream.ddl.alter_change_stream",
        "ripple.metabase.migrations.frozen.change_streams_0002",
        "ripple.metabase.migrations.env",
    ]


def test_each_stream_names_its_columns_as_the_models_do(db: Metabase) -> None:
    """The frozen steps give each recorded column's type and ordinal position themselves; the
    newest definition of each stream, which readers hand out with the records written from
    now on, agrees with the models the writer encodes the values by."""
    tables = {"objects": objects, "buckets": buckets}
    with db.read() as conn:
        newest = {d.name: d for d in load_definitions(conn)}
        assert set(newest) == {"bucket_eventing", "project_eventing"}
        for definition in newest.values():
            stored = conn.execute(
                sa.select(change_streams.c.column_types).where(
                    change_streams.c.name == definition.name,
                    change_streams.c.version == definition.version,
                )
            ).scalar_one()
            assert stored == column_types(tables[definition.table], definition.columns)
