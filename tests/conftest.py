"""Helpers shared by the CPU tests: kernel text in, IR, CUDA or the expected error out."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import teeny_tx
from teeny_tx.kernel import HEADERS
from teeny_tx.lower import ir
from teeny_tx.lower.builder import Spec, build_kernel
from teeny_tx.parse import parse
from teeny_tx.runtime import nvrtc

KERNEL_FILE = "kernels/t.c"
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
