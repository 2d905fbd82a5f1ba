"""The padding family from one table: ``torch.nn.functional.pad``'s four modes over the last
one, two or three dimensions, each a ``torch.library`` custom op with a backward, the
functional form ``pad`` with F.pad's signature, and the ``torch.nn`` padding Modules.

Input: :data:`PADS`, one row per mode: its name (F.pad's), the kernels' MODE
(``kernels/pad.c``), the Modules torch has for it, and for the docs the input index an output
index reads and the pads torch allows. Output: :data:`FUNCTIONS` (``"pad"``), :data:`MODULES`
(``"ReflectionPad2d"`` -> ``teeny_tx.torch.ReflectionPad2d``) and :func:`docs_table`.

The pad tuple is torch's: ``(left, right)`` of the last dimension first, then of the one
before; a negative pad crops. The arguments torch refuses are refused with a TeenyError that
says why (torch's conditions, teeny_tx's words).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from ..errors import TeenyError
from ..runtime.grid import cdiv
from .family_ops import acc_dtype, float_tensor, grads, param, typed
from .graph_ops import Launch, op
from .loader import module
from .torch_ops import LIB

PAD_FILE = "pad.c"
BLOCK = 1024
MAX_DIMS = 3  # the kernels' padded dimensions


@dataclass(frozen=True)
class Pad:
    """One mode of F.pad: ``mode`` (its name), ``code`` (the kernels' MODE), ``modules``
    (the torch.nn classes of the mode), and for the docs the input index s that output index
    o reads (s = o - left pad) and the pads torch allows."""

    mode: str
    code: int
    modules: tuple[str, ...]
    source: str
    pads: str


PADS: tuple[Pad, ...] = (
    Pad("constant", 0, ("ConstantPad1d", "ConstantPad2d", "ConstantPad3d", "ZeroPad1d",
                        "ZeroPad2d", "ZeroPad3d"),
        "s; the value where s is outside [0, n)", "any (up to 3 dims); negative pads crop"),
    Pad("reflect", 1, ("ReflectionPad1d", "ReflectionPad2d", "ReflectionPad3d"),
        "-s if s < 0, 2 (n - 1) - s if s >= n, else s", "each < n"),
    Pad("replicate", 2, ("ReplicationPad1d", "ReplicationPad2d", "ReplicationPad3d"),
        "s clamped to [0, n - 1]", "any"),
    Pad("circular", 3, ("CircularPad1d", "CircularPad2d", "CircularPad3d"),
        "s mod n (n after negative pads crop)", "each <= n, no wrap twice"),
)  # fmt: skip
BY_MODE = {r.mode: r for r in PADS}


@dataclass(frozen=True)
class Plan:
    """x as [batch, n2, n1, n0] (n0 the last dimension) and, per dimension (fastest first),
    the kernels' sizes: inputs, outputs, left pads (circular: the positive part), periods and
    offsets (circular: what negative pads leave, and where it starts)."""

    batch: int
    sizes: tuple[int, int, int]
    outs: tuple[int, int, int]
    lows: tuple[int, int, int]
    highs: tuple[int, int, int]
    periods: tuple[int, int, int]
    offsets: tuple[int, int, int]
    shape: tuple[int, ...]  # the output's

    def scalars(self) -> tuple[int, ...]:
        return (*self.outs, *self.sizes, *self.lows, *self.periods, *self.offsets)


def _dims(shape: tuple[int, ...], pad: list[int]) -> list[tuple[int, int, int]]:
    """(size, left, right) of each padded dimension, the last dimension first."""
    return [(shape[-1 - j], pad[2 * j], pad[2 * j + 1]) for j in range(len(pad) // 2)]


def _check(row: Pad, x: torch.Tensor, pad: list[int], value: float | None) -> None:
    """A TeenyError for what F.pad refuses (and, for circular pads, what it gets wrong)."""
    where = "teeny_tx.torch.pad"
    float_tensor(where, "input", x)
    if not all(isinstance(p, int | torch.SymInt) for p in pad):
        raise TeenyError(f"{where}: pad must be a tuple of ints, not {tuple(pad)}")
    k = len(pad) // 2
    if len(pad) % 2:
        raise TeenyError(f"{where}: the pad tuple's length must be even (a left and a right "
                         f"pad per dimension), not {len(pad)}")  # fmt: skip
    if k > x.dim():
        raise TeenyError(
            f"{where}: {len(pad)} pads for a tensor of {x.dim()} dimensions (at most two per "
            "dimension)"
        )
    if k > MAX_DIMS:
        raise TeenyError(f"{where}: at most the last {MAX_DIMS} dimensions are padded, not {k}")
    if row.mode != "constant":
        if value is not None:
            raise TeenyError(f"{where}: mode {row.mode!r} takes no value argument")
        if k == 0 or x.dim() not in (k + 1, k + 2):
            raise TeenyError(
                f"{where}: mode {row.mode!r} pads the last {max(k, 1)} dimension(s) of a "
                f"{k + 1}-d or {k + 2}-d tensor ([C, *] or [N, C, *]), not of a {x.dim()}-d one"
            )
    for j, (n, lo, hi) in enumerate(_dims(tuple(x.shape), pad)):
        dim, out = x.dim() - 1 - j, n + lo + hi
        at = f"padding ({lo}, {hi}) of dimension {dim} (size {n})"
        if out < 0:
            raise TeenyError(f"{where}: the negative {at} crops more than the whole dimension")
        if row.mode == "constant":
            continue
        if n == 0:
            raise TeenyError(f"{where}: mode {row.mode!r} cannot pad the empty dimension {dim}")
        if row.mode == "reflect" and (lo >= n or hi >= n):
            raise TeenyError(f"{where}: reflect {at}: each pad must be less than the size")
        if row.mode == "circular":
            left = n - max(-lo, 0) - max(-hi, 0)  # what the negative pads leave
            if lo > n or hi > n or max(lo, 0) > left or max(hi, 0) > left:
                raise TeenyError(f"{where}: circular {at} wraps around more than once")
        if out < 1 and row.mode != "circular":
            raise TeenyError(f"{where}: {row.mode} {at} leaves an output of size {out}")


def _three(values: list[int]) -> tuple[int, int, int]:
    return values[0], values[1], values[2]


def plan(row: Pad, shape: tuple[int, ...], pad: list[int]) -> Plan:
    """The kernels' sizes for padding ``shape`` by ``pad`` in ``row``'s mode (checked)."""
    k = len(pad) // 2
    dims = _dims(shape, pad) + [(1, 0, 0)] * (MAX_DIMS - k)
    circular = row.mode == "circular"
    outs = _three([n + lo + hi for n, lo, hi in dims])
    return Plan(
        batch=math.prod(shape[: len(shape) - k]),
        sizes=_three([n for n, _, _ in dims]),
        outs=outs,
        lows=_three([max(lo, 0) if circular else lo for _, lo, _ in dims]),
        highs=_three([max(hi, 0) if circular else hi for _, _, hi in dims]),
        periods=_three([n - max(-lo, 0) - max(-hi, 0) if circular else n for n, lo, hi in dims]),
        offsets=_three([max(-lo, 0) if circular else 0 for _, lo, _ in dims]),
        shape=tuple(shape[: len(shape) - k]) + tuple(reversed(outs[:k])),
    )


def _candidates(row: Pad, n: int, n_out: int, lo: int, hi: int) -> int:
    """How many outputs may read one input along a dimension (pd_candidate's T)."""
    if row.mode == "reflect" or row.mode == "circular":
        return 3
    if row.mode == "replicate":
        return n_out if n == 1 else min(max(lo, hi, 0) + 1, n_out)
    return 1


def _backward(launch: Launch, row: Pad, p: Plan, x: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
    """dx: the adjoint of the pad, one padded dimension at a time (the last in x's dtype);
    constant pads in one launch, the forward kernel cropping dy by the negated pads."""
    k = module(PAD_FILE)
    dx = x.new_empty(x.shape)  # contiguous, whatever x's strides
    if not dy.numel():  # an empty output (or input): no gradient reaches x
        return dx.zero_()
    if row.mode == "constant":
        lows = tuple(-lo for lo in p.lows)
        scalars = (*p.sizes, *p.outs, *lows, *p.outs, 0, 0, 0)
        launch(k.pad_fwd, (cdiv(dx.numel(), BLOCK),), dx, dy, 0.0, dx.numel(), *scalars, MODE=0,
               BLOCK=BLOCK)  # fmt: skip
        return dx
    current, shape = dy, [p.batch, p.outs[2], p.outs[1], p.outs[0]]
    todo = [d for d in range(MAX_DIMS) if p.outs[d] != p.sizes[d] or p.lows[d] or p.offsets[d]]
    if not todo:
        return dx.copy_(dy.view(dx.shape))
    for d in todo:
        axis = 3 - d
        shape[axis] = p.sizes[d]
        last = d == todo[-1]
        out = dx if last else current.new_empty(shape, dtype=acc_dtype(x))
        inner = math.prod(shape[axis + 1 :])
        count = _candidates(row, p.sizes[d], p.outs[d], p.lows[d], p.highs[d])
        n = out.numel()
        launch(k.pad_bwd_dim, (cdiv(n, BLOCK),), out, current, n, p.sizes[d], p.outs[d], inner,
               p.lows[d], p.periods[d], p.offsets[d], count, MODE=row.code,
               BLOCK=BLOCK)  # fmt: skip
        current = out
    return dx


def _make_op(row: Pad) -> Callable[..., torch.Tensor]:
    """The custom op ``teeny_tx::pad_<mode>``: kernels/pad.c forward and backward."""

    def forward(launch: Launch, x: torch.Tensor, pad: list[int], value: float) -> torch.Tensor:
        _check(row, x, list(pad), None if row.mode != "constant" else value)
        p = plan(row, tuple(x.shape), list(pad))
        x, y = x.contiguous(), x.new_empty(p.shape)
        n = y.numel()
        if n:
            launch(module(PAD_FILE).pad_fwd, (cdiv(n, BLOCK),), y, x, float(value), n,
                   *p.scalars(), MODE=row.code, BLOCK=BLOCK)  # fmt: skip
        return y

    def backward(launch: Launch, x: torch.Tensor, pad: list[int], *rest: Any) -> torch.Tensor:
        p = plan(row, tuple(x.shape), list(pad))
        return _backward(launch, row, p, x, rest[2].contiguous())

    params = [param("x", torch.Tensor), param("pad", list[int]), param("value", float)]
    return op(
        f"{LIB}::pad_{row.mode}",
        typed(forward, params, torch.Tensor),
        typed(backward, params + grads(1), torch.Tensor),
        grads_for=("x",),
    )


OPS: dict[str, Callable[..., torch.Tensor]] = {r.mode: _make_op(r) for r in PADS}


def pad(
    input: torch.Tensor, pad: list[int], mode: str = "constant", value: float | None = None
) -> torch.Tensor:
    """torch.nn.functional.pad on kernels/pad.c, with a backward: ``pad`` is (left, right)
    of the last dimension, then of the one before (three dimensions at most); ``mode`` is
    ``'constant'`` (``value``, default 0), ``'reflect'``, ``'replicate'`` or ``'circular'``."""
    if mode not in BY_MODE:
        raise TeenyError(f"teeny_tx.torch.pad: mode must be one of {tuple(BY_MODE)}, not {mode!r}")
    pads = list(pad)
    _check(BY_MODE[mode], input, pads, value)  # (the op checks again: it may be called directly)
    return OPS[mode](input, pads, 0.0 if value is None else float(value))


def _make_module(row: Pad, name: str) -> type[nn.Module]:
    """A subclass of ``torch.nn.<name>`` (its constructor, ``padding``, ``value`` and repr)
    whose forward is :func:`pad` in the row's mode."""
    base = getattr(nn, name)

    def forward(self: Any, input: torch.Tensor) -> torch.Tensor:
        if hasattr(self, "_check_input_dim"):
            self._check_input_dim(input)
        value = getattr(self, "value", None) if row.mode == "constant" else None
        return pad(input, list(self.padding), row.mode, value)

    return type(
        name,
        (base,),
        {
            "forward": forward,
            "__module__": "teeny_tx.torch",
            "__doc__": f"torch.nn.{name} on kernels/{PAD_FILE} (forward and backward).",
        },
    )


FUNCTIONS: dict[str, Callable[..., torch.Tensor]] = {"pad": pad}
MODULES: dict[str, type[nn.Module]] = {
    name: _make_module(r, name) for r in PADS for name in r.modules if hasattr(nn, name)
}
globals().update(MODULES)
__all__ = [*FUNCTIONS, *MODULES]


def docs_table() -> str:
    """The docs' reference of the family, one line per mode (docs/families.md)."""
    lines = [
        "| Mode | MODE | Modules | Input index output o reads (s = o - left) | Pads |",
        "|---|---|---|---|---|",
    ]
    for r in PADS:
        modules = ", ".join(f"`{m}`" for m in r.modules)
        lines.append(f"| `{r.mode}` | {r.code} | {modules} | {r.source} | {r.pads} |")
    return "\n".join(lines)
