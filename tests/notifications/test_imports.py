"""Imports flow one way: the targets import the model (`ripple.notifications`) and the pull
subscriptions (`ripple.subscriptions`), never the other way round, not even for typing; and
the gateway imports the model, which speaks no HTTP."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import ripple

PACKAGE = Path(ripple.__file__).resolve().parent  # the ripple under test


def imported(path: Path) -> set[str]:
    """Every module a source file imports, wherever the import statement is."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


@pytest.mark.parametrize("package", ["notifications", "subscriptions"])
def test_the_package_imports_nothing_of_the_targets(package: str) -> None:
    found = {
        f"{path.relative_to(PACKAGE)}: {name}"
        for path in sorted((PACKAGE / package).rglob("*.py"))
        for name in imported(path)
        if name == "ripple.targets" or name.startswith("ripple.targets.")
    }
    assert found == set()


def test_the_model_imports_nothing_of_the_gateway() -> None:
    found = {
        f"{path.relative_to(PACKAGE)}: {name}"
        for path in sorted((PACKAGE / "notifications").rglob("*.py"))
        for name in imported(path)
        if name == "ripple.gateway" or name.startswith("ripple.gateway.")
    }
    assert found == set()
