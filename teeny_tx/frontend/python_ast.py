"""A Python function in Triton's spelling -> this language's C text, statement by statement.

Input: a captured function (:func:`capture`: ``inspect`` source, dedented, parsed by ``ast``
with the file's line and column kept), the kinds of its parameters (:class:`Param`: pointer,
scalar, constexpr or a static value such as a string or None) and a :class:`Program` to write
into. Output: the C definition of the function on the Python lines it came from, and of every
``@jit`` helper it calls. What has no C spelling raises a located :class:`CompileError` at the
Python line and column, with the C spelling where there is one.

Decisions the C syntax needs and Python does not say:

- **declarations**: a first assignment declares (``tile x = ...;``; ``i32 x = ...;`` when the
  value is an index scalar: ``program_id``, ``i32`` parameters and arithmetic on them); an
  assignment to a name declared in the same block declares a new variable (``x_1``), as Python
  rebinds, so its dtype and shape may change; an assignment inside a nested block (a loop
  body, a branch) assigns the outer variable, which keeps its dtype and shape (C's rule, and
  Triton's for loop-carried values).
- **static values**: strings, None, dtypes and the module's constants are Python values at
  translation time: a condition on them (``if ACTIVATION == "leaky_relu":``) keeps only the
  branch taken; so does a condition on constexpr values when they are known (at a launch).
- **pointers** written through (``tl.store``, atomics, helpers) are ``any *``, the others
  ``const any *`` (read-only, ``__restrict__``).
"""

from __future__ import annotations

import ast
import inspect
import linecache
import math
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import CompileError, Location, TeenyError
from ..lower.ops import spellings
from . import builtins as B
from .program import Origin, Program

NO = object()  # "not a static value"
TO_METHOD = B.Builtin("to", "dtype, fp_downcast_rounding=None, bitcast=False")  # x.to(...)

# C precedence: higher binds tighter
PREC = {"?:": 3, "||": 4, "&&": 5, "|": 6, "^": 7, "&": 8, "==": 9, "!=": 9, "<": 10, "<=": 10}
PREC.update({">": 10, ">=": 10, "<<": 11, ">>": 11, "+": 12, "-": 12, "*": 13, "/": 13, "%": 13})
UNARY, POSTFIX, ATOM = 15, 16, 17

BINOPS = {
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.Div: "/",
    ast.FloorDiv: "/",
    ast.Mod: "%",
    ast.LShift: "<<",
    ast.RShift: ">>",
    ast.BitAnd: "&",
    ast.BitOr: "|",
    ast.BitXor: "^",
}
CMPOPS = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}
UNOPS = {ast.USub: "-", ast.UAdd: "+", ast.Not: "!", ast.Invert: "~"}
INDEX_OPS = {"+", "-", "*", "/", "%"}

PY_STATIC_OPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.FloorDiv: lambda a, b: a // b,
    ast.Mod: lambda a, b: a % b,
    ast.Eq: lambda a, b: a == b,
    ast.NotEq: lambda a, b: a != b,
    ast.Lt: lambda a, b: a < b,
    ast.LtE: lambda a, b: a <= b,
    ast.Gt: lambda a, b: a > b,
    ast.GtE: lambda a, b: a >= b,
    ast.Is: lambda a, b: a is b,
    ast.IsNot: lambda a, b: a is not b,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
    ast.BitAnd: lambda a, b: a & b,
    ast.BitOr: lambda a, b: a | b,
}


@dataclass
class FunctionSource:
    """A Python function's definition: its AST, and where its lines are in its file."""

    fn: Any
    filename: str
    tree: ast.FunctionDef
    first: int  # file line of the captured text's first line
    indent: int  # columns the dedent removed
    file_lines: list[str]

    def origin(self, node: ast.AST) -> Origin:
        line = getattr(node, "lineno", 1) + self.first - 1
        col = getattr(node, "col_offset", 0) + self.indent + 1
        text = self.file_lines[line - 1].rstrip("\n") if 0 < line <= len(self.file_lines) else None
        return Origin(self.filename, line, col, text)

    def error(self, node: ast.AST, message: str, hint: str | None = None) -> CompileError:
        o = self.origin(node)
        return CompileError(message, Location(o.file, o.line, o.col, o.text), hint)


def capture(fn: Any) -> FunctionSource:
    """The source of ``fn`` as ``inspect`` finds it, parsed; lines and columns in its file."""
    from ..errors import TeenyError

    try:
        lines, first = inspect.getsourcelines(fn)
        filename = inspect.getsourcefile(fn) or inspect.getfile(fn)
    except (OSError, TypeError) as exc:
        raise TeenyError(
            f"cannot read the source of {getattr(fn, '__name__', fn)!r}: {exc}; a @jit "
            "function must be defined in a file (not typed at an interactive prompt)"
        ) from None
    text = textwrap.dedent("".join(lines))
    indent = len(lines[0]) - len(lines[0].lstrip())
    tree = ast.parse(text)
    node = tree.body[0]
    if not isinstance(node, ast.FunctionDef):
        raise TeenyError(f"{fn!r} is not defined by a plain `def`")
    file_lines = linecache.getlines(filename) or lines
    return FunctionSource(fn, filename, node, max(first, 1), indent, file_lines)


@dataclass(frozen=True)
class Param:
    """How a parameter is passed: ``kind`` is pointer, scalar, constexpr or static; ``ctype``
    its C type name (``any``, ``i32``, ``f32``, ``bool``...); ``value`` a static or constexpr
    value when known; ``dtype`` a pointer's element type when known (``f16``)."""

    name: str
    kind: str
    ctype: str = "any"
    value: Any = NO
    dtype: str | None = None


@dataclass
class Var:
    cname: str
    kind: str  # "i32" (an index scalar) or "tile"
    frame: int


@dataclass
class Code:
    """Translated C text, its precedence, and whether it is an index scalar."""

    text: str
    prec: int = ATOM
    kind: str = "tile"  # "i32", "weak" (a constant) or "tile"


@dataclass
class Helpers:
    """The helpers a translation calls: name -> C name, translated once each."""

    done: dict[int, str] = field(default_factory=dict)  # id(JITFunction) -> C name
    queue: list[Any] = field(default_factory=list)


def is_jit(obj: Any) -> bool:
    return hasattr(obj, "_tx_source") and callable(getattr(obj, "_tx_source", None))


