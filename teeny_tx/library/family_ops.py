"""What the op families share (teeny_tx/library/families.py and its siblings
norm_families.py, pad_families.py, pool_families.py, optimizers.py): the typed signature that
:func:`teeny_tx.library.graph_ops.op` reads a custom op's schema from, the parameter checks
torch makes, and the sizes of the kernels' tiles.

Input: a family's row (its parameters, torch's defaults and the values torch refuses). Output:
signatures (:func:`typed`, :func:`param`), :class:`TeenyError` for a refused value
(:func:`check_params`), and :func:`pow2` / :func:`acc_dtype` for the launches.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from typing import Any

import torch

from ..errors import TeenyError

# a parameter's check (a row's ``checks``: (parameter, kind)) -> whether a value passes it
CHECKS: dict[str, Callable[[float], bool]] = {
    "nonzero": lambda v: v != 0,
    "nonnegative": lambda v: v >= 0,
    "positive": lambda v: v > 0,
}


def check_params(where: str, given: dict[str, Any], checks: Iterable[tuple[str, str]]) -> None:
    """A TeenyError naming ``where`` (``teeny_tx.torch.celu``) where a value of ``given`` fails
    its check of ``checks`` (torch refuses it too)."""
    for name, kind in checks:
        if not CHECKS[kind](given[name]):
            raise TeenyError(
                f"{where}: {name} must be {kind.replace('non', 'non-')}, not {given[name]}"
            )


def typed(fn: Callable, params: list[inspect.Parameter], returns: Any) -> Callable:
    """``fn`` given the signature ``(launch, *params) -> returns`` that ``op`` reads."""
    launch = inspect.Parameter("launch", inspect.Parameter.POSITIONAL_OR_KEYWORD)
    fn.__signature__ = inspect.Signature([launch, *params], return_annotation=returns)  # type: ignore[attr-defined]
    fn.__annotations__ = {p.name: p.annotation for p in params} | {"return": returns}
    return fn


def param(name: str, annotation: Any) -> inspect.Parameter:
    """A positional parameter ``name`` of type ``annotation`` (an op's schema argument)."""
    return inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=annotation)


def grads(outputs: int) -> list[inspect.Parameter]:
    """The backward's extra parameters: each output, then each output's gradient."""
    return [param(f"{kind}_{i}", torch.Tensor) for kind in ("out", "grad") for i in range(outputs)]


def pow2(n: int) -> int:
    """The least power of two >= n (1 for n <= 1): a tile dimension covering n."""
    return 1 << max(int(n) - 1, 0).bit_length()


def acc_dtype(x: torch.Tensor) -> torch.dtype:
    """The dtype the kernels compute in for ``x`` (acc_t): f64 for f64 data, else f32."""
    return torch.float64 if x.dtype == torch.float64 else torch.float32


def float_tensor(where: str, name: str, t: torch.Tensor) -> None:
    """A TeenyError unless ``t`` is a float tensor (f16, bf16, f32 or f64)."""
    if not t.is_floating_point():
        raise TeenyError(f"{where}: {name} must be a float tensor, not {t.dtype}")
