"""The layer order, function-level imports included: parse -> lower -> templates -> runtime ->
kernel -> library, with the leaf modules (facts: errors, dtypes, constants, activations,
target, switches, the embedded prelude and kernels) below every stage and the entry points
(the package, the CLI, the demo, the docs generator) above. Inside lower/, its stages in order:
the IR and the name allocator, the op table, the builder, then the passes with the interface
they decide and the Hopper planner.

Input: the source of every module of teeny_tx/ (``ast``; nothing imported). A module imports
only modules of its own layer or below, at module level or inside a function; imports under
``if TYPE_CHECKING:`` (annotations) are not counted. tests/test_imports.py checks cycles.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "teeny_tx"
LEAVES = {"errors", "dtypes", "constants", "activations", "target", "switches", "_prelude"}
LEAVES |= {"_kernels", "progress"}
# first part of the module name below teeny_tx -> its layer (higher may import lower)
LAYERS = {name: 0 for name in LEAVES} | {
    "parse": 1,
    "lower": 2,
    "templates": 3,
    "interp": 3,
    "runtime": 4,
    "kernel": 5,
    "library": 6,
    "frontend": 6,
    "display": 5,  # the rich display of kernel.py's objects, beside it
    "notebook": 6,
    "profiling": 6,
    "profile_cli": 7,
    "triton": 6,
    "nn": 6,
    "linalg": 6,
    "torch": 6,
    "__init__": 7,
    "cli": 7,
    "demo": 7,
    "docs": 7,
}
# inside lower/: the part below teeny_tx.lower -> its stage (a stage may import earlier ones).
# The interface is the passes' last decision (passes/driver.py builds it from what they
# decided, and it reads their layouts and pipelines), so it shares their stage.
LOWER = {
    "__init__": 0,
    "ir": 0,
    "names": 0,
    "ops": 1,
    "build": 2,
    "passes": 3,
    "interface": 3,
    "hopper": 3,
}


def _name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts.pop()
    return ".".join(parts)


MODULES = {_name(p): p for p in sorted(PACKAGE.rglob("*.py")) if "__pycache__" not in p.parts}


def layer(module: str) -> tuple[int, int]:
    """(the layer of the package's part, the stage inside lower/: 0 elsewhere)."""
    parts = module.split(".")
    top = LAYERS[parts[1] if len(parts) > 1 else "__init__"]
    if parts[1:2] == ["lower"]:
        return top, LOWER[parts[2] if len(parts) > 2 else "__init__"]
    return top, 0


def _imports(node: ast.AST, inside: bool = False):
    """(import node, whether it is inside a function), skipping ``if TYPE_CHECKING:``."""
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        yield node, inside
    if isinstance(node, ast.If) and getattr(node.test, "id", getattr(node.test, "attr", "")) == (
        "TYPE_CHECKING"
    ):
        children = node.orelse
    else:
        children = list(ast.iter_child_nodes(node))
    inner = inside or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
    for child in children:
        yield from _imports(child, inner)


def _targets(name: str):
    """(imported teeny_tx module, line, inside a function) for each import of ``name``."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node, inside in _imports(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            bases = [a.name for a in node.names]
        elif node.level:
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            bases = [".".join(base + ([node.module] if node.module else []))]
        else:
            bases = [node.module or ""]
        for base in bases:
            if not base.startswith("teeny_tx"):
                continue
            names = [a.name for a in node.names] if isinstance(node, ast.ImportFrom) else []
            subs = [f"{base}.{n}" for n in names if f"{base}.{n}" in MODULES]
            for target in subs or [base]:
                yield target, node.lineno, inside


def test_every_module_has_a_layer() -> None:
    assert all(layer(m) >= (0, 0) for m in MODULES)
    parts = {m.split(".")[2] for m in MODULES if m.startswith("teeny_tx.lower.")}
    assert parts == set(LOWER) - {"__init__"}, "every part of lower/ has a stage, and only those"


def test_no_import_goes_up_a_layer() -> None:
    bad = [
        f"{MODULES[m].relative_to(PACKAGE.parent)}:{line}: {t} (layer {_show(t)} > {_show(m)}"
        f"{', in a function' if inside else ''})"
        for m in MODULES
        for t, line, inside in _targets(m)
        if t != "teeny_tx" and layer(t) > layer(m)
    ]
    assert not bad, "imports up the layer order:\n" + "\n".join(bad)


def _show(module: str) -> str:
    top, stage = layer(module)
    return f"{top}.{stage}" if module.startswith("teeny_tx.lower") else str(top)


def test_lower_stages_are_ordered() -> None:
    """The probe of the stage order inside lower/: the builder is above the op table and the
    IR, below the passes."""
    assert layer("teeny_tx.lower.ir") < layer("teeny_tx.lower.ops.table")
    assert layer("teeny_tx.lower.ops.table") < layer("teeny_tx.lower.build.builder")
    assert layer("teeny_tx.lower.build.builder") < layer("teeny_tx.lower.passes.layout")
    assert layer("teeny_tx.lower.passes.driver") == layer("teeny_tx.lower.interface")
    assert layer("teeny_tx.lower.hopper.matmul") < layer("teeny_tx.templates.hopper")


def test_the_scan_sees_function_level_imports() -> None:
    """The probe the test relies on: an import inside a function is found and marked."""
    tree = ast.parse("def f():\n    from .runtime import launch\n")
    assert [inside for _, inside in _imports(tree)] == [True]
    tree = ast.parse("if TYPE_CHECKING:\n    from .kernel import Kernel\n")
    assert list(_imports(tree)) == []
