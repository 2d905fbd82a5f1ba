"""Vector width: which loads and stores move 16 bytes (or 8, 4...) per access.

Input: a layout-annotated kernel after conversion placement, and its axis info. Output: the
same kernel where every tile ``load`` and ``store`` carries attr ``vec``: the lanes one access
moves (1: lane by lane). A load is vectorised where the axis info proves its lanes contiguous
and aligned in one thread's consecutive registers, and its ``other`` is a scalar; a store
likewise, unless its layout holds copies (each element is then written by its owner only).
A vectorised access whose mask is constant over each of its groups also carries
``mask_uniform`` (one mask test per access, no lane-by-lane fallback).
"""

from __future__ import annotations

import dataclasses
from typing import overload

from .. import ir
from ..ir import Expr, Op
from .axisinfo import AxisInfo


def _width(e: Op, axis: AxisInfo) -> int:
    ptr = e.args[0]
    vec = axis.vector_width(ptr, e.layout)
    if e.op == "load":
        other = e.args[2] if e.attr("masked") else None
        return vec if other is None or not other.type.is_tile else 1
    return 1 if e.layout.replicated else vec


def _uniform(e: Op, vec: int, axis: AxisInfo) -> bool:
    """Whether a vectorised access's mask is one value over each of its groups of ``vec``
    lanes (a column mask ``cols < n`` with n divisible by the group, a row mask): one test per
    access then, a predicated 16-byte load or store with no lane-by-lane fallback."""
    if vec == 1 or not e.attr("masked"):
        return False
    mask = e.args[1] if e.op == "load" else e.args[2]
    return axis.info(mask).const % vec == 0


class _Vectorizer:
    def __init__(self, axis: AxisInfo) -> None:
        self.axis = axis

    @overload
    def expr(self, e: Expr) -> Expr: ...
    @overload
    def expr(self, e: None) -> None: ...
    def expr(self, e: Expr | None) -> Expr | None:
        if not isinstance(e, Op):
            return e
        args = tuple(self.expr(a) for a in e.args)
        if args != e.args:
            e = dataclasses.replace(e, args=args)
        if e.op in ("load", "store") and e.args[0].type.is_tile and e.attr("vec") is None:
            vec = _width(e, self.axis)
            attrs = (*e.attrs, ("vec", vec), ("mask_uniform", _uniform(e, vec, self.axis)))
            e = dataclasses.replace(e, attrs=attrs)
        return e

    def block(self, stmts) -> tuple[ir.Stmt, ...]:
        out = []
        for s in stmts:
            if isinstance(s, ir.Declare):
                s = dataclasses.replace(s, init=self.expr(s.init))
            elif isinstance(s, ir.Assign):
                s = dataclasses.replace(s, value=self.expr(s.value))
            elif isinstance(s, ir.Eval):
                s = dataclasses.replace(s, expr=self.expr(s.expr))
            elif isinstance(s, ir.If):
                s = dataclasses.replace(
                    s, cond=self.expr(s.cond), then=self.block(s.then), orelse=self.block(s.orelse)
                )
            elif isinstance(s, ir.Loop):
                s = dataclasses.replace(
                    s,
                    init=self.block(s.init),
                    cond=self.expr(s.cond),
                    step=self.block(s.step),
                    body=self.block(s.body),
                )
            out.append(s)
        return tuple(out)


def vectorize(kernel: ir.Kernel, axis: AxisInfo) -> ir.Kernel:
    """``kernel`` with the vector width of every tile load and store decided."""
    return dataclasses.replace(kernel, body=_Vectorizer(axis).block(kernel.body))
