"""The NumPy interpreter: one kernel specialisation run program by program on the CPU.

Input: an ``ir.Kernel`` (before or after the layout pass: layouts are ignored), a grid and the
runtime arguments (NumPy arrays for pointers, Python numbers for scalars). Output: the kernel's
stores, written into the arrays; an :class:`~teeny_tx.errors.InterpreterError` pointing at the
kernel line when an unmasked lane leaves its array's allocation.

The IR is compiled once into Python closures (one per node, dispatched through ``expr_<Node>``,
``op_<name>`` and ``stmt_<Node>`` methods), then run for each program, x fastest. Tiles are
NumPy arrays of their static shape and dtype, scalars 0-d arrays; elementwise operations are the
op table's NumPy entries (``ops.elementwise_numpy``), so both backends share one definition.
A pointer is a flat view of its argument's whole allocation in the pointee dtype plus element
offsets, so pointer arithmetic and bounds checks behave as on device memory.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import CompileError, InterpreterError, LaunchError, Location
from ..lower import ir
from ..lower.names import COMBINE_ARGS
from ..lower.ops.table import OPS, elementwise_numpy
from ..lower.ops.typing import convert_value
from .memory import Pointer, Registry, bind_pointer

Value = Any
Eval = Callable[["_State"], Value]
_BREAK, _CONTINUE, _RETURN = "break", "continue", "return"  # statement outcomes (None: go on)


# ---------------------------------------------------------------- memory


def _out_of_bounds(what: str, ptr: Pointer, off: np.ndarray, mask, state: _State, loc: Location):
    """An InterpreterError when a masked-on lane's offset leaves the buffer, else None."""
    bad = (off < 0) | (off >= len(ptr.buf))
    if mask is not None:
        bad &= mask
    if not bad.any():
        return None
    flat = int(np.argmax(bad.reshape(-1)))
    if off.ndim == 0:
        lane = f"the scalar {what}"
    else:
        index = tuple(int(i) for i in np.unravel_index(flat, off.shape))
        lane = f"lane {index[0] if len(index) == 1 else index}"
    arg, n = ptr.arg, len(ptr.buf)
    message = (
        f"{what} out of bounds in program {state.pid_tuple}: {lane} accesses offset "
        f"{int(off.reshape(-1)[flat]) - arg.base} from '{arg.name}', outside its allocation "
        f"(offsets {-arg.base}..{n - arg.base - 1})"
    )
    return _error(message, loc, f"mask the {what}, e.g. with mask = offsets < n")


# ---------------------------------------------------------------- per-program state


class _State:
    __slots__ = ("env", "pid", "pid_tuple", "nprog", "registry", "buffers")

    def __init__(self, nprog: tuple, registry: Registry | None = None, buffers=None):
        self.env: dict[str, Value] = {}
        self.pid: tuple = ()
        self.pid_tuple: tuple[int, ...] = ()
        self.nprog = nprog
        self.registry = registry or Registry()  # the launch's arrays, by address
        self.buffers: dict = {} if buffers is None else buffers


# ---------------------------------------------------------------- IR → closures


