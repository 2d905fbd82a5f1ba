"""Op families from one table each: a row (name, torch reference, parameters with torch's
defaults, formulas) becomes a ``torch.library`` custom op with a backward, a functional form and
a ``torch.nn``-named Module drop-in, and a line of the docs' reference (docs/families.md).

Input: :data:`POINTWISE`, the rows of the pointwise activation family, whose kernels are
``kernels/pointwise.c``'s ``pointwise_fwd`` / ``pointwise_bwd`` (a row's ``act`` is their
``ACT`` constexpr; its parameters are their scalars ``a`` and ``b``, in order), and
:data:`LOSSES`, the pointwise losses with torch's reductions, on ``kernels/losses.c`` (a row's
``loss`` is their ``LOSS``). Output: :data:`FUNCTIONS` (``"elu"`` -> ``teeny_tx.torch.elu``,
``"mse_loss"`` -> ``teeny_tx.torch.mse_loss``), :data:`MODULES` (``"ELU"`` ->
``teeny_tx.torch.ELU``, ``"MSELoss"``) and :func:`docs_table`. The ops are made through
:func:`teeny_tx.library.graph_ops.op`, so CUDA tensors run on the GPU and CPU tensors on the
interpreter, under autograd and ``torch.compile`` alike. Adding an activation is a row here and
a branch of each helper in ``kernels/pointwise.c``.

The sibling families (norm_families.py, pad_families.py, pool_families.py, optimizers.py)
share this pattern and the helpers of family_ops.py; this module holds the index of every
family's docs table (:data:`FAMILIES`, :func:`rewrite_docs`,
``python -m teeny_tx.library.families``).
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
from . import norm_families, optimizers, pad_families, pool_families
from .family_ops import acc_dtype, check_params, param, pow2, typed
from .graph_ops import Launch, op
from .loader import module
from .torch_ops import LIB

BLOCK = 1024
KERNEL_FILE = "pointwise.c"
LOSS_FILE = "losses.c"
REDUCTIONS = ("none", "mean", "sum")


@dataclass(frozen=True)
class Pointwise:
    """One activation of the family: ``name`` (the op and functional name), ``module`` (the
    ``torch.nn`` class it replaces), ``act`` (the kernel's ACT), ``params`` ((name, torch's
    default or None where torch has none), at most two, in the kernel's a, b order), and the
    formulas, for the docs. ``slope``: the parameter is a tensor ``weight`` of 1 or C slopes,
    one per channel, with a gradient of its own (PReLU: kernels prelu_fwd and prelu_bwd)."""

    name: str
    module: str
    act: int
    params: tuple[tuple[str, float | None], ...]
    forward: str
    backward: str
    checks: tuple[tuple[str, str], ...] = ()  # (parameter, one of CHECKS), as torch refuses
    slope: bool = False

    @property
    def reference(self) -> Callable[..., torch.Tensor]:
        """torch's functional form (``torch.nn.functional.<name>``)."""
        return getattr(torch.nn.functional, self.name)


