"""Layout-annotated IR → CUDA C++ text, through the Jinja2 templates beside this file.

Input: an ``ir.Kernel`` after ``lower.layout`` (and its axis info). Output: the kernel's CUDA
source, deterministic for a given input. Each DSL statement becomes one block of C++, preceded
by a ``#line`` directive into the kernel file and the DSL line as a comment. Tiles become
per-thread register arrays indexed by the layout's registers; elementwise expressions render
inline, one loop per statement; loads and stores become 16-byte accesses where the axis info
proves contiguity and alignment. Values in layouts that differ only by broadcast dimensions
index each other's registers through ``tx::remap``; reductions and layout changes go through
the device header's ``tx::reduce`` and ``tx::relayout`` and one shared-memory scratch buffer,
sized here to the largest use.

Python decides (names, widths, which snippet); the templates lay out the text.
"""

from __future__ import annotations

from collections import defaultdict
from contextlib import contextmanager
from functools import cache

import jinja2

from ..errors import CompileError
from ..lower import ir
from ..lower.axisinfo import AxisInfo
from ..lower.ir import Const, Expr, Op, Var
from ..lower.layout import Layout
from ..lower.ops import OPS
from .cuda_types import ctype
from .emit_debug import DebugEmitter
from .emit_dot import DotEmitter
from .emit_memory import MemoryEmitter
from .emit_tiles import TileEmitter

INDENT = "    "


@cache
def environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("teeny_tx", "templates"),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )


