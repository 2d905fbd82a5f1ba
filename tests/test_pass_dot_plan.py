"""lower/passes/dot_plan.py: where each dot's operands come from, decided before the emitter
runs."""

import pytest

import teeny_tx as tx
from teeny_tx.lower.ir import Op, walk_exprs

ROW = (256, 256, 256, 256, 1, 256, 1, 256)
COL_A = (256, 256, 256, 1, 256, 256, 1, 256)


@pytest.fixture(scope="module")
def dot_kernels():
    return tx.compile("tests/kernels/dot.c", name="tests/kernels/dot.c")


def plans(kernel, *args, arch="sm_90", **kw):
    spec = kernel.specialize(*args, target=arch, **kw)
    return [
        e.attr("plan") for e in walk_exprs(spec.kernel.body) if isinstance(e, Op) and e.op == "dot"
    ]


def sources(plan):
    return [(o.role, o.source, o.kmajor, o.flip) for o in plan.operands]


def test_pipelined_operands_read_their_stage(dot_kernels):
    (p,) = plans(dot_kernels.mm, "f32", "f16", "f16", *ROW, PRECISION=20, BM=64, BN=64, BK=32,
                 num_stages=3)  # fmt: skip
    assert sources(p) == [("a", "stage", True, False), ("b", "stage", False, False)]
    assert p.instruction == "tx::MmaF16" and not p.wgmma and p.scratch_bytes == 0
    assert all(o.stage == "tx_stage" and o.tile.startswith("tx_") for o in p.operands)


def test_register_operands_go_through_the_scratch(dot_kernels):
    common = dict(PRECISION=20, BM=64, BN=64, BK=32, num_stages=3)
    (p,) = plans(dot_kernels.mm, "f32", "f16", "f16", *COL_A, **common)
    assert sources(p) == [("a", "scratch", True, False), ("b", "stage", False, False)]
    assert p.scratch_bytes == 64 * 32 * 2 and p.operands[0].offset == 0
    # IEEE f32 on FMAs: B [K, N] is written transposed so that K is contiguous
    (p,) = plans(dot_kernels.mm, "f32", "f32", "f32", *ROW, **common)
    assert sources(p) == [("a", "stage", True, False), ("b", "scratch", True, True)]
    assert (p.operands[1].rows, p.operands[1].cols) == (64, 32) and p.instruction is None
    # both from registers: one after the other in the scratch
    (p,) = plans(dot_kernels.mm, "f32", "f16", "f16", *COL_A, **{**common, "num_stages": 1})
    assert [o.offset for o in p.operands] == [0, 64 * 32 * 2]


def test_wgmma_of_an_overlapping_pipeline_leaves_one_group_running(dot_kernels):
    common = dict(PRECISION=20, BM=64, BN=128, BK=64, num_warps=4)
    for stages, pending in [(2, 0), (3, 1)]:
        (p,) = plans(dot_kernels.mm_nt, "f32", "f16", "f16", 256, 256, 256, arch="sm_90a",
                     **common, num_stages=stages)  # fmt: skip
        assert p.wgmma and p.pending == pending, stages
    (p,) = plans(dot_kernels.mm_staged, "f32", "f16", "f16", 256, 256, 256, arch="sm_90a",
                 **common, num_stages=3)  # fmt: skip
    assert p.pending == 0 and p.scratch_bytes == 64 * 64 * 2 + 1024  # aligned for wgmma


def _golden_spec(stem):
    from tests.cases import GOLDEN, module

    g = {g.stem: g for g in GOLDEN}[stem]
    k = getattr(module(g.file), g.kernel)
    options = {"num_warps": g.num_warps, "num_stages": g.num_stages}
    return k.specialize(*g.args, **options, target=g.arch, **g.constexprs)


def _dot_plans(spec):
    return [
        e.attr("plan") for e in walk_exprs(spec.kernel.body) if isinstance(e, Op) and e.op == "dot"
    ]


def test_attention_forward_reads_q_once_and_p_from_registers():
    """The query block, which the key loop does not change, is staged once before the loop;
    on sm_90a P (computed from the scores' accumulator) is wgmma's register A operand."""
    from teeny_tx.lower import ir
    from teeny_tx.lower.ir import walk_stmts

    spec = _golden_spec("attention_fwd.f16.d128.sm90a")
    (loop,) = [s for s in walk_stmts(spec.kernel.body) if isinstance(s, ir.PipelinedLoop)]
    assert [x.var for x in loop.once] == ["q_t"] and [x.var for x in loop.loads] == ["k_t", "v_t"]
    assert loop.once[0].offset >= max(x.offset for x in loop.loads) + 1024
    qk, pv = _dot_plans(spec)
    assert [o.source for o in qk.operands] == ["once", "stage"] and qk.scratch_bytes == 0
    assert [o.source for o in pv.operands] == ["registers", "stage"] and pv.register_a
    assert not qk.from_scratch and not pv.from_scratch
    # mma.sync has no register-A form from shared-memory descriptors: P is staged there
    spec = _golden_spec("attention_fwd.bf16.d64.causal.sm90")
    qk, pv = _dot_plans(spec)
    assert [o.source for o in qk.operands] == ["once", "stage"]
    assert [o.source for o in pv.operands] == ["scratch", "stage"] and not pv.register_a


def test_an_operand_an_enclosing_pipeline_stages_is_not_staged_again():
    """dK/dV: the key block is a stage of the group loop's pipeline; the query loop inside
    reads it there, and stages nothing once (its own operands all change)."""
    from teeny_tx.lower import ir
    from teeny_tx.lower.ir import walk_stmts

    spec = _golden_spec("attention_bwd_dkdv.f16.d128.causal.sm90a")
    loops = [s for s in walk_stmts(spec.kernel.body) if isinstance(s, ir.PipelinedLoop)]
    outer = [p for p in loops if "k_t" in {x.var for x in p.loads}]
    assert outer and all("k_t" not in {x.var for x in p.once} for p in loops)
    sources = {(o.role, o.source) for p in _dot_plans(spec) for o in p.operands}
    assert ("a", "stage") in sources or ("b", "stage") in sources
