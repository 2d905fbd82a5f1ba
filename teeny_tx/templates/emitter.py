"""Decided IR → CUDA C++ text, through the Jinja2 templates beside this file.

Input: :class:`~teeny_tx.lower.passes.Decided`: a kernel whose layouts, conversions and
software pipelines the lower passes chose, its layouts and the allocator of generated names.
Output: the kernel's CUDA source, deterministic for a given input, and the bytes of dynamic
shared memory it needs. The emitter decides nothing: it walks the IR, dispatching each
statement and op family to a handler that fills in a template macro (``statements.cu.j2``,
``memory.cu.j2``, ``tiles.cu.j2``, ``dot.cu.j2``, ``debug.cu.j2``); every line of CUDA comes
from a macro or the kernel skeleton ``kernel.cu.j2``. Expressions are C text from the op table,
parenthesised by precedence (``expr.py``).

Extending it: a new op family is a new ``<family>.cu.j2`` beside this file (every macro of
every family is in one table; two families may not define the same name); a new decided IR
node (Hopper's TMA / warp-specialised mainloop, say) gets its handler through
:func:`register_statement`, a new op computed into a temporary through :func:`register_op`.

Each DSL statement opens with the DSL line as a comment and one ``#line`` directive into the
kernel file. A ``#line`` numbers the lines after it consecutively, so a statement that takes
several lines of CUDA re-states it (``#line N``) before each further line of code; comments,
braces and plain declarations need none.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache

import jinja2

from ..errors import CompileError
from ..lower import ir
from ..lower.convert import OWN_STATEMENT_OPS
from ..lower.ir import Const, Expr, Op, Var
from ..lower.layout import Layout
from ..lower.names import ACCUMULATOR, COMBINE_ARGS, ELEMENT, REGISTER, Names, layout_alias
from ..lower.ops import OPS
from ..lower.passes import Decided
from . import expr as cx
from .cuda_types import ctype
from .emit_debug import DebugEmitter
from .emit_dot import DotEmitter
from .emit_memory import MemoryEmitter
from .emit_tiles import TileEmitter

INDENT = "    "
SKELETON = "kernel.cu.j2"
# Whole-kernel templates, not op families (the Hopper matmul renders its own: templates/hopper.py)
SKELETONS = (SKELETON, "hopper_matmul.cu.j2")
_MACRO = re.compile(r"{%-?\s*macro\s+(\w+)")

# handlers that other modules add: IR node type -> f(emitter, node); op -> f(emitter, op, dst)
_STATEMENTS: dict[type, Callable[..., None]] = {}
_OPS: dict[str, Callable[..., None]] = {}


def register_statement(node: type) -> Callable:
    """Decorator: ``f(emitter, node)`` renders statements of type ``node``."""

    def register(fn: Callable[..., None]) -> Callable[..., None]:
        _STATEMENTS[node] = fn
        return fn

    return register


def register_op(op: str) -> Callable:
    """Decorator: ``f(emitter, e, dst=None)`` computes op ``op`` into a temporary (``dst``, or
    a generated name) and records it in ``emitter.temps``."""

    def register(fn: Callable[..., None]) -> Callable[..., None]:
        _OPS[op] = fn
        return fn

    return register


@cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("teeny_tx", "templates"),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
        # compiled templates kept on disk (Jinja's per-user directory, checked private):
        # a new process skips compiling them, ~0.4 s of its first specialisation
        bytecode_cache=jinja2.FileSystemBytecodeCache(),
    )
    env.globals.update(R=REGISTER, E=ELEMENT, D=ACCUMULATOR, A=COMBINE_ARGS[0], B=COMBINE_ARGS[1])
    return env


def families() -> list[str]:
    """The op-family templates: every ``*.cu.j2`` but the kernel skeletons, in name order."""
    env = environment()
    return env.list_templates(filter_func=lambda n: n.endswith(".cu.j2") and n not in SKELETONS)


@cache
def macros() -> dict[str, Callable[..., str]]:
    """Every macro of the op-family templates by name (names are unique across families)."""
    table: dict[str, Callable[..., str]] = {}
    defined: dict[str, str] = {}
    env = environment()
    for family in families():
        source = env.loader.get_source(env, family)[0]
        module = env.get_template(family).module
        for name in _MACRO.findall(source):
            if name in defined:
                raise RuntimeError(f"macro {name} is defined in {defined[name]} and {family}")
            defined[name] = family
            table[name] = getattr(module, name)
    return table


def _is_code(line: str) -> bool:
    """Whether a CUDA line compiles to instructions (so #line must map it to its DSL line)."""
    text = line.strip()
    if not text or text.startswith(("//", "#", "using ")) or text in ("{", "}", "} else {"):
        return False
    # a declaration without initialiser: `T name[L::REGS];`
    return not (text.endswith("::REGS];") and " " in text and "=" not in text and "(" not in text)


class Emitter(MemoryEmitter, TileEmitter, DotEmitter, DebugEmitter):
    # statement handlers by IR node; op handlers (ops computed into a temporary) by op name
    STATEMENTS = {
        ir.Declare: "stmt_declare",
        ir.Assign: "stmt_assign",
        ir.Eval: "stmt_eval",
        ir.If: "stmt_if",
        ir.Loop: "stmt_loop",
        ir.PipelinedLoop: "stmt_pipelined_loop",
        ir.Staged: "stmt_staged",
        ir.WgmmaWait: "stmt_wgmma_wait",
        ir.Break: "stmt_break",
        ir.Continue: "stmt_continue",
        ir.Return: "stmt_return",
    }
    TEMPORARIES = {
        "load": "emit_load_temporary",
        "reduce": "emit_reduce",
        "scan": "emit_scan",
        "cat": "emit_gather2",
        "join": "emit_gather2",
        "convert_layout": "emit_relayout",
        "permute": "emit_relayout",
        "reshape": "emit_relayout",
        "flip": "emit_relayout",
        "split": "emit_relayout",
        "atomic": "emit_atomic",
        "dot": "emit_dot",
    }
    EFFECTS = {  # ops run for their effect as statements
        "store": "emit_store",
        "atomic": "hoist",
        "device_print": "emit_device_print",
        "device_assert": "emit_device_assert",
    }

    def __init__(self, decided: Decided):
        self.kernel = decided.kernel
        self.layouts = decided.layouts
        self.names: Names = decided.names
        self.layout_names = {key: layout_alias(i) for i, key in enumerate(self.layouts)}
        self.t = macros()
        self.temps: dict[int, tuple[str, Layout | None, str]] = {}
        self.lines: list[str] = []
        self.template_lines = 0  # body lines from macros (the skeleton's are all template)
        self.python_lines = 0  # body lines written by Python (none, today)
        self.depth = 1
        self.statement_line: int | None = None  # the DSL line the current statement maps to
        self.last_line: tuple[str, int] | None = None
        self.mapped = True  # whether the next physical line maps to statement_line
        self.loop_steps: list[list[ir.Stmt] | None] = []
        self.loop: Layout | None = None  # the layout whose registers the register index counts
        self.shared_bytes = 0  # the scratch buffer
        self.pipeline_bytes = 0  # the pipelined loops' stages, after the scratch
        self.pipeline_stage: str | None = None  # the stage counter of the pipelined loop
        self.preamble: dict[str, str] = {}  # device functions rendered before the kernel
        self.tma_params: list[str] = []  # tensor maps of TMA pipelines, after the parameters
        self.scratch_used = False  # whether a warp-specialised kernel's helpers share the scratch

    # ------------------------------------------------------------ layouts, registers

    def L(self, layout: Layout) -> str:
        return self.layout_names[layout.key]

    @contextmanager
    def registers_of(self, layout: Layout) -> Iterator[str]:
        """Render expressions inside a tile loop over ``layout``'s registers."""
        outer, self.loop = self.loop, layout
        try:
            yield self.L(layout)
        finally:
            self.loop = outer

    def index(self, layout: Layout) -> str:
        """The current register, as a register of ``layout`` (a broadcast of the loop's)."""
        if self.loop is None or layout.key == self.loop.key:
            return REGISTER
        return f"tx::remap<{self.L(layout)}, {self.L(self.loop)}>({REGISTER})"

    def scratch(self, nbytes: int) -> str:
        """The scratch buffer as the helpers take it: the pointer, or in a warp-specialised
        kernel ``tx_scratch``, which makes them meet at the compute warps' named barrier."""
        self.shared_bytes = max(self.shared_bytes, nbytes)
        if self.kernel.producer_warps:
            self.scratch_used = True
            return "tx_scratch"
        return "tx_smem"

    # ------------------------------------------------------------ output

    def emit(self, macro: str, *args, **kwargs) -> None:
        """Render one macro and append its lines at the current depth."""
        self.put(self.render_macro(macro, *args, **kwargs))

    def render_macro(self, macro: str, *args, **kwargs) -> str:
        return str(self.t[macro](*args, **kwargs)).strip("\n")

    def put(self, text: str, template: bool = True) -> None:
        for line in text.split("\n"):
            if _is_code(line) and not self.mapped and self.statement_line is not None:
                self.lines.append(self.render_macro("resume", self.statement_line))
                self.template_lines += 1
            self.mapped = line.startswith("#line")  # else the compiler's count runs ahead
            self.lines.append(INDENT * self.depth + line if line and line[0] != "#" else line)
            if template:
                self.template_lines += 1
            else:
                self.python_lines += 1

    @contextmanager
    def capture(self) -> Iterator[list[str]]:
        """Collect the lines rendered inside, unindented, instead of appending them."""
        lines, depth, mapped = self.lines, self.depth, self.mapped
        counts = self.template_lines, self.python_lines
        captured: list[str] = []
        self.lines, self.depth, self.mapped = captured, 0, True
        try:
            yield captured
        finally:
            self.lines, self.depth, self.mapped = lines, depth, mapped
            self.template_lines, self.python_lines = counts
            captured[:] = [line for line in captured if not line.startswith("#line")]

    def source_line(self, s: ir.Stmt) -> None:
        """The DSL text and one #line directive, once per kernel line."""
        key = (s.loc.file, s.loc.line)
        self.statement_line = s.loc.line
        if key == self.last_line:
            return
        self.last_line = key
        comment = s.loc.source_line.strip() if s.loc.source_line else ""
        self.emit("source", comment, s.loc.line, s.loc.file)

    def render(self) -> str:
        k = self.kernel
        self.block(k.body)
        self.lines[:0] = self.warp_split()  # the roles' split, before every statement
        params = [
            {
                "ctype": ctype(p.type.dtype),
                "restrict": p.type.is_pointer and p.type.dtype.const,
                "name": p.name,
            }
            for p in k.runtime_params
        ]
        params += [
            {"ctype": "const __grid_constant__ tx::hopper::TensorMap", "restrict": False, "name": m}
            for m in self.tma_params
        ]
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
                min_blocks=1 if k.producer_warps else 0,  # setmaxnreg acts under a register cap
                params=params,
                constexprs=constexprs,
                layouts=layouts,
                shared_bytes=self.shared_bytes,
                pipeline_offset=self.pipeline_offset,
                includes=["hopper.cuh"] if self.tma_params else [],
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

    # ------------------------------------------------------------ statements

    def block(self, stmts) -> None:
        for s in stmts:
            self.source_line(s)
            if type(s) in _STATEMENTS:
                _STATEMENTS[type(s)](self, s)
            else:
                getattr(self, self.STATEMENTS[type(s)])(s)

    def nested(self, stmts, depth: int = 1) -> None:
        """A nested block; the enclosing statement's next line of code re-states its #line."""
        line = self.statement_line
        self.depth += depth
        self.last_line = None
        self.block(stmts)
        self.depth -= depth
        self.last_line = None
        self.statement_line, self.mapped = line, False

    def stmt_declare(self, s: ir.Declare) -> None:
        if not s.type.is_tile:
            self.hoist(s.init)
            value = self.ex(s.init) if s.init is not None else None
            self.emit("declare_scalar", ctype(s.type.dtype), s.name, value)
            return
        init = s.init
        if (
            isinstance(init, Op)
            and init.op in OWN_STATEMENT_OPS
            and init.op != "dot"
            and init.layout is not None
            and init.layout.key == s.layout.key
        ):
            self.hoist_args(init)
            self.compute(init, s.name)
            if self.temps[id(init)][0] == s.name:
                return  # computed in place (an arg-reduction computes pairs first)
        self.hoist(init)
        with self.registers_of(s.layout) as name:
            value = self.ex(init)
        self.emit("define_tile", ctype(s.type.dtype), s.name, name, value)

    def stmt_assign(self, s: ir.Assign) -> None:
        if not s.value.type.is_tile:
            self.hoist(s.value)
            self.emit("assign", s.name, self.ex(s.value))
            return
        value, layout = s.value, s.value.layout
        if isinstance(value, Op) and value.op == "load":
            self.hoist_args(value)
            self.emit_load(value, s.name)
            return
        self.hoist(value)
        with self.registers_of(layout) as name:
            self.emit("fill", name, s.name, self.ex(value))

    def stmt_eval(self, s: ir.Eval) -> None:
        e = s.expr
        if isinstance(e, Op) and e.op in self.EFFECTS:
            getattr(self, self.EFFECTS[e.op])(e)
        elif isinstance(e, Op) and OPS[e.op].elementwise:  # kept for its effect: debug_barrier
            self.emit("effect", self.ex(e))

    def stmt_if(self, s: ir.If) -> None:
        self.hoist(s.cond)
        self.emit("if_open", self.ex(s.cond))
        self.nested(s.then)
        if s.orelse:
            self.emit("else_open")
            self.nested(s.orelse)
        self.emit("close")

    def stmt_staged(self, s: ir.Staged) -> None:
        by = "TMA" if s.staged.tma is not None else "cp.async"
        self.emit("staged", s.name, self.pipeline_stage, by)

    def stmt_loop(self, s: ir.Loop) -> None:
        if s.cond is not None and self.needs_hoist(s.cond):
            self.loop_with_memory_condition(s)
            return
        cond = self.ex(s.cond) if s.cond is not None else ""
        if s.kind == "while":
            self.emit("while_open", cond or "true")
            self.loop_body(s.body, None)
            self.emit("close")
            return
        if s.kind == "do":
            self.emit("do_open")
            self.loop_body(s.body, None)
            self.emit("do_close", cond or "true")
            return
        simple_init = len(s.init) <= 1 and all(
            isinstance(i, ir.Declare) and not i.type.is_tile for i in s.init
        )
        simple_step = all(
            isinstance(t, ir.Assign) and not t.value.type.is_tile and not self.needs_hoist(t.value)
            for t in s.step
        )
        if simple_init and simple_step:
            init = None
            if s.init:
                d = s.init[0]
                self.hoist(d.init)
                init = {"ctype": ctype(d.type.dtype), "name": d.name, "value": self.ex(d.init)}
            steps = [(t.name, self.ex(t.value)) for t in s.step]
            self.emit("for_open", init, cond, steps)
            self.loop_body(s.body, None)
            self.emit("close")
            return
        self.emit("open")
        self.depth += 1
        self.block(s.init)
        self.emit("for_open", None, cond, [])
        self.loop_body(s.body, list(s.step))
        self.nested(s.step)
        self.emit("close")
        self.depth -= 1
        self.emit("close")

    def loop_with_memory_condition(self, s: ir.Loop) -> None:
        """A condition that loads or updates memory is evaluated at the top of every iteration."""
        if s.kind == "do":
            raise CompileError(
                "a do-while condition cannot access memory yet",
                s.cond.loc,
                "write it as a while loop",
            )
        self.emit("open")
        self.depth += 1
        self.block(s.init)
        self.emit("while_open", "true")
        self.depth += 1
        saved = dict(self.temps)
        self.hoist(s.cond)
        self.emit("exit_unless", self.expr(s.cond).at(cx.UNARY))
        self.temps = saved
        self.depth -= 1
        self.loop_body(s.body, list(s.step) or None)
        self.nested(s.step)
        self.emit("close")
        self.depth -= 1
        self.emit("close")

    def loop_body(self, body, step, depth: int = 1) -> None:
        self.loop_steps.append(step)
        self.nested(body, depth)
        self.loop_steps.pop()

    def stmt_break(self, s) -> None:
        self.emit("jump", "break")

    def stmt_continue(self, s) -> None:
        step = self.loop_steps[-1] if self.loop_steps else None
        if step:
            self.emit("open")
            self.nested(step)
            self.depth += 1
            self.emit("jump", "continue")
            self.depth -= 1
            self.emit("close")
        else:
            self.emit("jump", "continue")

    def stmt_return(self, s) -> None:
        self.emit("jump", "return")

    # ------------------------------------------------------------ expressions

    def needs_hoist(self, e: Expr) -> bool:
        if isinstance(e, Op):
            return e.op in OWN_STATEMENT_OPS or any(self.needs_hoist(a) for a in e.args)
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
        if e.op in self.TEMPORARIES or e.op in _OPS:
            self.compute(e)

    def compute(self, e: Op, dst: str | None = None) -> None:
        """An op computed into a temporary (``dst``, or a generated name) of its own."""
        if e.op in _OPS:
            _OPS[e.op](self, e, dst)
        elif dst is None:
            getattr(self, self.TEMPORARIES[e.op])(e)
        else:
            getattr(self, self.TEMPORARIES[e.op])(e, dst)

    def hoist_args(self, e: Op) -> None:
        for a in e.args:
            self.hoist(a)

    def ex(self, e: Expr) -> str:
        """The C expression of ``e`` at the current register (tiles), or whole (scalars)."""
        return self.expr(e).text

    def expr(self, e: Expr) -> cx.Text:
        if id(e) in self.temps:
            name, layout, suffix = self.temps[id(e)]
            if layout is None:
                return cx.atom(name)
            if not e.type.is_tile:
                return cx.atom(f"{name}[0]{suffix}")
            return cx.atom(f"{name}[{self.index(layout)}]{suffix}")
        if isinstance(e, Const):
            if e.name is not None:
                return cx.atom(e.name)
            return cx.atom(e.type.dtype.literal(e.value))
        if isinstance(e, Var):
            if e.type.is_tile:
                return cx.atom(f"{e.name}[{self.index(e.layout)}]")
            return cx.atom(e.name)
        method = getattr(self, f"ex_{e.op}", None)
        if method is not None:
            return method(e)
        args = [self.expr(a) for a in e.args]
        if e.op == "add" and (e.type.is_pointer or (e.args and e.args[0].type.is_pointer)):
            return cx.binary("+", *args)
        op = OPS[e.op]
        return cx.op_text(op.cuda_format(e.type.dtype), op.symbol, args, ctype(e.type.dtype))

    def ex_arange(self, e: Op) -> cx.Text:
        start = e.attr("start")
        coord = cx.atom(f"{self.L(self.loop)}::coord({REGISTER}, {e.layout.dims[0]})")
        return coord if start == 0 else cx.binary("+", cx.atom(str(start)), coord)

    def ex_full(self, e: Op) -> cx.Text:
        return self.expr(e.args[0])

    def ex_expand_dims(self, e: Op) -> cx.Text:
        return self.expr(e.args[0])

    def ex_broadcast(self, e: Op) -> cx.Text:
        return self.expr(e.args[0])

    def ex_program_id(self, e: Op) -> cx.Text:
        return cx.cast(ctype(e.type.dtype), cx.atom(f"blockIdx.{'xyz'[e.attr('axis')]}"))

    def ex_num_programs(self, e: Op) -> cx.Text:
        return cx.cast(ctype(e.type.dtype), cx.atom(f"gridDim.{'xyz'[e.attr('axis')]}"))


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


def emit_cuda(decided: Decided) -> tuple[str, int]:
    """The CUDA source of a decided kernel and the bytes of dynamic shared memory it needs."""
    emitter = Emitter(decided)
    return emitter.render(), emitter.total_shared_bytes


def line_origins(decided: Decided) -> dict[str, int]:
    """How many lines of ``decided``'s CUDA come from templates (macros and the kernel
    skeleton) and how many Python wrote itself: the measure that keeps text in templates."""
    emitter = Emitter(decided)
    total = len(emitter.render().splitlines())
    return {"template": total - emitter.python_lines, "python": emitter.python_lines}
