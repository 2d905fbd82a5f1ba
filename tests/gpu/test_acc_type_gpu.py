"""acc_t and dot() on f64 on the GPU (tests/test_acc_type.py runs them on the interpreter): a
sum that f32 would round away, and f64 products through the FMA path, against NumPy float64;
the same kernels' f32 specialisations still compute in f32."""

from __future__ import annotations

import numpy as np
import pytest

import teeny_tx as tx

from ..test_acc_type import DOT, SUM

cp = pytest.importorskip("cupy")

FILE = "kernels/t.c"


def test_acc_t_sums_f64_data_in_f64():
    mod = tx.compile(SUM, name=FILE)
    n = 37
    x = 1.0 + 1e-10 * np.arange(n)
    out = cp.empty(n)
    mod.k[(1,)](out, cp.asarray(x), n, BLOCK=64)
    np.testing.assert_allclose(out.get(), (x - 1.0).sum(), rtol=1e-12)
    outf = cp.empty(n, cp.float32)
    mod.k[(1,)](outf, cp.asarray(x, cp.float32), n, BLOCK=64)
    assert bool((outf == 0).all())


@pytest.mark.parametrize("m,n,k", [(16, 16, 16), (32, 64, 16), (64, 32, 32)])
def test_dot_f64_on_the_fma_path(m, n, k):
    rng = np.random.default_rng(m * n + k)
    a, b = rng.standard_normal((m, k)), rng.standard_normal((k, n))
    a[0, 0] = 1e8
    c = cp.empty((m, n))
    tx.compile(DOT, name=FILE).k[(1,)](c, cp.asarray(a), cp.asarray(b), M=m, N=n, K=k)
    want = a @ b
    np.testing.assert_allclose(c.get(), want, rtol=1e-13, atol=1e-13 * np.abs(want).max())
