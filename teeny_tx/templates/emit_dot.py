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

from ..errors import CompileError
from ..lower import ir
from ..lower.ir import Op, Var
from ..lower.layout import Layout
from ..lower.pipeline import kmajor_as_loaded, operand_source
from . import expr as cx
from .cuda_types import ctype

# the instruction (mma.cuh) of each operand dtype and precision
_INSTRUCTIONS = {
    ("f16", "IEEE"): "tx::MmaF16",
    ("bf16", "IEEE"): "tx::MmaBF16",
    ("i8", "IEEE"): "tx::MmaI8",
    ("f32", "TF32"): "tx::MmaTF32",
    ("f32", "TF32X3"): "tx::MmaTF32x3",
    ("f32", "IEEE"): None,  # FMAs, no tensor cores
}


class DotEmitter:
    # ------------------------------------------------------------ the dot

    def emit_dot(self, e: Op) -> None:
        a, b, acc = e.args
        layout: Layout = e.layout
        dtype = a.type.dtype
        precision = e.attr("precision")
        inst = _INSTRUCTIONS[(dtype.name, precision)]
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
        wgmma = layout.blocked.version == 3
        t = ctype(dtype)
        self.hoist(acc)
        out = self.names.fresh("acc")
        with self.registers_of(layout) as alias:
            self.emit("define_tile", ctype(e.type.dtype), out, alias, self.ex(acc))
        ptrs, tiles, kmajor, staged = [], [], [], False
        offset = 0
        for role, x in (("a", a), ("b", b)):
            src, transposed = operand_source(x)
            as_loaded = kmajor_as_loaded(role, transposed)
            if isinstance(src, Var) and src.name in self.staged:
                ptr, tile = self.staged[src.name]
                ptrs.append(ptr)
                tiles.append(tile)
                kmajor.append(as_loaded)
                continue
            # staged from registers: 16-bit operands as they are (ldmatrix.trans and wgmma
            # read either way), others with K contiguous
            self.hoist(src)
            regs = self.materialise(src, src.layout)
            flip = dtype.itemsize != 2 and not as_loaded
            rows, cols = src.type.shape
            if flip:
                rows, cols = cols, rows
            tile = self.names.fresh(f"{role}_tile")
            ptr = self.names.fresh(f"{role}_smem")
            d0, d1 = src.layout.dims
            base = f"tx::align1024({self.scratch(0)})" if wgmma else self.scratch(0)
            stage = "tx::stage_tf32" if wgmma and dtype.name == "f32" else "tx::stage"
            self.emit(
                "stage_operand",
                t,
                tile,
                rows,
                cols,
                ptr,
                base,
                offset,
                stage,
                self.L(src.layout),
                d0,
                d1,
                flip,
                regs,
            )
            offset += rows * cols * dtype.itemsize
            ptrs.append(ptr)
            tiles.append(tile)
            kmajor.append(as_loaded or flip)
            staged = True
        if staged:
            self.scratch(offset + (1024 if wgmma else 0))
            self.emit("operands_ready", wgmma)
        acc_layout = self.L(layout)
        flags = ["true" if x else "false" for x in kmajor]
        operands = f"{tiles[0]}, {flags[0]}, {tiles[1]}, {flags[1]}, {k}"
        if wgmma:
            instr = self.wgmma_instruction(dtype.name, n, kmajor)
            pending = 0 if staged else self.wgmma_pending
            self.emit("wgmma", acc_layout, operands, pending, out, ptrs[0], ptrs[1], instr)
        elif inst is None:
            if not all(kmajor):
                raise CompileError(  # the planner pipelines f32 operands only with K contiguous
                    "internal: an IEEE f32 dot operand is not K-major", e.loc
                )
            self.emit("dot_fma", acc_layout, tiles[0], tiles[1], k, out, ptrs[0], ptrs[1])
        else:
            self.emit("mma", acc_layout, inst, operands, out, ptrs[0], ptrs[1])
        if staged:
            self.emit("barrier")
        self.temps[id(e)] = (out, layout, "")

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
                len(regs),
            )
        return name

    # ------------------------------------------------------------ pipelined loops

    def stmt_pipelined_loop(self, p: ir.PipelinedLoop) -> None:
        s = p.loop
        init, step = s.init[0], s.step[0]
        k, kt = init.name, ctype(init.type.dtype)
        cond = self.ex(s.cond)
        buffers = [
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
        self.pipeline_bytes = max(self.pipeline_bytes, p.bytes)
        with self.capture() as rounding:
            for x in p.loads:
                if x.tf32:
                    with self.registers_of(x.load.layout) as alias:
                        chunk = self.render_macro("stage_chunk", x.buffer, p.stage, x.tile, alias)
                        self.emit("tf32_round", alias, x.vec, chunk)
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
            self.copies(p, cond, p.prologue),
            self.copies(p, cond, p.stage_ahead),
            rounding,
        )
        outer = self.staged, self.pipeline_stage
        self.staged = dict(self.staged)
        for x in p.loads:
            self.staged[x.var] = (f"{x.buffer} + {p.stage} * {x.tile}::ELEMS", x.tile)
        self.pipeline_stage = p.stage
        self.wgmma_pending = 1 if p.overlap else 0
        self.loop_body(s.body, None, depth=2)
        self.wgmma_pending = 0
        self.staged, self.pipeline_stage = outer
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
