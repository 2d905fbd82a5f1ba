"""A cubin and an entry-point symbol → kernel launches on the current device.

Input: cubin bytes, the kernel's symbol, and per launch a grid, a block, launch values (pointers
as ``cupy.cuda.function.CIntptr`` or ``numpy.uint64``, scalars as exactly-typed NumPy scalars),
dynamic shared memory and a stream. Output: the kernel queued on that stream, or a
:class:`~teeny_tx.errors.LaunchError` / :class:`~teeny_tx.errors.ResourceError`.

Also the device facts the compiler asks for: :func:`has_gpu` and :func:`device_limits`.

CuPy's ``Function.__call__`` passes each argument by value: a ``CPointer`` (``CIntptr``) as is,
any NumPy scalar as its own bytes (8 for ``numpy.uint64``, which is exactly a ``T*``). Modules
load lazily, once per device; nothing else is looked up per launch but the current device.

Every launch of a compiled kernel goes to the driver's ``cuLaunchKernel`` through
``plan.launch_kernel`` (CuPy's thin Cython binding of it), with the kernel's handle, the grid
and block as numbers, the stream's raw handle and the address of a ``void*`` array built
once per parameter buffer (:class:`ParamBuffer`): no per-argument conversion, no grid/block
tuples, no per-thread context check (a thread with no current context gets
``CUDA_ERROR_INVALID_CONTEXT``; :func:`make_current` then makes the device's context current
and the launch is made again). :meth:`LoadedKernel.launch` is the raw API for a cubin and
CuPy-style values (tests and tools): it calls CuPy's function, and nothing of the compiler's
launches goes through it.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cupy.cuda import function as _function
from cupy.cuda import stream as _stream
from cupy.cuda.stream import get_current_stream as _current_stream
from cupy_backends.cuda.api import driver as _driver
from cupy_backends.cuda.api import runtime as _runtime

from teeny_tx.errors import LaunchError, ResourceError

from ..target import Target
from .streams import TORCH_RAW_STREAM as TORCH_RAW_STREAM  # (the launchers read these here)
from .streams import torch_raw_stream as torch_raw_stream
from .streams import torch_stream_pointer as torch_stream_pointer


@dataclass(frozen=True)
class DeviceLimits:
    """What one device allows a block, and what it is."""

    name: str
    capability: tuple[int, int]
    max_shared_per_block_optin: int
    max_threads_per_block: int
    regs_per_block: int
    multiprocessor_count: int


@dataclass(frozen=True)
class KernelAttributes:
    """What the compiled kernel itself uses, as the driver reports it for one device."""

    num_regs: int
    static_shared_bytes: int
    local_bytes: int
    max_threads_per_block: int


@functools.cache
def has_gpu() -> bool:
    """Whether CuPy sees a CUDA device. Cheap after the first call; never raises."""
    try:
        return _runtime.getDeviceCount() > 0
    except Exception:  # noqa: BLE001 - no driver, no runtime, no device: all mean False
        return False


_limits: dict[int, DeviceLimits] = {}


def device_target(hopper_features: bool = False) -> Target:
    """The current device's target (sm_90 without a GPU; see ``Target.for_capability``)."""
    capability = device_limits().capability if has_gpu() else None
    return Target.for_capability(capability, hopper_features)


def device_limits(device: int | None = None) -> DeviceLimits:
    """Limits of ``device`` (default: CuPy's current device), read once per device."""
    if not has_gpu():
        raise LaunchError("no CUDA device is visible (cupy.cuda.runtime.getDeviceCount() is 0)")
    device = _runtime.getDevice() if device is None else device
    limits = _limits.get(device)
    if limits is None:
        limits = _limits[device] = _query_limits(device)
    return limits


def _query_limits(device: int) -> DeviceLimits:
    try:
        props = _runtime.getDeviceProperties(device)
        attribute = functools.partial(_device_attribute, device=device)
        return DeviceLimits(
            name=props["name"].decode(errors="replace"),
            capability=(int(props["major"]), int(props["minor"])),
            max_shared_per_block_optin=attribute(_runtime.cudaDevAttrMaxSharedMemoryPerBlockOptin),
            max_threads_per_block=attribute(_runtime.cudaDevAttrMaxThreadsPerBlock),
            regs_per_block=attribute(_runtime.cudaDevAttrMaxRegistersPerBlock),
            multiprocessor_count=attribute(_runtime.cudaDevAttrMultiProcessorCount),
        )
    except _runtime.CUDARuntimeError as err:
        raise LaunchError(f"cannot query CUDA device {device}: {err}") from None


def _device_attribute(attribute: int, device: int) -> int:
    return int(_runtime.deviceGetAttribute(attribute, device))


class _OnDevice:
    """The kernel loaded on one device, and the dynamic shared memory it may use there."""

    __slots__ = ("module", "function", "shared_limit")

    def __init__(self, module: Any, function: Any, shared_limit: int):
        self.module = module  # keeps the module loaded as long as its function is in use
        self.function = function
        self.shared_limit = shared_limit


