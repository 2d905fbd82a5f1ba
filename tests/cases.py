"""The bundled kernel library: where each kernel lives, how to call it, what it must compute.

Input: the kernel files under ``kernels/`` of the source tree. Output: :data:`CASES`, one
:class:`Case` per bundled elementwise kernel and variant, each able to make random inputs,
launch (on the GPU or the interpreter) and check against a float64 NumPy reference;
:data:`ROW_CASES`, one :class:`RowCase` per ``teeny_tx.nn`` row operation (softmax, norms,
cross-entropy on [rows, cols] data), run through its wrapper and checked the same way; and
:data:`GOLDEN`, the canonical specialisations whose generated CUDA is committed under
``golden/``. The demo, the golden test, the interpreter tests and the GPU tests all read these
tables.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from teeny_tx.activations import BY_NAME
from teeny_tx.constants import CONSTANTS
from teeny_tx.dtypes import DTYPES, from_numpy
from teeny_tx.library import module
from teeny_tx.lower.hopper.matmul import HopperConfig
from teeny_tx.lower.ops import random as ops_random

if __package__:  # imported as tests.cases
    from .numerics import SUBNORMAL, UNIT_ROUNDOFF, assert_close_elementwise
else:  # loaded by path on its own (`teeny-tx golden`: teeny_tx/cli.py's checkout_cases)
    import importlib.util

    _spec = importlib.util.spec_from_file_location(
        "teeny_tx_checkout_numerics", Path(__file__).with_name("numerics.py")
    )
    assert _spec is not None and _spec.loader is not None
    _numerics = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(_numerics)
    SUBNORMAL, UNIT_ROUNDOFF = _numerics.SUBNORMAL, _numerics.UNIT_ROUNDOFF
    assert_close_elementwise = _numerics.assert_close_elementwise

ROOT = Path(__file__).resolve().parents[1]
KERNELS = ROOT / "kernels"
GOLDEN_DIR = ROOT / "golden"
BLOCK = 1024
# teeny_tx/library/ holds the kernel library's new modules (attention.py) until this module
# moves into that package: the path makes them importable as teeny_tx.library.<name>
__path__ = [str(Path(__file__).with_suffix(""))]

# Each result is compared element by element with a float64 reference of the same (rounded)
# inputs (tests/conftest.py, assert_close_elementwise): one rounding to the output dtype, plus
# the f32 computation's own error, a count of f32 unit roundoffs (F32_ROUNDINGS, or more for a
# reduction: see reduction_roundings) times the element's condition (the size of the terms it
# is computed from, where they cancel). No absolute floor but the subnormal spacing.
F32_ROUNDINGS = 8  # a few f32 operations, libm-style functions within 2 ulp each


def reduction_roundings(n: int) -> float:
    """f32 roundings an n-term reduction may make on the way (per element of its inputs' size):
    a serial run per thread and a tree across threads; worst case with room, not a typical
    case (sqrt(n) bounds the serial run of every schedule the library picks: n / threads
    with threads >= sqrt(n), or n <= 1024 in one thread)."""
    return F32_ROUNDINGS + 2.0 * math.sqrt(n) + 2.0 * math.log2(n + 1)


_gelu_exact = BY_NAME["gelu"].reference
_gelu_tanh = BY_NAME["gelu_tanh"].reference


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
    # the size of the terms each element is computed from (float64 inputs and scalars in):
    # None for |reference| (no cancellation); see check()
    condition: Callable[..., np.ndarray] | None = None

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
        """Assert ``out`` matches the float64 reference element by element: one rounding to
        ``dtype`` plus F32_ROUNDINGS f32 roundings of the element's condition; return the
        largest error relative to its bound."""
        expected = self.expected(xs, scalars)
        x64 = [x.astype(np.float64) for x in xs]
        cond = np.abs(expected) if self.condition is None else self.condition(*x64, *scalars)
        atol = F32_ROUNDINGS * UNIT_ROUNDOFF["f32"] * np.abs(cond) + SUBNORMAL[dtype]
        return assert_close_elementwise(
            np.asarray(out), expected, dtype, ulps=1.0, atol=atol, what=f"{self.name} n={out.size}"
        )


def _abs_sum(*terms):
    return sum(np.abs(t) for t in terms)


CASES: tuple[Case, ...] = (
    Case(
        "vector_add",
        "vector_add.c",
        "vector_add",
        2,
        lambda a, b: a + b,
        out_first=False,
        condition=_abs_sum,
    ),
    Case(
        "axpby",
        "axpby.c",
        "axpby",
        2,
        lambda x, y, alpha, beta: np.float32(alpha) * x + np.float32(beta) * y,
        condition=lambda x, y, alpha, beta: _abs_sum(np.float32(alpha) * x, np.float32(beta) * y),
        scalars=lambda rng: (
            float(np.float32(rng.uniform(-2, 2))),
            float(np.float32(rng.uniform(-2, 2))),
        ),
    ),
    # x * (1 + erf(x / sqrt 2)) / 2: 1 + erf cancels for x < 0, so the error scales with |x|
    Case(
        "gelu_exact",
        "activations.c",
        "gelu",
        1,
        _gelu_exact,
        constexprs={"APPROXIMATE": 0},
        condition=np.abs,
    ),
    Case(
        "gelu_tanh",
        "activations.c",
        "gelu",
        1,
        _gelu_tanh,
        constexprs={"APPROXIMATE": 1},
        condition=np.abs,
    ),
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


# ---------------------------------------------------------------- teeny_tx.nn row operations


def softmax_reference(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def log_softmax_reference(x):
    shifted = x - x.max(axis=1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))


def softmax_backward_reference(y, dy):
    return y * (dy - (y * dy).sum(axis=1, keepdims=True))


def log_softmax_backward_reference(y, dy):
    return dy - np.exp(y) * dy.sum(axis=1, keepdims=True)


def layer_norm_reference(x, w, b, eps=1e-5):
    mean = x.mean(axis=1)
    rstd = 1.0 / np.sqrt(((x - mean[:, None]) ** 2).mean(axis=1) + np.float32(eps))
    return (x - mean[:, None]) * rstd[:, None] * w + b, mean, rstd


def layer_norm_backward_reference(dy, x, w, mean, rstd):
    xhat = (x - mean[:, None]) * rstd[:, None]
    g = w * dy
    c1 = (g * xhat).mean(axis=1, keepdims=True)
    c2 = g.mean(axis=1, keepdims=True)
    return rstd[:, None] * (g - xhat * c1 - c2), (dy * xhat).sum(axis=0), dy.sum(axis=0)


def rms_norm_reference(x, w, eps=1e-6):
    rstd = 1.0 / np.sqrt((x * x).mean(axis=1) + np.float32(eps))
    return x * rstd[:, None] * w, rstd


def rms_norm_backward_reference(dy, x, w, rstd):
    xhat = x * rstd[:, None]
    g = w * dy
    dx = rstd[:, None] * (g - xhat * (g * xhat).mean(axis=1, keepdims=True))
    return dx, (dy * xhat).sum(axis=0)


def _picked(logits, targets, ignore_index):
    kept = targets != ignore_index
    return kept, logits[np.arange(len(targets)), np.where(kept, targets, 0)]


def cross_entropy_reference(logits, targets, ignore_index=-100):
    """(mean loss over the rows not ignored, per-row logsumexp); NaN when all are ignored."""
    mx = logits.max(axis=1)
    lse = mx + np.log(np.exp(logits - mx[:, None]).sum(axis=1))
    kept, picked = _picked(logits, targets, ignore_index)
    with np.errstate(invalid="ignore"):
        loss = np.where(kept, lse - picked, 0.0).sum() / kept.sum()
    return np.float64(loss), lse


def cross_entropy_backward_reference(logits, targets, lse, ignore_index=-100, grad=1.0):
    kept, _ = _picked(logits, targets, ignore_index)
    onehot = np.zeros_like(logits)
    onehot[np.arange(len(targets)), np.where(kept, targets, 0)] = 1.0
    d = (np.exp(logits - lse[:, None]) - onehot) * (grad / max(kept.sum(), 1))
    return np.where(kept[:, None], d, 0.0)


def _rows(rng, rows, cols, dtype, scale=1.0, shift=0.0):
    data = scale * rng.standard_normal((rows, cols)) + shift
    return data.astype(np.float32).astype(DTYPES[dtype].np)


def _weight(rng, cols, dtype):
    return (1.0 + 0.5 * rng.standard_normal(cols)).astype(np.float32).astype(DTYPES[dtype].np)


def _f64(a):
    return a.astype(np.float64)


def _targets(rng, rows, cols, ignore_index=-100):
    """Classes in [0, cols); about a quarter of the rows, and row 0 when there are several,
    are ignore_index; the last row never is."""
    t = rng.integers(0, cols, rows, dtype=np.int64)
    ignored = rng.random(rows) < 0.25
    ignored[0], ignored[-1] = rows > 1, False
    t[ignored] = ignore_index
    return t


def _make_softmax(rng, rows, cols, dtype):
    return (_rows(rng, rows, cols, dtype, 2.0),)


def _make_probabilities(forward):
    def make(rng, rows, cols, dtype):
        y = forward(_f64(_rows(rng, rows, cols, dtype, 2.0))).astype(DTYPES[dtype].np)
        return y, _rows(rng, rows, cols, dtype)

    return make


def _make_layer_norm(rng, rows, cols, dtype):
    x = _rows(rng, rows, cols, dtype, 2.0, 0.5)
    return x, _weight(rng, cols, dtype), _rows(rng, 1, cols, dtype, 0.5)[0]


def _make_layer_norm_backward(rng, rows, cols, dtype):
    x, w, b = _make_layer_norm(rng, rows, cols, dtype)
    _, mean, rstd = layer_norm_reference(_f64(x), _f64(w), _f64(b))
    return _rows(rng, rows, cols, dtype), x, w, mean.astype(np.float32), rstd.astype(np.float32)


def _make_rms_norm(rng, rows, cols, dtype):
    return _rows(rng, rows, cols, dtype, 2.0, 0.5), _weight(rng, cols, dtype)


def _make_rms_norm_backward(rng, rows, cols, dtype):
    x, w = _make_rms_norm(rng, rows, cols, dtype)
    _, rstd = rms_norm_reference(_f64(x), _f64(w))
    return _rows(rng, rows, cols, dtype), x, w, rstd.astype(np.float32)


def _make_cross_entropy(rng, rows, cols, dtype):
    return _rows(rng, rows, cols, dtype, 2.0), _targets(rng, rows, cols)


def _make_cross_entropy_backward(rng, rows, cols, dtype):
    logits, targets = _make_cross_entropy(rng, rows, cols, dtype)
    _, lse = cross_entropy_reference(_f64(logits), targets)
    return logits, targets, lse.astype(np.float32)


# ---- the condition of each row operation's outputs: per element, the size of the terms it
# is computed from (float64 arguments in, one array per output, broadcastable to it)


def _row_sum(a):
    return a.sum(axis=1, keepdims=True)


def _softmax_condition(x):
    s = x - x.max(axis=1, keepdims=True)
    y = np.exp(s) / _row_sum(np.exp(s))
    return (y * (1.0 + np.abs(s)),)  # exp(s) errs by |s| u: s's own rounding


def _log_softmax_condition(x):
    s = x - x.max(axis=1, keepdims=True)
    return (np.abs(s) + np.abs(np.log(_row_sum(np.exp(s)))) + 1.0,)


def _softmax_backward_condition(y, dy):
    return (np.abs(y) * (np.abs(dy) + _row_sum(np.abs(y * dy))),)


def _log_softmax_backward_condition(y, dy):
    return (np.abs(dy) + np.exp(y) * (1.0 + np.abs(y)) * _row_sum(np.abs(dy)),)


def _moments(x):
    """mean |x| and mean x^2 of each row (the sizes the mean and the variance sum)."""
    return np.abs(x).mean(axis=1, keepdims=True), (x * x).mean(axis=1, keepdims=True)


def _layer_norm_condition(x, w, b, eps=1e-5):
    _, mean, rstd = layer_norm_reference(x, w, b, eps)
    m1, m2 = _moments(x)
    r = rstd[:, None]
    rstd_cond = r * (1.0 + m2 * r * r)  # the variance sums x^2-sized terms
    y = (np.abs(x) + m1) * r * np.abs(w) * (1.0 + m2 * r * r) + np.abs(b)
    return y, m1[:, 0], rstd_cond[:, 0]


def _layer_norm_backward_condition(dy, x, w, mean, rstd):
    r = rstd[:, None]
    xhat = (x - mean[:, None]) * r
    xhat_cond = np.abs(xhat) + (np.abs(x) + np.abs(mean[:, None])) * r
    g = np.abs(w * dy)
    dx = r * (
        g + xhat_cond * (g * xhat_cond).mean(axis=1, keepdims=True) + g.mean(axis=1, keepdims=True)
    )
    return dx, (np.abs(dy) * xhat_cond).sum(axis=0), np.abs(dy).sum(axis=0)


def _rms_norm_condition(x, w, eps=1e-6):
    _, rstd = rms_norm_reference(x, w, eps)
    return np.abs(x) * rstd[:, None] * np.abs(w), rstd


def _rms_norm_backward_condition(dy, x, w, rstd):
    xhat = np.abs(x) * rstd[:, None]
    g = np.abs(w * dy)
    dx = rstd[:, None] * (g + xhat * (g * xhat).mean(axis=1, keepdims=True))
    return dx, (np.abs(dy) * xhat).sum(axis=0)


def _cross_entropy_condition(logits, targets, ignore_index=-100):
    mx = logits.max(axis=1)
    s = logits - mx[:, None]
    p = np.exp(s) / _row_sum(np.exp(s))
    lse = mx + np.log(np.exp(s).sum(axis=1))
    lse_cond = np.abs(mx) + np.abs(lse - mx) + 1.0 + (p * np.abs(s)).sum(axis=1)
    kept, picked = _picked(logits, targets, ignore_index)
    loss = np.where(kept, lse_cond + np.abs(picked), 0.0).sum() / max(int(kept.sum()), 1)
    return np.float64(loss), lse_cond


def _cross_entropy_backward_condition(logits, targets, lse, ignore_index=-100, grad=1.0):
    kept, _ = _picked(logits, targets, ignore_index)
    p = np.exp(logits - lse[:, None])
    onehot = np.zeros_like(logits)
    onehot[np.arange(len(targets)), np.where(kept, targets, 0)] = 1.0
    d = (p * (1.0 + np.abs(logits - lse[:, None])) + onehot) * abs(grad) / max(kept.sum(), 1)
    return (np.where(kept[:, None], d, 0.0),)


@dataclass(frozen=True)
class RowCase:
    """One ``teeny_tx.nn`` function on random [rows, cols] data, against float64 NumPy.

    ``make(rng, rows, cols, dtype)`` gives the host arguments in the function's order (2-D
    data of ``dtype``, weights, f32 statistics, int64 targets); ``reference`` maps their
    float64 copies (integers unchanged) to the float64 outputs. ``long_rows``: the function
    takes rows longer than one tile (it has looped kernels)."""

    name: str
    make: Callable[[np.random.Generator, int, int, str], tuple]
    reference: Callable[..., Any]
    long_rows: bool = True
    dtypes: tuple[str, ...] = ("f32", "f16", "bf16")
    condition: Callable[..., Any] | None = None  # see bounds()

    def run(self, args, interpret: bool = False, **kwargs) -> tuple:
        """The wrapper's outputs, always as a tuple."""
        from teeny_tx.library import nn

        out = getattr(nn, self.name)(*args, interpret=interpret, **kwargs)
        return out if isinstance(out, tuple) else (out,)

    @staticmethod
    def floats(args) -> list:
        """The arguments with float arrays in float64 (integers unchanged)."""
        return [_f64(a) if from_numpy(a.dtype).is_float else a for a in args]

    def expected(self, args, **kwargs) -> tuple:
        out = self.reference(*self.floats(args), **kwargs)
        return out if isinstance(out, tuple) else (out,)

    def bounds(self, args, dtypes, cols: int, compute: str = "f32", **kwargs) -> list[np.ndarray]:
        """Per output, per element: what its error may be, in absolute terms. One rounding to
        its dtype (of |reference|) plus reduction_roundings(cols) roundings of the
        ``compute`` dtype (f32: what the kernels compute in) of its condition (the reduction
        along the row is the long chain) plus the subnormal spacing; ``dtypes``: the outputs'
        dtype names."""
        expected = self.expected(args, **kwargs)
        floats = self.floats(args)
        conds = self.condition(*floats, **kwargs) if self.condition else map(np.abs, expected)
        k = reduction_roundings(cols) * UNIT_ROUNDOFF[compute]
        return [
            UNIT_ROUNDOFF[d] * np.abs(ref) + k * np.abs(c) + SUBNORMAL[d]
            for ref, c, d in zip(expected, conds, dtypes, strict=True)
        ]

    def check(self, outs, args, rows: int, cols: int, **kwargs) -> float:
        """Assert each output (host arrays) matches the float64 reference element by element
        within bounds(); return the largest error relative to its bound."""
        expected = self.expected(args, **kwargs)
        outs = [np.asarray(o) for o in outs]
        names = [from_numpy(o.dtype).name for o in outs]
        worst = 0.0
        for i, (got, ref, bound, d) in enumerate(
            zip(outs, expected, self.bounds(args, names, cols, **kwargs), names, strict=True)
        ):
            what = f"{self.name} output {i} [{rows}x{cols}]"
            worst = max(
                worst, assert_close_elementwise(got, ref, d, ulps=0.0, atol=bound, what=what)
            )
        return worst


