"""Reductions and scans along an axis, with built-in or helper-function combiners.

Input: pycparser argument nodes of a call, through the builder's expression methods. Output:
typed IR nodes (``ir.Op``) with checked shapes and dtypes, or a CompileError at the argument.
A mixin of :class:`~teeny_tx.lower.build.builder.Builder`: ``call_<op>`` is found by the op's name.
"""

from __future__ import annotations

from pycparser import c_ast

from ...dtypes import DTYPES, F32
from ...errors import CompileError, Location
from ..ir import Expr, Op, Type, Var
from ..names import COMBINE_ARGS
from ..ops import typing as ty
from .context import LoweringContext

TUPLE_SCAN_HINT = (
    "for a scan over several tiles (a linear recurrence h = a * h + b), pack the pair into one "
    "value: u64 of two 32-bit halves (bitcast(a, u32), bitcast(b, u32)) and a helper "
    "u64 combine(u64 x, u64 y) that unpacks, combines and repacks them"
)


class ReductionOps(LoweringContext):
    def call_sum(self, args, loc: Location) -> Expr:
        return self._reduction("sum", args, loc)

    def call_max(self, args, loc: Location) -> Expr:
        return self._reduction("max", args, loc)

    def call_min(self, args, loc: Location) -> Expr:
        return self._reduction("min", args, loc)

    def call_xor_sum(self, args, loc: Location) -> Expr:
        return self._reduction("xor_sum", args, loc)

    def call_argmax(self, args, loc: Location) -> Expr:
        return self._reduction("argmax", args, loc)

    def call_argmin(self, args, loc: Location) -> Expr:
        return self._reduction("argmin", args, loc)

    def call_reduce(self, args, loc: Location) -> Expr:
        return self._reduction("reduce", args[:2], loc, combine_node=args[2])

    _COMBINE = {"sum": "add", "max": "maximum", "min": "minimum", "xor_sum": "bitxor"}

    def _reduction(self, kind: str, args, loc: Location, combine_node=None) -> Expr:
        x = self.tile_arg(args[0], kind)
        if x.type.is_pointer:
            raise CompileError(f"{kind}() of pointers is not defined", loc)
        rank = len(x.type.shape)
        axis = (
            self.axis_arg(args[1], rank, kind)
            if len(args) > 1 and combine_node is None or len(args) > 1
            else None
        )
        keep = bool(self.constant(args[2], f"keep_dims of {kind}()")) if len(args) > 2 else False
        dtype = x.type.scalar
        if kind == "sum":
            if dtype.is_float and dtype.bits < 32:
                dtype = F32
            elif dtype.kind == "b" or (dtype.is_int and dtype.bits < 32):
                dtype = (
                    DTYPES["u32"]
                    if dtype.kind == "u"
                    else self.index
                    if dtype.kind == "b"
                    else DTYPES["i32"]
                )
        if kind == "xor_sum":
            ty.require_int(x, loc, "xor_sum")
        x = ty.cast(x, dtype)
        a = Var(type=Type(dtype), loc=loc, name=COMBINE_ARGS[0])
        b = Var(type=Type(dtype), loc=loc, name=COMBINE_ARGS[1])
        if kind in self._COMBINE:
            combine = self.apply(self._COMBINE[kind], [a, b], loc)
        elif kind in ("argmax", "argmin"):
            combine = self.apply("gt" if kind == "argmax" else "lt", [b, a], loc)
        else:
            combine = self.combiner(combine_node, dtype, loc)
        axes = [axis] if axis is not None else list(range(rank))[::-1]
        if kind in ("argmax", "argmin") and axis is None:
            raise CompileError(f"{kind}() needs an axis", loc)
        for ax in axes:
            shape = x.type.shape[:ax] + ((1,) if keep else ()) + x.type.shape[ax + 1 :]
            out_dtype = self.index if kind in ("argmax", "argmin") else dtype
            x = Op(
                type=Type(out_dtype, shape),
                loc=loc,
                op="reduce",
                args=(x,),
                attrs=(("kind", kind), ("axis", ax), ("keep_dims", keep), ("combine", combine)),
            )
        return x

    def call_cumsum(self, args, loc: Location) -> Expr:
        return self._scan("sum", args, loc)

    def call_cumprod(self, args, loc: Location) -> Expr:
        return self._scan("prod", args, loc)

    def call_associative_scan(self, args, loc: Location) -> Expr:
        if isinstance(args[0], c_ast.ExprList) or not isinstance(args[2], c_ast.ID):
            raise CompileError(
                "associative_scan() scans one tile with a helper combine(a, b) (C has no tuples)",
                self.loc(args[0] if isinstance(args[0], c_ast.ExprList) else args[2]),
                TUPLE_SCAN_HINT,
            )
        return self._scan("scan", [args[0], args[1], *args[3:]], loc, combine_node=args[2])

    def _scan(self, kind: str, args, loc: Location, combine_node=None) -> Expr:
        what = {"sum": "cumsum", "prod": "cumprod"}.get(kind, "associative_scan")
        x = self.tile_arg(args[0], what)
        if x.type.is_pointer:
            raise CompileError(f"{what}() of pointers is not defined", loc)
        rank = len(x.type.shape)
        axis = self.axis_arg(args[1], rank, what) if len(args) > 1 else 0
        reverse = bool(self.constant(args[2], f"reverse of {what}()")) if len(args) > 2 else False
        dtype = x.type.scalar
        if kind == "sum" and (dtype.kind == "b" or (dtype.is_int and dtype.bits < 32)):
            dtype = DTYPES["u32"] if dtype.kind == "u" else DTYPES["i32"]
        if kind == "sum" and dtype.is_float and dtype.bits < 32:
            dtype = F32
        x = ty.cast(x, dtype)
        a = Var(type=Type(dtype), loc=loc, name=COMBINE_ARGS[0])
        b = Var(type=Type(dtype), loc=loc, name=COMBINE_ARGS[1])
        if kind == "scan":
            combine = self.combiner(combine_node, dtype, loc)
        else:
            combine = self.apply("add" if kind == "sum" else "mul", [a, b], loc)
        if reverse:
            x = self._flip(x, axis, loc)
        out = Op(
            type=x.type,
            loc=loc,
            op="scan",
            args=(x,),
            attrs=(("kind", kind), ("axis", axis), ("combine", combine)),
        )
        return self._flip(out, axis, loc) if reverse else out

    def combiner(self, node, dtype, loc: Location) -> Expr:
        """A helper `T f(T a, T b) { return ...; }` as an expression of two scalars a, b."""
        if not isinstance(node, c_ast.ID) or node.name not in self.unit.functions:
            raise CompileError(
                "reduce() needs the name of a helper function of this file as its combiner",
                self.loc(node),
                "e.g. `tile add(tile a, tile b) { return a + b; }` then reduce(x, 0, add)",
            )
        fn = self.unit.functions[node.name]
        if len(fn.body.block_items or []) != 1:
            raise CompileError(
                f"combiner '{node.name}' must be a single `return` of an expression",
                self.loc(fn.decl),
            )
        a = Var(type=Type(dtype), loc=loc, name=COMBINE_ARGS[0])
        b = Var(type=Type(dtype), loc=loc, name=COMBINE_ARGS[1])
        before = len(self.blocks[-1])
        result = self.inline(node.name, [a, b], loc, statement=False)
        if len(self.blocks[-1]) != before:
            raise CompileError(
                f"combiner '{node.name}' must not declare variables", self.loc(fn.decl)
            )
        assert result is not None, "an inlined expression has a value"
        result = ty.cast(result, dtype)
        if result.type.is_tile:
            raise CompileError(f"combiner '{node.name}' must combine two scalars into one", loc)
        return result
