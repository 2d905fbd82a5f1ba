"""device_print and device_assert of debug builds, as printf and __trap; assume() as
__builtin_assume.

Input: layout-annotated IR nodes of one statement. Output: CUDA lines through the Emitter's
``emit`` (macros of ``debug.cu.j2``). Functions of the
:class:`~teeny_tx.templates.context.EmitContext`, registered in its tables.
"""

from __future__ import annotations

from ..dtypes import DType
from ..lower.ir import Op
from ..lower.names import REGISTER
from ..lower.passes.layout import Layout
from .context import EmitContext, effect
from .expr import UNARY

_PRINTF = {
    "float": ("%f", "(double)tx::widen({})"),
    "int": ("%d", "(int)({})"),
    "uint": ("%u", "(unsigned)({})"),
    "long": ("%lld", "(long long)({})"),
    "ulong": ("%llu", "(unsigned long long)({})"),
}


def _printf_kind(dtype: DType) -> str:
    if dtype.is_float:
        return "float"
    if dtype.bits == 64:
        return "long" if dtype.kind == "i" else "ulong"
    return "uint" if dtype.kind == "u" else "int"


def _c_string(text: str) -> str:
    """A C string literal of ``text`` (escapes quotes, backslashes, newlines, and ``?`` so
    that no ``??=`` reads as a trigraph under any C++ standard)."""
    body = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    body = body.replace("?", "\\?")
    return f'"{body}"'


@effect("device_print")
def emit_device_print(ctx: EmitContext, e: Op) -> None:
    for a in e.args:
        ctx.hoist(a)
    pid = "pid (%d, %d, %d)"
    formats = " ".join(_PRINTF[_printf_kind(a.type.scalar)][0] for a in e.args)
    if not e.type.is_tile:
        values = [_PRINTF[_printf_kind(a.type.scalar)][1].format(ctx.ex(a)) for a in e.args]
        text = _c_string(f"{pid} {e.attr('prefix')} {formats}\n")
        ctx.emit("print_scalar", text, values)
        return
    layout: Layout = e.layout
    index = "idx (" + ", ".join("%d" for _ in layout.dims) + ")"
    text = _c_string(f"{pid} {index} {e.attr('prefix')} {formats}\n")

    with ctx.registers_of(layout) as alias:
        coords = [f"{alias}::coord({REGISTER}, {d})" for d in layout.dims]
        values = [_PRINTF[_printf_kind(a.type.scalar)][1].format(ctx.ex(a)) for a in e.args]
        ctx.emit("print_tile", alias, text, coords, values)


@effect("device_assert")
def emit_device_assert(ctx: EmitContext, e: Op) -> None:
    cond = e.args[0]
    ctx.hoist(cond)
    where = f"{e.loc.file}:{e.loc.line}"
    message = e.attr("message") or e.attr("text")
    if not cond.type.is_tile:
        text = _c_string(f"{where}: device_assert failed in program (%d, %d, %d): {message}\n")
        ctx.emit("assert_scalar", ctx.expr(cond).at(UNARY), text)
        return
    layout: Layout = cond.layout
    index = ", ".join("%d" for _ in layout.dims)
    text = _c_string(
        f"{where}: device_assert failed in program (%d, %d, %d) at ({index}): {message}\n"
    )

    with ctx.registers_of(layout) as alias:
        coords = [f"{alias}::coord({REGISTER}, {d})" for d in layout.dims]
        ctx.emit("assert_tile", alias, ctx.expr(cond).at(UNARY), text, coords)


@effect("assume")
def emit_assume(ctx: EmitContext, e: Op) -> None:
    """A promise to the optimiser: every lane's condition holds."""
    cond = e.args[0]
    ctx.hoist(cond)
    if not cond.type.is_tile:
        ctx.emit("assume_scalar", ctx.ex(cond))
        return
    with ctx.registers_of(cond.layout) as alias:
        ctx.emit("assume_tile", alias, ctx.ex(cond))
