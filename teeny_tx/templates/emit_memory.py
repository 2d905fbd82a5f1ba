"""Loads, stores and atomics: 16-byte accesses where the axis info proves them, else by lane.

Input: layout-annotated IR nodes of one statement. Output: CUDA lines through the Emitter's
``out`` (and temporaries registered for the expressions that use them). A mixin of
:class:`~teeny_tx.templates.emitter.Emitter`.
"""

from __future__ import annotations

from ..constants import MEMORY_ORDERS, SCOPES
from ..dtypes import DType
from ..lower.ir import Expr, Op, Var
from ..lower.layout import Layout
from .cuda_types import ctype

_ORDER_NAMES = {c.value: c.name for c in MEMORY_ORDERS}


_SCOPE_NAMES = {c.value: c.name for c in SCOPES}


class MemoryEmitter:
    def emit_load(self, e: Op, dst: str) -> None:
        ptr = e.args[0]
        mask = e.args[1] if e.attr("masked") else None
        other = e.args[2] if mask is not None else None
        if not e.type.is_tile:
            value = f"*({self.ex(ptr)})"
            if mask is not None:
                value = f"{self.ex(mask)} ? {value} : {self.ex(other)}"
            self.out(f"{dst} = {value};")
            return
        layout = e.layout
        vec = self.axis.vector_width(ptr, layout)
        if vec > 1 and (other is None or not other.type.is_tile):
            mask_name = self.materialise(mask, layout) if mask is not None else None
            with self.registers_of(layout) as name:
                other_text = self.ex(other) if other is not None else None
                text = self.snippets.load_vec(name, vec, dst, self.ex(ptr), mask_name, other_text)
            self.out(text)
            return
        with self.registers_of(layout) as name:
            text = self.snippets.load_lanes(
                name,
                dst,
                self.ex(ptr),
                self.ex(mask) if mask is not None else None,
                self.ex(other) if other is not None else None,
            )
        self.out(text)

    def emit_store(self, e: Op) -> None:
        ptr, value = e.args[0], e.args[1]
        mask = e.args[2] if e.attr("masked") else None
        self.hoist(ptr)
        self.hoist(value)
        if mask is not None:
            self.hoist(mask)
        if not ptr.type.is_tile:  # a scalar: one thread writes it for the program
            conds = " && ".join(
                ["threadIdx.x == 0"] + ([self.ex(mask)] if mask is not None else [])
            )
            self.out(f"if ({conds}) *({self.ex(ptr)}) = {self.ex(value)};")
            return
        layout: Layout = e.layout
        vec = self.axis.vector_width(ptr, layout)
        guard = f"{self.L(layout)}::owner()" if layout.replicated else None
        if vec > 1 and guard is None:
            value_name = self.materialise(value, layout, ptr.type.dtype.elem)
            mask_name = self.materialise(mask, layout) if mask is not None else None
            with self.registers_of(layout) as name:
                text = self.snippets.store_vec(name, vec, self.ex(ptr), value_name, mask_name)
            self.out(text)
            return
        with self.registers_of(layout) as name:
            conds = [c for c in (guard, self.ex(mask) if mask is not None else None) if c]
            text = self.snippets.store_lanes(
                name, self.ex(ptr), self.ex(value), " && ".join(conds) or None
            )
        self.out(text)

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
        name = self.fresh("mask" if e.type.dtype.kind == "b" and dtype is None else "value")
        self.out(self.snippets.declare_tile(ctype(dtype or e.type.dtype), name, self.L(layout)))
        self.out(self.tile_loop(layout, lambda: f"{name}[i] = {self.ex(e)};"))
        return name

    def emit_atomic(self, e: Op) -> None:
        """One device atomic per original lane (copies held by other threads skip it), between
        the fences its memory order asks for; the old values land in a temporary."""
        kind, order, scope = e.attr("kind"), e.attr("order"), e.attr("scope")
        n_values = 2 if kind == "cas" else 1
        ptr, values = e.args[0], e.args[1 : 1 + n_values]
        mask = e.args[1 + n_values] if e.attr("masked") else None
        t = ctype(e.type.dtype)
        name = self.fresh("old")
        fences = f"<tx::{_ORDER_NAMES[order]}, tx::{_SCOPE_NAMES[scope]}>"
        if not e.type.is_tile:
            call = f"tx::atomic_{kind}({', '.join(self.ex(a) for a in (ptr, *values))})"
            if mask is not None:
                call = f"{self.ex(mask)} ? {call} : {e.type.dtype.literal(0)}"
            smem = self.scratch(max(e.type.dtype.itemsize, 4))
            self.out(f"tx::fence_before{fences}();")
            self.out(f"{t} {name} = tx::once<{t}>([&]() {{ return {call}; }}, {smem});")
            self.out(f"tx::fence_after{fences}();")
            self.temps[id(e)] = (name, None, "")
            return
        layout: Layout = e.layout
        self.out(self.snippets.declare_tile(t, name, self.L(layout)))
        self.out(f"tx::fence_before{fences}();")

        def lane() -> str:
            conds = [
                c
                for c in (
                    f"{self.L(layout)}::owner()" if layout.replicated else None,
                    self.ex(mask) if mask is not None else None,
                )
                if c
            ]
            call = f"tx::atomic_{kind}({', '.join(self.ex(a) for a in (ptr, *values))})"
            if conds:
                call = f"({' && '.join(conds)}) ? {call} : {e.type.dtype.literal(0)}"
            return f"{name}[i] = {call};"

        self.out(self.tile_loop(layout, lane))
        self.out(f"tx::fence_after{fences}();")
        self.temps[id(e)] = (name, layout, "")
