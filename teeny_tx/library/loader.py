"""The kernel library's loader: a bundled kernel file by name, compiled once.

Input: a file name of ``kernels/`` (``"softmax.c"``); the text comes from the package
(``teeny_tx._kernels``, embedded at build time), never from the source tree. Output: its
:class:`~teeny_tx.kernel.Module`, compiled under the stable name ``kernels/<file>`` (so ``#line``
paths and golden files do not depend on where the package is installed) and kept for the
process.
"""

from __future__ import annotations

import difflib
from functools import cache

from .._kernels import FILES
from ..errors import TeenyError
from ..kernel import Module, compile


def kernel_text(file: str) -> str:
    """The text of the bundled kernel file ``file`` (``"softmax.c"``), as the package holds it."""
    text = FILES.get(file)
    if text is None:
        close = difflib.get_close_matches(file, list(FILES), n=1)
        hint = f"; did you mean '{close[0]}'?" if close else ""
        raise TeenyError(
            f"no bundled kernel file '{file}' (the library has: {', '.join(FILES)}){hint}"
        )
    return text


@cache
def module(file: str) -> Module:
    """A bundled kernel file, compiled under its repository-relative name (stable #line paths)."""
    return compile(kernel_text(file), name=f"kernels/{file}")
