"""dot() on tensor cores, and the software pipeline of the loops that feed it.

Input: layout-annotated IR: a ``dot`` whose result is in an Mma layout, and ``for`` loops.
Output: CUDA lines through the Emitter's ``out``. A mixin of
:class:`~teeny_tx.templates.emitter.Emitter`.

A dot reads both operands from shared memory (``tx::SmemTile``, swizzled). Each operand gets
there in one of two ways:

- **Pipelined.** The operand is a variable loaded at the top of a ``for`` loop, from an address
  that depends only on the loop variable and on values the loop does not change. Such a load
  becomes ``cp.async`` copies into a ring of ``num_stages`` buffers, issued ``num_stages - 1``
  iterations ahead.
- **Staged.** Any other operand is written from its registers into the scratch buffer just
  before the dot.

The warps then multiply with ``ldmatrix`` + ``mma.sync`` (``tx::mma``), with Hopper's
warpgroup MMAs reading shared memory through descriptors (``tx::wgmma``, sm_90a, when the
layout pass chose the wgmma accumulator), or with f32 FMAs for IEEE f32 (``tx::dot_fma``).
A ``trans`` of an operand costs nothing: it only flips which of the operand's axes is K.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import CompileError
from ..lower import ir
from ..lower.ir import Const, Expr, Op, Var
from ..lower.layout import Layout, walk_exprs, walk_stmts
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


@dataclass
class PipelinedLoad:
    """A loop's load that travels global -> shared memory by cp.async."""

    var: str
    load: Op
    vec: int
    tile: str = ""  # the SmemTile type
    buffer: str = ""  # the first stage's pointer


def _operand_source(x: Expr) -> tuple[Expr, bool]:
    """The tile a dot operand reads, and whether the dot reads it transposed."""
    if isinstance(x, Op) and x.op == "permute":
        return x.args[0], True
    return x, False


def _kmajor_as_loaded(role: str, transposed: bool) -> bool:
    """Whether the operand's source, stored as it is, has K as its contiguous axis: A [M, K]
    does, B [K, N] does not; a transposed source flips it."""
    return (role == "a") != transposed


