"""``teeny-tx demo``: compile a few bundled kernels and library functions, run them, check them.

Input: a seed and where to run (the GPU when there is one, else the NumPy interpreter). Output:
one line per case on stdout (its largest error against a float64 NumPy reference, or FAIL
and why) and an exit status. The demo holds only its own small data; the thorough tables
(every kernel, dtype, size and tolerance) are the tests' (tests/cases.py in a checkout).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from math import erf
from typing import Any

import numpy as np

from .dtypes import DTYPES
from .errors import TeenyError
from .progress import Progress

SIZES = (1, 1001, 2**16 + 3)  # elementwise kernels: one element, odd, and several programs
ROW_SHAPES = ((1, 1), (7, 1001), (3, 16385))  # [rows, cols]: the last is longer than one tile
MATMUL_SHAPE = {False: (70, 33, 64), True: (1001, 517, 333)}  # M, N, K: interpreter, GPU
BLOCK = 1024
# |got - ref| <= TOLERANCE * max|ref|, by dtype (inputs are exact in the dtype; f32 math)
TOLERANCE = {"f32": 1e-5, "f16": 2e-3, "bf16": 1.6e-2}


def _gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + np.vectorize(erf)(x / np.sqrt(2.0)))


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    mean = x.mean(axis=1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=1, keepdims=True)
    return (x - mean) / np.sqrt(var + np.float32(1e-5)) * w + b


@dataclass(frozen=True)
class Elementwise:
    """A kernel of ``kernels/<file>`` taking (inputs..., out, n) or (out, inputs..., n)."""

    file: str
    kernel: str
    inputs: int
    reference: Callable[..., np.ndarray]
    constexprs: dict[str, int] = field(default_factory=dict)
    out_first: bool = True


ELEMENTWISE = (
    Elementwise("vector_add.c", "vector_add", 2, lambda a, b: a + b, out_first=False),
    Elementwise("activations.c", "gelu", 1, _gelu, {"APPROXIMATE": 0}),
    Elementwise("activations.c", "silu", 1, lambda x: x / (1.0 + np.exp(-x))),
)


def _check(name: str, got: Any, ref: np.ndarray, dtype: str) -> float:
    """The largest error over max|ref|; an AssertionError beyond the dtype's tolerance."""
    got = np.asarray(got, dtype=np.float64)
    scale = max(float(np.max(np.abs(ref), initial=0.0)), 1e-30)
    worst = float(np.max(np.abs(got - ref), initial=0.0)) / scale
    if not worst <= TOLERANCE[dtype]:
        raise AssertionError(
            f"{name}: error {worst:.2e} of max|ref| (tolerance {TOLERANCE[dtype]})"
        )
    return worst


def _random(rng: np.random.Generator, shape: Any, dtype: str, scale: float = 1.0) -> np.ndarray:
    return (scale * rng.standard_normal(shape)).astype(np.float32).astype(DTYPES[dtype].np)


def _elementwise(case: Elementwise, dtype: str, n: int, rng, gpu: bool) -> float:
    from .library import module
    from .runtime.grid import cdiv

    xs = [_random(rng, n, dtype) for _ in range(case.inputs)]
    kernel = getattr(module(case.file), case.kernel)
    out = np.full(n, np.nan, DTYPES[dtype].np)
    if gpu:
        import cupy as cp

        arrays = [cp.asarray(x) for x in xs]
        device_out = cp.asarray(out)
        args = [device_out, *arrays] if case.out_first else [*arrays, device_out]
        kernel[(cdiv(n, BLOCK),)](*args, n, BLOCK=BLOCK, **case.constexprs)
        out = cp.asnumpy(device_out)
    else:
        args = [out, *xs] if case.out_first else [*xs, out]
        kernel.interpret[(cdiv(n, BLOCK),)](*args, n, BLOCK=BLOCK, **case.constexprs)
    ref = case.reference(*(x.astype(np.float64) for x in xs))
    return _check(case.kernel, out, ref, dtype)


def _rows(name: str, dtype: str, rows: int, cols: int, rng, gpu: bool) -> float:
    from .library import nn

    x = _random(rng, (rows, cols), dtype, 2.0)
    w, b = _random(rng, cols, dtype), _random(rng, cols, dtype)
    args = (x,) if name == "softmax" else (x, w, b)
    if gpu:
        import cupy as cp

        # the kernels' first kept configs, as matmul takes matmul_config's: the autotuner
        # would compile and time every config of each new row length (a cold demo's time)
        tune, nn.TUNE = nn.TUNE, False
        try:
            out = getattr(nn, name)(*(cp.asarray(a) for a in args))
        finally:
            nn.TUNE = tune
        out = cp.asnumpy(out[0] if isinstance(out, tuple) else out)
    else:
        out = getattr(nn, name)(*args, interpret=True)
        out = out[0] if isinstance(out, tuple) else out
    f64 = [a.astype(np.float64) for a in args]
    ref = _softmax(*f64) if name == "softmax" else _layer_norm(*f64)
    return _check(name, out, ref, dtype)


