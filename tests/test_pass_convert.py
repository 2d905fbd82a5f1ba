"""lower/passes/convert.py: each conversion of a variable to a layout happens once, loop-invariant
ones before the loop; the generated CUDA does one shared-memory round trip per conversion."""

import re

import teeny_tx
from teeny_tx.lower import ir
from teeny_tx.lower.ir import Op, Var, walk_exprs
from teeny_tx.lower.passes.driver import decide
from tests.cases import GOLDEN
from tests.conftest import KERNEL_FILE, kernel_text, lower, nvrtc_compile

# `rk` is read as a column ([32, 1]) but lives as a row ([1, 32]): a conversion, used three
# times, loop-invariant; `moving` changes in the loop, so its conversion stays inside
TEXT = kernel_text(
    "    tile rk = arange(0, 32);\n"
    "    tile row = expand_dims(rk, 0);\n"
    "    tile moving = arange(0, 32);\n"
    "    tile mrow = expand_dims(moving, 0);\n"
    "    for (i32 j = 0; j < n; j += 1) {\n"
    "        tile o = expand_dims(rk, 1) * 32 + row + expand_dims(moving, 1) * 0 + mrow * 0;\n"
    "        store(out + o + j * 1024, load(a + o), o < n);\n"
    "        store(out + o + expand_dims(rk, 1), load(a + o), expand_dims(rk, 1) < n);\n"
    "        moving = moving + 1;\n"
    "    }",
    "f32 *out, const f32 *a, i32 n, const i32 BLOCK",
)


def _conversions(stmts) -> list[str]:
    return [
        e.args[0].name
        for e in walk_exprs(stmts)
        if isinstance(e, Op) and e.op == "convert_layout" and isinstance(e.args[0], Var)
    ]


def test_invariant_conversions_are_hoisted_and_shared():
    kernel = decide(lower(TEXT)).kernel
    (loop,) = [s for s in kernel.body if isinstance(s, ir.Loop)]
    before = kernel.body[: kernel.body.index(loop)]
    hoisted = [s for s in before if isinstance(s, ir.Declare) and _conversions([s])]
    assert [(s.name, _conversions([s])) for s in hoisted] == [("tx_rk_cvt", ["rk"])]
    assert _conversions(loop.body) == ["moving"]  # once per iteration, as the value changes
    inside = [s for s in loop.body if isinstance(s, ir.Declare) and _conversions([s])]
    assert [s.name for s in inside] == ["tx_moving_cvt"]
    reads = [e for e in walk_exprs(loop.body) if isinstance(e, Var) and e.name == "tx_rk_cvt"]
    assert len(reads) == 3 and all(r.layout.key == hoisted[0].layout.key for r in reads)


def test_the_cuda_converts_once_and_compiles():
    src = teeny_tx.compile(TEXT, name=KERNEL_FILE).k.cuda_source("f32", "f32", 1000, BLOCK=128)
    assert src.count("tx::relayout<") == 2
    loop = src.split("for (int j = 0;")[1]
    assert loop.count("tx::relayout<") == 1 and "tx_moving_cvt" in loop
    nvrtc_compile(src, "k")


def test_no_golden_repeats_a_conversion():
    """In every golden each (source layout, destination layout, value) converts at most once
    per block: the matmul goldens had 9 repeats of 32 before the pass."""
    for g in GOLDEN:
        seen = set()
        for line in g.path.read_text().splitlines():
            m = re.search(r"tx::relayout<(\w+), (\w+)>\((\w+), (\w+),", line)
            if m:
                src_layout, dst_layout, _, value = m.groups()
                key = (src_layout, dst_layout, value, len(line) - len(line.lstrip()))
                assert key not in seen, f"{g.stem}: {line.strip()}"
                seen.add(key)
