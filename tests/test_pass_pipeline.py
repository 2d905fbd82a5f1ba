"""lower/pipeline.py: which loop loads become cp.async stages, decided before the emitter runs.

The planner turns a K loop feeding dot into an ir.PipelinedLoop: its loads of operands (16
bytes at a time, from addresses of the loop variable and loop-invariant values) become Staged
markers, and the node carries the ring's depth, look-ahead, buffers and generated names.
"""

import pytest

import teeny_tx as tx
from teeny_tx.lower import ir
from teeny_tx.lower.layout import walk_stmts

ROW = (256, 256, 256, 256, 1, 256, 1, 256)  # M N K sam sak sbk sbn scm: row-major operands
COL_A = (256, 256, 256, 1, 256, 256, 1, 256)  # A column-major: its K axis is not contiguous


@pytest.fixture(scope="module")
def dot_kernels():
    return tx.compile("tests/kernels/dot.c", name="tests/kernels/dot.c")


def _pipelines(spec) -> list[ir.PipelinedLoop]:
    return [s for s in walk_stmts(spec.kernel.body) if isinstance(s, ir.PipelinedLoop)]


def plan(kernel, *args, arch="sm_90", **kw):
    return _pipelines(kernel.specialize(*args, target=arch, **kw))


@pytest.mark.parametrize("stages", [2, 3, 4])
def test_row_major_operands_are_both_staged(dot_kernels, stages):
    (p,) = plan(
        dot_kernels.mm, "f32", "f16", "f16", *ROW,
        PRECISION=20, BM=64, BN=64, BK=32, num_stages=stages,
    )  # fmt: skip
    assert [x.var for x in p.loads] == ["a_t", "b_t"]
    assert (p.stages, p.ahead, p.overlap, p.async_reads) == (stages, stages - 1, False, False)
    staged = [s.name for s in p.loop.body if isinstance(s, ir.Staged)]
    assert staged == ["a_t", "b_t"]
    # rings one after another, each 1024-aligned, sized for `stages` tiles of 64x32 / 32x64 f16
    ring = -(-stages * 64 * 32 * 2 // 1024) * 1024
    assert [x.offset for x in p.loads] == [0, ring] and p.bytes == 2 * ring + 1024
    names = [p.stage, p.stage_ahead, p.k_ahead, p.prologue]
    names += [n for x in p.loads for n in (x.tile, x.buffer)]
    assert all(n.startswith("tx_") for n in names) and len(set(names)) == len(names)
    # K % 16 == 0: the mask is constant over each 16-byte chunk (zero-filling copies)
    assert all(x.chunk_mask and x.vec == 8 for x in p.loads)


def test_a_ragged_k_copies_by_lane(dot_kernels):
    (p,) = plan(
        dot_kernels.mm, "f32", "f16", "f16", 256, 256, 250, 256, 1, 256, 1, 256,
        PRECISION=20, BM=64, BN=64, BK=32, num_stages=3,
    )  # fmt: skip
    a_t = p.loads[0]
    assert a_t.var == "a_t" and not a_t.chunk_mask  # K = 250 may cut a chunk


def test_what_is_not_pipelined(dot_kernels):
    common = dict(PRECISION=20, BM=64, BN=64, BK=32)
    assert plan(dot_kernels.mm, "f32", "f16", "f16", *ROW, **common, num_stages=1) == []
    (p,) = plan(dot_kernels.mm, "f32", "f16", "f16", *COL_A, **common, num_stages=3)
    assert [x.var for x in p.loads] == ["b_t"]  # A's K axis is strided: staged from registers
    # IEEE f32 on FMAs: B [K, N] is not K-contiguous and ldmatrix.trans moves 16-bit only
    (p,) = plan(dot_kernels.mm, "f32", "f32", "f32", *ROW, **common, num_stages=3)
    assert [x.var for x in p.loads] == ["a_t"]
    # an operand computed in registers (A scaled) is not a load feeding the dot directly
    (p,) = plan(dot_kernels.mm_staged, "f32", "f16", "f16", 256, 256, 256, **common)
    assert [x.var for x in p.loads] == ["b_t"]


def test_a_loop_that_breaks_is_not_pipelined():
    text = """kernel k(f32 *c, const f16 *a, const f16 *b, i32 K)
{
    tile r = expand_dims(arange(0, 64), 1);
    tile q = expand_dims(arange(0, 64), 0);
    f32 acc[64][64] = 0;
    for (i32 k = 0; k < K; k += 64) {
        tile x = load(a + r * K + q + k);
        tile y = load(b + (r + k) * 64 + q);
        acc = dot(x, y, acc);
        if (k > 1000) break;
    }
    store(c + r * 64 + q, acc);
}
"""
    k = tx.compile(text, name="kernels/k.c").k
    assert _pipelines(k.specialize("f32", "f16", "f16", 256, num_stages=3)) == []
    without_break = text.replace("        if (k > 1000) break;\n", "")
    k = tx.compile(without_break, name="kernels/k.c").k
    (p,) = _pipelines(k.specialize("f32", "f16", "f16", 256, num_stages=3))
    assert [x.var for x in p.loads] == ["x", "y"]


def test_wgmma_overlaps_the_next_iteration(dot_kernels):
    """On sm_90a with only pipelined operands, a wgmma may still read its stage while the next
    iteration starts: the copies run one stage less ahead (and not at all with 2 stages)."""
    common = dict(PRECISION=20, BM=64, BN=128, BK=64, num_warps=4)
    for stages, ahead, overlap in [(2, 1, False), (3, 1, True), (4, 2, True)]:
        (p,) = plan(
            dot_kernels.mm_nt, "f32", "f16", "f16", 256, 256, 256,
            arch="sm_90a", **common, num_stages=stages,
        )  # fmt: skip
        assert (p.ahead, p.overlap, p.async_reads) == (ahead, overlap, True), stages
    (p,) = plan(
        dot_kernels.mm_nt, "f32", "f32", "f32", 256, 256, 256,
        arch="sm_90a", **{**common, "PRECISION": 21, "BK": 32}, num_stages=3,
    )  # fmt: skip
    assert all(x.tf32 for x in p.loads)  # TF32 wgmma: each landed stage is rounded first


NESTED = """kernel k(f32 *c, const f16 *a, const f16 *b, i32 G, i32 K)
{
    tile r = expand_dims(arange(0, 64), 1);
    tile q = expand_dims(arange(0, 64), 0);
    f32 acc[64][64] = 0;
    for (i32 g = 0; g < G; g += 1) {
        tile x = load(a + (r + g * 64) * 64 + q);
        for (i32 k = 0; k < K; k += 64) {
            tile y = load(b + (r + k) * 64 + q);
            acc = dot(x, y, acc);
        }
    }
    store(c + r * 64 + q, acc);
}
"""


@pytest.mark.parametrize("arch", ["sm_90", "sm_90a"])
@pytest.mark.parametrize("stages", [2, 3])
def test_nested_pipelines_do_not_share_stages(arch, stages):
    """A pipelined loop inside another runs while the outer ring's stages hold live tiles (x
    here; dK/dV's key block): the inner ring starts where the outer one ends. (Both rings at
    offset 0 overwrote dK/dV's K tile with Q on the H200.)"""
    k = tx.compile(NESTED, name="kernels/k.c").k
    outer, inner = plan(k, "f32", "f16", "f16", 4, 256, arch=arch, num_stages=stages)
    assert [x.var for x in outer.loads] == ["x"] and [x.var for x in inner.loads] == ["y"]
    ring = -(-stages * 64 * 64 * 2 // 1024) * 1024
    assert outer.loads[0].offset == 0 and inner.loads[0].offset == ring
    # on wgmma the innermost ring hands its stages over by mbarriers, placed after the ring
    assert outer.barriers is None and (inner.barriers is not None) == (arch == "sm_90a")
    barriers = 16 * stages if inner.barriers else 0
    assert inner.barrier_offset == 2 * ring or not barriers
    assert outer.bytes == ring + 1024 and inner.bytes == 2 * ring + barriers + 1024
    source = k.cuda_source("f32", "f16", "f16", 4, 256, target=arch, num_stages=stages)
    assert f"reinterpret_cast<__half*>(tx_pipeline + {ring})" in source


def test_nested_pipelines_sum_in_the_shared_memory_request():
    k = tx.compile(NESTED, name="kernels/k.c").k
    spec = k.specialize("f32", "f16", "f16", 4, 256, target="sm_90a", num_stages=2)
    assert spec.shared_mem >= 2 * (2 * 64 * 64 * 2) + 1024  # both rings, then the alignment


def test_mbarrier_handoff_where_wgmma_reads_within_the_iteration(dot_kernels):
    """sm_90a: the stages of a loop whose wgmma finish inside the iteration change hands by a
    full and an empty mbarrier per stage (no __syncthreads per iteration); a loop whose wgmma
    runs on into the next iteration (overlap) and every mma.sync loop keep the block barrier."""
    common = dict(PRECISION=20, BM=64, BN=128, BK=64, num_warps=4)
    for arch, stages, handoff in [("sm_90a", 2, True), ("sm_90a", 3, False), ("sm_90", 2, False)]:
        (p,) = plan(dot_kernels.mm, "f32", "f16", "f16", *ROW, **common, num_stages=stages,
                    arch=arch)  # fmt: skip
        assert (p.barriers is not None) == handoff, (arch, stages)
        assert (p.iteration is not None) == handoff
        if handoff:
            assert p.barriers.startswith("tx_") and p.iteration.startswith("tx_")
            assert p.barrier_offset == sum(
                -(-stages * x.load.type.shape[0] * x.load.type.shape[1] * 2 // 1024) * 1024
                for x in p.loads
            )
        source = dot_kernels.mm.cuda_source(
            "f32", "f16", "f16", *ROW, **common, num_stages=stages, target=arch
        )
        loop = source[source.index("// main loop") :]
        loop = loop[: loop.index(f"{p.stage} = {p.stage} == {stages - 1} ? 0")]
        assert ("__syncthreads" in loop) != handoff
        assert ("tx::stage_wait_full" in loop) == handoff
