"""Debugging operations: static_assert, and device_print/device_assert in debug builds.

Input: pycparser argument nodes of a call, through the builder's expression methods. Output:
typed IR nodes (``ir.Op``) with checked shapes and dtypes, or a CompileError at the argument.
A mixin of :class:`~teeny_tx.lower.build.builder.Builder`: ``call_<op>`` is found by the op's name.
"""

from __future__ import annotations

from pycparser import c_ast

from ...dtypes import BOOL
from ...errors import CompileError, Location
from ...parse import literals
from ..ir import Const, Expr, Op, Type
from ..ops import typing as ty
from .context import LoweringContext


def printf_text(text: str) -> str:
    """``text`` as a printf format that prints it: ``%`` doubled, and control characters other
    than newline and tab written as visible escapes (``\\r``, ``\\0``, ``\\x1b``), so the IR
    carries text the emitter may put in a format string as it is. The interpreter prints what
    printf would (``%%`` as ``%``)."""
    out = []
    for c in text:
        if c == "%":
            out.append("%%")
        elif c in "\n\t":
            out.append(c)
        elif ord(c) < 32 or ord(c) == 127:
            out.append({"\r": "\\r", "\0": "\\0"}.get(c, f"\\x{ord(c):02x}"))
        else:
            out.append(c)
    return "".join(out)


class DebugOps(LoweringContext):
    def string_arg(self, node, what: str) -> str:
        if not (isinstance(node, c_ast.Constant) and node.type == "string"):
            raise CompileError(f"{what} must be a string literal", self.loc(node))
        return literals.string(node.value, self.loc(node))

    def call_static_assert(self, args, loc: Location) -> None:
        cond = self.constant(args[0], "the condition of static_assert()", integer=False)
        message = (
            self.string_arg(args[1], "the message of static_assert()") if len(args) > 1 else ""
        )
        if not cond:
            raise CompileError(
                f"static_assert failed{': ' + message if message else ''}",
                self.loc(args[0]),
                f"with {', '.join(f'{k}={v}' for k, v in self.spec.constexprs)}"
                if self.spec.constexprs
                else None,
            )
        return None

    def call_static_print(self, args, loc: Location) -> None:
        """Print, when the kernel compiles, each argument: a string as it is, a value as its
        type and, for a constant, its value (Triton's tl.static_print)."""
        parts = []
        for node in args:
            if isinstance(node, c_ast.Constant) and node.type == "string":
                parts.append(literals.string(node.value, self.loc(node)))
                continue
            value = self.expr(node)
            text = f"{value.type}"
            if isinstance(value, Const):
                text = f"{value.value!r} ({value.type}{', weak' if value.weak else ''})"
            parts.append(text)
        where = f"{loc.file}:{loc.line}"
        print(f"{where}: static_print: {' '.join(parts)}", flush=True)
        return None

    def call_assume(self, args, loc: Location) -> Expr | None:
        """assume(cond): a promise (CUDA's __builtin_assume), checked by the interpreter; a
        constant condition is checked now."""
        cond = ty.to_bool(self.expr(args[0]), self.loc(args[0]))
        if isinstance(cond, Const):
            if not cond.value:
                raise CompileError(
                    "assume() of a condition that is false", self.loc(args[0]), "drop it"
                )
            return None
        return Op(
            type=Type(BOOL, cond.type.shape),
            loc=loc,
            op="assume",
            args=(cond,),
            attrs=(("text", printf_text(loc.source_line.strip() if loc.source_line else "")),),
        )

    def call_device_print(self, args, loc: Location) -> Expr | None:
        prefix = self.string_arg(args[0], "the prefix of device_print()")
        values = [self.expr(a) for a in args[1:]]
        for v, node in zip(values, args[1:], strict=True):
            if v.type.is_pointer:
                raise CompileError("device_print() prints numbers, not pointers", self.loc(node))
        if not self.spec.debug:
            return None
        values = [ty.cast(v, ty.weak_literal_type(v.value)) if ty.is_weak(v) else v for v in values]
        shapes = {v.type.shape for v in values if v.type.is_tile}
        if len(shapes) > 1:
            raise CompileError("device_print() values must share one shape (or be scalars)", loc)
        shape = next(iter(shapes), ())
        values = [ty.broadcast_to(v, shape) for v in values]
        return Op(
            type=Type(BOOL, shape),
            loc=loc,
            op="device_print",
            args=tuple(values),
            attrs=(("prefix", printf_text(prefix)),),
        )

    def call_device_assert(self, args, loc: Location) -> Expr | None:
        cond = ty.to_bool(self.expr(args[0]), self.loc(args[0]))
        message = (
            self.string_arg(args[1], "the message of device_assert()") if len(args) > 1 else ""
        )
        if not self.spec.debug:
            return None
        return Op(
            type=Type(BOOL, cond.type.shape),
            loc=loc,
            op="device_assert",
            args=(cond,),
            attrs=(
                ("message", printf_text(message)),
                ("text", printf_text(loc.source_line.strip() if loc.source_line else "")),
            ),
        )