class Translator:
    """Writes one Python function into a :class:`Program` as a C kernel or helper."""

    def __init__(
        self,
        src: FunctionSource,
        params: list[Param],
        program: Program,
        helpers: Helpers,
        kernel: bool,
        offset: int = 0,
    ):
        self.src = src
        self.params = {p.name: p for p in params}
        self.program = program
        self.helpers = helpers
        self.kernel = kernel
        self.offset = offset  # C line = Python line + offset
        self.globals = dict(getattr(src.fn, "__globals__", {}))
        closure = inspect.getclosurevars(src.fn) if inspect.isfunction(src.fn) else None
        if closure is not None:
            self.globals.update(closure.nonlocals)
        self.vars: dict[str, Var] = {}
        self.scoped_out: dict[str, int] = {}  # name -> line of the block that declared it
        self.frames = [0]
        self.next_frame = 1
        self.used_names = {n.id for n in ast.walk(src.tree) if isinstance(n, ast.Name)}
        self.used_names |= {a.arg for a in src.tree.args.args}
        self.pending: list[str] = []  # declarations hoisted before the current statement
        self.line = 0  # the C line of the statement being written
        self.stmt: ast.AST = src.tree
        self.written = written_pointers(src.tree)

    # ------------------------------------------------------------------ output

    def put(self, node: ast.AST, text: str) -> None:
        origin = self.src.origin(node)
        self.line = origin.line + self.offset
        self.program.put(self.line, text, origin)

    def append(self, text: str) -> None:
        self.program.put(self.line, text, self.src.origin(self.stmt))

    def mark(self, node: ast.AST, code: Code) -> Code:
        return Code(self.program.mark(self.src.origin(node), code.text), code.prec, code.kind)

    def error(self, node: ast.AST, message: str, hint: str | None = None) -> CompileError:
        return self.src.error(node, message, hint)

    # ------------------------------------------------------------------ the function

    def function(self, cname: str) -> None:
        tree = self.src.tree
        args = tree.args
        if args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs:
            raise self.error(tree, "a @jit function takes plain parameters (no *args, **kw)")
        decls = []
        for a in args.args:
            p = self.params[a.arg]
            if p.kind == "static":
                continue
            decls.append(self.param_decl(p, a))
            self.vars[a.arg] = Var(a.arg, "i32" if p.ctype == "i32" else "tile", 0)
        returns = "kernel" if self.kernel else ("tile" if _returns_value(tree) else "void")
        self.put(tree, f"{returns} {cname}({', '.join(decls)}) {{")
        body = tree.body
        if body and _is_docstring(body[0]):
            body = body[1:]
        self.block(body)
        self.append("}")

    def param_decl(self, p: Param, a: ast.arg) -> str:
        if p.kind == "pointer":
            const = "" if p.name in self.written or not self.kernel else "const "
            return f"{const}{p.ctype} *{p.name}"
        if p.kind == "constexpr":
            return f"const {p.ctype} {p.name}"
        return f"{p.ctype} {p.name}"

    # ------------------------------------------------------------------ statements

    def block(self, stmts: list[ast.stmt]) -> None:
        for s in stmts:
            self.statement(s)

    def statement(self, node: ast.stmt) -> None:
        self.stmt = node
        visit = getattr(self, f"stmt_{type(node).__name__}", None)
        if visit is None:
            raise self.error(node, f"{_describe(node)} is not supported in a @jit function")
        self.pending = []
        visit(node)

    def emit(self, node: ast.AST, text: str) -> None:
        """Write statement ``text`` for ``node``, after the declarations it hoisted."""
        hoisted, self.pending = self.pending, []
        self.put(node, " ".join(hoisted + [text]))

    def frame(self, node: ast.AST, body: list[ast.stmt]) -> None:
        """``body`` as a nested C block (a branch or a loop body): what it declares ends there."""
        self.frames.append(self.next_frame)
        self.next_frame += 1
        before = dict(self.vars)
        self.block(body)
        self.frames.pop()
        for name in set(self.vars) - set(before):
            self.scoped_out[name] = self.src.origin(node).line
        for name, var in list(self.vars.items()):
            if name not in before:
                del self.vars[name]
            elif var is not before[name]:
                self.vars[name] = before[name]

    def stmt_Pass(self, node: ast.Pass) -> None:
        self.put(node, "")

    def stmt_Expr(self, node: ast.Expr) -> None:
        if _is_docstring(node):
            self.put(node, "")
            return
        if not isinstance(node.value, ast.Call):
            raise self.error(node, "an expression statement does nothing here (only calls)")
        if self.static(node.value.func) in HINTS:
            # Triton marks the value's definition in place; here a hint is a value (x =
            # tl.multiple_of(x, 16) keeps it), and a discarded one changes nothing
            self.expr(node.value)  # its arguments are still checked
            self.put(node, "")
            return
        self.emit(node, f"{self.expr(node.value).text};")

    def stmt_Assign(self, node: ast.Assign) -> None:
        if len(node.targets) != 1:
            raise self.error(node, "chained assignment (a = b = ...) is not supported")
        target = node.targets[0]
        if isinstance(target, ast.Tuple):
            self.unpack(node, target, node.value)
            return
        self.assign(node, target, node.value)

    def stmt_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is None:
            self.put(node, "")
            return
        dtype = self.static(node.annotation)
        if isinstance(dtype, B.DType) and isinstance(node.target, ast.Name):
            name = self.declare_name(node.target.id, "tile")
            self.emit(node, f"{dtype.tx} {name} = {self.expr(node.value).text};")
            return
        self.assign(node, node.target, node.value)

    def unpack(self, node: ast.AST, target: ast.Tuple, value: ast.expr) -> None:
        if not isinstance(value, ast.Tuple):  # a tuple value (a reduction's, a helper's)
            self.unpack_value(node, target, value)
            return
        if len(value.elts) != len(target.elts):
            raise self.error(
                value,
                f"{len(target.elts)} names unpack a tuple of {len(value.elts)} values",
                "give as many names as values",
            )
        names = {t.id for t in target.elts if isinstance(t, ast.Name)}
        for v in value.elts:
            if any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(v)):
                raise self.error(v, "a swap (a, b = b, a) needs a temporary: assign one first")
        for t, v in zip(target.elts, value.elts, strict=True):
            self.assign(node, t, v)

    def unpack_value(self, node: ast.AST, target: ast.Tuple, value: ast.expr) -> None:
        """``a, b = f(...)``: the tuple into a variable of its own, then each name its item
        (``tile t = f(...); tile a = t[0]; tile b = t[1];``)."""
        for t in target.elts:
            if not isinstance(t, ast.Name):
                raise self.error(t, "only names can be assigned: tiles are whole values")
        n = 1
        while f"tuple_{n}" in self.used_names:
            n += 1
        held = f"tuple_{n}"
        self.used_names.add(held)
        self.emit(node, f"tile {held} = {self.expr(value).text};")
        for k, t in enumerate(target.elts):
            assert isinstance(t, ast.Name)
            var = self.vars.get(t.id)
            if var is not None and var.frame != self.frames[-1]:  # an outer variable
                self.append(f"{var.cname} = {held}[{k}];")
            else:
                self.append(f"tile {self.declare_name(t.id, 'tile')} = {held}[{k}];")

    def assign(self, node: ast.AST, target: ast.expr, value: ast.expr) -> None:
        if not isinstance(target, ast.Name):
            raise self.error(
                target,
                "only names can be assigned: tiles are whole values",
                "write memory with tl.store(ptr, value, mask); select lanes with tl.where",
            )
        name = target.id
        full = self.full_call(value)
        var = self.vars.get(name)
        if var is not None and var.frame != self.frames[-1]:  # an outer variable: assign it
            self.emit(node, f"{var.cname} = {self.expr(value).text};")
            return
        if full is not None:  # a typed declaration: T x[M][N] = v;
            dtype, dims, fill = full
            cname = self.declare_name(name, "tile")
            self.emit(node, f"{dtype} {cname}{dims} = {fill};")
            return
        code = self.expr(value)
        kind = "i32" if code.kind == "i32" else "tile"
        cname = self.declare_name(name, kind)
        self.emit(node, f"{kind} {cname} = {code.text};")

    def declare_name(self, name: str, kind: str) -> str:
        """A new C variable for Python name ``name`` in the current block (renamed when the
        name is already declared: Python rebinds, C declares once)."""
        cname = name
        if name in self.vars or name in self.params:
            n = 1
            while f"{name}_{n}" in self.used_names:
                n += 1
            cname = f"{name}_{n}"
            self.used_names.add(cname)
        self.vars[name] = Var(cname, kind, self.frames[-1])
        self.scoped_out.pop(name, None)
        return cname

    def stmt_AugAssign(self, node: ast.AugAssign) -> None:
        if not isinstance(node.target, ast.Name):
            raise self.error(node.target, "only names can be assigned: tiles are whole values")
        var = self.lookup_var(node.target)
        op = BINOPS.get(type(node.op))
        if var is None or op is None:
            raise self.error(node, f"'{node.target.id}' is not a variable here")
        if var.frame != self.frames[-1]:  # an outer (loop-carried) variable: assign it
            self.emit(node, f"{var.cname} {op}= {self.expr(node.value).text};")
            return
        # in the block that declared it: Python rebinds (x = x + v), so dtype and shape may
        # change; a new variable
        value = self.expr(node.value)
        rhs = value.text if value.prec > PREC[op] else f"({value.text})"
        left = var.cname
        kind = "i32" if var.kind == "i32" and value.kind in ("i32", "weak") else "tile"
        cname = self.declare_name(node.target.id, kind)
        self.emit(node, f"{kind} {cname} = {left} {op} {rhs};")

    def stmt_If(self, node: ast.If) -> None:
        cond = self.static(node.test, constexprs=True)
        if cond is not NO:  # decided now: only the branch taken is written
            self.put(node, "")
            self.block(node.body if cond else node.orelse)
            return
        self.emit(node, f"if ({self.expr(node.test).text}) {{")
        self.frame(node, node.body)
        self.append("}")
        if node.orelse:
            first = node.orelse[0]
            self.put(first, "else {")
            self.frame(node, node.orelse)
            self.append("}")

    def stmt_While(self, node: ast.While) -> None:
        if node.orelse:
            raise self.error(node, "a loop's `else:` is not supported")
        if self.static(node.test, constexprs=True) is False:
            self.put(node, "")
            return
        self.emit(node, f"while ({self.expr(node.test).text}) {{")
        self.frame(node, node.body)
        self.append("}")

    def stmt_For(self, node: ast.For) -> None:
        if node.orelse:
            raise self.error(node, "a loop's `else:` is not supported")
        it = node.iter
        fn = self.static(it.func) if isinstance(it, ast.Call) else NO
        if fn not in (range, B.BUILTINS["range"], B.BUILTINS["static_range"]):
            raise self.error(
                it,
                "a @jit loop runs over range(...), tl.range(...) or tl.static_range(...)",
                "C spelling: `for (i32 k = 0; k < n; k += step)`",
            )
        if not isinstance(node.target, ast.Name):
            raise self.error(node.target, "the loop variable must be a name")
        assert isinstance(it, ast.Call)
        bound = self.bind(it, B.BUILTINS["range"]) if fn is not range else None
        args = (
            it.args if bound is None else [bound[k] for k in ("arg1", "arg2", "step") if bound[k]]
        )
        pragmas = []
        if bound is not None:
            if bound.get("warp_specialize") is not None and self.flag(bound["warp_specialize"]):
                raise self.error(
                    bound["warp_specialize"],
                    "tl.range's warp_specialize is not supported",
                    "kernels/attention.c's WARP_SPECIALIZE shows the language's spelling",
                )
            for key, pragma in (("num_stages", "num_stages"), ("loop_unroll_factor", "unroll")):
                if bound.get(key) is not None and not _is_none(bound[key]):
                    pragmas.append(f'_Pragma("{pragma} {self.expr(bound[key]).text}") ')
        if not 1 <= len(args) <= 3 or it.keywords and fn is range:
            raise self.error(it, "range takes 1 to 3 positional arguments")
        start, end = (args[0], args[1]) if len(args) > 1 else (ast.Constant(0), args[0])
        step = args[2] if len(args) == 3 else None
        step_value = self.static(step, constexprs=True) if step is not None else 1
        lo = self.expr(start).text
        hi = self.expr(end)
        self.frames.append(self.next_frame)
        self.next_frame += 1
        k = self.declare_name(node.target.id, "i32")
        self.frames.pop()
        cmp, inc = "<", f"{k}++"
        if step is not None and step_value != 1:
            if step_value == 0:
                raise self.error(step, "range() step must not be zero")
            down = isinstance(step_value, int) and step_value < 0
            cmp = ">" if down else "<"
            inc = f"{k} -= {-step_value}" if down else f"{k} += {self.expr(step).text}"
        head = "".join(pragmas)
        self.emit(node, f"{head}for (i32 {k} = {lo}; {k} {cmp} {hi.text}; {inc}) {{")
        loop_var = self.vars.pop(node.target.id)
        self.frames.append(self.next_frame)
        self.next_frame += 1
        self.vars[node.target.id] = Var(loop_var.cname, "i32", self.frames[-1])
        self.frames.pop()
        self.frame(node, node.body)
        self.vars.pop(node.target.id, None)
        self.append("}")

    def stmt_Break(self, node: ast.Break) -> None:
        self.put(node, "break;")

    def stmt_Continue(self, node: ast.Continue) -> None:
        self.put(node, "continue;")

    def stmt_Return(self, node: ast.Return) -> None:
        if node.value is None:
            self.put(node, "return;")
            return
        if self.kernel:
            raise self.error(node, "a kernel returns no value", "store results with tl.store")
        self.emit(node, f"return {self.expr(node.value).text};")

    def stmt_Assert(self, node: ast.Assert) -> None:
        msg = self.static(node.msg) if node.msg is not None else ""
        text = _c_string(msg if isinstance(msg, str) else "assertion failed")
        self.emit(node, f"device_assert({self.expr(node.test).text}, {text});")

    # ------------------------------------------------------------------ static values

    def static(self, node: ast.expr | None, constexprs: bool = False) -> Any:
        """The Python value of ``node`` when it is known at translation time, else NO.
        ``constexprs``: constexpr parameters count as known where their values are."""
        if node is None:
            return NO
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            p, var = self.params.get(node.id), self.vars.get(node.id)
            if p is not None and (var is None or (var.cname == node.id and var.frame == 0)):
                if p.kind == "static" or (constexprs and p.kind == "constexpr"):
                    return p.value
                return NO
            if var is not None:
                return NO
            if node.id in self.globals:
                value = self.globals[node.id]
                return value.value if isinstance(value, B.constexpr) else value
            import builtins

            return getattr(builtins, node.id, NO)
        if isinstance(node, ast.Attribute):
            if isinstance(node.value, ast.Name) and node.attr == "dtype":
                p = self.params.get(node.value.id)
                if p is not None and p.kind == "pointer" and p.dtype is not None:
                    return B.BY_TX[p.dtype]
            base = self.static(node.value, constexprs)
            if base is NO:
                return NO
            return getattr(base, node.attr, NO)
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            a = self.static(node.left, constexprs)
            b = self.static(node.comparators[0], constexprs)
            left = node.left
            is_op = isinstance(node.ops[0], (ast.Is, ast.IsNot))
            variable = isinstance(left, ast.Name) and left.id in self.vars
            if a is NO and b is None and is_op and variable:  # a value is never None
                return isinstance(node.ops[0], ast.IsNot)
            op = PY_STATIC_OPS.get(type(node.ops[0]))
            if a is NO or b is NO or op is None:
                return NO
            return op(a, b)
        if isinstance(node, ast.BoolOp):
            values = [self.static(v, constexprs) for v in node.values]
            if isinstance(node.op, ast.And):
                if any(v is not NO and not v for v in values):
                    return False
                return NO if any(v is NO for v in values) else all(values)
            if any(v is not NO and v for v in values):
                return True
            return NO if any(v is NO for v in values) else any(values)
        if isinstance(node, ast.UnaryOp):
            v = self.static(node.operand, constexprs)
            if v is NO:
                return NO
            if isinstance(node.op, ast.Not):
                return not v
            if isinstance(node.op, ast.USub) and isinstance(v, (int, float)):
                return -v
            return NO
        if isinstance(node, ast.BinOp) and type(node.op) in PY_STATIC_OPS:
            a, b = self.static(node.left, constexprs), self.static(node.right, constexprs)
            if (
                isinstance(a, (int, bool))
                and isinstance(b, (int, bool))
                and not (isinstance(node.op, (ast.FloorDiv, ast.Mod)) and b == 0)
            ):
                return PY_STATIC_OPS[type(node.op)](a, b)
            return NO
        if isinstance(node, ast.Tuple):
            values = [self.static(e, constexprs) for e in node.elts]
            return NO if any(v is NO for v in values) else tuple(values)
        if isinstance(node, ast.Call) and self.static(node.func) is B.pointer_type:
            args = [self.static(a, constexprs) for a in node.args]
            if any(k.arg is None for k in node.keywords):
                return NO
            kwargs = {str(k.arg): self.static(k.value, constexprs) for k in node.keywords}
            if NO in args or NO in kwargs.values():
                return NO
            try:
                return B.pointer_type(*args, **kwargs)
            except (TypeError, TeenyError) as exc:
                raise self.error(node, str(exc)) from None
        return NO

    # ------------------------------------------------------------------ expressions

    def expr(self, node: ast.expr) -> Code:
        visit = getattr(self, f"expr_{type(node).__name__}", None)
        if visit is None:
            raise self.error(node, f"{_describe(node)} is not supported in a @jit function")
        return self.mark(node, visit(node))

    def operand(self, node: ast.expr, prec: int) -> str:
        code = self.expr(node)
        return code.text if code.prec >= prec else f"({code.text})"

    def expr_Constant(self, node: ast.Constant) -> Code:
        return Code(*_literal(node.value, lambda: self.error(node, _bad_constant(node.value))))

    def expr_Name(self, node: ast.Name) -> Code:
        var = self.lookup_var(node)
        if var is not None:
            kind = var.kind
            p = self.params.get(node.id)
            if p is not None and p.kind == "constexpr" and var.cname == node.id:
                kind = "weak"
            return Code(var.cname, ATOM, kind)
        if node.id in self.scoped_out:
            raise self.error(
                node,
                f"'{node.id}' is declared inside the block at line {self.scoped_out[node.id]}, "
                "and C ends it there",
                f"assign '{node.id}' before that block, so the block assigns it",
            )
        value = self.static(node)
        if value is NO:
            raise self.error(node, f"unknown name '{node.id}'")
        return self.value(node, value)

    def lookup_var(self, node: ast.Name) -> Var | None:
        return self.vars.get(node.id)

    def value(self, node: ast.expr, value: Any) -> Code:
        """A static Python value used as an expression."""
        if isinstance(value, (bool, int, float)):
            return Code(*_literal(value, lambda: self.error(node, _bad_constant(value))))
        if isinstance(value, B.DType):
            return Code(value.tx)
        what = "a function" if callable(value) else f"{type(value).__name__} {value!r}"
        raise self.error(node, f"{ast.unparse(node)} is {what}, not a value a kernel computes with")

    def expr_Attribute(self, node: ast.Attribute) -> Code:
        value = self.static(node)
        if value is not NO:
            return self.value(node, value)
        if node.attr == "T":
            return Code(f"trans({self.expr(node.value).text})", POSTFIX)
        raise self.error(node, f"attribute '.{node.attr}' is not supported here")

    def expr_BinOp(self, node: ast.BinOp) -> Code:
        if isinstance(node.op, ast.MatMult):
            return Code(f"dot({self.expr(node.left).text}, {self.expr(node.right).text})", POSTFIX)
        if isinstance(node.op, ast.Pow):
            return Code(f"pow({self.expr(node.left).text}, {self.expr(node.right).text})", POSTFIX)
        op = BINOPS[type(node.op)]
        p = PREC[op]
        left, right = self.expr(node.left), self.expr(node.right)
        # a comparison inside &, | or ^ keeps Python's parentheses (C agrees, but reads worse)
        floor = PREC["<"] + 1 if op in ("&", "|", "^") else p
        lt = left.text if left.prec >= max(p, floor) else f"({left.text})"
        rt = right.text if right.prec > p and right.prec >= floor else f"({right.text})"
        kinds = {left.kind, right.kind}
        kind = (
            "i32"
            if op in INDEX_OPS and kinds <= {"i32", "weak"} and "i32" in kinds
            else ("weak" if kinds == {"weak"} else "tile")
        )
        return Code(f"{lt} {op} {rt}", p, kind)

    def expr_UnaryOp(self, node: ast.UnaryOp) -> Code:
        if isinstance(node.op, ast.USub):
            v = self.static(node.operand)
            if isinstance(v, float) and math.isinf(v):
                return Code("-INF", UNARY, "weak")
        code = self.expr(node.operand)
        text = code.text if code.prec >= UNARY else f"({code.text})"
        kind = code.kind if isinstance(node.op, (ast.USub, ast.UAdd)) else "tile"
        return Code(f"{UNOPS[type(node.op)]}{text}", UNARY, kind)

    def expr_BoolOp(self, node: ast.BoolOp) -> Code:
        v = self.static(node)
        if v is not NO:
            return self.value(node, bool(v))
        op = "&&" if isinstance(node.op, ast.And) else "||"
        parts = [self.operand(v, PREC[op] + 1) for v in node.values]
        return Code(f" {op} ".join(parts), PREC[op])

    def expr_Compare(self, node: ast.Compare) -> Code:
        v = self.static(node)
        if v is not NO:
            return self.value(node, bool(v))
        parts, left = [], node.left
        for op, right in zip(node.ops, node.comparators, strict=True):
            c = CMPOPS.get(type(op))
            if c is None:
                raise self.error(node, f"'{_op_text(op)}' compares values known only when run")
            p = PREC[c]
            parts.append(f"{self.operand(left, p)} {c} {self.operand(right, p + 1)}")
            left = right
        if len(parts) == 1:
            return Code(parts[0], PREC[CMPOPS[type(node.ops[0])]])
        return Code(" && ".join(f"({p})" for p in parts), PREC["&&"])

    def expr_Tuple(self, node: ast.Tuple) -> Code:
        """A tuple of values, C's parenthesised list: the input of a multi-operand reduction
        or scan, a helper's return value."""
        if not node.elts:
            raise self.error(node, "an empty tuple has no value here")
        return Code(f"({', '.join(self.expr(e).text for e in node.elts)})", ATOM)

    def expr_IfExp(self, node: ast.IfExp) -> Code:
        v = self.static(node.test, constexprs=True)
        if v is not NO:
            return self.expr(node.body if v else node.orelse)
        c = self.operand(node.test, PREC["||"])
        return Code(f"{c} ? {self.operand(node.body, 4)} : {self.operand(node.orelse, 3)}", 3)

    def expr_Subscript(self, node: ast.Subscript) -> Code:
        index = node.slice
        items = index.elts if isinstance(index, ast.Tuple) else [index]
        if not all(_is_none(i) or _is_full_slice(i) for i in items):
            v = self.static(node)
            if v is not NO:
                return self.value(node, v)
            raise self.error(
                index,
                "tiles cannot be indexed by position",
                "x[:, None] and x[None, :] add a dimension (expand_dims); select lanes with "
                "tl.where, read memory through pointers",
            )
        code = self.expr(node.value)
        for axis, item in enumerate(items):
            if _is_none(item):
                code = Code(f"expand_dims({code.text}, {axis})", POSTFIX)
        return code

    def expr_Call(self, node: ast.Call) -> Code:
        func = node.func
        if isinstance(func, ast.Attribute) and self.static(func) is NO:
            if self.static(func.value) is NO:
                return self.method(node, func)
            raise self.error(
                func,
                f"'{ast.unparse(func)}' cannot be called in a @jit function: the language lacks it",
                B.REFUSED.get(func.attr) or spellings.answer(func.attr),
            )
        fn = self.static(func)
        if isinstance(fn, B.Builtin):
            return self.builtin(node, fn)
        if is_jit(fn):
            return self.helper_call(node, fn)
        handler = PY_CALLS.get(str(getattr(fn, "__name__", ""))) if fn is not NO else None
        if handler is not None and _is_python_builtin(fn):
            return handler(self, node)
        from ..runtime.grid import cdiv as host_cdiv  # triton.cdiv

        if fn is host_cdiv:
            return self.builtin(node, B.BUILTINS["cdiv"])
        if fn is B.constexpr:
            return self.expr(node.args[0])
        name = ast.unparse(func)
        if fn is NO:
            raise self.error(func, f"unknown function '{name}'")
        refused = B.REFUSED.get(name.rsplit(".", 1)[-1]) or spellings.answer(
            name.rsplit(".", 1)[-1]
        )
        hint = refused or "kernels call tl.* operations and other @jit functions"
        raise self.error(func, f"'{name}' cannot be called in a @jit function", hint)

    def method(self, node: ast.Call, func: ast.Attribute) -> Code:
        if func.attr == "to":
            bound = self.bind(node, TO_METHOD)
            return self.cast(
                func.value, bound["dtype"], bound["bitcast"], bound["fp_downcast_rounding"]
            )
        raise self.error(
            func,
            f"the method '.{func.attr}()' is not supported",
            f"call the function: tl.{func.attr}(x, ...)" if func.attr in B.BUILTINS else None,
        )

    def cast(
        self,
        value: ast.expr,
        dtype_node: ast.expr,
        bitcast_node: ast.expr | None,
        rounding_node: ast.expr | None = None,
    ) -> Code:
        target = self.static(dtype_node)
        if isinstance(target, B.PointerDType):  # an address (i64) read as a pointer
            return Code(f"({target.tx}){self.operand(value, UNARY)}", UNARY)
        dtype = self.dtype(dtype_node)
        rounding = self.static(rounding_node) if rounding_node is not None else None
        if rounding not in (None, "rtne"):
            if rounding not in B.ROUNDING:
                assert rounding_node is not None
                raise self.error(rounding_node, "fp_downcast_rounding is 'rtne' or 'rtz'")
            return Code(f"cast({self.expr(value).text}, {dtype}, {B.ROUNDING[rounding]})", POSTFIX)
        bitcast = self.static(bitcast_node) if bitcast_node is not None else False
        if bitcast:
            return Code(f"bitcast({self.expr(value).text}, {dtype})", POSTFIX)
        return Code(f"({dtype}){self.operand(value, UNARY)}", UNARY)

    def dtype(self, node: ast.expr) -> str:
        d = self.static(node)
        if isinstance(d, str):
            d = B.DTYPE_OBJECTS.get(B.ALIASES.get(d, d))
        if isinstance(d, B.DType):
            return d.tx
        raise self.error(node, "expected a dtype (tl.float32, tl.int64, ...)")

    def bind(self, node: ast.Call, fn: B.Builtin) -> dict[str, Any]:
        """The arguments of call ``node`` by ``fn``'s parameter names (None where left out)."""
        for a in node.args:
            if isinstance(a, ast.Starred):
                raise self.error(a, "*args in a call is not supported")
        try:
            bound = fn.signature.bind(*node.args, **self.keywords(node))
        except TypeError as exc:
            raise self.error(node, f"tl.{fn.name}: {exc}") from None
        out: dict[str, Any] = {name: None for name in fn.signature.parameters}
        out.update(bound.arguments)
        return out

    def keywords(self, node: ast.Call) -> dict[str, ast.expr]:
        out = {}
        for k in node.keywords:
            if k.arg is None:
                raise self.error(k.value, "**kwargs in a call is not supported")
            out[k.arg] = k.value
        return out

    def builtin(self, node: ast.Call, fn: B.Builtin) -> Code:
        handler = BUILTIN_CALLS.get(fn.name)
        if handler is not None:
            return handler(self, node, self.bind(node, fn))
        if fn.name in B.LIBDEVICE_RENAMED:  # libdevice's spelling of an operation here
            args = [self.expr(v).text for v in self.bind(node, fn).values() if v is not None]
            return Code(f"{B.LIBDEVICE_RENAMED[fn.name]}({', '.join(args)})", POSTFIX)
        if fn.name in B.SAME:
            bound = self.bind(node, fn)
            if bound.get("n_rounds") is not None:
                raise self.error(bound["n_rounds"], "Philox runs 10 rounds here, always")
            args = [
                self.expr(v).text for k, v in bound.items() if v is not None and k != "n_rounds"
            ]
            kind = "i32" if fn.name in ("program_id", "num_programs") else "tile"
            if fn.name == "cdiv":
                kinds = {self.expr(v).kind for v in bound.values() if v is not None}
                kind = "i32" if kinds <= {"i32", "weak"} and "i32" in kinds else "tile"
            return Code(f"{fn.name}({', '.join(args)})", POSTFIX, kind)
        if fn.name in ("range", "static_range"):
            raise self.error(node, f"tl.{fn.name} is the iterator of a for loop")
        raise self.error(node, f"tl.{fn.name} is not supported yet")

    def call(self, name: str, given: Sequence[str | None]) -> Code:
        """``name(args...)``, trailing None arguments left out (a None inside is an error of
        the caller: fill it first)."""
        args = list(given)
        while args and args[-1] is None:
            args.pop()
        return Code(f"{name}({', '.join(a for a in args if a is not None)})", POSTFIX)

    def opt(self, node: ast.expr | None) -> str | None:
        return None if node is None or _is_none(node) else self.expr(node).text

    def flag(self, node: ast.expr | None) -> bool:
        if node is None:
            return False
        v = self.static(node, constexprs=True)
        if v is NO:
            raise self.error(node, "this argument must be a constant (True or False)")
        return bool(v)

    def shape(self, node: ast.expr | None) -> list[str]:
        if node is None:
            return []
        if isinstance(node, (ast.Tuple, ast.List)):
            return [self.expr(e).text for e in node.elts]
        v = self.static(node)
        if isinstance(v, (tuple, list)):
            return [str(int(d)) for d in v]
        return [self.expr(node).text]

    def full_call(self, node: ast.expr) -> tuple[str, str, str] | None:
        """(dtype, "[M][N]", fill) of a tl.zeros/tl.full call ``node``, else None."""
        if not isinstance(node, ast.Call):
            return None
        fn = self.static(node.func)
        if fn is not B.BUILTINS["zeros"] and fn is not B.BUILTINS["full"]:
            return None
        bound = self.bind(node, fn)
        if bound["dtype"] is None:
            raise self.error(node, f"tl.{fn.name} needs dtype=")
        dims = "".join(f"[{d}]" for d in self.shape(bound["shape"]))
        fill = "0" if fn.name == "zeros" else self.expr(bound["value"]).text
        return self.dtype(bound["dtype"]), dims, fill

    def hoist_full(self, node: ast.Call) -> Code:
        """A tl.zeros/tl.full inside an expression: declared just before the statement."""
        full = self.full_call(node)
        assert full is not None
        dtype, dims, fill = full
        n = 1
        while f"full_{n}" in self.used_names:
            n += 1
        cname = f"full_{n}"
        self.used_names.add(cname)
        self.pending.append(f"{dtype} {cname}{dims} = {fill};")
        return Code(cname)

    def helper_call(self, node: ast.Call, fn: Any) -> Code:
        cname = self.helpers.done.get(id(fn))
        if cname is None:
            cname = fn.__name__
            self.helpers.done[id(fn)] = cname
            self.helpers.queue.append(fn)
        src = fn._tx_source()
        names = [a.arg for a in src.tree.args.args]
        try:
            bound = inspect.Signature(
                [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in names]
            ).bind(*node.args, **self.keywords(node))
        except TypeError as exc:
            raise self.error(node, f"{cname}(): {exc}") from None
        args = [self.expr(bound.arguments[n]).text for n in names]
        return Code(f"{cname}({', '.join(args)})", POSTFIX)


