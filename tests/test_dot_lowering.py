"""dot()'s CUDA lowering, checked without a GPU: the generated source picks the path the
operands allow (cp.async pipeline, register staging, transposed reads, FMAs for IEEE f32), and
NVRTC compiles every path for sm_90 and sm_90a. Results are checked on the GPU in
tests/gpu/test_dot_gpu.py, and on the interpreter here for the same kernels."""

import numpy as np
import pytest

import teeny_tx as tx
from teeny_tx.kernel import HEADERS
from teeny_tx.runtime import nvrtc
from tests.conftest import nvrtc_compile

ROW = (256, 256, 256, 256, 1, 256, 1, 256)  # M N K sam sak sbk sbn scm: row-major operands


@pytest.fixture(scope="module")
def dot_kernels():
    return tx.compile("tests/kernels/dot.c", name="tests/kernels/dot.c")


CASES = [
    # kernel, dtypes, scalars, constexprs, pipelined operands, instruction
    ("mm", ("f32", "f16", "f16"), ROW, dict(PRECISION=20), ("a_t", "b_t"), "tx::MmaF16"),
    ("mm", ("f16", "bf16", "bf16"), ROW, dict(PRECISION=20), ("a_t", "b_t"), "tx::MmaBF16"),
    ("mm", ("f32", "f32", "f32"), ROW, dict(PRECISION=21), ("a_t",), "tx::MmaTF32"),
    ("mm", ("f32", "f32", "f32"), ROW, dict(PRECISION=22), ("a_t",), "tx::MmaTF32x3"),
    ("mm", ("f32", "f32", "f32"), ROW, dict(PRECISION=20), ("a_t",), "tx::dot_fma"),
    # column-major A: not contiguous along its last axis, so staged from registers
    (
        "mm",
        ("f32", "f16", "f16"),
        (256, 256, 256, 1, 256, 256, 1, 256),
        dict(PRECISION=20),
        ("b_t",),
        "tx::MmaF16",
    ),
    ("imm", ("i32", "i8", "i8"), (256, 256, 256), {}, ("a_t", "bt_t"), "tx::MmaI8"),
    (
        "mm_nt",
        ("f32", "f16", "f16"),
        (256, 256, 256),
        dict(PRECISION=20),
        ("a_t", "bt_t"),
        "tx::MmaF16",
    ),
    (
        "mm_tn",
        ("f32", "f16", "f16"),
        (256, 256, 256),
        dict(PRECISION=20),
        ("at_t", "b_t"),
        "tx::MmaF16",
    ),
    ("mm_tn", ("f32", "f32", "f32"), (256, 256, 256), dict(PRECISION=21), (), "tx::MmaTF32"),
    (
        "mm_staged",
        ("f32", "f16", "f16"),
        (256, 256, 256),
        dict(PRECISION=20),
        ("b_t",),
        "tx::MmaF16",
    ),
    ("mm_stats", ("f32", "f32", "f16", "f16"), (256, 128, 256), {}, ("a_t", "b_t"), "tx::MmaF16"),
]


@pytest.mark.parametrize(
    "case", CASES, ids=lambda c: f"{c[0]}-{c[1][1]}-{c[3].get('PRECISION', '')}"
)
def test_each_path_is_chosen_and_compiles(dot_kernels, case):
    name, dtypes, scalars, constexprs, pipelined, instruction = case
    tiles = dict(BM=64, BN=128 if name == "mm_stats" else 64, BK=32)
    src = getattr(dot_kernels, name).cuda_source(
        *dtypes, *scalars, **constexprs, **tiles, num_warps=4, num_stages=3
    )
    assert instruction in src
    for var in ("a_t", "b_t", "bt_t", "at_t"):
        copied = f"// {var}: in shared memory" in src
        assert copied == (var in pipelined), var
    if pipelined:
        assert "tx::cp_async_wait<1>();" in src and "tx_stage" in src
    nvrtc_compile(src, name)


def test_transposed_operands_are_not_moved_through_registers(dot_kernels):
    src = dot_kernels.mm_nt.cuda_source(
        "f32", "f16", "f16", 256, 256, 256, PRECISION=20, BM=64, BN=64, BK=32
    )
    assert "relayout" not in src.split("for (int k")[1].split("tx::cp_async_wait<0>")[0]
    assert "tx::mma<tx_L" in src and ", true, tx_bt_t_tile, true, 32>" in src  # B read K-major


def test_one_stage_means_no_pipeline(dot_kernels):
    src = dot_kernels.mm.cuda_source(
        *("f32", "f16", "f16"), *ROW, PRECISION=20, BM=64, BN=64, BK=32, num_stages=1
    )
    assert "cp_async" not in src and "tx::stage<" in src
    nvrtc_compile(src, "mm")


