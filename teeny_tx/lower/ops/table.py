"""The op table: every operation of the language, one entry each.

Input: nothing (declarations). Output: ``OPS``, name → :class:`OpDef`. An entry holds the
one-line doc, the typing rule (operands → typed IR node), the CUDA spelling and the NumPy
implementation. The prelude (``prelude/language.h``) declares a prototype for every entry with
``prelude=True``; a test checks that prelude, table and docs agree. C operators are entries
too (``prelude=False``): the builder maps ``+`` to ``add`` and so on.

CUDA spellings of elementwise ops are format strings over the operands' texts (``{0}``,
``{1}``...) and ``{T}``, the result's CUDA type. Structural ops (``arange``, ``load``...) name
an emitter method instead (``cuda=None``) and give the interpreter a function of the node.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ...constants import PROPAGATE_NAN
from ...dtypes import BOOL, DType
from ...errors import CompileError, Location
from ..ir import Const, Expr, Op, PointerType, Type
from . import exact_fma
from . import typing as ty
from .casts import cast_array, cast_toward_zero
from .registry import OPS, make
from .registry import define as _def


def _small_int(d: DType) -> bool:
    return d.is_int and d.bits < 32


def _wrap(expr: str) -> Callable[[DType], str]:
    """C promotes narrow integers to int; wrap the result back so both backends agree."""
    return lambda d: f"({{T}})({expr})" if _small_int(d) else f"({expr})"


def _int_helper(helper: str, expr: str, always: bool = False) -> Callable[[DType], str]:
    """An integer op by rules I1-I4 (``lower/ops/casts.py``): ``tx::<helper><T>(...)`` computes in
    an unsigned type and converts back, for signed and narrow types (``always``: every integer
    type, for shifts and division, whose C operators are undefined on some operands); u32/u64
    add, sub and mul keep C's operator, which wraps already. Floats and pointers keep ``expr``."""
    args = "{0}" if "{1}" not in expr else "{0}, {1}"

    def spell(d: DType) -> str:
        if isinstance(d, DType) and d.is_int and (always or d.kind == "i" or d.bits < 32):
            return f"tx::{helper}<{{T}}>({args})"
        return f"({expr})"

    return spell


# ---------------------------------------------------------------- typing rules


def rule_arith(name: str, args: list[Expr], loc: Location, ctx) -> Expr:
    a, b = args
    if name in ("add", "sub") and isinstance(a.type.dtype, PointerType):
        return _pointer_offset(name, a, b, loc)
    if name == "add" and isinstance(b.type.dtype, PointerType):
        return _pointer_offset(name, b, a, loc)
    a = ty.numeric(a, loc, OPS[name].symbol or name)
    b = ty.numeric(b, loc, OPS[name].symbol or name)
    a, b = ty.resolve_weak(a, b)
    if name in ("lshift", "rshift", "bitand", "bitor", "bitxor"):
        ty.require_int(a, loc, OPS[name].symbol or name)
        ty.require_int(b, loc, OPS[name].symbol or name)
    dtype = ty.common_dtype(a, b)
    shape = ty.broadcast_shapes(a.type.shape, b.type.shape, loc, f"'{OPS[name].symbol or name}'")
    return make(name, [ty.cast(a, dtype), ty.cast(b, dtype)], Type(dtype, shape), loc)


def rule_bitwise(name: str, args: list[Expr], loc: Location, ctx) -> Expr:
    """&, |, ^: bool with bool stays bool (mask logic); otherwise integer arithmetic."""
    a, b = ty.resolve_weak(*args)
    if a.type.dtype == BOOL and b.type.dtype == BOOL:
        shape = ty.broadcast_shapes(a.type.shape, b.type.shape, loc, f"'{OPS[name].symbol}'")
        return make(name, [a, b], Type(BOOL, shape), loc)
    return rule_arith(name, [a, b], loc, ctx)


def rule_compare(name: str, args: list[Expr], loc: Location, ctx) -> Expr:
    a, b = ty.resolve_weak(*args)
    for x in (a, b):
        if isinstance(x.type.dtype, PointerType):
            raise CompileError("pointers cannot be compared", loc)
    dtype = ty.common_dtype(a, b)
    shape = ty.broadcast_shapes(a.type.shape, b.type.shape, loc, f"'{OPS[name].symbol}'")
    return make(name, [ty.cast(a, dtype), ty.cast(b, dtype)], Type(BOOL, shape), loc)


