"""How each ``dot`` reads its operands: decided here, rendered by ``templates/emit_dot.py``.

Input: a kernel after ``lower/passes/pipeline.py`` (its pipelined loops are ir.PipelinedLoop nodes)
and the allocator of generated names. Output: the same kernel where every ``dot`` op carries a
:class:`DotPlan` (attr ``plan``): the instruction, and for each operand where its shared-memory
tile comes from:

- ``stage``: the current stage of a pipelined loop's ring (the loop's copies put it there);
- ``scratch``: the operand's registers written into the scratch buffer just before the dot
  (``tx::stage``), 16-bit operands as they are (ldmatrix.trans and wgmma read either way), the
  others with K contiguous (``flip``);
- ``once``: the operand's shared tile written once before a pipelined loop that does not
  change it (``ir.StagedOnce``: attention's query block);
- ``registers``: wgmma's register-A form (``tx::wgmma_rs``, sm_90a): a 16-bit A tile, not
  transposed, held in a wgmma accumulator layout of the dot's warps (attention's
  ``P = (f16)p``, computed from a product) passes its registers as the A fragments, so it never
  touches shared memory.

Deferred waits. A wgmma dot that is a statement's whole value (``s = dot(q, trans(k))``,
``acc = dot(p, v, acc)``), reading no scratch operand, is issued without waiting for it
(``deferred``): an :class:`ir.WgmmaWait` goes before the first later statement of its block that
reads or writes its result (or holds a dot that is not deferred; at the latest, the block's
end), waiting until only the groups issued after it run on. The statements in between run
while the tensor cores multiply: the softmax of one key block while the product with the
previous block's probabilities runs, the second product of a backward step while the first
does. A block where only copies (``m_i = m_new``) would run between a dot and its wait is
left as it was; ``$TEENY_TX_DEFER_WAITS=0`` (read from ``kernel.switches``) leaves every
block so (each wgmma waits right after its issue), to measure what the deferral buys.

The emitter computes both operands' registers before it stages either: computing one (moving
its index tiles between layouts, say) may use the scratch buffer, where the other would already
be staged.

Dots whose shape the tensor cores cannot take are a located error here.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ...errors import CompileError
from ...target import Target
from .. import ir
from ..ir import Expr, Op, Var, walk_exprs, walk_stmts
from ..names import Names
from .pipeline import kmajor_as_loaded, operand_source

# the instruction (prelude/mma.cuh) of each operand dtype and precision; None: FMAs (f32, f64)
INSTRUCTIONS = {
    ("f16", "IEEE"): "tx::MmaF16",
    ("bf16", "IEEE"): "tx::MmaBF16",
    ("i8", "IEEE"): "tx::MmaI8",
    ("f32", "TF32"): "tx::MmaTF32",
    ("f32", "TF32X3"): "tx::MmaTF32x3",
    ("f32", "IEEE"): None,
    ("f64", "IEEE"): None,
}
WGMMA_ALIGN = 1024  # wgmma reads 128-byte swizzled panels from a 1024-aligned base


@dataclass(frozen=True)
class DotOperand:
    role: str  # "a" or "b"
    source: str  # "stage", "once", "scratch" or "registers" (see the module)
    kmajor: bool  # K is the contiguous axis of the shared tile (True for "registers")
    tile: str  # the shared tile's C++ type (tx::SmemTile); "" for "registers"
    pointer: str  # its first element: a stage ring's buffer, or the scratch pointer; "" for
    # "registers"
    stage: str = ""  # the stage counter (source "stage")
    flip: bool = False  # written transposed, so K is contiguous (source "scratch")
    rows: int = 0  # the shared tile's shape and offset in the scratch (source "scratch")
    cols: int = 0
    offset: int = 0


@dataclass(frozen=True)
class DotPlan:
    instruction: str | None  # an mma.sync instruction, or None: FMAs (unused for wgmma)
    wgmma: bool
    operands: tuple[DotOperand, DotOperand]
    scratch_bytes: int  # of the scratch buffer, 0 when both operands are staged by a pipeline
    pending: int  # wgmma groups this dot may leave running (a pipelined loop that overlaps)
    k: int
    deferred: bool = False  # issued without a wait: an ir.WgmmaWait before its first use
    fragments: str = ""  # a deferred register-A dot: its packed A registers, kept to the wait

    @property
    def from_scratch(self) -> bool:
        return any(o.source == "scratch" for o in self.operands)

    @property
    def register_a(self) -> bool:
        return self.operands[0].source == "registers"


def _register_a(a: Expr, acc: Op) -> bool:
    """Whether a wgmma dot reads its A operand from the registers it is in (see the module):
    a 16-bit tile, not transposed, in the wgmma accumulator layout of the dot's warps, of the
    dot's M and the operand's K."""
    src, transposed = operand_source(a)
    lay = src.layout
    return (
        not transposed
        and src.type.dtype.itemsize == 2
        and lay is not None
        and lay.is_mma
        and lay.blocked.version == 3
        and lay.blocked.warps == acc.layout.blocked.warps
        and lay.dims == (0, 1)
        and lay.shape == (acc.type.shape[0], a.type.shape[1])
    )


class _Planner:
    def __init__(self, names: Names, defer: bool, target: Target) -> None:
        self.names = names
        self.defer = defer
        self.target = target
        self.staged: dict[str, tuple[ir.StagedLoad, str]] = {}
        self.once: dict[str, ir.StagedOnce] = {}
        self.pending = 0

    def dot(self, e: Op) -> Op:
        a, b, _ = e.args
        dtype = a.type.scalar
        m, n = e.type.shape
        k = a.type.shape[1]
        k_step = 32 // dtype.itemsize
        if m % 16 or n % 16 or k % k_step:
            raise CompileError(
                f"dot() on the GPU needs M and N multiples of 16 and K a multiple of {k_step} "
                f"for {dtype.name}, got M={m}, N={n}, K={k}",
                e.loc,
                "pad the tiles (masked loads fill the padding with zeros)",
            )
        wgmma = e.layout.blocked.version == 3
        instruction = INSTRUCTIONS[(dtype.name, e.attr("precision"))]
        if instruction is not None and not wgmma and not self.target.mma_sync:
            raise CompileError(
                f"dot() of {dtype.name} runs on tensor cores (mma.sync, sm_80 on); "
                f"{self.target.arch} has none",
                e.loc,
                "compile for sm_80 or later (target=...)",
            )
        operands, offset = [], 0
        for role, x in (("a", a), ("b", b)):
            src, transposed = operand_source(x)
            as_loaded = kmajor_as_loaded(role, transposed)
            if isinstance(src, Var) and src.name in self.staged:
                load, stage = self.staged[src.name]
                operands.append(DotOperand(role, "stage", as_loaded, load.tile, load.buffer, stage))
                continue
            if isinstance(src, Var) and src.name in self.once:
                once = self.once[src.name]
                operands.append(DotOperand(role, "once", as_loaded, once.tile, once.buffer))
                continue
            if role == "a" and wgmma and _register_a(x, e):
                operands.append(DotOperand(role, "registers", True, "", ""))
                continue
            flip = dtype.itemsize != 2 and not as_loaded
            rows, cols = src.type.shape[::-1] if flip else src.type.shape
            operands.append(
                DotOperand(
                    role,
                    "scratch",
                    as_loaded or flip,
                    self.names.fresh(f"{role}_tile"),
                    self.names.fresh(f"{role}_smem"),
                    flip=flip,
                    rows=rows,
                    cols=cols,
                    offset=offset,
                )
            )
            offset += rows * cols * dtype.itemsize
        if instruction is None and not wgmma and not all(o.kmajor for o in operands):
            raise CompileError("internal: an FMA dot operand is not K-major", e.loc)
        from_scratch = offset > 0
        assert len(operands) == 2, "a dot has two operands"
        plan = DotPlan(
            instruction,
            wgmma,
            (operands[0], operands[1]),
            offset + (WGMMA_ALIGN if wgmma and from_scratch else 0),
            0 if from_scratch or not wgmma else self.pending,
            k,
        )
        return dataclasses.replace(e, attrs=(*e.attrs, ("plan", plan)))

    def expr(self, e: Expr) -> Expr:
        if not isinstance(e, Op):
            return e
        args = tuple(self.expr(a) for a in e.args)
        if args != e.args:
            e = dataclasses.replace(e, args=args)
        return self.dot(e) if e.op == "dot" else e

    def block(self, stmts) -> tuple[ir.Stmt, ...]:
        block = tuple(self.stmt(s) for s in stmts)
        return defer_waits(block, self.names) if self.defer else block

    def stmt(self, s: ir.Stmt) -> ir.Stmt:
        if isinstance(s, ir.Declare):
            init = self.expr(s.init) if s.init is not None else None
            return dataclasses.replace(s, init=init)
        if isinstance(s, ir.Assign):
            return dataclasses.replace(s, value=self.expr(s.value))
        if isinstance(s, ir.Eval):
            return dataclasses.replace(s, expr=self.expr(s.expr))
        if isinstance(s, ir.If):
            return dataclasses.replace(
                s, cond=self.expr(s.cond), then=self.block(s.then), orelse=self.block(s.orelse)
            )
        if isinstance(s, ir.Loop):
            return dataclasses.replace(
                s,
                init=self.block(s.init),
                cond=self.expr(s.cond) if s.cond is not None else None,
                step=self.block(s.step),
                body=self.block(s.body),
            )
        if isinstance(s, ir.PipelinedLoop):
            outer = dict(self.staged), dict(self.once), self.pending
            for load in s.loads:
                self.staged[load.var] = (load, s.stage)
            for once in s.once:
                self.once[once.var] = once
            self.pending = 1 if s.overlap else 0
            loop = self.stmt(s.loop)
            assert isinstance(loop, ir.Loop)
            self.staged, self.once, self.pending = outer
            return dataclasses.replace(s, loop=loop)
        return s


def plan_dots(kernel: ir.Kernel, names: Names) -> ir.Kernel:
    """``kernel`` with a :class:`DotPlan` on every dot."""
    return dataclasses.replace(
        kernel, body=_Planner(names, kernel.switches.defer_waits, kernel.target).block(kernel.body)
    )


# ---------------------------------------------------------------- deferred waits


def _deferrable(s: ir.Stmt) -> Op | None:
    """The dot of a statement whose whole value is a wgmma dot that may run on past it: its
    operands in shared memory already (a stage, a tile staged once) or in registers, its
    result in the variable's own layout."""
    value = s.init if isinstance(s, ir.Declare) else s.value if isinstance(s, ir.Assign) else None
    if not (isinstance(value, Op) and value.op == "dot" and value.type.is_tile):
        return None
    plan: DotPlan | None = value.attr("plan")
    if plan is None or not plan.wgmma or plan.from_scratch or plan.pending:
        return None
    if isinstance(s, ir.Declare) and (s.layout is None or s.layout.key != value.layout.key):
        return None
    return value