def test_dot_shapes_the_gpu_cannot_take_are_located_errors():
    src = """kernel k(i32 *c, const i8 *a)
{
    tile r = expand_dims(arange(0, 16), 1) * 16 + expand_dims(arange(0, 16), 0);
    store(c + r, dot(load(a + r), load(a + r)));
}
"""
    with pytest.raises(tx.CompileError, match="K a multiple of 32 for i8") as err:
        tx.compile(src, name="kernels/k.c").k.cuda_source("i32", "i8")
    assert "kernels/k.c:4" in str(err.value)


@pytest.mark.parametrize("kernel", ["mm_nt", "mm_tn", "mm_staged"])
def test_the_interpreter_agrees_with_numpy(dot_kernels, kernel):
    m, n, k = 40, 24, 50
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    da = np.ascontiguousarray(a.T) if kernel == "mm_tn" else a
    db = np.ascontiguousarray(b.T) if kernel == "mm_nt" else b
    c = np.zeros((m, n), np.float32)
    getattr(dot_kernels, kernel).interpret[(tx.cdiv(m, 32), tx.cdiv(n, 16))](
        c, da, db, m, n, k, PRECISION=20, BM=32, BN=16, BK=16
    )
    scale = 2.0 if kernel == "mm_staged" else 1.0
    np.testing.assert_allclose(
        c, scale * (a.astype(np.float64) @ b.astype(np.float64)), rtol=1e-5, atol=1e-5
    )


WGMMA_CASES = [
    # kernel, dtypes, scalars, tiles (BM = 16 * num_warps), num_warps, A and B K-major
    ("mm", ("f32", "f16", "f16"), ROW, (128, 256, 64), 8, "kt"),
    ("mm", ("f16", "bf16", "bf16"), ROW, (64, 128, 64), 4, "kt"),
    ("mm_nt", ("f32", "f16", "f16"), (256, 256, 256), (64, 64, 64), 4, "kk"),
    ("mm_tn", ("f32", "bf16", "bf16"), (256, 256, 256), (64, 64, 64), 4, "tt"),
    ("mm_staged", ("f32", "f16", "f16"), (256, 256, 256), (64, 64, 64), 4, "kt"),
]


@pytest.mark.parametrize("case", WGMMA_CASES, ids=lambda c: f"{c[0]}-{c[1][1]}-{c[3]}")
def test_hopper_warpgroup_mma(monkeypatch, case):
    """On sm_90a, dots whose tile is 16 rows per warp use wgmma from shared memory."""
    monkeypatch.setenv("TEENY_TX_ARCH", "sm_90a")
    name, dtypes, scalars, (bm, bn, bk), warps, majors = case
    kernels = tx.compile("tests/kernels/dot.c", name="tests/kernels/dot.c")  # fresh: no memo
    src = getattr(kernels, name).cuda_source(
        *dtypes, *scalars, PRECISION=20, BM=bm, BN=bn, BK=bk, num_warps=warps, num_stages=3
    )
    dtype = dtypes[1]
    assert f"wgmma.mma_async.sync.aligned.m64n{bn}k16.f32.{dtype}.{dtype}" in src
    assert f"tx_wgmma_m64n{bn}k16_{dtype}_{majors}" in src and "tx::fence_async_proxy();" in src
    nvrtc.compile_to_cubin(src, name=name, arch="sm_90a", headers=HEADERS)


def test_shapes_wgmma_cannot_take_fall_back_to_mma_sync(monkeypatch):
    monkeypatch.setenv("TEENY_TX_ARCH", "sm_90a")
    kernels = tx.compile("tests/kernels/dot.c", name="tests/kernels/dot.c")
    src = kernels.mm.cuda_source(  # BM = 128 is not 16 rows per warp with 4 warps
        "f32", "f16", "f16", *ROW, PRECISION=20, BM=128, BN=128, BK=64, num_warps=4
    )
    assert "wgmma" not in src and "tx::MmaF16" in src


def test_tf32_warpgroup_mma_rounds_in_shared_memory(monkeypatch):
    """TF32 with both operands K-contiguous runs on wgmma (m64nNk8, no transpose bits): each
    thread rounds the chunks it copied to TF32 (nearest even) before the warpgroups read them."""
    monkeypatch.setenv("TEENY_TX_ARCH", "sm_90a")
    kernels = tx.compile("tests/kernels/dot.c", name="tests/kernels/dot.c")
    src = kernels.mm_nt.cuda_source(
        "f32", "f32", "f32", 256, 256, 256, PRECISION=21, BM=64, BN=128, BK=32, num_stages=3
    )
    assert "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32" in src
    assert src.count("tx::tf32_round_chunk(") == 2  # both operands, each iteration
    nvrtc.compile_to_cubin(src, name="mm_nt", arch="sm_90a", headers=HEADERS)
    mma_sync = kernels.mm_tn.cuda_source(  # A transposed: not K-contiguous, so mma.sync
        "f32", "f32", "f32", 256, 256, 256, PRECISION=21, BM=64, BN=128, BK=32
    )
    assert "wgmma" not in mma_sync and "tx::MmaTF32" in mma_sync