class Emitter(MemoryEmitter, TileEmitter, DotEmitter, DebugEmitter):
    def __init__(self, kernel: ir.Kernel, layouts: dict[tuple, Layout]):
        self.kernel = kernel
        self.layouts = layouts
        self.layout_names = {key: f"L{i}" for i, key in enumerate(layouts)}
        self.axis = AxisInfo(kernel)
        self.snippets = environment().get_template("ops.cu.j2").module
        self.counters: dict[str, int] = defaultdict(int)
        self.temps: dict[int, tuple[str, Layout | None, str]] = {}
        self.lines: list[str] = []
        self.depth = 1
        self.last_line: tuple[str, int] | None = None
        self.line_directive_used = False
        self.loop_steps: list[list[ir.Stmt] | None] = []
        self.loop: Layout | None = None  # the layout whose registers `i` counts
        self.shared_bytes = 0  # the scratch buffer
        self.pipeline_bytes = 0  # the pipelined loops' stages, after the scratch
        self.pipelined: dict[str, tuple[str, str]] = {}  # variable -> (shared pointer, tile)
        self.preamble: dict[str, str] = {}  # device functions rendered before the kernel
        self.wgmma_pending = 0  # wgmma groups a dot may leave running (a pipelined loop's)

    def L(self, layout: Layout) -> str:
        return self.layout_names[layout.key]

    @contextmanager
    def registers_of(self, layout: Layout):
        """Render expressions inside a tile loop over ``layout``'s registers."""
        outer, self.loop = self.loop, layout
        try:
            yield self.L(layout)
        finally:
            self.loop = outer

    def index(self, layout: Layout) -> str:
        """Register `i` of the current loop, as a register of ``layout`` (a broadcast of it)."""
        if self.loop is None or layout.key == self.loop.key:
            return "i"
        return f"tx::remap<{self.L(layout)}, {self.L(self.loop)}>(i)"

    def tile_loop(self, layout: Layout, render, step: int = 1) -> str:
        with self.registers_of(layout) as name:
            return self.snippets.tile_loop(name, render(), step)

    def scratch(self, nbytes: int) -> str:
        self.shared_bytes = max(self.shared_bytes, nbytes)
        return "tx_smem"

    # ------------------------------------------------------------ output

    def render(self) -> str:
        k = self.kernel
        self.block(k.body)
        params = []
        for p in k.runtime_params:
            if p.type.is_pointer:
                restrict = " __restrict__" if p.type.dtype.const else ""
                params.append(f"{ctype(p.type.dtype)}{restrict} {p.name}")
            else:
                params.append(f"{ctype(p.type.dtype)} {p.name}")
        constexprs = [
            {
                "ctype": ctype(p.type.dtype),
                "name": p.name,
                "value": p.type.dtype.literal(dict(k.constexprs)[p.source_name]),
            }
            for p in k.params
            if p.constexpr
        ]
        layouts = [
            {"name": self.layout_names[key], "cuda": layout.cuda, "doc": layout.describe()}
            for key, layout in self.layouts.items()
        ]
        return (
            environment()
            .get_template("kernel.cu.j2")
            .render(
                file=k.file,
                name=k.name,
                specialisation=describe_specialisation(k),
                threads=k.num_threads,
                params=params,
                constexprs=constexprs,
                layouts=layouts,
                shared_bytes=self.shared_bytes,
                pipeline_offset=self.pipeline_offset,
                preamble=list(self.preamble.values()),
                pipeline_bytes=self.pipeline_bytes,
                body=self.lines,
            )
        )

    @property
    def pipeline_offset(self) -> int:
        """Where the pipeline stages start in dynamic shared memory: after the scratch."""
        return -(-self.shared_bytes // 16) * 16

    @property
    def total_shared_bytes(self) -> int:
        if not self.pipeline_bytes:
            return self.shared_bytes
        return self.pipeline_offset + self.pipeline_bytes

    def out(self, text: str) -> None:
        """Code lines of the current statement; each after the first re-states its #line so
        every line of CUDA maps to the DSL line it came from."""
        for line in text.splitlines():
            if (
                self.line_directive_used
                and self.last_line
                and line.strip() not in ("}", "} else {", "{")
            ):
                self.lines.append(f"#line {self.last_line[1]}")
            self.line_directive_used = True
            self.lines.append(INDENT * self.depth + line if line else "")

    def fresh(self, prefix: str) -> str:
        n = self.counters[prefix]
        self.counters[prefix] += 1
        return f"{prefix}_{n}"

    def source_line(self, s: ir.Stmt) -> None:
        """The #line directive and the DSL text, once per kernel line."""
        key = (s.loc.file, s.loc.line)
        if key == self.last_line:
            return
        self.last_line = key
        if s.loc.source_line:
            self.lines.append(f"{INDENT * self.depth}// {s.loc.source_line.strip()}")
        self.lines.append(f'#line {s.loc.line} "{s.loc.file}"')
        self.line_directive_used = False

    # ------------------------------------------------------------ statements

    def block(self, stmts) -> None:
        for s in stmts:
            self.source_line(s)
            getattr(self, f"stmt_{type(s).__name__}")(s)

    def stmt_Declare(self, s: ir.Declare) -> None:
        if s.name in self.pipelined:
            self.out(f"// {s.name}: in shared memory, stage tx_stage (copied by cp.async)")
            return
        if not s.type.is_tile:
            self.hoist(s.init)
            self.out(f"{ctype(s.type.dtype)} {s.name} = {self.ex(s.init)};")
            return
        self.out(self.snippets.declare_tile(ctype(s.type.dtype), s.name, self.L(s.layout)))
        self.fill(s.name, s.init, s.layout)

    def stmt_Assign(self, s: ir.Assign) -> None:
        if not s.value.type.is_tile:
            self.hoist(s.value)
            self.out(f"{s.name} = {self.ex(s.value)};")
            return
        self.fill(s.name, s.value, s.value.layout)

    def fill(self, name: str, value: Expr, layout: Layout) -> None:
        if isinstance(value, Op) and value.op == "load":
            self.hoist_args(value)
            self.emit_load(value, name)
            return
        self.hoist(value)
        self.out(self.tile_loop(layout, lambda: f"{name}[i] = {self.ex(value)};"))

    def stmt_Eval(self, s: ir.Eval) -> None:
        e = s.expr
        if isinstance(e, Op) and e.op == "store":
            self.emit_store(e)
        elif isinstance(e, Op) and e.op == "atomic":
            self.hoist(e)
        elif isinstance(e, Op) and e.op in ("device_print", "device_assert"):
            getattr(self, f"emit_{e.op}")(e)
        elif isinstance(e, Op) and OPS[e.op].elementwise:  # kept for its effect: debug_barrier
            self.out(f"{self.ex(e)};")

    def stmt_If(self, s: ir.If) -> None:
        self.hoist(s.cond)
        self.out(f"if ({self.ex(s.cond)}) {{")
        self.nested(s.then)
        if s.orelse:
            self.out("} else {")
            self.nested(s.orelse)
        self.out("}")

    def nested(self, stmts) -> None:
        self.depth += 1
        self.last_line = None
        self.block(stmts)
        self.depth -= 1

    def stmt_Loop(self, s: ir.Loop) -> None:
        self.hoist_invariant_conversions(s)
        plan = self.plan_pipeline(s)
        if plan:
            self.emit_pipelined_loop(s, plan)
            return
        if s.cond is not None and self.needs_hoist(s.cond):
            self.loop_with_memory_condition(s)
            return
        cond = self.ex(s.cond) if s.cond is not None else ""
        if s.kind == "while":
            self.out(f"while ({cond or 'true'}) {{")
            self.loop_body(s.body, None)
            self.out("}")
            return
        if s.kind == "do":
            self.out("do {")
            self.loop_body(s.body, None)
            self.out(f"}} while ({cond or 'true'});")
            return
        simple_init = len(s.init) <= 1 and all(
            isinstance(i, ir.Declare) and not i.type.is_tile for i in s.init
        )
        simple_step = all(
            isinstance(t, ir.Assign) and not t.value.type.is_tile and not self.needs_hoist(t.value)
            for t in s.step
        )
        if simple_init and simple_step:
            init = ""
            if s.init:
                d = s.init[0]
                self.hoist(d.init)
                init = f"{ctype(d.type.dtype)} {d.name} = {self.ex(d.init)}"
            step = ", ".join(f"{t.name} = {self.ex(t.value)}" for t in s.step)
            self.out(f"for ({init}; {cond}; {step}) {{")
            self.loop_body(s.body, None)
            self.out("}")
            return
        self.out("{")
        self.depth += 1
        self.block(s.init)
        self.out(f"for (; {cond}; ) {{")
        self.loop_body(s.body, list(s.step))
        self.depth += 1
        self.block(s.step)
        self.depth -= 1
        self.out("}")
        self.depth -= 1
        self.out("}")

    def loop_with_memory_condition(self, s: ir.Loop) -> None:
        """A condition that loads or updates memory is evaluated at the top of every iteration."""
        if s.kind == "do":
            raise CompileError(
                "a do-while condition cannot access memory yet",
                s.cond.loc,
                "write it as a while loop",
            )
        self.out("{")
        self.depth += 1
        self.block(s.init)
        self.out("while (true) {")
        self.depth += 1
        saved = dict(self.temps)
        self.hoist(s.cond)
        self.out(f"if (!({self.ex(s.cond)})) break;")
        self.temps = saved
        self.depth -= 1
        self.loop_body(s.body, list(s.step) or None)
        self.depth += 1
        self.block(s.step)
        self.depth -= 1
        self.out("}")
        self.depth -= 1
        self.out("}")

    def loop_body(self, body, step) -> None:
        self.loop_steps.append(step)
        self.nested(body)
        self.loop_steps.pop()
        self.last_line = None

    def stmt_Break(self, s) -> None:
        self.out("break;")

    def stmt_Continue(self, s) -> None:
        step = self.loop_steps[-1] if self.loop_steps else None
        if step:
            self.out("{")
            self.depth += 1
            self.block(step)
            self.out("continue;")
            self.depth -= 1
            self.out("}")
        else:
            self.out("continue;")

    def stmt_Return(self, s) -> None:
        self.out("return;")

    # ------------------------------------------------------------ expressions

    _HOISTED = (
        "load",
        "reduce",
        "scan",
        "convert_layout",
        "permute",
        "reshape",
        "flip",
        "split",
        "cat",
        "join",
        "atomic",
        "dot",
    )

    def needs_hoist(self, e: Expr) -> bool:
        if isinstance(e, Op):
            return e.op in self._HOISTED or any(self.needs_hoist(a) for a in e.args)
        return False

    def hoist(self, e: Expr | None) -> None:
        """Give every load, reduction and layout change inside ``e`` its own temporary,
        before the statement uses it."""
        if e is None or not isinstance(e, Op) or id(e) in self.temps:
            return
        if e.op == "dot":  # its operands are staged, not hoisted (a transposed one is free)
            self.emit_dot(e)
            return
        self.hoist_args(e)
        if e.op == "load":
            name = self.fresh("load")
            if e.type.is_tile:
                self.out(self.snippets.declare_tile(ctype(e.type.dtype), name, self.L(e.layout)))
            else:
                self.out(f"{ctype(e.type.dtype)} {name};")
            self.emit_load(e, name)
            self.temps[id(e)] = (name, e.layout, "")
        elif e.op == "reduce":
            self.emit_reduce(e)
        elif e.op == "scan":
            self.emit_scan(e)
        elif e.op in ("cat", "join"):
            self.emit_gather2(e)
        elif e.op in ("convert_layout", "permute", "reshape", "flip", "split"):
            self.emit_relayout(e)
        elif e.op == "atomic":
            self.emit_atomic(e)

    def hoist_args(self, e: Op) -> None:
        for a in e.args:
            self.hoist(a)

    def ex(self, e: Expr) -> str:
        """The C expression of ``e`` at register ``i`` of the current loop (tiles), or whole."""
        if id(e) in self.temps:
            name, layout, suffix = self.temps[id(e)]
            if layout is None:
                return name
            if not e.type.is_tile:
                return f"{name}[0]{suffix}"
            return f"{name}[{self.index(layout)}]{suffix}"
        if isinstance(e, Const):
            if e.name is not None:
                return e.name
            return e.type.dtype.literal(e.value)
        if isinstance(e, Var):
            return f"{e.name}[{self.index(e.layout)}]" if e.type.is_tile else e.name
        method = getattr(self, f"ex_{e.op}", None)
        if method is not None:
            return method(e)
        if e.op == "add" and (e.type.is_pointer or (e.args and e.args[0].type.is_pointer)):
            a, b = (self.ex(x) for x in e.args)
            return f"({a} + {b})"
        fmt = OPS[e.op].cuda_format(e.type.dtype)
        return fmt.format(*(self.ex(a) for a in e.args), T=ctype(e.type.dtype))

    def ex_arange(self, e: Op) -> str:
        start = e.attr("start")
        coord = f"{self.L(self.loop)}::coord(i, {e.layout.dims[0]})"
        return coord if start == 0 else f"({start} + {coord})"

    def ex_full(self, e: Op) -> str:
        return self.ex(e.args[0])

    def ex_expand_dims(self, e: Op) -> str:
        return self.ex(e.args[0])

    def ex_broadcast(self, e: Op) -> str:
        return self.ex(e.args[0])

    def ex_program_id(self, e: Op) -> str:
        return f"({ctype(e.type.dtype)})blockIdx.{'xyz'[e.attr('axis')]}"

    def ex_num_programs(self, e: Op) -> str:
        return f"({ctype(e.type.dtype)})gridDim.{'xyz'[e.attr('axis')]}"


def describe_specialisation(k: ir.Kernel) -> str:
    parts = []
    for p in k.params:
        if p.constexpr:
            parts.append(f"{p.name}={dict(k.constexprs)[p.source_name or p.name]}")
        elif p.type.is_pointer:
            parts.append(f"{p.name}: {p.type.dtype.elem}* (align {p.align})")
        elif p.div16:
            parts.append(f"{p.name} % 16 == 0")
    parts.append(f"num_warps={k.num_warps}")
    if k.index64:
        parts.append("64-bit indices")
    return ", ".join(parts)


def emit_cuda(kernel: ir.Kernel, layouts: dict[tuple, Layout]) -> tuple[str, int]:
    """The CUDA source of ``kernel`` and the bytes of dynamic shared memory it needs."""
    emitter = Emitter(kernel, layouts)
    return emitter.render(), emitter.total_shared_bytes
