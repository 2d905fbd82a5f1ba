"""teeny_tx for PyTorch (the optional extra ``teeny-tx[torch]``): the kernel library as
``torch.library`` custom ops (``torch.ops.teeny_tx.*``), functional forms shaped like
``torch.nn.functional``'s, ``torch.nn.Module`` drop-ins, an AdamW optimizer, and :func:`op`,
which makes your own kernels an op.

CUDA tensors run on the GPU on torch's current stream; CPU tensors run the same kernels on the
NumPy interpreter. Every op works under autograd, ``torch.compile(fullgraph=True)`` and, once
warmed up, CUDA-graph capture. See docs/graph-ops.md.
"""

from __future__ import annotations

from .library import families
from .library.families import *  # noqa: F403  (the generated families: elu, ELU, ...)
from .library.graph_ops import Launch, op
from .library.modules import (
    GELU,
    AdamW,
    Attention,
    CrossEntropyLoss,
    Dropout,
    Embedding,
    LayerNorm,
    Linear,
    RMSNorm,
)
from .library.torch_ops import (
    add_layer_norm,
    add_rms_norm,
    attention,
    cross_entropy,
    dropout,
    embedding,
    gelu,
    layer_norm,
    linear,
    log_softmax,
    matmul,
    new_seed,
    relu,
    rms_norm,
    silu,
    softmax,
    swiglu,
)

__all__ = [
    "GELU",
    "AdamW",
    "Attention",
    "CrossEntropyLoss",
    "Dropout",
    "Embedding",
    "LayerNorm",
    "Launch",
    "Linear",
    "RMSNorm",
    "add_layer_norm",
    "add_rms_norm",
    "attention",
    "cross_entropy",
    "dropout",
    "embedding",
    "gelu",
    "layer_norm",
    "linear",
    "log_softmax",
    "matmul",
    "new_seed",
    "op",
    "relu",
    "rms_norm",
    "silu",
    "softmax",
    "swiglu",
]
__all__ += families.__all__
