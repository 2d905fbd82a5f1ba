"""Matrix products: dot(a, b, acc, input_precision), typed here.

Input: the call's argument nodes. Output: an ``ir.Op`` ``dot`` of shape [M, N] (or [B, M, N]),
its operands converted, the precision explicit. f16/bf16 inputs accumulate in f32, i8 in i32,
f64 in f64; f32 inputs are IEEE unless TF32 or TF32X3 is asked for: never a silent TF32.
"""

from __future__ import annotations

from ...constants import DEFAULT_PRECISION, name_of, names, values
from ...constants import PRECISIONS as PRECISION_TABLE
from ...dtypes import F32, F64, I32, DType
from ...errors import CompileError, Location
from ..ir import Const, Expr, Op, Type
from ..ops import typing as ty
from .context import LoweringContext

# input_precision constants (weak integers in kernel text, as the prelude declares them)
PRECISIONS = values(PRECISION_TABLE)
_INPUTS = ("f16", "bf16", "f32", "f64", "i8")
_ACCUMULATORS = {"i8": I32, "f64": F64}  # (the others: F32)


class DotOps(LoweringContext):
    def call_dot(self, args, loc: Location) -> Expr:
        a, b = self.tile_arg(args[0], "dot"), self.tile_arg(args[1], "dot")
        for x, node in ((a, args[0]), (b, args[1])):
            if not isinstance(x.type.dtype, DType) or x.type.dtype.name not in _INPUTS:
                raise CompileError(
                    f"dot() takes f16, bf16, f32, f64 or i8 tiles, got {x.type}", self.loc(node)
                )
        if a.type.dtype != b.type.dtype:
            raise CompileError(
                f"dot() operands must have one dtype, got {a.type.dtype} and {b.type.dtype}",
                loc,
                "cast one of them, e.g. dot((f16)a, b)",
            )
        rank = len(a.type.shape)
        if rank not in (2, 3) or len(b.type.shape) != rank:
            raise CompileError(
                f"dot() needs two 2-D tiles (or two 3-D batches), got {a.type} and {b.type}", loc
            )
        *batch, m, k = a.type.shape
        *batch_b, k2, n = b.type.shape
        if k != k2 or batch != batch_b:
            raise CompileError(
                f"shape mismatch in dot(): {list(a.type.shape)} @ {list(b.type.shape)}",
                loc,
                "the inner dimensions must agree: [M, K] @ [K, N]",
            )
        if min(m, n, k) < 16:
            raise CompileError(
                f"dot() needs M, N and K of at least 16, got M={m}, N={n}, K={k}",
                loc,
                "pad the tiles to 16 and mask the extra rows and columns",
            )
        acc_dtype = _ACCUMULATORS.get(a.type.scalar.name, F32)
        shape = (*batch, m, n)
        if len(args) > 2:
            acc = self.expr(args[2])
            if acc.type.is_tile and acc.type.shape != shape:
                raise CompileError(
                    f"dot() accumulator of shape {list(acc.type.shape)}, expected {list(shape)}",
                    self.loc(args[2]),
                )
            acc = ty.cast(acc, acc_dtype)
        else:
            acc = Const(type=Type(acc_dtype), loc=loc, value=0.0 if acc_dtype.is_float else 0)
        acc = ty.broadcast_to(acc, shape) if acc.type.is_tile else acc
        precision = PRECISIONS[DEFAULT_PRECISION]
        if len(args) > 3:
            precision = self.constant(args[3], "the input precision of dot()")
            if precision not in PRECISIONS.values():
                raise CompileError(
                    f"input_precision must be {names(PRECISION_TABLE)}", self.loc(args[3])
                )
            if precision != PRECISIONS[DEFAULT_PRECISION] and a.type.dtype != F32:
                raise CompileError("TF32 and TF32X3 apply to f32 inputs only", self.loc(args[3]))
        name = name_of(PRECISION_TABLE, precision)
        return Op(
            type=Type(acc_dtype, shape),
            loc=loc,
            op="dot",
            args=(a, b, acc),
            attrs=(("precision", name),),
        )