# ---------------------------------------------------------------------- builtins with rules


def _hints(t: Translator, a: dict, caches: dict[str, str]) -> list[str | None]:
    """tl.load's / tl.store's cache_modifier and eviction_policy as the C constants."""
    out: list[str | None] = []
    for key, table in (("cache_modifier", caches), ("eviction_policy", B.EVICTIONS)):
        node = a[key]
        v = t.static(node) if node is not None else ""
        if v in ("", None):
            out.append(None)
        elif v in table:
            out.append(table[v])
        else:
            raise t.error(node, f"{key} is one of {', '.join(map(repr, table))} (or '')")
    if out[0] is None and out[1] is not None:
        out[0] = "0"
    return out


def _load(t: Translator, node: ast.Call, a: dict) -> Code:
    for k in ("boundary_check", "padding_option"):
        if a[k] is not None and t.static(a[k]) not in ((), "", None):
            raise t.error(a[k], f"tl.load's {k} belongs to block pointers, absent here")
    if a["volatile"] is not None and t.flag(a["volatile"]):
        raise t.error(
            a["volatile"],
            "tl.load's volatile is not supported",
            "cache_modifier='.cv' fetches again at every load",
        )
    mask, other = t.opt(a["mask"]), t.opt(a["other"])
    hints = _hints(t, a, B.LOAD_CACHES)
    if hints[0] is not None:
        mask, other = mask or "true", other or "0"
    if other is not None and mask is None:
        mask = "true"
    args = [t.expr(a["pointer"]).text, mask, other, *hints]
    return Code(t.call("load", args).text, POSTFIX)


