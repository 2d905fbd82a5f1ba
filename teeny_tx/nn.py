"""Row operations of neural networks: softmax, layer norm, RMS norm and cross-entropy.

Input: CuPy arrays or torch CUDA tensors of shape [rows, cols] (last dimension contiguous, any
row stride; f16, bf16 or f32), or NumPy arrays with ``interpret=True``. Output: new arrays of
the input's library on its device (torch: ``torch.empty_like`` and torch's current stream; CuPy:
``cupy.empty`` and CuPy's current stream; NumPy: run on the interpreter). Statistics (mean,
rstd, lse, the loss) are f32. Each function checks its arguments (``LaunchError``), picks the
launch with :func:`row_config`, and launches the kernels of ``kernels/softmax.c``,
``layernorm.c``, ``rmsnorm.c`` and ``cross_entropy.c``; nothing waits for the device.
"""

from __future__ import annotations

import contextlib
import functools
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import cdiv
from .dtypes import DTYPES, from_numpy
from .errors import LaunchError
from .kernel import Kernel
from .library import module

MAX_ROW_BLOCK = 16384  # the longest row a softmax program keeps in registers as one tile
MAX_NORM_BLOCK = 65536  # the norms have no looped kernels: one tile per row, up to this
LOOP_BLOCK = 4096  # the chunk the looped kernels step by
NORM_WARPS = 16  # measured on the H200: 16 beats 8 for norm rows of 4096 and 8192 columns
PARTIAL_BLOCK_P, PARTIAL_BLOCK_N = 32, 128  # the tile that sums dW/dB partials
FLOATS = ("f32", "f16", "bf16")


@dataclass(frozen=True)
class RowConfig:
    block: int
    num_warps: int
    looped: bool


