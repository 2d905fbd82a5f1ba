"""The interpreter's memory: NumPy arrays seen as device allocations, and pointers into them.

Input: a kernel's pointer arguments (NumPy arrays, any strides or offsets) and their element
dtypes. Output: :class:`Pointer` values, a flat view of the argument's whole allocation in the
pointee dtype plus int64 element offsets, so that pointer arithmetic, comparisons of pointers
into one allocation and bounds checks behave as on device memory.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..dtypes import DType
from ..errors import LaunchError


@dataclass(frozen=True)
class PointerArg:
    """Where a pointer argument points: its name and its first element's index in the buffer."""

    name: str
    base: int


class Pointer:
    """A scalar or tile of pointers: a flat buffer of the whole allocation and int64 offsets."""

    __slots__ = ("buf", "off", "arg")

    def __init__(self, buf: np.ndarray, off: np.ndarray, arg: PointerArg):
        self.buf, self.off, self.arg = buf, off, arg

    def moved(self, delta: np.ndarray) -> Pointer:
        return Pointer(self.buf, self.off + np.asarray(delta).astype(np.int64), self.arg)


class Allocation:
    """The bytes of one allocation, exposed to NumPy; holding the owner keeps them alive."""

    def __init__(self, owner: np.ndarray, low: int, nbytes: int, writeable: bool):
        self.owner = owner
        self.__array_interface__ = {
            "version": 3,
            "shape": (nbytes,),
            "typestr": "|u1",
            "data": (low, not writeable),
        }


def byte_bounds(a: np.ndarray) -> tuple[int, int]:
    low = high = a.__array_interface__["data"][0]
    if a.size == 0:
        return low, high
    for n, stride in zip(a.shape, a.strides, strict=True):
        reach = (n - 1) * stride
        low, high = (low + reach, high) if reach < 0 else (low, high + reach)
    return low, high + a.itemsize


def bind_pointer(name: str, array: object, elem: DType, buffers: dict) -> Pointer:
    """A pointer to ``array``'s first element, over its whole allocation viewed as ``elem``."""
    if not isinstance(array, np.ndarray):
        got = type(array).__name__
        raise LaunchError(f"argument '{name}': the interpreter needs a NumPy array, got {got}")
    owner = array
    while isinstance(owner.base, np.ndarray):
        owner = owner.base
    low, high = byte_bounds(owner)
    first = array.__array_interface__["data"][0] - low
    start = first % elem.itemsize
    key = (low, high, start, elem, array.flags.writeable)
    if key not in buffers:  # views of one allocation share a buffer (pointers compare, where())
        raw = np.asarray(Allocation(owner, low, high - low, array.flags.writeable))
        count = max(high - low - start, 0) // elem.itemsize
        buffers[key] = raw[start : start + count * elem.itemsize].view(elem.np)
    base = first // elem.itemsize
    return Pointer(buffers[key], np.int64(base), PointerArg(name, base))