def rule_logical(name: str, args: list[Expr], loc: Location, ctx) -> Expr:
    args = [ty.to_bool(a, loc) for a in args]
    shape = args[0].type.shape
    for x in args[1:]:
        shape = ty.broadcast_shapes(shape, x.type.shape, loc, f"'{OPS[name].symbol}'")
    return make(name, args, Type(BOOL, shape), loc)


def rule_unary_arith(name: str, args: list[Expr], loc: Location, ctx) -> Expr:
    (a,) = args
    a = ty.numeric(a, loc, OPS[name].symbol or name)
    if name == "invert":
        ty.require_int(a, loc, "~")
    if isinstance(a, Const) and a.weak and isinstance(a.value, float) and name == "neg":
        # exact on the value as written (f64), not rounded through f32 first: -5e-324 stays
        return Const(type=a.type, loc=loc, value=-a.value, weak=True)
    if isinstance(a, Const) and a.weak:
        folded = make(name, [a], a.type, loc)
        assert isinstance(folded, Const)
        return Const(type=folded.type, loc=loc, value=folded.value, weak=True)
    return make(name, [a], a.type, loc)


def rule_float_math(name: str, args: list[Expr], loc: Location, ctx) -> Expr:
    args = _resolve_all(args)
    for x in args:
        ty.require_float(x, loc, name)
    return _elementwise_common(name, args, loc)


def rule_numeric_common(name: str, args: list[Expr], loc: Location, ctx) -> Expr:
    args = [ty.numeric(a, loc, name) for a in _resolve_all(args)]
    return _elementwise_common(name, args, loc)


def rule_cdiv(name: str, args: list[Expr], loc: Location, ctx) -> Expr:
    args = _resolve_all(args)
    for x in args:
        ty.require_int(x, loc, name)
    return _elementwise_common(name, args, loc)


def rule_where(name: str, args: list[Expr], loc: Location, ctx) -> Expr:
    cond, a, b = args
    cond = ty.to_bool(cond, loc)
    a, b = ty.resolve_weak(a, b)
    if a.type.is_pointer or b.type.is_pointer:
        if a.type.dtype != b.type.dtype:
            raise CompileError(
                f"where() between {a.type.dtype} and {b.type.dtype}: "
                "pointers must have the same type",
                loc,
            )
        shape = ty.broadcast_shapes(cond.type.shape, a.type.shape, loc, "where()")
        shape = ty.broadcast_shapes(shape, b.type.shape, loc, "where()")
        return make(name, [cond, a, b], Type(a.type.dtype, shape), loc)
    dtype = ty.common_dtype(a, b)
    shape = ty.broadcast_shapes(cond.type.shape, a.type.shape, loc, "where()")
    shape = ty.broadcast_shapes(shape, b.type.shape, loc, "where()")
    return make(name, [cond, ty.cast(a, dtype), ty.cast(b, dtype)], Type(dtype, shape), loc)


def _resolve_all(args: list[Expr]) -> list[Expr]:
    typed = [a for a in args if not ty.is_weak(a)]
    if not typed:
        return args
    anchor = typed[0]
    for other in typed[1:]:
        if anchor.type.is_pointer or other.type.is_pointer:
            continue  # refused by the rule that follows, with its own message
        if ty.common_dtype(anchor, other) != anchor.type.dtype:
            anchor = other
    return [ty.resolve_weak(a, anchor)[0] if ty.is_weak(a) else a for a in args]


def _elementwise_common(name: str, args: list[Expr], loc: Location) -> Expr:
    dtype = args[0].type.scalar  # the rules above refuse pointers first
    shape: tuple[int, ...] = ()
    for x in args[1:]:
        dtype = ty.common_dtype(Const(type=Type(dtype), loc=loc, value=0), x)
    for x in args:
        shape = ty.broadcast_shapes(shape, x.type.shape, loc, f"{name}()")
    return make(name, [ty.cast(x, dtype) for x in args], Type(dtype, shape), loc)


def _pointer_offset(name: str, ptr: Expr, off: Expr, loc: Location) -> Expr:
    if isinstance(off.type.dtype, PointerType) or not off.type.dtype.is_int:
        raise CompileError(
            f"a pointer offset must be an integer, got {off.type}",
            loc,
            "cast the offset, e.g. (i32)x",
        )
    if ty.is_weak(off):
        off = ty.cast(off, ty.weak_literal_type(off.value))
    shape = ty.broadcast_shapes(
        ptr.type.shape, off.type.shape, loc, f"pointer '{OPS[name].symbol}'"
    )
    if name == "sub":
        off = make("neg", [off], off.type, loc)
    # operands of lower rank get their missing leading dimensions (T4), as in arithmetic
    ptr, off = (_leading_dims(x, len(shape)) for x in (ptr, off))
    return Op(type=Type(ptr.type.dtype, shape), loc=loc, op="add", args=(ptr, off))


