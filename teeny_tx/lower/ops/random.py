"""Random numbers: counter-based Philox4x32-10, as Triton's ``tl.rand`` family.

Input: nothing (declarations; imported at the end of ``table.py``). Output: the entries ``rand``,
``randn``, ``randint`` and ``randint4x`` in ``table.OPS``, and the NumPy twin of the device code in
``prelude/random.cuh`` (:func:`philox4x32_10`, :func:`philox`, :func:`rand`...), which the
interpreter, constant folding, the library's references and the tests call.

Conventions (both backends):

- key: ``seed`` converted to u64; k0 = its low 32 bits, k1 = its high 32 bits.
- counter: ``offset`` converted to u64 (C conversion: a signed offset is sign-extended, so an
  offset means the same under 32- and 64-bit indices); c0 = low 32 bits, c1 = high 32 bits,
  c2 = c3 = 0. For 0 <= offset < 2^32 these are Triton's counter and key.
- Philox4x32-10 as in Random123: multipliers 0xD2511F53 (on c0) and 0xCD9E8D57 (on c2), key
  increments 0x9E3779B9 and 0xBB67AE85 before rounds 2..10.
- ``rand``: (word0 >> 8) * 2^-24, an exact f32 in [0, 1). ``randint``: word 0.
  ``randint4x(seed, offset, k)``: word k. These are bit-identical on both backends.
- ``randn``: Box-Muller, sqrt(-2 log(u1)) * cos(2 pi u2) with u1 = 1 - (word0 >> 8) * 2^-24
  (in (0, 1], so the log is finite) and u2 = (word1 >> 8) * 2^-24, in f32 with 2 pi rounded to
  f32. Products and the square root are IEEE on both sides; log and cos are CUDA's logf/cosf on
  the GPU (within 1 and 2 ulp) and, here, float64 log/cos rounded to f32 (machine-independent).
  The two agree to a few ulp, not bit for bit.
"""

from __future__ import annotations

import numpy as np

from ...dtypes import F32, I32, U32, U64
from ...errors import CompileError, Location
from ..ir import Const, Expr, PointerType, Type
from . import typing as ty
from .registry import define as _def
from .registry import make

# ---------------------------------------------------------------- NumPy twin of random.cuh

M0, M1 = 0xD2511F53, 0xCD9E8D57  # round multipliers (on c0 and c2)
W0, W1 = 0x9E3779B9, 0xBB67AE85  # key increments
ROUNDS = 10
TWO_PI_F32 = np.float32(6.28318548)  # 2 pi rounded to f32, as in random.cuh
_2_POW_M24 = np.float32(2.0**-24)
_u32, _u64 = np.uint32, np.uint64


def philox4x32_10(c0, c1, c2, c3, k0, k1) -> tuple[np.ndarray, ...]:
    """Philox4x32-10 of counters (c0..c3) under keys (k0, k1), elementwise on broadcast arrays.

    Every argument is an integer array (or number) read as u32; the four result words are
    uint32 arrays of the broadcast shape. ``mulhi`` is the high half of a u64 product.
    """
    c0, c1, c2, c3, k0, k1 = (np.asarray(x).astype(_u32) for x in (c0, c1, c2, c3, k0, k1))
    c0, c1, c2, c3, k0, k1 = np.broadcast_arrays(c0, c1, c2, c3, k0, k1)
    with np.errstate(over="ignore"):
        for r in range(ROUNDS):
            if r:
                k0 = k0 + _u32(W0)
                k1 = k1 + _u32(W1)
            p0 = c0.astype(_u64) * _u64(M0)
            p1 = c2.astype(_u64) * _u64(M1)
            hi0, lo0 = (p0 >> _u64(32)).astype(_u32), p0.astype(_u32)
            hi1, lo1 = (p1 >> _u64(32)).astype(_u32), p1.astype(_u32)
            c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
    return tuple(np.asarray(w, dtype=_u32) for w in (c0, c1, c2, c3))


def philox(seed, offset) -> tuple[np.ndarray, ...]:
    """The four words of one lane: seed (read as u64) is the key, offset (as u64) the counter."""
    seed = np.asarray(seed).astype(_u64)
    offset = np.asarray(offset).astype(_u64)
    mask = _u64(0xFFFFFFFF)
    return philox4x32_10(offset & mask, offset >> _u64(32), 0, 0, seed & mask, seed >> _u64(32))


def uniform(word: np.ndarray) -> np.ndarray:
    """A u32 word to an f32 in [0, 1): its top 24 bits times 2^-24 (exact)."""
    return (np.asarray(word, _u32) >> _u32(8)).astype(np.float32) * _2_POW_M24


