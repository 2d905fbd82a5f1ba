"""Math functions of CUDA's libdevice, under their C names (Triton's ``libdevice`` names too).

Input: nothing (declarations; imported at the end of ``table.py``). Output: the entries of the
math functions the language had not (``tan``, ``erfinv``, ``lgamma``, ``atan2``, ``ldexp``,
``isnan``, ``popc``...) in ``table.OPS``, each with its typing rule, its CUDA spelling (an
overload of ``prelude/libdevice.cuh``) and its NumPy twin; and :data:`CUDA_ULPS`, the error
bounds CUDA documents for its single- and double-precision functions (the GPU tests allow
them; ``docs/reference.md`` states them).

Numerics, both backends:

- Float functions take f16, bf16, f32 and f64 and return the same dtype; f16 and bf16 are
  computed in f32 and rounded once (rule T6). On the GPU each is CUDA's function
  (``::erfinvf``, ``::erfinv``...), within :data:`CUDA_ULPS`.
- The interpreter computes every float function in f64 and rounds once to the result's dtype:
  for f16, bf16 and f32 that is the correctly rounded value but for a double rounding (a
  fraction of an ulp, rarely 1 ulp); for f64 it is NumPy's or Python's ``math`` function
  (within 1 ulp), or this module's own where neither has one: ``erfinv``, ``erfcinv`` (Halley
  iterations on ``math.erf``/``math.erfc``, within 2 ulp), ``erfcx`` and ``normcdf`` (within 4
  ulp), ``j0``/``j1`` (series and the trapezoid rule on Bessel's integral, within 1e-15
  absolute), ``cyl_bessel_i1`` (its series, within 4 ulp). Exact operations (``fmod``,
  ``remainder``, ``copysign``, ``ldexp``, ``trunc``, ``round``, ``rint``, ``logb``...) are exact
  on both.
- ``nextafter`` steps in the operands' own type, so it takes f32 and f64 only (in f32 a 16-bit
  value's neighbour rounds back to itself).
- Predicates (``isnan``, ``isinf``, ``isfinite``, ``signbit``) give bool; ``ilogb`` gives i32
  (``ilogb(0)`` and ``ilogb(NaN)`` are INT_MIN, ``ilogb(inf)`` INT_MAX, as CUDA's);
  ``llrint``/``llround`` give i64 (values beyond its range are unspecified, as in C).
- Integer functions (``popc``, ``clz``, ``ffs``, ``brev``, ``umulhi``) take 32- and 64-bit
  integers; ``popc``, ``clz`` and ``ffs`` give i32, ``brev`` and ``umulhi`` the operands' type
  (``umulhi``: the high half of the unsigned product, Triton's ``tl.umulhi``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ...dtypes import BOOL, F32, I32, I64, DType
from ...errors import CompileError, Location
from ..ir import Expr, Type
from . import typing as ty
from .registry import define, make

F64 = np.float64

# ---------------------------------------------------------------- CUDA's error bounds

# The maximum error CUDA's Math API documents for each function (CUDA 12, "Mathematical
# Functions" appendix of the programming guide), in ulp of the result: (f32, f64). An
# absolute bound is written as a float below 1 (the Bessel functions' beyond |x| >= 8).
# Functions not named here are exact (0 ulp).
CUDA_ULPS: dict[str, tuple[float, float]] = {
    "tan": (4, 2),
    "asin": (2, 2),
    "acos": (2, 2),
    "atan": (2, 2),
    "sinh": (3, 2),
    "cosh": (2, 1),
    "asinh": (3, 2),
    "acosh": (4, 2),
    "atanh": (3, 2),
    "exp10": (2, 1),
    "expm1": (1, 1),
    "log10": (2, 1),
    "log1p": (1, 1),
    "cbrt": (1, 1),
    "rcbrt": (1, 1),
    "erfc": (4, 5),
    "erfinv": (2, 5),
    "erfcinv": (4, 6),
    "erfcx": (4, 4),
    "normcdf": (5, 5),
    "normcdfinv": (5, 8),
    "lgamma": (6, 4),
    "tgamma": (5, 10),
    "sinpi": (1, 2),
    "cospi": (1, 2),
    "j0": (2.2e-6, 5e-12),
    "j1": (2.2e-6, 5e-12),
    "cyl_bessel_i0": (6, 6),
    "cyl_bessel_i1": (6, 6),
    "atan2": (3, 2),
    "hypot": (3, 2),
    "rhypot": (2, 1),
    "norm3d": (3, 2),
    "rnorm3d": (2, 1),
    "norm4d": (3, 2),
    "rnorm4d": (2, 1),
}


# ---------------------------------------------------------------- typing rules


def _resolved(args: list[Expr], loc: Location, name: str) -> list[Expr]:
    """Weak operands take the dtype of the typed ones (T1); every operand a float (T6)."""
    typed = [a for a in args if not ty.is_weak(a)]
    anchor = typed[0] if typed else None
    out = []
    for a in args:
        if ty.is_weak(a):
            a = ty.resolve_weak(a, anchor)[0] if anchor is not None else ty.cast(a, F32)
        out.append(a)
    for a in out:
        ty.require_float(a, loc, name)
    return out


def _common(name: str, args: list[Expr], loc: Location, dtype: DType | None = None) -> Expr:
    """The elementwise op ``name`` of ``args`` in their common float dtype, broadcast; the
    result of ``dtype`` (bool, an integer) where the op gives one."""
    common = args[0].type.scalar
    shape: tuple[int, ...] = ()
    for a in args[1:]:
        common = ty.common_dtype(ty.cast(args[0], common), a)
    for a in args:
        shape = ty.broadcast_shapes(shape, a.type.shape, loc, f"{name}()")
    operands = [ty.cast(a, common) for a in args]
    return make(name, operands, Type(dtype or common, shape), loc)


def rule_math(name: str, args: list[Expr], loc: Location, ctx) -> Expr:
    """Floats in, their common float dtype out."""
    return _common(name, _resolved(args, loc, name), loc)


def rule_nextafter(name: str, args: list[Expr], loc: Location, ctx) -> Expr:
    args = _resolved(args, loc, name)
    node = _common(name, args, loc)
    if node.type.scalar.bits < 32:
        raise CompileError(
            f"{name}() steps to the neighbour in f32 or f64, not {node.type.scalar}",
            loc,
            f"convert first, e.g. {name}((f32)x, (f32)y)",
        )
    return node


def rule_ldexp(name: str, args: list[Expr], loc: Location, ctx) -> Expr:
    """ldexp(x, n), scalbn(x, n): a float times 2^n, n an integer (as i32)."""
    x, n = args
    if ty.is_weak(x):
        x = ty.cast(x, F32)
    ty.require_float(x, loc, name)
    ty.require_int(n, loc, f"{name}()'s exponent")
    n = ty.cast(n, I32)
    shape = ty.broadcast_shapes(x.type.shape, n.type.shape, loc, f"{name}()")
    return make(name, [x, n], Type(x.type.scalar, shape), loc)


def _to(dtype: DType) -> Callable[..., Expr]:
    def rule(name: str, args: list[Expr], loc: Location, ctx) -> Expr:
        return _common(name, _resolved(args, loc, name), loc, dtype)

    rule.__doc__ = f"A float in, {dtype} out."
    return rule


def rule_bits(name: str, args: list[Expr], loc: Location, ctx) -> Expr:
    """popc, clz, ffs (an i32 count or position) and brev, umulhi (the operands' type): 32-
    and 64-bit integers."""
    args = [ty.cast(a, ty.weak_literal_type(a.value)) if ty.is_weak(a) else a for a in args]
    args = list(ty.resolve_weak(*args)) if len(args) == 2 else args
    for a in args:
        ty.require_int(a, loc, name)
        if a.type.scalar.bits < 32:
            raise CompileError(
                f"{name}() takes 32- or 64-bit integers, got {a.type}",
                loc,
                f"widen first, e.g. {name}((u32)x)",
            )
    common = args[0].type.scalar
    for a in args[1:]:
        common = ty.common_dtype(ty.cast(args[0], common), a)
    shape: tuple[int, ...] = ()
    for a in args:
        shape = ty.broadcast_shapes(shape, a.type.shape, loc, f"{name}()")
    result = I32 if name in ("popc", "clz", "ffs") else common
    return make(name, [ty.cast(a, common) for a in args], Type(result, shape), loc)


# ---------------------------------------------------------------- NumPy twins


def _vec(fn: Callable[[float], float]) -> Callable[[np.ndarray], np.ndarray]:
    """A scalar float function of ``math`` over an f64 array (NaN where it has no value)."""
    return np.vectorize(fn, otypes=[F64])


def _in_f64(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Computed in f64 and rounded once to the first operand's dtype."""

    def run(*xs):
        dtype = np.asarray(xs[0]).dtype
        with np.errstate(all="ignore"):
            out = fn(*[np.asarray(x).astype(F64) for x in xs])
        return np.asarray(out).astype(dtype)

    return run


def _safe(fn: Callable[[float], float], pole: Callable[[float], float]) -> Callable:
    """``fn`` where Python raises on a pole or an overflow, with C's value there instead."""

    def value(x: float) -> float:
        try:
            return fn(x)
        except (ValueError, OverflowError):
            return pole(x)

    return _vec(value)


def _gamma_pole(x: float) -> float:
    if x == 0.0:
        return math.copysign(math.inf, x)
    if x == math.inf or (x > 0 and not math.isnan(x)):
        return math.inf  # overflow
    return math.nan  # negative integers and -inf


_lgamma = _safe(math.lgamma, lambda x: math.inf)
_tgamma = _safe(math.gamma, _gamma_pole)
_erf = _vec(math.erf)
_erfc = _vec(math.erfc)
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


def _halley(x: np.ndarray, residual: Callable[[np.ndarray], np.ndarray], sign: float):
    """Halley's iterations for erf(x) = y (``sign`` +1) or erfc(x) = t (-1): the derivative
    is sign * 2/sqrt(pi) exp(-x^2), and f'' / (2 f') = -x for both."""
    for _ in range(4):
        with np.errstate(all="ignore"):
            u = residual(x) / (sign * _TWO_OVER_SQRT_PI * np.exp(-x * x))
            step = u / (1.0 + x * u)
        x = np.where(np.isfinite(step), x - step, x)
    return x


def _first_guess(t: np.ndarray) -> np.ndarray:
    """erfinv(y) to 1e-3 from t = 1 - |y| (Winitzki's formula, a = 0.147), for |y| < 1."""
    a = 0.147
    with np.errstate(all="ignore"):
        ln = np.log(t * (2.0 - t))
        first = 2.0 / (math.pi * a) + ln / 2.0
        return np.sqrt(np.sqrt(first * first - ln / a) - first)


def _erfc_solve(t: np.ndarray) -> np.ndarray:
    """x >= 0 with erfc(x) = t, for 0 < t <= 1 (t exact: no cancellation near 0)."""
    return _halley(_first_guess(t), lambda x: _erfc(x) - t, -1.0)


def _erfinv(y: np.ndarray) -> np.ndarray:
    y = np.asarray(y, F64)
    a = np.abs(y)
    small = a <= 0.5  # erf(x) - y has no cancellation; beyond, solve erfc(x) = 1 - |y| (exact)
    t = np.where(small, 0.5, 1.0 - a)
    near = _halley(_first_guess(np.where(small, 1.0 - a, 0.5)), lambda x: _erf(x) - a, 1.0)
    far = _erfc_solve(np.where(small, 0.5, np.maximum(t, 1e-300)))
    x = np.where(small, near, far)
    x = np.where(a == 1.0, np.inf, np.where(a > 1.0, np.nan, x))
    x = np.where(y == 0.0, 0.0, x)
    return np.copysign(x, y)


def _erfcinv(t: np.ndarray) -> np.ndarray:
    t = np.asarray(t, F64)
    upper = t > 1.0  # erfcinv(t) = -erfcinv(2 - t), 2 - t exact there
    s = np.where(upper, 2.0 - t, t)
    near_one = np.abs(1.0 - t) <= 0.5  # erfinv's small branch keeps 1 - t's digits
    x = np.where(near_one, -_erfinv(np.where(near_one, t - 1.0, 0.0)), 0.0)
    far = _erfc_solve(np.where(near_one | (s <= 0), 0.5, s))
    x = np.where(near_one, x, np.where(upper, -far, far))
    x = np.where(t == 0.0, np.inf, np.where(t == 2.0, -np.inf, x))
    return np.where((t < 0) | (t > 2) | np.isnan(t), np.nan, x)


def _two_square(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """x*x as hi + lo exactly (Dekker's splitting)."""
    c = 134217729.0 * x  # 2^27 + 1
    high = c - (c - x)
    low = x - high
    hi = x * x
    lo = ((high * high - hi) + 2.0 * high * low) + low * low
    return hi, lo


def _exp_square(x: np.ndarray) -> np.ndarray:
    hi, lo = _two_square(x)
    return np.exp(hi) * (1.0 + lo)


def _erfcx(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, F64)
    with np.errstate(all="ignore"):
        mid = _exp_square(np.where(np.abs(x) < 26.0, x, 0.0)) * _erfc(np.where(x < 26, x, 0.0))
        # beyond 26: the asymptotic series, 1/(x sqrt(pi)) sum (-1)^k (2k-1)!! / (2x^2)^k
        big = np.where(x >= 26.0, x, 26.0)
        z = 1.0 / (2.0 * big * big)
        term, total = np.ones_like(big), np.ones_like(big)
        for k in range(1, 12):
            term = -term * (2 * k - 1) * z
            total = total + term
        tail = total / (big * math.sqrt(math.pi))
        neg = 2.0 * _exp_square(np.where(x <= -26.0, x, 0.0)) - tail  # overflows to inf
    return np.where(x >= 26.0, tail, np.where(x <= -26.0, neg, mid))


_RSQRT2_HI = 0.7071067811865476  # 1/sqrt(2) = hi + lo
_RSQRT2_LO = -4.833646656726457e-17


def _normcdf(x: np.ndarray) -> np.ndarray:
    """0.5 erfc(-x / sqrt(2)), the argument's rounding error corrected to first order."""
    x = np.asarray(x, F64)
    with np.errstate(all="ignore"):
        z = -x * _RSQRT2_HI
        c = 134217729.0
        xh = c * x - (c * x - x)
        kh = c * _RSQRT2_HI - (c * _RSQRT2_HI - _RSQRT2_HI)
        xl, kl = x - xh, _RSQRT2_HI - kh
        err = ((xh * kh - x * _RSQRT2_HI) + xh * kl + xl * kh) + xl * kl  # x*k_hi - fl(x*k_hi)
        dz = -(err + x * _RSQRT2_LO)  # the exact argument is z + dz
        value = _erfc(z) - _TWO_OVER_SQRT_PI * np.exp(-z * z) * dz
    return np.where(np.isfinite(x), 0.5 * value, np.where(x > 0, 1.0, np.where(x < 0, 0.0, x)))


def _normcdfinv(p: np.ndarray) -> np.ndarray:
    return -math.sqrt(2.0) * _erfcinv(2.0 * np.asarray(p, F64))


def _reduce_half_turns(x: np.ndarray) -> np.ndarray:
    """x - 2 round(x / 2), exactly: the same angle in half turns, in [-1, 1]."""
    return x - 2.0 * np.round(x / 2.0)


def _sinpi(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, F64)
    with np.errstate(all="ignore"):
        r = _reduce_half_turns(x)
        a = np.abs(r)
        y = np.where(
            a <= 0.25,
            np.sin(math.pi * a),
            np.where(a <= 0.75, np.cos(math.pi * (0.5 - a)), np.sin(math.pi * (1.0 - a))),
        )
        y = np.copysign(y, r)
    return np.where(y == 0.0, np.copysign(0.0, x), y)  # sinpi(n) is +-0 with n's sign


def _cospi(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, F64)
    with np.errstate(all="ignore"):
        a = np.abs(_reduce_half_turns(x))
        y = np.where(
            a <= 0.25,
            np.cos(math.pi * a),
            np.where(a <= 0.75, np.sin(math.pi * (0.5 - a)), -np.cos(math.pi * (1.0 - a))),
        )
    return np.where(a == 0.5, 0.0, y)  # cospi(n + 1/2) is +0


def _round_half_away(x: np.ndarray) -> np.ndarray:
    a = np.abs(x)
    r = np.floor(a)
    r = r + (a - r >= 0.5)
    return np.copysign(r, x)


def _logb(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, F64)
    _, e = np.frexp(x)
    out = (e - 1).astype(F64)
    return np.where(x == 0, -np.inf, np.where(np.isfinite(x), out, np.abs(x)))


def _ilogb(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, F64)
    _, e = np.frexp(np.where(np.isfinite(x), x, 1.0))
    out = (e - 1).astype(np.int64)
    out = np.where(np.isinf(x), 2**31 - 1, out)
    return np.where((x == 0) | np.isnan(x), -(2**31), out).astype(np.int32)


def _llrint(x: np.ndarray) -> np.ndarray:
    return np.clip(np.rint(np.asarray(x, F64)), -(2.0**63), 2.0**63 - 1024).astype(np.int64)


def _llround(x: np.ndarray) -> np.ndarray:
    r = _round_half_away(np.asarray(x, F64))
    return np.clip(r, -(2.0**63), 2.0**63 - 1024).astype(np.int64)


def _bessel_series(x: np.ndarray, order: int, alternating: bool) -> np.ndarray:
    """sum_k (-1)^k (x/2)^(2k+n) / (k! (k+n)!) (J_n), or with + signs (I_n)."""
    half = x / 2.0
    term = half**order / math.factorial(order)
    total = term.copy()
    q = (-1.0 if alternating else 1.0) * half * half
    for k in range(1, int(np.max(np.abs(x), initial=0.0) * 1.5) + 40):
        term = term * q / (k * (k + order))
        total = total + term
    return total


def _bessel_j(order: int) -> Callable[[np.ndarray], np.ndarray]:
    """J_n(x): the series for |x| < 2, else the trapezoid rule on Bessel's integral
    (1/2pi) int_0^2pi cos(n t - x sin t) dt, exact to rounding for a periodic integrand once the
    points outnumber |x| (e|x|/2 of them: the error falls like (e|x| / 2N)^N)."""

    def j(x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, F64)
        finite = np.where(np.isfinite(x), x, 0.0)
        small = _bessel_series(np.where(np.abs(finite) < 2, finite, 0.0), order, True)
        n = 2 * (int(np.max(np.abs(finite), initial=0.0) * 0.75) + 40)
        t = np.linspace(0.0, 2.0 * math.pi, n, endpoint=False)
        big = np.cos(order * t[None, :] - finite.reshape(-1, 1) * np.sin(t)[None, :]).mean(1)
        out = np.where(np.abs(finite) < 2, small, big.reshape(x.shape))
        return np.where(np.isinf(x), 0.0, np.where(np.isnan(x), np.nan, out))

    return j


def _bessel_i1(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, F64)
    with np.errstate(all="ignore"):
        finite = np.where(np.abs(x) < 720, x, 0.0)
        out = _bessel_series(finite, 1, False)
    return np.where(np.abs(x) >= 720, np.copysign(np.inf, x), out)


def _ldexp(x, n):
    """x * 2^n in f64 (exact), rounded once to x's dtype."""
    x = np.asarray(x)
    with np.errstate(all="ignore"):
        return np.ldexp(x.astype(F64), np.asarray(n).astype(np.int32)).astype(x.dtype)


def _nextafter(x, y):
    return np.nextafter(x, y)


def _ieee_remainder(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    x, y = np.broadcast_arrays(np.asarray(x, F64), np.asarray(y, F64))

    def one(a: float, b: float) -> float:
        if math.isnan(a) or math.isnan(b) or math.isinf(a) or b == 0.0:
            return math.nan
        return math.remainder(a, b)

    return np.vectorize(one, otypes=[F64])(x, y)


def _fdim(x, y):
    return np.where(x > y, x - y, np.where(np.isnan(x) | np.isnan(y), np.nan, 0.0))


def _norm(*xs):
    return np.sqrt(sum(np.asarray(x) * np.asarray(x) for x in xs))


def _rnorm(*xs):
    return 1.0 / _norm(*xs)


def _unsigned(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x)
    return x.view(np.uint64 if x.dtype.itemsize == 8 else np.uint32)


def _bit_count(u: np.ndarray) -> np.ndarray:
    raw = u.astype(u.dtype.newbyteorder("<")).reshape(-1).view(np.uint8)
    counts = np.unpackbits(raw).reshape(u.size, -1).sum(1)
    return counts.reshape(u.shape).astype(np.int32)


def _popc(x):
    return _bit_count(_unsigned(x))


def _clz(x):
    u = _unsigned(x)
    bits = u.dtype.itemsize * 8
    n = np.full(u.shape, bits, np.int32)
    for k in range(bits):  # the highest set bit counts
        n = np.where((u >> np.uint64(k)).astype(bool) & (n > 0), bits - 1 - k, n)
    return np.where(u == 0, bits, n).astype(np.int32)


def _ffs(x):
    u = _unsigned(x)
    bits = u.dtype.itemsize * 8
    n = np.zeros(u.shape, np.int32)
    for k in range(bits - 1, -1, -1):  # the lowest set bit wins
        n = np.where(((u >> np.uint64(k)) & np.uint64(1)).astype(bool), k + 1, n)
    return n


def _brev(x):
    u = _unsigned(x)
    bits = u.dtype.itemsize * 8
    out = np.zeros_like(u)
    for k in range(bits):
        bit = (u >> u.dtype.type(k)) & u.dtype.type(1)
        out = out | (bit << u.dtype.type(bits - 1 - k))
    return out.view(np.asarray(x).dtype)


def _umulhi(a, b):
    a, b = np.broadcast_arrays(np.asarray(a), np.asarray(b))
    dtype = a.dtype
    ua, ub = _unsigned(a), _unsigned(b)
    if dtype.itemsize == 4:
        return (
            ((ua.astype(np.uint64) * ub.astype(np.uint64)) >> np.uint64(32))
            .astype(np.uint32)
            .view(dtype)
        )
    high = [(int(p) * int(q)) >> 64 for p, q in zip(ua.reshape(-1), ub.reshape(-1), strict=True)]
    return np.array(high, np.uint64).reshape(a.shape).view(dtype)


def _predicate(fn: Callable[[np.ndarray], np.ndarray]) -> Callable[[np.ndarray], np.ndarray]:
    return lambda x: fn(np.asarray(x).astype(F64))


# ---------------------------------------------------------------- the entries

# the entries of this module, in order (the Python front end's `libdevice` names them)
NAMES: list[str] = []


def _def(name: str, doc: str, arity: int, rule, cuda: str, numpy) -> None:
    define(name, doc, arity, rule, cuda, numpy)
    NAMES.append(name)


_UNARY: tuple[tuple[str, str, Callable[..., Any]], ...] = (
    ("tan", "tangent", np.tan),
    ("asin", "arcsine, in [-pi/2, pi/2]", np.arcsin),
    ("acos", "arccosine, in [0, pi]", np.arccos),
    ("atan", "arctangent, in [-pi/2, pi/2]", np.arctan),
    ("sinh", "hyperbolic sine", np.sinh),
    ("cosh", "hyperbolic cosine", np.cosh),
    ("asinh", "inverse hyperbolic sine", np.arcsinh),
    ("acosh", "inverse hyperbolic cosine", np.arccosh),
    ("atanh", "inverse hyperbolic tangent", np.arctanh),
    ("exp10", "10^x", lambda x: np.power(10.0, x)),
    ("expm1", "e^x - 1, accurate near 0", np.expm1),
    ("log10", "base-10 logarithm", np.log10),
    ("log1p", "log(1 + x), accurate near 0", np.log1p),
    ("cbrt", "cube root", np.cbrt),
    ("rcbrt", "1 / cbrt(x)", lambda x: 1.0 / np.cbrt(x)),
    ("erfc", "complementary error function, 1 - erf(x) without cancellation", _erfc),
    ("erfinv", "inverse error function: erf(erfinv(y)) = y, y in [-1, 1]", _erfinv),
    ("erfcinv", "inverse complementary error function, t in [0, 2]", _erfcinv),
    ("erfcx", "scaled complementary error function, e^(x^2) erfc(x)", _erfcx),
    ("normcdf", "standard normal CDF, 0.5 erfc(-x / sqrt(2))", _normcdf),
    ("normcdfinv", "inverse of normcdf, p in [0, 1]", _normcdfinv),
    ("lgamma", "log |gamma(x)|", _lgamma),
    ("tgamma", "gamma function", _tgamma),
    ("trunc", "round toward zero", np.trunc),
    ("round", "round half away from zero", _round_half_away),
    ("rint", "round half to even", np.rint),
    ("nearbyint", "round half to even (as rint)", np.rint),
    ("sinpi", "sin(pi x), exact at multiples of 1/2", _sinpi),
    ("cospi", "cos(pi x), exact at multiples of 1/2", _cospi),
    ("logb", "the binary exponent of x, as a float (logb(0) = -inf)", _logb),
    ("j0", "Bessel function of the first kind, order 0", _bessel_j(0)),
    ("j1", "Bessel function of the first kind, order 1", _bessel_j(1)),
    ("cyl_bessel_i0", "modified Bessel function of the first kind, order 0", np.i0),
    ("cyl_bessel_i1", "modified Bessel function of the first kind, order 1", _bessel_i1),
)
for _name, _doc, _np in _UNARY:
    _def(_name, f"{_name}(x): {_doc}", 1, rule_math, f"tx::{_name}({{0}})", _in_f64(_np))

_BINARY: tuple[tuple[str, str, Callable[..., Any]], ...] = (
    ("atan2", "the angle of the point (x, y), in [-pi, pi]", np.arctan2),
    ("hypot", "sqrt(x^2 + y^2) without overflow", np.hypot),
    ("rhypot", "1 / hypot(x, y)", lambda x, y: 1.0 / np.hypot(x, y)),
    ("fmod", "x - trunc(x / y) y, exactly (C's fmod; `%` on floats)", np.fmod),
    ("remainder", "x - rint(x / y) y, exactly (IEEE remainder)", _ieee_remainder),
    ("copysign", "|x| with the sign of y", np.copysign),
    ("fdim", "x - y where x > y, else 0", _fdim),
)
for _name, _doc, _np in _BINARY:
    _args = "y, x" if _name == "atan2" else "x, y"
    _def(
        _name,
        f"{_name}({_args}): {_doc}",
        2,
        rule_math,
        f"tx::{_name}({{0}}, {{1}})",
        _in_f64(_np),
    )
_def(
    "nextafter",
    "nextafter(x, y): the float after x in the direction of y (f32, f64)",
    2,
    rule_nextafter,
    "tx::nextafter({0}, {1})",
    _nextafter,
)
for _name in ("ldexp", "scalbn"):
    _def(
        _name,
        f"{_name}(x, n): x * 2^n, exactly (rounded once where it underflows); n an integer",
        2,
        rule_ldexp,
        f"tx::{_name}({{0}}, {{1}})",
        _ldexp,
    )
for _name, _arity, _doc, _np in (
    ("norm3d", 3, "sqrt(a^2 + b^2 + c^2) without overflow", _norm),
    ("rnorm3d", 3, "1 / norm3d(a, b, c)", _rnorm),
    ("norm4d", 4, "sqrt(a^2 + b^2 + c^2 + d^2) without overflow", _norm),
    ("rnorm4d", 4, "1 / norm4d(a, b, c, d)", _rnorm),
):
    _vars = ", ".join("abcd"[:_arity])
    _spelling = ", ".join(f"{{{k}}}" for k in range(_arity))
    _def(
        _name,
        f"{_name}({_vars}): {_doc}",
        _arity,
        rule_math,
        f"tx::{_name}({_spelling})",
        _in_f64(_np),
    )
for _name, _doc, _np in (
    ("isnan", "whether x is a NaN", np.isnan),
    ("isinf", "whether x is +inf or -inf", np.isinf),
    ("isfinite", "whether x is neither infinite nor a NaN", np.isfinite),
    ("signbit", "whether x's sign bit is set (-0.0 and negative NaNs too)", np.signbit),
):
    _def(_name, f"{_name}(x): {_doc}; bool", 1, _to(BOOL), f"tx::{_name}({{0}})", _predicate(_np))
_def(
    "ilogb",
    "ilogb(x): the binary exponent of x, i32 (INT_MIN for 0 and NaN, INT_MAX for inf)",
    1,
    _to(I32),
    "tx::ilogb({0})",
    _ilogb,
)
_def(
    "llrint",
    "llrint(x): x rounded half to even, i64 (beyond its range unspecified)",
    1,
    _to(I64),
    "tx::llrint({0})",
    _llrint,
)
_def(
    "llround",
    "llround(x): x rounded half away from zero, i64 (beyond its range unspecified)",
    1,
    _to(I64),
    "tx::llround({0})",
    _llround,
)
for _name, _arity, _doc, _np in (
    ("popc", 1, "the number of set bits, i32", _popc),
    ("clz", 1, "the number of leading zero bits, i32 (the width for 0)", _clz),
    ("ffs", 1, "the position of the lowest set bit, from 1; 0 for 0 (i32)", _ffs),
    ("brev", 1, "the bits in reverse order", _brev),
    ("umulhi", 2, "the high half of the unsigned product of two integers of one width", _umulhi),
):
    _def(
        _name,
        f"{_name}({'x' if _arity == 1 else 'x, y'}): {_doc} (32- and 64-bit integers)",
        _arity,
        rule_bits,
        f"tx::{_name}({'{0}' if _arity == 1 else '{0}, {1}'})",
        _np,
    )

# the names a kernel may spell these by in Triton's libdevice (the Python front end maps them)
LIBDEVICE_ALIASES = {"isfinited": "isfinite", "finitef": "isfinite"}
