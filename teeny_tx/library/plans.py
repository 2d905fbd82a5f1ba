"""Plans: replays of the kernel library's repeated calls.

A call whose arrays have the shapes, strides, dtypes and device of an earlier one replays
that call's plan: the function the earlier call built after checking its arguments and
choosing its launches. A plan is made by a ``make(*launches)`` of each wrapper: its first run
launches through the kernels' launchers (every argument checked) with :class:`Launch`es that
remember their arguments; the plan kept for the key is ``make`` of their direct launches
(``Kernel.direct``: the specialisation looked up once, each launch's pointers' alignment and
varying scalars rechecked, anything else sent back to the launcher). A replay is one dict
look-up, the device check, the allocations and the direct launches. A plan replays only
while its arrays' device is current (else the call takes the full path). Used by
:mod:`teeny_tx.library.nn` and :mod:`teeny_tx.library.fused`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cupy import ndarray as _CupyArray

from ..kernel import Kernel
from ..runtime import launch as launch_module
from ..runtime.memory import TORCH_TENSOR
from .arrays import Arrays

PLANS: dict[tuple, tuple[int, Callable[..., Any]]] = {}  # key -> (device, plan)
MAX_PLANS = 4096


def signature(a: Any) -> tuple | None:
    """What a plan depends on in an argument: None for anything but CuPy arrays and torch
    tensors (those calls are never replayed)."""
    kind = type(a)
    if kind is _CupyArray:  # a C-contiguous array's shape fixes its strides
        if a._c_contiguous:
            return (a.shape, a.dtype.char, a.data.device_id)
        return (a.shape, a.strides, a.dtype.char, a.data.device_id)
    if kind is TORCH_TENSOR[0]:
        if a.is_contiguous():
            return (a.shape, a.dtype, a.get_device())
        return (a.shape, a.stride(), a.dtype, a.get_device())
    return None


class Launch:
    """One kernel launch of a plan. Called, it launches through the kernel's launcher (or
    the interpreter) and remembers the arguments of a GPU launch; :meth:`fast` is then the
    direct launch of that specialisation, for the plan's replays."""

    def __init__(
        self,
        arrays: Arrays,
        kernel: Kernel,
        grid: tuple,
        num_warps: int,
        checked: tuple[str, ...] = (),
        **constexprs: Any,
    ):
        self.run = arrays.bound(kernel, grid, num_warps, **constexprs)
        self.kernel, self.grid, self.num_warps = kernel, grid, num_warps
        self.checked, self.constexprs = checked, constexprs
        self.gpu = arrays.kind != "numpy" and 0 not in grid
        self.args: tuple | None = None

    def __call__(self, *args: Any) -> None:
        self.run(*args)
        if self.gpu:
            self.args = args

    def fast(self) -> Callable[..., None]:
        """The direct launch of the remembered arguments' specialisation (enter the arrays'
        device first); the launcher itself when there was no GPU launch."""
        args, self.args = self.args, None
        if args is None:
            return self.run
        return self.kernel.direct(
            self.grid, args, self.num_warps, strided=True, checked=self.checked, **self.constexprs
        )


def planned(
    key: tuple | None, arrays: Arrays, make: Callable[..., Callable], launches: tuple, *args
) -> Any:
    """Run ``make(*launches)`` on the arrays' device; keep ``make`` of their direct launches
    as the plan of ``key`` (None: not replayable)."""
    with arrays.device():
        out = make(*launches)(*args)
        if key is not None and arrays.kind != "numpy":
            plan = make(*(launch.fast() for launch in launches))
            if len(PLANS) >= MAX_PLANS:
                PLANS.clear()
            first = arrays.first  # the plan holds its device's index, not the array
            PLANS[key] = (first.device.index if arrays.kind == "torch" else first.device.id, plan)
    return out


def plan_key(interpret: bool, fn: str, arrays: tuple, *options: Any) -> tuple | None:
    """The plan key of a call: the function, its arrays' signatures and its options (None:
    not replayable — the interpreter, or an array of another kind)."""
    if interpret:
        return None
    signatures = tuple(map(signature, arrays))
    if None in signatures:
        return None
    return (fn, *signatures, *options)


def replay(interpret: bool, fn: str, arrays: tuple, *options: Any) -> Callable | None:
    """The plan kept for a call of ``fn`` on arrays like these (the key of
    :func:`plan_key`), when its device is the current one; else None."""
    if interpret:
        return None
    hit = PLANS.get((fn, *map(signature, arrays), *options))
    if hit is not None and hit[0] == launch_module.get_device():
        return hit[1]
    return None
