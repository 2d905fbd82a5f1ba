"""Integer semantics on the GPU (rules I1-I4 of lower/ops/casts.py): every integer operator on the
edge values of every integer dtype (0, 1, -1, MIN, MAX, shift amounts around the width),
compared bit for bit with the interpreter and the exact reference."""

import numpy as np
import pytest

import teeny_tx

from ..int_semantics_cases import BLOCK, INT_DTYPES, OUTPUTS, expected, operands
from ..int_semantics_cases import kernel_text as ops_kernel

cp = pytest.importorskip("cupy")


@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_gpu_integer_operators_match_the_interpreter_bit_for_bit(dtype):
    kernel = getattr(teeny_tx.compile(ops_kernel(dtype), name="kernels/ops.c"), f"ops_{dtype}")
    a, b = operands(dtype)
    n = a.size
    out, wide = np.zeros(len(OUTPUTS) * n, a.dtype), np.zeros(n, np.int64)
    kernel.interpret[(1,)](out, wide, a, b, n, BLOCK=BLOCK)
    d_out, d_wide = cp.zeros(len(OUTPUTS) * n, a.dtype), cp.zeros(n, cp.int64)
    kernel[(1,)](d_out, d_wide, cp.asarray(a), cp.asarray(b), n, BLOCK=BLOCK)
    got = cp.asnumpy(d_out).reshape(len(OUTPUTS), n)
    want, want_wide = expected(dtype)
    for k, name in enumerate(OUTPUTS):
        bad = np.nonzero(got[k] != out.reshape(len(OUTPUTS), n)[k])[0]
        assert bad.size == 0, (name, a[bad[:4]], b[bad[:4]], got[k][bad[:4]])
        np.testing.assert_array_equal(got[k], want[k], err_msg=name)
    np.testing.assert_array_equal(cp.asnumpy(d_wide), wide)
    np.testing.assert_array_equal(cp.asnumpy(d_wide), want_wide)
