"""Random numbers and dropout on the GPU: bit-identical to the interpreter (randn: a few ulp)."""

import numpy as np
import pytest

import teeny_tx as tx
from teeny_tx.dtypes import DTYPES
from teeny_tx.library import module
from teeny_tx.lower.ops import random as rng

from ..cases import CASES
from ..conftest import EVERY_RANDOM_OP, KERNEL_FILE, every_random_op

cp = pytest.importorskip("cupy")

N = 2**20 + 3


def _every_op_gpu(n: int, seed: int, base: int, wide: int = 0, block: int = 1024):
    out = (
        cp.full(n, cp.nan, cp.float32),
        cp.full(n, cp.nan, cp.float32),
        cp.zeros(n, cp.uint32),
        cp.zeros((n, 4), cp.uint32),
    )
    k = tx.compile(EVERY_RANDOM_OP, name=KERNEL_FILE).every
    k[(tx.cdiv(n, block),)](*out, seed, base, n, wide, BLOCK=block)
    return tuple(cp.asnumpy(a) for a in out)


@pytest.mark.parametrize(
    ("seed", "base", "wide"), [(0, 0, 0), (-(2**63), -(2**20), 0), (2**40 + 7, 5, 2**31 + 1)]
)
def test_random_ops_match_the_interpreter(seed, base, wide):
    u, z, w, w4 = _every_op_gpu(N, seed, base, wide)
    hu, hz, hw, hw4 = every_random_op(N, seed, base, wide, block=8192)
    np.testing.assert_array_equal(u, hu)
    np.testing.assert_array_equal(w, hw)
    np.testing.assert_array_equal(w4, hw4)
    np.testing.assert_allclose(z, hz, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("block,num_warps", [(64, 1), (1024, 4), (4096, 8)])
def test_random_ops_do_not_depend_on_the_layout(block, num_warps):
    n, seed = 100_003, 17
    k = tx.compile(EVERY_RANDOM_OP, name=KERNEL_FILE).every
    u = cp.empty(n, cp.float32)
    args = (u, cp.empty(n, cp.float32), cp.empty(n, cp.uint32), cp.empty((n, 4), cp.uint32))
    k[(tx.cdiv(n, block),)](*args, seed, 0, n, 0, BLOCK=block, num_warps=num_warps)
    np.testing.assert_array_equal(cp.asnumpy(u), rng.rand(seed, np.arange(n)))


@pytest.mark.parametrize("n", [1, 1001, N])
@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_dropout_forward_and_backward_on_cupy_arrays(dtype, n):
    forward, backward = (
        next(c for c in CASES if c.name == name) for name in ("dropout", "dropout_backward")
    )
    gen = np.random.default_rng(n)
    (x,), (p, seed) = forward.make(n, dtype, gen)
    dy = gen.standard_normal(n).astype(np.float32).astype(DTYPES[dtype].np)
    out = cp.full(n, cp.nan, DTYPES[dtype].np)
    dx = cp.full(n, cp.nan, DTYPES[dtype].np)
    grid = (tx.cdiv(n, 1024),)
    mod = module("dropout.c")
    mod.dropout[grid](out, cp.asarray(x), p, seed, n, BLOCK=1024)
    mod.dropout_backward[grid](dx, cp.asarray(dy), p, seed, n, BLOCK=1024)
    forward.check(cp.asnumpy(out), [x], (p, seed), dtype)
    backward.check(cp.asnumpy(dx), [dy], (p, seed), dtype)
    keep = rng.rand(seed, np.arange(n)) > np.float32(p)
    np.testing.assert_array_equal(cp.asnumpy(dx)[~keep].astype(np.float64), 0.0)
    np.testing.assert_array_equal(cp.asnumpy(out)[~keep].astype(np.float64), 0.0)
    host = np.full(n, np.nan, DTYPES[dtype].np)
    mod.dropout.interpret[(tx.cdiv(n, 4096),)](host, x, p, seed, n, BLOCK=4096)
    if dtype == "f32":
        np.testing.assert_array_equal(cp.asnumpy(out), host)
