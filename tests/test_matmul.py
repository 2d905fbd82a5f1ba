"""kernels/matmul.c and teeny_tx.linalg on the NumPy interpreter: matmul with every epilogue
(alpha, bias, each activation, out_dtype), row- and column-major operands and views at an
offset, bmm, the linear layer forward and backward, explicit f32 precision (IEEE against TF32),
the grouped program order, the K loop's shape (the one the software pipeliner recognises),
the tile heuristic, and argument errors. Small shapes and 16- or 32-wide tiles: the interpreter
runs every program in NumPy. The GPU runs of the same checks are tests/gpu/test_matmul_gpu.py."""

from __future__ import annotations

from math import erf

import numpy as np
import pytest

import teeny_tx as tx
from teeny_tx.dtypes import DTYPES
from teeny_tx.library import linalg, module
from teeny_tx.lower import ir
from teeny_tx.lower.build.builder import build_kernel

SMALL = (32, 16, 16, 2, 4, 2)  # BM, BN, BK, GROUP_M, num_warps, num_stages: several programs
TINY = (16, 16, 16, 1, 4, 2)
UNIT = {"f32": 2.0**-24, "f16": 2.0**-11, "bf16": 2.0**-8}  # unit roundoff of the output


def _rand(rng, shape, dtype: str, scale: float = 1.0) -> np.ndarray:
    """Random normal values, exactly representable in ``dtype``."""
    return (scale * rng.standard_normal(shape)).astype(np.float32).astype(DTYPES[dtype].np)


def _f64(x: np.ndarray) -> np.ndarray:
    return np.asarray(x).astype(np.float64)


_GELU = np.vectorize(lambda v: 0.5 * v * (1.0 + erf(v / np.sqrt(2.0))))


def _act(z: np.ndarray, activation: str | None) -> np.ndarray:
    if activation == "gelu":
        return _GELU(z)
    if activation == "gelu_tanh":
        return 0.5 * z * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (z + 0.044715 * z**3)))
    if activation == "relu":
        return np.maximum(z, 0.0)
    if activation == "silu":
        return z / (1.0 + np.exp(-z))
    return z


def check(got, a, b, out_dtype: str, *, bias=None, activation=None, alpha=1.0, acc_rtol=4e-6):
    """``got`` against act(alpha * a @ b + bias) in float64 of the (rounded) inputs:
    |error| <= (the output dtype's rounding of |ref|) + acc_rtol * (alpha * |a| @ |b| + |bias|),
    the second term the f32 accumulation's error (and the f32 epilogue's)."""
    assert got.dtype == DTYPES[out_dtype].np, (got.dtype, out_dtype)
    a, b = _f64(a), _f64(b)
    z = alpha * np.matmul(a, b) + (0.0 if bias is None else _f64(bias))
    ref = _act(z, activation)
    scale = abs(alpha) * np.matmul(np.abs(a), np.abs(b)) + (
        0.0 if bias is None else abs(_f64(bias))
    )
    tol = 1.01 * UNIT[out_dtype] * np.abs(ref) + acc_rtol * scale + 1e-30
    err = np.abs(_f64(got) - ref)
    bad = ~(err <= tol)
    assert got.shape == ref.shape
    if bad.any():
        at = np.unravel_index(np.argmax(bad), bad.shape)
        raise AssertionError(
            f"{int(bad.sum())} of {bad.size} elements wrong; at {tuple(map(int, at))}: got "
            f"{_f64(got)[at]!r}, expected {ref[at]!r} (tolerance {tol[at]:.3g})"
        )


# ---------------------------------------------------------------- matmul


@pytest.mark.parametrize("dtype", ["f16", "bf16", "f32"])
@pytest.mark.parametrize("mnk", [(16, 16, 16), (33, 70, 64), (70, 33, 17), (64, 64, 70)])
def test_matmul(dtype, mnk):
    m, n, k = mnk
    rng = np.random.default_rng(m * n + k)
    a, b = _rand(rng, (m, k), dtype), _rand(rng, (k, n), dtype)
    check(linalg.matmul(a, b, config=SMALL, interpret=True), a, b, dtype)


def test_matmul_default_config():
    rng = np.random.default_rng(1)
    a, b = _rand(rng, (70, 33), "f16"), _rand(rng, (33, 100), "f16")
    check(linalg.matmul(a, b, interpret=True), a, b, "f16")


