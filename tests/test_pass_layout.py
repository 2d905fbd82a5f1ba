"""lower/passes/layout.py: the layouts the pass chooses for real kernels, and the conversions it
places.

1-D and 2-D tiles take blocked layouts of 16-byte runs (lanes along the fastest axis, warps
along the slowest); a reduction gives the slice of its source's layout (the reduced axis of
size 1), and a 1-D tile expanded into 2-D is that slice too; a dot's result is an Mma
accumulator (mma.sync, or wgmma where the target has it and the dot fits); a value read in a
layout other than its own goes through one ``convert_layout``, and none is placed where the
producer's and the consumer's layouts agree.

Each choice is also checked on its own, on the IR of small kernels of several shapes: the
default blocked layouts (1-D, 2-D, 3-D, tiles smaller than the block), the warps of an Mma
accumulator, when wgmma fits (dtype, precision, N), the slices of an accumulator an epilogue
reads, the one 2-D layout (the largest tile moved, the narrowest dtype), reductions stored
through 1-D indices, scans, the ops that move elements, and the refusal of a batched dot.
"""

from __future__ import annotations

import pytest

from teeny_tx.errors import CompileError
from teeny_tx.lower import ir
from teeny_tx.lower.ir import Op, Var, walk_exprs
from teeny_tx.lower.passes.driver import decide
from teeny_tx.lower.passes.layout import (
    Blocked,
    Layout,
    Mma,
    assign_layouts,
    default_blocked,
    mma_warps,
    wgmma_fits,
)
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


# ---------------------------------------------------------------- the choices, one by one


@pytest.mark.parametrize(
    ("shape", "warps", "elem", "blocked"),
    [
        # 16-byte runs along the last axis, lanes fastest-first, warps slowest-first
        ((64, 64), 4, 2, ((1, 8), (4, 8), (4, 1), (1, 0))),
        ((8, 128), 4, 4, ((1, 4), (1, 32), (4, 1), (1, 0))),
        # a tile smaller than the block: the lanes and warps left over hold copies
        ((16, 16), 4, 4, ((1, 4), (8, 4), (2, 2), (1, 0))),
        # 1-D: runs shrink until every thread has one (i8: 16 bytes would leave threads idle)
        ((1024,), 4, 1, ((8,), (32,), (4,), (0,))),
        ((256,), 8, 8, ((1,), (32,), (8,), (0,))),
        # 3-D: the same rule over three dimensions
        ((2, 8, 32), 4, 4, ((1, 1, 4), (1, 4, 8), (2, 2, 1), (2, 1, 0))),
    ],
)
def test_default_blocked_layouts(shape, warps, elem, blocked):
    b = default_blocked(shape, warps, elem)
    assert (b.spt, b.tpw, b.wpc, b.order) == blocked
    lanes = 1
    for t in b.tpw:
        lanes *= t
    warps_used = 1
    for w in b.wpc:
        warps_used *= w
    assert lanes == 32 and warps_used == warps  # every lane and warp has a place
    layout = Layout(b, shape, tuple(range(len(shape))))
    covered = all(s >= b.tile(d) for d, s in enumerate(shape))
    assert layout.replicated == (not covered)
    # a thread's registers hold its share of the tile (its copies included)
    threads = 32 * warps
    assert layout.regs * threads >= layout.size and layout.regs * layout.threads_covered == (
        layout.size
    )