POINTWISE: tuple[Pointwise, ...] = (
    Pointwise("elu", "ELU", 1, (("alpha", 1.0),),
              "x if x > 0 else alpha (e^x - 1)", "1 if x > 0 else alpha e^x"),
    Pointwise("selu", "SELU", 2, (),
              "scale elu(x, alpha), scale = 1.0507..., alpha = 1.6733...",
              "scale (1 if x > 0 else alpha e^x)"),
    Pointwise("celu", "CELU", 3, (("alpha", 1.0),),
              "x if x > 0 else alpha (e^(x / alpha) - 1)", "1 if x > 0 else e^(x / alpha)",
              (("alpha", "nonzero"),)),
    Pointwise("mish", "Mish", 4, (),
              "x tanh(softplus(x))", "t + x sigmoid(x) (1 - t^2), t = tanh(softplus(x))"),
    Pointwise("hardswish", "Hardswish", 5, (),
              "x min(max(x + 3, 0), 6) / 6", "0 if x <= -3, x / 3 + 1/2 if x < 3, else 1"),
    Pointwise("hardsigmoid", "Hardsigmoid", 6, (),
              "min(max(x + 3, 0), 6) / 6", "1/6 if -3 < x < 3 else 0"),
    Pointwise("hardtanh", "Hardtanh", 7, (("min_val", -1.0), ("max_val", 1.0)),
              "min(max(x, min_val), max_val)", "1 if min_val < x < max_val else 0"),
    Pointwise("softplus", "Softplus", 8, (("beta", 1.0), ("threshold", 20.0)),
              "x if beta x > threshold else log(1 + e^(beta x)) / beta",
              "1 if beta x > threshold else sigmoid(beta x)"),
    Pointwise("softsign", "Softsign", 9, (), "x / (1 + abs(x))", "1 / (1 + abs(x))^2"),
    Pointwise("tanhshrink", "Tanhshrink", 10, (), "x - tanh(x)", "tanh(x)^2"),
    Pointwise("logsigmoid", "LogSigmoid", 11, (),
              "min(x, 0) - log(1 + e^-abs(x))", "sigmoid(-x)"),
    Pointwise("sigmoid", "Sigmoid", 12, (), "1 / (1 + e^-x)", "s (1 - s), s = sigmoid(x)"),
    Pointwise("tanh", "Tanh", 13, (), "tanh(x)", "1 - tanh(x)^2"),
    Pointwise("relu6", "ReLU6", 14, (), "min(max(x, 0), 6)", "1 if 0 < x < 6 else 0"),
    Pointwise("threshold", "Threshold", 15, (("threshold", None), ("value", None)),
              "x if x > threshold else value", "1 if x > threshold else 0"),
    Pointwise("prelu", "PReLU", 16, (), "x if x > 0 else w[c] x",
              "1 if x > 0 else w[c]; dw[c] = sum of x dy where x <= 0", slope=True),
)  # fmt: skip


def _check_params(row: Pointwise | Loss, values: tuple[float, ...]) -> None:
    """A TeenyError where a parameter value is one torch refuses (the row's ``checks``)."""
    given = dict(zip([p for p, _ in row.params], values, strict=True))
    check_params(f"teeny_tx.torch.{row.name}", given, row.checks)


def _scalars(values: tuple[float, ...]) -> tuple[float, float]:
    """The kernel's (a, b) from a row's parameter values; unused slots are 0."""
    padded = (*[float(v) for v in values], 0.0, 0.0)
    return padded[0], padded[1]


def _launch(launch: Launch, kernel: str, act: int, out: torch.Tensor, *args: Any) -> None:
    n = out.numel()
    if n:
        fn = getattr(module(KERNEL_FILE), kernel)
        launch(fn, (cdiv(n, BLOCK),), out, *args, n, ACT=act, BLOCK=BLOCK)


def _make_op(row: Pointwise) -> Callable[..., torch.Tensor]:
    """The custom op ``teeny_tx::<row.name>``: forward and backward launch pointwise.c."""
    if row.slope:
        return _make_slope_op(row)
    k = len(row.params)

    def forward(launch: Launch, x: torch.Tensor, *values: float) -> torch.Tensor:
        if not x.is_floating_point():
            raise TeenyError(f"teeny_tx.torch.{row.name}: x must be a float tensor, not {x.dtype}")
        _check_params(row, values)
        x = x.contiguous()
        y = torch.empty_like(x)
        _launch(launch, "pointwise_fwd", row.act, y, x, *_scalars(values))
        return y

    def backward(launch: Launch, x: torch.Tensor, *rest: Any) -> torch.Tensor:
        values, dy = rest[:k], rest[k + 1]  # rest: parameters, the output, its gradient
        x = x.contiguous()
        dx = torch.empty_like(x)
        _launch(launch, "pointwise_bwd", row.act, dx, x, dy.contiguous(), *_scalars(values))
        return dx

    params = [param("x", torch.Tensor)] + [param(p, float) for p, _ in row.params]
    grads = [param("out_0", torch.Tensor), param("grad_0", torch.Tensor)]
    return op(
        f"{LIB}::{row.name}",
        typed(forward, params, torch.Tensor),
        typed(backward, params + grads, torch.Tensor),
        grads_for=("x",),
    )