ROW_CASES: tuple[RowCase, ...] = (
    RowCase("softmax", _make_softmax, softmax_reference, condition=_softmax_condition),
    RowCase("log_softmax", _make_softmax, log_softmax_reference, condition=_log_softmax_condition),
    RowCase(
        "softmax_backward",
        _make_probabilities(softmax_reference),
        softmax_backward_reference,
        condition=_softmax_backward_condition,
    ),
    RowCase(
        "log_softmax_backward",
        _make_probabilities(log_softmax_reference),
        log_softmax_backward_reference,
        condition=_log_softmax_backward_condition,
    ),
    RowCase(
        "layer_norm",
        _make_layer_norm,
        layer_norm_reference,
        long_rows=False,
        condition=_layer_norm_condition,
    ),
    RowCase(
        "layer_norm_backward",
        _make_layer_norm_backward,
        layer_norm_backward_reference,
        long_rows=False,
        condition=_layer_norm_backward_condition,
    ),
    RowCase(
        "rms_norm",
        _make_rms_norm,
        rms_norm_reference,
        long_rows=False,
        condition=_rms_norm_condition,
    ),
    RowCase(
        "rms_norm_backward",
        _make_rms_norm_backward,
        rms_norm_backward_reference,
        long_rows=False,
        condition=_rms_norm_backward_condition,
    ),
    RowCase(
        "cross_entropy",
        _make_cross_entropy,
        cross_entropy_reference,
        condition=_cross_entropy_condition,
    ),
    RowCase(
        "cross_entropy_backward",
        _make_cross_entropy_backward,
        cross_entropy_backward_reference,
        condition=_cross_entropy_backward_condition,
    ),
)


