"""The differential tester on CPU (issue 29): random expressions of every integer dtype and of
f32/f64, over edge values (0, 1, -1, MIN, MAX, shift amounts; ±0, ±inf, NaN, denormals), run by
the interpreter over arrays and by constant folding over literals, compared bit for bit (any NaN
matches any NaN). The GPU side: tests/gpu/test_differential_gpu.py."""

from __future__ import annotations

import numpy as np
import pytest

import teeny_tx

from .differential import (
    FLOAT_DTYPES,
    INT_DTYPES,
    folded_kernel,
    inputs,
    np_dtype,
    programs,
    same_bits,
    tile_kernel,
)

PROGRAMS, SAMPLES = 24, 12


def interpret(dtype: str, exprs: list[str], env: dict[str, np.ndarray]) -> np.ndarray:
    n = len(env["a"])
    k = teeny_tx.compile(tile_kernel(dtype, exprs), name="kernels/diff.c").diff
    out = np.zeros(len(exprs) * n, np_dtype(dtype))
    k.interpret[(1,)](out, env["a"], env["b"], env["c"], n, BLOCK=16)
    return out


def fold(dtype: str, exprs: list[str], env: dict[str, np.ndarray]) -> np.ndarray:
    k = teeny_tx.compile(folded_kernel(dtype, exprs, env), name="kernels/folded.c").folded
    out = np.zeros(len(exprs) * len(env["a"]), np_dtype(dtype))
    k.interpret[(1,)](out)
    return out


@pytest.mark.parametrize("dtype", INT_DTYPES + FLOAT_DTYPES)
def test_the_interpreter_agrees_with_constant_folding(dtype):
    exprs = programs(dtype, PROGRAMS, "cpu")
    env = inputs(dtype, SAMPLES, "cpu")
    got, want = interpret(dtype, exprs, env), fold(dtype, exprs, env)
    ok = same_bits(got, want)
    bad = np.nonzero(~ok)[0]
    assert bad.size == 0, [
        (exprs[i // SAMPLES], {v: env[v][i % SAMPLES] for v in env}) for i in bad[:3]
    ]


def test_the_folded_kernel_is_folded():
    """Every store of the folded kernel stores a constant: no arithmetic reaches the CUDA."""
    env = inputs("i32", 4, "cpu")
    source = teeny_tx.compile(
        folded_kernel("i32", programs("i32", 6, "cpu"), env), name="f.c"
    ).folded.cuda_source("i32")
    assert (
        "tx::wrap" not in source and "tx::int_" not in source and "?" not in source.split("{", 1)[1]
    )


def test_the_comparison_can_fail():
    """A single literal changed by one is seen: the comparison is not vacuous."""
    env = inputs("i8", SAMPLES, "cpu")
    exprs = ["(a + b)"]
    other = {v: x.copy() for v, x in env.items()}
    other["a"][3] = np.int8(other["a"][3] ^ 1)
    assert not same_bits(interpret("i8", exprs, env), fold("i8", exprs, other)).all()
