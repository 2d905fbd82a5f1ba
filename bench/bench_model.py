"""Training the character-level GPT (examples/gpt) with teeny_tx's ops against the same model in
plain torch, eager and under torch.compile: throughput and the loss curves.

Input: the model's full configuration (6 layers, width 384, 6 heads, context 256, batch 64:
16,384 tokens a step) in --dtype (bfloat16 by default: parameters, activations and gradients;
AdamW moments f32 for teeny_tx, the parameters' dtype for torch), one initialisation and the
same batches for every implementation. A step is forward, backward and the AdamW update; each
implementation trains --steps steps from the same start.
Output: a table (date and device above it, as bench/plots.py reads tables) of training tokens
per second (median step time over the steps after the first --warmup, which compile, load and
tune; CUDA-synchronised wall time per step), each rate against torch eager and torch.compile,
and the loss at the first and last step with its difference from torch eager's; the loss curves
of every implementation as a PNG titled with date and device (--plot, default
docs/images/bench-model-loss.png; with --smoke only where --plot says). --out writes the
table. Rows:

- teeny_tx: every layer a teeny_tx op (Linear with the GELU/bias epilogue, fused residual +
  layer norm, embedding, composed attention, fused cross-entropy, fused AdamW);
- teeny_tx+compile: the same model under torch.compile(fullgraph=True) (inductor fuses the
  torch glue between the custom ops);
- torch, torch+compile: nn.Linear + F.gelu, nn.LayerNorm, SDPA (flash attention),
  F.cross_entropy, torch.optim.AdamW (fused=True on CUDA);
- teeny_tx+graph, torch+graph (CUDA only): forward and backward captured once in a CUDA graph
  (after two warm-up passes on a side stream) and replayed on each batch, the optimizer stepping
  outside it: the same GPU work with the host's per-op Python and dispatch taken out, so the
  gap between a row and its +graph row is what the host costs.

--smoke runs the tiny configuration on the CPU (teeny_tx's kernels on the NumPy interpreter),
float32, a few steps, torch.compile with the aot_eager backend (no C++ compiler needed): the
same code path end to end, for tests/test_torch_bench_model.py. Exit status 1 when an
implementation fails.

By default teeny_tx's products take matmul_config's tiles (--tune: time the kernel's autotune
configs first, which costs minutes of compiling on a cold cache).

Run from the repository root (H200): python3 bench/bench_model.py --out /tmp/model.md
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from common import REPO, device_name, report_failure, utc_now

sys.path.insert(0, str(REPO / "examples" / "gpt"))

IMPLS = ("teeny_tx", "teeny_tx+compile", "teeny_tx+graph", "torch", "torch+compile", "torch+graph")
CPU_IMPLS = tuple(name for name in IMPLS if not name.endswith("+graph"))
PLOT = REPO / "docs" / "images" / "bench-model-loss.png"


class Run:
    """One implementation's training: per-step seconds and losses, or why it failed."""

    def __init__(self, name: str):
        self.name = name
        self.seconds: list[float] = []
        self.losses: list[float] = []
        self.error: str | None = None

    def tokens_per_second(self, tokens: int, warmup: int) -> float | None:
        timed = self.seconds[warmup:] or self.seconds
        return tokens / statistics.median(timed) if timed and self.error is None else None


def train(make: Callable, batches, steps: int, sync: Callable[[], None], run: Run) -> None:
    """``steps`` steps of ``make()``'s step function; the losses are read once at the end (no
    host sync inside the timed step but the one that ends it)."""
    import torch

    step = make()
    losses = []
    for _ in range(steps):
        x, y = batches.next()
        sync()
        start = time.perf_counter()
        losses.append(step(x, y))
        sync()
        run.seconds.append(time.perf_counter() - start)
    run.losses = torch.stack(losses).float().tolist()


def graph_step(model, opt) -> Callable:
    """A step that replays forward and backward from the example's CUDA graph
    (``train.graphed_step``: captured at the first call, after two warm-up passes on a side
    stream), then steps the optimizer outside it (its step count lives on the host)."""
    from train import graphed_step

    replay: list[Callable] = []

    def step(x, y):
        if not replay:
            replay.append(graphed_step(model, x, y))
        loss = replay[0](x, y)
        opt.step()
        return loss.detach().clone()  # the graph's loss tensor is overwritten by each replay

    return step


