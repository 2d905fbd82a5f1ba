"""The software-pipeline planner: which loads of a loop feeding ``dot`` become cp.async stages.

Input: a layout-annotated ``ir.Kernel`` after conversion placement (``lower/passes/convert.py``),
its axis info and the allocator of generated names. Output: the same kernel where each loop of the
shape below is an :class:`ir.PipelinedLoop`: its pipelined loads' declarations are
:class:`ir.Staged` markers, and the node carries every decision the emitter renders (stages,
look-ahead, buffer names and offsets, whether wgmma may overlap the next iteration).

A loop is pipelined when it reads ``for (k = init; cond; k = k + inc)`` with no break, continue
or return, ``k`` changed only by its step, and at the top of its body 2-D tile loads used only
as dot operands, from addresses (and masks) of ``k`` and values the loop does not change, 16
bytes at a time, zeros where masked. Such a load becomes ``cp.async`` copies into a ring of
``num_stages`` buffers, issued ``num_stages - 1`` iterations ahead (one less where wgmma of one
iteration may still read its stage while the next starts). Operands of 32-bit elements are
pipelined only with K contiguous (``ldmatrix.trans`` moves 16-bit elements only).

16-bit dot operands of such a loop that it does not change (variables declared before it:
attention's query block, dK/dV's key block) are written into shared memory once, before the
loop, after the rings (:class:`ir.StagedOnce`), instead of into the scratch buffer by every
iteration; not in loops that hold loops (whose own pipelines would reuse the region).

On sm_90a, where the loop's dots are wgmma that complete within the iteration, the stages
change hands through mbarriers (after the rings: a "full" and an "empty" barrier per stage)
instead of one ``__syncthreads`` per iteration (where every copy is whole 16-byte chunks):
every thread's copies into a stage arrive on its full barrier when they land, every thread
arrives on its empty barrier when its dots have read it, and the copies into a stage wait for
that stage's previous readers only. Warpgroups may then drift up to an iteration apart, so one's
softmax runs while another's wgmma does.

With TMA switched on (the kernel's module asks, ``Module.pipeline_tma``, as the attention
wrapper's does; or ``$TEENY_TX_PIPELINE_TMA``, read from ``kernel.switches``: ``1`` for every
kernel, or a comma-separated list of kernel names), a loop whose stages change hands through
mbarriers has its loads issued as TMA bulk tensor copies where every load's address is a
tensor map's box (:func:`tma_copy`): one thread arms the stage's full barrier with the stage's
bytes and issues the copies; the boxes land in the same 128-byte-swizzled panels cp.async
fills; rows past the extent the mask names read as zeros. The kernel then takes one
``CUtensorMap`` parameter per load, after its own (``runtime/tma.py`` encodes them from the
launch values).

Rings of a pipelined loop nested in another (dK/dV's query loop inside its loop over the query
heads of a group) start where the enclosing loop's rings end: the outer stages stay live while
the inner loop runs.

Where the launch asks (a kernel's ``WARP_SPECIALIZE`` constexpr), ``lower/passes/warp_spec.py`` then
gives the kernel's one TMA loop to a producer warpgroup (:class:`ir.WarpSpec`): one of its
threads issues every iteration's copies, and the kernel's own warps only compute.
"""

from __future__ import annotations

import dataclasses

from .. import ir
from ..ir import Const, Expr, Op, Var, walk_exprs, walk_stmts
from ..names import Names
from .axisinfo import AxisInfo
from .convert import assigned_names, needs_statement, var_names
from .warp_spec import plan_warp_specialization

STAGE_ALIGN = 1024  # each ring starts on a 1024-byte boundary (128-byte swizzle panels)
BARRIER_BYTES = 8  # one mbarrier
TMA_PANEL_BYTES = 128  # one box's inner extent: a 128-byte swizzled panel of the stage
TMA_MAX_BOX = 256  # elements along a box dimension
TMA_MAX_RANK = 5


def operand_source(x: Expr) -> tuple[Expr, bool]:
    """The tile a dot operand reads, and whether the dot reads it transposed."""
    if isinstance(x, Op) and x.op == "permute":
        return x.args[0], True
    return x, False


def kmajor_as_loaded(role: str, transposed: bool) -> bool:
    """Whether the operand's source, stored as it is, has K as its contiguous axis: A [M, K]
    does, B [K, N] does not; a transposed source flips it."""
    return (role == "a") != transposed


def _dots(stmts) -> list[Op]:
    return [e for e in walk_exprs(stmts) if isinstance(e, Op) and e.op == "dot"]