@dataclass(frozen=True)
class Golden:
    """A canonical specialisation whose CUDA is committed as ``golden/<stem>.cu``.

    ``arch`` is the target it is lowered for (``sm_90``: the portable path; ``sm_90a``:
    Hopper's wgmma for dot), whatever the machine rendering it has or lacks for a GPU."""

    stem: str
    file: str
    kernel: str
    args: tuple
    constexprs: dict[str, Any]
    num_warps: int = 4
    num_stages: int = 2
    arch: str = "sm_90"
    env: tuple[tuple[str, str], ...] = ()  # switches set while it is lowered (a fresh module)
    strided: bool = False

    @property
    def path(self) -> Path:
        return GOLDEN_DIR / f"{self.stem}.cu"

    @property
    def source(self) -> str:
        """The kernel file's name in the CUDA's #line directives: ``kernels/<file>`` for the
        library's kernels, the path itself for a test kernel (``tests/kernels/...``)."""
        return self.file if self.file.startswith("tests/") else f"kernels/{self.file}"

    def render(self) -> str:
        options = {"num_warps": self.num_warps, "num_stages": self.num_stages}
        options |= {"target": self.arch, "strided": self.strided}
        if self.file.startswith("tests/"):  # a test kernel (tests/kernels/), by its path
            from teeny_tx.kernel import compile as compile_module

            mod = compile_module(ROOT / self.file, name=self.source)
            return getattr(mod, self.kernel).cuda_source(*self.args, **options, **self.constexprs)
        if not self.env:
            k = getattr(module(self.file), self.kernel)
            return k.cuda_source(*self.args, **options, **self.constexprs)
        from teeny_tx.kernel import compile as compile_module
        from teeny_tx.library.loader import kernel_text

        saved = {name: os.environ.get(name) for name, _ in self.env}
        os.environ.update(dict(self.env))
        try:
            mod = compile_module(kernel_text(self.file), name=f"kernels/{self.file}")
            k = getattr(mod, self.kernel)
            return k.cuda_source(*self.args, **options, **self.constexprs)
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value


