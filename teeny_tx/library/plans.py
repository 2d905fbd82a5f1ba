"""Plans: replays of the kernel library's repeated calls.

A call whose arrays have the shapes, strides, dtypes and device of an earlier one replays
that call's plan: the function the earlier call built after checking its arguments and
choosing its launches. A plan is made by a ``make(*launches)`` of each wrapper: its first run
launches through the kernels' launchers (every argument checked) with :class:`Launch`es that
remember their arguments; the plan kept for the key is ``make`` of their direct launches
(``Kernel.direct``: the specialisation looked up once, each launch's pointers' alignment and
varying scalars rechecked, anything else sent back to the launcher). A replay is one dict
look-up, the device check, the allocations and the direct launches. A plan replays only
while its arrays' device is current (else the call takes the full path, on the arrays'
device). :data:`PLANS` is the library's one plan cache: :mod:`teeny_tx.library.nn`,
:mod:`teeny_tx.library.fused`, :mod:`teeny_tx.library.attention` and
:mod:`teeny_tx.library.linalg` (its products key on :func:`aligned_signature`) keep their
plans in it; every key holds the arrays' devices (their signatures do).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cupy import ndarray as _CupyArray

from .. import switches
from ..kernel import Kernel
from ..runtime import launch as launch_module
from ..runtime.memory import TORCH_TENSOR
from .arrays import Arrays


class PlanCache(dict):
    """key -> plan, emptied when a specialise-time switch (``teeny_tx/switches.py``) has
    changed since the last look-up: a plan holds the specialisations made under the switches
    of its first call, and a replay must not launch them after a switch is flipped. The check
    is one :func:`switches.fingerprint` (~0.2 us) per look-up."""

    def __init__(self) -> None:
        super().__init__()
        self.switches = switches.fingerprint()

    def get(self, key: Any, default: Any = None) -> Any:
        now = switches.fingerprint()
        if now != self.switches:
            self.clear()
            self.switches = now
        return dict.get(self, key, default)


# key -> (device, plan) for planned(); linalg's products keep plans that check their device
# themselves (their keys begin with the function's name, as every key does)
PLANS: PlanCache = PlanCache()
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


def aligned_signature(x: Any) -> tuple | None:
    """:func:`signature` with each array's address mod 16 and its library (the products'
    plans, whose launches do not recheck alignment); ``()`` for None (no bias)."""
    if x is None:
        return ()
    kind = type(x)
    if kind is _CupyArray:  # the common cases first: no module-name tests
        return ("cupy", x.shape, x.strides, x.dtype.char, x.data.ptr % 16, x.data.device_id)
    torch = TORCH_TENSOR[0]
    if kind is torch and x.is_cuda:
        return ("torch", x.shape, x.stride(), x.dtype, x.data_ptr() % 16, x.get_device())
    module_name = kind.__module__
    if module_name.startswith("cupy"):
        return ("cupy", x.shape, x.strides, x.dtype.char, x.data.ptr % 16, x.device.id)
    if module_name.startswith("torch") and x.is_cuda:  # torch.Size is a tuple; device index
        return ("torch", x.shape, x.stride(), x.dtype, x.data_ptr() % 16, x.get_device())
    return None


def keep(plans: dict, key: tuple, plan: Any) -> None:
    """Keep ``plan`` for ``key`` in ``plans`` (:data:`PLANS`, or a test's own), emptied
    when it holds :data:`MAX_PLANS`."""
    if len(plans) >= MAX_PLANS:
        plans.clear()
    plans[key] = plan


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
            first = arrays.first  # the plan holds its device's index, not the array
            device = first.device.index if arrays.kind == "torch" else first.device.id
            keep(PLANS, key, (device, plan))
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
