"""The names of ``triton.language`` that the Python front end knows, and their C spellings.

Input: nothing (tables). Output: :class:`Builtin` objects (one per ``tl.`` function, each with
the Python signature it binds its arguments by), :class:`DType` objects (``tl.float32`` ...)
and :data:`SPELLINGS`, how each builtin is written in the C syntax. ``teeny_tx.triton.language``
exposes the objects under Triton's names; ``python_ast.py`` recognises them by identity in a
kernel's globals, binds a call's arguments by the signature and writes the C text.

A builtin called outside a ``@jit`` function raises a :class:`TeenyError`: these are names
for the translator, not functions that run.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass

from ..constants import CACHE_MODIFIERS, EVICTION_POLICIES, PROPAGATE_NAN, ROUNDINGS
from ..constants import LOAD_CACHES as C_LOAD_CACHES
from ..constants import STORE_CACHES as C_STORE_CACHES
from ..errors import TeenyError
from ..lower.ops.libdevice import LIBDEVICE_ALIASES
from ..lower.ops.libdevice import NAMES as LIBDEVICE_OWN
from ..lower.ops.table import OPS

# the language's math operations that Triton's libdevice has too (beside its own, above)
LIBDEVICE_ALSO = [
    *("exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos", "tanh", "erf"),
    *("floor", "ceil", "abs", "pow", "fma"),
]


@dataclass(frozen=True)
class DType:
    """A Triton dtype (``tl.float16``): its Triton name and this language's (``f16``)."""

    name: str
    tx: str

    def __repr__(self) -> str:
        return f"tl.{self.name}"

    @property
    def element_ty(self) -> DType:  # a pointer's dtype is its element's here
        return self


@dataclass(frozen=True)
class PointerDType:
    """``tl.pointer_type(tl.float16)``: a pointer to elements of a dtype, the type an address
    loaded from a table of pointers becomes (``x.to(tl.pointer_type(tl.float16))``)."""

    element_ty: DType
    const: bool = False

    def __repr__(self) -> str:
        return f"tl.pointer_type({self.element_ty!r}{', const=True' if self.const else ''})"

    @property
    def tx(self) -> str:
        """The C cast's type: ``const f16 *``."""
        return f"{'const ' if self.const else ''}{self.element_ty.tx} *"


def pointer_type(element_ty: DType, address_space: int = 1, const: bool = False) -> PointerDType:
    """Triton's ``tl.pointer_type``: global memory only (address space 1)."""
    if not isinstance(element_ty, DType):
        raise TeenyError(f"tl.pointer_type takes a dtype (tl.float16, ...), got {element_ty!r}")
    if address_space != 1:
        raise TeenyError("tl.pointer_type: pointers reach global memory only (address_space=1)")
    return PointerDType(element_ty, bool(const))


DTYPES = {
    "int1": "bool",
    "int8": "i8",
    "int16": "i16",
    "int32": "i32",
    "int64": "i64",
    "uint8": "u8",
    "uint16": "u16",
    "uint32": "u32",
    "uint64": "u64",
    "float16": "f16",
    "bfloat16": "bf16",
    "float32": "f32",
    "float64": "f64",
}
DTYPE_OBJECTS = {name: DType(name, tx) for name, tx in DTYPES.items()}
# the language's compute type (f64 for f64 data, else f32): not a Triton name
DTYPE_OBJECTS["acc_t"] = DType("acc_t", "acc_t")
ALIASES = {"float": "float32", "half": "float16", "double": "float64", "bool": "int1"}
BY_TX = {d.tx: d for d in DTYPE_OBJECTS.values()}


class PropagateNan:
    """``tl.PropagateNan``: how ``tl.maximum``/``tl.minimum`` treat a NaN operand."""

    NONE = "none"
    ALL = "all"


class constexpr:  # noqa: N801  (Triton's spelling)
    """``BLOCK: tl.constexpr`` marks a compile-time parameter; ``tl.constexpr(v)`` is ``v``."""

    def __init__(self, value=None):
        self.value = value

    def __repr__(self) -> str:
        return f"constexpr({self.value!r})"


