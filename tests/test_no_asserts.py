"""No `assert` statement in `ripple`: Python drops them under `-O`, so a check that must
hold at run time is an explicit `raise`, and one that only narrows a type for mypy is too
(or a `cast`)."""

from __future__ import annotations

import ast
from pathlib import Path

import ripple

SRC = Path(ripple.__file__).resolve().parent  # the ripple under test


def asserts_in(path: Path) -> list[int]:
    """The line of every `assert` statement in the module at `path`."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Assert)]


def test_no_module_of_ripple_asserts() -> None:
    found = [
        f"{path.relative_to(SRC.parent)}:{line}"
        for path in sorted(SRC.rglob("*.py"))
        for line in asserts_in(path)
    ]
    assert found == [], "assert statements vanish under python -O; raise instead:\n" + "\n".join(
        found
    )


def test_an_assert_is_found(tmp_path: Path) -> None:
    module = tmp_path / "module.py"
    module.write_text("def f(x):\n    if x:\n        assert x > 1, 'big'\n    return x\n")
    assert asserts_in(module) == [3]
