"""lower/passes/layout.py: the layouts the pass chooses for real kernels, and the conversions it
places.

1-D and 2-D tiles take blocked layouts of 16-byte runs (lanes along the fastest axis, warps
along the slowest); a reduction gives the slice of its source's layout (the reduced axis of
size 1), and a 1-D tile expanded into 2-D is that slice too; a dot's result is an Mma
accumulator (mma.sync, or wgmma where the target has it and the dot fits); a value read in a
layout other than its own goes through one ``convert_layout``, and none is placed where the
producer's and the consumer's layouts agree.
"""

from __future__ import annotations

import pytest

from teeny_tx.lower import ir
from teeny_tx.lower.ir import Op, Var, walk_exprs
from teeny_tx.lower.passes.driver import decide
from teeny_tx.lower.passes.layout import Blocked, Layout, Mma, assign_layouts, default_blocked
from tests.conftest import kernel_text, lower


def _laid_out(text: str, wgmma: bool = False, **spec) -> tuple[ir.Kernel, dict[tuple, Layout]]:
    return assign_layouts(lower(text, **spec), wgmma=wgmma)


def _declared(kernel: ir.Kernel) -> dict[str, Layout]:
    from teeny_tx.lower.ir import walk_stmts

    return {
        s.name: s.layout
        for s in walk_stmts(kernel.body)
        if isinstance(s, ir.Declare) and s.type.is_tile
    }


def _ops(kernel: ir.Kernel, name: str) -> list[Op]:
    return [e for e in walk_exprs(kernel.body) if isinstance(e, Op) and e.op == name]


VECTOR = kernel_text(
    "    tile i = program_id(0) * BLOCK + arange(0, BLOCK);\n"
    "    store(out + i, load(a + i, i < n) * 2.0, i < n);",
)


