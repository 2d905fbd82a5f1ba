"""The kernel's interface: everything the host and the emitter need that the body does not say.

Input: a decided ``ir.Kernel`` (layouts, conversions, pipelines and dot plans chosen: the passes
of ``lower/passes/driver.py``). Output: a frozen :class:`Interface`:

- ``params``: the CUDA parameter list in order: the user's runtime parameters, then one
  tensor map per TMA-copied operand (:class:`TensorMapParam`: which pointer parameter it maps,
  its element dtype, box, swizzle and the copies that read it; the host encodes it), then the
  workspaces the kernel needs (none from ``decide()`` today; a planner of its own adds them);
- ``shared``: the dynamic shared-memory layout (:class:`SharedLayout`): the scratch buffer the
  reductions, scans, layout changes and register-operand dots share at offset 0, then the
  pipelined loops' region (rings, operands staged once, mbarriers), its offset and size;
- ``block``, ``min_blocks`` (``__launch_bounds__``'s second argument), ``includes``;
- per pipelined loop (:class:`PipelineFacts`): the tensor maps its copies read and the bytes
  one stage's TMA boxes bring (what thread 0 arms the full barrier with); which dots take a
  ping-pong turn at the tensor cores;
- ``instructions``: the wgmma device functions the kernel's dots call
  (:class:`WgmmaInstruction`, rendered once each before the kernel, in first-use order).

:func:`check_resources` compares it (and ``largest_tile``, the registers per thread of the
tile that needs most: :class:`TileRegisters`) with a :class:`~teeny_tx.target.Target` before
any CUDA is rendered and raises :class:`~teeny_tx.errors.ResourceError` at the kernel line
that declares the largest user of the resource. The emitter (``templates/``) renders the
interface; it decides none of it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING

from ..errors import CompileError, Location, ResourceError
from . import ir
from .ir import Expr, Op, PointerType, walk_exprs, walk_stmts
from .passes.layout import Layout
from .passes.pipeline import BARRIER_BYTES, operand_source

if TYPE_CHECKING:
    from ..target import Target

SCRATCH_ALIGN = 16  # the pipeline region starts on a 16-byte boundary after the scratch
TMA_SWIZZLE = 128  # bytes: every TMA box lands in 128-byte swizzled panels (tx::SmemTile's)
TMA_INCLUDE = "hopper.cuh"  # the device header of tensor maps and mbarriers
MAX_THREADS_PER_BLOCK = 1024  # every architecture's (CUDA programming guide, Table 21)
_RELAYOUTS = frozenset({"convert_layout", "permute", "reshape", "flip", "split"})


# ---------------------------------------------------------------- the records


@dataclass(frozen=True)
class ValueParam:
    """A runtime parameter of the user's kernel: a pointer or a scalar, by value."""

    name: str
    type: ir.Type
    restrict: bool  # a pointer to const: ``__restrict__``

    kind = "value"


@dataclass(frozen=True)
class TensorMapParam:
    """A ``const __grid_constant__`` tensor map the host encodes before the launch: the map of
    ``pointer`` (a runtime pointer parameter, ``pointer_index`` among the runtime parameters)
    over ``copies[0].dims``, elements of ``dtype``, read in boxes of ``box`` = (inner, rows)
    elements landing in ``swizzle``-byte swizzled panels."""

    name: str
    pointer: str
    pointer_index: int
    dtype: str
    box: tuple[int, int]
    swizzle: int
    copies: tuple[ir.TmaCopy, ...]

    kind = "tensor_map"


@dataclass(frozen=True)
class WorkspaceParam:
    """A device buffer of ``bytes`` the host allocates for the kernel (split-K's partials)."""

    name: str
    bytes: int

    kind = "workspace"


Param = ValueParam | TensorMapParam | WorkspaceParam