class LoadedKernel:
    """One kernel of a cubin, loaded lazily on each device it is launched on."""

    def __init__(self, cubin: bytes, symbol: str):
        self.cubin = cubin
        self.symbol = symbol
        self._devices: dict[int, _OnDevice] = {}

    def launch(
        self,
        grid: tuple[int, int, int],
        block: tuple[int, int, int],
        args: tuple,
        shared_mem: int = 0,
        stream: Any = None,
    ) -> None:
        """Queue the kernel on ``stream`` (default: CuPy's current stream) of the current device.

        ``grid`` and ``block`` must be tuples; ``args`` are launch values (see the module doc).
        """
        device = _runtime.getDevice()
        loaded = self._devices.get(device) or self._load(device)
        if shared_mem > loaded.shared_limit:
            self._allow_shared_memory(device, loaded, shared_mem)
        if stream is not None:
            stream = (_stream_kinds.get(type(stream)) or _stream_kind(stream))(stream)
        try:
            loaded.function(grid, block, args, shared_mem, stream)
        except _driver.CUDADriverError as err:
            raise LaunchError(self._failure(device, err, grid, block, shared_mem)) from None

    def prepared(self, device: int, shared_mem: int) -> Any:
        """The CuPy function on ``device``, loaded and allowed ``shared_mem`` bytes: what a
        launcher that caches per device calls directly (launch() does the same per call)."""
        loaded = self._devices.get(device) or self._load(device)
        if shared_mem > loaded.shared_limit:
            self._allow_shared_memory(device, loaded, shared_mem)
        return loaded.function

    def error(self, device: int, err: Exception, grid: Any, block: Any, shared: int) -> LaunchError:
        """The LaunchError for a failed launch, with the kernel's resource use."""
        return LaunchError(self._failure(device, err, grid, block, shared))

    def attributes(self, device: int | None = None) -> KernelAttributes:
        """Registers, static shared and local memory, and block size limit of this kernel."""
        device = _runtime.getDevice() if device is None else device
        pointer = (self._devices.get(device) or self._load(device)).function.ptr
        read = functools.partial(_function_attribute, pointer)
        return KernelAttributes(
            num_regs=read(_driver.CU_FUNC_ATTRIBUTE_NUM_REGS),
            static_shared_bytes=read(_driver.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES),
            local_bytes=read(_driver.CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES),
            max_threads_per_block=read(_driver.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK),
        )

    def _load(self, device: int) -> _OnDevice:
        module = _function.Module()
        try:
            module.load(self.cubin)
            function = module.get_function(self.symbol)
        except _driver.CUDADriverError as err:
            raise LaunchError(self._load_failure(device, err)) from None
        limit = _function_attribute(
            function.ptr, _driver.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        )
        loaded = self._devices[device] = _OnDevice(module, function, limit)
        return loaded

    def _allow_shared_memory(self, device: int, loaded: _OnDevice, shared_mem: int) -> None:
        """Opt in to more than the default dynamic shared memory, once per size increase."""
        limits = device_limits(device)
        static = _function_attribute(
            loaded.function.ptr, _driver.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES
        )
        if static + shared_mem > limits.max_shared_per_block_optin:
            raise ResourceError(
                f"kernel '{self.symbol}' needs {shared_mem} bytes of dynamic shared memory "
                f"(plus {static} static) per block; {limits.name} allows at most "
                f"{limits.max_shared_per_block_optin} bytes per block",
                needed=static + shared_mem,
                limit=limits.max_shared_per_block_optin,
            )
        _driver.funcSetAttribute(
            loaded.function.ptr, _driver.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, shared_mem
        )
        loaded.shared_limit = shared_mem

    def _load_failure(self, device: int, err: Exception) -> str:
        limits = device_limits(device)
        arch = "sm_{}{}".format(*limits.capability)
        return (
            f"cannot load kernel '{self.symbol}' on device {device} ({limits.name}, {arch}): "
            f"{err}. Was it compiled for this architecture? (set TEENY_TX_ARCH or leave it unset)"
        )

    def _failure(self, device: int, err: Exception, grid: Any, block: Any, shared: int) -> str:
        text = (
            f"launching kernel '{self.symbol}' failed: {err} "
            f"(grid {grid}, block {block}, dynamic shared memory {shared} bytes)"
        )
        try:
            used = self.attributes(device)
        except Exception:  # noqa: BLE001 - the report is a hint; the launch error stands
            return text
        return (
            f"{text}; the kernel uses {used.num_regs} registers per thread and allows at most "
            f"{used.max_threads_per_block} threads per block"
        )


def _function_attribute(pointer: int, attribute: int) -> int:
    return int(_driver.funcGetAttribute(attribute, pointer))


# --- streams ---------------------------------------------------------------------------------


_handles: dict[int, Any] = {}


def _handle(ptr: int) -> Any:
    """A raw ``cudaStream_t`` as the object CuPy's launcher takes (its Function reads a CuPy
    stream's fields directly: any other object crashes it), kept per handle."""
    handle = _handles.get(ptr)
    if handle is None:
        handle = _handles[ptr] = _wrap_handle(int(ptr))
    return handle