class Builtin:
    """A function of ``triton.language``: its name and the signature a call binds by."""

    def __init__(self, name: str, signature: str):
        self.name = name
        params: list[inspect.Parameter] = []
        for text in (p.strip() for p in signature.split(",")):
            if text:
                after_star = any(q.kind == inspect.Parameter.VAR_POSITIONAL for q in params)
                params.append(_parameter(text, after_star))
        self.signature = inspect.Signature(params)

    def __repr__(self) -> str:
        return f"<tl.{self.name}{self.signature}>"

    def __call__(self, *args, **kwargs):
        raise TeenyError(
            f"tl.{self.name} can only be called inside a @jit function (it is translated, not run)"
        )


def _parameter(text: str, keyword_only: bool) -> inspect.Parameter:
    kind = (
        inspect.Parameter.KEYWORD_ONLY if keyword_only else inspect.Parameter.POSITIONAL_OR_KEYWORD
    )
    if text.startswith("*"):
        return inspect.Parameter(text[1:], inspect.Parameter.VAR_POSITIONAL)
    name, eq, default = text.partition("=")
    value = eval(default, {}) if eq else inspect.Parameter.empty  # noqa: S307 (literals only)
    return inspect.Parameter(name.strip(), kind, default=value)


# name -> Python signature (Triton's parameter names; C has no keywords, so every argument the
# translation keeps is written positionally in C's order)
SIGNATURES = {
    "program_id": "axis",
    "num_programs": "axis",
    "arange": "start, end",
    "load": "pointer, mask=None, other=None, boundary_check=(), padding_option='', "
    "cache_modifier='', eviction_policy='', volatile=False",
    "store": "pointer, value, mask=None, boundary_check=(), cache_modifier='', eviction_policy=''",
    "dot": "input, other, acc=None, input_precision=None, allow_tf32=None, "
    "max_num_imprecise_acc=None, out_dtype=None",
    "sum": "input, axis=None, keep_dims=False, dtype=None",
    "max": "input, axis=None, return_indices=False, return_indices_tie_break_left=True, "
    "keep_dims=False",
    "min": "input, axis=None, return_indices=False, return_indices_tie_break_left=True, "
    "keep_dims=False",
    "xor_sum": "input, axis=None, keep_dims=False",
    "reduce_or": "input, axis=None, keep_dims=False",
    "argmax": "input, axis, tie_break_left=True, keep_dims=False",
    "argmin": "input, axis, tie_break_left=True, keep_dims=False",
    "reduce": "input, axis, combine_fn, keep_dims=False",
    "cumsum": "input, axis=0, reverse=False",
    "cumprod": "input, axis=0, reverse=False",
    "associative_scan": "input, axis, combine_fn, reverse=False",
    "where": "condition, x, y",
    "maximum": "x, y, propagate_nan=None",
    "minimum": "x, y, propagate_nan=None",
    "clamp": "x, min, max, propagate_nan=None",
    "fma": "x, y, z",
    "cdiv": "x, div",
    "div_rn": "x, y",
    "fdiv": "x, y, ieee_rounding=False",
    "zeros": "shape, dtype",
    "full": "shape, value, dtype",
    "cast": "input, dtype, fp_downcast_rounding=None, bitcast=False",
    "expand_dims": "input, axis",
    "broadcast_to": "input, *shape",
    "reshape": "input, *shape, can_reorder=False",
    "view": "input, *shape",
    "trans": "input, *dims",
    "permute": "input, *dims",
    "flip": "x, dim=None",
    "cat": "input, other, can_reorder=False",
    "join": "a, b",
    "rand": "seed, offset, n_rounds=10",
    "randn": "seed, offset, n_rounds=10",
    "randint": "seed, offset, n_rounds=10",
    "debug_barrier": "",
    "static_assert": "cond, msg=''",
    "device_assert": "cond, msg=''",
    "device_print": "prefix, *args, hex=False",
    "multiple_of": "input, values",
    "max_contiguous": "input, values",
    "max_constancy": "input, values",
    "assume": "cond",
    "static_print": "*values, sep=' ', end=None, file=None, flush=False",
    "static_range": "arg1, arg2=None, step=None",
    "range": "arg1, arg2=None, step=None, num_stages=None, loop_unroll_factor=None, "
    "disallow_acc_multi_buffer=False, flatten=False, warp_specialize=False",
}
for _op in ("exp", "exp2", "log", "log2", "sqrt", "sqrt_rn", "rsqrt", "sin", "cos", "erf"):
    SIGNATURES[_op] = "x"
