"""The user-facing kernel library: ``nn`` (row operations), ``linalg`` (matmul), their kernels.

Input: the bundled kernel files (``kernels/*.c``, embedded into the package at build time as
``teeny_tx._kernels``). Output: :func:`module`, a bundled file compiled by name, and
:data:`KERNEL_FILES`, the names; the wrappers live in the submodules and are re-exported by the
facades ``teeny_tx.nn`` and ``teeny_tx.linalg``.
"""

from .._kernels import FILES as _FILES
from .loader import kernel_text, module

KERNEL_FILES: tuple[str, ...] = tuple(_FILES)

__all__ = ["KERNEL_FILES", "kernel_text", "module"]
