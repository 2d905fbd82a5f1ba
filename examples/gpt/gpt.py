"""A small character-level GPT, written once and built either from teeny_tx's ops or from plain
torch, so the two can be trained side by side from the same initialisation on the same data.

Input: a :class:`Config` and a layer library (:data:`TEENY` or :data:`TORCH`). Output: a
``torch.nn.Module`` whose parameters and state-dict keys do not depend on the library, so one
state dict initialises both. The text is the repository's own (README, docs/, kernels/):
nothing is downloaded.

Architecture (GPT-2's, pre-norm): token + position embeddings; ``layers`` blocks of
``h = h + attn(ln1(h))``, ``h = h + mlp(ln2(h))`` with a GELU MLP of width 4E; a final layer
norm; an untied head. With teeny_tx, the residual add and the next layer norm run as one
kernel (``add_layer_norm``), the MLP's GELU and every bias run in the matmul epilogue, the
loss is the fused cross-entropy and the optimizer is the fused AdamW.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

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
    context: int
    batch: int
    lr: float = 1e-3
    dropout: float = 0.0  # 0 when the two libraries are compared: their masks differ


CONFIGS = {
    "full": Config(layers=6, width=384, heads=6, context=256, batch=64, lr=6e-4),
    "tiny": Config(layers=2, width=32, heads=2, context=16, batch=4, lr=3e-3),
}


# ---------------------------------------------------------------- the two layer libraries


class _TorchLinear(nn.Linear):
    """nn.Linear followed by an optional activation: the reference for ttx.Linear."""

    def __init__(self, n_in, n_out, bias=True, activation=None):
        super().__init__(n_in, n_out, bias)
        self.activation = activation

    def forward(self, x):
        y = super().forward(x)
        return F.gelu(y) if self.activation == "gelu" else y


class _TorchAttention(nn.Module):
    """The reference for ttx.Attention: the same qkv / proj parameters, torch's SDPA."""

    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)

    def forward(self, x):
        b, n, e = x.shape
        qkv = self.qkv(x).view(b, n, 3, self.heads, e // self.heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(b, n, e))


def _torch_add_layer_norm(x, residual, weight, bias, eps=1e-5):
    h = x + residual
    return F.layer_norm(h, (h.shape[-1],), weight, bias, eps), h


TORCH = SimpleNamespace(
    name="torch",
    Linear=_TorchLinear,
    LayerNorm=nn.LayerNorm,
    Embedding=nn.Embedding,
    Attention=_TorchAttention,
    Dropout=nn.Dropout,
    add_layer_norm=_torch_add_layer_norm,
    cross_entropy=F.cross_entropy,
    AdamW=torch.optim.AdamW,
)

TEENY = SimpleNamespace(
    name="teeny_tx",
    Linear=lambda n_in, n_out, bias=True, activation=None: ttx.Linear(
        n_in, n_out, bias, activation=activation
    ),
    LayerNorm=ttx.LayerNorm,
    Embedding=ttx.Embedding,
    Attention=ttx.Attention,
    Dropout=ttx.Dropout,
    add_layer_norm=ttx.add_layer_norm,
    cross_entropy=ttx.cross_entropy,
    AdamW=ttx.AdamW,
)


# ---------------------------------------------------------------- the model


class Block(nn.Module):
    def __init__(self, cfg: Config, lib: SimpleNamespace):
        super().__init__()
        self.lib = lib
        self.attn = lib.Attention(cfg.width, cfg.heads)
        self.ln2 = lib.LayerNorm(cfg.width)
        self.fc = lib.Linear(cfg.width, 4 * cfg.width, activation="gelu")
        self.proj = lib.Linear(4 * cfg.width, cfg.width)
        self.drop = lib.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor, h: torch.Tensor, next_ln: nn.LayerNorm):
        """``x``: ln1(h), this block's input; returns (next_ln(h'), h') for the updated
        residual stream h', so each residual add fuses with the norm after it."""
        y, h = self.lib.add_layer_norm(
            self.drop(self.attn(x)), h, self.ln2.weight, self.ln2.bias, self.ln2.eps
        )
        m = self.drop(self.proj(self.fc(y)))
        return self.lib.add_layer_norm(m, h, next_ln.weight, next_ln.bias, next_ln.eps)


class GPT(nn.Module):
    def __init__(self, cfg: Config, vocab: int, lib: SimpleNamespace):
        super().__init__()
        self.cfg, self.lib = cfg, lib
        self.tok = lib.Embedding(vocab, cfg.width)
        self.pos = lib.Embedding(cfg.context, cfg.width)
        self.ln1 = nn.ModuleList(lib.LayerNorm(cfg.width) for _ in range(cfg.layers))
        self.blocks = nn.ModuleList(Block(cfg, lib) for _ in range(cfg.layers))
        self.ln_f = lib.LayerNorm(cfg.width)
        self.head = lib.Linear(cfg.width, vocab, bias=False)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        b, n = idx.shape
        positions = torch.arange(n, device=idx.device).expand(b, n)
        h = self.tok(idx) + self.pos(positions)
        x = self.ln1[0](h)
        for i, block in enumerate(self.blocks):
            next_ln = self.ln1[i + 1] if i + 1 < len(self.blocks) else self.ln_f
            x, h = block(x, h, next_ln)
        logits = self.head(x)
        return self.lib.cross_entropy(logits.view(b * n, -1), targets.reshape(-1))


def init_weights(model: GPT, seed: int) -> dict[str, torch.Tensor]:
    """GPT-2's initialisation (normal, std 0.02; zero biases; unit norms), from ``seed``: a
    state dict to load into either library's model."""
    g = torch.Generator().manual_seed(seed)
    state = {}
    for name, p in model.state_dict().items():
        if name.endswith("bias"):
            state[name] = torch.zeros_like(p, device="cpu")
        elif p.dim() == 1:  # the norms' weights
            state[name] = torch.ones_like(p, device="cpu")
        else:
            state[name] = 0.02 * torch.randn(p.shape, generator=g)
    return state


# ---------------------------------------------------------------- data


def corpus() -> str:
    """The repository's own text: README.md, docs/*.md and kernels/*.c, in sorted order."""
    files = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    files += sorted((ROOT / "kernels").glob("*.c"))
    return "\n".join(f.read_text(encoding="utf-8") for f in files if f.exists())


class Batches:
    """Random windows of the encoded text, the same sequence for one seed."""

    def __init__(self, text: str, cfg: Config, seed: int, device: torch.device):
        chars = sorted(set(text))
        self.vocab = len(chars)
        index = {c: i for i, c in enumerate(chars)}
        self.data = torch.tensor([index[c] for c in text], dtype=torch.int64)
        self.cfg, self.device = cfg, device
        self.gen = torch.Generator().manual_seed(seed)

    def next(self) -> tuple[torch.Tensor, torch.Tensor]:
        n = self.cfg.context
        starts = torch.randint(0, len(self.data) - n - 1, (self.cfg.batch,), generator=self.gen)
        x = torch.stack([self.data[s : s + n] for s in starts.tolist()])
        y = torch.stack([self.data[s + 1 : s + n + 1] for s in starts.tolist()])
        return x.to(self.device), y.to(self.device)
