"""Attention: teeny_tx.nn.attention (FlashAttention-2 in kernels/attention.c) against torch's
scaled_dot_product_attention on each of its backends (cuDNN, flash, memory-efficient) and a
Triton FlashAttention-2 forward and backward written here from the published algorithm (the
structure of Triton's fused-attention tutorial: the backward is a rowsum(dO·O) preprocess, dK/dV
per key block over the query blocks, dQ per query block over the key blocks).

Input: random normal q, k, v [B, H, N, D] drawn by torch (SDPA's layout); ours reads them in
place as [B, N, H, D] views (``transpose(1, 2)``: no copy). Cases: B = --batch (4), H = --heads
(32), N in --n (4096), D in --d (128), --causal (0 1), --dtypes (fp16), --passes (fwd bwd);
--all is the issue's grid (N 1024 4096 16384, D 64 128, fp16 and bf16, every implementation).
The backward is timed alone (torch: autograd.grad of a recorded forward; ours:
attention_backward from the forward's o and lse; Triton: its three kernels from its forward's o
and base-2 lse, tiles the fastest of a few per shape, timed once before the measurement).
Output: every implementation checked first against torch's math backend on the first case of
each (dtype, D, causal) (batch element 0; max error relative to max |ref|), then timed (CUDA
events, median; L2 is not flushed: attention is compute bound). Rate in TFLOP/s: 4·B·H·N²·D
per forward, halved when causal; the backward counts 2.5 times the forward's. Ratio: ours /
the best peer, and ours / Triton where Triton ran. --impls picks a subset of ours, cudnn,
flash, efficient, triton; --tune launches ours through the kernels' autotune configs (else the
wrapper's fixed configs);
--overlap 1 / 0 switches the overlapped forward (attention_fwd_overlap) on / off. The
default --impls are ours, cudnn and flash (the fastest peers).

Run from the repository root: python3 bench/bench_attention.py --out /tmp/attn.md (the
defaults: 4 cases, forward and backward, ours vs cuDNN and flash, about 2 minutes with cold
compile caches).
"""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import Callable
from dataclasses import dataclass

from common import (
    NA,
    Table,
    base_parser,
    emit_tables,
    gpu_times_ms,
    median,
    report_failure,
    short_error,
)

try:  # optional peer: the table shows n/a where Triton is missing
    import triton
    import triton.language as tl
except Exception as exc:  # pragma: no cover - depends on the machine
    print(f"Triton peer unavailable: {exc}", file=sys.stderr)
    triton, tl = None, None

UNIT = "TFLOP/s"
PEERS = ["cuDNN", "flash", "efficient", "Triton"]
IMPLS = ("ours", "cudnn", "flash", "efficient", "triton")
DEFAULT_IMPLS = ("ours", "cudnn", "flash")  # the fastest peers: one device call of ~2 minutes
TORCH_DTYPES = {"fp16": "float16", "bf16": "bfloat16"}
# max |out - ref| / max(1, max |ref|) against torch's math backend in float32
TOL = {"fp16": 5e-3, "bf16": 3e-2}
LOG2E = 1.4426950408889634


# ---------------------------------------------------------------- the Triton peer

