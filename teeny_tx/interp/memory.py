"""The interpreter's memory: NumPy arrays seen as device allocations, and pointers into them.

Input: a kernel's pointer arguments (NumPy arrays, any strides or offsets) and their element
dtypes. Output: :class:`Pointer` values, a flat view of the argument's whole allocation in the
pointee dtype plus int64 element offsets, so that pointer arithmetic, comparisons of pointers
into one allocation and bounds checks behave as on device memory; and the launch's
:class:`Registry`, every array it was given by base address and extent, which turns an address
a kernel loaded from a table of pointers (``(const f16 *)load(table + g)``) back into a
:class:`Pointer` into the array that holds it.
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


@dataclass(frozen=True)
class Region:
    """One allocation of the launch: its bytes [low, high), the array that owns them, the
    name of the array first registered in it and whether it may be written."""

    low: int
    high: int
    owner: np.ndarray
    name: str
    first: int  # the registered array's first byte, relative to low
    writeable: bool


class Registry:
    """The arrays a launch was given (its pointer arguments and ``arrays=``), by address, so an
    address read from memory maps back to the array it points into."""

    def __init__(self) -> None:
        self.regions: list[Region] = []

    def add(self, name: str, array: object) -> None:
        if not isinstance(array, np.ndarray):
            got = type(array).__name__
            raise LaunchError(f"'{name}': the interpreter needs a NumPy array, got {got}")
        owner = array
        while isinstance(owner.base, np.ndarray):
            owner = owner.base
        low, high = byte_bounds(owner)
        if any(r.low == low and r.high == high for r in self.regions):
            return  # a view of an allocation already registered: addresses resolve to it
        first = array.__array_interface__["data"][0] - low
        self.regions.append(Region(low, high, owner, name, first, array.flags.writeable))

    def find(self, address: int) -> Region | None:
        """The allocation holding byte ``address`` (one past its end counts: C's end pointer)."""
        for r in self.regions:
            if r.low <= address < r.high or (address == r.high and r.high > r.low):
                return r
        return None

    def pointer(self, addresses: np.ndarray, elem: DType, buffers: dict) -> Pointer | str:
        """Pointers to ``elem`` at ``addresses`` (all into one allocation), or why not."""
        flat = np.asarray(addresses).reshape(-1).astype(np.uint64)
        regions = [self.find(int(a)) for a in np.unique(flat)]
        for a, r in zip(np.unique(flat), regions, strict=True):
            if r is None:
                return f"address {int(a):#x} is in no array of this launch"
        chosen = {id(r): r for r in regions if r is not None}
        if len(chosen) > 1:
            names = ", ".join(f"'{r.name}'" for r in chosen.values())
            return (
                f"the addresses of one tile point into several arrays ({names}); the "
                "interpreter takes one array per tile of addresses"
            )
        (region,) = chosen.values()
        first = (flat.astype(np.int64) - region.low).reshape(np.shape(addresses))
        start = int(first.reshape(-1)[0]) % elem.itemsize if first.size else 0
        if np.any(first % elem.itemsize != start):
            return f"the addresses are not aligned alike for {elem} elements"
        key = (region.low, region.high, start, elem, region.writeable)
        if key not in buffers:
            raw = np.asarray(
                Allocation(region.owner, region.low, region.high - region.low, region.writeable)
            )
            count = max(region.high - region.low - start, 0) // elem.itemsize
            buffers[key] = raw[start : start + count * elem.itemsize].view(elem.np)
        base = (region.first - start) // elem.itemsize
        off = (first - start) // elem.itemsize
        return Pointer(buffers[key], off, PointerArg(region.name, base))
