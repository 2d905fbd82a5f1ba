"""pycparser AST of one kernel → the typed IR of one specialisation.

Input: a parsed :class:`~teeny_tx.parse.Unit`, the kernel's name and a :class:`Spec` (constexpr
values, pointer dtypes and alignments, integer arguments equal to 1 or divisible by 16,
``num_warps``, ``num_stages``, 32/64-bit indices). Output: an
``ir.Kernel`` whose every value has a dtype and a static shape, constexprs folded, helper
functions inlined, names made unique. Every error names the file, line and column.

Statements are visited by ``stmt_<Node>`` methods, expressions by ``expr_<Node>``; calls of
operations go to the op table's typing rule, or to ``call_<op>`` here when the op needs
constant arguments or the specialisation (``arange``, ``load``...).
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from pycparser import c_ast

from ..._prelude import FILES
from ...constants import CONSTANTS, ROUNDINGS
from ...dtypes import ACC, BOOL, DTYPES, F32, DType, acc_dtype
from ...errors import CompileError, Location
from ...parse import Unit, literals
from ...parse.reserved import RESERVED_NAMES
from ...parse.source import PRELUDE_NAME, prelude_text
from .. import ir
from ..ir import Const, Expr, Op, PointerType, Type, Var
from ..names import Names, is_generated
from ..ops import spellings
from ..ops import typing as ty
from ..ops.table import OPS, bitcast, make_cast_rtz
from .context import TupleValue
from .debug_ops import DebugOps
from .dot_ops import DotOps
from .memory_ops import MemoryOps
from .reduction_ops import TUPLE_HINT, ReductionOps
from .shape_ops import ShapeOps
from .signature import Spec, element_dtype, kernel_signature

_BINARY = {
    "+": "add",
    "-": "sub",
    "*": "mul",
    "/": "div",
    "%": "mod",
    "<<": "lshift",
    ">>": "rshift",
    "&": "bitand",
    "|": "bitor",
    "^": "bitxor",
    "<": "lt",
    "<=": "le",
    ">": "gt",
    ">=": "ge",
    "==": "eq",
    "!=": "ne",
    "&&": "land",
    "||": "lor",
}
_UNARY = {"-": "neg", "!": "lnot", "~": "invert"}
_FLOAT_CONSTANTS = {"INF": float("inf"), "NAN": float("nan")}

# Reserved names (C/C++/CUDA, the `tx_` prefix) never reach the builder: the parser refuses
# them (parse/reserved.py). Every generated name starts with GENERATED_PREFIX (lower/names.py).
_CUDA_NAMES = RESERVED_NAMES


# helpers inlined inside one another at most (each level takes Python frames in the builder
# and the passes: a chain of 200 was a RecursionError)
MAX_HELPER_DEPTH = 64


@dataclass
class Symbol:
    name: str  # the unique IR name
    type: Type
    typed: bool  # declared with an explicit dtype: assignments convert to it
    const: Const | None = None  # compile-time constants (const parameters and locals)
    loop_depth: int = 0
    parts: tuple[Symbol, ...] | None = None  # a tuple variable: one symbol per item


@dataclass
class _Frame:
    """A function being lowered: the kernel itself, or an inlined helper."""

    name: str
    scopes: list[dict[str, Symbol]] = field(default_factory=lambda: [{}])


class Builder(MemoryOps, ShapeOps, ReductionOps, DotOps, DebugOps):
    def __init__(self, unit: Unit, kernel: str, spec: Spec):
        self.unit = unit
        self.fn = unit.functions[kernel]
        self.spec = spec
        self.index = ty.index_dtype(spec.index64)
        self.frames = [_Frame(kernel)]
        self.blocks: list[list[ir.Stmt]] = [[]]
        self.loop_depth = 0
        self.used_names: set[str] = set()
        self.names = Names()  # renamed locals: shadowed names, inlined helpers' locals
        self.inlining: list[str] = []
        self.acc = F32  # what `acc_t` names: set from the pointer arguments by build()
        # `#pragma unroll N` / `#pragma num_stages N` waiting for the loop they precede
        self.loop_pragmas: dict[str, int] = {}
        self.pragma_loc: Location | None = None

    # ------------------------------------------------------------ entry

    def build(self) -> ir.Kernel:
        loc = self.loc(self.fn.decl)
        constexprs = dict(self.spec.constexprs)
        pointer_dtypes = dict(self.spec.pointer_dtypes)
        align = dict(self.spec.align)
        assigned = _assigned_names(self.fn.body)
        params = []
        signature = kernel_signature(self.unit, self.fn)
        self.acc = acc_dtype(
            p.dtype or pointer_dtypes[p.name] for p in signature if p.kind == "pointer"
        )
        for p in signature:
            if p.kind == "constexpr":
                if p.name not in constexprs:
                    raise CompileError(
                        f"constexpr parameter '{p.name}' has no value",
                        p.loc,
                        f"pass it by keyword at launch, e.g. {p.name}=...",
                    )
                t = Type(self.value_dtype(p.scalar))
                value = ty.convert_value(constexprs[p.name], t.scalar)
                cuda_name = self.unique(p.name)
                const = Const(type=t, loc=p.loc, value=value, weak=True, name=cuda_name)
                self.declare_symbol(p.name, t, typed=True, const=const, exact=cuda_name)
                params.append(ir.Param(cuda_name, t, constexpr=True, source_name=p.name))
            elif p.kind == "pointer":
                elem = p.dtype or pointer_dtypes[p.name]
                t = Type(PointerType(elem, p.const))
                sym = self.declare_symbol(p.name, t, typed=True)
                params.append(
                    ir.Param(
                        sym.name, t, align=align.get(p.name, elem.itemsize), source_name=p.name
                    )
                )
            else:
                t = Type(self.value_dtype(p.scalar))
                # An integer argument equal to 1 (Triton's specialisation) reads as the constant
                # 1 of the parameter's dtype, unless the kernel assigns the parameter; it stays
                # in the CUDA signature, so launches pass the same values.
                one = p.name in self.spec.ones and p.name not in assigned
                as_one = Const(type=t, loc=p.loc, value=1) if one else None
                sym = self.declare_symbol(p.name, t, typed=True, const=as_one)
                params.append(
                    ir.Param(
                        sym.name,
                        t,
                        div16=p.name in self.spec.div16,
                        equal_to_1=one,
                        source_name=p.name,
                    )
                )
        self.stmt(self.fn.body, new_scope=False)
        return ir.Kernel(
            name=self.fn.decl.name,
            file=loc.file,
            params=tuple(params),
            body=tuple(self.blocks[0]),
            constexprs=tuple(sorted(constexprs.items())),
            num_warps=self.spec.num_warps,
            num_stages=self.spec.num_stages,
            index64=self.spec.index64,
        )

    # ------------------------------------------------------------ helpers

    def loc(self, node) -> Location:
        return _prelude_file_loc(self.unit.loc(node.coord if hasattr(node, "coord") else node))

    def value_dtype(self, dtype: DType) -> DType:
        """`i32` in value positions is the specialisation's index type."""
        return self.index if dtype.name == "i32" else dtype

    def emit(self, s: ir.Stmt) -> None:
        self.blocks[-1].append(s)

    @contextmanager
    def block(self):
        self.blocks.append([])
        self.frames[-1].scopes.append({})
        try:
            yield self.blocks[-1]
        finally:
            self.blocks.pop()
            self.frames[-1].scopes.pop()

    def unique(self, name: str) -> str:
        """``name`` itself while no other variable has it, else a generated name for it."""
        if name in self.used_names or _reserved(name):
            name = self.names.fresh(name)
        self.used_names.add(name)
        return name

    def declare_symbol(
        self, name: str, t: Type, typed: bool, const: Const | None = None, exact: str | None = None
    ) -> Symbol:
        """A new variable in the innermost scope; its IR name is made unique (a parameter
        shadowing another, or an inlined helper's local, gets a generated name) unless
        ``exact`` gives it."""
        if exact:
            self.used_names.add(exact)
            unique = exact
        else:
            unique = (
                self.names.fresh("_".join(self.inlining + [name]))
                if self.inlining
                else self.unique(name)
            )
            self.used_names.add(unique)
        sym = Symbol(unique, t, typed, const, self.loop_depth)
        self.frames[-1].scopes[-1][name] = sym
        return sym

    def lookup(self, name: str) -> Symbol | None:
        for scope in reversed(self.frames[-1].scopes):
            if name in scope:
                return scope[name]
        return None

    def visible_names(self) -> list[str]:
        """What an identifier may name here: the variables in scope and the constants."""
        names = [n for scope in self.frames[-1].scopes for n in scope]
        return names + list(CONSTANTS) + list(_FLOAT_CONSTANTS)

    def operation_names(self) -> list[str]:
        """What a call may name: the operations and the helper functions (kernels are not
        called)."""
        kernels = set(self.unit.kernels())
        helpers = [n for n in self.unit.functions if n not in kernels]
        return [n for n, op in OPS.items() if op.prelude] + helpers

    def unknown(self, name: str, loc: Location, what: str = "identifier") -> CompileError:
        """An unknown name: Triton's name of an operation says how it is written here; else the
        nearest name of the same kind (an operation for a call, a variable for a value)."""
        if what == "operation":
            answer = spellings.answer(name)
            if answer is not None:
                return CompileError(f"unknown operation '{name}'", loc, answer)
        names = self.operation_names() if what == "operation" else self.visible_names()
        close = difflib.get_close_matches(name, names, n=1)
        hint = f"did you mean '{close[0]}'?" if close else None
        return CompileError(f"unknown {what} '{name}'", loc, hint)

    def constant(self, node, what: str, integer: bool = True) -> Any:
        """The value of a compile-time constant argument: an integer (or truth value) unless
        ``integer`` is False. A float where an integer belongs (``program_id(1.0)``) is
        refused here, for every op that takes constant arguments."""
        value = self.expr(node)
        if not isinstance(value, Const):
            raise CompileError(
                f"{what} must be a compile-time constant",
                self.loc(node),
                "use literals and `const` parameters (constexprs) here",
            )
        if integer and not isinstance(value.value, int):
            raise CompileError(
                f"{what} must be an integer constant, got {value.type.dtype} {value.value!r}",
                self.loc(node),
                "write an integer literal or an integer `const` parameter",
            )
        return value.value

    def resolve_type(self, node, loc: Location) -> tuple[Type | None, bool]:
        """A declared type: (Type, typed) — Type is None for `tile` (inferred)."""
        dims = []
        while isinstance(node, c_ast.ArrayDecl):
            if node.dim is None:
                raise CompileError("a tile declaration needs its shape, e.g. f32 x[BLOCK]", loc)
            dims.append(node.dim)
            node = node.type
        if isinstance(node, c_ast.PtrDecl):
            name, quals = self.type_name(node.type, loc)
            return Type(PointerType(self.element(name, loc), "const" in quals)), True
        name, _ = self.type_name(node, loc)
        if name == "tile":
            if dims:
                raise CompileError(
                    "`tile` infers its shape; write a dtype to declare one, e.g. f32 x[N]", loc
                )
            return None, False
        dtype = self.element(name, loc)
        shape = []
        for d in dims:
            n = self.constant(d, "a tile dimension")
            if not isinstance(n, int) or n <= 0 or n & (n - 1):
                raise CompileError(
                    f"tile dimensions must be positive powers of two, got {n}", self.loc(d)
                )
            shape.append(n)
        return Type(self.value_dtype(dtype), tuple(shape)), True

    def element(self, name: str, loc: Location) -> DType:
        """The element type ``name`` declares: ``acc_t`` is this specialisation's compute
        type (dtypes.acc_dtype), any other name the dtype of that name."""
        return self.acc if name == ACC else element_dtype(name, loc)

    def type_name(self, node, loc: Location) -> tuple[str, list[str]]:
        names = getattr(getattr(node, "type", None), "names", None)
        if not isinstance(node, c_ast.TypeDecl) or not names:
            raise CompileError("unsupported declaration", loc)
        return " ".join(names), list(node.quals)

    # ------------------------------------------------------------ statements

    def stmt(self, node, new_scope: bool = True) -> None:
        if self.loop_pragmas and not isinstance(
            node, (c_ast.Pragma, c_ast.For, c_ast.While, c_ast.DoWhile)
        ):
            self.stray_pragma()
        if isinstance(node, c_ast.Compound):
            if new_scope:
                with self.block() as body:
                    self._items(node)
                self.emit_block(body, node)
            else:
                self._items(node)
            return
        method = getattr(self, f"stmt_{type(node).__name__}", None)
        if method is None:
            raise CompileError(f"unsupported statement ({type(node).__name__})", self.loc(node))
        method(node)

    def emit_block(self, body: list[ir.Stmt], node) -> None:
        """A nested `{ ... }`: its statements join the enclosing block (names are unique)."""
        for s in body:
            self.emit(s)

    def _items(self, node: c_ast.Compound) -> None:
        for item in node.block_items or []:
            self.stmt(item)
        if self.loop_pragmas:
            self.stray_pragma()

    _LOOP_PRAGMAS = ("unroll", "num_stages")

    def stmt_Pragma(self, node: c_ast.Pragma) -> None:
        """``#pragma unroll N`` and ``#pragma num_stages N`` (``_Pragma("unroll 4")``) before a
        loop: its unroll factor and its software pipeline's stages (tl.range's options)."""
        loc = self.loc(node)
        text = node.string
        if isinstance(text, c_ast.Constant):
            text = literals.string(text.value, loc)
        words = str(text).split()
        usage = "`#pragma unroll N` or `#pragma num_stages N` directly before a loop"
        if not words or words[0] not in self._LOOP_PRAGMAS:
            raise CompileError(f"unknown pragma '{str(text).strip()}' in a kernel", loc, usage)
        if len(words) != 2:
            raise CompileError(f"#pragma {words[0]} takes one number", loc, usage)
        value = None
        if words[1].isdigit():
            value = int(words[1])
        else:
            sym = self.lookup(words[1])
            if sym is not None and sym.const is not None and isinstance(sym.const.value, int):
                value = int(sym.const.value)
        if value is None or value < 1:
            raise CompileError(
                f"#pragma {words[0]} takes a positive integer or an integer constexpr, "
                f"got '{words[1]}'",
                loc,
                usage,
            )
        if words[0] in self.loop_pragmas:
            raise CompileError(
                f"#pragma {words[0]} given twice for one loop", loc, "keep the one you mean"
            )
        self.loop_pragmas[words[0]] = value
        self.pragma_loc = loc

    def stray_pragma(self) -> None:
        names = " and ".join(f"#pragma {k}" for k in self.loop_pragmas)
        self.loop_pragmas = {}
        raise CompileError(
            f"{names} must directly precede a loop",
            self.pragma_loc,
            "write it on the line before `for`, `while` or `do`",
        )

    def stmt_EmptyStatement(self, node) -> None:
        pass

    def stmt_DeclList(self, node) -> None:
        for d in node.decls:
            self.stmt_Decl(d)

    def stmt_Decl(self, node: c_ast.Decl) -> None:
        loc = self.loc(node)
        if isinstance(node.type, c_ast.FuncDecl):
            raise CompileError("functions are declared at the top level", loc)
        if node.name in self.frames[-1].scopes[-1]:
            raise CompileError(
                f"'{node.name}' is already declared in this scope",
                loc,
                "assign to it, or declare the new variable in an inner block",
            )
        declared, typed = self.resolve_type(node.type, loc)
        is_const = (
            "const" in node.quals
            and declared is not None
            and not declared.is_tile
            and not declared.is_pointer
        )
        if isinstance(node.init, c_ast.InitList):
            raise CompileError(
                "initializer lists are not supported", loc, "declare a filled tile: f32 x[N] = 0;"
            )
        init = self.value(node.init) if node.init is not None and declared is None else None
        if isinstance(init, TupleValue):
            self.declare_tuple(node.name, init, loc)
            return
        if node.init is not None and declared is not None:
            init = self.expr(node.init)
        if declared is None:
            if init is None:
                raise CompileError(
                    f"`tile {node.name}` needs an initial value to infer its type", loc
                )
            if ty.is_weak(init):
                init = ty.cast(init, ty.weak_literal_type(init.value))
            t = init.type
        else:
            t = declared
            init = self.convert(init, t, node.name, loc) if init is not None else self.zero(t, loc)
        if is_const:
            if not isinstance(init, Const):
                raise CompileError(f"const '{node.name}' must be initialised with a constant", loc)
            self.declare_symbol(
                node.name, t, typed, const=Const(type=t, loc=loc, value=init.value, weak=True)
            )
            return
        sym = self.declare_symbol(node.name, t, typed)
        self.emit(ir.Declare(loc=loc, name=sym.name, type=t, init=init))

    def zero(self, t: Type, loc: Location) -> Expr:
        if t.is_pointer:
            raise CompileError("a pointer variable needs an initial value", loc)
        return self.convert(Const(type=Type(t.dtype), loc=loc, value=0), t, "", loc)

    def convert(self, value: Expr, t: Type, name: str, loc: Location) -> Expr:
        """A value as a variable of type ``t`` holds it: dtype converted, a scalar filled."""
        if t.is_pointer:
            if value.type.dtype != t.dtype:
                raise CompileError(
                    f"cannot assign {value.type} to pointer '{name}' of type {t}", loc
                )
        else:
            if value.type.is_pointer:
                raise CompileError(f"cannot assign a pointer to '{name}' of type {t}", loc)
            value = ty.cast(value, t.scalar)
        if value.type.shape == t.shape:
            return value
        if not value.type.is_tile:
            return Op(type=t, loc=loc, op="full", args=(value,))
        raise CompileError(
            f"shape mismatch: '{name}' is {list(t.shape)} "
            f"but the value is {list(value.type.shape)}",
            loc,
            "a declared tile keeps its shape; reshape or broadcast the value",
        )

    def stmt_Assignment(self, node: c_ast.Assignment) -> None:
        loc = self.loc(node)
        if not isinstance(node.lvalue, c_ast.ID):
            raise CompileError(
                "only whole variables can be assigned",
                self.loc(node.lvalue),
                "tiles are whole-block values: use where() to change some lanes",
            )
        name = node.lvalue.name
        sym = self.lookup(name)
        if sym is None:
            raise self.unknown(name, self.loc(node.lvalue))
        if sym.const is not None:
            raise CompileError(f"'{name}' is a constant and cannot be assigned", loc)
        if sym.parts is not None:
            self.assign_tuple(sym, name, node, loc)
            return
        value = self.expr(node.rvalue)
        if node.op != "=":
            current = Var(type=sym.type, loc=loc, name=sym.name)
            value = self.apply(_BINARY[node.op[:-1]], [current, value], loc)
        self.assign(sym, name, value, loc)

    def assign(self, sym: Symbol, name: str, value: Expr, loc: Location) -> None:
        carried = sym.loop_depth < self.loop_depth
        if not sym.typed:
            # a pointer variable takes only pointers of its type: convert() says so below
            if ty.is_weak(value) and not sym.type.is_pointer:
                value = ty.cast(value, sym.type.scalar)
            if value.type.is_tile and value.type.shape != sym.type.shape:
                what = "is carried around the loop and " if carried else ""
                raise CompileError(
                    f"tile '{name}' {what}changes shape "
                    f"from {list(sym.type.shape)} to {list(value.type.shape)}",
                    loc,
                    "a variable keeps the shape it was declared with; use a new variable",
                )
            if value.type.dtype != sym.type.dtype and not sym.type.is_pointer:
                what = "is carried around the loop and " if carried else ""
                raise CompileError(
                    f"tile '{name}' {what}changes dtype "
                    f"from {sym.type.dtype} to {value.type.dtype}",
                    loc,
                    f"cast the value: {name} = ({sym.type.dtype})(...)",
                )
        value = self.convert(value, sym.type, name, loc)
        self.emit(ir.Assign(loc=loc, name=sym.name, value=value))

    def stmt_UnaryOp(self, node: c_ast.UnaryOp) -> None:
        if node.op in ("p++", "++", "p--", "--") and isinstance(node.expr, c_ast.ID):
            one = c_ast.Constant("int", "1", node.coord)
            op = "+=" if "+" in node.op else "-="
            self.stmt_Assignment(c_ast.Assignment(op, node.expr, one, node.coord))
            return
        raise CompileError("this expression has no effect", self.loc(node))

    def stmt_FuncCall(self, node: c_ast.FuncCall) -> None:
        name = node.name.name if isinstance(node.name, c_ast.ID) else None
        if name in (
            "static_assert",
            "static_print",
            "device_print",
            "device_assert",
            "debug_barrier",
            "assume",
        ):
            result = self.expr_FuncCall(node, statement=True)
            if isinstance(result, Expr):
                self.emit(ir.Eval(loc=self.loc(node), expr=result))
            return
        if name == "store" or name in self.unit.functions or (name or "").startswith("atomic_"):
            result = self.expr_FuncCall(node, statement=True)
            if result is not None and isinstance(result, Op) and result.op in ("store", "atomic"):
                self.emit(ir.Eval(loc=self.loc(node), expr=result))
            return
        op = OPS.get(name or "")
        if name is not None and (op is None or not op.prelude):
            raise self.unknown(name, self.loc(node.name), "operation")
        if name is None:
            self.expr_FuncCall(node, statement=True)  # says what is wrong with the callee
        raise CompileError(
            f"the value of {name}(...) is not used", self.loc(node), "assign it to a variable"
        )

    def stmt_If(self, node: c_ast.If) -> None:
        loc = self.loc(node)
        cond = self.scalar_condition(node.cond)
        if isinstance(cond, Const):
            taken = node.iftrue if cond.value else node.iffalse
            if taken is not None:
                with self.block() as body:
                    self.stmt(taken, new_scope=False)
                self.emit_block(body, taken)
            return
        with self.block() as then:
            self.stmt(node.iftrue, new_scope=False)
        orelse: list[ir.Stmt] = []
        if node.iffalse is not None:
            with self.block() as orelse:
                self.stmt(node.iffalse, new_scope=False)
        self.emit(ir.If(loc=loc, cond=cond, then=tuple(then), orelse=tuple(orelse)))

    def scalar_condition(self, node) -> Expr:
        cond = self.expr(node)
        if cond.type.is_tile:
            raise CompileError(
                f"a condition must be a scalar, got a tile {cond.type}",
                self.loc(node),
                "branch on scalars; select lanes of a tile with where() or a mask",
            )
        return ty.to_bool(cond, self.loc(node))

    def stmt_For(self, node: c_ast.For) -> None:
        self._loop("for", node, node.init, node.cond, node.next, node.stmt)

    def stmt_While(self, node: c_ast.While) -> None:
        self._loop("while", node, None, node.cond, None, node.stmt)

    def stmt_DoWhile(self, node: c_ast.DoWhile) -> None:
        self._loop("do", node, None, node.cond, None, node.stmt)

    def _loop(self, kind, node, init_node, cond_node, next_node, body_node) -> None:
        loc = self.loc(node)
        pragmas, self.loop_pragmas = self.loop_pragmas, {}
        with self.block() as init:
            if init_node is not None:
                self.stmt(init_node)
            self.loop_depth += 1
            try:
                cond = self.scalar_condition(cond_node) if cond_node is not None else None
                with self.block() as step:
                    if next_node is not None:
                        self.stmt(next_node)
                with self.block() as body:
                    if body_node is not None:
                        self.stmt(body_node, new_scope=False)
            finally:
                self.loop_depth -= 1
        if isinstance(cond, Const) and not cond.value and kind != "do":
            for s in init:
                self.emit(s)
            return
        self.emit(
            ir.Loop(
                loc=loc,
                kind=kind,
                init=tuple(init),
                cond=cond,
                step=tuple(step),
                body=tuple(body),
                unroll=pragmas.get("unroll"),
                num_stages=pragmas.get("num_stages"),
            )
        )

    def stmt_Break(self, node) -> None:
        self._in_loop(node, "break")
        self.emit(ir.Break(loc=self.loc(node)))

    def stmt_Continue(self, node) -> None:
        self._in_loop(node, "continue")
        self.emit(ir.Continue(loc=self.loc(node)))

    def _in_loop(self, node, what: str) -> None:
        if self.loop_depth == 0:
            raise CompileError(f"'{what}' outside a loop", self.loc(node))

    def stmt_Return(self, node: c_ast.Return) -> None:
        if self.inlining:
            raise CompileError(
                "a helper function may only return at its end",
                self.loc(node),
                "compute both results and select with where()",
            )
        if node.expr is not None:
            raise CompileError("a kernel returns nothing; write `return;`", self.loc(node))
        self.emit(ir.Return(loc=self.loc(node)))

    # ------------------------------------------------------------ expressions

    def expr(self, node) -> Expr:
        value = self.value(node)
        if isinstance(value, TupleValue):
            raise CompileError(
                f"a tuple of {len(value.items)} values is not a value here",
                self.loc(node),
                "declare it, `tile r = ...;`, and read its items r[0], r[1], ...",
            )
        return value

    def value(self, node) -> Expr | TupleValue:
        if isinstance(node, c_ast.ExprList):  # (a, b): a tuple
            items = tuple(self.expr(x) for x in node.exprs)
            return TupleValue(
                tuple(self._tuple_item(x, n) for x, n in zip(items, node.exprs, strict=True)),
                self.loc(node),
            )
        if isinstance(node, c_ast.ID):
            sym = self.lookup(node.name)
            if sym is not None and sym.parts is not None:
                loc = self.loc(node)
                return TupleValue(
                    tuple(Var(type=p.type, loc=loc, name=p.name) for p in sym.parts), loc
                )
        method = getattr(self, f"expr_{type(node).__name__}", None)
        if method is None:
            raise CompileError(f"unsupported expression ({type(node).__name__})", self.loc(node))
        return method(node)

    def _tuple_item(self, x: Expr, node) -> Expr:
        if x.type.is_pointer:
            raise CompileError(
                "a tuple holds numbers, not pointers",
                self.loc(node),
                "pass pointers as they are; a tuple carries the values of a reduction or scan",
            )
        return ty.cast(x, ty.weak_literal_type(x.value)) if ty.is_weak(x) else x

    def fresh(self, base: str) -> str:
        name = self.names.fresh(base)
        self.used_names.add(name)
        return name

    def declare_tuple(self, name: str, value: TupleValue, loc: Location) -> None:
        """``tile r = (a, b);`` (or a tuple a reduction or helper gives): one variable per item."""
        parts = []
        for k, item in enumerate(value.items):
            part = Symbol(self.fresh(f"{name}_{k}"), item.type, False, None, self.loop_depth)
            self.emit(ir.Declare(loc=loc, name=part.name, type=item.type, init=item))
            parts.append(part)
        self.frames[-1].scopes[-1][name] = Symbol(
            name, value.items[0].type, False, None, self.loop_depth, tuple(parts)
        )

    def assign_tuple(self, sym: Symbol, name: str, node: c_ast.Assignment, loc: Location) -> None:
        assert sym.parts is not None
        value = self.value(node.rvalue) if node.op == "=" else None
        if not isinstance(value, TupleValue) or len(value.items) != len(sym.parts):
            got = (
                f"a tuple of {len(value.items)}"
                if isinstance(value, TupleValue)
                else "one value"
                if node.op == "="
                else f"'{node.op}'"
            )
            raise CompileError(
                f"'{name}' is a tuple of {len(sym.parts)} values; it is assigned a tuple of "
                f"as many (got {got})",
                loc,
                "assign a tuple of as many values: "
                f"{name} = ({', '.join(f'{name}[{k}]' for k in range(len(sym.parts)))});",
            )
        for k, (part, item) in enumerate(zip(sym.parts, value.items, strict=True)):
            self.assign(part, f"{name}[{k}]", item, loc)

    def apply(self, name: str, args: list[Expr], loc: Location) -> Expr:
        """An op-table entry applied to typed operands, through its typing rule."""
        rule = OPS[name].rule
        assert rule is not None, f"{name} is typed by its builder method, not a rule"
        return rule(name, args, loc, self)

    def expr_Constant(self, node: c_ast.Constant) -> Expr:
        loc = self.loc(node)
        text = node.value
        if node.type == "string":
            raise CompileError("string literals are not supported here", loc)
        if node.type == "char" or "'" in text:
            value = literals.character(text, loc)
            return Const(type=Type(self.index), loc=loc, value=value, weak=True)
        if node.type in ("float", "double", "long double"):
            number = literals.floating(text, loc)
            return Const(type=Type(F32), loc=loc, value=number, weak=True)
        value, unsigned = literals.integer(text, loc)
        # C's rule for a hex or octal literal that int cannot hold: it is unsigned when
        # unsigned int (or, past i64, unsigned long long) holds it, so 0x9E3779B9 is a u32 and
        # hash arithmetic on an i32 tile stays 32-bit (unsigned), as in C
        based = text[:1] == "0" and len(text.rstrip("uUlL")) > 1
        if based and (2**31 <= value < 2**32 or value >= 2**63):
            unsigned = True
        if unsigned:
            return Const(
                type=Type(DTYPES["u64"] if value >= 2**32 else DTYPES["u32"]), loc=loc, value=value
            )
        if value >= 2**63:
            raise CompileError(
                f"integer literal '{text}' does not fit in i64",
                loc,
                f"write it unsigned, {text}u, or as a negative number",
            )
        return Const(type=Type(ty.weak_literal_type(value)), loc=loc, value=value, weak=True)

    def expr_ID(self, node: c_ast.ID) -> Expr:
        loc = self.loc(node)
        sym = self.lookup(node.name)
        if sym is not None:
            if sym.const is not None:
                return Const(
                    type=sym.const.type,
                    loc=loc,
                    value=sym.const.value,
                    weak=sym.const.weak,
                    name=sym.const.name,
                )
            return Var(type=sym.type, loc=loc, name=sym.name)
        if node.name in CONSTANTS:
            value = CONSTANTS[node.name].value
            return Const(type=Type(self.index), loc=loc, value=value, weak=True)
        if node.name in _FLOAT_CONSTANTS:
            return Const(type=Type(F32), loc=loc, value=_FLOAT_CONSTANTS[node.name], weak=True)
        if node.name in ("true", "false"):
            return Const(type=Type(BOOL), loc=loc, value=node.name == "true", weak=True)
        raise self.unknown(node.name, loc)

    def expr_BinaryOp(self, node: c_ast.BinaryOp) -> Expr:
        left, right = self.expr(node.left), self.expr(node.right)
        return self.apply(_BINARY[node.op], [left, right], self.loc(node))

    def expr_UnaryOp(self, node: c_ast.UnaryOp) -> Expr:
        loc = self.loc(node)
        if node.op in ("-", "!", "~", "*", "&", "++", "--"):
            loc = _prefix_loc(loc, node.op)
        if node.op == "+":
            return self.expr(node.expr)
        if node.op in _UNARY:
            return self.apply(_UNARY[node.op], [self.expr(node.expr)], loc)
        if node.op == "*":
            raise CompileError(
                "pointers are read with load(), not *",
                loc,
                "write load(p) or load(p + offsets, mask)",
            )
        if node.op == "&":
            raise CompileError("'&' (address-of) is not supported", loc)
        if node.op in ("p++", "++", "p--", "--"):
            raise CompileError(
                "++/-- are statements here, not expressions", loc, "write x += 1; on its own line"
            )
        raise CompileError(f"unsupported operator '{node.op}'", loc)

    def expr_Cast(self, node: c_ast.Cast) -> Expr:
        loc = self.loc(node)
        target, _ = self.resolve_type(node.to_type.type, loc)
        value = self.expr(node.expr)
        if target is not None and target.is_pointer and not value.type.is_pointer:
            return self.int_to_ptr(value, target, loc)
        if value.type.is_pointer:
            raise CompileError(
                "pointers cannot be cast",
                loc,
                "a pointer's element type comes from the argument (`any *p`); "
                "bitcast(x, T) reinterprets numbers",
            )
        if target is None or target.is_tile or target.is_pointer:
            raise CompileError("casts convert to an element type, e.g. (f32)x", loc)
        result = ty.cast(value, target.scalar)
        if isinstance(result, Const):
            return Const(type=result.type, loc=loc, value=result.value, weak=False)
        return result

    def expr_TernaryOp(self, node: c_ast.TernaryOp) -> Expr:
        cond = self.expr(node.cond)
        if isinstance(cond, Const) and not cond.type.is_tile:
            return self.expr(node.iftrue if cond.value else node.iffalse)
        return self.apply(
            "where", [cond, self.expr(node.iftrue), self.expr(node.iffalse)], self.loc(node)
        )

    def int_to_ptr(self, value: Expr, target: Type, loc: Location) -> Expr:
        """``(T *)x``: an address (a 64-bit integer, scalar or tile) read as a pointer to T."""
        if isinstance(value, Const):
            raise CompileError(
                "a constant cannot become a pointer",
                loc,
                "addresses come from a table of pointers the host filled, e.g. "
                "(const f16 *)load(table + g)",
            )
        dtype = value.type.dtype
        if isinstance(dtype, PointerType) or dtype.kind not in "iu" or dtype.bits != 64:
            raise CompileError(
                "an address is a 64-bit integer: (T *)x takes an i64 or u64 value, "
                f"got {value.type}",
                loc,
                "load the address from an i64 (or u64) table the host filled, e.g. "
                "(const f16 *)load(table + g)",
            )
        return Op(type=target.with_shape(value.type.shape), loc=loc, op="int_to_ptr", args=(value,))

    def expr_Typename(self, node: c_ast.Typename) -> Expr:
        raise CompileError(
            "a type name is not a value here",
            self.loc(node),
            "types are arguments of bitcast(x, T) only; convert a value with a cast: (T)x",
        )

    def call_cast(self, args, loc: Location) -> Expr:
        """cast(x, T, rounding): the C cast (T)x, or with RTZ a float narrowed toward zero."""
        if not isinstance(args[1], c_ast.Typename):
            raise CompileError(
                "the second argument of cast() is a type name",
                self.loc(args[1]),
                "e.g. cast(x, f16), or the C cast (f16)x",
            )
        target, _ = self.resolve_type(args[1].type, self.loc(args[1]))
        if target is None or target.is_tile or target.is_pointer:
            raise CompileError("cast() converts to an element type, e.g. f16", self.loc(args[1]))
        value = self.expr(args[0])
        if value.type.is_pointer:
            raise CompileError("pointers cannot be cast", self.loc(args[0]))
        rounding = self.constant(args[2], "the rounding of cast()") if len(args) > 2 else None
        roundings = {c.value: c.name for c in ROUNDINGS}
        if rounding is not None and rounding not in roundings:
            raise CompileError(
                f"the rounding of cast() is {' or '.join(roundings.values())}",
                self.loc(args[2]),
                "e.g. cast(x, f16, RTZ): toward zero",
            )
        to = target.scalar
        if rounding is None or roundings[rounding] == "RTNE":
            return ty.cast(value, to)
        src = value.type.scalar
        if ty.is_weak(value):
            src = ty.weak_literal_type(value.value)
            value = ty.cast(value, src)
        if not (src.is_float and to.is_float and to.bits < src.bits):
            raise CompileError(
                f"RTZ rounds a float narrowed to a narrower float, not {src} to {to}",
                self.loc(args[2]),
                f"cast(x, {to}) converts without a rounding mode",
            )
        return make_cast_rtz(value, to, loc)

    def call_bitcast(self, args, loc: Location) -> Expr:
        if not isinstance(args[1], c_ast.Typename):
            raise CompileError(
                "the second argument of bitcast() is a type name",
                self.loc(args[1]),
                "e.g. bitcast(x, u32)",
            )
        target, _ = self.resolve_type(args[1].type, self.loc(args[1]))
        if target is None or target.is_tile or target.is_pointer:
            raise CompileError("bitcast() converts to an element type, e.g. u32", self.loc(args[1]))
        return bitcast(self.expr(args[0]), target.scalar, loc)

    def expr_ArrayRef(self, node) -> Expr:
        if isinstance(node.name, c_ast.ID):
            sym = self.lookup(node.name.name)
            if sym is not None and sym.parts is not None:  # r[k]: item k of a tuple
                k = self.constant(node.subscript, "a tuple's index")
                items = ", ".join(f"{node.name.name}[{j}]" for j in range(len(sym.parts)))
                if not 0 <= k < len(sym.parts):
                    raise CompileError(
                        f"'{node.name.name}' holds {len(sym.parts)} values: index 0 to "
                        f"{len(sym.parts) - 1}, got {k}",
                        self.loc(node.subscript),
                        f"its items are {items}",
                    )
                part = sym.parts[k]
                return Var(type=part.type, loc=self.loc(node), name=part.name)
        base = self.expr(node.name)
        if base.type.is_pointer:  # p[i]: C's *(p + i), an unmasked load
            ptr = self.apply("add", [base, self.expr(node.subscript)], self.loc(node))
            elem = ptr.type.pointer.elem
            return Op(
                type=Type(elem, ptr.type.shape),
                loc=self.loc(node),
                op="load",
                args=(ptr,),
                attrs=(("masked", False),),
            )
        raise CompileError(
            "tiles are whole-block values and cannot be indexed",
            self.loc(node),
            "select lanes with masks and where(); read memory with load(p + offsets)",
        )

    def expr_Assignment(self, node) -> Expr:
        raise CompileError("assignments are statements here, not expressions", self.loc(node))

    def expr_FuncCall(
        self, node: c_ast.FuncCall, statement: bool = False
    ) -> Expr | TupleValue | None:
        loc = self.loc(node)
        if not isinstance(node.name, c_ast.ID):
            hint = None
            if isinstance(node.name, c_ast.StructRef) and isinstance(node.name.field, c_ast.ID):
                hint = f"operations are called by name alone: write {node.name.field.name}(...)"
            raise CompileError("only named functions can be called", loc, hint)
        name = node.name.name
        arg_nodes = node.args.exprs if node.args is not None else []
        if name in self.unit.functions:
            return self.inline(name, arg_nodes, loc, statement)
        op = OPS.get(name)
        if op is None or not op.prelude:
            raise self.unknown(name, self.loc(node.name), "operation")
        lo, hi = op.arity
        if not lo <= len(arg_nodes) <= hi:
            expect = str(lo) if lo == hi else f"{lo} to {hi}"
            hint = op.doc
            if name in ("associative_scan", "reduce") and len(arg_nodes) > hi:
                hint = f"several tiles are one argument, a tuple: {TUPLE_HINT}"
            raise CompileError(
                f"{name}() takes {expect} argument{'s' if hi != 1 else ''}, got {len(arg_nodes)}",
                loc,
                hint,
            )
        if op.builder_method is not None:  # typed here, from the argument nodes
            return getattr(self, op.builder_method)(arg_nodes, loc)
        return self.apply(name, [self.expr(a) for a in arg_nodes], loc)

    # ------------------------------------------------------------ structural ops

    def call_program_id(self, args, loc: Location) -> Expr:
        return self._grid_query("program_id", args, loc)

    def call_num_programs(self, args, loc: Location) -> Expr:
        return self._grid_query("num_programs", args, loc)

    def _grid_query(self, name: str, args, loc: Location) -> Expr:
        axis = self.constant(args[0], f"the axis of {name}()")
        if axis not in (0, 1, 2):
            raise CompileError(f"{name}() axis must be 0, 1 or 2, got {axis}", self.loc(args[0]))
        return Op(type=Type(self.index), loc=loc, op=name, attrs=(("axis", axis),))

    def call_arange(self, args, loc: Location) -> Expr:
        start = self.constant(args[0], "the start of arange()")
        end = self.constant(args[1], "the end of arange()")
        n = end - start
        if not isinstance(start, int) or not isinstance(end, int) or n <= 0 or n & (n - 1):
            raise CompileError(
                f"arange({start}, {end}) must span a positive power of two, got {n} elements",
                loc,
                "pad the range to a power of two and mask the extra lanes",
            )
        return Op(
            type=Type(self.index, (n,)),
            loc=loc,
            op="arange",
            attrs=(("start", start), ("end", end)),
        )

    # ------------------------------------------------------------ helper functions

    def inline(
        self, name: str, arg_nodes, loc: Location, statement: bool
    ) -> Expr | TupleValue | None:
        """Inline a helper: parameters bound to the arguments, its statements emitted here,
        and the expression of its final `return` returned as the call's value."""
        if name in self.inlining:
            raise CompileError(f"helper '{name}' calls itself; recursion is not supported", loc)
        if len(self.inlining) >= MAX_HELPER_DEPTH:
            chain = " -> ".join([*self.inlining[:3], "...", *self.inlining[-2:], name])
            raise CompileError(
                f"helper calls nest more than {MAX_HELPER_DEPTH} deep ({chain})",
                loc,
                "call the helpers one after another, or merge some of them",
            )
        fn = self.unit.functions[name]
        params = fn.decl.type.args.params if fn.decl.type.args else []
        params = [p for p in params if not isinstance(p, c_ast.Typename)]
        if len(params) != len(arg_nodes):
            s = "" if len(params) == 1 else "s"
            got = len(arg_nodes)
            raise CompileError(f"{name}() takes {len(params)} argument{s}, got {got}", loc)
        args = [a if isinstance(a, Expr) else self.expr(a) for a in arg_nodes]
        items = list(fn.body.block_items or [])
        ret = items.pop() if items and isinstance(items[-1], c_ast.Return) else None
        returns_void = _return_type_name(fn) in ("void", "kernel")
        if _return_type_name(fn) == "kernel":
            raise CompileError(f"'{name}' is a kernel and cannot be called", loc)
        if ret is None and not returns_void:
            raise CompileError(
                f"helper '{name}' must end with `return <value>;`", self.loc(fn.decl)
            )
        assigned = _assigned_names(fn.body)
        self.frames.append(_Frame(name))
        self.inlining.append(name)
        try:
            for p, a in zip(params, args, strict=True):
                ploc = self.loc(p)
                declared, typed = self.resolve_type(p.type, ploc)
                value = a if declared is None else self.convert(a, declared, p.name, ploc)
                # C passes by value: only a parameter the helper assigns needs a copy
                if p.name not in assigned:
                    if ty.is_weak(value):
                        self.declare_symbol(p.name, value.type, typed=False, const=value)
                        continue
                    if isinstance(value, Const):  # a typed constant (a kernel parameter
                        # specialised as 1) stays one, so the helper's loads keep its facts
                        self.declare_symbol(p.name, value.type, typed, const=value)
                        continue
                    if isinstance(value, Var):  # alias the caller's variable
                        alias = Symbol(value.name, value.type, typed, None, self.loop_depth)
                        self.frames[-1].scopes[-1][p.name] = alias
                        continue
                elif declared is None and ty.is_weak(value):
                    value = ty.cast(value, ty.weak_literal_type(value.value))
                sym = self.declare_symbol(p.name, value.type, typed)
                self.emit(ir.Declare(loc=ploc, name=sym.name, type=value.type, init=value))
            for item in items:
                self.stmt(item)
            result = self.value(ret.expr) if ret is not None and ret.expr is not None else None
        finally:
            self.inlining.pop()
            self.frames.pop()
        if result is None and not statement:
            raise CompileError(f"helper '{name}' returns no value", loc)
        return result


