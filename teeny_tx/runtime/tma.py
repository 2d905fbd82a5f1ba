"""Tensor maps for TMA, encoded on the host, and their launch values.

Input: a device pointer, an element dtype, a 2-D extent with its outer stride in bytes, and a
box. Output: the driver's 128-byte ``CUtensorMap`` as a 1-element NumPy array of 128 opaque
bytes, which CuPy passes to a kernel by value (a ``const __grid_constant__`` parameter).

The encoding is the driver's ``cuTensorMapEncodeTiled`` (libcuda, loaded through ctypes: the
same library CuPy's launches use, no other dependency), with ``cuda.bindings`` as the fallback
where libcuda cannot be opened by name. It needs a driver, not a device context. Encoded maps
are cached by everything they encode (a pointer, shape, stride and box make one map). This is
the one place the package opens ``libcuda.so.1`` (:func:`libcuda`); plans (``plan.py``) take
``cuTensorMapReplaceAddress`` from it.

Also the tensor-map parameters of a specialisation whose pipelined loads are TMA copies
(:func:`parameters`: what the launch plans of ``plan.py`` encode).
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Sequence

import numpy as np

from teeny_tx.dtypes import ELEMENT_SIZES, TMA_DATA_TYPES
from teeny_tx.errors import LaunchError

DATA_TYPES = TMA_DATA_TYPES  # CUtensorMapDataType, by our dtype names (dtypes.ELEMENTS)
ITEMSIZE = ELEMENT_SIZES
SWIZZLE = {0: 0, 32: 1, 64: 2, 128: 3}  # CUtensorMapSwizzle by bytes
_L2_PROMOTION_256B = 3
_INTERLEAVE_NONE = 0
_OOB_FILL_ZERO = 0
TENSOR_MAP = np.dtype((np.void, 128))
MAX_CACHED = 4096


@functools.cache
def libcuda() -> ctypes.CDLL | None:
    """The driver library, opened once (None where it cannot be opened by name)."""
    try:
        return ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None


@functools.cache
def _encoder():
    """libcuda's ``cuTensorMapEncodeTiled``, typed, or None."""
    lib = libcuda()
    if lib is None:
        return None
    fn = lib.cuTensorMapEncodeTiled
    fn.restype = ctypes.c_int
    fn.argtypes = [
        ctypes.c_void_p,  # CUtensorMap*
        ctypes.c_int,  # data type
        ctypes.c_uint32,  # rank
        ctypes.c_void_p,  # global address
        ctypes.POINTER(ctypes.c_uint64),  # global dims
        ctypes.POINTER(ctypes.c_uint64),  # global strides (rank - 1, bytes)
        ctypes.POINTER(ctypes.c_uint32),  # box dims
        ctypes.POINTER(ctypes.c_uint32),  # element strides
        ctypes.c_int,  # interleave
        ctypes.c_int,  # swizzle
        ctypes.c_int,  # L2 promotion
        ctypes.c_int,  # OOB fill
    ]
    return fn


@functools.cache
def replace_address():
    """libcuda's ``cuTensorMapReplaceAddress`` (a map's global address rewritten in place, the
    rest of its encoding kept), or None where libcuda cannot be opened by name."""
    lib = libcuda()
    fn = getattr(lib, "cuTensorMapReplaceAddress", None) if lib is not None else None
    if fn is None:
        return None
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    return fn


