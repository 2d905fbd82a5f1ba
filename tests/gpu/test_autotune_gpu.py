"""Tuned launches on the GPU: real timing with CUDA events, correct results, the winner reused
in the process and, through the disk cache, by a fresh module."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import teeny_tx
from teeny_tx import Autotuner, Config

AUTOTUNE_FILE = Path(__file__).parents[1] / "kernels" / "autotune.c"
BLOCK_CONFIGS = (
    Config({"BLOCK": 256}, num_warps=2),
    Config({"BLOCK": 1024}, num_warps=4),
    Config({"BLOCK": 2048}, num_warps=8),
)


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("TEENY_TX_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _no_tuning(*args, **kwargs):
    raise AssertionError("tuned again")


def grid_1d(meta):
    return (teeny_tx.cdiv(meta["n"], meta["BLOCK"]),)


def test_vector_add_tuned_over_blocks():
    cp = pytest.importorskip("cupy")
    k = teeny_tx.compile("kernels/vector_add.c").vector_add
    tuner = Autotuner(k, BLOCK_CONFIGS, key=("n",), warmup=2, rep=5)
    n = 1_000_003
    a, b = cp.random.rand(n, dtype=cp.float32), cp.random.rand(n, dtype=cp.float32)
    out = cp.zeros_like(a)
    tuner[grid_1d](a, b, out, n)
    cp.testing.assert_allclose(out, a + b, rtol=0, atol=0)
    line = tuner.describe()
    assert line.startswith(f"vector_add[n={n}]: BLOCK=") and " ms; 3 of 3 configs timed)" in line
    tuner._tune = _no_tuning  # the second launch reuses the winner
    out[:] = 0
    tuner[grid_1d](a, b, out, n)
    cp.testing.assert_allclose(out, a + b, rtol=0, atol=0)


def test_pragma_configs_prune_time_and_persist(cache_dir):
    cp = pytest.importorskip("cupy")
    module = teeny_tx.compile(AUTOTUNE_FILE, name="tests/kernels/autotune.c")
    # n % 16 != 0: the masks of the 16-byte accesses vary within a vector, so BLOCK=4096 on one
    # warp spills and is pruned (with n % 16 == 0 one predicated access each needs no spill)
    n = 300_001
    x, y = cp.random.rand(n, dtype=cp.float32), cp.random.rand(n, dtype=cp.float32)
    out = cp.zeros_like(x)
    module.axpy.tune[grid_1d](out, x, y, 2.0, n)
    cp.testing.assert_allclose(out, 2 * x + y, rtol=1e-6)
    chosen = module.axpy.tune.best(out, x, y, 2.0, n)
    assert chosen in module.axpy.tune.configs and chosen.kwargs["BLOCK"] != 4096
    assert "pruned: BLOCK=4096, num_warps=1, num_stages=2: " in module.axpy.tune.describe()
    assert len(list((cache_dir / "autotune").glob("*/*.json"))) == 1

    fresh = teeny_tx.compile(AUTOTUNE_FILE, name="tests/kernels/autotune.c")
    fresh.axpy.tune._tune = _no_tuning  # the disk cache answers
    out[:] = 0
    fresh.axpy.tune[grid_1d](out, x, y, 2.0, n)
    cp.testing.assert_allclose(out, 2 * x + y, rtol=1e-6)
    assert fresh.axpy.tune.best(out, x, y, 2.0, n) == chosen
    assert fresh.axpy.tune.describe().endswith("; from the disk cache)")


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_tuned_transpose_with_a_2d_grid(dtype):
    cp = pytest.importorskip("cupy")
    module = teeny_tx.compile(AUTOTUNE_FILE, name="tests/kernels/autotune.c")
    m, n = 300, 200
    x = cp.random.rand(m, n).astype(dtype)
    out = cp.zeros((n, m), dtype)

    def grid(meta):
        return teeny_tx.cdiv(meta["M"], meta["BM"]), teeny_tx.cdiv(meta["N"], meta["BN"])

    module.transpose.tune[grid](out, x, m, n)
    assert cp.array_equal(out, x.T)
    # f32: too much shared memory; f16: half of it, but 512 elements per thread spill
    why = "shared memory 262144 > " if dtype == "float32" else ""
    assert f"1 pruned: BM=256, BN=256, num_warps=4, num_stages=2: {why}" in (
        module.transpose.tune.describe()
    )


def test_tuning_on_an_explicit_stream():
    cp = pytest.importorskip("cupy")
    k = teeny_tx.compile("kernels/vector_add.c").vector_add
    tuner = Autotuner(k, BLOCK_CONFIGS[:2], key=("n",), warmup=1, rep=3)
    n = 100_000
    a, b = cp.random.rand(n, dtype=cp.float32), cp.random.rand(n, dtype=cp.float32)
    out = cp.zeros_like(a)
    stream = cp.cuda.Stream(non_blocking=True)
    tuner[grid_1d](a, b, out, n, stream=stream)
    stream.synchronize()
    cp.testing.assert_allclose(out, a + b, rtol=0, atol=0)


def test_torch_tensors_are_timed_on_torchs_stream():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch without CUDA")
    k = teeny_tx.compile("kernels/vector_add.c").vector_add
    tuner = Autotuner(k, BLOCK_CONFIGS, key=("n",), warmup=1, rep=3)
    n = 123_457
    a, b = torch.rand(n, device="cuda"), torch.rand(n, device="cuda")
    out = torch.zeros_like(a)
    tuner[grid_1d](a, b, out, n)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(out.cpu().numpy(), (a + b).cpu().numpy())
    assert " ms; 3 of 3 configs timed)" in tuner.describe()