@functools.cache
def row_config(n_cols: int, max_block: int = MAX_ROW_BLOCK, max_warps: int = 16) -> RowConfig:
    """How one program handles a row of ``n_cols`` elements.

    A row of up to ``max_block`` columns is one tile: BLOCK = the next power of two >= n_cols.
    A longer row is read in chunks of BLOCK = LOOP_BLOCK by the ``_looped`` kernels. num_warps =
    BLOCK / 256 within [1, max_warps], as Triton's softmax tutorial: at most 8 elements per
    thread up to 256 * max_warps columns, then more elements per thread.
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


# ---------------------------------------------------------------- array libraries


_TORCH_NAMES = {"float32": "f32", "float16": "f16", "bfloat16": "bf16", "int64": "i64"}
_TORCH_DTYPES = {name: spelling for spelling, name in _TORCH_NAMES.items()}
_H200_SMS = 132  # the interpreter splits work as on an H200, so both backends agree


def _kind(a: Any) -> str:
    kind = _KINDS.get(type(a))
    if kind is not None:
        return kind if kind != "torch" or a.is_cuda else "torch-cpu"
    kind = _classify(a)
    if kind in ("numpy", "cupy", "torch", "torch-cpu"):
        _KINDS[type(a)] = "torch" if kind.startswith("torch") else kind
    return kind


_KINDS: dict[type, str] = {}


def _classify(a: Any) -> str:
    if isinstance(a, np.ndarray):
        return "numpy"
    if type(a).__module__.startswith("cupy"):
        return "cupy"
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(a, torch.Tensor):
        return "torch" if a.is_cuda else "torch-cpu"
    return type(a).__name__


class _Arrays:
    """The array library of one call: shapes, strides, allocation, device and launches."""

    def __init__(self, fn: str, arrays: dict[str, Any], interpret: bool):
        self.fn = fn
        first_name, first = next(iter(arrays.items()))
        self.kind = _kind(first)
        wanted = ("numpy",) if interpret else ("cupy", "torch")
        if self.kind not in wanted:
            raise self.error(f"{first_name} is a {_describe(first)}; {_where(interpret)}")
        for name, a in arrays.items():
            if _kind(a) != self.kind:
                raise self.error(
                    f"{name} is a {_describe(a)} but {first_name} is a {_describe(first)}; "
                    "pass arrays of one library"
                )
        self.first = first
        if self.kind != "numpy":
            for name, a in arrays.items():
                if a.device != first.device:
                    raise self.error(f"{name} is on {a.device} but {first_name} on {first.device}")
        if self.kind == "torch":
            import torch

            self.torch = torch

    def error(self, message: str) -> LaunchError:
        return LaunchError(f"{self.fn}: {message}")

    def dtype(self, a: Any) -> str | None:
        if self.kind == "torch":
            return _TORCH_NAMES.get(str(a.dtype).removeprefix("torch."))
        d = from_numpy(a.dtype)
        return d.name if d is not None else None

    def strides(self, a: Any) -> tuple[int, ...]:
        """Strides in elements."""
        if self.kind == "torch":
            return tuple(a.stride())
        if any(s % a.itemsize for s in a.strides):
            raise self.error(f"strides {a.strides} are not whole elements")
        return tuple(s // a.itemsize for s in a.strides)

    def device(self):
        """The array's device as CuPy's current one (nothing to do when it already is)."""
        if self.kind == "numpy":
            return contextlib.nullcontext()
        import cupy

        index = self.first.device.index if self.kind == "torch" else self.first.device.id
        if index == cupy.cuda.runtime.getDevice():
            return contextlib.nullcontext()
        return cupy.cuda.Device(index)

    def sms(self) -> int:
        """Multiprocessors of the current device (enter :meth:`device` first)."""
        if self.kind == "numpy":
            return _H200_SMS
        from .runtime.launch import device_limits

        return device_limits().multiprocessor_count

    def empty(self, shape: tuple[int, ...], dtype: str, like: Any = None) -> Any:
        """A new array; ``like`` (same shape and dtype) makes torch allocate with empty_like."""
        if self.kind == "numpy":
            return np.empty(shape, DTYPES[dtype].np)
        if self.kind == "cupy":
            import cupy

            return cupy.empty(shape, DTYPES[dtype].np)
        if like is not None:
            return self.torch.empty_like(like)
        torch_dtype = getattr(self.torch, _TORCH_DTYPES[dtype])
        return self.torch.empty(shape, dtype=torch_dtype, device=self.first.device)

    def launch(self, kernel: Kernel, grid: tuple, args: tuple, num_warps: int, **constexprs):
        """Queue ``kernel`` (run it, on the interpreter); a grid with a 0 is nothing to do."""
        if 0 in grid:
            return
        if self.kind == "numpy":
            kernel.interpret[grid](*args, num_warps=num_warps, **constexprs)
        else:
            stream = (
                _torch_stream(self.torch, self.first.device.index) if self.kind == "torch" else None
            )
            kernel[grid](*args, num_warps=num_warps, stream=stream, **constexprs)

    # -------------------------------------------------------- argument checks

    def matrix(self, a: Any, name: str, dtypes: tuple[str, ...] = FLOATS) -> tuple[int, int, int]:
        """(rows, cols, row stride) of a 2-D argument whose last dimension is contiguous."""
        if len(a.shape) != 2:
            raise self.error(f"{name} must be 2-D [rows, cols], got shape {tuple(a.shape)}")
        self.check_dtype(a, name, dtypes)
        rows, cols = (int(n) for n in a.shape)
        row_stride, col_stride = self.strides(a)
        if cols > 1 and rows > 0 and col_stride != 1:
            raise self.error(
                f"{name}'s last dimension must be contiguous (stride 1), got strides "
                f"{(row_stride, col_stride)} in elements; copy it first (x.contiguous(), "
                "cupy.ascontiguousarray(x))"
            )
        return rows, cols, row_stride

    def vector(self, a: Any, name: str, length: int, dtypes: tuple[str, ...], what: str) -> None:
        """Check a contiguous 1-D argument of ``length`` elements (``what`` names the length)."""
        if tuple(a.shape) != (length,):
            raise self.error(f"{name} must have shape ({length},) ({what}), got {tuple(a.shape)}")
        self.check_dtype(a, name, dtypes)
        if length > 1 and self.strides(a) != (1,):
            raise self.error(f"{name} must be contiguous, got stride {self.strides(a)[0]}")

    def same(self, a: Any, name: str, like: Any, like_name: str) -> None:
        """Check that ``a`` has the shape and dtype of ``like``."""
        if tuple(a.shape) != tuple(like.shape):
            raise self.error(
                f"{name} has shape {tuple(a.shape)} but {like_name} has {tuple(like.shape)}"
            )
        if self.dtype(a) != self.dtype(like):
            raise self.error(
                f"{name} is {self.dtype(a)} but {like_name} is {self.dtype(like)}; they must match"
            )

    def check_dtype(self, a: Any, name: str, dtypes: tuple[str, ...]) -> None:
        if self.dtype(a) not in dtypes:
            raise self.error(
                f"{name} has dtype {a.dtype}; this takes {', '.join(dtypes)} "
                f"({', '.join(str(DTYPES[d].np) for d in dtypes)})"
            )


def _torch_stream(torch: Any, device: int) -> int:
    """torch's current stream on ``device`` as a raw handle (the call Triton's launcher uses;
    torch.cuda.current_stream builds a Python object each time)."""
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    return raw(device) if raw is not None else torch.cuda.current_stream(device).cuda_stream


def _describe(a: Any) -> str:
    kind = _kind(a)
    return {"torch-cpu": "CPU torch tensor", "numpy": "NumPy array", "cupy": "CuPy array"}.get(
        kind, "torch CUDA tensor" if kind == "torch" else kind
    )


def _where(interpret: bool) -> str:
    if interpret:
        return "interpret=True runs on NumPy arrays"
    return "pass CuPy arrays or torch CUDA tensors, or NumPy arrays with interpret=True"


# ---------------------------------------------------------------- softmax


def _softmax_forward(fn: str, x: Any, interpret: bool) -> Any:
    arrays = _Arrays(fn, {"x": x}, interpret)
    rows, cols, stride = arrays.matrix(x, "x")
    config = row_config(cols)
    kernel = getattr(module("softmax.c"), fn + ("_looped" if config.looped else ""))
    with arrays.device():
        y = arrays.empty((rows, cols), arrays.dtype(x), like=x)
        args = (y, x, cols, stride, arrays.strides(y)[0])
        arrays.launch(kernel, (rows,), args, config.num_warps, BLOCK=config.block)
    return y


def softmax(x: Any, *, interpret: bool = False) -> Any:
    """y = exp(x - max) / sum(exp(x - max)) along each row of ``x`` [rows, cols]."""
    return _softmax_forward("softmax", x, interpret)


def log_softmax(x: Any, *, interpret: bool = False) -> Any:
    """y = x - logsumexp(x) along each row of ``x`` [rows, cols]."""
    return _softmax_forward("log_softmax", x, interpret)


def _softmax_backward(fn: str, y: Any, dy: Any, interpret: bool) -> Any:
    arrays = _Arrays(fn, {"y": y, "dy": dy}, interpret)
    rows, cols, y_stride = arrays.matrix(y, "y")
    _, _, dy_stride = arrays.matrix(dy, "dy")
    arrays.same(dy, "dy", y, "y")
    config = row_config(cols)
    kernel = getattr(module("softmax.c"), fn + ("_looped" if config.looped else ""))
    with arrays.device():
        dx = arrays.empty((rows, cols), arrays.dtype(dy), like=dy)
        args = (dx, y, dy, cols, y_stride, dy_stride, arrays.strides(dx)[0])
        arrays.launch(kernel, (rows,), args, config.num_warps, BLOCK=config.block)
    return dx


def softmax_backward(y: Any, dy: Any, *, interpret: bool = False) -> Any:
    """dx = y * (dy - sum(y * dy)) per row, from the softmax output ``y`` and its gradient."""
    return _softmax_backward("softmax_backward", y, dy, interpret)


def log_softmax_backward(y: Any, dy: Any, *, interpret: bool = False) -> Any:
    """dx = dy - exp(y) * sum(dy) per row, from the log_softmax output ``y`` and its gradient."""
    return _softmax_backward("log_softmax_backward", y, dy, interpret)


# ---------------------------------------------------------------- layer norm and RMS norm


def _norm_config(arrays: _Arrays, cols: int) -> RowConfig:
    config = row_config(cols, MAX_NORM_BLOCK, NORM_WARPS)
    if config.looped:
        raise arrays.error(
            f"rows of {cols} columns are longer than {MAX_NORM_BLOCK}, the most one tile holds"
        )
    return config


def layer_norm(
    x: Any, weight: Any, bias: Any, eps: float = 1e-5, *, interpret: bool = False
) -> tuple[Any, Any, Any]:
    """(y, mean, rstd): y = (x - mean) * rstd * weight + bias per row of ``x`` [rows, cols],
    rstd = 1 / sqrt(biased variance + eps); mean and rstd f32 [rows]."""
    arrays = _Arrays("layer_norm", {"x": x, "weight": weight, "bias": bias}, interpret)
    rows, cols, stride = arrays.matrix(x, "x")
    arrays.vector(weight, "weight", cols, FLOATS, "x's columns")
    arrays.vector(bias, "bias", cols, FLOATS, "x's columns")
    config = _norm_config(arrays, cols)
    kernel = module("layernorm.c").layer_norm_fwd
    with arrays.device():
        y = arrays.empty((rows, cols), arrays.dtype(x), like=x)
        mean, rstd = arrays.empty((rows,), "f32"), arrays.empty((rows,), "f32")
        args = (y, mean, rstd, x, weight, bias, cols, stride, arrays.strides(y)[0], float(eps))
        arrays.launch(kernel, (rows,), args, config.num_warps, BLOCK=config.block)
    return y, mean, rstd


def _norm_backward_args(
    fn: str, dy: Any, x: Any, weight: Any, stats: dict[str, Any], interpret: bool
):
    """The checks both norm backwards make: dy like x, weight per column, f32 statistics per row.
    Returns (arrays, rows, cols, x row stride, dy row stride, launch configuration)."""
    arrays = _Arrays(fn, {"dy": dy, "x": x, "weight": weight, **stats}, interpret)
    rows, cols, x_stride = arrays.matrix(x, "x")
    _, _, dy_stride = arrays.matrix(dy, "dy")
    arrays.same(dy, "dy", x, "x")
    arrays.vector(weight, "weight", cols, FLOATS, "x's columns")
    for name, stat in stats.items():
        arrays.vector(stat, name, rows, ("f32",), "x's rows")
    return arrays, rows, cols, x_stride, dy_stride, _norm_config(arrays, cols)


def layer_norm_backward(
    dy: Any, x: Any, weight: Any, mean: Any, rstd: Any, *, interpret: bool = False
) -> tuple[Any, Any, Any]:
    """(dx, dweight, dbias) of :func:`layer_norm`, from the forward's ``mean`` and ``rstd``."""
    stats = {"mean": mean, "rstd": rstd}
    arrays, rows, cols, x_stride, dy_stride, config = _norm_backward_args(
        "layer_norm_backward", dy, x, weight, stats, interpret
    )
    mod = module("layernorm.c")
    with arrays.device():
        programs, per_program = partial_programs(rows, arrays.sms())
        dx = arrays.empty((rows, cols), arrays.dtype(dy), like=dy)
        w_dtype = arrays.dtype(weight)
        dw, db = (
            arrays.empty((cols,), w_dtype, like=weight),
            arrays.empty((cols,), w_dtype, like=weight),
        )
        parts = max(programs, 1)
        dw_part, db_part = arrays.empty((parts, cols), "f32"), arrays.empty((parts, cols), "f32")
        args = (
            dx,
            dw_part,
            db_part,
            dy,
            x,
            weight,
            mean,
            rstd,
            rows,
            cols,
            dy_stride,
            x_stride,
            arrays.strides(dx)[0],
            per_program,
        )
        arrays.launch(
            mod.layer_norm_bwd_dx, (programs,), args, config.num_warps, BLOCK=config.block
        )
        arrays.launch(
            mod.layer_norm_bwd_dwdb,
            (cdiv(cols, PARTIAL_BLOCK_N),),
            (dw, db, dw_part, db_part, programs, cols),
            4,
            BLOCK_P=PARTIAL_BLOCK_P,
            BLOCK_N=PARTIAL_BLOCK_N,
        )
    return dx, dw, db


