"""The pooling family from one table: max and average pooling in 1-d and 2-d, and the adaptive
2-d pools, each a ``torch.library`` custom op with a backward, a functional form with
``torch.nn.functional``'s parameters and defaults, and the ``torch.nn`` Module of its name.

Input: :data:`POOLS`, one row per pool: its name, its Module, max or average, 1-d or 2-d,
regular or adaptive windows, and torch's parameters with their defaults. The kernels are
``kernels/pool.c``'s ``pool_fwd`` and ``pool_bwd`` for every row (a 1-d pool is a 2-d one of
height 1). Output: :data:`FUNCTIONS` (``"max_pool2d"`` -> ``teeny_tx.torch.max_pool2d``),
:data:`MODULES` (``"MaxPool2d"``) and :func:`docs_table`.

The max pools keep the index of each maximum (h * W + w in the plane, i64, as torch's
``return_indices``); their backward routes the gradient through it. The arguments torch
refuses (a kernel larger than the padded input, padding over half the kernel, zero strides,
wrong ranks, non-float data) are a TeenyError that says why.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from ..errors import TeenyError
from ..runtime.grid import cdiv
from .family_ops import float_tensor, grads, param, typed
from .graph_ops import Launch, op
from .loader import module
from .torch_ops import LIB

POOL_FILE = "pool.c"
BLOCK = 256
REQUIRED = inspect.Parameter.empty


@dataclass(frozen=True)
class Pool:
    """One pool of the family: ``name`` (torch.nn.functional's), ``module`` (torch.nn's),
    ``kind`` (``"max"`` or ``"avg"``: the kernels' MAX), ``dims`` (1 or 2), ``adaptive`` (the
    kernels' ADAPTIVE) and ``params`` (torch's parameters after the input, with defaults;
    REQUIRED for none), and for the docs what the window is."""

    name: str
    module: str
    kind: str
    dims: int
    adaptive: bool
    params: tuple[tuple[str, Any], ...]
    window: str

    @property
    def reference(self) -> Callable[..., Any]:
        """torch's functional form (``torch.nn.functional.<name>``)."""
        return getattr(torch.nn.functional, self.name)


_MAX = (("kernel_size", REQUIRED), ("stride", None), ("padding", 0), ("dilation", 1),
        ("ceil_mode", False), ("return_indices", False))  # fmt: skip
_AVG = (("kernel_size", REQUIRED), ("stride", None), ("padding", 0), ("ceil_mode", False),
        ("count_include_pad", True))  # fmt: skip
REGULAR = "start o s - p, k positions d apart"
ADAPTIVE = "[floor(o n / out), ceil((o + 1) n / out))"

POOLS: tuple[Pool, ...] = (
    Pool("max_pool1d", "MaxPool1d", "max", 1, False, _MAX, REGULAR),
    Pool("max_pool2d", "MaxPool2d", "max", 2, False, _MAX, REGULAR),
    Pool("avg_pool1d", "AvgPool1d", "avg", 1, False, _AVG, REGULAR),
    Pool("avg_pool2d", "AvgPool2d", "avg", 2, False, (*_AVG, ("divisor_override", None)),
         REGULAR),
    Pool("adaptive_avg_pool2d", "AdaptiveAvgPool2d", "avg", 2, True,
         (("output_size", REQUIRED),), ADAPTIVE),
    Pool("adaptive_max_pool2d", "AdaptiveMaxPool2d", "max", 2, True,
         (("output_size", REQUIRED), ("return_indices", False)), ADAPTIVE),
)  # fmt: skip


@dataclass(frozen=True)
class Window:
    """The kernels' sizes, [height, width] each: kernel (adaptive: the longest window),
    stride, padding, dilation, output; and the average's divisor rule."""

    kernel: tuple[int, int]
    stride: tuple[int, int]
    padding: tuple[int, int]
    dilation: tuple[int, int]
    out: tuple[int, int]
    include_pad: bool = True
    divisor: int = 0

    def flat(self) -> list[int]:
        """The op's ``window`` argument."""
        return [*self.kernel, *self.stride, *self.padding, *self.dilation, *self.out]

    @classmethod
    def of(cls, values: list[int], include_pad: bool, divisor: int) -> Window:
        v = [int(a) for a in values]
        return cls((v[0], v[1]), (v[2], v[3]), (v[4], v[5]), (v[6], v[7]), (v[8], v[9]),
                   include_pad, divisor)  # fmt: skip


def _ints(where: str, name: str, value: Any, dims: int) -> tuple[int, ...]:
    """``value`` (an int or a tuple of ``dims`` ints, or one) as ``dims`` ints."""
    items = (value,) if isinstance(value, int) else tuple(value)
    if len(items) == 1:
        items = items * dims
    if len(items) != dims or not all(isinstance(v, int) for v in items):
        raise TeenyError(f"{where}: {name} must be an int or a tuple of {dims} ints, not {value!r}")
    return items


