"""The layout pass: which thread holds which elements of every tile.

Input: a typed ``ir.Kernel``. Output: the same kernel with a :class:`Layout` on every tile-valued
node and tile declaration, with ``convert_layout`` ops where a variable is used in a layout other
than its own, and the layouts in first-use order.

A :class:`Blocked` layout (Triton's) gives each thread ``spt[d]`` contiguous elements along
dimension d, lays a warp's lanes (``tpw``) and the block's warps (``wpc``) side by side, fastest
dimension ``order[0]`` first, and repeats that pattern until the tile is covered. It does not
depend on the tile's size: a :class:`Layout` is a blocked layout applied to one shape, padded to
the blocked layout's rank. A dimension of size 1 is held once by every thread, so a row
``[M, 1]`` or a column ``[1, N]`` broadcasts against ``[M, N]`` in registers, and a reduction
along a dimension gives the same layout with that dimension of size 1 (Triton's slice layout).

The pass chooses one blocked layout per rank (rank 2: from the largest 2-D tile the kernel moves
through memory) and sends each expression the layout its consumer wants, top down; arange, full
and elementwise chains are computed directly in the wanted layout. A variable has one layout,
fixed by how it is used (``expand_dims`` of a 1-D tile into 2-D makes it a slice of the 2-D
layout); reading it elsewhere goes through shared memory. Layouts change speed, never meaning:
the interpreter runs the IR before this pass.
"""

from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass

from ... import switches
from ...errors import CompileError, PerformanceWarning
from .. import ir
from ..ir import Expr, Op, PointerType, Var, walk_exprs, walk_stmts


@dataclass(frozen=True)
class Blocked:
    spt: tuple[int, ...]
    tpw: tuple[int, ...]
    wpc: tuple[int, ...]
    order: tuple[int, ...]

    @property
    def rank(self) -> int:
        return len(self.spt)

    def tile(self, d: int) -> int:
        return self.spt[d] * self.tpw[d] * self.wpc[d]


@dataclass(frozen=True)
class Mma:
    """The accumulator layout of ``mma.sync`` (``tx::Mma`` in mma.cuh): ``warps`` = (WM, WN)
    warps tile the [M, N] result, each warp a grid of m16n8 fragments; in a fragment lane l
    holds rows l/4 and l/4 + 8, columns 2(l%4) and 2(l%4) + 1. Warps past WM * WN hold copies."""

    warps: tuple[int, int]
    num_warps: int
    version: int = 2  # 2: mma.sync (sm_80+); 3: wgmma, warps along M only (sm_90a)
    rank = 2
    order = (1, 0)
    spt = (1, 2)  # the contiguous run a thread holds along each dimension
    tpw = (8, 4)  # lanes along each dimension: a row of a fragment is one quad

    @property
    def wpc(self) -> tuple[int, int]:
        return self.warps

    def regs_along(self, shape: tuple[int, ...], d: int) -> int:
        if shape[d] == 1:
            return 1
        return 2 * shape[d] // (self.warps[d] * (16 if d == 0 else 8))

    @property
    def copies(self) -> int:
        return self.num_warps // (self.warps[0] * self.warps[1])


def wgmma_fits(e: Op, num_warps: int) -> bool:
    """Whether a dot can run as Hopper warpgroup MMAs: f16/bf16, or f32 with TF32 and both
    operands K-contiguous (wgmma transposes 16-bit operands only); one warpgroup per 64 rows
    (M = 16 * num_warps), N a multiple of 64 up to 256, and operands whose shared tiles are
    whole 128-byte swizzle panels (K a multiple of 128 bytes where K is contiguous)."""
    return wgmma_eligible(e) and wgmma_misfit(e, num_warps) is None


def wgmma_eligible(e: Op) -> bool:
    """The operands' types wgmma takes (see :func:`wgmma_fits`); a 2-D dot."""
    a, b = e.args[:2]
    if len(e.type.shape) != 2:
        return False
    dtype = a.type.scalar.name
    if dtype == "f32":
        a_kmajor = not (isinstance(a, Op) and a.op == "permute")
        b_kmajor = isinstance(b, Op) and b.op == "permute"
        return e.attr("precision") == "TF32" and a_kmajor and b_kmajor
    return dtype in ("f16", "bf16")