def plot(runs: list[Run], path: Path, title: str) -> bool:
    """The loss curves; False (nothing written) without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    styles = {"teeny_tx": "--", "teeny_tx+compile": ":", "torch": "-", "torch+compile": "-."}
    styles |= {"teeny_tx+graph": (0, (5, 1, 1, 1)), "torch+graph": (0, (1, 1))}
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=100)
    for run in runs:
        if run.losses:
            steps = range(1, len(run.losses) + 1)
            ax.plot(
                steps,
                run.losses,
                linestyle=styles.get(run.name, "-"),
                label=run.name,
                linewidth=1.2,
            )
    ax.set_xlabel("step")
    ax.set_ylabel("training loss (cross-entropy, nats)")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", metadata={"Software": None})
    plt.close(fig)
    return True


def table(runs: list[Run], tokens: int, warmup: int, heading: str, when: str, where: str) -> str:
    rates = {r.name: r.tokens_per_second(tokens, warmup) for r in runs}
    eager, compiled = rates.get("torch"), rates.get("torch+compile")
    ref = next((r.losses for r in runs if r.name == "torch" and r.losses), None)

    def ratio(value: float | None, base: float | None) -> str:
        return f"{value / base:.2f}" if value and base else "n/a"

    lines = [
        heading,
        "",
        f"date: {when}, device: {where}",
        "",
        "| implementation | tokens/s | vs torch eager | vs torch.compile | loss, step 1 | "
        "loss, last step | vs torch eager (rel) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for run in runs:
        if run.error is not None:
            lines.append(f"| {run.name} | failed: {run.error} | | | | | |")
            continue
        rate = rates[run.name]
        rel = abs(run.losses[-1] - ref[-1]) / abs(ref[-1]) if ref else None
        lines.append(
            f"| {run.name} | {rate:,.0f} | {ratio(rate, eager)} | {ratio(rate, compiled)} | "
            f"{run.losses[0]:.4f} | {run.losses[-1]:.4f} | "
            f"{'n/a' if rel is None else f'{rel:.1e}'} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="tiny model on the CPU, few steps")
    parser.add_argument("--dtype", choices=("bfloat16", "float32"), default=None)
    parser.add_argument("--steps", type=int, default=None, help="training steps (default 100)")
    parser.add_argument("--warmup", type=int, default=None, help="steps left out of the timing")
    parser.add_argument(
        "--impls", default=None, help="comma-separated subset (default: all; --smoke: no +graph)"
    )
    parser.add_argument("--tune", action="store_true", help="autotune teeny_tx's products")
    parser.add_argument("--out", type=Path, default=None, help="write the table here")
    parser.add_argument("--plot", type=Path, default=None, help=f"PNG (default {PLOT})")
    args = parser.parse_args(argv)
    choices = CPU_IMPLS if args.smoke else IMPLS
    impls = args.impls.split(",") if args.impls else list(choices)
    unknown = [name for name in impls if name not in choices]
    if unknown:
        parser.error(f"unknown implementations {unknown}; choose from {', '.join(choices)}")

    import torch
    from gpt import CONFIGS, GPT, TEENY, TORCH, Batches, corpus, init_weights

    import teeny_tx.linalg as linalg

    if args.smoke:
        device, cfg, backend = torch.device("cpu"), CONFIGS["tiny"], "aot_eager"
        dtype = getattr(torch, args.dtype or "float32")
        steps, warmup = args.steps or 3, 1 if args.warmup is None else args.warmup
        where = "CPU (teeny_tx kernels on the NumPy interpreter)"
    else:
        if not torch.cuda.is_available():
            parser.error("needs a CUDA device (--smoke runs the tiny model on the CPU)")
        device, cfg, backend = torch.device("cuda"), CONFIGS["full"], "inductor"
        dtype = getattr(torch, args.dtype or "bfloat16")
        steps, warmup = args.steps or 100, 5 if args.warmup is None else args.warmup
        where = device_name()
        torch.backends.cuda.matmul.allow_tf32 = False
    if steps <= warmup:
        parser.error(f"--steps ({steps}) must exceed --warmup ({warmup})")
    linalg.TUNE = args.tune
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)

    text = corpus()
    vocab = Batches(text, cfg, 0, "cpu").vocab
    state = init_weights(GPT(cfg, vocab, TORCH), 0)
    tokens = cfg.batch * cfg.context

    def maker(lib, compiled: bool = False, graphed: bool = False):
        def make():
            model = GPT(cfg, vocab, lib).to(device)
            model.load_state_dict(state)
            model.to(dtype)
            kw = {"fused": True} if lib is TORCH and device.type == "cuda" else {}
            opt = lib.AdamW(model.parameters(), lr=cfg.lr, betas=(0.9, 0.95), **kw)
            forward = torch.compile(model, fullgraph=True, backend=backend) if compiled else model
            if graphed:
                return graph_step(model, opt)

            def step(x, y):
                opt.zero_grad(set_to_none=True)
                loss = forward(x, y)
                loss.backward()
                opt.step()
                return loss.detach()

            return step

        return make

    makers = {
        "teeny_tx": maker(TEENY),
        "teeny_tx+compile": maker(TEENY, compiled=True),
        "teeny_tx+graph": maker(TEENY, graphed=True),
        "torch": maker(TORCH),
        "torch+compile": maker(TORCH, compiled=True),
        "torch+graph": maker(TORCH, graphed=True),
    }
    runs = []
    for name in impls:
        run = Run(name)
        torch._dynamo.reset()
        start = time.perf_counter()
        try:
            train(makers[name], Batches(text, cfg, 0, device), steps, sync, run)
        except Exception as exc:  # noqa: BLE001 - a failed row is reported, the rest run
            run.error = report_failure(name, exc)
        rate = run.tokens_per_second(tokens, warmup)
        print(
            f"{name}: {'failed' if rate is None else f'{rate:,.0f} tokens/s'}, "
            f"{time.perf_counter() - start:.0f} s",
            flush=True,
        )
        runs.append(run)
        if device.type == "cuda":
            torch.cuda.empty_cache()

    when = utc_now()
    heading = (
        f"### GPT training, {cfg.layers} layers x {cfg.width}, {cfg.heads} heads, context "
        f"{cfg.context}, batch {cfg.batch}, {str(dtype).removeprefix('torch.')}, {steps} steps "
        f"(timed: the last {steps - warmup}), torch.compile backend {backend}"
    )
    text_table = table(runs, tokens, warmup, heading, when, where)
    print(text_table)
    if args.out:
        args.out.write_text(text_table)
    png = args.plot or (None if args.smoke else PLOT)  # a smoke run leaves the book's alone
    title = (
        f"char GPT {cfg.layers}L x {cfg.width}, {cfg.heads} heads, context {cfg.context}, "
        f"{str(dtype).removeprefix('torch.')}: training loss\n{when}, {where}"
    )
    if png is not None and plot(runs, png, title):
        print(f"wrote {png}")
    return 1 if any(r.error is not None for r in runs) else 0


if __name__ == "__main__":
    sys.exit(main())
