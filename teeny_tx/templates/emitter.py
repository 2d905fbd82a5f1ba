"""Decided IR → CUDA C++ text, through the Jinja2 templates beside this file.

Input: :class:`~teeny_tx.lower.passes.driver.Decided`: a kernel whose layouts, conversions and
software pipelines the lower passes chose, its layouts and the allocator of generated names.
Output: the kernel's CUDA source, deterministic for a given input, and the bytes of dynamic
shared memory it needs. The emitter decides nothing: the parameter list, shared-memory layout,
launch bounds and includes are the interface's (``lower/interface.py``); it walks the IR with
an :class:`~teeny_tx.templates.context.EmitContext`, dispatching each statement and op family
to a handler (a function of the context, ``emit_*.py``) that fills in a template macro
(``statements.cu.j2``, ``memory.cu.j2``, ``tiles.cu.j2``, ``dot.cu.j2``, ``debug.cu.j2``);
every line of CUDA comes from a macro or the kernel skeleton ``kernel.cu.j2``. Expressions are
C text from the op table, parenthesised by precedence (``expr.py``).

Extending it: a new op family is a new ``<family>.cu.j2`` beside this file (every macro of
every family is in one table; two families may not define the same name); a new decided IR
node (Hopper's TMA / warp-specialised mainloop, say) gets its handler through
:func:`register_statement`, a new op computed into a temporary through :func:`register_op`
(the tables of ``context.py``). This module renders the statements of ``statements.cu.j2`` and
the kernel skeleton.

Each DSL statement opens with the DSL line as a comment and one ``#line`` directive into the
kernel file. A ``#line`` numbers the lines after it consecutively, so a statement that takes
several lines of CUDA re-states it (``#line N``) before each further line of code; comments,
braces and plain declarations need none.
"""

from __future__ import annotations

from collections.abc import Callable

from ..errors import CompileError
from ..lower import ir
from ..lower.interface import Param, TensorMapParam, ValueParam, WorkspaceParam
from ..lower.ir import Op
from ..lower.names import REGISTER
from ..lower.ops.table import OPS
from ..lower.passes.convert import OWN_STATEMENT_OPS
from ..lower.passes.driver import Decided
from . import emit_debug, emit_dot, emit_memory, emit_tiles  # noqa: F401  (their handlers)
from . import expr as cx
from .context import (
    EFFECTS,
    HANDLERS,
    SKELETON,
    SKELETONS,
    STATEMENTS,
    EmitContext,
    effect,
    environment,
    expression,
    families,
    macros,
    statement,
    temporary,
)
from .cuda_types import ctype
from .emit_dot import warp_split, wgmma_function
from .emit_memory import emit_load

__all__ = [
    "HANDLERS",
    "SKELETON",
    "SKELETONS",
    "Emitter",
    "emit_cuda",
    "environment",
    "families",
    "line_origins",
    "macros",
    "register_op",
    "register_statement",
]

_STATEMENTS = STATEMENTS  # the statement handlers other modules register (see register_statement)


def register_statement(node: type) -> Callable:
    """Decorator: ``f(ctx, node)`` renders statements of type ``node``."""
    return statement(node)


def register_op(op: str) -> Callable:
    """Decorator: ``f(ctx, e, dst=None)`` computes op ``op`` into a temporary (``dst``, or
    a generated name) and records it in ``ctx.temps``."""
    return temporary(op)


# ---------------------------------------------------------------- statements


@statement(ir.Declare)
def stmt_declare(ctx: EmitContext, s: ir.Declare) -> None:
    if not s.type.is_tile:
        ctx.hoist(s.init)
        value = ctx.ex(s.init) if s.init is not None else None
        ctx.emit("declare_scalar", ctype(s.type.dtype), s.name, value)
        return
    init = s.init
    assert init is not None, "a tile declaration has a value"
    if (
        isinstance(init, Op)
        and init.op in OWN_STATEMENT_OPS
        and init.op != "dot"
        and init.layout is not None
        and init.layout.key == s.layout.key
    ):
        ctx.hoist_args(init)
        ctx.compute(init, s.name)
        if ctx.temps[id(init)][0] == s.name:
            return  # computed in place (an arg-reduction computes pairs first)
    ctx.hoist(init)
    with ctx.registers_of(s.layout) as name:
        value = ctx.ex(init)
    ctx.emit("define_tile", ctype(s.type.dtype), s.name, name, value)


@statement(ir.Assign)
def stmt_assign(ctx: EmitContext, s: ir.Assign) -> None:
    if not s.value.type.is_tile:
        ctx.hoist(s.value)
        ctx.emit("assign", s.name, ctx.ex(s.value))
        return
    value, layout = s.value, s.value.layout
    if isinstance(value, Op) and value.op == "load":
        ctx.hoist_args(value)
        emit_load(ctx, value, s.name)
        return
    ctx.hoist(value)
    with ctx.registers_of(layout) as name:
        ctx.emit("fill", name, s.name, ctx.ex(value))