if triton is not None:

    @triton.jit
    def _fa2_fwd(
        Q, K, V, Out, Lse,
        sqb, sqh, sqn, skb, skh, skn, svb, svh, svn, sob, soh, son,
        H, N, qk_scale,
        CAUSAL: tl.constexpr, D: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
    ):  # fmt: skip
        # one program: BM query rows of one (batch, head); the online softmax of FlashAttention-2
        # over key blocks, in base 2; causal: only the blocks at or left of the diagonal, the
        # mask only on the diagonal ones
        pid_m = tl.program_id(0)
        bh = tl.program_id(1)
        b, h = bh // H, bh % H
        rows = pid_m * BM + tl.arange(0, BM)
        cols = tl.arange(0, BN)
        dims = tl.arange(0, D)
        q_rows = Q + b * sqb + h * sqh + rows[:, None] * sqn
        q = tl.load(q_rows + dims[None, :], mask=rows[:, None] < N, other=0.0)
        k_base = K + b * skb + h * skh
        v_base = V + b * svb + h * svh
        m = tl.full([BM], float("-inf"), tl.float32)
        s_sum = tl.zeros([BM], tl.float32)
        acc = tl.zeros([BM, D], tl.float32)
        end = tl.minimum((pid_m + 1) * BM, N) if CAUSAL else N
        masked_from = tl.minimum(pid_m * BM + 1, N) if CAUSAL else N
        for start in range(0, end, BN):
            keys = start + cols
            kt_ptrs = k_base + keys[None, :] * skn + dims[:, None]
            kt = tl.load(kt_ptrs, mask=keys[None, :] < N, other=0.0)
            s = tl.dot(q, kt) * qk_scale
            if start + BN > masked_from:  # the diagonal block, or the ragged end
                ok = keys[None, :] < N
                if CAUSAL:
                    ok = ok & (keys[None, :] <= rows[:, None])
                s = tl.where(ok, s, float("-inf"))
            m_new = tl.maximum(m, tl.max(s, 1))
            p = tl.math.exp2(s - m_new[:, None])
            corr = tl.math.exp2(m - m_new)
            s_sum = s_sum * corr + tl.sum(p, 1)
            v_ptrs = v_base + keys[:, None] * svn + dims[None, :]
            vt = tl.load(v_ptrs, mask=keys[:, None] < N, other=0.0)
            acc = tl.dot(p.to(vt.dtype), vt, acc * corr[:, None])
            m = m_new
        o = (acc / s_sum[:, None]).to(Out.dtype.element_ty)
        o_ptrs = Out + b * sob + h * soh + rows[:, None] * son + dims[None, :]
        tl.store(o_ptrs, o, mask=rows[:, None] < N)
        # the row's log-sum-exp of the base-2 scores (scaled by scale·log2(e)), what the
        # backward recomputes P from: P = exp2(s·scale·log2(e) - lse2)
        tl.store(Lse + bh * N + rows, m + tl.math.log2(s_sum), mask=rows < N)

    # The backward of FlashAttention-2, in three kernels: delta = rowsum(dO·O); dK and dV per
    # key block, looping over the query blocks that see it; dQ per query block, looping over
    # the key blocks it sees. P is recomputed from q, k and the forward's base-2 log-sum-exp:
    # P = exp2(q·kᵀ·scale·log2(e) - lse2); dP = dO·vᵀ; dS = P·(dP - delta); then
    # dV = Pᵀ·dO, dK = scale·dSᵀ·q, dQ = scale·dS·k.

    @triton.jit
    def _fa2_bwd_delta(
        Out, DO, Delta, sb, sh, sn, H, N, D: tl.constexpr, BM: tl.constexpr
    ):  # fmt: skip
        pid_m = tl.program_id(0)
        bh = tl.program_id(1)
        b, h = bh // H, bh % H
        rows = pid_m * BM + tl.arange(0, BM)
        dims = tl.arange(0, D)
        offs = b * sb + h * sh + rows[:, None] * sn + dims[None, :]
        inside = rows[:, None] < N
        o = tl.load(Out + offs, mask=inside, other=0.0).to(tl.float32)
        do = tl.load(DO + offs, mask=inside, other=0.0).to(tl.float32)
        tl.store(Delta + bh * N + rows, tl.sum(o * do, 1), mask=rows < N)

    @triton.jit
    def _fa2_dkdv_steps(
        dk, dv, k, v, q_base, do_base, lse_base, delta_base, sn, N, keys, lo, hi, qk_scale,
        D: tl.constexpr, BM: tl.constexpr, DIAGONAL: tl.constexpr,
    ):  # fmt: skip
        # the query blocks [lo, hi) against one key block, in the transposed orientation (rows
        # of sᵀ are keys) so that dK and dV accumulate as [BN, D] tiles; a query row past N
        # loads zeros and lse2 = +inf: its column of Pᵀ is 0 and adds nothing
        dims = tl.arange(0, D)
        for start in range(lo, hi, BM):
            rows = start + tl.arange(0, BM)
            inside = rows < N
            offs = rows[:, None] * sn + dims[None, :]
            q = tl.load(q_base + offs, mask=inside[:, None], other=0.0)
            do = tl.load(do_base + offs, mask=inside[:, None], other=0.0)
            lse = tl.load(lse_base + rows, mask=inside, other=float("inf"))
            delta = tl.load(delta_base + rows, mask=inside, other=0.0)
            p_t = tl.math.exp2(tl.dot(k, tl.trans(q)) * qk_scale - lse[None, :])
            if DIAGONAL:  # causal: key j is seen by query i only where j <= i
                p_t = tl.where(keys[:, None] <= rows[None, :], p_t, 0.0)
            dv = tl.dot(p_t.to(do.dtype), do, dv)
            dp_t = tl.dot(v, tl.trans(do))
            ds_t = p_t * (dp_t - delta[None, :])
            dk = tl.dot(ds_t.to(q.dtype), q, dk)
        return dk, dv

    @triton.jit
    def _fa2_bwd_dkdv(
        Q, K, V, DO, Lse, Delta, DK, DV, sb, sh, sn, H, N, qk_scale, sm_scale,
        CAUSAL: tl.constexpr, D: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
    ):  # fmt: skip
        # one program: BN keys of one (batch, head); causal: the query blocks before the key
        # block are skipped, the BN / BM blocks on its diagonal masked, the rest whole
        pid_n = tl.program_id(0)
        bh = tl.program_id(1)
        b, h = bh // H, bh % H
        base = b * sb + h * sh
        first = pid_n * BN
        keys = first + tl.arange(0, BN)
        dims = tl.arange(0, D)
        offs = base + keys[:, None] * sn + dims[None, :]
        inside = keys[:, None] < N
        k = tl.load(K + offs, mask=inside, other=0.0)
        v = tl.load(V + offs, mask=inside, other=0.0)
        dk = tl.zeros([BN, D], tl.float32)
        dv = tl.zeros([BN, D], tl.float32)
        q_base, do_base = Q + base, DO + base
        lse_base, delta_base = Lse + bh * N, Delta + bh * N
        if CAUSAL:
            diagonal_end = tl.minimum(first + BN, N)
            dk, dv = _fa2_dkdv_steps(
                dk, dv, k, v, q_base, do_base, lse_base, delta_base, sn, N, keys,
                first, diagonal_end, qk_scale, D, BM, True,
            )  # fmt: skip
            lo = first + BN
        else:
            lo = 0
        dk, dv = _fa2_dkdv_steps(
            dk, dv, k, v, q_base, do_base, lse_base, delta_base, sn, N, keys,
            lo, N, qk_scale, D, BM, False,
        )  # fmt: skip
        tl.store(DK + offs, (dk * sm_scale).to(DK.dtype.element_ty), mask=inside)
        tl.store(DV + offs, dv.to(DV.dtype.element_ty), mask=inside)

    @triton.jit
    def _fa2_dq_steps(
        dq, q, do, lse, delta, k_base, v_base, sn, N, rows, lo, hi, qk_scale,
        CAUSAL: tl.constexpr, D: tl.constexpr, BN: tl.constexpr, MASKED: tl.constexpr,
    ):  # fmt: skip
        # the key blocks [lo, hi) against one query block; MASKED: the causal diagonal, or (not
        # causal) the ragged last key block, whose keys past N must get P = 0 (k = 0 there
        # would make their dS·k 0, but exp2(-lse2) of a zero score may overflow to inf)
        dims = tl.arange(0, D)
        for start in range(lo, hi, BN):
            keys = start + tl.arange(0, BN)
            offs = keys[:, None] * sn + dims[None, :]
            inside = keys[:, None] < N
            k = tl.load(k_base + offs, mask=inside, other=0.0)
            v = tl.load(v_base + offs, mask=inside, other=0.0)
            p = tl.math.exp2(tl.dot(q, tl.trans(k)) * qk_scale - lse[:, None])
            if MASKED:
                if CAUSAL:
                    p = tl.where(keys[None, :] <= rows[:, None], p, 0.0)
                else:
                    p = tl.where(keys[None, :] < N, p, 0.0)
            dp = tl.dot(do, tl.trans(v))
            ds = p * (dp - delta[:, None])
            dq = tl.dot(ds.to(k.dtype), k, dq)
        return dq

    @triton.jit
    def _fa2_bwd_dq(
        Q, K, V, DO, Lse, Delta, DQ, sb, sh, sn, H, N, qk_scale, sm_scale,
        CAUSAL: tl.constexpr, D: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
    ):  # fmt: skip
        # one program: BM queries of one (batch, head); causal: the key blocks left of the
        # diagonal whole, the BM / BN on it masked, none right of it, and the longest rows
        # (the last query blocks) launched first
        pid_m = tl.program_id(0)
        if CAUSAL:
            pid_m = tl.num_programs(0) - 1 - pid_m
        bh = tl.program_id(1)
        b, h = bh // H, bh % H
        base = b * sb + h * sh
        first = pid_m * BM
        rows = first + tl.arange(0, BM)
        dims = tl.arange(0, D)
        offs = base + rows[:, None] * sn + dims[None, :]
        inside = rows < N
        q = tl.load(Q + offs, mask=inside[:, None], other=0.0)
        do = tl.load(DO + offs, mask=inside[:, None], other=0.0)
        lse = tl.load(Lse + bh * N + rows, mask=inside, other=float("inf"))
        delta = tl.load(Delta + bh * N + rows, mask=inside, other=0.0)
        dq = tl.zeros([BM, D], tl.float32)
        k_base, v_base = K + base, V + base
        if CAUSAL:
            whole_end = first
            masked_end = tl.minimum(first + BM, N)
        else:
            whole_end = N - N % BN
            masked_end = N
        dq = _fa2_dq_steps(
            dq, q, do, lse, delta, k_base, v_base, sn, N, rows, 0, whole_end, qk_scale,
            CAUSAL, D, BN, False,
        )  # fmt: skip
        dq = _fa2_dq_steps(
            dq, q, do, lse, delta, k_base, v_base, sn, N, rows, whole_end, masked_end,
            qk_scale, CAUSAL, D, BN, True,
        )  # fmt: skip
        tl.store(DQ + offs, (dq * sm_scale).to(DQ.dtype.element_ty), mask=inside[:, None])