def _matmul(dtype: str, precision: str | None, rng, gpu: bool) -> float:
    """linalg.matmul with bias and GELU against float64 (TF32: its 10-bit inputs)."""
    from .library import linalg

    m, n, k = MATMUL_SHAPE[gpu]
    a, b = _random(rng, (m, k), dtype), _random(rng, (k, n), dtype)
    bias = rng.standard_normal(n).astype(np.float32)
    ref = _gelu(a.astype(np.float64) @ b.astype(np.float64) + bias)
    # matmul_config's tiles: the autotuner would compile and time all of the kernel's configs
    config = linalg.matmul_config(m, n, k, dtype, precision=precision or "ieee")
    if gpu:
        import cupy as cp

        a, b, bias = cp.asarray(a), cp.asarray(b), cp.asarray(bias)
    got = linalg.matmul(
        a,
        b,
        bias=bias,
        activation="gelu",
        out_dtype="f32",
        precision=precision,
        config=config,
        interpret=not gpu,
    )
    if gpu:
        got = cp.asnumpy(got)
    worst = float(np.max(np.abs(got - ref)) / np.max(np.abs(ref)))
    assert worst < (2e-3 if precision == "tf32" else 1e-5), f"error {worst:.2e}"
    return worst


def _nvrtc_compiles() -> str:
    """Compile vector_add and matmul for sm_90 through NVRTC (no GPU needed)."""
    from .kernel import HEADERS
    from .library import module
    from .runtime import nvrtc
    from .target import DEFAULT_ARCH, Target

    sm90 = Target.from_arch(DEFAULT_ARCH)
    add = module("vector_add.c").vector_add.cuda_source("f32", "f32", "f32", 1000, BLOCK=BLOCK)
    nvrtc.compile_to_cubin(add, name="vector_add", arch=sm90.arch, headers=HEADERS)
    return f"generated CUDA compiles for {sm90.arch} with NVRTC (no GPU needed)"


def _line(name: str, what: str, run: Callable[[], float], meter: Progress | None = None) -> bool:
    start = time.perf_counter()
    try:
        status, ok = f"ok   max|err|/scale {run():.2e}", True
    except (AssertionError, TeenyError) as exc:
        status, ok = f"FAIL {exc}", False
    if meter is not None:
        meter.clear()  # the meter's line (stderr) blanked before this one (stdout)
    print(f"  {name:<24} {what:<22} {status}  ({time.perf_counter() - start:.2f} s)")
    return ok


def _cases(rng: np.random.Generator, gpu: bool) -> list[tuple[str, str, Callable[[], float]]]:
    """(name, what it runs on, the check) of every demo case, in order."""
    cases: list[tuple[str, str, Callable[[], float]]] = []
    for case in ELEMENTWISE:
        for dtype in ("f32", "f16", "bf16"):
            check = partial(
                _worst, [partial(_elementwise, case, dtype, n, rng, gpu) for n in SIZES]
            )
            cases.append((case.kernel, f"{dtype} n={','.join(map(str, SIZES))}", check))
    for name in ("softmax", "layer_norm"):
        shapes = ROW_SHAPES if name == "softmax" else ROW_SHAPES[:2]
        for dtype in ("f32", "bf16"):
            runs = [partial(_rows, name, dtype, r, c, rng, gpu) for r, c in shapes]
            what = f"{dtype} " + ",".join(f"{r}x{c}" for r, c in shapes)
            cases.append((f"nn.{name}", what, partial(_worst, runs)))
    shape = "x".join(map(str, MATMUL_SHAPE[gpu]))
    for dtype, precision in (("f16", None), ("bf16", None), ("f32", "tf32"), ("f32", None)):
        what = f"{dtype}{'/' + precision if precision else ''} {shape}"
        cases.append(
            ("linalg.matmul+bias+gelu", what, partial(_matmul, dtype, precision, rng, gpu))
        )
    return cases


def _worst(runs: Sequence[Callable[[], float]]) -> float:
    return max(run() for run in runs)


def run(seed: int = 0, interpret: bool = False) -> int:
    """Run the demo; 0 when every case is within tolerance, else 1."""
    from .runtime.launch import has_gpu

    gpu = has_gpu() and not interpret
    where = "GPU" if gpu else "NumPy interpreter" + ("" if interpret else " (no GPU found)")
    print(f"teeny-tx demo: compiling bundled kernels and running them on the {where}")
    rng = np.random.default_rng(seed)
    cases = _cases(rng, gpu)
    with Progress(len(cases), "teeny-tx demo") as meter:
        results = []
        for name, what, check in cases:
            meter.step(f"{name} {what}")
            results.append(_line(name, what, check, meter))
    if not gpu:
        try:
            print(f"  {_nvrtc_compiles()}")
        except TeenyError as exc:
            results.append(False)
            print(f"  FAIL NVRTC: {exc}")
    failures = results.count(False)
    print("all cases verified" if not failures else f"{failures} case(s) FAILED")
    return 1 if failures else 0
