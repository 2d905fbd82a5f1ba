"""The package's import structure: no cycles, no private names imported across modules, and the
stages import one way (parse -> lower -> templates -> runtime; the interpreter and the kernel
library on top).

Input: the source of every module of teeny_tx/ (read with ``ast``, nothing imported). Every
import counts, at module level or inside a function, except those under ``if TYPE_CHECKING:``
(annotations only).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "teeny_tx"

# Which first-level parts of the package each stage may import (besides the leaf modules:
# errors, dtypes, constants, target, _prelude, _kernels). A stage never imports a later one.
LEAVES = {
    "errors",
    "dtypes",
    "constants",
    "activations",
    "target",
    "switches",
    "_prelude",
    "_kernels",
}
MAY_IMPORT = {
    "parse": set(),
    "lower": {"parse"},
    "templates": {"parse", "lower"},
    "interp": {"parse", "lower"},
}


def module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py")) if "__pycache__" not in p.parts}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(node: ast.AST):
    """Import nodes under ``node``, skipping the bodies of ``if TYPE_CHECKING:``."""
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        yield node
    type_only = isinstance(node, ast.If) and _is_type_checking(node)
    for child in node.orelse if type_only else ast.iter_child_nodes(node):
        yield from _imports(child)


def edges(name: str) -> list[tuple[str, str, int]]:
    """(imported module, imported name or '', line) for each import of module ``name``."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = []
    for node in _imports(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(a.name, "", node.lineno) for a in node.names if a.name.startswith("teeny_tx")]
            continue
        if node.level:
            base = package.split(".")
            base = base[: len(base) - node.level + 1]
            target = ".".join(base + ([node.module] if node.module else []))
        else:
            target = node.module or ""
        if not target.startswith("teeny_tx"):
            continue
        for alias in node.names:
            sub = f"{target}.{alias.name}"
            if sub in MODULES:  # `from . import ops`: the submodule itself
                out.append((sub, "", node.lineno))
            else:
                out.append((target, alias.name, node.lineno))
    return out


GRAPH = {name: sorted({t for t, _, _ in edges(name) if t in MODULES}) for name in MODULES}


def test_the_modules_are_found() -> None:
    found = {"teeny_tx.kernel", "teeny_tx.lower.build.builder", "teeny_tx.runtime.binder"}
    assert found <= set(GRAPH)


def test_no_import_cycles() -> None:
    """Tarjan's strongly connected components of the import graph: each must be one module.
    A package's ``__init__`` counts as a module: importing a name from a package runs it."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in GRAPH[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in GRAPH[v]:
                cycles.append(sorted(component))

    for v in GRAPH:
        if v not in index:
            visit(v)
    assert cycles == [], "import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)


def test_no_private_names_across_modules() -> None:
    bad = [
        f"{MODULES[name].relative_to(PACKAGE.parent)}:{line}: {target}.{imported}"
        for name in MODULES
        for target, imported, line in edges(name)
        if imported.startswith("_") and not imported.startswith("__") and target != name
    ]
    assert bad == [], "private names imported from another module:\n" + "\n".join(bad)


@pytest.mark.parametrize("stage", sorted(MAY_IMPORT))
def test_stages_import_one_way(stage: str) -> None:
    allowed = MAY_IMPORT[stage] | {stage} | LEAVES
    bad = set()
    for name in MODULES:
        parts = name.split(".")
        if len(parts) < 2 or parts[1] != stage:
            continue
        for target, _, line in edges(name):
            first = target.split(".")[1] if "." in target else ""
            if target in MODULES and first not in allowed:
                bad.add(f"{MODULES[name].relative_to(PACKAGE.parent)}:{line}: {target}")
    assert not bad, f"teeny_tx.{stage} imports a later stage:\n" + "\n".join(sorted(bad))