def _out_size(n: int, k: int, s: int, p: int, d: int, ceil_mode: bool) -> int:
    """torch's pooling output size: windows that start inside the input or its left pad."""
    out = (n + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= n + p:
        out -= 1
    return out


def _spatial(row: Pool, x: torch.Tensor) -> tuple[int, ...]:
    """The spatial sizes of x ([N, C, *] or [C, *]), checked."""
    where = f"teeny_tx.torch.{row.name}"
    float_tensor(where, "input", x)
    if x.dim() not in (row.dims + 1, row.dims + 2):
        raise TeenyError(
            f"{where}: input must be [C, {'H, W' if row.dims == 2 else 'L'}] or [N, C, "
            f"{'H, W' if row.dims == 2 else 'L'}], not {x.dim()}-d"
        )
    spatial = tuple(x.shape[-row.dims :])
    if 0 in spatial or 0 in x.shape[-row.dims - 1 : -row.dims]:
        raise TeenyError(f"{where}: input {[*x.shape]} has an empty channel or spatial dimension")
    return spatial


def window(row: Pool, x: torch.Tensor, a: dict[str, Any]) -> Window:
    """The window of ``row`` over x for torch's arguments ``a`` (bound, defaults applied)."""
    where = f"teeny_tx.torch.{row.name}"
    spatial = _spatial(row, x)
    lead = (1,) * (2 - row.dims)  # a 1-d pool is a 2-d pool of height 1
    n = (*lead, *spatial)
    if row.adaptive:
        size = a["output_size"]
        items = (size,) if size is None or isinstance(size, int) else tuple(size)
        items = items * 2 if len(items) == 1 else items
        if len(items) != 2 or not all(v is None or isinstance(v, int) for v in items):
            raise TeenyError(f"{where}: output_size must be an int or a pair, not {size!r}")
        out = tuple(n[i] if v is None else v for i, v in enumerate(items))
        if min(out) < 0:
            raise TeenyError(f"{where}: output_size must be >= 0, not {size!r}")
        longest = tuple(0 if o == 0 else -(-n[i] // o) + 1 for i, o in enumerate(out))
        return Window((longest[0], longest[1]), (1, 1), (0, 0), (1, 1), (out[0], out[1]))
    k = lead + _ints(where, "kernel_size", a["kernel_size"], row.dims)
    stride = a["stride"]  # None (or empty): the kernel's
    default = stride is None or stride in ((), [])
    s = k if default else lead + _ints(where, "stride", stride, row.dims)
    p = (0,) * len(lead) + _ints(where, "padding", a["padding"], row.dims)
    d = lead + _ints(where, "dilation", a.get("dilation", 1), row.dims)
    if min(k) <= 0 or min(s) <= 0 or min(d) <= 0:
        raise TeenyError(f"{where}: kernel_size, stride and dilation must be positive")
    if min(p) < 0:
        raise TeenyError(f"{where}: padding must be non-negative, not {a['padding']!r}")
    for i in range(2):
        half = ((k[i] - 1) * d[i] + 1) // 2
        if p[i] > half:
            raise TeenyError(
                f"{where}: padding {p[i]} is more than half the (dilated) kernel {k[i]}"
            )
    out = tuple(_out_size(n[i], k[i], s[i], p[i], d[i], a["ceil_mode"]) for i in range(2))
    if min(out) < 1:
        raise TeenyError(
            f"{where}: kernel_size {a['kernel_size']!r} is larger than the padded input "
            f"{[*spatial]} (output size {[*out[2 - row.dims :]]})"
        )
    divisor = a.get("divisor_override")
    if divisor is not None and int(divisor) == 0:
        raise TeenyError(f"{where}: divisor_override must not be zero")
    return Window((k[0], k[1]), (s[0], s[1]), (p[0], p[1]), (d[0], d[1]), (out[0], out[1]),
                  bool(a.get("count_include_pad", True)), int(divisor or 0))  # fmt: skip


def _candidates(row: Pool, n: int, w: Window, i: int) -> int:
    """How many outputs' windows may hold one input along dimension ``i`` (pool_bwd's T)."""
    if row.adaptive:
        return min(w.out[i], -(-w.out[i] // n) + 1)
    return min(w.out[i], ((w.kernel[i] - 1) * w.dilation[i]) // w.stride[i] + 1)


def _planes(x: torch.Tensor, row: Pool) -> tuple[int, int, int]:
    """(P, H, W): x as planes of H x W (a 1-d pool's H is 1)."""
    spatial = tuple(x.shape[-row.dims :])
    h, w = (1, spatial[0]) if row.dims == 1 else spatial
    return math.prod(x.shape[: -row.dims]), h, w


def _scalars(w: Window) -> tuple[int, ...]:
    return (*w.kernel, *w.stride, *w.padding, *w.dilation)


def _make_op(row: Pool) -> Callable[..., Any]:
    """The custom op ``teeny_tx::<row.name>`` of x and the resolved window (``Window.flat``):
    y, and for a max pool the indices; the backward gives dx."""
    is_max = row.kind == "max"

    def forward(
        launch: Launch, x: torch.Tensor, window: list[int], include_pad: bool, divisor: int
    ) -> Any:
        w = Window.of(list(window), include_pad, divisor)
        _spatial(row, x)
        x = x.contiguous()
        planes, h, wd = _planes(x, row)
        shape = (*x.shape[: -row.dims], *w.out[2 - row.dims :])
        y = x.new_empty(shape)
        idx = x.new_empty(shape if is_max else (1,), dtype=torch.int64)
        n = y.numel()
        if n:
            launch(module(POOL_FILE).pool_fwd, (cdiv(n, BLOCK),), y, idx, x, n, h, wd, *w.out,
                   *_scalars(w), int(w.include_pad), w.divisor, MAX=int(is_max),
                   ADAPTIVE=int(row.adaptive), BLOCK=BLOCK)  # fmt: skip
        return (y, idx) if is_max else y

    def backward(
        launch: Launch, x: torch.Tensor, window: list[int], include_pad: bool, divisor: int,
        *rest: Any,
    ) -> torch.Tensor:  # fmt: skip
        w = Window.of(list(window), include_pad, divisor)
        idx, dy = (rest[1], rest[2]) if is_max else (x.new_empty(1, dtype=torch.int64), rest[1])
        dx = x.new_empty(x.shape)
        planes, h, wd = _planes(x, row)
        n = dx.numel()
        if n:
            counts = (_candidates(row, h, w, 0), _candidates(row, wd, w, 1))
            launch(module(POOL_FILE).pool_bwd, (cdiv(n, BLOCK),), dx, dy.contiguous(), idx, n, h,
                   wd, *w.out, *_scalars(w), *counts, int(w.include_pad), w.divisor,
                   MAX=int(is_max), ADAPTIVE=int(row.adaptive), BLOCK=BLOCK)  # fmt: skip
        return dx

    params = [
        param("x", torch.Tensor),
        param("window", list[int]),
        param("include_pad", bool),
        param("divisor", int),
    ]
    returns: Any = tuple[torch.Tensor, torch.Tensor] if is_max else torch.Tensor
    return op(
        f"{LIB}::{row.name}",
        typed(forward, params, returns),
        typed(backward, params + grads(2 if is_max else 1), torch.Tensor),
        grads_for=("x",),
    )


def _make_function(row: Pool, custom: Callable[..., Any]) -> Callable[..., Any]:
    """The functional form, torch's parameters and defaults; ``return_indices=True`` gives
    (y, indices)."""
    signature = inspect.Signature(
        [param("input", torch.Tensor)]
        + [
            inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default)
            for name, default in row.params
        ]
    )

    def function(*args: Any, **kwargs: Any) -> Any:
        given = signature.bind(*args, **kwargs)
        given.apply_defaults()
        a = given.arguments
        x = a["input"]
        w = window(row, x, a)
        got = custom(x, w.flat(), w.include_pad, w.divisor)
        if row.kind != "max":
            return got
        return got if a["return_indices"] else got[0]

    function.__signature__ = signature  # type: ignore[attr-defined]
    function.__name__ = function.__qualname__ = row.name
    function.__doc__ = (
        f"torch.nn.functional.{row.name} on kernels/{POOL_FILE}, with a backward: the "
        f"{row.kind} over each window ({row.window})."
    )
    return function


def _make_module(row: Pool, function: Callable[..., Any]) -> type[nn.Module]:
    """A subclass of ``torch.nn.<row.module>`` (constructor, attributes, repr) whose forward
    is the family's function on its attributes."""
    names = [name for name, _ in row.params]

    def forward(self: Any, input: torch.Tensor) -> Any:
        return function(input, **{n: getattr(self, n) for n in names})

    return type(
        row.module,
        (getattr(nn, row.module),),
        {
            "forward": forward,
            "__module__": "teeny_tx.torch",
            "__doc__": f"torch.nn.{row.module} on kernels/{POOL_FILE} (forward and backward).",
        },
    )


OPS: dict[str, Callable[..., Any]] = {r.name: _make_op(r) for r in POOLS}
FUNCTIONS: dict[str, Callable[..., Any]] = {r.name: _make_function(r, OPS[r.name]) for r in POOLS}
MODULES: dict[str, type[nn.Module]] = {r.module: _make_module(r, FUNCTIONS[r.name]) for r in POOLS}
globals().update(FUNCTIONS)
globals().update(MODULES)
__all__ = [*FUNCTIONS, *MODULES]


def docs_table() -> str:
    """The docs' reference of the family, one line per row (docs/families.md)."""
    lines = [
        "| Op | Module | Parameters (torch's defaults) | Window of output o | Backward |",
        "|---|---|---|---|---|",
    ]
    for r in POOLS:
        params = ", ".join(f"`{n}`" if d is REQUIRED else f"`{n}={d}`" for n, d in r.params)
        back = "dy to the indexed maximum" if r.kind == "max" else "dy / divisor to the window"
        lines.append(f"| `{r.name}` | `{r.module}` | {params} | {r.window} | {back} |")
    return "\n".join(lines)
