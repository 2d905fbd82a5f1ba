"""Row operations of neural networks: softmax, layer norm, RMS norm and cross-entropy.

Input: CuPy arrays or torch CUDA tensors of shape [rows, cols] (last dimension contiguous, any
row stride; f16, bf16, f32 or f64), or NumPy arrays with ``interpret=True``. Output: new arrays of
the input's library on its device (torch: ``torch.empty_like`` and torch's current stream; CuPy:
``cupy.empty`` and CuPy's current stream; NumPy: run on the interpreter). Statistics (mean,
rstd, lse, the loss) are f32, f64 for f64 data (the kernels compute in their ``acc_t``). Each
function checks its arguments (``LaunchError``), picks the launch with :func:`row_config`, and
launches the kernels of ``kernels/softmax.c``, ``layernorm.c``, ``rmsnorm.c`` and
``cross_entropy.c``; nothing waits for the device.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..dtypes import DTYPES
from ..errors import LaunchError
from ..kernel import Kernel
from ..runtime import launch as launch_module
from ..runtime.autotune import Config
from ..runtime.grid import cdiv
from .arrays import FLOATS, INTERPRETER_SMS
from .arrays import Arrays as _Arrays
from .loader import module
from .plans import PLANS as _PLANS
from .plans import Launch as _Launch
from .plans import plan_key as _key
from .plans import planned as _planned
from .plans import signature as _signature

MAX_ROW_BLOCK = 16384  # the longest row a softmax program keeps in registers as one tile
MAX_NORM_BLOCK = 1 << 16  # the norms have no looped kernels: one tile per row, up to this
LOOP_BLOCK = 4096  # the chunk the looped kernels step by
NORM_WARPS = 16  # measured on the H200: 16 beats 8 for norm rows of 4096 and 8192 columns
# The tile (and warps) that sums dW/dB partials: narrow column blocks, many partial rows at a
# time, so a norm of 1024 columns sums its ~528 partial rows (L2-resident) on 64 programs in
# 3 steps (it was 8 programs of 128 columns in 17 steps: about as long as the dx kernel).
PARTIAL_BLOCK_P, PARTIAL_BLOCK_N, PARTIAL_WARPS = 256, 16, 8


@dataclass(frozen=True)
class RowConfig:
    block: int
    num_warps: int
    looped: bool


@functools.cache
def row_config(n_cols: int, max_block: int = MAX_ROW_BLOCK, max_warps: int = 16) -> RowConfig:
    """How one program handles a row of ``n_cols`` elements.

    A row of up to ``max_block`` columns is one tile: BLOCK = the next power of two >= n_cols.
    A longer row is read in chunks of BLOCK = LOOP_BLOCK by the ``_looped`` kernels (the
    softmax ones launch their autotuner's BLOCK and num_warps instead: :func:`_looped_launch`).
    num_warps = BLOCK / 256 within [1, max_warps], as Triton's softmax tutorial: at most 8
    elements per thread up to 256 * max_warps columns, then more elements per thread.
    """
    block = 1 << max(n_cols - 1, 0).bit_length()
    looped = block > max_block
    if looped:
        block = LOOP_BLOCK
    return RowConfig(block, min(max_warps, max(1, block // 256)), looped)


def partial_programs(n_rows: int, sms: int) -> tuple[int, int]:
    """(programs, rows per program) of a norm backward: about 4 programs per SM, each summing
    dW (and dB) over a run of consecutive rows; the partials are programs x cols f32."""
    per_program = max(1, cdiv(n_rows, max(1, min(n_rows, 4 * sms))))
    return cdiv(n_rows, per_program), per_program


# ---------------------------------------------------------------- plans: repeated calls

TUNE = True  # False: the norms launch their default config (the GPU tests of many shapes)


# ---------------------------------------------------------------- softmax


def _looped_launch(
    arrays: _Arrays, kernel: Kernel, config: RowConfig, rows: int, alloc: Callable, *args: Any
) -> tuple[int, int]:
    """(BLOCK, num_warps) of a softmax kernel: ``config``'s for one tile per row; for a
    ``_looped`` kernel the first of its ``#pragma autotune`` configs on the interpreter (or with
    TUNE off, or no rows), else the autotuner's choice, timed on ``alloc()``'s output and
    ``args`` (the launch's other arguments) once per row length and dtypes."""
    if not config.looped:
        return config.block, config.num_warps
    if arrays.kind == "numpy" or not TUNE or rows == 0:
        c = kernel.tune.configs[0]
    else:
        with arrays.device():
            c = kernel.tune[(rows,)].best(alloc(), *args, strided=True)
    return c.kwargs["BLOCK"], c.num_warps


# softmax_split (a long row over several programs, kernels/softmax.c) and
# cross_entropy_chunks (a program per chunk of a row, kernels/cross_entropy.c) pack a chunk's
# (max, sum) into 64 bits, two f32, so f64 rows keep the two-pass _looped kernels (and
# cross_entropy_fwd), as do rows of more than MAX_SLOTS chunks of the least CHUNK (one tile
# holds a row's slots).
SPLIT_DTYPES = ("f16", "bf16", "f32")
MAX_SLOTS = 1024
# Reads of a row's slots before a program computes the chunks still missing itself: about a
# microsecond each on the H200, far longer than the programs of one row take to start together
# (they are neighbours in launch order), short enough to bound a wait on programs that cannot
# run yet. The interpreter runs programs one after another: nothing it waits for could arrive.
SPLIT_SPINS = 256
# Whether softmax / log_softmax of long rows launch softmax_split (one read, one write, programs
# that wait for their row's other chunks) or the two-pass _looped kernels (two reads, no
# waiting). Off: on the H200 (8192 x 262144 fp32, peers in the same run) the best split config
# moved 2.41 TB/s (56% of copy) and the two-pass kernel 2.74 (64%): a program holds its chunk
# in registers while it waits for the row's other chunks, so the data in flight per SM is
# bounded by the register file, not by the memory system (docs: kernels/softmax.c).
SPLIT_SOFTMAX = False


def _zeros(arrays: _Arrays, shape: tuple[int, ...], dtype: str) -> Callable[[], Any]:
    """A function returning a new zero-filled contiguous array of ``shape`` and ``dtype``."""
    if arrays.kind == "numpy":
        return functools.partial(np.zeros, shape, DTYPES[dtype].np)
    if arrays.kind == "cupy":
        import cupy

        return functools.partial(cupy.zeros, shape, DTYPES[dtype].np)
    torch_name = DTYPES[dtype].torch
    if torch_name is None:
        raise arrays.error(f"torch has no {dtype} dtype: no torch tensor of it can be made")
    torch_dtype = getattr(arrays.torch, torch_name)
    return functools.partial(
        arrays.torch.zeros, shape, dtype=torch_dtype, device=arrays.first.device
    )


def _split_slots(kernel: Kernel, cols: int) -> int:
    """SLOTS of a split launch: the next power of two >= the chunks of the least CHUNK of the
    kernel's configs (0 when more than MAX_SLOTS: the row is too long to split)."""
    least = min(c.kwargs["CHUNK"] for c in kernel.tune.configs)
    chunks = cdiv(cols, least)
    return 0 if chunks > MAX_SLOTS else 1 << max(chunks - 1, 0).bit_length()


def _softmax_split(fn: str, x: Any, arrays: _Arrays, interpret: bool) -> Any | None:
    """softmax / log_softmax of rows longer than one tile through softmax_split (one read and
    one write of each row); None where it does not apply (f64, too many chunks)."""
    rows, cols, stride, col_stride = arrays.strided_matrix(x, "x")
    kernel = module("softmax.c").softmax_split
    slots = _split_slots(kernel, cols)
    fixed = {"SLOTS": slots, "LOG": int(fn == "log_softmax")}
    if arrays.dtype(x) not in SPLIT_DTYPES or slots == 0:
        return None
    spins = 0 if arrays.kind == "numpy" else SPLIT_SPINS
    least = min(c.kwargs["CHUNK"] for c in kernel.tune.configs)
    alloc = arrays.allocator((rows, cols), arrays.known_dtype(x))
    alloc_slots = _zeros(arrays, (rows * cdiv(cols, least),), "i64")
    alloc_done = _zeros(arrays, (max(rows, 1),), "i32")
    sizes = (cols, stride, col_stride, cols, spins)
    if arrays.kind == "numpy" or not TUNE or rows == 0:
        c = kernel.tune.configs[0]
    else:
        with arrays.device():

            def tuned_grid(meta: dict) -> tuple[int]:
                return (rows * cdiv(cols, meta["CHUNK"]),)

            args = (alloc(), alloc_slots(), alloc_done(), x, *sizes)
            c = kernel.tune[tuned_grid].best(*args, strided=True, **fixed)
            del args
    grid = (rows * cdiv(cols, c.kwargs["CHUNK"]),)
    first = _Launch(arrays, kernel, grid, c.num_warps, checked=(), **fixed, **c.kwargs)

    def make(launch):
        def plan(x):
            y = alloc()
            launch(y, alloc_slots(), alloc_done(), x, *sizes)
            return y

        return plan

    return _planned(_key(interpret, fn, (x,)), arrays, make, (first,), x)


def _softmax_forward(fn: str, x: Any, interpret: bool) -> Any:
    arrays = _Arrays(fn, {"x": x}, interpret)
    rows, cols, stride, col_stride = arrays.strided_matrix(x, "x")
    config = row_config(cols)
    if config.looped:
        y = _softmax_split(fn, x, arrays, interpret) if SPLIT_SOFTMAX else None
        if y is not None:
            return y
        return _softmax_looped(fn, x, arrays, interpret)
    # one tile per row, ROWS rows per program: the autotuner's config, pruned as the norms'
    kernel = _norm_kernel("softmax.c", fn)
    alloc = arrays.allocator((rows, cols), arrays.known_dtype(x))
    sizes = (rows, cols, stride, col_stride, cols)
    fixed = {"BLOCK": config.block}
    with arrays.device():
        args = (alloc(), x, *sizes)
        c = _norm_launch_config(arrays, kernel, _rows_grid, args, fixed, None)
    del args
    grid = (cdiv(rows, c.kwargs["ROWS"]),)
    first = _Launch(arrays, kernel, grid, c.num_warps, checked=(), **fixed, **c.kwargs)

    def make(launch):
        def plan(x):
            y = alloc()
            launch(y, x, *sizes)
            return y

        return plan

    return _planned(_key(interpret, fn, (x,)), arrays, make, (first,), x)


def _softmax_looped(fn: str, x: Any, arrays: _Arrays, interpret: bool) -> Any:
    """The two-pass _looped kernels: f64 rows longer than one tile, and rows too long to
    split."""
    rows, cols, stride, col_stride = arrays.strided_matrix(x, "x")
    config = row_config(cols)
    kernel = getattr(module("softmax.c"), fn + "_looped")
    alloc = arrays.allocator((rows, cols), arrays.known_dtype(x))
    block, warps = _looped_launch(
        arrays, kernel, config, rows, alloc, x, cols, stride, col_stride, cols
    )
    first = _Launch(arrays, kernel, (rows,), warps, BLOCK=block)

    def make(launch):
        def plan(x):
            y = alloc()
            launch(y, x, cols, stride, col_stride, cols)
            return y

        return plan

    return _planned(_key(interpret, fn, (x,)), arrays, make, (first,), x)


def softmax(x: Any, *, interpret: bool = False) -> Any:
    """y = exp(x - max) / sum(exp(x - max)) along each row of ``x`` [rows, cols] (any
    strides); y is contiguous."""
    hit = None if interpret else _PLANS.get(("softmax", _signature(x)))
    if hit is not None and hit[0] == launch_module.get_device():
        return hit[1](x)
    return _softmax_forward("softmax", x, interpret)


def log_softmax(x: Any, *, interpret: bool = False) -> Any:
    """y = x - logsumexp(x) along each row of ``x`` [rows, cols] (any strides)."""
    hit = None if interpret else _PLANS.get(("log_softmax", _signature(x)))
    if hit is not None and hit[0] == launch_module.get_device():
        return hit[1](x)
    return _softmax_forward("log_softmax", x, interpret)


def _softmax_backward(fn: str, y: Any, dy: Any, interpret: bool) -> Any:
    hit = None if interpret else _PLANS.get((fn, _signature(y), _signature(dy)))
    if hit is not None and hit[0] == launch_module.get_device():
        return hit[1](y, dy)
    arrays = _Arrays(fn, {"y": y, "dy": dy}, interpret)
    rows, cols, y_stride, y_col = arrays.strided_matrix(y, "y")
    _, _, dy_stride, dy_col = arrays.strided_matrix(dy, "dy")
    arrays.same(dy, "dy", y, "y")
    config = row_config(cols)
    kernel = getattr(module("softmax.c"), fn + ("_looped" if config.looped else ""))
    alloc = arrays.allocator((rows, cols), arrays.known_dtype(dy))
    sizes = (cols, y_stride, y_col, dy_stride, dy_col, cols)
    block, warps = _looped_launch(arrays, kernel, config, rows, alloc, y, dy, *sizes)
    first = _Launch(arrays, kernel, (rows,), warps, BLOCK=block)

    def make(launch):
        def plan(y, dy):
            dx = alloc()
            launch(dx, y, dy, cols, y_stride, y_col, dy_stride, dy_col, cols)
            return dx

        return plan

    return _planned(_key(interpret, fn, (y, dy)), arrays, make, (first,), y, dy)


def softmax_backward(y: Any, dy: Any, *, interpret: bool = False) -> Any:
    """dx = y * (dy - sum(y * dy)) per row, from the softmax output ``y`` and its gradient."""
    return _softmax_backward("softmax_backward", y, dy, interpret)


def log_softmax_backward(y: Any, dy: Any, *, interpret: bool = False) -> Any:
    """dx = dy - exp(y) * sum(dy) per row, from the log_softmax output ``y`` and its gradient."""
    return _softmax_backward("log_softmax_backward", y, dy, interpret)


# ---------------------------------------------------------------- layer norm and RMS norm

# Elements of the [ROWS, BLOCK] tile per thread that a norm config may hold: more spills or
# starves occupancy (the backward keeps two more tiles: the dW/dB sums); fewer leaves lanes
# idle. A config outside the range is pruned before it is compiled. The least is also one
# 16-byte access of x's dtype (8 f16, 4 f32): the layout gives each thread 16-byte runs, so a
# tile of fewer elements per thread wraps onto copies whose stores go element by element
# (measured on the H200 at 8192 x 1024 f16: 8 warps, 4 per thread, 0.75 TB/s; 4 warps, 2.1).
NORM_ELEMENTS = {"fwd": (2, 32), "bwd": (2, 16)}


def norm_block(cols: int) -> int:
    """BLOCK of a norm row: the next power of two >= cols (one tile per row)."""
    return 1 << max(cols - 1, 0).bit_length()


def norm_config(arrays: _Arrays, cols: int) -> RowConfig:
    """One row per program: the launch of row kernels that take no ROWS (kept for callers
    with kernels of their own)."""
    config = row_config(cols, MAX_NORM_BLOCK, NORM_WARPS)
    if config.looped:
        raise arrays.error(
            f"rows of {cols} columns are longer than {MAX_NORM_BLOCK}, the most one tile holds"
        )
    return config


def _norm_elements(c: Config, block: int) -> int:
    return c.kwargs["ROWS"] * block // (32 * c.num_warps)


def norm_prune(c: Config, args: tuple, kernel: Kernel) -> bool:
    """The autotuner's prune hook of the norm kernels: True drops ``c`` for ``args``.

    Kept: configs whose tile holds NORM_ELEMENTS per thread (at least one 16-byte access of
    x's dtype), with ROWS no more than the rows
    (a backward program's rows, counted for an H200's 132 SMs). Where none holds few enough
    (the longest rows), the configs holding the fewest are kept; where none holds enough
    (short rows), those holding the most: a choice always remains."""
    return c not in _norm_kept(kernel, _norm_facts(args, kernel))


def _norm_facts(args: tuple, kernel: Kernel) -> tuple[int, int, bool, int]:
    """(BLOCK, rows, backward, elements of a 16-byte access of x) of a norm launch's
    arguments (the last is 1 where x is neither an array nor a dtype name)."""
    names = [p.name for p in kernel.binder.runtime]
    rows = int(args[names.index("n_rows")])
    block = norm_block(int(args[names.index("n_cols")]))
    return block, rows, "dw_part" in names, _vector(args[names.index("x")])


def _vector(a: Any) -> int:
    if isinstance(a, str):
        size = DTYPES[a].itemsize if a in DTYPES else 16
    else:  # NumPy, CuPy and torch dtypes all say their itemsize
        size = getattr(getattr(a, "dtype", None), "itemsize", 16)
    return max(1, 16 // size)


def backward_programs(rows: int, sms: int, c: Config) -> int:
    """G, the programs of a norm backward's dx kernel under config ``c``: SMs * max(1, 16 /
    num_warps) (about as many as are resident at once), at most 4 per SM (each writes a
    partial row of dW/dB: fewer is less traffic), at most one per ROWS rows; then as few as
    cover the rows at cdiv(rows, G) rows each (no program left without rows)."""
    per_sm = min(4, max(1, 16 // c.num_warps))
    programs = max(1, min(cdiv(rows, c.kwargs["ROWS"]), sms * per_sm))
    return cdiv(rows, cdiv(rows, programs)) if rows else 1


@functools.cache
def _norm_kept(kernel: Kernel, facts: tuple[int, int, bool, int]) -> frozenset[Config]:
    block, rows, backward, vector = facts
    lo, hi = NORM_ELEMENTS["bwd" if backward else "fwd"]
    lo = max(lo, min(vector, hi))

    def rows_held(c: Config) -> int:  # the rows one program handles
        return cdiv(rows, backward_programs(rows, INTERPRETER_SMS, c)) if backward else rows

    pool = [c for c in kernel.tune.configs if c.kwargs["ROWS"] <= max(1, rows_held(c))]
    elements = {c: _norm_elements(c, block) for c in pool}
    small = [c for c in pool if elements[c] <= hi]
    if not small:
        fewest = min(elements.values())
        small = [c for c in pool if elements[c] == fewest]
    kept = [c for c in small if elements[c] >= lo]
    if not kept:
        most = max(elements[c] for c in small)
        kept = [c for c in small if elements[c] == most]
    return frozenset(kept)


@functools.cache
def _norm_kernel(file: str, name: str) -> Kernel:
    kernel = getattr(module(file), name)
    kernel.tune.prune = functools.partial(norm_prune, kernel=kernel)
    return kernel


def _norm_constexprs(cols: int, block: int) -> dict[str, int]:
    """The constexprs of a norm kernel besides its config's: BLOCK, and EVEN (the row fills
    the tile: no column mask)."""
    return {"BLOCK": block, "EVEN": int(cols == block)}


def _norm_launch_config(
    arrays: _Arrays, kernel: Kernel, grid: Any, args: tuple, constexprs: dict, config: Any
) -> Config:
    """The config of a norm launch: ``config`` if given (checked), the first config kept by
    :func:`norm_prune` on the interpreter (or with TUNE off), else the autotuner's choice for
    these arguments (timed once per row length, power-of-two bucket of the row count and
    dtypes, then read from the disk cache)."""
    if config is not None:
        if not _is_norm_config(config, kernel):
            names = ", ".join(f"{n}=..." for n in kernel.tune.configs[0].kwargs)
            raise arrays.error(f"config must be a teeny_tx.Config(dict({names})), got {config!r}")
        return config
    if arrays.kind == "numpy" or not TUNE:
        return next(c for c in kernel.tune.configs if not norm_prune(c, args, kernel))
    return kernel.tune[grid].best(*args, strided=True, **constexprs)


def _is_norm_config(config: Any, kernel: Kernel) -> bool:
    """Whether ``config`` is a Config naming the constexprs of ``kernel``'s configs (ROWS; the
    backward's INTERLEAVE too)."""
    return isinstance(config, Config) and set(config.kwargs) == set(kernel.tune.configs[0].kwargs)


def _rows_grid(meta: dict) -> tuple[int]:
    return (cdiv(meta["n_rows"], meta["ROWS"]),)


def _norm_block(arrays: _Arrays, cols: int) -> int:
    block = norm_block(cols)
    if block > MAX_NORM_BLOCK:
        raise arrays.error(
            f"rows of {cols} columns are longer than {MAX_NORM_BLOCK}, the most one tile holds"
        )
    return block


def _weights(arrays: _Arrays, cols: int, named: dict[str, Any]) -> Callable[..., tuple] | None:
    """Check per-column weights; returns a function making them contiguous (copies of views,
    the arrays themselves otherwise), None when all are (nothing to do per call)."""
    dense = [arrays.vector(a, name, cols, FLOATS, "x's columns", True) for name, a in named.items()]
    if all(dense):
        return None
    copy = arrays.contiguous()
    return lambda *ws: tuple(w if ok else copy(w) for w, ok in zip(ws, dense, strict=True))


def layer_norm(
    x: Any,
    weight: Any,
    bias: Any,
    eps: float = 1e-5,
    *,
    config: Config | None = None,
    interpret: bool = False,
) -> tuple[Any, Any, Any]:
    """(y, mean, rstd): y = (x - mean) * rstd * weight + bias per row of ``x`` [rows, cols]
    (any strides), rstd = 1 / sqrt(biased variance + eps); mean and rstd f32 [rows].
    ``config``: a Config(dict(ROWS=...), num_warps=...) of the kernel's instead of the
    autotuner's."""
    if not interpret:
        hit = _PLANS.get(
            ("layer_norm", _signature(x), _signature(weight), _signature(bias), config)
        )
        if hit is not None and hit[0] == launch_module.get_device():
            return hit[1](x, weight, bias, eps)
    arrays = _Arrays("layer_norm", {"x": x, "weight": weight, "bias": bias}, interpret)
    rows, cols, stride, col_stride = arrays.strided_matrix(x, "x")
    dense = _weights(arrays, cols, {"weight": weight, "bias": bias})
    fixed = _norm_constexprs(cols, _norm_block(arrays, cols))
    kernel = _norm_kernel("layernorm.c", "layer_norm_fwd")
    alloc = arrays.allocator((rows, cols), arrays.known_dtype(x))
    alloc_stat = arrays.allocator((rows,), arrays.acc(x))
    sizes = (rows, cols, stride, col_stride, cols)
    with arrays.device():
        y, mean, rstd = alloc(), alloc_stat(), alloc_stat()
        w, b = (weight, bias) if dense is None else dense(weight, bias)
        args = (y, mean, rstd, x, w, b, *sizes, float(eps))
        c = _norm_launch_config(arrays, kernel, _rows_grid, args, fixed, config)
    del y, mean, rstd, w, b, args
    grid = (cdiv(rows, c.kwargs["ROWS"]),)
    first = _Launch(arrays, kernel, grid, c.num_warps, ("eps",), **fixed, **c.kwargs)

    def make(launch):
        def plan(x, weight, bias, eps):
            y, mean, rstd = alloc(), alloc_stat(), alloc_stat()
            w, b = (weight, bias) if dense is None else dense(weight, bias)
            launch(y, mean, rstd, x, w, b, *sizes, float(eps))
            return y, mean, rstd

        return plan

    key = _key(interpret, "layer_norm", (x, weight, bias), config)
    return _planned(key, arrays, make, (first,), x, weight, bias, eps)


def _norm_backward_checks(
    fn: str, dy: Any, x: Any, weight: Any, stats: dict[str, Any], interpret: bool
) -> tuple[_Arrays, tuple[int, int, int, int, int, int], Callable[..., tuple] | None]:
    """The checks both norm backwards make: dy like x, weight per column, f32 statistics per
    row (contiguous). Returns (arrays, sizes, weight copier); sizes are (rows, cols, dy row and
    column strides, x row and column strides); the copier is None where no copy is needed."""
    arrays = _Arrays(fn, {"dy": dy, "x": x, "weight": weight, **stats}, interpret)
    rows, cols, x_stride, x_col = arrays.strided_matrix(x, "x")
    _, _, dy_stride, dy_col = arrays.strided_matrix(dy, "dy")
    arrays.same(dy, "dy", x, "x")
    dense = _weights(arrays, cols, {"weight": weight})
    for name, stat in stats.items():
        arrays.vector(stat, name, rows, (arrays.acc(x),), "x's rows")
    return arrays, (rows, cols, dy_stride, dy_col, x_stride, x_col), dense


def _norm_backward(
    fn: str, file: str, dy: Any, x: Any, weight: Any, stats: dict[str, Any], config, interpret
) -> tuple:
    """dx and the weight gradients (dw, and db for layer norm) of a norm: the dx kernel writes
    per-program partial sums of dW (dB) into [programs, cols] f32 buffers, one small kernel
    sums them (see kernels/layernorm.c)."""
    layer = file == "layernorm.c"
    arrays, sizes, dense = _norm_backward_checks(fn, dy, x, weight, stats, interpret)
    rows, cols = sizes[:2]
    fixed = _norm_constexprs(cols, _norm_block(arrays, cols))
    dx_kernel = _norm_kernel(file, "layer_norm_bwd_dx" if layer else "rms_norm_bwd_dx")
    sum_kernel = getattr(module(file), "layer_norm_bwd_dwdb" if layer else "rms_norm_bwd_dw")
    w_dtype = arrays.known_dtype(weight)
    alloc_dx = arrays.allocator((rows, cols), arrays.known_dtype(dy))
    alloc_w = arrays.allocator((cols,), w_dtype)
    tail = (rows, cols, *sizes[2:], cols)
    with arrays.device():
        sms = arrays.sms()
        given = (config,) if _is_norm_config(config, dx_kernel) else ()
        most = max(backward_programs(rows, sms, c) for c in (*dx_kernel.tune.configs, *given))
        alloc_most = arrays.allocator((most, cols), arrays.acc(x))
        parts = (alloc_most(), alloc_most()) if layer else (alloc_most(),)
        w = weight if dense is None else dense(weight)[0]
        args = (alloc_dx(), *parts, dy, x, w, *stats.values(), *tail)

        def grid(meta: dict) -> tuple[int]:
            return (backward_programs(rows, sms, Config(meta, meta["num_warps"])),)

        c = _norm_launch_config(arrays, dx_kernel, grid, args, fixed, config)
    del parts, w, args
    n_parts = backward_programs(rows, sms, c)
    alloc_part = arrays.allocator((n_parts, cols), arrays.acc(x))
    first_dx = _Launch(arrays, dx_kernel, (n_parts,), c.num_warps, checked=(), **fixed, **c.kwargs)
    sum_grid = (cdiv(cols, PARTIAL_BLOCK_N),)
    first_sum = _Launch(
        arrays,
        sum_kernel,
        sum_grid,
        PARTIAL_WARPS,
        BLOCK_P=PARTIAL_BLOCK_P,
        BLOCK_N=PARTIAL_BLOCK_N,
    )

    def make(launch_dx, launch_sum):
        def plan(dy, x, weight, *stats):
            dx = alloc_dx()
            parts = (alloc_part(), alloc_part()) if layer else (alloc_part(),)
            grads = (alloc_w(), alloc_w()) if layer else (alloc_w(),)
            w = weight if dense is None else dense(weight)[0]
            launch_dx(dx, *parts, dy, x, w, *stats, *tail)
            launch_sum(*grads, *parts, n_parts, cols)
            return (dx, *grads)

        return plan

    key = _key(interpret, fn, (dy, x, weight, *stats.values()), config)
    launches = (first_dx, first_sum)
    return _planned(key, arrays, make, launches, dy, x, weight, *stats.values())


def layer_norm_backward(
    dy: Any,
    x: Any,
    weight: Any,
    mean: Any,
    rstd: Any,
    *,
    config: Config | None = None,
    interpret: bool = False,
) -> tuple[Any, Any, Any]:
    """(dx, dweight, dbias) of :func:`layer_norm`, from the forward's ``mean`` and ``rstd``;
    ``config``: a Config(dict(ROWS=..., INTERLEAVE=...), num_warps=...) of the dx kernel's
    (INTERLEAVE 1: program p takes rows p, p + G, ... in groups of ROWS; 0: a run of rows)."""
    if not interpret:
        key = ("layer_norm_backward", _signature(dy), _signature(x), _signature(weight))
        hit = _PLANS.get((*key, _signature(mean), _signature(rstd), config))
        if hit is not None and hit[0] == launch_module.get_device():
            return hit[1](dy, x, weight, mean, rstd)
    stats = {"mean": mean, "rstd": rstd}
    return _norm_backward(
        "layer_norm_backward", "layernorm.c", dy, x, weight, stats, config, interpret
    )


def rms_norm(
    x: Any,
    weight: Any,
    eps: float = 1e-6,
    *,
    config: Config | None = None,
    interpret: bool = False,
) -> tuple[Any, Any]:
    """(y, rstd): y = x * rstd * weight per row of ``x`` [rows, cols] (any strides), rstd =
    1 / sqrt(mean(x^2) + eps), f32 [rows]. ``config`` as :func:`layer_norm`'s."""
    if not interpret:
        hit = _PLANS.get(("rms_norm", _signature(x), _signature(weight), config))
        if hit is not None and hit[0] == launch_module.get_device():
            return hit[1](x, weight, eps)
    arrays = _Arrays("rms_norm", {"x": x, "weight": weight}, interpret)
    rows, cols, stride, col_stride = arrays.strided_matrix(x, "x")
    dense = _weights(arrays, cols, {"weight": weight})
    fixed = _norm_constexprs(cols, _norm_block(arrays, cols))
    kernel = _norm_kernel("rmsnorm.c", "rms_norm_fwd")
    alloc = arrays.allocator((rows, cols), arrays.known_dtype(x))
    alloc_stat = arrays.allocator((rows,), arrays.acc(x))
    sizes = (rows, cols, stride, col_stride, cols)
    with arrays.device():
        w = weight if dense is None else dense(weight)[0]
        args = (alloc(), alloc_stat(), x, w, *sizes, float(eps))
        c = _norm_launch_config(arrays, kernel, _rows_grid, args, fixed, config)
    del w, args
    grid = (cdiv(rows, c.kwargs["ROWS"]),)
    first = _Launch(arrays, kernel, grid, c.num_warps, ("eps",), **fixed, **c.kwargs)

    def make(launch):
        def plan(x, weight, eps):
            y, rstd = alloc(), alloc_stat()
            w = weight if dense is None else dense(weight)[0]
            launch(y, rstd, x, w, *sizes, float(eps))
            return y, rstd

        return plan

    key = _key(interpret, "rms_norm", (x, weight), config)
    return _planned(key, arrays, make, (first,), x, weight, eps)


def rms_norm_backward(
    dy: Any,
    x: Any,
    weight: Any,
    rstd: Any,
    *,
    config: Config | None = None,
    interpret: bool = False,
) -> tuple[Any, Any]:
    """(dx, dweight) of :func:`rms_norm`, from the forward's ``rstd``; ``config`` as
    :func:`layer_norm_backward`'s."""
    if not interpret:
        key = ("rms_norm_backward", _signature(dy), _signature(x), _signature(weight))
        hit = _PLANS.get((*key, _signature(rstd), config))
        if hit is not None and hit[0] == launch_module.get_device():
            return hit[1](dy, x, weight, rstd)
    stats = {"rstd": rstd}
    return _norm_backward("rms_norm_backward", "rmsnorm.c", dy, x, weight, stats, config, interpret)


# ---------------------------------------------------------------- cross-entropy

_MEAN_BLOCK = 1024  # rows a time in the one-program mean and count kernels


def _cross_entropy_checks(fn: str, named: dict[str, Any], interpret: bool):
    """(arrays, rows, cols, row stride, column stride, targets copier or None: contiguous)."""
    arrays = _Arrays(fn, named, interpret)
    rows, cols, stride, col_stride = arrays.strided_matrix(named["logits"], "logits")
    dense = arrays.vector(named["targets"], "targets", rows, ("i64",), "logits' rows", True)
    copy = arrays.contiguous()
    return arrays, rows, cols, stride, col_stride, None if dense else copy


def _ce_prune(c: Config, args: tuple, kernel: Kernel) -> bool:
    """The cross-entropy row kernels' prune hook: True drops a BLOCK (CHUNK) longer than the
    row's next power of two (at least the least of the configs'), or more warps than BLOCK / 64
    lanes fill."""
    names = [p.name for p in kernel.binder.runtime]
    cols = int(args[names.index("n_cols")])
    name = "CHUNK" if "CHUNK" in c.kwargs else "BLOCK"
    least = min(k.kwargs[name] for k in kernel.tune.configs)
    block = c.kwargs[name]
    return block > max(least, norm_block(cols)) or 32 * c.num_warps > max(32, block // 2)


@functools.cache
def _ce_kernel(name: str) -> Kernel:
    kernel = getattr(module("cross_entropy.c"), name)
    kernel.tune.prune = functools.partial(_ce_prune, kernel=kernel)
    return kernel


def _ce_config(
    arrays: _Arrays, kernel: Kernel, grid: Any, args: tuple, rows: int, fixed: dict | None = None
) -> Config:
    """The first config the prune keeps on the interpreter (or with TUNE off, or no rows);
    else the autotuner's choice, timed once per row length and dtypes (``fixed``: the launch's
    other constexprs)."""
    if arrays.kind == "numpy" or not TUNE or rows == 0:
        return next(c for c in kernel.tune.configs if not _ce_prune(c, args, kernel))
    return kernel.tune[grid].best(*args, strided=True, **(fixed or {}))


def cross_entropy(
    logits: Any, targets: Any, ignore_index: int = -100, *, interpret: bool = False
) -> tuple[Any, Any]:
    """(loss, lse): the mean over rows whose target is not ``ignore_index`` of
    logsumexp(row) - row[target] (0-d f32; NaN when every row is ignored), and each row's
    logsumexp (f32 [rows], for :func:`cross_entropy_backward`). ``targets``: int64 [rows];
    ``logits`` [rows, cols] of any strides."""
    if not interpret:
        hit = _PLANS.get(("cross_entropy", _signature(logits), _signature(targets)))
        if hit is not None and hit[0] == launch_module.get_device():
            return hit[1](logits, targets, ignore_index)
    named = {"logits": logits, "targets": targets}
    arrays, rows, cols, stride, col_stride, dense = _cross_entropy_checks(
        "cross_entropy", named, interpret
    )
    mod = module("cross_entropy.c")
    acc = arrays.acc(logits)
    alloc_rows, alloc_loss = arrays.allocator((rows,), acc), arrays.allocator((), acc)
    alloc_count = arrays.allocator((1,), acc)
    ignore = ("ignore_index",)
    chunks_kernel = _ce_kernel("cross_entropy_chunks")
    slots = _split_slots(chunks_kernel, cols)
    if arrays.dtype(logits) in SPLIT_DTYPES and slots:  # a program per (row, chunk), then rows
        least = min(c.kwargs["CHUNK"] for c in chunks_kernel.tune.configs)
        alloc_slots = arrays.allocator((rows * cdiv(cols, least),), "i64")

        def grid(meta: dict) -> tuple[int]:
            return (rows * cdiv(cols, meta["CHUNK"]),)

        with arrays.device():
            args: tuple[Any, ...] = (alloc_slots(), logits, cols, stride, col_stride)
            c = _ce_config(arrays, chunks_kernel, grid, args, rows)
        del args
        n_chunks = cdiv(cols, c.kwargs["CHUNK"])
        block_rows = max(1, min(64, 2048 // slots))
        first_chunks = _Launch(arrays, chunks_kernel, (rows * n_chunks,), c.num_warps, **c.kwargs)
        first_rows = _Launch(
            arrays,
            mod.cross_entropy_rows,
            (cdiv(rows, block_rows),),
            4,
            ignore,
            ROWS=block_rows,
            SLOTS=slots,
        )
        first_mean = _Launch(arrays, mod.cross_entropy_mean, (1,), 4, ignore, BLOCK=_MEAN_BLOCK)

        def make_split(chunks_launch, rows_launch, mean_launch):
            def plan(logits, targets, ignore_index):
                if dense is not None:
                    targets = dense(targets)
                losses, lse, loss, count = alloc_rows(), alloc_rows(), alloc_loss(), alloc_count()
                ignore = int(ignore_index)
                stats = alloc_slots()
                chunks_launch(stats, logits, cols, stride, col_stride)
                rows_launch(
                    losses,
                    lse,
                    stats,
                    logits,
                    targets,
                    rows,
                    cols,
                    n_chunks,
                    stride,
                    col_stride,
                    ignore,
                )
                mean_launch(loss, count, losses, targets, rows, ignore)
                return loss, lse

            return plan

        key = _key(interpret, "cross_entropy", (logits, targets))
        launches: tuple[_Launch, ...] = (first_chunks, first_rows, first_mean)
        return _planned(key, arrays, make_split, launches, logits, targets, ignore_index)

    kernel = _ce_kernel("cross_entropy_fwd")  # f64: a program per row
    with arrays.device():
        t = targets if dense is None else dense(targets)
        args = (alloc_rows(), alloc_rows(), logits, t, cols, stride, col_stride, ignore_index)
        c = _ce_config(arrays, kernel, (rows,), args, rows)
    del t, args
    first_rows = _Launch(arrays, kernel, (rows,), c.num_warps, ignore, **c.kwargs)
    first_mean = _Launch(arrays, mod.cross_entropy_mean, (1,), 4, ignore, BLOCK=_MEAN_BLOCK)

    def make(rows_launch, mean_launch):
        def plan(logits, targets, ignore_index):
            if dense is not None:
                targets = dense(targets)
            losses, lse, loss, count = alloc_rows(), alloc_rows(), alloc_loss(), alloc_count()
            ignore = int(ignore_index)
            rows_launch(losses, lse, logits, targets, cols, stride, col_stride, ignore)
            mean_launch(loss, count, losses, targets, rows, ignore)
            return loss, lse

        return plan

    key = _key(interpret, "cross_entropy", (logits, targets))
    launches = (first_rows, first_mean)
    return _planned(key, arrays, make, launches, logits, targets, ignore_index)


def cross_entropy_backward(
    logits: Any,
    targets: Any,
    lse: Any,
    ignore_index: int = -100,
    grad: float = 1.0,
    *,
    interpret: bool = False,
) -> Any:
    """dlogits = (softmax(row) - onehot(target)) * grad / count, 0 on ignored rows; count is
    the number of rows not ignored (computed on the device), ``lse`` the forward's."""
    if not interpret:
        signatures = (_signature(logits), _signature(targets), _signature(lse))
        hit = _PLANS.get(("cross_entropy_backward", *signatures))
        if hit is not None and hit[0] == launch_module.get_device():
            return hit[1](logits, targets, lse, ignore_index, grad)
    named = {"logits": logits, "targets": targets, "lse": lse}
    arrays, rows, cols, stride, col_stride, dense = _cross_entropy_checks(
        "cross_entropy_backward", named, interpret
    )
    arrays.vector(lse, "lse", rows, (arrays.acc(logits),), "logits' rows")
    mod = module("cross_entropy.c")
    alloc = arrays.allocator((rows, cols), arrays.known_dtype(logits))
    alloc_count = arrays.allocator((1,), arrays.acc(logits))
    ignore = ("ignore_index",)
    first_count = _Launch(arrays, mod.cross_entropy_count, (1,), 4, ignore, BLOCK=_MEAN_BLOCK)
    kernel = _ce_kernel("cross_entropy_bwd")
    with arrays.device():
        t = targets if dense is None else dense(targets)
        count = alloc_count()  # what the timing launches divide by: its value does not matter
        args = (alloc(), logits, t, lse, count, cols, stride, col_stride, cols, ignore_index)

        def tuned_grid(meta: dict) -> tuple[int, int]:
            return (rows, cdiv(cols, meta["BLOCK"]))

        c = _ce_config(arrays, kernel, tuned_grid, (*args, float(grad)), rows)
    del t, count, args
    grid = (rows, cdiv(cols, c.kwargs["BLOCK"]))
    first_rows = _Launch(arrays, kernel, grid, c.num_warps, ("ignore_index", "grad"), **c.kwargs)

    def make(count_launch, rows_launch):
        def plan(logits, targets, lse, ignore_index, grad):
            if dense is not None:
                targets = dense(targets)
            dlogits, count = alloc(), alloc_count()
            ignore = int(ignore_index)
            count_launch(count, targets, rows, ignore)
            rows_launch(
                dlogits,
                logits,
                targets,
                lse,
                count,
                cols,
                stride,
                col_stride,
                cols,
                ignore,
                float(grad),
            )
            return dlogits

        return plan

    key = _key(interpret, "cross_entropy_backward", (logits, targets, lse))
    launches = (first_count, first_rows)
    return _planned(key, arrays, make, launches, logits, targets, lse, ignore_index, grad)


# ---------------------------------------------------------------- dropout

DROPOUT_BLOCK = 1024


def _dropout(fn: str, x: Any, p: float, seed: int, interpret: bool) -> Any:
    name = "x" if fn == "dropout" else "dy"
    arrays = _Arrays(fn, {name: x}, interpret)
    arrays.check_dtype(x, name, FLOATS)
    if not 0.0 <= p < 1.0:
        raise arrays.error(f"p must be in [0, 1), got {p}")
    contiguous = x.is_contiguous() if arrays.kind == "torch" else x.flags.c_contiguous
    dense = None if contiguous else arrays.contiguous()  # the kernel reads elements
    shape = tuple(int(n) for n in x.shape)
    n = math.prod(shape)
    alloc = arrays.allocator(shape, arrays.known_dtype(x))
    grid = (cdiv(n, DROPOUT_BLOCK),)
    kernel = getattr(module("dropout.c"), fn)
    first = _Launch(arrays, kernel, grid, 4, ("p", "seed"), BLOCK=DROPOUT_BLOCK)

    def make(launch):
        def plan(x, p, seed):
            if not 0.0 <= p < 1.0:
                raise LaunchError(f"{fn}: p must be in [0, 1), got {p}")
            out = alloc()
            launch(out, x if dense is None else dense(x), float(p), int(seed), n)
            return out

        return plan

    return _planned(_key(interpret, fn, (x,)), arrays, make, (first,), x, p, seed)


def dropout(x: Any, p: float, seed: int, *, interpret: bool = False) -> Any:
    """x / (1 - p) where a Philox uniform of (seed, element index) exceeds p, else 0; any shape
    (a view is copied first). The same seed regenerates the same mask in
    :func:`dropout_backward`."""
    hit = None if interpret else _PLANS.get(("dropout", _signature(x)))
    if hit is not None and hit[0] == launch_module.get_device():
        return hit[1](x, p, seed)
    return _dropout("dropout", x, p, seed, interpret)


def dropout_backward(dy: Any, p: float, seed: int, *, interpret: bool = False) -> Any:
    """dx = dy / (1 - p) where the forward kept the element, else 0 (same seed, same mask)."""
    hit = None if interpret else _PLANS.get(("dropout_backward", _signature(dy)))
    if hit is not None and hit[0] == launch_module.get_device():
        return hit[1](dy, p, seed)
    return _dropout("dropout_backward", dy, p, seed, interpret)
