"""Launch plans: a prepared specialisation and its parameter block → ``cuLaunchKernel``.

Input: a loaded kernel (``launch.LoadedKernel``: a cubin and its symbol), its block, dynamic
shared memory and parameter layout, and per call the arrays' addresses and a stream. Output:
the kernel queued on that stream of the arrays' device, or a
:class:`~teeny_tx.errors.LaunchError`.

Every launch of the package goes through this module:

- :class:`Entry`: one specialisation prepared for launching (per device its CuPy function
  and driver handle), the thing the generated launchers of ``binder.py`` find by a call's
  signature. Their hot path packs the call's values into a per-thread :class:`Block`-like
  buffer (``launch.ParamBuffer``) and makes :func:`launch_call`'s call.
- :class:`Plan`: one (specialisation, argument signature) with its parameter block built
  once — pointer, scalar and tensor-map slots at the kernel's C offsets. A call writes the new
  addresses into their slots, rewrites each tensor map's address (``cuTensorMapReplaceAddress``,
  or the map encoded again where libcuda's function is not at hand) and launches. The
  library's direct launches of TMA kernels, ``kernel[grid]`` of a TMA kernel and the Hopper
  matmul (``runtime/hopper.py``) all launch through plans.

**The one binding.** ``cuLaunchKernel`` is called through CuPy's Cython binding
(``cupy_backends.cuda.api.driver.launchKernel``), not a ctypes one of ``libcuda.so.1``: its
arguments are C integers converted by Cython (a ctypes call marshals each of its eleven
arguments through ``argtypes``, about half a microsecond more per launch), it raises
``CUDADriverError`` with the status instead of returning a code to test, and it is the same
driver library underneath. The call is written once, as text, by :func:`launch_call`: the
generated launchers embed it, and :func:`launch_block` (what a plan calls) is made from it.
``tests/test_launch_plan.py`` checks that nothing else in the package launches.
"""

from __future__ import annotations

import ctypes
import struct
import threading
from collections.abc import Callable, Sequence
from typing import Any

from cupy_backends.cuda.api import driver as _driver

from ..errors import LaunchError
from . import launch as _launch
from . import tma

launch_kernel = _driver.launchKernel  # (function, grid x/y/z, block x/y/z, shared, stream,
#                                        address of the void* parameter array, extra: 0)
MAP = "map"  # the slot code of a tensor map: 128 bytes, 64-byte aligned (a CUtensorMap)
MAX_PLANS = 64  # plans an entry keeps for kernel[grid] launches of TMA kernels


def launch_call(
    name: str,
    handle: str,
    grid: Sequence[str],
    block: Sequence[str],
    shared: str,
    stream: str,
    params: str,
) -> str:
    """The text of the package's one ``cuLaunchKernel`` call: ``name`` is what the binding
    is called where the text runs; the others are expressions of the handle, the grid and
    block dimensions, the shared memory, the raw stream and the parameter array's address."""
    gx, gy, gz = grid
    bx, by, bz = block
    return f"{name}({handle}, {gx}, {gy}, {gz}, {bx}, {by}, {bz}, {shared}, {stream}, {params}, 0)"


_made: dict[str, Any] = {}
exec(  # launch_block: the call as a function of its values (the binding found when called)
    "def launch_block(handle, gx, gy, gz, bx, by, bz, shared, stream, params):\n    "
    + launch_call(
        "launch_kernel",
        "handle",
        ("gx", "gy", "gz"),
        ("bx", "by", "bz"),
        "shared",
        "stream",
        "params",
    )
    + "\n",
    globals(),
    _made,
)
launch_block = _made.pop("launch_block")


# ---------------------------------------------------------------- parameter blocks


