"""The normalisation family from one table: batch, group and instance norm, each a
``torch.library`` custom op with a backward (dx, dweight, dbias), a functional form with
``torch.nn.functional``'s signature and defaults, and ``torch.nn``-named Module drop-ins.

Input: :data:`NORMS`, one row per norm: its name, the modules it serves, which elements share a
statistic (its *segment*: a channel over the batch, a group of channels of one sample, a channel
of one sample) and the torch argument that switches batch statistics on. The kernels are
``kernels/norms.c``'s (one set for the three: a row's segment is a handful of sizes).
Output: :data:`FUNCTIONS` (``"batch_norm"`` -> ``teeny_tx.torch.batch_norm``), :data:`MODULES`
(``"BatchNorm2d"`` -> ``teeny_tx.torch.BatchNorm2d``) and :func:`docs_table`.

Data are f16, bf16, f32 (and f64 on the CPU path); statistics are f32 (f64 for f64 data).
Running statistics are updated in place with momentum, the variance unbiased, as torch does;
the kernels compute the new values, which the functional form copies into the buffers.
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
from .family_ops import acc_dtype, float_tensor, grads, param, pow2, typed
from .graph_ops import Launch, op
from .loader import module
from .torch_ops import LIB

NORM_FILE = "norms.c"
BLOCK = 1024  # elements per program of the elementwise kernels and of a row tile
SEGMENT_BLOCK = 64  # segments per program of norm_combine and norm_bwd_sums


@dataclass(frozen=True)
class Norm:
    """One norm of the family: ``name`` (torch.nn.functional's), ``modules`` (the torch.nn
    classes it serves), ``segment`` (which rows of x viewed as [N, C, S] share a statistic:
    ``"channel"``, ``"group"`` or ``"instance"``), ``batch_stats`` (torch's argument that says
    whether the batch's statistics are used, None when they always are) and, for the docs, the
    elements each statistic covers and what happens to the running statistics."""

    name: str
    modules: tuple[str, ...]
    segment: str
    batch_stats: str | None
    statistics: str
    running: str

    @property
    def reference(self) -> Callable[..., torch.Tensor]:
        """torch's functional form (``torch.nn.functional.<name>``)."""
        return getattr(torch.nn.functional, self.name)


NORMS: tuple[Norm, ...] = (
    Norm("batch_norm", ("BatchNorm1d", "BatchNorm2d", "BatchNorm3d"), "channel", "training",
         "per channel, over the batch and the spatial dims",
         "training: updated with momentum (unbiased variance); eval: used"),
    Norm("group_norm", ("GroupNorm",), "group", None,
         "per sample and group of C / num_groups channels", "none"),
    Norm("instance_norm", ("InstanceNorm1d", "InstanceNorm2d"), "instance", "use_input_stats",
         "per sample and channel, over the spatial dims",
         "use_input_stats: updated with the batch's average; else used"),
)  # fmt: skip


@dataclass(frozen=True)
class Geometry:
    """x as [n, c, s] and which of its rows r = (n, c) share a statistic: segment j holds the
    rows (j // sg + o, (j % sg) * cpg + k), o < nn, k < cpg; row (n, c) is in segment
    n * sn + c // cpg (the comment of kernels/norms.c)."""

    n: int
    c: int
    s: int
    sg: int
    cpg: int
    nn: int
    sn: int

    @property
    def segments(self) -> int:
        return (self.n // self.nn) * self.sg

    @property
    def count(self) -> int:
        """Elements per segment."""
        return self.nn * self.cpg * self.s

    @property
    def segment_sizes(self) -> tuple[int, int, int, int]:
        """(C, SG, CPG, NN), the kernels' description of the segments' rows."""
        return self.c, self.sg, self.cpg, self.nn


def geometry(segment: str, shape: tuple[int, ...], groups: int) -> Geometry:
    """The segments of ``segment`` (a row's) over an input of ``shape`` [N, C, *]."""
    n, c, s = shape[0], shape[1], math.prod(shape[2:])
    if segment == "channel":
        return Geometry(n, c, s, sg=c, cpg=1, nn=n, sn=0)
    if segment == "group":
        return Geometry(n, c, s, sg=groups, cpg=c // groups, nn=1, sn=groups)
    return Geometry(n, c, s, sg=c, cpg=1, nn=1, sn=c)


def _row_tiles(rows: int, s: int) -> dict[str, Any]:
    block = min(BLOCK, pow2(s))
    return {"ROWS": min(max(1, BLOCK // block), pow2(rows)), "BLOCK": block}


def _segment_tiles(segments: int, per: int) -> dict[str, Any]:
    bj = min(SEGMENT_BLOCK, pow2(segments))
    return {"BLOCK_E": min(max(1, BLOCK // bj), pow2(per)), "BLOCK_J": bj}


def _statistics(
    launch: Launch, x: torch.Tensor, g: Geometry, eps: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(mean, var, rstd) of each segment of x: the rows' statistics, then the segments'."""
    k, acc, rows = module(NORM_FILE), acc_dtype(x), g.n * g.c
    row_mean, row_m2 = x.new_empty(rows, dtype=acc), x.new_empty(rows, dtype=acc)
    tiles = _row_tiles(rows, g.s)
    launch(k.norm_row_stats, (cdiv(rows, tiles["ROWS"]),), row_mean, row_m2, x, rows, g.s,
           **tiles)  # fmt: skip
    mean, var, rstd = (x.new_empty(g.segments, dtype=acc) for _ in range(3))
    tiles = _segment_tiles(g.segments, g.nn * g.cpg)
    launch(k.norm_combine, (cdiv(g.segments, tiles["BLOCK_J"]),), mean, var, rstd, row_mean,
           row_m2, g.segments, g.c, g.s, g.sg, g.cpg, g.nn, float(eps), **tiles)  # fmt: skip
    return mean, var, rstd


def _check(
    row: Norm,
    x: torch.Tensor,
    tensors: dict[str, torch.Tensor | None],
    groups: int,
    batch_stats: bool,
    eps: float,
) -> None:
    """A TeenyError for arguments torch refuses (its messages, teeny_tx's name)."""
    where = f"teeny_tx.torch.{row.name}"
    float_tensor(where, "input", x)
    if x.dim() < 2:
        raise TeenyError(f"{where}: input must be [N, C, *] (2 dimensions or more), not {x.dim()}")
    c = x.shape[1]
    if row.segment == "group" and (groups <= 0 or c % groups):
        raise TeenyError(
            f"{where}: the number of channels {c} must be divisible by num_groups={groups}"
        )
    for name, t in tensors.items():
        if t is None:
            continue
        float_tensor(where, name, t)
        if tuple(t.shape) != (c,):
            raise TeenyError(f"{where}: {name} must be [{c}] (one per channel), not {[*t.shape]}")
        if t.device != x.device:
            raise TeenyError(f"{where}: {name} is on {t.device}, the input on {x.device}")
    if not batch_stats and any(tensors.get(n) is None for n in ("running_mean", "running_var")):
        raise TeenyError(f"{where}: running_mean and running_var must be given in evaluation mode")
    if eps < 0 or (batch_stats and eps <= 0 and row.segment == "channel"):
        raise TeenyError(f"{where}: eps must be positive, not {eps}")
    if batch_stats and x.numel():
        g = geometry(row.segment, tuple(x.shape), groups)
        values = g.n * g.count if row.segment == "group" else g.count  # as torch counts them
        if values == 1:
            raise TeenyError(
                f"{where}: expected more than 1 value per statistic when training, got input "
                f"size {list(x.shape)}"
            )


def _make_op(row: Norm) -> Callable[..., Any]:
    """The custom op ``teeny_tx::<row.name>``: (y, mean, rstd, new running mean, new running
    var) and the backward (dx, dweight, dbias), through kernels/norms.c."""

    def forward(
        launch: Launch,
        x: torch.Tensor,
        weight: torch.Tensor,
        bias: torch.Tensor,
        running_mean: torch.Tensor | None,
        running_var: torch.Tensor | None,
        groups: int,
        batch_stats: bool,
        momentum: float,
        eps: float,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        running = {"running_mean": running_mean, "running_var": running_var}
        _check(row, x, {"weight": weight, "bias": bias, **running}, groups, batch_stats, eps)
        x, k = x.contiguous(), module(NORM_FILE)
        weight, bias = weight.contiguous(), bias.contiguous()
        if running_mean is not None and running_var is not None:
            running_mean, running_var = running_mean.contiguous(), running_var.contiguous()
        g = geometry(row.segment if batch_stats else "channel", tuple(x.shape), groups)
        y, acc = torch.empty_like(x), acc_dtype(x)
        new_mean, new_var = x.new_empty(0), x.new_empty(0)
        if not x.numel():
            stats = x.new_full((g.segments if g.nn else 0,), math.nan, dtype=acc)
            if batch_stats and running_mean is not None and running_var is not None:
                new_mean, new_var = running_mean.clone(), running_var.clone()
            return y, stats, stats.clone(), new_mean, new_var
        if batch_stats:
            mean, var, rstd = _statistics(launch, x, g, eps)
            if running_mean is not None and running_var is not None:
                new_mean, new_var = torch.empty_like(running_mean), torch.empty_like(running_var)
                repeats = 1 if row.segment == "channel" else g.n
                launch(k.norm_running, (cdiv(g.c, BLOCK),), new_mean, new_var, running_mean,
                       running_var, mean, var, g.c, repeats, float(momentum),
                       g.count / (g.count - 1), BLOCK=BLOCK)  # fmt: skip
        else:
            assert running_mean is not None and running_var is not None  # _check
            mean, rstd = x.new_empty(g.c, dtype=acc), x.new_empty(g.c, dtype=acc)
            launch(k.norm_eval_stats, (cdiv(g.c, BLOCK),), mean, rstd, running_mean,
                   running_var, g.c, float(eps), BLOCK=BLOCK)  # fmt: skip
        n = x.numel()
        launch(k.norm_apply, (cdiv(n, BLOCK),), y, x, mean, rstd, weight, bias, n, g.c, g.s,
               g.sn, g.cpg, BLOCK=BLOCK)  # fmt: skip
        return y, mean, rstd, new_mean, new_var

    def backward(
        launch: Launch, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, *rest: Any
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        groups, batch_stats = rest[2], rest[3]
        mean, rstd, dy = rest[7], rest[8], rest[11]
        x, dy, k = x.contiguous(), dy.contiguous(), module(NORM_FILE)
        dx, dw, db = torch.empty_like(x), weight.new_zeros(weight.shape), bias.new_zeros(bias.shape)
        weight = weight.contiguous()
        if not x.numel():
            return dx, dw, db
        g = geometry(row.segment if batch_stats else "channel", tuple(x.shape), groups)
        acc, rows, n = acc_dtype(x), g.n * g.c, x.numel()
        sdy, sdyx = x.new_empty(rows, dtype=acc), x.new_empty(rows, dtype=acc)
        tiles = _row_tiles(rows, g.s)
        launch(k.norm_bwd_rows, (cdiv(rows, tiles["ROWS"]),), sdy, sdyx, dy, x, mean, rstd,
               rows, g.c, g.s, g.sn, g.cpg, **tiles)  # fmt: skip
        by_channel = geometry("channel", tuple(x.shape), groups)
        tiles = _segment_tiles(g.c, g.n)
        launch(k.norm_bwd_sums, (cdiv(g.c, tiles["BLOCK_J"]),), db, dw, sdy, sdyx, weight, g.c,
               *by_channel.segment_sizes, WEIGHTED=0, **tiles)  # fmt: skip
        sg, sgx = mean, mean  # unread without TRAIN
        if batch_stats:
            sg, sgx = x.new_empty(g.segments, dtype=acc), x.new_empty(g.segments, dtype=acc)
            tiles = _segment_tiles(g.segments, g.nn * g.cpg)
            launch(k.norm_bwd_sums, (cdiv(g.segments, tiles["BLOCK_J"]),), sg, sgx, sdy, sdyx,
                   weight, g.segments, *g.segment_sizes, WEIGHTED=1, **tiles)  # fmt: skip
        launch(k.norm_bwd_dx, (cdiv(n, BLOCK),), dx, dy, x, mean, rstd, weight, sg, sgx, n, g.c,
               g.s, g.sn, g.cpg, 1.0 / g.count, TRAIN=int(batch_stats), BLOCK=BLOCK)  # fmt: skip
        return dx, dw, db

    params = [
        param("x", torch.Tensor),
        param("weight", torch.Tensor),
        param("bias", torch.Tensor),
        param("running_mean", torch.Tensor | None),
        param("running_var", torch.Tensor | None),
        param("groups", int),
        param("batch_stats", bool),
        param("momentum", float),
        param("eps", float),
    ]
    returns = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]
    return op(
        f"{LIB}::{row.name}",
        typed(forward, params, returns),
        typed(backward, params + grads(5), tuple[torch.Tensor, torch.Tensor, torch.Tensor]),
        grads_for=("x", "weight", "bias"),
    )


def _make_function(row: Norm, custom: Callable[..., Any]) -> Callable[..., torch.Tensor]:
    """The functional form: torch.nn.functional's signature and defaults; the running
    statistics, when given and batch statistics are used, updated in place."""
    signature = inspect.signature(row.reference)

    def function(*args: Any, **kwargs: Any) -> torch.Tensor:
        given = signature.bind(*args, **kwargs)
        given.apply_defaults()
        a = given.arguments
        x: torch.Tensor = a["input"]
        batch_stats = True if row.batch_stats is None else bool(a[row.batch_stats])
        running_mean, running_var = a.get("running_mean"), a.get("running_var")
        c = x.shape[1] if x.dim() >= 2 else 0
        weight, bias = a["weight"], a["bias"]
        if weight is None:
            weight = x.new_ones(c)
        if bias is None:
            bias = x.new_zeros(c)
        momentum = a.get("momentum", 0.0)
        update = None
        if batch_stats and running_mean is not None and running_var is not None:
            update = (running_mean, running_var)
            # autograd saves the op's inputs, which must not change: the copies go in
            running_mean, running_var = running_mean.clone(), running_var.clone()
        y, _, _, new_mean, new_var = custom(
            x,
            weight,
            bias,
            running_mean,
            running_var,
            int(a.get("num_groups", 1)),
            batch_stats,
            0.0 if momentum is None else float(momentum),
            float(a["eps"]),
        )
        if update is not None:
            update[0].copy_(new_mean.detach())
            update[1].copy_(new_var.detach())
        return y

    function.__signature__ = signature  # type: ignore[attr-defined]
    function.__name__ = function.__qualname__ = row.name
    function.__doc__ = (
        f"torch.nn.functional.{row.name} on kernels/{NORM_FILE}, with the gradients of input, "
        f"weight and bias: statistics {row.statistics}; running statistics: {row.running}."
    )
    return function


def _batch_forward(function: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    """torch.nn.BatchNorm*d's forward (momentum None: the cumulative average) on ``function``."""

    def forward(self: Any, input: torch.Tensor) -> torch.Tensor:
        self._check_input_dim(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:
                factor = 1.0 / float(self.num_batches_tracked)
        training = self.training or (self.running_mean is None and self.running_var is None)
        keep = not self.training or self.track_running_stats
        return function(
            input,
            self.running_mean if keep else None,
            self.running_var if keep else None,
            self.weight,
            self.bias,
            training,
            factor,
            self.eps,
        )

    return forward


def _group_forward(function: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    def forward(self: Any, input: torch.Tensor) -> torch.Tensor:
        return function(input, self.num_groups, self.weight, self.bias, self.eps)

    return forward


def _instance_forward(function: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    """torch.nn.InstanceNorm*d's ``_apply_instance_norm`` (its forward checks the input and
    adds the batch dimension of an unbatched one) on ``function``."""

    def apply(self: Any, input: torch.Tensor) -> torch.Tensor:
        return function(
            input,
            self.running_mean,
            self.running_var,
            self.weight,
            self.bias,
            self.training or not self.track_running_stats,
            self.momentum if self.momentum is not None else 0.0,
            self.eps,
        )

    return apply


# a row's segment -> (the torch.nn method its Modules override, that method on the function)
MODULE_METHODS: dict[str, tuple[str, Callable[[Callable[..., torch.Tensor]], Callable]]] = {
    "channel": ("forward", _batch_forward),
    "group": ("forward", _group_forward),
    "instance": ("_apply_instance_norm", _instance_forward),
}


def _make_module(row: Norm, name: str, function: Callable[..., torch.Tensor]) -> type[nn.Module]:
    """A subclass of ``torch.nn.<name>``: its constructor, parameters, buffers, state dict and
    repr, the normalisation on the family's op."""
    method, make = MODULE_METHODS[row.segment]
    return type(
        name,
        (getattr(nn, name),),
        {
            method: make(function),
            "__module__": "teeny_tx.torch",
            "__doc__": f"torch.nn.{name} on kernels/{NORM_FILE} (forward and backward).",
        },
    )


OPS: dict[str, Callable[..., Any]] = {r.name: _make_op(r) for r in NORMS}
FUNCTIONS: dict[str, Callable[..., torch.Tensor]] = {
    r.name: _make_function(r, OPS[r.name]) for r in NORMS
}
MODULES: dict[str, type[nn.Module]] = {
    m: _make_module(r, m, FUNCTIONS[r.name]) for r in NORMS for m in r.modules
}
globals().update(FUNCTIONS)
globals().update(MODULES)
__all__ = [*FUNCTIONS, *MODULES]


def docs_table() -> str:
    """The docs' reference of the family, one line per row (docs/families.md)."""
    lines = [
        "| Op | Modules | Statistics | Running statistics |",
        "|---|---|---|---|",
    ]
    for r in NORMS:
        modules = ", ".join(f"`{m}`" for m in r.modules)
        lines.append(f"| `{r.name}` | {modules} | {r.statistics} | {r.running} |")
    return "\n".join(lines)
