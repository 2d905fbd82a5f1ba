"""``fma(a, b, c)`` rounded once, on NumPy arrays: the interpreter's twin of CUDA's ``fma``.

Input: three arrays of one float dtype (f64, f32, f16 or bf16), already broadcast. Output:
``a * b + c`` computed exactly and rounded once to the dtype, as the GPU's fused multiply-add
gives it. NumPy has no fused multiply-add, and ``a * b + c`` rounds twice.

How, per dtype (the rules the tests check against exact rational arithmetic):

1. f64: the Boldo–Melquiond emulation with rounding to odd. ``a * b = ph + pl`` exactly
   (Dekker's product), ``c + ph = th + tl`` exactly (Knuth's two-sum), ``v = RO(tl + pl)``
   (round to odd: the nearest-rounded sum, moved one ulp toward the exact value when it is
   inexact and its last bit is even), then ``RN(th + v)`` is the correctly rounded result.
   Elements where a step could overflow or lose bits to underflow (huge or tiny operands,
   non-finite values) are computed with :class:`fractions.Fraction` instead, one by one.
2. f32: the product of two f32 values is exact in f64 (24 + 24 bits < 53); ``RO64(p + c)``
   rounded to f32 is the correctly rounded result, since 53 >= 24 + 2 (rounding to odd in a
   precision two bits wider than the target does not double-round).
3. f16 and bf16: the GPU computes them as an f32 ``fmaf`` of the widened values, rounded to
   the half type after (``tx::fma`` in prelude/teeny_tx.cuh); the interpreter does the same
   through rule 2.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

_SPLIT = 134217729.0  # 2^27 + 1: Veltkamp's splitter for 53-bit doubles
# Beyond these magnitudes Dekker's product can overflow (splitting) or its error term can
# underflow (lose bits); such elements take the exact rational path.
_HUGE = 2.0**995
_TINY = 2.0**-960


def _two_sum(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    s = x + y
    bb = s - x
    return s, (x - (s - bb)) + (y - bb)


def _split(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    t = _SPLIT * x
    hi = t - (t - x)
    return hi, x - hi


def _two_prod(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    p = x * y
    xh, xl = _split(x)
    yh, yl = _split(y)
    return p, ((xh * yh - p) + xh * yl + xl * yh) + xl * yl


def _round_to_odd_sum(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``x + y`` rounded to odd in f64: exact sums stay; inexact ones land on an odd mantissa."""
    s, err = _two_sum(x, y)
    even = (s.view(np.uint64) & np.uint64(1)) == 0
    nudge = (err != 0) & even & np.isfinite(s)
    if nudge.any():
        s = s.copy()
        s[nudge] = np.nextafter(s[nudge], s[nudge] + err[nudge])
    return s


def _exact(a: float, b: float, c: float) -> float:
    """One element through rational arithmetic (non-finite operands follow IEEE)."""
    with np.errstate(over="ignore", invalid="ignore"):
        naive = float(np.float64(a) * np.float64(b) + np.float64(c))
    if not (np.isfinite(a) and np.isfinite(b) and np.isfinite(c)):
        return naive
    value = Fraction(a) * Fraction(b) + Fraction(c)
    if value == 0:
        # The sign of an exact zero follows IEEE's round-to-nearest rules, as the naive sum does.
        return naive
    try:
        return float(value)  # Fraction -> float rounds once, to nearest even
    except OverflowError:
        return float("inf") if value > 0 else float("-inf")


def fma64(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Rule 1: f64 ``a * b + c`` rounded once."""
    a, b, c = (np.asarray(x, dtype=np.float64) for x in (a, b, c))
    a, b, c = np.broadcast_arrays(a, b, c)
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        ph, pl = _two_prod(a, b)
        th, tl = _two_sum(c, ph)
        v = _round_to_odd_sum(tl, pl)
        out = th + v
        p_abs = np.abs(ph)
        risky = ~(np.isfinite(out) & np.isfinite(ph))
        risky |= (np.abs(a) > _HUGE) | (np.abs(b) > _HUGE) | (np.abs(c) > _HUGE)
        risky |= (p_abs != 0) & (p_abs < _TINY)
        risky |= (np.abs(c) != 0) & (np.abs(c) < _TINY)
    out = np.array(out, dtype=np.float64)
    for i in zip(*np.nonzero(risky), strict=True):
        out[i] = _exact(float(a[i]), float(b[i]), float(c[i]))
    return out


def fma32(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Rule 2: f32 ``a * b + c`` rounded once (the product is exact in f64)."""
    a64, b64, c64 = (np.asarray(x, dtype=np.float32).astype(np.float64) for x in (a, b, c))
    with np.errstate(over="ignore", invalid="ignore"):
        s = _round_to_odd_sum(a64 * b64, c64)
        return s.astype(np.float32)


def fma(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``a * b + c`` rounded once to the operands' dtype (rules 1-3)."""
    dtype = np.asarray(a).dtype
    if dtype == np.float64:
        return fma64(a, b, c)
    if dtype == np.float32:
        return fma32(a, b, c)
    return fma32(*(np.asarray(x).astype(np.float32) for x in (a, b, c))).astype(dtype)
