"""Casts between every pair of dtypes (rules C1-C5 of lower/ops/casts.py), bit for bit: the NumPy
rule, constant folding and the interpreter running a cast kernel, each against an exact
reference; and the generated CUDA of every cast compiles through NVRTC."""

from __future__ import annotations

import numpy as np
import pytest

import teeny_tx
from teeny_tx.dtypes import DTYPES
from teeny_tx.lower.ir import Const, Type
from teeny_tx.lower.ops import typing as ty
from teeny_tx.lower.ops.casts import cast_array

from .conftest import (
    CAST_DTYPES,
    CAST_KERNELS,
    cast_reference,
    cast_values,
    nvrtc_compile,
    run_cast_all,
)

PAIRS = [(s, t) for s in CAST_DTYPES for t in CAST_DTYPES]


def same_bits(got: np.ndarray, want: np.ndarray) -> None:
    """Equal bit patterns; any NaN matches any NaN (C5: payloads are unspecified)."""
    assert got.dtype == want.dtype and got.shape == want.shape
    if want.dtype.kind == "b":
        np.testing.assert_array_equal(got, want)
        return
    wide = want.dtype.itemsize
    view = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[wide]
    g, w = got.view(view), want.view(view)
    if want.dtype.kind == "f" or want.dtype.name == "bfloat16":
        nan = np.isnan(want.astype(np.float64))
        assert (np.isnan(got.astype(np.float64)) == nan).all(), (got, want)
        g, w = g[~nan], w[~nan]
    bad = np.nonzero(g != w)[0]
    assert bad.size == 0, f"got {got[bad][:8]}, want {want[bad][:8]}"


@pytest.mark.parametrize(("src", "to"), PAIRS)
def test_numpy_rule_matches_the_exact_reference(src, to):
    x = cast_values(src)
    same_bits(cast_array(x, DTYPES[to]), cast_reference(x, to))


@pytest.mark.parametrize(("src", "to"), PAIRS)
def test_constant_folding_matches_the_exact_reference(src, to):
    x = cast_values(src)
    want = cast_reference(x, to)
    s = DTYPES[src]
    folded = []
    for v in x.tolist() if s.name != "bf16" else x.astype(np.float64).tolist():
        c = Const(type=Type(s), loc=None, value=v)
        folded.append(ty.cast(c, DTYPES[to]).value)
    got = np.array(folded, dtype=object if DTYPES[to].is_int else None)
    same_bits(got.astype(DTYPES[to].np), want)


@pytest.fixture(scope="module")
def casts():
    return teeny_tx.compile(CAST_KERNELS, name="kernels/casts.c")


@pytest.mark.parametrize("src", CAST_DTYPES)
def test_interpreter_cast_kernel_matches_the_exact_reference(casts, src):
    x = cast_values(src)
    outs = run_cast_all(casts.cast_all.interpret, x, np.zeros)
    for to, y in outs.items():
        same_bits(y, cast_reference(x, to))


def test_the_issues_cases():
    """The disagreements the audit found: each now has one answer."""
    f32, f64 = DTYPES["f32"], DTYPES["f64"]
    assert ty.convert_value(300.0, DTYPES["i8"], f32) == 127
    assert ty.convert_value(-1.5, DTYPES["u8"], f32) == 0
    assert ty.convert_value(1e20, DTYPES["i64"], f32) == 2**63 - 1
    assert ty.convert_value(float("inf"), DTYPES["u64"], f32) == 2**64 - 1
    assert ty.convert_value(float("nan"), DTYPES["i32"], f32) == 0
    assert ty.convert_value(1 + 2**-8 + 2**-40, DTYPES["bf16"], f64) == 1 + 2**-7


@pytest.mark.parametrize("src", CAST_DTYPES)
def test_cast_kernels_compile_through_nvrtc(casts, src):
    source = casts.cast_all.cuda_source(src, *CAST_DTYPES, 7, BLOCK=128)
    assert source.count("tx::cast<") == len(CAST_DTYPES) - 1  # every target but the source's
    nvrtc_compile(source, "cast_all")