def _store(t: Translator, node: ast.Call, a: dict) -> Code:
    if a["boundary_check"] is not None and t.static(a["boundary_check"]) != ():
        raise t.error(a["boundary_check"], "tl.store's boundary_check belongs to block pointers")
    hints = _hints(t, a, B.STORE_CACHES)
    mask = t.opt(a["mask"])
    if hints[0] is not None and mask is None:
        mask = "true"
    args = [t.expr(a["pointer"]).text, t.expr(a["value"]).text, mask, *hints]
    return t.call("store", args)


def _dot(t: Translator, node: ast.Call, a: dict) -> Code:
    precision = a["input_precision"]
    prec = None
    if precision is not None and not _is_none(precision):
        v = t.static(precision)
        prec = B.PRECISIONS.get(str(v).lower()) if v is not NO else None
        if prec is None:
            raise t.error(precision, "input_precision is 'ieee', 'tf32' or 'tf32x3'")
    elif a["allow_tf32"] is not None and t.flag(a["allow_tf32"]):
        prec = "TF32"
    acc = t.opt(a["acc"])
    if prec is not None and acc is None:
        acc = "0"
    code = t.call("dot", [t.expr(a["input"]).text, t.expr(a["other"]).text, acc, prec])
    out = a["out_dtype"]
    if out is not None and not _is_none(out) and t.dtype(out) not in ("f32",):
        return Code(f"({t.dtype(out)}){code.text}", UNARY)
    return code


