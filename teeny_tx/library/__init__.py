"""The user-facing kernel library: ``nn`` (row operations), ``linalg`` (matmul), their kernels.

Input: the bundled kernel files (``kernels/*.c``, shipped inside the package). Output:
:func:`module`, a bundled file compiled by name; the wrappers live in the submodules and are
re-exported by the facades ``teeny_tx.nn`` and ``teeny_tx.linalg``.
"""

from .loader import module

__all__ = ["module"]
