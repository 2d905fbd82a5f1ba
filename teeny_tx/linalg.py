"""``teeny_tx.linalg``: matrix products with fused epilogues (bias, activation, scale) on
tensor cores. A facade: the wrappers live in :mod:`teeny_tx.library.linalg`."""

from .library.linalg import (
    MatmulConfig,
    bmm,
    hopper_report,
    linear,
    linear_backward,
    matmul,
    matmul_config,
    scaled_matmul,
)

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
