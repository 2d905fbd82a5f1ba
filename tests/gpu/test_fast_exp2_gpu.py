"""fast_exp2 on the GPU against the interpreter and float64: every float dtype, odd sizes,
inputs reaching past 2^-126 (flushed to 0 on both), exp2 beside it keeping them."""

from __future__ import annotations

import numpy as np
import pytest

import teeny_tx as tx

from ..test_fast_exp2 import CASES, SRC, TINY

cp = pytest.importorskip("cupy")


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    path = tmp_path_factory.mktemp("fast_exp2_gpu") / "apply.c"
    path.write_text(SRC)
    return tx.compile(str(path)).apply


@pytest.mark.parametrize("fast", [1, 0])
@pytest.mark.parametrize("n,dtype", CASES, ids=str)
def test_gpu_agrees_with_the_interpreter(kernel, n, dtype, fast):
    rng = np.random.default_rng(n + fast)
    x = rng.uniform(-150, 8, n).astype(dtype)
    block = 1024
    grid = (tx.cdiv(n, block),)
    y = cp.zeros(n, dtype=x.dtype)
    kernel[grid](y, cp.asarray(x), n, FAST=fast, BLOCK=block)
    got = cp.asnumpy(y).astype(np.float64)
    want = np.zeros_like(x)
    kernel.interpret[grid](want, x, n, FAST=fast, BLOCK=block)
    want = want.astype(np.float64)
    rtol = {np.dtype(np.float32): 4e-7, np.dtype(np.float64): 1e-15}.get(np.dtype(dtype), 8e-3)
    atol = 0 if np.dtype(dtype) == np.float64 else 1e-39  # exp2f's subnormal results: 2 ulp
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
    if fast and np.dtype(dtype) != np.float64:
        assert (got[np.exp2(x.astype(np.float64)) < TINY] == 0).all()  # flushed on the GPU too
