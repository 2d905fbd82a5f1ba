"""Tuples on the GPU: the multi-operand reductions and scans of tests/kernels/tuples.c (argmax
with a payload, Welford's merge, a linear recurrence) against the interpreter on the same
inputs, at warp counts that take every path of tx::reduce / tx::scan (one warp, across warps
through shared memory); the Triton-spelled kernel of tests/test_tuples.py on torch tensors."""

from __future__ import annotations

import numpy as np
import pytest

import teeny_tx as tx
from tests import test_tuples as T
from tests.conftest import assert_close_elementwise, stable_seed

cp = pytest.importorskip("cupy")


@pytest.fixture(scope="module")
def mod():
    return tx.compile(T.TUPLES, name=T.TUPLES)


@pytest.mark.parametrize(("rows", "cols", "br", "bc"), [(1, 1, 1, 1), (37, 1000, 4, 1024)])
@pytest.mark.parametrize("warps", [1, 4, 8])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32])
def test_argmax_with_a_payload_on_the_gpu(mod, rows, cols, br, bc, warps, dtype):
    rng = np.random.default_rng(stable_seed("argmax-gpu", rows, cols, np.dtype(dtype).name))
    x = rng.integers(-4, 5, (rows, cols)).astype(dtype)
    w = rng.standard_normal((rows, cols)).astype(np.float32)
    outs = [cp.zeros(rows, d) for d in (dtype, np.int32, np.float32)]
    grid = (tx.cdiv(rows, br),)
    mod.argmax_payload[grid](
        *outs, cp.asarray(x), cp.asarray(w), rows, cols, cols, BR=br, BC=bc, num_warps=warps
    )
    want = T.argmax_reference(x, w)
    for got, ref in zip(outs, want, strict=True):
        np.testing.assert_array_equal(cp.asnumpy(got), ref)


@pytest.mark.parametrize(
    ("rows", "cols", "bc", "warps"),
    [(3, 1001, 1024, 1), (3, 1001, 1024, 4), (64, 8192, 8192, 8), (64, 4099, 8192, 4)],
)
@pytest.mark.parametrize("dtype", ["f16", "bf16", "f32", "f64"])
def test_welford_on_the_gpu(mod, rows, cols, bc, warps, dtype):
    from teeny_tx.dtypes import DTYPES

    rng = np.random.default_rng(stable_seed("welford-gpu", rows, cols, dtype))
    x = (rng.standard_normal((rows, cols)) * 3 + 10).astype(DTYPES[dtype].np)
    acc = np.float64 if dtype == "f64" else np.float32
    acc_name = "f64" if dtype == "f64" else "f32"
    host = [np.zeros(rows, acc), np.zeros(rows, acc)]
    mod.welford.interpret[(rows,)](*host, x, rows, cols, BC=bc)
    dev = [cp.zeros(rows, acc), cp.zeros(rows, acc)]
    mod.welford[(rows,)](*dev, cp.asarray(x), rows, cols, BC=bc, num_warps=warps)
    x64 = x.astype(np.float64)
    roundings = 8 + 4 * np.log2(cols + 1)  # two trees of merges, each within these
    scale = np.abs(x64).max(1)
    assert_close_elementwise(cp.asnumpy(dev[0]), host[0], acc_name, ulps=2 * roundings, scale=scale)
    vscale = (np.abs(x64 - x64.mean(1, keepdims=True)) * scale[:, None]).mean(1) + x64.var(1)
    assert_close_elementwise(
        cp.asnumpy(dev[1]), host[1], acc_name, ulps=8 * roundings, scale=vscale
    )


@pytest.mark.parametrize(("rows", "cols", "br", "bc"), [(1, 1, 1, 1), (9, 1000, 4, 1024)])
@pytest.mark.parametrize("warps", [1, 4, 8])
@pytest.mark.parametrize("reverse", [0, 1])
def test_a_linear_recurrence_on_the_gpu(mod, rows, cols, br, bc, warps, reverse):
    rng = np.random.default_rng(stable_seed("recurrence-gpu", rows, cols, reverse))
    a = rng.uniform(0.5, 1.0, (rows, cols)).astype(np.float32)
    b = rng.standard_normal((rows, cols)).astype(np.float32)
    grid = (tx.cdiv(rows, br),)
    h = cp.zeros((rows, cols), cp.float32)
    mod.recurrence[grid](
        h, cp.asarray(a), cp.asarray(b), rows, cols, BR=br, BC=bc, REVERSE=reverse,
        num_warps=warps,
    )  # fmt: skip
    host = np.zeros((rows, cols), np.float32)
    mod.recurrence.interpret[grid](host, a, b, rows, cols, BR=br, BC=bc, REVERSE=reverse)
    want = T.recurrence_reference(a, b, bool(reverse))
    scale = T.recurrence_reference(np.abs(a), np.abs(b), bool(reverse))
    ulps = 4 * np.log2(cols + 1) + 4  # another association order than the interpreter's
    assert_close_elementwise(cp.asnumpy(h), want, "f32", ulps=ulps, scale=scale)
    assert_close_elementwise(cp.asnumpy(h), host, "f32", ulps=2 * ulps, scale=scale)


def test_a_tuple_carried_around_a_loop_on_the_gpu(mod):
    x = np.random.default_rng(7).standard_normal(100_003).astype(np.float32)
    lo, hi = cp.zeros(1, cp.float32), cp.zeros(1, cp.float32)
    mod.running_range[(1,)](lo, hi, cp.asarray(x), x.size, BLOCK=1024, num_warps=8)
    assert (float(lo[0]), float(hi[0])) == (x.min(), x.max())


def test_tuples_through_jit_on_torch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA device")
    rng = np.random.default_rng(stable_seed("tuples-jit-gpu"))
    n = 1001
    x = rng.integers(-50, 50, n).astype(np.float32)
    a = rng.uniform(0.5, 1.0, n).astype(np.float32)
    host = [np.zeros(2, np.float32), np.zeros(2, np.int32), np.zeros(4, np.float32)]
    host.append(np.zeros(n, np.float32))
    T.tuple_kernel[(1,)](x, a, *host, n, BLOCK=1024)
    dev = [torch.from_numpy(np.zeros_like(h)).cuda() for h in host]
    T.tuple_kernel[(1,)](
        torch.from_numpy(x).cuda(), torch.from_numpy(a).cuda(), *dev, n, BLOCK=1024
    )
    torch.cuda.synchronize()
    for d, h in zip(dev[:2], host[:2], strict=True):
        np.testing.assert_array_equal(d.cpu().numpy(), h)
    np.testing.assert_allclose(dev[2].cpu().numpy(), host[2], rtol=1e-5)
    scale = T.recurrence_reference(np.abs(a[None]), np.abs(x[None]), True)[0]
    assert_close_elementwise(dev[3].cpu().numpy(), host[3], "f32", ulps=96, scale=scale)
