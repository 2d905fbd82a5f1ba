"""``teeny_tx.nn``: the row operations of neural networks (softmax, norms, cross-entropy,
dropout) and attention, forward and backward. A facade: the wrappers live in
:mod:`teeny_tx.library.nn` and :mod:`teeny_tx.library.attention`."""

from .library.attention import attention, attention_backward
from .library.nn import (
    cross_entropy,
    cross_entropy_backward,
    dropout,
    dropout_backward,
    layer_norm,
    layer_norm_backward,
    log_softmax,
    log_softmax_backward,
    partial_programs,
    rms_norm,
    rms_norm_backward,
    row_config,
    softmax,
    softmax_backward,
)

__all__ = [
    "attention",
    "attention_backward",
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
