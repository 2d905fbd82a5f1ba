"""Kernels that were internal failures of the GPU path (issue 29) build: CUDA generation, NVRTC
for sm_90 and sm_90a, and the interpreter's answer. The GPU's answer:
tests/gpu/test_build_regressions_gpu.py."""

from __future__ import annotations

import numpy as np
import pytest

import teeny_tx

from .conftest import nvrtc_compile
from .regression_kernels import DOT_TRANS_POINTERS, TWO_REDUCTIONS, dot_case, two_reductions_case


@pytest.mark.parametrize(("block", "n"), [(16, 16), (32, 19), (64, 64)])
def test_two_reductions_stored_through_an_earlier_index_tile(block, n):
    kernel = teeny_tx.compile(TWO_REDUCTIONS, name="kernels/rows.c").rows
    x, want = two_reductions_case(block, n)
    out = np.zeros(2 * block, np.float32)
    kernel.interpret[(1,)](out, x, n, BLOCK=block)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)
    for arch in ("sm_90", "sm_90a"):
        source = kernel.cuda_source("f32", "f32", n, BLOCK=block, target=arch)
        nvrtc_compile(source, "rows")


@pytest.mark.parametrize(("bm", "bn", "bk", "k"), [(16, 32, 16, 48), (64, 64, 32, 96)])
@pytest.mark.parametrize("stages", [2, 3])
def test_dot_loop_loading_through_trans_of_a_pointer_tile(bm, bn, bk, k, stages):
    kernel = teeny_tx.compile(DOT_TRANS_POINTERS, name="kernels/mm.c").mm
    a, b, want = dot_case(bm, bn, bk, k)
    c = np.zeros((bm, bn), np.float32)
    kernel.interpret[(1,)](c, a, b, k, BM=bm, BN=bn, BK=bk)
    np.testing.assert_allclose(c, want, rtol=1e-3, atol=1e-3)
    for arch in ("sm_90", "sm_90a"):
        source = kernel.cuda_source(
            "f32", "f16", "f16", k, BM=bm, BN=bn, BK=bk, target=arch, num_stages=stages
        )
        nvrtc_compile(source, "mm")
