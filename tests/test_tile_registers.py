"""Tiles that cannot fit a thread's registers are a located ResourceError naming the tile,
raised in lower/ (lower/interface.py) before any CUDA is rendered, for the sizes that made
NVRTC run for minutes (arange(0, 2^20), a [1024][1024] tile, 2^24, 2^30)."""

from __future__ import annotations

import numpy as np
import pytest

import teeny_tx
from teeny_tx.lower.interface import tile_register_limit
from teeny_tx.target import Target

from .conftest import KERNEL_FILE, kernel_text, nvrtc_compile

ARANGE = kernel_text(
    "    tile i = arange(0, BLOCK);\n    store(out + i, (f32)i);", "f32 *out, const i32 BLOCK"
)
SQUARE = kernel_text(
    "    f32 t[B][B] = 1.0f;\n"
    "    store(out + expand_dims(arange(0, B), 1) * B + expand_dims(arange(0, B), 0), t);",
    "f32 *out, const i32 B",
)


def _refused(text: str, *args, **constexprs) -> teeny_tx.ResourceError:
    kernel = teeny_tx.compile(text, name=KERNEL_FILE).k
    with pytest.raises(teeny_tx.ResourceError) as info:
        kernel.cuda_source(*args, **constexprs)
    return info.value


@pytest.mark.parametrize("log2", [18, 20, 24, 30])
def test_a_huge_arange_is_refused_at_its_declaration(log2):
    error = str(_refused(ARANGE, "f32", BLOCK=2**log2))
    assert error.startswith(f"{KERNEL_FILE}:3:10: error: tile 'i' i32[{2**log2}] needs ")
    assert "registers per thread (128 threads)" in error and "at most 1020" in error
    assert "^" in error and "hint: use a smaller tile" in error


def test_a_1024_by_1024_tile_is_refused():
    error = str(_refused(SQUARE, "f32", B=1024))
    assert error.startswith(f"{KERNEL_FILE}:3:9: error: tile 't' f32[1024, 1024] needs 8192 ")


def test_the_bound_follows_the_target_and_the_warps():
    """At the bound (4 x 255 registers) a tile compiles; one power of two more is refused, and
    more warps bring it back under."""
    assert tile_register_limit(Target.from_arch("sm_90")) == 4 * 255
    kernel = teeny_tx.compile(ARANGE, name=KERNEL_FILE).k
    source = kernel.cuda_source("f32", BLOCK=2**16)  # 512 per thread on 4 warps
    assert "int i[tx_L0::REGS]" in source
    _refused(ARANGE, "f32", BLOCK=2**17)  # 1024 per thread
    kernel.cuda_source("f32", BLOCK=2**17, num_warps=8)


def test_pointers_and_wide_elements_take_two_registers():
    text = kernel_text(
        "    tile i = arange(0, BLOCK);\n    tile p = out + i;\n    store(p, (f64)i);",
        "f64 *out, const i32 BLOCK",
    )
    error = str(_refused(text, "f64", BLOCK=2**16))
    assert "tile 'p' f64*[65536] needs 1024 registers per thread" in error


def test_the_interpreter_has_no_register_limit():
    kernel = teeny_tx.compile(ARANGE, name=KERNEL_FILE).k
    out = np.zeros(2**18, np.float32)
    kernel.interpret[(1,)](out, BLOCK=2**18)
    np.testing.assert_array_equal(out, np.arange(2**18, dtype=np.float32))


def test_a_tile_under_the_bound_still_compiles_with_nvrtc():
    source = teeny_tx.compile(SQUARE, name=KERNEL_FILE).k.cuda_source("f32", B=64)
    nvrtc_compile(source, "k")