def wgmma_misfit(e: Op, num_warps: int) -> str | None:
    """Which tile dimension keeps an eligible dot off wgmma, and how to change it (the text of
    the PerformanceWarning), or None when its tiles fit."""
    a, b = e.args[:2]
    a_kmajor = not (isinstance(a, Op) and a.op == "permute")
    b_kmajor = isinstance(b, Op) and b.op == "permute"
    m, n = e.type.shape
    k = a.type.shape[1]
    panel = 128 // a.type.dtype.itemsize
    if num_warps % 4:
        return f"num_warps is {num_warps}: wgmma runs whole warpgroups, so make it 4 or 8"
    if m != 16 * num_warps:
        other = f", or num_warps {m // 16}" if m % 64 == 0 and m // 16 <= 16 else ""
        return (
            f"the M tile is {m}: wgmma takes 16 rows per warp, M = 16 x num_warps = "
            f"{16 * num_warps}; make the M tile {16 * num_warps}{other}"
        )
    if n % 64 or n > 256:
        best = min(256, max(64, n // 64 * 64))
        return f"the N tile is {n}: wgmma takes a multiple of 64 up to 256; make it {best}"
    if k % 16:
        return f"the K tile is {k}: wgmma takes a multiple of 16; make it {max(16, k // 16 * 16)}"
    if k % panel and (a_kmajor or b_kmajor):
        return (
            f"the K tile is {k} ({k * a.type.dtype.itemsize} bytes of {a.type.scalar}): wgmma "
            f"reads whole 128-byte panels, so make it a multiple of {panel} (e.g. {panel})"
        )
    return None


_WARNED: dict = {}  # the warnings registry: each message once per process


LIBRARY_FILES = "kernels/"  # the bundled kernels as teeny_tx.library compiles them (loader.py)


def warn_mma_fallback(e: Op, num_warps: int) -> None:
    """A PerformanceWarning at the dot's line: on sm_90a its tiles do not fit wgmma. Not for
    the library's own kernels (their configs choose mma.sync where it is faster: a user of
    ``teeny_tx.torch.linear`` has no tile to change)."""
    if not wgmma_eligible(e) or not switches.read("PERF_WARNINGS"):
        return
    if e.loc.file.startswith(LIBRARY_FILES):
        return
    reason = wgmma_misfit(e, num_warps)
    if reason is None:
        return
    loc = e.loc
    warnings.warn_explicit(
        f"dot() at column {loc.col} runs as mma.sync, not wgmma, on sm_90a: {reason} "
        "(TEENY_TX_PERF_WARNINGS=0 silences this)",
        PerformanceWarning,
        loc.file,
        loc.line,
        registry=_WARNED,
    )


def mma_warps(m: int, n: int, num_warps: int) -> tuple[int, int]:
    """Warps along M and N for an [m, n] accumulator: square warp tiles where the shape allows,
    each at least 16 x 16 (copies when the tile is too small for every warp)."""
    wm, wn = 1, 1
    while wm * wn < num_warps:
        if m // wm >= n // wn and m // (wm * 2) >= 16:
            wm *= 2
        elif n // (wn * 2) >= 16:
            wn *= 2
        elif m // (wm * 2) >= 16:
            wm *= 2
        else:
            break
    return wm, wn


@dataclass(frozen=True)
class Layout:
    """A blocked (or Mma) layout over one tile: ``shape`` is padded to the layout's rank;
    ``dims`` maps the value's axes to the layout's dimensions (the others have size 1)."""

    blocked: Blocked | Mma
    shape: tuple[int, ...]
    dims: tuple[int, ...]

    @property
    def is_mma(self) -> bool:
        return isinstance(self.blocked, Mma)

    def regs_along(self, d: int) -> int:
        if isinstance(self.blocked, Mma):
            return self.blocked.regs_along(self.shape, d)
        size, tile, spt = self.shape[d], self.blocked.tile(d), self.blocked.spt[d]
        return spt * (size // tile) if size >= tile else min(spt, size)

    @property
    def regs(self) -> int:
        n = 1
        for d in range(self.blocked.rank):
            n *= self.regs_along(d)
        return n

    @property
    def size(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def replicated(self) -> bool:
        """Whether some threads hold copies of other threads' elements."""
        if isinstance(self.blocked, Mma):
            return 1 in self.shape or self.blocked.copies > 1
        return self.threads_covered < self.blocked_threads

    @property
    def blocked_threads(self) -> int:
        n = 1
        for d in range(self.blocked.rank):
            n *= self.blocked.tpw[d] * self.blocked.wpc[d]
        return n

    @property
    def threads_covered(self) -> int:
        """Threads holding distinct elements."""
        n = 1
        for d in range(self.blocked.rank):
            n *= max(
                1,
                min(
                    self.blocked.tpw[d] * self.blocked.wpc[d], self.shape[d] // self.blocked.spt[d]
                ),
            )
        return n

    @property
    def fastest(self) -> int:
        """The blocked dimension whose elements are contiguous in a thread's registers."""
        return self.blocked.order[0]

    @property
    def key(self) -> tuple:
        """Layouts with equal keys are the same C++ type."""
        return (self.blocked, self.shape)

    @property
    def cuda(self) -> str:
        b = self.blocked
        if isinstance(b, Mma):
            shape = ", ".join(map(str, self.shape))
            return f"tx::Mma<tx::Ints<{shape}>, {b.warps[0]}, {b.warps[1]}>"

        def ints(v):
            return f"tx::Ints<{', '.join(map(str, v))}>"

        return (
            f"tx::Blocked<{ints(self.shape)}, {ints(b.spt)}, {ints(b.tpw)}, "
            f"{ints(b.wpc)}, {ints(b.order)}>"
        )

    def describe(self) -> str:
        b = self.blocked
        if isinstance(b, Mma):
            copies = ", some threads hold copies" if self.replicated else ""
            kind = "wgmma" if b.version == 3 else "mma.sync"
            return (
                f"[{', '.join(map(str, self.shape))}]: {kind} accumulator, "
                f"{b.warps[0]}x{b.warps[1]} warps of m16n8 fragments; "
                f"{self.regs} per thread{copies}"
            )
        x = "x".join
        copies = ", some threads hold copies" if self.threads_covered < self.blocked_threads else ""
        return (
            f"[{', '.join(map(str, self.shape))}]: {x(map(str, b.spt))} per thread, "
            f"{x(map(str, b.tpw))} lanes, {x(map(str, b.wpc))} warps, order {list(b.order)}; "
            f"{self.regs} per thread{copies}"
        )

    def with_shape(self, shape: tuple[int, ...], dims: tuple[int, ...]) -> Layout:
        """The same blocked layout over another value (``shape`` in value axes)."""
        padded = [1] * self.blocked.rank
        for axis, d in enumerate(dims):
            padded[d] = shape[axis]
        return Layout(self.blocked, tuple(padded), dims)

    def value_shape(self) -> tuple[int, ...]:
        return tuple(self.shape[d] for d in self.dims)


def default_blocked(shape: tuple[int, ...], num_warps: int, elem_bytes: int) -> Blocked:
    """Triton's default: 16-byte runs along the last axis, lanes fill the fastest dimensions,
    warps the slowest; lanes or warps left over hold copies."""
    rank = len(shape)
    order = tuple(reversed(range(rank)))
    spt = [1] * rank
    last = rank - 1
    spt[last] = max(1, min(16 // max(elem_bytes, 1), shape[last]))
    if rank == 1:
        spt[0] = max(1, min(spt[0], shape[0] // (32 * num_warps)))
    tpw = [1] * rank
    left = 32
    for d in order:
        t = min(left, max(1, shape[d] // spt[d]))
        tpw[d] = t
        left //= t
    tpw[order[-1]] *= left
    wpc = [1] * rank
    left = num_warps
    for d in reversed(order):
        w = min(left, max(1, shape[d] // (spt[d] * tpw[d])))
        wpc[d] = w
        left //= w
    wpc[order[0]] *= left
    return Blocked(tuple(spt), tuple(tpw), tuple(wpc), order)


class LayoutPass:
    def __init__(self, kernel: ir.Kernel, wgmma: bool = False):
        self.warned: set[int] = set()  # the dots warned of (a PerformanceWarning each)
        self.kernel = kernel
        self.wgmma = wgmma
        self.width: dict[int, int] = {}  # rank -> narrowest element moved through memory
        self.largest: dict[int, tuple[int, ...]] = {}  # rank -> largest shape moved
        for e in walk_exprs(kernel.body):
            if isinstance(e, Op) and e.op in ("load", "store") and e.args[0].type.is_tile:
                shape = e.args[0].type.shape
                rank = len(shape)
                elem = e.args[0].type.pointer.elem
                self.width[rank] = min(self.width.get(rank, 16), elem.itemsize)
                if _numel(shape) > _numel(self.largest.get(rank, ())):
                    self.largest[rank] = shape
        self.blocked_by_rank: dict[int, Blocked] = {}
        self.blocked_1d: dict[int, Blocked] = {}
        self.vars: dict[str, Layout] = {}
        self.layouts: dict[tuple, Layout] = {}
        self._decide_variables()

    # ------------------------------------------------------------ choices

    def blocked(self, shape: tuple[int, ...]) -> Blocked:
        rank = len(shape)
        width = self.width.get(rank, 4)
        if rank == 1:
            if shape[0] not in self.blocked_1d:
                self.blocked_1d[shape[0]] = default_blocked(shape, self.kernel.num_warps, width)
            return self.blocked_1d[shape[0]]
        if rank not in self.blocked_by_rank:
            anchor = self.largest.get(rank, shape)
            self.blocked_by_rank[rank] = default_blocked(anchor, self.kernel.num_warps, width)
        return self.blocked_by_rank[rank]

    def default(self, shape: tuple[int, ...]) -> Layout:
        return Layout(self.blocked(shape), shape, tuple(range(len(shape))))

    def operand(self, e: Expr) -> Layout:
        """The layout a dot operand is loaded in: the default blocked layout of its own shape
        (16-byte runs, no copies), whatever the kernel's other 2-D tiles use."""
        shape = e.type.shape
        blocked = default_blocked(shape, self.kernel.num_warps, e.type.dtype.itemsize)
        return Layout(blocked, shape, tuple(range(len(shape))))

    def mma(self, e: Op) -> Layout:
        """The accumulator layout of a dot's result."""
        if len(e.type.shape) != 2:
            raise CompileError(
                "a batched (3-D) dot() runs on the interpreter only",
                e.loc,
                "on the GPU, give each batch its own program: "
                "a 2-D dot() per program_id along the batch axis",
            )
        m, n = e.type.shape
        num_warps = self.kernel.num_warps
        if self.wgmma and wgmma_fits(e, num_warps):
            return Layout(Mma((num_warps, 1), num_warps, 3), (m, n), (0, 1))
        if self.wgmma and id(e) not in self.warned:
            self.warned.add(id(e))
            warn_mma_fallback(e, num_warps)
        return Layout(Mma(mma_warps(m, n, num_warps), num_warps), (m, n), (0, 1))

    def _decide_variables(self) -> None:
        """A variable's layout: a dot's accumulator layout when a dot's result is assigned to
        it; a dot operand's own blocked layout when it feeds a dot; a slice of the 2-D layout
        when it is expanded into 2-D; else what its first value naturally has, else the default
        for its shape."""
        demands: dict[str, Layout] = {}
        loaded = {
            s.name
            for s in walk_stmts(self.kernel.body)
            if isinstance(s, (ir.Declare, ir.Assign))
            and isinstance(v := s.init if isinstance(s, ir.Declare) else s.value, Op)
            and v.op == "load"
        }
        for e in walk_exprs(self.kernel.body):
            if isinstance(e, Op) and e.op == "dot":
                for role, x in enumerate(e.args[:2]):
                    if isinstance(x, Op) and x.op == "permute":
                        x = x.args[0]
                    elif (
                        role == 0
                        and isinstance(x, Var)
                        and x.name not in loaded
                        and x.type.dtype.itemsize == 2
                        and _is_wgmma(self.mma(e))
                    ):
                        # a 16-bit A tile computed in registers (attention's P, carried by a
                        # loop) keeps the layout its values have: wgmma's register-A form
                        # reads it there when that is an accumulator layout
                        continue
                    if isinstance(x, Var):
                        demands.setdefault(x.name, self.operand(x))
        # a pointer tile read only by a dot operand's load (``load(pa)``, ``load(pa + off)``)
        # is kept in that load's layout: no pointer tile moves through shared memory
        for s in walk_stmts(self.kernel.body):
            pointers = _loads_from(s.init) if isinstance(s, ir.Declare) else None
            if isinstance(s, ir.Declare) and s.name in demands and pointers is not None:
                demands.setdefault(pointers, demands[s.name])
        for s in walk_stmts(self.kernel.body):
            value = s.init if isinstance(s, ir.Declare) else getattr(s, "value", None)
            if (
                isinstance(s, (ir.Declare, ir.Assign))
                and isinstance(value, Op)
                and value.op == "dot"
            ):
                demands.setdefault(s.name, self.mma(value))
        self._declare(demands)
        # rows and columns of accumulators: settled over a few rounds, since a variable's
        # natural layout may come from another's
        for _ in range(3):
            found = self._accumulator_slices(demands)
            if not found:
                break
            demands.update(found)
            self.vars = {}
            self._declare(demands)
        for e in walk_exprs(self.kernel.body):
            if isinstance(e, Op) and e.op == "expand_dims" and isinstance(e.args[0], Var):
                var = e.args[0]
                if var.name not in demands and len(e.type.shape) > len(var.type.shape):
                    full = self.default(e.type.shape)
                    axis = e.attr("axis")
                    dims = tuple(d for d in range(len(e.type.shape)) if d != axis)
                    demands[var.name] = full.with_shape(var.type.shape, dims)
        self.vars = {}
        self._declare(demands)

    def _declare(self, demands: dict[str, Layout]) -> None:
        for s in walk_stmts(self.kernel.body):
            if isinstance(s, ir.Declare) and s.type.is_tile and s.name not in self.vars:
                layout = demands.get(s.name)
                if layout is None and s.init is not None:
                    layout = self.natural(s.init)
                if layout is None or layout.value_shape() != s.type.shape:
                    layout = self.default(s.type.shape)
                self.vars[s.name] = layout

    def _accumulator_slices(self, demands: dict[str, Layout]) -> dict[str, Layout]:
        """Variables that broadcast against an accumulator (a dot's Mma layout) take a slice
        of it, so the elementwise op reads both in registers: a row vector ``x`` in
        ``acc * expand_dims(x, 1)`` or ``s - m`` (``m`` of shape [M, 1]). A variable assigned
        the value of one that has such a slice takes it too (a running maximum ``m_i = m``),
        and a reduction of an accumulator gives its slice (``max(s, 1)``), by ``natural``."""
        found: dict[str, Layout] = {}

        def want(name: str, layout: Layout) -> None:
            if name not in demands and name not in found:
                found[name] = layout

        def pull(e: Expr, acc: Layout) -> None:
            """The variables an elementwise tree computed in ``acc`` reads: each in ``acc``
            or in a slice of it."""
            while isinstance(e, Op) and e.op == "broadcast":
                e = e.args[0]
            if isinstance(e, Var) and e.type.is_tile and len(e.type.shape) == 2:
                want(e.name, acc.with_shape(e.type.shape, (0, 1)))
            elif isinstance(e, Op) and e.op == "expand_dims" and isinstance(e.args[0], Var):
                var, axis = e.args[0], e.attr("axis")
                if len(var.type.shape) == 1:
                    want(var.name, acc.with_shape(var.type.shape, (1 - axis,)))
            elif isinstance(e, Op) and e.op not in _STRUCTURAL and len(e.type.shape) == 2:
                for a in e.args:
                    pull(a, acc)

        for e in walk_exprs(self.kernel.body):
            if not isinstance(e, Op) or e.op in _STRUCTURAL or len(e.type.shape) != 2:
                continue
            for a in e.args:
                n = self.natural(a) if a.type.is_tile else None
                if n is not None and n.is_mma and n.value_shape() == e.type.shape:
                    pull(e, n)
                    break
        # a variable given an accumulator layout (or a slice of one): its values are computed
        # in it, and what they read follows; a variable assigned it shares it (m_i = m_new)
        for s in walk_stmts(self.kernel.body):
            value = s.init if isinstance(s, ir.Declare) else getattr(s, "value", None)
            if not isinstance(s, (ir.Declare, ir.Assign)) or value is None:
                continue
            layout = demands.get(s.name) or found.get(s.name)
            if layout is not None and layout.is_mma and len(value.type.shape) == 2:
                full = Layout(layout.blocked, _full_shape(layout, value), (0, 1))
                if full.shape == value.type.shape:
                    pull(value, full)
            if isinstance(s, ir.Assign) and isinstance(value, Var) and s.name in self.vars:
                source = demands.get(value.name) or found.get(value.name)
                if source is not None and source.is_mma:
                    want(s.name, source)
        return found

    def natural(self, e: Expr) -> Layout | None:
        """The layout ``e`` has when nothing asks for one (None: any layout will do)."""
        if not e.type.is_tile:
            return None
        if isinstance(e, Var):
            return self.vars.get(e.name)
        if not isinstance(e, Op):
            return None
        if e.op in ("arange", "full"):
            return None
        if e.op == "atomic":
            value = self.natural(e.args[1])
            if value is not None and value.is_mma:
                return value  # an accumulator is added from its own registers, as it is stored
            return self.natural(e.args[0])
        if e.op == "dot":
            return self.mma(e)
        if e.op in ("reduce", "scan"):
            inner = self.natural(e.args[0])
            if inner is None or (inner.is_mma and e.op == "scan"):  # scans: blocked only
                inner = self.default(e.args[0].type.shape)
            return self.reduced(inner, e) if e.op == "reduce" else inner
        if e.op == "expand_dims":
            inner = self.natural(e.args[0])
            if inner is not None and len(inner.dims) < inner.blocked.rank:
                missing = [d for d in range(inner.blocked.rank) if d not in inner.dims][0]
                dims = list(inner.dims)
                dims.insert(e.attr("axis"), missing)
                if dims == sorted(dims):
                    return inner.with_shape(e.type.shape, tuple(dims))
            return None
        if e.op in ("permute", "reshape", "flip", "cat", "join", "split"):
            return None
        for a in e.args:
            inner = self.natural(a) if a.type.is_tile else None
            if inner is not None and len(inner.dims) == len(e.type.shape):
                return inner.with_shape(e.type.shape, inner.dims)
        return None

    def reduced(self, inner: Layout, e: Op) -> Layout:
        axis = e.attr("axis")
        shape = list(inner.shape)
        shape[inner.dims[axis]] = 1
        dims = inner.dims if e.attr("keep_dims") else inner.dims[:axis] + inner.dims[axis + 1 :]
        return Layout(inner.blocked, tuple(shape), dims)

    # ------------------------------------------------------------ annotation, top down

    def annotate(self, e: Expr, want: Layout | None) -> Expr:
        if not e.type.is_tile:
            if isinstance(e, Op) and e.args:
                if e.op == "reduce":
                    inner = self.natural(e.args[0])
                    if inner is None or inner.is_mma:
                        inner = self.default(e.args[0].type.shape)
                    return self._reduce(e, inner)
                return dataclasses.replace(e, args=tuple(self.annotate(a, None) for a in e.args))
            return e
        layout = want or self.natural(e) or self.default(e.type.shape)
        self.layouts.setdefault(layout.key, layout)
        if isinstance(e, Var):
            own = self.vars.get(e.name) or self.default(e.type.shape)
            if own.key != layout.key:
                return Op(
                    type=e.type,
                    loc=e.loc,
                    op="convert_layout",
                    args=(dataclasses.replace(e, layout=own),),
                    layout=layout,
                )
            return dataclasses.replace(e, layout=own)
        assert isinstance(e, Op)
        if e.op == "dot":
            return self._dot(e, layout)
        if e.op == "scan" and layout.is_mma:
            # computed in a blocked layout, then moved into the accumulator's
            inner = self.natural(e)
            assert inner is not None, "a scan has its source's layout"
            self.layouts.setdefault(inner.key, inner)
            return Op(
                type=e.type,
                loc=e.loc,
                op="convert_layout",
                args=(self.annotate(e, inner),),
                layout=layout,
            )
        if e.op == "reduce":
            if not e.attr("keep_dims") and len(layout.dims) == layout.blocked.rank:
                # wanted in a layout of its own rank (stored through a 1-D index tile): no
                # dimension to restore, so reduce in the input's layout and convert
                natural = self.natural(e)
                assert natural is not None and len(natural.dims) < natural.blocked.rank
                own = natural
                self.layouts.setdefault(own.key, own)
                return Op(
                    type=e.type,
                    loc=e.loc,
                    op="convert_layout",
                    args=(self.annotate(e, own),),
                    layout=layout,
                )
            inner = Layout(layout.blocked, _restore(layout, e), _restore_dims(layout, e))
            return self._reduce(e, inner)
        if e.op == "scan":
            shape = list(layout.shape)
            shape[layout.dims[e.attr("axis")]] = 1
            lines = Layout(layout.blocked, tuple(shape), layout.dims)
            self.layouts.setdefault(lines.key, lines)
        if e.op == "expand_dims":
            axis = e.attr("axis")
            dims = layout.dims[:axis] + layout.dims[axis + 1 :]
            inner = layout.with_shape(e.args[0].type.shape, dims)
            return dataclasses.replace(e, layout=layout, args=(self.annotate(e.args[0], inner),))
        if e.op in ("permute", "reshape", "flip", "cat", "join", "split"):
            args = tuple(
                self.annotate(a, self.natural(a) or self.default(a.type.shape)) for a in e.args
            )
            return dataclasses.replace(e, layout=layout, args=args)
        annotated = []
        for a in e.args:
            if a.type.is_tile:
                annotated.append(self.annotate(a, layout.with_shape(a.type.shape, layout.dims)))
            else:
                annotated.append(self.annotate(a, None))
        return dataclasses.replace(e, layout=layout, args=tuple(annotated))

    def _dot(self, e: Op, want: Layout) -> Expr:
        """A dot computes in its accumulator layout; its operands stay in their own layouts
        (a transposed operand is staged transposed, never moved), and a consumer that wants
        another layout gets a conversion."""
        own = self.mma(e)
        self.layouts.setdefault(own.key, own)
        operands: list[Expr] = []
        for x in e.args[:2]:
            if isinstance(x, Op) and x.op == "permute":
                inner = x.args[0]
                inner = self.annotate(inner, self._operand_want(inner))
                operands.append(dataclasses.replace(x, args=(inner,), layout=None))
            else:
                operands.append(self.annotate(x, self._operand_want(x)))
        acc = e.args[2]
        acc = self.annotate(acc, own if acc.type.is_tile else None)
        result = dataclasses.replace(e, layout=own, args=(*operands, acc))
        if want.key == own.key:
            return result
        return Op(type=e.type, loc=e.loc, op="convert_layout", args=(result,), layout=want)

    def _operand_want(self, x: Expr) -> Layout:
        if isinstance(x, Var):
            return self.vars.get(x.name) or self.operand(x)
        natural = self.natural(x)
        if natural is not None and natural.is_mma:
            return natural  # computed from an accumulator (P = (f16)p): staged from its registers
        return self.operand(x)

    def _reduce(self, e: Op, inner: Layout) -> Expr:
        self.layouts.setdefault(inner.key, inner)
        out = self.reduced(inner, e)
        self.layouts.setdefault(out.key, out)
        args = tuple(self.annotate(a, inner) for a in e.args)  # a tuple's operands alike
        return dataclasses.replace(e, layout=out, args=args)

    def run(self) -> tuple[ir.Kernel, dict[tuple, Layout]]:
        body = self.stmts(self.kernel.body)
        return dataclasses.replace(self.kernel, body=body), self.layouts

    def stmts(self, stmts) -> tuple[ir.Stmt, ...]:
        out = []
        for s in stmts:
            if isinstance(s, ir.Declare):
                layout = self.vars.get(s.name) if s.type.is_tile else None
                if layout is not None:
                    self.layouts.setdefault(layout.key, layout)
                s = dataclasses.replace(
                    s,
                    init=self.annotate(s.init, layout) if s.init is not None else None,
                    layout=layout,
                )
            elif isinstance(s, ir.Assign):
                layout = self.vars.get(s.name) if s.value.type.is_tile else None
                s = dataclasses.replace(s, value=self.annotate(s.value, layout))
            elif isinstance(s, ir.Eval):
                s = dataclasses.replace(s, expr=self._store(s.expr))
            elif isinstance(s, ir.If):
                s = dataclasses.replace(
                    s,
                    cond=self.annotate(s.cond, None),
                    then=self.stmts(s.then),
                    orelse=self.stmts(s.orelse),
                )
            elif isinstance(s, ir.Loop):
                s = dataclasses.replace(
                    s,
                    init=self.stmts(s.init),
                    cond=self.annotate(s.cond, None) if s.cond is not None else None,
                    step=self.stmts(s.step),
                    body=self.stmts(s.body),
                )
            out.append(s)
        return tuple(out)

    def _store(self, e: Expr) -> Expr:
        if isinstance(e, Op) and e.op == "atomic":
            return self.annotate(e, None)
        if not (isinstance(e, Op) and e.op == "store" and e.args[0].type.is_tile):
            return self.annotate(e, None)
        ptr = e.args[0]
        value = self.natural(e.args[1])
        if value is not None and value.is_mma:
            layout = value  # an accumulator is stored from its own registers
        else:
            layout = self.natural(ptr) or value or self.default(ptr.type.shape)
        self.layouts.setdefault(layout.key, layout)
        args = tuple(
            self.annotate(a, layout.with_shape(a.type.shape, layout.dims))
            if a.type.is_tile
            else self.annotate(a, None)
            for a in e.args
        )
        return dataclasses.replace(e, args=args, layout=layout)


def _full_shape(layout: Layout, value: Expr) -> tuple[int, ...]:
    """The accumulator shape a slice layout was cut from, as far as ``value`` shows it: the
    value's own extent along each dimension where it has more than 1."""
    return tuple(max(a, b) for a, b in zip(layout.shape, value.type.shape, strict=True))


# ops that move or combine elements rather than compute each one from the same-placed elements
# of their operands (the elementwise ops are all the others)
_STRUCTURAL = frozenset(
    {
        "dot", "reduce", "scan", "load", "store", "atomic", "permute", "reshape", "flip",
        "cat", "join", "split", "expand_dims", "broadcast", "convert_layout", "arange", "full",
    }
)  # fmt: skip


def _restore(layout: Layout, e: Op) -> tuple[int, ...]:
    """The padded shape of a reduction's operand, from the reduction's layout."""
    shape = list(layout.shape)
    shape[_reduced_dim(layout, e)] = e.args[0].type.shape[e.attr("axis")]
    return tuple(shape)


def _restore_dims(layout: Layout, e: Op) -> tuple[int, ...]:
    if e.attr("keep_dims"):
        return layout.dims
    dims = list(layout.dims)
    dims.insert(e.attr("axis"), _reduced_dim(layout, e))
    return tuple(dims)


def _reduced_dim(layout: Layout, e: Op) -> int:
    if e.attr("keep_dims"):
        return layout.dims[e.attr("axis")]
    missing = [d for d in range(layout.blocked.rank) if d not in layout.dims]
    if not missing:
        raise CompileError("cannot place this reduction's input in a layout", e.loc)
    return missing[0]


def _numel(shape: tuple[int, ...]) -> int:
    n = 1 if shape else 0
    for s in shape:
        n *= s
    return n


def assign_layouts(kernel: ir.Kernel, wgmma: bool = False) -> tuple[ir.Kernel, dict[tuple, Layout]]:
    """Annotate every tile of ``kernel``; also return its layouts by C++ type, in first-use
    order. ``wgmma``: the target has Hopper's warpgroup MMA (sm_90a), and dots that fit it
    use it."""
    return LayoutPass(kernel, wgmma).run()


def _is_wgmma(layout: Layout) -> bool:
    return isinstance(layout.blocked, Mma) and layout.blocked.version == 3


def _loads_from(e: Expr | None) -> str | None:
    """The pointer-tile variable ``e`` loads from: ``load(p)`` or ``load(p + scalar)``."""
    if not (isinstance(e, Op) and e.op == "load"):
        return None
    ptr = e.args[0]
    if isinstance(ptr, Op) and ptr.op == "add" and not ptr.args[1].type.is_tile:
        ptr = ptr.args[0]
    return ptr.name if isinstance(ptr, Var) and ptr.type.is_tile else None


def is_pointer(e: Expr) -> bool:
    return isinstance(e.type.dtype, PointerType)
