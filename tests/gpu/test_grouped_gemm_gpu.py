"""Pointer values on the GPU: Triton's grouped GEMM (tests/test_grouped_gemm.py) with tables of
device addresses (CuPy's ``a.data.ptr``, torch's ``a.data_ptr()``), against the interpreter run
on the same inputs; the C kernel on sm_90 and sm_90a code (the latter through wgmma)."""

from __future__ import annotations

import numpy as np
import pytest

import teeny_tx as tx
from tests import test_grouped_gemm as G
from tests.conftest import assert_close_elementwise, stable_seed

cp = pytest.importorskip("cupy")


def _device_table(arrays):
    return cp.asarray(np.array([a.data.ptr for a in arrays], np.int64))


def _on_the_interpreter(module, groups, programs, bm, bn, bk):
    a, b, c = (G.table(x) for x in zip(*groups, strict=True))
    sizes, lds = G.sizes_and_strides(groups)
    arrays = [x for group in groups for x in group]
    module.grouped_matmul.interpret[(programs,)](
        a, b, c, sizes, lds, len(groups), NUM_SM=programs, BM=bm, BN=bn, BK=bk, arrays=arrays
    )


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize(
    ("bm", "bn", "bk", "warps"), [(64, 64, 32, 4), (128, 128, 64, 8), (64, 128, 64, 4)]
)
def test_grouped_gemm_in_c_on_the_gpu(seed, bm, bn, bk, warps):
    module = tx.compile(G.GROUPED, name=G.GROUPED)
    groups = G.random_groups(stable_seed("grouped-gpu", seed, bm), most=300)
    host = [(a, b, c.copy()) for a, b, c in groups]
    _on_the_interpreter(module, host, 7, bm, bn, bk)
    # contiguous device copies (the kernel reads B's row stride from g_lds)
    dev = [
        (cp.asarray(a), cp.asarray(np.ascontiguousarray(b)), cp.zeros(c.shape, cp.float16))
        for a, b, c in groups
    ]
    sizes, lds = G.sizes_and_strides([(a, np.ascontiguousarray(b), c) for a, b, c in groups])
    tables = [_device_table(x) for x in zip(*dev, strict=True)]
    module.grouped_matmul[(132,)](
        *tables, cp.asarray(sizes), cp.asarray(lds), len(groups),
        NUM_SM=132, BM=bm, BN=bn, BK=bk, num_warps=warps,
    )  # fmt: skip
    cp.cuda.Device().synchronize()
    for (a, b, _), (_, _, dc), (_, _, hc) in zip(groups, dev, host, strict=True):
        want = a.astype(np.float64) @ b.astype(np.float64)
        scale = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
        # f32 accumulation in another order than the interpreter's: both within a few f32
        # roundings of the sum of |terms|, then one f16 rounding
        assert_close_elementwise(cp.asnumpy(dc), want, "f16", ulps=1.5, scale=scale)
        assert_close_elementwise(cp.asnumpy(dc), hc, "f16", ulps=2.5, scale=scale)


def test_tutorial_08_on_torch_cuda_tensors():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA device")
    groups = G.random_groups(stable_seed("grouped-torch"), multiple=64, most=512)
    dev = [
        (torch.from_numpy(a).cuda(), torch.from_numpy(np.ascontiguousarray(b)).cuda(),
         torch.zeros(c.shape, dtype=torch.float16, device="cuda"))
        for a, b, c in groups
    ]  # fmt: skip
    columns = zip(*dev, strict=True)
    ptrs = [torch.tensor([x.data_ptr() for x in xs], device="cuda") for xs in columns]
    sizes, lds = G.sizes_and_strides([(a, np.ascontiguousarray(b), c) for a, b, c in groups])
    G.grouped_matmul_kernel[(132,)](
        *ptrs, torch.from_numpy(sizes).cuda(), torch.from_numpy(lds).cuda(), len(groups),
        NUM_SM=132, BLOCK_SIZE_M=64, BLOCK_SIZE_N=64, BLOCK_SIZE_K=64,
    )  # fmt: skip
    torch.cuda.synchronize()
    for a, b, c in dev:
        torch.testing.assert_close(c, (a.double() @ b.double()).half(), rtol=2e-3, atol=2e-3)
