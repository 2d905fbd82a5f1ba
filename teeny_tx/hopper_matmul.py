"""The Hopper matmul path end to end: a HopperMatmul node -> CUDA -> cubin -> launches.

Input: a node from :func:`teeny_tx.lower.hopper.plan_matmul` and, per launch, device pointers,
sizes and strides. Output: the kernel queued on the given stream. The tensor maps of A and B
are encoded on the host (``runtime/tma.py``), cached by pointer, shape and stride, and passed
by value; the grid is persistent: one block per SM at most, the tiles walked in grouped order.
A split-K kernel also takes a workspace (its f32 partial tiles) and a tile counter array,
allocated once per device and stream (:func:`split_buffers`) and left zeroed by every launch.

Compiling needs no GPU (``HopperMatmulKernel(node).cubin`` compiles for sm_90a through NVRTC);
launching needs a Hopper device.
"""

from __future__ import annotations

import ctypes
import functools
import threading
from functools import cached_property
from typing import Any

import numpy as np

from . import switches
from .kernel import HEADERS
from .lower.hopper import HopperMatmul
from .runtime import cache, launch, nvrtc, tma
from .target import HOPPER
from .templates.hopper import render_matmul

ARCH = HOPPER.arch


class HopperMatmulKernel:
    """One Hopper matmul specialisation: its source, cubin (lazily) and launches."""

    def __init__(self, node: HopperMatmul, arch: str = ARCH):
        self.node = node
        self.arch = arch
        self.source = render_matmul(node)
        self._launchers: dict[tuple, Any] = {}

    @cached_property
    def compiled(self) -> nvrtc.CompileResult:
        """NVRTC's result (cubin and log; the log has ptxas's register and spill report)."""
        return nvrtc.compile_with_log(
            self.source, name=self.node.name, arch=self.arch, headers=HEADERS
        )

    @cached_property
    def cubin(self) -> bytes:
        return cache.load_or_compile(
            self.source,
            name=self.node.name,
            arch=self.arch,
            options=nvrtc.DEFAULT_OPTIONS,
            headers=HEADERS,
        )

    @cached_property
    def loaded(self) -> launch.LoadedKernel:
        return launch.LoadedKernel(self.cubin, self.node.name)

    def tensor_maps(
        self, a_ptr: int, b_ptr: int, m: int, n: int, k: int, a_stride: int, b_stride: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """The tensor maps of A [M, K] and B [K, N], each viewed with its contiguous axis
        inner; ``a_stride`` / ``b_stride``: the other axis's stride in elements."""
        node = self.node
        maps = []
        operands = ((node.a, a_ptr, a_stride, (m, k)), (node.b, b_ptr, b_stride, (n, k)))
        for op, ptr, stride, (mn, kk) in operands:
            size = tma.ITEMSIZE[op.dtype]
            inner, outer = (kk, mn) if op.kmajor else (mn, kk)
            maps.append(tma.tensor_map_2d(ptr, op.dtype, inner, outer, stride * size, op.box))
        return maps[0], maps[1]

    def grid(self, m: int, n: int, sms: int) -> int:
        """Blocks of the persistent grid: one per tile up to one per SM; with clusters, a
        multiple of the cluster size (a cluster per ``cluster`` tile rows and SMs)."""
        ml = self.node.mainloop
        tiles_m, tiles_n = -(-m // ml.bm), -(-n // ml.bn)
        if ml.cluster == 1:  # split-K: split_k units per tile
            return max(1, min(tiles_m * tiles_n * ml.split_k, sms))
        clusters = -(-tiles_m // ml.cluster) * tiles_n
        return ml.cluster * max(1, min(clusters, sms // ml.cluster))

    def launch(
        self,
        c_ptr: int,
        a_ptr: int,
        b_ptr: int,
        bias_ptr: int,
        m: int,
        n: int,
        k: int,
        a_stride: int,
        b_stride: int,
        scm: int,
        scn: int,
        alpha: float,
        sms: int,
        stream: Any = None,
        scale_a: int = 0,
        scale_b: int = 0,
    ) -> None:
        """Queue C = epilogue(A @ B) for the node's dtypes and majorness (see tensor_maps);
        ``scale_a`` / ``scale_b``: device pointers to the per-tensor f32 scales of a scaled
        (fp8) node."""
        map_a, map_b = self.tensor_maps(a_ptr, b_ptr, m, n, k, a_stride, b_stride)
        maps: tuple[np.ndarray, ...] = (map_a, map_b)
        e = self.node.epilogue
        if e.tma_store:  # C [M, N] row-major, in boxes of one consumer's 64 rows x one panel
            panel = 128 // tma.ITEMSIZE[e.out_dtype]
            box = (panel, 64)
            size = tma.ITEMSIZE[e.out_dtype]
            maps += (tma.tensor_map_2d(c_ptr, e.out_dtype, n, m, scm * size, box),)
        args: tuple[Any, ...] = (
            *maps,
            np.uint64(c_ptr),
            np.uint64(bias_ptr),
            np.int32(m),
            np.int32(n),
            np.int32(k),
            np.int32(scm),
            np.int32(scn),
            np.float32(alpha),
        )
        if self.node.epilogue.scaled:
            args += (np.uint64(scale_a), np.uint64(scale_b))
        if self.node.mainloop.split_k > 1:
            args += split_buffers(self.node, m, n, launch.get_device(), stream)
        grid = (self.grid(m, n, sms), 1, 1)
        block = (self.node.mainloop.threads, 1, 1)
        self.loaded.launch(grid, block, args, self.node.shared_bytes, stream)

    def launcher(
        self,
        m: int,
        n: int,
        k: int,
        a_stride: int,
        b_stride: int,
        scm: int,
        scn: int,
        alpha: float,
        sms: int,
    ):
        """A launch function ``(c_ptr, a_ptr, b_ptr, bias_ptr, stream) -> None`` for products
        of these sizes and strides: what a replayed plan calls. Everything but the pointers
        and the stream is converted once; the tensor maps come from their cache; the kernel
        is called through CuPy's function directly (loaded once per device). Launchers are
        kept per sizes (64 at most; :func:`forget_launchers` empties every kernel's)."""
        key = (m, n, k, a_stride, b_stride, scm, scn, alpha, sms)
        found = self._launchers.get(key)
        if found is None:
            if len(self._launchers) >= 64:
                self._launchers.clear()
            found = self._launchers[key] = self.fresh_launcher(*key)
        return found

    def fresh_launcher(
        self,
        m: int,
        n: int,
        k: int,
        a_stride: int,
        b_stride: int,
        scm: int,
        scn: int,
        alpha: float,
        sms: int,
    ):
        """A new launcher of :meth:`launcher`'s kind, not kept (what a tuner times)."""
        node = self.node
        sizes = tuple(np.int32(x) for x in (m, n, k, scm, scn)) + (np.float32(alpha),)
        grid = (self.grid(m, n, sms), 1, 1)
        block = (node.mainloop.threads, 1, 1)
        shared = node.shared_bytes
        functions: dict[int, Any] = {}
        known: dict[tuple[int, int], tuple] = {}  # (A, B) pointers -> their tensor maps
        maps = self.tensor_maps
        convert = launch.convert_stream
        pointer = launch.pointer_arg
        get_device = launch.get_device
        if node.epilogue.scaled:  # rare: the general path
            return lambda c, a, b, bias, stream=None: self.launch(
                c, a, b, bias, m, n, k, a_stride, b_stride, scm, scn, alpha, sms, stream
            )
        split = node.mainloop.split_k > 1
        c_maps: dict[int, tuple] = {}  # C pointer -> (its tensor map,) with TMA stores; else ()
        if node.epilogue.tma_store:
            out_dtype = node.epilogue.out_dtype
            out_size = tma.ITEMSIZE[out_dtype]
            c_box = (128 // out_size, 64)  # one consumer's 64 rows x one 128-byte panel

            def c_map(c_ptr: int) -> tuple:
                found = c_maps.get(c_ptr)
                if found is None:
                    if len(c_maps) >= 64:
                        c_maps.clear()
                    found = c_maps[c_ptr] = (
                        tma.tensor_map_2d(c_ptr, out_dtype, n, m, scm * out_size, c_box),
                    )
                return found
        else:

            def c_map(c_ptr: int) -> tuple:
                return ()

        direct: dict[int, _DriverLaunch | None] = {}  # per device: cuLaunchKernel, or None

        def run(c_ptr: int, a_ptr: int, b_ptr: int, bias_ptr: int, stream: Any = None) -> None:
            device = get_device()
            function = functions.get(device)
            if function is None:
                function = functions[device] = self.loaded.prepared(device, shared)
                direct[device] = _DriverLaunch.of(function, grid, block, shared, sizes, node)
            pair = known.get((a_ptr, b_ptr))
            if pair is None:
                if len(known) >= 64:
                    known.clear()
                pair = known[(a_ptr, b_ptr)] = maps(a_ptr, b_ptr, m, n, k, a_stride, b_stride)
            driver = direct[device]
            if driver is not None:
                extra = split_pointers(node, m, n, device, stream) if split else ()
                code = driver(pair + c_map(c_ptr), (a_ptr, b_ptr, c_ptr), bias_ptr, extra, stream)
                if code == 0:
                    return
                if code != _INVALID_CONTEXT:  # no context current: CuPy's launch makes it so
                    err = launch.DriverError(code)
                    raise self.loaded.error(device, err, grid, block, shared) from None
            args = (*pair, *c_map(c_ptr), pointer(c_ptr), pointer(bias_ptr), *sizes)
            if split:
                args += split_buffers(node, m, n, device, stream)
            try:
                function(grid, block, args, shared, None if stream is None else convert(stream))
            except launch.DriverError as err:
                raise self.loaded.error(device, err, grid, block, shared) from None

        return run


_kernels: dict[tuple, HopperMatmulKernel] = {}


def kernel_for(node: HopperMatmul) -> HopperMatmulKernel:
    """The kernel of ``node``, built once per process."""
    found = _kernels.get(node.key)
    if found is None:
        found = _kernels[node.key] = HopperMatmulKernel(node)
    return found


def forget_launchers() -> None:
    """Drop the launchers every kernel keeps (what a test that counts launches starts from)."""
    for kernel in _kernels.values():
        kernel._launchers.clear()


# split-K buffers per (device, stream): (workspace, counters), each a CuPy array that only grows;
# a replaced one is kept (a launch queued before may still use it): at most twice the largest
_split: dict[tuple[int, int], tuple[Any, Any]] = {}
_retired: list[Any] = []


def split_bytes(node: HopperMatmul, m: int, n: int) -> tuple[int, int]:
    """(workspace bytes, counters) of a split-K launch: split_k f32 partial tiles per output
    tile, one int counter per tile."""
    ml = node.mainloop
    tiles = -(-m // ml.bm) * -(-n // ml.bn)
    return tiles * ml.split_k * ml.bm * ml.bn * 4, tiles


def split_workspace(node: HopperMatmul, m: int, n: int, device: int, stream: Any) -> tuple:
    """The split-K buffers (workspace, counters: CuPy arrays) that launches of ``node`` on
    ``device`` and ``stream`` use. Launches on one stream run in order, so one pair serves them
    all; counters start at 0 and each launch's last units set them back to 0. A launch that
    traps may leave a counter set: :func:`forget_split_buffers` drops the buffers."""
    import cupy

    need, tiles = split_bytes(node, m, n)
    handle = cupy.cuda.get_current_stream() if stream is None else launch.convert_stream(stream)
    key = (device, int(handle.ptr))
    found = _split.get(key)
    if found is None or found[0].nbytes < need or found[1].size < tiles:
        with cupy.cuda.Device(device):
            old = found
            size = max(need, 0 if old is None else old[0].nbytes)
            count = max(tiles, 0 if old is None else old[1].size)
            found = _split[key] = (cupy.empty(size, np.uint8), cupy.zeros(count, np.int32))
            if old is not None:
                _retired.extend(old)
    return found


def split_buffers(node: HopperMatmul, m: int, n: int, device: int, stream: Any) -> tuple:
    """The split-K kernel arguments (workspace, counters pointers) of a launch of ``node``
    (see :func:`split_workspace`)."""
    return tuple(np.uint64(p) for p in split_pointers(node, m, n, device, stream))


def split_pointers(node: HopperMatmul, m: int, n: int, device: int, stream: Any) -> tuple:
    """The addresses of :func:`split_workspace`'s buffers, as ints."""
    workspace, counters = split_workspace(node, m, n, device, stream)
    return (workspace.data.ptr, counters.data.ptr)


def forget_split_buffers() -> None:
    """Drop every split-K buffer (a test that counts allocations, or after a trapped launch)."""
    _split.clear()
    _retired.clear()


# ---------------------------------------------------------------- the driver's launch

_INVALID_CONTEXT = 201  # CUDA_ERROR_INVALID_CONTEXT
DRIVER_LAUNCH: bool = switches.read("HOPPER_DRIVER_LAUNCH")


@functools.cache
def _cu_launch_kernel() -> Any:
    """libcuda's cuLaunchKernel through ctypes (the library CuPy launches through), or None."""
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None
    fn = lib.cuLaunchKernel
    fn.restype = ctypes.c_int
    u32, ptr = ctypes.c_uint, ctypes.c_void_p
    fn.argtypes = [ptr, u32, u32, u32, u32, u32, u32, u32, ptr, ptr, ptr]
    return fn


class _DriverLaunch:
    """One launcher's kernel parameters in ctypes storage and the ``void*`` array that
    cuLaunchKernel reads them through: a call rewrites the pointers (and the tensor maps when
    they change) and launches, with no per-argument conversion (the host cost of a small
    product; CuPy's launch converts each argument every call). The driver copies the values
    at launch, so the storage is rewritten under a lock, never while another thread launches.
    Parameter order: the tensor maps (A, B, and C with TMA stores), c, bias, M, N, K, scm, scn,
    alpha, then split-K's workspace and counters. Measured on the H200 (2026-12-01, 15:23Z):
    linalg.matmul at fp16 1024^3 as called back to back, 24.7 us per call against 35.1 us
    through CuPy's launch (cuBLAS 20.3, Triton 76)."""

    def __init__(self, function_ptr: int, grid: tuple, block: tuple, shared: int, sizes: tuple,
                 maps: int, split: bool, launch_fn: Any):  # fmt: skip
        self.function = function_ptr
        self.grid, self.block, self.shared = grid, block, shared
        self.maps = [(ctypes.c_ubyte * 128)() for _ in range(maps)]
        self.c, self.bias = ctypes.c_uint64(), ctypes.c_uint64()
        ints = [ctypes.c_int32(int(x)) for x in sizes[:5]]
        alpha = ctypes.c_float(float(sizes[5]))
        self.extra = [ctypes.c_uint64(), ctypes.c_uint64()] if split else []
        self._values = [*self.maps, self.c, self.bias, *ints, alpha, *self.extra]  # kept alive
        self.params = (ctypes.c_void_p * len(self._values))(
            *[ctypes.addressof(v) for v in self._values]
        )
        self.last: tuple = ()  # the (A, B, C) pointers whose tensor maps self.maps holds
        self.lock = threading.Lock()
        self.launch_fn = launch_fn

    @classmethod
    def of(
        cls, function: Any, grid: tuple, block: tuple, shared: int, sizes: tuple, node: HopperMatmul
    ) -> _DriverLaunch | None:
        """The direct launch of ``node``'s CuPy function, or None (no libcuda, switched off,
        or a function without a driver handle: a test's stand-in)."""
        fn = _cu_launch_kernel() if DRIVER_LAUNCH else None
        handle = getattr(function, "ptr", None)
        if fn is None or not isinstance(handle, int):
            return None
        maps = 3 if node.epilogue.tma_store else 2
        return cls(handle, grid, block, shared, sizes, maps, node.mainloop.split_k > 1, fn)

    def __call__(
        self, maps: tuple, pointers: tuple, bias_ptr: int, extra: tuple, stream: Any
    ) -> int:
        """Launch with the tensor ``maps`` of the (A, B, C) ``pointers`` on ``stream`` (an int
        handle, a CuPy or torch stream; None: CuPy's current one); the driver's status (0:
        queued). The maps are copied in only when the pointers change (a map is a function of
        its pointer, for this launcher's fixed sizes)."""
        handle = stream if type(stream) is int else _stream_handle(stream)
        with self.lock:
            if pointers != self.last:
                for buffer, value in zip(self.maps, maps, strict=True):
                    ctypes.memmove(buffer, value.ctypes.data, 128)
                self.last = pointers
            self.c.value, self.bias.value = pointers[2], bias_ptr
            for slot, value in zip(self.extra, extra, strict=True):
                slot.value = value
            g, b = self.grid, self.block
            return self.launch_fn(self.function, g[0], g[1], g[2], b[0], b[1], b[2],
                                  self.shared, handle, self.params, None)  # fmt: skip


def _stream_handle(stream: Any) -> int:
    """The raw handle of a stream argument (None: CuPy's current stream)."""
    import cupy

    if stream is None:
        return int(cupy.cuda.get_current_stream().ptr)
    return int(launch.convert_stream(stream).ptr)
