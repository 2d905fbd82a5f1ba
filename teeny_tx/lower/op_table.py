"""The op table's registry: :class:`OpDef`, the table ``OPS`` and the node builder ``make``.

Input: entries declared by the op modules (``ops.py``, ``ops_random.py``) through
:func:`define`. Output: ``OPS``, name -> :class:`OpDef`, and :func:`make`, which builds the typed
node of an entry (folded to a constant when every operand is one). Consumers import ``OPS``
from ``ops.py``, which imports every op module, so the table is complete.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..dtypes import DType
from ..errors import Location
from . import typing as ty
from .ir import Const, Expr, Op, Type


@dataclass(frozen=True)
class OpDef:
    name: str
    doc: str
    arity: tuple[int, int]
    rule: Callable[..., Expr]
    cuda: str | Callable[[DType], str] | None = None
    numpy: Callable[..., Any] | None = None
    prelude: bool = True
    symbol: str | None = None  # the C operator, for operator entries

    @property
    def elementwise(self) -> bool:
        return self.cuda is not None

    def cuda_format(self, dtype: DType) -> str:
        return self.cuda(dtype) if callable(self.cuda) else self.cuda


OPS: dict[str, OpDef] = {}


def define(
    name: str, doc: str, arity: tuple[int, int] | int, rule, cuda=None, numpy=None, **kw
) -> None:
    if isinstance(arity, int):
        arity = (arity, arity)
    OPS[name] = OpDef(name, doc, arity, rule, cuda, numpy, **kw)


def make(name: str, args: list[Expr], type_: Type, loc: Location, attrs: tuple = ()) -> Expr:
    """An Op node, folded to a Const when every operand is a constant."""
    if (
        all(isinstance(a, Const) for a in args)
        and OPS[name].numpy is not None
        and not type_.is_tile
    ):
        dtype = type_.dtype
        with np.errstate(all="ignore"):
            values = [np.array(a.value, dtype=a.type.dtype.np) for a in args]
            result = OPS[name].numpy(*values)
        value = np.asarray(result).astype(dtype.np).item()
        if dtype.is_float:
            value = float(value)
        elif dtype.kind == "b":
            value = bool(value)
        else:
            value = int(value)
        weak = all(a.weak for a in args)
        return Const(type=type_, loc=loc, value=value, weak=weak)
    if type_.is_tile:
        args = [ty.broadcast_to(a, type_.shape) for a in args]
    return Op(type=type_, loc=loc, op=name, args=tuple(args), attrs=attrs)
