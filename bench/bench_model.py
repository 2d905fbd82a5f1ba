"""Training throughput of the character-level GPT (examples/gpt): teeny_tx's ops against the
same model in plain torch, eager and under torch.compile.

Input: the model's full configuration (6 layers, width 384, 6 heads, context 256, batch 64:
16,384 tokens a step) in --dtype (bfloat16 by default: parameters, activations and gradients;
AdamW moments f32 for teeny_tx, the parameters' dtype for torch), one initialisation, the same
batches. A step is forward, backward and the AdamW update.
Output: a table of training tokens per second (median over --steps timed steps after --warmup
steps, CUDA-synchronised wall time per step) and each rate's ratio to torch eager, with date
and device; --out writes it. Rows:

- teeny_tx eager: every layer a teeny_tx op (Linear with the GELU/bias epilogue, fused
  residual + layer norm, embedding, composed attention, fused cross-entropy, fused AdamW);
- teeny_tx + torch.compile: the same model under torch.compile(fullgraph=True) (inductor fuses
  the torch glue between the custom ops);
- torch eager and torch.compile: nn.Linear + F.gelu, nn.LayerNorm, SDPA (flash attention),
  F.cross_entropy, torch.optim.AdamW (fused=True where available).

By default teeny_tx's products take matmul_config's tiles (--tune: time the kernel's autotune
configs first, which costs minutes of compiling on a cold cache).

Run from the repository root: python3 bench/bench_model.py --out /tmp/model.md
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from common import REPO, device_name, report_failure, utc_now

sys.path.insert(0, str(REPO / "examples" / "gpt"))

IMPLS = ("teeny_tx", "teeny_tx+compile", "torch", "torch+compile")


def _steps_per_second(make, batches, warmup: int, steps: int) -> float:
    import torch

    step = make()
    for _ in range(warmup):
        step(*batches.next())
    torch.cuda.synchronize()
    times = []
    for _ in range(steps):
        x, y = batches.next()
        start = time.perf_counter()
        step(x, y)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return 1.0 / statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtype", choices=("bfloat16", "float32"), default="bfloat16")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--impls", default=",".join(IMPLS), help="comma-separated subset")
    parser.add_argument("--tune", action="store_true", help="autotune teeny_tx's products")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)

    import torch
    from gpt import CONFIGS, GPT, TEENY, TORCH, Batches, corpus, init_weights

    import teeny_tx.linalg as linalg

    linalg.TUNE = args.tune
    torch.backends.cuda.matmul.allow_tf32 = False
    cfg = CONFIGS["full"]
    dtype = getattr(torch, args.dtype)
    text = corpus()
    vocab = Batches(text, cfg, 0, "cpu").vocab
    state = init_weights(GPT(cfg, vocab, TORCH), 0)
    tokens = cfg.batch * cfg.context

    def maker(lib, compiled: bool):
        def make():
            model = GPT(cfg, vocab, lib).cuda()
            model.load_state_dict(state)
            model.to(dtype)
            kw = {"fused": True} if lib is TORCH else {}
            opt = lib.AdamW(model.parameters(), lr=cfg.lr, betas=(0.9, 0.95), **kw)
            forward = torch.compile(model, fullgraph=True) if compiled else model

            def step(x, y):
                opt.zero_grad(set_to_none=True)
                forward(x, y).backward()
                opt.step()

            return step

        return make

    makers = {
        "teeny_tx": maker(TEENY, False),
        "teeny_tx+compile": maker(TEENY, True),
        "torch": maker(TORCH, False),
        "torch+compile": maker(TORCH, True),
    }
    rates: dict[str, float | str] = {}
    for name in args.impls.split(","):
        batches = Batches(text, cfg, 0, torch.device("cuda"))
        start = time.perf_counter()
        try:
            rates[name] = tokens * _steps_per_second(makers[name], batches, args.warmup, args.steps)
        except Exception as exc:  # noqa: BLE001 - a failed row is reported, the rest run
            rates[name] = report_failure(name, exc)
        print(f"{name}: {rates[name]} tokens/s ({time.perf_counter() - start:.0f} s)", flush=True)

    base = rates.get("torch")
    lines = [
        f"### GPT training, {cfg.layers} layers x {cfg.width}, {cfg.heads} heads, context "
        f"{cfg.context}, batch {cfg.batch}, {args.dtype} ({utc_now()}, {device_name()})",
        "",
        "| implementation | tokens/s | vs torch eager |",
        "|---|---:|---:|",
    ]
    for name, value in rates.items():
        if isinstance(value, float):
            ratio = f"{value / base:.2f}" if isinstance(base, float) else "n/a"
            lines.append(f"| {name} | {value:,.0f} | {ratio} |")
        else:
            lines.append(f"| {name} | failed: {value} | |")
    table = "\n".join(lines) + "\n"
    print(table)
    if args.out:
        args.out.write_text(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