@dataclass(frozen=True)
class Region:
    """One buffer of dynamic shared memory: ``kind`` is "scratch", "ring", "once" or "barriers";
    ``base`` the pointer its ``offset`` counts from (``tx_smem``, or ``tx_pipeline``: the
    pipeline region, 1024-aligned at run time); ``name`` the buffer's name in the CUDA."""

    kind: str
    name: str
    base: str
    offset: int
    bytes: int
    loc: Location | None = field(default=None, compare=False)


@dataclass(frozen=True)
class SharedLayout:
    """The kernel's dynamic shared memory: the scratch buffer at 0, the pipeline region (the
    largest of its pipelined loops', which run one after another) at ``pipeline_offset``."""

    scratch_bytes: int
    pipeline_bytes: int
    regions: tuple[Region, ...]
    scratch_used: bool  # any helper takes the scratch (a warp-specialised kernel's meet there)

    @property
    def pipeline_offset(self) -> int:
        """Where the pipeline region starts: after the scratch, 16-byte aligned."""
        return -(-self.scratch_bytes // SCRATCH_ALIGN) * SCRATCH_ALIGN

    @property
    def total_bytes(self) -> int:
        """Bytes of dynamic shared memory the launch asks for."""
        if not self.pipeline_bytes:
            return self.scratch_bytes
        return self.pipeline_offset + self.pipeline_bytes


@dataclass(frozen=True)
class PipelineFacts:
    """What one pipelined loop needs beyond its IR node: the tensor maps its TMA copies read
    (in copy order) and the bytes one stage's boxes bring (0: cp.async copies)."""

    stage: str  # the loop's stage counter: the key the emitter finds it by
    maps: tuple[str, ...]
    tma_bytes: int
    pingpong: bool
    bytes: int  # of its region: rings, operands staged once, barriers, the 1024 alignment
    loc: Location | None = field(default=None, compare=False)  # the loop's kernel line


@dataclass(frozen=True)
class WgmmaInstruction:
    """One wgmma m64nNkK device function: ``dtype`` (``tf32`` for f32), whether each operand
    is read transposed (K not contiguous), and ``register_a``: A from registers (B through
    its descriptor) instead of both through descriptors."""

    name: str
    n: int
    k: int
    dtype: str
    trans_a: bool
    trans_b: bool
    register_a: bool


def wgmma_instruction(dot: Op) -> WgmmaInstruction | None:
    """The wgmma function a dot calls (None: an mma.sync or FMA dot)."""
    plan = dot.attr("plan")
    if plan is None or not plan.wgmma:
        return None
    dtype = dot.args[0].type.scalar.name
    n = dot.type.shape[1]
    a, b = plan.operands
    if plan.register_a:
        name = f"tx_wgmma_m64n{n}k16_{dtype}_r{'k' if b.kmajor else 't'}"
        return WgmmaInstruction(name, n, 16, dtype, False, not b.kmajor, True)
    if dtype == "f32":
        dtype = "tf32"
    k = 8 if dtype == "tf32" else 16
    trans = ("k" if a.kmajor else "t") + ("k" if b.kmajor else "t")
    name = f"tx_wgmma_m64n{n}k{k}_{dtype}_{trans}"
    return WgmmaInstruction(name, n, k, dtype, not a.kmajor, not b.kmajor, False)


@dataclass(frozen=True)
class TileRegisters:
    """One tile's registers: ``words`` 32-bit registers per thread (an element of 8 bytes, a
    pointer too, takes 2), for ``what`` (``tile 'x' f32[1024, 1024]``) declared at ``loc``."""

    words: int
    what: str
    loc: Location


def tile_registers(kernel: ir.Kernel) -> TileRegisters | None:
    """The tile of the decided ``kernel`` whose registers per thread are the most: declared
    tiles and the temporaries of expressions alike, by their layouts."""
    best: TileRegisters | None = None

    def consider(layout: Layout | None, t: ir.Type, what: str, loc: Location) -> None:
        nonlocal best
        if layout is None or not t.is_tile:
            return
        words = layout.regs * max(1, -(-_element_bytes(t.dtype) // 4))
        if best is None or words > best.words:
            shape = ", ".join(map(str, t.shape))
            best = TileRegisters(words, f"{what} {_element_name(t.dtype)}[{shape}]", loc)

    for st in walk_stmts(kernel.body):
        if isinstance(st, ir.Declare):
            consider(st.layout, st.type, f"tile '{st.name}'", st.loc)
    for e in walk_exprs(kernel.body):
        if isinstance(e, Op) and e.op in _STORED_RESULTS:
            consider(e.layout, e.type, f"the {e.op} result", e.loc)
    return best


# expressions whose results are stored in registers of their own; the other elementwise ones
# (pointer arithmetic included) are computed per element where they are used
_STORED_RESULTS = frozenset(
    {"dot", "reduce", "scan", "load", "convert_layout", "permute", "reshape", "flip", "cat",
     "join", "split", "atomic"}
)  # fmt: skip


def _element_bytes(dtype) -> int:
    return 8 if isinstance(dtype, PointerType) else dtype.itemsize


def _element_name(dtype) -> str:
    return f"{dtype.elem}*" if isinstance(dtype, PointerType) else str(dtype)


@dataclass(frozen=True, eq=False)
class Interface:
    """The decided kernel's interface (see the module)."""

    name: str
    params: tuple[Param, ...]
    shared: SharedLayout
    block: tuple[int, int, int]
    min_blocks: int  # __launch_bounds__' minimum blocks per SM (0: none stated)
    includes: tuple[str, ...]
    pipelines: tuple[PipelineFacts, ...]
    # the scratch bytes of each op that takes the scratch, by id() of the decided kernel's op
    scratch_ops: Mapping[int, int] = field(repr=False)
    # ids of the dots that take a ping-pong turn at the tensor cores
    turn_dots: frozenset[int] = field(repr=False)
    # where the largest scratch user is (the op's kernel line), for errors
    scratch_loc: Location | None = field(default=None, repr=False)
    instructions: tuple[WgmmaInstruction, ...] = ()
    # the wgmma function each wgmma dot calls, by id() of the decided kernel's dot
    dot_instructions: Mapping[int, str] = field(default_factory=dict, repr=False)
    # the tile that needs the most registers per thread (None: the kernel has no tiles)
    largest_tile: TileRegisters | None = field(default=None, repr=False)

    @property
    def tensor_maps(self) -> tuple[TensorMapParam, ...]:
        return tuple(p for p in self.params if isinstance(p, TensorMapParam))

    @property
    def workspaces(self) -> tuple[WorkspaceParam, ...]:
        return tuple(p for p in self.params if isinstance(p, WorkspaceParam))

    @property
    def shared_bytes(self) -> int:
        return self.shared.total_bytes

    def pipeline(self, stage: str) -> PipelineFacts:
        for p in self.pipelines:
            if p.stage == stage:
                return p
        raise KeyError(stage)

    def scratch_of(self, e: Op) -> int | None:
        """The scratch bytes ``e`` takes, or None where it takes none."""
        return self.scratch_ops.get(id(e))

    def takes_turn(self, dot: Op) -> bool:
        return id(dot) in self.turn_dots

    def instruction_of(self, dot: Op) -> str:
        """The name of the wgmma function ``dot`` calls."""
        return self.dot_instructions[id(dot)]


# ---------------------------------------------------------------- building it


def warps_along(layout: Layout, dim: int) -> int:
    """Warps holding distinct parts of ``layout`` along ``dim`` (the device header's rule): a
    reduction or scan along ``dim`` meets through the scratch only where it is more than 1."""
    b = layout.blocked
    held = max(1, layout.shape[dim] // b.spt[dim])
    return min(b.wpc[dim], max(1, held // b.tpw[dim]))


def scan_lines(layout: Layout, dim: int) -> Layout:
    """The layout of a scan's per-line carries: ``layout`` with ``dim`` of size 1."""
    shape = list(layout.shape)
    shape[dim] = 1
    return Layout(layout.blocked, tuple(shape), layout.dims)


def tuple_bytes(dtypes) -> int:
    """sizeof the device header's Tuple of ``dtypes``: fields in order, each at a multiple of
    its size, the whole a multiple of the largest."""
    offset, align = 0, 1
    for d in dtypes:
        size = _element_bytes(d)
        offset = -(-offset // size) * size + size
        align = max(align, size)
    return -(-offset // align) * align


def _op_scratch(e: Op) -> int | None:
    """The scratch bytes op ``e`` takes when rendered, or None (the rules of the emitter's
    helpers: ``tx::reduce``/``tx::scan`` across warps, a layout change, ``cat``/``join``, a
    scalar atomic's broadcast, a dot with an operand from registers)."""
    if e.op == "reduce":
        inner = e.args[0].layout
        dim = inner.dims[e.attr("axis")]
        warps = warps_along(inner, dim)
        if warps <= 1:
            return None
        dtype = e.args[0].type.dtype
        arg = e.attr("kind") in ("argmax", "argmin")
        size = 2 * max(dtype.itemsize, 4) if arg else dtype.itemsize
        if e.attr("index") is not None:
            size = tuple_bytes([a.type.dtype for a in e.args])
        return warps * e.layout.size * size
    if e.op == "scan":
        dim = e.layout.dims[e.attr("axis")]
        warps = warps_along(e.layout, dim)
        if warps <= 1:
            return None
        size = e.type.dtype.itemsize
        if e.attr("index") is not None:
            size = tuple_bytes([a.type.dtype for a in e.args])
        return warps * scan_lines(e.layout, dim).size * size
    if e.op in _RELAYOUTS:
        return e.args[0].layout.size * e.type.dtype.itemsize
    if e.op in ("cat", "join"):
        return e.layout.size * e.type.dtype.itemsize
    if e.op == "atomic" and not e.type.is_tile:
        return max(e.type.dtype.itemsize, 4)
    if e.op == "dot":
        plan = e.attr("plan")
        return plan.scratch_bytes if plan is not None and plan.from_scratch else None
    return None


class _Walk:
    """The ops the emitter renders, in its order: every op of every statement, but a dot's
    operands only where it reads them from registers (a transposed one through its source),
    and no staged load (its copies read only its pointer and mask)."""

    def __init__(self) -> None:
        self.seen: set[int] = set()
        self.ops: list[Op] = []
        self.loops: list[ir.PipelinedLoop] = []
        self.pingpong: list[bool] = []
        self.turns: set[int] = set()

    def block(self, stmts) -> None:
        for s in stmts:
            self.stmt(s)

    def stmt(self, s: ir.Stmt) -> None:
        if isinstance(s, ir.Declare):
            self.expr(s.init)
        elif isinstance(s, ir.Assign):
            self.expr(s.value)
        elif isinstance(s, ir.Eval):
            self.expr(s.expr)
        elif isinstance(s, ir.If):
            self.expr(s.cond)
            self.block(s.then)
            self.block(s.orelse)
        elif isinstance(s, ir.Loop):
            self.block(s.init)
            self.expr(s.cond)
            self.block(s.body)
            self.block(s.step)
        elif isinstance(s, ir.PipelinedLoop):
            self.loops.append(s)
            loop = s.loop
            self.block(loop.init)
            self.expr(loop.cond)
            self.block(loop.step)
            ws = s.warp_spec
            self.pingpong.append(ws is not None and ws.pingpong)
            self.block(loop.body)
            self.pingpong.pop()
            if ws is not None:
                self.block(ws.slice)

    def expr(self, e: Expr | None) -> None:
        if not isinstance(e, Op) or id(e) in self.seen:
            return
        self.seen.add(id(e))
        if e.op == "dot":
            plan = e.attr("plan")
            self.expr(e.args[2])
            if plan is not None:
                for o, x in zip(plan.operands, e.args[:2], strict=True):
                    if o.source in ("scratch", "registers"):
                        self.expr(operand_source(x)[0])
                inside = bool(self.pingpong) and self.pingpong[-1]
                if inside and plan.wgmma and not plan.deferred and not plan.pending:
                    self.turns.add(id(e))
            self.ops.append(e)
            return
        for a in e.args:
            self.expr(a)
        self.ops.append(e)


def _loop_regions(p: ir.PipelinedLoop) -> Iterator[Region]:
    for x in p.loads:
        rows, cols = x.load.type.shape
        size = p.stages * rows * cols * x.load.type.dtype.itemsize
        yield Region("ring", x.buffer, "tx_pipeline", x.offset, size, p.loc)
    for o in p.once:
        rows, cols = o.value.type.shape
        size = rows * cols * o.value.type.dtype.itemsize
        yield Region("once", o.buffer, "tx_pipeline", o.offset, size, p.loc)
    if p.barriers is not None:
        yield Region(
            "barriers", p.barriers, "tx_pipeline", p.barrier_offset, 2 * p.stages * BARRIER_BYTES
        )


def tma_stage_bytes(p: ir.PipelinedLoop) -> int:
    """The bytes one stage's TMA boxes bring: what the full barrier expects."""
    total = 0
    for x in p.loads:
        t = x.tma
        if t is not None:
            total += t.box[1] * t.box[0] * t.panels * x.load.type.dtype.itemsize
    return total


def build_interface(kernel: ir.Kernel) -> Interface:
    """The interface of the decided ``kernel`` (see the module)."""
    walk = _Walk()
    walk.block(kernel.body)
    scratch: dict[int, int] = {}
    scratch_bytes, scratch_loc = 0, None
    for e in walk.ops:
        need = _op_scratch(e)
        if need is None:
            continue
        scratch[id(e)] = need
        if need > scratch_bytes:
            scratch_bytes, scratch_loc = need, e.loc

    instructions: dict[str, WgmmaInstruction] = {}
    dot_instructions: dict[int, str] = {}
    for e in walk.ops:
        instr = wgmma_instruction(e) if e.op == "dot" else None
        if instr is not None:
            instructions.setdefault(instr.name, instr)
            dot_instructions[id(e)] = instr.name

    runtime = kernel.runtime_params
    index = {p.name: i for i, p in enumerate(runtime)}
    params: list[Param] = [
        ValueParam(p.name, p.type, p.type.is_pointer and _const_pointer(p.type)) for p in runtime
    ]
    maps: dict[str, list[ir.TmaCopy]] = {}
    pipelines, regions = [], []
    if scratch_bytes:
        regions.append(Region("scratch", "tx_smem", "tx_smem", 0, scratch_bytes, scratch_loc))
    for p in walk.loops:
        tma = bool(p.loads) and all(x.tma is not None for x in p.loads)
        names = []
        for x in p.loads if tma else ():
            assert x.tma is not None
            maps.setdefault(x.tma.param, []).append(x.tma)
            names.append(x.tma.param)
        ws = p.warp_spec
        pipelines.append(
            PipelineFacts(
                stage=p.stage,
                maps=tuple(names),
                tma_bytes=tma_stage_bytes(p) if tma else 0,
                pingpong=ws is not None and ws.pingpong,
                bytes=p.bytes,
                loc=p.loc,
            )
        )
        regions.extend(_loop_regions(p))
    for name, copies in maps.items():
        first = copies[0]
        params.append(
            TensorMapParam(
                name=name,
                pointer=first.base,
                pointer_index=index[first.base],
                dtype=first.dtype,
                box=first.box,
                swizzle=TMA_SWIZZLE,
                copies=tuple(copies),
            )
        )
    shared = SharedLayout(
        scratch_bytes=scratch_bytes,
        pipeline_bytes=max((p.bytes for p in walk.loops), default=0),
        regions=tuple(regions),
        scratch_used=bool(scratch) and kernel.producer_warps > 0,
    )
    return Interface(
        name=kernel.name,
        params=tuple(params),
        shared=shared,
        block=(kernel.num_threads, 1, 1),
        min_blocks=1 if kernel.producer_warps else 0,  # setmaxnreg acts under a register cap
        includes=(TMA_INCLUDE,) if maps else (),
        pipelines=tuple(pipelines),
        scratch_ops=MappingProxyType(scratch),
        turn_dots=frozenset(walk.turns),
        scratch_loc=scratch_loc,
        instructions=tuple(instructions.values()),
        dot_instructions=MappingProxyType(dot_instructions),
        largest_tile=tile_registers(kernel),
    )


def _const_pointer(t: ir.Type) -> bool:
    return isinstance(t.dtype, PointerType) and t.dtype.const


# ---------------------------------------------------------------- checking it


def check_resources(interface: Interface, target: Target) -> None:
    """Raise :class:`ResourceError` where ``interface`` asks more of ``target`` than it has
    (threads per block, shared memory per block, then registers per thread of one tile),
    located at the kernel line that declares the largest user: the pipelined loop whose stages
    need most, the op that needs most scratch, or the tile that needs most registers."""
    threads = interface.block[0]
    max_threads = getattr(target, "max_threads_per_block", MAX_THREADS_PER_BLOCK)
    if threads > max_threads:
        raise ResourceError(
            f"kernel {interface.name} runs {threads} threads per block; {target.arch} allows "
            f"{max_threads}. Use fewer warps."
        )
    shared = interface.shared
    needed, limit = shared.total_bytes, target.max_shared_per_block
    if needed <= limit:
        _check_registers(interface, target)
        return
    message = (
        f"kernel {interface.name} needs {needed} bytes of shared memory per block for its "
        f"reductions, layout changes and pipeline stages; {target.arch} allows {limit}"
    )
    loc, hint = interface.scratch_loc, "use smaller tiles or fewer warps"
    biggest = max(interface.pipelines, key=lambda p: p.bytes, default=None)
    if biggest is not None and biggest.bytes >= shared.scratch_bytes:
        loc = biggest.loc
        hint = (
            f"this loop's pipeline stages take {biggest.bytes} bytes: use smaller tiles or "
            "fewer num_stages"
        )
    elif loc is not None:
        hint = f"this op's scratch buffer takes {shared.scratch_bytes} bytes: {hint}"
    if loc is None:
        raise ResourceError(
            f"{message}. Use smaller tiles, fewer num_stages or fewer warps.", needed, limit
        )
    raise ResourceError(CompileError(message, loc, hint).render(), needed=needed, limit=limit)


# A tile may take at most this many times the registers a thread has: past it nearly all of it
# lives in local memory, and NVRTC's time grows with its size (measured: 2^16 f32 elements on
# 4 warps, 512 per thread, 0.65 s; 2^18, 2048 per thread, 5.8 s; 2^20 and more: minutes).
TILE_REGISTER_FACTOR = 4


def tile_register_limit(target: Target) -> int:
    """The most 32-bit registers per thread one tile may take on ``target``."""
    return TILE_REGISTER_FACTOR * target.max_registers_per_thread


def _check_registers(interface: Interface, target: Target) -> None:
    tile = interface.largest_tile
    limit = tile_register_limit(target)
    if tile is None or tile.words <= limit:
        return
    threads = interface.block[0]
    message = (
        f"{tile.what} needs {tile.words} registers per thread ({threads} threads); a thread of "
        f"{target.arch} has {target.max_registers_per_thread}, and one tile may take at most "
        f"{limit}"
    )
    hint = "use a smaller tile and loop over the data, or more warps (num_warps)"
    raise ResourceError(CompileError(message, tile.loc, hint).render())
