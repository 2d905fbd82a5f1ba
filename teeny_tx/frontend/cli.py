"""``teeny-tx translate file.py`` and ``teeny-tx compile file.py``: the @jit kernels of a
Python file as one C-syntax kernel file.

Input: a Python file's path, optionally one kernel's name, and ``-D NAME=VALUE`` definitions
(a parameter's dtype, or a constexpr's or scalar's value). Output: the C text of every
``@jit`` kernel of the file (``@triton.autotune``/``@triton.heuristics`` wrappers included),
each on the lines of its Python source, which ``teeny_tx.compile(text, name=file.py)``
accepts; the C front end's errors are placed at the Python line and column.

Without arguments the kinds are guessed from the code: a parameter that reaches the pointer of
a load, store or atomic is ``any *``, another an ``i32`` scalar (or its annotation's type), a
``tl.constexpr`` a ``const i32``; ``-D`` says otherwise (``-D eps=f32``, ``-D x=f16``,
``-D ACTIVATION=leaky_relu``).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

from ..dtypes import DTYPES
from ..errors import CompileError, TeenyError
from ..parse.literals import define_value
from . import builtins as B
from .jit import JITFunction, classify_argument
from .program import Program
from .python_ast import NO, Param, pointer_params, translate


def load_kernels(path: str) -> dict[str, JITFunction]:
    """The @jit functions of the Python file ``path`` that are kernels (not only helpers)."""
    file = Path(path)
    if not file.is_file():
        raise TeenyError(f"cannot read {path}: no such file")
    spec = importlib.util.spec_from_file_location(f"teeny_tx_translate_{file.stem}", file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(file.parent))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(file.parent))
    found: dict[str, JITFunction] = {}
    for value in vars(module).values():
        fn = value
        while not isinstance(fn, JITFunction) and hasattr(fn, "fn"):
            fn = fn.fn
        if isinstance(fn, JITFunction) and fn.__module__ == module.__name__:
            found[fn.__name__] = fn
    called = set()
    for fn in found.values():
        called |= _called_helpers(fn, found)
    return {name: fn for name, fn in found.items() if name not in called}


def _called_helpers(fn: JITFunction, found: dict[str, JITFunction]) -> set[str]:
    import ast

    names = {n.id for n in ast.walk(fn._tx_source().tree) if isinstance(n, ast.Name)}
    return {n for n in names if n in found and n != fn.__name__}


def params_of(fn: JITFunction, defines: dict[str, Any]) -> list[Param]:
    """The parameters of ``fn`` as ``-D`` defines them, else as the code suggests."""
    tree = fn._tx_source().tree
    pointers = pointer_params(tree)
    constexprs = set(fn.constexpr_names)
    out = []
    for a in tree.args.args:
        name = a.arg
        default = fn.signature.parameters[name].default
        if name in defines:
            value = defines[name]
            if isinstance(value, str) and value in DTYPES and name not in constexprs:
                kind = "pointer" if name in pointers else "scalar"
                ctype = "any" if kind == "pointer" else value
                out.append(Param(name, kind, ctype, NO, value if kind == "pointer" else None))
                continue
            out.append(classify_argument(name, value, name in constexprs, _annotation(a)))
        elif name in constexprs:
            if default is not fn.signature.empty:
                out.append(classify_argument(name, default, True, None))
            else:
                out.append(Param(name, "constexpr", "i32"))
        elif name in pointers:
            out.append(Param(name, "pointer", "any"))
        else:
            d = B.DTYPE_OBJECTS.get((_annotation(a) or "").rsplit(".", 1)[-1])
            out.append(Param(name, "scalar", d.tx if d is not None else "i32"))
    return out


def _annotation(a: Any) -> str | None:
    import ast

    return ast.unparse(a.annotation) if a.annotation is not None else None


def translate_file(path: str, kernel: str | None, define: list[str] | None) -> str:
    """The C text of the file's kernels (or of ``kernel``), checked by the C front end."""
    from ..kernel import compile as tx_compile

    defines = _defines(define or [])
    kernels = load_kernels(path)
    if kernel is not None:
        if kernel not in kernels:
            raise TeenyError(
                f"{path} has no @jit kernel '{kernel}' (kernels: {', '.join(kernels)})"
            )
        kernels = {kernel: kernels[kernel]}
    if not kernels:
        raise TeenyError(f"{path} defines no @jit kernel")
    programs = [translate(fn, params_of(fn, defines)) for fn in kernels.values()]
    merged = merge(programs)
    try:
        tx_compile(merged.text(), name=merged.filename)
    except CompileError as err:
        raise merged.remap(err) from None
    return merged.text()


def merge(programs: list[Program]) -> Program:
    """One program of several kernels of a file (a helper two of them call is written once:
    on the same lines, the same text)."""
    out = Program(programs[0].filename)
    for p in programs:
        for line, pieces in sorted(p.pieces.items()):
            if line in out.pieces:
                continue
            for piece in pieces:
                out.put(line, _remark(piece, p, out), p.line_origin[line])
    return out


def _remark(piece: str, source: Program, target: Program) -> str:
    """``piece`` with its marks renumbered into ``target``."""
    import re

    def renumber(m: re.Match) -> str:
        target.origins.append(source.origins[int(m.group(1))])
        return f"\x01{len(target.origins) - 1}\x02"

    return re.sub("\x01(\\d+)\x02", renumber, piece)


def _defines(items: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for d in items:
        name, sep, value = d.partition("=")
        if not sep:
            raise SystemExit(f"teeny-tx: -D takes NAME=VALUE, got '{d}'")
        out[name] = define_value(value)
    return out
