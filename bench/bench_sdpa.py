"""teeny_tx.torch's attention interfaces on the GPU against torch in the same run: grouped-query
attention (H_q 32, H_kv 8, D 128) at N 2k-8k through scaled_dot_product_attention (peer:
torch's SDPA with enable_gqa); a sliding window of 4096 keys at N 16k through flash_attn_func
(peer: SDPA with the band as a boolean mask); softcap 30 at N 4k (peer: our own forward without
softcap, the issue's target being within 10% of it). Forward, and forward + backward; times in
ms (lower is better), each output checked against the peer's first.

    python bench/bench_sdpa.py [--out FILE] [--rep-ms MS]
"""

from __future__ import annotations

import functools
import sys

from common import Table, base_parser, emit_tables, gpu_times_ms, median, short_error

GQA = {"is_causal": True, "enable_gqa": True}


def _time(fn, rep_ms: float) -> float:
    return median(gpu_times_ms(fn, rep_ms=rep_ms, min_reps=3))


def _step(torch, fn, inputs, bwd: bool):
    """A call of ``fn`` (and its backward with a fixed output gradient when ``bwd``)."""
    if not bwd:
        return lambda: fn(*inputs)
    leaves = [t.detach().clone().requires_grad_() for t in inputs]
    g = torch.ones_like(fn(*leaves))

    def run():
        for t in leaves:
            t.grad = None
        fn(*leaves).backward(g)

    return run


def main() -> int:
    parser = base_parser(__doc__)
    parser.add_argument("--rep-ms", type=float, default=100.0)
    args = parser.parse_args()
    import torch
    import torch.nn.functional as F

    import teeny_tx.torch as ttx

    if not torch.cuda.is_available():
        print("needs a CUDA device", file=sys.stderr)
        return 2
    torch.manual_seed(args.seed)
    dev, dt = "cuda", torch.float16
    tables = []
    for bwd in (False, True):
        kind = "forward + backward" if bwd else "forward"
        gqa = Table(f"GQA (H_q 32, H_kv 8, D 128, causal), {kind}", "ms", ["SDPA"], False)
        for n in (2048, 4096, 8192):
            q = torch.randn(2, 32, n, 128, device=dev, dtype=dt)
            k = torch.randn(2, 8, n, 128, device=dev, dtype=dt)
            v = torch.randn(2, 8, n, 128, device=dev, dtype=dt)
            ours = functools.partial(ttx.scaled_dot_product_attention, **GQA)
            theirs = functools.partial(F.scaled_dot_product_attention, **GQA)
            gqa.add(f"N={n}", *_pair(torch, ours, theirs, (q, k, v), bwd, args, gqa, "SDPA"))
        tables.append(gqa)

        title = f"Sliding window 4096 (causal, N 16k, H 16, D 128), {kind}"
        win = Table(title, "ms", ["SDPA"], False)
        n = 16384
        q, k, v = (torch.randn(1, n, 16, 128, device=dev, dtype=dt) for _ in range(3))
        i = torch.arange(n, device=dev)
        band = (i[None, :] <= i[:, None]) & (i[None, :] >= i[:, None] - 4096)

        def ours_w(q, k, v):
            return ttx.flash_attn_func(q, k, v, causal=True, window_size=(4096, 0))

        def theirs_w(q, k, v, band=band):
            qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))
            return F.scaled_dot_product_attention(qt, kt, vt, attn_mask=band).transpose(1, 2)

        win.add("N=16384", *_pair(torch, ours_w, theirs_w, (q, k, v), bwd, args, win, "SDPA"))
        tables.append(win)

        cap = Table(f"Softcap 30 (N 4k, H 32, D 128), {kind}", "ms", ["ours, no softcap"], False)
        q, k, v = (torch.randn(2, 4096, 32, 128, device=dev, dtype=dt) for _ in range(3))

        def ours_c(q, k, v):
            return ttx.flash_attn_func(q, k, v, softcap=30.0)

        def plain(q, k, v):
            return ttx.flash_attn_func(q, k, v)

        ms_ours = _time(_step(torch, ours_c, (q, k, v), bwd), args.rep_ms)
        ms_plain = _time(_step(torch, plain, (q, k, v), bwd), args.rep_ms)
        cap.add("N=4096", ms_ours, {"ours, no softcap": ms_plain})
        tables.append(cap)
    emit_tables(tables, args.out)
    return 0


def _pair(torch, ours, theirs, inputs, bwd, args, table, peer):
    """(ours ms, {peer: ms}); a failure is a note and n/a; outputs compared first."""
    result: list = [None, {peer: None}]
    try:
        want = theirs(*inputs)
        got = ours(*inputs)
        err = float((got.float() - want.float()).abs().max())
        if err > 2e-2:
            table.notes.append(f"ours differs from {peer} by {err:.3g}")
        result[0] = _time(_step(torch, ours, inputs, bwd), args.rep_ms)
    except Exception as exc:  # noqa: BLE001 - a failure is a note, not a crash
        table.notes.append(f"ours: {short_error(exc, 160)}")
    try:
        result[1][peer] = _time(_step(torch, theirs, inputs, bwd), args.rep_ms)
    except Exception as exc:  # noqa: BLE001
        table.notes.append(f"{peer}: {short_error(exc, 160)}")
    return result


if __name__ == "__main__":
    sys.exit(main())
