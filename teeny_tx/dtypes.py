"""Element types of the language and the rules that combine them: the one dtype table.

Input: the dtype names the prelude declares (``i32``, ``f16``, ...). Output: :data:`DTYPES`,
one :class:`DType` per element type holding every spelling of it (the language's name, the
CUDA type, the NumPy dtype, the torch dtype's name, the C names a user might write), its kind,
width and itemsize; lookups by NumPy dtype and torch name derived from it; and
:func:`promote`, the numbered promotion rules every binary operation uses (both backends read
them). Every other module reads dtypes from here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import ml_dtypes
import numpy as np


@dataclass(frozen=True)
class DType:
    """A scalar element type. ``kind`` is 'b' (bool), 'i' (signed), 'u' (unsigned), 'f' (float).

    ``name``: the language's name (``f16``); ``cuda``: the CUDA C++ type (``__half``);
    ``numpy``: the NumPy dtype (bf16: ml_dtypes'); ``torch``: the name of the torch dtype
    (``torch.float16`` is ``"float16"``); ``c_names``: C spellings a kernel might use by
    mistake (``float``, ``half``), for the hint of the error."""

    name: str
    kind: str
    bits: int
    cuda: str
    numpy: np.dtype | None = None
    torch: str | None = None
    c_names: tuple[str, ...] = ()

    @property
    def np(self) -> np.dtype:
        assert self.numpy is not None, f"{self.name} has no NumPy dtype"
        return self.numpy

    @property
    def itemsize(self) -> int:
        return max(self.bits // 8, 1)

    @property
    def is_float(self) -> bool:
        return self.kind == "f"

    @property
    def is_int(self) -> bool:
        return self.kind in "iu"

    def literal(self, value: float | int | bool) -> str:
        """CUDA text for a constant of this type."""
        if self.kind == "b":
            return "true" if value else "false"
        if self.kind == "f":
            text = _float_text(float(value), self.bits)
            return text if self.bits in (32, 64) else f"{self.cuda}({text})"
        if self.bits == 64:
            return f"{int(value)}{'ULL' if self.kind == 'u' else 'LL'}"
        if self.kind == "u":
            return f"{int(value)}u" if self.bits == 32 else f"({self.cuda}){int(value)}u"
        if int(value) == -(2**31):
            return "(-2147483647 - 1)"
        return str(int(value)) if self.bits == 32 else f"({self.cuda}){int(value)}"

    def __str__(self) -> str:
        return self.name


def _float_text(value: float, bits: int) -> str:
    suffix = "" if bits == 64 else "f"
    if value != value:
        return (
            "__int_as_float(0x7fffffff)"
            if bits != 64
            else "__longlong_as_double(0x7ff8000000000000LL)"
        )
    if value in (float("inf"), float("-inf")):
        sign = "-" if value < 0 else ""
        return (
            f"{sign}__int_as_float(0x7f800000)"
            if bits != 64
            else f"{sign}__longlong_as_double(0x7ff0000000000000LL)"
        )
    text = repr(value) if bits == 64 else str(np.float32(value))
    if "e" not in text and "." not in text:
        text += ".0"
    return text + suffix


BOOL = DType("bool", "b", 8, "bool", np.dtype(np.bool_), "bool", ("_Bool",))
I8 = DType("i8", "i", 8, "signed char", np.dtype(np.int8), "int8", ("char", "signed char"))
I16 = DType("i16", "i", 16, "short", np.dtype(np.int16), "int16", ("short",))
I32 = DType("i32", "i", 32, "int", np.dtype(np.int32), "int32", ("int",))
I64 = DType("i64", "i", 64, "long long", np.dtype(np.int64), "int64", ("long", "long long"))
U8 = DType("u8", "u", 8, "unsigned char", np.dtype(np.uint8), "uint8", ("unsigned char",))
U16 = DType("u16", "u", 16, "unsigned short", np.dtype(np.uint16), "uint16", ("unsigned short",))
U32 = DType(
    "u32", "u", 32, "unsigned int", np.dtype(np.uint32), "uint32", ("unsigned", "unsigned int")
)
U64 = DType(
    "u64",
    "u",
    64,
    "unsigned long long",
    np.dtype(np.uint64),
    "uint64",
    ("unsigned long", "unsigned long long"),
)
F16 = DType("f16", "f", 16, "__half", np.dtype(np.float16), "float16", ("half",))
BF16 = DType("bf16", "f", 16, "__nv_bfloat16", np.dtype(ml_dtypes.bfloat16), "bfloat16")
F32 = DType("f32", "f", 32, "float", np.dtype(np.float32), "float32", ("float",))
F64 = DType("f64", "f", 64, "double", np.dtype(np.float64), "float64", ("double",))

DTYPES: dict[str, DType] = {
    d.name: d for d in (BOOL, I8, I16, I32, I64, U8, U16, U32, U64, F16, BF16, F32, F64)
}


@dataclass(frozen=True)
class Element:
    """An element type of the Hopper path's tensor maps and wgmma operands: the language's
    dtypes it moves, and the 8-bit floats that only move and feed wgmma (scaled_matmul's fp8
    operands; not dtypes of the language). ``tma``: its ``CUtensorMapDataType`` code;
    ``wgmma``: wgmma's name of it as an operand (None: not an operand; f32 is read as TF32);
    ``storage``: the C type the kernel stores it as."""

    name: str
    itemsize: int
    tma: int
    wgmma: str | None
    storage: str


ELEMENTS: dict[str, Element] = {
    e.name: e
    for e in (
        Element("u8", 1, 0, None, U8.cuda),
        Element("f8e4m3", 1, 0, "e4m3", U8.cuda),
        Element("f8e5m2", 1, 0, "e5m2", U8.cuda),
        Element("u16", 2, 1, None, U16.cuda),
        Element("f16", 2, 6, "f16", F16.cuda),
        Element("f32", 4, 7, "tf32", F32.cuda),
        Element("bf16", 2, 9, "bf16", BF16.cuda),
    )
}
FP8 = ("f8e4m3", "f8e5m2")
TMA_DATA_TYPES: dict[str, int] = {e.name: e.tma for e in ELEMENTS.values()}
ELEMENT_SIZES: dict[str, int] = {e.name: e.itemsize for e in ELEMENTS.values()}
WGMMA_TYPES: dict[str, str] = {e.name: e.wgmma for e in ELEMENTS.values() if e.wgmma}

# The compute type. `acc_t` in a kernel (prelude/language.h) names the dtype its arithmetic runs
# in, fixed per specialisation by the kernel's pointer arguments: f64 when one of them points
# to f64 data, else f32 (f16 and bf16 compute in f32, as PyTorch's at::acc_type). A kernel that
# writes `(acc_t)load(x + offs)` and `acc_t sum[BLOCK] = 0;` computes f16/bf16/f32 data in f32,
# exactly as with f32 spelled out, and f64 data in f64.
ACC = "acc_t"


def acc_dtype(pointees: Iterable[DType]) -> DType:
    """The dtype `acc_t` names in a kernel whose pointer arguments point to ``pointees``."""
    return F64 if F64 in tuple(pointees) else F32


# Lookups derived from the table (nothing else spells a dtype)
_FROM_NUMPY: dict[np.dtype, str] = {d.numpy: d.name for d in DTYPES.values() if d.numpy}
TORCH_NAMES: dict[str, str] = {d.torch: d.name for d in DTYPES.values() if d.torch}
C_NAMES: dict[str, str] = {c: d.name for d in DTYPES.values() for c in d.c_names}


def from_name(spelling: str) -> DType | None:
    """The DType that ``spelling`` names in any of the table's spellings (``"f16"``,
    ``"float16"``, ``"half"``), or None."""
    name = spelling if spelling in DTYPES else TORCH_NAMES.get(spelling, C_NAMES.get(spelling))
    return DTYPES[name] if name else None


def from_numpy(dtype: np.dtype) -> DType | None:
    """The DType of a NumPy dtype, or None when the language has no such type."""
    name = _FROM_NUMPY.get(np.dtype(dtype))
    return DTYPES[name] if name else None


def promote(a: DType, b: DType) -> DType:
    """The result type of a binary arithmetic operation on typed operands (Triton's rules).

    1. Equal types give that type.
    2. If either operand is a float, the result is a float: the wider of two floats; f16 with
       bf16 gives f32 (neither holds the other); a float with an integer or bool gives the float.
    3. bool with an integer gives the integer.
    4. Two integers of the same signedness give the wider.
    5. A signed and an unsigned integer give the unsigned one if it is at least as wide,
       otherwise the signed one (C's usual arithmetic conversions).

    Weak operands (literals and constexprs) are resolved before this is called: see
    ``lower/ops/typing.py``.
    """
    if a == b:
        return a
    if a.is_float or b.is_float:
        if a.is_float and b.is_float:
            if a.bits == b.bits:
                return F32
            return a if a.bits > b.bits else b
        return a if a.is_float else b
    if a.kind == "b":
        return b
    if b.kind == "b":
        return a
    if a.kind == b.kind:
        return a if a.bits >= b.bits else b
    signed, unsigned = (a, b) if a.kind == "i" else (b, a)
    return unsigned if unsigned.bits >= signed.bits else signed
