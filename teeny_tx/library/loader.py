"""The kernel library's loader: a bundled kernel file by name, compiled once.

Input: a file name of ``kernels/`` (``"softmax.c"``). Output: its :class:`~teeny_tx.kernel.Module`,
compiled under the stable name ``kernels/<file>`` (so ``#line`` paths and golden files do not
depend on where the package is installed) and kept for the process.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from ..kernel import Module, compile

KERNELS = Path(__file__).resolve().parents[2] / "kernels"


@cache
def module(file: str) -> Module:
    """A bundled kernel file, compiled under its repository-relative name (stable #line paths)."""
    return compile(KERNELS / file, name=f"kernels/{file}")
