"""Op families from one table each: a row (name, torch reference, parameters with torch's
defaults, formulas) becomes a ``torch.library`` custom op with a backward, a functional form and
a ``torch.nn``-named Module drop-in, and a line of the docs' reference (docs/families.md).

Input: :data:`POINTWISE`, the rows of the pointwise activation family, whose kernels are
``kernels/pointwise.c``'s ``pointwise_fwd`` / ``pointwise_bwd`` (a row's ``act`` is their
``ACT`` constexpr; its parameters are their scalars ``a`` and ``b``, in order). Output:
:data:`FUNCTIONS` (``"elu"`` -> ``teeny_tx.torch.elu``), :data:`MODULES` (``"ELU"`` ->
``teeny_tx.torch.ELU``) and :func:`docs_table`. The ops are made through
:func:`teeny_tx.library.graph_ops.op`, so CUDA tensors run on the GPU and CPU tensors on the
interpreter, under autograd and ``torch.compile`` alike. Adding an activation is a row here and
a branch of each helper in ``kernels/pointwise.c``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from ..errors import TeenyError
from ..runtime.grid import cdiv
from .graph_ops import Launch, op
from .loader import module
from .torch_ops import LIB

BLOCK = 1024
KERNEL_FILE = "pointwise.c"


@dataclass(frozen=True)
class Pointwise:
    """One activation of the family: ``name`` (the op and functional name), ``module`` (the
    ``torch.nn`` class it replaces), ``act`` (the kernel's ACT), ``params`` ((name, torch's
    default), at most two, in the kernel's a, b order), and the formulas, for the docs."""

    name: str
    module: str
    act: int
    params: tuple[tuple[str, float], ...]
    forward: str
    backward: str

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
              "x if x > 0 else alpha (e^(x / alpha) - 1)", "1 if x > 0 else e^(x / alpha)"),
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
)  # fmt: skip


def _scalars(values: tuple[float, ...]) -> tuple[float, float]:
    """The kernel's (a, b) from a row's parameter values; unused slots are 0."""
    padded = (*[float(v) for v in values], 0.0, 0.0)
    return padded[0], padded[1]


def _launch(launch: Launch, kernel: str, act: int, out: torch.Tensor, *args: Any) -> None:
    n = out.numel()
    if n:
        fn = getattr(module(KERNEL_FILE), kernel)
        launch(fn, (cdiv(n, BLOCK),), out, *args, n, ACT=act, BLOCK=BLOCK)


def _typed(fn: Callable, params: list[inspect.Parameter], returns: Any) -> Callable:
    """``fn`` given the signature ``(launch, *params) -> returns`` that :func:`op` reads."""
    launch = inspect.Parameter("launch", inspect.Parameter.POSITIONAL_OR_KEYWORD)
    fn.__signature__ = inspect.Signature([launch, *params], return_annotation=returns)  # type: ignore[attr-defined]
    fn.__annotations__ = {p.name: p.annotation for p in params} | {"return": returns}
    return fn


def _param(name: str, annotation: Any) -> inspect.Parameter:
    return inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=annotation)


def _make_op(row: Pointwise) -> Callable[..., torch.Tensor]:
    """The custom op ``teeny_tx::<row.name>``: forward and backward launch pointwise.c."""
    k = len(row.params)

    def forward(launch: Launch, x: torch.Tensor, *values: float) -> torch.Tensor:
        if not x.is_floating_point():
            raise TeenyError(f"teeny_tx.torch.{row.name}: x must be a float tensor, not {x.dtype}")
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

    params = [_param("x", torch.Tensor)] + [_param(p, float) for p, _ in row.params]
    grads = [_param("out_0", torch.Tensor), _param("grad_0", torch.Tensor)]
    return op(
        f"{LIB}::{row.name}",
        _typed(forward, params, torch.Tensor),
        _typed(backward, params + grads, torch.Tensor),
        grads_for=("x",),
    )


def _make_function(row: Pointwise, custom: Callable[..., torch.Tensor]) -> Callable:
    """The functional form, ``torch.nn.functional``'s arguments and defaults (``inplace``
    aside)."""

    def function(x: torch.Tensor, *args: float, **kwargs: float) -> torch.Tensor:
        bound = signature.bind(x, *args, **kwargs)
        bound.apply_defaults()
        values = [float(bound.arguments[p]) for p, _ in row.params]
        return custom(x, *values)

    signature = inspect.Signature(
        [_param("x", torch.Tensor)]
        + [
            inspect.Parameter(
                p, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=d, annotation=float
            )
            for p, d in row.params
        ],
        return_annotation=torch.Tensor,
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


OPS: dict[str, Callable[..., torch.Tensor]] = {r.name: _make_op(r) for r in POINTWISE}
FUNCTIONS: dict[str, Callable[..., torch.Tensor]] = {
    r.name: _make_function(r, OPS[r.name]) for r in POINTWISE
}
MODULES: dict[str, type[nn.Module]] = {
    r.module: _make_module(r, FUNCTIONS[r.name]) for r in POINTWISE
}
# the generated names as this module's (teeny_tx.torch re-exports them: teeny_tx.torch.elu, .ELU)
globals().update(FUNCTIONS)
globals().update(MODULES)
__all__ = [*FUNCTIONS, *MODULES]

DOCS_BEGIN = "<!-- generated: families.pointwise (python -m teeny_tx.library.families) -->"
DOCS_END = "<!-- end generated -->"


def docs_table() -> str:
    """The docs' reference of the pointwise family, one line per row (docs/families.md)."""
    lines = [
        "| Op | Module | Parameters (torch's defaults) | Forward y | Backward dy/dx | ACT |",
        "|---|---|---|---|---|---|",
    ]
    for r in POINTWISE:
        params = ", ".join(f"`{p}={d}`" for p, d in r.params) or "none"
        lines.append(
            f"| `{r.name}` | `{r.module}` | {params} | {r.forward} | {r.backward} | {r.act} |"
        )
    return "\n".join(lines)


def docs_section() -> str:
    """:func:`docs_table` between the markers the docs page holds it in."""
    return f"{DOCS_BEGIN}\n{docs_table()}\n{DOCS_END}"


def rewrite_docs(text: str) -> str:
    """``text`` (a docs page holding the markers) with the generated section brought up to date."""
    head, _, rest = text.partition(DOCS_BEGIN)
    _, _, tail = rest.partition(DOCS_END)
    return head + docs_section() + tail


if __name__ == "__main__":  # regenerate docs/families.md's table in place
    import pathlib
    import sys

    page = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "docs/families.md")
    page.write_text(rewrite_docs(page.read_text()))
