"""Every teeny_tx.torch op forward + backward through autograd against torch eager and
torch.compile of the same function, at LLM shapes, with peak memory.

Input: ``--ops`` (default all), ``--dtype`` (bf16), ``--out`` (a markdown file). Output: two
tables, time (ms, lower is better; the ratio is ours over torch eager and over
torch.compile) and peak memory beyond the inputs (GiB), with date and device. Shapes: norms
16384 x 4096, the MLP's SwiGLU and GeGLU 8192 x 14336, cross-entropy at 8192 tokens x 128256
classes (with label smoothing too), the fused linear + cross-entropy at 8192 x 4096 -> 128256,
RoPE at Llama-3-8B's q [1, 32, 8192, 128] and k [1, 8, 8192, 128]. Run on the GPU:
``python bench/bench_ops.py``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from common import Table, base_parser, emit_tables, gpu_times_ms, median, report_failure


def _cases(torch, F, ttx, dtype):
    """name -> (make inputs, ours(*inputs) -> loss-like output, torch's)."""
    dev = "cuda"

    def randn(*shape, grad=True, scale=1.0):
        t = (torch.randn(*shape, device=dev, dtype=torch.float32) * scale).to(dtype)
        return t.requires_grad_(grad)

    def rotate_half(x):
        h = x.shape[-1] // 2
        return torch.cat((-x[..., h:], x[..., :h]), -1)

    rot = ttx.RotaryEmbedding(128, 8192).to(dev)
    cos, sin = rot.get_buffer("cos").to(dtype), rot.get_buffer("sin").to(dtype)
    v = 128256
    targets = torch.randint(0, v, (8192,), device=dev)

    def torch_rms(x, w):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype) * w

    return {
        "rms_norm 16384x4096": (
            lambda: (randn(16384, 4096), randn(4096)),
            lambda x, w: ttx.rms_norm(x, (4096,), w, 1e-6),
            torch_rms,
        ),
        "rms_norm offset (Gemma) 16384x4096": (
            lambda: (randn(16384, 4096), randn(4096)),
            lambda x, w: ttx.rms_norm_offset(x, w, 1e-6, 1.0, "gemma"),
            lambda x, w: torch_rms(x, 1.0 + w),
        ),
        "layer_norm 16384x4096": (
            lambda: (randn(16384, 4096), randn(4096), randn(4096)),
            lambda x, w, b: ttx.layer_norm(x, (4096,), w, b),
            lambda x, w, b: F.layer_norm(x, (4096,), w, b),
        ),
        "swiglu 8192x14336": (
            lambda: (randn(8192, 14336), randn(8192, 14336)),
            ttx.swiglu,
            lambda g, u: F.silu(g) * u,
        ),
        "geglu 8192x14336": (
            lambda: (randn(8192, 14336), randn(8192, 14336)),
            ttx.geglu,
            lambda g, u: F.gelu(g, approximate="tanh") * u,
        ),
        "rope q[1,32,8192,128] k[1,8,8192,128]": (
            lambda: (randn(1, 32, 8192, 128), randn(1, 8, 8192, 128)),
            lambda q, k: ttx.rope(q, k, cos, sin),
            lambda q, k: (q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin),
        ),
        "cross_entropy 8192x128256": (
            lambda: (randn(8192, v),),
            lambda x: ttx.cross_entropy(x, targets),
            lambda x: F.cross_entropy(x.float(), targets),
        ),
        "cross_entropy smoothing 0.1 8192x128256": (
            lambda: (randn(8192, v),),
            lambda x: ttx.cross_entropy(x, targets, label_smoothing=0.1),
            lambda x: F.cross_entropy(x.float(), targets, label_smoothing=0.1),
        ),
        "fused linear+CE 8192x4096->128256": (
            lambda: (randn(8192, 4096), randn(v, 4096, scale=0.02)),
            lambda x, w: ttx.fused_linear_cross_entropy(x, w, targets),
            lambda x, w: F.cross_entropy((x @ w.t()).float(), targets),
        ),
    }


def _step(torch, fn: Callable, inputs: tuple) -> Callable[[], None]:
    def run():
        for t in inputs:
            t.grad = None
        out = fn(*inputs)
        outs = out if isinstance(out, tuple) else (out,)
        torch.autograd.backward(outs, [torch.ones_like(o) for o in outs])

    return run


def _measure(torch, fn: Callable, make: Callable) -> tuple[float, float]:
    """(median ms of forward + backward, peak GiB allocated beyond the inputs)."""
    inputs = make()
    step = _step(torch, fn, inputs)
    step()
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    step()
    torch.cuda.synchronize()
    peak = (torch.cuda.max_memory_allocated() - base) / 2**30
    ms = median(gpu_times_ms(step))
    del inputs
    torch.cuda.empty_cache()
    return ms, peak


def main(argv: list[str] | None = None) -> int:
    parser = base_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--ops", default="", help="comma-separated substrings of case names")
    parser.add_argument("--dtype", default="bf16", choices=("bf16", "f16", "f32"))
    args = parser.parse_args(argv)
    import torch
    import torch.nn.functional as F

    import teeny_tx.torch as ttx

    dtype = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}[args.dtype]
    torch.manual_seed(args.seed)
    peers = ["torch eager", "torch.compile"]
    times = Table(
        f"teeny_tx.torch ops, forward + backward ({args.dtype})",
        "ms",
        peers,
        higher_is_better=False,
        ratio_to="torch eager",
        digits=3,
    )
    memory = Table(
        f"peak memory beyond the inputs ({args.dtype})",
        "GiB",
        peers,
        higher_is_better=False,
        ratio_to="torch eager",
        digits=2,
    )
    wanted = [w for w in args.ops.split(",") if w]
    for name, (make, ours, theirs) in _cases(torch, F, ttx, dtype).items():
        if wanted and not any(w in name for w in wanted):
            continue
        results: dict[str, tuple[float, float] | None] = {}
        for label, fn in (
            ("ours", ours),
            ("torch eager", theirs),
            ("torch.compile", torch.compile(theirs)),
        ):
            try:
                results[label] = _measure(torch, fn, make)
            except Exception as exc:  # noqa: BLE001 - a failed case is a note, not a crash
                times.notes.append(f"{name}, {label}: " + report_failure(name, exc))
                results[label] = None
        ms = {k: (v[0] if v else None) for k, v in results.items()}
        gib = {k: (v[1] if v else None) for k, v in results.items()}
        times.add(name, ms.pop("ours"), ms)
        memory.add(name, gib.pop("ours"), gib)
        compiled = times.rows[-1][2].get("torch.compile")
        if compiled and times.rows[-1][1]:
            times.notes.append(f"{name}: ours / torch.compile {times.rows[-1][1] / compiled:.2f}")
    emit_tables([times, memory], args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