def triton_attention(q, k, v, causal: bool) -> tuple:
    """Our Triton FA2 forward on [B, H, N, D] tensors: (o, lse2), lse2 [B, H, N] float32 the
    rows' log-sum-exp in base 2 of the scores scaled by D^-0.5·log2(e) (what the backward
    takes)."""
    import torch

    b, h, n, d = q.shape
    o = torch.empty_like(q)
    lse = torch.empty((b, h, n), device=q.device, dtype=torch.float32)
    bm, bn = 128, (128 if d <= 64 else 64)  # the tutorial's Hopper tiles: 8 warps, 3 stages
    _fa2_fwd[(triton.cdiv(n, bm), b * h)](
        q, k, v, o, lse,
        q.stride(0), q.stride(1), q.stride(2), k.stride(0), k.stride(1), k.stride(2),
        v.stride(0), v.stride(1), v.stride(2), o.stride(0), o.stride(1), o.stride(2),
        h, n, d**-0.5 * LOG2E,
        CAUSAL=causal, D=d, BM=bm, BN=bn, num_warps=8, num_stages=3,
    )  # fmt: skip
    return o, lse


# Candidate tiles of the Triton backward, (BM, BN, num_warps, num_stages) per head dim: dK/dV
# programs own BN keys and step BM queries (BN a multiple of BM), dQ programs own BM queries and
# step BN keys (BM a multiple of BN). On a GPU each (kernel, shape, dtype) times its candidates
# once and keeps the fastest; elsewhere (the interpreter) the first is used. All of them compile
# for sm_90 with Triton 3.8 without spilling (ptxas: at most 233 registers, no stack).
TRITON_BWD_DKDV = {
    64: [(32, 128, 8, 4), (64, 128, 8, 3), (32, 64, 4, 4)],
    128: [(32, 128, 8, 3), (32, 128, 8, 4), (32, 64, 4, 3)],
}
TRITON_BWD_DQ = {
    64: [(128, 32, 8, 4), (128, 64, 8, 3), (64, 32, 4, 4)],
    128: [(128, 32, 8, 3), (128, 64, 8, 2), (64, 64, 4, 2)],
}
TRITON_BWD_CHOSEN: dict[tuple, tuple] = {}  # (kernel, dtype, B·H, N, D, causal) -> tile


