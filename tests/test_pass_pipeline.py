"""lower/passes/pipeline.py: which loop loads become cp.async stages, decided before the emitter
runs.

The planner turns a K loop feeding dot into an ir.PipelinedLoop: its loads of operands (16
bytes at a time, from addresses of the loop variable and loop-invariant values) become Staged
markers, and the node carries the ring's depth, look-ahead, buffers and generated names.
"""

import pytest

import teeny_tx as tx
from teeny_tx.lower import ir
from teeny_tx.lower.ir import walk_stmts
from teeny_tx.runtime.tma import parameters as tma_parameters

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


# ---------------------------------------------------------------- TMA copies (behind a switch)

ATTN_STRIDES = (4096 * 32 * 128, 128, 32 * 128, 1)  # [B=4, N=4096, H=32, D=128]: b, h, n, d
BAND = (-(1 << 30), 0)  # the band (lo, hi) of the causal top-left triangle


def _attention(monkeypatch, switch="1"):
    """kernels/attention.c compiled afresh (its own specialisations) with the switch set."""
    from teeny_tx.library.loader import kernel_text

    if switch is None:
        monkeypatch.delenv("TEENY_TX_PIPELINE_TMA", raising=False)
    else:
        monkeypatch.setenv("TEENY_TX_PIPELINE_TMA", switch)
    return tx.compile(kernel_text("attention.c"), name="kernels/attention.c")


def _fwd(mod, strides=ATTN_STRIDES, arch="sm_90a", d=128, **kw):
    args = ("f16", "f32", "f16", "f16", "f16", 4096, 4096, 32, 1, *BAND) + strides * 4
    args += (0.18, 0.0, 0.0, "f32", 0, 0)
    flags = {"BAND": 0, "SOFTCAP": 0, "ALIBI": 0, "BF16": 0, "D": d, "DH": d, "BM": 128}
    flags["BN"] = 128
    flags |= {"WARP_SPECIALIZE": 0} | kw
    return mod.attention_fwd.specialize(
        *args, num_warps=8, num_stages=3, target=arch, strided=True, **flags
    )


def _names(exprs) -> list[str]:
    return [e.name for e in exprs]


def test_tma_copies_of_the_attention_forward(monkeypatch):
    """K and V of [B, N, H, D] are boxes of 4-D maps over (D, N, H, B): rows from the loop
    variable, bounded by n_kv (the load's mask: the zero fill of rows past it); the head and
    batch from program_id; two 64-column panels of 128 bytes per 128-row box."""
    (p,) = _pipelines(_fwd(_attention(monkeypatch)))
    assert p.barriers is not None
    for x, (s, b, h) in zip(p.loads, [("skn", "skb", "skh"), ("svn", "svb", "svh")], strict=True):
        t = x.tma
        assert t is not None and t.base == x.var[0] and t.dtype == "f16"
        assert t.box == (64, 128) and t.panels == 2 and t.param == f"tx_{x.var}_map"
        assert [(d.extent, d.stride) for d in t.dims] == [
            (128, 1),
            ("n_kv", s),
            (None, b),
            (None, h),
        ]
        assert [_names(d.coord) for d in t.dims] == [[], ["start"], ["b"], ["hk"]]


def test_tma_copies_of_the_backward_inner_loop(monkeypatch):
    """dK/dV's query loop (nested in the loop over a group's heads): Q and dO rows bounded by
    n_q, the head h of the enclosing loop; the enclosing loop keeps cp.async."""
    mod = _attention(monkeypatch)
    args = ("f16",) * 6 + ("f32",) * 3 + (4096, 4096, 32, 32, 1) + ATTN_STRIDES * 6
    args += (0.1, 0.1, 0.0, 0.0, *BAND, "f32", 0, 0)
    flags = {"BAND": 1, "SOFTCAP": 0, "ALIBI": 0, "BF16": 0, "ATOMIC_DQ": 0, "D": 128, "DH": 128}
    flags |= {"BM": 64, "BN": 128}
    spec = mod.attention_bwd_dkdv.specialize(
        *args, num_warps=8, target="sm_90a", strided=True, **flags
    )
    outer, inner = _pipelines(spec)
    assert all(x.tma is None for x in outer.loads)
    assert [x.var for x in inner.loads] == ["q_t", "do_t"]
    for x in inner.loads:
        assert x.tma is not None and x.tma.dims[1].extent == "n_q"
        assert [_names(d.coord) for d in x.tma.dims] == [[], ["start"], ["b"], ["h"]]


def test_tma_is_off_by_default_and_per_kernel(monkeypatch):
    (p,) = _pipelines(_fwd(_attention(monkeypatch, None)))
    assert all(x.tma is None for x in p.loads)
    (p,) = _pipelines(_fwd(_attention(monkeypatch, "attention_bwd_dq, attention_fwd")))
    assert all(x.tma is not None for x in p.loads)
    (p,) = _pipelines(_fwd(_attention(monkeypatch, "attention_bwd_dq")))
    assert all(x.tma is None for x in p.loads)


