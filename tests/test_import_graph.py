"""Imports flow one way: no module of `ripple` imports, however indirectly, a module that
imports it back. Every import counts, wherever it stands (at module level, in a function,
under `if TYPE_CHECKING:`): one put off into a function is still a dependency the other
way. `from package import name` depends on the submodule `name` when there is one, else
on the package; relative imports are resolved first."""

from __future__ import annotations

import ast
from collections import deque
from collections.abc import Iterable
from pathlib import Path

import ripple

SRC = Path(ripple.__file__).resolve().parent  # the ripple under test

Graph = dict[str, set[str]]


def modules_of(package: Path) -> dict[str, Path]:
    """Module name -> file, for every module of the package at `package`."""
    found: dict[str, Path] = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _known(name: str, modules: dict[str, Path]) -> str | None:
    """The module `name` is, or the innermost known package holding it."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The modules of `modules` that `module` imports anywhere in its file."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.update(filter(None, (_known(alias.name, modules) for alias in node.names)))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                target = submodule if submodule in modules else _known(base, modules)
                if target is not None:
                    found.add(target)
    found.discard(module)
    return found


def import_graph(package: Path) -> Graph:
    modules = modules_of(package)
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def cycles_of(graph: Graph) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[frozenset[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for successor in sorted(graph[node]):
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(frozenset(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return components


def a_cycle(graph: Graph, component: frozenset[str]) -> list[str]:
    """One shortest import cycle through the component's first module, to show."""
    start = min(component)
    came_from: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for successor in sorted(graph[node] & component):
            if successor == start:
                path = [node]
                while path[-1] != start:
                    path.append(came_from[path[-1]])
                return [*reversed(path), start]
            if successor not in came_from:
                came_from[successor] = node
                queue.append(successor)
    raise AssertionError(f"{sorted(component)} is no cycle")


def _shown(graph: Graph, components: Iterable[frozenset[str]]) -> str:
    return "\n".join(
        f"{len(c)} modules: {', '.join(sorted(c))}\n  e.g. {' -> '.join(a_cycle(graph, c))}"
        for c in components
    )


def test_no_module_imports_one_that_imports_it_back() -> None:
    graph = import_graph(SRC)
    cycles = cycles_of(graph)
    assert not cycles, "import cycles:\n" + _shown(graph, cycles)


def test_the_graph_counts_every_kind_of_import(tmp_path: Path) -> None:
    """Imports in functions and under TYPE_CHECKING, relative ones, and `from package
    import submodule` each make an edge: the checks above are not blind to them."""
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    files = {
        "__init__.py": "",
        "a.py": "def f():\n    from pkg.sub import b\n",
        "sub/__init__.py": "NAME = 1\n",
        "sub/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .. import c\n",
        "c.py": "from .sub import NAME\nimport pkg.a\n",
        "d.py": "import pkg.sub.b\n",
    }
    for name, text in files.items():
        (package / name).write_text(text, encoding="utf-8")
    graph = import_graph(package)
    assert graph == {
        "pkg": set(),
        "pkg.a": {"pkg.sub.b"},
        "pkg.c": {"pkg.sub", "pkg.a"},
        "pkg.d": {"pkg.sub.b"},
        "pkg.sub": set(),
        "pkg.sub.b": {"pkg.c"},
    }
    assert cycles_of(graph) == [frozenset({"pkg.a", "pkg.sub.b", "pkg.c"})]
    assert a_cycle(graph, cycles_of(graph)[0]) == ["pkg.a", "pkg.sub.b", "pkg.c", "pkg.a"]


# ripple's packages from the top down: each imports only packages on lines below its own
# (docs/architecture.md draws them). Two on one line import neither of each other.
LAYERS: list[tuple[str, ...]] = [
    ("__main__",),
    ("cli",),
    ("gateway", "pipeline"),
    ("config",),
    ("targets",),
    ("snapshotter", "subscriptions"),
    ("notifications",),
    ("identity",),
    ("metabase",),
    ("events",),
    ("changestream",),
    ("numbers", "tls"),
    ("ripple",),  # the package itself: its version
]
# the one database holds every package's tables, so the migrations' schema check gathers
# them all: the one module that looks up from its layer
LOOKS_UP = {"ripple.metabase.migrate"}


def _package(module: str) -> str:
    return module.split(".")[1] if "." in module else module


def _upward(graph: Graph) -> list[str]:
    level = {package: i for i, line in enumerate(LAYERS) for package in line}
    found = []
    for module, imported in sorted(graph.items()):
        here = _package(module)
        for target in sorted(imported):
            there = _package(target)
            if there != here and level[there] <= level[here] and module not in LOOKS_UP:
                found.append(f"{module} imports {target}")
    return found


def test_every_package_has_a_layer() -> None:
    packages = {_package(module) for module in import_graph(SRC)}
    placed = {package for line in LAYERS for package in line}
    assert packages == placed


def test_packages_import_only_the_layers_below_them() -> None:
    assert _upward(import_graph(SRC)) == []


def test_an_import_up_a_layer_is_found() -> None:
    graph = import_graph(SRC)
    graph["ripple.events.names"] = graph["ripple.events.names"] | {"ripple.metabase.db"}
    assert _upward(graph) == ["ripple.events.names imports ripple.metabase.db"]