def _fastest(key: tuple, candidates: list[tuple], launch: Callable[[tuple], object]) -> tuple:
    """The candidate whose launch is fastest (timed once per key, then remembered); one that
    fails to compile or launch is dropped."""
    if key in TRITON_BWD_CHOSEN:
        return TRITON_BWD_CHOSEN[key]
    times, errors = {}, []
    for cfg in candidates:
        try:
            times[cfg] = median(gpu_times_ms(functools.partial(launch, cfg), 5.0, 20.0, 3))
        except Exception as exc:  # noqa: BLE001 - out of shared memory or registers: next one
            errors.append(f"{cfg}: {short_error(exc, 200)}")
    if not times:
        raise RuntimeError(f"no Triton backward tile launched for {key}: {'; '.join(errors)}")
    TRITON_BWD_CHOSEN[key] = min(times, key=times.__getitem__)
    return TRITON_BWD_CHOSEN[key]


def triton_attention_backward(
    do, q, k, v, o, lse2, causal: bool, dkdv: tuple | None = None, dq: tuple | None = None
) -> tuple:
    """Our Triton FA2 backward on contiguous [B, H, N, D] tensors (o, lse2 from
    triton_attention): (dq, dk, dv). ``dkdv`` / ``dq`` force a (BM, BN, num_warps, num_stages)
    tile; by default the fastest of TRITON_BWD_DKDV / TRITON_BWD_DQ on a GPU, the first one
    elsewhere."""
    import torch

    b, h, n, d = q.shape
    for name, x in (("do", do), ("q", q), ("k", k), ("v", v), ("o", o)):
        if tuple(x.shape) != (b, h, n, d) or not x.is_contiguous():
            raise ValueError(f"{name}: want a contiguous {(b, h, n, d)} tensor, got "
                             f"{tuple(x.shape)} with strides {x.stride()}")  # fmt: skip
    if tuple(lse2.shape) != (b, h, n) or lse2.dtype != torch.float32:
        raise ValueError(f"lse2: want a float32 {(b, h, n)} tensor, got {lse2.dtype} "
                         f"{tuple(lse2.shape)}")  # fmt: skip
    lse2 = lse2.contiguous()
    sb, sh, sn = q.stride(0), q.stride(1), q.stride(2)
    scale = d**-0.5
    delta = torch.empty((b, h, n), device=q.device, dtype=torch.float32)
    _fa2_bwd_delta[(triton.cdiv(n, 64), b * h)](o, do, delta, sb, sh, sn, h, n, D=d, BM=64)
    dq_, dk_, dv_ = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)

    def launch_dkdv(cfg: tuple) -> None:
        bm, bn, warps, stages = cfg
        if bn % bm:
            raise ValueError(f"dK/dV tile {cfg}: BN must be a multiple of BM")
        _fa2_bwd_dkdv[(triton.cdiv(n, bn), b * h)](
            q, k, v, do, lse2, delta, dk_, dv_, sb, sh, sn, h, n, scale * LOG2E, scale,
            CAUSAL=causal, D=d, BM=bm, BN=bn, num_warps=warps, num_stages=stages,
        )  # fmt: skip

    def launch_dq(cfg: tuple) -> None:
        bm, bn, warps, stages = cfg
        if bm % bn:
            raise ValueError(f"dQ tile {cfg}: BM must be a multiple of BN")
        _fa2_bwd_dq[(triton.cdiv(n, bm), b * h)](
            q, k, v, do, lse2, delta, dq_, sb, sh, sn, h, n, scale * LOG2E, scale,
            CAUSAL=causal, D=d, BM=bm, BN=bn, num_warps=warps, num_stages=stages,
        )  # fmt: skip

    on_gpu = q.device.type == "cuda"
    shape = (str(q.dtype), b * h, n, d, bool(causal))
    if dkdv is None:
        dkdv = TRITON_BWD_DKDV[d][0]
        if on_gpu:
            dkdv = _fastest(("dkdv", *shape), TRITON_BWD_DKDV[d], launch_dkdv)
    if dq is None:
        dq = TRITON_BWD_DQ[d][0]
        if on_gpu:
            dq = _fastest(("dq", *shape), TRITON_BWD_DQ[d], launch_dq)
    launch_dkdv(dkdv)
    launch_dq(dq)
    return dq_, dk_, dv_