@pytest.mark.parametrize(
    ("why", "strides", "arch", "d"),
    [
        ("rows of 64 bytes (D = 32): not whole 128-byte panels", (4096 * 32 * 32, 32, 1024, 1),
         "sm_90a", 32),
        ("sm_90: no mbarrier hand-over", (4096 * 32 * 64, 64, 2048, 1), "sm_90", 64),
    ],
)  # fmt: skip
def test_tma_falls_back_to_cp_async(monkeypatch, why, strides, arch, d):
    (p,) = _pipelines(_fwd(_attention(monkeypatch), strides, arch, d))
    assert p.loads and all(x.tma is None for x in p.loads), why


def test_tma_not_for_a_mask_on_columns(monkeypatch):
    """matmul's K loop masks K (the columns of A): the zero fill would need the K extent as a
    dimension the mask does not name as a row bound, so it keeps cp.async."""
    monkeypatch.setenv("TEENY_TX_PIPELINE_TMA", "1")
    mod = tx.compile("tests/kernels/dot.c", name="tests/kernels/dot.c")
    spec = mod.mm.specialize(
        "f32", "f16", "f16", 256, 256, 250, 256, 1, 256, 1, 256,
        PRECISION=20, BM=128, BN=64, BK=64, num_warps=8, num_stages=2, target="sm_90a",
    )  # fmt: skip
    assert all(x.tma is None for p in _pipelines(spec) for x in p.loads)


def test_tma_cuda(monkeypatch):
    """One thread arms the stage's full barrier with both boxes' bytes and issues them; the
    maps are parameters after the kernel's own; NVRTC compiles it for sm_90a without spills."""
    from teeny_tx.kernel import HEADERS
    from teeny_tx.runtime import nvrtc

    source = _fwd(_attention(monkeypatch)).cuda_source
    assert '#include "hopper.cuh"' in source
    assert source.count("const __grid_constant__ tx::hopper::TensorMap") == 2
    assert "tx::cp_async16(" not in source.split("main loop")[1].split("tile s = dot")[0]
    assert "tx::hopper::barrier_expect_bytes(&tx_stage_barriers[tx_stage_ahead], 65536);" in source
    assert source.count("tx::hopper::tma_load_4d(") == 8  # (K, V) x 2 panels x (prologue, loop)
    assert "tx::stage_barriers_init_tma(tx_stage_barriers, 3);" in source
    result = nvrtc.compile_with_log(
        source, name="attention_fwd", arch="sm_90a", headers=HEADERS,
        options=nvrtc.DEFAULT_OPTIONS + ("-Xptxas=-v",),
    )  # fmt: skip
    assert result.cubin[:4] == b"\x7fELF"
    assert nvrtc.spilled_bytes(result.log) == 0


def test_the_launcher_takes_tma_entries_to_their_plans(monkeypatch):
    """A specialisation with TMA copies is an entry whose launches go through its plans
    (plan.Entry.tma: the maps' parameters); with 64-bit indices it is refused."""
    from teeny_tx.errors import LaunchError

    monkeypatch.setenv("TEENY_TX_ARCH", "sm_90a")  # the module's target, as on an H200
    mod = _attention(monkeypatch)
    args = ("f16", "f32", "f16", "f16", "f16", 4096, 4096, 32, 1, *BAND) + ATTN_STRIDES * 4
    args += (0.18, 0.0, 0.0, "f32", 0, 0)
    flags = {"BAND": 0, "SOFTCAP": 0, "ALIBI": 0, "BF16": 0, "D": 128, "DH": 128, "BM": 128}
    flags["BN"] = 128
    flags["WARP_SPECIALIZE"] = 0
    key = mod.attention_fwd.binder.bind_host(args, flags, 8, True, 3, True)
    entry = mod.attention_fwd._entry(key)
    assert entry.tma is not None and entry.tma.func is tma_parameters
    with pytest.raises(LaunchError, match="32-bit indices only"):
        mod.attention_fwd._entry(key[:-1] + (True,))


def test_tma_maps_from_launch_values(monkeypatch):
    """The maps' dims, byte strides and boxes from a launch's values (the encoder recorded:
    it needs the driver)."""
    from teeny_tx.errors import LaunchError
    from teeny_tx.runtime import tma

    spec = _fwd(_attention(monkeypatch))
    made = []
    monkeypatch.setattr(tma, "tensor_map", lambda *a: made.append(a) or a)
    values = [0x1000, 0x2000, 0x3000, 0x4000, 0x5000, 1000, 1001, 32, 1, *BAND]
    values += [9000 * 4096, 128, 4096, 1] * 4 + [0.18, 0.0, 0.0, 0x6000, 0, 0]
    tma.pipeline_maps(spec.interface, values)
    big = tma.UNBOUNDED  # batch and head: not bounded by the kernel
    assert made == [
        (0x4000, "f16", (128, 1001, big, big), (8192, 9000 * 8192, 256), (64, 128, 1, 1)),
        (0x5000, "f16", (128, 1001, big, big), (8192, 9000 * 8192, 256), (64, 128, 1, 1)),
    ]
    made.clear()  # the arrays' sizes bound batch and head: 3 batches of 9000 x 32 x 128
    tma.pipeline_maps(spec.interface, values, {"k": 3 * 9000 * 4096 * 2, "v": 100})
    assert [m[2] for m in made] == [(128, 1001, 3, 3 * 9000 * 32), (128, 1001, 1, 1)]
    values[11 + 4 + 1] = -128  # k's head stride: TMA strides are positive
    with pytest.raises(LaunchError, match="positive strides"):
        tma.pipeline_maps(spec.interface, values)