def _loop_var(s: ir.Loop) -> str:
    """The induction variable of a loop that :meth:`_Planner.candidates` accepted."""
    init = s.init[0]
    assert isinstance(init, ir.Declare), "a pipelined loop declares its variable"
    return init.name


# ---------------------------------------------------------------- TMA: addresses as boxes
#
# An address ``base + sum(scalar_i * stride_i) + (arange(0, R)[:, None] + row) * row_stride +
# arange(0, C)[None, :]`` is the box at (0, row, scalar_i...) of the tensor map of ``base`` over
# (C columns, rows, dims_i): each stride a runtime parameter (or a number) that is a multiple
# of 16 bytes, the columns contiguous. Terms are split at additions and multiplications by a
# stride; variables declared once are read through their definitions.

_TRANSPARENT = ("broadcast", "convert_layout")


def _text(e: Expr) -> str:
    """A structural spelling of ``e`` (IR nodes compare by identity)."""
    if isinstance(e, Op):
        attrs = ",".join(f"{k}={v}" for k, v in e.attrs if not hasattr(v, "__dict__"))
        return f"{e.op}[{attrs}]({', '.join(_text(a) for a in e.args)})"
    if isinstance(e, Var):
        return e.name
    if isinstance(e, Const):
        return repr(e.value)
    return type(e).__name__


class _Boxes:
    """The address analysis of :func:`tma_copy`, over one kernel's definitions."""

    def __init__(self, kernel: ir.Kernel, loop_var: str) -> None:
        self.params = {p.name: p for p in kernel.runtime_params}
        declared: dict[str, list[Expr]] = {}
        assigned: set[str] = set()
        for t in walk_stmts(kernel.body):
            if isinstance(t, ir.Declare) and t.init is not None:
                declared.setdefault(t.name, []).append(t.init)
            elif isinstance(t, ir.Assign):
                assigned.add(t.name)
        self.defs = {n: v[0] for n, v in declared.items() if len(v) == 1 and n not in assigned}
        self.loop_var = loop_var

    def deref(self, e: Expr) -> Expr:
        while True:
            if isinstance(e, Var) and e.name in self.defs:
                e = self.defs[e.name]
            elif isinstance(e, Op) and e.op in _TRANSPARENT:
                e = e.args[0]
            else:
                return e

    def scalar_ok(self, e: Expr) -> bool:
        """A scalar the copy can compute where it is issued: of parameters, the loop variable
        and variables declared once."""
        return not e.type.is_tile and all(
            n in self.params or n in self.defs or n == self.loop_var for n in var_names(e)
        )

    def index(self, e: Expr) -> list[tuple] | None:
        """The terms of an integer index: ("axis", dim, n) for arange(0, n) along tile
        dimension ``dim`` (None until an expand_dims places it), ("scalar", e) for the rest."""
        if not e.type.is_tile:
            return [("scalar", e)] if self.scalar_ok(e) else None
        e = self.deref(e)
        if not isinstance(e, Op):
            return None
        if e.op == "arange":
            return [("axis", None, e.attr("end"))] if e.attr("start") == 0 else None
        if e.op == "add":
            parts = [self.index(a) for a in e.args]
            return None if None in parts else [t for p in parts for t in p]  # type: ignore[union-attr]
        if e.op == "expand_dims" and len(e.type.shape) == 2:
            inner = self.index(e.args[0])
            dim = 1 - e.attr("axis")
            return (
                None
                if inner is None
                else [("axis", dim, t[2]) if t[0] == "axis" and t[1] is None else t for t in inner]
            )
        if not e.type.is_tile:
            return [("scalar", e)]
        return None

    def stride(self, e: Expr) -> str | int | None:
        if isinstance(e, Const) and isinstance(e.value, int):
            return e.value
        p = self.params.get(e.name) if isinstance(e, Var) else None
        if p is not None and not p.type.is_pointer and p.type.scalar.is_int:
            return p.name
        return None

    def offset(self, e: Expr) -> list[tuple[str | int, tuple]] | None:
        """(stride, index term) pairs of an integer offset."""
        d = self.deref(e) if e.type.is_tile else e
        if isinstance(d, Op) and d.op == "add" and d.type.is_tile == e.type.is_tile:
            parts = [self.offset(a) for a in d.args]
            return None if None in parts else [t for p in parts for t in p]  # type: ignore[union-attr]
        if isinstance(d, Op) and d.op == "mul":
            for x, y in (d.args, d.args[::-1]):
                stride = self.stride(y)
                if stride is not None and not (isinstance(stride, int) and stride == 1):
                    terms = self.index(x)
                    return None if terms is None else [(stride, t) for t in terms]
        terms = self.index(e)
        return None if terms is None else [(1, t) for t in terms]

    def address(self, e: Expr) -> tuple[str, list] | None:
        """(pointer parameter, (stride, term) pairs) of an address, or None."""
        e = self.deref(e)
        if isinstance(e, Var) and e.name in self.params and e.type.is_pointer:
            return e.name, []
        if isinstance(e, Op) and e.op == "add" and e.type.is_pointer:
            ptr, off = e.args if e.args[0].type.is_pointer else e.args[::-1]
            base, offset = self.address(ptr), self.offset(off)
            if base is None or offset is None:
                return None
            return base[0], base[1] + offset
        return None


