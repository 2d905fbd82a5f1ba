"""Pointer values on the GPU: where() on pointer tiles, and a pointer tile held across a dot,
against NumPy and the interpreter."""

import numpy as np
import pytest

import teeny_tx

from ..test_pointer_values import HELD, SELECT, expected

cp = pytest.importorskip("cupy")


@pytest.mark.parametrize("n", [1, 1001, 2**20 + 3])
def test_where_selects_pointer_tiles_on_the_gpu(n):
    module = teeny_tx.compile(SELECT, name="kernels/t.c")
    a = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    out = cp.zeros(n, cp.float32)
    module.select[(teeny_tx.cdiv(n, 256),)](out, cp.asarray(a), n, 5, BLOCK=256)
    np.testing.assert_array_equal(cp.asnumpy(out), expected(a, 5))


def test_a_pointer_tile_held_across_a_dot_on_the_gpu():
    module = teeny_tx.compile(HELD, name="kernels/t.c")
    a = np.random.default_rng(0).standard_normal(256).astype(np.float32)
    out = cp.zeros(256, cp.float32)
    module.held[(1,)](out, cp.asarray(a), N=16)
    host = np.zeros(256, np.float32)
    module.held.interpret[(1,)](host, a, N=16)
    np.testing.assert_allclose(cp.asnumpy(out), host, rtol=1e-5, atol=1e-5)
