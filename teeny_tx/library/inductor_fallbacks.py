"""Inductor fallbacks for teeny_tx's custom ops, registered before inductor lowers a graph.

Input: the custom ops (:func:`track` each one as it is made) and their fake implementations
(:func:`fake` registers one). Output: for every tracked op, the fallback that inductor would
create for it anyway (the op called as it is, with the layout constraint of its tags), made
explicitly before inductor meets the op.

Why: when inductor lowers a graph and meets an op with no lowering, it creates an *implicit*
fallback, and torch 2.11 first formats a log message that prints the op's arguments as inductor
IR, eagerly, whether or not the message is logged. In a model's graph that text grows
exponentially with depth: the example GPT (6 layers) under ``torch.compile`` had not finished
compiling after 200 s on the H200, every sampled stack inside that formatting (torch 2.13
formats it lazily). An op already in inductor's lowering table skips that branch.

When: on the first fake-tensor call made while inductor is imported (AOT autograd traces the
graph with fake tensors inside inductor's compile, before lowering it). Importing
``teeny_tx.torch`` does not import inductor (about 5 s); eager use never pays for this.
Inductor's tables are private API: if they are not where this expects, nothing is registered
and inductor falls back implicitly, as before.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any

import torch

OPS: list[str] = []  # qualified names ("teeny_tx::softmax") of every tracked op
_registered: set[str] = set()


def track(opdef: Any) -> Any:
    """Remember the custom op ``opdef`` (a ``torch.library.CustomOpDef``); returns it."""
    OPS.append(opdef._qualname)
    return opdef


def fake(opdef: Any) -> Callable[[Callable], Callable]:
    """``@fake(op)``: register the decorated function as ``op``'s fake implementation, calling
    :func:`ensure_registered` first."""

    def register(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def with_fallbacks(*args: Any, **kwargs: Any) -> Any:
            ensure_registered()
            return fn(*args, **kwargs)

        opdef.register_fake(with_fallbacks)  # (an Op passes it on to its custom op)
        return fn

    return register


def ensure_registered() -> None:
    """Give every tracked op not yet registered an explicit inductor fallback, once inductor is
    imported; a no-op otherwise (two lookups)."""
    if len(_registered) == len(OPS) or "torch._inductor.lowering" not in sys.modules:
        return
    try:
        from torch._inductor import lowering
        from torch._library.utils import get_layout_constraint_tag
    except ImportError:  # inductor's layout moved: leave the implicit fallback to it
        _registered.update(OPS)
        return
    for qualname in OPS:
        if qualname in _registered:
            continue
        _registered.add(qualname)
        namespace, name = qualname.split("::")
        op = getattr(getattr(torch.ops, namespace), name).default
        if op in lowering.lowerings:
            continue
        try:
            tag = get_layout_constraint_tag(op, with_default=True)
            lowering.make_fallback(
                op, layout_constraint=lowering.tag_to_layout_constraint(tag), warn=False
            )
        except Exception:  # noqa: BLE001 - private API: the implicit fallback still works
            continue
