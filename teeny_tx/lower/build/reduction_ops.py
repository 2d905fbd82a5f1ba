"""Reductions and scans along an axis, with built-in or helper-function combiners.

Input: pycparser argument nodes of a call, through the builder's expression methods. Output:
typed IR nodes (``ir.Op``) with checked shapes and dtypes, or a CompileError at the argument.
A mixin of :class:`~teeny_tx.lower.build.builder.Builder`: ``call_<op>`` is found by the op's name.
"""

from __future__ import annotations

import dataclasses

from pycparser import c_ast

from ...dtypes import DTYPES, F32, DType
from ...errors import CompileError, Location
from .. import ir
from ..ir import Expr, Op, Type, Var
from ..names import COMBINE_ARGS
from ..ops import typing as ty
from .context import LoweringContext, TupleValue

# the largest tuple a reduction or scan carries (the device header's Tuple2..Tuple4)
MAX_TUPLE = 4
TUPLE_HINT = (
    "reduce and scan several tiles as a tuple: reduce((x, i), axis, combine) with a helper "
    "combine(a0, a1, b0, b1) that returns (c0, c1); `tile r = ...;` then r[0], r[1]"
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

    def call_reduce_or(self, args, loc: Location) -> Expr:
        return self._reduction("reduce_or", args, loc)

    def call_argmax(self, args, loc: Location) -> Expr:
        return self._reduction("argmax", args, loc)

    def call_argmin(self, args, loc: Location) -> Expr:
        return self._reduction("argmin", args, loc)

    def call_reduce(self, args, loc: Location) -> Expr | TupleValue:
        inputs = self.value(args[0])
        if isinstance(inputs, TupleValue):
            return self._tuple_reduction(inputs, args, loc)
        return self._reduction("reduce", args[:2], loc, combine_node=args[2])

    _COMBINE = {
        "sum": "add",
        "max": "maximum",
        "min": "minimum",
        "xor_sum": "bitxor",
        "reduce_or": "bitor",
    }

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
        if kind == "reduce_or" and dtype.kind != "b":
            ty.require_int(x, loc, "reduce_or")
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

    def call_associative_scan(self, args, loc: Location) -> Expr | TupleValue:
        if not isinstance(args[2], c_ast.ID):
            raise CompileError(
                "associative_scan()'s third argument is the name of its combiner",
                self.loc(args[2]),
                f"e.g. associative_scan(x, 0, add); {TUPLE_HINT}",
            )
        inputs = self.value(args[0])
        if isinstance(inputs, TupleValue):
            return self._tuple_scan(inputs, args, loc)
        return self._scan("scan", [args[0], args[1], *args[3:]], loc, combine_node=args[2])

    # ------------------------------------------------------------ tuples

    def _tuple_inputs(self, inputs: TupleValue, what: str, loc: Location) -> list[Expr]:
        """The tiles of a multi-operand reduction or scan, each a variable (every item's op
        reads them all: they are computed once)."""
        n = len(inputs.items)
        if not 1 <= n <= MAX_TUPLE:
            raise CompileError(
                f"{what}() takes 1 to {MAX_TUPLE} tiles as a tuple, got {n}",
                inputs.loc,
                f"split the work into {what}() calls of at most {MAX_TUPLE} tiles each",
            )
        tiles = [x for x in inputs.items if x.type.is_tile]
        if not tiles:
            raise CompileError(
                f"{what}() of a tuple needs a tile in it",
                inputs.loc,
                "a tuple of scalars has nothing to reduce or scan",
            )
        shape = tiles[0].type.shape
        out: list[Expr] = []
        for k, x in enumerate(inputs.items):
            if not x.type.is_tile:  # a scalar fills the tiles' shape
                x = Op(type=Type(x.type.dtype, shape), loc=x.loc, op="full", args=(x,))
            if x.type.shape != shape:
                raise CompileError(
                    f"{what}() of tiles of different shapes: {list(shape)} and "
                    f"{list(x.type.shape)} (item {k})",
                    x.loc,
                    "every tile of the tuple has the same shape (broadcast_to them first)",
                )
            if not isinstance(x, Var):
                name = self.fresh(f"{what}_in")
                self.emit(ir.Declare(loc=x.loc, name=name, type=x.type, init=x))
                x = Var(type=x.type, loc=x.loc, name=name)
            out.append(x)
        return out

    def _tuple_reduction(self, inputs: TupleValue, args, loc: Location) -> TupleValue:
        xs = self._tuple_inputs(inputs, "reduce", loc)
        rank = len(xs[0].type.shape)
        axis = self.axis_arg(args[1], rank, "reduce")
        dtypes = tuple(x.type.scalar for x in xs)
        combine = self.tuple_combiner(args[2], dtypes, loc)
        shape = xs[0].type.shape[:axis] + xs[0].type.shape[axis + 1 :]
        group = self.fresh("reduced")
        items = tuple(
            Op(
                type=Type(d, shape),
                loc=loc,
                op="reduce",
                args=tuple(xs),
                attrs=(
                    ("kind", "reduce"),
                    ("axis", axis),
                    ("keep_dims", False),
                    ("combine", combine),
                    ("index", k),
                    ("group", group),
                ),
            )
            for k, d in enumerate(dtypes)
        )
        return TupleValue(items, loc)

    def _tuple_scan(self, inputs: TupleValue, args, loc: Location) -> TupleValue:
        xs = self._tuple_inputs(inputs, "associative_scan", loc)
        rank = len(xs[0].type.shape)
        axis = self.axis_arg(args[1], rank, "associative_scan")
        reverse = (
            bool(self.constant(args[3], "reverse of associative_scan()"))
            if len(args) > 3
            else False
        )
        dtypes = tuple(x.type.scalar for x in xs)
        combine = self.tuple_combiner(args[2], dtypes, loc)
        if reverse:
            flipped: list[Expr] = []
            for x in xs:
                name = self.fresh("associative_scan_in")
                self.emit(
                    ir.Declare(loc=loc, name=name, type=x.type, init=self._flip(x, axis, loc))
                )
                flipped.append(Var(type=x.type, loc=loc, name=name))
            xs = flipped
        group = self.fresh("scanned")
        items = []
        for k, x in enumerate(xs):
            item: Expr = Op(
                type=x.type,
                loc=loc,
                op="scan",
                args=tuple(xs),
                attrs=(
                    ("kind", "scan"),
                    ("axis", axis),
                    ("combine", combine),
                    ("index", k),
                    ("group", group),
                ),
            )
            items.append(self._flip(item, axis, loc) if reverse else item)
        return TupleValue(tuple(items), loc)

    def tuple_combiner(self, node, dtypes: tuple[DType, ...], loc: Location) -> tuple[Expr, ...]:
        """A helper ``combine(a0, .., aN-1, b0, .., bN-1)`` returning ``(c0, .., cN-1)`` as N
        expressions of the two tuples' items (``tx_a.v0``...: the fields of the device
        header's Tuple)."""
        n = len(dtypes)
        a = [
            Var(type=Type(d), loc=loc, name=f"{COMBINE_ARGS[0]}.v{k}") for k, d in enumerate(dtypes)
        ]
        b = [
            Var(type=Type(d), loc=loc, name=f"{COMBINE_ARGS[1]}.v{k}") for k, d in enumerate(dtypes)
        ]
        fn = self._combiner_function(node, loc)
        params = fn.decl.type.args.params if fn.decl.type.args else []
        if len(params) != 2 * n:
            raise CompileError(
                f"combiner '{node.name}' of a tuple of {n} takes {2 * n} values "
                f"(a0..a{n - 1}, b0..b{n - 1}), it takes {len(params)}",
                self.loc(fn.decl),
                TUPLE_HINT,
            )
        result = self._inline_combiner(node, fn, [*a, *b], loc)
        if not isinstance(result, TupleValue) or len(result.items) != n:
            got = f"{len(result.items)} values" if isinstance(result, TupleValue) else "one value"
            raise CompileError(
                f"combiner '{node.name}' of a tuple of {n} returns a tuple of {n}, got {got}",
                self.loc(fn.decl),
                f"end it with `return ({', '.join(f'c{k}' for k in range(n))});`",
            )
        out = []
        for item, d in zip(result.items, dtypes, strict=True):
            if item.type.is_tile or item.type.is_pointer:
                raise CompileError(
                    f"combiner '{node.name}' must combine scalars",
                    loc,
                    "its items are single elements: use elementwise operations on them",
                )
            out.append(ty.cast(item, d))
        return tuple(out)

    def _combiner_function(self, node, loc: Location) -> c_ast.FuncDef:
        if not isinstance(node, c_ast.ID) or node.name not in self.unit.functions:
            raise CompileError(
                "reduce() needs the name of a helper function of this file as its combiner",
                self.loc(node),
                "e.g. `tile add(tile a, tile b) { return a + b; }` then reduce(x, 0, add)",
            )
        return self.unit.functions[node.name]

    def _inline_combiner(self, node, fn, args: list[Expr], loc: Location) -> Expr | TupleValue:
        """The helper inlined on the combiner's scalars: its local declarations (straight-line
        code, each assigned once) are substituted into what it returns, so the combiner is one
        expression per item (a lambda without statements in the CUDA)."""
        self.blocks.append([])
        try:
            result = self.inline(node.name, args, loc, statement=False)
        finally:
            body = self.blocks.pop()
        env: dict[str, Expr] = {}
        for s in body:
            if not isinstance(s, ir.Declare) or s.init is None or s.type.is_tile:
                raise CompileError(
                    f"combiner '{node.name}' must be straight-line code: declarations of "
                    "scalars, then `return`",
                    s.loc,
                    "compute with where() instead of if; a combiner cannot loop or assign",
                )
            env[s.name] = _substitute(s.init, env)
        assert result is not None, "an inlined expression has a value"
        if isinstance(result, TupleValue):
            return TupleValue(tuple(_substitute(x, env) for x in result.items), result.loc)
        return _substitute(result, env)

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
        fn = self._combiner_function(node, loc)
        a = Var(type=Type(dtype), loc=loc, name=COMBINE_ARGS[0])
        b = Var(type=Type(dtype), loc=loc, name=COMBINE_ARGS[1])
        result = self._inline_combiner(node, fn, [a, b], loc)
        if isinstance(result, TupleValue):
            raise CompileError(
                f"combiner '{node.name}' of one tile returns one value, got a tuple of "
                f"{len(result.items)}",
                self.loc(fn.decl),
                TUPLE_HINT,
            )
        result = ty.cast(result, dtype)
        if result.type.is_tile:
            raise CompileError(f"combiner '{node.name}' must combine two scalars into one", loc)
        return result


def _substitute(e: Expr, env: dict[str, Expr]) -> Expr:
    """``e`` with every read of a variable of ``env`` replaced by its value."""
    if isinstance(e, Var) and e.name in env:
        return env[e.name]
    if isinstance(e, Op) and e.args:
        args = tuple(_substitute(a, env) for a in e.args)
        if any(x is not y for x, y in zip(args, e.args, strict=True)):
            return dataclasses.replace(e, args=args)
    return e
