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
import threading
from collections.abc import Sequence

import numpy as np

from teeny_tx.dtypes import DTYPES, ELEMENT_SIZES, TMA_DATA_TYPES
from teeny_tx.errors import LaunchError

from .launch import DriverError, driver_handle, launch_kernel
from .memory import device_pointer, extent_bytes

DATA_TYPES = TMA_DATA_TYPES  # CUtensorMapDataType, by our dtype names (dtypes.ELEMENTS)
ITEMSIZE = ELEMENT_SIZES
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


@functools.cache
def _replace_address():
    """libcuda's ``cuTensorMapReplaceAddress`` (a map's global address rewritten in place, the
    rest of its encoding kept), or None where libcuda cannot be opened by name."""
    try:
        lib = ctypes.CDLL("libcuda.so.1")
        fn = lib.cuTensorMapReplaceAddress
    except (OSError, AttributeError):
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


# ---------------------------------------------------------------- maps of pipelined loops
#
# A software-pipelined loop whose loads lower/pipeline.py made TMA copies (ir.TmaCopy) takes one
# tensor map per load after the kernel's own parameters; these functions encode them from a
# launch's values and launch such a specialisation (the plain launcher does not pass them).

UNBOUNDED = 2**31 - 1  # the extent of a dimension the kernel does not bound (no mask)


def tensor_map(
    ptr: int, dtype: str, dims: Sequence[int], strides_bytes: Sequence[int], box: Sequence[int]
) -> np.ndarray:
    """The tensor map of a tensor of 1 to 5 dimensions at ``ptr``: ``dims`` innermost first
    (the first contiguous), ``strides_bytes`` of the others, read in boxes of ``box`` elements
    with the 128-byte swizzle, out-of-bounds elements as zeros. A launch value, cached."""
    key = ("nd", ptr, dtype, tuple(dims), tuple(strides_bytes), tuple(box))
    found = _cache.get(key)
    if found is not None:
        return found
    if not 1 <= len(dims) <= 5 or len(strides_bytes) != len(dims) - 1 or len(box) != len(dims):
        raise LaunchError(f"a tensor map has 1 to 5 dimensions, got dims {tuple(dims)}")
    fn = _libcuda()
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
    from ..lower.layout import walk_stmts

    copies: dict[str, ir.TmaCopy] = {}
    for s in walk_stmts(kernel.body):
        if isinstance(s, ir.PipelinedLoop) and s.loads and all(x.tma for x in s.loads):
            for x in s.loads:
                assert x.tma is not None
                copies.setdefault(x.tma.param, x.tma)
    return list(copies.values())


def pipeline_maps(
    kernel, values: Sequence, extents: dict[str, int] | None = None
) -> tuple[np.ndarray, ...]:
    """The tensor maps of ``kernel``'s TMA copies for a launch whose runtime parameter values
    (in order: device addresses and numbers) are ``values``. ``extents``: bytes from each
    pointer parameter's address to the end of its array, where known: a dimension the kernel
    does not bound then ends there (else at :data:`UNBOUNDED`)."""
    return tuple(
        tensor_map(int(values[i]), dtype, dims, strides, box)
        for i, dtype, dims, strides, box in maps_of(kernel, values, extents or {})
    )