# ---------------------------------------------------------------- the implementations


def _sdpa(backend: str) -> Callable:
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    which = {
        "cudnn": SDPBackend.CUDNN_ATTENTION,
        "flash": SDPBackend.FLASH_ATTENTION,
        "efficient": SDPBackend.EFFICIENT_ATTENTION,
        "math": SDPBackend.MATH,
    }[backend]

    def run(q, k, v, causal):
        with sdpa_kernel([which]):
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)

    return run


def _ours_forward(q, k, v, causal):
    import teeny_tx.nn as tnn

    o, lse = tnn.attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), causal)
    return o.transpose(1, 2), lse


def _flops(b, h, n, d, causal, bwd) -> float:
    f = 4.0 * b * h * n * n * d
    if causal:
        f /= 2
    return f * 2.5 if bwd else f


def _err(out, ref) -> float:
    out, ref = out.float(), ref.float()
    return float((out - ref).abs().max()) / max(1.0, float(ref.abs().max()))


@dataclass
class AttentionTable(Table):
    """common.Table with, where Triton ran, an "ours / Triton" column after "ours / best peer"
    (issue 10's stage 1 is measured against Triton alone)."""

    also_to_triton: bool = False

    def markdown(self, date: str, device: str) -> str:
        text = super().markdown(date, device)
        if not self.also_to_triton:
            return text
        lines, rows = text.split("\n"), iter(self.rows)
        for i, line in enumerate(lines):
            if line.startswith("| case |"):
                lines[i] = line + " ours / Triton |"
            elif line.startswith("|---|"):
                lines[i] = line + "---:|"
            elif line.startswith("| "):
                _, ours, peers = next(rows)
                triton_rate = peers.get("Triton")
                ratio = NA if ours is None or not triton_rate else f"{ours / triton_rate:.2f}"
                lines[i] = line + f" {ratio} |"
        return "\n".join(lines)


