"""Matrix products: matmul with a fused epilogue, batched matmul, a linear layer and its backward.

Input: CuPy arrays or torch CUDA tensors (f16, bf16 or f32; the two factors of a product share
one dtype), or NumPy arrays with ``interpret=True``. Any strides: row- or column-major, views
at an offset, transposes (``x.T``), sliced rows. Output: new arrays of the input's library on
its device, as :mod:`teeny_tx.nn` allocates them (contiguous, row-major). Each function checks
its arguments (``LaunchError``), picks the tiles with :func:`matmul_config` unless ``config``
is given, and launches the kernels of ``kernels/matmul.c``; nothing waits for the device.

Numerics: products accumulate in f32; the epilogue (alpha, bias, activation) runs in f32 and
the output is rounded once to its dtype (the inputs' unless ``out_dtype`` says). f32 inputs
are multiplied in IEEE f32 unless ``precision`` asks for ``'tf32'`` (inputs rounded to TF32's
10-bit mantissa, about 1e-3 relative error, the fast tensor-core path) or ``'tf32x3'`` (three
TF32 products, close to f32): never a silent TF32, unlike torch's ``allow_tf32``. f16 and bf16
inputs take only ``'ieee'`` (their products are exact in f32). On sm_90a, ``'tf32'`` products
whose operands TMA can address take the Hopper kernel, whose tensor cores read the f32 operands
straight from the TMA-loaded tiles: TF32 by truncation of the low 13 mantissa bits (cuBLAS's
TF32 too), where the cp.async kernel and the interpreter round to nearest; both are within
TF32's 2^-10 relative error per input.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from .. import switches
from ..activations import CODES
from ..constants import PRECISIONS as _PRECISION_TABLE
from ..constants import values
from ..dtypes import DTYPES, TORCH_NAMES, from_name
from ..kernel import Kernel, hopper_specialization
from ..runtime.grid import cdiv
from ..runtime.streams import torch_stream
from ..target import Target
from . import hopper_configs
from .arrays import FLOATS, INTERPRETER_SMS
from .arrays import Arrays as _Arrays
from .loader import module
from .plans import PLANS, Launch, keep
from .plans import aligned_signature as _signature

PRECISIONS = values(_PRECISION_TABLE)  # dot()'s input_precision values
ACTIVATIONS = CODES  # activation name -> the kernel's ACT (teeny_tx/activations.py)
DB_BLOCK_T, DB_BLOCK_N = 32, 128  # linear_db: rows summed at a time, columns per program
MAX_BATCH = 65535  # grid axis 1 (the batch) is limited to this by CUDA
TUNE = True  # False: every launch takes matmul_config's tiles (the GPU tests of many shapes)
# f16/bf16 products on sm_90a devices take the TMA + wgmma path (kernel.HopperSpecialization), on
# since the H200 run of 2026-12-01 checked every bench product against float64 through it
# (TEENY_TX_HOPPER=0 keeps the cp.async kernel)
HOPPER: bool = switches.read("HOPPER")
# its epilogue through TMA stores where the output allows it (rows 16-byte aligned, the
# staging tile leaves at least MIN_STAGES stages): measured faster at 8192^3 for both large
# tiles (H200, 2026-12-01). TEENY_TX_HOPPER_TMA_STORE=0 keeps the register epilogue.
TMA_STORE: bool = switches.read("HOPPER_TMA_STORE")
# mbarrier waits that trap after this many tries, naming the barrier (0: plain waits). Off by
# default: its counter and printf cost every kernel a stack frame and some registers (ptxas:
# 16 bytes of stack at 128x256, and 72 bytes of spills with bias + GELU, which then took a
# smaller tile); bench/sweep_hopper.py times the table's choice both ways. The GPU tests
# turn it on, so that a pipeline bug traps instead of hanging the run.
WATCHDOG: int = switches.read("HOPPER_WATCHDOG")
GROUP_M = 8  # tuned launches: rows of tiles per group of programs (L2 reuse)
ALIGN_MIN_ELEMENTS = 1 << 16  # operands at least this large get 16-byte aligned rows (_aligned)


class MatmulConfig(NamedTuple):
    """A launch of the matmul kernel: its tile (BM x BN, stepping BK), the grouping of program
    order (GROUP_M), warps per program, and software-pipelining depth of the K loop."""

    bm: int
    bn: int
    bk: int
    group_m: int
    num_warps: int
    num_stages: int


# Candidate tiles from the largest: (BM, BN, num_warps, num_stages), for the H200. IEEE f32
# runs on the FMA units with the accumulator in registers: 128x256 there needs more registers
# than a thread has (ptxas spills, and takes 25 s), 128x128 with 8 warps does not.
_TILES = ((128, 256, 8, 3), (128, 128, 4, 4), (64, 128, 4, 4), (64, 64, 4, 4))
_FMA_TILES = ((128, 128, 8, 3), (64, 64, 4, 3))
_SMALL = 64  # an M or N up to this takes the 64 x 64 tile


@functools.cache
def matmul_config(
    m: int,
    n: int,
    k: int,
    dtype: str,
    *,
    precision: str = "ieee",
    batch: int = 1,
    sms: int = INTERPRETER_SMS,
) -> MatmulConfig:
    """Tiles for a product [M, K] @ [K, N] (``batch`` of them) of ``dtype`` inputs (``'f16'``,
    ``'bf16'``, ``'f32'``) on a GPU of ``sms`` multiprocessors (the H200's 132 by default).

    BK = 64 for f16/bf16, 32 for f32 (the same bytes per row of a tile); GROUP_M = 8. The tile
    is the largest of 128x256 (8 warps, 3 stages), 128x128, 64x128 and 64x64 (4 warps, 4
    stages) that still gives at least 3/4 of a wave of programs; an M or N of at most 64 takes
    64x64 whatever the count. The stages of 128x256x64 f16 take 3 x 48 KiB of shared memory.
    f32 with ``precision='ieee'`` (FMA units, not tensor cores) chooses from 128x128 (8 warps, 3
    stages) and 64x64 (4 warps, 3 stages) the same way.
    """
    tiles: tuple[tuple[int, int, int, int], ...] = _TILES
    if dtype == "f32" and precision.lower() == "ieee":
        tiles = _FMA_TILES
    tiles = tiles[-1:] if min(m, n) <= _SMALL else tiles
    fill = (t for t in tiles if cdiv(m, t[0]) * cdiv(n, t[1]) * batch * 4 >= 3 * sms)
    bm, bn, warps, stages = next(fill, tiles[-1])
    return MatmulConfig(bm, bn, 32 if dtype == "f32" else 64, 8, warps, stages)


# ---------------------------------------------------------------- launches


def _launch(
    arrays: _Arrays,
    kernel: Kernel,
    grid: tuple,
    args: tuple,
    num_warps: int,
    num_stages: int,
    **constexprs,
) -> None:
    """Queue ``kernel`` (run it, on the interpreter); a grid with a 0 is nothing to do."""
    if 0 in grid:
        return
    # the kernels take every array's strides: views are passed as they are
    options: dict[str, Any] = {"num_warps": num_warps, "num_stages": num_stages, "strided": True}
    if arrays.kind == "numpy":
        runner = kernel.interpret[grid]
    else:
        runner = kernel[grid]
        if arrays.kind == "torch":
            options["stream"] = torch_stream(arrays.torch, arrays.first.device.index)
    runner(*args, **options, **constexprs)


class _Product(NamedTuple):
    """One matmul launch: sizes, and element strides (batch, rows, columns) of A, B and C."""

    m: int
    n: int
    k: int
    batch: int
    a: tuple[int, int, int]
    b: tuple[int, int, int]
    c: tuple[int, int, int]


def _run_matmul(
    arrays: _Arrays,
    out: Any,
    a: Any,
    b: Any,
    p: _Product,
    config: MatmulConfig | None,
    *,
    bias: Any = None,
    activation: str | None = None,
    alpha: float = 1.0,
    precision: int = PRECISIONS["IEEE"],
) -> _Recipe | _HopperRecipe | None:
    """out = act(alpha * a @ b + bias) through kernels/matmul.c's matmul, for the shapes and
    strides ``p`` gives (so a transpose is only a swap of strides). An operand contiguous
    along its first axis is loaded transposed (A_T, B_T): every load runs along memory."""
    given_p = p
    a, b, p, copied = _prepared(arrays, a, b, p)
    if config is None and 0 not in (p.m, p.n, p.batch):
        hopper = _hopper_plan(arrays, out, a, b, bias, p, activation, precision)
        if hopper is not None:
            hopper(out, a, b, bias, alpha)
            if copied:  # a replay makes the same copies, then launches (see _hopper_replay)
                hopper = _copying(hopper, given_p)
            return _HopperRecipe(hopper)
    (sab, sam, sak), (sbb, sbk, sbn), (scb, scm, scn) = p.a, p.b, p.c
    args: tuple[Any, ...] = (out, a, b, a if bias is None else bias, p.m, p.n, p.k)
    args += (sam, sak, sbk, sbn, scm, scn, sab, sbb, scb, float(alpha))
    constexprs = dict(
        HAS_BIAS=int(bias is not None),
        ACT=ACTIVATIONS[activation],
        PRECISION=precision,
        A_T=int(sam == 1 and sak != 1),
        B_T=int(sbk == 1 and sbn != 1),
    )
    kernel = module("matmul.c").matmul
    if 0 in (p.m, p.n, p.batch):
        return None
    if config is None:  # tuned: the kernel's pragma configs, timed once per shape
        stream = None
        if arrays.kind == "torch":
            stream = torch_stream(arrays.torch, arrays.first.device.index)

        def tuned_grid(meta: dict) -> tuple[int, int]:
            return (cdiv(p.m, meta["BM"]) * cdiv(p.n, meta["BN"]), p.batch)

        best = kernel.tune[tuned_grid].best(  # strided: operands are indexed with their strides
            *args, stream=stream, strided=True, **constexprs, GROUP_M=GROUP_M
        )
        tiles = best.kwargs
        config = MatmulConfig(
            tiles["BM"], tiles["BN"], tiles["BK"], GROUP_M, best.num_warps, best.num_stages
        )
    grid = (cdiv(p.m, config.bm) * cdiv(p.n, config.bn), p.batch)
    _launch(
        arrays,
        kernel,
        grid,
        args,
        config.num_warps,
        config.num_stages,
        **constexprs,
        BM=config.bm,
        BN=config.bn,
        BK=config.bk,
        GROUP_M=config.group_m,
    )
    return _Recipe(config, constexprs, p, copied)


def _prepared(arrays: _Arrays, a: Any, b: Any, p: _Product) -> tuple[Any, Any, _Product, bool]:
    """The operands as the kernels read them, the product's strides updated, and whether one
    was copied: oriented as the product's [M, K] and [K, N]; for f32, K contiguous; rows of
    large operands 16-byte aligned (see _oriented, _k_contiguous, _aligned)."""
    if p.batch != 1 or arrays.kind == "numpy" or len(a.shape) != 2:  # bmm's [1, M, K] too
        return a, b, p, False
    a = _oriented(arrays, a, p, "a")
    b = _oriented(arrays, b, p, "b")
    given = (a, b)
    if arrays.dtype(a) == "f32":  # 32-bit operands are pipelined only with K contiguous
        a, p = _k_contiguous(arrays, a, p, "a")
        b, p = _k_contiguous(arrays, b, p, "b")
    a, p = _aligned(arrays, a, p, "a")
    b, p = _aligned(arrays, b, p, "b")
    return a, b, p, a is not given[0] or b is not given[1]  # identity: no truth value


def _copying(run: Any, p: _Product) -> Any:
    """A Hopper launch ``run`` (out, a, b, bias, alpha) that first prepares ``a`` and ``b``
    as the call that made it did (the same copies: a replayed signature fixes their layout),
    for plans of calls whose operands TMA reads only through a copy (rows of odd length, f32
    operands with N or M contiguous). The copies' pointers repeat under the caching
    allocators, so their tensor maps come from the launcher's cache."""

    def copying(out, a, b, bias, alpha):
        arrays = _Arrays("matmul", {"a": a, "b": b}, False)
        a2, b2, _, _ = _prepared(arrays, a, b, p)
        run(out, a2, b2, bias, alpha)

    copying.kernel = run.kernel  # type: ignore[attr-defined]
    copying.choice = run.choice  # type: ignore[attr-defined]
    return copying


class _Recipe(NamedTuple):
    """How a matmul call was launched by the cp.async kernel: its tiles, constexprs, final
    strides, and whether an operand was copied first (such calls are not replayed by a plan)."""

    config: MatmulConfig
    constexprs: dict
    product: _Product
    copied: bool


class _HopperRecipe(NamedTuple):
    """How a matmul call was launched on the Hopper path: its launch (out, a, b, bias, alpha),
    which makes the call's copies itself (see _copying), so a plan replays it."""

    launch: Any
    copied: bool = False


def _oriented(arrays: _Arrays, x: Any, p: _Product, which: str) -> Any:
    """``x`` as the product's operand, [M, K] for ``a`` and [K, N] for ``b``, with ``p``'s
    strides. linear passes ``w`` [out, in] and linear_backward ``dy`` [T, out] under the strides
    of their transposes (the kernel reads only the pointer); the copies of _aligned and
    _k_contiguous are laid out from the array's shape, so it must be the product's. (Copying
    ``w`` [4097, 1000] as if it were [K, N] gave strides that reached 4x past the copy: the
    illegal address of linear on the H200.)"""
    _, s0, s1 = getattr(p, which)
    dims = (p.m, p.k) if which == "a" else (p.k, p.n)
    if tuple(x.shape) == dims and arrays.strides(x) == (s0, s1):
        return x
    view = _transpose(arrays, x)
    if tuple(view.shape) != dims or arrays.strides(view) != (s0, s1):
        raise AssertionError(f"operand {which}: {tuple(x.shape)} is not the product's {dims}")
    return view


def _aligned(arrays: _Arrays, x: Any, p: _Product, which: str) -> tuple[Any, _Product]:
    """``x``, or a copy of it whose leading dimension is a multiple of 16 elements, with
    ``p``'s strides updated. The kernel's pipelined (cp.async) path needs 16-byte runs along the
    operand's contiguous axis, which the specialisation proves from strides divisible by 16: a
    large operand with an odd leading dimension (4095 x 4097) is copied once into a padded
    buffer rather than multiplied through the slow path."""
    batch, s0, s1 = getattr(p, which)
    size = x.numel() if arrays.kind == "torch" else x.size
    if size < ALIGN_MIN_ELEMENTS or 1 not in (s0, s1):
        return x, p
    other = s0 if s1 == 1 else s1
    pointer = x.data_ptr() if arrays.kind == "torch" else x.data.ptr
    # the kernel proves 16-byte runs from strides divisible by 16 (the specialisation key)
    if other % 16 == 0 and pointer % 16 == 0:
        return x, p
    view = x if s1 == 1 else _transpose(arrays, x)  # contiguous along its last axis
    rows, cols = view.shape
    lead = -(-cols // 16) * 16
    padded = arrays.empty((rows, lead), arrays.known_dtype(x))[:, :cols]
    if arrays.kind == "torch":
        padded.copy_(view)
    else:
        padded[...] = view
    strides = (batch, lead, 1) if s1 == 1 else (batch, 1, lead)
    x = padded if s1 == 1 else _transpose(arrays, padded)
    return x, _with_strides(p, which, strides)


def _k_contiguous(arrays: _Arrays, x: Any, p: _Product, which: str) -> tuple[Any, _Product]:
    """``x``, or a copy with K as its contiguous axis (A row-major, B column-major). The
    tensor cores read 32-bit operands only K-major (ldmatrix.trans moves 16-bit elements), so
    an f32 operand laid out the other way would be staged through registers every step; one
    transposing copy costs far less on large products."""
    batch, s0, s1 = getattr(p, which)
    k_stride = s1 if which == "a" else s0
    size = x.numel() if arrays.kind == "torch" else x.size
    if k_stride == 1 or size < ALIGN_MIN_ELEMENTS:
        return x, p
    rows, cols = x.shape
    if which == "a":  # [M, K] row-major
        copy = arrays.empty((rows, cols), "f32")
        strides = (batch, cols, 1)
    else:  # [K, N] as the transpose of a row-major [N, K]
        copy = _transpose(arrays, arrays.empty((cols, rows), "f32"))
        strides = (batch, 1, rows)
    if arrays.kind == "torch":
        copy.copy_(x)
    else:
        copy[...] = x
    return copy, _with_strides(p, which, strides)


def _with_strides(p: _Product, which: str, strides: tuple[int, int, int]) -> _Product:
    """``p`` with the strides of operand ``which`` (``"a"`` or ``"b"``) replaced."""
    if which == "a":
        return p._replace(a=strides)
    if which == "b":
        return p._replace(b=strides)
    raise AssertionError(f"operand {which!r} is neither 'a' nor 'b'")


# ---------------------------------------------------------------- repeated calls

# A call whose arrays have the shapes, strides, dtypes, devices and 16-byte alignment of an
# earlier one is replayed without its checks or tuner look-up: the earlier call proved the
# arguments good and chose the launch (a plan; host cost is what a small product pays).
_PLANS = PLANS  # the library's one plan cache (plans.py); keys begin with the function's name


def _plan(
    arrays: _Arrays,
    recipe: _Recipe | _HopperRecipe,
    shape: tuple[int, ...],
    dtype: str,
    operands: tuple = (),
):
    """A function (a, b, bias, alpha) -> c that repeats ``recipe``'s launch on new arrays of
    the same signature, or returns None (the caller then takes the checked path) when the
    current device is not theirs. ``operands``: the call's (c, a, b, bias), whose launch the
    replay repeats as a direct launch (``Kernel.direct``: the specialisation looked up once,
    pointers' alignment and alpha rechecked per call)."""
    if isinstance(recipe, _HopperRecipe):
        return _hopper_replay(arrays, recipe.launch, shape, dtype)
    config, p = recipe.config, recipe.product
    (sab, sam, sak), (sbb, sbk, sbn), (scb, scm, scn) = p.a, p.b, p.c
    sizes = (p.m, p.n, p.k, sam, sak, sbk, sbn, scm, scn, sab, sbb, scb)
    kernel = module("matmul.c").matmul
    grid = (cdiv(p.m, config.bm) * cdiv(p.n, config.bn), p.batch)
    constexprs = dict(
        recipe.constexprs, BM=config.bm, BN=config.bn, BK=config.bk, GROUP_M=config.group_m
    )
    c0, a0, b0, bias0 = operands
    with arrays.device():  # the direct launch is made for the arrays' device
        run = kernel.direct(
            grid,
            (c0, a0, b0, a0 if bias0 is None else bias0, *sizes, 1.0),
            config.num_warps,
            config.num_stages,
            strided=True,
            checked=("alpha",),
            **constexprs,
        )
    if arrays.kind == "torch":
        torch = arrays.torch
        device = arrays.first.device
        torch_dtype = _torch_dtype(arrays, dtype)
        current = torch.cuda.current_device

        def replay_torch(a, b, bias, alpha):
            if current() != device.index:
                return None
            c = torch.empty(shape, dtype=torch_dtype, device=device)
            run(c, a, b, a if bias is None else bias, *sizes, float(alpha))
            return c

        return replay_torch
    import cupy

    device_id = arrays.first.device.id
    np_dtype = DTYPES[dtype].np
    get_device = cupy.cuda.runtime.getDevice

    def replay(a, b, bias, alpha):
        if get_device() != device_id:
            return None
        c = cupy.empty(shape, np_dtype)
        run(c, a, b, a if bias is None else bias, *sizes, float(alpha))
        return c

    return replay


# ---------------------------------------------------------------- the Hopper path

# The Hopper configurations (the measured table, the tuner's variants, the choice per product
# class) live in hopper_configs.py; these names are linalg's view of them.
HOPPER_CHOICES = hopper_configs.CHOICES
HopperChoice = hopper_configs.HopperChoice
hopper_report = hopper_configs.report


def hopper_config(
    m: int, n: int, sms: int = INTERPRETER_SMS, tma_store: bool = False, tf32: bool = False
):
    """The Hopper tile of an [M, K] @ [K, N] product (hopper_configs.TILES' wave-filling one;
    TF32_TILES' with ``tf32``), without split-K (hopper_configs.hopper_choose adds it)."""
    return hopper_configs.table_candidates(m, n, sms, tma_store, tf32=tf32)[0]


@functools.cache
def _hopper_device(device: int) -> bool:
    """Whether ``device`` runs the Hopper kernel: compute capability 9.0, and no
    ``$TEENY_TX_ARCH`` naming a target without wgmma (unset: such a device gets sm_90a)."""
    from ..runtime import launch

    forced = Target.from_env()
    return launch.device_limits(device).capability == (9, 0) and (forced is None or forced.wgmma)


def _spilled_bytes(kernel, device: int) -> int:
    """Bytes per thread that ``kernel`` spills, as loaded on ``device``: its local memory, and
    where there is some, ptxas's own report (the watchdog's printf has a stack frame of a
    few bytes that is no spill; compiling again to read the report costs a second, once)."""
    from ..runtime import nvrtc

    function = kernel.loaded.prepared(device, kernel.node.shared_bytes)
    if not int(getattr(function, "local_size_bytes", 0)):
        return 0
    return nvrtc.spilled_bytes(kernel.compiled.log)


def hopper_choose(
    m: int,
    n: int,
    k: int,
    dtype: str,
    out_dtype: str,
    *,
    tma_store_ok: bool,
    local_bytes: Any,
    **kwargs,
) -> HopperChoice | None:
    """hopper_configs.hopper_choose with linalg's switches: TMA stores only under TMA_STORE,
    the watchdog of WATCHDOG tries (see hopper_configs for the rest)."""
    return hopper_configs.hopper_choose(
        m,
        n,
        k,
        dtype,
        out_dtype,
        tma_store_ok=tma_store_ok and TMA_STORE,
        local_bytes=local_bytes,
        watchdog=WATCHDOG,
        **kwargs,
    )


def _hopper_timer(kernel_args: tuple, pointers: tuple[int, int, int, int]):
    """The tuner's timer for one product: each candidate launched on the call's own operands
    (C is written; the chosen kernel writes it again), by CUDA events on CuPy's current
    stream after a device synchronisation (the operands may come from another stream)."""
    import cupy

    def launch(kernel):
        run = kernel.launcher(*kernel_args)  # not kept: the plan's launcher is another
        return lambda: run(*pointers)

    timer = hopper_configs.event_timer(launch)

    def timed(kernel) -> float:
        cupy.cuda.runtime.deviceSynchronize()
        return timer(kernel)

    return timed


def _device_name(index: int) -> str:
    """The GPU a tuned choice is made for (name and compute capability)."""
    from ..runtime import launch

    limits = launch.device_limits(index)
    return f"{limits.name} (sm_{limits.capability[0]}{limits.capability[1]})"


def _pointer(arrays: _Arrays, x: Any) -> int:
    return int(x.data_ptr()) if arrays.kind == "torch" else int(x.data.ptr)


def _hopper_plan(arrays, out, a, b, bias, p: _Product, activation, precision):
    """A launch ``(out, a, b, bias, alpha) -> None`` on the Hopper TMA path for this product,
    or None where it does not apply (not an sm_90 device, f32, a batch, operands TMA cannot
    address: those take the cp.async kernel)."""
    from ..lower.hopper.matmul import TmaUnsupported, tma_operand_view

    dtype = arrays.known_dtype(a)
    if not HOPPER or arrays.kind == "numpy" or p.batch != 1 or len(a.shape) != 2:
        return None
    if p.k == 0:  # nothing to load (a tensor map needs non-zero extents): the cp.async kernel
        return None
    # f16/bf16 products, and f32 ones in TF32 (wgmma's tf32 kind, f32 tiles loaded by TMA:
    # both operands K-major, which _k_contiguous made them where a copy pays)
    sixteen = dtype in ("f16", "bf16") and precision == PRECISIONS["IEEE"]
    if not sixteen and (dtype, precision) != ("f32", PRECISIONS["TF32"]):
        return None
    index = arrays.first.device.index if arrays.kind == "torch" else arrays.first.device.id
    if not _hopper_device(index):
        return None
    (_, sam, sak), (_, sbk, sbn), (_, scm, scn) = p.a, p.b, p.c
    try:
        a_kmajor, _ = tma_operand_view("a", dtype, p.m, p.k, sam, sak, _pointer(arrays, a))
        b_contig_n, _ = tma_operand_view("b", dtype, p.k, p.n, sbk, sbn, _pointer(arrays, b))
        odt = arrays.known_dtype(out)
    except TmaUnsupported:
        return None
    pairs = scn == 1 and scm % 2 == 0
    tma_store_ok = scn == 1 and (scm * DTYPES[odt].itemsize) % 16 == 0
    a_stride = sam if a_kmajor else sak
    b_stride = sbk if b_contig_n else sbn
    sms = arrays.sms()
    sizes = (p.m, p.n, p.k, a_stride, b_stride, scm, scn)
    timer = None
    if hopper_configs.TUNE:
        c_ptr = _pointer(arrays, out)
        bias_ptr = c_ptr if bias is None else _pointer(arrays, bias)
        pointers = (c_ptr, _pointer(arrays, a), _pointer(arrays, b), bias_ptr)
        timer = _hopper_timer((*sizes, 1.0, sms), pointers)
    choice = hopper_choose(
        p.m,
        p.n,
        p.k,
        dtype,
        odt,
        a_kmajor=a_kmajor,
        b_kmajor=not b_contig_n,
        bias_dtype=None if bias is None else arrays.known_dtype(bias),
        activation=ACTIVATIONS[activation],
        pairs=pairs,
        tma_store_ok=tma_store_ok,
        sms=sms,
        local_bytes=lambda kernel: _spilled_bytes(kernel, index),
        timer=timer,
        device=_device_name(index) if timer is not None else "",
    )
    if choice is None:
        return None
    kernel = choice.kernel
    device = index
    go = kernel.launcher(*sizes, 1.0, sms)  # its plan: made at its first call, then kept

    if arrays.kind == "torch":
        torch = arrays.torch

        def run(out, a, b, bias, alpha):
            c = out.data_ptr()
            bias_ptr = c if bias is None else bias.data_ptr()
            go(c, a.data_ptr(), b.data_ptr(), bias_ptr, torch_stream(torch, device), alpha)

    else:

        def run(out, a, b, bias, alpha):
            c = out.data.ptr
            go(c, a.data.ptr, b.data.ptr, c if bias is None else bias.data.ptr, None, alpha)

    run.kernel = kernel  # type: ignore[attr-defined]
    run.choice = choice.report  # type: ignore[attr-defined]
    return run


_FP8 = {"float8_e4m3fn": "f8e4m3", "float8_e5m2": "f8e5m2"}  # torch's names


def scaled_matmul(
    a: Any,
    b: Any,
    scale_a: Any,
    scale_b: Any,
    *,
    out_dtype: Any = None,
    bias: Any = None,
    activation: str | None = None,
) -> Any:
    """C = activation(scale_a * scale_b * (a @ b) + bias) for fp8 torch tensors, as
    ``torch._scaled_mm`` takes them: ``a`` [M, K] row-major and ``b`` [K, N] column-major
    (``w.t()`` of a row-major [N, K]), both ``float8_e4m3fn`` or ``float8_e5m2``; ``scale_a``
    and ``scale_b`` one-element f32 tensors on the device (per-tensor dequantisation scales);
    products accumulate in f32; C [M, N] is bf16 unless ``out_dtype`` says (f16, bf16, f32).
    Runs on the Hopper TMA + wgmma path (sm_90 only)."""
    import torch

    from ..lower.hopper.matmul import HopperConfig, TmaUnsupported, plan_matmul

    operands = {"a": a, "b": b, "scale_a": scale_a, "scale_b": scale_b}
    for name, x in operands.items():
        if not isinstance(x, torch.Tensor) or not x.is_cuda:
            raise _error(f"scaled_matmul: {name} must be a CUDA torch tensor, got {type(x)}")
    dtype = _FP8.get(str(a.dtype).removeprefix("torch."))
    if dtype is None or a.dtype != b.dtype:
        raise _error(
            f"scaled_matmul: a and b must share an fp8 dtype (float8_e4m3fn or float8_e5m2), "
            f"got {a.dtype} and {b.dtype}"
        )
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0]:
        raise _error(f"scaled_matmul: shapes {tuple(a.shape)} @ {tuple(b.shape)} do not chain")
    for name, x in (("scale_a", scale_a), ("scale_b", scale_b)):
        if x.numel() != 1 or x.dtype != torch.float32:
            raise _error(f"scaled_matmul: {name} must be a one-element float32 tensor")
    m, k = a.shape
    n = b.shape[1]
    if a.stride(1) != 1 or b.stride(0) != 1:
        raise _error(
            "scaled_matmul: a must be row-major and b column-major (K contiguous in both): "
            "fp8 wgmma reads both operands K-major"
        )
    text = str(out_dtype).removeprefix("torch.")
    odt = "bf16" if out_dtype is None else TORCH_NAMES.get(text, text)
    if odt not in ("f16", "bf16", "f32"):
        raise _error(f"scaled_matmul: out_dtype must be f16, bf16 or f32, got {out_dtype!r}")
    torch_out = getattr(torch, str(DTYPES[odt].torch))
    c = torch.empty((m, n), dtype=torch_out, device=a.device)
    if 0 in (m, n):
        return c
    if k == 0:
        raise _error("scaled_matmul: K = 0 (an empty product) is not supported on the fp8 path")
    bias_dtype = None
    if bias is not None:
        bias_dtype = TORCH_NAMES.get(str(bias.dtype).removeprefix("torch."))
        if bias_dtype not in ("f16", "bf16", "f32") or bias.shape != (n,) or bias.stride(0) != 1:
            raise _error("scaled_matmul: bias must be a contiguous [N] f16, bf16 or f32 tensor")
    tiles = hopper_config(m, n, torch.cuda.get_device_properties(a.device).multi_processor_count)
    try:
        node = plan_matmul(
            dtype=dtype,
            out_dtype=odt,
            a_kmajor=True,
            b_kmajor=True,
            bias_dtype=bias_dtype,
            activation=ACTIVATIONS[activation],
            pairs=n % 2 == 0,
            scaled=True,
            config=HopperConfig(tiles.bm, tiles.bn, 128, 4, GROUP_M),
            watchdog=WATCHDOG,
        )
        from ..lower.hopper.matmul import tma_operand_view

        tma_operand_view("a", dtype, m, k, a.stride(0), 1, a.data_ptr())
        tma_operand_view("b", dtype, k, n, 1, b.stride(1), b.data_ptr())
    except TmaUnsupported as err:
        raise _error(f"scaled_matmul: {err.message}") from None
    kernel = hopper_specialization(node)
    device = a.device.index
    sms = torch.cuda.get_device_properties(device).multi_processor_count
    stream = torch_stream(torch, device)
    pointer_c = c.data_ptr()
    kernel.launch(
        pointer_c,
        a.data_ptr(),
        b.data_ptr(),
        pointer_c if bias is None else bias.data_ptr(),
        m,
        n,
        k,
        a.stride(0),
        b.stride(1),
        n,
        1,
        1.0,
        sms,
        stream,
        scale_a.data_ptr(),
        scale_b.data_ptr(),
    )
    return c


def _error(message: str):
    from ..errors import LaunchError

    return LaunchError(message)


def _hopper_replay(arrays: _Arrays, run: Any, shape: tuple[int, ...], dtype: str):
    """A plan's replay through the Hopper launch ``run`` (pointers change; the tensor maps are
    re-encoded only for new pointers)."""
    if arrays.kind == "torch":
        torch = arrays.torch
        device = arrays.first.device
        torch_dtype = _torch_dtype(arrays, dtype)
        current = torch.cuda.current_device

        def torch_replay(a, b, bias, alpha):
            if current() != device.index:
                return None
            c = torch.empty(shape, dtype=torch_dtype, device=device)
            run(c, a, b, bias, alpha)
            return c

        return torch_replay
    import cupy

    device_id = arrays.first.device.id
    np_dtype = DTYPES[dtype].np
    get_device = cupy.cuda.runtime.getDevice

    def replay(a, b, bias, alpha):
        if get_device() != device_id:
            return None
        c = cupy.empty(shape, np_dtype)
        run(c, a, b, bias, alpha)
        return c

    return replay


def _torch_dtype(arrays: _Arrays, dtype: str) -> Any:
    """torch's dtype of the dtype name ``dtype`` (a LaunchError for one torch lacks)."""
    torch_name = DTYPES[dtype].torch
    if torch_name is None:
        raise arrays.error(f"torch has no {dtype} dtype: no torch tensor of it can be made")
    return getattr(arrays.torch, torch_name)


def _transpose(arrays: _Arrays, x: Any) -> Any:
    return x.t() if arrays.kind == "torch" else x.T


# ---------------------------------------------------------------- argument checks


def _operand(
    arrays: _Arrays, x: Any, name: str, what: Sequence[str]
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(shape, strides in elements) of a float array of rank len(what), ``what`` naming its
    dimensions (``"MK"`` for [M, K])."""
    if len(x.shape) != len(what):
        dims = ", ".join(what)
        raise arrays.error(f"{name} must be {len(what)}-D [{dims}], got shape {tuple(x.shape)}")
    arrays.check_dtype(x, name, FLOATS)
    if arrays.dtype(x) == "f64" and arrays.kind != "numpy":
        raise arrays.error(
            f"{name} is f64: f64 products run on the interpreter only (NumPy arrays with "
            "interpret=True, CPU tensors through teeny_tx.torch); on the GPU multiply f32, "
            "f16 or bf16"
        )
    return tuple(int(d) for d in x.shape), arrays.strides(x)


def _same_dtype(arrays: _Arrays, a: Any, a_name: str, b: Any, b_name: str) -> str:
    da, db = arrays.known_dtype(a), arrays.known_dtype(b)
    if da != db:
        raise arrays.error(
            f"{a_name} is {da} but {b_name} is {db}; the factors of a product must have one "
            "dtype: convert one of them"
        )
    return da


def _inner(arrays: _Arrays, a_name: str, a_shape, b_name: str, b_shape, k: int, k2: int) -> None:
    if k != k2:
        raise arrays.error(
            f"inner dimensions differ: {a_name} has shape {tuple(a_shape)} and {b_name} "
            f"{tuple(b_shape)} ({k} != {k2})"
        )


def _bias(arrays: _Arrays, bias: Any, n: int, what: str) -> None:
    if bias is not None:
        arrays.vector(bias, "bias", n, FLOATS, what)


def _precision(arrays: _Arrays, precision: str | None, dtype: str) -> int:
    name = "ieee" if precision is None else str(precision).lower()
    if name.upper() not in PRECISIONS:
        raise arrays.error(f"precision must be 'ieee', 'tf32' or 'tf32x3', got {precision!r}")
    if name != "ieee" and dtype != "f32":
        raise arrays.error(
            f"precision={precision!r} applies to f32 inputs only; {dtype} inputs take 'ieee'"
        )
    return PRECISIONS[name.upper()]


def _activation(arrays: _Arrays, activation: str | None) -> str | None:
    if activation not in ACTIVATIONS:
        names = ", ".join(repr(a) for a in ACTIVATIONS)
        raise arrays.error(f"activation must be one of {names}, got {activation!r}")
    return activation


def _out_dtype(arrays: _Arrays, out_dtype: Any, dtype: str) -> str:
    """A dtype name of FLOATS from None (``dtype``), a name (``'f32'``, ``'float16'``), or a
    NumPy, CuPy or torch dtype."""
    if out_dtype is None:
        return dtype
    text = str(out_dtype).removeprefix("torch.")
    if not isinstance(out_dtype, str):
        with contextlib.suppress(TypeError):  # torch dtypes are not NumPy's
            text = np.dtype(out_dtype).name
    found = from_name(text)
    name = found.name if found is not None else text
    if name not in FLOATS:
        raise arrays.error(f"out_dtype must be one of {', '.join(FLOATS)}, got {out_dtype!r}")
    return name


def _config(
    arrays: _Arrays, config: Any, m: int, n: int, k: int, dtype: str, prec: int, batch: int = 1
) -> MatmulConfig | None:
    """``config`` as a MatmulConfig; when it is None, None on the GPU for tensor-core
    products (the kernel's ``#pragma autotune`` configs are timed on first use of each shape),
    else matmul_config's choice (the interpreter; IEEE f32, whose FMA configs compile slowly)."""
    if config is None:
        tensor_cores = dtype != "f32" or prec != PRECISIONS["IEEE"]
        if TUNE and arrays.kind != "numpy" and tensor_cores:
            return None
        precision = {v: name.lower() for name, v in PRECISIONS.items()}[prec]
        return matmul_config(m, n, k, dtype, precision=precision, batch=batch)
    if len(config) != len(MatmulConfig._fields):
        fields = ", ".join(MatmulConfig._fields)
        raise arrays.error(f"config must be a MatmulConfig ({fields}), got {config!r}")
    return MatmulConfig(*config)


# ---------------------------------------------------------------- public functions


def matmul(
    a: Any,
    b: Any,
    *,
    bias: Any = None,
    activation: str | None = None,
    alpha: float = 1.0,
    out_dtype: Any = None,
    precision: str | None = None,
    config: MatmulConfig | tuple | None = None,
    interpret: bool = False,
) -> Any:
    """C = activation(alpha * a @ b + bias): ``a`` [M, K], ``b`` [K, N], ``bias`` [N] (any float
    dtype, contiguous) or None; ``activation`` None, ``'gelu'`` (exact, erf), ``'gelu_tanh'``,
    ``'relu'`` or ``'silu'``; C [M, N] of ``out_dtype`` (default: the inputs' dtype).
    ``precision`` for f32 inputs: ``'ieee'`` (default), ``'tf32'`` or ``'tf32x3'``.
    ``config``: a :class:`MatmulConfig` (or its 6-tuple) instead of :func:`matmul_config`'s."""
    key: tuple | None = None
    if config is None and not interpret:
        key = (
            "matmul",
            _signature(a),
            _signature(b),
            _signature(bias),
            activation,
            out_dtype,
            precision,
        )
        key += (HOPPER, TUNE, TMA_STORE)  # the switches that change the launch chosen
        plan = _PLANS.get(key)
        if plan is not None and None not in key[:2]:
            c = plan(a, b, bias, alpha)
            if c is not None:
                return c
    named = {"a": a, "b": b} | ({} if bias is None else {"bias": bias})
    arrays = _Arrays("matmul", named, interpret)
    (m, k), (sam, sak) = _operand(arrays, a, "a", "MK")
    (k2, n), (sbk, sbn) = _operand(arrays, b, "b", "KN")
    dtype = _same_dtype(arrays, a, "a", b, "b")
    _inner(arrays, "a", a.shape, "b", b.shape, k, k2)
    _bias(arrays, bias, n, "b's columns")
    act = _activation(arrays, activation)
    prec = _precision(arrays, precision, dtype)
    odt = _out_dtype(arrays, out_dtype, dtype)
    cfg = _config(arrays, config, m, n, k, dtype, prec)
    with arrays.device():
        c = arrays.empty((m, n), odt)
        p = _Product(m, n, k, 1, (0, sam, sak), (0, sbk, sbn), (0, n, 1))
        recipe = _run_matmul(
            arrays, c, a, b, p, cfg, bias=bias, activation=act, alpha=alpha, precision=prec
        )
    if key is not None and None not in key[:2] and recipe is not None and not recipe.copied:
        keep(_PLANS, key, _plan(arrays, recipe, (m, n), odt, (c, a, b, bias)))
    return c


def bmm(
    a: Any,
    b: Any,
    *,
    alpha: float = 1.0,
    out_dtype: Any = None,
    precision: str | None = None,
    config: MatmulConfig | tuple | None = None,
    interpret: bool = False,
) -> Any:
    """C[i] = alpha * a[i] @ b[i] for ``a`` [B, M, K] and ``b`` [B, K, N] (torch.bmm); C
    [B, M, N] of ``out_dtype`` (default: the inputs'). ``precision`` as :func:`matmul`'s.
    A repeated call with the arrays' signatures of an earlier one replays its launch (a plan,
    as matmul's)."""
    key: tuple | None = None
    if config is None and not interpret:
        key = ("bmm", _signature(a), _signature(b), out_dtype, precision, HOPPER, TUNE)
        plan = _PLANS.get(key)
        if plan is not None and None not in key[1:3]:
            c = plan(a, b, None, alpha)
            if c is not None:
                return c
    arrays = _Arrays("bmm", {"a": a, "b": b}, interpret)
    (batch, m, k), (sab, sam, sak) = _operand(arrays, a, "a", "BMK")
    (batch_b, k2, n), (sbb, sbk, sbn) = _operand(arrays, b, "b", "BKN")
    dtype = _same_dtype(arrays, a, "a", b, "b")
    if batch != batch_b:
        raise arrays.error(
            f"batch sizes differ: a has shape {tuple(a.shape)} and b {tuple(b.shape)}"
        )
    _inner(arrays, "a", a.shape, "b", b.shape, k, k2)
    if batch > MAX_BATCH:
        raise arrays.error(f"a batch of {batch} products exceeds {MAX_BATCH}, CUDA's grid limit")
    prec = _precision(arrays, precision, dtype)
    odt = _out_dtype(arrays, out_dtype, dtype)
    cfg = _config(arrays, config, m, n, k, dtype, prec, batch)
    with arrays.device():
        c = arrays.empty((batch, m, n), odt)
        p = _Product(m, n, k, batch, (sab, sam, sak), (sbb, sbk, sbn), (m * n, n, 1))
        recipe = _run_matmul(arrays, c, a, b, p, cfg, alpha=alpha, precision=prec)
    if key is not None and None not in key[1:3] and recipe is not None and not recipe.copied:
        keep(_PLANS, key, _plan(arrays, recipe, (batch, m, n), odt, (c, a, b, None)))
    return c


def linear(
    x: Any,
    w: Any,
    bias: Any = None,
    activation: str | None = None,
    *,
    out_dtype: Any = None,
    precision: str | None = None,
    config: MatmulConfig | tuple | None = None,
    interpret: bool = False,
) -> Any:
    """y = activation(x @ w.T + bias), torch's ``F.linear`` convention: ``x`` [T, in], ``w``
    [out, in], ``bias`` [out] or None; y [T, out]. A row-major ``w`` is read along its rows
    (the kernel loads w^T's tiles transposed). Other arguments as :func:`matmul`'s."""
    key: tuple | None = None
    if config is None and not interpret:  # a plan, as matmul's (the product is x @ w^T)
        key = ("linear", _signature(x), _signature(w), _signature(bias), activation, out_dtype)
        key += (precision, HOPPER)
        plan = _PLANS.get(key)
        if plan is not None and None not in key[1:3]:
            y = plan(x, w, bias, 1.0)
            if y is not None:
                return y
    named = {"x": x, "w": w} | ({} if bias is None else {"bias": bias})
    arrays = _Arrays("linear", named, interpret)
    (t, n_in), (sxt, sxi) = _operand(arrays, x, "x", ("T", "in"))
    (n_out, n_in2), (swo, swi) = _operand(arrays, w, "w", ("out", "in"))
    dtype = _same_dtype(arrays, x, "x", w, "w")
    _inner(arrays, "x", x.shape, "w", w.shape, n_in, n_in2)
    _bias(arrays, bias, n_out, "w's rows")
    act = _activation(arrays, activation)
    prec = _precision(arrays, precision, dtype)
    odt = _out_dtype(arrays, out_dtype, dtype)
    cfg = _config(arrays, config, t, n_out, n_in, dtype, prec)
    with arrays.device():
        y = arrays.empty((t, n_out), odt)
        p = _Product(t, n_out, n_in, 1, (0, sxt, sxi), (0, swi, swo), (0, n_out, 1))
        recipe = _run_matmul(arrays, y, x, w, p, cfg, bias=bias, activation=act, precision=prec)
    if key is not None and None not in key[1:3] and recipe is not None and not recipe.copied:
        keep(_PLANS, key, _plan(arrays, recipe, (t, n_out), odt, (y, x, w, bias)))
    return y


def linear_backward(
    dy: Any,
    x: Any,
    w: Any,
    need_bias_grad: bool = True,
    *,
    precision: str | None = None,
    config: MatmulConfig | tuple | None = None,
    interpret: bool = False,
) -> tuple[Any, Any, Any]:
    """(dx, dw, db) of ``y = x @ w.T + b`` (:func:`linear` without activation) from ``dy``
    [T, out]: dx = dy @ w [T, in], dw = dy.T @ x [out, in], db = dy summed over T [out] (None
    unless ``need_bias_grad``). All of the inputs' dtype, accumulated in f32. dw reads dy and x
    row by row (dy.T's tiles are loaded transposed); db sums in f32, in row chunks spread over
    the GPU and then added up (no atomics: the same result every run). ``config`` applies to
    both products. A repeated call with the arrays' signatures of an earlier one replays it:
    the two products through :func:`matmul`'s plans, db through direct launches."""
    key: tuple | None = None
    if config is None and not interpret:
        key = ("linear_backward", _signature(dy), _signature(x), _signature(w), need_bias_grad)
        key += (precision, HOPPER, TUNE, TMA_STORE)
        plan = _PLANS.get(key)
        if plan is not None and None not in key[1:4]:
            grads = plan(dy, x, w)
            if grads is not None:
                return grads
    arrays = _Arrays("linear_backward", {"dy": dy, "x": x, "w": w}, interpret)
    (t, n_out), (sdt, sdo) = _operand(arrays, dy, "dy", ("T", "out"))
    (t2, n_in), (sxt, sxi) = _operand(arrays, x, "x", ("T", "in"))
    (n_out2, n_in2), (swo, swi) = _operand(arrays, w, "w", ("out", "in"))
    dtype = _same_dtype(arrays, dy, "dy", x, "x")
    _same_dtype(arrays, dy, "dy", w, "w")
    if (t2, n_out2, n_in2) != (t, n_out, n_in):
        raise arrays.error(
            f"shapes disagree: dy {tuple(dy.shape)} is [T, out], x {tuple(x.shape)} must be "
            f"[T, in] and w {tuple(w.shape)} [out, in]"
        )
    prec = _precision(arrays, precision, dtype)
    dx_config = _config(arrays, config, t, n_in, n_out, dtype, prec)
    dw_config = _config(arrays, config, n_out, n_in, t, dtype, prec)
    with arrays.device():
        dx = arrays.empty((t, n_in), dtype)
        dw = arrays.empty((n_out, n_in), dtype)
        p = _Product(t, n_in, n_out, 1, (0, sdt, sdo), (0, swo, swi), (0, n_in, 1))
        _run_matmul(arrays, dx, dy, w, p, dx_config, precision=prec)
        p = _Product(n_out, n_in, t, 1, (0, sdo, sdt), (0, sxt, sxi), (0, n_in, 1))
        _run_matmul(arrays, dw, dy, x, p, dw_config, precision=prec)
        db, sums = None, None
        if need_bias_grad:
            db, sums = _column_sums(arrays, dy, t, n_out, sdt, sdo, dtype, key is not None)
    if key is not None and None not in key[1:4]:
        keep(_PLANS, key, _linear_backward_plan(arrays, need_bias_grad, precision, sums))
    return dx, dw, db


def _linear_backward_plan(arrays: _Arrays, need_bias_grad: bool, precision: str | None, sums):
    """The replay of a linear_backward call: dx = dy @ w and dw = dy^T @ x as :func:`matmul`
    calls (the same products and configs as the checked path's; each keeps its own plan) and
    db by ``sums``, the replay of its column sums; None when the device is not the arrays'."""
    here = arrays.here()
    transpose = functools.partial(_transpose, arrays)

    def plan(dy, x, w):
        if not here():
            return None
        dx = matmul(dy, w, precision=precision)
        dw = matmul(transpose(dy), x, precision=precision)
        return dx, dw, sums(dy) if need_bias_grad else None

    return plan


def _column_sums(
    arrays: _Arrays,
    x: Any,
    rows: int,
    cols: int,
    s_row: int,
    s_col: int,
    dtype: str,
    replayable: bool = False,
) -> tuple[Any, Any]:
    """x [rows, cols] summed over its rows, in f32, into a new [cols] array of ``dtype``: row
    chunks over about 4 programs per SM, their f32 partial sums added by a second launch.
    Returns (the sums, their replay or None): with ``replayable`` on the GPU, a function of a
    new x of the same signature that makes the same launches directly."""
    kernel = module("matmul.c").linear_db
    col_programs = cdiv(cols, DB_BLOCK_N)
    parts = max(1, min(cdiv(4 * arrays.sms(), max(col_programs, 1)), cdiv(rows, DB_BLOCK_T)))
    chunk = max(DB_BLOCK_T, cdiv(cdiv(rows, parts), DB_BLOCK_T) * DB_BLOCK_T)
    parts = max(1, cdiv(rows, chunk))
    alloc = arrays.allocator((cols,), dtype)
    alloc_partial = arrays.allocator((parts, cols), arrays.acc(x))
    grids = [(col_programs, 1)] if parts == 1 else [(col_programs, parts), (col_programs, 1)]
    launches = [Launch(arrays, kernel, grid, 4, BT=DB_BLOCK_T, BN=DB_BLOCK_N) for grid in grids]

    def make(*launch):
        def sums(x):
            out = alloc()
            if parts == 1:
                launch[0](out, x, rows, cols, s_row, s_col, max(rows, 1))
                return out
            partial = alloc_partial()
            launch[0](partial, x, rows, cols, s_row, s_col, chunk)
            launch[1](out, partial, parts, cols, cols, 1, parts)
            return out

        return sums

    out = make(*launches)(x)
    if not replayable or arrays.kind == "numpy":
        return out, None
    return out, make(*(launch.fast() for launch in launches))