class _Compiler:
    def expr(self, e: ir.Expr) -> Eval:
        return _method(self, "expr_", type(e).__name__, e.loc)(e)

    def expr_Const(self, e: ir.Const) -> Eval:
        if e.type.is_pointer:
            raise _unsupported("a constant pointer", e.loc)
        value = np.full(e.type.shape, e.value, dtype=e.type.scalar.np)
        return lambda s: value

    def expr_Var(self, e: ir.Var) -> Eval:
        name = e.name
        return lambda s: s.env[name]

    def expr_Op(self, e: ir.Op) -> Eval:
        op = OPS.get(e.op)
        method = op.interp_method if op is not None else None
        return getattr(self, method)(e) if method is not None else self.elementwise(e)

    def elementwise(self, e: ir.Op) -> Eval:
        if e.op not in ("cast", "cast_rtz") and (e.op not in OPS or OPS[e.op].numpy is None):
            raise _unsupported(f"operation '{e.op}'", e.loc)
        args = tuple(self.expr(a) for a in e.args)
        return lambda s: elementwise_numpy(e, [f(s) for f in args])

    # structural ops and pointer arithmetic

    def op_program_id(self, e: ir.Op) -> Eval:
        axis = e.attr("axis")
        return lambda s: s.pid[axis]

    def op_num_programs(self, e: ir.Op) -> Eval:
        axis = e.attr("axis")
        return lambda s: s.nprog[axis]

    def op_arange(self, e: ir.Op) -> Eval:
        value = np.arange(e.attr("start"), e.attr("end"), dtype=e.type.scalar.np)
        return lambda s: value

    def op_full(self, e: ir.Op) -> Eval:
        (f,) = (self.expr(a) for a in e.args)
        shape, dtype = e.type.shape, e.type.scalar.np
        return lambda s: np.full(shape, f(s), dtype=dtype)

    # shapes: the same values (or pointer offsets) rearranged

    def reshaped(self, e: ir.Op, fn: Callable[[np.ndarray], np.ndarray]) -> Eval:
        (f,) = (self.expr(a) for a in e.args)

        def run(s: _State) -> Value:
            v = f(s)
            return Pointer(v.buf, fn(v.off), v.arg) if isinstance(v, Pointer) else fn(v)

        return run

    def op_broadcast(self, e: ir.Op) -> Eval:
        shape = e.type.shape
        return self.reshaped(e, lambda a: np.broadcast_to(a, shape))

    def op_expand_dims(self, e: ir.Op) -> Eval:
        axis = e.attr("axis")
        return self.reshaped(e, lambda a: np.expand_dims(a, axis))

    def op_reshape(self, e: ir.Op) -> Eval:
        shape = e.type.shape
        return self.reshaped(e, lambda a: np.reshape(a, shape))

    def op_permute(self, e: ir.Op) -> Eval:
        dims = e.attr("dims")
        return self.reshaped(e, lambda a: np.transpose(a, dims))

    def op_convert_layout(self, e: ir.Op) -> Eval:
        return self.expr(e.args[0])

    # reductions: the op's combine function applied along one axis

    _REDUCE = {
        "sum": lambda x, axis, dtype: np.sum(x, axis=axis, dtype=dtype),
        "max": lambda x, axis, dtype: np.fmax.reduce(x, axis=axis),
        "min": lambda x, axis, dtype: np.fmin.reduce(x, axis=axis),
        "xor_sum": lambda x, axis, dtype: np.bitwise_xor.reduce(x, axis=axis),
        "reduce_or": lambda x, axis, dtype: np.bitwise_or.reduce(x, axis=axis),
        "argmax": lambda x, axis, dtype: np.argmax(x, axis=axis),
        "argmin": lambda x, axis, dtype: np.argmin(x, axis=axis),
    }

    def op_reduce(self, e: ir.Op) -> Eval:
        if e.attr("index") is not None:
            return self.tuple_reduce(e)
        (f,) = (self.expr(a) for a in e.args)
        axis, keep, kind = e.attr("axis"), e.attr("keep_dims"), e.attr("kind")
        dtype = e.type.scalar.np
        reduce = self._REDUCE.get(kind) or self.folder(e.attr("combine"))

        def run(s: _State) -> Value:
            with np.errstate(all="ignore"):
                out = np.asarray(reduce(f(s), axis, dtype)).astype(dtype, copy=False)
            return np.expand_dims(out, axis) if keep else out

        return run

    def op_scan(self, e: ir.Op) -> Eval:
        if e.attr("index") is not None:
            return self.tuple_scan(e)
        (f,) = (self.expr(a) for a in e.args)
        axis, kind, dtype = e.attr("axis"), e.attr("kind"), e.type.scalar.np
        if kind == "sum":
            scan = lambda x: np.cumsum(x, axis=axis, dtype=dtype)  # noqa: E731
        elif kind == "prod":
            scan = lambda x: np.cumprod(x, axis=axis, dtype=dtype)  # noqa: E731
        else:
            fn = self.expr(e.attr("combine"))

            def scan(x):
                state, parts = _State(()), np.moveaxis(x, axis, 0)
                out = [parts[0]]
                for part in parts[1:]:
                    state.env[COMBINE_ARGS[0]], state.env[COMBINE_ARGS[1]] = out[-1], part
                    out.append(np.asarray(fn(state)).astype(dtype, copy=False))
                return np.moveaxis(np.stack(out), 0, axis)

        def run(s: _State) -> Value:
            with np.errstate(all="ignore"):
                return np.asarray(scan(f(s))).astype(dtype, copy=False)

        return run

    # reductions and scans of tuples: item ``index`` of the tuple the combiner folds

    def tuple_combine(self, e: ir.Op) -> Callable[[tuple, tuple], tuple]:
        fns = [self.expr(c) for c in e.attr("combine")]
        dtypes = [a.type.scalar.np for a in e.args]
        names = [(f"{COMBINE_ARGS[0]}.v{k}", f"{COMBINE_ARGS[1]}.v{k}") for k in range(len(fns))]
        state = _State(())

        def combine(x: tuple, y: tuple) -> tuple:
            for (a, b), u, v in zip(names, x, y, strict=True):
                state.env[a], state.env[b] = u, v
            return tuple(
                np.asarray(f(state)).astype(d, copy=False) for f, d in zip(fns, dtypes, strict=True)
            )

        return combine

    def tuple_reduce(self, e: ir.Op) -> Eval:
        xs = [self.expr(a) for a in e.args]
        axis, index, combine = e.attr("axis"), e.attr("index"), self.tuple_combine(e)

        def run(s: _State) -> Value:
            parts = [np.moveaxis(np.asarray(f(s)), axis, 0) for f in xs]
            with np.errstate(all="ignore"):
                acc = tuple(p[0] for p in parts)
                for t in range(1, parts[0].shape[0]):
                    acc = combine(acc, tuple(p[t] for p in parts))
            return np.asarray(acc[index])

        return run

    def tuple_scan(self, e: ir.Op) -> Eval:
        xs = [self.expr(a) for a in e.args]
        axis, index, combine = e.attr("axis"), e.attr("index"), self.tuple_combine(e)

        def run(s: _State) -> Value:
            parts = [np.moveaxis(np.asarray(f(s)), axis, 0) for f in xs]
            with np.errstate(all="ignore"):
                acc = tuple(p[0] for p in parts)
                out = [acc[index]]
                for t in range(1, parts[0].shape[0]):
                    acc = combine(acc, tuple(p[t] for p in parts))
                    out.append(acc[index])
            return np.moveaxis(np.stack(out), 0, axis)

        return run

    def op_cat(self, e: ir.Op) -> Eval:
        a, b = (self.expr(x) for x in e.args)
        axis = e.attr("axis")
        return lambda s: np.concatenate([a(s), b(s)], axis=axis)

    def op_join(self, e: ir.Op) -> Eval:
        a, b = (self.expr(x) for x in e.args)
        return lambda s: np.stack([a(s), b(s)], axis=-1)

    def op_split(self, e: ir.Op) -> Eval:
        index = e.attr("index")
        return self.reshaped(e, lambda x: x[..., index])

    def op_dot(self, e: ir.Op) -> Eval:
        """a @ b + acc, products exact in f64 (inputs rounded first for TF32), then the dtype."""
        a, b, acc = (self.expr(x) for x in e.args)
        precision, dtype = e.attr("precision"), e.type.scalar.np

        def run(s: _State) -> Value:
            x, y = np.asarray(a(s)), np.asarray(b(s))
            if x.dtype.kind in "iu":
                product = np.matmul(x.astype(np.int64), y.astype(np.int64))
                return (product + np.asarray(acc(s), np.int64)).astype(dtype)
            x64, y64 = x.astype(np.float64), y.astype(np.float64)
            if precision == "TF32":
                product = np.matmul(_tf32(x64), _tf32(y64))
            elif precision == "TF32X3":
                xb, yb = _tf32(x64), _tf32(y64)
                xs, ys = _tf32(x64 - xb), _tf32(y64 - yb)
                product = np.matmul(xb, yb) + np.matmul(xb, ys) + np.matmul(xs, yb)
            else:
                product = np.matmul(x64, y64)
            return (product + np.asarray(acc(s), np.float64)).astype(dtype)

        return run

    def op_flip(self, e: ir.Op) -> Eval:
        axis = e.attr("axis")
        return self.reshaped(e, lambda a: np.flip(a, axis))

    def op_device_print(self, e: ir.Op) -> Eval:
        values = [self.expr(a) for a in e.args]
        prefix = e.attr("prefix").replace("%%", "%")  # a printf format (lower/build/debug_ops.py)

        def show(s: _State) -> None:
            arrays = [np.asarray(v(s)) for v in values]
            pid = s.pid_tuple
            if not e.type.is_tile:
                print(f"pid {pid} {prefix} {' '.join(str(a[()]) for a in arrays)}")
                return
            for index in np.ndindex(*e.type.shape):
                print(f"pid {pid} idx {index} {prefix} {' '.join(str(a[index]) for a in arrays)}")

        return show

    def op_assume(self, e: ir.Op) -> Eval:
        """The promise checked: a false one is undefined behaviour on the GPU, an error here."""
        (cond,) = (self.expr(a) for a in e.args)
        text = e.attr("text").replace("%%", "%")

        def check(s: _State) -> None:
            ok = np.asarray(cond(s))
            if not ok.all():
                where = "" if ok.ndim == 0 else f" at {tuple(int(i) for i in np.argwhere(~ok)[0])}"
                raise _error(
                    f"assume() does not hold in program {s.pid_tuple}{where}: {text}",
                    e.loc,
                    "the GPU compiles on the promise (undefined behaviour where it fails): "
                    "make it true or drop it",
                )

        return check

    def op_device_assert(self, e: ir.Op) -> Eval:
        (cond,) = (self.expr(a) for a in e.args)
        message = (e.attr("message") or e.attr("text")).replace("%%", "%")

        def check(s: _State) -> None:
            ok = np.asarray(cond(s))
            if not ok.all():
                where = "" if ok.ndim == 0 else f" at {tuple(int(i) for i in np.argwhere(~ok)[0])}"
                raise _error(
                    f"device_assert failed in program {s.pid_tuple}{where}: {message}", e.loc
                )

        return check

    def folder(self, combine: ir.Expr) -> Callable:
        """A user combiner folded left to right along the axis, vectorised over the others."""
        fn = self.expr(combine)

        def fold(x: np.ndarray, axis: int, dtype) -> np.ndarray:
            state = _State(())
            parts = np.moveaxis(x, axis, 0)
            acc = parts[0]
            for part in parts[1:]:
                state.env[COMBINE_ARGS[0]], state.env[COMBINE_ARGS[1]] = acc, part
                acc = np.asarray(fn(state)).astype(dtype, copy=False)
            return acc

        return fold

    def op_add(self, e: ir.Op) -> Eval:
        if not e.type.is_pointer:
            return self.elementwise(e)
        ptr, delta = (self.expr(a) for a in e.args)
        return lambda s: ptr(s).moved(delta(s))

    def op_int_to_ptr(self, e: ir.Op) -> Eval:
        """An address read as a pointer: into the array of the launch that holds it."""
        (f,) = (self.expr(a) for a in e.args)
        elem, loc = e.type.pointer.elem, e.loc

        def convert(s: _State) -> Pointer:
            got = s.registry.pointer(np.asarray(f(s)), elem, s.buffers)
            if isinstance(got, str):
                raise _error(
                    f"{got} (program {s.pid_tuple})",
                    loc,
                    "fill the table from arrays the launch is given: its pointer arguments, "
                    "or arrays=[...] of the interpreter's launch (kernel.interpret[grid](..., "
                    "arrays=[a, b, ...]))",
                )
            return got

        return convert

    def op_where(self, e: ir.Op) -> Eval:
        if not e.type.is_pointer:
            return self.elementwise(e)
        cond, a, b = (self.expr(x) for x in e.args)

        def select(s: _State) -> Pointer:
            p, q = a(s), b(s)
            if p.buf is not q.buf:
                raise _unsupported("where() between pointers into different allocations", e.loc)
            return Pointer(p.buf, np.where(cond(s), p.off, q.off), p.arg)

        return select

    def op_load(self, e: ir.Op) -> Eval:
        ptr = self.expr(e.args[0])
        mask = self.expr(e.args[1]) if len(e.args) > 1 else None
        other = self.expr(e.args[2]) if len(e.args) > 2 else None
        shape, dtype, loc = e.type.shape, e.type.scalar.np, e.loc

        def load(s: _State) -> Value:
            p = ptr(s)
            off = np.broadcast_to(p.off, shape)
            m = None if mask is None else np.broadcast_to(mask(s), shape)
            error = _out_of_bounds("load", p, off, m, s, loc)
            if error is not None:
                raise error
            if m is None:
                return np.asarray(p.buf[off])
            fill = np.zeros((), dtype) if other is None else other(s)
            got = p.buf[np.where(m, off, 0)] if len(p.buf) else np.zeros(shape, dtype)
            return np.where(m, got, fill).astype(dtype, copy=False)

        return load

    def op_store(self, e: ir.Op) -> Eval:
        ptr, value = self.expr(e.args[0]), self.expr(e.args[1])
        mask = self.expr(e.args[2]) if len(e.args) > 2 else None
        shape, loc = e.args[0].type.shape, e.loc
        dtype = e.args[0].type.pointer.elem.np

        def store(s: _State) -> None:
            p = ptr(s)
            off = np.broadcast_to(p.off, shape)
            v = np.broadcast_to(np.asarray(value(s)).astype(dtype, copy=False), shape)
            m = None if mask is None else np.broadcast_to(mask(s), shape)
            error = _out_of_bounds("store", p, off, m, s, loc)
            if error is not None:
                raise error
            if not p.buf.flags.writeable:
                raise _error(f"store into the read-only array '{p.arg.name}'", loc)
            if m is None:
                p.buf[off] = v  # duplicate offsets: the last lane wins, as lanes are in order
            else:
                p.buf[off[m]] = v[m]

        return store

    _ATOMIC: dict[str, Callable[[Any, Any], Any]] = {
        "add": lambda old, v: old + v,
        "max": lambda old, v: (
            np.fmax(old, v)
            if old.dtype.kind == "f" or old.dtype.name == "bfloat16"
            else np.maximum(old, v)
        ),
        "min": lambda old, v: (
            np.fmin(old, v)
            if old.dtype.kind == "f" or old.dtype.name == "bfloat16"
            else np.minimum(old, v)
        ),
        "and": np.bitwise_and,
        "or": np.bitwise_or,
        "xor": np.bitwise_xor,
        "xchg": lambda old, v: v,
    }

    def op_atomic(self, e: ir.Op) -> Eval:
        """Lanes in order, one read-modify-write each: duplicate addresses see each other."""
        kind = e.attr("kind")
        n_values = 2 if kind == "cas" else 1
        ptr = self.expr(e.args[0])
        values = [self.expr(a) for a in e.args[1 : 1 + n_values]]
        mask = self.expr(e.args[1 + n_values]) if e.attr("masked") else None
        shape, loc, dtype = e.type.shape, e.loc, e.type.scalar.np
        update = self._ATOMIC.get(kind, _no_update)

        def atomic(s: _State) -> Value:
            p = ptr(s)
            off = np.broadcast_to(p.off, shape)
            vals = [
                np.broadcast_to(np.asarray(v(s)).astype(dtype, copy=False), shape) for v in values
            ]
            m = np.ones(shape, bool) if mask is None else np.broadcast_to(mask(s), shape)
            error = _out_of_bounds(f"atomic_{kind}", p, off, m, s, loc)
            if error is not None:
                raise error
            if not p.buf.flags.writeable:
                raise _error(f"atomic_{kind} on the read-only array '{p.arg.name}'", loc)
            old = np.zeros(shape, dtype)
            flat_old, flat_off, flat_m = old.reshape(-1), off.reshape(-1), m.reshape(-1)
            flat_vals = [v.reshape(-1) for v in vals]
            with np.errstate(all="ignore"):
                for lane in np.flatnonzero(flat_m):
                    current = p.buf[flat_off[lane]]
                    flat_old[lane] = current
                    if kind == "cas":
                        new = flat_vals[1][lane] if current == flat_vals[0][lane] else current
                    else:
                        new = update(np.asarray(current), np.asarray(flat_vals[0][lane]))
                    p.buf[flat_off[lane]] = new
            return old if shape else old[()]

        return atomic

    # statements: each returns None to go on, or one of _BREAK, _CONTINUE, _RETURN

    def block(self, stmts: tuple[ir.Stmt, ...]) -> Callable[[_State], str | None]:
        steps = tuple(_method(self, "stmt_", type(x).__name__, x.loc)(x) for x in stmts)

        def run(s: _State) -> str | None:
            for step in steps:
                outcome = step(s)
                if outcome is not None:
                    return outcome
            return None

        return run

    def stmt_Declare(self, x: ir.Declare):
        if x.init is None:
            zero = np.zeros(x.type.shape, x.type.scalar.np)
            return self._set(x.name, lambda s: zero)
        return self._set(x.name, self.expr(x.init))

    def stmt_Assign(self, x: ir.Assign):
        return self._set(x.name, self.expr(x.value))

    @staticmethod
    def _set(name: str, value: Eval):
        def run(s: _State) -> None:
            s.env[name] = value(s)

        return run

    def stmt_Eval(self, x: ir.Eval):
        f = self.expr(x.expr)

        def run(s: _State) -> None:
            f(s)

        return run

    def stmt_If(self, x: ir.If):
        cond, then, orelse = self.expr(x.cond), self.block(x.then), self.block(x.orelse)
        return lambda s: then(s) if bool(cond(s)) else orelse(s)

    def stmt_Loop(self, x: ir.Loop):
        init, step, body = self.block(x.init), self.block(x.step), self.block(x.body)
        cond = self.expr(x.cond) if x.cond is not None else (lambda s: True)
        test_first = x.kind != "do"

        def run(s: _State) -> str | None:
            init(s)
            if test_first and not bool(cond(s)):
                return None
            while True:
                outcome = body(s)
                if outcome == _RETURN:
                    return _RETURN
                if outcome == _BREAK:
                    return None
                step(s)
                if not bool(cond(s)):
                    return None

        return run

    def stmt_Break(self, x: ir.Break):
        return lambda s: _BREAK

    def stmt_Continue(self, x: ir.Continue):
        return lambda s: _CONTINUE

    def stmt_Return(self, x: ir.Return):
        return lambda s: _RETURN


