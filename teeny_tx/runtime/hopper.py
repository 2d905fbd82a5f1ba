"""The Hopper matmul's launches: a planned node's parameters → one launch plan per device.

Input: a :class:`~teeny_tx.kernel.HopperSpecialization` (its node from
:func:`teeny_tx.lower.hopper.matmul.plan_matmul`, its loaded cubin) and a product's sizes and
strides;
per call the C, A, B and bias addresses, alpha and a stream. Output: the kernel queued through
its :class:`~teeny_tx.runtime.plan.Plan` (``plan.py``: the parameter block built once per
device, the tensor maps of A, B (and C with TMA stores) rewritten to each call's addresses).

The kernel's parameters, in order: the tensor maps (A, B, and C with TMA stores), c, bias, M,
N, K, scm, scn, alpha, then a scaled (fp8) node's scale pointers, then split-K's workspace and
tile counters. A split-K kernel's workspace (its f32 partial tiles) and counters are allocated
once per device and stream (:func:`split_workspace`) and left zeroed by every launch. The grid
is persistent: one block per SM at most, the tiles walked in grouped order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..lower.hopper.matmul import HopperMatmul
from . import launch, tma
from .plan import MAP, MapSlot, Plan, raw_stream


def grid(node: HopperMatmul, m: int, n: int, sms: int) -> int:
    """Blocks of the persistent grid: one per tile up to one per SM; with clusters, a
    multiple of the cluster size (a cluster per ``cluster`` tile rows and SMs)."""
    ml = node.mainloop
    tiles_m, tiles_n = -(-m // ml.bm), -(-n // ml.bn)
    if ml.cluster == 1:  # split-K: split_k units per tile
        return max(1, min(tiles_m * tiles_n * ml.split_k, sms))
    clusters = -(-tiles_m // ml.cluster) * tiles_n
    return ml.cluster * max(1, min(clusters, sms // ml.cluster))


def map_slots(
    node: HopperMatmul, m: int, n: int, k: int, a_stride: int, b_stride: int, scm: int
) -> tuple[MapSlot, ...]:
    """The tensor-map parameters of a product: A [M, K] and B [K, N], each viewed with its
    contiguous axis inner (``a_stride`` / ``b_stride``: the other axis's stride in elements),
    and with TMA stores C [M, N] row-major in boxes of one consumer's 64 rows x one 128-byte
    panel. Each maps the call's address of its operand (0: A, 1: B, 2: C)."""
    slots = []
    operands = ((node.a, a_stride, (m, k)), (node.b, b_stride, (n, k)))
    for source, (op, stride, (mn, kk)) in enumerate(operands):
        inner, outer = (kk, mn) if op.kmajor else (mn, kk)
        dims, strides = tma.dims_2d(op.dtype, inner, outer, stride * tma.ITEMSIZE[op.dtype])
        slots.append(MapSlot(source, source, op.dtype, dims, strides, op.box))
    e = node.epilogue
    if e.tma_store:
        size = tma.ITEMSIZE[e.out_dtype]
        dims, strides = tma.dims_2d(e.out_dtype, n, m, scm * size)
        slots.append(MapSlot(2, 2, e.out_dtype, dims, strides, (128 // size, 64)))
    return tuple(slots)


def launcher(
    spec: Any,
    m: int,
    n: int,
    k: int,
    a_stride: int,
    b_stride: int,
    scm: int,
    scn: int,
    alpha: float,
    sms: int,
) -> Callable[..., None]:
    """A launch function ``(c_ptr, a_ptr, b_ptr, bias_ptr, stream=None, alpha=None,
    scale_a=0, scale_b=0) -> None`` of ``spec`` for products of these sizes and strides (alpha
    None: this ``alpha``; ``scale_a`` / ``scale_b``: device pointers to a scaled node's f32
    scales). Its plan is made at its first call on each device; a call writes the addresses
    (the tensor maps rewritten only where an address changed) and alpha, and launches on
    ``stream`` (an int handle, a CuPy or torch stream; None: CuPy's current one)."""
    node = spec.node
    maps = map_slots(node, m, n, k, a_stride, b_stride, scm)
    scaled, split = node.epilogue.scaled, node.mainloop.split_k > 1
    codes = [MAP] * len(maps) + ["Q", "Q", "i", "i", "i", "i", "i", "f"]
    # the call's addresses: A, B, C, bias, then the scales, then split-K's buffers
    pointers: list[int | None] = [None, None, len(maps), len(maps) + 1]
    if scaled:
        pointers += [len(codes), len(codes) + 1]
        codes += ["Q", "Q"]
    if split:
        pointers += [len(codes), len(codes) + 1]
        codes += ["Q", "Q"]
    alpha_slot = len(maps) + 7
    blocks = (grid(node, m, n, sms), 1, 1)
    threads = (node.mainloop.threads, 1, 1)
    sizes = [int(m), int(n), int(k), int(scm), int(scn), float(alpha)]
    plans: dict[int, Plan] = {}
    get_device = launch.get_device

    def run(
        c_ptr: int,
        a_ptr: int,
        b_ptr: int,
        bias_ptr: int,
        stream: Any = None,
        alpha: float | None = None,
        scale_a: int = 0,
        scale_b: int = 0,
    ) -> None:
        device = get_device()
        handle = raw_stream(device, stream, False)
        addresses = [a_ptr, b_ptr, c_ptr, bias_ptr]
        if scaled:
            addresses += [scale_a, scale_b]
        if split:
            addresses += split_pointers(node, m, n, device, handle)
        found = plans.get(device)
        if found is None:
            values: list[Any] = [None] * len(maps) + [c_ptr, bias_ptr, *sizes]
            values += addresses[4:]
            found = plans[device] = Plan(
                spec.loaded,
                device,
                blocks,
                threads,
                node.shared_bytes,
                codes,
                values,
                pointers,
                maps,
            )
        found(addresses, handle, () if alpha is None else ((alpha_slot, float(alpha)),))

    return run


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


def split_workspace(node: HopperMatmul, m: int, n: int, device: int, stream: int | None) -> tuple:
    """The split-K buffers (workspace, counters: CuPy arrays) that launches of ``node`` on
    ``device`` and ``stream`` (a raw handle; None: CuPy's current stream) use. Launches on
    one stream run in order, so one pair serves them all; counters start at 0 and each
    launch's last units set them back to 0. A launch that traps may leave a counter set:
    :func:`forget_split_buffers` drops the buffers."""
    import cupy

    need, tiles = split_bytes(node, m, n)
    key = (device, launch.current_stream(device).ptr if stream is None else int(stream))
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


def split_pointers(node: HopperMatmul, m: int, n: int, device: int, stream: int) -> list[int]:
    """The addresses of :func:`split_workspace`'s buffers."""
    workspace, counters = split_workspace(node, m, n, device, stream)
    return [workspace.data.ptr, counters.data.ptr]


def forget_split_buffers() -> None:
    """Drop every split-K buffer (a test that counts allocations, or after a trapped launch)."""
    _split.clear()
    _retired.clear()
