"""The differential tester on the GPU (issue 29): random integer expressions of every integer
dtype over edge values, GPU against the interpreter bit for bit (rules I1-I4 and C3 make them
exact): 8 dtypes x 8 kernels x 32 programs x 64 samples. Floats are left out: NVRTC contracts
a * b + c into an FMA (docs/numerics.md), so float results agree to rounding only."""

import numpy as np
import pytest

import teeny_tx

from ..differential import INT_DTYPES, inputs, np_dtype, programs, same_bits, tile_kernel

cp = pytest.importorskip("cupy")

KERNELS, PROGRAMS, SAMPLES = 8, 32, 64


@pytest.mark.parametrize("dtype", INT_DTYPES)
@pytest.mark.parametrize("batch", range(KERNELS))
def test_gpu_integer_expressions_match_the_interpreter_bitwise(dtype, batch):
    exprs = programs(dtype, PROGRAMS, f"gpu{batch}")
    env = inputs(dtype, SAMPLES, f"gpu{batch}")
    kernel = teeny_tx.compile(tile_kernel(dtype, exprs), name="kernels/diff.c").diff
    want = np.zeros(PROGRAMS * SAMPLES, np_dtype(dtype))
    kernel.interpret[(1,)](want, env["a"], env["b"], env["c"], SAMPLES, BLOCK=SAMPLES)
    got = cp.zeros(PROGRAMS * SAMPLES, np_dtype(dtype))
    args = [cp.asarray(env[v]) for v in ("a", "b", "c")]
    kernel[(1,)](got, *args, SAMPLES, BLOCK=SAMPLES)
    ok = same_bits(cp.asnumpy(got), want)
    bad = np.nonzero(~ok)[0]
    assert bad.size == 0, [
        (exprs[i // SAMPLES], {v: env[v][i % SAMPLES] for v in env}) for i in bad[:3]
    ]
