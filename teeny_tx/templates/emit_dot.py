"""dot() on tensor cores, and the rendering of the software-pipelined loops that feed it.

Input: decided IR: a ``dot`` whose result is in an Mma layout, and the
:class:`~teeny_tx.lower.ir.PipelinedLoop` nodes that ``lower/passes/pipeline.py`` planned. Output:
CUDA lines through the Emitter's ``emit`` (macros of ``dot.cu.j2``). Functions of the
:class:`~teeny_tx.templates.context.EmitContext`, registered in its tables.

A dot reads both operands from shared memory (``tx::SmemTile``, swizzled): a pipelined operand
from the stage its loop's copies filled, any other operand written from its registers into the
scratch buffer just before the dot. The warps then multiply with ``ldmatrix`` + ``mma.sync``
(``tx::mma``), with Hopper's warpgroup MMAs reading shared memory through descriptors
(``tx::wgmma``, sm_90a, when the layout pass chose the wgmma accumulator), or with f32 FMAs for
IEEE f32 (``tx::dot_fma``). A ``trans`` of an operand costs nothing: it only flips which of the
operand's axes is K.
"""

from __future__ import annotations

from ..lower import ir
from ..lower.interface import WgmmaInstruction
from ..lower.ir import Expr, Op
from ..lower.passes.layout import Layout
from ..lower.passes.pipeline import operand_source
from ..lower.passes.warp_spec import warp_specialized_loop
from . import expr as cx
from .context import EmitContext, statement, temporary
from .cuda_types import ctype

# ------------------------------------------------------------ the dot


