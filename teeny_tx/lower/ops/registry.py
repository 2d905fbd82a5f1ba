"""The op table's registry: :class:`OpDef`, the table ``OPS`` and the node builder ``make``.

Input: entries declared by the op modules (``table.py``, ``random.py``) through
:func:`define`. Output: ``OPS``, name -> :class:`OpDef`, and :func:`make`, which builds the typed
node of an entry (folded to a constant when every operand is one). Consumers import ``OPS``
from ``table.py``, which imports every op module, so the table is complete.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...dtypes import DType
from ...errors import Location
from ..ir import Const, Elem, Expr, Op, Type
from . import typing as ty

# The op families: what each kind of entry is, one line each (the reference and the emitter
# group entries by them; every entry names one).
FAMILIES: dict[str, str] = {
    "operator": "C operators on scalars and tiles (the builder maps each symbol to its entry)",
    "elementwise": "functions applied element by element, with a CUDA spelling and NumPy twin",
    "cast": "conversions between dtypes (C casts, typed declarations)",
    "random": "Philox counter-based random numbers, elementwise in (seed, offset)",
    "grid": "the program's position in the launch grid",
    "creation": "new tiles: ranges and fills",
    "memory": "loads and stores through pointers, masked",
    "atomic": "atomic read-modify-writes through pointers, with memory order and scope",
    "shape": "tiles rearranged: new axes, broadcasts, reshapes, transposes, joins, splits",
    "reduction": "reductions along an axis or over the whole tile",
    "scan": "inclusive scans along an axis",
    "dot": "matrix products on tensor cores",
    "debug": "compile-time checks and debug-build printing and assertions",
}


@dataclass(frozen=True)
class OpDef:
    """One operation: a DSL entry (``prelude=True``: the prelude declares it), a C operator
    (``symbol``), or an IR operation the builder inserts (``prelude=False``).

    Who handles it, as fields (tests/test_facts.py checks each handler exists):

    - ``rule``: the typing rule (operands -> typed node) of an elementwise entry; entries
      without one are typed by the builder method ``builder_method`` (``call_<name>``, which
      reads the argument nodes: constant arguments, a type name);
    - ``lowers_to``: the IR ops the builder produces for a call (default: the entry's own
      name; ``()``: none, e.g. ``static_assert``); each is an entry of the table;
    - ``interp_method``: the interpreter's method for the IR op (default ``op_<name>`` where
      there is no ``numpy`` twin; NumPy entries run through the generic elementwise path);
    - ``emit_method``: the emitter's method for the IR op (None where ``cuda`` spells it).
    """

    name: str
    doc: str
    arity: tuple[int, int]
    rule: Callable[..., Expr] | None
    cuda: str | Callable[[Elem], str] | None = None
    numpy: Callable[..., Any] | None = None
    prelude: bool = True
    symbol: str | None = None  # the C operator, for operator entries
    family: str = "elementwise"  # a key of FAMILIES
    lowers_to: tuple[str, ...] | None = None
    interp: str | None = None  # overrides the default interp_method
    emit: str | None = None  # the emitter method, where cuda does not spell the op

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise ValueError(f"op {self.name}: unknown family {self.family!r}")

    @property
    def elementwise(self) -> bool:
        return self.cuda is not None

    @property
    def ir_ops(self) -> tuple[str, ...]:
        return (self.name,) if self.lowers_to is None else self.lowers_to

    @property
    def builder_method(self) -> str | None:
        return f"call_{self.name}" if self.rule is None and self.prelude else None

    @property
    def interp_method(self) -> str | None:
        if self.interp is not None:
            return self.interp
        return f"op_{self.name}" if self.numpy is None else None

    @property
    def emit_method(self) -> str | None:
        return self.emit

    def cuda_format(self, dtype: Elem) -> str:
        assert self.cuda is not None, f"{self.name} has no CUDA spelling"
        return self.cuda(dtype) if callable(self.cuda) else self.cuda


OPS: dict[str, OpDef] = {}


def define(
    name: str, doc: str, arity: tuple[int, int] | int, rule, cuda=None, numpy=None, **kw
) -> None:
    """Add an entry to OPS (C operators, those with a ``symbol``, are family "operator")."""
    if isinstance(arity, int):
        arity = (arity, arity)
    if kw.get("symbol") and "family" not in kw:
        kw["family"] = "operator"
    OPS[name] = OpDef(name, doc, arity, rule, cuda, numpy, **kw)


def make(name: str, args: list[Expr], type_: Type, loc: Location, attrs: tuple = ()) -> Expr:
    """An Op node, folded to a Const when every operand is a constant."""
    consts = [a for a in args if isinstance(a, Const)]
    numpy = OPS[name].numpy
    if len(consts) == len(args) and numpy is not None and not type_.is_tile:
        dtype = type_.dtype
        assert isinstance(dtype, DType)
        with np.errstate(all="ignore"):
            values = [np.array(a.value, dtype=a.type.dtype.np) for a in consts]  # type: ignore[union-attr]
            result = numpy(*values)
        value = np.asarray(result).astype(dtype.np).item()
        if dtype.is_float:
            value = float(value)
        elif dtype.kind == "b":
            value = bool(value)
        else:
            value = int(value)
        weak = all(a.weak for a in consts)
        return Const(type=type_, loc=loc, value=value, weak=weak)
    if type_.is_tile:
        args = [ty.broadcast_to(a, type_.shape) for a in args]
    return Op(type=type_, loc=loc, op=name, args=tuple(args), attrs=attrs)
