"""The interpreter's fma rounds once (lower/ops/exact_fma.py), checked against rational arithmetic.

The reference rounds the exact value a*b + c to the dtype directly (nearest, ties to even),
never through a wider float, so a double rounding in the implementation cannot hide behind one
in the reference.
"""

from __future__ import annotations

import zlib
from fractions import Fraction

import numpy as np
import pytest

from teeny_tx.lower.ops.exact_fma import fma


def _round_exact(value: Fraction, dtype) -> float:
    """``value`` rounded to ``dtype`` once: the nearer of the two neighbours, ties to even."""
    finfo = np.finfo(dtype)
    try:
        guess = np.asarray(float(value)).astype(dtype)  # within an ulp of the answer
    except OverflowError:
        return float("inf") if value > 0 else float("-inf")
    if not np.isfinite(guess):
        return float(guess)
    down = np.nextafter(guess, dtype(-np.inf))
    up = np.nextafter(guess, dtype(np.inf))
    best = None
    for cand in (down, guess, up):
        if not np.isfinite(cand):
            continue
        err = abs(Fraction(float(cand)) - value)
        bits = int(np.asarray(cand).view(np.uint64 if finfo.bits == 64 else np.uint32))
        key = (err, bits & 1)
        if best is None or key < best[0]:
            best = (key, cand)
    return float(best[1])


def _exact(a, b, c) -> Fraction:
    return Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c))


def test_the_issues_case_gives_two_to_the_minus_sixty() -> None:
    x = np.array([1 + 2.0**-30])
    assert fma(x, x, np.array([-(1 + 2.0**-29)]))[0] == 2.0**-60


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_fma_is_correctly_rounded_on_cancelling_inputs(dtype) -> None:
    # c close to -a*b: the product's low bits decide the result, where a*b + c rounds twice.
    rng = np.random.default_rng(zlib.crc32(f"fma-{np.dtype(dtype).name}".encode()))
    n = 3000
    a = rng.standard_normal(n).astype(dtype)
    b = rng.standard_normal(n).astype(dtype)
    c = (-(a.astype(np.float64) * b) * (1 + rng.standard_normal(n) * 1e-6)).astype(dtype)
    got = fma(a, b, c)
    assert got.dtype == dtype
    want = np.array(
        [_round_exact(_exact(*t), dtype) for t in zip(a, b, c, strict=True)], dtype=dtype
    )
    np.testing.assert_array_equal(got, want)
    naive = (a * b + c).astype(dtype)
    if dtype == np.float64:
        assert (naive != want).sum() > n // 2  # the test can tell a double rounding apart


def test_fma32_ties_of_the_double_sum_round_correctly() -> None:
    # Cases where a*b + c lands exactly between two f32 values after rounding to f64, but the
    # exact value is not a tie: rounding the f64 sum to f32 would pick the even neighbour.
    rng = np.random.default_rng(zlib.crc32(b"fma32-ties"))
    a = np.float32(1) + np.float32(2.0**-23) * rng.integers(1, 1 << 10, 2000).astype(np.float32)
    b = np.float32(1) + np.float32(2.0**-23) * rng.integers(1, 1 << 10, 2000).astype(np.float32)
    c = np.full(2000, np.float32(2.0**-25), dtype=np.float32)
    got = fma(a, b, c)
    want = np.array(
        [_round_exact(_exact(*t), np.float32) for t in zip(a, b, c, strict=True)], np.float32
    )
    np.testing.assert_array_equal(got, want)


def test_fma64_edge_values_follow_rational_arithmetic() -> None:
    big, tiny = 2.0**1000, 2.0**-1070
    cases = [
        (big, 2.0, -(2.0**1001)),  # the product overflows on its own, the sum does not
        (tiny, 2.0**-3, tiny),  # subnormal product
        (3.0, 1 / 3, -1.0),
        (0.0, -1.0, 0.0),
        (2.0**600, 2.0**600, 1.0),  # overflow to inf
        (np.inf, 1.0, -np.inf),  # NaN
        (1.0, np.nan, 1.0),
    ]
    a, b, c = (np.array(col) for col in zip(*cases, strict=True))
    got = fma(a, b, c)
    for (x, y, z), g in zip(cases, got, strict=True):
        if not all(np.isfinite([x, y, z])):
            assert np.isnan(g) == np.isnan(x * y + z)
            continue
        want = _round_exact(_exact(x, y, z), np.float64)
        assert g == want or (np.isinf(g) and np.isinf(want))


def test_fma16_matches_the_gpu_rule_f32_then_half() -> None:
    rng = np.random.default_rng(zlib.crc32(b"fma16"))
    a, b, c = (rng.standard_normal(2000).astype(np.float16) for _ in range(3))
    got = fma(a, b, c)
    assert got.dtype == np.float16
    want = [
        np.float16(np.float32(_round_exact(_exact(*t), np.float32)))
        for t in zip(a, b, c, strict=True)
    ]
    np.testing.assert_array_equal(got, np.array(want, dtype=np.float16))