def _leading_dims(x: Expr, rank: int) -> Expr:
    while x.type.is_tile and len(x.type.shape) < rank:
        x = Op(
            type=x.type.with_shape((1,) + x.type.shape),
            loc=x.loc,
            op="expand_dims",
            args=(x,),
            attrs=(("axis", 0),),
        )
    return x


# ---------------------------------------------------------------- NumPy semantics (C's)


def _c_div(a, b):
    if a.dtype.kind in "iu":
        q = np.floor_divide(a, np.where(b == 0, 1, b))
        fix = (np.remainder(a, np.where(b == 0, 1, b)) != 0) & ((a < 0) != (b < 0))
        return np.where(b == 0, 0, q + fix).astype(a.dtype)
    return np.divide(a, b)


def _c_mod(a, b):
    if a.dtype.kind in "iu":
        return np.where(b == 0, 0, np.fmod(a, np.where(b == 0, 1, b))).astype(a.dtype)
    return np.fmod(a, b)


def _in_f32(fn):
    """f16/bf16 math is computed in f32 and rounded once; f32/f64 use their own precision."""

    def run(*xs):
        dtype = xs[0].dtype
        if dtype.itemsize == 2:
            return fn(*[x.astype(np.float32) for x in xs]).astype(dtype)
        return fn(*xs).astype(dtype)

    return run


def _erf(x):
    from math import erf

    return np.vectorize(erf, otypes=[np.float64])(x).astype(x.dtype)


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _fast_exp2(x):
    """2^x as ``ex2.approx.ftz.f32`` gives it: results below the smallest normal float (2^-126)
    flush to zero; f64 is exact (CUDA's exp2)."""
    y = np.exp2(x)
    if y.dtype == np.float32:
        y = np.where(np.abs(y) < np.finfo(np.float32).tiny, np.float32(0), y)
    return y


def _rsqrt(x):
    return 1.0 / np.sqrt(x)


def _abs(x):
    return np.abs(x) if x.dtype.kind != "b" else x


def _maximum(a, b):
    return np.fmax(a, b) if a.dtype.kind == "f" or a.dtype.name == "bfloat16" else np.maximum(a, b)


def _minimum(a, b):
    return np.fmin(a, b) if a.dtype.kind == "f" or a.dtype.name == "bfloat16" else np.minimum(a, b)


def _cdiv(a, b):
    return _c_div(a + b - np.ones_like(a), b)


# ---------------------------------------------------------------- the table: operators

_ARITH = (
    ("add", "+", "sum", np.add),
    ("sub", "-", "difference", np.subtract),
    ("mul", "*", "product", np.multiply),
    ("div", "/", "quotient; integers truncate toward zero as in C", _c_div),
    ("mod", "%", "remainder with the sign of the dividend (C's %, fmod for floats)", _c_mod),
    ("lshift", "<<", "shift left", np.left_shift),
    ("rshift", ">>", "shift right: arithmetic for signed, logical for unsigned", np.right_shift),
)


def _mod_spelling(integer: Callable[[DType], str]) -> Callable[[DType], str]:
    return lambda d: "tx::fmod({0}, {1})" if d.is_float else integer(d)


_INT_HELPERS = {
    "add": "wrap_add",
    "sub": "wrap_sub",
    "mul": "wrap_mul",
    "div": "int_div",
    "mod": "int_mod",
    "lshift": "wrap_shl",
    "rshift": "wrap_shr",
}
_WRAP_OPS = ("add", "sub", "mul")  # C's unsigned operators wrap already at 32 and 64 bits
_np: Callable[..., Any]  # each family's NumPy twin, in the loops below
for _name, _sym, _doc, _np in _ARITH:
    _cuda = _int_helper(_INT_HELPERS[_name], f"{{0}} {_sym} {{1}}", _name not in _WRAP_OPS)
    if _name == "mod":
        _cuda = _mod_spelling(_cuda)
    _interp = "op_add" if _name == "add" else None  # pointer arithmetic
    _def(
        _name,
        f"a {_sym} b: {_doc}",
        2,
        rule_arith,
        _cuda,
        _np,
        prelude=False,
        symbol=_sym,
        interp=_interp,
    )