class _RawStream:
    """A raw stream handle as the CUDA stream protocol's object (``__cuda_stream__``)."""

    __slots__ = ("ptr",)

    def __init__(self, ptr: int):
        self.ptr = ptr

    def __cuda_stream__(self) -> tuple[int, int]:
        return (0, self.ptr)


def _wrap_handle(ptr: int) -> Any:
    """CuPy's stream object of a raw handle: ``Stream.from_external`` where CuPy has it
    (``ExternalStream`` is deprecated there), else ``ExternalStream``."""
    from_external = getattr(_stream.Stream, "from_external", None)
    if from_external is not None:
        return from_external(_RawStream(ptr))
    return _stream.ExternalStream(ptr)


def _same(stream: Any) -> Any:
    return stream


def _torch_stream(stream: Any) -> Any:
    return _handle(stream.cuda_stream)


def _protocol_stream(stream: Any) -> Any:
    return _handle(stream.__cuda_stream__()[1])


def _stream_kind(stream: Any) -> Any:
    """The converter for an unseen stream type: remembered per type."""
    kind = type(stream)
    convert: Callable[[Any], Any] | None
    if kind is bool:
        convert = None
    elif issubclass(kind, int):
        convert = _handle
    elif hasattr(kind, "cuda_stream"):
        convert = _torch_stream
    elif hasattr(kind, "__cuda_stream__"):
        convert = _protocol_stream
    else:
        convert = None
    if convert is None:
        raise LaunchError(
            f"stream must be None, a cupy.cuda.Stream, a torch.cuda.Stream or an int handle; "
            f"got {kind.__module__}.{kind.__qualname__}"
        )
    _stream_kinds[kind] = convert
    return convert


_stream_kinds: dict[type, Any] = {
    _stream.Stream: _same,
    _stream.ExternalStream: _same,
    int: _handle,
}


def convert_stream(stream: Any) -> Any:
    """A stream argument (CuPy, torch, raw handle, __cuda_stream__) as CuPy's launcher takes it."""
    return (_stream_kinds.get(type(stream)) or _stream_kind(stream))(stream)


get_device = _runtime.getDevice
DriverError = _driver.CUDADriverError
INVALID_CONTEXT = 201  # CUDA_ERROR_INVALID_CONTEXT: no context current on the calling thread


def make_current(device: int) -> None:
    """Make ``device``'s primary context current on this thread (a thread that never touched
    the GPU has none, and cuLaunchKernel then fails with CUDA_ERROR_INVALID_CONTEXT):
    cudaSetDevice makes it current (CUDA 12 and newer), cudaFree(0) creates it if needed."""
    _runtime.setDevice(device)
    _runtime.free(0)


def single_device() -> bool:
    """Whether exactly one CUDA device is visible: the current device is then always 0, and
    the launchers need not ask for it (the count is fixed for the life of the process)."""
    if not has_gpu():
        return False
    return _device_count() == 1


@functools.cache
def _device_count() -> int:
    try:
        return int(_runtime.getDeviceCount())
    except Exception:  # noqa: BLE001 - no driver, no runtime: no device to assume
        return 0


current_stream = _current_stream  # CuPy's current stream of a device: .ptr is its handle


def cupy_stream_pointer(device: int) -> int:
    """The raw handle of CuPy's current stream on ``device`` (0: the legacy default stream)."""
    return _current_stream(device).ptr


def stream_pointer(stream: Any) -> int:
    """The raw handle of a stream argument (CuPy, torch, an int handle, __cuda_stream__)."""
    if type(stream) is int:
        return stream
    return int(convert_stream(stream).ptr)


def driver_handle(function: Any) -> int:
    """The ``CUfunction`` handle of a loaded CuPy function, for ``plan.launch_kernel``."""
    return int(function.ptr)


def pointer_arg(ptr: int) -> Any:
    """The cheapest correct launch value for a ``T*`` parameter.

    ``CIntptr`` is a ``CPointer`` that CuPy passes through untouched (about 60 ns to build);
    ``numpy.uint64(ptr)`` is equally correct but CuPy re-wraps it on every launch (about 400 ns).
    """
    return _function.CIntptr(ptr)


class ParamBuffer:
    """One thread's parameter block of a kernel: ``buffer`` (written by ``struct.pack_into``)
    and ``params``, the address of the ``void*`` array of its parameters' bytes in the buffer,
    as ``cuLaunchKernel`` reads it (the driver copies the values when it is called, so the
    buffer is free again when the launch call returns)."""

    __slots__ = ("buffer", "address", "array", "params")

    def __init__(self, size: int, offsets: tuple[int, ...]):
        self.buffer = (ctypes.c_char * max(size, 8))()
        self.address = ctypes.addressof(self.buffer)
        # the void* array cuLaunchKernel reads (kernelParams): one entry per parameter
        self.array = (ctypes.c_void_p * max(len(offsets), 1))(
            *[self.address + offset for offset in offsets]
        )
        self.params = ctypes.addressof(self.array)
