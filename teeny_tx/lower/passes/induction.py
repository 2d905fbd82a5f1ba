"""Pointer induction: pointer tiles advanced at the end of a counted loop become closed forms.

Input: a typed kernel (``ir.Kernel``, before layouts). Output: the same kernel where a loop

    for (i32 k = k0; k < K; k += STEP) { ...uses of pa...; pa += inc; }

reads ``pa + ((k - k0) / STEP) * inc`` instead of carrying ``pa`` (``pa + (k - k0) * X`` when
``inc`` is ``STEP * X``), and no longer assigns it. The loop that Triton's matmul tutorial writes
then has the shape the software pipeliner (``pipeline.py``, and so ``warp_spec.py``) recognises:
loads whose addresses are made of the loop variable and values the loop does not change. The
meaning is unchanged (the interpreter runs the original IR; tests compare both backends).

A pointer is rewritten only when all of these hold, else the loop is left alone: the loop is a
``for`` with one integer induction variable stepped by a positive constant and never assigned
in the body; the increments are the last statements of the body, at its top level; ``inc`` is
a scalar the loop does not change; the pointer is assigned nowhere else in the loop and is not
read after the loop; the body has no ``continue`` (which would skip the increment).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ...errors import CompileError
from .. import ir
from ..ir import walk_exprs, walk_stmts
from ..ops.table import rule_arith


def _names(e: ir.Expr) -> set[str]:
    return {x.name for x in _walk(e) if isinstance(x, ir.Var)}


def _walk(e: ir.Expr):
    yield e
    if isinstance(e, ir.Op):
        for a in e.args:
            yield from _walk(a)


def _reads(stmts, name: str) -> bool:
    return any(isinstance(e, ir.Var) and e.name == name for e in walk_exprs(stmts))


def _substitute(e: ir.Expr, table: dict[str, ir.Expr]) -> ir.Expr:
    if isinstance(e, ir.Var) and e.name in table:
        return table[e.name]
    if isinstance(e, ir.Op):
        args = tuple(_substitute(a, table) for a in e.args)
        if any(x is not y for x, y in zip(args, e.args, strict=True)):
            return dataclasses.replace(e, args=args)
    return e


def _substitute_stmt(s: ir.Stmt, table: dict[str, ir.Expr]) -> ir.Stmt:
    changes: dict[str, Any] = {}
    for f in dataclasses.fields(s):
        value = getattr(s, f.name)
        new: Any
        if isinstance(value, ir.Expr):
            new = _substitute(value, table)
        elif isinstance(value, tuple) and value and isinstance(value[0], ir.Stmt):
            new = tuple(_substitute_stmt(t, table) for t in value)
        else:
            continue
        if new is not value:
            changes[f.name] = new
    return dataclasses.replace(s, **changes) if changes else s


def _is_increment(s: ir.Stmt) -> bool:
    return (
        isinstance(s, ir.Assign)
        and isinstance(s.value, ir.Op)
        and s.value.op == "add"
        and len(s.value.args) == 2
        and isinstance(s.value.args[0], ir.Var)
        and s.value.args[0].name == s.name
        and s.value.type.is_pointer
        and s.value.type.is_tile
        and not s.value.args[1].type.is_tile
    )


def _closed_form(loop: ir.Loop, var: ir.Declare, step: int, inc: ir.Expr, loc) -> ir.Expr:
    """The offset of iteration k: ((k - k0) / step) * inc, or (k - k0) * X for inc = step * X."""
    k = ir.Var(type=var.type, loc=loc, name=var.name)
    init = var.init
    assert init is not None, "_rewrite_loop takes loops whose variable has a first value"
    start: ir.Expr = k
    if not (isinstance(init, ir.Const) and init.value == 0):
        start = rule_arith("sub", [k, init], loc, None)
    if isinstance(inc, ir.Op) and inc.op == "mul":
        for i in (0, 1):
            c = inc.args[i]
            if isinstance(c, ir.Const) and not isinstance(c.value, bool) and c.value == step:
                return rule_arith("mul", [start, inc.args[1 - i]], loc, None)
    if isinstance(inc, ir.Const) and inc.value == step:
        return start
    count = rule_arith("div", [start, ir.Const(type=var.type, loc=loc, value=step)], loc, None)
    return rule_arith("mul", [count, inc], loc, None)


def _rewrite_loop(loop: ir.Loop, after: tuple[ir.Stmt, ...]) -> ir.Loop:
    if loop.kind != "for" or len(loop.init) != 1 or len(loop.step) != 1:
        return loop
    var, step_stmt = loop.init[0], loop.step[0]
    if not (
        isinstance(var, ir.Declare)
        and var.init is not None
        and not var.type.is_pointer
        and var.type.scalar.is_int
    ):
        return loop
    if var.type.is_tile or not isinstance(step_stmt, ir.Assign) or step_stmt.name != var.name:
        return loop
    value = step_stmt.value
    if not (
        isinstance(value, ir.Op)
        and value.op == "add"
        and isinstance(value.args[0], ir.Var)
        and value.args[0].name == var.name
        and isinstance(value.args[1], ir.Const)
        and isinstance(value.args[1].value, int)
        and value.args[1].value > 0
    ):
        return loop
    step = value.args[1].value
    body = list(loop.body)
    tail: list[tuple[ir.Assign, ir.Op]] = []  # each increment and its pointer addition
    while body and _is_increment(body[-1]):
        s = body.pop()
        assert isinstance(s, ir.Assign) and isinstance(s.value, ir.Op)
        tail.insert(0, (s, s.value))
    if not tail:
        return loop
    inner = list(walk_stmts(body))
    if any(isinstance(t, ir.Continue) for t in inner):
        return loop
    assigned = {t.name for t in inner if isinstance(t, (ir.Declare, ir.Assign))}
    if var.name in assigned:
        return loop
    table: dict[str, ir.Expr] = {}
    for s, add in tail:
        inc = add.args[1]
        changed = assigned | {t.name for t, _ in tail}
        if s.name in table or s.name in assigned or _names(inc) & changed:
            return loop
        if _reads(after, s.name):
            return loop
        try:
            offset = _closed_form(loop, var, step, inc, s.loc)
            table[s.name] = rule_arith("add", [add.args[0], offset], s.loc, None)
        except CompileError:
            return loop
    body = [_substitute_stmt(t, table) for t in body]
    return dataclasses.replace(loop, body=tuple(body))


def _rewrite_block(stmts: tuple[ir.Stmt, ...], later: tuple[ir.Stmt, ...]) -> tuple[ir.Stmt, ...]:
    """``stmts`` rewritten; ``later``: what may run after them (a read there of a rewritten
    pointer would see it not advanced, so such a pointer is left alone)."""
    out = []
    for i, s in enumerate(stmts):
        after = tuple(stmts[i + 1 :]) + later
        if isinstance(s, ir.Loop):
            # the next iteration of an enclosing loop runs after an inner loop, too
            s = dataclasses.replace(s, body=_rewrite_block(s.body, (s, *after)))
            s = _rewrite_loop(s, after)
        elif isinstance(s, ir.If):
            then = _rewrite_block(s.then, after)
            s = dataclasses.replace(s, then=then, orelse=_rewrite_block(s.orelse, after))
        out.append(s)
    return tuple(out)


def rewrite_pointer_inductions(kernel: ir.Kernel) -> ir.Kernel:
    """``kernel`` with the pointer tiles advanced at the end of counted loops in closed form."""
    body = _rewrite_block(kernel.body, ())
    return kernel if body == kernel.body else dataclasses.replace(kernel, body=body)
