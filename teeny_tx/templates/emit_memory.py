"""Loads, stores and atomics: 16-byte accesses where the axis info proves them, else by lane.

Input: layout-annotated IR nodes of one statement. Output: CUDA lines through the Emitter's
``emit`` (macros of ``memory.cu.j2``), and temporaries registered for the expressions that use
them. Functions of the :class:`~teeny_tx.templates.context.EmitContext`, registered in its
tables.
"""

from __future__ import annotations

from ..constants import CACHE_MODIFIERS, EVICTION_POLICIES, MEMORY_ORDERS, SCOPES
from ..lower.ir import Op
from ..lower.passes.layout import Layout
from . import expr as cx
from .context import EmitContext, effect, handler, temporary
from .cuda_types import ctype

_ORDER_NAMES = {c.value: c.name for c in MEMORY_ORDERS}


_SCOPE_NAMES = {c.value: c.name for c in SCOPES}
_HINT_NAMES = {c.value: c.name for c in (*CACHE_MODIFIERS, *EVICTION_POLICIES)}


def access_hint(e: Op) -> str | None:
    """The device header's policy of a load's or store's hints (``tx::Hint<tx::CACHE_CG,
    tx::EVICT_FIRST>``), or None for a plain access."""
    cache, evict = e.attr("cache"), e.attr("evict")
    if cache is None and evict is None:
        return None
    parts = [f"tx::{_HINT_NAMES[v]}" if v is not None else "0" for v in (cache, evict)]
    return f"tx::Hint<{', '.join(parts)}>"


def _address(ctx: EmitContext, ptr, hint: str | None) -> str:
    """The pointer's text: an operand of `*` for a plain access, an argument of a hint's."""
    return ctx.ex(ptr) if hint else ctx.expr(ptr).at(cx.UNARY)


@temporary("load")
def emit_load_temporary(ctx: EmitContext, e: Op, dst: str | None = None) -> None:
    """A load into a new tile (or scalar) of its own: ``dst``, or a generated name."""
    name = dst or ctx.names.fresh("load")
    if e.type.is_tile:
        declaration = ctx.render_macro("declare_tile", ctype(e.type.dtype), name, ctx.L(e.layout))
    else:
        declaration = ctx.render_macro("declare_scalar", ctype(e.type.dtype), name)
    with ctx.capture() as lines:
        emit_load(ctx, e, name)
    *before, load = lines
    for line in before:  # a mask the load needs in its registers
        ctx.put(line)
    ctx.emit("declare_then", declaration, load)
    ctx.temps[id(e)] = (name, e.layout, "")


@handler
def emit_load(ctx: EmitContext, e: Op, dst: str) -> None:
    ptr = e.args[0]
    mask = e.args[1] if e.attr("masked") else None
    other = e.args[2] if mask is not None else None
    hint = access_hint(e)
    if not e.type.is_tile:
        ctx.emit(
            "load_scalar",
            dst,
            _address(ctx, ptr, hint),
            ctx.expr(mask).at(cx.BINARY["||"]) if mask is not None else None,
            ctx.expr(other).at(cx.TERNARY) if other is not None else None,
            hint=hint,
        )
        return
    layout = e.layout
    vec = e.attr("vec")
    if vec > 1:
        mask_name = ctx.materialise(mask, layout) if mask is not None else None
        with ctx.registers_of(layout) as name:
            other_text = ctx.ex(other) if other is not None else None
            uniform = bool(e.attr("mask_uniform"))
            ctx.emit("load_vec", name, vec, dst, ctx.ex(ptr), mask_name, other_text, uniform, hint)
        return
    with ctx.registers_of(layout) as name:
        ctx.emit(
            "load_lanes",
            name,
            dst,
            _address(ctx, ptr, hint),
            ctx.expr(mask).at(cx.BINARY["||"]) if mask is not None else None,
            ctx.expr(other).at(cx.TERNARY) if other is not None else None,
            hint=hint,
        )


@effect("store")
def emit_store(ctx: EmitContext, e: Op) -> None:
    ptr, value = e.args[0], e.args[1]
    mask = e.args[2] if e.attr("masked") else None
    ctx.hoist(ptr)
    ctx.hoist(value)
    if mask is not None:
        ctx.hoist(mask)
    hint = access_hint(e)
    if not ptr.type.is_tile:  # a scalar: one thread writes it for the program
        conds = ["threadIdx.x == 0"]
        if mask is not None:
            conds.append(ctx.expr(mask).at(cx.BINARY["&&"] + 1))
        ctx.emit("store_scalar", conds, _address(ctx, ptr, hint), ctx.ex(value), hint)
        return
    layout: Layout = e.layout
    vec = e.attr("vec")
    guard = f"{ctx.L(layout)}::owner()" if layout.replicated else None
    if vec > 1:
        value_name = ctx.materialise(value, layout, ptr.type.pointer.elem)
        mask_name = ctx.materialise(mask, layout) if mask is not None else None
        with ctx.registers_of(layout) as name:
            uniform = bool(e.attr("mask_uniform"))
            ctx.emit("store_vec", name, vec, ctx.ex(ptr), value_name, mask_name, uniform, hint)
        return
    with ctx.registers_of(layout) as name:
        conds = [guard] if guard else []
        if mask is not None:
            conds.append(ctx.expr(mask).at(cx.BINARY["&&"] + 1) if guard else ctx.ex(mask))
        ctx.emit(
            "store_lanes",
            name,
            _address(ctx, ptr, hint),
            ctx.ex(value),
            " && ".join(conds) or None,
            hint,
        )


@temporary("atomic")
def emit_atomic(ctx: EmitContext, e: Op, dst: str | None = None) -> None:
    """One device atomic per original lane (copies held by other threads skip it), between
    the fences its memory order asks for; the old values land in a temporary."""
    kind, order, scope = e.attr("kind"), e.attr("order"), e.attr("scope")
    n_values = 2 if kind == "cas" else 1
    ptr, values = e.args[0], e.args[1 : 1 + n_values]
    mask = e.args[1 + n_values] if e.attr("masked") else None
    t = ctype(e.type.dtype)
    name = dst or ctx.names.fresh("old")
    fences = f"<tx::{_ORDER_NAMES[order]}, tx::{_SCOPE_NAMES[scope]}>"
    zero = e.type.scalar.literal(0)
    if not e.type.is_tile:
        conds = [ctx.expr(mask).at(cx.BINARY["&&"] + 1)] if mask is not None else []
        call = ctx.render_macro(
            "atomic_call", kind, [ctx.ex(a) for a in (ptr, *values)], conds, zero
        )
        smem = ctx.scratch(e)
        ctx.emit("atomic_scalar", t, name, fences, call, smem)
        ctx.temps[id(e)] = (name, None, "")
        return
    layout: Layout = e.layout
    with ctx.registers_of(layout) as alias:
        conds = [f"{alias}::owner()"] if layout.replicated else []
        if mask is not None:
            conds.append(ctx.expr(mask).at(cx.BINARY["&&"] + 1))
        call = ctx.render_macro(
            "atomic_call", kind, [ctx.ex(a) for a in (ptr, *values)], conds, zero
        )
        ctx.emit("atomic_tile", alias, t, name, fences, call)
    ctx.temps[id(e)] = (name, layout, "")
