"""``teeny_tx.nn``: the row operations of neural networks (softmax, norms, cross-entropy,
dropout) and attention, forward and backward. A facade: the wrappers live in
:mod:`teeny_tx.library.nn` and :mod:`teeny_tx.library.attention`."""

from .library import attention as _attention
from .library import nn as _nn
from .library.autograd_guard import guarded as _guarded
from .library.nn import partial_programs, row_config

# Torch tensors that require grad, and torch.compile tracing, are refused with the name of
# the teeny_tx.torch op to call instead (library/autograd_guard.py).
attention = _guarded(_attention.attention, "teeny_tx.nn", "attention")
attention_backward = _guarded(_attention.attention_backward, "teeny_tx.nn", None)
attention_varlen = _guarded(_attention.attention_varlen, "teeny_tx.nn", "flash_attn_varlen_func")
attention_varlen_backward = _guarded(_attention.attention_varlen_backward, "teeny_tx.nn", None)
cross_entropy = _guarded(_nn.cross_entropy, "teeny_tx.nn", "cross_entropy")
cross_entropy_backward = _guarded(_nn.cross_entropy_backward, "teeny_tx.nn", None)
dropout = _guarded(_nn.dropout, "teeny_tx.nn", "dropout")
dropout_backward = _guarded(_nn.dropout_backward, "teeny_tx.nn", None)
layer_norm = _guarded(_nn.layer_norm, "teeny_tx.nn", "layer_norm")
layer_norm_backward = _guarded(_nn.layer_norm_backward, "teeny_tx.nn", None)
log_softmax = _guarded(_nn.log_softmax, "teeny_tx.nn", "log_softmax")
log_softmax_backward = _guarded(_nn.log_softmax_backward, "teeny_tx.nn", None)
rms_norm = _guarded(_nn.rms_norm, "teeny_tx.nn", "rms_norm")
rms_norm_backward = _guarded(_nn.rms_norm_backward, "teeny_tx.nn", None)
softmax = _guarded(_nn.softmax, "teeny_tx.nn", "softmax")
softmax_backward = _guarded(_nn.softmax_backward, "teeny_tx.nn", None)

__all__ = [
    "attention",
    "attention_backward",
    "attention_varlen",
    "attention_varlen_backward",
    "cross_entropy",
    "cross_entropy_backward",
    "dropout",
    "dropout_backward",
    "layer_norm",
    "layer_norm_backward",
    "log_softmax",
    "log_softmax_backward",
    "partial_programs",
    "rms_norm",
    "rms_norm_backward",
    "row_config",
    "softmax",
    "softmax_backward",
]