def launch_pipelined(
    kernel,
    grid: tuple[int, int, int],
    args: tuple,
    *,
    num_warps: int,
    num_stages: int,
    stream=None,
    strided: bool = False,
    **constexprs,
) -> PipelinedReplay:
    """Launch a kernel (a :class:`teeny_tx.kernel.Kernel`) whose specialisation loads its
    pipelined tiles with TMA: its arguments bound and checked as any launch's, its tensor maps
    encoded (cached) and passed after them. ``grid`` is a 3-tuple. Returns the launch's
    :class:`PipelinedReplay`, for callers that replay it."""
    key, values, big = kernel.binder.bind_device(args, constexprs, num_warps, num_stages, strided)
    if big:
        raise LaunchError(f"kernel '{kernel.name}': TMA pipelines take 32-bit indices only")
    spec = kernel._specialization(key)
    typed = []
    for p, v in zip(spec.kernel.runtime_params, values, strict=True):
        if p.type.is_pointer:
            typed.append(np.uint64(v))
        elif p.type.dtype.name in ("f16", "bf16"):
            raise LaunchError(f"kernel '{kernel.name}': a 16-bit float scalar ({p.name})")
        else:
            typed.append(DTYPES[p.type.dtype.name].np.type(v))
    extents = {
        p.name: extent_bytes(a)
        for p, a in zip(spec.kernel.runtime_params, args, strict=True)
        if p.type.is_pointer
    }
    made = maps_of(spec.kernel, values, extents)
    maps = [tensor_map(int(values[i]), dtype, dims, st, box) for i, dtype, dims, st, box in made]
    spec.loaded.launch(grid, spec.block, (*typed, *maps), spec.shared_mem, stream)
    return PipelinedReplay(spec, grid, values, typed, made)