class Block:
    """A kernel's parameter block in ctypes storage: one slot per parameter at its C offset
    (a struct code of ``struct``'s native mode, or :data:`MAP`) and the ``void*`` array the
    driver reads (``params``: its address). Built once; slots are rewritten in place."""

    def __init__(self, codes: Sequence[str]):
        offsets, end = [], 0
        for code in codes:
            size = 128 if code == MAP else struct.calcsize("@" + code)
            align = 64 if code == MAP else size
            end += -end % align
            offsets.append(end)
            end += size
        self.codes = tuple(codes)
        self._storage = ctypes.create_string_buffer(max(end, 8) + 64)
        start = ctypes.addressof(self._storage)
        self._pad = -start % 64  # a CUtensorMap parameter is 64-byte aligned
        self.base = start + self._pad
        self.addresses = tuple(self.base + o for o in offsets)
        self._array = (ctypes.c_void_p * max(len(offsets), 1))(*self.addresses)
        self.params = ctypes.addressof(self._array)
        self._offsets = tuple(self._pad + o for o in offsets)

    def write(self, slot: int, value: Any) -> None:
        """Put ``value`` (a number, or a tensor map's 128 bytes) in ``slot``."""
        code = self.codes[slot]
        if code == MAP:
            raw = bytes(value.tobytes() if hasattr(value, "tobytes") else value)
            ctypes.memmove(self.addresses[slot], raw, 128)
        else:
            struct.pack_into("@" + code, self._storage, self._offsets[slot], value)

    def read(self, slot: int) -> Any:
        code = self.codes[slot]
        if code == MAP:
            return ctypes.string_at(self.addresses[slot], 128)
        return struct.unpack_from("@" + code, self._storage, self._offsets[slot])[0]


class MapSlot:
    """A tensor-map slot of a plan: the slot, which of the call's addresses it maps, and what
    else the map is made of (dtype, dims innermost first, byte strides, box)."""

    __slots__ = ("slot", "source", "dtype", "dims", "strides", "box")

    def __init__(self, slot: int, source: int, dtype: str, dims, strides, box):
        self.slot, self.source, self.dtype = slot, source, dtype
        self.dims, self.strides, self.box = tuple(dims), tuple(strides), tuple(box)

    def encode(self, address: int) -> Any:
        return tma.tensor_map(address, self.dtype, self.dims, self.strides, self.box)


