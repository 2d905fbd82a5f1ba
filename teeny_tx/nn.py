"""``teeny_tx.nn``: the row operations of neural networks (softmax, norms, cross-entropy,
dropout), forward and backward. A facade: the wrappers live in :mod:`teeny_tx.library.nn`."""

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
