"""The optimizer family from one table: SGD, Adam, RMSprop, Adagrad and Lion as ``torch.optim``
drop-ins whose step is one launch of ``kernels/optim.c`` per bucket of parameters.

Input: :data:`OPTIMIZERS`, one row per optimizer: its name, the torch.optim class it replaces
(its constructor, defaults, checks and ``state_dict`` are torch's), the kernel's ALGO, the
state it keeps (torch's names, in the kernel's slot order, and which options ask for each) and
the function that turns a param group into the kernel's scalars and flags. Output:
:data:`CLASSES` (``"SGD"`` -> ``teeny_tx.torch.SGD``, also ``teeny_tx.torch.optim.SGD``),
:class:`Bucket` (the flat buffers a bucket's step runs on, which AdamW shares) and
:func:`docs_table`.

``flat=True`` (the default) fuses the step: when the optimizer is made, the parameters of each
param group that share a device and dtype move into one flat buffer (each parameter becomes a
view of it; its gradient and its state become views of flat buffers too), and each such
bucket steps in one launch, whatever the number of tensors. The state is torch's: the same
keys, shapes and dtypes (the parameter's), ``step`` a float tensor, created at the first step
(Adagrad's at construction), so a state dict loads into torch's optimizer and back. A bucket
whose parameters were moved, whose state was loaded for some parameters only, or some of
whose parameters have no gradient steps tensor by tensor (one launch each), as ``flat=False``
does. Not supported (a TeenyError): ``differentiable``, ``capturable``, tensor learning rates
and betas. ``foreach`` and ``fused`` are accepted and change nothing: the step is fused.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import torch

from ..errors import TeenyError
from ..runtime.grid import cdiv
from .graph_ops import Launch
from .loader import module

OPTIM_FILE = "optim.c"
BLOCK = 1024
# the kernel's FLAGS bits
MAXIMIZE, NESTEROV, FIRST, AMSGRAD, DECOUPLED, CENTERED, MOMENTUM = 1, 2, 4, 8, 16, 32, 64


class Bucket:
    """The parameters of one param group that share a device and dtype, stored as views of one
    flat buffer, with their gradients and each named state in flat buffers of their own: the
    bucket's step is one launch, whatever the number of tensors.

    Sizes are the parameters' numbers of elements, in the group's order; ``views(flat)`` cuts a
    flat buffer into per-parameter views of their shapes; ``add_state`` makes a state's."""

    def __init__(self, params: list[torch.Tensor]):
        self.params = params
        self.sizes = [p.numel() for p in params]
        first = params[0]
        total = sum(self.sizes)
        self.param = torch.empty(total, dtype=first.dtype, device=first.device)
        self.grad = torch.zeros(total, dtype=first.dtype, device=first.device)
        for p, view in zip(params, self.views(self.param), strict=True):
            view.copy_(p.detach())
            p.data = view  # the parameter now lives in the bucket (its Module sees the same)
        self.grad_views = self.views(self.grad)
        for p, view in zip(params, self.grad_views, strict=True):
            if p.grad is not None:
                view.copy_(p.grad)
            p.grad = view  # autograd accumulates into it in place from now on
        self.states: dict[str, torch.Tensor] = {}
        self.state_views: dict[str, list[torch.Tensor]] = {}

    def views(self, flat: torch.Tensor) -> list[torch.Tensor]:
        return [v.view(p.shape) for v, p in zip(flat.split(self.sizes), self.params, strict=True)]

    def add_state(self, name: str, dtype: torch.dtype, fill: float = 0.0) -> list[torch.Tensor]:
        """A flat buffer for state ``name`` filled with ``fill``; its per-parameter views."""
        flat = torch.full_like(self.param, fill, dtype=dtype)
        self.states[name] = flat
        self.state_views[name] = self.views(flat)
        return self.state_views[name]

    def intact(self) -> bool:
        """Whether every parameter still lives in the bucket (nobody rebound ``p.data``, e.g.
        by moving the model after making the optimizer)."""
        base = self.param.data_ptr()
        offset = 0
        for p, n in zip(self.params, self.sizes, strict=True):
            if p.data_ptr() != base + offset * p.element_size():
                return False
            offset += n
        return True

    def gather_grads(self) -> set[int]:
        """Put each gradient back in the bucket where something replaced it (an assignment,
        autograd after ``p.grad = None``): copied in and the view restored. Returns the
        parameters (ids) whose gradient is None (the bucket then steps tensor by tensor,
        skipping them, as torch skips them)."""
        idle = set()
        for p, view in zip(self.params, self.grad_views, strict=True):
            if p.grad is None:
                idle.add(id(p))
            elif p.grad.data_ptr() != view.data_ptr():
                view.copy_(p.grad)
                p.grad = view
        return idle

    def zero_grad(self) -> None:
        """Zero the gradients in place (autograd accumulates into the bucket)."""
        self.grad.zero_()
        for p, view in zip(self.params, self.grad_views, strict=True):
            p.grad = view