def tma_copy(kernel: ir.Kernel, loop_var: str, load: Op, param: str) -> ir.TmaCopy | None:
    """The TMA form of a pipelined 2-D load (see above), or None where TMA cannot take it: 16-bit
    elements; rows of a whole number of 128-byte panels; at most 256 rows; a base aligned to 16
    bytes; strides that are multiples of 16 bytes; a mask, if any, that bounds the row index
    by a runtime parameter or a number (rows past it are the box's zero fill)."""
    rows, cols = load.type.shape
    dtype = load.type.dtype
    if dtype.itemsize != 2 or (cols * 2) % TMA_PANEL_BYTES or rows > TMA_MAX_BOX:
        return None
    boxes = _Boxes(kernel, loop_var)
    found = boxes.address(load.args[0])
    if found is None:
        return None
    base, terms = found
    if boxes.params[base].align < 16:
        return None
    by_stride: dict[str | int, list[tuple]] = {}
    for stride, term in terms:
        by_stride.setdefault(stride, []).append(term)
    unit = by_stride.pop(1, [])
    if [t for t in unit if t[0] == "axis"] != [("axis", 1, cols)] or len(unit) != 1:
        return None  # the columns: arange(0, cols) alone, contiguous
    row_strides = [s for s, ts in by_stride.items() if any(t[0] == "axis" for t in ts)]
    if len(row_strides) != 1:
        return None
    row_stride = row_strides[0]
    row_terms = by_stride.pop(row_stride)
    if [t for t in row_terms if t[0] == "axis"] != [("axis", 0, rows)]:
        return None
    row_coord = tuple(t[1] for t in row_terms if t[0] == "scalar")
    for stride in (row_stride, *by_stride):
        if isinstance(stride, int):
            if stride * 2 % 16:
                return None
        elif not boxes.params[stride].div16:
            return None
    extent: str | int | None = None
    if load.attr("masked"):
        mask = boxes.deref(load.args[1])
        if not (isinstance(mask, Op) and mask.op == "lt"):
            return None
        index, bound = mask.args
        found_terms = boxes.index(index)
        extent = boxes.stride(bound) if not bound.type.is_tile else None
        if found_terms is None or extent is None or isinstance(extent, int) and extent <= 0:
            return None
        terms = found_terms
        axes = [t for t in terms if t[0] == "axis"]
        if axes not in ([("axis", 0, rows)], [("axis", None, rows)]):
            return None
        mask_coord = sorted(_text(t[1]) for t in terms if t[0] == "scalar")
        if mask_coord != sorted(_text(x) for x in row_coord):
            return None
    dims = [ir.TmaDim(cols, 1), ir.TmaDim(extent, row_stride, row_coord)]
    for stride, ts in by_stride.items():
        dims.append(ir.TmaDim(None, stride, tuple(t[1] for t in ts)))
    if len(dims) > TMA_MAX_RANK:
        return None
    panel = TMA_PANEL_BYTES // 2
    return ir.TmaCopy(
        param=param,
        base=base,
        dtype=load.type.scalar.name,
        dims=tuple(dims),
        box=(panel, rows),
        panels=cols // panel,
    )


