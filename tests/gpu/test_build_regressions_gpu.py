"""The kernels that were internal failures of the GPU path (issue 29) give the interpreter's
answer on the GPU."""

import numpy as np
import pytest

import teeny_tx

from ..regression_kernels import DOT_TRANS_POINTERS, TWO_REDUCTIONS, dot_case, two_reductions_case

cp = pytest.importorskip("cupy")


@pytest.mark.parametrize(("block", "n"), [(16, 16), (32, 19), (64, 64)])
def test_gpu_two_reductions_through_an_earlier_index_tile(block, n):
    kernel = teeny_tx.compile(TWO_REDUCTIONS, name="kernels/rows.c").rows
    x, want = two_reductions_case(block, n)
    out = cp.zeros(2 * block, cp.float32)
    kernel[(1,)](out, cp.asarray(x), n, BLOCK=block)
    np.testing.assert_allclose(cp.asnumpy(out), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("bm", "bn", "bk", "k"), [(16, 32, 16, 48), (64, 64, 32, 96)])
def test_gpu_dot_loop_through_trans_of_a_pointer_tile(bm, bn, bk, k):
    kernel = teeny_tx.compile(DOT_TRANS_POINTERS, name="kernels/mm.c").mm
    a, b, want = dot_case(bm, bn, bk, k)
    c = cp.zeros((bm, bn), cp.float32)
    kernel[(1,)](c, cp.asarray(a), cp.asarray(b), k, BM=bm, BN=bn, BK=bk)
    np.testing.assert_allclose(cp.asnumpy(c), want, rtol=1e-3, atol=1e-3)
