"""CUDA's libdevice math functions on the GPU against the interpreter (tests/test_libdevice.py's
kernels and inputs): within the error CUDA documents for each function (the interpreter is the
correctly rounded value, to a fraction of an ulp), f16/bf16 within one rounding of their own;
the exact functions and the integer ones bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

import teeny_tx as tx
from teeny_tx.dtypes import DTYPES
from teeny_tx.lower.ops.libdevice import CUDA_ULPS
from tests import test_libdevice as T
from tests.conftest import KERNEL_FILE, assert_close_elementwise

cp = pytest.importorskip("cupy")

EXACT = {"trunc", "round", "rint", "nearbyint", "logb", "fmod", "remainder", "copysign", "fdim"}


def _both(name: str, inputs: list[np.ndarray], out_dtype) -> tuple[np.ndarray, np.ndarray]:
    module = tx.compile(T._kernel(name, len(inputs)), name=KERNEL_FILE)
    n = inputs[0].size
    host = np.zeros(n, out_dtype)
    module.k.interpret[(1,)](host, *inputs, n, BLOCK=1024, strided=True)
    dev = cp.zeros(n, out_dtype)
    module.k[(1,)](dev, *(cp.asarray(np.ascontiguousarray(x)) for x in inputs), n, BLOCK=1024)
    return cp.asnumpy(dev), host


def _bound(name: str, dtype: str, got, want) -> None:
    if name in EXACT:
        np.testing.assert_array_equal(got, want)
        return
    f32, f64 = CUDA_ULPS.get(name, (0, 0))
    if dtype in ("f16", "bf16"):  # f32's error is far below one 16-bit rounding
        atol = f32 if f32 < 1 else None  # but for the Bessel functions' absolute bound
        assert_close_elementwise(got, want, dtype, ulps=4, atol=atol, what=name)
        return
    bound = f32 if dtype == "f32" else f64
    if bound < 1:  # an absolute bound beyond |x| >= 8 (the Bessel functions), 9 ulp below
        assert_close_elementwise(got, want, dtype, ulps=20, atol=bound, what=name)
        return
    # `ulps` counts unit roundoffs: CUDA's bound in ulp, and the interpreter's half ulp
    assert_close_elementwise(got, want, dtype, ulps=2 * bound + 2, what=name)


@pytest.mark.parametrize("dtype", T.FLOATS)
@pytest.mark.parametrize("name", sorted(T.UNARY) + sorted(T.INVERSES))
def test_unary_functions_on_the_gpu(name, dtype):
    _, (lo, hi), *_ = T.UNARY.get(name) or T.INVERSES[name]
    (x,) = T._inputs(dtype, lo, hi, (name, dtype, "gpu"))
    if name in T.INVERSES:
        x = np.clip(x, np.nextafter(x.dtype.type(lo), x.dtype.type(hi)), None).astype(x.dtype)
    got, want = _both(name, [x], x.dtype)
    _bound(name, dtype, got, want)


@pytest.mark.parametrize("dtype", T.FLOATS)
@pytest.mark.parametrize("name", sorted(T.BINARY) + sorted(T.NORMS))
def test_functions_of_several_values_on_the_gpu(name, dtype):
    arity = T.NORMS[name][1] if name in T.NORMS else 2
    lo, hi = T.BINARY[name][1] if name in T.BINARY else (-100.0, 100.0)
    xs = T._inputs(dtype, lo, hi, (name, dtype, "gpu"), arity)
    got, want = _both(name, xs, xs[0].dtype)
    _bound(name, dtype, got, want)


@pytest.mark.parametrize("dtype", T.FLOATS)
def test_exact_functions_of_special_values_on_the_gpu(dtype):
    with np.errstate(over="ignore"):  # 3e38 is inf in f16
        x = np.array(T.SPECIALS * 10, np.float64).astype(DTYPES[dtype].np)
    for name, out in (
        ("isnan", np.bool_),
        ("isinf", np.bool_),
        ("isfinite", np.bool_),
        ("signbit", np.bool_),
        ("ilogb", np.int32),
        ("logb", x.dtype),
        ("trunc", x.dtype),
    ):
        got, want = _both(name, [x], out)
        np.testing.assert_array_equal(got, want, err_msg=name)
    n = np.arange(x.size, dtype=np.int32) % 40 - 20
    for name in ("ldexp", "scalbn"):
        got, want = _both(name, [x, n], x.dtype)
        np.testing.assert_array_equal(got, want, err_msg=name)


@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_nextafter_on_the_gpu(dtype):
    x, y = T._inputs(dtype, -10.0, 10.0, ("nextafter", dtype, "gpu"), 2)
    got, want = _both("nextafter", [x, y], x.dtype)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", T.INTS)
@pytest.mark.parametrize("name", ["popc", "clz", "ffs", "brev", "umulhi"])
def test_integer_bits_on_the_gpu(name, dtype):
    xs = [
        T._int_inputs(dtype, (name, dtype, "gpu", k)) for k in range(2 if name == "umulhi" else 1)
    ]
    out = xs[0].dtype if name in ("brev", "umulhi") else np.int32
    got, want = _both(name, xs, out)
    np.testing.assert_array_equal(got, want)


def test_triton_spellings_on_torch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA device")
    x = np.linspace(-0.9, 0.9, 1000).astype(np.float32)
    host = np.zeros_like(x)
    T._libdevice_kernel[(1,)](x, host, x.size, BLOCK=1024)
    dev = torch.zeros(x.size, device="cuda")
    T._libdevice_kernel[(1,)](torch.from_numpy(x).cuda(), dev, x.size, BLOCK=1024)
    torch.cuda.synchronize()
    # erfinv (2 ulp) + tan (4 ulp) + exact terms, on values up to ~1.6 + 1e6
    np.testing.assert_allclose(dev.cpu().numpy(), host, rtol=2e-6, atol=1e-6)
