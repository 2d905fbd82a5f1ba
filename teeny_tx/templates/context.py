"""The emit context: the state of one kernel's rendering and the primitives every handler uses.

Input: a :class:`~teeny_tx.lower.passes.driver.Decided` kernel (its IR, layouts, name allocator and
:class:`~teeny_tx.lower.interface.Interface`). Output: the kernel body's lines, through
:meth:`EmitContext.emit` (one macro of an op-family template at the current depth).

Handlers are plain functions of the context and a node, in the family modules beside this one
(``emit_memory.py``, ``emit_tiles.py``, ``emit_dot.py``, ``emit_debug.py``, ``emitter.py``'s
statements); each registers itself in one of the tables below by a decorator:

- :func:`statement`: ``f(ctx, node)`` renders an IR statement type;
- :func:`temporary`: ``f(ctx, op, dst)`` computes an op into a temporary of its own (``dst``,
  or a generated name) and records it in ``ctx.temps``;
- :func:`effect`: ``f(ctx, op)`` renders an op kept for its effect (a store, a print);
- :func:`expression`: ``f(ctx, op) -> Text``: an op's C expression where the op table has no
  spelling for it.

``HANDLERS`` holds every handler by its function name: the op table's ``emit`` field names one.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import cache
from typing import Any, TypeVar

import jinja2

from ..dtypes import DType
from ..lower import ir
from ..lower.interface import Interface
from ..lower.ir import Const, Expr, Op, Var
from ..lower.names import ACCUMULATOR, COMBINE_ARGS, ELEMENT, REGISTER, Names, layout_alias
from ..lower.ops.table import OPS
from ..lower.passes.convert import OWN_STATEMENT_OPS
from ..lower.passes.driver import Decided
from ..lower.passes.layout import Layout
from ..lower.passes.warp_spec import warp_specialized_loop
from . import expr as cx
from .cuda_types import ctype

INDENT = "    "
SKELETON = "kernel.cu.j2"
# Whole-kernel templates, not op families (the Hopper matmul renders its own: templates/hopper.py)
SKELETONS = (SKELETON, "hopper_matmul.cu.j2")
_MACRO = re.compile(r"{%-?\s*macro\s+(\w+)")

StatementHandler = Callable[["EmitContext", Any], None]
TemporaryHandler = Callable[["EmitContext", Op, "str | None"], None]
EffectHandler = Callable[["EmitContext", Op], None]
ExpressionHandler = Callable[["EmitContext", Op], cx.Text]
F = TypeVar("F", bound=Callable[..., Any])

STATEMENTS: dict[type, StatementHandler] = {}
TEMPORARIES: dict[str, TemporaryHandler] = {}
EFFECTS: dict[str, EffectHandler] = {}
EXPRESSIONS: dict[str, ExpressionHandler] = {}
HANDLERS: dict[str, Callable[..., Any]] = {}


def handler(fn: F) -> F:
    """Decorator: ``fn`` is a handler other handlers call by name (in ``HANDLERS`` only)."""
    HANDLERS[fn.__name__] = fn
    return fn


_named = handler


def statement(*nodes: type) -> Callable[[F], F]:
    """Decorator: ``f(ctx, node)`` renders statements of the types ``nodes``."""

    def register(fn: F) -> F:
        for node in nodes:
            STATEMENTS[node] = fn
        return _named(fn)

    return register


def temporary(*ops: str) -> Callable[[F], F]:
    """Decorator: ``f(ctx, e, dst=None)`` computes the ops ``ops`` into a temporary."""

    def register(fn: F) -> F:
        for op in ops:
            TEMPORARIES[op] = fn
        return _named(fn)

    return register


def effect(*ops: str) -> Callable[[F], F]:
    """Decorator: ``f(ctx, e)`` renders the ops ``ops`` run as statements for their effect."""

    def register(fn: F) -> F:
        for op in ops:
            EFFECTS[op] = fn
        return _named(fn)

    return register


def expression(*ops: str) -> Callable[[F], F]:
    """Decorator: ``f(ctx, e) -> Text`` is the C expression of the ops ``ops``."""

    def register(fn: F) -> F:
        for op in ops:
            EXPRESSIONS[op] = fn
        return _named(fn)

    return register


# ---------------------------------------------------------------- the templates


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
    assert env.loader is not None
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


# ---------------------------------------------------------------- the context


class EmitContext:
    """One kernel's rendering: what has been emitted, where, and the temporaries in scope."""

    def __init__(self, decided: Decided):
        self.kernel: ir.Kernel = decided.kernel
        self.layouts: dict[tuple, Layout] = decided.layouts
        self.names: Names = decided.names
        self.interface: Interface = decided.interface
        self.layout_names = {key: layout_alias(i) for i, key in enumerate(self.layouts)}
        self.t = macros()
        # id(op) -> (its temporary's name, its layout or None for a scalar, a member suffix)
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
        self.pipeline_stage: str | None = None  # the stage counter of the pipelined loop
        self.turns: ir.WarpSpec | None = None  # inside a ping-pong loop: its dots are turns
        # the statement list being rendered, and the multi-operand reductions and scans
        # computed in it: (group, block) -> (the tuple tile's name, its layout), so the items
        # of one tuple, declared one after another, read one computation
        self.current_block: int = 0
        self.tuples: dict[tuple[str, int], tuple[str, Layout]] = {}

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

    def scratch(self, e: Op) -> str:
        """The scratch buffer as the helpers that render ``e`` take it: the pointer, or in a
        warp-specialised kernel ``tx_scratch``, which makes them meet at the compute warps'
        named barrier; ``nullptr`` where the interface gives ``e`` none."""
        if self.interface.scratch_of(e) is None:
            return "nullptr"
        return "tx_scratch" if self.kernel.producer_warps else "tx_smem"

    def block_sync(self) -> str:
        """The barrier of every thread that runs the kernel's statements: ``__syncthreads``,
        or the compute warps' named barrier in a warp-specialised kernel."""
        p = warp_specialized_loop(self.kernel)
        if p is None or p.warp_spec is None:
            return "__syncthreads();"
        return self.render_macro("compute_barrier", p.warp_spec)

    # ------------------------------------------------------------ output

    def emit(self, macro: str, *args: Any, **kwargs: Any) -> None:
        """Render one macro and append its lines at the current depth."""
        self.put(self.render_macro(macro, *args, **kwargs))

    def render_macro(self, macro: str, *args: Any, **kwargs: Any) -> str:
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

    # ------------------------------------------------------------ statements

    def block(self, stmts: Sequence[ir.Stmt]) -> None:
        outer, self.current_block = self.current_block, id(stmts)
        try:
            for s in stmts:
                self.source_line(s)
                STATEMENTS[type(s)](self, s)
        finally:
            self.current_block = outer

    def nested(self, stmts: Sequence[ir.Stmt], depth: int = 1) -> None:
        """A nested block; the enclosing statement's next line of code re-states its #line."""
        line = self.statement_line
        self.depth += depth
        self.last_line = None
        self.block(stmts)
        self.depth -= depth
        self.last_line = None
        self.statement_line, self.mapped = line, False

    def loop_body(
        self, body: Sequence[ir.Stmt], step: list[ir.Stmt] | None, depth: int = 1
    ) -> None:
        self.loop_steps.append(step)
        self.nested(body, depth)
        self.loop_steps.pop()

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
            TEMPORARIES["dot"](self, e, None)
            return
        self.hoist_args(e)
        if e.op in TEMPORARIES:
            self.compute(e)

    def compute(self, e: Op, dst: str | None = None) -> None:
        """An op computed into a temporary (``dst``, or a generated name) of its own."""
        TEMPORARIES[e.op](self, e, dst)

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
            return cx.atom(e.type.scalar.literal(e.value))
        if isinstance(e, Var):
            if e.type.is_tile:
                return cx.atom(f"{e.name}[{self.index(e.layout)}]")
            return cx.atom(e.name)
        assert isinstance(e, Op), f"an expression node the emitter does not know: {e!r}"
        handler = EXPRESSIONS.get(e.op)
        if handler is not None:
            return handler(self, e)
        args = [self.expr(a) for a in e.args]
        if e.op == "add" and (e.type.is_pointer or (e.args and e.args[0].type.is_pointer)):
            return cx.binary("+", *args)
        op = OPS[e.op]
        return cx.op_text(op.cuda_format(e.type.dtype), op.symbol, args, ctype(e.type.dtype))

    def materialise(self, e: Expr, layout: Layout, dtype: DType | None = None) -> str:
        """A tile's registers in ``layout`` as a named array (a variable's own, or a new one)."""
        if (
            isinstance(e, Var)
            and e.type.is_tile
            and e.layout is not None
            and e.layout.key == layout.key
        ):
            return e.name
        temp = self.temps.get(id(e))
        if temp is not None and temp[1] is not None and temp[1].key == layout.key and not temp[2]:
            return temp[0]
        mask = isinstance(e.type.dtype, DType) and e.type.dtype.kind == "b" and dtype is None
        name = self.names.fresh("mask" if mask else "value")
        with self.registers_of(layout) as alias:
            self.emit("define_tile", ctype(dtype or e.type.dtype), name, alias, self.ex(e))
        return name
