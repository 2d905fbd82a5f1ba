"""teeny_tx.torch.patch on small random-initialised transformers models (nothing downloaded),
CPU tensors (teeny_tx's kernels on the interpreter): forward and backward patched and
unpatched give the same logits, loss and gradients, in float32 and float64. Skipped without
transformers (the optional extra ``hf``)."""

from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import teeny_tx.torch as ttx  # noqa: E402
from teeny_tx import TeenyError  # noqa: E402

SIZES = {
    "hidden_size": 32,
    "intermediate_size": 48,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 61,
    "max_position_embeddings": 32,
}


def _model(family: str, dtype: torch.dtype) -> torch.nn.Module:
    config_cls = {
        "llama": transformers.LlamaConfig,
        "mistral": transformers.MistralConfig,
        "qwen2": transformers.Qwen2Config,
    }[family]
    model_cls = {
        "llama": transformers.LlamaForCausalLM,
        "mistral": transformers.MistralForCausalLM,
        "qwen2": transformers.Qwen2ForCausalLM,
    }[family]
    torch.manual_seed(1234)
    config = config_cls(**SIZES, attn_implementation="eager", tie_word_embeddings=False)
    return model_cls(config).to(dtype)


def _run(model, tokens, labels):
    model.zero_grad()
    out = model(input_ids=tokens, labels=labels)
    out.loss.backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return out.logits.detach(), out.loss.detach(), grads


@pytest.mark.parametrize("family", ["llama", "mistral", "qwen2"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_patched_model_matches_unpatched(family, dtype):
    model = _model(family, dtype)
    patched = copy.deepcopy(model)
    g = torch.Generator().manual_seed(7)
    tokens = torch.randint(0, SIZES["vocab_size"], (2, 9), generator=g)
    labels = tokens.clone()
    labels[0, :3] = -100
    want = _run(model, tokens, labels)
    counts = ttx.patch(patched)
    try:
        assert counts == {"rms_norm": 5, "mlp": 2, "rope": 1, "loss": 1}
        got = _run(patched, tokens, labels)
    finally:
        ttx.unpatch_rope(patched)
    tol = {"rtol": 1e-4, "atol": 1e-5}  # transformers' norms and loss compute in float32
    torch.testing.assert_close(got[0], want[0], **tol)
    torch.testing.assert_close(got[1], want[1], **tol)
    assert got[2].keys() == want[2].keys() and len(want[2]) == len(list(model.parameters()))
    for name, grad in want[2].items():
        scale = grad.abs().max().clamp_min(1e-12)
        assert (got[2][name] - grad).abs().max() / scale < 1e-4, name


def test_unpatch_rope_restores_the_family_function():
    import transformers.models.llama.modeling_llama as modelling

    own = modelling.apply_rotary_pos_emb
    model = _model("llama", torch.float32)
    ttx.patch(model)
    assert modelling.apply_rotary_pos_emb is not own
    ttx.unpatch_rope(model)
    assert modelling.apply_rotary_pos_emb is own


def test_patch_refuses_other_families():
    config = transformers.GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=11)
    with pytest.raises(TeenyError, match="knows llama, mistral, qwen2"):
        ttx.patch(transformers.GPT2LMHeadModel(config))
