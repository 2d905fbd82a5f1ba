"""Tensor maps for TMA, encoded on the host, and their launch values.

Input: a device pointer, an element dtype, a 2-D extent with its outer stride in bytes, and a
box. Output: the driver's 128-byte ``CUtensorMap`` as a 1-element NumPy array of 128 opaque
bytes, which CuPy passes to a kernel by value (a ``const __grid_constant__`` parameter).

The encoding is the driver's ``cuTensorMapEncodeTiled`` (libcuda, loaded through ctypes: the
same library CuPy's launches use, no other dependency), with ``cuda.bindings`` as the fallback
where libcuda cannot be opened by name. It needs a driver, not a device context. Encoded maps
are cached by everything they encode (a pointer, shape, stride and box make one map).
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Sequence

import numpy as np

from teeny_tx.errors import LaunchError

# CUtensorMapDataType, by our dtype names
DATA_TYPES = {"u8": 0, "f8e4m3": 0, "f8e5m2": 0, "u16": 1, "f16": 6, "f32": 7, "bf16": 9}
ITEMSIZE = {"u8": 1, "f8e4m3": 1, "f8e5m2": 1, "u16": 2, "f16": 2, "f32": 4, "bf16": 2}
SWIZZLE = {0: 0, 32: 1, 64: 2, 128: 3}  # CUtensorMapSwizzle by bytes
_L2_PROMOTION_256B = 3
_INTERLEAVE_NONE = 0
_OOB_FILL_ZERO = 0
TENSOR_MAP = np.dtype((np.void, 128))
MAX_CACHED = 4096


@functools.cache
def _libcuda():
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError:
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
    key = (ptr, dtype, inner, outer, outer_stride_bytes, tuple(box))
    found = _cache.get(key)
    if found is not None:
        return found
    # a dimension of extent 1 still needs a valid stride: one whole row
    stride = max(outer_stride_bytes, -(-inner * ITEMSIZE[dtype] // 16) * 16)
    dims, strides = (inner, max(outer, 1)), (stride,)
    fn = _libcuda()
    if fn is not None:
        raw = _encode_libcuda(fn, dtype, ptr, dims, strides, box)
    else:
        raw = _encode_bindings(dtype, ptr, dims, strides, box)
    value = np.frombuffer(raw, dtype=TENSOR_MAP).copy()
    if len(_cache) >= MAX_CACHED:
        _cache.clear()
    _cache[key] = value
    return value
