"""2-D tiles, shape operations and reductions: the interpreter against NumPy, and the CUDA the
same kernels become compiled with NVRTC (the GPU runs them in tests/gpu/test_tiles_gpu.py)."""

import numpy as np
import pytest

import teeny_tx as tx
from teeny_tx.kernel import HEADERS
from teeny_tx.runtime import nvrtc

from .conftest import TILE_OPS as OPS
from .conftest import reduction_case, reduction_dtype, reduction_expected, stable_seed


@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("shape", [(4, 8), (16, 64), (32, 128)])
def test_reduce_2d_on_interpreter(tiles, op, axis, shape):
    rng = np.random.default_rng(stable_seed(op, axis, shape))
    x = reduction_case(op, shape, rng)
    out = np.zeros(shape[1 - axis], dtype=reduction_dtype(op))
    grid = (1,)
    tiles.reduce2d.interpret[grid](
        out, x, shape[0], shape[1], shape[1], OP=OPS.index(op), AXIS=axis, BM=shape[0], BN=shape[1]
    )
    np.testing.assert_allclose(out, reduction_expected(op, x, axis), rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("n,block", [(1, 16), (7, 16), (1001, 1024), (5000, 4096)])
def test_ragged_sum_1d(tiles, n, block):
    """Masked lanes read 0, the identity of sum: any length reduces exactly."""
    rng = np.random.default_rng(n)
    x = rng.standard_normal(n).astype(np.float32)
    programs = tx.cdiv(n, block)
    out = np.zeros(programs, dtype=np.float32)
    tiles.reduce1d.interpret[(programs,)](out, x, n, OP=0, BLOCK=block)
    padded = np.zeros(programs * block, dtype=np.float64)
    padded[:n] = x
    np.testing.assert_allclose(out, padded.reshape(programs, block).sum(1), rtol=1e-5, atol=1e-5)


def test_keep_dims_and_whole_tile_reduction(tiles):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((16, 32)).astype(np.float32)
    out = np.zeros_like(x)
    tiles.keepdims.interpret[(1,)](out, x, BM=16, BN=32)
    centred = x.astype(np.float64) - x.max(1, keepdims=True)
    np.testing.assert_allclose(out, centred / np.abs(centred).sum(), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32])
def test_trans_and_reshape(tiles, dtype):
    x = (np.random.default_rng(2).standard_normal((8, 32)) * 100).astype(dtype)
    out = np.zeros((32, 8), dtype=dtype)
    flat = np.zeros(256, dtype=dtype)
    tiles.shapes.interpret[(1,)](out, flat, x, BM=8, BN=32)
    np.testing.assert_array_equal(out, x.T)
    np.testing.assert_array_equal(flat, x.reshape(-1))


def test_outer_product_through_a_layout_change(tiles):
    v = np.random.default_rng(3).standard_normal(64).astype(np.float32)
    out = np.zeros((64, 64), dtype=np.float32)
    tiles.outer.interpret[(1,)](out, v, B=64)
    np.testing.assert_allclose(out, np.outer(v, v), rtol=1e-6)


# ---------------------------------------------------------------- the CUDA these become

CUDA_CASES = [
    ("reduce2d", ("f32", "f32", 16, 64, 64), {"OP": op, "AXIS": axis, "BM": 16, "BN": 64}, warps)
    for op in range(7)
    if op != 5
    for axis in (0, 1)
    for warps in (1, 4)
] + [
    ("reduce2d", ("i32", "i32", 32, 128, 128), {"OP": 5, "AXIS": 1, "BM": 32, "BN": 128}, 8),
    ("reduce1d", ("f32", "f16", 5000), {"OP": 0, "BLOCK": 4096}, 8),
    ("reduce1d", ("i32", "bf16", 100), {"OP": 3, "BLOCK": 16}, 4),
    ("keepdims", ("f32", "f32"), {"BM": 16, "BN": 32}, 4),
    ("shapes", ("f16", "f16", "f16"), {"BM": 8, "BN": 32}, 4),
    ("outer", ("f32", "f32"), {"B": 64}, 4),
    ("combine", ("f16",) * 5, {"AXIS": 0, "K": 1, "BM": 8, "BN": 16}, 4),
    ("combine", ("i32",) * 5, {"AXIS": 1, "K": 0, "BM": 16, "BN": 32}, 1),
]


