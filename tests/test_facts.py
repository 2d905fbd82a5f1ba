"""Every fact has one home, and its consumers agree with it.

The op table (teeny_tx/lower/ops/: registry.py, table.py, random.py) against the prelude's
prototypes, the builder's typing methods, the interpreter's and the emitter's handlers and the
reference page; the dtype table (teeny_tx/dtypes.py) against the prelude's typedefs and the
runtime's lookups; the named constants (teeny_tx/constants.py) against the prelude's
declarations and the device header's enum; the activation table
(teeny_tx/activations.py) against what kernels/matmul.c computes for each code.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from teeny_tx import _prelude
from teeny_tx.activations import ACTIVATIONS
from teeny_tx.constants import CONSTANTS, MEMORY_ORDERS, PRECISIONS, SCOPES
from teeny_tx.docs import prelude_prototypes, reference_markdown
from teeny_tx.dtypes import C_NAMES, DTYPES, TORCH_NAMES, from_name, from_numpy
from teeny_tx.interp.interpreter import _Compiler
from teeny_tx.library import linalg
from teeny_tx.lower.build.builder import Builder
from teeny_tx.lower.ops.registry import FAMILIES
from teeny_tx.lower.ops.table import OPS
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


# ---------------------------------------------------------------- the Hopper path's tables


def test_activation_codes_agree_everywhere() -> None:
    """One table: the library's name -> code maps, the Hopper epilogue's device function
    (prelude/hopper.cuh's activate<ACT>, one branch per code) and the kernels' ACT."""
    from teeny_tx.activations import BY_CODE, CODES
    from teeny_tx.library import fused

    assert linalg.ACTIVATIONS == CODES
    assert {n: c for n, c in CODES.items() if n is not None} == fused.ACTIVATIONS
    assert sorted(BY_CODE) == list(range(len(ACTIVATIONS)))
    hopper = _prelude.FILES["hopper.cuh"]
    body = hopper[hopper.index("float activate(float x)") :].split("\n}\n")[0]
    assert sorted(int(c) for c in re.findall(r"ACT == (\d+)", body)) == sorted(BY_CODE)[1:]


def _cuda_enum(header: str, prefix: str) -> dict[str, int]:
    """The values of a C enum's ``prefix*`` members (implicit values counted on)."""
    out, value = {}, -1
    for name, given in re.findall(rf"\b({prefix}\w+)\s*(?:=\s*(\w+))?\s*,", header):
        value = int(given, 0) if given else value + 1
        out.setdefault(name[len(prefix) :], value)
    return out


def test_tma_element_codes_are_the_drivers() -> None:
    """dtypes.ELEMENTS' CUtensorMapDataType codes against cuda.h's enum (the toolkit headers
    NVRTC compiles with); the language's dtypes keep their itemsize and C type there."""
    from pathlib import Path

    from teeny_tx.dtypes import ELEMENTS, WGMMA_TYPES
    from teeny_tx.runtime import nvrtc

    names = {"u8": "UINT8", "u16": "UINT16", "f16": "FLOAT16", "f32": "FLOAT32"}
    names |= {"bf16": "BFLOAT16", "f8e4m3": "UINT8", "f8e5m2": "UINT8"}  # fp8 moves as bytes
    assert set(names) == set(ELEMENTS)
    for e in ELEMENTS.values():
        if e.name in DTYPES:
            assert (e.itemsize, e.storage) == (DTYPES[e.name].itemsize, DTYPES[e.name].cuda)
    assert set(WGMMA_TYPES.values()) == {"f16", "bf16", "e4m3", "e5m2", "tf32"}
    include = nvrtc.cuda_include_dir()
    header = Path(include) / "cuda.h" if include else None
    if header is None or not header.is_file():
        pytest.skip("no cuda.h among the toolkit headers here")
    enum = _cuda_enum(header.read_text(), "CU_TENSOR_MAP_DATA_TYPE_")
    assert {n: e.tma for n, e in ELEMENTS.items()} == {n: enum[c] for n, c in names.items()}


def test_the_hopper_tables_are_read_from_dtypes() -> None:
    """runtime/tma.py, lower/hopper/matmul.py and templates/hopper.py read dtypes.ELEMENTS (views of
    it, not copies), and no module but dtypes.py spells a CUDA element type."""
    import ast
    from pathlib import Path

    from teeny_tx.dtypes import ELEMENT_SIZES, TMA_DATA_TYPES, WGMMA_TYPES
    from teeny_tx.lower.hopper import matmul as hopper
    from teeny_tx.runtime import tma
    from teeny_tx.templates import hopper as thopper

    assert tma.DATA_TYPES is TMA_DATA_TYPES and tma.ITEMSIZE is ELEMENT_SIZES
    assert hopper.WGMMA_DTYPES is WGMMA_TYPES and hopper.ITEMSIZE is ELEMENT_SIZES
    assert (
        thopper.STORAGE["f8e4m3"] == "unsigned char"
        and thopper.ctype(thopper.DTYPES["bf16"]) == "__nv_bfloat16"
    )
    spelled = {"__half", "__nv_bfloat16", "unsigned char"}  # ("float" is also a Python word)
    root = Path(_prelude.__file__).parent
    found = []
    for path in sorted(root.rglob("*.py")):
        if path.name in ("dtypes.py", "_prelude.py", "_kernels.py"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and node.value in spelled:
                found.append(f"{path.relative_to(root)}:{node.lineno}: {node.value!r}")
    assert not found, found


def test_torchs_stream_has_one_home() -> None:
    """torch's current stream is read in runtime/streams.py only: the launchers, the
    autotuner, the library and the torch ops go through it."""
    from pathlib import Path

    root = Path(_prelude.__file__).parent
    readers = sorted(
        str(p.relative_to(root))
        for p in root.rglob("*.py")
        if "torch.cuda.current_stream(" in p.read_text()
        or "_cuda_getCurrentRawStream" in p.read_text()
    )
    assert readers == ["runtime/streams.py"]