def rms_norm(x: Any, weight: Any, eps: float = 1e-6, *, interpret: bool = False) -> tuple[Any, Any]:
    """(y, rstd): y = x * rstd * weight per row of ``x`` [rows, cols], rstd = 1 / sqrt(mean(x^2)
    + eps), f32 [rows]."""
    arrays = _Arrays("rms_norm", {"x": x, "weight": weight}, interpret)
    rows, cols, stride = arrays.matrix(x, "x")
    arrays.vector(weight, "weight", cols, FLOATS, "x's columns")
    config = _norm_config(arrays, cols)
    with arrays.device():
        y = arrays.empty((rows, cols), arrays.dtype(x), like=x)
        rstd = arrays.empty((rows,), "f32")
        args = (y, rstd, x, weight, cols, stride, arrays.strides(y)[0], float(eps))
        arrays.launch(
            module("rmsnorm.c").rms_norm_fwd, (rows,), args, config.num_warps, BLOCK=config.block
        )
    return y, rstd


def rms_norm_backward(
    dy: Any, x: Any, weight: Any, rstd: Any, *, interpret: bool = False
) -> tuple[Any, Any]:
    """(dx, dweight) of :func:`rms_norm`, from the forward's ``rstd``."""
    arrays, rows, cols, x_stride, dy_stride, config = _norm_backward_args(
        "rms_norm_backward", dy, x, weight, {"rstd": rstd}, interpret
    )
    mod = module("rmsnorm.c")
    with arrays.device():
        programs, per_program = partial_programs(rows, arrays.sms())
        dx = arrays.empty((rows, cols), arrays.dtype(dy), like=dy)
        dw = arrays.empty((cols,), arrays.dtype(weight), like=weight)
        dw_part = arrays.empty((max(programs, 1), cols), "f32")
        args = (
            dx,
            dw_part,
            dy,
            x,
            weight,
            rstd,
            rows,
            cols,
            dy_stride,
            x_stride,
            arrays.strides(dx)[0],
            per_program,
        )
        arrays.launch(mod.rms_norm_bwd_dx, (programs,), args, config.num_warps, BLOCK=config.block)
        arrays.launch(
            mod.rms_norm_bwd_dw,
            (cdiv(cols, PARTIAL_BLOCK_N),),
            (dw, dw_part, programs, cols),
            4,
            BLOCK_P=PARTIAL_BLOCK_P,
            BLOCK_N=PARTIAL_BLOCK_N,
        )
    return dx, dw