def _reduction(name: str) -> Callable[[Translator, ast.Call, dict], Code]:
    def emit(t: Translator, node: ast.Call, a: dict) -> Code:
        if a.get("return_indices") is not None and t.flag(a["return_indices"]):
            if a["axis"] is None or _is_none(a["axis"]) or t.flag(a["keep_dims"]):
                raise t.error(node, f"tl.{name}(x, axis, return_indices=True) needs an axis")
            values, index = t.expr(a["input"]).text, t.expr(a["axis"]).text
            return Code(f"({name}({values}, {index}), arg{name}({values}, {index}))", ATOM)
        x = t.expr(a["input"]).text
        if a.get("dtype") is not None and not _is_none(a["dtype"]):
            x = f"({t.dtype(a['dtype'])}){t.operand(a['input'], UNARY)}"
        axis = t.opt(a["axis"])
        keep = "1" if t.flag(a["keep_dims"]) else None
        if keep is not None and axis is None:
            raise t.error(node, "keep_dims needs an axis here")
        return t.call(name, [x, axis, keep])

    return emit


def _arg_reduction(name: str) -> Callable[[Translator, ast.Call, dict], Code]:
    def emit(t: Translator, node: ast.Call, a: dict) -> Code:
        if a["tie_break_left"] is not None and not t.flag(a["tie_break_left"]):
            raise t.error(a["tie_break_left"], "ties give the lowest index here, always")
        keep = "1" if t.flag(a["keep_dims"]) else None
        return t.call(name, [t.expr(a["input"]).text, t.expr(a["axis"]).text, keep])

    return emit


