"""dot() on the interpreter: shapes, accumulation dtypes, explicit f32 precision (IEEE, TF32,
TF32x3), batched products, and its errors. The CUDA lowering's own tests are in
tests/test_dot_lowering.py and tests/gpu/test_dot_gpu.py."""

import numpy as np
import pytest

import teeny_tx as tx
from teeny_tx.dtypes import DTYPES

SOURCE = """
kernel matmul(any *c, const any *a, const any *b, i32 M, i32 N, i32 K, const i32 PRECISION,
              const i32 BM, const i32 BN, const i32 BK)
{
    tile rm = program_id(0) * BM + arange(0, BM);
    tile rn = program_id(1) * BN + arange(0, BN);
    tile rk = arange(0, BK);
    f32 acc[BM][BN] = 0;
    for (i32 k = 0; k < K; k += BK) {
        tile a_t = load(a + expand_dims(rm, 1) * K + expand_dims(rk, 0) + k,
                        (expand_dims(rm, 1) < M) & (expand_dims(rk, 0) + k < K), 0);
        tile b_t = load(b + (expand_dims(rk, 1) + k) * N + expand_dims(rn, 0),
                        (expand_dims(rk, 1) + k < K) & (expand_dims(rn, 0) < N), 0);
        acc = dot(a_t, b_t, acc, PRECISION);
    }
    store(c + expand_dims(rm, 1) * N + expand_dims(rn, 0), acc,
          (expand_dims(rm, 1) < M) & (expand_dims(rn, 0) < N));
}

kernel imatmul(i32 *c, const i8 *a, const i8 *b, const i32 B)
{
    tile r = expand_dims(arange(0, B), 1) * B + expand_dims(arange(0, B), 0);
    store(c + r, dot(load(a + r), load(b + r)));
}

kernel batched(f32 *c, const f16 *a, const f16 *b, const i32 B, const i32 S)
{
    tile r = (expand_dims(expand_dims(arange(0, B), 1), 2) * S
              + expand_dims(expand_dims(arange(0, S), 0), 2)) * S
             + expand_dims(expand_dims(arange(0, S), 0), 0);
    store(c + r, dot(load(a + r), load(b + r)));
}
"""
PRECISION = {"IEEE": 20, "TF32": 21, "TF32X3": 22}


@pytest.fixture(scope="module")
def mod():
    return tx.compile(SOURCE, name="kernels/matmul.c")


def run_matmul(mod, a, b, precision="IEEE", blocks=(32, 32, 16)):
    m, k = a.shape
    n = b.shape[1]
    c = np.zeros((m, n), np.float32)
    bm, bn, bk = blocks
    mod.matmul.interpret[(tx.cdiv(m, bm), tx.cdiv(n, bn))](
        c, a, b, m, n, k, PRECISION=PRECISION[precision], BM=bm, BN=bn, BK=bk
    )
    return c


@pytest.mark.parametrize("dtype", ["f16", "bf16", "f32"])
@pytest.mark.parametrize("shape", [(16, 16, 16), (45, 33, 70), (64, 17, 129)])
def test_ragged_matmul(mod, dtype, shape):
    m, n, k = shape
    rng = np.random.default_rng(m + n + k)
    a = rng.standard_normal((m, k)).astype(np.float32).astype(DTYPES[dtype].np)
    b = rng.standard_normal((k, n)).astype(np.float32).astype(DTYPES[dtype].np)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    got = run_matmul(mod, a, b)
    err = np.linalg.norm(got - ref) / np.linalg.norm(ref)
    assert err < 1e-6, err  # products of the stored values, accumulated in f32


def test_tf32_is_explicit_and_distinguishable(mod):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((64, 128)).astype(np.float32)
    b = rng.standard_normal((128, 64)).astype(np.float32)
    ref = a.astype(np.float64) @ b.astype(np.float64)

    def err(p):
        got = run_matmul(mod, a, b, p)
        return np.linalg.norm(got - ref) / np.linalg.norm(ref)

    ieee, tf32, tf32x3 = err("IEEE"), err("TF32"), err("TF32X3")
    assert ieee < 1e-6
    assert 1e-4 < tf32 < 2e-3  # TF32's 10-bit mantissa
    assert tf32x3 < 1e-5  # three TF32 products recover nearly f32


def test_i8_accumulates_in_i32(mod):
    rng = np.random.default_rng(1)
    a = rng.integers(-128, 128, (32, 32)).astype(np.int8)
    b = rng.integers(-128, 128, (32, 32)).astype(np.int8)
    c = np.zeros((32, 32), np.int32)
    mod.imatmul.interpret[(1,)](c, a, b, B=32)
    np.testing.assert_array_equal(c, a.astype(np.int32) @ b.astype(np.int32))


def test_batched(mod):
    rng = np.random.default_rng(2)
    a = rng.standard_normal((2, 16, 16)).astype(np.float16)
    b = rng.standard_normal((2, 16, 16)).astype(np.float16)
    c = np.zeros((2, 16, 16), np.float32)
    mod.batched.interpret[(1,)](c, a, b, B=2, S=16)
    np.testing.assert_allclose(
        c, np.matmul(a.astype(np.float64), b.astype(np.float64)), rtol=1e-5, atol=1e-5
    )


ERRORS = [
    (
        "tile x = dot(load(a + arange(0, 16)), load(a + arange(0, 16)));",
        "dot() needs two 2-D tiles",
    ),
    (
        "f32 x[16][16] = 0; f32 y[32][16] = 0; tile z = dot(x, y);",
        "shape mismatch in dot(): [16, 16] @ [32, 16]",
    ),
    ("f32 x[8][16] = 0; tile z = dot(x, trans(x));", "at least 16, got M=8"),
    ("f32 x[16][16] = 0; f16 y[16][16] = 0; tile z = dot(x, y);", "one dtype, got f32 and f16"),
    (
        "f16 x[16][16] = 0; tile z = dot(x, x, 0.0f, TF32);",
        "TF32 and TF32X3 apply to f32 inputs only",
    ),
]


@pytest.mark.parametrize("body,message", ERRORS)
def test_dot_errors_point_at_the_call(body, message):
    src = f"kernel k(f32 *out, const f32 *a)\n{{\n    {body}\n}}\n"
    with pytest.raises(tx.CompileError, match="kernels/k.c:3") as err:
        tx.compile(src, name="kernels/k.c").k.cuda_source("f32", "f32")
    assert message in str(err.value)


def test_cuda_lowering_uses_tensor_cores(mod):
    src = mod.matmul.cuda_source(
        "f32", "f16", "f16", 64, 64, 64, PRECISION=20, BM=32, BN=32, BK=16, num_stages=3
    )
    assert "tx::mma<" in src and "tx::MmaF16" in src and "tx::cp_async16(" in src


def test_batched_dot_is_refused_on_the_gpu_with_a_clear_message(mod):
    with pytest.raises(tx.CompileError, match="batched") as err:
        mod.batched.cuda_source("f32", "f16", "f16", B=2, S=16)
    assert "kernels/matmul.c:" in str(err.value)
