"""dot() on tensor cores, and the rendering of the software-pipelined loops that feed it.

Input: decided IR: a ``dot`` whose result is in an Mma layout, and the
:class:`~teeny_tx.lower.ir.PipelinedLoop` nodes that ``lower/pipeline.py`` planned. Output:
CUDA lines through the Emitter's ``emit`` (macros of ``dot.cu.j2``). A mixin of
:class:`~teeny_tx.templates.emitter.Emitter`.

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
from ..lower.ir import Op
from ..lower.layout import Layout
from ..lower.pipeline import operand_source
from ..lower.warp_spec import warp_specialized_loop
from . import expr as cx
from .cuda_types import ctype


class DotEmitter:
    turns: ir.WarpSpec | None = None  # inside a ping-pong loop: its dots are turns

    # ------------------------------------------------------------ the dot

    def emit_dot(self, e: Op) -> None:
        """The dot as its :class:`~teeny_tx.lower.dot_plan.DotPlan` says: operands written to
        the scratch where they come from registers, then the instruction into a new
        accumulator (the dot's value; its accumulator operand is copied in first)."""
        a, _, acc = e.args
        plan = e.attr("plan")
        layout: Layout = e.layout
        dtype = a.type.dtype
        self.hoist(acc)
        out = self.names.fresh("acc")
        with self.registers_of(layout) as alias:
            self.emit("define_tile", ctype(e.type.dtype), out, alias, self.ex(acc))
        # every operand's registers first, then the staging: computing an operand may move a
        # tile between layouts through the scratch buffer, where the other would be staged
        regs = {}
        for o, x in zip(plan.operands, e.args[:2], strict=True):
            if o.source in ("scratch", "registers"):
                src = operand_source(x)[0]
                self.hoist(src)
                regs[o.role] = (src, self.materialise(src, src.layout))
        pointers = []
        for o in plan.operands:
            if o.source == "stage":
                pointers.append(self.render_macro("stage_pointer", o.pointer, o.stage, o.tile))
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
            self.emit(
                "stage_operand", ctype(dtype), o.tile, o.rows, o.cols, o.pointer, base,
                o.offset, stage, self.L(src.layout), d0, d1, o.flip, values,
            )  # fmt: skip
            pointers.append(o.pointer)
        if plan.from_scratch:
            self.emit("operands_ready", plan.wgmma, self.block_sync())
        acc_layout = self.L(layout)
        if self.turns is not None:  # ping-pong: wait for this warpgroup's turn, its operands done
            ready = [(acc_layout, out)]
            if plan.register_a:
                ready.append((self.L(regs["a"][0].layout), regs["a"][1]))
            self.emit("pingpong_turn", self.turns, ready)
        ta, tb = plan.operands
        operands = self.render_macro("dot_operands", ta.tile, ta.kmajor, tb.tile, tb.kmajor, plan.k)
        # ping-pong (a turn at the tensor cores): issued, the turn passed on, then waited for
        turn = self.interface.takes_turn(e)
        fragments = self.names.fresh("a_frags") if turn and plan.register_a else plan.fragments
        if plan.register_a:
            instr = self.wgmma_rs_instruction(dtype.name, e.type.shape[1], tb.kmajor)
            a_layout = self.L(regs["a"][0].layout)
            if plan.deferred or turn:
                self.emit(
                    "wgmma_rs_async", acc_layout, a_layout, tb.tile, tb.kmajor, plan.k,
                    fragments, out, *pointers, instr,
                )  # fmt: skip
            else:
                self.emit(
                    "wgmma_rs", acc_layout, a_layout, tb.tile, tb.kmajor, plan.k, plan.pending,
                    out, *pointers, instr,
                )  # fmt: skip
        elif plan.wgmma:
            kmajor = [o.kmajor for o in plan.operands]
            instr = self.wgmma_instruction(dtype.name, e.type.shape[1], kmajor)
            if plan.deferred or turn:
                self.emit("wgmma_async", acc_layout, operands, out, *pointers, instr)
            else:
                self.emit("wgmma", acc_layout, operands, plan.pending, out, *pointers, instr)
        elif plan.instruction is None:
            self.emit("dot_fma", acc_layout, ta.tile, tb.tile, plan.k, out, *pointers)
        else:
            self.emit("mma", acc_layout, plan.instruction, operands, out, *pointers)
        if self.turns is not None:  # ... passed on once the product is issued
            self.emit("pingpong_pass", self.turns)
        if turn:
            steps = [(fragments, plan.k // 16)] if plan.register_a else []
            self.emit("pingpong_wait", acc_layout, out, steps)
        if plan.from_scratch:
            self.emit("barrier", self.block_sync())
        self.temps[id(e)] = (out, layout, "")

    def wgmma_rs_instruction(self, dtype: str, n: int, b_kmajor: bool) -> str:
        """The name of a device function issuing one wgmma m64nNk16 with A in registers (four
        packed fragment registers) and B through its descriptor (rendered once per kernel)."""
        name = f"tx_wgmma_m64n{n}k16_{dtype}_r{'k' if b_kmajor else 't'}"
        if name not in self.preamble:
            rows, outputs, count = _accumulator_operands(n)
            a_operands = "{" + ", ".join(f"%{count + i}" for i in range(4)) + "}"
            self.preamble[name] = self.render_macro(
                "wgmma_rs_instruction",
                name,
                n,
                dtype,
                int(not b_kmajor),
                rows,
                a_operands,
                outputs,
                count,
            )
        return name

    def wgmma_instruction(self, dtype: str, n: int, kmajor: list[bool]) -> str:
        """The name of a device function issuing one wgmma m64nNk16 (m64nNk8 for TF32; rendered
        once per kernel before it): accumulator registers in the Mma layout's order, A and B
        descriptors."""
        trans = "".join("k" if x else "t" for x in kmajor)
        if dtype == "f32":
            dtype = "tf32"
        k = 8 if dtype == "tf32" else 16
        name = f"tx_wgmma_m64n{n}k{k}_{dtype}_{trans}"
        if name not in self.preamble:
            rows, outputs, count = _accumulator_operands(n)
            self.preamble[name] = self.render_macro(
                "wgmma_instruction",
                name,
                n,
                k,
                dtype,
                int(not kmajor[0]),
                int(not kmajor[1]),
                rows,
                outputs,
                count,
            )
        return name

    def stmt_wgmma_wait(self, s: ir.WgmmaWait) -> None:
        """The wait before a deferred wgmma result's first use (``lower/dot_plan.py``), and the
        fences that keep the reads of its registers after it."""
        results = [(self.L(v.layout), v.name) for v in s.results]
        computed = [(self.L(v.layout), v.name) for v in s.computed]
        self.emit("wgmma_wait", s.pending, results, computed, s.fragments)

    # ------------------------------------------------------------ pipelined loops

    def stmt_pipelined_loop(self, p: ir.PipelinedLoop) -> None:
        s = p.loop
        init, step = s.init[0], s.step[0]
        k, kt = init.name, ctype(init.type.dtype)
        cond = self.ex(s.cond)
        buffers = self.ring_buffers(p)
        with self.capture() as once:
            for x in p.once:
                v = x.value
                d0, d1 = v.layout.dims
                regs = self.materialise(v, v.layout)
                self.emit(
                    "stage_once", ctype(v.type.dtype), x.tile, *v.type.shape, x.buffer,
                    x.offset, self.L(v.layout), d0, d1, regs,
                )  # fmt: skip
        with self.capture() as rounding:
            for x in p.loads:
                if x.tf32:
                    with self.registers_of(x.load.layout) as alias:
                        chunk = self.render_macro("stage_chunk", x.buffer, p.stage, x.tile, alias)
                        self.emit("tf32_round", alias, x.vec, chunk)
        tma = bool(self.interface.pipeline(p.stage).maps)
        if p.warp_spec is not None:  # the producer warpgroup copies (warp_split)
            self.emit("ws_consumer_open", p, p.warp_spec, buffers, kt, k, self.ex(init.init),
                      cond, self.ex(step.value), once)  # fmt: skip
            outer, self.pipeline_stage = self.pipeline_stage, p.stage
            self.turns = p.warp_spec if p.warp_spec.pingpong else None
            self.loop_body(s.body, None, depth=2)
            self.pipeline_stage, self.turns = outer, None
            self.emit("ws_consumer_close", p, p.warp_spec)
            return
        copies = self.tma_copies if tma else self.copies
        self.emit(
            "pipeline_open",
            p,
            buffers,
            kt,
            k,
            self.ex(init.init),
            cond,
            self.ex(step.value),
            self.expr(step.value.args[1]).at(cx.BINARY["*"] + 1),
            copies(p, cond, p.prologue),
            copies(p, cond, p.stage_ahead),
            rounding,
            once,
            tma,
        )
        outer, self.pipeline_stage = self.pipeline_stage, p.stage
        self.loop_body(s.body, None, depth=2)
        self.pipeline_stage = outer
        self.emit("pipeline_close", p)

    def copies(self, p: ir.PipelinedLoop, cond: str, stage: str) -> list[str]:
        """The cp.async copies of one iteration (the one the loop variable names) into
        ``stage``, if that iteration runs: the lines inside the ``if``."""
        with self.capture() as lines:
            for x in p.loads:
                load, layout = x.load, x.load.layout
                mask = load.args[1] if load.attr("masked") else None
                mask_name = None
                if mask is not None and not x.chunk_mask:
                    mask_name = self.materialise(mask, layout)
                with self.registers_of(layout) as alias:
                    dst = self.render_macro("stage_chunk", x.buffer, stage, x.tile, alias)
                    src = self.ex(load.args[0])
                    if x.chunk_mask:  # one mask bit per 16-byte chunk: a zero-filling copy
                        self.emit("copy_chunk", alias, x.vec, dst, src, self.ex(mask), True)
                    else:  # a ragged edge may cut a chunk: copy_chunk handles it
                        self.emit("copy_chunk", alias, x.vec, dst, src, mask_name, False)
        return self.render_macro("copies", cond, lines).split("\n")

    def tma_copies(self, p: ir.PipelinedLoop, cond: str, stage: str) -> list[str]:
        """The TMA boxes of one iteration into ``stage``, issued by thread 0 after it arms the
        stage's full barrier with their bytes (``lower/pipeline.py``: :func:`tma_copy`)."""
        full = f"&{p.barriers}[{stage}]"
        lines, total = self.tma_boxes(p, stage)
        return self.render_macro("tma_copies", cond, full, total, lines).split("\n")

    def tma_boxes(self, p: ir.PipelinedLoop, stage: str) -> tuple[list[str], int]:
        """The TMA boxes of one iteration into ``stage``, and the bytes they bring."""
        full = f"&{p.barriers}[{stage}]"
        lines = []
        for x in p.loads:
            t = x.tma
            assert t is not None, "a TMA pipeline issues every load as TMA"
            rows = t.box[1]
            coords = [
                " + ".join(self.expr(c).at(cx.BINARY["+"]) for c in d.coord) or "0" for d in t.dims
            ]
            for panel in range(t.panels):
                dst = f"{x.buffer} + {stage} * {x.tile}::ELEMS"
                if panel:
                    dst += f" + {panel * rows * t.box[0]}"  # the next 128-byte panel
                inner = str(panel * t.box[0])
                lines.append(
                    self.render_macro(
                        "tma_box", len(t.dims), dst, t.param, full, [inner, *coords[1:]]
                    )
                )
        return lines, self.interface.pipeline(p.stage).tma_bytes

    # ------------------------------------------------------------ warp specialisation

    def block_sync(self) -> str:
        """The barrier of every thread that runs the kernel's statements: ``__syncthreads``,
        or the compute warps' named barrier in a warp-specialised kernel."""
        p = warp_specialized_loop(self.kernel)
        if p is None or p.warp_spec is None:
            return "__syncthreads();"
        return self.render_macro("compute_barrier", p.warp_spec)

    def warp_split(self) -> list[str]:
        """The lines before the kernel's statements that split a warp-specialised kernel into
        its roles (``lower/warp_spec.py``): the stages' barriers initialised, one block-wide
        barrier, then the producer warpgroup's branch (its slice of the kernel's scalars and
        the loop's copies) and the compute warps' register increase. A refused request leaves
        a comment saying why; other kernels get no lines."""
        k = self.kernel
        if k.warp_spec_refused is not None:
            return [self.render_macro("ws_refused", k.warp_spec_refused)]
        p = warp_specialized_loop(k)
        if p is None or p.warp_spec is None:
            return []
        ws = p.warp_spec
        body, self.lines = self.lines, []
        self.last_line, self.mapped = None, True
        self.source_line(p)
        s = p.loop
        init, step = s.init[0], s.step[0]
        assert isinstance(init, ir.Declare) and isinstance(step, ir.Assign)
        buffers = self.ring_buffers(p)
        maps = list(self.interface.pipeline(p.stage).maps)
        lines, total = self.tma_boxes(p, p.stage)
        self.emit("ws_split_open", p, ws, k.num_warps, k.producer_warps, s.loc.line)
        self.depth += 2
        self.block(ws.slice)
        self.source_line(p)  # the producer's loop maps to the kernel's
        self.emit(
            "ws_producer_loop", p, buffers, maps, ctype(init.type.dtype), init.name,
            self.ex(init.init), self.ex(s.cond), self.ex(step.value), total, lines,
        )  # fmt: skip
        self.depth -= 2
        self.emit("ws_split_close", ws, self.interface.shared.scratch_used)
        split, self.lines = self.lines, body
        self.last_line = None
        return split

    def ring_buffers(self, p: ir.PipelinedLoop) -> list[dict]:
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