@pytest.mark.parametrize(
    ("dtype", "block", "warps", "spt"),
    [("f32", 1024, 4, 4), ("f16", 1024, 4, 8), ("f64", 256, 2, 2), ("f32", 64, 4, 1)],
)
def test_a_1d_tile_is_blocked_in_16_byte_runs(dtype, block, warps, spt):
    text = VECTOR.replace("f32", dtype)
    kernel, layouts = _laid_out(text, constexprs=(("BLOCK", block),), num_warps=warps)
    layout = _declared(kernel)["i"]
    b = layout.blocked
    assert isinstance(b, Blocked) and layout.shape == (block,) and layout.dims == (0,)
    assert (b.spt, b.tpw, b.wpc, b.order) == ((spt,), (32,), (warps,), (0,))
    # each thread's registers: its runs, repeated until the tile is covered
    assert layout.regs == max(spt, block // (32 * warps))
    assert layout.replicated == (block < spt * 32 * warps)
    # every op of the kernel computes in that one layout: nothing to convert
    assert _ops(kernel, "convert_layout") == []
    assert all(e.layout.key == layout.key for e in walk_exprs(kernel.body) if e.type.is_tile)
    assert list(layouts) == [layout.key]


ROWS = kernel_text(
    "    tile r = program_id(0) * R + arange(0, R);\n"
    "    tile c = arange(0, BLOCK);\n"
    "    tile offs = expand_dims(r, 1) * n + expand_dims(c, 0);\n"
    "    tile mask = (expand_dims(r, 1) < n) & (expand_dims(c, 0) < n);\n"
    "    tile x = load(a + offs, mask, -3.0e38);\n"
    "    tile m = max(x, 1);\n"
    "    tile e = exp(x - expand_dims(m, 1));\n"
    "    tile s = sum(e, 1);\n"
    "    store(out + offs, e / expand_dims(s, 1), mask);",
    "f32 *out, const f32 *a, i32 n, const i32 R, const i32 BLOCK",
)


def test_2d_rows_take_one_blocked_layout_and_reductions_its_slice():
    kernel, _ = _laid_out(ROWS, constexprs=(("R", 8), ("BLOCK", 128)), num_warps=4)
    layouts = _declared(kernel)
    x = layouts["x"]
    assert x.blocked == default_blocked((8, 128), 4, 4)
    b = x.blocked
    assert (b.spt, b.tpw, b.wpc, b.order) == ((1, 4), (1, 32), (4, 1), (1, 0))
    for name in ("offs", "mask", "e"):
        assert layouts[name].key == x.key, name
    # the reductions along axis 1: the same blocked layout with that axis of size 1
    for name in ("m", "s"):
        slice_ = layouts[name]
        assert slice_.blocked == b and slice_.shape == (8, 1) and slice_.dims == (0,)
    (m_reduce, s_reduce) = _ops(kernel, "reduce")
    assert m_reduce.layout.key == layouts["m"].key and s_reduce.layout.key == layouts["s"].key
    # the 1-D aranges expanded into 2-D are slices of the 2-D layout too: no conversions
    assert layouts["r"].blocked == b and layouts["r"].shape == (8, 1)
    assert layouts["c"].blocked == b and layouts["c"].shape == (1, 128)
    assert layouts["c"].dims == (1,)
    assert _ops(kernel, "convert_layout") == []


DOT = kernel_text(
    "    tile rm = arange(0, BM);\n"
    "    tile rn = arange(0, BN);\n"
    "    tile rk = arange(0, BK);\n"
    "    tile x = load(a + expand_dims(rm, 1) * BK + expand_dims(rk, 0));\n"
    "    tile y = load(b + expand_dims(rk, 1) * BN + expand_dims(rn, 0));\n"
    "    tile acc = dot(x, y);\n"
    "    tile row = sum(acc, 1);\n"
    "    store(out + expand_dims(rm, 1) * BN + expand_dims(rn, 0), acc);\n"
    "    store(rows + rm, row);",
    "f32 *out, f32 *rows, const f16 *a, const f16 *b, const i32 BM, const i32 BN, const i32 BK",
)
DOT_SIZES = (("BM", 64), ("BN", 64), ("BK", 64))  # K: whole 128-byte panels, as wgmma asks


@pytest.mark.parametrize(
    ("warps", "wgmma", "grid"), [(4, False, (2, 2)), (4, True, (4, 1)), (8, False, (4, 2))]
)
def test_a_dot_result_is_an_mma_accumulator(warps, wgmma, grid):
    kernel, _ = _laid_out(DOT, wgmma=wgmma, constexprs=DOT_SIZES, num_warps=warps)
    layouts = _declared(kernel)
    acc = layouts["acc"]
    assert isinstance(acc.blocked, Mma) and acc.is_mma and acc.shape == (64, 64)
    version = 3 if wgmma else 2
    assert acc.blocked.version == version
    assert acc.blocked.warps == grid  # square warp tiles; wgmma: one warpgroup along M
    (dot,) = _ops(kernel, "dot")
    assert dot.layout.key == acc.key
    # the operands: their own blocked layouts of 16-byte runs, whatever the accumulator's
    for name, shape in (("x", (64, 64)), ("y", (64, 64))):
        assert layouts[name].blocked == default_blocked(shape, warps, 2), name
    # a row sum of the accumulator is its slice; storing it needs no conversion of acc
    assert layouts["row"].blocked == acc.blocked and layouts["row"].shape == (64, 1)


def test_wgmma_is_taken_only_where_the_dot_fits():
    # 64 rows per warpgroup: M = 64 on 8 warps does not fit, so mma.sync it stays
    kernel, _ = _laid_out(DOT, wgmma=True, constexprs=DOT_SIZES, num_warps=8)
    assert _declared(kernel)["acc"].blocked.version == 2


CONVERT = kernel_text(
    "    tile r = arange(0, BLOCK);\n"
    "    tile x = load(a + r);\n"
    "    tile col = expand_dims(x, 1);\n"
    "    tile row = expand_dims(x, 0);\n"
    "    store(out + expand_dims(r, 1) * BLOCK + expand_dims(r, 0), col + row);",
)


def test_a_variable_read_in_another_layout_is_converted_once():
    kernel, _ = _laid_out(CONVERT, constexprs=(("BLOCK", 32),), num_warps=4)
    layouts = _declared(kernel)
    conversions = _ops(kernel, "convert_layout")
    assert conversions, "x is expanded along both axes: one of them reads it converted"
    for c in conversions:
        (source,) = c.args
        assert isinstance(source, Var) and source.name in ("x", "r")
        assert source.layout.key == layouts[source.name].key
        assert c.layout.key != source.layout.key  # a conversion changes the layout
        assert c.layout.value_shape() == source.type.shape
    # after the conversion pass each conversion of a variable is declared once
    decided = decide(lower(CONVERT, constexprs=(("BLOCK", 32),), num_warps=4))
    declared = [
        s.init.args[0].name
        for s in decided.kernel.body
        if isinstance(s, ir.Declare)
        and isinstance(s.init, Op)
        and s.init.op == "convert_layout"
        and isinstance(s.init.args[0], Var)
    ]
    assert len(declared) == len(set(declared)) >= 1


def test_agreeing_producer_and_consumer_need_no_conversion():
    kernel, _ = _laid_out(ROWS, constexprs=(("R", 4), ("BLOCK", 256)), num_warps=8)
    assert _ops(kernel, "convert_layout") == []
    # the interface of the decided kernel: reductions across warps take the scratch, no
    # conversion does
    decided = decide(lower(ROWS, constexprs=(("R", 4), ("BLOCK", 256)), num_warps=8))
    needs = decided.interface.scratch_ops
    assert {e.op for e in walk_exprs(decided.kernel.body) if id(e) in needs} <= {"reduce"}
