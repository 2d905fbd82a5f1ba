"""examples/llama: the tiny Llama-style model (RMSNorm, RoPE, grouped-query attention, SwiGLU,
tied embeddings, the fused linear + cross-entropy) on CPU tensors, teeny_tx's kernels on the
interpreter, against the same model in plain torch from one initialisation on the same
batches: gradients at step 1 within 1e-4 (relative to each one's largest element), every
loss within 1e-4 relative, and the loss falls."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

LLAMA = Path(__file__).resolve().parents[1] / "examples" / "llama" / "llama.py"


def _llama():
    spec = importlib.util.spec_from_file_location("llama_example", LLAMA)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # (its dataclasses look their module up)
    spec.loader.exec_module(module)
    return module


def test_tiny_llama_tracks_torch():
    llama = _llama()
    losses = llama.train(llama.CONFIGS["tiny"], steps=3)
    assert losses["grad_diff"][0] < 1e-4
    ours, theirs = losses["teeny_tx"], losses["torch"]
    assert len(ours) == len(theirs) == 3
    for a, b in zip(ours, theirs, strict=True):
        assert abs(a - b) <= 1e-4 * abs(b)
    assert ours[-1] < ours[0]


def test_tiny_llama_parameters_are_the_libraries_same():
    llama = _llama()
    cfg = llama.CONFIGS["tiny"]
    a, b = llama.Llama(cfg, "torch"), llama.Llama(cfg, "teeny_tx")
    assert list(a.state_dict()) == list(b.state_dict())
    assert "lm_head.weight" not in a.state_dict()  # tied to embed_tokens
