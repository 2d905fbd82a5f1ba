"""The bundled kernel library: where each kernel lives, how to call it, what it must compute.

Input: the kernel files under ``kernels/`` of the source tree. Output: :data:`CASES`, one
:class:`Case` per bundled kernel and variant, each able to make random inputs, launch (on the
GPU or the interpreter) and check against a float64 NumPy reference; and :data:`GOLDEN`, the
canonical specialisations whose generated CUDA is committed under ``golden/``. The demo, the
golden test, the interpreter tests and the GPU tests all read these tables.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from math import erf
from pathlib import Path
from typing import Any

import numpy as np

from .dtypes import DTYPES
from .kernel import Module, compile
from .lower import ops_random

ROOT = Path(__file__).resolve().parents[1]
KERNELS = ROOT / "kernels"
GOLDEN_DIR = ROOT / "golden"
BLOCK = 1024

# Tolerances by output dtype (relative and absolute), for float64 references.
TOLERANCE = {
    "f32": (2e-6, 2e-6),
    "f16": (2e-3, 2e-3),
    "bf16": (1.6e-2, 1.6e-2),
    "f64": (1e-12, 1e-12),
}


@cache
def module(file: str) -> Module:
    """A bundled kernel file, compiled under its repository-relative name (stable #line paths)."""
    return compile(KERNELS / file, name=f"kernels/{file}")


def _gelu_exact(x):
    return 0.5 * x * (1.0 + np.vectorize(erf)(x / np.sqrt(2.0)))


def _gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x**3)))


def dropout_reference(x, p, seed):
    """kernels/dropout.c: x / (1 - p) where rand(seed, i) > p (element i), else 0; float64."""
    keep = ops_random.rand(seed, np.arange(np.size(x))) > np.float32(p)
    return np.where(keep, x / (1.0 - np.float64(np.float32(p))), 0.0)


def _dropout_scalars(rng: np.random.Generator) -> tuple[float, int]:
    """p (an f32 value) and a seed spanning all 64 bits, negative ones included."""
    return float(np.float32(rng.uniform(0.05, 0.95))), int(rng.integers(-(2**63), 2**63 - 1))


@dataclass(frozen=True)
class Case:
    """One bundled kernel variant: ``inputs`` random arrays, ``scalars`` before ``n``."""

    name: str
    file: str
    kernel: str
    inputs: int  # number of input arrays after the output
    reference: Callable[..., np.ndarray]
    scalars: Callable[[np.random.Generator], tuple] = lambda rng: ()
    constexprs: dict[str, Any] = field(default_factory=dict)
    out_first: bool = True
    dtypes: tuple[str, ...] = ("f32", "f16", "bf16")

    def make(self, n: int, dtype: str, rng: np.random.Generator):
        """Random host inputs (values exactly representable in ``dtype``) and the scalars."""
        np_dtype = DTYPES[dtype].np
        xs = [
            rng.standard_normal(n).astype(np.float32).astype(np_dtype) for _ in range(self.inputs)
        ]
        return xs, self.scalars(rng)

    def expected(self, xs, scalars) -> np.ndarray:
        return self.reference(*[x.astype(np.float64) for x in xs], *scalars)

    def args(self, out, xs, scalars, n):
        arrays = [out, *xs] if self.out_first else [*xs, out]
        return (*arrays, *scalars, n)

    def launch(self, grid, args, interpret: bool = False, **kw) -> None:
        k = getattr(module(self.file), self.kernel)
        runner = k.interpret if interpret else k
        runner[grid](*args, BLOCK=kw.pop("BLOCK", BLOCK), **self.constexprs, **kw)

    def check(self, out, xs, scalars, dtype: str) -> float:
        """Assert ``out`` matches the reference for ``dtype``; return the max abs error."""
        expected = self.expected(xs, scalars)
        got = np.asarray(out).astype(np.float64)
        rtol, atol = TOLERANCE[dtype]
        if not np.allclose(got, expected, rtol=rtol, atol=atol, equal_nan=True):
            bad = np.argmax(np.abs(got - expected) - rtol * np.abs(expected))
            raise AssertionError(
                f"{self.name} [{dtype}, n={got.size}]: element {bad} is {got[bad]!r}, expected {expected[bad]!r}"
            )
        return float(np.max(np.abs(got - expected))) if got.size else 0.0


