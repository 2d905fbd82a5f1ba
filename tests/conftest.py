"""Helpers shared by the CPU tests: kernel text in, IR, CUDA or the expected error out."""

from __future__ import annotations

import contextlib
import zlib
from pathlib import Path

import numpy as np
import pytest

import teeny_tx
from teeny_tx.kernel import HEADERS
from teeny_tx.lower import ir
from teeny_tx.lower.build.builder import Spec, build_kernel
from teeny_tx.parse import parse
from teeny_tx.runtime import nvrtc

# comparing with float64 (tests/numerics.py, which tests/cases.py also reads): re-exported
from .numerics import SUBNORMAL, UNIT_ROUNDOFF, assert_close_elementwise, dtype_name  # noqa: F401

KERNEL_FILE = "kernels/t.c"


def stable_seed(*parts) -> int:
    """A generator seed in [0, 2**32) from the case's parameters, the same in every process
    (hash() of a string changes with PYTHONHASHSEED, so a failure seeded by it cannot be
    replayed): zlib.crc32 of their repr."""
    return zlib.crc32(repr(parts).encode())


PARAMS = "f32 *out, const f32 *a, i32 n, const i32 BLOCK"


def kernel_text(body: str, params: str = PARAMS, name: str = "k") -> str:
    """A file of one kernel: line 1 is the signature, line 3 the first of ``body``."""
    return f"kernel {name}({params})\n{{\n{body}\n}}\n"


def lower(text: str, name: str = "k", **spec) -> ir.Kernel:
    """The typed IR of kernel ``name`` in ``text``; ``BLOCK=128`` unless ``constexprs`` says."""
    spec.setdefault("constexprs", (("BLOCK", 128),))
    return build_kernel(parse(text, KERNEL_FILE), name, Spec(**spec))


def compile_error(text: str, *args, name: str = "k", **constexprs) -> teeny_tx.CompileError:
    """The CompileError that parsing, or specialising kernel ``name`` for ``args``, raises."""
    if not args:
        args, constexprs = ("f32", "f32", 10), constexprs or {"BLOCK": 128}
    with pytest.raises(teeny_tx.CompileError) as info:
        getattr(teeny_tx.compile(text, name=KERNEL_FILE), name).cuda_source(*args, **constexprs)
    return info.value


def nvrtc_compile(source: str, name: str) -> bytes:
    """Compile generated CUDA for sm_90 (no GPU needed) and return the cubin."""
    return nvrtc.compile_to_cubin(source, name=name, arch="sm_90", headers=HEADERS)


# Every op into its own output; `base` shifts the offsets (negative ones too); `wide` only
# forces 64-bit indices when its value does not fit 32 bits.
EVERY_RANDOM_OP = """
kernel every(f32 *u, f32 *z, u32 *w, u32 *w4, i64 seed, i32 base, i32 n, i32 wide,
             const i32 BLOCK)
{
    tile i = program_id(0) * BLOCK + arange(0, BLOCK);
    tile mask = i < n;
    tile offs = base + i;
    store(u + i, rand(seed, offs), mask);
    store(z + i, randn(seed, offs), mask);
    store(w + i, randint(seed, offs), mask);
    store(w4 + 4 * i, randint4x(seed, offs, 0), mask);
    store(w4 + 4 * i + 1, randint4x(seed, offs, 1), mask);
    store(w4 + 4 * i + 2, randint4x(seed, offs, 2), mask);
    store(w4 + 4 * i + 3, randint4x(seed, offs, 3), mask);
}
"""


def every_random_op(n: int, seed: int, base: int, wide: int = 0, block: int = 1024):
    """Run EVERY_RANDOM_OP on the interpreter: (rand, randn, randint, the four words as [n, 4])."""
    out = (
        np.full(n, np.nan, np.float32),
        np.full(n, np.nan, np.float32),
        np.zeros(n, np.uint32),
        np.zeros((n, 4), np.uint32),
    )
    k = teeny_tx.compile(EVERY_RANDOM_OP, name=KERNEL_FILE).every
    k.interpret[(teeny_tx.cdiv(n, block),)](*out, seed, base, n, wide, BLOCK=block)
    return out


# ---------------------------------------------------------------- tiles.c (CPU and GPU tests)

TILES_FILE = Path(__file__).parent / "kernels" / "tiles.c"
ATOMICS_FILE = Path(__file__).parent / "kernels" / "atomics.c"
ATOMIC_KINDS = ("add", "max", "min", "and", "or", "xor", "xchg")


@pytest.fixture(scope="module")
def atomics():
    """tests/kernels/atomics.c, compiled (parsed; specialisations compile on use)."""
    return teeny_tx.compile(ATOMICS_FILE, name="tests/kernels/atomics.c")


@pytest.fixture(scope="module")
def tiles():
    """tests/kernels/tiles.c, compiled (parsed; specialisations compile on use)."""
    return teeny_tx.compile(TILES_FILE, name="tests/kernels/tiles.c")


