"""A chain of helpers inlined inside one another is bounded (issue 29: 200 of them were a
RecursionError): up to MAX_HELPER_DEPTH compiles on both backends, past it is a located
CompileError naming the chain."""

from __future__ import annotations

import numpy as np
import pytest

import teeny_tx
from teeny_tx.lower.build.builder import MAX_HELPER_DEPTH

from .conftest import KERNEL_FILE, nvrtc_compile


def _chain(n: int) -> str:
    last = f"f32 h{n - 1}(f32 x)\n{{\n    return x;\n}}\n"
    rest = "".join(
        f"f32 h{k}(f32 x)\n{{\n    return h{k + 1}(x) + 1.0f;\n}}\n" for k in reversed(range(n - 1))
    )
    return last + rest + "kernel k(f32 *out)\n{\n    store(out, h0(2.0f));\n}\n"


@pytest.mark.parametrize("n", [2, 17, MAX_HELPER_DEPTH])
def test_a_chain_within_the_bound_compiles(n):
    k = teeny_tx.compile(_chain(n), name=KERNEL_FILE).k
    out = np.zeros(1, np.float32)
    k.interpret[(1,)](out)
    assert out[0] == 2.0 + (n - 1)
    nvrtc_compile(k.cuda_source("f32"), "k")


@pytest.mark.parametrize("n", [MAX_HELPER_DEPTH + 1, 200, 1000])
def test_a_longer_chain_is_a_located_error(n):
    k = teeny_tx.compile(_chain(n), name=KERNEL_FILE).k
    with pytest.raises(teeny_tx.CompileError) as info:
        k.cuda_source("f32")
    text = str(info.value)
    # h63's body (the 64th inlined) calls h64: its line in the file
    line = 4 * (n - 1 - (MAX_HELPER_DEPTH - 1)) + 3
    assert text.startswith(f"{KERNEL_FILE}:{line}:12: error: helper calls nest more than 64 deep")
    assert "(h0 -> h1 -> h2 -> ... -> h62 -> h63 -> h64)" in text
