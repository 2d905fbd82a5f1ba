"""Memory operations: load, store and atomics through tiles (or scalars) of pointers.

Input: pycparser argument nodes of a call, through the builder's expression methods. Output:
typed IR nodes (``ir.Op``) with checked shapes and dtypes, or a CompileError at the argument.
A mixin of :class:`~teeny_tx.lower.build.builder.Builder`: ``call_<op>`` is found by the op's name.
"""

from __future__ import annotations

from ...constants import (
    CONSTANTS,
    DEFAULT_ORDER,
    DEFAULT_SCOPE,
    EVICTION_POLICIES,
    LOAD_CACHES,
    MEMORY_ORDERS,
    STORE_CACHES,
    names,
    values,
)
from ...constants import SCOPES as SCOPE_TABLE
from ...dtypes import BOOL
from ...errors import CompileError, Location
from ..ir import Const, Expr, Op, Type
from ..ops import typing as ty
from .context import LoweringContext

# Memory orders and scopes of atomics (weak integer constants, as in the prelude).
ORDERS = values(MEMORY_ORDERS)
SCOPES = values(SCOPE_TABLE)
EVICTIONS = tuple(c.name for c in EVICTION_POLICIES)


class MemoryOps(LoweringContext):
    def call_load(self, args, loc: Location) -> Expr:
        ptr = self.expr(args[0])
        if not ptr.type.is_pointer:
            raise CompileError(
                f"load() needs pointers, got {ptr.type}",
                self.loc(args[0]),
                "e.g. load(x + offsets)",
            )
        elem = ptr.type.pointer.elem
        shape = ptr.type.shape
        hints = self.hints(args[3:], "load", LOAD_CACHES)
        mask = self.mask(args[1], shape, "load") if len(args) > 1 else None
        other = None
        if len(args) > 2:
            other = self.expr(args[2])
            if other.type.is_pointer:
                raise CompileError(
                    "load() other is the value of masked-off lanes: a number, not a pointer",
                    self.loc(args[2]),
                    "to read another address where the mask is off, select the pointers: "
                    "load(where(mask, p, q))",
                )
            if ty.is_weak(other):
                other = (
                    ty.cast(other, elem)
                    if other.type.scalar.is_float <= elem.is_float
                    else ty.cast(other, elem)
                )
            other = ty.cast(other, elem)
            if (
                other.type.is_tile
                and ty.broadcast_shapes(shape, other.type.shape, loc, "load() other") != shape
            ):
                raise CompileError(
                    f"load() other of shape {list(other.type.shape)} "
                    f"does not fit pointers of shape {list(shape)}",
                    self.loc(args[2]),
                )
            other = ty.broadcast_to(other, shape)
        if mask is not None and other is None:
            other = Const(type=Type(elem), loc=loc, value=ty.convert_value(0, elem))
        operands = (
            (ptr,) + ((mask,) if mask is not None else ()) + ((other,) if other is not None else ())
        )
        return Op(
            type=Type(elem, shape),
            loc=loc,
            op="load",
            args=operands,
            attrs=(("masked", mask is not None), *hints),
        )

    def call_store(self, args, loc: Location) -> Expr:
        ptr = self.expr(args[0])
        if not ptr.type.is_pointer:
            raise CompileError(f"store() needs pointers, got {ptr.type}", self.loc(args[0]))
        if ptr.type.pointer.const:
            raise CompileError(
                "store() through a read-only pointer",
                self.loc(args[0]),
                "the parameter is declared `const`; drop `const` to write through it",
            )
        shape = ptr.type.shape
        value = self.expr(args[1])
        if value.type.is_pointer:
            raise CompileError(
                "store() writes numbers; a pointer cannot be stored as a value",
                self.loc(args[1]),
                "store an integer offset (e.g. the index) and add it to a base pointer when "
                "loading",
            )
        value = ty.cast(value, ptr.type.pointer.elem)
        if (
            value.type.is_tile
            and value.type.shape != shape
            and shape
            and len(value.type.shape) <= len(shape)
        ):
            try:
                fits = ty.broadcast_shapes(shape, value.type.shape, loc, "store()") == shape
            except CompileError:
                fits = False
            if fits:
                value = ty.broadcast_to(value, shape)
        if value.type.is_tile and value.type.shape != shape:
            raise CompileError(
                f"shape mismatch in store(): value {list(value.type.shape)} "
                f"through pointers {list(shape)}",
                self.loc(args[1]),
                "the value must have the pointers' shape (or be a scalar)",
            )
        operands = [ptr, value]
        if len(args) > 2:
            operands.append(self.mask(args[2], shape, "store"))
        hints = self.hints(args[3:], "store", STORE_CACHES)
        return Op(
            type=Type(BOOL),
            loc=loc,
            op="store",
            args=tuple(operands),
            attrs=(("masked", len(args) > 2), *hints),
        )

    def hints(self, nodes, what: str, caches: tuple[str, ...]) -> tuple[tuple[str, int], ...]:
        """The optional cache modifier and eviction policy of a load or store (constants; 0
        for none) as the op's attrs ``cache`` and ``evict``, left out when absent."""
        attrs: list[tuple[str, int]] = []
        for node, key, allowed in zip(nodes, ("cache", "evict"), (caches, EVICTIONS), strict=False):
            value = self.constant(node, f"the {key} hint of {what}()")
            if value == 0:
                continue
            by_value = {c.value: c.name for c in CONSTANTS.values() if c.name in allowed}
            if value not in by_value:
                raise CompileError(
                    f"the {'cache modifier' if key == 'cache' else 'eviction policy'} of "
                    f"{what}() is one of {', '.join(allowed)} (or 0 for none)",
                    self.loc(node),
                    f"e.g. {what}(ptr, {'value, ' if what == 'store' else ''}mask, "
                    f"{'other, ' if what == 'load' else ''}{allowed[1]}, EVICT_FIRST)",
                )
            if key != "evict" or by_value[value] != "EVICT_NORMAL":
                attrs.append((key, value))
        return tuple(attrs)

    def mask(self, node, shape: tuple[int, ...], what: str) -> Expr:
        mask = ty.to_bool(self.expr(node), self.loc(node))
        if (
            mask.type.shape != shape
            and (mask.type.is_tile or not shape)
            and (
                not shape
                or ty.broadcast_shapes(shape, mask.type.shape, self.loc(node), f"{what}() mask")
                != shape
            )
        ):
            raise CompileError(
                f"{what}() mask of shape {list(mask.type.shape)} "
                f"does not match pointers of shape {list(shape)}",
                self.loc(node),
            )
        return ty.broadcast_to(mask, shape)

    _ATOMIC_TYPES = {
        "add": ("f16", "bf16", "f32", "f64", "i32", "u32", "i64", "u64"),
        "max": ("f16", "bf16", "f32", "f64", "i32", "u32", "i64", "u64"),
        "min": ("f16", "bf16", "f32", "f64", "i32", "u32", "i64", "u64"),
        "and": ("i32", "u32", "i64", "u64"),
        "or": ("i32", "u32", "i64", "u64"),
        "xor": ("i32", "u32", "i64", "u64"),
        "xchg": ("f16", "bf16", "f32", "f64", "i32", "u32", "i64", "u64"),
        "cas": ("f16", "bf16", "f32", "f64", "i32", "u32", "i64", "u64"),
    }

    def call_atomic(self, kind: str, args, loc: Location) -> Expr:
        ptr = self.expr(args[0])
        if not ptr.type.is_pointer:
            raise CompileError(f"atomic_{kind}() needs pointers, got {ptr.type}", self.loc(args[0]))
        if ptr.type.pointer.const:
            raise CompileError(
                f"atomic_{kind}() through a read-only pointer",
                self.loc(args[0]),
                "the parameter is declared `const`; drop `const` to write through it",
            )
        elem = ptr.type.pointer.elem
        if elem.name not in self._ATOMIC_TYPES[kind]:
            raise CompileError(
                f"atomic_{kind}() does not support {elem} data",
                loc,
                f"supported: {', '.join(self._ATOMIC_TYPES[kind])}",
            )
        shape = ptr.type.shape
        n_values = 2 if kind == "cas" else 1
        values = []
        for node in args[1 : 1 + n_values]:
            v = ty.cast(self.expr(node), elem)
            if (
                v.type.is_tile
                and ty.broadcast_shapes(shape, v.type.shape, loc, f"atomic_{kind}()") != shape
            ):
                raise CompileError(
                    f"shape mismatch in atomic_{kind}(): value {list(v.type.shape)} "
                    f"through pointers {list(shape)}",
                    self.loc(node),
                )
            if v.type.is_tile and not shape:
                raise CompileError(
                    f"atomic_{kind}() of a tile through a scalar pointer", self.loc(node)
                )
            values.append(ty.broadcast_to(v, shape))
        rest = list(args[1 + n_values :])
        mask = None
        if kind != "cas" and rest:
            mask = self.mask(rest.pop(0), shape, f"atomic_{kind}")
        order = self.constant(rest.pop(0), "the memory order") if rest else ORDERS[DEFAULT_ORDER]
        scope = self.constant(rest.pop(0), "the scope") if rest else SCOPES[DEFAULT_SCOPE]
        if order not in ORDERS.values():
            raise CompileError(f"the memory order must be {names(MEMORY_ORDERS)}", loc)
        if scope not in SCOPES.values():
            raise CompileError(f"the scope must be {names(SCOPE_TABLE)}", loc)
        operands = (ptr, *values) + ((mask,) if mask is not None else ())
        attrs = (("kind", kind), ("masked", mask is not None), ("order", order), ("scope", scope))
        return Op(type=Type(elem, shape), loc=loc, op="atomic", args=operands, attrs=attrs)

    def call_atomic_add(self, args, loc):
        return self.call_atomic("add", args, loc)

    def call_atomic_max(self, args, loc):
        return self.call_atomic("max", args, loc)

    def call_atomic_min(self, args, loc):
        return self.call_atomic("min", args, loc)

    def call_atomic_and(self, args, loc):
        return self.call_atomic("and", args, loc)

    def call_atomic_or(self, args, loc):
        return self.call_atomic("or", args, loc)

    def call_atomic_xor(self, args, loc):
        return self.call_atomic("xor", args, loc)

    def call_atomic_xchg(self, args, loc):
        return self.call_atomic("xchg", args, loc)

    def call_atomic_cas(self, args, loc):
        return self.call_atomic("cas", args, loc)