@pytest.mark.parametrize("name,args,constexprs,warps", CUDA_CASES)
def test_tile_kernels_compile_for_sm90(tiles, name, args, constexprs, warps):
    source = getattr(tiles, name).cuda_source(*args, num_warps=warps, **constexprs)
    cubin = nvrtc.compile_to_cubin(source, name=name, arch="sm_90", headers=HEADERS)
    assert cubin[:4] == b"\x7fELF"


def test_reductions_use_shuffles_and_shared_memory_only_across_warps(tiles):
    one_warp = tiles.reduce1d.specialize("f32", "f32", 1024, OP=0, BLOCK=1024, num_warps=1)
    many = tiles.reduce1d.specialize("f32", "f32", 1024, OP=0, BLOCK=1024, num_warps=8)
    assert one_warp.shared_mem == 0 and "nullptr" in one_warp.cuda_source
    assert many.shared_mem == 8 * 4 and "tx_smem" in many.cuda_source


def test_too_much_shared_memory_is_refused_at_compile_time(tiles):
    with pytest.raises(tx.ResourceError, match="shared memory"):
        tiles.shapes.specialize("f64", "f64", "f64", BM=256, BN=256)


SCANS = {0: np.cumsum, 1: np.cumprod, 2: np.maximum.accumulate}


@pytest.mark.parametrize("reverse", [0, 1])
@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("kind", [0, 1, 2])
def test_scans_on_interpreter(tiles, kind, axis, reverse):
    x = np.random.default_rng(kind).uniform(0.9, 1.1, (8, 32)).astype(np.float32)
    out = np.zeros_like(x)
    tiles.scan2d.interpret[(1,)](out, x, KIND=kind, AXIS=axis, REVERSE=reverse, BM=8, BN=32)
    xx = np.flip(x, axis) if reverse else x
    expected = SCANS[kind](xx.astype(np.float64), axis=axis)
    np.testing.assert_allclose(out, np.flip(expected, axis) if reverse else expected, rtol=1e-5)


@pytest.mark.parametrize("axis", [0, 1])
def test_flip_on_interpreter(tiles, axis):
    x = np.arange(8 * 32, dtype=np.int32).reshape(8, 32)
    out = np.zeros_like(x)
    tiles.flip2d.interpret[(1,)](out, x, AXIS=axis, BM=8, BN=32)
    np.testing.assert_array_equal(out, np.flip(x, axis))


@pytest.mark.parametrize("warps", [1, 4, 8])
@pytest.mark.parametrize("kind,axis,reverse", [(0, 1, 0), (1, 0, 1), (2, 1, 1), (0, 0, 0)])
def test_scans_compile_for_sm90(tiles, kind, axis, reverse, warps):
    source = tiles.scan2d.cuda_source(
        "f32", "f32", KIND=kind, AXIS=axis, REVERSE=reverse, BM=32, BN=128, num_warps=warps
    )
    assert (
        nvrtc.compile_to_cubin(source, name="scan2d", arch="sm_90", headers=HEADERS)[:4]
        == b"\x7fELF"
    )


@pytest.mark.parametrize("k", [0, 1])
@pytest.mark.parametrize("axis", [0, 1])
def test_cat_join_split_on_interpreter(tiles, axis, k):
    rng = np.random.default_rng(axis * 2 + k)
    a = rng.integers(-100, 100, (8, 16)).astype(np.int32)
    b = rng.integers(-100, 100, (8, 16)).astype(np.int32)
    out = np.zeros((16, 16) if axis == 0 else (8, 32), np.int32)
    pairs, half = np.zeros((8, 16, 2), np.int32), np.zeros((8, 16), np.int32)
    tiles.combine.interpret[(1,)](out, pairs, half, a, b, AXIS=axis, K=k, BM=8, BN=16)
    np.testing.assert_array_equal(out, np.concatenate([a, b], axis=axis))
    np.testing.assert_array_equal(pairs, np.stack([a, b], axis=-1))
    np.testing.assert_array_equal(half, (a, b)[k])