def zero_grads(
    buckets: Iterable[Iterable[Bucket]], param_groups: list[dict], set_to_none: bool
) -> None:
    """An optimizer's zero_grad: each bucket's gradients in place (autograd accumulates into
    the bucket), any other parameter's as torch does."""
    inside: set[int] = set()
    for group_buckets in buckets:
        for bucket in group_buckets:
            bucket.zero_grad()
            inside.update(id(p) for p in bucket.params)
    for group in param_groups:
        for p in group["params"]:
            if id(p) in inside or p.grad is None:
                continue
            if set_to_none:
                p.grad = None
            else:
                p.grad.detach_().requires_grad_(False).zero_()


Settings = tuple[tuple[float, ...], int]  # the kernel's (lr, wd, a, b, c, d, e) and FLAGS


def _maximize(group: dict) -> int:
    return MAXIMIZE if group.get("maximize") else 0


def _sgd(group: dict, step: int, first: bool) -> Settings:
    momentum = group["momentum"]
    flags = _maximize(group) | (NESTEROV if group["nesterov"] else 0)
    flags |= (MOMENTUM if momentum != 0 else 0) | (FIRST if first else 0)
    return (group["lr"], group["weight_decay"], momentum, group["dampening"], 0, 0, 0), flags


def _adam(group: dict, step: int, first: bool) -> Settings:
    beta1, beta2 = group["betas"]
    lr = group["lr"]
    flags = _maximize(group) | (AMSGRAD if group["amsgrad"] else 0)
    flags |= DECOUPLED if group.get("decoupled_weight_decay") else 0
    step_size, bc2_sqrt = lr / (1 - beta1**step), math.sqrt(1 - beta2**step)
    return (lr, group["weight_decay"], beta1, beta2, group["eps"], step_size, bc2_sqrt), flags


def _rmsprop(group: dict, step: int, first: bool) -> Settings:
    momentum = group["momentum"]
    flags = _maximize(group) | (CENTERED if group["centered"] else 0)
    flags |= MOMENTUM if momentum > 0 else 0
    scalars = (group["lr"], group["weight_decay"], group["alpha"], group["eps"], momentum, 0, 0)
    return scalars, flags


def _adagrad(group: dict, step: int, first: bool) -> Settings:
    clr = group["lr"] / (1 + (step - 1) * group["lr_decay"])
    return (clr, group["weight_decay"], group["eps"], 0, 0, 0, 0), _maximize(group)


def _lion(group: dict, step: int, first: bool) -> Settings:
    beta1, beta2 = group["betas"]
    return (group["lr"], group["weight_decay"], beta1, beta2, 0, 0, 0), _maximize(group)


@dataclass(frozen=True)
class Optim:
    """One optimizer of the family: ``name``, ``torch`` (the torch.optim class it subclasses;
    None: torch has none), ``algo`` (the kernel's ALGO), ``slots`` (torch's state names in the
    kernel's s0, s1, s2 order) with ``wants`` (the option that asks for each, None: always),
    ``steps`` (whether the state counts steps), ``settings`` (param group, step, first ->
    the kernel's scalars and flags), ``fill`` (the option a state starts at, None: zeros) and
    the update, for the docs."""

    name: str
    torch: str | None
    algo: int
    slots: tuple[str, ...]
    wants: tuple[Callable[[dict], bool] | None, ...]
    steps: bool
    settings: Callable[[dict, int, bool], Settings]
    update: str
    fill: str | None = None

    def states(self, group: dict) -> tuple[str, ...]:
        """The state names ``group``'s options keep, in slot order."""
        return tuple(
            s for s, want in zip(self.slots, self.wants, strict=True) if want is None or want(group)
        )