def maps_of(kernel, values: Sequence, extents: dict[str, int]) -> tuple[tuple, ...]:
    """What each tensor map of :func:`pipeline_maps` is made from but the address: (index of
    its pointer parameter, dtype, dims, strides in bytes, box). A replay of a launch at other
    addresses, with the same sizes and strides, encodes its maps from these."""
    params = [p.name for p in kernel.runtime_params]
    by_name = dict(zip(params, values, strict=True))

    def number(x):
        return by_name[x] if isinstance(x, str) else x

    out = []
    for c in pipeline_copies(kernel):
        size = ITEMSIZE[c.dtype]
        strides = tuple(number(d.stride) * size for d in c.dims[1:])
        if any(s <= 0 or s % 16 for s in strides):
            raise LaunchError(
                f"kernel '{kernel.name}': the TMA copy of {c.base} needs positive strides that are "
                f"multiples of 16 bytes, got {list(strides)} bytes (launch without "
                "$TEENY_TX_PIPELINE_TMA for cp.async copies)"
            )
        dims = [c.dims[0].extent]
        span = extents.get(c.base)
        for d, stride in zip(c.dims[1:], strides, strict=True):
            if d.extent is not None:
                dims.append(max(1, number(d.extent)))
            elif span is not None:
                dims.append(max(1, min(UNBOUNDED, -(-span // stride))))
            else:
                dims.append(min(UNBOUNDED, 2**62 // stride))
        box = (c.box[0], *([c.box[1]] + [1] * (len(dims) - 2)))
        out.append((params.index(c.base), c.dtype, tuple(dims), strides, box))
    return tuple(out)


class PipelinedReplay:
    """A :func:`launch_pipelined` launch kept for calls with arrays of the same sizes, strides
    and dtypes (the caller's key says so) at other addresses: the specialisation, its typed
    parameters and what its tensor maps are made of, found once. A replay takes the new
    arrays' addresses, checks each keeps the alignment (mod 16 bytes) the specialisation was
    made for, encodes the maps (cached per address) and launches. ``__call__`` returns False,
    launching nothing, where an address breaks that alignment: the caller then takes the full
    path, which checks everything again."""

    def __init__(self, spec, grid, values: Sequence, typed: list, maps: tuple[tuple, ...]):
        self.spec, self.grid, self.typed, self.maps = spec, grid, typed, maps
        params = spec.kernel.runtime_params
        self.pointers = tuple(i for i, p in enumerate(params) if p.type.is_pointer)
        self.alignment = tuple(int(values[i]) % 16 for i in self.pointers)

    def __call__(self, args: Sequence, stream=None) -> bool:
        typed = list(self.typed)
        for i, align in zip(self.pointers, self.alignment, strict=True):
            ptr = device_pointer(args[i])[0]
            if ptr % 16 != align:
                return False
            typed[i] = np.uint64(ptr)
        maps = [
            tensor_map(int(typed[i]), dtype, dims, strides, box)
            for i, dtype, dims, strides, box in self.maps
        ]
        spec = self.spec
        spec.loaded.launch(self.grid, spec.block, (*typed, *maps), spec.shared_mem, stream)
        return True

    def direct(self, device: int) -> DirectReplay | None:
        """This replay as one ``cuLaunchKernel`` on ``device`` with a parameter block built
        once (:class:`DirectReplay`); None where the driver's launch or its map functions
        are not at hand (a replay then goes through :meth:`__call__`)."""
        replace = _replace_address()
        handle = driver_handle(self.spec.loaded.prepared(device, self.spec.shared_mem))
        if replace is None or not handle:
            return None
        return DirectReplay(self, device, handle, replace)


class DirectReplay:
    """A :class:`PipelinedReplay` launched by the driver, for the library's plans: the
    parameter block (every value in place, each tensor map encoded once) is built when it is
    made; a call writes the new addresses into their slots, rewrites each map's address
    (``cuTensorMapReplaceAddress``) and calls ``cuLaunchKernel``, which copies the block
    (so it is free again when the call returns; a lock keeps threads from interleaving).
    ``__call__(addresses, stream)`` takes the pointer parameters' addresses in order and a
    raw stream handle, and returns False, launching nothing, where an address breaks the
    alignment (mod 16) the specialisation was made for."""

    def __init__(self, replay: PipelinedReplay, device: int, handle: int, replace) -> None:
        spec = replay.spec
        values = [np.asarray(v) for v in replay.typed]
        offsets, end = [], 0
        for v in values:
            end += -end % 8
            offsets.append(end)
            end += v.nbytes
        map_offsets = []
        for _ in replay.maps:
            end += -end % 64  # a CUtensorMap is 64-byte aligned
            map_offsets.append(end)
            end += 128
        self._block = ctypes.create_string_buffer(end + 64)
        base = ctypes.addressof(self._block)
        base += -base % 64
        for v, offset in zip(values, offsets, strict=True):
            ctypes.memmove(base + offset, v.tobytes(), v.nbytes)
        self._maps = []
        for (i, dtype, dims, strides, box), offset in zip(replay.maps, map_offsets, strict=True):
            encoded = tensor_map(int(replay.typed[i]), dtype, dims, strides, box)
            ctypes.memmove(base + offset, encoded.tobytes(), 128)
            self._maps.append((replay.pointers.index(i), base + offset))
        every = [base + o for o in (*offsets, *map_offsets)]
        self._array = (ctypes.c_void_p * len(every))(*every)
        self._params = ctypes.addressof(self._array)
        self._slots = [ctypes.c_uint64.from_address(base + offsets[i]) for i in replay.pointers]
        self._alignment = replay.alignment
        self._replace = replace
        self._lock = threading.Lock()
        self.spec, self.device, self.handle, self.grid = spec, device, handle, replay.grid

    def __call__(self, addresses: Sequence[int], stream: int) -> bool:
        for address, align in zip(addresses, self._alignment, strict=True):
            if address % 16 != align:
                return False
        spec, (gx, gy, gz), (bx, by, bz) = self.spec, self.grid, self.spec.block
        with self._lock:
            for slot, address in zip(self._slots, addresses, strict=True):
                slot.value = address
            for which, tensor_map_address in self._maps:
                result = self._replace(tensor_map_address, addresses[which])
                if result != 0:
                    raise LaunchError(
                        f"cuTensorMapReplaceAddress failed (CUresult {result}) for address "
                        f"{addresses[which]:#x}"
                    )
            try:
                launch_kernel(
                    self.handle, gx, gy, gz, bx, by, bz, spec.shared_mem, stream, self._params, 0
                )
            except DriverError as err:
                raise spec.loaded.error(
                    self.device, err, self.grid, spec.block, spec.shared_mem
                ) from None
        return True