def _touched(s: ir.Stmt) -> set[str]:
    """The variables a statement reads or writes, nested statements included."""
    names = {e.name for e in walk_exprs([s]) if isinstance(e, Var)}
    for t in walk_stmts([s]):
        if isinstance(t, (ir.Declare, ir.Assign, ir.Staged)):
            names.add(t.name)
    return names


def _computed(stmts: list[ir.Stmt]) -> tuple[Var, ...]:
    """The 32-bit tiles that ``stmts`` (the top level of a block) write, other than the results
    of dots, each once: fenced before a wait, so the compiler cannot sink their work past it
    (it would, to shorten their registers' lives, and the overlap would be lost)."""
    found: dict[str, Var] = {}
    for s in stmts:
        if _deferrable(s) is not None or not isinstance(s, (ir.Declare, ir.Assign)):
            continue
        value = s.init if isinstance(s, ir.Declare) else s.value
        layout = s.layout if isinstance(s, ir.Declare) else value.layout if value else None
        if value is None or not value.type.is_tile or layout is None:
            continue
        if value.type.is_pointer or value.type.scalar.name not in ("f32", "i32"):
            continue
        found.pop(s.name, None)
        found[s.name] = Var(type=value.type, loc=s.loc, layout=layout, name=s.name)
    return tuple(found.values())


