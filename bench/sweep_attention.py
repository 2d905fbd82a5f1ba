"""Attention config sweep: each (BM, BN, num_warps, num_stages) of the forward and of the two
backward kernels, timed through teeny_tx.nn as users call it, against cuDNN in the same run.

Input: random normal q, k, v [B, H, N, D] (torch, fp16), read as [B, N, H, D] views. Each
config is checked first (max error against cuDNN relative to max |ref|; a failing config is
reported, not timed), then timed (CUDA events, median). Rate in TFLOP/s: 4·B·H·N²·D per
forward, halved when causal; the backward counts 2.5 times the forward's. Prints one table per
(pass, D, causal); the fastest config first. This is how the wrapper's fixed configs
(teeny_tx/library/attention.py: FORWARD, BACKWARD_DKDV, BACKWARD_DQ) are chosen, and whether
dQ is better added by atomics from the dK/dV kernel (ATOMIC_DQ rows: the dK/dV kernel's config,
no dQ kernel; BACKWARD_DKDV_ATOMIC) than by its own kernel; OVERLAP rows: the forward whose
softmax overlaps the tensor cores (attention_fwd_overlap, the wrapper's OVERLAP flag); WS and
DQ_WS rows: the forward and dQ warp-specialised (a config's fifth entry, WARP_SPECIALIZE).
--tables picks which are swept (FIXED: one row, the wrapper's configs as they stand). With
TEENY_TX_PIPELINE_TMA=1 in the environment every row loads its pipelined tiles with TMA.

Run from the repository root: python3 bench/sweep_attention.py [--d 64 128] [--causal 0 1]
"""

from __future__ import annotations

import itertools

from common import base_parser, gpu_times_ms, median, short_error

from teeny_tx import nn
from teeny_tx.library import attention as tattn

FWD = [(128, 64, 8, 2), (128, 128, 8, 2), (128, 64, 8, 3), (128, 128, 8, 3), (64, 64, 4, 2)]
# the overlapped forward (attention_fwd_overlap; the wrapper's OVERLAP flag)
OVERLAP = [(128, 64, 8, 2), (128, 64, 8, 3), (128, 128, 8, 2)]  # 128 x 128 at D = 128 spills
# the overlapped forward warp-specialised (FlashAttention-3's whole forward schedule): a
# producer warpgroup (WS 1), and with $TEENY_TX_WS_PINGPONG=1 the two compute warpgroups'
# ping-pong too (WS 2)
OVERLAP += [(128, 64, 8, 3, 1), (128, 64, 8, 3, 2), (128, 64, 8, 2, 2), (128, 128, 8, 2, 2)]
DKDV = [(64, 128, 8, 2), (64, 128, 8, 3), (64, 64, 4, 2), (32, 128, 8, 2), (64, 64, 8, 2)]
DQ = [(128, 64, 8, 2), (128, 64, 8, 3), (128, 32, 8, 2), (64, 64, 4, 2), (128, 128, 8, 2)]
# dQ by atomics (ATOMIC_DQ): the dK/dV kernel's config, no dQ kernel
ATOMIC = [(64, 64, 4, 2), (64, 128, 8, 2)]
# warp-specialised (lower/passes/warp_spec.py), by head dim: (BM, BN, warps, stages,
# WARP_SPECIALIZE),
# 1 a producer warpgroup, 2 also the two compute warpgroups' ping-pong; WS rows the forward,
# DQ_WS rows dQ (FORWARD and BACKWARD_DQ with their warp_specialize)
FWD_WS = {
    64: [(128, 64, 8, 3, 1), (128, 64, 8, 3, 2), (128, 128, 8, 3, 2), (256, 64, 16, 3, 1),
         (256, 64, 16, 2, 1)],
    128: [(128, 128, 8, 3, 1), (128, 128, 8, 3, 2), (128, 128, 8, 2, 2), (128, 64, 8, 3, 2)],
}  # fmt: skip
DQ_WS = {
    64: [(64, 64, 4, 2, 1), (128, 64, 8, 2, 1), (128, 64, 8, 2, 2)],
    128: [(128, 128, 8, 2, 1), (128, 128, 8, 2, 2), (128, 64, 8, 2, 2)],
}
TABLES = ("FIXED", "FORWARD", "OVERLAP", "BACKWARD_DKDV", "BACKWARD_DQ", "ATOMIC_DQ", "WS", "DQ_WS")


