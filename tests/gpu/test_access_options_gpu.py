"""Triton's options on the GPU (tests/test_access_options.py's kernels): hinted loads and stores
(PTX cache operators and L2 policies) move exactly what plain ones do, in every form (16-byte
vectors, lane by lane, scalars); maximum/minimum with PROPAGATE_NAN_ALL, cast(x, T, RTZ) and
reduce_or bit for bit against the interpreter; loops under #pragma unroll / num_stages; assume."""

from __future__ import annotations

import numpy as np
import pytest

import teeny_tx as tx
from teeny_tx.dtypes import DTYPES
from tests import test_access_options as T
from tests.conftest import KERNEL_FILE, stable_seed

cp = pytest.importorskip("cupy")


@pytest.mark.parametrize(("lc", "le", "sc", "se"), T.COMBOS)
@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16", "f64", "i8", "i64"])
@pytest.mark.parametrize("n", [1, 1001, 2**20 + 3])
def test_hinted_accesses_copy_on_the_gpu(lc, le, sc, se, dtype, n):
    module = T._copy(lc, le, sc, se)
    rng = np.random.default_rng(stable_seed("copy-gpu", lc, se, dtype, n))
    a = (rng.standard_normal(n) * 50).astype(DTYPES[dtype].np)
    out = cp.zeros(n, a.dtype)
    module.copy[(tx.cdiv(n, 1024),)](out, cp.asarray(a), n, BLOCK=1024)
    np.testing.assert_array_equal(cp.asnumpy(out), a)


@pytest.mark.parametrize("dtype", ["f16", "bf16", "f32", "f64", "i32"])
@pytest.mark.parametrize("propagate", ["PROPAGATE_NAN_NONE", "PROPAGATE_NAN_ALL"])
def test_propagate_nan_on_the_gpu(dtype, propagate):
    np_dtype = DTYPES[dtype].np
    rng = np.random.default_rng(stable_seed("minmax-gpu", dtype, propagate))
    a, b = (rng.integers(0, 100, 1001).astype(np_dtype) for _ in range(2))
    if DTYPES[dtype].is_float:
        a[::7], b[::5] = np.nan, np.nan
    module = tx.compile(T.MINMAX.replace("PROPAGATE", propagate), name=KERNEL_FILE)
    host = [np.zeros_like(a), np.zeros_like(a)]
    module.mm.interpret[(1,)](*host, a, b, 1001, BLOCK=1024)
    dev = [cp.zeros(1001, a.dtype), cp.zeros(1001, a.dtype)]
    module.mm[(1,)](*dev, cp.asarray(a), cp.asarray(b), 1001, BLOCK=1024)
    for d, h in zip(dev, host, strict=True):
        np.testing.assert_array_equal(cp.asnumpy(d).astype(np.float64), h.astype(np.float64))


@pytest.mark.parametrize(
    ("src", "to"),
    [("f32", "f16"), ("f32", "bf16"), ("f64", "f32"), ("f64", "f16"), ("f64", "bf16")],
)
def test_rtz_casts_on_the_gpu(src, to):
    rng = np.random.default_rng(stable_seed("rtz-gpu", src, to))
    x = (rng.standard_normal(100_003) * 10.0 ** rng.integers(-8, 8, 100_003)).astype(DTYPES[src].np)
    x[:6] = np.array([np.inf, -np.inf, np.nan, 1e30, -1e30, 65519.0])
    module = tx.compile(T.RTZ.replace("TO", to).replace("ROUNDING", "RTZ"), name=KERNEL_FILE)
    dev = cp.zeros(x.size, DTYPES[to].np)
    module.narrow[(tx.cdiv(x.size, 1024),)](dev, cp.asarray(x), x.size, BLOCK=1024)
    want = T._toward_zero_reference(x, to)
    np.testing.assert_array_equal(cp.asnumpy(dev).astype(np.float64), want.astype(np.float64))


@pytest.mark.parametrize("dtype", ["bool", "i8", "u16", "i32", "u64"])
def test_reduce_or_on_the_gpu(dtype):
    np_dtype = DTYPES[dtype].np
    rng = np.random.default_rng(stable_seed("reduce_or-gpu", dtype))
    x = rng.integers(0, 2, (13, 64)) << rng.integers(0, DTYPES[dtype].bits, (13, 64))
    x = x.astype(np_dtype) if dtype != "bool" else (rng.random((13, 64)) < 0.05)
    module = tx.compile(T.REDUCE_OR, name=KERNEL_FILE)
    host = np.zeros(81, np_dtype)
    module.bits.interpret[(1,)](host, x, 13, R=16, C=64)
    dev = cp.zeros(81, np_dtype)
    module.bits[(1,)](dev, cp.asarray(x), 13, R=16, C=64)
    np.testing.assert_array_equal(cp.asnumpy(dev), host)


@pytest.mark.parametrize(
    "pragmas", ["", "#pragma num_stages 3\n    #pragma unroll 2", "#pragma num_stages 1"]
)
def test_loop_pragmas_on_the_gpu(pragmas):
    a = np.random.default_rng(0).standard_normal((64, 256)).astype(np.float16)
    b = np.random.default_rng(1).standard_normal((256, 64)).astype(np.float16)
    module = T._loop_module(pragmas)
    c = cp.zeros((64, 64), cp.float32)
    module.mm[(1,)](c, cp.asarray(a), cp.asarray(b), 256, BM=64, BN=64, BK=32, num_warps=4)
    want = a.astype(np.float64) @ b.astype(np.float64) + 256
    np.testing.assert_allclose(cp.asnumpy(c), want, rtol=1e-4, atol=1e-3)


def test_assume_and_hints_run_on_the_gpu():
    module = tx.compile(T.HINTED, name=KERNEL_FILE)
    x = np.arange(100_003, dtype=np.float32)
    out = cp.zeros_like(cp.asarray(x))
    module.k[(tx.cdiv(x.size, 256),)](out, cp.asarray(x), x.size, BLOCK=256)
    np.testing.assert_array_equal(cp.asnumpy(out), x + np.arange(x.size) // 4)


def test_triton_options_on_torch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA device")
    x = np.linspace(-3, 3, 1001).astype(np.float32)
    x[5] = np.nan
    host = np.zeros_like(x)
    T.options_kernel[(1,)](x, host, 1001, BLOCK=1024, STAGES=3)
    dev = torch.zeros(1001, device="cuda")
    T.options_kernel[(1,)](torch.from_numpy(x).cuda(), dev, 1001, BLOCK=1024, STAGES=3)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(dev.cpu().numpy(), host)