# kernels/matmul.c's matmul: PRECISION constants of dot() and the arguments of a product
# C [M, N] = A [M, K] @ B [K, N] of row-major arrays (no batch, alpha 1)
_IEEE, _TF32 = CONSTANTS["IEEE"].value, CONSTANTS["TF32"].value


def _matmul_args(dtype: str, m: int, n: int, k: int, b_t: bool = False) -> tuple:
    sbk, sbn = (1, k) if b_t else (n, 1)  # B_T: B is W^T of a row-major W [N, K]
    return (dtype,) * 4 + (m, n, k, k, 1, sbk, sbn, n, 1, 0, 0, 0, 1.0)


def _matmul_constexprs(bm: int, bn: int, bk: int, **flags: int) -> dict[str, Any]:
    base = {"HAS_BIAS": 0, "ACT": 0, "PRECISION": _IEEE, "A_T": 0, "B_T": 0}
    return base | flags | {"BM": bm, "BN": bn, "BK": bk, "GROUP_M": 8}


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
    # teeny_tx.nn: each kernel once, as the wrappers launch it (BLOCK and num_warps from
    # nn.row_config, the norms' ROWS and num_warps one of their autotune configs; rows of
    # 1000, 4096 or 32000 columns, contiguous: column strides of 1)
    *(  # one tile per row: ROWS rows per program (one of the autotune configs)
        Golden(
            stem,
            "softmax.c",
            kernel,
            (dtype, dtype, 8192, cols, cols, 1, cols),
            {"BLOCK": block, "ROWS": rows},
            warps,
        )
        for stem, kernel, dtype, cols, block, rows, warps in (
            ("softmax.f32", "softmax", "f32", 1000, 1024, 2, 4),
            ("log_softmax.bf16", "log_softmax", "bf16", 4096, 4096, 1, 16),
        )
    ),
    *(
        Golden(
            stem, "softmax.c", kernel, (dtype, dtype, cols, cols, 1, cols), {"BLOCK": block}, warps
        )
        for stem, kernel, dtype, cols, block, warps in (
            ("softmax_looped.f16", "softmax_looped", "f16", 32000, 4096, 16),
            ("log_softmax_looped.f32", "log_softmax_looped", "f32", 32000, 4096, 16),
        )
    ),
    *(
        Golden(
            stem,
            "softmax.c",
            kernel,
            (dtype,) * 3 + (cols, cols, 1, cols, 1, cols),
            {"BLOCK": block},
            warps,
        )
        for stem, kernel, dtype, cols, block, warps in (
            ("softmax_backward.f16", "softmax_backward", "f16", 1000, 1024, 4),
            ("log_softmax_backward.bf16", "log_softmax_backward", "bf16", 4096, 4096, 16),
            ("softmax_backward_looped.f32", "softmax_backward_looped", "f32", 32000, 4096, 16),
            (
                "log_softmax_backward_looped.bf16",
                "log_softmax_backward_looped",
                "bf16",
                32000,
                4096,
                16,
            ),
        )
    ),
    Golden(  # a row of 2^18 f32 over 32 programs of 8192 columns (their slots: 64 bits each)
        "softmax_split.f32",
        "softmax.c",
        "softmax_split",
        ("f32", "i64", "i32", "f32", 262144, 262144, 1, 262144, 256),
        {"CHUNK": 8192, "SLOTS": 64, "LOG": 0},
        8,
    ),
    Golden(
        "layer_norm_fwd.f16",
        "layernorm.c",
        "layer_norm_fwd",
        ("f16", "f32", "f32", "f16", "f16", "f16", 8192, 4096, 4096, 1, 4096, 1e-5),
        {"BLOCK": 4096, "ROWS": 1, "EVEN": 1},
        16,
    ),
    Golden(  # short rows: four rows per program, one per warp (warp-shuffle reductions only)
        "layer_norm_fwd.f16.rows4",
        "layernorm.c",
        "layer_norm_fwd",
        ("f16", "f32", "f32", "f16", "f16", "f16", 8192, 1024, 1024, 1, 1024, 1e-5),
        {"BLOCK": 1024, "ROWS": 4, "EVEN": 1},
        4,
    ),
    Golden(
        "layer_norm_bwd_dx.bf16",
        "layernorm.c",
        "layer_norm_bwd_dx",
        ("bf16", "f32", "f32", "bf16", "bf16", "f32", "f32", "f32")
        + (8192, 4096, 4096, 1, 4096, 1, 4096),
        {"BLOCK": 4096, "ROWS": 1, "EVEN": 1, "INTERLEAVE": 1},
        16,
    ),
    Golden(
        "layer_norm_bwd_dwdb.f32",
        "layernorm.c",
        "layer_norm_bwd_dwdb",
        ("f32", "f32", "f32", "f32", 512, 4096),
        {"BLOCK_P": 32, "BLOCK_N": 128},
    ),
    Golden(
        "rms_norm_fwd.bf16",
        "rmsnorm.c",
        "rms_norm_fwd",
        ("bf16", "f32", "bf16", "bf16", 8192, 4096, 4096, 1, 4096, 1e-6),
        {"BLOCK": 4096, "ROWS": 1, "EVEN": 1},
        16,
    ),
    Golden(
        "rms_norm_bwd_dx.f16",
        "rmsnorm.c",
        "rms_norm_bwd_dx",
        ("f16", "f32", "f16", "f16", "f16", "f32", 8192, 1000, 1000, 1, 1000, 1, 1000),
        {"BLOCK": 1024, "ROWS": 2, "EVEN": 0, "INTERLEAVE": 0},
        4,
    ),
    Golden(
        "rms_norm_bwd_dw.f16",
        "rmsnorm.c",
        "rms_norm_bwd_dw",
        ("f16", "f32", 512, 1000),
        {"BLOCK_P": 32, "BLOCK_N": 128},
    ),
    Golden(
        "cross_entropy_fwd.bf16",
        "cross_entropy.c",
        "cross_entropy_fwd",
        ("f32", "f32", "bf16", "i64", 32000, 32000, 1, -100),
        {"BLOCK": 4096},
        16,
    ),
    Golden(  # rows of 32000 over programs of 4096 columns, then 64 rows' slots a program
        "cross_entropy_chunks.bf16",
        "cross_entropy.c",
        "cross_entropy_chunks",
        ("i64", "bf16", 32000, 32000, 1),
        {"CHUNK": 4096},
        4,
    ),
    Golden(
        "cross_entropy_rows.bf16",
        "cross_entropy.c",
        "cross_entropy_rows",
        ("f32", "f32", "i64", "bf16", "i64", 8192, 32000, 8, 32000, 1, -100),
        {"ROWS": 64, "SLOTS": 16},
        4,
    ),
    Golden(
        "cross_entropy_mean.f32",
        "cross_entropy.c",
        "cross_entropy_mean",
        ("f32", "f32", "f32", "i64", 8192, -100),
        {"BLOCK": 1024},
    ),
    Golden(
        "cross_entropy_count.f32",
        "cross_entropy.c",
        "cross_entropy_count",
        ("f32", "i64", 8192, -100),
        {"BLOCK": 1024},
    ),
    Golden(
        "cross_entropy_bwd.bf16",
        "cross_entropy.c",
        "cross_entropy_bwd",
        ("bf16", "bf16", "i64", "f32", "f32", 32000, 32000, 1, 32000, -100, 1.0),
        {"BLOCK": 4096},
        16,
    ),
    # kernels/matmul.c: the portable lowering (ldmatrix + mma.sync, cp.async pipeline) for
    # sm_90, and Hopper's (wgmma) for sm_90a
    Golden(
        "matmul.f16.sm90",
        "matmul.c",
        "matmul",
        _matmul_args("f16", 4096, 4096, 4096),
        _matmul_constexprs(128, 128, 32),
        num_warps=4,
        num_stages=3,
    ),
    Golden(
        "matmul.f16.bias_gelu.sm90a",
        "matmul.c",
        "matmul",
        _matmul_args("f16", 4096, 4096, 4096),
        _matmul_constexprs(128, 256, 64, HAS_BIAS=1, ACT=1),
        num_warps=8,
        num_stages=4,
        arch="sm_90a",
    ),
    Golden(  # a linear layer y = x @ w.T: x [4096, 1024], w [4096, 1024], both row-major
        "matmul.bf16.linear.sm90a",
        "matmul.c",
        "matmul",
        _matmul_args("bf16", 4096, 4096, 1024, b_t=True),
        _matmul_constexprs(128, 256, 64, B_T=1),
        num_warps=8,
        num_stages=4,
        arch="sm_90a",
    ),
    Golden(
        "matmul.f32.tf32.sm90",
        "matmul.c",
        "matmul",
        _matmul_args("f32", 4096, 4096, 4096),
        _matmul_constexprs(128, 128, 32, PRECISION=_TF32),
        num_warps=4,
        num_stages=3,
    ),
)