def _var_names(e: Expr):
    if isinstance(e, Var):
        yield e.name
    elif isinstance(e, Op):
        for a in e.args:
            yield from _var_names(a)


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
        out = self.fresh("acc")
        self.out(f"{ctype(e.type.dtype)} {out}[{self.L(layout)}::REGS];")
        self.out(self.tile_loop(layout, lambda: f"{out}[i] = {self.ex(acc)};"))
        ptrs, tiles, kmajor, staged = [], [], [], False
        offset = 0
        register_a = wgmma and self.register_a(a, layout)
        # every operand's registers first, then the staging: computing an operand may move a
        # tile between layouts through the scratch buffer (its index tiles, say), which would
        # overwrite an operand already staged there
        held = []
        for role, x in (("a", a), ("b", b)):
            src, transposed = _operand_source(x)
            if isinstance(src, Var) and src.name in self.pipelined:
                held.append((role, src, transposed, None))
                continue
            self.hoist(src)
            held.append((role, src, transposed, self.materialise(src, src.layout)))
        for role, src, transposed, regs in held:
            as_loaded = _kmajor_as_loaded(role, transposed)
            if role == "a" and register_a:  # wgmma reads A from the registers it is in
                ptrs.append(regs)
                tiles.append(self.L(src.layout))
                kmajor.append(True)
                continue
            if regs is None:
                ptr, tile = self.pipelined[src.name]
                ptrs.append(ptr)
                tiles.append(tile)
                kmajor.append(as_loaded)
                continue
            # staged from registers: 16-bit operands as they are (ldmatrix.trans and wgmma
            # read either way), others with K contiguous
            flip = dtype.itemsize != 2 and not as_loaded
            rows, cols = src.type.shape
            if flip:
                rows, cols = cols, rows
            tile = self.fresh(f"Tile{role.upper()}")
            ptr = self.fresh(f"smem_{role}")
            d0, d1 = src.layout.dims
            base = f"tx::align1024({self.scratch(0)})" if wgmma else self.scratch(0)
            self.out(f"using {tile} = tx::SmemTile<{t}, {rows}, {cols}>;")
            self.out(f"{t}* {ptr} = reinterpret_cast<{t}*>({base} + {offset});")
            stage = "tx::stage_tf32" if wgmma and dtype.name == "f32" else "tx::stage"
            self.out(
                f"{stage}<{self.L(src.layout)}, {d0}, {d1}, {tile}, "
                f"{'true' if flip else 'false'}>({ptr}, {regs});"
            )
            offset += rows * cols * dtype.itemsize
            ptrs.append(ptr)
            tiles.append(tile)
            kmajor.append(as_loaded or flip)
            staged = True
        if staged:
            self.scratch(offset + (1024 if wgmma else 0))
            if wgmma:
                self.out("tx::fence_async_proxy();  // shared stores, then wgmma reads them")
            self.out("__syncthreads();")
        acc_layout = self.L(layout)
        flags = ["true" if x else "false" for x in kmajor]
        operands = f"{tiles[0]}, {flags[0]}, {tiles[1]}, {flags[1]}, {k}"
        if register_a:
            instr = self.wgmma_rs_instruction(dtype.name, n, kmajor[1])
            issue = f"[](float* d, const unsigned* a, unsigned long long b) {{ {instr}(d, a, b); }}"
            pending = 0 if staged else self.wgmma_pending
            self.out(
                f"tx::wgmma_rs<{acc_layout}, {tiles[0]}, {tiles[1]}, {flags[1]}, {k}, {pending}>"
                f"({out}, {ptrs[0]}, {ptrs[1]}, {issue});  // A from registers"
            )
        elif wgmma:
            instr = self.wgmma_instruction(dtype.name, n, kmajor)
            issue = (
                f"[](float* d, unsigned long long a, unsigned long long b) {{ {instr}(d, a, b); }}"
            )
            pending = 0 if staged else self.wgmma_pending
            self.out(
                f"tx::wgmma<{acc_layout}, {operands}, {pending}>"
                f"({out}, {ptrs[0]}, {ptrs[1]}, {issue});"
            )
        elif inst is None:
            if not all(kmajor):
                raise CompileError(  # the planner pipelines f32 operands only with K contiguous
                    "internal: an IEEE f32 dot operand is not K-major", e.loc
                )
            fma = f"tx::dot_fma<{acc_layout}, {tiles[0]}, {tiles[1]}, {k}>"
            self.out(f"{fma}({out}, {ptrs[0]}, {ptrs[1]});")
        else:
            self.out(f"tx::mma<{acc_layout}, {inst}, {operands}>({out}, {ptrs[0]}, {ptrs[1]});")
        if staged:
            self.out("__syncthreads();")
        self.temps[id(e)] = (out, layout, "")

    def register_a(self, a: Expr, acc: Layout) -> bool:
        """Whether a wgmma dot can read its A operand from registers: a 16-bit tile, not
        transposed and not in shared memory, held in a wgmma accumulator layout of the same
        warps (a tile computed from a product, such as attention's P), whose registers are
        then the A fragments."""
        src, transposed = _operand_source(a)
        lay = getattr(src, "layout", None)
        return (
            not transposed
            and not (isinstance(src, Var) and src.name in self.pipelined)
            and src.type.dtype.itemsize == 2
            and lay is not None
            and lay.is_mma
            and lay.blocked.version == 3
            and lay.blocked.warps == acc.blocked.warps
            and lay.dims == (0, 1)
            and lay.shape == (acc.shape[0], a.type.shape[1])
        )

    def wgmma_rs_instruction(self, dtype: str, n: int, b_kmajor: bool) -> str:
        """The device function issuing one wgmma m64nNk16 with A in registers (four packed
        fragment registers) and B through its descriptor (rendered once per kernel)."""
        name = f"tx_wgmma_m64n{n}k16_{dtype}_r{'k' if b_kmajor else 't'}"
        if name not in self.preamble:
            rows, outputs, count = _wgmma_accumulator_operands(n)
            a_operands = "{" + ", ".join(f"%{count + i}" for i in range(4)) + "}"
            self.preamble[name] = self.snippets.wgmma_rs_instruction(
                name, n, dtype, int(not b_kmajor), rows, a_operands, outputs, count
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
            rows, outputs, count = _wgmma_accumulator_operands(n)
            self.preamble[name] = self.snippets.wgmma_instruction(
                name, n, k, dtype, int(not kmajor[0]), int(not kmajor[1]), rows, outputs, count
            )
        return name

    # ------------------------------------------------------------ loops

    def hoist_invariant_conversions(self, s: ir.Loop) -> None:
        """Layout changes of values the loop does not change happen once, before it."""
        changed = _assigned_names(s)
        roots = list(s.body) + ([ir.Eval(loc=s.loc, expr=s.cond)] if s.cond is not None else [])
        done: dict[tuple, tuple] = {}
        for e in walk_exprs(roots):
            if (
                isinstance(e, Op)
                and e.op == "convert_layout"
                and isinstance(e.args[0], Var)
                and e.args[0].name not in changed
                and id(e) not in self.temps
            ):
                key = (e.args[0].name, e.layout.key)
                if key not in done:
                    self.emit_relayout(e)
                    done[key] = self.temps[id(e)]
                self.temps[id(e)] = done[key]

    def pending(self, e: Expr) -> bool:
        """Whether ``e`` needs work before a statement can use it (a load, a layout change...)
        that has not been done yet."""
        if isinstance(e, Op) and id(e) not in self.temps:
            return e.op in self._HOISTED or any(self.pending(a) for a in e.args)
        return False

    def plan_pipeline(self, s: ir.Loop) -> list[PipelinedLoad] | None:
        """The loads of ``s`` to pipeline, or None when the loop does not have the shape:
        ``for (k = init; cond; k = k + inc)`` with no break, continue or return, and at the top
        of its body tile loads used only as dot operands, from addresses of k and values the
        loop does not change, 16 bytes at a time, zeros where masked."""
        stages = self.kernel.num_stages
        if stages < 2 or s.kind != "for" or s.cond is None or len(s.init) != 1 or len(s.step) != 1:
            return None
        init, step = s.init[0], s.step[0]
        if not isinstance(init, ir.Declare) or init.type.is_tile or not init.type.dtype.is_int:
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
        changed = _assigned_names(s)
        loop_var = init.name
        for x in (init.init, s.cond, step.value.args[1]):
            if self.needs_hoist(x) or (set(_var_names(x)) & changed) - {loop_var}:
                return None
        if set(_var_names(step.value.args[1])) & changed:
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
                    src, transposed = _operand_source(x)
                    if isinstance(src, Var):
                        roles.setdefault(src.name, []).append((role, transposed))
        plan = []
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
            ptr = load.args[0]
            exprs = [ptr]
            if load.attr("masked"):
                mask, other = load.args[1], load.args[2]
                if not (isinstance(other, Const) and other.value == 0):
                    continue
                exprs.append(mask)
            if any(self.pending(x) or (set(_var_names(x)) & changed) - {loop_var} for x in exprs):
                continue
            dtype = t.type.dtype
            if dtype.itemsize != 2 and not all(_kmajor_as_loaded(r, tr) for r, tr in roles[t.name]):
                continue  # ldmatrix.trans moves 16-bit elements only
            vec = self.axis.vector_width(ptr, load.layout)
            if vec * dtype.itemsize != 16 or load.layout.dims != (0, 1):
                continue
            plan.append(PipelinedLoad(t.name, load, vec))
        return plan or None

    def emit_pipelined_loop(self, s: ir.Loop, plan: list[PipelinedLoad]) -> None:
        stages = self.kernel.num_stages
        init, step = s.init[0], s.step[0]
        k, kt = init.name, ctype(init.type.dtype)
        listed = ", ".join(p.var for p in plan)
        self.out("{")
        self.depth += 1
        self.out(
            f"// software pipeline, {stages} stages: {listed} copied global -> shared memory "
            "by cp.async ahead of the dot"
        )
        offset = 0
        for p in plan:
            t = ctype(p.load.type.dtype)
            rows, cols = p.load.type.shape
            p.tile, p.buffer = f"{p.var}_tile", f"{p.var}_stages"
            self.out(f"using {p.tile} = tx::SmemTile<{t}, {rows}, {cols}>;")
            self.out(f"{t}* const {p.buffer} = reinterpret_cast<{t}*>(tx_pipeline + {offset});")
            offset += -(-stages * rows * cols * p.load.type.dtype.itemsize // 1024) * 1024
        dots = [e for e in walk_exprs(s.body) if isinstance(e, Op) and e.op == "dot"]
        invariant = self.stage_invariant_operands(s, plan, dots, offset)
        offset += sum(size for _, size in invariant)
        self.pipeline_bytes = max(self.pipeline_bytes, offset + 1024)  # + alignment to 1024
        async_reads = any(e.layout.blocked.version == 3 for e in dots)
        # wgmma may run on while the next iteration starts when each dot reads only pipelined
        # operands: the copies then run one stage less ahead, to leave its stage alone
        names = {p.var for p in plan}
        sources = [_operand_source(x)[0] for e in dots for x in e.args[:2]]
        overlap = (
            async_reads
            and stages >= 3
            and all(e.layout.blocked.version == 3 for e in dots)
            and all(isinstance(x, Var) and x.name in names for x in sources)
        )
        ahead = stages - 2 if overlap else stages - 1
        # prologue: the first `ahead` iterations' copies
        self.out(
            f"// prologue: the copies of the first {ahead} iteration{'s' if ahead > 1 else ''}"
        )
        self.out("{")
        self.depth += 1
        self.out(f"{kt} {k} = {self.ex(init.init)};")
        self.out(f"for (int stage = 0; stage < {ahead}; ++stage) {{")
        self.depth += 1
        self.emit_copies(plan, self.ex(s.cond), "stage")
        self.out("tx::cp_async_commit();")
        self.out(f"{k} = {self.ex(step.value)};")
        self.depth -= 1
        self.out("}")
        self.depth -= 1
        self.out("}")
        self.out(
            f"// main loop: wait for this iteration's stage, issue the copies {ahead} "
            f"iteration{'s' if ahead > 1 else ''} ahead, then the body (its dot reads the stage)"
        )
        self.out("int tx_stage = 0;  // the stage this iteration's dot reads")
        head = f"{kt} {k} = {self.ex(init.init)}; {self.ex(s.cond)}; {k} = {self.ex(step.value)}"
        self.out(f"for ({head}) {{")
        self.depth += 1
        self.out(f"tx::cp_async_wait<{ahead - 1}>();  // this iteration's stage has landed")
        tf32 = {
            _operand_source(x)[0].name
            for e in dots
            if e.layout.blocked.version == 3 and e.attr("precision") == "TF32"
            for x in e.args[:2]
            if isinstance(_operand_source(x)[0], Var)
        }
        for p in plan:
            if p.var in tf32:
                self.emit_tf32_rounding(p)
        if async_reads:
            self.out("tx::fence_async_proxy();  // ... where wgmma reads it")
        self.out("__syncthreads();")
        self.out("{")
        self.depth += 1
        inc = self.ex(step.value.args[1])
        self.out(f"const {kt} k_ahead = {k} + {ahead} * ({inc});")
        self.out(f"const int stage_ahead = (tx_stage + {ahead}) % {stages};")
        self.out(f"const {kt} {k} = k_ahead;")
        self.emit_copies(plan, self.ex(s.cond), "stage_ahead")
        self.depth -= 1
        self.out("}")
        self.out("tx::cp_async_commit();")
        for p in plan:
            self.pipelined[p.var] = (f"{p.buffer} + tx_stage * {p.tile}::ELEMS", p.tile)
        self.depth -= 1
        self.wgmma_pending = 1 if overlap else 0
        self.loop_body(s.body, None)
        self.wgmma_pending = 0
        for p in plan:
            del self.pipelined[p.var]
        for name, _ in invariant:
            del self.pipelined[name]
        self.depth += 1
        self.out(f"tx_stage = tx_stage == {stages - 1} ? 0 : tx_stage + 1;")
        self.depth -= 1
        self.out("}")
        if overlap:
            self.out("tx::wgmma_wait<0>();  // the last iteration's products")
        self.out("tx::cp_async_wait<0>();")
        self.out("__syncthreads();")
        self.depth -= 1
        self.out("}")

    def stage_invariant_operands(
        self, s: ir.Loop, plan: list[PipelinedLoad], dots: list[Op], offset: int
    ) -> list[tuple[str, int]]:
        """16-bit dot operands that the loop does not change (the query block of attention)
        are written into shared memory once, before the loop, after its stages (at ``offset``
        of the pipeline buffer); the dots read them there. Returns (variable, bytes) each.
        Not in loops that hold loops (whose pipelines would reuse the buffer)."""
        if any(isinstance(t, ir.Loop) for t in walk_stmts(s.body)):
            return []
        changed = _assigned_names(s) | {p.var for p in plan}
        out = []
        for e in dots:
            for x in e.args[:2]:
                src, _ = _operand_source(x)
                if (
                    not isinstance(src, Var)
                    or src.name in changed
                    or src.name in self.pipelined
                    or src.type.dtype.itemsize != 2
                    or src.layout is None
                ):
                    continue
                t = ctype(src.type.dtype)
                rows, cols = src.type.shape
                tile, ptr = self.fresh(f"Tile_{src.name}"), self.fresh(f"smem_{src.name}")
                d0, d1 = src.layout.dims
                self.out(f"using {tile} = tx::SmemTile<{t}, {rows}, {cols}>;")
                self.out(f"{t}* const {ptr} = reinterpret_cast<{t}*>(tx_pipeline + {offset});")
                self.out(
                    f"tx::stage<{self.L(src.layout)}, {d0}, {d1}, {tile}, false>"
                    f"({ptr}, {self.materialise(src, src.layout)});  // once: the loop keeps it"
                )
                size = -(-rows * cols * src.type.dtype.itemsize // 1024) * 1024
                offset += size
                self.pipelined[src.name] = (ptr, tile)
                out.append((src.name, size))
        return out

    def emit_tf32_rounding(self, p: PipelinedLoad) -> None:
        """Round this thread's chunks of ``p``'s current stage to TF32 (wgmma reads TF32 by
        ignoring the low mantissa bits; the language rounds to nearest even)."""
        with self.registers_of(p.load.layout) as name:
            chunk = (
                f"{p.buffer} + tx_stage * {p.tile}::ELEMS + "
                f"{p.tile}::offset({name}::coord(i, 0), {name}::coord(i, 1))"
            )
            call = f"tx::tf32_round_chunk({chunk});"
            self.out(self.snippets.tile_loop(name, call, p.vec) + "  // TF32, to nearest even")

    def emit_copies(self, plan: list[PipelinedLoad], cond: str, stage: str) -> None:
        """The cp.async copies of one iteration (the one the loop variable names) into
        ``stage``, if that iteration runs."""
        self.out(f"if ({cond}) {{")
        self.depth += 1
        for p in plan:
            load, layout = p.load, p.load.layout
            mask = load.args[1] if load.attr("masked") else None
            chunk_mask = mask is not None and self.axis.info(mask).const >= p.vec
            mask_name = None
            if mask is not None and not chunk_mask:
                mask_name = self.materialise(mask, layout)
            with self.registers_of(layout) as name:
                dst = (
                    f"{p.buffer} + {stage} * {p.tile}::ELEMS + "
                    f"{p.tile}::offset({name}::coord(i, 0), {name}::coord(i, 1))"
                )
                src = self.ex(load.args[0])
                if chunk_mask:  # one mask bit per 16-byte chunk: a zero-filling copy
                    call = f"tx::cp_async16({dst}, {src}, {self.ex(mask)});"
                elif mask_name:  # a ragged edge may cut a chunk: copy_chunk handles it
                    call = f"tx::copy_chunk<{p.vec}>({dst}, {src}, &{mask_name}[i]);"
                else:
                    call = f"tx::cp_async16({dst}, {src}, true);"
                self.out(self.snippets.tile_loop(name, call, p.vec))
        self.depth -= 1
        self.out("}")


def _wgmma_accumulator_operands(n: int) -> tuple[list[str], list[str], int]:
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


def _assigned_names(s: ir.Loop) -> set[str]:
    """Variables a loop declares or assigns (in its init, body or step)."""
    names = set()
    for t in walk_stmts([s]):
        if isinstance(t, (ir.Declare, ir.Assign)):
            names.add(t.name)
    return names
