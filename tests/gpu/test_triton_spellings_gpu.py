"""bitcast, debug_barrier, the multiple_of/max_contiguous hints and the packed pair scan on the
GPU, against the interpreter (bit for bit where the op is exact)."""

import numpy as np
import pytest

import teeny_tx
from teeny_tx.dtypes import DTYPES

from ..test_triton_spellings import BITS, PAIRS, RECURRENCE, STRIDED, recurrence

cp = pytest.importorskip("cupy")


@pytest.mark.parametrize(("src", "to"), PAIRS)
@pytest.mark.parametrize("n", [1, 1001, 2**20 + 3])
def test_bitcast_and_barrier_on_the_gpu(src, to, n):
    module = teeny_tx.compile(BITS.replace("TO", to), name="kernels/t.c")
    raw = np.random.default_rng(n).integers(0, 256, size=n * DTYPES[src].itemsize, dtype=np.uint8)
    x = raw.view(DTYPES[src].np)
    out = cp.asarray(np.zeros(n, DTYPES[to].np))
    module.bits[(teeny_tx.cdiv(n, 256),)](out, cp.asarray(x), n, BLOCK=256)
    np.testing.assert_array_equal(cp.asnumpy(out).view(np.uint8), raw)


def test_hinted_rows_on_the_gpu():
    text = STRIDED.replace("START", "multiple_of(program_id(0) * stride, 4)")
    module = teeny_tx.compile(text, name="kernels/t.c")
    x = np.arange(64 * 512, dtype=np.float32)
    out = cp.zeros_like(cp.asarray(x))
    module.rows[(64,)](out, cp.asarray(x), 512, BLOCK=512)
    np.testing.assert_array_equal(cp.asnumpy(out), x)


@pytest.mark.parametrize("n", [1, 64, 1024])
def test_the_packed_pair_scan_on_the_gpu(n):
    module = teeny_tx.compile(RECURRENCE, name="kernels/t.c")
    rng = np.random.default_rng(n)
    a = rng.uniform(0.5, 1.0, n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    h = cp.zeros(n, cp.float32)
    module.recur[(1,)](h, cp.asarray(a), cp.asarray(b), N=n)
    np.testing.assert_allclose(cp.asnumpy(h), recurrence(a, b), rtol=1e-4, atol=1e-4)
