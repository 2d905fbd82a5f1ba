"""Every fact has one home, and its consumers agree with it.

The op table (teeny_tx/lower/op_table.py, ops.py, ops_random.py) against the prelude's
prototypes, the builder's typing methods, the interpreter's and the emitter's handlers and the
reference page; the dtype table (teeny_tx/dtypes.py) against the prelude's typedefs and the
runtime's lookups; the named constants (teeny_tx/constants.py) against the prelude's
declarations and the device header's enum; the activation table
(teeny_tx/library/activations.py) against what kernels/matmul.c computes for each code.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from teeny_tx import _prelude
from teeny_tx.constants import CONSTANTS, MEMORY_ORDERS, PRECISIONS, SCOPES
from teeny_tx.docs import prelude_prototypes, reference_markdown
from teeny_tx.dtypes import C_NAMES, DTYPES, TORCH_NAMES, from_name, from_numpy
from teeny_tx.interp.interpreter import _Compiler
from teeny_tx.library import linalg
from teeny_tx.library.activations import ACTIVATIONS
from teeny_tx.lower.builder import Builder
from teeny_tx.lower.op_table import FAMILIES
from teeny_tx.lower.ops import OPS
from teeny_tx.runtime import memory
from teeny_tx.templates.emitter import HANDLERS

IR_OPS = sorted({ir for op in OPS.values() for ir in op.ir_ops})
# Builder methods named call_* that type no entry of their own: shared by several entries.
BUILDER_HELPERS = {"call_atomic"}


def _methods(cls: type, prefix: str) -> set[str]:
    return {name for name in dir(cls) if name.startswith(prefix)}


# ---------------------------------------------------------------- the op table


def test_prelude_declares_exactly_the_prelude_entries() -> None:
    declared = set(prelude_prototypes())
    table = {name for name, op in OPS.items() if op.prelude}
    assert sorted(table - declared) == [], "entries with prelude=True but no prototype"
    assert sorted(declared - table) == [], "prototypes with no prelude=True entry"


@pytest.mark.parametrize("name", sorted(OPS))
def test_every_entry_has_its_handlers(name: str) -> None:
    """An entry is typed by its rule or by a builder method; what it lowers to are entries; an
    IR op is run by the interpreter (a method, or its NumPy twin) and rendered by the emitter
    (a method, or its CUDA spelling)."""
    op = OPS[name]
    assert op.family in FAMILIES
    assert op.doc.strip(), f"{name} has no doc"
    if op.prelude:
        assert op.rule is not None or hasattr(Builder, op.builder_method or ""), (
            f"{name}: no typing rule and no builder method {op.builder_method}"
        )
    for ir in op.ir_ops:
        assert ir in OPS, f"{name} lowers to {ir!r}, which is not an entry"
    if name in IR_OPS:
        interp = op.interp_method
        assert (interp is not None and hasattr(_Compiler, interp)) or (
            interp is None and op.numpy is not None
        ), f"IR op {name}: no interpreter handler ({interp or 'numpy'})"
        emit = op.emit_method
        assert (emit is not None and emit in HANDLERS) or (emit is None and op.cuda is not None), (
            f"IR op {name}: no emitter handler ({emit or 'cuda'})"
        )


def test_no_handler_without_an_entry() -> None:
    """Each interpreter op_* method and builder call_* method is named by an entry."""
    interp = {op.interp_method for op in OPS.values()} | {"elementwise"}
    orphans = sorted(_methods(_Compiler, "op_") - interp)
    assert orphans == [], f"interpreter handlers no entry names: {orphans}"
    builder = {op.builder_method for op in OPS.values()} | BUILDER_HELPERS
    orphans = sorted(_methods(Builder, "call_") - builder)
    assert orphans == [], f"builder methods no entry names: {orphans}"


def test_the_reference_documents_every_entry() -> None:
    text = reference_markdown()
    missing = [name for name, op in OPS.items() if op.prelude and f" {name}(" not in text]
    assert missing == []


def test_operators_are_their_family() -> None:
    assert {n for n, op in OPS.items() if op.symbol} == {
        n for n, op in OPS.items() if op.family == "operator"
    }


# ---------------------------------------------------------------- dtypes

_TYPEDEF = re.compile(r"^typedef\s+(?P<c>[\w\s]+?)\s+(?P<name>\w+);", re.MULTILINE)


def test_prelude_typedefs_every_dtype() -> None:
    typedefs = {m["name"]: " ".join(m["c"].split()) for m in _TYPEDEF.finditer(_prelude.PRELUDE)}
    for name, d in DTYPES.items():
        assert name in typedefs, f"prelude/language.h does not declare {name}"
        c = typedefs[name]
        assert c in (d.cuda, f"struct tx_{name}") or c in d.c_names, (name, c)


@pytest.mark.parametrize("name", sorted(DTYPES))
def test_every_spelling_finds_the_dtype(name: str) -> None:
    d = DTYPES[name]
    assert from_numpy(d.np) is d and memory.NUMPY_NAMES[d.np] == name
    assert d.itemsize == d.np.itemsize and d.is_float == (d.np.kind == "f" or name == "bf16")
    assert d.torch is not None and TORCH_NAMES[d.torch] == name and from_name(d.torch) is d
    assert all(C_NAMES[c] == name and from_name(c) is d for c in d.c_names)
    assert from_name(name) is d


def test_spellings_are_unique() -> None:
    spellings = [s for d in DTYPES.values() for s in {d.name, d.torch, *d.c_names}]
    assert len(spellings) == len(set(spellings))
    assert len({d.cuda for d in DTYPES.values()}) == len(DTYPES)


# ---------------------------------------------------------------- named constants


def test_prelude_declares_every_constant() -> None:
    declared = set()
    for line in re.findall(r"^extern const i32 ([^;]*);", _prelude.PRELUDE, re.MULTILINE):
        declared |= {name.strip() for name in line.split(",")}
    assert declared == set(CONSTANTS)


def test_device_header_enumerates_orders_and_scopes() -> None:
    (enum,) = re.findall(r"enum \{([^}]*RELAXED[^}]*)\}", _prelude.DEVICE_HEADER)
    values = {name.strip(): int(value) for name, value in re.findall(r"(\w+)\s*=\s*(\d+)", enum)}
    assert values == {c.name: c.value for c in (*MEMORY_ORDERS, *SCOPES)}


def test_constants_are_distinct() -> None:
    values = [c.value for c in CONSTANTS.values()]
    assert len(values) == len(set(values))
    assert {c.name: c.value for c in PRECISIONS} == linalg.PRECISIONS


# ---------------------------------------------------------------- activations


@pytest.mark.parametrize("activation", ACTIVATIONS, ids=lambda a: str(a.name))
def test_each_activation_code_computes_its_reference(activation) -> None:
    """kernels/matmul.c's ACT code, through linalg.matmul on the interpreter, against the
    table's float64 reference (odd sizes; values around 0, where the activations differ)."""
    rng = np.random.default_rng(7)
    a = rng.standard_normal((19, 32)).astype(np.float32)
    b = rng.standard_normal((32, 21)).astype(np.float32)
    got = linalg.matmul(a, b, activation=activation.name, interpret=True)
    ref = activation.reference(a.astype(np.float64) @ b.astype(np.float64))
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)
    assert linalg.ACTIVATIONS[activation.name] == activation.code
