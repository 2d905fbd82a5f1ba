"""A small Llama-style language model written once and built from teeny_tx's ops or from plain
torch, so the two train side by side from one initialisation on the same batches.

Input: a :class:`Config` and a library name ("teeny_tx" or "torch"). Output: a
``torch.nn.Module`` whose parameter names do not depend on the library (one state dict
initialises both). The text is the repository's own bytes (README, docs): nothing is
downloaded.

Architecture (Llama's): token embeddings tied to the head; ``layers`` blocks of
``h = h + attn(rms_norm(h))``, ``h = h + mlp(rms_norm(h))``; grouped-query attention (``heads``
query heads sharing ``kv_heads`` key/value heads) with rotary embeddings (rotate-half);
a SwiGLU MLP without biases; a final RMSNorm; the loss is cross-entropy over the tied head.
With teeny_tx: the norms are ``rms_norm``, q and k rotate in one ``rope`` launch, attention is
``teeny_tx.torch.attention`` (k and v heads repeated to the query heads), the MLP's gate runs
as ``swiglu``, and the loss is the fused linear + cross-entropy (the logits never whole).

``python examples/llama/llama.py --steps 3`` trains the tiny configuration on the CPU (the
interpreter) and prints both losses; ``--device cuda --config small`` on a GPU.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

import teeny_tx.torch as ttx

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Config:
    layers: int
    width: int
    heads: int
    kv_heads: int
    hidden: int
    context: int
    batch: int
    vocab: int = 256  # bytes
    theta: float = 10000.0
    eps: float = 1e-5
    lr: float = 3e-3


CONFIGS = {
    "tiny": Config(layers=2, width=32, heads=4, kv_heads=2, hidden=64, context=8, batch=2),
    "small": Config(
        layers=6, width=512, heads=8, kv_heads=2, hidden=1408, context=256, batch=32, lr=6e-4
    ),
}


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), -1)


class Attention(nn.Module):
    def __init__(self, cfg: Config, lib: str):
        super().__init__()
        self.cfg, self.lib = cfg, lib
        d = cfg.width // cfg.heads
        self.q_proj = nn.Linear(cfg.width, cfg.heads * d, bias=False)
        self.k_proj = nn.Linear(cfg.width, cfg.kv_heads * d, bias=False)
        self.v_proj = nn.Linear(cfg.width, cfg.kv_heads * d, bias=False)
        self.o_proj = nn.Linear(cfg.heads * d, cfg.width, bias=False)

    def _proj(self, layer: nn.Linear, x: torch.Tensor) -> torch.Tensor:
        return ttx.linear(x, layer.weight) if self.lib == "teeny_tx" else layer(x)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        cfg = self.cfg
        b, n, _ = x.shape
        d = cfg.width // cfg.heads
        q = self._proj(self.q_proj, x).view(b, n, cfg.heads, d).transpose(1, 2)
        k = self._proj(self.k_proj, x).view(b, n, cfg.kv_heads, d).transpose(1, 2)
        v = self._proj(self.v_proj, x).view(b, n, cfg.kv_heads, d).transpose(1, 2)
        group = cfg.heads // cfg.kv_heads
        if self.lib == "teeny_tx":
            q, k = ttx.rope(q, k, cos, sin)
            k, v = (t.repeat_interleave(group, 1) for t in (k, v))
            y = ttx.attention(q, k, v, causal=True)
        else:
            q, k = q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin
            k, v = (t.repeat_interleave(group, 1) for t in (k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self._proj(self.o_proj, y.transpose(1, 2).reshape(b, n, cfg.heads * d))


class MLP(nn.Module):
    def __init__(self, cfg: Config, lib: str):
        super().__init__()
        self.lib = lib
        self.gate_proj = nn.Linear(cfg.width, cfg.hidden, bias=False)
        self.up_proj = nn.Linear(cfg.width, cfg.hidden, bias=False)
        self.down_proj = nn.Linear(cfg.hidden, cfg.width, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.lib == "teeny_tx":
            gate = ttx.linear(x, self.gate_proj.weight)
            up = ttx.linear(x, self.up_proj.weight)
            return ttx.linear(ttx.swiglu(gate, up), self.down_proj.weight)
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Norm(nn.Module):
    def __init__(self, cfg: Config, lib: str):
        super().__init__()
        self.lib, self.eps = lib, cfg.eps
        self.weight = nn.Parameter(torch.ones(cfg.width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.lib == "teeny_tx":
            return ttx.rms_norm(x, (x.shape[-1],), self.weight, self.eps)
        return F.rms_norm(x, (x.shape[-1],), self.weight, self.eps)


class Block(nn.Module):
    def __init__(self, cfg: Config, lib: str):
        super().__init__()
        self.input_layernorm = Norm(cfg, lib)
        self.self_attn = Attention(cfg, lib)
        self.post_attention_layernorm = Norm(cfg, lib)
        self.mlp = MLP(cfg, lib)

    def forward(self, h: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        h = h + self.self_attn(self.input_layernorm(h), cos, sin)
        return h + self.mlp(self.post_attention_layernorm(h))


class Llama(nn.Module):
    def __init__(self, cfg: Config, lib: str):
        super().__init__()
        self.cfg, self.lib = cfg, lib
        self.embed_tokens = nn.Embedding(cfg.vocab, cfg.width)
        self.layers = nn.ModuleList(Block(cfg, lib) for _ in range(cfg.layers))
        self.norm = Norm(cfg, lib)
        d = cfg.width // cfg.heads
        inv = 1.0 / (cfg.theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
        freqs = torch.outer(torch.arange(cfg.context, dtype=torch.float64), inv)
        full = torch.cat((freqs, freqs), -1)
        self.register_buffer("cos", full.cos().float(), persistent=False)
        self.register_buffer("sin", full.sin().float(), persistent=False)
        for p in self.parameters():  # Llama's initialisation: N(0, 0.02), norms at 1
            if p.dim() == 2:
                nn.init.normal_(p, std=0.02)

    def forward(self, tokens: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        n = tokens.shape[1]
        cos = self.get_buffer("cos")[:n].to(self.embed_tokens.weight.dtype)
        sin = self.get_buffer("sin")[:n].to(self.embed_tokens.weight.dtype)
        table = self.embed_tokens.weight
        embed = ttx.embedding if self.lib == "teeny_tx" else F.embedding
        h = embed(tokens, table)
        for block in self.layers:
            h = block(h, cos, sin)
        h = self.norm(h).reshape(-1, self.cfg.width)
        if self.lib == "teeny_tx":  # the head tied to the embedding, the logits never whole
            return ttx.fused_linear_cross_entropy(h, table, targets.reshape(-1))
        return F.cross_entropy(F.linear(h, table), targets.reshape(-1))


def batches(cfg: Config, steps: int, seed: int = 0) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """``steps`` batches of (tokens, next tokens) from the repository's README bytes."""
    data = torch.tensor(list((ROOT / "README.md").read_bytes()), dtype=torch.long)
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(steps):
        start = torch.randint(0, len(data) - cfg.context - 1, (cfg.batch,), generator=g)
        rows = torch.stack([data[s : s + cfg.context + 1] for s in start.tolist()])
        out.append((rows[:, :-1], rows[:, 1:]))
    return out