@statement(ir.Eval)
def stmt_eval(ctx: EmitContext, s: ir.Eval) -> None:
    e = s.expr
    if isinstance(e, Op) and e.op in EFFECTS:
        EFFECTS[e.op](ctx, e)
    elif isinstance(e, Op) and OPS[e.op].elementwise:  # kept for its effect: debug_barrier
        ctx.emit("effect", ctx.ex(e))


@effect("atomic")
def hoist_atomic(ctx: EmitContext, e: Op) -> None:
    """An atomic whose old values nobody reads: computed as any temporary."""
    ctx.hoist(e)


@statement(ir.If)
def stmt_if(ctx: EmitContext, s: ir.If) -> None:
    ctx.hoist(s.cond)
    ctx.emit("if_open", ctx.ex(s.cond))
    ctx.nested(s.then)
    if s.orelse:
        ctx.emit("else_open")
        ctx.nested(s.orelse)
    ctx.emit("close")


@statement(ir.Staged)
def stmt_staged(ctx: EmitContext, s: ir.Staged) -> None:
    by = "TMA" if s.staged.tma is not None else "cp.async"
    ctx.emit("staged", s.name, ctx.pipeline_stage, by)


@statement(ir.Loop)
def stmt_loop(ctx: EmitContext, s: ir.Loop) -> None:
    if s.cond is not None and ctx.needs_hoist(s.cond):
        _loop_with_memory_condition(ctx, s)
        return
    cond = ctx.ex(s.cond) if s.cond is not None else ""
    if s.kind == "while":
        _unroll(ctx, s)
        ctx.emit("while_open", cond or "true")
        ctx.loop_body(s.body, None)
        ctx.emit("close")
        return
    if s.kind == "do":
        _unroll(ctx, s)
        ctx.emit("do_open")
        ctx.loop_body(s.body, None)
        ctx.emit("do_close", cond or "true")
        return
    simple_init = len(s.init) <= 1 and all(
        isinstance(i, ir.Declare) and not i.type.is_tile for i in s.init
    )
    simple_step = all(
        isinstance(t, ir.Assign) and not t.value.type.is_tile and not ctx.needs_hoist(t.value)
        for t in s.step
    )
    if simple_init and simple_step:
        init = None
        if s.init:
            d = s.init[0]
            assert isinstance(d, ir.Declare) and d.init is not None
            ctx.hoist(d.init)
            init = {"ctype": ctype(d.type.dtype), "name": d.name, "value": ctx.ex(d.init)}
        steps = [(t.name, ctx.ex(t.value)) for t in s.step if isinstance(t, ir.Assign)]
        _unroll(ctx, s)
        ctx.emit("for_open", init, cond, steps)
        ctx.loop_body(s.body, None)
        ctx.emit("close")
        return
    ctx.emit("open")
    ctx.depth += 1
    ctx.block(s.init)
    _unroll(ctx, s)
    ctx.emit("for_open", None, cond, [])
    ctx.loop_body(s.body, list(s.step))
    ctx.nested(s.step)
    ctx.emit("close")
    ctx.depth -= 1
    ctx.emit("close")


def _unroll(ctx: EmitContext, s: ir.Loop) -> None:
    """``#pragma unroll N`` right before the loop statement, where the kernel asked for one."""
    if s.unroll is not None:
        ctx.emit("unroll", s.unroll)


def _loop_with_memory_condition(ctx: EmitContext, s: ir.Loop) -> None:
    """A condition that loads or updates memory is evaluated at the top of every iteration."""
    assert s.cond is not None
    if s.kind == "do":
        raise CompileError(
            "a do-while condition cannot access memory yet",
            s.cond.loc,
            "write it as a while loop",
        )
    ctx.emit("open")
    ctx.depth += 1
    ctx.block(s.init)
    _unroll(ctx, s)
    ctx.emit("while_open", "true")
    ctx.depth += 1
    saved = dict(ctx.temps)
    ctx.hoist(s.cond)
    ctx.emit("exit_unless", ctx.expr(s.cond).at(cx.UNARY))
    ctx.temps = saved
    ctx.depth -= 1
    ctx.loop_body(s.body, list(s.step) or None)
    ctx.nested(s.step)
    ctx.emit("close")
    ctx.depth -= 1
    ctx.emit("close")


@statement(ir.Break)
def stmt_break(ctx: EmitContext, s: ir.Break) -> None:
    ctx.emit("jump", "break")