for _name, _sym, _np in (
    ("bitand", "&", np.bitwise_and),
    ("bitor", "|", np.bitwise_or),
    ("bitxor", "^", np.bitwise_xor),
):
    _def(
        _name,
        f"a {_sym} b: bitwise on integers, logical on bool",
        2,
        rule_bitwise,
        _wrap(f"{{0}} {_sym} {{1}}"),
        _np,
        prelude=False,
        symbol=_sym,
    )

for _name, _sym, _np in (
    ("lt", "<", np.less),
    ("le", "<=", np.less_equal),
    ("gt", ">", np.greater),
    ("ge", ">=", np.greater_equal),
    ("eq", "==", np.equal),
    ("ne", "!=", np.not_equal),
):
    _def(
        _name,
        f"a {_sym} b: comparison, bool result",
        2,
        rule_compare,
        f"({{0}} {_sym} {{1}})",
        _np,
        prelude=False,
        symbol=_sym,
    )

_def(
    "land",
    "a && b: logical and of truth values (both sides evaluated on tiles)",
    2,
    rule_logical,
    "({0} && {1})",
    np.logical_and,
    prelude=False,
    symbol="&&",
)
_def(
    "lor",
    "a || b: logical or of truth values (both sides evaluated on tiles)",
    2,
    rule_logical,
    "({0} || {1})",
    np.logical_or,
    prelude=False,
    symbol="||",
)
_def(
    "lnot", "!a: logical not", 1, rule_logical, "(!{0})", np.logical_not, prelude=False, symbol="!"
)
_def(
    "neg",
    "-a: negation",
    1,
    rule_unary_arith,
    _int_helper("wrap_neg", "-{0}"),
    np.negative,
    prelude=False,
    symbol="-",
)
_def(
    "invert",
    "~a: bitwise not of integers",
    1,
    rule_unary_arith,
    _wrap("~{0}"),
    np.invert,
    prelude=False,
    symbol="~",
)


# ---------------------------------------------------------------- the table: named elementwise ops

_def(
    "where",
    "where(cond, a, b): a where cond else b, broadcast",
    3,
    rule_where,
    "({0} ? {1} : {2})",
    np.where,
    interp="op_where",  # pointer operands
)


def rule_minmax(name: str, args: list[Expr], loc: Location, ctx) -> Expr:
    """maximum/minimum(a, b, propagate = PROPAGATE_NAN_NONE): with PROPAGATE_NAN_ALL a NaN
    operand gives NaN (the ``*_nan`` entries)."""
    if len(args) == 3:
        propagate = args.pop()
        values = {c.value: c.name for c in PROPAGATE_NAN}
        value = propagate.value if isinstance(propagate, Const) else None
        if not isinstance(value, int) or value not in values:
            raise CompileError(
                f"the third argument of {name}() is PROPAGATE_NAN_NONE or PROPAGATE_NAN_ALL",
                propagate.loc,
                f"e.g. {name}(a, b, PROPAGATE_NAN_ALL): a NaN operand gives NaN",
            )
        if values[value] == "PROPAGATE_NAN_ALL":
            return rule_numeric_common(f"{name}_nan", args, loc, ctx)
    return rule_numeric_common(name, args, loc, ctx)


_def(
    "maximum",
    "maximum(a, b, propagate = PROPAGATE_NAN_NONE): elementwise max; a NaN operand yields "
    "the other (fmax), or NaN with PROPAGATE_NAN_ALL",
    (2, 3),
    rule_minmax,
    "tx::maximum({0}, {1})",
    _maximum,
    lowers_to=("maximum", "maximum_nan"),
)
_def(
    "minimum",
    "minimum(a, b, propagate = PROPAGATE_NAN_NONE): elementwise min; a NaN operand yields "
    "the other (fmin), or NaN with PROPAGATE_NAN_ALL",
    (2, 3),
    rule_minmax,
    "tx::minimum({0}, {1})",
    _minimum,
    lowers_to=("minimum", "minimum_nan"),
)
_def(
    "maximum_nan",
    "maximum(a, b, PROPAGATE_NAN_ALL): elementwise max; a NaN operand yields NaN",
    2,
    rule_numeric_common,
    "tx::maximum_nan({0}, {1})",
    np.maximum,
    prelude=False,
)
_def(
    "minimum_nan",
    "minimum(a, b, PROPAGATE_NAN_ALL): elementwise min; a NaN operand yields NaN",
    2,
    rule_numeric_common,
    "tx::minimum_nan({0}, {1})",
    np.minimum,
    prelude=False,
)
_def(
    "cdiv",
    "cdiv(a, b): ceiling division of integers, (a + b - 1) / b",
    2,
    rule_cdiv,
    _int_helper("int_cdiv", "({0} + {1} - 1) / {1}", always=True),
    _cdiv,
)
_def(
    "abs",
    "abs(x): absolute value, integers and floats",
    1,
    rule_numeric_common,
    "tx::abs({0})",
    _abs,
)