TILE_OPS = ("sum", "max", "min", "argmax", "argmin", "xor_sum", "prod")
REFERENCE = {
    "sum": np.sum,
    "max": np.max,
    "min": np.min,
    "argmax": np.argmax,
    "argmin": np.argmin,
    "xor_sum": np.bitwise_xor.reduce,
    "prod": np.prod,
}


def reduction_case(op: str, shape, rng):
    """Inputs a reduction can be checked on exactly: integers for xor, values near 1 for prod,
    distinct values for arg-reductions, and a repeated maximum to check ties."""
    if op == "xor_sum":
        return rng.integers(-(2**20), 2**20, size=shape).astype(np.int32)
    if op == "prod":
        return rng.uniform(0.9, 1.1, size=shape).astype(np.float32)
    x = rng.standard_normal(shape).astype(np.float32)
    if op in ("argmax", "argmin") and shape[-1] > 2:
        x[..., -1] = x.max() if op == "argmax" else x.min()  # a tie: the lower index must win
        x[..., 1] = x[..., -1]
    return x


def reduction_expected(op: str, x: np.ndarray, axis):
    return REFERENCE[op](
        x.astype(np.float64) if op not in ("xor_sum", "argmax", "argmin") else x, axis=axis
    )


def reduction_dtype(op: str):
    return np.int32 if op in ("argmax", "argmin", "xor_sum") else np.float32


# ---------------------------------------------------------------- casts (lower/ops/casts.py C1-C5)
# An exact reference, written with Fractions and independent of lower/ops/casts.py, the special
# values every cast test converts, and a kernel file of one cast kernel per target dtype.

CAST_DTYPES = (
    "bool",
    "i8",
    "i16",
    "i32",
    "i64",
    "u8",
    "u16",
    "u32",
    "u64",
    "f16",
    "bf16",
    "f32",
    "f64",
)
_FLOAT_FORMATS = {
    "f16": (11, -14, 15),
    "bf16": (8, -126, 127),
    "f32": (24, -126, 127),
    "f64": (53, -1022, 1023),
}
CAST_KERNELS = (
    "kernel cast_all(const any *x, "
    + ", ".join(f"{t} *y_{t}" for t in CAST_DTYPES)
    + ", i32 n, const i32 BLOCK)\n{\n"
    "    tile o = program_id(0) * BLOCK + arange(0, BLOCK);\n"
    "    tile v = load(x + o, o < n);\n"
    + "".join(f"    store(y_{t} + o, ({t})v, o < n);\n" for t in CAST_DTYPES)
    + "}\n"
)


def run_cast_all(kernel_launcher, x: np.ndarray, zeros) -> dict:
    """Launch ``cast_all`` on ``x`` (through ``kernel_launcher[(1,)]``) and return every
    target's output, made by ``zeros(n, numpy dtype)``."""
    from teeny_tx.dtypes import DTYPES

    outs = {t: zeros(x.size, DTYPES[t].np) for t in CAST_DTYPES}
    block = 1 << max(x.size - 1, 1).bit_length()
    kernel_launcher[(1,)](x, *outs.values(), x.size, BLOCK=block)
    return outs


def _round_fraction(q, name: str) -> float:
    """``q`` (a Fraction, not zero) rounded to nearest-even in float format ``name``."""
    from fractions import Fraction

    p, emin, emax = _FLOAT_FORMATS[name]
    a = abs(q)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    e = max(e, emin)
    ulp = Fraction(2) ** (e - p + 1)
    n, r = divmod(a, ulp)
    if r > ulp / 2 or (r == ulp / 2 and n % 2):
        n += 1
    value = n * ulp
    if value >= Fraction(2) ** (emax + 1):
        return float("inf") if q > 0 else float("-inf")
    return float(value) if q > 0 else -float(value)


def cast_reference(x: np.ndarray, to: str) -> np.ndarray:
    """``x`` converted to ``to`` by rules C1-C5, element by element, exactly."""
    import math
    from fractions import Fraction

    from teeny_tx.dtypes import DTYPES

    target = DTYPES[to]
    out = []
    for v in (
        x.ravel().tolist() if x.dtype.name != "bfloat16" else x.astype(np.float64).ravel().tolist()
    ):
        if to == "bool":
            out.append(v != 0)
            continue
        if isinstance(v, bool):
            v = int(v)
        if target.is_int:
            if isinstance(v, float):
                if math.isnan(v):
                    v = 0
                elif math.isinf(v):
                    v = -(2**70) if v < 0 else 2**70
                else:
                    v = math.trunc(v)
                lo, hi = (
                    (-(2 ** (target.bits - 1)), 2 ** (target.bits - 1) - 1)
                    if target.kind == "i"
                    else (0, 2**target.bits - 1)
                )
                out.append(min(max(v, lo), hi))
            else:
                v &= (1 << target.bits) - 1
                out.append(
                    v - (1 << target.bits) if target.kind == "i" and v >> (target.bits - 1) else v
                )
            continue
        if isinstance(v, float) and (math.isnan(v) or math.isinf(v) or v == 0):
            out.append(v)
            continue
        out.append(0.0 if v == 0 else _round_fraction(Fraction(v), to))
    return (
        np.array(out, dtype=np.float64 if target.is_float else object)
        .astype(target.np)
        .reshape(x.shape)
    )


