"""teeny_tx for PyTorch (the optional extra ``teeny-tx[torch]``): the kernel library as
``torch.library`` custom ops (``torch.ops.teeny_tx.*``), functional forms shaped like
``torch.nn.functional``'s, ``torch.nn.Module`` drop-ins, ``torch.optim`` drop-ins (AdamW, and
``teeny_tx.torch.optim``: SGD, Adam, RMSprop, Adagrad, Lion), and :func:`op`,
which makes your own kernels an op.

CUDA tensors run on the GPU on torch's current stream; CPU tensors run the same kernels on the
NumPy interpreter. Every op works under autograd, ``torch.compile(fullgraph=True)`` and, once
warmed up, CUDA-graph capture. See docs/graph-ops.md.
"""

from __future__ import annotations

from .library import families, norm_families, pad_families, pool_families
from .library import optimizers as optim
from .library.families import *  # noqa: F403  (the generated families: elu, ELU, ...)
from .library.graph_ops import Launch, op
from .library.hf_patch import patch, unpatch_rope
from .library.llm_ops import (
    GEGLUMLP,
    FusedLinearCrossEntropyLoss,
    RotaryEmbedding,
    cross_entropy,
    fused_linear_cross_entropy,
    geglu,
    rms_norm_offset,
    rope,
)
from .library.llm_ops import RMSNorm as LigerRMSNorm
from .library.modules import (
    GELU,
    AdamW,
    Attention,
    CrossEntropyLoss,
    Dropout,
    Embedding,
    LayerNorm,
    Linear,
    MultiheadAttention,
    RMSNorm,
)
from .library.norm_families import *  # noqa: F403  (batch_norm, BatchNorm2d, ...)
from .library.optimizers import *  # noqa: F403  (SGD, Adam, RMSprop, Adagrad, Lion)
from .library.pad_families import *  # noqa: F403  (pad, ReflectionPad2d, ...)
from .library.pool_families import *  # noqa: F403  (max_pool2d, MaxPool2d, ...)
from .library.sdpa import (
    attention,
    flash_attn_func,
    flash_attn_varlen_func,
    scaled_dot_product_attention,
)
from .library.torch_ops import (
    add_layer_norm,
    add_rms_norm,
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
    set_index_checks,
    silu,
    softmax,
    swiglu,
)

__all__ = [
    "GEGLUMLP",
    "GELU",
    "FusedLinearCrossEntropyLoss",
    "LigerRMSNorm",
    "RotaryEmbedding",
    "AdamW",
    "Attention",
    "MultiheadAttention",
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
    "fused_linear_cross_entropy",
    "geglu",
    "flash_attn_func",
    "flash_attn_varlen_func",
    "gelu",
    "layer_norm",
    "linear",
    "log_softmax",
    "matmul",
    "new_seed",
    "op",
    "patch",
    "relu",
    "rms_norm",
    "rms_norm_offset",
    "rope",
    "set_index_checks",
    "scaled_dot_product_attention",
    "silu",
    "softmax",
    "swiglu",
    "unpatch_rope",
]
__all__ += families.__all__
__all__ += norm_families.__all__
__all__ += pad_families.__all__
__all__ += pool_families.__all__
__all__ += [*optim.__all__, "optim"]
