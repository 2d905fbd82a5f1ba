"""2-D tiles, shape operations and reductions on the GPU, against NumPy and the interpreter."""

import numpy as np
import pytest

import teeny_tx as tx

from ..conftest import TILE_OPS, reduction_case, reduction_dtype, reduction_expected, stable_seed

cp = pytest.importorskip("cupy")


@pytest.mark.parametrize("num_warps", [1, 4, 8])
@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("op", TILE_OPS)
@pytest.mark.parametrize("shape", [(4, 8), (16, 64), (32, 128), (64, 256)])
def test_reduce_2d_on_gpu(tiles, op, axis, shape, num_warps):
    rng = np.random.default_rng(stable_seed(op, axis, shape, num_warps))
    x = reduction_case(op, shape, rng)
    out = cp.zeros(shape[1 - axis], dtype=reduction_dtype(op))
    tiles.reduce2d[(1,)](
        out,
        cp.asarray(x),
        shape[0],
        shape[1],
        shape[1],
        OP=TILE_OPS.index(op),
        AXIS=axis,
        BM=shape[0],
        BN=shape[1],
        num_warps=num_warps,
    )
    np.testing.assert_allclose(
        cp.asnumpy(out), reduction_expected(op, x, axis), rtol=2e-5, atol=2e-5
    )


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize(
    "n,block,num_warps", [(1, 16, 4), (7, 16, 1), (1001, 1024, 4), (2**20 + 3, 4096, 8)]
)
def test_ragged_sum_and_max_1d(tiles, n, block, num_warps, dtype):
    rng = np.random.default_rng(n)
    x = rng.standard_normal(n).astype(dtype)
    programs = tx.cdiv(n, block)
    padded = np.zeros(programs * block, dtype=np.float64)
    padded[:n] = x
    for op, ref in (
        (0, padded.reshape(programs, block).sum(1)),
        (1, padded.reshape(programs, block).max(1)),
    ):
        out = cp.zeros(programs, dtype=np.float32)
        tiles.reduce1d[(programs,)](out, cp.asarray(x), n, OP=op, BLOCK=block, num_warps=num_warps)
        np.testing.assert_allclose(cp.asnumpy(out), ref, rtol=1e-4, atol=1e-4)


def test_keep_dims_and_whole_tile_reduction(tiles):
    x = np.random.default_rng(1).standard_normal((16, 32)).astype(np.float32)
    out = cp.zeros((16, 32), dtype=cp.float32)
    tiles.keepdims[(1,)](out, cp.asarray(x), BM=16, BN=32)
    centred = x.astype(np.float64) - x.max(1, keepdims=True)
    np.testing.assert_allclose(
        cp.asnumpy(out), centred / np.abs(centred).sum(), rtol=1e-5, atol=1e-7
    )


@pytest.mark.parametrize("num_warps", [1, 4, 8])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32])
def test_trans_and_reshape(tiles, dtype, num_warps):
    x = (np.random.default_rng(2).standard_normal((32, 64)) * 100).astype(dtype)
    out = cp.zeros((64, 32), dtype=dtype)
    flat = cp.zeros(32 * 64, dtype=dtype)
    tiles.shapes[(1,)](out, flat, cp.asarray(x), BM=32, BN=64, num_warps=num_warps)
    np.testing.assert_array_equal(cp.asnumpy(out), x.T)
    np.testing.assert_array_equal(cp.asnumpy(flat), x.reshape(-1))


def test_outer_product_through_a_layout_change(tiles):
    v = np.random.default_rng(3).standard_normal(64).astype(np.float32)
    out = cp.zeros((64, 64), dtype=cp.float32)
    tiles.outer[(1,)](out, cp.asarray(v), B=64)
    np.testing.assert_allclose(cp.asnumpy(out), np.outer(v, v), rtol=1e-6)


SCANS = {0: np.cumsum, 1: np.cumprod, 2: np.maximum.accumulate}


@pytest.mark.parametrize("num_warps", [1, 4, 8])
@pytest.mark.parametrize("reverse", [0, 1])
@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("kind", [0, 1, 2])
@pytest.mark.parametrize("shape", [(8, 32), (32, 128), (64, 256)])
def test_scans_on_gpu(tiles, kind, axis, reverse, shape, num_warps):
    x = np.random.default_rng(kind).uniform(0.99, 1.01, shape).astype(np.float32)
    out = cp.zeros(shape, cp.float32)
    tiles.scan2d[(1,)](
        out,
        cp.asarray(x),
        KIND=kind,
        AXIS=axis,
        REVERSE=reverse,
        BM=shape[0],
        BN=shape[1],
        num_warps=num_warps,
    )
    xx = np.flip(x, axis) if reverse else x
    expected = SCANS[kind](xx.astype(np.float64), axis=axis)
    expected = np.flip(expected, axis) if reverse else expected
    np.testing.assert_allclose(cp.asnumpy(out), expected, rtol=1e-4)


@pytest.mark.parametrize("n,block,num_warps", [(1, 16, 4), (1001, 1024, 4), (2**20 + 3, 4096, 8)])
def test_long_cumsum_per_block(tiles, n, block, num_warps):
    x = np.random.default_rng(n).integers(-100, 100, size=n).astype(np.int32)
    out = cp.zeros(n, cp.int32)
    tiles.scan1d[(tx.cdiv(n, block),)](out, cp.asarray(x), n, BLOCK=block, num_warps=num_warps)
    padded = np.zeros(tx.cdiv(n, block) * block, np.int64)
    padded[:n] = x
    expected = np.cumsum(padded.reshape(-1, block), axis=1).reshape(-1)[:n]
    np.testing.assert_array_equal(cp.asnumpy(out), expected)


@pytest.mark.parametrize("axis", [0, 1])
def test_flip_on_gpu(tiles, axis):
    x = np.arange(32 * 64, dtype=np.int32).reshape(32, 64)
    out = cp.zeros_like(cp.asarray(x))
    tiles.flip2d[(1,)](out, cp.asarray(x), AXIS=axis, BM=32, BN=64)
    np.testing.assert_array_equal(cp.asnumpy(out), np.flip(x, axis))


@pytest.mark.parametrize("num_warps", [1, 4])
@pytest.mark.parametrize("k", [0, 1])
@pytest.mark.parametrize("axis", [0, 1])
def test_cat_join_split_on_gpu(tiles, axis, k, num_warps):
    rng = np.random.default_rng(axis * 2 + k)
    a = rng.integers(-100, 100, (16, 32)).astype(np.int32)
    b = rng.integers(-100, 100, (16, 32)).astype(np.int32)
    out = cp.zeros((32, 32) if axis == 0 else (16, 64), cp.int32)
    pairs, half = cp.zeros((16, 32, 2), cp.int32), cp.zeros((16, 32), cp.int32)
    tiles.combine[(1,)](
        out,
        pairs,
        half,
        cp.asarray(a),
        cp.asarray(b),
        AXIS=axis,
        K=k,
        BM=16,
        BN=32,
        num_warps=num_warps,
    )
    np.testing.assert_array_equal(cp.asnumpy(out), np.concatenate([a, b], axis=axis))
    np.testing.assert_array_equal(cp.asnumpy(pairs), np.stack([a, b], axis=-1))
    np.testing.assert_array_equal(cp.asnumpy(half), (a, b)[k])
