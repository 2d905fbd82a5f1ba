"""Reserved identifiers (parse/reserved.py): every C/C++/CUDA name of the table, the generated
prefix and C's implementation names are refused where a kernel file spells them, at the name,
with a hint; the language's own names never are."""

from __future__ import annotations

import pytest

import teeny_tx
from teeny_tx.dtypes import DTYPES
from teeny_tx.lower.ops.table import OPS
from teeny_tx.parse import parse
from teeny_tx.parse.reserved import (
    GENERATED_PREFIX,
    KERNEL_RESERVED_NAMES,
    RESERVED_NAMES,
    why_reserved,
)

from .conftest import KERNEL_FILE, kernel_text, nvrtc_compile

# pycparser lexes C's keywords as keywords: those are syntax errors, located all the same
_KEYWORDS = """auto break case char const continue default do double else enum extern float for
    goto if inline int long register restrict return short signed sizeof static struct switch
    typedef union unsigned void volatile while _Alignas _Alignof _Atomic _Bool _Complex _Generic
    _Imaginary _Noreturn _Static_assert _Thread_local offsetof _Pragma"""
_C_KEYWORDS = RESERVED_NAMES & set(_KEYWORDS.split())
IMPLEMENTATION = ["__LINE__", "__CUDA_ARCH__", "__shared__", "__half", "__syncthreads", "_Tile"]
GENERATED = [f"{GENERATED_PREFIX}{s}" for s in ("stage", "smem", "pipeline", "acc", "x")]


def parse_error(text: str) -> teeny_tx.CompileError:
    with pytest.raises(teeny_tx.CompileError) as info:
        parse(text, KERNEL_FILE)
    return info.value


def located_at(err: teeny_tx.CompileError, line: int, name: str) -> None:
    assert err.loc is not None and err.loc.file == KERNEL_FILE and err.loc.line == line
    assert err.loc.source_line is not None
    col = err.loc.col
    if name not in _C_KEYWORDS:
        assert err.loc.source_line[col - 1 : col - 1 + len(name)] == name
        assert f"'{name}' is reserved" in err.message and err.hint.startswith("rename it")


def test_the_table_has_the_names_the_audit_found():
    for name in ("NULL", "main", "printf", "assert", "threadIdx", "blockIdx", "new", "this", "tx"):
        assert name in RESERVED_NAMES
    for name in ("half", "float4", "dim3", "malloc", "uint32_t"):
        assert name in KERNEL_RESERVED_NAMES and name not in RESERVED_NAMES
    assert len(KERNEL_RESERVED_NAMES) > 121


@pytest.mark.parametrize("name", sorted(RESERVED_NAMES) + IMPLEMENTATION + GENERATED)
def test_a_reserved_local_is_refused_at_its_name(name):
    located_at(parse_error(kernel_text(f"    i32 {name} = 1;")), 3, name)


# every position for a sample of the table (each name is checked as a local above)
@pytest.mark.parametrize(
    "name", sorted(RESERVED_NAMES - _C_KEYWORDS)[::9] + IMPLEMENTATION[:2] + GENERATED[:2]
)
def test_a_reserved_name_is_refused_as_a_parameter_a_use_and_a_kernel(name):
    located_at(parse_error(kernel_text("    return;", params=f"f32 *out, i32 {name}")), 1, name)
    located_at(parse_error(kernel_text(f"    i32 y = 2 + {name};")), 3, name)
    located_at(parse_error(kernel_text("    return;", name=name)), 1, name)
    located_at(parse_error(kernel_text(f"    {name}(1);")), 3, name)


@pytest.mark.parametrize("name", sorted(KERNEL_RESERVED_NAMES - RESERVED_NAMES))
def test_global_cuda_names_are_refused_for_kernels_and_helpers_only(name):
    located_at(parse_error(kernel_text("    return;", name=name)), 1, name)
    helper = f"i32 {name}(i32 x)\n{{\n    return x;\n}}\n"
    located_at(parse_error(helper + kernel_text("    return;")), 1, name)
    parse(kernel_text(f"    i32 {name} = n + 1;\n    store(out, (f32){name});"), KERNEL_FILE)


@pytest.mark.parametrize("name", ["half", "float4", "dim3", "malloc", "uint32_t"])
def test_a_local_may_shadow_a_global_cuda_name_and_the_cuda_compiles(name):
    module = teeny_tx.compile(
        kernel_text(f"    i32 {name} = n + 1;\n    store(out, (f32){name});"), name=KERNEL_FILE
    )
    source = module.k.cuda_source("f32", "f32", 3, BLOCK=4)
    assert f" {name} = " in source
    nvrtc_compile(source, "k")


def test_the_languages_own_names_are_not_reserved():
    prelude = [n for n, op in OPS.items() if op.prelude]
    constants = ["INF", "NAN", "IEEE", "TF32", "TF32X3", "true", "false", "RELAXED", "ACQ_REL"]
    for name in prelude + list(DTYPES) + constants + ["tile", "kernel", "any"]:
        assert why_reserved(name) is None, name
    for name in ("i", "stage", "acc_0", "k_ahead", "x_", "t_x", "tx", "txt"):
        assert (why_reserved(name) is None) == (name != "tx"), name


def test_every_bundled_kernel_avoids_the_reserved_names():
    from pathlib import Path

    root = Path(__file__).parent.parent
    for path in sorted([*root.glob("kernels/*.c"), *root.glob("tests/kernels/*.c")]):
        parse(path.read_text(), str(path.relative_to(root)))