@pytest.mark.parametrize("activation", [None, "gelu", "gelu_tanh", "relu", "silu"])
@pytest.mark.parametrize("out_dtype", ["f32", "f16"])
def test_epilogues(activation, out_dtype):
    rng = np.random.default_rng(2)
    a, b = _rand(rng, (33, 40), "bf16", 0.5), _rand(rng, (40, 48), "bf16", 0.5)
    bias = _rand(rng, 48, "f32")
    got = linalg.matmul(
        a,
        b,
        bias=bias,
        activation=activation,
        alpha=0.75,
        out_dtype=out_dtype,
        config=SMALL,
        interpret=True,
    )
    check(got, a, b, out_dtype, bias=bias, activation=activation, alpha=0.75)


@pytest.mark.parametrize("out_dtype", ["f32", "bf16", np.float16, "float32"])
def test_out_dtype_spellings(out_dtype):
    rng = np.random.default_rng(3)
    a, b = _rand(rng, (20, 30), "f32"), _rand(rng, (30, 17), "f32")
    got = linalg.matmul(a, b, out_dtype=out_dtype, config=TINY, interpret=True)
    name = {"float32": "f32", np.float16: "f16"}.get(out_dtype, out_dtype)
    check(got, a, b, name)


def test_bias_of_another_dtype_and_no_bias_with_activation():
    rng = np.random.default_rng(4)
    a, b = _rand(rng, (40, 24), "f16"), _rand(rng, (24, 36), "f16")
    bias = _rand(rng, 36, "f16")
    got = linalg.matmul(a, b, bias=bias, activation="relu", config=SMALL, interpret=True)
    check(got, a, b, "f16", bias=bias, activation="relu")
    check(
        linalg.matmul(a, b, activation="silu", config=SMALL, interpret=True),
        a,
        b,
        "f16",
        activation="silu",
    )


def _views(rng, shape, dtype):
    """The same values as a row-major array, a column-major one, the transpose of a row-major
    array, a view at an offset into a larger array, and a view with strides of 2 in both
    dimensions (negative along the rows)."""
    x = _rand(rng, shape, dtype)
    big = np.zeros((shape[0] + 5, shape[1] + 9), x.dtype)
    big[3 : 3 + shape[0], 7 : 7 + shape[1]] = x
    strided = np.zeros((2 * shape[0], 2 * shape[1]), x.dtype)
    strided[::-2, ::2] = x
    return {
        "row": x,
        "col": np.asfortranarray(x),
        "T": np.ascontiguousarray(x.T).T,
        "offset": big[3 : 3 + shape[0], 7 : 7 + shape[1]],
        "strided": strided[::-2, ::2],
    }


@pytest.mark.parametrize("layout_a", ["row", "col", "T", "offset", "strided"])
@pytest.mark.parametrize("layout_b", ["row", "col", "offset"])
def test_operand_layouts(layout_a, layout_b):
    rng = np.random.default_rng(5)
    a = _views(rng, (37, 50), "f16")[layout_a]
    b = _views(rng, (50, 29), "f16")[layout_b]
    check(linalg.matmul(a, b, config=SMALL, interpret=True), a, b, "f16")


def test_empty_dimensions():
    rng = np.random.default_rng(6)
    a = np.zeros((0, 16), np.float32)
    assert linalg.matmul(a, _rand(rng, (16, 5), "f32"), interpret=True).shape == (0, 5)
    bias = _rand(rng, 5, "f32")
    got = linalg.matmul(
        np.zeros((3, 0), np.float32), np.zeros((0, 5), np.float32), bias=bias, interpret=True
    )
    np.testing.assert_array_equal(got, np.broadcast_to(bias, (3, 5)))  # K = 0: the epilogue alone


# ---------------------------------------------------------------- f32 precision


def test_f32_precision_is_explicit_and_tf32_is_distinguishable():
    rng = np.random.default_rng(7)
    a, b = _rand(rng, (64, 128), "f32"), _rand(rng, (128, 64), "f32")
    ref = _f64(a) @ _f64(b)

    def err(precision):
        got = linalg.matmul(a, b, precision=precision, config=(32, 32, 32, 2, 4, 2), interpret=True)
        return np.linalg.norm(got - ref) / np.linalg.norm(ref)

    default, ieee, tf32, tf32x3 = err(None), err("ieee"), err("tf32"), err("TF32X3")
    assert default == ieee < 1e-6
    assert 1e-4 < tf32 < 2e-3  # TF32's 10-bit mantissa
    assert tf32x3 < 1e-5


