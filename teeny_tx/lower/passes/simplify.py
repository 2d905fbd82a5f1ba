"""Expression simplification: identities that leave values unchanged, removed from the IR.

Input: a typed ``ir.Kernel`` (before or after the layout pass). Output: the same kernel where
``x * 1``, ``1 * x``, ``x + 0``, ``0 + x``, ``x - 0``, ``x << 0`` and ``x >> 0`` on integers and
pointers (an integer argument equal to 1 is bound as the constant 1, so strides of 1 leave
such products behind) read ``x``. Only exact identities of integer arithmetic: a float
``x + 0.0`` turns -0.0 into +0.0, so floats are left alone. An identity is removed only where
``x`` already has the result's type (dtype and shape), so no broadcast or promotion is lost.
"""

from __future__ import annotations

import dataclasses

from .. import ir
from ..ir import Const, Expr, Op

# op -> the operand positions whose constant value makes the op the other operand
_IDENTITIES = {
    "mul": ((0, 1), (1, 1)),
    "add": ((0, 0), (1, 0)),
    "sub": ((1, 0),),
    "lshift": ((1, 0),),
    "rshift": ((1, 0),),
}


def _integral(e: Expr) -> bool:
    if e.type.is_pointer:
        return True
    dtype = e.type.scalar
    return dtype.is_int and dtype.kind != "b"


def _layout_key(e: Expr):
    return None if e.layout is None else e.layout.key


def simplify_expr(e: Expr) -> Expr:
    """``e`` with the identities removed, operands first."""
    if not isinstance(e, Op) or not e.args:
        return e
    args = tuple(simplify_expr(a) for a in e.args)
    if args != e.args:
        e = dataclasses.replace(e, args=args)
    for position, value in _IDENTITIES.get(e.op, ()):
        const, other = args[position], args[1 - position]
        if (
            isinstance(const, Const)
            and not isinstance(const.value, float)
            and const.value == value
            and _integral(e)
            and other.type == e.type
            and _layout_key(other) == _layout_key(e)
        ):
            return other
    return e


def _stmt(s: ir.Stmt) -> ir.Stmt:
    if isinstance(s, ir.Declare):
        return dataclasses.replace(s, init=simplify_expr(s.init) if s.init is not None else None)
    if isinstance(s, ir.Assign):
        return dataclasses.replace(s, value=simplify_expr(s.value))
    if isinstance(s, ir.Eval):
        return dataclasses.replace(s, expr=simplify_expr(s.expr))
    if isinstance(s, ir.If):
        return dataclasses.replace(
            s, cond=simplify_expr(s.cond), then=_stmts(s.then), orelse=_stmts(s.orelse)
        )
    if isinstance(s, ir.Loop):
        return dataclasses.replace(
            s,
            init=_stmts(s.init),
            cond=simplify_expr(s.cond) if s.cond is not None else None,
            step=_stmts(s.step),
            body=_stmts(s.body),
        )
    return s


def _stmts(stmts) -> tuple[ir.Stmt, ...]:
    return tuple(_stmt(s) for s in stmts)


def simplify(kernel: ir.Kernel) -> ir.Kernel:
    """``kernel`` with the integer identities above removed from every expression."""
    return dataclasses.replace(kernel, body=_stmts(kernel.body))