# kernels/attention.c, as teeny_tx.library.attention launches it: [B, N, H, D] arrays of
# B=4, N=4096, H=32 (contiguous: strides N*H*D, D, H*D, 1 as batch, head, row, column)
def _attention_strides(d: int, n: int = 4096, h: int = 32) -> tuple:
    return (n * h * d, d, h * d, 1)


# the band's (lo, hi) of the causal top-left triangle (library/attention.py's band()), and the
# softcap's (cap_in, cap_out) of no softcap
_BAND = (-(1 << 30), 0)
_CAPS = (0.0, 0.0)
_ALIBI = ("f32", 0, 0)  # no ALiBi: the slopes pointer (never read), its batch stride, offset


def _attention_fwd_args(
    dtype: str, d: int, n: int = 4096, h: int = 32, overlap: bool = False
) -> tuple:
    s = _attention_strides(d, n, h)
    if overlap:  # attention_fwd_overlap keeps CAUSAL, without a band or softcap
        return (dtype, "f32", dtype, dtype, dtype, n, n, h, 1) + s * 4 + (0.18033688,)
    tail = (0.18033688, *_CAPS, *_ALIBI)
    return (dtype, "f32", dtype, dtype, dtype, n, n, h, 1, *_BAND) + s * 4 + tail


def _attention_bwd_args(kernel: str, dtype: str, d: int, n: int = 4096, h: int = 32) -> tuple:
    s = _attention_strides(d, n, h)
    if kernel == "attention_bwd_preprocess":
        return ("f32", dtype, dtype, n, h) + s * 2
    if kernel == "attention_bwd_dkdv":
        head = (dtype,) * 6 + ("f32", "f32", "f32", n, n, h, h, 1)
        return head + s * 6 + (0.18033688, 0.125, *_CAPS, *_BAND, *_ALIBI)
    if kernel == "attention_bwd_dq_cast":
        return (dtype, "f32", n, h) + s + (0.125,)
    tail = (0.18033688, 0.125, *_CAPS, *_BAND, *_ALIBI)
    return (dtype,) * 5 + ("f32", "f32", n, n, h, 1) + s * 5 + tail