@pytest.mark.parametrize(
    ("m", "n", "warps", "grid"),
    [
        (64, 64, 4, (2, 2)),  # square warp tiles
        (128, 32, 8, (8, 1)),  # tall: warps along M, 16 rows each
        (32, 128, 4, (1, 4)),  # wide: warps along N
        (16, 16, 4, (1, 1)),  # too small for more than one warp: the others hold copies
    ],
)
def test_mma_warps_tile_the_accumulator(m, n, warps, grid):
    assert mma_warps(m, n, warps) == grid
    kernel, _ = _laid_out(DOT, constexprs=(("BM", m), ("BN", n), ("BK", 16)), num_warps=warps)
    acc = _declared(kernel)["acc"]
    assert isinstance(acc.blocked, Mma) and acc.blocked.warps == grid
    copies = warps // (grid[0] * grid[1])
    assert acc.blocked.copies == copies and acc.replicated == (copies > 1)
    assert acc.regs == (m // grid[0] // 16) * (n // grid[1] // 8) * 4  # 4 per m16n8 fragment


TF32_DOT = kernel_text(
    "    tile rm = arange(0, BM);\n"
    "    tile rn = arange(0, BN);\n"
    "    tile rk = arange(0, BK);\n"
    "    tile x = load(a + expand_dims(rm, 1) * BK + expand_dims(rk, 0));\n"
    "    tile y = load(b + expand_dims(rn, 1) * BK + expand_dims(rk, 0));\n"
    "    tile acc = dot(x, trans(y), 0, PRECISION);\n"
    "    store(out + expand_dims(rm, 1) * BN + expand_dims(rn, 0), acc);",
    "f32 *out, const T *a, const T *b, const i32 BM, const i32 BN, const i32 BK",
)


@pytest.mark.parametrize(
    ("dtype", "precision", "bn", "fits"),
    [
        ("f16", "IEEE", 64, True),  # 16-bit operands: wgmma reads them either way
        ("bf16", "IEEE", 256, True),
        ("f16", "IEEE", 512, False),  # N up to 256
        ("f32", "TF32", 64, True),  # f32 as TF32, both operands K-major
        ("f32", "IEEE", 64, False),  # never a silent TF32
        ("i8", "IEEE", 64, False),  # no integer wgmma here
    ],
)
def test_wgmma_fits_by_dtype_precision_and_shape(dtype, precision, bn, fits):
    text = TF32_DOT.replace("const T *", f"const {dtype} *").replace("PRECISION", precision)
    if dtype == "i8":
        text = text.replace("f32 *out", "i32 *out")
    sizes = (("BM", 64), ("BN", bn), ("BK", 64))
    kernel, _ = _laid_out(text, wgmma=True, constexprs=sizes, num_warps=4)
    (dot,) = _ops(kernel, "dot")
    assert wgmma_fits(dot, 4) is fits
    acc = _declared(kernel)["acc"].blocked
    assert isinstance(acc, Mma) and acc.version == (3 if fits else 2)
    if fits:
        assert acc.warps == (4, 1)  # one warpgroup, 16 rows per warp
    # the transposed operand is staged transposed, never moved: its permute has no layout
    # and reads y in y's own (default, 16-byte runs) layout
    (permute,) = _ops(kernel, "permute")
    assert permute.layout is None
    (y,) = permute.args
    assert isinstance(y, Var) and y.name == "y" and y.layout.key == _declared(kernel)["y"].key


SCALED = kernel_text(
    "    tile x = load(a + expand_dims(arange(0, BM), 1) * BK + expand_dims(arange(0, BK), 0));\n"
    "    tile y = load(b + expand_dims(arange(0, BK), 1) * BN + expand_dims(arange(0, BN), 0));\n"
    "    f32 acc[BM][BN] = 0;\n"
    "    for (i32 k = 0; k < 4; k += 1) {\n"
    "        acc = dot(x, y, acc);\n"
    "    }\n"
    "    tile scale = load(s + arange(0, BM));\n"
    "    tile m = max(acc, 1);\n"
    "    tile e = (acc - expand_dims(m, 1)) * expand_dims(scale, 1);\n"
    "    store(out + expand_dims(arange(0, BM), 1) * BN + expand_dims(arange(0, BN), 0), e);",
    "f32 *out, const f16 *a, const f16 *b, const f32 *s, const i32 BM, const i32 BN, const i32 BK",
)


@pytest.mark.parametrize("warps", [4, 8])
def test_what_meets_an_accumulator_takes_its_layout_or_a_slice(warps):
    """A loop-carried accumulator is declared in its Mma layout (its zeros computed there); a
    row vector loaded and broadcast against it, and a reduction of it, take slices of that
    layout, so the epilogue converts nothing (its index tiles are computed where they are
    used: an index variable has one layout, and reading it in another converts it)."""
    kernel, _ = _laid_out(SCALED, constexprs=(("BM", 64), ("BN", 64), ("BK", 32)), num_warps=warps)
    layouts = _declared(kernel)
    acc = layouts["acc"]
    assert isinstance(acc.blocked, Mma) and acc.shape == (64, 64)
    (zeros,) = [s for s in kernel.body if isinstance(s, ir.Declare) and s.name == "acc"]
    assert zeros.init is not None and zeros.init.layout.key == acc.key
    for name in ("m", "scale"):  # [64] vectors: the accumulator's rows
        assert layouts[name].blocked == acc.blocked, name
        assert layouts[name].shape == (64, 1) and layouts[name].dims == (0,), name
    assert layouts["e"].key == acc.key
    assert _ops(kernel, "convert_layout") == []
    # the operands: each its own blocked layout of 16-byte runs
    assert layouts["x"].blocked == default_blocked((64, 32), warps, 2)
    assert layouts["y"].blocked == default_blocked((32, 64), warps, 2)


def test_the_2d_layout_comes_from_the_largest_tile_moved_and_the_narrowest_dtype():
    """Every 2-D blocked tile shares one blocked layout: Triton's default for the largest 2-D
    tile the kernel loads or stores, with 16-byte runs of the narrowest element moved."""
    text = kernel_text(
        "    tile r = arange(0, 8);\n"
        "    tile c = arange(0, 32);\n"
        "    tile small = load(h + expand_dims(r, 1) * 32 + expand_dims(c, 0));\n"
        "    tile R = arange(0, 32);\n"
        "    tile C = arange(0, 128);\n"
        "    tile big = expand_dims(R, 1) * 128 + expand_dims(C, 0);\n"
        "    store(out + big, (f32)load(h + big));\n"
        "    store(out + expand_dims(r, 1) * 32 + expand_dims(c, 0), (f32)small);",
        "f32 *out, const f16 *h",
    )
    kernel, _ = _laid_out(text, num_warps=4)
    layouts = _declared(kernel)
    shared = default_blocked((32, 128), 4, 2)  # f16: runs of 8
    assert shared.spt == (1, 8)
    for name in ("small", "big"):
        assert layouts[name].blocked == shared, name
    assert layouts["small"].shape == (8, 32) and layouts["small"].replicated
    assert _ops(kernel, "convert_layout") == []


def test_a_reduction_stored_through_a_1d_index_is_converted_once():
    """``sum(x, 1)`` computes in the slice of x's layout; stored through a 1-D index tile of
    its own layout it is converted there (one convert_layout of the reduction), while the
    same sum kept 2-D (keep_dims) and stored through 2-D offsets converts nothing."""
    text = kernel_text(
        "    tile r = arange(0, R);\n"
        "    tile c = arange(0, C);\n"
        "    tile x = load(a + expand_dims(r, 1) * C + expand_dims(c, 0));\n"
        "    tile i = arange(0, R);\n"
        "    store(out + i, sum(x, 1));\n"
        "    store(out + expand_dims(r, 1), sum(x, 1, 1));",
        "f32 *out, const f32 *a, const i32 R, const i32 C",
    )
    kernel, _ = _laid_out(text, constexprs=(("R", 16), ("C", 64)), num_warps=4)
    layouts = _declared(kernel)
    (conversion,) = _ops(kernel, "convert_layout")
    (source,) = conversion.args
    assert isinstance(source, Op) and source.op == "reduce" and not source.attr("keep_dims")
    assert source.layout.blocked == layouts["x"].blocked and source.layout.shape == (16, 1)
    assert conversion.layout.key == layouts["i"].key and conversion.layout.shape == (16,)
    kept = [e for e in _ops(kernel, "reduce") if e.attr("keep_dims")]
    assert len(kept) == 1 and kept[0].layout.blocked == layouts["x"].blocked


def test_a_scan_registers_its_lines_and_is_converted_into_an_accumulator():
    """A scan computes in its operand's blocked layout and registers the layout of its lines
    (the scanned axis of size 1); a scan of an accumulator runs in a blocked layout and its
    result is converted back, since tx::scan is blocked-only."""
    text = kernel_text(
        "    tile r = arange(0, 16);\n"
        "    tile c = arange(0, 64);\n"
        "    tile offs = expand_dims(r, 1) * 64 + expand_dims(c, 0);\n"
        "    store(out + offs, cumsum(load(a + offs), 1));",
        "f32 *out, const f32 *a",
    )
    kernel, layouts = _laid_out(text, num_warps=4)
    (scan,) = _ops(kernel, "scan")
    assert not scan.layout.is_mma and scan.layout.shape == (16, 64)
    lines = (scan.layout.blocked, (16, 1))
    assert lines in layouts, "the scan's lines are a layout the emitter declares"
    assert _ops(kernel, "convert_layout") == []

    text = SCALED.replace("tile m = max(acc, 1);", "tile m = max(cumsum(acc, 1), 1);")
    kernel, _ = _laid_out(text, constexprs=(("BM", 64), ("BN", 64), ("BK", 32)), num_warps=4)
    (scan,) = _ops(kernel, "scan")
    assert not scan.layout.is_mma and scan.layout.shape == (64, 64)
    (source,) = scan.args  # the accumulator, converted into the scan's blocked layout
    assert isinstance(source, Op) and source.op == "convert_layout"
    assert source.layout.key == scan.layout.key
    (acc,) = source.args
    assert isinstance(acc, Var) and acc.name == "acc" and acc.layout.is_mma
    back = [c for c in _ops(kernel, "convert_layout") if c.args[0] is scan]
    assert len(back) == 1 and back[0].layout.is_mma  # the row max reads it as acc's slice


@pytest.mark.parametrize(
    ("expr", "op"),
    [
        ("trans(x)", "permute"),
        ("cat(x, x, 0)", "cat"),
        ("split(join(x, x), 1)", "split"),
        ("flip(x, 1)", "flip"),
    ],
)
def test_ops_that_move_elements_keep_operands_in_their_own_layouts(expr, op):
    """trans, cat, join, split and flip rearrange elements: each operand keeps the layout it
    has, and the result takes the layout its consumer (the store) wants."""
    text = kernel_text(
        "    tile r = arange(0, 32);\n"
        "    tile c = arange(0, 32);\n"
        "    tile x = load(a + expand_dims(r, 1) * 32 + expand_dims(c, 0));\n"
        f"    tile y = {expr};\n"
        "    tile i = arange(0, S0);\n"
        "    tile j = arange(0, S1);\n"
        "    store(out + expand_dims(i, 1) * S1 + expand_dims(j, 0), y);",
        "f32 *out, const f32 *a, const i32 S0, const i32 S1",
    )
    rows = 64 if op == "cat" else 32
    kernel, _ = _laid_out(text, constexprs=(("S0", rows), ("S1", 32)), num_warps=4)
    layouts = _declared(kernel)
    (moved,) = _ops(kernel, op)
    assert moved.layout.key == layouts["y"].key
    reads = [e for e in walk_exprs(kernel.body) if isinstance(e, Var) and e.name == "x"]
    assert reads and all(e.layout.key == layouts["x"].key for e in reads)
    assert _ops(kernel, "convert_layout") == []


def test_a_batched_dot_is_refused_on_the_gpu_at_its_line():
    text = kernel_text(
        "    tile r = arange(0, 16);\n"
        "    tile g = arange(0, 2);\n"
        "    tile offs = expand_dims(expand_dims(g, 1), 2) * 256"
        " + expand_dims(expand_dims(r, 1), 0) * 16 + expand_dims(expand_dims(r, 0), 0);\n"
        "    tile x = load(a + offs);\n"
        "    store(out + offs, dot(x, x));",
        "f32 *out, const f16 *a",
    )
    with pytest.raises(CompileError, match=r"kernels/t.c:7:\d+: error: a batched \(3-D\) dot"):
        _laid_out(text, num_warps=4)
