"""The CUDA spelling of the language's types: one mapping, so templates never compute type names.

Input: a DType or a PointerType. Output: its CUDA C++ text (``float``, ``const __half*``).
"""

from __future__ import annotations

from ..lower.ir import PointerType


def ctype(dtype) -> str:
    """The CUDA spelling of an element or pointer type."""
    if isinstance(dtype, PointerType):
        return f"{'const ' if dtype.const else ''}{dtype.elem.cuda}*"
    return dtype.cuda


def element_bytes(dtype) -> int:
    """Bytes one element takes in registers or shared memory: a pointer's are 8."""
    return 8 if isinstance(dtype, PointerType) else dtype.itemsize