@functools.cache
def _prelude_starts() -> tuple[tuple[int, str], ...]:
    """(first line in the joined prelude text, file name) of each prelude ``.h``, last first."""
    text = prelude_text()
    headers = [(name, body) for name, body in FILES.items() if name.endswith(".h")]
    return tuple(
        sorted(((text.count("\n", 0, text.find(b)) + 1, n) for n, b in headers), reverse=True)
    )


def _prelude_file_loc(loc: Location) -> Location:
    """A location in the joined prelude text as one in its own file (``prelude/matmul.h:20``,
    with the line's text), so errors and ``#line`` directives in prelude helpers name their
    file and stay put when another prelude file grows."""
    if loc.file != PRELUDE_NAME:
        return loc
    for start, name in _prelude_starts():
        if loc.line >= start:
            line = loc.line - start + 1
            lines = FILES[name].split("\n")
            text = lines[line - 1] if line <= len(lines) else None
            return Location(f"prelude/{name}", line, loc.col, text)
    return loc


def _reserved(name: str) -> bool:
    return name in _CUDA_NAMES or is_generated(name)


def _prefix_loc(loc: Location, symbol: str) -> Location:
    """pycparser places a prefix operator (``*p``, ``-x``) at its operand: point at the operator."""
    line = loc.source_line
    if line is None:
        return loc
    end = loc.col - 2  # the character before the operand
    while end >= 0 and line[end] in " \t(":
        end -= 1
    start = end - len(symbol) + 1
    if start >= 0 and line[start : end + 1] == symbol:
        return dataclasses.replace(loc, col=start + 1)
    return loc


def _assigned_names(body: c_ast.Node) -> set[str]:
    """Names a function body assigns (``x = ...``, ``x += ...``, ``x++``)."""
    names = set()
    for node in _walk(body):
        target = None
        if isinstance(node, c_ast.Assignment):
            target = node.lvalue
        elif isinstance(node, c_ast.UnaryOp) and node.op in ("p++", "++", "p--", "--"):
            target = node.expr
        if isinstance(target, c_ast.ID):
            names.add(target.name)
    return names


def _walk(node: c_ast.Node):
    yield node
    for _, child in node.children():
        yield from _walk(child)


def _return_type_name(fn: c_ast.FuncDef) -> str | None:
    t = fn.decl.type.type
    names = getattr(getattr(t, "type", None), "names", None)
    return names[0] if names else None


def build_kernel(unit: Unit, name: str, spec: Spec) -> ir.Kernel:
    return Builder(unit, name, spec).build()