class Case:
    """Inputs of one (dtype, N, D, causal) case, and each implementation's callables."""

    def __init__(self, torch, dtype, b, h, n, d, causal, seed):
        g = torch.Generator(device="cuda").manual_seed(seed)
        t = getattr(torch, TORCH_DTYPES[dtype])
        self.q, self.k, self.v, self.do = (
            torch.randn(b, h, n, d, device="cuda", generator=g, dtype=t) for _ in range(4)
        )
        self.causal = causal
        self.torch = torch

    def forward(self, impl: str) -> Callable[[], object]:
        q, k, v, causal = self.q, self.k, self.v, self.causal
        if impl == "ours":
            return lambda: _ours_forward(q, k, v, causal)[0]
        if impl == "triton":
            if triton is None:
                raise RuntimeError("Triton is not available")
            return lambda: triton_attention(q, k, v, causal)[0]
        run = _sdpa(impl)
        return lambda: run(q, k, v, causal)

    def backward(self, impl: str) -> tuple[Callable[[], object], Callable[[], tuple]]:
        """(a call that runs the backward alone, a call that returns (dq, dk, dv))."""
        torch, causal = self.torch, self.causal
        if impl == "ours":
            import teeny_tx.nn as tnn

            qv, kv, vv, dov = (x.transpose(1, 2) for x in (self.q, self.k, self.v, self.do))
            o, lse = tnn.attention(qv, kv, vv, causal)

            def grads():
                dq, dk, dv = tnn.attention_backward(dov, qv, kv, vv, o, lse, causal)
                return tuple(x.transpose(1, 2) for x in (dq, dk, dv))

            return grads, grads
        if impl == "triton":
            if triton is None:
                raise RuntimeError("Triton is not available")
            q, k, v, do = self.q, self.k, self.v, self.do
            o, lse2 = triton_attention(q, k, v, causal)

            def triton_grads():
                return triton_attention_backward(do, q, k, v, o, lse2, causal)

            return triton_grads, triton_grads
        run = _sdpa(impl)
        q, k, v = (x.detach().requires_grad_() for x in (self.q, self.k, self.v))
        o = run(q, k, v, causal)

        def sdpa_grads():
            return torch.autograd.grad(o, (q, k, v), self.do, retain_graph=True)

        return sdpa_grads, sdpa_grads

    def reference(self, bwd: bool):
        """torch's math backend in float32, for the first batch element (what is checked)."""
        q, k, v = (x[:1].float().detach().requires_grad_() for x in (self.q, self.k, self.v))
        o = _sdpa("math")(q, k, v, self.causal)
        if not bwd:
            return (o.detach(),)
        return self.torch.autograd.grad(o, (q, k, v), self.do[:1].float())