OPTIMIZERS: tuple[Optim, ...] = (
    Optim("SGD", "SGD", 1, ("momentum_buffer",), (lambda g: g["momentum"] != 0,), False, _sgd,
          "g += wd p; buf = mu buf + (1 - dampening) g (g at first); p -= lr (nesterov ? g + "
          "mu buf : buf)"),
    Optim("Adam", "Adam", 2, ("exp_avg", "exp_avg_sq", "max_exp_avg_sq"),
          (None, None, lambda g: g["amsgrad"]), True, _adam,
          "m, v: moments of g (+ wd p, or decoupled); p -= lr / (1 - b1^t) m / (sqrt(v or "
          "max v) / sqrt(1 - b2^t) + eps)"),
    Optim("RMSprop", "RMSprop", 3, ("square_avg", "momentum_buffer", "grad_avg"),
          (None, lambda g: g["momentum"] > 0, lambda g: g["centered"]), True, _rmsprop,
          "v = alpha v + (1 - alpha) g^2; q = sqrt(v - avg(g)^2 or v) + eps; p -= lr g / q "
          "(or through a momentum buffer)"),
    Optim("Adagrad", "Adagrad", 4, ("sum",), (None,), True, _adagrad,
          "s += g^2; p -= lr / (1 + (t - 1) lr_decay) g / (sqrt(s) + eps)",
          "initial_accumulator_value"),
    Optim("Lion", None, 5, ("exp_avg",), (None,), False, _lion,
          "p *= 1 - lr wd; p -= lr sign(b1 m + (1 - b1) g); m = b2 m + (1 - b2) g"),
)  # fmt: skip


class FusedStep(torch.optim.Optimizer):
    """The step of the family's optimizers (the generated classes put it before their
    torch.optim base): one kernels/optim.c launch per bucket, or per tensor."""

    row: Optim
    flat: bool
    _buckets: list[list[Bucket]]

    def _setup(self, flat: bool) -> None:
        where = f"teeny_tx.torch.{self.row.name}"
        for group in self.param_groups:
            for option in ("differentiable", "capturable"):
                if group.get(option):
                    raise TeenyError(f"{where}: {option}=True is not supported")
            for key in ("lr", "betas"):
                values = group.get(key, ())
                for v in values if isinstance(values, tuple | list) else (values,):
                    if isinstance(v, torch.Tensor):
                        raise TeenyError(f"{where}: {key} must be floats, not tensors")
        self.flat = flat
        self._buckets = [self._group_buckets(g) for g in self.param_groups] if flat else []

    @staticmethod
    def _group_buckets(group: dict) -> list[Bucket]:
        by_kind: dict[tuple, list[torch.Tensor]] = {}
        for p in group["params"]:
            if p.requires_grad:
                by_kind.setdefault((p.device, p.dtype), []).append(p)
        return [Bucket(params) for params in by_kind.values()]

    def zero_grad(self, set_to_none: bool = True) -> None:
        zero_grads(self._buckets, self.param_groups, set_to_none)

    @torch.no_grad()
    def step(self, closure: Any = None) -> Any:
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for i, group in enumerate(self.param_groups):
            done: set[int] = set()  # stepped in a bucket's launch, or skipped (no gradient)
            for bucket in self._buckets[i] if i < len(self._buckets) else ():
                done |= self._step_bucket(bucket, group)
            for p in group["params"]:
                if p.grad is not None and id(p) not in done:
                    self._step_tensor(p, group)
        return loss

    def _step_bucket(self, bucket: Bucket, group: dict) -> set[int]:
        """One launch for the whole bucket. Returns the parameters (ids) it took care of: all
        of them, stepped; or, when some received no gradient, those (left alone) and the
        others are stepped one by one by the caller; none when a parameter left the bucket or
        the states disagree (loaded for some parameters only, different step counts)."""
        if not bucket.intact():
            return set()
        idle = bucket.gather_grads()
        if idle:
            return idle
        names = self.row.states(group)
        keeps = bool(names) or self.row.steps  # (SGD without momentum keeps nothing)
        states = [self.state[p] for p in bucket.params] if keeps else []
        fresh = [n for n in names if n not in bucket.states and not any(n in s for s in states)]
        known = [n for n in names if n not in fresh]
        if any(n not in s for n in known for s in states):
            return set()  # a state some parameters have and others lack
        step = 0
        if self.row.steps:
            counted = [float(s["step"]) for s in states if "step" in s]
            if counted and (len(counted) != len(states) or len(set(counted)) > 1):
                return set()  # the parameters have taken different numbers of steps
            step = int(counted[0]) + 1 if counted else 1
        fill = float(group[self.row.fill]) if self.row.fill else 0.0
        for name in names:
            views = bucket.state_views.get(name)
            if views is None:
                views = bucket.add_state(name, bucket.param.dtype, fill)
            for state, view in zip(states, views, strict=True):
                if name in state and state[name] is not view:  # a loaded (or torch's) state
                    view.copy_(state[name])
                state[name] = view
        if self.row.steps:  # each its own tensor, as torch's (which adds 1 to each)
            for state in states:
                if "step" in state:
                    state["step"] += 1
                else:
                    state["step"] = torch.tensor(1.0)
        flat_states = [bucket.states[n] for n in names]
        self._launch(bucket.param, bucket.grad, flat_states, names, group, step, bool(fresh))
        return {id(p) for p in bucket.params}

    def _step_tensor(self, p: torch.Tensor, group: dict) -> None:
        """One launch for one parameter, its state created as torch creates it."""
        names = self.row.states(group)
        state = self.state[p] if names or self.row.steps else {}
        fresh = [n for n in names if n not in state]
        fill = float(group[self.row.fill]) if self.row.fill else 0.0
        for name in fresh:
            state[name] = torch.full_like(p, fill, memory_format=torch.contiguous_format)
        if self.row.steps:
            state["step"] = state.get("step", torch.tensor(0.0)) + 1
        work = p.detach() if p.is_contiguous() else p.detach().contiguous()
        assert p.grad is not None  # (the caller's check)
        grad = p.grad if p.grad.is_contiguous() else p.grad.contiguous()
        buffers = [state[n] if state[n].is_contiguous() else state[n].contiguous() for n in names]
        step = int(state["step"]) if self.row.steps else 0
        self._launch(work, grad, buffers, names, group, step, bool(fresh))
        if work.data_ptr() != p.data_ptr():
            p.copy_(work)
        for name, buffer in zip(names, buffers, strict=True):
            if buffer is not state[name]:
                state[name].copy_(buffer)

    def _launch(
        self,
        p: torch.Tensor,
        grad: torch.Tensor,
        states: list[torch.Tensor],
        names: tuple[str, ...],
        group: dict,
        step: int,
        first: bool,
    ) -> None:
        n = p.numel()
        if not n:
            return
        scalars, flags = self.row.settings(group, step, first)
        slots = dict(zip(names, states, strict=True))
        buffers = [slots.get(s, p) for s in self.row.slots] + [p] * (3 - len(self.row.slots))
        launch = Launch(f"teeny_tx.torch.{self.row.name}")
        launch(module(OPTIM_FILE).optim_step, (cdiv(n, BLOCK),), p, grad, *buffers, n,
               *map(float, scalars), ALGO=self.row.algo, FLAGS=flags, BLOCK=BLOCK)  # fmt: skip


