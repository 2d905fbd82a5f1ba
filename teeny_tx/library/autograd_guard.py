"""The gradient guard of the array-level facades ``teeny_tx.nn`` and ``teeny_tx.linalg``.

Input: a wrapper of :mod:`teeny_tx.library.nn`, ``linalg`` or ``attention`` (it launches
kernels on arrays and records nothing for autograd) and the name of its autograd form in
``teeny_tx.torch``. Output: the same function, which first refuses the two calls that would
lose a gradient without a word: torch tensors that require grad while grad mode is on, and
any call made while ``torch.compile`` traces (Dynamo cannot trace a launch; the custom ops of
``teeny_tx.torch`` are what it can put in a graph). Both errors name the ``teeny_tx.torch``
function to call instead. torch is never imported here: without it, nothing is checked.

The library's own torch layer calls the wrappers of :mod:`teeny_tx.library` directly, not
these facades, so it pays for none of this.
"""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Callable
from typing import Any

from ..errors import TeenyError


def _instead(torch_name: str | None) -> str:
    if torch_name is None:
        return "the ops of teeny_tx.torch compute their backward themselves (loss.backward())"
    return f"use teeny_tx.torch.{torch_name}, a torch op with autograd"


def guarded(fn: Callable[..., Any], facade: str, torch_name: str | None) -> Callable[..., Any]:
    """``fn`` as ``facade``.<name>, refusing tensors that require grad and compile tracing."""
    name = f"{facade}.{fn.__name__}"
    params = list(inspect.signature(fn).parameters)
    tracing = (  # one constant string: Dynamo shows it as it is
        f"{name} launches kernels on arrays and cannot be traced by torch.compile; "
        f"{_instead(torch_name)} that torch.compile puts in its graph"
    )

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        torch = sys.modules.get("torch")
        if torch is not None:
            if torch.compiler.is_compiling():
                raise TeenyError(tracing)
            if torch.is_grad_enabled():
                for i, a in enumerate((*args, *kwargs.values())):
                    if isinstance(a, torch.Tensor) and a.requires_grad:
                        arg = list(kwargs)[i - len(args)] if i >= len(args) else params[i]
                        raise TeenyError(
                            f"{name}: {arg} requires grad, and {name} records nothing for "
                            f"autograd (its result would carry no gradient); "
                            f"{_instead(torch_name)}, or pass detached tensors "
                            "(x.detach(), torch.no_grad()) to use the arrays only"
                        )
        return fn(*args, **kwargs)

    return call
