"""Train the character-level GPT of gpt.py with teeny_tx's ops and, from the same
initialisation on the same batches, the same model in plain torch; compare.

    python examples/gpt/train.py                      # full size on a GPU, tiny on a CPU
    python examples/gpt/train.py --config tiny --steps 20 --device cpu
    python examples/gpt/train.py --compile --graph    # torch.compile; forward + backward
                                                      # captured once, replayed each step

Output: one line per step (both losses and their relative difference), a check that every
parameter's gradient at step 1 matches torch's, the losses as JSON and, with matplotlib, a PNG
plot of both curves stamped with the date and the device (``--out``, default
``examples/gpt/out``). Exits with status 1 when a check fails: gradients outside ``--grad-tol``
(relative to each gradient's largest element) or a loss outside ``--loss-rtol`` of torch's.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpt import CONFIGS, GPT, TEENY, TORCH, Batches, corpus, init_weights  # noqa: E402


def build(lib, cfg, vocab, state, device, dtype):
    model = GPT(cfg, vocab, lib).to(device)
    model.load_state_dict(state)
    model.to(dtype)
    opt = lib.AdamW(model.parameters(), lr=cfg.lr, betas=(0.9, 0.95), weight_decay=0.1)
    return model, opt


def eager_step(model):
    def step(x, y):
        for p in model.parameters():
            p.grad = None
        loss = model(x, y)
        loss.backward()
        return loss

    return step


def graphed_step(model, x0, y0):
    """Forward and backward captured in one CUDA graph (after two warm-up passes on a side
    stream, which compile, load and tune every kernel), replayed on copies of each batch; the
    optimizer steps outside the graph (its step count lives on the host)."""
    sx, sy = x0.clone(), y0.clone()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            model(sx, sy).backward()
    torch.cuda.current_stream().wait_stream(side)
    params = [p for p in model.parameters() if p.grad is not None]
    for p in params:
        p.grad.zero_()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        loss = model(sx, sy)
        loss.backward()

    def step(x, y):
        sx.copy_(x)
        sy.copy_(y)
        for p in params:
            p.grad.zero_()
        graph.replay()
        return loss

    return step


def grad_errors(ours, theirs) -> dict[str, float]:
    """Each parameter's largest gradient difference relative to torch's largest element."""
    errors = {}
    theirs = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        want = theirs[name].grad.double()
        scale = want.abs().max().item() or 1.0
        errors[name] = (p.grad.double() - want).abs().max().item() / scale
    return errors


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return "CPU (teeny_tx kernels on the NumPy interpreter)"


def plot(path: Path, losses: dict, title: str) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for name, values in losses.items():
        style = "--" if name == "teeny_tx" else "-"  # dashed over solid: both show
        ax.plot(range(1, len(values) + 1), values, style, label=name, linewidth=1.2)
    ax.set_xlabel("step")
    ax.set_ylabel("training loss (cross-entropy, nats)")
    ax.set_title(title, fontsize=9)
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", choices=sorted(CONFIGS), default=None)
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--compile", action="store_true", help="torch.compile(fullgraph=True)")
    parser.add_argument("--graph", action="store_true", help="replay a CUDA graph (GPU)")
    parser.add_argument("--no-reference", action="store_true", help="train teeny_tx's only")
    parser.add_argument("--grad-tol", type=float, default=1e-4)
    parser.add_argument("--loss-rtol", type=float, default=None)
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "out")
    args = parser.parse_args(argv)

    device = torch.device(args.device)
    cfg = CONFIGS[args.config or ("full" if device.type == "cuda" else "tiny")]
    steps = args.steps or (500 if cfg is CONFIGS["full"] else 10)
    dtype = getattr(torch, args.dtype)
    loss_rtol = args.loss_rtol or (1e-3 if dtype == torch.float32 else 5e-2)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False  # both sides multiply in IEEE f32
        torch.backends.cudnn.allow_tf32 = False

    text = corpus()
    data = {lib.name: Batches(text, cfg, args.seed, device) for lib in (TEENY, TORCH)}
    vocab = data["teeny_tx"].vocab
    state = init_weights(GPT(cfg, vocab, TORCH), args.seed)
    libs = [TEENY] if args.no_reference else [TEENY, TORCH]
    runs = {lib.name: build(lib, cfg, vocab, state, device, dtype) for lib in libs}
    if args.graph and device.type != "cuda":
        parser.error("--graph needs a CUDA device")
    steps_of = {}
    for name, (model, _) in runs.items():
        forward = torch.compile(model, fullgraph=True) if args.compile else model
        if args.graph:
            steps_of[name] = graphed_step(forward, *Batches(text, cfg, args.seed, device).next())
        else:
            steps_of[name] = eager_step(forward)

    print(
        f"GPT {cfg} vocab {vocab}, {len(text)} characters; {steps} steps on "
        f"{device_name(device)}, {args.dtype}{', compiled' if args.compile else ''}"
        f"{', CUDA graph' if args.graph else ''}"
    )
    losses: dict[str, list[float]] = {name: [] for name in runs}
    failures = []
    tokens = cfg.batch * cfg.context
    for step in range(1, steps + 1):
        seconds = {}
        for name, (model, opt) in runs.items():
            x, y = data[name].next()
            start = time.perf_counter()
            loss = steps_of[name](x, y)
            if step == 1 and name == "torch" and "teeny_tx" in runs:
                errors = grad_errors(runs["teeny_tx"][0], model)
                worst = max(errors, key=errors.get)
                ok = errors[worst] <= args.grad_tol
                print(
                    f"step 1 gradients: {len(errors)} parameters, worst {worst} "
                    f"{errors[worst]:.2e} relative (tolerance {args.grad_tol:g}) "
                    f"{'ok' if ok else 'FAILED'}"
                )
                if not ok:
                    failures.append(f"gradient of {worst}")
            opt.step()
            losses[name].append(loss.item())
            seconds[name] = time.perf_counter() - start
        line = f"step {step:4d}  " + "  ".join(
            f"{name} {losses[name][-1]:.4f} ({tokens / seconds[name]:,.0f} tok/s)" for name in runs
        )
        if len(runs) == 2:
            a, b = losses["teeny_tx"][-1], losses["torch"][-1]
            rel = abs(a - b) / abs(b)
            line += f"  rel diff {rel:.1e}"
            if rel > loss_rtol:
                failures.append(f"loss at step {step} ({rel:.1e} > {loss_rtol:g})")
        print(line)

    args.out.mkdir(parents=True, exist_ok=True)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    title = (
        f"char GPT {cfg.layers}L x {cfg.width}, {cfg.heads} heads, context {cfg.context}: "
        f"teeny_tx vs torch, {args.dtype}\n{stamp}, {device_name(device)}"
    )
    record = {"config": cfg.__dict__, "device": device_name(device), "date": stamp}
    record |= {"dtype": args.dtype, "losses": losses, "loss_rtol": loss_rtol}
    (args.out / "losses.json").write_text(json.dumps(record, indent=1))
    png = args.out / "losses.png"
    print(f"wrote {args.out / 'losses.json'}" + (f" and {png}" if plot(png, losses, title) else ""))
    if failures:
        print("FAILED: " + "; ".join(failures[:5]))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