def _slopes(row: Pointwise, x: torch.Tensor, weight: torch.Tensor) -> tuple[int, int, int]:
    """(N, C, inner): x as [N, C, inner] for ``weight``'s C slopes (C = 1: one for all)."""
    where = f"teeny_tx.torch.{row.name}"
    for name, t in (("input", x), ("weight", weight)):
        if not t.is_floating_point():
            raise TeenyError(f"{where}: {name} must be a float tensor, not {t.dtype}")
    c = weight.numel()
    if weight.dim() > 1 or c == 0:
        raise TeenyError(f"{where}: weight must be 1 or C slopes, not of shape {[*weight.shape]}")
    if c == 1:
        return 1, 1, x.numel()
    if x.dim() < 2 or x.shape[1] != c:
        raise TeenyError(
            f"{where}: {c} slopes for an input of {x.shape[1] if x.dim() >= 2 else 1} "
            "channels (dimension 1)"
        )
    return x.shape[0], c, math.prod(x.shape[2:])


def _make_slope_op(row: Pointwise) -> Callable[..., torch.Tensor]:
    """The custom op of a row whose parameter is a tensor of slopes (PReLU): y, and the
    gradients of x and of the slopes."""

    def forward(launch: Launch, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        _, c, inner = _slopes(row, x, weight)
        x, y = x.contiguous(), torch.empty_like(x.contiguous())
        n = x.numel()
        if n:
            launch(module(KERNEL_FILE).prelu_fwd, (cdiv(n, BLOCK),), y, x, weight.contiguous(),
                   n, c, inner, BLOCK=BLOCK)  # fmt: skip
        return y

    def backward(
        launch: Launch, x: torch.Tensor, weight: torch.Tensor, out: torch.Tensor, dy: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        n, c, inner = _slopes(row, x, weight)
        x, dy, w = x.contiguous(), dy.contiguous(), weight.contiguous()
        dx, dw = torch.empty_like(x), weight.new_zeros(weight.shape)
        rows, kernels = n * c, module(KERNEL_FILE)
        if not x.numel():
            return dx, dw
        part = x.new_empty(rows, dtype=acc_dtype(x))
        block = min(BLOCK, pow2(inner))
        per = min(max(1, BLOCK // block), pow2(rows))
        launch(kernels.prelu_bwd, (cdiv(rows, per),), dx, part, x, dy, w, rows, c, inner,
               ROWS=per, BLOCK=block)  # fmt: skip
        launch(kernels.prelu_wsum, (cdiv(c, 256),), dw, part, n, c, BLOCK=256)
        return dx, dw

    params = [param("x", torch.Tensor), param("weight", torch.Tensor)]
    grads = [param("out_0", torch.Tensor), param("grad_0", torch.Tensor)]
    return op(
        f"{LIB}::{row.name}",
        typed(forward, params, torch.Tensor),
        typed(backward, params + grads, tuple[torch.Tensor, torch.Tensor]),
        grads_for=("x", "weight"),
    )


def _make_function(row: Pointwise, custom: Callable[..., torch.Tensor]) -> Callable:
    """The functional form, ``torch.nn.functional``'s arguments and defaults (``inplace``
    aside); a slope row's is ``(input, weight)``."""

    def function(x: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        bound = signature.bind(x, *args, **kwargs)
        bound.apply_defaults()
        if row.slope:
            return custom(x, bound.arguments["weight"])
        values = [float(bound.arguments[p]) for p, _ in row.params]
        return custom(x, *values)

    arguments = (
        [param("weight", torch.Tensor)]
        if row.slope
        else [
            inspect.Parameter(
                p,
                inspect.Parameter.POSITIONAL_OR_KEYWORD,
                default=inspect.Parameter.empty if d is None else d,
                annotation=float,
            )
            for p, d in row.params
        ]
    )
    signature = inspect.Signature(
        [param("x", torch.Tensor), *arguments], return_annotation=torch.Tensor
    )
    function.__signature__ = signature  # type: ignore[attr-defined]
    function.__name__ = function.__qualname__ = row.name
    function.__doc__ = (
        f"{row.reference.__module__}.{row.name} on kernels/{KERNEL_FILE} (ACT={row.act}), with a "
        f"backward: y = {row.forward}; dy/dx = {row.backward}."
    )
    return function


def _make_module(row: Pointwise, function: Callable) -> type[nn.Module]:
    """A subclass of ``torch.nn.<row.module>``: the same constructor, attributes and repr,
    forward on the family's op (``inplace=True`` writes the result back into the input)."""
    base = getattr(nn, row.module)

    def forward(self: Any, x: torch.Tensor) -> torch.Tensor:
        if row.slope:
            return function(x, self.weight)
        y = function(x, *[getattr(self, p) for p, _ in row.params])
        return x.copy_(y) if getattr(self, "inplace", False) else y

    return type(
        row.module,
        (base,),
        {
            "forward": forward,
            "__module__": "teeny_tx.torch",
            "__doc__": f"torch.nn.{row.module} on kernels/{KERNEL_FILE} (forward and backward).",
        },
    )


@dataclass(frozen=True)
class Loss:
    """One loss of the loss family: ``name`` (torch.nn.functional's), ``module`` (the
    ``torch.nn`` class), ``loss`` (the kernels' LOSS), ``params`` ((name, torch's default), at
    most one: the kernels' ``a``), and the formulas of the elementwise loss and its gradient
    in the input, for the docs."""

    name: str
    module: str
    loss: int
    params: tuple[tuple[str, float], ...]
    forward: str
    backward: str
    checks: tuple[tuple[str, str], ...] = ()  # (parameter, one of CHECKS), as torch refuses

    @property
    def reference(self) -> Callable[..., torch.Tensor]:
        """torch's functional form (``torch.nn.functional.<name>``)."""
        return getattr(torch.nn.functional, self.name)


LOSSES: tuple[Loss, ...] = (
    Loss("mse_loss", "MSELoss", 1, (), "(x - t)^2", "2 (x - t)"),
    Loss("l1_loss", "L1Loss", 2, (), "abs(x - t)", "sign(x - t)"),
    Loss("smooth_l1_loss", "SmoothL1Loss", 3, (("beta", 1.0),),
         "d^2 / (2 beta) if abs(d) < beta else abs(d) - beta / 2, d = x - t",
         "d / beta if abs(d) < beta else sign(d)", (("beta", "nonnegative"),)),
    Loss("huber_loss", "HuberLoss", 4, (("delta", 1.0),),
         "d^2 / 2 if abs(d) < delta else delta (abs(d) - delta / 2), d = x - t",
         "d if abs(d) < delta else delta sign(d)", (("delta", "positive"),)),
    Loss("binary_cross_entropy_with_logits", "BCEWithLogitsLoss", 5, (),
         "(1 - t) x + log(1 + e^-x)", "sigmoid(x) - t (target: -x)"),
)  # fmt: skip


def _check_loss(name: str, x: torch.Tensor, target: torch.Tensor, reduction: str) -> None:
    where = f"teeny_tx.torch.{name}"
    if not x.is_floating_point() or x.dtype != target.dtype:
        raise TeenyError(
            f"{where}: input and target must be float tensors of one dtype, not "
            f"{x.dtype} and {target.dtype}"
        )
    if x.shape != target.shape:
        raise TeenyError(
            f"{where}: input {tuple(x.shape)} and target {tuple(target.shape)} differ in shape "
            "(broadcasting is not supported)"
        )
    if reduction not in REDUCTIONS:
        raise TeenyError(f"{where}: reduction must be one of {REDUCTIONS}, not {reduction!r}")


def _make_loss_op(row: Loss) -> Callable[..., torch.Tensor]:
    """The custom op ``teeny_tx::<row.name>``: losses.c's kernels forward and backward."""
    k = len(row.params)

    def forward(launch: Launch, x: torch.Tensor, target: torch.Tensor, *rest: Any) -> torch.Tensor:
        values, reduction = rest[:k], rest[k]
        _check_loss(row.name, x, target, reduction)
        _check_params(row, values)
        x, target = x.contiguous(), target.contiguous()
        n, (a, _) = x.numel(), _scalars(values)
        kernels = module(LOSS_FILE)
        if reduction == "none":
            out = torch.empty_like(x)
            if n:
                launch(kernels.loss_none, (cdiv(n, BLOCK),), out, x, target, a, n,
                       LOSS=row.loss, BLOCK=BLOCK)  # fmt: skip
            return out
        count = float(n) if reduction == "mean" else 1.0
        if not n:  # torch: the mean of nothing is NaN, the sum 0
            return x.new_full((), float("nan") if reduction == "mean" else 0.0)
        parts = cdiv(n, BLOCK)
        part = x.new_empty(parts, dtype=acc_dtype(x))
        out = x.new_empty(())
        launch(kernels.loss_partial, (parts,), part, x, target, a, n, LOSS=row.loss, BLOCK=BLOCK)
        launch(kernels.loss_total, (1,), out, part, parts, count, BLOCK=BLOCK)
        return out

    def backward(
        launch: Launch, x: torch.Tensor, target: torch.Tensor, *rest: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        values, reduction, grad = rest[:k], rest[k], rest[k + 2]
        x, target = x.contiguous(), target.contiguous()
        n, (a, _) = x.numel(), _scalars(values)
        dx, dt = torch.empty_like(x), torch.empty_like(target)
        if n:
            count = float(n) if reduction == "mean" else 1.0
            launch(module(LOSS_FILE).loss_bwd, (cdiv(n, BLOCK),), dx, dt, x, target,
                   grad.contiguous(), a, count, n, LOSS=row.loss,
                   REDUCED=int(reduction != "none"), BLOCK=BLOCK)  # fmt: skip
        return dx, dt

    params = (
        [param("x", torch.Tensor), param("target", torch.Tensor)]
        + [param(p, float) for p, _ in row.params]
        + [param("reduction", str)]
    )
    grads = [param("out_0", torch.Tensor), param("grad_0", torch.Tensor)]
    return op(
        f"{LIB}::{row.name}",
        typed(forward, params, torch.Tensor),
        typed(backward, params + grads, tuple[torch.Tensor, torch.Tensor]),
        grads_for=("x", "target"),
    )


def _make_loss_function(row: Loss, custom: Callable[..., torch.Tensor]) -> Callable:
    """The functional form: ``(input, target, *, reduction='mean', <parameters>)``, torch's
    names and defaults, keyword-only past the target (torch's positional orders differ)."""

    def function(input: torch.Tensor, target: torch.Tensor, **kwargs: Any) -> torch.Tensor:
        bound = signature.bind(input, target, **kwargs)
        bound.apply_defaults()
        values = [float(bound.arguments[p]) for p, _ in row.params]
        return custom(input, target, *values, bound.arguments["reduction"])

    keyword = inspect.Parameter.KEYWORD_ONLY
    signature = inspect.Signature(
        [param("input", torch.Tensor), param("target", torch.Tensor)]
        + [inspect.Parameter("reduction", keyword, default="mean", annotation=str)]
        + [inspect.Parameter(p, keyword, default=d, annotation=float) for p, d in row.params],
        return_annotation=torch.Tensor,
    )
    function.__signature__ = signature  # type: ignore[attr-defined]
    function.__name__ = function.__qualname__ = row.name
    function.__doc__ = (
        f"torch.nn.functional.{row.name} on kernels/{LOSS_FILE} (LOSS={row.loss}), with the "
        f"gradients of input and target: l = {row.forward}; dl/dx = {row.backward}."
    )
    return function


def _make_loss_module(row: Loss, function: Callable) -> type[nn.Module]:
    """A subclass of ``torch.nn.<row.module>`` (same constructor, attributes and repr) whose
    forward is the family's op; BCEWithLogitsLoss's ``weight`` and ``pos_weight`` are refused."""
    base = getattr(nn, row.module)

    def forward(self: Any, input: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        for extra in ("weight", "pos_weight"):
            if getattr(self, extra, None) is not None:
                raise TeenyError(f"teeny_tx.torch.{row.module}: {extra} is not supported")
        params = {p: getattr(self, p) for p, _ in row.params}
        return function(input, target, reduction=self.reduction, **params)

    return type(
        row.module,
        (base,),
        {
            "forward": forward,
            "__module__": "teeny_tx.torch",
            "__doc__": f"torch.nn.{row.module} on kernels/{LOSS_FILE} (forward and backward).",
        },
    )


OPS: dict[str, Callable[..., torch.Tensor]] = {r.name: _make_op(r) for r in POINTWISE}
OPS |= {r.name: _make_loss_op(r) for r in LOSSES}
FUNCTIONS: dict[str, Callable[..., torch.Tensor]] = {
    r.name: _make_function(r, OPS[r.name]) for r in POINTWISE
}
FUNCTIONS |= {r.name: _make_loss_function(r, OPS[r.name]) for r in LOSSES}
MODULES: dict[str, type[nn.Module]] = {
    r.module: _make_module(r, FUNCTIONS[r.name]) for r in POINTWISE
}
MODULES |= {r.module: _make_loss_module(r, FUNCTIONS[r.name]) for r in LOSSES}
# the generated names as this module's (teeny_tx.torch re-exports them: teeny_tx.torch.elu, .ELU)
globals().update(FUNCTIONS)
globals().update(MODULES)
__all__ = [*FUNCTIONS, *MODULES]

# every family's docs table: this module's two, then its siblings' (each its module's docs_table)
SIBLINGS: dict[str, Callable[[], str]] = {
    "norms": norm_families.docs_table,
    "padding": pad_families.docs_table,
    "pooling": pool_families.docs_table,
    "optimizers": optimizers.docs_table,
}
FAMILIES = ("pointwise", "losses", *SIBLINGS)
DOCS_END = "<!-- end generated -->"


def docs_begin(family: str) -> str:
    """The marker line that opens ``family``'s generated table in the docs."""
    return f"<!-- generated: families.{family} (python -m teeny_tx.library.families) -->"


def docs_table(family: str = "pointwise") -> str:
    """The docs' reference of ``family``, one line per row (docs/families.md)."""
    if family in SIBLINGS:
        return SIBLINGS[family]()
    if family == "losses":
        lines = [
            "| Op | Module | Parameters (torch's defaults) | Loss l(x, t) | dl/dx | LOSS |",
            "|---|---|---|---|---|---|",
        ]
        rows: tuple[Pointwise | Loss, ...] = LOSSES
    else:
        lines = [
            "| Op | Module | Parameters (torch's defaults) | Forward y | Backward dy/dx | ACT |",
            "|---|---|---|---|---|---|",
        ]
        rows = POINTWISE
    for r in rows:
        kinds = dict(r.checks)
        params = ", ".join(
            (f"`{p}`" if d is None else f"`{p}={d}`")
            + (f" ({kinds[p].replace('non', 'non-')})" if p in kinds else "")
            for p, d in r.params
        )
        if isinstance(r, Pointwise) and r.slope:
            params = "`weight` (1 or C slopes, learnt)"
        number = r.loss if isinstance(r, Loss) else r.act
        lines.append(
            f"| `{r.name}` | `{r.module}` | {params or 'none'} | {r.forward} | {r.backward} "
            f"| {number} |"
        )
    return "\n".join(lines)


def docs_section(family: str = "pointwise") -> str:
    """:func:`docs_table` between the markers the docs page holds it in."""
    return f"{docs_begin(family)}\n{docs_table(family)}\n{DOCS_END}"


def rewrite_docs(text: str) -> str:
    """``text`` (a docs page holding the markers) with every generated section up to date."""
    for family in FAMILIES:
        head, found, rest = text.partition(docs_begin(family))
        if found:
            _, _, tail = rest.partition(DOCS_END)
            text = head + docs_section(family) + tail
    return text


if __name__ == "__main__":  # regenerate docs/families.md's tables in place
    import pathlib
    import sys

    page = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "docs/families.md")
    page.write_text(rewrite_docs(page.read_text()))