def box_muller(word0: np.ndarray, word1: np.ndarray) -> np.ndarray:
    """sqrt(-2 log u1) * cos(2 pi u2) in f32, u1 = 1 - uniform(word0), u2 = uniform(word1)."""
    u1 = (_u32(1 << 24) - (np.asarray(word0, _u32) >> _u32(8))).astype(np.float32) * _2_POW_M24
    log_u1 = np.log(u1.astype(np.float64)).astype(np.float32)
    r = np.sqrt(np.float32(-2.0) * log_u1)
    theta = TWO_PI_F32 * uniform(word1)
    return r * np.cos(theta.astype(np.float64)).astype(np.float32)


def rand(seed, offset) -> np.ndarray:
    """The language's ``rand``: f32 uniform in [0, 1), bit-identical to the GPU's."""
    return uniform(philox(seed, offset)[0])


def randn(seed, offset) -> np.ndarray:
    """The language's ``randn``: f32 standard normal (within a few ulp of the GPU's)."""
    w = philox(seed, offset)
    return box_muller(w[0], w[1])


def randint(seed, offset) -> np.ndarray:
    """The language's ``randint``: word 0, u32."""
    return philox(seed, offset)[0]


def randint4x(seed, offset, k) -> np.ndarray:
    """The language's ``randint4x``: word ``k`` (0..3), u32."""
    return philox(seed, offset)[int(np.asarray(k))]


# ---------------------------------------------------------------- typing


def _integer(x: Expr, op: str, what: str, loc: Location, hint: str) -> Expr:
    """seed and offset are integers (bool, floats and pointers refused), read as u64."""
    dtype = x.type.dtype
    if isinstance(dtype, PointerType) or not dtype.is_int:
        raise CompileError(f"{op}() needs an integer {what}, got {x.type}", loc, hint)
    return ty.cast(x, U64)


_SEED_HINT = "a seed is an integer scalar or tile, e.g. an i64 parameter; convert with (i64)x"
_OFFSET_HINT = "offsets are integer tiles, e.g. program_id(0) * BLOCK + arange(0, BLOCK)"


def _seed_offset(name: str, args: list[Expr], loc: Location) -> tuple[Expr, Expr, tuple]:
    seed = _integer(args[0], name, "seed", loc, _SEED_HINT)
    offset = _integer(args[1], name, "offset", loc, _OFFSET_HINT)
    shape = ty.broadcast_shapes(seed.type.shape, offset.type.shape, loc, f"{name}()")
    return seed, offset, shape


def rule_random(name: str, args: list[Expr], loc: Location, ctx) -> Expr:
    """rand, randn, randint: (seed, offset) → f32 or u32 of their broadcast shape."""
    seed, offset, shape = _seed_offset(name, args, loc)
    return make(name, [seed, offset], Type(_RESULT[name], shape), loc)


def rule_randint4x(name: str, args: list[Expr], loc: Location, ctx) -> Expr:
    """randint4x(seed, offset, k): k a constant 0..3, rendered as a template argument."""
    seed, offset, shape = _seed_offset(name, args[:2], loc)
    k = args[2]
    value = k.value if isinstance(k, Const) and not k.type.is_tile else None
    if not (isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 4):
        got = value if value is not None else f"a non-constant {k.type}"
        raise CompileError(
            f"randint4x() takes the word index k as a constant 0, 1, 2 or 3, got {got}",
            k.loc,
            "write the index as a literal or a const parameter",
        )
    word = Const(type=Type(I32), loc=k.loc, value=value)
    return make(name, [seed, offset, word], Type(U32, shape), loc)


_RESULT = {"rand": F32, "randn": F32, "randint": U32}

# ---------------------------------------------------------------- the table

_def(
    "rand",
    "rand(seed, offset): f32 uniform in [0, 1), (word0 >> 8) * 2^-24 of Philox(offset, seed)",
    2,
    rule_random,
    "tx::rand({0}, {1})",
    rand,
    family="random",
)
_def(
    "randn",
    "randn(seed, offset): f32 standard normal, Box-Muller on words 0, 1 (backends differ by ulps)",
    2,
    rule_random,
    "tx::randn({0}, {1})",
    randn,
    family="random",
)
_def(
    "randint",
    "randint(seed, offset): u32, word 0 of Philox(offset, seed)",
    2,
    rule_random,
    "tx::randint({0}, {1})",
    randint,
    family="random",
)
_def(
    "randint4x",
    "randint4x(seed, offset, k): u32, word k (a constant 0..3) of Philox(offset, seed)",
    3,
    rule_randint4x,
    "tx::randint4x<{2}>({0}, {1})",
    randint4x,
    family="random",
)
