"""How tests/ is laid out: a test module takes nothing from another test module, so each can
be read, run, moved or deleted on its own; what several of them use lives in their package's
`helpers.py` (or a module named for what it holds), and the fixtures in its `conftest.py`.
The tests of the `ripple` command as a whole are under tests/cli/, a package's own commands
beside the package's other tests."""

from __future__ import annotations

import ast
import contextlib
from collections.abc import Iterator
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_names(tree: ast.AST, package: str) -> Iterator[tuple[int, str]]:
    """(line, module or `module.name`) of every import in `tree`, wherever it stands, also in
    a string that is a script (one a test hands to another Python process)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            yield node.lineno, base
            for alias in node.names:
                yield node.lineno, f"{base}.{alias.name}"
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            for _, name in imported_names(script_in(node.value), package):
                yield node.lineno, name


def script_in(text: str) -> ast.AST:
    """`text` parsed, when it is Python that imports something; else an empty module."""
    if "import " in text:
        with contextlib.suppress(SyntaxError):
            return ast.parse(text)
    return ast.Module(body=[], type_ignores=[])


def imports_of_test_modules(root: Path) -> list[str]:
    """`file:line imports module` for each import, in any module under `root`, of a test
    module (a `test_*.py`) under `root`."""
    paths = sorted(root.rglob("*.py"))
    test_modules = {module_name(p, root) for p in paths if p.name.startswith("test_")}
    found: list[str] = []
    for path in paths:
        module = module_name(path, root)
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for line, name in imported_names(tree, package):
            if name in test_modules:
                found.append(f"{path.relative_to(root.parent)}:{line} imports {name}")
    return sorted(set(found))


def test_no_test_module_takes_anything_from_another() -> None:
    found = imports_of_test_modules(TESTS)
    assert found == [], "move what is shared to helpers.py or conftest.py:\n" + "\n".join(found)


def test_every_way_of_importing_a_test_module_is_seen(tmp_path: Path) -> None:
    """Absolute, relative, `from package import test_module`, in a function, and in a script
    run by another process: none slips past the check above; helpers and conftest do not
    count."""
    root = tmp_path / "suite"
    (root / "pkg").mkdir(parents=True)
    files = {
        "__init__.py": "",
        "helpers.py": "",
        "test_top.py": "import suite.pkg.test_b\n",
        "pkg/__init__.py": "",
        "pkg/conftest.py": "from suite.helpers import x\n",
        "pkg/test_a.py": "from suite.pkg.test_b import x\nfrom ..pkg.test_b import y\n",
        "pkg/test_b.py": "def f():\n    from . import test_a\n",
        "pkg/test_c.py": (
            "from suite.pkg.helpers import test_thing\n"
            "SCRIPT = 'import sys\\nfrom suite.test_top import x\\n'\n"
        ),
    }
    for name, text in files.items():
        (root / name).write_text(text, encoding="utf-8")
    assert imports_of_test_modules(root) == [
        "suite/pkg/test_a.py:1 imports suite.pkg.test_b",
        "suite/pkg/test_a.py:2 imports suite.pkg.test_b",
        "suite/pkg/test_b.py:2 imports suite.pkg.test_a",
        "suite/pkg/test_c.py:2 imports suite.test_top",
        "suite/test_top.py:1 imports suite.pkg.test_b",
    ]


def test_the_commands_tests_are_under_cli() -> None:
    assert sorted(p.name for p in TESTS.glob("test_cli*.py")) == []
    assert (TESTS / "cli" / "__init__.py").is_file()