def _helper_name(t: Translator, node: ast.expr) -> str:
    fn = t.static(node)
    if not is_jit(fn):
        raise t.error(node, "the combiner must be a @jit function")
    if id(fn) not in t.helpers.done:
        t.helpers.done[id(fn)] = fn.__name__
        t.helpers.queue.append(fn)
    return t.helpers.done[id(fn)]


def _reduce(t: Translator, node: ast.Call, a: dict) -> Code:
    axis = t.expr(a["axis"]).text
    code = t.call("reduce", [t.expr(a["input"]).text, axis, _helper_name(t, a["combine_fn"])])
    if isinstance(a["input"], ast.Tuple) and t.flag(a["keep_dims"]):
        raise t.error(a["keep_dims"], "keep_dims of a tuple reduction is not supported yet")
    if t.flag(a["keep_dims"]):
        return Code(f"expand_dims({code.text}, {axis})", POSTFIX)
    return code


def _scan(name: str) -> Callable[[Translator, ast.Call, dict], Code]:
    def emit(t: Translator, node: ast.Call, a: dict) -> Code:
        reverse = "1" if t.flag(a["reverse"]) else None
        axis = t.expr(a["axis"]).text if a["axis"] is not None else ("0" if reverse else None)
        return t.call(name, [t.expr(a["input"]).text, axis, reverse])

    return emit


def _associative_scan(t: Translator, node: ast.Call, a: dict) -> Code:
    reverse = "1" if t.flag(a["reverse"]) else None
    args = [t.expr(a["input"]).text, t.expr(a["axis"]).text, _helper_name(t, a["combine_fn"])]
    return t.call("associative_scan", args + [reverse])


def _minmax(name: str) -> Callable[[Translator, ast.Call, dict], Code]:
    def emit(t: Translator, node: ast.Call, a: dict) -> Code:
        return t.call(name, [t.expr(a["x"]).text, t.expr(a["y"]).text, _propagate(t, a)])

    return emit


def _propagate(t: Translator, a: dict) -> str | None:
    """propagate_nan=tl.PropagateNan.ALL (or "all") as PROPAGATE_NAN_ALL; NONE left out."""
    node = a.get("propagate_nan")
    if node is None or _is_none(node):
        return None
    v = t.static(node)
    v = v.lower() if isinstance(v, str) else v
    if v not in B.PROPAGATE:
        raise t.error(node, "propagate_nan is tl.PropagateNan.NONE or tl.PropagateNan.ALL")
    return None if v == "none" else B.PROPAGATE[v]


def _clamp(t: Translator, node: ast.Call, a: dict) -> Code:
    x, lo, hi = (t.expr(a[k]).text for k in ("x", "min", "max"))
    nan = _propagate(t, a)
    if nan is not None:
        return Code(f"minimum(maximum({x}, {lo}, {nan}), {hi}, {nan})", POSTFIX)
    return Code(f"minimum(maximum({x}, {lo}), {hi})", POSTFIX)