CASES: tuple[Case, ...] = (
    Case("vector_add", "vector_add.c", "vector_add", 2, lambda a, b: a + b, out_first=False),
    Case(
        "axpby",
        "axpby.c",
        "axpby",
        2,
        lambda x, y, alpha, beta: np.float32(alpha) * x + np.float32(beta) * y,
        scalars=lambda rng: (
            float(np.float32(rng.uniform(-2, 2))),
            float(np.float32(rng.uniform(-2, 2))),
        ),
    ),
    Case("gelu_exact", "activations.c", "gelu", 1, _gelu_exact, constexprs={"APPROXIMATE": 0}),
    Case("gelu_tanh", "activations.c", "gelu", 1, _gelu_tanh, constexprs={"APPROXIMATE": 1}),
    Case("silu", "activations.c", "silu", 1, lambda x: x / (1.0 + np.exp(-x))),
    Case(
        "leaky_relu",
        "activations.c",
        "leaky_relu",
        1,
        lambda x, slope: np.where(x >= 0, x, np.float32(slope) * x),
        scalars=lambda rng: (float(np.float32(rng.uniform(0.01, 0.3))),),
    ),
    Case(
        "clamp",
        "activations.c",
        "clamp",
        1,
        lambda x, lo, hi: np.clip(x, lo, hi),
        scalars=lambda rng: (
            float(np.float32(rng.uniform(-1.5, -0.1))),
            float(np.float32(rng.uniform(0.1, 1.5))),
        ),
    ),
    Case("dropout", "dropout.c", "dropout", 1, dropout_reference, scalars=_dropout_scalars),
    Case(
        "dropout_backward",
        "dropout.c",
        "dropout_backward",
        1,
        dropout_reference,
        scalars=_dropout_scalars,
    ),
)


@dataclass(frozen=True)
class Golden:
    """A canonical specialisation whose CUDA is committed as ``golden/<stem>.cu``."""

    stem: str
    file: str
    kernel: str
    args: tuple
    constexprs: dict[str, Any]
    num_warps: int = 4

    @property
    def path(self) -> Path:
        return GOLDEN_DIR / f"{self.stem}.cu"

    def render(self) -> str:
        k = getattr(module(self.file), self.kernel)
        return k.cuda_source(*self.args, num_warps=self.num_warps, **self.constexprs)


GOLDEN: tuple[Golden, ...] = (
    Golden(
        "vector_add.f32", "vector_add.c", "vector_add", ("f32", "f32", "f32", 1000), {"BLOCK": 1024}
    ),
    Golden(
        "vector_add.f16.n16",
        "vector_add.c",
        "vector_add",
        ("f16", "f16", "f16", 4096),
        {"BLOCK": 2048},
        8,
    ),
    Golden(
        "vector_add.f32.index64",
        "vector_add.c",
        "vector_add",
        ("f32", "f32", "f32", 2**31 + 3),
        {"BLOCK": 1024},
    ),
    Golden(
        "vector_add.f32.small_block",
        "vector_add.c",
        "vector_add",
        ("f32", "f32", "f32", 1000),
        {"BLOCK": 64},
    ),
    Golden(
        "axpby.bf16", "axpby.c", "axpby", ("bf16", "bf16", "bf16", 0.5, 2.0, 1000), {"BLOCK": 1024}
    ),
    Golden(
        "gelu_exact.f32",
        "activations.c",
        "gelu",
        ("f32", "f32", 1000),
        {"APPROXIMATE": 0, "BLOCK": 1024},
    ),
    Golden(
        "gelu_tanh.f16",
        "activations.c",
        "gelu",
        ("f16", "f16", 1000),
        {"APPROXIMATE": 1, "BLOCK": 1024},
    ),
    Golden("silu.bf16", "activations.c", "silu", ("bf16", "bf16", 1000), {"BLOCK": 1024}),
    Golden(
        "leaky_relu.f16", "activations.c", "leaky_relu", ("f16", "f16", 0.1, 1000), {"BLOCK": 1024}
    ),
    Golden("clamp.f32", "activations.c", "clamp", ("f32", "f32", -1.0, 1.0, 1000), {"BLOCK": 1024}),
    Golden("dropout.f32", "dropout.c", "dropout", ("f32", "f32", 0.1, 1234, 1000), {"BLOCK": 1024}),
    Golden(
        "dropout_backward.bf16",
        "dropout.c",
        "dropout_backward",
        ("bf16", "bf16", 0.1, 1234, 1000),
        {"BLOCK": 1024},
    ),
)


def bless() -> list[Path]:
    """Rewrite every golden file from the current compiler; returns the files that changed."""
    GOLDEN_DIR.mkdir(exist_ok=True)
    changed = []
    for g in GOLDEN:
        text = g.render()
        if not g.path.exists() or g.path.read_text() != text:
            g.path.write_text(text)
            changed.append(g.path)
    return changed