@statement(ir.Continue)
def stmt_continue(ctx: EmitContext, s: ir.Continue) -> None:
    step = ctx.loop_steps[-1] if ctx.loop_steps else None
    if step:
        ctx.emit("open")
        ctx.nested(step)
        ctx.depth += 1
        ctx.emit("jump", "continue")
        ctx.depth -= 1
        ctx.emit("close")
    else:
        ctx.emit("jump", "continue")


@statement(ir.Return)
def stmt_return(ctx: EmitContext, s: ir.Return) -> None:
    ctx.emit("jump", "return")


# ---------------------------------------------------------------- expressions


@expression("arange")
def ex_arange(ctx: EmitContext, e: Op) -> cx.Text:
    start = e.attr("start")
    assert ctx.loop is not None, "arange renders inside a tile loop"
    coord = cx.atom(f"{ctx.L(ctx.loop)}::coord({REGISTER}, {e.layout.dims[0]})")
    return coord if start == 0 else cx.binary("+", cx.atom(str(start)), coord)


@expression("full")
def ex_full(ctx: EmitContext, e: Op) -> cx.Text:
    return ctx.expr(e.args[0])


@expression("expand_dims")
def ex_expand_dims(ctx: EmitContext, e: Op) -> cx.Text:
    return ctx.expr(e.args[0])


@expression("broadcast")
def ex_broadcast(ctx: EmitContext, e: Op) -> cx.Text:
    return ctx.expr(e.args[0])


@expression("program_id")
def ex_program_id(ctx: EmitContext, e: Op) -> cx.Text:
    return cx.cast(ctype(e.type.dtype), cx.atom(f"blockIdx.{'xyz'[e.attr('axis')]}"))


@expression("num_programs")
def ex_num_programs(ctx: EmitContext, e: Op) -> cx.Text:
    return cx.cast(ctype(e.type.dtype), cx.atom(f"gridDim.{'xyz'[e.attr('axis')]}"))


# ---------------------------------------------------------------- the kernel


class Emitter(EmitContext):
    """The emit context of a whole kernel: its body, then the skeleton around it."""

    def render(self) -> str:
        k = self.kernel
        self.block(k.body)
        self.lines[:0] = warp_split(self)  # the roles' split, before every statement
        iface = self.interface
        params = [
            {
                "ctype": _param_ctype(p),
                "restrict": isinstance(p, ValueParam) and p.restrict,
                "name": p.name,
            }
            for p in iface.params
        ]
        constexprs = [
            {
                "ctype": ctype(p.type.dtype),
                "name": p.name,
                "value": p.type.scalar.literal(dict(k.constexprs)[p.source_name]),
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
            .get_template(SKELETON)
            .render(
                file=k.file,
                name=k.name,
                specialisation=describe_specialisation(k),
                threads=iface.block[0],
                min_blocks=iface.min_blocks,
                params=params,
                constexprs=constexprs,
                layouts=layouts,
                shared_bytes=iface.shared.scratch_bytes,
                pipeline_offset=iface.shared.pipeline_offset,
                includes=list(iface.includes),
                preamble=[wgmma_function(self, i) for i in iface.instructions],
                pipeline_bytes=iface.shared.pipeline_bytes,
                body=self.lines,
            )
        )


def _param_ctype(p: Param) -> str:
    if isinstance(p, TensorMapParam):
        return "const __grid_constant__ tx::hopper::TensorMap"
    if isinstance(p, WorkspaceParam):
        return "unsigned char*"
    return ctype(p.type.dtype)


def describe_specialisation(k: ir.Kernel) -> str:
    parts = []
    for p in k.params:
        if p.constexpr:
            parts.append(f"{p.name}={dict(k.constexprs)[p.source_name or p.name]}")
        elif isinstance(p.type.dtype, ir.PointerType):
            parts.append(f"{p.name}: {p.type.dtype.elem}* (align {p.align})")
        elif p.div16:
            parts.append(f"{p.name} % 16 == 0")
    parts.append(f"num_warps={k.num_warps}")
    if k.index64:
        parts.append("64-bit indices")
    return ", ".join(parts)


def emit_cuda(decided: Decided) -> tuple[str, int]:
    """The CUDA source of a decided kernel and the bytes of dynamic shared memory it needs
    (its interface's: ``decided.interface.shared``)."""
    return Emitter(decided).render(), decided.interface.shared_bytes


def line_origins(decided: Decided) -> dict[str, int]:
    """How many lines of ``decided``'s CUDA come from templates (macros and the kernel
    skeleton) and how many Python wrote itself: the measure that keeps text in templates."""
    emitter = Emitter(decided)
    total = len(emitter.render().splitlines())
    return {"template": total - emitter.python_lines, "python": emitter.python_lines}