def _divide(t: Translator, node: ast.Call, a: dict) -> Code:
    p = PREC["/"]
    return Code(f"{t.operand(a['x'], p)} / {t.operand(a['y'], p + 1)}", p)


def _sqrt_rn(t: Translator, node: ast.Call, a: dict) -> Code:
    return t.call("sqrt", [t.expr(a["x"]).text])


def _full(t: Translator, node: ast.Call, a: dict) -> Code:
    return t.hoist_full(node)


def _cast(t: Translator, node: ast.Call, a: dict) -> Code:
    return t.cast(a["input"], a["dtype"], a["bitcast"], a["fp_downcast_rounding"])


def _shape_op(name: str) -> Callable[[Translator, ast.Call, dict], Code]:
    def emit(t: Translator, node: ast.Call, a: dict) -> Code:
        if a.get("can_reorder") is not None and t.flag(a["can_reorder"]):
            pass  # row-major here, always: a permitted order
        dims = a["shape"]
        sizes = t.shape(dims[0]) if len(dims) == 1 else [t.expr(d).text for d in dims]
        return t.call(name, [t.expr(a["input"]).text] + sizes)

    return emit


def _trans(t: Translator, node: ast.Call, a: dict) -> Code:
    dims = a["dims"]
    order = t.static(dims[0]) if len(dims) == 1 else tuple(t.static(d) for d in dims)
    if not dims or order in ((1, 0), [1, 0]):
        return t.call("trans", [t.expr(a["input"]).text])
    return _permute(t, node, a)


def _permute(t: Translator, node: ast.Call, a: dict) -> Code:
    dims = a["dims"]
    axes = t.shape(dims[0]) if len(dims) == 1 else [t.expr(d).text for d in dims]
    return t.call("permute", [t.expr(a["input"]).text] + axes)


def _flip(t: Translator, node: ast.Call, a: dict) -> Code:
    return t.call("flip", [t.expr(a["x"]).text, t.opt(a["dim"])])


def _cat(t: Translator, node: ast.Call, a: dict) -> Code:
    return t.call("cat", [t.expr(a["input"]).text, t.expr(a["other"]).text])


def _message(name: str) -> Callable[[Translator, ast.Call, dict], Code]:
    def emit(t: Translator, node: ast.Call, a: dict) -> Code:
        msg = t.static(a["msg"]) if a["msg"] is not None else ""
        text = _c_string(msg) if isinstance(msg, str) and msg else None
        return t.call(name, [t.expr(a["cond"]).text, text])

    return emit


def _device_print(t: Translator, node: ast.Call, a: dict) -> Code:
    prefix = t.static(a["prefix"])
    if not isinstance(prefix, str):
        raise t.error(a["prefix"], "tl.device_print's prefix is a string")
    return t.call("device_print", [_c_string(prefix)] + [t.expr(v).text for v in a["args"]])


def _atomic(name: str) -> Callable[[Translator, ast.Call, dict], Code]:
    def emit(t: Translator, node: ast.Call, a: dict) -> Code:
        sem = _choice(t, a["sem"], B.SEMANTICS, "sem")
        scope = _choice(t, a["scope"], B.SCOPES, "scope")
        args: list[str | None] = [t.expr(a["pointer"]).text]
        if name == "atomic_cas":
            args += [t.expr(a["cmp"]).text, t.expr(a["val"]).text]
        else:
            mask = t.opt(a["mask"])
            args += [
                t.expr(a["val"]).text,
                mask if mask is not None or not (sem or scope) else "true",
            ]
        if scope and not sem:
            sem = "ACQ_REL"
        return t.call(name, args + [sem, scope])

    return emit


def _hint(name: str) -> Callable[[Translator, ast.Call, dict], Code]:
    """tl.multiple_of / tl.max_contiguous: the bound of the last axis (the one the axis
    analysis follows) where Triton gives one per axis."""

    def emit(t: Translator, node: ast.Call, a: dict) -> Code:
        values = a["values"]
        v = t.static(values, constexprs=True)
        if isinstance(v, (list, tuple)) and v:
            bound = str(int(v[-1]))
        elif isinstance(values, (ast.List, ast.Tuple)) and values.elts:
            bound = t.expr(values.elts[-1]).text
        else:
            bound = t.expr(values).text
        return t.call(name, [t.expr(a["input"]).text, bound])

    return emit


def _static_print(t: Translator, node: ast.Call, a: dict) -> Code:
    """tl.static_print(...): strings as C strings, values as they are (printed when the C
    compiles: their types, and constants' values)."""
    args = []
    for v in a["values"]:
        s = t.static(v)
        args.append(_c_string(s) if isinstance(s, str) else t.expr(v).text)
    return t.call("static_print", args or ['""'])


def _choice(t: Translator, node: ast.expr | None, table: dict[str, str], what: str) -> str | None:
    if node is None or _is_none(node):
        return None
    v = t.static(node)
    if v not in table:
        raise t.error(node, f"{what} is one of {', '.join(map(repr, table))}")
    return table[v]


BUILTIN_CALLS: dict[str, Callable[[Translator, ast.Call, dict], Code]] = {
    "load": _load,
    "store": _store,
    "dot": _dot,
    "sum": _reduction("sum"),
    "max": _reduction("max"),
    "min": _reduction("min"),
    "xor_sum": _reduction("xor_sum"),
    "argmax": _arg_reduction("argmax"),
    "argmin": _arg_reduction("argmin"),
    "reduce": _reduce,
    "cumsum": _scan("cumsum"),
    "cumprod": _scan("cumprod"),
    "associative_scan": _associative_scan,
    "maximum": _minmax("maximum"),
    "minimum": _minmax("minimum"),
    "clamp": _clamp,
    "div_rn": _divide,
    "fdiv": _divide,
    "sqrt_rn": _sqrt_rn,
    "zeros": _full,
    "full": _full,
    "cast": _cast,
    "broadcast_to": _shape_op("broadcast_to"),
    "reshape": _shape_op("reshape"),
    "view": _shape_op("reshape"),
    "trans": _trans,
    "permute": _permute,
    "flip": _flip,
    "cat": _cat,
    "static_assert": _message("static_assert"),
    "device_assert": _message("device_assert"),
    "device_print": _device_print,
    "multiple_of": _hint("multiple_of"),
    "max_contiguous": _hint("max_contiguous"),
    "max_constancy": _hint("max_constancy"),
    "reduce_or": _reduction("reduce_or"),
    "static_print": _static_print,
}
HINTS = tuple(B.BUILTINS[n] for n in ("multiple_of", "max_contiguous", "max_constancy"))
for _name in ("add", "max", "min", "and", "or", "xor", "xchg", "cas"):
    BUILTIN_CALLS[f"atomic_{_name}"] = _atomic(f"atomic_{_name}")


# ---------------------------------------------------------------------- Python builtins


def _py_minmax(name: str) -> Callable[[Translator, ast.Call], Code]:
    def emit(t: Translator, node: ast.Call) -> Code:
        if len(node.args) != 2 or node.keywords:
            raise t.error(node, f"{name[:3]}() takes two values in a kernel")
        a, b = t.expr(node.args[0]), t.expr(node.args[1])
        kinds = {a.kind, b.kind}
        kind = "i32" if kinds <= {"i32", "weak"} and "i32" in kinds else "tile"
        return Code(f"{name}({a.text}, {b.text})", POSTFIX, kind)

    return emit


def _py_float(t: Translator, node: ast.Call) -> Code:
    v = t.static(node)
    if len(node.args) == 1:
        s = t.static(node.args[0])
        if isinstance(s, str):
            value = float(s)
            return Code(*_literal(value, lambda: t.error(node, "bad float")))
        return Code(f"(f32){t.operand(node.args[0], UNARY)}", UNARY)
    raise t.error(node, f"float() takes one value, got {v!r}")