def _encode_libcuda(fn, dtype, ptr, dims, strides, box) -> bytes:
    rank = len(dims)
    buffer = ctypes.create_string_buffer(128 + 64)
    address = ctypes.addressof(buffer)
    aligned = address + (-address % 64)  # CUtensorMap is 64-byte aligned
    result = fn(
        ctypes.c_void_p(aligned),
        DATA_TYPES[dtype],
        rank,
        ctypes.c_void_p(ptr),
        (ctypes.c_uint64 * rank)(*dims),
        (ctypes.c_uint64 * max(rank - 1, 1))(*strides),
        (ctypes.c_uint32 * rank)(*box),
        (ctypes.c_uint32 * rank)(*([1] * rank)),
        _INTERLEAVE_NONE,
        SWIZZLE[128],
        _L2_PROMOTION_256B,
        _OOB_FILL_ZERO,
    )
    if result != 0:
        raise LaunchError(
            f"cuTensorMapEncodeTiled failed (CUresult {result}) for a {dtype} tensor of dims "
            f"{tuple(dims)}, byte strides {tuple(strides)}, box {tuple(box)}: TMA needs a "
            "16-byte aligned address, strides that are multiples of 16 bytes, and boxes of at "
            "most 256 elements whose inner extent is at most 128 bytes"
        )
    return ctypes.string_at(aligned, 128)


def _encode_bindings(dtype, ptr, dims, strides, box) -> bytes:
    try:
        from cuda.bindings import driver
    except ImportError as err:
        raise LaunchError(
            "tensor maps need the CUDA driver (libcuda.so.1) or the cuda-bindings package"
        ) from err
    status, tmap = driver.cuTensorMapEncodeTiled(
        driver.CUtensorMapDataType(DATA_TYPES[dtype]),
        len(dims),
        ptr,
        list(dims),
        list(strides),
        list(box),
        [1] * len(dims),
        driver.CUtensorMapInterleave(_INTERLEAVE_NONE),
        driver.CUtensorMapSwizzle(SWIZZLE[128]),
        driver.CUtensorMapL2promotion(_L2_PROMOTION_256B),
        driver.CUtensorMapFloatOOBfill(_OOB_FILL_ZERO),
    )
    if int(status) != 0:
        raise LaunchError(f"cuTensorMapEncodeTiled failed ({status}) for dims {tuple(dims)}")
    return bytes((ctypes.c_char * 128).from_address(int(tmap.getPtr())))


_cache: dict[tuple, np.ndarray] = {}


def tensor_map_2d(
    ptr: int,
    dtype: str,
    inner: int,
    outer: int,
    outer_stride_bytes: int,
    box: Sequence[int],
) -> np.ndarray:
    """The tensor map of a 2-D tensor at ``ptr``: ``inner`` contiguous elements per row,
    ``outer`` rows ``outer_stride_bytes`` apart, read in boxes of ``box`` = (inner, outer)
    elements with the 128-byte swizzle, out-of-bounds elements read as zeros. A launch value
    (a 1-element array of 128 bytes), cached."""
    dims, strides = dims_2d(dtype, inner, outer, outer_stride_bytes)
    return tensor_map(ptr, dtype, dims, strides, box)


