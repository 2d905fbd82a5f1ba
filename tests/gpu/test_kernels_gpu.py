"""The bundled kernels on the GPU: against float64 references and against the interpreter."""

import numpy as np
import pytest

import teeny_tx as tx
from teeny_tx.dtypes import DTYPES

from ..cases import CASES
from ..conftest import stable_seed

cp = pytest.importorskip("cupy")


def _run_gpu(case, xs, scalars, n, dtype, **kw):
    out = cp.full(n, np.nan, dtype=DTYPES[dtype].np)
    block = kw.get("BLOCK", 1024)
    case.launch((tx.cdiv(n, block),), case.args(out, [cp.asarray(x) for x in xs], scalars, n), **kw)
    return cp.asnumpy(out)


@pytest.mark.parametrize("n", [1, 7, 1001, 2**20 + 3])
@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_bundled_kernel_on_gpu(case, dtype, n):
    rng = np.random.default_rng(stable_seed(case.name, dtype, n))
    xs, scalars = case.make(n, dtype, rng)
    got = _run_gpu(case, xs, scalars, n, dtype)
    case.check(got, xs, scalars, dtype)


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_gpu_agrees_with_interpreter(case, dtype):
    n = 4099
    rng = np.random.default_rng(3)
    xs, scalars = case.make(n, dtype, rng)
    got = _run_gpu(case, xs, scalars, n, dtype)
    host = np.full(n, np.nan, dtype=DTYPES[dtype].np)
    case.launch((tx.cdiv(n, 1024),), case.args(host, xs, scalars, n), interpret=True)
    exact = case.name in ("vector_add", "leaky_relu", "clamp") and dtype == "f32"
    if exact:
        np.testing.assert_array_equal(got, host)
    else:
        ulps = {"f32": 4e-6, "f16": 1e-3, "bf16": 8e-3}[dtype]
        np.testing.assert_allclose(
            got.astype(np.float64), host.astype(np.float64), rtol=ulps, atol=ulps
        )


@pytest.mark.parametrize("block,num_warps", [(64, 4), (256, 1), (2048, 8), (4096, 4)])
def test_blocks_and_warps(block, num_warps):
    case = CASES[0]
    n = 100_003
    rng = np.random.default_rng(block)
    xs, scalars = case.make(n, "f32", rng)
    got = _run_gpu(case, xs, scalars, n, "f32", BLOCK=block, num_warps=num_warps)
    case.check(got, xs, scalars, "f32")


def test_offset_and_strided_views():
    k = tx.compile("kernels/axpby.c").axpby
    n = 10_001
    x = cp.random.standard_normal(3 * n + 5, dtype=cp.float32)
    y = cp.random.standard_normal(n + 3, dtype=cp.float32)
    buf = cp.full(n + 2, cp.nan, dtype=cp.float32)
    xv, yv, out = x[5::3][:n], y[3:], buf[1:-1]
    assert not xv.flags.c_contiguous
    xc = cp.ascontiguousarray(xv)
    k[(tx.cdiv(n, 1024),)](out, xc, yv, 0.5, -2.0, n, BLOCK=1024)
    ref = 0.5 * cp.asnumpy(xc).astype(np.float64) - 2.0 * cp.asnumpy(yv).astype(np.float64)
    np.testing.assert_allclose(cp.asnumpy(out), ref, rtol=2e-6, atol=2e-6)
    assert bool(cp.isnan(buf[0])) and bool(cp.isnan(buf[-1]))


def test_torch_tensors():
    torch = pytest.importorskip("torch")
    k = tx.compile("kernels/vector_add.c").vector_add
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        n = 12_345
        a = torch.randn(n, device="cuda", dtype=dtype)
        b = torch.randn(n, device="cuda", dtype=dtype)
        out = torch.empty_like(a)
        k[(tx.cdiv(n, 1024),)](a, b, out, n, BLOCK=1024)
        torch.cuda.synchronize()
        assert torch.equal(out, a + b)


def test_host_array_is_refused():
    k = tx.compile("kernels/vector_add.c").vector_add
    a = cp.zeros(16, dtype=cp.float32)
    with pytest.raises(tx.LaunchError, match="host"):
        k[(1,)](np.zeros(16, np.float32), a, a, 16, BLOCK=1024)


def test_dtype_mismatch_is_refused():
    src = """
kernel fill(i32 *out, i32 n, const i32 BLOCK)
{
    tile offs = program_id(0) * BLOCK + arange(0, BLOCK);
    store(out + offs, offs, offs < n);
}
"""
    k = tx.compile(src, name="kernels/fill.c").fill
    with pytest.raises(tx.LaunchError, match="out"):
        k[(1,)](cp.zeros(16, dtype=cp.float32), 16, BLOCK=128)
    out = cp.zeros(1000, dtype=cp.int32)
    k[(tx.cdiv(1000, 128),)](out, 1000, BLOCK=128)
    np.testing.assert_array_equal(cp.asnumpy(out), np.arange(1000, dtype=np.int32))


def test_nvrtc_error_points_at_kernel_line():
    """A kernel line NVRTC rejects is reported at that line (through #line)."""
    k = tx.compile("kernels/vector_add.c").vector_add
    spec = k.specialize("f32", "f32", "f32", 1000, BLOCK=1024)
    assert '#line 7 "kernels/vector_add.c"' in spec.cuda_source


def test_device_assert_traps_on_the_gpu():
    """A failing device_assert stops the kernel; the error surfaces at the next synchronise.
    (It kills the CUDA context, so this runs in a subprocess.)"""
    import subprocess
    import sys

    code = """
import cupy as cp, numpy as np, teeny_tx as tx
src = '''
kernel k(f32 *out, const f32 *x, i32 n, const i32 BLOCK)
{
    tile offs = program_id(0) * BLOCK + arange(0, BLOCK);
    tile v = load(x + offs, offs < n, 1.0f);
    device_assert(v > 0.0f, "inputs must be positive");
    store(out + offs, v, offs < n);
}
'''
m = tx.compile(src, name="kernels/k.c", debug=True)
x = cp.ones(64, cp.float32); x[10] = -1
m.k[(1,)](cp.zeros(64, cp.float32), x, 64, BLOCK=64)
cp.cuda.runtime.deviceSynchronize()
"""
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode != 0
    assert (
        "kernels/k.c:6: device_assert failed in program (0, 0, 0) at (10): inputs must be positive"
        in run.stdout + run.stderr
    )