def _lion_init(
    self: Any,
    params: Iterable[Any],
    lr: float = 1e-4,
    betas: tuple[float, float] = (0.9, 0.99),
    weight_decay: float = 0.0,
    *,
    maximize: bool = False,
) -> None:
    """Lion (Chen et al., 2023), which torch.optim has not: its defaults and checks."""
    if not lr >= 0.0 or not all(0.0 <= b < 1.0 for b in betas):
        raise ValueError(f"invalid Lion settings lr={lr}, betas={betas}")
    defaults = {"lr": lr, "betas": tuple(betas), "weight_decay": weight_decay,
                "maximize": maximize}  # fmt: skip
    torch.optim.Optimizer.__init__(self, params, defaults)


def _make_class(row: Optim) -> type[torch.optim.Optimizer]:
    """``teeny_tx.torch.<row.name>``: torch.optim's class of that name (its constructor,
    defaults, checks, param groups and state dict) with the family's step, plus ``flat``."""
    base = getattr(torch.optim, row.torch) if row.torch else torch.optim.Optimizer
    make: Callable = base.__init__ if row.torch else _lion_init

    def __init__(self: Any, params: Iterable[Any], *args: Any, flat: bool = True, **kwargs: Any):
        make(self, params, *args, **kwargs)
        self._setup(flat)

    signature = inspect.signature(make)
    flat = inspect.Parameter("flat", inspect.Parameter.KEYWORD_ONLY, default=True, annotation=bool)
    __init__.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[*signature.parameters.values(), flat]
    )
    origin = f"torch.optim.{row.torch}'s" if row.torch else "the"
    return type(
        row.name,
        (FusedStep, base) if row.torch else (FusedStep,),
        {
            "__init__": __init__,
            "row": row,
            "__module__": "teeny_tx.torch",
            "__doc__": f"{origin} update ({row.update}) through kernels/{OPTIM_FILE}, one "
            "launch per bucket of parameters (flat=True) or per tensor.",
        },
    )


CLASSES: dict[str, type[torch.optim.Optimizer]] = {r.name: _make_class(r) for r in OPTIMIZERS}
globals().update(CLASSES)
__all__ = [*CLASSES]


def docs_table() -> str:
    """The docs' reference of the family, one line per optimizer (docs/families.md)."""
    lines = [
        "| Optimizer | Replaces | ALGO | State (torch's names) | Update |",
        "|---|---|---|---|---|",
    ]
    for r in OPTIMIZERS:
        state = ", ".join(f"`{s}`" for s in r.slots) + (", `step`" if r.steps else "")
        replaces = f"`torch.optim.{r.torch}`" if r.torch else "(torch has none)"
        lines.append(f"| `{r.name}` | {replaces} | {r.algo} | {state} | {r.update} |")
    return "\n".join(lines)
