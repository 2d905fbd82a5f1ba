"""Kernels of the chapter "Triton kernels in Python" (docs/python-frontend.md)."""

import teeny_tx.triton as triton
import teeny_tx.triton.language as tl


@triton.jit
def scaled(x, alpha):
    return tl.where(x > 0, x, alpha * x)


@triton.jit
def softmax_rows(out, x, n_cols, stride, BLOCK: tl.constexpr, ACT: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    v = tl.load(x + row * stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
    if ACT == "leaky":
        v = scaled(v, 0.01)
    e = tl.exp(v - tl.max(v, axis=0))
    tl.store(out + row * stride + cols, e / tl.sum(e, axis=0), mask=mask)


@triton.jit
def row_sums(out, x, n_rows, n_cols, BM: tl.constexpr, BN: tl.constexpr):
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    acc = tl.zeros([BM], dtype=tl.float32)
    for start in range(0, n_cols, BN):
        cols = start + tl.arange(0, BN)
        mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
        acc += tl.sum(tl.load(x + rows[:, None] * n_cols + cols[None, :], mask=mask), axis=1)
    tl.store(out + rows, acc, mask=rows < n_rows)
