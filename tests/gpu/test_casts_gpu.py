"""Casts on the GPU: the cast kernel over the special values of every source dtype, into every
target dtype, compared bit for bit with the interpreter and the exact reference (rules C1-C5
of lower/ops/casts.py; any NaN matches any NaN)."""

import numpy as np
import pytest

import teeny_tx

from ..conftest import CAST_DTYPES, CAST_KERNELS, cast_reference, cast_values, run_cast_all
from ..test_casts import same_bits

cp = pytest.importorskip("cupy")


@pytest.fixture(scope="module")
def casts():
    return teeny_tx.compile(CAST_KERNELS, name="kernels/casts.c")


@pytest.mark.parametrize("src", CAST_DTYPES)
def test_gpu_casts_match_the_interpreter_bit_for_bit(casts, src):
    x = cast_values(src)
    on_gpu = run_cast_all(casts.cast_all, cp.asarray(x), lambda n, d: cp.asarray(np.zeros(n, d)))
    on_cpu = run_cast_all(casts.cast_all.interpret, x, np.zeros)
    for to in CAST_DTYPES:
        got = cp.asnumpy(on_gpu[to])
        same_bits(got, on_cpu[to])
        same_bits(got, cast_reference(x, to))
