"""The typed block IR: every node the lowering produces, declared in one place.

Input: nothing (declarations only). Output: frozen dataclasses that ``lower/build/builder.py``
builds from the pycparser AST, ``lower/passes/layout.py`` annotates with layouts, the emitter
renders into CUDA and the interpreter executes on NumPy. Every node carries its source location.
:func:`walk_stmts` and :func:`walk_exprs` are the traversals every pass and consumer shares.

A value's :class:`Type` is a dtype (or pointer type) and a static shape; shape ``()`` is a
scalar, uniform across the program. Tile-valued nodes carry a ``layout`` once the layout pass
has run (None before: the interpreter never looks at it).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from ..dtypes import DType
from ..errors import Location
from ..switches import CodegenSwitches
from ..target import DEFAULT_ARCH, Target


@dataclass(frozen=True)
class PointerType:
    """Pointer to global memory holding ``elem``; ``const`` pointers are read-only."""

    elem: DType
    const: bool = False

    @property
    def itemsize(self) -> int:
        """Bytes of one pointer (a tile of pointers staged through shared memory takes them)."""
        return 8

    def __str__(self) -> str:
        return f"{'const ' if self.const else ''}{self.elem}*"


Elem = DType | PointerType


@dataclass(frozen=True)
class Type:
    dtype: Elem
    shape: tuple[int, ...] = ()

    @property
    def is_tile(self) -> bool:
        return bool(self.shape)

    @property
    def is_pointer(self) -> bool:
        return isinstance(self.dtype, PointerType)

    @property
    def scalar(self) -> DType:
        """The element dtype of a value that is not a pointer (checked)."""
        assert isinstance(self.dtype, DType), f"{self} is a pointer type"
        return self.dtype

    @property
    def pointer(self) -> PointerType:
        """The pointer type of a pointer value (checked)."""
        assert isinstance(self.dtype, PointerType), f"{self} is not a pointer type"
        return self.dtype

    @property
    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    def with_dtype(self, dtype: Elem) -> Type:
        return Type(dtype, self.shape)

    def with_shape(self, shape: tuple[int, ...]) -> Type:
        return Type(self.dtype, shape)

    def __str__(self) -> str:
        if not self.shape:
            return str(self.dtype)
        return f"{self.dtype}[{', '.join(map(str, self.shape))}]"


# ---------------------------------------------------------------- expressions


@dataclass(frozen=True, kw_only=True, eq=False)
class Expr:
    type: Type
    loc: Location
    layout: Any = None  # a lower.passes.layout.Layout for tiles, after the layout pass


@dataclass(frozen=True, kw_only=True, eq=False)
class Const(Expr):
    """A compile-time constant. ``weak`` constants (literals, constexpr parameters) adopt the
    dtype of the typed operand they meet (Triton's rule for Python scalars)."""

    value: int | float | bool
    weak: bool = False
    name: str | None = None  # a constexpr parameter's name, kept for readable CUDA


@dataclass(frozen=True, kw_only=True, eq=False)
class Var(Expr):
    """A read of a local variable or a kernel parameter."""

    name: str


@dataclass(frozen=True, kw_only=True, eq=False)
class Op(Expr):
    """An application of an entry of the op table (``lower/ops/table.py``) to operands.

    ``attrs`` holds the op's static arguments (an axis, the bounds of an arange, a target
    dtype) as a tuple of (name, value) pairs so the node stays hashable and printable.
    """

    op: str
    args: tuple[Expr, ...] = ()
    attrs: tuple[tuple[str, Any], ...] = ()

    def attr(self, name: str, default: Any = None) -> Any:
        for key, value in self.attrs:
            if key == name:
                return value
        return default


# ---------------------------------------------------------------- statements


@dataclass(frozen=True, kw_only=True, eq=False)
class Stmt:
    loc: Location


@dataclass(frozen=True, kw_only=True, eq=False)
class Declare(Stmt):
    """Declare a local (scalar or tile) with its fixed type; ``init`` is already converted."""

    name: str
    type: Type
    init: Expr | None
    layout: Any = None


@dataclass(frozen=True, kw_only=True, eq=False)
class Assign(Stmt):
    name: str
    value: Expr


@dataclass(frozen=True, kw_only=True, eq=False)
class Eval(Stmt):
    """An operation run for its effect (store)."""

    expr: Expr


@dataclass(frozen=True, kw_only=True, eq=False)
class If(Stmt):
    cond: Expr
    then: tuple[Stmt, ...]
    orelse: tuple[Stmt, ...] = ()


@dataclass(frozen=True, kw_only=True, eq=False)
class Loop(Stmt):
    """``for``/``while``/``do``: ``cond`` is a scalar; ``step`` runs after the body and on
    ``continue`` (the for-loop's increment). ``init`` declarations belong to the loop's scope.
    ``unroll`` and ``num_stages``: the pragmas written before it (None: the compiler's)."""

    kind: str
    init: tuple[Stmt, ...]
    cond: Expr | None
    step: tuple[Stmt, ...]
    body: tuple[Stmt, ...]
    unroll: int | None = None  # `#pragma unroll N` (Triton's loop_unroll_factor)
    num_stages: int | None = None  # `#pragma num_stages N`: this loop's software pipeline


@dataclass(frozen=True, kw_only=True, eq=False)
class Break(Stmt):
    pass


@dataclass(frozen=True, kw_only=True, eq=False)
class Continue(Stmt):
    pass


@dataclass(frozen=True, kw_only=True, eq=False)
class Return(Stmt):
    pass


# ---------------------------------------------------------------- decided by the lower passes


@dataclass(frozen=True)
class TmaDim:
    """One dimension of a :class:`TmaCopy`'s tensor map, innermost first: its extent and its
    stride in elements, each a runtime parameter's name or a number (``None`` extent: not
    bounded by the kernel — the map takes the largest), and the box's start coordinate along
    it, as the scalar terms whose sum the copy issues (``()``: 0)."""

    extent: str | int | None
    stride: str | int
    coord: tuple[Expr, ...] = ()


@dataclass(frozen=True)
class TmaCopy:
    """A staged load that one thread issues as TMA bulk tensor copies (sm_90a): the tensor
    map of ``base`` (a pointer parameter) over ``dims``, encoded on the host and passed as
    the kernel parameter ``param`` (``const __grid_constant__``); boxes of ``box`` = (inner,
    rows) elements, ``cols // box[0]`` of them side by side (one 128-byte swizzled panel of the
    stage each). Rows past the extent of a dimension read as zeros (the load's mask)."""

    param: str
    base: str
    dtype: str
    dims: tuple[TmaDim, ...]
    box: tuple[int, int]
    panels: int


@dataclass(frozen=True, kw_only=True, eq=False)
class StagedLoad:
    """A loop's tile load that the software pipeline (``lower/passes/pipeline.py``) moves global ->
    shared memory by cp.async into a ring of stages, 16 bytes (``vec`` elements) at a time.
    ``tile`` and ``buffer`` name the shared tile's C++ type and its first stage; ``offset`` is
    where the ring starts in the pipeline region (bytes); ``chunk_mask``: the mask is constant
    over each 16-byte chunk (a zero-filling copy), else a chunk cut by the edge is copied by
    lane; ``tf32``: wgmma reads it as TF32, so each landed stage is rounded first; ``tma``:
    the copy is a TMA bulk tensor copy instead (``lower/passes/pipeline.py``, behind a switch)."""

    var: str
    load: Op
    vec: int
    tile: str
    buffer: str
    offset: int
    chunk_mask: bool
    tf32: bool = False
    tma: TmaCopy | None = None


@dataclass(frozen=True, kw_only=True, eq=False)
class Staged(Stmt):
    """Where a pipelined loop declared ``name``: its value is the current stage in shared
    memory, copied there ahead by the pipeline."""

    name: str
    staged: StagedLoad


@dataclass(frozen=True, kw_only=True, eq=False)
class StagedOnce:
    """A 16-bit dot operand that a pipelined loop does not change (attention's query block),
    written from its registers (``value``, a variable) into shared memory once, before the
    loop, at ``offset`` of the pipeline region, after the rings; ``tile`` and ``buffer`` name
    the shared tile's C++ type and its first element. The loop's dots read it there."""

    var: str
    value: Var
    tile: str
    buffer: str
    offset: int


@dataclass(frozen=True)
class WarpSpec:
    """How a TMA-pipelined loop is warp-specialised (``lower/passes/warp_spec.py``): a producer
    warpgroup after the kernel's ``compute_threads`` threads, whose one elected thread issues
    the copies of every iteration, computing only ``slice`` (the scalar declarations, in kernel
    order, that the copies' coordinates and the loop bounds read); ``setmaxnreg`` leaves it
    ``producer_registers`` per thread and gives the compute warps ``consumer_registers``. The
    compute warps synchronise among themselves at named barrier ``barrier``. ``pingpong``: the
    two compute warpgroups take turns at the tensor cores, each dot of the loop one turn (named
    barriers ``turns`` and ``turns + 1``, one per warpgroup), so one's softmax runs while the
    other's products do; ``pingpong_refused``: why not, where it was asked for."""

    slice: tuple[Stmt, ...]
    compute_threads: int
    producer_registers: int
    consumer_registers: int
    entry_registers: int = 0  # each thread's at launch (the compute warps keep them if more)
    barrier: int = 1
    pingpong: bool = False
    turns: int = 2
    pingpong_refused: str | None = None


@dataclass(frozen=True, kw_only=True, eq=False)
class PipelinedLoop(Stmt):
    """A ``for`` loop whose ``loads`` run ``ahead`` iterations ahead of its body through a ring
    of ``stages`` shared-memory buffers (``bytes`` in all, 1024-aligned). ``loop`` is the loop
    with those loads' declarations replaced by :class:`Staged`. ``overlap``: the dots (wgmma)
    of one iteration may still run while the next starts. ``stage``, ``stage_ahead``,
    ``k_ahead`` and ``prologue`` are the generated names of the counters the loop keeps.
    ``barriers``: the name of the loop's mbarrier pairs (one "full" and one "empty" per stage,
    at ``barrier_offset`` of the pipeline region) where the stages are handed over by
    mbarriers instead of a block-wide barrier per iteration, and ``iteration`` its iteration
    counter; None where the loop synchronises with ``__syncthreads``."""

    loop: Loop
    loads: tuple[StagedLoad, ...]
    stages: int
    ahead: int
    overlap: bool
    async_reads: bool
    bytes: int
    stage: str
    stage_ahead: str
    k_ahead: str
    prologue: str
    once: tuple[StagedOnce, ...] = ()  # operands staged once before the loop
    barriers: str | None = None
    barrier_offset: int = 0
    iteration: str | None = None
    warp_spec: WarpSpec | None = None  # filled by a producer warpgroup (lower/passes/warp_spec.py)


@dataclass(frozen=True, kw_only=True, eq=False)
class WgmmaWait(Stmt):
    """Wait until at most ``pending`` warpgroup-MMA groups run on, then read ``results`` (the
    variables those products wrote, their registers fenced so no read moves above the wait):
    placed by ``lower/passes/dot_plan.py`` before the first statement that touches a deferred
    wgmma's result, so what lies between runs while the tensor cores do. ``computed``: the variables
    the statements since the oldest of those products wrote, fenced before the wait so that
    their work is not moved after it. ``fragments``: the packed A registers (name, K steps)
    of register-A products among them, kept live until the wait."""

    pending: int
    results: tuple[Var, ...]
    computed: tuple[Var, ...] = ()
    fragments: tuple[tuple[str, int], ...] = ()


# ---------------------------------------------------------------- the kernel


@dataclass(frozen=True)
class Param:
    """A kernel parameter. ``constexpr`` parameters are folded into the body and vanish from
    the CUDA signature; ``align`` (bytes), ``div16`` and ``equal_to_1`` are launch facts in the
    key. An ``equal_to_1`` integer parameter stays in the signature (launches pass it) but the
    body reads it as the constant 1."""

    name: str  # the name in the generated CUDA (a user name that collides is renamed)
    type: Type
    constexpr: bool = False
    align: int = 1
    div16: bool = False
    equal_to_1: bool = False
    source_name: str = ""  # the name in the kernel file


@dataclass(frozen=True)
class Kernel:
    """One specialisation of a kernel: constexprs folded, pointer dtypes fixed, shapes known."""

    name: str
    file: str
    params: tuple[Param, ...]
    body: tuple[Stmt, ...]
    constexprs: tuple[tuple[str, Any], ...]
    num_warps: int
    index64: bool = False
    num_stages: int = 2  # software-pipelining depth of the loops that feed dot
    pipeline_tma: bool = False  # pipelined loads by TMA where they can be (its module asks)
    switches: CodegenSwitches = CodegenSwitches()  # the switches it is compiled under (key)
    target: Target = Target.from_arch(DEFAULT_ARCH)  # what it is compiled for: limits, features
    # warp specialisation (lower/passes/warp_spec.py): the producer warpgroup's warps, launched
    # after the num_warps that run the kernel's statements; or, where it was asked and refused, why
    producer_warps: int = 0
    warp_spec_refused: str | None = None

    @property
    def runtime_params(self) -> tuple[Param, ...]:
        return tuple(p for p in self.params if not p.constexpr)

    @property
    def num_threads(self) -> int:
        """Threads per block at launch: the compute warps and any producer warpgroup."""
        return 32 * (self.num_warps + self.producer_warps)


# ------------------------------------------------------------ traversals


def walk_stmts(stmts: Iterable[Stmt]) -> Iterator[Stmt]:
    """Every statement of a statement list and of the blocks nested in it, in order."""
    for s in stmts:
        yield s
        if isinstance(s, If):
            yield from walk_stmts(s.then)
            yield from walk_stmts(s.orelse)
        elif isinstance(s, Loop):
            yield from walk_stmts(s.init)
            yield from walk_stmts(s.body)
            yield from walk_stmts(s.step)
        elif isinstance(s, PipelinedLoop):
            yield from walk_stmts([s.loop])


def walk_exprs(stmts: Iterable[Stmt]) -> Iterator[Expr]:
    """Every expression node of a statement list, operands before the ops that use them."""
    for s in stmts:
        roots: list[Expr] = []
        if isinstance(s, Declare) and s.init is not None:
            roots = [s.init]
        elif isinstance(s, Assign):
            roots = [s.value]
        elif isinstance(s, Eval):
            roots = [s.expr]
        elif isinstance(s, (If, Loop)) and s.cond is not None:
            roots = [s.cond]
        elif isinstance(s, Staged):
            roots = [s.staged.load]
        for r in roots:
            yield from _walk(r)
        if isinstance(s, If):
            yield from walk_exprs(s.then)
            yield from walk_exprs(s.orelse)
        elif isinstance(s, Loop):
            yield from walk_exprs(s.init)
            yield from walk_exprs(s.step)
            yield from walk_exprs(s.body)
        elif isinstance(s, PipelinedLoop):
            yield from walk_exprs([s.loop])


def _walk(e: Expr) -> Iterator[Expr]:
    if isinstance(e, Op):
        for a in e.args:
            yield from _walk(a)
    yield e