def dims_2d(
    dtype: str, inner: int, outer: int, outer_stride_bytes: int
) -> tuple[tuple[int, int], tuple[int]]:
    """(dims, byte strides) of :func:`tensor_map_2d`'s map: a dimension of extent 1 still
    needs a valid stride (one whole row)."""
    stride = max(outer_stride_bytes, -(-inner * ITEMSIZE[dtype] // 16) * 16)
    return (inner, max(outer, 1)), (stride,)


# ---------------------------------------------------------------- maps of pipelined loops
#
# A software-pipelined loop whose loads lower/passes/pipeline.py made TMA copies (ir.TmaCopy)
# takes one tensor map per load after the kernel's own parameters; these functions say what they
# are made of for a launch's values (the launch plans of plan.py encode them).

UNBOUNDED = 2**31 - 1  # the extent of a dimension the kernel does not bound (no mask)


def tensor_map(
    ptr: int, dtype: str, dims: Sequence[int], strides_bytes: Sequence[int], box: Sequence[int]
) -> np.ndarray:
    """The tensor map of a tensor of 1 to 5 dimensions at ``ptr``: ``dims`` innermost first
    (the first contiguous), ``strides_bytes`` of the others, read in boxes of ``box`` elements
    with the 128-byte swizzle, out-of-bounds elements as zeros. A launch value, cached."""
    key = (ptr, dtype, tuple(dims), tuple(strides_bytes), tuple(box))
    found = _cache.get(key)
    if found is not None:
        return found
    if not 1 <= len(dims) <= 5 or len(strides_bytes) != len(dims) - 1 or len(box) != len(dims):
        raise LaunchError(f"a tensor map has 1 to 5 dimensions, got dims {tuple(dims)}")
    fn = _encoder()
    if fn is not None:
        raw = _encode_libcuda(fn, dtype, ptr, dims, strides_bytes, box)
    else:
        raw = _encode_bindings(dtype, ptr, dims, strides_bytes, box)
    value = np.frombuffer(raw, dtype=TENSOR_MAP).copy()
    if len(_cache) >= MAX_CACHED:
        _cache.clear()
    _cache[key] = value
    return value


def pipeline_copies(kernel) -> list:
    """The ir.TmaCopy of each TMA-loaded pipelined tile of a decided ``kernel``, in the order
    the kernel takes their maps (the order of its loops in the source)."""
    from ..lower import ir
    from ..lower.ir import walk_stmts

    copies: dict[str, ir.TmaCopy] = {}
    for s in walk_stmts(kernel.body):
        if isinstance(s, ir.PipelinedLoop) and s.loads and all(x.tma for x in s.loads):
            for x in s.loads:
                assert x.tma is not None
                copies.setdefault(x.tma.param, x.tma)
    return list(copies.values())


def pipeline_maps(
    interface, values: Sequence, extents: dict[str, int] | None = None
) -> tuple[np.ndarray, ...]:
    """The tensor maps of a specialisation's ``interface`` (``lower/interface.py``) for a
    launch whose runtime parameter values (in order: device addresses and numbers) are
    ``values``. ``extents``: bytes from each pointer parameter's address to the end of its
    array, where known: a dimension the kernel does not bound then ends there (else at
    :data:`UNBOUNDED`)."""
    return tuple(
        tensor_map(int(values[i]), dtype, dims, strides, box)
        for i, dtype, dims, strides, box in parameters(interface, values, extents or {})
    )


def parameters(interface, values: Sequence, extents: dict[str, int]) -> tuple[tuple, ...]:
    """The tensor-map parameters of a specialisation, read from its ``interface`` (the
    kernel's ordered parameters: its own, then one :class:`TensorMapParam` per TMA-read
    operand), for a launch of runtime ``values``: per map, what it is made from but the
    address (index of its pointer parameter, dtype, dims, strides in bytes, box). A launch plan
    at other addresses, with the same sizes and strides, encodes its maps from these. The one
    function the plans ask (``plan.Entry``)."""
    params = [p.name for p in interface.params if p.kind == "value"]
    by_name = dict(zip(params, values, strict=True))

    def number(x):
        return by_name[x] if isinstance(x, str) else x

    out = []
    for m in interface.tensor_maps:
        copy = m.copies[0]
        size = ITEMSIZE[m.dtype]
        strides = tuple(number(d.stride) * size for d in copy.dims[1:])
        if any(s <= 0 or s % 16 for s in strides):
            raise LaunchError(
                f"kernel '{interface.name}': the TMA copy of {m.pointer} needs positive strides "
                f"that are multiples of 16 bytes, got {list(strides)} bytes (launch without "
                "$TEENY_TX_PIPELINE_TMA for cp.async copies)"
            )
        dims = [copy.dims[0].extent]
        span = extents.get(m.pointer)
        for d, stride in zip(copy.dims[1:], strides, strict=True):
            if d.extent is not None:
                dims.append(max(1, number(d.extent)))
            elif span is not None:
                dims.append(max(1, min(UNBOUNDED, -(-span // stride))))
            else:
                dims.append(min(UNBOUNDED, 2**62 // stride))
        box = (m.box[0], *([m.box[1]] + [1] * (len(dims) - 2)))
        out.append((m.pointer_index, m.dtype, tuple(dims), strides, box))
    return tuple(out)
