"""lower/passes/simplify.py: integer identities leave the IR; values never change.

The pass removes `x * 1`, `1 * x`, `x + 0`, `0 + x`, `x - 0` and shifts by 0 on integers and
pointers (a stride of 1 is bound as the constant 1), and only where `x` already has the
result's type; float identities stay (`x + 0.0` turns -0.0 into +0.0). The simplified IR runs
on the interpreter to the same bits as the IR the builder made.
"""

import numpy as np
import pytest

from teeny_tx.interp import interpreter
from teeny_tx.lower.ir import Const, Op, walk_exprs
from teeny_tx.lower.passes.simplify import simplify
from tests.conftest import kernel_text, lower

PARAMS = "f32 *out, const f32 *a, i32 n, i32 one, i32 zero, f32 fzero, const i32 BLOCK"
BODY = (
    "    tile o = arange(0, BLOCK) * one + zero;\n"  # -> arange
    "    tile p = (one * o - zero) << zero;\n"  # -> o
    "    tile x = load(a + o * one, o < n, 0.0f);\n"
    "    i8 small[BLOCK] = 3;\n"
    "    tile q = small * one;\n"  # i8 * i32: the cast to i32 stays, the product goes
    "    store(out + p + zero, x + fzero + (f32)q, p < n);"  # the float + fzero stays
)


def _identities(kernel):
    """(op, constant) of every remaining op with a constant 0 or 1 operand."""
    found = []
    for e in walk_exprs(kernel.body):
        if isinstance(e, Op) and e.op in ("add", "sub", "mul", "lshift", "rshift"):
            for a in e.args:
                if isinstance(a, Const) and a.value in (0, 1):
                    found.append((e.op, a.value, str(e.type.dtype)))
    return found


def test_integer_identities_are_removed_and_float_ones_kept():
    spec = dict(ones=("one",), constexprs=(("BLOCK", 64),))
    raw = lower(kernel_text(BODY, PARAMS), **spec)
    assert [op for op, _, _ in _identities(raw)].count("mul") == 4  # `one` reads as 1
    simplified = simplify(raw)
    assert _identities(simplified) == []  # `zero` is a runtime value: its adds stay ops
    q = [s for s in simplified.body if getattr(s, "name", "") == "q"][0]
    assert q.init.op == "cast" and str(q.init.type.dtype) == "i32"


def test_zero_constants_and_float_zero():
    text = kernel_text(
        "    tile o = arange(0, BLOCK) + 0 - 0;\n"
        "    tile x = load(a + o + 0, o < n, 0.0f);\n"
        "    store(out + o, x + 0.0f, o < n);",
        "f32 *out, const f32 *a, i32 n, const i32 BLOCK",
    )
    kernel = simplify(lower(text))
    assert _identities(kernel) == [("add", 0, "f32")]


@pytest.mark.parametrize("n", [1, 1001])
def test_the_interpreter_gives_the_same_bits(n):
    spec = dict(ones=("one",), constexprs=(("BLOCK", 128),))
    raw = lower(kernel_text(BODY, PARAMS), **spec)
    rng = np.random.default_rng(n)
    a = rng.standard_normal(2048).astype(np.float32)
    a[::7] = -0.0
    outs = []
    for kernel in (raw, simplify(raw)):
        out = np.full(2048, np.nan, np.float32)
        args = dict(out=out, a=a, n=n, one=1, zero=0, fzero=0.0)
        interpreter.run(kernel, (1, 1, 1), args)
        outs.append(out)
    np.testing.assert_array_equal(outs[0].view(np.int32), outs[1].view(np.int32))
    assert np.isfinite(outs[1][: min(n, 128)]).all()