_MATH = (
    ("exp", "e^x", np.exp),
    ("exp2", "2^x", np.exp2),
    ("log", "natural logarithm", np.log),
    ("log2", "base-2 logarithm", np.log2),
    ("sqrt", "square root, IEEE rounded", np.sqrt),
    ("rsqrt", "1/sqrt(x); CUDA's rsqrt is within 2 ulp", _rsqrt),
    ("sin", "sine", np.sin),
    ("cos", "cosine", np.cos),
    ("tanh", "hyperbolic tangent", np.tanh),
    ("erf", "error function", _erf),
    ("floor", "round toward -infinity", np.floor),
    ("ceil", "round toward +infinity", np.ceil),
    ("sigmoid", "1 / (1 + e^-x)", _sigmoid),
)
for _name, _doc, _np in _MATH:
    _def(_name, f"{_name}(x): {_doc}", 1, rule_float_math, f"tx::{_name}({{0}})", _in_f32(_np))
_def(
    "fast_exp2",
    "fast_exp2(x): 2^x by the hardware's approximation (ex2.approx.ftz.f32, relative error "
    "below 2^-22); results under 2^-126 flush to 0; f64 as exp2",
    1,
    rule_float_math,
    "tx::fast_exp2({0})",
    _in_f32(_fast_exp2),
)
_def(
    "fma",
    "fma(a, b, c): a * b + c rounded once",
    3,
    rule_float_math,
    "tx::fma({0}, {1}, {2})",
    exact_fma.fma,
)
_def("pow", "pow(x, y): x^y", 2, rule_float_math, "tx::pow({0}, {1})", _in_f32(np.power))


def _numpy_cast(x, to: DType):
    """C casts by the rules C1-C5 of ``lower/ops/casts.py``: float to integer truncates, saturates
    and gives 0 for NaN; conversions to a float round once."""
    return cast_array(x, to)


_def(
    "int_to_ptr",
    "(T *)x: the 64-bit integer x (i64 or u64) read as the address of T data, e.g. an entry of a "
    "table of pointers the host filled; the interpreter maps it back to an array of the launch",
    1,
    None,
    "reinterpret_cast<{T}>({0})",
    None,
    prelude=False,
    family="cast",
    interp="op_int_to_ptr",
)
_def(
    "cast",
    "cast(x, T, rounding = RTNE), (T)x: convert to dtype T; float to int truncates and "
    "saturates, NaN gives 0; to a float rounds once (lower/ops/casts.py), toward zero with RTZ",
    (2, 3),
    None,  # typed by Builder.call_cast (the C cast (T)x by Builder.expr_Cast)
    "tx::cast<{T}>({0})",
    None,
    family="cast",
    interp="elementwise",
    lowers_to=("cast", "cast_rtz"),
)
_def(
    "cast_rtz",
    "cast(x, T, RTZ): a float narrowed to the float type T, rounded toward zero",
    1,
    None,
    "tx::cast_rtz<{T}>({0})",
    None,
    prelude=False,
    family="cast",
    interp="elementwise",
)


# ---------------------------------------------------------------- hints, bit casts, barriers


def _constant_power_of_two(x: Expr, loc: Location, what: str) -> int:
    if not isinstance(x, Const) or not isinstance(x.value, int) or isinstance(x.value, bool):
        raise CompileError(f"{what} must be an integer constant", loc, "e.g. multiple_of(x, 16)")
    n = x.value
    if n <= 0 or n & (n - 1):
        raise CompileError(f"{what} must be a positive power of two, got {n}", loc)
    return n


