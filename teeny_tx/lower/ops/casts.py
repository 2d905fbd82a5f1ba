"""Conversions between dtypes: the one definition every backend follows.

Input: NumPy values (arrays or scalars) and the :class:`~teeny_tx.dtypes.DType` to convert to.
Output: the converted NumPy values (:func:`cast_array`), or a Python constant
(:func:`cast_value`, used by constant folding). The interpreter, constant folding and the device
header's ``tx::cast<To>(from)`` (``prelude/teeny_tx.cuh``) implement the same rules, and
``tests/test_casts.py`` / ``tests/gpu/test_casts_gpu.py`` check them bit for bit:

C1. To bool: ``x != 0`` (a NaN is true, as in C).
C2. From bool: 0 or 1.
C3. Integer to integer: two's complement, the low bits kept (C's and CUDA's wrap).
C4. Float to integer: truncate toward zero; NaN gives 0; a value beyond the range (±inf too)
    gives the nearest representable integer (saturates), as PTX's ``cvt.rzi.sat`` does, for
    every width (i8, u8, i16, u16, i32, u32, i64, u64).
C5. To a float (from an integer or a float): rounded once, to nearest, ties to even; too large
    a magnitude gives ±inf. No intermediate rounding: f64 → bf16 and i64 → bf16 are rounded
    once, not through f32. A NaN stays a NaN (its payload bits are unspecified).
C6. ``cast(x, T, RTZ)`` of a float to a narrower float rounds toward zero instead: beyond the
    range it gives the largest finite value (:func:`cast_toward_zero`).

Integer arithmetic follows from C3 (the op table, ``lower/ops/table.py``, spells it; the device
header's ``tx::wrap_*``/``tx::int_*`` and NumPy's integer ufuncs implement it;
``tests/test_int_semantics.py`` / ``tests/gpu/test_int_semantics_gpu.py`` check it):

I1. Every integer operation's result is its dtype's, wrapped by C3 before it is used, compared
    or stored: i8 ``127 + 127`` is -2 even when stored into an i32 (C would promote to int and
    keep 254). The GPU computes in an unsigned type of at least 32 bits and converts back.
I2. Signed ``+ - *``, unary ``-`` and ``<<`` wrap (two's complement); nothing is undefined, so
    ``(x + 1) > x`` at the maximum is 0 on every backend (NVRTC may not fold it to 1).
I3. ``a / b`` truncates toward zero and ``a % b`` has the sign of ``a`` (C's); ``a / 0`` and
    ``a % 0`` are 0; ``MIN / -1`` is MIN (it wraps) and ``MIN % -1`` is 0. ``cdiv(a, b)`` is
    ``(a + b - 1) / b`` by these rules.
I4. A shift amount is read as unsigned: an amount of the type's width or more (a negative one
    too) shifts every bit out: ``<<`` gives 0, ``>>`` gives 0, or -1 for a negative signed
    value (NumPy's rule; PTX's ``shl``/``shr`` clamp the same way). ``>>`` is arithmetic for
    signed types and logical for unsigned ones.
"""

from __future__ import annotations

import numpy as np

from ...dtypes import DTYPES, DType, from_numpy

_F64 = np.float64


def _is_float(dtype: np.dtype) -> bool:
    return dtype.kind == "f" or dtype.name == "bfloat16"


def cast_array(x, to: DType) -> np.ndarray:
    """``x`` converted to ``to`` by C1-C5."""
    x = np.asarray(x)
    src = x.dtype
    with np.errstate(all="ignore"):
        if to.kind == "b":  # C1
            return x != 0
        if src.kind == "b":  # C2
            return x.astype(to.np)
        if to.is_int:
            return _float_to_int(x, to) if _is_float(src) else x.astype(to.np)  # C4, C3
        if to.name == "bf16":  # C5
            return _to_bf16(x)
        if to.name == "f16" and src.name == "bfloat16":
            return x.astype(np.float32).astype(np.float16)  # exact widening, then one rounding
        return x.astype(to.np)


def cast_toward_zero(x, to: DType) -> np.ndarray:
    """C6. A float narrowed to the float type ``to`` rounded toward zero (``cast(x, T, RTZ)``):
    the nearest value (C5), one step toward zero where that is larger in magnitude than x;
    beyond the range it is the largest finite value, not an infinity (NaN and infinities
    stay)."""
    x = np.asarray(x)
    nearest = np.asarray(cast_array(x, to))
    bits = {2: np.uint16, 4: np.uint32, 8: np.uint64}[to.itemsize]
    with np.errstate(all="ignore"):
        wide, got = x.astype(_F64), nearest.astype(_F64)
        away = np.isfinite(wide) & (np.abs(got) > np.abs(wide))
    stepped = (nearest.view(bits) - np.asarray(1, bits)).view(nearest.dtype)  # |.| one step less
    return np.where(away, stepped, nearest).astype(nearest.dtype)