def cast_values(src: str) -> np.ndarray:
    """The special values of dtype ``src``: ±0, ±inf, NaN, out-of-range magnitudes of every
    integer width, ties and near-ties of every narrower float, extremes of every integer."""
    from teeny_tx.dtypes import DTYPES

    d = DTYPES[src]
    if d.kind == "b":
        return np.array([False, True])
    if d.is_int:
        info = np.iinfo(d.np)
        cands = [
            0,
            1,
            -1,
            2,
            127,
            128,
            255,
            256,
            -128,
            -129,
            32767,
            32768,
            65504,
            65519,
            65520,
            65535,
        ]
        cands += [2**24 + 1, 2**24 + 2**16 + 1, 2**24 + 2**16, 2**31 - 1, -(2**31), 2**32 - 1]
        cands += [
            2**53 + 1,
            2**62 + 2**54 + 1,
            2**62 + 2**54,
            2**63 - 1,
            -(2**63),
            2**64 - 1,
            2**63 + 2**39 + 1,
        ]
        cands += [info.min, info.max, info.min + 1, info.max - 1]
        kept = sorted({c for c in cands if info.min <= c <= info.max})
        return np.array(kept, dtype=d.np)
    specials = [
        0.0,
        -0.0,
        float("inf"),
        float("-inf"),
        float("nan"),
        0.5,
        -0.5,
        0.999,
        1.5,
        -1.5,
        2.5,
        -2.5,
    ]
    specials += [
        127.9,
        128.0,
        -128.5,
        -129.0,
        255.5,
        256.0,
        -1.0,
        32767.5,
        32768.0,
        65535.9,
        65536.0,
    ]
    specials += [
        2.0**31,
        -(2.0**31) - 4096,
        2.0**32,
        3e9,
        -3e9,
        2.0**63,
        -(2.0**63),
        2.0**64,
        1e19,
        2e19,
        1e20,
        -1e20,
    ]
    specials += [
        1e30,
        3e38,
        3.4e38,
        1e300,
        65504.0,
        65520.0,
        65519.0,
        6e-8,
        3e-8,
        1e-40,
        1e-45,
        1e-310,
    ]
    for p in (8, 11, 24):  # ties, and values just either side of them, at each narrower precision
        tie = 1.0 + 2.0**-p
        specials += [
            tie,
            -tie,
            tie + 2.0**-40,
            tie - 2.0**-40,
            3 * tie,
            tie + 2.0**-30,
            1.0 + 3 * 2.0**-p,
        ]
    specials += [1.0 + 2.0**-24 + 2.0**-52, 1.0 + 2.0**-24 - 2.0**-53, 1.0 + 2.0**-8 + 2.0**-40]
    with np.errstate(all="ignore"):
        return np.array(specials, dtype=np.float64).astype(d.np)


@contextlib.contextmanager
def target_arch(arch: str):
    """Specialisations made inside compile for ``arch`` where their module names no target
    (as on a device of that architecture): runtime.launch.device_target answers ``arch``."""
    from teeny_tx.runtime import launch
    from teeny_tx.target import Target

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(launch, "device_target", lambda **_: Target.from_arch(arch))
        yield


# ---------------------------------------------------------------- the launches of a library op


def recorded_launches(call) -> list:
    """(kernel, args, options) of every launch ``call()`` makes through the ops of
    teeny_tx.library.graph_ops (run as usual: CPU tensors on the interpreter), in order."""
    from teeny_tx.library import graph_ops

    seen = []
    original = graph_ops.Launch.__call__

    def record(self, kernel, grid, *args, **options):
        seen.append((kernel, args, options))
        return original(self, kernel, grid, *args, **options)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(graph_ops.Launch, "__call__", record)
        call()
    return seen


def compile_launches_sm90(launches) -> set[str]:
    """NVRTC-compile for sm_90 the specialisation of each recorded launch (tensors by their
    dtype names, scalars and constexprs as launched), each distinct source once; returns the
    kernels' names."""
    from teeny_tx.dtypes import from_numpy
    from teeny_tx.library.torch_ops import to_numpy

    def spell(a):
        if hasattr(a, "dtype") and hasattr(a, "shape"):  # a tensor: its dtype's name
            return from_numpy(to_numpy(a.detach().reshape(-1)[:0]).dtype).name
        return a

    names, sources = set(), set()
    for kernel, args, options in launches:
        spelled = [spell(a) for a in args]
        source = kernel.cuda_source(*spelled, **options)
        if source not in sources:
            sources.add(source)
            assert nvrtc_compile(source, kernel.name), kernel.name
        names.add(kernel.name)
    return names