class Plan:
    """One launch plan: a loaded kernel on ``device`` over ``grid``, its :class:`Block` built
    once from ``codes`` and ``values`` (every parameter's first value; a :data:`MAP` slot's
    value is unused: :class:`MapSlot` ``maps`` encode them at a call's addresses).
    ``pointers``: the slots a call's addresses go to, in order. ``alignment``: per address,
    its value mod 16 that the specialisation was made for (None: not checked).

    ``plan(addresses, stream, values=())`` (``stream`` a raw handle; ``values``: (slot,
    value) of scalars that vary per call) writes the addresses (a ``pointers`` entry None:
    an address only a tensor map reads), rewrites the maps whose address changed, and
    launches: True; False, launching nothing, where an address
    breaks the alignment (the caller then takes its full path). The block is written and
    handed to the driver (which copies it) under a lock, never while another thread does."""

    def __init__(
        self,
        loaded: Any,
        device: int,
        grid: tuple,
        block: tuple,
        shared: int,
        codes: Sequence[str],
        values: Sequence[Any],
        pointers: Sequence[int | None],
        maps: Sequence[MapSlot] = (),
        alignment: Sequence[int] | None = None,
    ):
        self.loaded, self.device, self.shared = loaded, device, shared
        self.grid = (*(int(g) for g in grid), 1, 1)[:3]  # 3-tuples, as the driver takes them
        self.block = (*(int(b) for b in block), 1, 1)[:3]
        self.function = loaded.prepared(device, shared)
        self.handle = _launch.driver_handle(self.function)
        self.params = Block(codes)
        for slot, (code, value) in enumerate(zip(codes, values, strict=True)):
            if code != MAP:
                self.params.write(slot, value)
        self.pointers = tuple(pointers)
        self.maps = tuple(maps)
        self.mapped = [0] * len(self.maps)  # the address each map slot holds now (0: none)
        self.alignment = None if alignment is None else tuple(alignment)
        # (which address, its slot) of each address that is a parameter itself
        self._slots = [
            (j, ctypes.c_uint64.from_address(self.params.addresses[i]))
            for j, i in enumerate(pointers)
            if i is not None
        ]
        self._lock = threading.Lock()

    def _write_maps(self, addresses: Sequence[int]) -> None:
        replace = tma.replace_address()
        for j, m in enumerate(self.maps):
            address = addresses[m.source]
            if self.mapped[j] == address:
                continue
            if self.mapped[j] and replace is not None:
                result = replace(self.params.addresses[m.slot], address)
                if result != 0:
                    raise LaunchError(
                        f"cuTensorMapReplaceAddress failed (CUresult {result}) for address "
                        f"{address:#x}"
                    )
            else:
                self.params.write(m.slot, m.encode(address))
            self.mapped[j] = address

    def __call__(
        self, addresses: Sequence[int], stream: int, values: Sequence[tuple[int, Any]] = ()
    ) -> bool:
        if self.alignment is not None:
            for address, align in zip(addresses, self.alignment, strict=True):
                if address % 16 != align:
                    return False
        (gx, gy, gz), (bx, by, bz) = self.grid, self.block
        with self._lock:
            for j, slot in self._slots:
                slot.value = addresses[j]
            for where, value in values:  # scalars that vary per call (the Hopper's alpha)
                self.params.write(where, value)
            if self.maps:
                self._write_maps(addresses)
            args = (self.handle, gx, gy, gz, bx, by, bz, self.shared, stream, self.params.params)
            try:
                launch_block(*args)
            except _launch.DriverError as err:
                again(self.device, err, args, self.error)
        return True

    def error(self, err: Exception) -> LaunchError:
        return self.loaded.error(self.device, err, self.grid, self.block, self.shared)


def again(device: int, err: Exception, args: tuple, error: Callable[[Exception], Exception]):
    """After a failed :func:`launch_block` of ``args``: with no context current on this
    thread (a new thread), make ``device``'s current and launch again; any other failure, or
    a second one, is raised as ``error(err)``."""
    if getattr(err, "status", None) != _launch.INVALID_CONTEXT:
        raise error(err) from None
    _launch.make_current(device)
    try:
        launch_block(*args)
    except _launch.DriverError as second:
        raise error(second) from None


def launch_prepared(entry: Entry, device: int, grid: tuple, params: int, stream: int) -> None:
    """Launch ``entry`` (not a TMA one) over ``grid`` on ``device`` with the parameter array
    at ``params`` on the raw ``stream``: the launches outside a launcher's hot path (a
    specialisation's first launch, ``kernel[grid]`` called directly)."""
    handle = entry.handles.get(device) or entry.prepare_handle(device)
    gx, gy, gz = grid
    args = (handle, gx, gy, gz, entry.bx, entry.by, entry.bz, entry.shared, stream, params)
    try:
        launch_block(*args)
    except _launch.DriverError as err:
        again(device, err, args, lambda e: entry.error(device, e, grid))


def raw_stream(device: int, stream: Any, torch: bool) -> int:
    """The raw handle a launch goes to: ``stream`` (any kind a launch takes), else torch's
    current stream for torch arguments, else CuPy's current stream on ``device``."""
    if stream is not None:
        return _launch.stream_pointer(stream)
    if torch:
        return (_launch.TORCH_RAW_STREAM[0] or _launch.torch_raw_stream())(device)
    return _launch.current_stream(device).ptr


# ---------------------------------------------------------------- prepared specialisations


