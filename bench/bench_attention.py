"""Attention: teeny_tx.nn.attention (FlashAttention-2 in kernels/attention.c) against torch's
scaled_dot_product_attention on each of its backends (cuDNN, flash, memory-efficient) and a
Triton FlashAttention-2 forward written here from the published algorithm.

Input: random normal q, k, v [B, H, N, D] drawn by torch (SDPA's layout); ours reads them in
place as [B, N, H, D] views (``transpose(1, 2)``: no copy). Cases: B = --batch (4), H = --heads
(32), N in --n (4096), D in --d (128), --causal (0 1), --dtypes (fp16), --passes (fwd bwd);
--all is the issue's grid (N 1024 4096 16384, D 64 128, fp16 and bf16, every implementation).
The backward is timed alone (torch: autograd.grad of a recorded forward; ours:
attention_backward from the forward's o and lse).
Output: every implementation checked first against torch's math backend on the first case of
each (dtype, D, causal) (batch element 0; max error relative to max |ref|), then timed (CUDA
events, median; L2 is not flushed: attention is compute bound). Rate in TFLOP/s: 4·B·H·N²·D
per forward, halved when causal; the backward counts 2.5 times the forward's. Ratio: ours /
the best peer. --impls picks a subset of ours, cudnn, flash, efficient, triton; --tune
launches ours through the kernels' autotune configs (else the wrapper's fixed configs);
--overlap 1 / 0 switches the overlapped forward (attention_fwd_overlap) on / off. The
default --impls are ours, cudnn and flash (the fastest peers).

Run from the repository root: python3 bench/bench_attention.py --out /tmp/attn.md (the
defaults: 4 cases, forward and backward, ours vs cuDNN and flash, about 2 minutes with cold
compile caches).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable

from common import (
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
        lse = (m + tl.math.log2(s_sum)) * 0.6931471805599453  # base 2 to natural
        tl.store(Lse + bh * N + rows, lse, mask=rows < N)


def triton_attention(q, k, v, causal: bool):
    """Our Triton FA2 forward on [B, H, N, D] tensors: (o, lse)."""
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
            raise RuntimeError("no Triton backward here (the forward is the peer)")
        run = _sdpa(impl)
        q, k, v = (x.detach().requires_grad_() for x in (self.q, self.k, self.v))
        o = run(q, k, v, causal)

        def grads():
            return torch.autograd.grad(o, (q, k, v), self.do, retain_graph=True)

        return grads, grads

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
        table = Table(
            f"Attention {'backward' if bwd else 'forward'}, B={b} H={h}, torch SDPA backends, "
            "Triton FA2 (forward), ours",
            UNIT,
            PEERS,
        )
        table.notes.append(
            f"{UNIT} with 4·B·H·N²·D flops per forward, halved when causal"
            + ("; backward counted as 2.5x the forward" if bwd else "")
        )
        table.notes.append(
            "ours: " + ("autotuned configs" if args.tune else f"fixed configs {_configs(tattn)}")
        )
        checked = set()
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
                        shown = {k: None if v is None else round(v, 1) for k, v in rates.items()}
                        print(label, shown, flush=True)
                        del case, ref
                        torch.cuda.empty_cache()
        tables.append(table)
    emit_tables(tables, args.out)
    return 0


def _configs(tattn) -> str:
    def by_d(table) -> str:
        return ", ".join(f"D={d}: {tuple(c)}" for d, c in table.items())

    forward = (
        f"overlapped forward {by_d(tattn.FORWARD_OVERLAP)}"
        if tattn.OVERLAP
        else f"forward {by_d(tattn.FORWARD)}"
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
        if impl != "triton" or not bwd:
            table.notes.append(f"{label} {impl}: {short_error(exc, 160)}")
            report_failure(f"{label} {impl}", exc)
        return None
    finally:
        with contextlib.suppress(Exception):
            case.torch.cuda.synchronize()


if __name__ == "__main__":
    sys.exit(main())
