"""Contiguity and divisibility of integer and pointer tiles along their last axis
(Triton's AxisInfo).

Input: a layout-annotated ``ir.Kernel``. Output: :func:`vector_width`, how many neighbouring
lanes of a load or store may travel as one access. A value's :class:`Info` says, for aligned
groups of lanes: ``contig`` lanes hold consecutive values, ``const`` lanes hold equal values,
and the first value of each group is divisible by ``div`` (bytes, for pointers).

Comparisons and logical ops keep
constancy (a mask is often constant over each 16-byte group).

Facts come from ``arange``, constants, constexprs, pointer alignment and integer arguments
divisible by 16 (both part of the specialisation key); a variable assigned several times gets
what all its values share.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import gcd

from .. import ir
from ..ir import Const, Expr, Op, PointerType, Var, walk_stmts
from .layout import Layout

BIG = 1 << 30


@dataclass(frozen=True)
class Info:
    contig: int = 1
    const: int = 1
    div: int = 1


def _pow2_div(v: int) -> int:
    if v == 0:
        return BIG
    return min(abs(v) & -abs(v), BIG)


def _meet(a: Info, b: Info) -> Info:
    return Info(min(a.contig, b.contig), min(a.const, b.const), gcd(a.div, b.div))


class AxisInfo:
    def __init__(self, kernel: ir.Kernel):
        self.vars: dict[str, Info] = {}
        for p in kernel.params:
            if p.constexpr:
                continue
            if isinstance(p.type.dtype, PointerType):
                self.vars[p.name] = Info(1, BIG, p.align)
            else:
                self.vars[p.name] = Info(1, BIG, 16 if p.div16 else 1)
        assigned: dict[str, list[Expr]] = {}
        for s in walk_stmts(kernel.body):
            if isinstance(s, ir.Declare) and s.init is not None:
                assigned.setdefault(s.name, []).insert(0, s.init)
            elif isinstance(s, ir.Assign):
                assigned.setdefault(s.name, []).append(s.value)
        # Optimistic fixpoint: a variable starts with what its first value has; each round
        # meets that with every later assignment (computed from the current facts) until no
        # fact changes. Facts only shrink, so this ends.
        for name, values in assigned.items():
            self.vars[name] = self.info(values[0])
        for _ in range(8):
            changed = False
            for name, values in assigned.items():
                info = self.vars[name]
                for v in values[1:]:
                    info = _meet(info, self.info(v))
                if info != self.vars[name]:
                    self.vars[name], changed = info, True
            if not changed:
                break

    def info(self, e: Expr) -> Info:
        n = e.type.shape[-1] if e.type.shape else BIG
        if isinstance(e, Const):
            return Info(1, BIG, _pow2_div(int(e.value)) if not isinstance(e.value, float) else 1)
        if isinstance(e, Var):
            i = self.vars.get(e.name, Info(1, BIG if not e.type.is_tile else 1, 1))
        elif not isinstance(e, Op):
            return Info()
        else:
            rule = getattr(self, f"op_{e.op}", None)
            if rule is None:
                return Info(1, BIG if not e.type.is_tile else 1, 1)
            i = rule(e)
        if n == 1:  # a last axis of size 1 broadcasts: every lane along it holds one value
            return Info(1, BIG, i.div)
        return Info(min(i.contig, n), min(i.const, n), i.div)

    def op_expand_dims(self, e: Op) -> Info:
        x = self.info(e.args[0])
        if e.attr("axis") < len(e.args[0].type.shape):
            return x
        return Info(1, BIG, x.div if x.contig == 1 else 1)  # a new last axis of size 1

    def op_broadcast(self, e: Op) -> Info:
        x = self.info(e.args[0])
        if e.args[0].type.shape[-1] == 1 and e.type.shape[-1] > 1:
            return Info(1, BIG, x.div)
        return x

    def op_convert_layout(self, e: Op) -> Info:
        return self.info(e.args[0])

    def op_arange(self, e: Op) -> Info:
        return Info(e.type.shape[0], 1, _pow2_div(e.attr("start")))

    def op_full(self, e: Op) -> Info:
        return Info(1, BIG, self.info(e.args[0]).div)

    def op_cast(self, e: Op) -> Info:
        dtype = e.type.dtype
        if isinstance(dtype, PointerType) or not dtype.is_int:
            return Info()
        return self.info(e.args[0])

    def op_int_to_ptr(self, e: Op) -> Info:
        """An address read as a pointer: aligned to its element, as C requires (a table of
        pointers promises more only through multiple_of)."""
        x = self.info(e.args[0])
        return Info(1, x.const, e.type.pointer.elem.itemsize)

    def op_add(self, e: Op) -> Info:
        a, b = (self.info(x) for x in e.args)
        if isinstance(e.type.dtype, PointerType):
            size = e.type.dtype.elem.itemsize
            b = Info(b.contig, b.const, min(b.div * size, BIG))
        contig = max(min(a.contig, b.const), min(a.const, b.contig))
        return Info(contig, min(a.const, b.const), gcd(a.div, b.div))

    def op_sub(self, e: Op) -> Info:
        a, b = (self.info(x) for x in e.args)
        contig = min(a.contig, b.const)
        return Info(contig, min(a.const, b.const), gcd(a.div, b.div))

    def op_mul(self, e: Op) -> Info:
        a, b = (self.info(x) for x in e.args)
        contig = 1
        for x, _y, other in ((a, b, e.args[1]), (b, a, e.args[0])):
            if isinstance(other, Const) and other.value == 1:
                contig = max(contig, x.contig)
        return Info(contig, min(a.const, b.const), min(a.div * b.div, BIG))

    def _compare(self, e: Op, contiguous_left: bool) -> Info:
        """x < y (or x >= y) with x running through aligned consecutive values and y constant:
        over groups of lanes that start at a multiple of both, the answer does not change."""
        a, b = (self.info(x) for x in e.args)
        x, y = (a, b) if contiguous_left else (b, a)
        group = min(x.contig, y.const, gcd(x.div, y.div))
        return Info(1, max(min(a.const, b.const), group), 1)

    def op_lt(self, e: Op) -> Info:
        return self._compare(e, True)

    def op_ge(self, e: Op) -> Info:
        return self._compare(e, True)

    def op_gt(self, e: Op) -> Info:
        return self._compare(e, False)

    def op_le(self, e: Op) -> Info:
        return self._compare(e, False)

    def _logical(self, e: Op) -> Info:
        a, b = (self.info(x) for x in e.args)
        return Info(1, min(a.const, b.const), 1)

    op_land = op_lor = op_bitand = op_bitor = _logical

    def op_multiple_of(self, e: Op) -> Info:
        """The user's promise (Triton's tl.multiple_of): each group starts at a multiple of n."""
        x = self.info(e.args[0])
        return Info(x.contig, x.const, max(x.div, e.attr("n")))

    def op_max_contiguous(self, e: Op) -> Info:
        """The user's promise (Triton's tl.max_contiguous): runs of n consecutive values."""
        x = self.info(e.args[0])
        return Info(max(x.contig, e.attr("n")), x.const, x.div)

    def op_max_constancy(self, e: Op) -> Info:
        """The user's promise (Triton's tl.max_constancy): runs of n equal values."""
        x = self.info(e.args[0])
        return Info(x.contig, max(x.const, e.attr("n")), x.div)

    def op_neg(self, e: Op) -> Info:
        a = self.info(e.args[0])
        return Info(1, a.const, a.div)

    def vector_width(self, ptr: Expr, layout: Layout) -> int:
        """Lanes per access for a load/store through ``ptr`` (a power of two, 16 bytes at most):
        contiguous, aligned elements that one thread holds in consecutive registers."""
        if not ptr.type.is_tile or layout.dims[-1] != layout.fastest:
            return 1
        elem = ptr.type.pointer.elem.itemsize
        i = self.info(ptr)
        spt = min(layout.blocked.spt[layout.fastest], layout.regs_along(layout.fastest))
        width = min(spt, i.contig, max(i.div // elem, 1), 16 // elem)
        return 1 << (width.bit_length() - 1) if width >= 1 else 1
