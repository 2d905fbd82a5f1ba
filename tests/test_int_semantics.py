"""Integer semantics, rules I1-I4 of lower/ops/casts.py: the interpreter and constant folding give
the wrapped, defined results on edge values of every integer dtype, and the emitted CUDA
computes in an unsigned type (``tx::wrap_*``) and compiles with NVRTC for sm_90. The GPU side
is tests/gpu/test_int_semantics_gpu.py."""

from __future__ import annotations

import numpy as np
import pytest

import teeny_tx

from .conftest import KERNEL_FILE, kernel_text, nvrtc_compile
from .int_semantics_cases import BLOCK, INT_DTYPES, OUTPUTS, expected, operands
from .int_semantics_cases import kernel_text as ops_kernel


def _run_interpreter(dtype: str):
    kernel = getattr(teeny_tx.compile(ops_kernel(dtype), name="kernels/ops.c"), f"ops_{dtype}")
    a, b = operands(dtype)
    n = a.size
    out = np.zeros(len(OUTPUTS) * n, a.dtype)
    wide = np.zeros(n, np.int64)
    kernel.interpret[(1,)](out, wide, a, b, n, BLOCK=BLOCK)
    return out.reshape(len(OUTPUTS), n), wide


@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_interpreter_gives_the_rules_results_on_edge_values(dtype):
    rows, wide = _run_interpreter(dtype)
    want_rows, want_wide = expected(dtype)
    for k, name in enumerate(OUTPUTS):
        bad = np.nonzero(rows[k] != want_rows[k])[0]
        assert bad.size == 0, (name, operands(dtype)[0][bad[:4]], operands(dtype)[1][bad[:4]])
    np.testing.assert_array_equal(wide, want_wide)


def test_the_reference_can_fail():
    """The reference is not the interpreter's own arithmetic: an unwrapped sum differs."""
    a, b = operands("i8")
    assert not np.array_equal(a.astype(np.int64) + b, expected("i8")[1])


@pytest.mark.parametrize("dtype", ["i8", "i16", "i32", "i64"])
def test_increment_compared_at_max_is_false(dtype):
    """``(x + 1) > x`` at the maximum wraps to the minimum: 0, never folded to 1."""
    text = kernel_text(
        "    tile i = arange(0, BLOCK);\n    tile a = load(x + i);\n"
        "    store(out + i, (i32)((a + 1) > a));",
        f"i32 *out, const {dtype} *x, const i32 BLOCK",
    )
    k = teeny_tx.compile(text, name=KERNEL_FILE).k
    info = np.iinfo(np.dtype(f"int{dtype[1:]}"))
    x = np.array([info.max, 0, info.min, -1], np.dtype(f"int{dtype[1:]}"))
    out = np.full(4, 7, np.int32)
    k.interpret[(1,)](out, x, BLOCK=4)
    assert out.tolist() == [0, 1, 1, 1]


def test_constant_folding_wraps_at_int_max():
    """A folded ``(MAX + 1) > MAX`` is 0 too (the same NumPy functions)."""
    text = kernel_text(
        "    tile i = arange(0, BLOCK);\n    i32 big = 2147483647;\n"
        "    store(out + i, (i32)((big + 1) > big) + i * 0);",
        "i32 *out, const i32 BLOCK",
    )
    k = teeny_tx.compile(text, name=KERNEL_FILE).k
    out = np.full(4, 7, np.int32)
    k.interpret[(1,)](out, BLOCK=4)
    assert out.tolist() == [0, 0, 0, 0]


CTYPES = {"i8": "signed char", "i16": "short", "i32": "int", "u8": "unsigned char"}


@pytest.mark.parametrize("dtype", ["i8", "i16", "i32", "u8"])
@pytest.mark.parametrize(
    ("op", "helper"),
    [("a + b", "wrap_add"), ("a - b", "wrap_sub"), ("a * b", "wrap_mul"), ("-a", "wrap_neg")]
    + [("a << b", "wrap_shl"), ("a >> b", "wrap_shr"), ("a / b", "int_div")]
    + [("a % b", "int_mod")],
)
def test_emitted_cuda_computes_in_unsigned_and_casts_the_result(dtype, op, helper):
    text = kernel_text(
        "    tile i = arange(0, BLOCK);\n    tile a = load(x + i);\n    tile b = load(y + i);\n"
        f"    store(out + i, {op});",
        f"i64 *out, const {dtype} *x, const {dtype} *y, const i32 BLOCK",
    )
    source = teeny_tx.compile(text, name=KERNEL_FILE).k.cuda_source("i64", dtype, dtype, BLOCK=64)
    args = "a[tx_i])" if op == "-a" else "a[tx_i], b[tx_i])"
    call = f"tx::{helper}<{CTYPES[dtype]}>({args}"
    assert f"tx::cast<long long>({call})" in source, source[-600:]
    nvrtc_compile(source, "k")


@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_every_operator_kernel_compiles_for_sm90(dtype):
    module = teeny_tx.compile(ops_kernel(dtype), name="kernels/ops.c")
    source = getattr(module, f"ops_{dtype}").cuda_source(dtype, "i64", dtype, dtype, 5, BLOCK=BLOCK)
    assert " / " not in source.split("tx_L0")[-1] and " % " not in source.split("tx_L0")[-1]
    nvrtc_compile(source, f"ops_{dtype}")


def test_narrow_operand_cast_is_of_the_result():
    """The measured bug: ``(signed char)x[i] + y[i]`` cast an operand, so i8 127 + 127 stored
    into a wider type was 254."""
    text = kernel_text(
        "    tile i = arange(0, BLOCK);\n    tile a = load(x + i);\n    tile b = load(y + i);\n"
        "    store(out + i, a & b);",
        "i32 *out, const i8 *x, const i8 *y, const i32 BLOCK",
    )
    source = teeny_tx.compile(text, name=KERNEL_FILE).k.cuda_source("i32", "i8", "i8", BLOCK=64)
    assert "(signed char)(a[tx_i] & b[tx_i])" in source