# ---------------------------------------------------------------- cross-entropy

_MEAN_BLOCK = 1024  # rows a time in the one-program mean and count kernels


def _cross_entropy_args(fn: str, named: dict[str, Any], interpret: bool):
    arrays = _Arrays(fn, named, interpret)
    rows, cols, stride = arrays.matrix(named["logits"], "logits")
    arrays.vector(named["targets"], "targets", rows, ("i64",), "logits' rows")
    return arrays, rows, cols, stride


def cross_entropy(
    logits: Any, targets: Any, ignore_index: int = -100, *, interpret: bool = False
) -> tuple[Any, Any]:
    """(loss, lse): the mean over rows whose target is not ``ignore_index`` of
    logsumexp(row) - row[target] (0-d f32; NaN when every row is ignored), and each row's
    logsumexp (f32 [rows], for :func:`cross_entropy_backward`). ``targets``: int64 [rows]."""
    named = {"logits": logits, "targets": targets}
    arrays, rows, cols, stride = _cross_entropy_args("cross_entropy", named, interpret)
    config = row_config(cols, LOOP_BLOCK)
    mod = module("cross_entropy.c")
    with arrays.device():
        losses, lse = arrays.empty((rows,), "f32"), arrays.empty((rows,), "f32")
        loss, count = arrays.empty((), "f32"), arrays.empty((1,), "f32")
        args = (losses, lse, logits, targets, cols, stride, int(ignore_index))
        arrays.launch(mod.cross_entropy_fwd, (rows,), args, config.num_warps, BLOCK=config.block)
        args = (loss, count, losses, targets, rows, int(ignore_index))
        arrays.launch(mod.cross_entropy_mean, (1,), args, 4, BLOCK=_MEAN_BLOCK)
    return loss, lse


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
    named = {"logits": logits, "targets": targets, "lse": lse}
    arrays, rows, cols, stride = _cross_entropy_args("cross_entropy_backward", named, interpret)
    arrays.vector(lse, "lse", rows, ("f32",), "logits' rows")
    config = row_config(cols, LOOP_BLOCK)
    mod = module("cross_entropy.c")
    with arrays.device():
        dlogits = arrays.empty((rows, cols), arrays.dtype(logits), like=logits)
        count = arrays.empty((1,), "f32")
        args = (count, targets, rows, int(ignore_index))
        arrays.launch(mod.cross_entropy_count, (1,), args, 4, BLOCK=_MEAN_BLOCK)
        args = (
            dlogits,
            logits,
            targets,
            lse,
            count,
            cols,
            stride,
            arrays.strides(dlogits)[0],
            int(ignore_index),
            float(grad),
        )
        grid = (rows, cdiv(cols, config.block))
        arrays.launch(mod.cross_entropy_bwd, grid, args, config.num_warps, BLOCK=config.block)
    return dlogits