def _py_int(t: Translator, node: ast.Call) -> Code:
    if len(node.args) != 1:
        raise t.error(node, "int() takes one value")
    return Code(f"(i32){t.operand(node.args[0], UNARY)}", UNARY)


def _py_static(t: Translator, node: ast.Call) -> Code:
    values = [t.static(a, constexprs=True) for a in node.args]
    if any(v is NO for v in values) or node.keywords:
        raise t.error(node, f"{ast.unparse(node.func)}() runs at translation time: constants only")
    fn = t.static(node.func)
    return t.value(node, fn(*values))


PY_CALLS: dict[str, Callable[[Translator, ast.Call], Code]] = {
    "min": _py_minmax("minimum"),
    "max": _py_minmax("maximum"),
    "float": _py_float,
    "int": _py_int,
    "len": _py_static,
    "abs": lambda t, n: t.call("abs", [t.expr(n.args[0]).text]),
}


def _is_python_builtin(fn: Any) -> bool:
    import builtins

    return getattr(builtins, getattr(fn, "__name__", ""), None) is fn


# ---------------------------------------------------------------------- small helpers


def _literal(value: Any, error: Callable[[], CompileError]) -> tuple[str, int, str]:
    if isinstance(value, bool):
        return ("true" if value else "false", ATOM, "weak")
    if isinstance(value, int):
        return (str(value), ATOM if value >= 0 else UNARY, "weak")
    if isinstance(value, float):
        if math.isnan(value):
            return ("NAN", ATOM, "weak")
        if math.isinf(value):
            return ("INF" if value > 0 else "-INF", ATOM if value > 0 else UNARY, "weak")
        text = repr(value)
        if "e" not in text and "." not in text:
            text += ".0"
        if abs(value) <= 3.4028234663852886e38:
            text += "f"
        return (text, ATOM if value >= 0 else UNARY, "weak")
    raise error()


def _bad_constant(value: Any) -> str:
    if value is None:
        return "None has no value here (a None argument is static: test it with `is None`)"
    return f"the constant {value!r} is not a number"


def _c_string(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def _is_docstring(node: ast.stmt) -> bool:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    )


def _is_none(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _is_full_slice(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Slice)
        and node.lower is None
        and node.upper is None
        and (node.step is None)
    )


def _returns_value(tree: ast.FunctionDef) -> bool:
    return any(isinstance(n, ast.Return) and n.value is not None for n in ast.walk(tree))


def _op_text(op: ast.cmpop) -> str:
    return {ast.Is: "is", ast.IsNot: "is not", ast.In: "in", ast.NotIn: "not in"}.get(
        type(op), type(op).__name__
    )


_DESCRIBE = {
    "Lambda": "a lambda",
    "ListComp": "a list comprehension",
    "GeneratorExp": "a generator expression",
    "DictComp": "a dict comprehension",
    "SetComp": "a set comprehension",
    "Dict": "a dict",
    "Set": "a set",
    "List": "a list",
    "Tuple": "a tuple",
    "JoinedStr": "an f-string",
    "With": "a `with` block",
    "Try": "a `try` block",
    "Raise": "`raise`",
    "FunctionDef": "a nested function (define helpers at module level with @jit)",
    "ClassDef": "a class",
    "Import": "`import`",
    "ImportFrom": "`import`",
    "Global": "`global`",
    "Nonlocal": "`nonlocal`",
    "Delete": "`del`",
    "NamedExpr": "`:=`",
    "Starred": "`*`",
    "Await": "`await`",
    "Yield": "`yield`",
}


def _describe(node: ast.AST) -> str:
    return _DESCRIBE.get(type(node).__name__, f"Python's {type(node).__name__}")


def pointer_params(tree: ast.FunctionDef) -> set[str]:
    """The names whose values reach the pointer of a load, a store or an atomic."""
    return written_pointers(tree, loads=True, helpers=False)


def written_pointers(tree: ast.FunctionDef, loads: bool = False, helpers: bool = True) -> set[str]:
    """The names whose values reach the pointer of a store, an atomic or a helper call's
    arguments (a helper may store through them): the pointer parameters that are written
    (``loads``: those read too; ``helpers``: False leaves helper calls out). A pointer
    expression's pointer is the first term of its sums (``base + rows * stride``: ``base``)."""
    deps: dict[str, set[str]] = {}
    roots: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        deps.setdefault(n.id, set()).update(_pointer_roots(node.value))
        if isinstance(node, ast.Call):
            f = node.func
            fname = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            if fname in ("store", "load" if loads else "store") or fname.startswith("atomic_"):
                args = node.args[:1] or [k.value for k in node.keywords if k.arg == "pointer"]
            elif fname in B.BUILTINS or fname in ("to", "range", "min", "max") or not helpers:
                continue
            else:  # a helper: any argument may be stored through
                args = node.args + [k.value for k in node.keywords]
            for a in args:
                roots |= _pointer_roots(a)
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        todo.extend(deps.get(name, ()))
    return seen


def translate(fn: Any, params: list[Param]) -> Program:
    """The C text of kernel ``fn`` (a ``@jit`` function) and of the helpers it calls, for
    parameters ``params``, laid over the lines of ``fn``'s file."""
    src = fn._tx_source()
    program = Program(src.filename)
    helpers = Helpers({id(fn): fn.__name__})
    Translator(src, params, program, helpers, kernel=True).function(fn.__name__)
    base = len(src.file_lines) + 1
    while helpers.queue:
        helper = helpers.queue.pop(0)
        hsrc = helper._tx_source()
        first = hsrc.first
        last = first + (hsrc.tree.end_lineno or hsrc.tree.lineno) - 1
        own = hsrc.filename == src.filename and not any(first <= n <= last for n in program.pieces)
        offset = 0 if own else max(base, program.last_line() + 1) - first
        hp = [helper_param(hsrc, a) for a in hsrc.tree.args.args]
        t = Translator(hsrc, hp, program, helpers, kernel=False, offset=offset)
        t.function(helpers.done[id(helper)])
    return program


def helper_param(src: FunctionSource, a: ast.arg) -> Param:
    """A helper's parameter: ``tl.constexpr`` -> ``const i32``, a dtype annotation -> that
    scalar type, else ``tile`` (the argument's dtype and shape)."""
    if a.annotation is not None:
        text = ast.unparse(a.annotation)
        if text.endswith("constexpr"):
            return Param(a.arg, "constexpr", "i32")
        d = B.DTYPE_OBJECTS.get(text.rsplit(".", 1)[-1])
        if d is not None:
            return Param(a.arg, "scalar", d.tx)
    return Param(a.arg, "scalar", "tile")


def _pointer_roots(node: ast.expr) -> set[str]:
    """The names that may be the pointer of pointer expression ``node``."""
    if isinstance(node, ast.Name):
        return {node.id}
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
        left = _pointer_roots(node.left)
        return left if left or isinstance(node.op, ast.Sub) else _pointer_roots(node.right)
    if isinstance(node, ast.Subscript):
        return _pointer_roots(node.value)
    if isinstance(node, ast.IfExp):
        return _pointer_roots(node.body) | _pointer_roots(node.orelse)
    if isinstance(node, ast.Call) and getattr(node.func, "attr", "") in (
        "where",
        "multiple_of",
        "max_contiguous",
        "broadcast_to",
        "reshape",
        "expand_dims",
    ):
        args = node.args[1:] if node.func.attr == "where" else node.args[:1]  # type: ignore[attr-defined]
        return set().union(*(_pointer_roots(a) for a in args))
    return set()
