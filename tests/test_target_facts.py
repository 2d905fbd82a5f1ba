"""The target as data (teeny_tx/target.py): every limit and feature of a GPU architecture is a
field of ``Target``, each field is read by some stage, and no other module spells an
architecture's name, its register file or its shared memory as a literal.

Input: the source of every module of teeny_tx/ (read with ``ast``; docstrings and comments are
prose and may name architectures).
"""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

import pytest

from teeny_tx.lower import ir
from teeny_tx.lower.passes import warp_spec
from teeny_tx.target import HOPPER, Target

PACKAGE = Path(__file__).resolve().parents[1] / "teeny_tx"
GENERATED = {"_prelude.py", "_kernels.py"}
# the limits of the architectures we know: registers per SM, shared memory per block (each
# compute capability's), 255 registers per thread; 227 * 1024 is how the 232448 is often spelt
LIMITS = {65536, 232448, 166912, 101376, 49152, 255}
ARCH = re.compile(r"sm_\d+[af]?")


def _modules() -> dict[Path, ast.Module]:
    return {
        p: ast.parse(p.read_text(encoding="utf-8"), str(p))
        for p in sorted(PACKAGE.rglob("*.py"))
        if p.name not in GENERATED and p.name != "target.py" and "__pycache__" not in p.parts
    }


def _docstrings(tree: ast.Module) -> set[int]:
    """ids of the docstring constants (module, classes, functions)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


def _literals(tree: ast.Module) -> list[tuple[int, object]]:
    """(line, value) of each hard-coded limit or architecture name in ``tree``."""
    skip = _docstrings(tree)
    found: list[tuple[int, object]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and id(node) not in skip:
            v = node.value
            limit = isinstance(v, int) and not isinstance(v, bool) and v in LIMITS
            if limit or (isinstance(v, str) and ARCH.fullmatch(v)):
                found.append((node.lineno, v))
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            sides = [getattr(s, "value", None) for s in (node.left, node.right)]
            if 1024 in sides and any(s in (227, 228) for s in sides):
                found.append((node.lineno, "227 * 1024"))
    return found


def test_no_module_hard_codes_a_limit_or_an_architecture() -> None:
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{line}: {value!r}"
        for path, tree in _modules().items()
        for line, value in _literals(tree)
    ]
    assert not found, "read these from teeny_tx.target (a Target's fields):\n" + "\n".join(found)


def test_the_scan_finds_what_it_looks_for() -> None:
    tree = ast.parse(
        '"""sm_90a in a docstring is prose."""\nA = 232448\nB = 227 * 1024\nC = "sm_90a"\n'
    )
    assert [line for line, _ in _literals(tree)] == [2, 3, 4]


def test_every_field_is_read_by_a_stage() -> None:
    """Each field of Target is read (``x.field``) somewhere in the package outside target.py:
    a field nobody reads is removed, not kept as decoration."""
    read = {
        node.attr
        for tree in _modules().values()
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
    }
    fields = {f.name for f in dataclasses.fields(Target)}
    assert fields - read == set()


@pytest.mark.parametrize("arch", ["sm_80", "sm_90", "sm_90a"])
def test_the_kernel_carries_its_target(arch) -> None:
    """The passes read the target from the kernel they decide (``ir.Kernel.target``)."""
    import teeny_tx as tx

    k = tx.compile("kernel k(f32 *out) { store(out + arange(0, 32), 1.0f); }", name="k.c").k
    spec = k.specialize("f32", target=arch)
    assert isinstance(spec.kernel, ir.Kernel) and spec.kernel.target == Target.from_arch(arch)


def test_register_budgets_follow_the_target() -> None:
    """The warp-specialised register counts come from the target's register file: half the
    file, half the registers at launch (capped by the per-thread limit)."""
    half = dataclasses.replace(HOPPER, registers_per_sm=HOPPER.registers_per_sm // 2)
    assert warp_spec.entry_registers(8) == 168  # 65536 / 384, a multiple of 8
    assert warp_spec.entry_registers(8, half) == 80  # 32768 / 384 = 85 -> 80
    few = dataclasses.replace(HOPPER, max_registers_per_thread=64)
    assert warp_spec.entry_registers(4, few) == 64


def test_a_target_without_mma_sync_refuses_tensor_core_dots() -> None:
    import teeny_tx as tx

    src = """
kernel mm(f32 *out, const f16 *a, const f16 *b)
{
    tile r = arange(0, 16);
    tile x = load(a + expand_dims(r, 1) * 16 + expand_dims(r, 0));
    tile y = load(b + expand_dims(r, 1) * 16 + expand_dims(r, 0));
    store(out + expand_dims(r, 1) * 16 + expand_dims(r, 0), dot(x, y));
}
"""
    k = tx.compile(src, name="mm.c").mm
    with pytest.raises(tx.CompileError, match=r"mma.sync, sm_80 on\); sm_75 has none"):
        k.specialize("f32", "f16", "f16", target="sm_75")
    assert "tx::MmaF16" in k.cuda_source("f32", "f16", "f16", target="sm_80")
