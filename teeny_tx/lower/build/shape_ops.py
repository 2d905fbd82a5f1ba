"""Shape operations: expand_dims, broadcast_to, reshape, trans, permute, cat, join, split, flip.

Input: pycparser argument nodes of a call, through the builder's expression methods. Output:
typed IR nodes (``ir.Op``) with checked shapes and dtypes, or a CompileError at the argument.
A mixin of :class:`~teeny_tx.lower.build.builder.Builder`: ``call_<op>`` is found by the op's name.
"""

from __future__ import annotations

from ...errors import CompileError, Location
from ..ir import Expr, Op, Type
from ..ops import typing as ty
from .context import LoweringContext


class ShapeOps(LoweringContext):
    def tile_arg(self, node, what: str) -> Expr:
        x = self.expr(node)
        if not x.type.is_tile:
            raise CompileError(f"{what}() needs a tile, got {x.type}", self.loc(node))
        return x

    def axis_arg(self, node, rank: int, what: str, extra: int = 0) -> int:
        axis = self.constant(node, f"the axis of {what}()")
        if not isinstance(axis, int) or not -(rank + extra) <= axis < rank + extra:
            raise CompileError(
                f"{what}() axis {axis} is out of range for a tile of rank {rank}", self.loc(node)
            )
        return axis % (rank + extra)

    def dims_args(self, nodes, what: str) -> tuple[int, ...]:
        dims = tuple(self.constant(n, f"the sizes of {what}()") for n in nodes)
        for n, d in zip(nodes, dims, strict=True):
            if not isinstance(d, int) or d <= 0 or d & (d - 1):
                raise CompileError(
                    f"{what}() sizes must be positive powers of two, got {d}", self.loc(n)
                )
        return dims

    def call_expand_dims(self, args, loc: Location) -> Expr:
        x = self.tile_arg(args[0], "expand_dims")
        rank = len(x.type.shape)
        axis = self.axis_arg(args[1], rank, "expand_dims", extra=1)
        shape = x.type.shape[:axis] + (1,) + x.type.shape[axis:]
        return Op(
            type=x.type.with_shape(shape),
            loc=loc,
            op="expand_dims",
            args=(x,),
            attrs=(("axis", axis),),
        )

    def call_broadcast_to(self, args, loc: Location) -> Expr:
        x = self.tile_arg(args[0], "broadcast_to")
        shape = self.dims_args(args[1:], "broadcast_to")
        if ty.broadcast_shapes(shape, x.type.shape, loc, "broadcast_to()") != shape:
            raise CompileError(
                f"broadcast_to(): {list(x.type.shape)} does not broadcast to {list(shape)}", loc
            )
        return ty.broadcast_to(x, shape)

    def call_reshape(self, args, loc: Location) -> Expr:
        x = self.tile_arg(args[0], "reshape")
        shape = self.dims_args(args[1:], "reshape")
        if Type(x.type.dtype, shape).numel != x.type.numel:
            raise CompileError(
                f"reshape() from {list(x.type.shape)} to {list(shape)} "
                "changes the number of elements",
                loc,
            )
        return Op(type=x.type.with_shape(shape), loc=loc, op="reshape", args=(x,))

    def call_trans(self, args, loc: Location) -> Expr:
        x = self.tile_arg(args[0], "trans")
        if len(x.type.shape) != 2:
            raise CompileError(
                f"trans() needs a 2-D tile, got {x.type}", loc, "use permute() for other ranks"
            )
        return self._permute(x, (1, 0), loc)

    def call_permute(self, args, loc: Location) -> Expr:
        x = self.tile_arg(args[0], "permute")
        dims = tuple(self.constant(n, "the axes of permute()") for n in args[1:])
        if sorted(dims) != list(range(len(x.type.shape))):
            raise CompileError(
                f"permute() axes {list(dims)} are not a permutation of the tile's axes", loc
            )
        return self._permute(x, dims, loc)

    def _permute(self, x: Expr, dims: tuple[int, ...], loc: Location) -> Expr:
        shape = tuple(x.type.shape[d] for d in dims)
        return Op(
            type=x.type.with_shape(shape), loc=loc, op="permute", args=(x,), attrs=(("dims", dims),)
        )

    def _pair(self, args, what: str, loc: Location) -> tuple[Expr, Expr]:
        a, b = self.tile_arg(args[0], what), self.tile_arg(args[1], what)
        a, b = ty.resolve_weak(a, b)
        if a.type.shape != b.type.shape:
            raise CompileError(
                f"shape mismatch in {what}(): {list(a.type.shape)} and {list(b.type.shape)}",
                loc,
                "both tiles must have the same shape",
            )
        if a.type.is_pointer or b.type.is_pointer:
            raise CompileError(f"{what}() of pointers is not supported", loc)
        dtype = ty.common_dtype(a, b)
        return ty.cast(a, dtype), ty.cast(b, dtype)

    def call_cat(self, args, loc: Location) -> Expr:
        a, b = self._pair(args, "cat", loc)
        axis = self.axis_arg(args[2], len(a.type.shape), "cat") if len(args) > 2 else 0
        shape = list(a.type.shape)
        shape[axis] *= 2
        return Op(
            type=a.type.with_shape(tuple(shape)),
            loc=loc,
            op="cat",
            args=(a, b),
            attrs=(("axis", axis),),
        )

    def call_join(self, args, loc: Location) -> Expr:
        a, b = self._pair(args, "join", loc)
        return Op(type=a.type.with_shape(a.type.shape + (2,)), loc=loc, op="join", args=(a, b))

    def call_split(self, args, loc: Location) -> Expr:
        x = self.tile_arg(args[0], "split")
        k = self.constant(args[1], "the half split() takes")
        if not x.type.shape or x.type.shape[-1] != 2:
            raise CompileError(f"split() needs a last dimension of size 2, got {x.type}", loc)
        if k not in (0, 1):
            raise CompileError(f"split(x, k) takes k = 0 or 1, got {k}", self.loc(args[1]))
        shape = x.type.shape[:-1]
        if not shape:
            raise CompileError("split() of a [2] tile gives scalars: use where() or sum()", loc)
        return Op(
            type=x.type.with_shape(shape), loc=loc, op="split", args=(x,), attrs=(("index", k),)
        )

    def call_flip(self, args, loc: Location) -> Expr:
        x = self.tile_arg(args[0], "flip")
        axis = self.axis_arg(args[1], len(x.type.shape), "flip") if len(args) > 1 else 0
        return self._flip(x, axis, loc)

    def _flip(self, x: Expr, axis: int, loc: Location) -> Expr:
        return Op(type=x.type, loc=loc, op="flip", args=(x,), attrs=(("axis", axis),))
