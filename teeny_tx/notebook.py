"""The ``%%teeny_tx`` cell magic: a notebook cell whose text is a kernel file.

Input: ``%load_ext teeny_tx.notebook``, then a cell ``%%teeny_tx NAME [--target ARCH]
[--debug]`` followed by kernel source. Output: the module compiled from the cell's text, named
``NAME`` (errors and ``#line`` directives say ``NAME``), bound to ``NAME`` in the notebook's
namespace and displayed (``display.py``). The cell is the kernel's source: nothing is written
to disk. A kernel error shows its located message (``NAME:line:col``, the line, a caret), not
a Python traceback, and fails the cell.
"""

from __future__ import annotations

import shlex
from typing import Any

from .display import located
from .errors import TeenyError
from .kernel import Module
from .kernel import compile as compile_module

_USAGE = "expected `%%teeny_tx NAME [--target ARCH] [--debug]`, NAME a Python identifier"


def _arguments(line: str) -> tuple[str, str | None, bool]:
    """(name, target, debug) of the magic's line."""
    try:
        words = shlex.split(line)
    except ValueError as err:
        raise TeenyError(f"%%teeny_tx {line}: {err}; {_USAGE}") from None
    names, target, debug = [], None, False
    while words:
        word = words.pop(0)
        if word == "--debug":
            debug = True
        elif word == "--target" and words:
            target = words.pop(0)
        elif word.startswith("--target="):
            target = word.partition("=")[2]
        else:
            names.append(word)
    if len(names) != 1 or not names[0].isidentifier() or names[0].startswith("-"):
        raise TeenyError(f"%%teeny_tx {line}: {_USAGE} (the module's name in the notebook)")
    return names[0], target, debug


def compile_cell(line: str, cell: str, namespace: dict[str, Any]) -> Module:
    """Compile ``cell`` as the module named by ``line`` and bind it in ``namespace``."""
    name, target, debug = _arguments(line)
    module = compile_module(cell, name=name, debug=debug or None, target=target)
    namespace[name] = module
    return module


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext teeny_tx.notebook``: register ``%%teeny_tx``."""

    def teeny_tx(line: str, cell: str) -> Module:
        try:
            return compile_cell(line, cell, ipython.user_ns)
        except TeenyError as err:
            raise located(err) from None

    ipython.register_magic_function(teeny_tx, magic_kind="cell", magic_name="teeny_tx")