# ---------------------------------------------------------------- bmm


@pytest.mark.parametrize("dtype", ["f16", "f32"])
def test_bmm(dtype):
    rng = np.random.default_rng(8)
    a, b = _rand(rng, (3, 33, 17), dtype), _rand(rng, (3, 17, 40), dtype)
    got = linalg.bmm(a, b, config=TINY, interpret=True)
    for i in range(3):
        check(got[i], a[i], b[i], dtype)


def test_bmm_strided_batches_alpha_and_out_dtype():
    rng = np.random.default_rng(9)
    a = _rand(rng, (2, 20, 5, 24), "bf16")[:, :, 2, :].transpose(0, 2, 1)  # [2, 24, 20] views
    b = np.ascontiguousarray(_rand(rng, (2, 30, 20), "bf16").transpose(0, 2, 1))  # [2, 20, 30]
    got = linalg.bmm(a, b, alpha=-2.0, out_dtype="f32", config=TINY, interpret=True)
    assert got.shape == (2, 24, 30)
    for i in range(2):
        check(got[i], a[i], b[i], "f32", alpha=-2.0)


# ---------------------------------------------------------------- linear layer


@pytest.mark.parametrize("activation", [None, "gelu_tanh"])
def test_linear(activation):
    rng = np.random.default_rng(10)
    x, w, bias = _rand(rng, (45, 40), "f16"), _rand(rng, (33, 40), "f16"), _rand(rng, 33, "f16")
    got = linalg.linear(x, w, bias, activation, config=SMALL, interpret=True)
    check(got, x, w.T, "f16", bias=bias, activation=activation)


@pytest.mark.parametrize("tokens", [1, 20, 200])
@pytest.mark.parametrize("dtype", ["bf16", "f32"])
def test_linear_backward(tokens, dtype):
    rng = np.random.default_rng(tokens)
    n_in, n_out = 36, 40
    dy, x, w = (_rand(rng, s, dtype) for s in ((tokens, n_out), (tokens, n_in), (n_out, n_in)))
    dx, dw, db = linalg.linear_backward(dy, x, w, config=SMALL, interpret=True)
    check(dx, dy, w, dtype)
    check(dw, dy.T, x, dtype)
    ones = np.ones((1, tokens))
    check(db[None, :], ones, dy, dtype)  # db = 1 @ dy: over T, rows of 32, then the partials


def test_linear_backward_without_bias_grad_and_with_views():
    rng = np.random.default_rng(11)
    dy = _views(rng, (50, 24), "f16")["offset"]
    x = _views(rng, (50, 20), "f16")["col"]
    w = _views(rng, (24, 20), "f16")["T"]
    dx, dw, db = linalg.linear_backward(
        dy, x, w, need_bias_grad=False, config=SMALL, interpret=True
    )
    assert db is None
    check(dx, dy, w, "f16")
    check(dw, dy.T, x, "f16")


def test_column_sums_over_many_rows():
    """db's two stages: row chunks over the programs of 4 per SM, then their f32 partials."""
    rng = np.random.default_rng(12)
    dy = _rand(rng, (1000, 3), "f32")
    _, _, db = linalg.linear_backward(
        dy,
        np.zeros((1000, 16), np.float32),
        np.zeros((3, 16), np.float32),
        config=TINY,
        interpret=True,
    )
    check(db[None, :], np.ones((1, 1000)), dy, "f32")


# ---------------------------------------------------------------- the kernels themselves

GROUPS = """
kernel order(i32 *pm, i32 *pn, i32 num_m, i32 num_n, i32 group_m)
{
    i32 pid = program_id(0);
    store(pm + pid, group_pid_m(pid, num_m, num_n, group_m));
    store(pn + pid, group_pid_n(pid, num_m, num_n, group_m));
}
"""


