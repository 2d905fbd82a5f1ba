"""Nesting is counted as the user writes it (issue 29): a loop and its block are one level,
a flat chain ``a + b + c`` is one level with a bound on its terms, and blocks deeper than
pycparser can follow are a located error, not ``syntax error before 'i33'``."""

from __future__ import annotations

import numpy as np
import pytest

import teeny_tx
from teeny_tx.parse.checks import MAX_BLOCKS, MAX_TERMS

from .conftest import KERNEL_FILE


def _loops(n: int) -> str:
    body = "".join(
        f"{'    ' * (k + 1)}for (i32 i{k} = 0; i{k} < 1; i{k} += 1) {{\n" for k in range(n)
    )
    body += "    " * (n + 1) + "store(out + i, x);\n"
    body += "".join("    " * (k + 1) + "}\n" for k in reversed(range(n)))
    return (
        "kernel k(f32 *out, const f32 *a, const i32 BLOCK)\n{\n    tile i = arange(0, BLOCK);\n"
        "    tile x = load(a + i);\n" + body + "}\n"
    )


def _run(text: str) -> np.ndarray:
    k = teeny_tx.compile(text, name=KERNEL_FILE).k
    a = np.arange(8, dtype=np.float32)
    out = np.zeros(8, np.float32)
    k.interpret[(1,)](out, a, BLOCK=8)
    k.cuda_source("f32", "f32", BLOCK=8)
    return out


@pytest.mark.parametrize("n", [31, 32])
def test_nested_loops_up_to_the_bound_compile(n):
    np.testing.assert_array_equal(_run(_loops(n)), np.arange(8, dtype=np.float32))


@pytest.mark.parametrize("n", [33, 34, 40, 63])
def test_deeper_loops_are_one_located_error_at_the_users_depth(n):
    with pytest.raises(teeny_tx.CompileError) as info:
        teeny_tx.compile(_loops(n), name=KERNEL_FILE)
    first = str(info.value).splitlines()[0]
    line = 5 + MAX_BLOCKS  # the loop that opens block MAX_BLOCKS + 1
    assert first.startswith(f"{KERNEL_FILE}:{line}:")
    assert f"blocks nest more than {MAX_BLOCKS} deep" in first and "i33" not in first


@pytest.mark.parametrize("terms", [63, 64, MAX_TERMS])
def test_a_flat_sum_is_not_nesting(terms):
    text = (
        "kernel k(f32 *out, const f32 *a, const i32 BLOCK)\n{\n    tile i = arange(0, BLOCK);\n"
        f"    tile x = load(a + i);\n    store(out + i, {' + '.join(['x'] * terms)});\n}}\n"
    )
    np.testing.assert_array_equal(_run(text), terms * np.arange(8, dtype=np.float32))


def test_a_chain_past_the_bound_names_its_terms():
    text = (
        "kernel k(f32 *out, const f32 *a, const i32 BLOCK)\n{\n    tile i = arange(0, BLOCK);\n"
        f"    tile x = load(a + i);\n    store(out + i, {' * '.join(['x'] * 300)});\n}}\n"
    )
    with pytest.raises(teeny_tx.CompileError) as info:
        teeny_tx.compile(text, name=KERNEL_FILE)
    assert str(info.value).startswith(
        f"{KERNEL_FILE}:5:20: error: one '*' chain has 300 terms; at most {MAX_TERMS}"
    )


def test_a_deep_expression_still_counts_every_level():
    """Nesting that is real (parenthesised calls) is still bounded."""
    expr = "x"
    for _ in range(70):
        expr = f"abs({expr})"
    text = (
        "kernel k(f32 *out, const f32 *a, const i32 BLOCK)\n{\n    tile i = arange(0, BLOCK);\n"
        f"    tile x = load(a + i);\n    store(out + i, {expr});\n}}\n"
    )
    with pytest.raises(teeny_tx.CompileError, match="nest more than 64"):
        teeny_tx.compile(text, name=KERNEL_FILE)
