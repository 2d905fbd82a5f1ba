"""``teeny_tx.linalg``: matrix products with fused epilogues (bias, activation, scale) on
tensor cores. A facade: the wrappers live in :mod:`teeny_tx.library.linalg`."""

from .library import linalg as _linalg
from .library.autograd_guard import guarded as _guarded
from .library.linalg import MatmulConfig, hopper_report, matmul_config

# Torch tensors that require grad, and torch.compile tracing, are refused with the name of
# the teeny_tx.torch op to call instead (library/autograd_guard.py).
bmm = _guarded(_linalg.bmm, "teeny_tx.linalg", "matmul")
linear = _guarded(_linalg.linear, "teeny_tx.linalg", "linear")
linear_backward = _guarded(_linalg.linear_backward, "teeny_tx.linalg", None)
matmul = _guarded(_linalg.matmul, "teeny_tx.linalg", "matmul")
scaled_matmul = _guarded(_linalg.scaled_matmul, "teeny_tx.linalg", None)

__all__ = [
    "MatmulConfig",
    "bmm",
    "hopper_report",
    "linear",
    "linear_backward",
    "matmul",
    "matmul_config",
    "scaled_matmul",
]
