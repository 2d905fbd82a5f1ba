"""Kernels that were internal failures of the GPU path (issue 29), shared by
tests/test_build_regressions.py (CUDA generation, NVRTC, interpreter) and
tests/gpu/test_build_regressions_gpu.py (the GPU against the interpreter)."""

from __future__ import annotations

import zlib

import numpy as np

# two reductions of one tile stored through a 1-D index tile declared before it: the store
# wanted the reductions in the index tile's own 1-D layout, with no dimension to restore
# ("cannot place this reduction's input in a layout")
TWO_REDUCTIONS = """kernel rows(f32 *out, const f32 *x, i32 n, const i32 BLOCK)
{
    tile idx = arange(0, BLOCK);
    tile r = arange(0, BLOCK);
    tile t = load(x + expand_dims(r, 1) * n + expand_dims(r, 0), expand_dims(r, 0) < n, 0.0f);
    store(out + idx, sum(t, 1));
    store(out + BLOCK + idx, max(t, 1));
}
"""

# a dot() loop loading through trans() of a pointer tile that the loop advances: the transposed
# pointer tile is materialised in registers, whose naming read `.kind` of a PointerType
DOT_TRANS_POINTERS = """kernel mm(f32 *c, const f16 *a, const f16 *b, i32 K,
         const i32 BM, const i32 BN, const i32 BK)
{
    tile rm = arange(0, BM);
    tile rn = arange(0, BN);
    tile rk = arange(0, BK);
    tile pa = a + expand_dims(rm, 1) * K + expand_dims(rk, 0);
    tile pb = b + expand_dims(rn, 1) * K + expand_dims(rk, 0);
    f32 acc[BM][BN] = 0;
    for (i32 k = 0; k < K; k += BK) {
        acc = dot(load(pa), load(trans(pb)), acc);
        pa += BK;
        pb += BK;
    }
    store(c + expand_dims(rm, 1) * BN + expand_dims(rn, 0), acc);
}
"""


def rng(name: str) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(name.encode()))


def two_reductions_case(block: int, n: int):
    """x of ``block`` rows of ``n``; the tile is x with columns past n masked to 0."""
    x = rng(f"rows{block}{n}").standard_normal(block * n).astype(np.float32)
    t = np.zeros((block, block), np.float32)
    t[:, :n] = x.reshape(block, n)
    return x, np.concatenate([t.sum(1), t.max(1)]).astype(np.float32)


def dot_case(bm: int, bn: int, bk: int, k: int):
    g = rng(f"mm{bm}{bn}{bk}{k}")
    a = g.standard_normal((bm, k)).astype(np.float16)
    b = g.standard_normal((bn, k)).astype(np.float16)
    return a, b, a.astype(np.float32) @ b.astype(np.float32).T