def rule_hint(name: str, args: list[Expr], loc: Location, ctx) -> Expr:
    """multiple_of / max_contiguous: the value unchanged, with a fact for the axis analysis
    (lower/passes/axisinfo.py). A false promise is undefined behaviour on the GPU, as in Triton."""
    x, n = args
    dtype = x.type.dtype
    if not isinstance(dtype, PointerType) and not dtype.is_int:
        raise CompileError(
            f"{name}() takes integer or pointer values, got {x.type}", loc, OPS[name].doc
        )
    bound = _constant_power_of_two(n, loc, f"the {name}() bound")
    if isinstance(x, Const):
        return x
    return Op(type=x.type, loc=loc, op=name, args=(x,), attrs=(("n", bound),))


def bitcast(x: Expr, target: DType, loc: Location) -> Expr:
    """bitcast(x, T): the same bits read as T (``Builder.call_bitcast`` reads the type name)."""
    src = x.type.dtype
    if isinstance(src, PointerType) or src.kind == "b" or target.kind == "b":
        raise CompileError(
            f"bitcast() reinterprets numbers of equal width, not {x.type} as {target}", loc
        )
    if src.bits != target.bits:
        raise CompileError(
            f"bitcast() from {src} ({src.bits} bits) to {target} ({target.bits} bits)",
            loc,
            "the widths must be equal; convert with a cast first, e.g. bitcast((f32)x, u32)",
        )
    if ty.is_weak(x):
        x = ty.cast(x, ty.weak_literal_type(x.value) if src.bits == 32 else src)
    if isinstance(x, Const):
        value = np.asarray(x.value, dtype=x.type.scalar.np).view(target.np).item()
        return Const(type=Type(target), loc=loc, value=value)
    return Op(type=x.type.with_dtype(target), loc=loc, op="bitcast", args=(x,))


def make_cast_rtz(x: Expr, to: DType, loc: Location) -> Expr:
    """``cast(x, to, RTZ)`` of a float to a narrower float (C6 of lower/ops/casts.py)."""
    if isinstance(x, Const):
        value = cast_toward_zero(np.asarray(x.value, x.type.scalar.np), to).item()
        return Const(type=Type(to), loc=loc, value=float(value))
    return Op(type=x.type.with_dtype(to), loc=loc, op="cast_rtz", args=(x,), attrs=(("to", to),))


def rule_barrier(name: str, args: list[Expr], loc: Location, ctx) -> Expr:
    return Op(type=Type(BOOL), loc=loc, op=name)  # not folded: a statement, kept for its effect


_def(
    "multiple_of",
    "multiple_of(x, n): x, promised to start each contiguous group at a multiple of n "
    "(bytes for pointers): wider vector accesses",
    2,
    rule_hint,
    "{0}",
    lambda x: x,
)
_def(
    "max_contiguous",
    "max_contiguous(x, n): x, promised to hold runs of n consecutive values along its last axis",
    2,
    rule_hint,
    "{0}",
    lambda x: x,
)
_def(
    "max_constancy",
    "max_constancy(x, n): x, promised to hold runs of n equal values along its last axis",
    2,
    rule_hint,
    "{0}",
    lambda x: x,
)
_def(
    "bitcast",
    "bitcast(x, T): the bits of x read as type T of the same width (u32 of an f32...)",
    2,
    None,  # typed by Builder.call_bitcast, which reads its type-name argument
    "tx::bitcast<{T}>({0})",
    lambda x: x,  # the interpreter views the bits (elementwise_numpy)
)
_def(
    "debug_barrier",
    "debug_barrier(): every thread of the program waits until all reach it (__syncthreads)",
    0,
    rule_barrier,
    "tx::debug_barrier()",
    lambda: np.bool_(True),
)


# ------------------------------------------------------ structural ops (lower/build/builder.py)
# Their typing needs constant arguments or the kernel's context, so their rules live in the
# builder (OpDef.builder_method: call_<name>); each names the IR ops it lowers to
# (lowers_to), and each IR op its interpreter and emitter methods (interp_method, emit).

