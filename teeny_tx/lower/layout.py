"""The layout pass: which thread holds which elements of every tile.

Input: a typed ``ir.Kernel``. Output: the same kernel with a :class:`Blocked` layout on every
tile-valued node and tile declaration. A blocked layout (Triton's) gives each thread
``size_per_thread`` contiguous elements, lays the block's threads side by side and repeats the
pattern until the tile is covered; a tile smaller than one repetition wraps, and the threads
past its end hold copies.

The size per thread is chosen so that one thread's elements make a 16-byte access for the
narrowest dtype that tile shape moves through memory. Layouts change speed, never meaning: the
interpreter runs the IR before this pass.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..errors import CompileError
from . import ir
from .ir import Expr, Op, PointerType


@dataclass(frozen=True)
class Blocked:
    """A 1-D blocked layout over ``shape``: ``spt`` elements per thread, ``threads`` threads."""

    shape: tuple[int, ...]
    spt: int
    threads: int

    @property
    def tile(self) -> int:
        return self.spt * self.threads

    @property
    def regs(self) -> int:
        n = self.shape[0]
        return self.spt * (n // self.tile) if n >= self.tile else min(self.spt, n)

    @property
    def replicated(self) -> bool:
        return self.shape[0] < self.tile

    @property
    def cuda(self) -> str:
        return f"tx::Blocked1D<{self.shape[0]}, {self.spt}, {self.threads}>"

    def describe(self) -> str:
        copies = ", threads past the end hold copies" if self.replicated else ""
        return f"[{self.shape[0]}]: {self.spt} contiguous per thread x {self.threads} threads, {self.regs} per thread{copies}"


def assign_layouts(kernel: ir.Kernel) -> tuple[ir.Kernel, dict[tuple[int, ...], Blocked]]:
    """Annotate every tile of ``kernel``; also return the layouts by shape, in first-use order."""
    widths: dict[tuple[int, ...], int] = {}
    for e in walk_exprs(kernel.body):
        if isinstance(e, Op) and e.op in ("load", "store"):
            elem = e.args[0].type.dtype.elem
            shape = e.args[0].type.shape
            if shape:
                widths[shape] = min(widths.get(shape, 16), elem.itemsize)
    layouts: dict[tuple[int, ...], Blocked] = {}

    def layout_for(shape: tuple[int, ...], loc) -> Blocked:
        if shape not in layouts:
            if len(shape) != 1:
                raise CompileError(
                    f"tiles of rank {len(shape)} are not supported yet (only 1-D tiles)", loc
                )
            n, threads = shape[0], kernel.num_threads
            spt = 16 // widths.get(shape, 4)
            spt = max(1, min(spt, n // threads if n >= threads else 1))
            layouts[shape] = Blocked(shape, spt, threads)
        return layouts[shape]

    def annotate(e: Expr) -> Expr:
        changes = {}
        if isinstance(e, Op) and e.args:
            changes["args"] = tuple(annotate(a) for a in e.args)
        if e.type.is_tile:
            changes["layout"] = layout_for(e.type.shape, e.loc)
        return dataclasses.replace(e, **changes) if changes else e

    body = map_stmts(kernel.body, annotate, layout_for)
    return dataclasses.replace(kernel, body=body), layouts


def map_stmts(stmts, fe, layout_for) -> tuple[ir.Stmt, ...]:
    out = []
    for s in stmts:
        if isinstance(s, ir.Declare):
            s = dataclasses.replace(
                s,
                init=fe(s.init) if s.init is not None else None,
                layout=layout_for(s.type.shape, s.loc) if s.type.is_tile else None,
            )
        elif isinstance(s, ir.Assign):
            s = dataclasses.replace(s, value=fe(s.value))
        elif isinstance(s, ir.Eval):
            s = dataclasses.replace(s, expr=fe(s.expr))
        elif isinstance(s, ir.If):
            s = dataclasses.replace(
                s,
                cond=fe(s.cond),
                then=map_stmts(s.then, fe, layout_for),
                orelse=map_stmts(s.orelse, fe, layout_for),
            )
        elif isinstance(s, ir.Loop):
            s = dataclasses.replace(
                s,
                init=map_stmts(s.init, fe, layout_for),
                cond=fe(s.cond) if s.cond is not None else None,
                step=map_stmts(s.step, fe, layout_for),
                body=map_stmts(s.body, fe, layout_for),
            )
        out.append(s)
    return tuple(out)


def walk_exprs(stmts):
    """Every expression node of a statement list, operands before the ops that use them."""
    for s in stmts:
        roots = []
        if isinstance(s, ir.Declare) and s.init is not None:
            roots = [s.init]
        elif isinstance(s, ir.Assign):
            roots = [s.value]
        elif isinstance(s, ir.Eval):
            roots = [s.expr]
        elif isinstance(s, ir.If) or isinstance(s, ir.Loop) and s.cond is not None:
            roots = [s.cond]
        for r in roots:
            yield from _walk(r)
        if isinstance(s, ir.If):
            yield from walk_exprs(s.then)
            yield from walk_exprs(s.orelse)
        elif isinstance(s, ir.Loop):
            yield from walk_exprs(s.init)
            yield from walk_exprs(s.step)
            yield from walk_exprs(s.body)


def _walk(e: Expr):
    if isinstance(e, Op):
        for a in e.args:
            yield from _walk(a)
    yield e


def is_pointer(e: Expr) -> bool:
    return isinstance(e.type.dtype, PointerType)