def train(
    cfg: Config, steps: int, device: str = "cpu", dtype: torch.dtype = torch.float32
) -> dict[str, list[float]]:
    """Both models from one initialisation, ``steps`` AdamW steps on the same batches: the
    losses of each, and at step 1 the largest gradient difference (relative to the largest
    element of each gradient)."""
    torch.manual_seed(0)
    ref = Llama(cfg, "torch").to(device=device, dtype=dtype)
    ours = Llama(cfg, "teeny_tx").to(device=device, dtype=dtype)
    ours.load_state_dict(ref.state_dict())
    opts = {
        name: torch.optim.AdamW(model.parameters(), lr=cfg.lr)
        for name, model in (("torch", ref), ("teeny_tx", ours))
    }
    losses: dict[str, list[float]] = {"torch": [], "teeny_tx": [], "grad_diff": []}
    for step, (x, y) in enumerate(batches(cfg, steps)):
        x, y = x.to(device), y.to(device)
        for name, model in (("torch", ref), ("teeny_tx", ours)):
            opts[name].zero_grad()
            loss = model(x, y)
            loss.backward()
            losses[name].append(float(loss.detach()))
        if step == 0:
            worst = 0.0
            for (_, a), (_, b) in zip(ref.named_parameters(), ours.named_parameters(), strict=True):
                assert a.grad is not None and b.grad is not None
                scale = float(a.grad.abs().max()) or 1.0
                worst = max(worst, float((a.grad - b.grad).abs().max()) / scale)
            losses["grad_diff"].append(worst)
        for opt in opts.values():
            opt.step()
    return losses


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", choices=sorted(CONFIGS), default="tiny")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)
    losses = train(CONFIGS[args.config], args.steps, args.device)
    print(f"step 1 gradients: worst {losses['grad_diff'][0]:.2e} relative")
    for i, (a, b) in enumerate(zip(losses["teeny_tx"], losses["torch"], strict=True)):
        print(f"step {i + 1:4d}  teeny_tx {a:.4f}  torch {b:.4f}  rel diff {abs(a - b) / b:.1e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
