"""Array libraries of the kernel library's wrappers: one call's arrays, checks and launches.

Input: the arrays a wrapper of ``teeny_tx.nn`` or ``teeny_tx.linalg`` is called with (CuPy arrays,
torch CUDA tensors, or NumPy arrays with ``interpret=True``). Output: an :class:`Arrays` that
checks they are of one library and device, reads shapes, strides and dtypes, allocates outputs
of that library and launches kernels on its current stream (torch's, CuPy's) or on the
interpreter.
"""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from ..dtypes import DTYPES, TORCH_NAMES, acc_dtype, from_numpy
from ..errors import LaunchError
from ..kernel import Kernel
from ..runtime.streams import torch_stream

# The float dtypes the library's kernels take: they compute in f32, f64 for f64 data (acc_t,
# dtypes.acc_dtype); f64 is what torch.autograd.gradcheck runs on CPU tensors (the interpreter).
FLOATS = ("f32", "f16", "bf16", "f64")


INTERPRETER_SMS = 132  # the interpreter splits work as on an H200, so both backends agree


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


class Arrays:
    """The array library of one call: shapes, strides, allocation, device and launches."""

    def __init__(self, fn: str, arrays: dict[str, Any], interpret: bool):
        self.fn = fn
        first_name, first = next(iter(arrays.items()))
        self.kind = _kind(first)
        wanted = ("numpy",) if interpret else ("cupy", "torch")
        if self.kind not in wanted:
            raise self.error(f"{first_name} is a {describe(first)}; {where(interpret)}")
        for name, a in arrays.items():
            if _kind(a) != self.kind:
                raise self.error(
                    f"{name} is a {describe(a)} but {first_name} is a {describe(first)}; "
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
            return TORCH_NAMES.get(str(a.dtype).removeprefix("torch."))
        d = from_numpy(a.dtype)
        return d.name if d is not None else None

    def known_dtype(self, a: Any) -> str:
        """:meth:`dtype` of an argument whose dtype a check accepted (:meth:`check_dtype`, which
        :meth:`matrix` and :meth:`vector` call): a LaunchError where teeny_tx has no name."""
        d = self.dtype(a)
        if d is None:
            raise self.error(f"dtype {a.dtype} is not one teeny_tx takes")
        return d

    def acc(self, a: Any) -> str:
        """The dtype the kernels compute ``a``'s data in, and keep statistics in: f64 for f64,
        else f32 (the kernels' ``acc_t``)."""
        d = self.dtype(a)
        return acc_dtype([DTYPES[d]] if d in DTYPES else []).name

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
            return INTERPRETER_SMS
        from ..runtime.launch import device_limits

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
        torch_dtype = getattr(self.torch, str(DTYPES[dtype].torch))
        return self.torch.empty(shape, dtype=torch_dtype, device=self.first.device)

    def launch(self, kernel: Kernel, grid: tuple, args: tuple, num_warps: int, **constexprs):
        """Queue ``kernel`` (run it, on the interpreter); a grid with a 0 is nothing to do."""
        if 0 in grid:
            return
        if self.kind == "numpy":
            kernel.interpret[grid](*args, num_warps=num_warps, strided=True, **constexprs)
        else:
            stream = (
                torch_stream(self.torch, self.first.device.index) if self.kind == "torch" else None
            )
            kernel[grid](*args, num_warps=num_warps, stream=stream, strided=True, **constexprs)

    # -------------------------------------------------------- argument checks

    def matrix(self, a: Any, name: str, dtypes: tuple[str, ...] = FLOATS) -> tuple[int, int, int]:
        """(rows, cols, row stride) of a 2-D argument whose last dimension is contiguous (for
        kernels that take no column stride)."""
        rows, cols, row_stride, col_stride = self.strided_matrix(a, name, dtypes)
        if cols > 1 and rows > 0 and col_stride != 1:
            raise self.error(
                f"{name}'s last dimension must be contiguous (stride 1), got strides "
                f"{(row_stride, col_stride)} in elements; copy it first (x.contiguous(), "
                "cupy.ascontiguousarray(x))"
            )
        return rows, cols, row_stride

    def strided_matrix(
        self, a: Any, name: str, dtypes: tuple[str, ...] = FLOATS
    ) -> tuple[int, int, int, int]:
        """(rows, cols, row stride, column stride) in elements of a 2-D argument of any strides
        (the row kernels take both; a column stride of 1 specialises to vector loads)."""
        if len(a.shape) != 2:
            raise self.error(f"{name} must be 2-D [rows, cols], got shape {tuple(a.shape)}")
        self.check_dtype(a, name, dtypes)
        rows, cols = (int(n) for n in a.shape)
        row_stride, col_stride = self.strides(a)
        return rows, cols, row_stride, col_stride

    def vector(
        self,
        a: Any,
        name: str,
        length: int,
        dtypes: tuple[str, ...],
        what: str,
        views: bool = False,
    ) -> bool:
        """Check a 1-D argument of ``length`` elements (``what`` names the length); returns
        whether it is contiguous. A view (a step other than 1) is refused unless ``views``
        (the caller then copies it: see :meth:`contiguous`)."""
        if tuple(a.shape) != (length,):
            raise self.error(f"{name} must have shape ({length},) ({what}), got {tuple(a.shape)}")
        self.check_dtype(a, name, dtypes)
        dense = length <= 1 or self.strides(a) == (1,)
        if not dense and not views:
            raise self.error(f"{name} must be contiguous, got stride {self.strides(a)[0]}")
        return dense

    def contiguous(self) -> Callable[[Any], Any]:
        """The library's contiguous copy (for weights and targets given as views)."""
        if self.kind == "torch":
            return lambda a: a.contiguous()
        if self.kind == "cupy":
            import cupy

            return cupy.ascontiguousarray
        return np.ascontiguousarray

    # -------------------------------------------------------- what a plan replays

    def allocator(self, shape: tuple[int, ...], dtype: str) -> Callable[[], Any]:
        """A function returning a new contiguous array of ``shape`` and ``dtype`` each call."""
        if self.kind == "numpy":
            return functools.partial(np.empty, shape, DTYPES[dtype].np)
        if self.kind == "cupy":
            import cupy

            return functools.partial(cupy.empty, shape, DTYPES[dtype].np)
        torch_name = DTYPES[dtype].torch
        if torch_name is None:
            raise LaunchError(f"torch has no {dtype} dtype: no torch tensor of it can be made")
        torch_dtype = getattr(self.torch, torch_name)
        return functools.partial(
            self.torch.empty, shape, dtype=torch_dtype, device=self.first.device
        )

    def bound(self, kernel: Kernel, grid: tuple, num_warps: int, **constexprs) -> Callable:
        """``kernel``'s launch over ``grid`` with these options, as a function of the runtime
        arguments (nothing, when the grid has a 0). torch tensors launch on torch's current
        stream, CuPy arrays on CuPy's (the launcher's own rule); the interpreter runs at once.
        Views are passed as they are: the kernels take every 2-D argument's strides."""
        if 0 in grid:
            return nothing
        run = kernel.interpret[grid] if self.kind == "numpy" else kernel[grid]
        return functools.partial(run, num_warps=num_warps, strided=True, **constexprs)

    def here(self) -> Callable[[], bool]:
        """Whether the current device is the arrays' (a plan replays only there)."""
        if self.kind == "numpy":
            return always
        from ..runtime import launch

        index = self.first.device.index if self.kind == "torch" else self.first.device.id
        get_device = launch.get_device
        return lambda: get_device() == index

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


def nothing(*args: Any) -> None:
    """A plan step that does nothing (no weights to copy, no check to repeat)."""
    return None


def always() -> bool:
    """A plan's device check where the arrays live on no device (the interpreter)."""
    return True


def describe(a: Any) -> str:
    kind = _kind(a)
    return {"torch-cpu": "CPU torch tensor", "numpy": "NumPy array", "cupy": "CuPy array"}.get(
        kind, "torch CUDA tensor" if kind == "torch" else kind
    )


def where(interpret: bool) -> str:
    if interpret:
        return "interpret=True runs on NumPy arrays"
    return "pass CuPy arrays or torch CUDA tensors, or NumPy arrays with interpret=True"