def cast_value(value: int | float | bool, to: DType, src: DType | None = None):
    """A Python constant of dtype ``src`` (inferred from the value when None) as ``to`` holds
    it, by C1-C5, as a Python value."""
    if to.kind == "b":
        return bool(value)
    if isinstance(value, bool):
        value = int(value)
    if isinstance(value, int) and (src is None or not src.is_float):
        if to.is_int:  # C3 on Python integers of any size
            value &= (1 << to.bits) - 1
            if to.kind == "i" and value >= 1 << (to.bits - 1):
                value -= 1 << to.bits
            return value
        return float(cast_array(np.asarray(_round_int(value, to), _F64), to).item())
    if src is None or not src.is_float:
        src = DTYPES["f64"]
    array = np.asarray(value, dtype=src.np)
    out = cast_array(array, to).item()
    return float(out) if to.is_float else int(out)


# ---------------------------------------------------------------- C4


def _float_to_int(x: np.ndarray, to: DType) -> np.ndarray:
    wide = x.astype(_F64)  # exact for every float dtype of the language
    lo, hi = (
        (-(2.0 ** (to.bits - 1)), 2.0 ** (to.bits - 1)) if to.kind == "i" else (0.0, 2.0**to.bits)
    )
    info = np.iinfo(to.np)
    inside = (wide > lo - 1) & (wide < hi)  # NaN is neither
    safe = np.where(inside, np.trunc(wide), 0.0)
    out = safe.astype(to.np)
    out = np.where(wide >= hi, to.np.type(info.max), out)
    out = np.where(wide <= lo - 1, to.np.type(info.min), out)
    return np.asarray(out, dtype=to.np)


# ---------------------------------------------------------------- C5 for bf16

_BF16 = DTYPES["bf16"].np


def _to_bf16(x: np.ndarray) -> np.ndarray:
    """One rounding to bf16: a value is first narrowed to f32 by rounding to odd (exact when
    it fits, else the neighbour with an odd last bit), which f32's 16 extra bits make safe,
    then rounded to nearest even."""
    src = x.dtype
    if _is_float(src) and src.itemsize <= 4 or src.kind in "iu" and src.itemsize <= 2:
        return x.astype(np.float32).astype(_BF16)
    wide = _int_to_f64_odd(x) if src.kind in "iu" else x.astype(_F64)
    return _f64_to_f32_odd(wide).astype(_BF16)


def _f64_to_f32_odd(x: np.ndarray) -> np.ndarray:
    near = x.astype(np.float32)
    back = near.astype(_F64)
    inexact = (back != x) & np.isfinite(x)
    toward_zero = np.where(np.abs(back) > np.abs(x), np.nextafter(near, np.float32(0)), near)
    bits = toward_zero.view(np.uint32)
    odd = np.where(inexact, bits | np.uint32(1), near.view(np.uint32))
    return odd.astype(np.uint32).view(np.float32)


def _int_to_f64_odd(x: np.ndarray) -> np.ndarray:
    """Integers to f64 rounded to odd: exact below 2^53, else the nearest f64 with an odd last
    bit on the side of the exact value (an exact two-term sum says which side)."""
    if x.dtype.itemsize < 8:
        return x.astype(_F64)
    low = (x & x.dtype.type(0xFFFF)).astype(_F64)
    high = (x - (x & x.dtype.type(0xFFFF))).astype(_F64)  # at most 48 significant bits: exact
    total = high + low
    back = total - high
    error = (high - (total - back)) + (low - back)  # exact: high + low == total + error
    bits = total.view(np.uint64)
    even = (bits & np.uint64(1)) == 0
    nudged = np.nextafter(total, np.where(error > 0, np.inf, -np.inf))
    return np.where((error != 0) & even, nudged, total)


def _round_int(value: int, to: DType) -> float:
    """A Python integer rounded to ``to``'s precision (ties to even) as an exact f64, or an
    overflowing f64 when it is too large for any float."""
    digits = {"f16": 11, "bf16": 8, "f32": 24, "f64": 53}[to.name]
    sign, m = (-1 if value < 0 else 1), abs(value)
    extra = m.bit_length() - digits
    if extra > 0:
        q, r = divmod(m, 1 << extra)
        half = 1 << (extra - 1)
        if r > half or (r == half and q & 1):
            q += 1
        m = q << extra
    if m.bit_length() > 1024:
        return sign * float("inf")
    return float(sign * m)


def numpy_dtype_of(value) -> DType | None:
    return from_numpy(np.asarray(value).dtype)
