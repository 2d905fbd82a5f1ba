"""Typing and shape rules, apart from syntax.

Input: typed IR operands. Output: the operands converted to a common dtype and shape, and the
result type of an operation. The rules are numbered so docs and tests can name them:

T1. Weak operands (literals, INF/NAN, constexpr parameters) adopt the dtype of the typed
    operand they meet: an integer literal takes any numeric type, a float literal takes a float
    type and otherwise becomes f32. Two weak operands fold at compile time (i32 or i64 for
    integers, f32 for floats).
T2. Typed operands promote by ``dtypes.promote`` (Triton's rules).
T3. Arithmetic on bool operands first converts them to i32 (C's rule).
T4. Shapes broadcast as in NumPy: a scalar meets any tile; a dimension of 1 stretches.
T5. Comparisons give bool; ``&&``, ``||`` and ``!`` take truth values and give bool.
T6. Math functions take floats only; f16/bf16 are computed in f32 and rounded once.
T7. ``ptr + int`` and ``ptr - int`` give pointers; the integer may be a tile (a tile of
    pointers) or a scalar.
"""

from __future__ import annotations

from typing import TypeGuard

from ...dtypes import BOOL, F32, I32, I64, DType, promote
from ...errors import CompileError, Location
from ..ir import Const, Expr, Op, PointerType, Type
from .casts import cast_value


def broadcast_shapes(
    a: tuple[int, ...], b: tuple[int, ...], loc: Location, what: str
) -> tuple[int, ...]:
    """T4: NumPy broadcasting of two static shapes, or a CompileError naming both."""
    if not a:
        return b
    if not b:
        return a
    rank = max(len(a), len(b))
    pa = (1,) * (rank - len(a)) + a
    pb = (1,) * (rank - len(b)) + b
    out = []
    for x, y in zip(pa, pb, strict=True):
        if x != y and 1 not in (x, y):
            raise CompileError(
                f"shape mismatch in {what}: {list(a)} and {list(b)} do not broadcast",
                loc,
                "operands of an elementwise operation must have equal shapes, "
                "or 1 where they differ",
            )
        out.append(max(x, y))
    return tuple(out)


def cast(x: Expr, dtype: DType) -> Expr:
    """Convert ``x`` to ``dtype`` (no-op when it already is); constants convert at compile time,
    by the rules of ``lower/ops/casts.py`` (the ones the interpreter and the GPU follow)."""
    if x.type.dtype == dtype:
        return x
    if isinstance(x, Const):
        # a weak float literal holds the value as written (a Python float, f64): converted
        # from it, rounded once ((f64)1e-310 is not 0, (f64)DBL_MAX is not inf)
        weak_float = x.weak and isinstance(x.value, float)
        value = convert_value(x.value, dtype, None if weak_float else x.type.dtype)
        return Const(type=Type(dtype, x.type.shape), loc=x.loc, value=value)
    return Op(
        type=x.type.with_dtype(dtype), loc=x.loc, op="cast", args=(x,), attrs=(("to", dtype),)
    )


def convert_value(
    value: int | float | bool, dtype: DType, src: DType | PointerType | None = None
) -> int | float | bool:
    """A Python constant (of dtype ``src``, else inferred from the value) as ``dtype`` holds it:
    the cast rules C1-C5 of ``lower/ops/casts.py`` (integers wrap, floats saturate into integers,
    NaN gives 0, floats round once)."""
    if isinstance(src, PointerType):
        src = None
    return cast_value(value, dtype, src)


def weak_literal_type(value: int | float | bool) -> DType:
    if isinstance(value, bool):
        return BOOL
    if isinstance(value, int):
        return I32 if -(2**31) <= value < 2**31 else I64
    return F32


def is_weak(x: Expr) -> TypeGuard[Const]:
    return isinstance(x, Const) and x.weak


def resolve_weak(a: Expr, b: Expr) -> tuple[Expr, Expr]:
    """T1: give a weak operand the dtype of the typed operand it meets."""
    if is_weak(a) and not is_weak(b):
        return _adopt(a, b), b
    if is_weak(b) and not is_weak(a):
        return a, _adopt(b, a)
    return a, b


def _adopt(weak: Const, other: Expr) -> Expr:
    target = other.type.dtype
    if isinstance(target, PointerType):
        return weak
    value = weak.value
    if isinstance(value, float) and not target.is_float:
        target = F32
    elif isinstance(value, bool) and target.kind != "b":
        target = target
    if target.is_int and isinstance(value, int) and not isinstance(value, bool):
        lo, hi = _int_range(target)
        if not lo <= value <= hi:
            target = promote(target, weak_literal_type(value))
    converted = convert_value(value, target)
    name = weak.name if converted == value and type(converted) is type(value) else None
    return Const(type=Type(target), loc=weak.loc, value=converted, weak=False, name=name)


def _int_range(d: DType) -> tuple[int, int]:
    if d.kind == "u":
        return 0, (1 << d.bits) - 1
    return -(1 << (d.bits - 1)), (1 << (d.bits - 1)) - 1


def common_dtype(a: Expr, b: Expr) -> DType:
    """T1 + T2 for two operands whose weak constants are already resolved (not pointers)."""
    return promote(a.type.scalar, b.type.scalar)


def numeric(x: Expr, loc: Location, what: str) -> Expr:
    """T3: arithmetic sees bool as i32; pointers are refused."""
    if isinstance(x.type.dtype, PointerType):
        raise CompileError(
            f"{what} is not defined on pointers", loc, "only ptr + int and ptr - int are"
        )
    if x.type.dtype.kind == "b":
        return cast(x, I32)
    return x


def require_float(x: Expr, loc: Location, what: str) -> None:
    """T6: math functions take floats."""
    dtype = x.type.dtype
    if isinstance(dtype, PointerType) or not dtype.is_float:
        raise CompileError(
            f"{what} needs a float operand, got {x.type}",
            loc,
            f"convert first, e.g. {what}((f32)x)",
        )


def require_int(x: Expr, loc: Location, what: str) -> None:
    dtype = x.type.dtype
    if isinstance(dtype, PointerType) or dtype.is_float:
        raise CompileError(f"{what} needs integer operands, got {x.type}", loc)


def to_bool(x: Expr, loc: Location) -> Expr:
    """T5: a truth value; numbers compare with zero."""
    if isinstance(x.type.dtype, PointerType):
        raise CompileError("a pointer is not a truth value", loc)
    return cast(x, BOOL)


def index_dtype(index64: bool) -> DType:
    """The dtype `i32` stands for in index arithmetic of this specialisation."""
    return I64 if index64 else I32


def broadcast_to(x: Expr, shape: tuple[int, ...]) -> Expr:
    """T4 made explicit: a tile operand stretched to ``shape`` (scalars stay scalars). Missing
    leading dimensions become ``expand_dims``, stretched ones a ``broadcast`` op, so every
    elementwise op sees operands of its own shape."""
    if not x.type.is_tile or x.type.shape == shape:
        return x
    while len(x.type.shape) < len(shape):
        x = Op(
            type=x.type.with_shape((1,) + x.type.shape),
            loc=x.loc,
            op="expand_dims",
            args=(x,),
            attrs=(("axis", 0),),
        )
    if x.type.shape == shape:
        return x
    return Op(type=x.type.with_shape(shape), loc=x.loc, op="broadcast", args=(x,))
