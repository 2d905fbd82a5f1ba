"""Layout-conversion placement: each conversion of a variable to a layout happens once, as
early as its value allows.

Input: a layout-annotated ``ir.Kernel`` (``lower/passes/layout.py`` puts a ``convert_layout`` op
wherever a variable is read in a layout other than its own). Output: the same kernel where each
such conversion of a variable is a declared tile of its own (``tx_<var>_cvt``), placed
  - before the loop, when the loop does not change the variable (loop-invariant: converted
    once, not once per iteration);
  - else before the first statement that needs it, and reused by every later statement of the
    same block (and of blocks nested in it) until the variable is assigned again.
Every conversion is a shared-memory round trip; repeating one of the same value to the same
layout is never needed. Conversions of other values (a dot's or a reduction's result) stay
where they are: the emitter computes them into a temporary of their statement.
"""

from __future__ import annotations

import dataclasses
from typing import TypeGuard, overload

from .. import ir
from ..ir import Expr, Op, Var, walk_exprs, walk_stmts
from ..names import Names

# ops the emitter computes into a temporary of their own before the statement that uses them
OWN_STATEMENT_OPS = frozenset(
    {
        "load",
        "reduce",
        "scan",
        "convert_layout",
        "permute",
        "reshape",
        "flip",
        "split",
        "cat",
        "join",
        "atomic",
        "dot",
    }
)


def var_names(e: Expr):
    """The names of the variables ``e`` reads, in order (repeats included)."""
    if isinstance(e, Var):
        yield e.name
    elif isinstance(e, Op):
        for a in e.args:
            yield from var_names(a)


def needs_statement(e: Expr) -> bool:
    """Whether ``e`` holds an op that the emitter gives a statement of its own (a load, a
    reduction, ...): such an expression cannot be copied into another place as it is."""
    return isinstance(e, Op) and (
        e.op in OWN_STATEMENT_OPS or any(needs_statement(a) for a in e.args)
    )


Key = tuple[str, tuple]


def _is_var_conversion(e: Expr) -> TypeGuard[Op]:
    return isinstance(e, Op) and e.op == "convert_layout" and isinstance(e.args[0], Var)


def _source(e: Op) -> Var:
    """The variable that a conversion of a variable (``_is_var_conversion``) converts."""
    src = e.args[0]
    assert isinstance(src, Var), "only conversions of variables are placed"
    return src


def _key(e: Op) -> Key:
    return (_source(e).name, e.layout.key)


def assigned_names(stmts) -> set[str]:
    """Variables that ``stmts`` declare or assign, nested blocks included."""
    return {s.name for s in walk_stmts(stmts) if isinstance(s, (ir.Declare, ir.Assign))}


class _Placer:
    def __init__(self, names: Names) -> None:
        self.names = names

    def declare(self, e: Op, loc, out: list[ir.Stmt], available: dict[Key, Var]) -> None:
        if _key(e) in available:
            return
        name = self.names.fresh(f"{_source(e).name}_cvt")
        out.append(ir.Declare(loc=loc, name=name, type=e.type, init=e, layout=e.layout))
        available[_key(e)] = Var(type=e.type, loc=e.loc, name=name, layout=e.layout)

    @overload
    def replace(self, e: Expr, available: dict[Key, Var]) -> Expr: ...
    @overload
    def replace(self, e: None, available: dict[Key, Var]) -> None: ...
    def replace(self, e: Expr | None, available: dict[Key, Var]) -> Expr | None:
        if e is None or not isinstance(e, Op):
            return e
        if _is_var_conversion(e) and _key(e) in available:
            return dataclasses.replace(available[_key(e)], loc=e.loc)
        args = tuple(self.replace(a, available) for a in e.args)
        return dataclasses.replace(e, args=args) if args != e.args else e

    def hoist_from(self, roots, loc, out, available, changed=frozenset()) -> None:
        """Declare (before ``out``'s next statement) each conversion in ``roots`` of a
        variable not in ``changed``."""
        for e in walk_exprs(roots):
            if _is_var_conversion(e) and _source(e).name not in changed:
                self.declare(e, loc, out, available)

    def block(self, stmts, available: dict[Key, Var]) -> tuple[ir.Stmt, ...]:
        available = dict(available)
        out: list[ir.Stmt] = []
        for s in stmts:
            if isinstance(s, ir.Loop):
                changed = assigned_names([s])
                self.hoist_from([s], s.loc, out, available, changed)
                inner = {k: v for k, v in available.items() if k[0] not in changed}
                out.append(
                    dataclasses.replace(
                        s,
                        init=tuple(self.substitute(t, inner) for t in s.init),
                        cond=self.replace(s.cond, inner),
                        step=tuple(self.substitute(t, inner) for t in s.step),
                        body=self.block(s.body, inner),
                    )
                )
                self.forget(available, changed)
            elif isinstance(s, ir.If):
                self.hoist_from([ir.Eval(loc=s.loc, expr=s.cond)], s.loc, out, available)
                out.append(
                    dataclasses.replace(
                        s,
                        cond=self.replace(s.cond, available),
                        then=self.block(s.then, available),
                        orelse=self.block(s.orelse, available),
                    )
                )
                self.forget(available, assigned_names([s]))
            elif isinstance(s, (ir.Declare, ir.Assign, ir.Eval)):
                self.hoist_from([s], s.loc, out, available)
                out.append(self.substitute(s, available))
                if isinstance(s, (ir.Declare, ir.Assign)):
                    self.forget(available, {s.name})
            else:
                out.append(s)
        return tuple(out)

    def substitute(self, s: ir.Stmt, available: dict[Key, Var]) -> ir.Stmt:
        """``s`` reading the converted tiles of ``available`` (no new declarations)."""
        if isinstance(s, ir.Declare):
            return dataclasses.replace(s, init=self.replace(s.init, available))
        if isinstance(s, ir.Assign):
            return dataclasses.replace(s, value=self.replace(s.value, available))
        if isinstance(s, ir.Eval):
            return dataclasses.replace(s, expr=self.replace(s.expr, available))
        return s

    @staticmethod
    def forget(available: dict[Key, Var], names: set[str]) -> None:
        for key in [k for k in available if k[0] in names]:
            del available[key]


def place_conversions(kernel: ir.Kernel, names: Names) -> ir.Kernel:
    """``kernel`` with every conversion of a variable declared once, where it is placed above."""
    return dataclasses.replace(kernel, body=_Placer(names).block(kernel.body, {}))