for _op in ("abs", "floor", "ceil", "sigmoid", "tanh"):
    SIGNATURES[_op] = "x"
SIGNATURES["pow"] = "x, y"
# CUDA's libdevice math functions (teeny_tx/lower/ops/libdevice.py): `tl.extra.libdevice.<name>`
# (and `tl.extra.cuda.libdevice`), by their C names, which are the language's
for _op in LIBDEVICE_OWN:
    SIGNATURES[_op] = ", ".join("xyzw"[: OPS[_op].arity[0]])
# libdevice's other spellings of the language's operations
LIBDEVICE_RENAMED = {alias: op for alias, op in LIBDEVICE_ALIASES.items()}
for _alias, _op in LIBDEVICE_RENAMED.items():
    SIGNATURES[_alias] = SIGNATURES[_op]
for _op in ("add", "max", "min", "and", "or", "xor", "xchg"):
    SIGNATURES[f"atomic_{_op}"] = "pointer, val, mask=None, sem=None, scope=None"
SIGNATURES["atomic_cas"] = "pointer, cmp, val, sem=None, scope=None"

BUILTINS = {name: Builtin(name, sig) for name, sig in SIGNATURES.items()}
# the functions of Triton's `libdevice` module: the libdevice ones and the language's own math
# operations libdevice also has
LIBDEVICE = [*LIBDEVICE_OWN, *LIBDEVICE_RENAMED, *LIBDEVICE_ALSO]

# the C operations of the same name: `tl.exp(x)` is `exp(x)`, arguments in order, trailing
# defaults left out
SAME = {
    "program_id",
    "num_programs",
    "arange",
    "where",
    "fma",
    "cdiv",
    "expand_dims",
    "join",
    "rand",
    "randn",
    "randint",
    "debug_barrier",
    "assume",
    "exp",
    "exp2",
    "log",
    "log2",
    "sqrt",
    "rsqrt",
    "sin",
    "cos",
    "erf",
    "abs",
    "floor",
    "ceil",
    "sigmoid",
    "tanh",
    "pow",
    *LIBDEVICE_OWN,
}

SEMANTICS = {"relaxed": "RELAXED", "acquire": "ACQUIRE", "release": "RELEASE", "acq_rel": "ACQ_REL"}
# Triton's strings of the hints and options that are named constants here (teeny_tx/constants.py)
LOAD_CACHES = {c.python: c.name for c in CACHE_MODIFIERS if c.name in C_LOAD_CACHES}
STORE_CACHES = {c.python: c.name for c in CACHE_MODIFIERS if c.name in C_STORE_CACHES}
EVICTIONS = {c.python: c.name for c in EVICTION_POLICIES}
PROPAGATE = {c.python: c.name for c in PROPAGATE_NAN}
ROUNDING = {c.python: c.name for c in ROUNDINGS}
SCOPES = {"gpu": "SCOPE_GPU", "cta": "SCOPE_CTA", "sys": "SCOPE_SYS"}
PRECISIONS = {"ieee": "IEEE", "tf32": "TF32", "tf32x3": "TF32X3"}

# Triton names the translator refuses, with how to write the thing here
REFUSED = {
    "make_block_ptr": "tiles of pointers only: `ptrs = base + rows[:, None] * stride + cols`",
    "advance": "add to the pointer tile: `ptrs += BLOCK_K * stride`",
    "make_tensor_descriptor": "tiles of pointers only (the compiler picks TMA itself)",
    "split": "C has no tuples: write the two halves as `split(x, 0)` and `split(x, 1)` in C",
    "sort": "not in the language yet",
    "histogram": "`tl.atomic_add(bins + values, 1, mask)`",
    "inline_asm_elementwise": "not in the language: a new operation is an op-table entry",
    "zeros_like": "`tl.zeros([M, N], dtype=...)` with the shape and dtype written out",
    "full_like": "`tl.full([M, N], value, dtype=...)` with the shape and dtype written out",
    "randint4x": "C has no tuples: `randint4x(seed, offset, k)` in C gives word k",
}
