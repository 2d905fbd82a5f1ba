"""What the builder's op modules (memory_ops, shape_ops, reduction_ops, dot_ops, debug_ops) use
of the builder: declared once, so that each use is checked.

Input: nothing (a declaration). Output: :class:`LoweringContext`, the base of every op mixin
and so of :class:`~teeny_tx.lower.build.builder.Builder`, which implements the methods (the
shape helpers are ShapeOps'). A mixin that needs more of the builder declares it here first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...dtypes import DType
from ...errors import Location
from ...parse import Unit
from .. import ir
from ..ir import Expr
from .signature import Spec


@dataclass(frozen=True)
class TupleValue:
    """A tuple of values (``(a, b)``, a multi-operand reduction's result, a helper's ``return
    (a, b);``): a builder value, never an IR node. A variable declared from one holds one IR
    variable per item; ``r[k]`` reads item k."""

    items: tuple[Expr, ...]
    loc: Location


class LoweringContext:
    """The builder as its op mixins see it: the specialisation, the statement blocks being
    built, and the helpers that type argument nodes."""

    unit: Unit  # the parsed file
    spec: Spec  # what this specialisation fixes
    index: DType  # i32, or i64 for 64-bit indexing
    blocks: list[list[ir.Stmt]]  # the statement lists being built, innermost last

    def loc(self, node: Any) -> Location:
        """The source location of a pycparser node."""
        raise NotImplementedError

    def expr(self, node: Any) -> Expr:
        """The typed IR of an expression node."""
        raise NotImplementedError

    def value(self, node: Any) -> Expr | TupleValue:
        """The typed IR of an expression node where a tuple may stand (a declaration's value,
        an assignment's, a helper's return, the input of reduce and associative_scan)."""
        raise NotImplementedError

    def fresh(self, base: str) -> str:
        """A generated name (``tx_<base>``, then ``tx_<base>_1``...)."""
        raise NotImplementedError

    def emit(self, s: ir.Stmt) -> None:
        """Append a statement to the innermost block being built."""
        raise NotImplementedError

    def constant(self, node: Any, what: str, integer: bool = True) -> Any:
        """The compile-time value of an expression node (a located error where it has none):
        an integer (or truth value) unless ``integer`` is False."""
        raise NotImplementedError

    def apply(self, name: str, args: list[Expr], loc: Location) -> Expr:
        """The op-table entry ``name`` applied to typed operands (its typing rule)."""
        raise NotImplementedError

    def inline(
        self, name: str, arg_nodes: Any, loc: Location, statement: bool
    ) -> Expr | TupleValue | None:
        """A call of a helper function of the file, inlined."""
        raise NotImplementedError

    def tile_arg(self, node: Any, what: str) -> Expr:
        """An argument that must be a tile (ShapeOps)."""
        raise NotImplementedError

    def axis_arg(self, node: Any, rank: int, what: str, extra: int = 0) -> int:
        """A constant axis argument, checked against ``rank`` (ShapeOps)."""
        raise NotImplementedError

    def _flip(self, x: Expr, axis: int, loc: Location) -> Expr:
        """``x`` reversed along ``axis`` (ShapeOps; the scans reuse it)."""
        raise NotImplementedError
