"""Constructs of the Python front end, each in a small kernel run on the interpreter and
checked against NumPy: reductions and argmax, scans, atomics, static_range and while,
tl.full and hoisted tl.zeros, casts and bitcasts, where/ternaries, helpers and combiners,
heuristics, keyword arguments, None and string constexprs, and the launch API's errors."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

import teeny_tx
import teeny_tx.triton as triton
import teeny_tx.triton.language as tl


def rng(name: str) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(name.encode()))


@triton.jit
def reductions(x, out_sum, out_max, out_arg, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    v = tl.load(x + row * n_cols + cols, mask=cols < n_cols, other=-float("inf"))
    tl.store(out_max + row, tl.max(v, axis=0))
    tl.store(out_arg + row, tl.argmax(v, 0))
    tl.store(out_sum + row, tl.sum(tl.where(cols < n_cols, v, 0.0), axis=0))


def test_reductions_and_argmax():
    x = rng("reductions").standard_normal((5, 37)).astype(np.float32)
    s, m = np.zeros(5, np.float32), np.zeros(5, np.float32)
    a = np.zeros(5, np.int32)
    reductions[(5,)](x, s, m, a, 37, BLOCK=64)
    np.testing.assert_allclose(s, x.sum(1), rtol=1e-5, atol=1e-5)
    assert np.array_equal(m, x.max(1)) and np.array_equal(a, x.argmax(1))


@triton.jit
def add_op(a, b):
    return a + b


@triton.jit
def scans(x, out, out_rev, out_red, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    v = tl.load(x + offs)
    tl.store(out + offs, tl.cumsum(v, 0))
    tl.store(out_rev + offs, tl.associative_scan(v, 0, add_op, reverse=True))
    tl.store(out_red, tl.reduce(v, 0, add_op))


def test_scans_and_combiners():
    x = rng("scans").integers(-5, 5, 32).astype(np.int32)
    out, rev, red = np.zeros_like(x), np.zeros_like(x), np.zeros(1, np.int32)
    scans[(1,)](x, out, rev, red, BLOCK=32)
    assert np.array_equal(out, np.cumsum(x))
    assert np.array_equal(rev, np.cumsum(x[::-1])[::-1])
    assert red[0] == x.sum()


@triton.jit
def histogram(values, bins, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(values + offs, mask=mask, other=0)
    tl.atomic_add(bins + v, 1, mask=mask, sem="relaxed")
    tl.atomic_max(bins + 8, tl.max(tl.where(mask, v, 0), axis=0))


def test_atomics():
    v = rng("histogram").integers(0, 8, 1000).astype(np.int32)
    bins = np.zeros(9, np.int32)
    histogram[(triton.cdiv(1000, 128),)](v, bins, 1000, BLOCK=128)
    assert np.array_equal(bins[:8], np.bincount(v, minlength=8)) and bins[8] == v.max()


@triton.jit
def loops(out, n, BLOCK: tl.constexpr, STEPS: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    acc = tl.full([BLOCK], 1, dtype=tl.int32)
    for i in tl.static_range(STEPS):
        acc = acc + i
    k = 0
    while k < n:
        k += 2
    for j in range(10, 0, -3):
        acc += j
    acc = acc + tl.zeros([BLOCK], dtype=tl.int32) + (k if n > 0 else -1)
    tl.store(out + offs, acc)


def test_static_range_while_and_a_counting_down_loop():
    out = np.zeros(16, np.int32)
    loops[(1,)](out, 5, BLOCK=16, STEPS=4)
    assert (out == 1 + (0 + 1 + 2 + 3) + (10 + 7 + 4 + 1) + 6).all()
    text = loops.translate("i32", 5, BLOCK=16, STEPS=4)
    assert "for (i32 j = 10; j > 0; j -= 3) {" in text
    assert "i32 full_1[BLOCK] = 0;" in text  # tl.zeros inside an expression, hoisted


@triton.jit
def casts(x, out_i, out_bits, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(x + offs, mask=mask)
    tl.store(out_i + offs, v.to(tl.int32), mask=mask)
    tl.store(out_bits + offs, v.to(tl.uint32, bitcast=True), mask=mask)


def test_casts_and_bitcasts():
    x = (rng("casts").standard_normal(30) * 100).astype(np.float32)
    i, bits = np.zeros(30, np.int32), np.zeros(30, np.uint32)
    casts[(1,)](x, i, bits, 30, BLOCK=32)
    assert np.array_equal(i, x.astype(np.int32)) and np.array_equal(bits, x.view(np.uint32))


@triton.heuristics({"EVEN": lambda args: args["n"] % args["BLOCK"] == 0})
@triton.jit
def heuristic_copy(x, out, n, BLOCK: tl.constexpr, EVEN: tl.constexpr, BIAS=None):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x + offs) if EVEN else tl.load(x + offs, mask=offs < n)
    if BIAS is not None:
        v += tl.load(BIAS + offs, mask=offs < n)
    tl.store(out + offs, v, mask=offs < n)


@pytest.mark.parametrize("n", [64, 100])
def test_heuristics_none_arguments_and_keywords(n):
    x = rng(f"heuristic{n}").standard_normal(n).astype(np.float32)
    out = np.zeros_like(x)
    heuristic_copy[(triton.cdiv(n, 32),)](x, out=out, n=n, BLOCK=32)
    assert np.array_equal(out, x)
    bias = np.ones_like(x)
    heuristic_copy[(triton.cdiv(n, 32),)](x, out, n, BLOCK=32, BIAS=bias)
    assert np.array_equal(out, x + 1)
    assert "BIAS" not in heuristic_copy.translate(x, out, n, BLOCK=32, EVEN=True)


def test_jit_is_exported_and_a_bad_argument_is_a_launch_error():
    assert teeny_tx.jit is triton.jit
    with pytest.raises(teeny_tx.LaunchError, match="neither a tensor"):
        casts[(1,)](object(), np.zeros(1, np.int32), np.zeros(1, np.uint32), 1, BLOCK=32)
    with pytest.raises(teeny_tx.LaunchError, match="missing a required argument"):
        casts[(1,)](np.zeros(1, np.float32), BLOCK=32)


def test_the_builtins_only_translate():
    with pytest.raises(teeny_tx.TeenyError, match="only be called inside a @jit"):
        tl.load(1)
    assert triton.next_power_of_2(1000) == 1024 and triton.next_power_of_2(1) == 1


def test_cpu_tensors_that_require_grad_and_strided_views_run_on_the_interpreter():
    import torch

    from .test_triton_tutorials import softmax

    base = torch.randn(6, 64, generator=torch.Generator().manual_seed(7)).requires_grad_(True)
    x = base[::2, 3:50]  # rows 128 elements apart, 47 columns
    torch.testing.assert_close(softmax(x, programs=2), torch.softmax(x.detach(), axis=1))