def _attention_flags(dtype: str, d: int, causal: int, bm: int, bn: int) -> dict[str, Any]:
    """The forward's, dK/dV's and dQ's: causal the band of the top-left triangle (BAND)."""
    flags = {"BAND": causal, "SOFTCAP": 0, "ALIBI": 0, "BF16": int(dtype == "bf16")}
    return flags | {"D": d, "DH": d, "BM": bm, "BN": bn}


def _attention_overlap_flags(dtype: str, d: int, causal: int, bm: int, bn: int) -> dict:
    """attention_fwd_overlap's: CAUSAL, the top-left triangle."""
    flags = {"CAUSAL": causal, "BF16": int(dtype == "bf16"), "D": d, "BM": bm, "BN": bn}
    return flags | {"WARP_SPECIALIZE": 0}


def _attention_fwd_flags(dtype: str, d: int, causal: int, bm: int, bn: int, ws: int = 0) -> dict:
    """attention_fwd's and attention_bwd_dq's: the others' and WARP_SPECIALIZE
    (lower/passes/warp_spec.py)."""
    return _attention_flags(dtype, d, causal, bm, bn) | {"WARP_SPECIALIZE": ws}


GOLDEN += (
    Golden(
        "attention_fwd.f16.d128.sm90a",
        "attention.c",
        "attention_fwd",
        _attention_fwd_args("f16", 128),
        _attention_fwd_flags("f16", 128, 0, 128, 64),
        num_warps=8,
        arch="sm_90a",
    ),
    Golden(
        "attention_fwd.bf16.d64.causal.sm90",
        "attention.c",
        "attention_fwd",
        _attention_fwd_args("bf16", 64),
        _attention_fwd_flags("bf16", 64, 1, 128, 64),
        num_warps=8,
    ),
    Golden(  # K and V by TMA boxes of 4-D maps ($TEENY_TX_PIPELINE_TMA), the wrapper's config
        "attention_fwd.f16.d128.tma.sm90a",
        "attention.c",
        "attention_fwd",
        _attention_fwd_args("f16", 128),
        _attention_fwd_flags("f16", 128, 1, 128, 128),
        num_warps=8,
        num_stages=3,
        arch="sm_90a",
        env=(("TEENY_TX_PIPELINE_TMA", "1"),),
        strided=True,
    ),
    Golden(  # the same, warp-specialised: a producer warpgroup issues the K/V copies
        "attention_fwd.f16.d128.ws.sm90a",
        "attention.c",
        "attention_fwd",
        _attention_fwd_args("f16", 128),
        _attention_fwd_flags("f16", 128, 1, 128, 128, ws=1),
        num_warps=8,
        num_stages=3,
        arch="sm_90a",
        env=(("TEENY_TX_PIPELINE_TMA", "1"),),
        strided=True,
    ),
    Golden(  # ... and its two compute warpgroups taking turns at the products (ping-pong)
        "attention_fwd.f16.d128.pingpong.sm90a",
        "attention.c",
        "attention_fwd",
        _attention_fwd_args("f16", 128),
        _attention_fwd_flags("f16", 128, 1, 128, 128, ws=2),
        num_warps=8,
        num_stages=3,
        arch="sm_90a",
        env=(("TEENY_TX_PIPELINE_TMA", "1"), ("TEENY_TX_WS_PINGPONG", "1")),  # experimental
        strided=True,
    ),
    Golden(  # the softmax overlapping the products: deferred wgmma waits, the wrapper's config
        "attention_fwd_overlap.f16.d128.tma.sm90a",
        "attention.c",
        "attention_fwd_overlap",
        _attention_fwd_args("f16", 128, overlap=True),
        _attention_overlap_flags("f16", 128, 1, 128, 64),
        num_warps=8,
        num_stages=3,
        arch="sm_90a",
        env=(("TEENY_TX_PIPELINE_TMA", "1"),),
        strided=True,
    ),
    Golden(
        "attention_bwd_preprocess.f16",
        "attention.c",
        "attention_bwd_preprocess",
        _attention_bwd_args("attention_bwd_preprocess", "f16", 128),
        {"D": 128, "DH": 128, "BM": 64},
    ),
    Golden(
        "attention_bwd_dkdv.f16.d128.causal.sm90a",
        "attention.c",
        "attention_bwd_dkdv",
        _attention_bwd_args("attention_bwd_dkdv", "f16", 128),
        _attention_flags("f16", 128, 1, 64, 128) | {"ATOMIC_DQ": 0},
        num_warps=8,
        arch="sm_90a",
    ),
    Golden(  # dQ by f32 atomics from the accumulator's registers (ATOMIC_DQ), then a cast
        "attention_bwd_dkdv.f16.d64.atomic_dq.sm90a",
        "attention.c",
        "attention_bwd_dkdv",
        _attention_bwd_args("attention_bwd_dkdv", "f16", 64),
        _attention_flags("f16", 64, 0, 64, 64) | {"ATOMIC_DQ": 1},
        num_warps=4,
        arch="sm_90a",
    ),
    Golden(
        "attention_bwd_dq_cast.bf16",
        "attention.c",
        "attention_bwd_dq_cast",
        _attention_bwd_args("attention_bwd_dq_cast", "bf16", 128),
        {"D": 128, "DH": 128, "BM": 64},
    ),
    Golden(
        "attention_bwd_dq.bf16.d128.sm90a",
        "attention.c",
        "attention_bwd_dq",
        _attention_bwd_args("attention_bwd_dq", "bf16", 128),
        _attention_fwd_flags("bf16", 128, 0, 128, 64),
        num_warps=8,
        arch="sm_90a",
    ),
)

