"""Generated names never shadow user names, on the GPU: tests/kernels/names.c (a pipelined dot
loop whose parameters, locals and operands are named like the compiler's temporaries) on both
dot lowerings (sm_90: mma.sync, sm_90a: wgmma), against the interpreter and float64 NumPy.

The parameters `stage` and `k_ahead` offset A and B inside the addresses the pipeline copies
ahead: a generated `stage` or `k_ahead` shadowing them reads the wrong rows."""

import numpy as np
import pytest

import teeny_tx as tx

cp = pytest.importorskip("cupy")

NAMES_FILE = "tests/kernels/names.c"


@pytest.mark.parametrize("arch", ["sm_90", "sm_90a"])
@pytest.mark.parametrize(
    "shape,offsets,tiles,stages",
    [
        ((208, 144, 272), (16, 32), (64, 64, 64), 3),  # 16-byte aligned: cp.async pipeline
        ((256, 256, 512), (64, 128), (64, 128, 64), 4),
        ((77, 45, 99), (3, 5), (64, 64, 64), 3),  # misaligned: staged from registers
    ],
)
def test_names_kernel_matches_the_interpreter(monkeypatch, arch, shape, offsets, tiles, stages):
    monkeypatch.setenv("TEENY_TX_ARCH", arch)
    kernel = tx.compile(NAMES_FILE, name=NAMES_FILE).names  # fresh: compiled for this arch
    (m, n, k), (stage, k_ahead), (bm, bn, bk) = shape, offsets, tiles
    rng = np.random.default_rng(7)
    a = rng.standard_normal(stage + m * k).astype(np.float16)
    b = rng.standard_normal(k_ahead + k * n).astype(np.float16)
    grid = (tx.cdiv(m, bm), tx.cdiv(n, bn))
    meta = dict(BM=bm, BN=bn, BK=bk)
    c = cp.full((m, n), np.nan, np.float32)
    kernel[grid](c, cp.asarray(a), cp.asarray(b), m, n, k, stage, k_ahead, **meta,
                 num_warps=4, num_stages=stages)  # fmt: skip
    source = kernel.cuda_source(
        "f32", "f16", "f16", m, n, k, stage, k_ahead, **meta, num_warps=4, num_stages=stages
    )
    assert ("wgmma.mma_async" in source) == (arch == "sm_90a")
    want = a[stage:].reshape(m, k).astype(np.float64) @ b[k_ahead:].reshape(k, n)
    interpreted = np.full((m, n), np.nan, np.float32)
    kernel.interpret[grid](interpreted, a, b, m, n, k, stage, k_ahead, **meta)
    np.testing.assert_allclose(interpreted, want, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(cp.asnumpy(c), interpreted, rtol=2e-5, atol=2e-4)
