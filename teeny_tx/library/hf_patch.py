"""Hugging Face models on teeny_tx's ops, as Liger-Kernel patches them: :func:`patch` swaps a
``transformers`` Llama, Mistral or Qwen2 model's RMSNorm, rotary embedding, gated MLP and
causal-LM loss for ``teeny_tx.torch``'s.

Input: a ``transformers`` model (``LlamaForCausalLM``, ``MistralForCausalLM``,
``Qwen2ForCausalLM`` or their base models). Output: the same model, its modules patched in
place (their parameters untouched, so checkpoints load and save as before):

- every ``*RMSNorm`` (``weight``, ``variance_epsilon``): ``teeny_tx.torch.rms_norm``;
- every gated ``*MLP`` (``gate_proj``, ``up_proj``, ``down_proj``, a SiLU ``act_fn``, no
  biases): ``linear`` and ``swiglu``;
- the family's ``apply_rotary_pos_emb`` (a function of the model's modelling module: patched
  there, so every model of that family in the process takes it): ``teeny_tx.torch.rope``;
- the model's ``loss_function`` (a causal LM's): ``ForCausalLMLoss``'s shift and reduction
  over ``teeny_tx.torch.cross_entropy``.

Attention is left to the model's own attention interface. ``transformers`` is imported only
by the caller: this module needs nothing of it but the model it is given.
"""

from __future__ import annotations

import sys
from typing import Any

import torch
import torch.nn.functional as F

from ..errors import TeenyError
from . import llm_ops, torch_ops

FAMILIES = ("llama", "mistral", "qwen2")
_ORIGINAL_ROPE: dict[str, Any] = {}  # modelling module name -> its own apply_rotary_pos_emb


def _rms_norm_forward(self: Any, hidden_states: torch.Tensor) -> torch.Tensor:
    x = hidden_states
    return torch_ops.rms_norm(x, (x.shape[-1],), self.weight.to(x.dtype), self.variance_epsilon)


def _mlp_forward(self: Any, x: torch.Tensor) -> torch.Tensor:
    gate = torch_ops.linear(x, self.gate_proj.weight.to(x.dtype))
    up = torch_ops.linear(x, self.up_proj.weight.to(x.dtype))
    return torch_ops.linear(torch_ops.swiglu(gate, up), self.down_proj.weight.to(x.dtype))


def apply_rotary_pos_emb(
    q: torch.Tensor,
    k: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    position_ids: Any = None,
    unsqueeze_dim: int = 1,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Hugging Face's ``apply_rotary_pos_emb`` (q, k [B, H, N, D]; cos, sin [B, N, D]) as one
    ``teeny_tx.torch.rope`` launch."""
    if unsqueeze_dim != 1:
        raise TeenyError(
            "teeny_tx's apply_rotary_pos_emb takes q and k [B, H, N, D] (unsqueeze_dim=1)"
        )
    return llm_ops.rope(q, k, cos.to(q.dtype), sin.to(q.dtype))


def causal_lm_loss(
    logits: torch.Tensor,
    labels: torch.Tensor,
    vocab_size: int,
    num_items_in_batch: torch.Tensor | int | None = None,
    ignore_index: int = -100,
    shift_labels: torch.Tensor | None = None,
    **kwargs: Any,
) -> torch.Tensor:
    """``transformers``' ``ForCausalLMLoss`` over ``teeny_tx.torch.cross_entropy``: the
    logits in f32, the labels shifted by one, the mean over the tokens kept (or the
    sum over ``num_items_in_batch``)."""
    logits = logits.float()  # as transformers: f32 whatever the model's dtype
    if shift_labels is None:
        shift_labels = F.pad(labels, (0, 1), value=ignore_index)[..., 1:]
    shift_labels = shift_labels.reshape(-1).to(logits.device)
    reduction = "sum" if num_items_in_batch is not None else "mean"
    loss = llm_ops.cross_entropy(
        logits.reshape(-1, vocab_size), shift_labels, ignore_index=ignore_index, reduction=reduction
    )
    if num_items_in_batch is not None:
        if isinstance(num_items_in_batch, torch.Tensor):
            num_items_in_batch = num_items_in_batch.to(loss.device)
        loss = loss / num_items_in_batch
    return loss


def _is_rms_norm(m: torch.nn.Module) -> bool:
    return type(m).__name__.endswith("RMSNorm") and hasattr(m, "variance_epsilon")


def _is_gated_mlp(m: torch.nn.Module) -> bool:
    parts = [getattr(m, p, None) for p in ("gate_proj", "up_proj", "down_proj")]
    if not all(isinstance(p, torch.nn.Linear) for p in parts):
        return False
    if any(p.bias is not None for p in parts):  # type: ignore[union-attr]
        return False
    act = getattr(m, "act_fn", None)
    return isinstance(act, torch.nn.SiLU) or type(act).__name__ == "SiLUActivation"


def patch(
    model: torch.nn.Module,
    *,
    rms_norm: bool = True,
    rope: bool = True,
    mlp: bool = True,
    loss: bool = True,
) -> dict[str, int]:
    """Patch ``model`` (a ``transformers`` Llama, Mistral or Qwen2) in place with teeny_tx's
    ops; returns how many of each were patched (``{'rms_norm': 5, 'mlp': 2, 'rope': 1,
    'loss': 1}``). A model of another family is refused (its modules may differ)."""
    config = getattr(model, "config", None)
    family = getattr(config, "model_type", None)
    if family not in FAMILIES:
        raise TeenyError(
            f"teeny_tx.torch.patch knows {', '.join(FAMILIES)} models, not {family!r} "
            f"({type(model).__name__})"
        )
    counts = {"rms_norm": 0, "mlp": 0, "rope": 0, "loss": 0}
    for m in model.modules():
        if rms_norm and _is_rms_norm(m):
            m.forward = _rms_norm_forward.__get__(m)
            counts["rms_norm"] += 1
        elif mlp and _is_gated_mlp(m):
            m.forward = _mlp_forward.__get__(m)
            counts["mlp"] += 1
    if rope:
        modelling = sys.modules.get(type(model).__module__)
        if modelling is not None and hasattr(modelling, "apply_rotary_pos_emb"):
            own = modelling.apply_rotary_pos_emb
            if own is not apply_rotary_pos_emb:
                _ORIGINAL_ROPE[modelling.__name__] = own
            modelling.apply_rotary_pos_emb = apply_rotary_pos_emb  # type: ignore[attr-defined]
            counts["rope"] = 1
    if loss and hasattr(model, "lm_head"):
        model.loss_function = causal_lm_loss  # type: ignore[assignment]
        counts["loss"] = 1
    return counts


def unpatch_rope(model: torch.nn.Module) -> None:
    """Give ``model``'s modelling module its own ``apply_rotary_pos_emb`` back (the rotary
    patch is module-wide; the other patches live on the model's modules)."""
    name = type(model).__module__
    modelling = sys.modules.get(name)
    if modelling is not None and name in _ORIGINAL_ROPE:
        modelling.apply_rotary_pos_emb = _ORIGINAL_ROPE.pop(name)  # type: ignore[attr-defined]