# reductions and scans of tuples (tests/kernels/tuples.c): the items packed into the device
# header's tx::Tuple, one tx::reduce / tx::scan with the combiner on tuples, each item its field
GOLDEN += (
    Golden(
        "tuples.argmax_payload.f32",
        "tests/kernels/tuples.c",
        "argmax_payload",
        ("f32", "i32", "f32", "f32", "f32", 1000, 1000, 1000),
        {"BR": 4, "BC": 1024},
    ),
    Golden(
        "tuples.recurrence.f32",
        "tests/kernels/tuples.c",
        "recurrence",
        ("f32", "f32", "f32", 1000, 1000),
        {"BR": 2, "BC": 1024, "REVERSE": 0},
    ),
)

# The Hopper TMA + wgmma matmul plans whose CUDA is committed as golden/<name> (tests/test_hopper.py
# compares them): plan_matmul's keyword arguments by file name.
HOPPER_GOLDENS: dict[str, dict[str, Any]] = {
    "hopper_matmul.bf16.linear.sm90a.cu": dict(
        dtype="bf16", out_dtype="bf16", a_kmajor=True, b_kmajor=True
    ),
    "hopper_matmul.bf16.tma_store.sm90a.cu": dict(
        dtype="bf16",
        out_dtype="bf16",
        a_kmajor=True,
        b_kmajor=False,
        tma_store=True,
        config=HopperConfig(128, 256, 64, 3),
    ),
    "hopper_matmul.bf16.cluster2.sm90a.cu": dict(  # 256 x 128, two consumers of 128 rows
        dtype="bf16",
        out_dtype="bf16",
        a_kmajor=True,
        b_kmajor=True,
        tma_store=True,
        config=HopperConfig(256, 128, 64, 4, atoms=2, cluster=2, store_panels=1),
    ),
    "hopper_matmul.f16.pingpong.sm90a.cu": dict(  # two consumers taking turns, a tile each
        dtype="f16",
        out_dtype="f16",
        a_kmajor=True,
        b_kmajor=False,
        tma_store=True,
        config=HopperConfig(128, 128, 64, 5, atoms=2, pingpong=True),
    ),
    "hopper_matmul.f8e4m3.scaled.sm90a.cu": dict(
        dtype="f8e4m3", out_dtype="bf16", a_kmajor=True, b_kmajor=True, scaled=True
    ),
    "hopper_matmul.f16.bias_gelu.sm90a.cu": dict(
        dtype="f16", out_dtype="f16", a_kmajor=True, b_kmajor=False, bias_dtype="f16", activation=1
    ),
    "hopper_matmul.f16.split_k.sm90a.cu": dict(  # 4 K slices per tile, partials in a workspace
        dtype="f16",
        out_dtype="f16",
        a_kmajor=True,
        b_kmajor=False,
        tma_store=True,
        config=HopperConfig(128, 128, 64, 5, split_k=4),
    ),
    "hopper_matmul.f32.tf32.sm90a.cu": dict(  # wgmma tf32 k8 on TMA-loaded f32 tiles
        dtype="f32",
        out_dtype="f32",
        a_kmajor=True,
        b_kmajor=True,
        tma_store=True,
        config=HopperConfig(128, 256, 32, 4, store_panels=1),
    ),
}