_def(
    "program_id",
    "program_id(axis): index of this program along grid axis 0, 1 or 2",
    1,
    None,
    family="grid",
    emit="ex_program_id",
)
_def(
    "num_programs",
    "num_programs(axis): number of programs along grid axis 0, 1 or 2",
    1,
    None,
    family="grid",
    emit="ex_num_programs",
)
_def(
    "arange",
    "arange(start, end): i32 tile start..end-1; constants, end-start a power of two",
    2,
    None,
    family="creation",
    emit="ex_arange",
)
_def(
    "load",
    "load(ptr, mask = all, other = 0, cache = 0, evict = 0): read a tile (or scalar) through "
    "pointers; masked-off lanes give other; CACHE_* and EVICT_* hints",
    (1, 5),
    None,
    family="memory",
    emit="emit_load",
)
_def(
    "store",
    "store(ptr, value, mask = all, cache = 0, evict = 0): write value (converted to the "
    "pointee type) where mask holds; CACHE_* and EVICT_* hints",
    (2, 5),
    None,
    family="memory",
    emit="emit_store",
)
_def(
    "expand_dims",
    "expand_dims(x, axis): insert a dimension of size 1 at axis (a constant)",
    2,
    None,
    family="shape",
    emit="ex_expand_dims",
)
_def(
    "broadcast_to",
    "broadcast_to(x, d0, ...): stretch dimensions of size 1 to the given sizes",
    (2, 4),
    None,
    family="shape",
    lowers_to=("broadcast",),
)
_def(
    "reshape",
    "reshape(x, d0, ...): the same elements, row-major, in a new static shape",
    (2, 4),
    None,
    family="shape",
    emit="emit_relayout",
)
_def(
    "trans",
    "trans(x): the transpose of a 2-D tile",
    1,
    None,
    family="shape",
    lowers_to=("permute",),
)
_def(
    "permute",
    "permute(x, d0, ...): dimensions reordered (result axis k is source axis dk)",
    (3, 4),
    None,
    family="shape",
    emit="emit_relayout",
)
_def(
    "sum",
    "sum(x, axis = all, keep_dims = 0): sum; f16/bf16 accumulate and return f32, narrow ints i32",
    (1, 3),
    None,
    family="reduction",
    lowers_to=("reduce",),
)
_def(
    "max",
    "max(x, axis = all, keep_dims = 0): maximum; NaN operands are skipped (fmax)",
    (1, 3),
    None,
    family="reduction",
    lowers_to=("reduce",),
)
_def(
    "min",
    "min(x, axis = all, keep_dims = 0): minimum; NaN operands are skipped (fmin)",
    (1, 3),
    None,
    family="reduction",
    lowers_to=("reduce",),
)
_def(
    "xor_sum",
    "xor_sum(x, axis = all, keep_dims = 0): bitwise xor of integers",
    (1, 3),
    None,
    family="reduction",
    lowers_to=("reduce",),
)
_def(
    "reduce_or",
    "reduce_or(x, axis = all, keep_dims = 0): bitwise or of integers (logical or of bools)",
    (1, 3),
    None,
    family="reduction",
    lowers_to=("reduce",),
)
_def(
    "argmax",
    "argmax(x, axis, keep_dims = 0): i32 index of the maximum; ties give the lowest index",
    (2, 3),
    None,
    family="reduction",
    lowers_to=("reduce",),
)
_def(
    "argmin",
    "argmin(x, axis, keep_dims = 0): i32 index of the minimum; ties give the lowest index",
    (2, 3),
    None,
    family="reduction",
    lowers_to=("reduce",),
)
_def(
    "reduce",
    "reduce(x, axis, combine): reduce with a helper `T combine(T a, T b)` of the file "
    "(associative); a tuple (x, y) with combine(a0, a1, b0, b1) returning (c0, c1)",
    3,
    None,
    family="reduction",
    emit="emit_reduce",
)
_def(
    "static_assert",
    'static_assert(cond, "message"): refuse to compile where a constant condition is false',
    (1, 2),
    None,
    family="debug",
    lowers_to=(),
)
_def(
    "static_print",
    "static_print(\"text\", x, ...): print the values' types, and constants' values, when "
    "the kernel compiles",
    (1, 8),
    None,
    family="debug",
    lowers_to=(),
)
_def(
    "assume",
    "assume(cond): a promise that cond holds, for the optimiser (CUDA's __builtin_assume); "
    "the interpreter checks it",
    1,
    None,
    family="debug",
    emit="emit_assume",
)
_def(
    "device_print",
    'device_print("prefix", x, ...): print every element with its program id (debug builds)',
    (1, 8),
    None,
    family="debug",
    emit="emit_device_print",
)
_def(
    "device_assert",
    'device_assert(cond, "message"): stop the kernel where cond is false (debug builds)',
    (1, 2),
    None,
    family="debug",
    emit="emit_device_assert",
)
_def(
    "dot",
    "dot(a, b, acc = 0, input_precision = IEEE): a @ b + acc; f16/bf16 into f32, i8 into i32, "
    "f64 into f64; f32 is IEEE unless TF32 or TF32X3 is asked for (interpreter only so far)",
    (2, 4),
    None,
    family="dot",
    emit="emit_dot",
)
_def(
    "cumsum",
    "cumsum(x, axis = 0, reverse = 0): inclusive running sum; dtype as sum()",
    (1, 3),
    None,
    family="scan",
    lowers_to=("scan",),
)
_def(
    "cumprod",
    "cumprod(x, axis = 0, reverse = 0): inclusive running product",
    (1, 3),
    None,
    family="scan",
    lowers_to=("scan",),
)
_def(
    "associative_scan",
    "associative_scan(x, axis, combine, reverse = 0): inclusive scan with a helper combiner; "
    "of a tuple (x, y) as reduce",
    (3, 4),
    None,
    family="scan",
    lowers_to=("scan",),
)
_def(
    "cat",
    "cat(a, b, axis = 0): a followed by b along an axis; shapes equal, so sizes stay powers of two",
    (2, 3),
    None,
    family="shape",
    emit="emit_gather2",
)
_def(
    "join",
    "join(a, b): a and b side by side in a new last dimension of size 2",
    2,
    None,
    family="shape",
    emit="emit_gather2",
)
_def(
    "split",
    "split(x, k): x[..., k], k = 0 or 1, of a tile whose last dimension is 2 (C has no tuples)",
    2,
    None,
    family="shape",
    emit="emit_relayout",
)
_def(
    "flip",
    "flip(x, axis = 0): the tile reversed along an axis",
    (1, 2),
    None,
    family="shape",
    emit="emit_relayout",
)
for _name, _what in (
    ("add", "*ptr += val; returns the old values"),
    ("max", "*ptr = max(*ptr, val); returns the old values"),
    ("min", "*ptr = min(*ptr, val); returns the old values"),
    ("and", "*ptr &= val (integers); returns the old values"),
    ("or", "*ptr |= val (integers); returns the old values"),
    ("xor", "*ptr ^= val (integers); returns the old values"),
    ("xchg", "*ptr = val; returns the old values"),
):
    _doc = f"atomic_{_name}(ptr, val, mask, order, scope): {_what}"
    _def(f"atomic_{_name}", _doc, (2, 5), None, family="atomic", lowers_to=("atomic",))
