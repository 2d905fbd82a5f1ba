"""Loads, stores and atomics: 16-byte accesses where the axis info proves them, else by lane.

Input: layout-annotated IR nodes of one statement. Output: CUDA lines through the Emitter's
``emit`` (macros of ``memory.cu.j2``), and temporaries registered for the expressions that use
them. A mixin of :class:`~teeny_tx.templates.emitter.Emitter`.
"""

from __future__ import annotations

from ..constants import MEMORY_ORDERS, SCOPES
from ..dtypes import DType
from ..lower.ir import Expr, Op, Var
from ..lower.layout import Layout
from . import expr as cx
from .cuda_types import ctype

_ORDER_NAMES = {c.value: c.name for c in MEMORY_ORDERS}


_SCOPE_NAMES = {c.value: c.name for c in SCOPES}


class MemoryEmitter:
    def emit_load_temporary(self, e: Op, dst: str | None = None) -> None:
        """A load into a new tile (or scalar) of its own: ``dst``, or a generated name."""
        name = dst or self.names.fresh("load")
        if e.type.is_tile:
            declaration = self.render_macro(
                "declare_tile", ctype(e.type.dtype), name, self.L(e.layout)
            )
        else:
            declaration = self.render_macro("declare_scalar", ctype(e.type.dtype), name)
        with self.capture() as lines:
            self.emit_load(e, name)
        *before, load = lines
        for line in before:  # a mask the load needs in its registers
            self.put(line)
        self.emit("declare_then", declaration, load)
        self.temps[id(e)] = (name, e.layout, "")

    def emit_load(self, e: Op, dst: str) -> None:
        ptr = e.args[0]
        mask = e.args[1] if e.attr("masked") else None
        other = e.args[2] if mask is not None else None
        if not e.type.is_tile:
            self.emit(
                "load_scalar",
                dst,
                self.expr(ptr).at(cx.UNARY),
                self.expr(mask).at(cx.BINARY["||"]) if mask is not None else None,
                self.expr(other).at(cx.TERNARY) if other is not None else None,
            )
            return
        layout = e.layout
        vec = e.attr("vec")
        if vec > 1:
            mask_name = self.materialise(mask, layout) if mask is not None else None
            with self.registers_of(layout) as name:
                other_text = self.ex(other) if other is not None else None
                uniform = bool(e.attr("mask_uniform"))
                self.emit("load_vec", name, vec, dst, self.ex(ptr), mask_name, other_text, uniform)
            return
        with self.registers_of(layout) as name:
            self.emit(
                "load_lanes",
                name,
                dst,
                self.expr(ptr).at(cx.UNARY),
                self.expr(mask).at(cx.BINARY["||"]) if mask is not None else None,
                self.expr(other).at(cx.TERNARY) if other is not None else None,
            )

    def emit_store(self, e: Op) -> None:
        ptr, value = e.args[0], e.args[1]
        mask = e.args[2] if e.attr("masked") else None
        self.hoist(ptr)
        self.hoist(value)
        if mask is not None:
            self.hoist(mask)
        if not ptr.type.is_tile:  # a scalar: one thread writes it for the program
            conds = ["threadIdx.x == 0"]
            if mask is not None:
                conds.append(self.expr(mask).at(cx.BINARY["&&"] + 1))
            self.emit("store_scalar", conds, self.expr(ptr).at(cx.UNARY), self.ex(value))
            return
        layout: Layout = e.layout
        vec = e.attr("vec")
        guard = f"{self.L(layout)}::owner()" if layout.replicated else None
        if vec > 1:
            value_name = self.materialise(value, layout, ptr.type.dtype.elem)
            mask_name = self.materialise(mask, layout) if mask is not None else None
            with self.registers_of(layout) as name:
                uniform = bool(e.attr("mask_uniform"))
                self.emit("store_vec", name, vec, self.ex(ptr), value_name, mask_name, uniform)
            return
        with self.registers_of(layout) as name:
            conds = [guard] if guard else []
            if mask is not None:
                conds.append(self.expr(mask).at(cx.BINARY["&&"] + 1) if guard else self.ex(mask))
            self.emit(
                "store_lanes",
                name,
                self.expr(ptr).at(cx.UNARY),
                self.ex(value),
                " && ".join(conds) or None,
            )

    def materialise(self, e: Expr, layout: Layout, dtype: DType | None = None) -> str:
        """A tile's registers in ``layout`` as a named array (a variable's own, or a new one)."""
        if (
            isinstance(e, Var)
            and e.type.is_tile
            and e.layout is not None
            and e.layout.key == layout.key
        ):
            return e.name
        if (
            id(e) in self.temps
            and self.temps[id(e)][1] is not None
            and self.temps[id(e)][1].key == layout.key
            and not self.temps[id(e)][2]
        ):
            return self.temps[id(e)][0]
        name = self.names.fresh("mask" if e.type.dtype.kind == "b" and dtype is None else "value")
        with self.registers_of(layout) as alias:
            self.emit("define_tile", ctype(dtype or e.type.dtype), name, alias, self.ex(e))
        return name

    def emit_atomic(self, e: Op, dst: str | None = None) -> None:
        """One device atomic per original lane (copies held by other threads skip it), between
        the fences its memory order asks for; the old values land in a temporary."""
        kind, order, scope = e.attr("kind"), e.attr("order"), e.attr("scope")
        n_values = 2 if kind == "cas" else 1
        ptr, values = e.args[0], e.args[1 : 1 + n_values]
        mask = e.args[1 + n_values] if e.attr("masked") else None
        t = ctype(e.type.dtype)
        name = dst or self.names.fresh("old")
        fences = f"<tx::{_ORDER_NAMES[order]}, tx::{_SCOPE_NAMES[scope]}>"
        zero = e.type.dtype.literal(0)
        if not e.type.is_tile:
            conds = [self.expr(mask).at(cx.BINARY["&&"] + 1)] if mask is not None else []
            call = self.render_macro(
                "atomic_call", kind, [self.ex(a) for a in (ptr, *values)], conds, zero
            )
            smem = self.scratch(e)
            self.emit("atomic_scalar", t, name, fences, call, smem)
            self.temps[id(e)] = (name, None, "")
            return
        layout: Layout = e.layout
        with self.registers_of(layout) as alias:
            conds = [f"{alias}::owner()"] if layout.replicated else []
            if mask is not None:
                conds.append(self.expr(mask).at(cx.BINARY["&&"] + 1))
            call = self.render_macro(
                "atomic_call", kind, [self.ex(a) for a in (ptr, *values)], conds, zero
            )
            self.emit("atomic_tile", alias, t, name, fences, call)
        self.temps[id(e)] = (name, layout, "")