def _case(
    torch, b: int, h: int, n: int, d: int, causal: bool, which: str, tables: list[str]
) -> list[str]:
    """The rows of one (pass, D, causal) table, fastest first."""
    f = torch.nn.functional.scaled_dot_product_attention
    g = torch.Generator(device="cuda").manual_seed(0)
    q, k, v, do = (
        torch.randn(b, h, n, d, device="cuda", generator=g, dtype=torch.float16) for _ in range(4)
    )
    flops = 4 * b * h * n * n * d / (2 if causal else 1) * (2.5 if which == "bwd" else 1)
    qt, kt, vt, dot_ = (x.transpose(1, 2) for x in (q, k, v, do))
    with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.CUDNN_ATTENTION):
        qr, kr, vr = (x.detach().requires_grad_() for x in (q, k, v))
        ref = f(qr, kr, vr, is_causal=causal)
        want = (ref,) if which == "fwd" else torch.autograd.grad(ref, (qr, kr, vr), do)
        if which == "fwd":
            peer = median(gpu_times_ms(lambda: f(q, k, v, is_causal=causal)))
        else:
            out = f(qr, kr, vr, is_causal=causal)
            peer = median(
                gpu_times_ms(lambda: torch.autograd.grad(out, (qr, kr, vr), do, retain_graph=True))
            )
    o, lse = nn.attention(qt, kt, vt, causal=causal)

    def forward():
        return (nn.attention(qt, kt, vt, causal=causal)[0].transpose(1, 2),)

    def backward():
        grads = nn.attention_backward(dot_, qt, kt, vt, o, lse, causal=causal)
        return tuple(x.transpose(1, 2) for x in grads)

    call = forward if which == "fwd" else backward
    if which == "fwd":
        grid = [("FORWARD", c) for c in FWD] + [("OVERLAP", c) for c in OVERLAP]
        grid += [("WS", c) for c in FWD_WS.get(d, [])]
    else:
        grid = [("BACKWARD_DKDV", c) for c in DKDV] + [("BACKWARD_DQ", c) for c in DQ]
        grid += [("ATOMIC_DQ", c) for c in ATOMIC] + [("DQ_WS", c) for c in DQ_WS.get(d, [])]
    grid = [("FIXED", None), *grid]
    rows = []
    for table, config in grid:
        if table not in tables:
            continue
        name = f"{table} {config}" if config else "FIXED (the wrapper's configs as they are)"
        # an ATOMIC_DQ row: dQ by atomics from the dK/dV kernel, launched with this config
        configs = getattr(
            tattn,
            {
                "ATOMIC_DQ": "BACKWARD_DKDV_ATOMIC",
                "FIXED": "FORWARD",
                "OVERLAP": "FORWARD_OVERLAP",
                "WS": "FORWARD",
                "DQ_WS": "BACKWARD_DQ",
            }.get(table, table),
        )
        saved, saved_atomic, saved_overlap = configs[d], tattn.ATOMIC_DQ[d], tattn.OVERLAP
        saved_short = tattn.SHORT
        if config is not None:
            configs[d] = tattn.AttentionConfig(*config)
            tattn.ATOMIC_DQ[d] = table == "ATOMIC_DQ"
            tattn.OVERLAP = table == "OVERLAP"
            tattn.SHORT = 0  # the row's config, not FORWARD_SHORT_CAUSAL, at every N
        try:
            got = call()
            err = max(
                float((x.double() - y.double()).abs().max()) / max(1.0, float(y.abs().max()))
                for x, y in zip(got, want, strict=True)
            )
            if err > 2e-2:
                rows.append((0.0, f"| {name} | wrong: err {err:.3g} | | | |"))
                continue
            ms = median(gpu_times_ms(call))
            rate = flops / ms / 1e9
            rows.append(
                (rate, f"| {name} | {rate:.0f} | {flops / peer / 1e9:.0f} | {peer / ms:.2f} | "
                       f"{err:.2g} |")
            )  # fmt: skip
        except Exception as exc:  # a config that does not build or launch is reported
            rows.append((0.0, f"| {name} | failed: {short_error(exc, 160)} | | | |"))
        finally:
            configs[d] = saved
            tattn.ATOMIC_DQ[d] = saved_atomic
            tattn.OVERLAP = saved_overlap
            tattn.SHORT = saved_short
    head = [
        f"\n#### {which} N={n} D={d} causal={int(causal)} (B={b}, H={h}, fp16, TFLOP/s)\n",
        "| config (BM, BN, warps, stages[, WS]) | ours | cuDNN | ours/cuDNN | max err |",
        "|---|---:|---:|---:|---:|",
    ]
    return head + [r for _, r in sorted(rows, key=lambda x: -x[0])]


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=4096)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--heads", type=int, default=32)
    parser.add_argument("--d", type=int, nargs="+", default=[128, 64])
    parser.add_argument("--causal", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--passes", nargs="+", default=["fwd", "bwd"])
    parser.add_argument("--tables", nargs="+", default=list(TABLES), choices=TABLES)
    args = parser.parse_args()
    import torch

    lines: list[str] = []
    for d, causal, which in itertools.product(args.d, args.causal, args.passes):
        rows = _case(torch, args.batch, args.heads, args.n, d, bool(causal), which, args.tables)
        print("\n".join(rows), flush=True)
        lines += rows
    if args.out:
        with open(args.out, "w") as fh:
            fh.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