def main() -> int:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--heads", type=int, default=32)
    parser.add_argument("--n", type=int, nargs="+", default=[4096])
    parser.add_argument("--d", type=int, nargs="+", default=[128])
    parser.add_argument("--causal", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--dtypes", nargs="+", default=["fp16"], choices=TORCH_DTYPES)
    parser.add_argument(
        "--all",
        action="store_true",
        help="the issue's whole grid: N 1024 4096 16384, D 64 128, fp16 and bf16, every "
        "implementation (about 10 minutes)",
    )
    parser.add_argument("--passes", nargs="+", default=["fwd", "bwd"], choices=["fwd", "bwd"])
    parser.add_argument("--impls", nargs="+", default=list(DEFAULT_IMPLS), choices=IMPLS)
    parser.add_argument("--tune", action="store_true", help="ours through its autotune configs")
    parser.add_argument(
        "--overlap",
        type=int,
        choices=[0, 1],
        default=None,
        help="ours with the overlapped forward (attention.OVERLAP) on or off; default: as set",
    )
    parser.add_argument("--rep-ms", type=float, default=100.0, help="time per measurement")
    args = parser.parse_args()
    if args.all:
        args.n, args.d, args.dtypes = [1024, 4096, 16384], [64, 128], ["fp16", "bf16"]
        args.impls = list(IMPLS)

    import torch

    from teeny_tx.library import attention as tattn

    tattn.TUNE = args.tune
    if args.overlap is not None:
        tattn.OVERLAP = bool(args.overlap)
    b, h = args.batch, args.heads
    tables = []
    for pass_ in args.passes:
        bwd = pass_ == "bwd"
        table = AttentionTable(
            f"Attention {'backward' if bwd else 'forward'}, B={b} H={h}, torch SDPA backends, "
            "Triton FA2, ours",
            UNIT,
            PEERS,
            also_to_triton="triton" in args.impls,
        )
        table.notes.append(
            f"{UNIT} with 4·B·H·N²·D flops per forward, halved when causal"
            + ("; backward counted as 2.5x the forward" if bwd else "")
        )
        table.notes.append(
            "ours: " + ("autotuned configs" if args.tune else f"fixed configs {_configs(tattn)}")
        )
        checked = set()
        tiles = []  # the Triton backward's chosen tiles, one entry per case
        for dtype in args.dtypes:
            for d in args.d:
                for causal in args.causal:
                    for n in args.n:
                        label = f"{dtype} N={n} D={d}" + (" causal" if causal else "")
                        case = Case(torch, dtype, b, h, n, d, bool(causal), args.seed)
                        first = (dtype, d, causal) not in checked
                        checked.add((dtype, d, causal))
                        ref = case.reference(bwd) if first and n <= 8192 else None
                        rates = {}
                        for impl in args.impls:
                            rates[impl] = _measure(case, impl, bwd, ref, dtype, label, table, args)
                        peers = {
                            "cuDNN": rates.get("cudnn"),
                            "flash": rates.get("flash"),
                            "efficient": rates.get("efficient"),
                            "Triton": rates.get("triton"),
                        }
                        table.add(label, rates.get("ours"), peers)
                        if bwd and "triton" in args.impls:
                            tiles.append(
                                f"{label} {_triton_tiles(torch, dtype, b * h, n, d, causal)}"
                            )
                        shown = {k: None if v is None else round(v, 1) for k, v in rates.items()}
                        print(label, shown, flush=True)
                        del case, ref
                        torch.cuda.empty_cache()
        if tiles:
            table.notes.append(
                "Triton backward tiles, dK/dV | dQ (BM, BN, num_warps, num_stages), the fastest "
                "of TRITON_BWD_DKDV / TRITON_BWD_DQ: " + "; ".join(tiles)
            )
        tables.append(table)
    emit_tables(tables, args.out)
    return 0


def _triton_tiles(torch, dtype: str, bh: int, n: int, d: int, causal: int) -> str:
    key = (str(getattr(torch, TORCH_DTYPES[dtype])), bh, n, d, bool(causal))
    dkdv, dq = (TRITON_BWD_CHOSEN.get((kind, *key)) for kind in ("dkdv", "dq"))
    return f"{dkdv or NA} | {dq or NA}"


def _configs(tattn) -> str:
    def by_d(table) -> str:
        return ", ".join(f"D={d}: {tuple(c)}" for d, c in table.items())

    forward = (
        f"overlapped forward {by_d(tattn.FORWARD_OVERLAP)}"
        if tattn.OVERLAP
        else f"forward {by_d(tattn.FORWARD)}, causal with N <= {tattn.SHORT} "
        f"{by_d(tattn.FORWARD_SHORT_CAUSAL)}"
    )
    return (
        f"{forward}; dK/dV {by_d(tattn.BACKWARD_DKDV)}; "
        f"dQ {by_d(tattn.BACKWARD_DQ)} (BM, BN, num_warps, num_stages)"
    )


def _measure(case, impl, bwd, ref, dtype, label, table, args) -> float | None:
    b, h, n, d = case.q.shape
    try:
        if bwd:
            run, grads = case.backward(impl)
            outs = grads()
        else:
            run = case.forward(impl)
            outs = (run(),)
        if ref is not None:
            for name, out, want in zip(
                ("dq", "dk", "dv") if bwd else ("o",), outs, ref, strict=True
            ):
                err = _err(out[:1], want)
                if not err <= TOL[dtype]:
                    raise AssertionError(f"{name} max error {err:.3g} > {TOL[dtype]}")
        ms = median(gpu_times_ms(run, rep_ms=args.rep_ms, min_reps=3))
        return _flops(b, h, n, d, case.causal, bwd) / (ms * 1e-3) / 1e12
    except Exception as exc:  # noqa: BLE001 - a failed peer is a note, not a crash
        table.notes.append(f"{label} {impl}: {short_error(exc, 160)}")
        report_failure(f"{label} {impl}", exc)
        return None
    finally:
        with contextlib.suppress(Exception):
            case.torch.cuda.synchronize()


if __name__ == "__main__":
    sys.exit(main())
