"""lower/vectorize.py: the vector width of every tile load and store, decided in lower."""

import numpy as np
import pytest

import teeny_tx as tx
from teeny_tx.lower.ir import Op
from teeny_tx.lower.layout import walk_exprs
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