def render_hopper_golden(name: str) -> str:
    """The CUDA of HOPPER_GOLDENS[name], rendered by the current compiler."""
    from teeny_tx.lower.hopper.matmul import plan_matmul
    from teeny_tx.templates.hopper import render_matmul

    return render_matmul(plan_matmul(**HOPPER_GOLDENS[name]))


def renderers() -> list[tuple[str, Callable[[], str]]]:
    """Every golden file's name under golden/ and what renders its text (not called yet)."""
    plain = [(g.path.name, g.render) for g in GOLDEN]
    hopper = [(name, functools.partial(render_hopper_golden, name)) for name in HOPPER_GOLDENS]
    return plain + sorted(hopper)


def render_all() -> list[tuple[str, str]]:
    """Every golden file's name under golden/ and the text the current compiler gives it."""
    return [(name, render()) for name, render in renderers()]


def bless(directory: Path | None = None) -> list[Path]:
    """Rewrite every golden file (GOLDEN and HOPPER_GOLDENS) from the current compiler into
    ``directory`` (golden/ by default: only ``teeny-tx golden --bless`` writes there; tests pass a
    temporary directory); returns the files that changed."""
    directory = GOLDEN_DIR if directory is None else directory
    directory.mkdir(exist_ok=True)
    changed = []
    for name, text in render_all():
        path = directory / name
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
            changed.append(path)
    return changed