@pytest.mark.parametrize("num_m,num_n,group_m", [(4, 3, 2), (5, 3, 2), (7, 4, 8), (3, 5, 1)])
def test_grouped_order(num_m, num_n, group_m):
    """group_pid_m/n: Triton's GROUP_SIZE_M order, each output tile exactly once."""
    pm, pn = np.zeros(num_m * num_n, np.int32), np.zeros(num_m * num_n, np.int32)
    k = tx.compile(GROUPS, name="kernels/order.c").order
    k.interpret[(num_m * num_n,)](pm, pn, num_m, num_n, group_m)
    for pid in range(num_m * num_n):  # the tutorial's formula
        width = group_m * num_n
        first = pid // width * group_m
        rows = min(num_m - first, group_m)
        assert (pm[pid], pn[pid]) == (first + pid % width % rows, pid % width // rows)
    assert sorted(zip(pm.tolist(), pn.tolist(), strict=True)) == [
        (i, j) for i in range(num_m) for j in range(num_n)
    ]
    if (num_m, num_n, group_m) == (4, 3, 2):  # the picture in prelude/matmul.h
        assert pm.tolist() == [0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3]


def _matmul_ir(a_t: int, b_t: int) -> ir.Kernel:
    k = module("matmul.c").matmul
    args = (*(np.zeros((64, 64), np.float16) for _ in range(3)), np.zeros(64, np.float32))
    args += (64,) * 3 + (64, 1, 64, 1, 64, 1, 0, 0, 0, 1.0)
    constexprs = {"HAS_BIAS": 1, "ACT": 1, "PRECISION": 20, "A_T": a_t, "B_T": b_t}
    constexprs |= {"BM": 32, "BN": 32, "BK": 16, "GROUP_M": 8}
    key = k.binder.bind_host(args, constexprs, 4)
    return build_kernel(k.module.unit, "matmul", k.binder.spec(key))


def _names(e: ir.Expr) -> set[str]:
    if isinstance(e, ir.Var):
        return {e.name}
    if isinstance(e, ir.Op):
        return set().union(*(_names(x) for x in e.args)) if e.args else set()
    return set()


def _transposed(e: ir.Expr, name: str) -> bool:
    """e is trans(name): a permute of a 2-D tile by (1, 0)."""
    return e.op == "permute" and dict(e.attrs)["dims"] == (1, 0) and e.args[0].name == name


@pytest.mark.parametrize("a_t,b_t", [(0, 0), (0, 1), (1, 0), (1, 1)])
def test_k_loop_has_the_pipelined_shape(a_t, b_t):
    """The K loop is `a_t = load(..); b_t = load(..); acc = dot(a_t or trans(a_t), ...)`, its
    loads' pointers and masks made of k, parameters and tiles declared before the loop: the
    shape the software pipeliner recognises. A_T/B_T only change the tiles' orientation."""
    kernel = _matmul_ir(a_t, b_t)
    loops = [s for s in kernel.body if isinstance(s, ir.Loop)]
    assert len(loops) == 1
    loop = loops[0]
    before = {s.name for s in kernel.body[: kernel.body.index(loop)] if isinstance(s, ir.Declare)}
    before |= {p.name for p in kernel.params} | {s.name for s in loop.init}
    load_a, load_b, update = loop.body
    assert isinstance(load_a, ir.Declare) and load_a.init.op == "load"
    assert isinstance(load_b, ir.Declare) and load_b.init.op == "load"
    for load in (load_a, load_b):
        assert _names(load.init) <= before, _names(load.init) - before
    assert isinstance(update, ir.Assign) and update.value.op == "dot"
    x, y, acc = update.value.args
    assert _transposed(x, load_a.name) if a_t else x.name == load_a.name
    assert _transposed(y, load_b.name) if b_t else y.name == load_b.name
    assert acc.name == update.name
    assert load_a.type.shape == ((16, 32) if a_t else (32, 16))
    assert load_b.type.shape == ((32, 16) if b_t else (16, 32))


# ---------------------------------------------------------------- the tile heuristic


@pytest.mark.parametrize(
    "m,n,k,dtype,precision,expected",
    [
        (8192, 8192, 8192, "f16", "ieee", (128, 256, 64, 8, 8, 3)),
        (4095, 4097, 1000, "f16", "ieee", (128, 256, 64, 8, 8, 3)),
        (2048, 2048, 2048, "bf16", "ieee", (128, 256, 64, 8, 8, 3)),  # 128 programs: one wave
        (1536, 1536, 1024, "bf16", "ieee", (128, 128, 64, 8, 4, 4)),
        (1024, 1024, 1024, "f16", "ieee", (64, 128, 64, 8, 4, 4)),
        (64, 8192, 8192, "f16", "ieee", (64, 64, 64, 8, 4, 4)),
        (4096, 4096, 4096, "f32", "tf32", (128, 256, 32, 8, 8, 3)),
        (4096, 4096, 4096, "f32", "ieee", (128, 128, 32, 8, 8, 3)),  # FMA units
        (512, 512, 512, "f32", "ieee", (64, 64, 32, 8, 4, 3)),
        (100, 100, 100, "f32", "tf32", (64, 64, 32, 8, 4, 4)),
    ],
)
def test_matmul_config(m, n, k, dtype, precision, expected):
    assert tuple(linalg.matmul_config(m, n, k, dtype, precision=precision)) == expected


def test_matmul_config_counts_the_batch():
    assert linalg.matmul_config(1024, 1024, 1024, "f16", batch=8).bm == 128


# ---------------------------------------------------------------- argument checks


def _f(*shape, dtype=np.float32):
    return np.zeros(shape, dtype)


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: linalg.matmul(_f(2, 3), _f(4, 5), interpret=True), r"matmul: inner dimensions"),
        (lambda: linalg.matmul(_f(2, 3, 1), _f(3, 5), interpret=True), r"a must be 2-D \[M, K\]"),
        (
            lambda: linalg.matmul(_f(2, 3), _f(3, 5, dtype=np.float16), interpret=True),
            r"a is f32 but b is f16",
        ),
        (
            lambda: linalg.matmul(_f(2, 3, dtype=np.int32), _f(3, 5), interpret=True),
            r"a has dtype int32; this takes f32",
        ),
        (
            lambda: linalg.matmul(_f(2, 3), _f(3, 5), bias=_f(4), interpret=True),
            r"bias must have shape \(5,\)",
        ),
        (
            lambda: linalg.matmul(_f(2, 3), _f(3, 5), bias=_f(10)[::2], interpret=True),
            r"bias must be contiguous",
        ),
        (
            lambda: linalg.matmul(_f(2, 3), _f(3, 5), activation="tanh", interpret=True),
            r"activation must be one of",
        ),
        (
            lambda: linalg.matmul(_f(2, 3), _f(3, 5), precision="tf16", interpret=True),
            r"precision must be 'ieee', 'tf32' or 'tf32x3'",
        ),
        (
            lambda: linalg.matmul(
                _f(2, 3, dtype=np.float16),
                _f(3, 5, dtype=np.float16),
                precision="tf32",
                interpret=True,
            ),
            r"precision='tf32' applies to f32 inputs only",
        ),
        (
            lambda: linalg.matmul(_f(2, 3), _f(3, 5), out_dtype="i32", interpret=True),
            r"out_dtype must be one of f32, f16, bf16, f64",
        ),
        (
            lambda: linalg.matmul(_f(2, 3), _f(3, 5), config=(16, 16, 16), interpret=True),
            r"config must be a MatmulConfig \(bm, bn, bk, group_m, num_warps, num_stages\)",
        ),
        (lambda: linalg.matmul(_f(2, 3), _f(3, 5)), r"NumPy array; pass CuPy arrays"),
        (lambda: linalg.matmul([[1.0]], _f(1, 1), interpret=True), r"a is a list"),
        (
            lambda: linalg.bmm(_f(2, 3, 4), _f(3, 4, 5), interpret=True),
            r"bmm: batch sizes differ",
        ),
        (lambda: linalg.bmm(_f(3, 4), _f(4, 5), interpret=True), r"a must be 3-D \[B, M, K\]"),
        (
            lambda: linalg.linear(_f(2, 3), _f(4, 5), interpret=True),
            r"linear: inner dimensions differ: x has shape \(2, 3\) and w \(4, 5\)",
        ),
        (
            lambda: linalg.linear(_f(2, 3), _f(4, 3), _f(3), interpret=True),
            r"bias must have shape \(4,\)",
        ),
        (
            lambda: linalg.linear_backward(_f(2, 4), _f(3, 5), _f(4, 5), interpret=True),
            r"linear_backward: shapes disagree",
        ),
        (
            lambda: linalg.linear_backward(
                _f(2, 4), _f(2, 5), _f(4, 5, dtype=np.float16), interpret=True
            ),
            r"dy is f32 but w is f16",
        ),
    ],
)
def test_bad_arguments_raise_launch_errors(call, match):
    with pytest.raises(tx.LaunchError, match=match):
        call()