def _tf32(x: np.ndarray) -> np.ndarray:
    """f32 values rounded to TF32 (10 mantissa bits, round to nearest even), as f64."""
    bits = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0xFFF + ((bits >> 13) & 1)) & 0xFFFFE000
    return rounded.astype(np.uint32).view(np.float32).astype(np.float64)


def _method(compiler: _Compiler, prefix: str, name: str, loc: Location):
    method = getattr(compiler, prefix + name, None)
    if method is None:
        raise _unsupported(f"IR node {name}", loc)
    return method


def _no_update(old: Any, value: Any) -> Any:
    raise AssertionError("atomic_cas has no update function")


def _unsupported(what: str, loc: Location | None) -> InterpreterError:
    return _error(f"the NumPy interpreter does not support {what}", loc)


def _error(message: str, loc: Location | None, hint: str | None = None) -> InterpreterError:
    """An InterpreterError rendered as compile errors are: file:line:col, the line, a caret."""
    return InterpreterError(CompileError(message, loc, hint).render())


# ---------------------------------------------------------------- entry point


def run(
    kernel: ir.Kernel,
    grid: tuple[int, int, int],
    args: Mapping[str, object],
    arrays: Sequence[object] = (),
) -> None:
    """Run ``kernel`` once per program of ``grid`` (x fastest) on NumPy, writing into ``args``.
    ``arrays``: more arrays the kernel reaches through addresses it loads (tables of pointers);
    the pointer arguments are reachable so too."""
    if len(grid) != 3 or any(int(g) < 0 for g in grid):
        raise LaunchError(f"the grid must be three non-negative sizes, got {tuple(grid)}")
    gx, gy, gz = (int(g) for g in grid)
    index = np.dtype(np.int64 if kernel.index64 else np.int32)
    body = _Compiler().block(kernel.body)
    params: dict[str, Value] = {}
    buffers: dict = {}
    registry = Registry()
    for p in kernel.runtime_params:
        if p.name not in args:
            raise LaunchError(f"kernel '{kernel.name}': missing argument '{p.name}'")
        a = args[p.name]
        if p.type.is_pointer:
            params[p.name] = bind_pointer(p.name, a, p.type.pointer.elem, buffers)
            registry.add(p.source_name or p.name, a)
        else:
            value = convert_value(a, p.type.scalar)  # type: ignore[arg-type]  # a number (bound)
            params[p.name] = np.asarray(value, dtype=p.type.scalar.np)
    for k, a in enumerate(arrays):
        registry.add(f"arrays[{k}]", a)
    state = _State(tuple(np.asarray(g, dtype=index) for g in (gx, gy, gz)), registry, buffers)
    with np.errstate(all="ignore"):
        for z in range(gz):
            for y in range(gy):
                for x in range(gx):
                    state.env = dict(params)
                    state.pid_tuple = (x, y, z)
                    state.pid = (np.asarray(x, index), np.asarray(y, index), np.asarray(z, index))
                    body(state)