def _fragments(s: ir.Stmt) -> tuple[tuple[str, int], ...]:
    """A deferred register-A dot statement's packed A registers: (name, K steps)."""
    dot = s.init if isinstance(s, ir.Declare) else s.value if isinstance(s, ir.Assign) else None
    plan = dot.attr("plan") if isinstance(dot, Op) else None
    return ((plan.fragments, plan.k // 16),) if plan is not None and plan.fragments else ()


def _copy(s: ir.Stmt) -> bool:
    """A statement that does no work worth overlapping: a wait, or a copy of a variable
    (``m_i = m_new``)."""
    if isinstance(s, ir.WgmmaWait):
        return True
    value = s.init if isinstance(s, ir.Declare) else s.value if isinstance(s, ir.Assign) else None
    return isinstance(value, Var)


def _holds_dot(s: ir.Stmt) -> bool:
    return any(isinstance(e, Op) and e.op == "dot" for e in walk_exprs([s]))


def defer_waits(block: tuple[ir.Stmt, ...], names: Names) -> tuple[ir.Stmt, ...]:
    """``block`` with its deferrable dots issued without a wait and an :class:`ir.WgmmaWait`
    before each one's first use (see the module). A dot is deferred only where work runs
    between it and its wait: a statement other than a copy, or another deferred dot that is so
    itself; the others wait right after their issue, and a block with none is unchanged."""
    allowed = {i for i, s in enumerate(block) if _deferrable(s) is not None}
    while allowed:
        _, useful = _place_waits(block, allowed, None)
        if useful == allowed:
            return _place_waits(block, allowed, names)[0]
        allowed = useful
    return block


def _place_waits(
    block: tuple[ir.Stmt, ...], allowed: set[int], names: Names | None
) -> tuple[tuple[ir.Stmt, ...], set[int]]:
    """``block`` with the dots at the indices ``allowed`` deferred (fragment names from
    ``names``; None: a trial), and the indices of those whose deferral is useful."""
    out: list[ir.Stmt] = []
    running: list[tuple[Var, int, int]] = []  # deferred results in issue order: out, block index
    work: dict[int, bool] = {}  # by a deferred dot's block index: work ran before its wait
    between: dict[int, list[int]] = {}  # by the same: the deferred dots issued before it

    def wait(upto: int, loc) -> None:
        """Wait for running[:upto + 1] (the groups complete in order)."""
        nonlocal running
        done, running = running[: upto + 1], running[upto + 1 :]
        for _, at, index in done:
            later = out[at + 1 :]
            work[index] = any(not _copy(t) and _deferred_dot(t) is None for t in later)
        computed = _computed(out[done[0][1] + 1 :])
        results = tuple(v for v, _, _ in done)
        fragments = tuple(f for _, at, _ in done for f in _fragments(out[at]))
        out.append(
            ir.WgmmaWait(
                loc=loc,
                pending=len(running),
                results=results,
                computed=computed,
                fragments=fragments,
            )
        )

    for index, s in enumerate(block):
        dot = _deferrable(s) if index in allowed else None
        if running:
            touched = _touched(s)
            hit = [i for i, (v, _, _) in enumerate(running) if v.name in touched]
            if hit:
                wait(hit[-1], s.loc)
            if running and dot is None and _holds_dot(s):
                wait(len(running) - 1, s.loc)
        if dot is not None:
            assert isinstance(s, (ir.Declare, ir.Assign)), "_deferrable takes these only"
            var = Var(type=dot.type, loc=s.loc, layout=dot.layout, name=s.name)
            plan = dataclasses.replace(dot.attr("plan"), deferred=True)
            if plan.register_a:
                fragments = names.fresh("a_frags") if names is not None else "a_frags"
                plan = dataclasses.replace(plan, fragments=fragments)
            attrs = tuple((k, plan if k == "plan" else v) for k, v in dot.attrs)
            dot = dataclasses.replace(dot, attrs=attrs)
            s = (
                dataclasses.replace(s, init=dot)
                if isinstance(s, ir.Declare)
                else dataclasses.replace(s, value=dot)
            )
            for _, _, other in running:
                between.setdefault(other, []).append(index)
            running.append((var, len(out), index))
        out.append(s)
    if running:
        wait(len(running) - 1, block[-1].loc)
    useful = {i for i, w in work.items() if w}
    grew = True
    while grew:  # a dot is useful where a useful deferred dot is issued before its wait
        grew = False
        for i in work:
            if i not in useful and any(j in useful for j in between.get(i, [])):
                useful.add(i)
                grew = True
    return tuple(out), useful


def _deferred_dot(s: ir.Stmt) -> Op | None:
    value = s.init if isinstance(s, ir.Declare) else s.value if isinstance(s, ir.Assign) else None
    if not isinstance(value, Op) or value.op != "dot":
        return None
    plan = value.attr("plan")
    return value if plan is not None and plan.deferred else None
