"""The NumPy interpreter against NumPy references, on kernels written in the language.

Each test builds a kernel from its text (``teeny_tx.parse`` + ``lower.build.builder``), runs it with
``teeny_tx.interpreter.run`` on random inputs and compares with an independent NumPy reference
written with C's semantics (truncating division, wrapping integers, fmax/fmin).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from teeny_tx.dtypes import from_numpy
from teeny_tx.errors import InterpreterError, LaunchError
from teeny_tx.interp import interpreter
from teeny_tx.lower.build.builder import Spec, build_kernel
from teeny_tx.parse import parse

BF16 = np.dtype(ml_dtypes.bfloat16)
FLOATS = [np.dtype(np.float32), np.dtype(np.float16), BF16]
RNG = np.random.default_rng(20261129)


def build(src: str, arrays: dict, index64: bool = False, **constexprs):
    unit = parse(src, "kernels/t.c")
    (name,) = unit.kernels()
    dtypes = tuple((k, from_numpy(a.dtype)) for k, a in arrays.items() if isinstance(a, np.ndarray))
    spec = Spec(constexprs=tuple(constexprs.items()), pointer_dtypes=dtypes, index64=index64)
    return build_kernel(unit, name, spec)


def launch(src: str, grid, args: dict, index64: bool = False, **constexprs) -> None:
    grid = tuple(grid) + (1,) * (3 - len(grid))
    interpreter.run(build(src, args, index64, **constexprs), grid, args)


def random(n: int, dtype, low=-10.0, high=10.0) -> np.ndarray:
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return RNG.random(n) < 0.5
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return RNG.integers(info.min, info.max, n, endpoint=True, dtype=np.int64).astype(dtype)
    return RNG.uniform(low, high, n).astype(dtype)


def as64(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float64) if x.dtype.kind == "f" or x.dtype == BF16 else x.astype(np.int64)


def assert_same(got: np.ndarray, expected: np.ndarray) -> None:
    """Equal dtypes and values, NaN equal to NaN (bf16 included: compared as f64)."""
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(as64(got), as64(expected))


VECTOR_ADD = """
kernel vector_add(const any *a, const any *b, any *out, i32 n, const i32 BLOCK)
{
    i32 pid = program_id(0);
    tile offs = pid * BLOCK + arange(0, BLOCK);
    tile mask = offs < n;
    tile x = load(a + offs, mask, 0.0f);
    tile y = load(b + offs, mask, 0.0f);
    store(out + offs, x + y, mask);
}
"""


# ---------------------------------------------------------------- memory and grids


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("n", [1, 7, 1001, 2**20 + 3])
def test_vector_add(n, dtype):
    a, b = random(n, dtype), random(n, dtype)
    out = np.full(n, np.nan, dtype)
    launch(VECTOR_ADD, [-(-n // 1024)], dict(a=a, b=b, out=out, n=n), BLOCK=1024)
    assert_same(out, (as64(a) + as64(b)).astype(dtype))


def test_vector_add_of_a_million_elements():
    """One run over 1025 programs (its time is measured by bench/bench_cpu_paths.py, not
    asserted here: a wall-clock bound depends on the machine)."""
    n = 2**20 + 3
    a, b, out = random(n, np.float32), random(n, np.float32), np.zeros(n, np.float32)
    kernel = build(VECTOR_ADD, dict(a=a, b=b, out=out), BLOCK=1024)
    interpreter.run(kernel, (1025, 1, 1), dict(a=a, b=b, out=out, n=n))
    np.testing.assert_array_equal(out, a + b)


STRIDED = """
kernel scale(const any *x, any *out, i32 n, i32 sx, i32 so, const i32 BLOCK)
{
    tile offs = program_id(0) * BLOCK + arange(0, BLOCK);
    tile mask = offs < n;
    store(out + offs * so, load(x + offs * sx, mask) * 2, mask);
}
"""


@pytest.mark.parametrize("view", ["x[::3]", "x[5:]", "x[7::2]", "x[::-2]"])
def test_views_with_stride_parameter(view):
    x = random(1001, np.float32)
    v = eval(view, {"x": x})
    out = np.full(2 * v.size, -1.0, np.float32)
    o = out[1::2]
    launch(
        STRIDED,
        [-(-v.size // 64)],
        dict(x=v, out=o, n=v.size, sx=v.strides[0] // 4, so=2),
        BLOCK=64,
    )
    np.testing.assert_array_equal(o, v * 2)
    np.testing.assert_array_equal(out[0::2], -1.0)  # the other half of the allocation untouched


def test_rows_of_a_2d_view_on_a_2d_grid():
    src = """
    kernel copy_rows(const any *x, any *out, i32 cols, i32 sx, i32 so, const i32 BLOCK)
    {
        i32 row = program_id(1);
        tile offs = program_id(0) * BLOCK + arange(0, BLOCK);
        tile mask = offs < cols;
        store(out + row * so + offs, load(x + row * sx + offs, mask) + 1, mask);
    }
    """
    x = random(50 * 40, np.float16).reshape(50, 40)
    v = x[3:40:2, 5:37]
    out = np.zeros((v.shape[0], 64), np.float16)
    args = dict(x=v, out=out, cols=v.shape[1], sx=v.strides[0] // 2, so=64)
    launch(src, [2, v.shape[0]], args, BLOCK=16)
    np.testing.assert_array_equal(out[:, : v.shape[1]], v + np.float16(1))
    assert not out[:, v.shape[1] :].any()


def test_negative_offsets_reach_the_start_of_the_allocation():
    src = """
    kernel back(const any *x, any *out, i32 shift, const i32 BLOCK)
    {
        tile offs = arange(0, BLOCK);
        store(out + offs, load(x + offs - shift));
    }
    """
    x = random(32, np.float32)
    out = np.zeros(8, np.float32)
    launch(src, [1], dict(x=x[5:], out=out, shift=5), BLOCK=8)
    np.testing.assert_array_equal(out, x[:8])
    with pytest.raises(
        InterpreterError, match=r"lane 0 accesses offset -6 from 'x'.*offsets -5\.\.26"
    ):
        launch(src, [1], dict(x=x[5:], out=out, shift=6), BLOCK=8)


def test_masked_load_takes_other():
    src = """
    kernel k(const any *a, any *out, any *out2, i32 n, const i32 BLOCK)
    {
        tile offs = arange(0, BLOCK);
        store(out + offs, load(a + offs, offs < n, -1.5f));
        store(out2 + offs, load(a + offs, offs < n, (f32)offs * 2));
    }
    """
    a = random(10, np.float32)
    out, out2 = np.zeros(16, np.float32), np.zeros(16, np.float32)
    launch(src, [1], dict(a=a, out=out, out2=out2, n=10), BLOCK=16)
    np.testing.assert_array_equal(out, np.concatenate([a, np.full(6, -1.5, np.float32)]))
    np.testing.assert_array_equal(out2, np.concatenate([a, np.arange(10, 16) * 2.0]))


def test_scalar_loads_and_stores():
    src = """
    kernel k(const any *x, any *out, any *first, i32 n)
    {
        i32 pid = program_id(0);
        f32 v = load(x + pid * 2);
        f32 w = load(x + pid * 2 + 1, pid < n - 1, 100.0f);
        store(out + pid, v * w + (f32)num_programs(0));
        store(first, v, pid == 0);
    }
    """
    x = random(9, np.float32)
    out, first = np.zeros(5, np.float32), np.zeros(1, np.float32)
    launch(src, [5], dict(x=x, out=out, first=first, n=5))
    w = np.append(x[1::2], np.float32(100))
    np.testing.assert_array_equal(out, x[0::2] * w + np.float32(5))
    assert first[0] == x[0]


def test_duplicate_store_offsets_last_lane_wins():
    src = """
    kernel k(any *out, const i32 BLOCK)
    {
        tile offs = arange(0, BLOCK);
        store(out + (offs >> 2), offs);
    }
    """
    out = np.zeros(4, np.int32)
    launch(src, [1], dict(out=out), BLOCK=16)
    np.testing.assert_array_equal(out, [3, 7, 11, 15])


def test_programs_run_x_fastest():
    src = """
    kernel order(any *log)
    {
        i32 i = load(log);
        store(log + 1 + i, program_id(0) + 10 * program_id(1) + 100 * program_id(2));
        store(log, i + 1);
    }
    """
    log = np.zeros(1 + 2 * 3 * 2, np.int32)
    launch(src, [2, 3, 2], dict(log=log))
    assert log[0] == 12
    expected = [x + 10 * y + 100 * z for z in range(2) for y in range(3) for x in range(2)]
    np.testing.assert_array_equal(log[1:], expected)


@pytest.mark.parametrize("index64", [False, True])
def test_index_width_and_scalar_wrap(index64):
    src = """
    kernel k(any *out, i32 n)
    {
        i32 pid = program_id(0);
        store(out + pid, pid * 1500000000 + n);
    }
    """
    out = np.zeros(3, np.int64)
    launch(src, [3], dict(out=out, n=2**32 + 5), index64=index64)
    pid = np.arange(3, dtype=np.int64)
    n = 2**32 + 5 if index64 else 5
    expected = pid * 1500000000 + n
    np.testing.assert_array_equal(out, expected if index64 else expected.astype(np.int32))


def test_where_between_pointers():
    src = """
    kernel k(const f32 *a, const f32 *b, f32 *out, i32 pick_a, const i32 BLOCK)
    {
        tile offs = arange(0, BLOCK);
        tile p = where(pick_a != 0, a + offs, b + offs);
        store(out + offs, load(p));
    }
    """
    x = random(16, np.float32)
    out = np.zeros(8, np.float32)
    launch(src, [1], dict(a=x[:8], b=x[8:], out=out, pick_a=0), BLOCK=8)
    np.testing.assert_array_equal(out, x[8:])
    launch(src, [1], dict(a=x[:8], b=x[8:], out=out, pick_a=1), BLOCK=8)
    np.testing.assert_array_equal(out, x[:8])


# ---------------------------------------------------------------- errors and memory safety

OOB = """
kernel k(const any *a, any *out, i32 n, const i32 BLOCK)
{
    tile offs = program_id(0) * BLOCK + arange(0, BLOCK);
    tile x = load(a + offs, offs < n);
    store(out + offs, x, offs < n);
}
"""


def test_unmasked_out_of_bounds_load_raises_with_location():
    src = OOB.replace("load(a + offs, offs < n)", "load(a + offs)")
    a, out = random(20, np.float32), np.zeros(20, np.float32)
    with pytest.raises(InterpreterError) as info:
        launch(src, [3], dict(a=a, out=out, n=20), BLOCK=8)
    message = str(info.value)
    assert message.startswith("kernels/t.c:5:14: error: load out of bounds in program (2, 0, 0)")
    assert "lane 4 accesses offset 20 from 'a'" in message
    assert "tile x = load(a + offs);" in message and "\n                 ^" in message


def test_unmasked_out_of_bounds_store_raises_and_writes_nothing():
    src = OOB.replace("store(out + offs, x, offs < n)", "store(out + offs, x)")
    a = random(24, np.float32)
    out = np.zeros(20, np.float32)
    with pytest.raises(
        InterpreterError, match=r"kernels/t\.c:6:5: .*store out of bounds in program \(2, 0, 0\)"
    ):
        launch(src, [3], dict(a=a, out=out, n=20), BLOCK=8)
    np.testing.assert_array_equal(out[:16], a[:16])  # programs 0 and 1 ran
    assert not out[16:].any()  # program 2 wrote none of its lanes


def test_masked_out_of_bounds_lanes_are_fine():
    a, out = random(20, np.float32), np.zeros(20, np.float32)
    launch(OOB, [3], dict(a=a, out=out, n=20), BLOCK=8)
    np.testing.assert_array_equal(out, a)


def test_a_wrong_kernel_never_writes_outside_the_allocation():
    arena = np.zeros(64, np.float32)
    a = random(64, np.float32)
    src = """
    kernel k(const any *a, any *out, i32 shift, const i32 BLOCK)
    {
        tile offs = arange(0, BLOCK) + shift;
        store(out + offs, load(a + arange(0, BLOCK)));
    }
    """
    for shift in (-1, 57, 1 << 30, -(1 << 31)):
        with pytest.raises(InterpreterError, match="store out of bounds"):
            launch(src, [1], dict(a=a, out=arena[:32], shift=shift), BLOCK=8)
    assert not arena.any()
    launch(src, [1], dict(a=a, out=arena[:32], shift=40), BLOCK=8)  # inside the allocation
    np.testing.assert_array_equal(arena[40:48], a[:8])


def test_store_into_read_only_array_raises():
    a = random(8, np.float32)
    out = np.zeros(8, np.float32)
    out.flags.writeable = False
    with pytest.raises(InterpreterError, match="read-only array 'out'"):
        launch(OOB, [1], dict(a=a, out=out, n=8), BLOCK=8)


def test_missing_argument_and_bad_grid():
    a, out = random(8, np.float32), np.zeros(8, np.float32)
    kernel = build(OOB, dict(a=a, out=out), BLOCK=8)
    with pytest.raises(LaunchError, match="missing argument 'n'"):
        interpreter.run(kernel, (1, 1, 1), dict(a=a, out=out))
    with pytest.raises(LaunchError, match="NumPy array"):
        interpreter.run(kernel, (1, 1, 1), dict(a=a, out=[0.0] * 8, n=8))
    with pytest.raises(LaunchError, match="grid"):
        interpreter.run(kernel, (1, -1, 1), dict(a=a, out=out, n=8))


# ---------------------------------------------------------------- elementwise operations

BINARY = """
kernel k(const any *a, const any *b, any *out, const i32 BLOCK)
{
    tile offs = arange(0, BLOCK);
    tile x = load(a + offs);
    tile y = load(b + offs);
    store(out + offs, EXPR);
}
"""


def run_binary(expr: str, x: np.ndarray, y: np.ndarray, out_dtype) -> np.ndarray:
    out = np.zeros(x.size, out_dtype)
    launch(BINARY.replace("EXPR", expr), [1], dict(a=x, b=y, out=out), BLOCK=x.size)
    return out


def c_div(x, y):
    q = (np.abs(x) // np.abs(y)) * np.sign(x) * np.sign(y)
    return q, x - q * y


INT_OPS = {
    "x + y": lambda x, y: x + y,
    "x - y": lambda x, y: x - y,
    "x * y": lambda x, y: x * y,
    "x / y": lambda x, y: c_div(x, y)[0],
    "x % y": lambda x, y: c_div(x, y)[1],
    "x & y": lambda x, y: x & y,
    "x | y": lambda x, y: x | y,
    "x ^ y": lambda x, y: x ^ y,
    "maximum(x, y)": np.maximum,
    "minimum(x, y)": np.minimum,
    "-x": lambda x, y: -x,
    "~x": lambda x, y: ~x,
    "abs(x)": lambda x, y: np.abs(x),
    "where(x < y, x * 2, y)": lambda x, y: np.where(x < y, x * 2, y),
}


@pytest.mark.parametrize(
    "dtype", [np.int32, np.int8, np.uint8, np.int64, np.uint32], ids=lambda d: d.__name__
)
@pytest.mark.parametrize("expr", list(INT_OPS))
def test_integer_ops_wrap_and_truncate_like_c(expr, dtype):
    x, y = random(512, dtype), random(512, dtype)
    y[y == 0] = 1
    if np.dtype(dtype).kind == "i":
        y[:8] = [-7, 7, -7, 7, -1, 3, -3, 2]  # negative operands of / and %
        x[:8] = [-20, -20, 20, 20, -5, -5, 5, -9]
    expected = INT_OPS[expr](x.astype(object), y.astype(object))
    bits = np.dtype(dtype).itemsize * 8
    wrapped = np.array([int(v) & ((1 << bits) - 1) for v in expected], dtype=np.uint64).astype(
        dtype
    )
    np.testing.assert_array_equal(run_binary(expr, x, y, dtype), wrapped)


@pytest.mark.parametrize(
    "dtype", [np.int32, np.int8, np.uint8, np.uint16], ids=lambda d: d.__name__
)
def test_shifts(dtype):
    bits = np.dtype(dtype).itemsize * 8
    x = random(256, dtype)
    y = RNG.integers(0, bits, 256).astype(dtype)
    left = (
        ((x.astype(object) << y.astype(object)) & ((1 << bits) - 1)).astype(np.uint64).astype(dtype)
    )
    np.testing.assert_array_equal(run_binary("x << y", x, y, dtype), left)
    np.testing.assert_array_equal(
        run_binary("x >> y", x, y, dtype), (x.astype(np.int64) >> y).astype(dtype)
    )


COMPARE = {
    "<": np.less,
    "<=": np.less_equal,
    ">": np.greater,
    ">=": np.greater_equal,
    "==": np.equal,
    "!=": np.not_equal,
}


@pytest.mark.parametrize("dtype", [np.dtype(np.int32), np.dtype(np.uint8), *FLOATS], ids=str)
@pytest.mark.parametrize("op", list(COMPARE))
def test_comparisons(op, dtype):
    x, y = random(256, dtype), random(256, dtype)
    y[::4] = x[::4]
    if dtype.kind == "f" or dtype == BF16:
        x[::7] = np.nan
    np.testing.assert_array_equal(
        run_binary(f"x {op} y", x, y, np.bool_), COMPARE[op](as64(x), as64(y))
    )


FLOAT_OPS = {
    "x + y": np.add,
    "x - y": np.subtract,
    "x * y": np.multiply,
    "x / y": np.divide,
    "x % y": np.fmod,
    "-x": lambda x, y: -x,
    "abs(x)": lambda x, y: np.abs(x),
    "maximum(x, y)": np.fmax,
    "minimum(x, y)": np.fmin,
    "where(x > y, x, y * 3)": lambda x, y: np.where(x > y, x, y * 3),
    "floor(x)": lambda x, y: np.floor(x),
    "ceil(x)": lambda x, y: np.ceil(x),
}


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("expr", list(FLOAT_OPS))
def test_float_ops_round_once(expr, dtype):
    x, y = random(512, dtype), random(512, dtype)
    x[:4], y[:4] = [np.nan, 1.0, np.nan, -2.0], [3.0, np.nan, np.nan, -2.0]  # NaN operands
    expected = FLOAT_OPS[expr](as64(x), as64(y)).astype(dtype)
    assert_same(run_binary(expr, x, y, dtype), expected)


MATH = {
    "exp": (np.exp, -5, 5),
    "exp2": (np.exp2, -5, 5),
    "log": (np.log, 0.01, 100),
    "log2": (np.log2, 0.01, 100),
    "sqrt": (np.sqrt, 0, 100),
    "rsqrt": (lambda v: 1 / np.sqrt(v), 0.01, 100),
    "sin": (np.sin, -10, 10),
    "cos": (np.cos, -10, 10),
    "tanh": (np.tanh, -5, 5),
    "erf": (np.vectorize(__import__("math").erf), -3, 3),
    "sigmoid": (lambda v: 1 / (1 + np.exp(-v)), -10, 10),
}


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("fn", list(MATH))
def test_math_functions(fn, dtype):
    ref, low, high = MATH[fn]
    x = random(256, dtype, low, high)
    got = run_binary(f"{fn}(x)", x, x, dtype)
    rtol = {np.dtype(np.float32): 1e-6, np.dtype(np.float16): 1e-3}.get(dtype, 8e-3)
    np.testing.assert_allclose(as64(got), ref(as64(x)), rtol=rtol, atol=rtol)


def test_fma_pow_and_logic():
    x, y = random(128, np.float32, 0.5, 4), random(128, np.float32, -2, 2)
    fma = (as64(x) * as64(y) + as64(y)).astype(np.float32)
    np.testing.assert_array_equal(run_binary("fma(x, y, y)", x, y, np.float32), fma)
    np.testing.assert_allclose(
        run_binary("pow(x, y)", x, y, np.float32), x.astype(np.float64) ** y, rtol=1e-6
    )
    logic = {
        "(x > 1) && (y > 0)": (x > 1) & (y > 0),
        "(x > 1) || (y > 0)": (x > 1) | (y > 0),
        "!(x > 1)": ~(x > 1),
        "(x > 1) & (y > 0) | (y < -1)": ((x > 1) & (y > 0)) | (y < -1),
    }
    for expr, expected in logic.items():
        np.testing.assert_array_equal(run_binary(expr, x, y, np.bool_), expected, err_msg=expr)


# ---------------------------------------------------------------- casts

CAST_TYPES = {
    "f32": np.float32,
    "f16": np.float16,
    "bf16": BF16,
    "i32": np.int32,
    "i8": np.int8,
    "u8": np.uint8,
    "bool": np.bool_,
}


def c_cast(x: np.ndarray, to) -> np.ndarray:
    to = np.dtype(to)
    if to == np.bool_:
        return as64(x) != 0
    if to.kind in "iu":
        return np.trunc(as64(x)).astype(np.int64).astype(to)  # wraps like C for integers
    return as64(x).astype(to)


@pytest.mark.parametrize(("src", "dst"), [(s, d) for s in CAST_TYPES for d in CAST_TYPES if s != d])
def test_casts(src, dst):
    s = np.dtype(CAST_TYPES[src])
    if s == np.bool_:
        x = random(256, s)
    elif s.kind in "iu":
        x = RNG.integers(
            0 if s.kind == "u" else -200, 255 if s.itemsize == 1 else 1000, 256
        ).astype(s)
    else:  # floats stay inside every integer target's range (saturation is not compared)
        x = RNG.uniform(0 if dst == "u8" else -127, 127, 256).astype(s)
        x[:3] = [0.0, -0.0, 0.5]
    got = run_binary(f"({dst})x", x, x, CAST_TYPES[dst])
    assert_same(got, c_cast(x, CAST_TYPES[dst]))


# ---------------------------------------------------------------- control flow


def test_for_loop_with_break_continue_and_accumulator():
    src = """
    kernel k(const any *x, any *out, i32 n_iter, i32 stop_at, const i32 BLOCK)
    {
        tile offs = arange(0, BLOCK);
        f32 acc[BLOCK] = 0;
        for (i32 i = 0; i < n_iter; i++) {
            if (i == stop_at)
                break;
            if (i % 3 == 1)
                continue;
            acc += load(x + i * BLOCK + offs);
        }
        store(out + offs, acc);
    }
    """
    x = random(10 * 32, np.float32).reshape(10, 32)
    for n_iter, stop_at in [(10, 100), (10, 7), (0, 100), (10, 0)]:
        out = np.full(32, np.nan, np.float32)
        launch(src, [1], dict(x=x, out=out, n_iter=n_iter, stop_at=stop_at), BLOCK=32)
        rows = [i for i in range(min(n_iter, stop_at)) if i % 3 != 1]
        expected = np.zeros(32, np.float32)
        for i in rows:
            expected += x[i]
        np.testing.assert_array_equal(out, expected)


def test_while_and_do_loops():
    src = """
    kernel k(any *out, i32 limit)
    {
        i32 i = 0;
        i32 steps = 0;
        while (i < limit) {
            i += 2;
            steps += 1;
        }
        i32 runs = 0;
        do {
            runs += 1;
        } while (runs < limit);
        store(out, steps);
        store(out + 1, runs);
    }
    """
    for limit, expected in [(7, [4, 7]), (0, [0, 1]), (-3, [0, 1])]:
        out = np.zeros(2, np.int32)
        launch(src, [1], dict(out=out, limit=limit))
        np.testing.assert_array_equal(out, expected)


def test_if_on_runtime_scalar_and_early_return():
    src = """
    kernel k(const any *x, any *out, i32 n_programs, i32 negate, const i32 BLOCK)
    {
        i32 pid = program_id(0);
        if (pid >= n_programs)
            return;
        tile offs = pid * BLOCK + arange(0, BLOCK);
        tile v = load(x + offs);
        if (negate) {
            v = -v;
        } else {
            v = v * 2;
        }
        store(out + offs, v);
    }
    """
    x = random(64, np.float32)
    for negate in (0, 1):
        out = np.zeros(64, np.float32)
        launch(src, [8], dict(x=x, out=out, n_programs=5, negate=negate), BLOCK=8)
        np.testing.assert_array_equal(out[:40], -x[:40] if negate else x[:40] * 2)
        assert not out[40:].any()


def test_cdiv_of_integers():
    x = RNG.integers(0, 10_000, 256).astype(np.int32)
    y = RNG.integers(1, 100, 256).astype(np.int32)
    np.testing.assert_array_equal(run_binary("cdiv(x, y)", x, y, np.int32), -(-x // y))