@temporary("dot")
def emit_dot(ctx: EmitContext, e: Op, dst: str | None = None) -> None:
    """The dot as its :class:`~teeny_tx.lower.passes.dot_plan.DotPlan` says: operands written to
    the scratch where they come from registers, then the instruction into a new
    accumulator (the dot's value; its accumulator operand is copied in first)."""
    a, _, acc = e.args
    plan = e.attr("plan")
    layout: Layout = e.layout
    dtype = a.type.scalar
    ctx.hoist(acc)
    out = ctx.names.fresh("acc")
    with ctx.registers_of(layout) as alias:
        ctx.emit("define_tile", ctype(e.type.dtype), out, alias, ctx.ex(acc))
    # every operand's registers first, then the staging: computing an operand may move a
    # tile between layouts through the scratch buffer, where the other would be staged
    regs = {}
    for o, x in zip(plan.operands, e.args[:2], strict=True):
        if o.source in ("scratch", "registers"):
            src = operand_source(x)[0]
            ctx.hoist(src)
            regs[o.role] = (src, ctx.materialise(src, src.layout))
    pointers = []
    for o in plan.operands:
        if o.source == "stage":
            pointers.append(ctx.render_macro("stage_pointer", o.pointer, o.stage, o.tile))
            continue
        if o.source == "once":
            pointers.append(o.pointer)
            continue
        src, values = regs[o.role]
        if o.source == "registers":  # wgmma reads A from the registers it is in
            pointers.append(values)
            continue
        base = "tx::align1024(tx_smem)" if plan.wgmma else "tx_smem"
        stage = "tx::stage_tf32" if plan.wgmma and dtype.name == "f32" else "tx::stage"
        d0, d1 = src.layout.dims
        ctx.emit(
            "stage_operand", ctype(dtype), o.tile, o.rows, o.cols, o.pointer, base,
            o.offset, stage, ctx.L(src.layout), d0, d1, o.flip, values,
        )  # fmt: skip
        pointers.append(o.pointer)
    if plan.from_scratch:
        ctx.emit("operands_ready", plan.wgmma, ctx.block_sync())
    acc_layout = ctx.L(layout)
    if ctx.turns is not None:  # ping-pong: wait for this warpgroup's turn, its operands done
        ready = [(acc_layout, out)]
        if plan.register_a:
            ready.append((ctx.L(regs["a"][0].layout), regs["a"][1]))
        ctx.emit("pingpong_turn", ctx.turns, ready)
    ta, tb = plan.operands
    operands = ctx.render_macro("dot_operands", ta.tile, ta.kmajor, tb.tile, tb.kmajor, plan.k)
    # ping-pong (a turn at the tensor cores): issued, the turn passed on, then waited for
    turn = ctx.interface.takes_turn(e)
    fragments = ctx.names.fresh("a_frags") if turn and plan.register_a else plan.fragments
    if plan.register_a:
        instr = ctx.interface.instruction_of(e)
        a_layout = ctx.L(regs["a"][0].layout)
        if plan.deferred or turn:
            ctx.emit(
                "wgmma_rs_async", acc_layout, a_layout, tb.tile, tb.kmajor, plan.k,
                fragments, out, *pointers, instr,
            )  # fmt: skip
        else:
            ctx.emit(
                "wgmma_rs", acc_layout, a_layout, tb.tile, tb.kmajor, plan.k, plan.pending,
                out, *pointers, instr,
            )  # fmt: skip
    elif plan.wgmma:
        instr = ctx.interface.instruction_of(e)
        if plan.deferred or turn:
            ctx.emit("wgmma_async", acc_layout, operands, out, *pointers, instr)
        else:
            ctx.emit("wgmma", acc_layout, operands, plan.pending, out, *pointers, instr)
    elif plan.instruction is None:
        ctx.emit("dot_fma", acc_layout, ta.tile, tb.tile, plan.k, out, *pointers)
    else:
        ctx.emit("mma", acc_layout, plan.instruction, operands, out, *pointers)
    if ctx.turns is not None:  # ... passed on once the product is issued
        ctx.emit("pingpong_pass", ctx.turns)
    if turn:
        steps = [(fragments, plan.k // 16)] if plan.register_a else []
        ctx.emit("pingpong_wait", acc_layout, out, steps)
    if plan.from_scratch:
        ctx.emit("barrier", ctx.block_sync())
    ctx.temps[id(e)] = (out, layout, "")


def wgmma_function(ctx: EmitContext, instr: WgmmaInstruction) -> str:
    """The device function of one wgmma m64nNkK instruction (rendered once per kernel, before
    it): accumulator registers in the Mma layout's order, A as four packed fragment registers
    or a descriptor, B through its descriptor."""
    rows, outputs, count = _accumulator_operands(instr.n)
    if instr.register_a:
        a_operands = "{" + ", ".join(f"%{count + i}" for i in range(4)) + "}"
        return ctx.render_macro(
            "wgmma_rs_instruction", instr.name, instr.n, instr.dtype, int(instr.trans_b),
            rows, a_operands, outputs, count,
        )  # fmt: skip
    return ctx.render_macro(
        "wgmma_instruction", instr.name, instr.n, instr.k, instr.dtype, int(instr.trans_a),
        int(instr.trans_b), rows, outputs, count,
    )  # fmt: skip


@statement(ir.WgmmaWait)
def stmt_wgmma_wait(ctx: EmitContext, s: ir.WgmmaWait) -> None:
    """The wait before a deferred wgmma result's first use (``lower/passes/dot_plan.py``), and the
    fences that keep the reads of its registers after it."""
    results = [(ctx.L(v.layout), v.name) for v in s.results]
    computed = [(ctx.L(v.layout), v.name) for v in s.computed]
    ctx.emit("wgmma_wait", s.pending, results, computed, s.fragments)


# ------------------------------------------------------------ pipelined loops


@statement(ir.PipelinedLoop)
def stmt_pipelined_loop(ctx: EmitContext, p: ir.PipelinedLoop) -> None:
    s = p.loop
    init, start, test, step, advance = _counter(p)
    k, kt = init.name, ctype(init.type.dtype)
    cond = ctx.ex(test)
    buffers = ring_buffers(ctx, p)
    with ctx.capture() as once:
        for x in p.once:
            v = x.value
            d0, d1 = v.layout.dims
            regs = ctx.materialise(v, v.layout)
            ctx.emit(
                "stage_once", ctype(v.type.dtype), x.tile, *v.type.shape, x.buffer,
                x.offset, ctx.L(v.layout), d0, d1, regs,
            )  # fmt: skip
    with ctx.capture() as rounding:
        for staged in p.loads:
            if staged.tf32:
                with ctx.registers_of(staged.load.layout) as alias:
                    chunk = ctx.render_macro(
                        "stage_chunk", staged.buffer, p.stage, staged.tile, alias
                    )
                    ctx.emit("tf32_round", alias, staged.vec, chunk)
    tma = bool(ctx.interface.pipeline(p.stage).maps)
    if p.warp_spec is not None:  # the producer warpgroup copies (warp_split)
        ctx.emit("ws_consumer_open", p, p.warp_spec, buffers, kt, k, ctx.ex(start),
                  cond, ctx.ex(advance), once)  # fmt: skip
        outer, ctx.pipeline_stage = ctx.pipeline_stage, p.stage
        ctx.turns = p.warp_spec if p.warp_spec.pingpong else None
        ctx.loop_body(s.body, None, depth=2)
        ctx.pipeline_stage, ctx.turns = outer, None
        ctx.emit("ws_consumer_close", p, p.warp_spec)
        return
    copies = tma_copies if tma else cp_async_copies
    ctx.emit(
        "pipeline_open",
        p,
        buffers,
        kt,
        k,
        ctx.ex(start),
        cond,
        ctx.ex(advance),
        ctx.expr(advance.args[1]).at(cx.BINARY["*"] + 1),
        copies(ctx, p, cond, p.prologue),
        copies(ctx, p, cond, p.stage_ahead),
        rounding,
        once,
        tma,
    )
    outer, ctx.pipeline_stage = ctx.pipeline_stage, p.stage
    ctx.loop_body(s.body, None, depth=2)
    ctx.pipeline_stage = outer
    ctx.emit("pipeline_close", p)


def cp_async_copies(ctx: EmitContext, p: ir.PipelinedLoop, cond: str, stage: str) -> list[str]:
    """The cp.async copies of one iteration (the one the loop variable names) into
    ``stage``, if that iteration runs: the lines inside the ``if``."""
    with ctx.capture() as lines:
        for x in p.loads:
            load, layout = x.load, x.load.layout
            mask = load.args[1] if load.attr("masked") else None
            mask_name = None
            if mask is not None and not x.chunk_mask:
                mask_name = ctx.materialise(mask, layout)
            with ctx.registers_of(layout) as alias:
                dst = ctx.render_macro("stage_chunk", x.buffer, stage, x.tile, alias)
                src = ctx.ex(load.args[0])
                if x.chunk_mask:  # one mask bit per 16-byte chunk: a zero-filling copy
                    assert mask is not None
                    ctx.emit("copy_chunk", alias, x.vec, dst, src, ctx.ex(mask), True)
                else:  # a ragged edge may cut a chunk: copy_chunk handles it
                    ctx.emit("copy_chunk", alias, x.vec, dst, src, mask_name, False)
    return ctx.render_macro("copies", cond, lines).split("\n")


def tma_copies(ctx: EmitContext, p: ir.PipelinedLoop, cond: str, stage: str) -> list[str]:
    """The TMA boxes of one iteration into ``stage``, issued by thread 0 after it arms the
    stage's full barrier with their bytes (``lower/passes/pipeline.py``: :func:`tma_copy`)."""
    full = f"&{p.barriers}[{stage}]"
    lines, total = tma_boxes(ctx, p, stage)
    return ctx.render_macro("tma_copies", cond, full, total, lines).split("\n")


def tma_boxes(ctx: EmitContext, p: ir.PipelinedLoop, stage: str) -> tuple[list[str], int]:
    """The TMA boxes of one iteration into ``stage``, and the bytes they bring."""
    full = f"&{p.barriers}[{stage}]"
    lines = []
    for x in p.loads:
        t = x.tma
        assert t is not None, "a TMA pipeline issues every load as TMA"
        rows = t.box[1]
        coords = [
            " + ".join(ctx.expr(c).at(cx.BINARY["+"]) for c in d.coord) or "0" for d in t.dims
        ]
        for panel in range(t.panels):
            dst = f"{x.buffer} + {stage} * {x.tile}::ELEMS"
            if panel:
                dst += f" + {panel * rows * t.box[0]}"  # the next 128-byte panel
            inner = str(panel * t.box[0])
            lines.append(
                ctx.render_macro("tma_box", len(t.dims), dst, t.param, full, [inner, *coords[1:]])
            )
    return lines, ctx.interface.pipeline(p.stage).tma_bytes


# ------------------------------------------------------------ warp specialisation


def warp_split(ctx: EmitContext) -> list[str]:
    """The lines before the kernel's statements that split a warp-specialised kernel into
    its roles (``lower/passes/warp_spec.py``): the stages' barriers initialised, one block-wide
    barrier, then the producer warpgroup's branch (its slice of the kernel's scalars and
    the loop's copies) and the compute warps' register increase. A refused request leaves
    a comment saying why; other kernels get no lines."""
    k = ctx.kernel
    if k.warp_spec_refused is not None:
        return [ctx.render_macro("ws_refused", k.warp_spec_refused)]
    p = warp_specialized_loop(k)
    if p is None or p.warp_spec is None:
        return []
    ws = p.warp_spec
    body, ctx.lines = ctx.lines, []
    ctx.last_line, ctx.mapped = None, True
    ctx.source_line(p)
    s = p.loop
    init, start, test, _, advance = _counter(p)
    buffers = ring_buffers(ctx, p)
    maps = list(ctx.interface.pipeline(p.stage).maps)
    lines, total = tma_boxes(ctx, p, p.stage)
    ctx.emit("ws_split_open", p, ws, k.num_warps, k.producer_warps, s.loc.line)
    ctx.depth += 2
    ctx.block(ws.slice)
    ctx.source_line(p)  # the producer's loop maps to the kernel's
    ctx.emit(
        "ws_producer_loop", p, buffers, maps, ctype(init.type.dtype), init.name,
        ctx.ex(start), ctx.ex(test), ctx.ex(advance), total, lines,
    )  # fmt: skip
    ctx.depth -= 2
    ctx.emit("ws_split_close", ws, ctx.interface.shared.scratch_used)
    split, ctx.lines = ctx.lines, body
    ctx.last_line = None
    return split


def ring_buffers(ctx: EmitContext, p: ir.PipelinedLoop) -> list[dict]:
    """The shared tile type, element type, first stage and offset of each staged load."""
    return [
        {
            "tile": x.tile,
            "buffer": x.buffer,
            "offset": x.offset,
            "ctype": ctype(x.load.type.dtype),
            "rows": x.load.type.shape[0],
            "cols": x.load.type.shape[1],
        }
        for x in p.loads
    ]


def _counter(p: ir.PipelinedLoop) -> tuple[ir.Declare, Expr, Expr, ir.Assign, Op]:
    """A pipelined loop's counter: its declaration and start, the condition, the step
    statement and its value (``k + step``; lower/passes/pipeline.py accepts only such loops)."""
    s = p.loop
    init, step = s.init[0], s.step[0]
    assert isinstance(init, ir.Declare) and init.init is not None and s.cond is not None
    assert isinstance(step, ir.Assign) and isinstance(step.value, Op)
    return init, init.init, s.cond, step, step.value


def _accumulator_operands(n: int) -> tuple[list[str], list[str], int]:
    """The accumulator operands of a wgmma m64nN asm statement: the operand numbers by rows of
    16, the "+f" outputs (each accumulator register in the Mma layout's order) by rows of 8,
    and their count."""
    quarter = n // 4  # registers per accumulator row half (the Mma layout's regs(1))
    regs = [((i >> 1) & 1) * quarter + 2 * (i >> 2) + (i & 1) for i in range(n // 2)]
    rows = [
        ", ".join(f"%{i}" for i in range(start, min(start + 16, len(regs))))
        for start in range(0, len(regs), 16)
    ]
    outputs = [
        ", ".join(f'"+f"(d[{r}])' for r in regs[start : start + 8])
        for start in range(0, len(regs), 8)
    ]
    return rows, outputs, len(regs)