class Entry:
    """A prepared launch of one specialisation: the loaded kernel, its block, shared memory
    and value packer, and per device its CuPy function and driver handle
    (:func:`launch.driver_handle`). ``tma``: for a specialisation whose pipelined loads are
    TMA copies, the function of its launch values and arrays' extents that gives its tensor
    maps (:func:`tma.parameters`); its launches then go through :meth:`launch_maps`, a plan
    per grid and sizes (its driver handle reads as 0 to the launchers, which send it here)."""

    __slots__ = (
        "loaded",
        "block",
        "bx",
        "by",
        "bz",
        "shared",
        "packer",
        "functions",
        "handles",
        "key",
        "fast",
        "tma",
        "plans",
    )

    def __init__(
        self, loaded: Any, block: tuple, shared: int, packer: Any, key: tuple, tma: Any = None
    ):
        self.loaded, self.block, self.shared, self.packer, self.key = (
            loaded,
            block,
            shared,
            packer,
            key,
        )
        self.bx, self.by, self.bz = (int(b) for b in block)
        self.functions: dict[int, Any] = {}
        self.handles: dict[int, int] = {}
        self.tma = tma
        self.plans: dict[tuple, Plan] = {}
        self._fast()

    def _fast(self) -> None:
        # what a launcher's hot path reads of the entry, in one tuple: itself, device 0's
        # driver handle (None until prepared there), the packer, block and shared memory
        handle = self.handles.get(0)
        self.fast = (self, handle, self.packer, self.bx, self.by, self.bz, self.shared)

    def prepare(self, device: int) -> Any:
        function = self.functions[device] = self.loaded.prepared(device, self.shared)
        # a TMA entry's launches take its plans: 0 sends the launchers to _call
        self.handles[device] = 0 if self.tma is not None else _launch.driver_handle(function)
        self._fast()
        return function

    def prepare_handle(self, device: int) -> int:
        """The driver handle on ``device`` (0 for a TMA entry: its launches take its plans)."""
        self.prepare(device)
        return self.handles[device]

    def error(self, device: int, err: Exception, grid: Any) -> LaunchError:
        return self.loaded.error(device, err, grid, self.block, self.shared)

    def plan(
        self, device: int, grid: tuple, values: Sequence, extents: dict[str, int]
    ) -> tuple[Plan, tuple[int, ...]]:
        """The plan of a TMA entry for launch ``values`` over ``grid`` on ``device``, and the
        slots of its pointer parameters: made once per grid, scalar values and extents (the
        maps' dims and strides depend on them), then its addresses rewritten per call."""
        codes, pointers = self.packer.codes, self.packer.pointer_slots
        scalars = tuple(v for i, v in enumerate(values) if i not in pointers)
        align = tuple(int(values[i]) % 16 for i in pointers)
        key = (device, tuple(grid), scalars, tuple(sorted(extents.items())), align)
        found = self.plans.get(key)
        if found is None:
            made = self.tma(values, extents)
            maps = [
                MapSlot(len(codes) + j, pointers.index(i), dtype, dims, strides, box)
                for j, (i, dtype, dims, strides, box) in enumerate(made)
            ]
            if len(self.plans) >= MAX_PLANS:
                self.plans.clear()
            found = self.plans[key] = Plan(
                self.loaded,
                device,
                grid,
                self.block,
                self.shared,
                (*codes, *([MAP] * len(maps))),
                (*values, *([None] * len(maps))),
                pointers,
                maps,
                align,
            )
        return found, pointers

    def launch_maps(
        self, device: int, grid: tuple, values: Sequence, args: tuple, stream: int
    ) -> None:
        """Launch a TMA entry: its plan for these values (see :meth:`plan`), the arrays'
        extents bounding the dims the kernel does not."""
        from .memory import extent_bytes

        names = self.packer.names
        extents = {names[i]: extent_bytes(args[i]) for i in self.packer.pointer_slots}
        plan, slots = self.plan(device, grid, values, extents)
        plan([int(values[i]) for i in slots], stream)
