"""lower/passes/vectorize.py: the vector width of every tile load and store, decided in lower."""

import numpy as np
import pytest

import teeny_tx as tx
from teeny_tx.lower.ir import Op, walk_exprs
from tests.conftest import KERNEL_FILE, kernel_text

TEXT = kernel_text(
    "    tile o = program_id(0) * BLOCK + arange(0, BLOCK);\n"
    "    tile x = load(a + o, o < n, 0.0f);\n"  # contiguous
    "    tile y = load(a + o * 2, o < n, 0.0f);\n"  # strided: by lane
    "    tile z = load(a + o, o < n, x);\n"  # a tile `other`: by lane
    "    store(out + o, x + y + z, o < n);",
    "any *out, const any *a, i32 n, const i32 BLOCK",
)


def widths(*args, **constexprs):
    spec = tx.compile(TEXT, name=KERNEL_FILE).k.specialize(*args, **constexprs)
    return [
        (e.op, e.attr("vec"))
        for e in walk_exprs(spec.kernel.body)
        if isinstance(e, Op) and e.op in ("load", "store")
    ]


@pytest.mark.parametrize(("dtype", "vec"), [("f32", 4), ("f16", 8)])
def test_aligned_contiguous_accesses_move_16_bytes(dtype, vec):
    got = widths(dtype, dtype, 4096, BLOCK=1024)
    assert got == [("load", vec), ("load", 1), ("load", 1), ("store", vec)]


def test_misaligned_pointers_and_replicated_layouts_go_by_lane():
    misaligned = np.zeros(4097, np.float32)[1:]
    assert widths(misaligned, misaligned, 4096, BLOCK=1024) == [("load", 1)] * 3 + [("store", 1)]
    # BLOCK = 64 under 4 warps of 32 lanes: threads hold copies, so stores go by owner
    small = widths("f32", "f32", 4096, BLOCK=64)
    assert small[-1] == ("store", 1)


def uniform(text: str, *args, **constexprs) -> list:
    spec = tx.compile(text, name=KERNEL_FILE).k.specialize(*args, **constexprs)
    return [
        (e.op, e.attr("vec"), e.attr("mask_uniform"))
        for e in walk_exprs(spec.kernel.body)
        if isinstance(e, Op) and e.op in ("load", "store")
    ]


ROWS_TEXT = kernel_text(
    "    tile rows = program_id(0) * ROWS + arange(0, ROWS);\n"
    "    tile cols = arange(0, BLOCK);\n"
    "    tile mask = expand_dims(rows < n_rows, 1) & expand_dims(cols < n, 0);\n"
    "    tile offs = expand_dims(rows, 1) * n + expand_dims(cols, 0);\n"
    "    store(out + offs, load(a + offs, mask, 0.0f), mask);\n"
    "    store(out + cols, load(a + cols, cols <= n, 0.0f), cols < n + 1);",
    "any *out, const any *a, i32 n_rows, i32 n, const i32 BLOCK, const i32 ROWS",
)


@pytest.mark.parametrize(("dtype", "vec"), [("f32", 4), ("f16", 8)])
def test_masks_constant_over_each_vector_are_tested_once(dtype, vec):
    """cols < n with n divisible by 16 (and a row mask, constant along a row) is one value over
    each group of lanes a vector access moves; `cols <= n` and `cols < n + 1` are not."""
    got = uniform(ROWS_TEXT, dtype, dtype, 8, 4096, BLOCK=1024, ROWS=2)
    assert got[:3] == [("load", vec, True), ("store", vec, True), ("load", vec, False)]
    assert got[3][2] is False  # (a 1-D store under this layout holds copies: by lane)
    source = tx.compile(ROWS_TEXT, name=KERNEL_FILE).k.cuda_source(
        dtype, dtype, 8, 4096, BLOCK=1024, ROWS=2
    )
    assert f"tx::load_vec_if<{vec}>" in source and f"tx::store_vec_if<{vec}>" in source
    assert f"tx::load_vec<{vec}>" in source  # the masks that may change within a vector


def test_masks_of_sizes_not_divisible_by_16_are_tested_lane_by_lane():
    got = uniform(ROWS_TEXT, "f32", "f32", 8, 1001, BLOCK=1024, ROWS=2)
    assert all(not u for _, _, u in got)
    assert uniform(TEXT, "f32", "f32", 4096, BLOCK=1024)[0] == ("load", 4, True)
    assert uniform(TEXT, "f32", "f32", 4095, BLOCK=1024)[0] == ("load", 4, False)