# ---------------------------------------------------------------- dropout

DROPOUT_BLOCK = 1024


def _dropout(fn: str, x: Any, p: float, seed: int, interpret: bool) -> Any:
    arrays = _Arrays(fn, {"x" if fn == "dropout" else "dy": x}, interpret)
    arrays.check_dtype(x, "x" if fn == "dropout" else "dy", FLOATS)
    contiguous = x.is_contiguous() if arrays.kind == "torch" else x.flags.c_contiguous
    if not contiguous:
        raise arrays.error("the input must be contiguous; copy it first")
    if not 0.0 <= p < 1.0:
        raise arrays.error(f"p must be in [0, 1), got {p}")
    n = int(np.prod(x.shape))
    kernel = getattr(module("dropout.c"), fn)
    with arrays.device():
        out = arrays.empty(tuple(x.shape), arrays.dtype(x), like=x)
        args = (out, x, float(p), int(seed), n)
        arrays.launch(kernel, (cdiv(n, DROPOUT_BLOCK),), args, 4, BLOCK=DROPOUT_BLOCK)
    return out


def dropout(x: Any, p: float, seed: int, *, interpret: bool = False) -> Any:
    """x / (1 - p) where a Philox uniform of (seed, element index) exceeds p, else 0; any shape
    (contiguous). The same seed regenerates the same mask in :func:`dropout_backward`."""
    return _dropout("dropout", x, p, seed, interpret)


def dropout_backward(dy: Any, p: float, seed: int, *, interpret: bool = False) -> Any:
    """dx = dy / (1 - p) where the forward kept the element, else 0 (same seed, same mask)."""
    return _dropout("dropout_backward", dy, p, seed, interpret)


def __getattr__(name: str) -> Any:
    """attention and attention_backward, re-exported from teeny_tx.library.attention on first
    use (that module imports this one's helpers, so an import here would be circular)."""
    if name in ("attention", "attention_backward"):
        from .library import attention

        return getattr(attention, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
