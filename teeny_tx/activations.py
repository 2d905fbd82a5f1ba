"""The activations of the fused epilogues and elementwise kernels: one table, read by all.

Input: nothing (declarations). Output: :data:`ACTIVATIONS`, one :class:`Activation` per
activation a wrapper takes (``activation=`` of ``teeny_tx.linalg``, ``teeny_tx.nn``'s
activation ops): its Python name, the code ``kernels/matmul.c``, ``kernels/gelu.c`` and the
Hopper matmul's epilogue (``prelude/hopper.cuh``'s ``activate<ACT>``) take as ``ACT``, and a
float64 NumPy reference of what the kernels compute (tests/test_facts.py runs each code
through the kernel). A leaf module, like ``dtypes.py``: every stage may read it (the Hopper
template names the activation in its epilogue comment, the library maps names to codes).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from math import erf

import numpy as np


@dataclass(frozen=True)
class Activation:
    """``name`` as the Python API spells it (None: no activation); ``code``: the kernel's ACT."""

    name: str | None
    code: int
    reference: Callable[[np.ndarray], np.ndarray]
    doc: str


def _gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + np.vectorize(erf, otypes=[np.float64])(x / np.sqrt(2.0)))


def _gelu_tanh(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x**3)))


ACTIVATIONS: tuple[Activation, ...] = (
    Activation(None, 0, lambda x: x, "none"),
    Activation("gelu", 1, _gelu, "GELU, exact (erf), PyTorch's default"),
    Activation("gelu_tanh", 2, _gelu_tanh, "GELU, tanh approximation (approximate='tanh')"),
    Activation("relu", 3, lambda x: np.where(x < 0, 0.0, x), "ReLU (NaN stays NaN)"),
    Activation("silu", 4, lambda x: x / (1.0 + np.exp(-x)), "SiLU, x * sigmoid(x)"),
)
BY_NAME: dict[str | None, Activation] = {a.name: a for a in ACTIVATIONS}
BY_CODE: dict[int, Activation] = {a.code: a for a in ACTIVATIONS}
CODES: dict[str | None, int] = {a.name: a.code for a in ACTIVATIONS}  # name -> the kernels' ACT
