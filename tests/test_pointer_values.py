"""Pointer values: where() selects pointer tiles (lowered on both backends); a pointer stored as
a value, or given as load()'s `other`, is refused at the argument."""

from __future__ import annotations

import numpy as np
import pytest

import teeny_tx

from .conftest import KERNEL_FILE, compile_error, kernel_text, nvrtc_compile

SELECT = """kernel select(f32 *out, const f32 *a, i32 n, i32 shift, const i32 BLOCK)
{
    tile o = program_id(0) * BLOCK + arange(0, BLOCK);
    tile p = where(o % 3 == 0, a + o, a + (o + shift) % n);
    tile q = (o % 2 == 0) ? p : a;
    store(out + o, load(q, o < n), o < n);
}
"""


def expected(a: np.ndarray, shift: int) -> np.ndarray:
    o = np.arange(a.size)
    p = np.where(o % 3 == 0, o, (o + shift) % a.size)
    return a[np.where(o % 2 == 0, p, 0)]


@pytest.mark.parametrize("n", [1, 1001, 2**14 + 3])
def test_where_selects_pointer_tiles_on_the_interpreter(n):
    module = teeny_tx.compile(SELECT, name=KERNEL_FILE)
    a = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    out = np.zeros(n, np.float32)
    module.select.interpret[(teeny_tx.cdiv(n, 256),)](out, a, n, 5, BLOCK=256)
    np.testing.assert_array_equal(out, expected(a, 5))


def test_where_on_pointer_tiles_compiles_through_nvrtc():
    module = teeny_tx.compile(SELECT, name=KERNEL_FILE)
    source = module.select.cuda_source("f32", "f32", 1001, 5, BLOCK=256)
    assert " ? " in source
    nvrtc_compile(source, "select")


@pytest.mark.parametrize(
    ("body", "col", "message"),
    [
        (
            "    tile o = arange(0, BLOCK);\n    store(out + o, a + o);",
            20,
            "store() writes numbers; a pointer cannot be stored as a value",
        ),
        (
            "    tile o = arange(0, BLOCK);\n    store(out + o, load(a + o, o < n, a));",
            39,
            "load() other is the value of masked-off lanes: a number, not a pointer",
        ),
    ],
)
def test_pointer_values_are_refused_at_the_argument(body, col, message):
    err = compile_error(kernel_text(body))
    assert (err.loc.line, err.loc.col, err.message) == (4, col, message)
    assert err.hint


HELD = """kernel held(f32 *out, const f32 *a, const i32 N)
{
    tile r = arange(0, N);
    tile pc = out + expand_dims(r, 1) * N + expand_dims(r, 0);
    tile pa = a + expand_dims(r, 1) * N + expand_dims(r, 0);
    tile x = (f16)load(pa);
    f32 acc[N][N] = 0;
    acc = dot(x, x, acc);
    store(pc, acc);
}
"""


def test_a_pointer_tile_held_across_a_dot_is_stored_through():
    """The pointer tile changes layout to meet the dot's accumulator: it is staged through
    shared memory like any tile (8 bytes a pointer)."""
    module = teeny_tx.compile(HELD, name=KERNEL_FILE)
    nvrtc_compile(module.held.cuda_source("f32", "f32", N=16), "held")
    a = np.random.default_rng(0).standard_normal(256).astype(np.float32)
    out = np.zeros(256, np.float32)
    module.held.interpret[(1,)](out, a, N=16)
    x = a.reshape(16, 16).astype(np.float16).astype(np.float64)
    np.testing.assert_allclose(out.reshape(16, 16), x @ x, rtol=1e-5, atol=1e-5)