_def(
    "atomic_cas",
    "atomic_cas(ptr, cmp, val, order, scope): *ptr = val where *ptr == cmp; returns the old values",
    (3, 5),
    None,
    family="atomic",
    lowers_to=("atomic",),
)
_def(
    "full",
    "T x[N] = v; a typed tile declaration filled with v (zeros when no value)",
    1,
    None,
    prelude=False,
    family="creation",
    emit="ex_full",
)
_def(
    "broadcast",
    "a tile stretched along its dimensions of size 1 (inserted by broadcasting)",
    1,
    None,
    prelude=False,
    family="shape",
    emit="ex_broadcast",
)
_def(
    "convert_layout",
    "the same tile in another layout (inserted by the layout pass)",
    1,
    None,
    prelude=False,
    family="shape",
    emit="emit_relayout",
)


_def(
    "atomic",
    "an atomic read-modify-write (atomic_add() and the others lower to it)",
    1,
    None,
    prelude=False,
    family="atomic",
    emit="emit_atomic",
)
_def(
    "scan",
    "an inclusive scan (cumsum(), cumprod() and associative_scan() lower to it)",
    1,
    None,
    prelude=False,
    family="scan",
    emit="emit_scan",
)


def numpy_cast(x, to: DType):
    return _numpy_cast(x, to)


def elementwise_numpy(op: Op, values: list) -> Any:
    """Apply an elementwise entry on NumPy values, with the result in the op's dtype."""
    with np.errstate(all="ignore"):
        if op.op == "cast":
            return numpy_cast(values[0], op.attr("to"))
        if op.op == "cast_rtz":
            return cast_toward_zero(values[0], op.attr("to"))
        if op.op == "bitcast":
            return np.asarray(values[0]).view(op.type.scalar.np)
        numpy = OPS[op.op].numpy
        assert numpy is not None, f"{op.op} has no NumPy twin"
        result = numpy(*values)
    return np.asarray(result).astype(op.type.scalar.np, copy=False)


# Op families defined in modules of their own register into OPS when this is imported (last, so
# the table keeps its order: the reference page lists the entries as they are defined).
from . import libdevice, random  # noqa: E402,F401
