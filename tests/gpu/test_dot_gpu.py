"""dot() on the GPU: every lowering path of tests/kernels/dot.c against float64 references.

Paths: cp.async-pipelined operands (row- and column-major, transposed operands), operands staged
from registers, i8 -> i32, TF32 vs TF32X3 vs IEEE f32, ragged edges, epilogue reductions out of
the accumulator layout, and num_stages 2..4."""

import numpy as np
import pytest

import teeny_tx as tx
from teeny_tx.dtypes import DTYPES

cp = pytest.importorskip("cupy")

PREC = {"IEEE": 20, "TF32": 21, "TF32X3": 22}


@pytest.fixture(scope="module")
def dot_kernels():
    return tx.compile("tests/kernels/dot.c", name="tests/kernels/dot.c")


def rand(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    if dtype == "i8":
        return rng.integers(-128, 128, shape).astype(np.int8)
    return rng.standard_normal(shape).astype(np.float32).astype(DTYPES[dtype].np)


def rel_err(got, ref):
    """Norm-wise: for comparing precisions with each other (TF32 against IEEE), not as a
    tolerance (assert_dot_close is that)."""
    return float(np.linalg.norm(np.asarray(got, np.float64) - ref) / np.linalg.norm(ref))


U32 = 2.0**-24
# each input's rounding before its product, relative (f16/bf16 inputs are exact already;
# TF32 rounds an f32 to 10 mantissa bits; TF32X3's split leaves about 2^-22 of each)
INPUT_ROUNDING = {"f16": 0.0, "bf16": 0.0, "IEEE": 0.0, "TF32": 2.0**-11, "TF32X3": 2.0**-22}


def assert_dot_close(got, a, b, precision: str, scale: float = 1.0) -> None:
    """C = scale * A @ B (f32 out) element by element against float64: each input's rounding
    (INPUT_ROUNDING, twice per product) plus K + 2 f32 roundings of the accumulation and the
    output, each up to 2^-23 (tensor cores' adders may truncate rather than round), times the
    element's condition scale * (|A| @ |B|): the worst-case bound of a dot product, with no
    absolute floor."""
    a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
    ref = scale * (a64 @ b64)
    cond = abs(scale) * (np.abs(a64) @ np.abs(b64))
    k = a64.shape[1]
    bound = (2 * INPUT_ROUNDING[precision] + 2 * (k + 2) * U32) * cond + 2.0**-149
    err = np.abs(np.asarray(got, np.float64) - ref)
    bad = ~(err <= bound)
    assert not bad.any(), (
        f"{int(bad.sum())} of {bad.size} elements out of bounds; worst at "
        f"{np.unravel_index(np.argmax(err - bound), err.shape)}: error {float(np.max(err)):.3g}"
    )


@pytest.mark.parametrize(
    "dtype,precision,shape,tiles,warps,stages",
    [
        ("f16", "IEEE", (256, 256, 256), (128, 128, 32), 4, 3),
        ("f16", "IEEE", (1001, 517, 333), (128, 256, 64), 8, 3),
        ("bf16", "IEEE", (1001, 517, 333), (64, 64, 32), 4, 2),
        ("f16", "IEEE", (1, 1, 1), (16, 16, 16), 4, 4),
        ("f16", "IEEE", (77, 300, 1000), (64, 128, 64), 4, 4),
        ("f32", "IEEE", (129, 65, 77), (32, 32, 16), 4, 3),
        ("f32", "TF32", (300, 200, 111), (64, 64, 32), 4, 3),
        ("f32", "TF32X3", (300, 200, 111), (64, 64, 16), 4, 3),
    ],
)
def test_mm_row_major(dot_kernels, dtype, precision, shape, tiles, warps, stages):
    m, n, k = shape
    a, b = rand((m, k), dtype, 1), rand((k, n), dtype, 2)
    c = cp.zeros((m, n), np.float32)
    bm, bn, bk = tiles
    dot_kernels.mm[(tx.cdiv(m, bm), tx.cdiv(n, bn))](
        c,
        cp.asarray(a),
        cp.asarray(b),
        m,
        n,
        k,
        k,
        1,
        n,
        1,
        n,
        PRECISION=PREC[precision],
        BM=bm,
        BN=bn,
        BK=bk,
        num_warps=warps,
        num_stages=stages,
    )
    assert_dot_close(c.get(), a, b, precision)


def test_tf32_is_distinguishable_from_ieee(dot_kernels):
    m = n = k = 256
    a, b = rand((m, k), "f32", 3), rand((k, n), "f32", 4)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    errs = {}
    for p in PREC:
        c = cp.zeros((m, n), np.float32)
        dot_kernels.mm[(4, 4)](
            c,
            cp.asarray(a),
            cp.asarray(b),
            m,
            n,
            k,
            k,
            1,
            n,
            1,
            n,
            PRECISION=PREC[p],
            BM=64,
            BN=64,
            BK=16,
        )
        errs[p] = rel_err(c.get(), ref)
    assert errs["IEEE"] < 1e-6 and errs["TF32X3"] < 1e-5
    assert errs["TF32"] > 20 * errs["IEEE"] and 1e-4 < errs["TF32"] < 2e-3


def test_tf32_matches_the_interpreter(dot_kernels):
    """Both round inputs to TF32 to nearest even: the results agree to f32 accumulation."""
    m = n = k = 64
    a, b = rand((m, k), "f32", 5), rand((k, n), "f32", 6)
    c = cp.zeros((m, n), np.float32)
    host = np.zeros((m, n), np.float32)
    args = (m, n, k, k, 1, n, 1, n)
    cx = dict(PRECISION=PREC["TF32"], BM=64, BN=64, BK=16)
    dot_kernels.mm[(1, 1)](c, cp.asarray(a), cp.asarray(b), *args, **cx)
    dot_kernels.mm.interpret[(1, 1)](host, a, b, *args, **cx)
    np.testing.assert_allclose(c.get(), host, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("dtype", ["f16", "bf16", "f32"])
@pytest.mark.parametrize("layout", ["col_a", "col_b", "offset_views"])
def test_mm_strided_operands(dot_kernels, dtype, layout):
    m, n, k = 200, 136, 90
    a, b = rand((m, k), dtype, 7), rand((k, n), dtype, 8)
    da, db = cp.asarray(a), cp.asarray(b)
    if layout == "col_a":
        da = cp.asfortranarray(da)
    elif layout == "col_b":
        db = cp.asfortranarray(db)
    else:  # views into larger arrays, starting at an offset
        big_a = cp.zeros((m + 3, k + 5), da.dtype)
        big_a[3:, 5:] = da
        da = big_a[3:, 5:]
        big_b = cp.zeros((k + 1, n + 8), db.dtype)
        big_b[1:, 8:] = db
        db = big_b[1:, 8:]
    item = da.itemsize
    c = cp.zeros((m, n), np.float32)
    dot_kernels.mm[(tx.cdiv(m, 64), tx.cdiv(n, 64))](
        c,
        da,
        db,
        m,
        n,
        k,
        da.strides[0] // item,
        da.strides[1] // item,
        db.strides[0] // item,
        db.strides[1] // item,
        n,
        PRECISION=PREC["TF32X3" if dtype == "f32" else "IEEE"],
        BM=64,
        BN=64,
        BK=16,
        strided=True,  # the views are indexed with the strides passed
    )
    assert_dot_close(c.get(), a, b, "TF32X3" if dtype == "f32" else "IEEE")


@pytest.mark.parametrize("kernel", ["mm_nt", "mm_tn", "mm_staged"])
@pytest.mark.parametrize(
    "dtype,precision", [("f16", "IEEE"), ("bf16", "IEEE"), ("f32", "TF32X3"), ("f32", "IEEE")]
)
def test_transposed_and_staged_operands(dot_kernels, kernel, dtype, precision):
    m, n, k = 130, 70, 100
    a, b = rand((m, k), dtype, 9), rand((k, n), dtype, 10)
    scale = 2.0 if kernel == "mm_staged" else 1.0
    da = cp.asarray(np.ascontiguousarray(a.T) if kernel == "mm_tn" else a)
    db = cp.asarray(np.ascontiguousarray(b.T) if kernel == "mm_nt" else b)
    c = cp.zeros((m, n), np.float32)
    getattr(dot_kernels, kernel)[(tx.cdiv(m, 64), tx.cdiv(n, 32))](
        c, da, db, m, n, k, PRECISION=PREC[precision], BM=64, BN=32, BK=16
    )
    assert_dot_close(c.get(), a, b, precision, scale)


@pytest.mark.parametrize("shape", [(64, 64, 64), (100, 37, 200)])
def test_i8_dot_is_exact(dot_kernels, shape):
    m, n, k = shape
    a, bt = rand((m, k), "i8", 11), rand((n, k), "i8", 12)
    c = cp.zeros((m, n), np.int32)
    dot_kernels.imm[(tx.cdiv(m, 64), tx.cdiv(n, 64))](
        c, cp.asarray(a), cp.asarray(bt), m, n, k, BM=64, BN=64, BK=32
    )
    np.testing.assert_array_equal(c.get(), a.astype(np.int32) @ bt.astype(np.int32).T)


def test_epilogue_reduces_the_accumulator(dot_kernels):
    m, n, k = 150, 128, 96
    a, b = rand((m, k), "f16", 13), rand((k, n), "f16", 14)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    c = cp.zeros((m, n), np.float32)
    sums = cp.zeros((m,), np.float32)
    dot_kernels.mm_stats[(tx.cdiv(m, 64),)](
        c, sums, cp.asarray(a), cp.asarray(b), m, n, k, BM=64, BN=128, BK=32
    )
    row = ref.sum(1)
    np.testing.assert_allclose(sums.get(), row, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(c.get(), ref - row[:, None] / n, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize(
    "kernel,dtype,tiles,warps",
    [
        ("mm", "f16", (64, 256, 64), 4),  # wgmma where the device has it (M = 16 * warps)
        ("mm", "bf16", (128, 128, 128), 8),
        ("mm_nt", "f16", (64, 64, 64), 4),  # B K-major
        ("mm_tn", "bf16", (64, 128, 64), 4),  # A MN-major
        ("mm_staged", "f16", (64, 64, 64), 4),  # A staged from registers
    ],
)
def test_warpgroup_shapes(dot_kernels, kernel, dtype, tiles, warps):
    m, n, k = 300, 260, 333
    a, b = rand((m, k), dtype, 15), rand((k, n), dtype, 16)
    scale = 2.0 if kernel == "mm_staged" else 1.0
    da = cp.asarray(np.ascontiguousarray(a.T) if kernel == "mm_tn" else a)
    db = cp.asarray(np.ascontiguousarray(b.T) if kernel == "mm_nt" else b)
    c = cp.zeros((m, n), np.float32)
    bm, bn, bk = tiles
    args = (m, n, k, k, 1, n, 1, n) if kernel == "mm" else (m, n, k)
    getattr(dot_kernels, kernel)[(tx.cdiv(m, bm), tx.cdiv(n, bn))](
        c, da, db, *args, PRECISION=20, BM=bm, BN=bn, BK=bk, num_warps=warps, num_stages=3
    )
    assert_dot_close(c.get(), a, b, "IEEE", scale)


def _cuobjdump():
    import shutil
    from pathlib import Path

    found = shutil.which("cuobjdump")
    if found:
        return found
    try:
        import triton

        candidate = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
        return str(candidate) if candidate.exists() else None
    except ImportError:
        return None


def test_hopper_sass_has_warpgroup_mma(dot_kernels, tmp_path):
    """On an H100/H200 the f16 matmul compiles for sm_90a and its SASS issues HGMMA."""
    import subprocess

    if cp.cuda.Device().compute_capability != "90":
        pytest.skip("not a compute capability 9.0 device")
    tool = _cuobjdump()
    if tool is None:
        pytest.skip("no cuobjdump (CUDA toolkit or Triton) on this machine")
    spec = dot_kernels.mm.specialize(
        "f32",
        "f16",
        "f16",
        *(4096, 4096, 4096, 4096, 1, 4096, 1, 4096),
        PRECISION=20,
        BM=128,
        BN=256,
        BK=64,
        num_warps=8,
        num_stages=4,
    )
    assert spec.arch == "sm_90a"
    path = tmp_path / "mm.cubin"
    path.write_bytes(spec.cubin)
    sass = subprocess.run([tool, "-sass", str(path)], capture_output=True, text=True).stdout
    assert "HGMMA.64x256x16.F32" in sass and "LDGSTS" in sass


def test_tf32_on_warpgroups_rounds_like_mma_sync(dot_kernels):
    """TF32 through wgmma (64 x 128 tiles, 4 warps) and through mma.sync (32 x 32 tiles) round
    the same inputs to nearest even: the results differ only by f32 accumulation order."""
    m, n, k = 300, 260, 333
    a, b = rand((m, k), "f32", 17), rand((k, n), "f32", 18)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    da, dbt = cp.asarray(a), cp.asarray(np.ascontiguousarray(b.T))
    out = []
    for bm, bn, bk in ((64, 128, 32), (32, 32, 16)):
        c = cp.zeros((m, n), np.float32)
        dot_kernels.mm_nt[(tx.cdiv(m, bm), tx.cdiv(n, bn))](
            c, da, dbt, m, n, k, PRECISION=PREC["TF32"], BM=bm, BN=bn, BK=bk, num_stages=3
        )
        out.append(c.get())
    assert rel_err(out[0], ref) > 1e-4  # TF32, not IEEE
    assert_dot_close(out[0], a, b, "TF32")
    assert_dot_close(out[1], a, b, "TF32")