class _Planner:
    def __init__(self, kernel: ir.Kernel, axis: AxisInfo, names: Names) -> None:
        self.kernel = kernel
        target = kernel.target
        self.tma = target.tma and (kernel.pipeline_tma or kernel.switches.tma_for(kernel.name))
        self.stages = kernel.num_stages
        self.axis = axis
        self.names = names
        self.staged: set[str] = set()  # variables the enclosing pipelined loops stage
        # where the next ring may start: a loop nested in a pipelined loop runs while the
        # enclosing loop's stages hold live tiles, so its rings are placed after them
        self.base = 0

    def candidates(self, s: ir.Loop) -> list[tuple[ir.Declare, int]] | None:
        """The loads of ``s`` to pipeline with their vector widths, or None (see the module)."""
        if (
            (s.num_stages if s.num_stages is not None else self.stages) < 2
            or s.kind != "for"
            or s.cond is None
            or len(s.init) != 1
            or len(s.step) != 1
        ):
            return None
        init, step = s.init[0], s.step[0]
        if (
            not isinstance(init, ir.Declare)
            or init.type.is_tile
            or init.type.is_pointer
            or not init.type.scalar.is_int
        ):
            return None
        if not (
            isinstance(step, ir.Assign)
            and step.name == init.name
            and isinstance(step.value, Op)
            and step.value.op == "add"
            and isinstance(step.value.args[0], Var)
            and step.value.args[0].name == init.name
        ):
            return None
        changed = assigned_names([s])
        loop_var = init.name
        for x in (init.init, s.cond, step.value.args[1]):
            if x is None:  # a declaration without a value reads nothing
                continue
            if needs_statement(x) or (set(var_names(x)) & changed) - {loop_var}:
                return None
        if set(var_names(step.value.args[1])) & changed:
            return None
        if any(isinstance(t, (ir.Break, ir.Continue, ir.Return)) for t in walk_stmts(s.body)):
            return None
        if any(isinstance(t, ir.Assign) and t.name == loop_var for t in walk_stmts(s.body)):
            return None
        # how each variable is used in the body: as which dot operands, and in total
        roles: dict[str, list[tuple[str, bool]]] = {}
        uses: dict[str, int] = {}
        for e in walk_exprs(s.body):
            if isinstance(e, Var):
                uses[e.name] = uses.get(e.name, 0) + 1
            if isinstance(e, Op) and e.op == "dot":
                for role, x in zip(("a", "b"), e.args[:2], strict=True):
                    src, transposed = operand_source(x)
                    if isinstance(src, Var):
                        roles.setdefault(src.name, []).append((role, transposed))
        found = []
        for t in s.body:
            if not (
                isinstance(t, ir.Declare)
                and isinstance(t.init, Op)
                and t.init.op == "load"
                and t.type.is_tile
                and len(t.type.shape) == 2
                and t.name in roles
                and uses.get(t.name) == len(roles[t.name])
                and not any(
                    isinstance(u, ir.Assign) and u.name == t.name for u in walk_stmts(s.body)
                )
            ):
                continue
            load = t.init
            exprs = [load.args[0]]
            if load.attr("masked"):
                mask, other = load.args[1], load.args[2]
                if not (isinstance(other, Const) and other.value == 0):
                    continue
                exprs.append(mask)
            if any(needs_statement(x) or (set(var_names(x)) & changed) - {loop_var} for x in exprs):
                continue
            if t.type.dtype.itemsize != 2 and not all(
                kmajor_as_loaded(r, tr) for r, tr in roles[t.name]
            ):
                continue
            vec = self.axis.vector_width(load.args[0], load.layout)
            if vec * t.type.dtype.itemsize != 16 or load.layout.dims != (0, 1):
                continue
            found.append((t, vec))
        return found or None

    def plan(self, s: ir.Loop) -> ir.Stmt:
        found = self.candidates(s)
        if not found:
            return dataclasses.replace(s, body=self.block(s.body))
        stages = s.num_stages if s.num_stages is not None else self.stages  # its pragma's
        dots = _dots(s.body)
        wgmma = [e for e in dots if e.layout.blocked.version == 3]
        tf32 = {
            src.name
            for e in wgmma
            if e.attr("precision") == "TF32"
            for x in e.args[:2]
            for src in (operand_source(x)[0],)
            if isinstance(src, Var)
        }
        names = {t.name for t, _ in found}
        changed = assigned_names([s])
        once_vars: dict[str, Var] = {}
        holds_loops = any(isinstance(t, (ir.Loop, ir.PipelinedLoop)) for t in walk_stmts(s.body))
        if not holds_loops:
            for e in dots:
                for x in e.args[:2]:
                    src = operand_source(x)[0]
                    if (
                        isinstance(src, Var)
                        and src.name not in changed
                        and src.name not in names
                        and src.name not in self.staged
                        and src.type.is_tile
                        and src.type.dtype.itemsize == 2
                        and src.layout is not None
                    ):
                        once_vars.setdefault(src.name, src)
        names |= set(once_vars)
        sources = [operand_source(x)[0] for e in dots for x in e.args[:2]]
        # wgmma may run on while the next iteration starts when each dot reads only pipelined
        # operands: the copies then run one stage less ahead, to leave its stage alone
        overlap = (
            bool(wgmma)
            and stages >= 3
            and len(wgmma) == len(dots)
            and all(isinstance(x, Var) and x.name in names for x in sources)
        )
        loads, offset = {}, self.base
        for t, vec in found:
            load = t.init
            assert isinstance(load, Op), "candidates() takes declarations of a load"
            rows, cols = load.type.shape
            mask = load.args[1] if load.attr("masked") else None
            loads[t.name] = ir.StagedLoad(
                var=t.name,
                load=load,
                vec=vec,
                tile=self.names.fresh(f"{t.name}_tile"),
                buffer=self.names.fresh(f"{t.name}_stages"),
                offset=offset,
                chunk_mask=mask is not None and self.axis.info(mask).const >= vec,
                tf32=t.name in tf32,
            )
            size = stages * rows * cols * load.type.dtype.itemsize
            offset += -(-size // STAGE_ALIGN) * STAGE_ALIGN
        once = []
        for name, var in once_vars.items():
            once.append(
                ir.StagedOnce(
                    var=name,
                    value=var,
                    tile=self.names.fresh(f"{name}_tile"),
                    buffer=self.names.fresh(f"{name}_smem"),
                    offset=offset,
                )
            )
            rows, cols = var.type.shape
            offset += -(-rows * cols * var.type.dtype.itemsize // STAGE_ALIGN) * STAGE_ALIGN
        # the stages change hands through mbarriers, so the warpgroups need not meet at a
        # block-wide barrier each iteration (one may run its softmax while another's wgmma
        # runs): where the dots are wgmma that finish within their iteration, the loop holds no
        # loop (whose own barriers would meet anyway), no copy is rounded in place (TF32) and
        # every copy is whole 16-byte cp.async chunks (a ragged chunk's element-wise stores
        # would not be covered by the copies' arrival)
        barriers = (
            bool(wgmma)
            and not overlap
            and not tf32
            and all(x.chunk_mask or not x.load.attr("masked") for x in loads.values())
            and not holds_loops
        )
        barrier_offset = offset
        if barriers:
            offset += -(-2 * stages * BARRIER_BYTES // 16) * 16
        if barriers and self.tma:
            # every load of the loop as TMA boxes, or none (a stage's full barrier counts either
            # one thread's expected bytes or every thread's cp.async arrivals)
            copies = {
                name: tma_copy(self.kernel, _loop_var(s), x.load, self.names.fresh(f"{name}_map"))
                for name, x in loads.items()
            }
            if all(c is not None for c in copies.values()):
                loads = {
                    name: dataclasses.replace(x, tma=copies[name]) for name, x in loads.items()
                }
        body = tuple(
            ir.Staged(loc=t.loc, name=t.name, staged=loads[t.name])
            if isinstance(t, ir.Declare) and t.name in loads
            else t
            for t in s.body
        )
        outer, base = self.staged, self.base
        self.staged, self.base = outer | set(loads), offset
        inner = self.block(body)
        self.staged, self.base = outer, base
        return ir.PipelinedLoop(
            loc=s.loc,
            loop=dataclasses.replace(s, body=inner),
            loads=tuple(loads.values()),
            stages=stages,
            ahead=stages - 2 if overlap else stages - 1,
            overlap=overlap,
            async_reads=bool(wgmma),
            bytes=offset + STAGE_ALIGN,  # the end of its rings + the region's 1024 alignment
            stage=self.names.fresh("stage"),
            stage_ahead=self.names.fresh("stage_ahead"),
            k_ahead=self.names.fresh(f"{_loop_var(s)}_ahead"),
            prologue=self.names.fresh("prologue_stage"),
            once=tuple(once),
            barriers=self.names.fresh("stage_barriers") if barriers else None,
            barrier_offset=barrier_offset,
            iteration=self.names.fresh("iteration") if barriers else None,
        )

    def block(self, stmts) -> tuple[ir.Stmt, ...]:
        out = []
        for s in stmts:
            if isinstance(s, ir.Loop):
                s = self.plan(s)
            elif isinstance(s, ir.If):
                s = dataclasses.replace(s, then=self.block(s.then), orelse=self.block(s.orelse))
            out.append(s)
        return tuple(out)


def plan_pipelines(kernel: ir.Kernel, axis: AxisInfo, names: Names) -> ir.Kernel:
    """``kernel`` with every loop that has the shape above software-pipelined, and its TMA
    pipeline warp-specialised where the launch asks (``lower/passes/warp_spec.py``)."""
    if not kernel.target.cp_async:  # no asynchronous copies: the loops stay as written
        return kernel
    kernel = dataclasses.replace(kernel, body=_Planner(kernel, axis, names).block(kernel.body))
    return plan_warp_specialization(kernel)
