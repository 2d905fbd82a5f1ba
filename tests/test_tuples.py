"""Tuples: multi-operand reduce and associative_scan with a helper that takes the items of two
tuples and returns a tuple (argmax with a payload, Welford's merge, a linear recurrence
h = a * h + b), tuples returned by helpers, declared (`tile r = (a, b);`), indexed (`r[k]`) and
carried around loops; in the C syntax (tests/kernels/tuples.c) and through teeny_tx.jit, on the
interpreter against NumPy, and compiled by NVRTC for sm_90 and sm_90a. The goldens
tuples.argmax_payload.f32.cu and tuples.recurrence.f32.cu hold the CUDA of one of each."""

from __future__ import annotations

import numpy as np
import pytest

import teeny_tx as tx
import teeny_tx.triton as triton
import teeny_tx.triton.language as tl
from teeny_tx.kernel import HEADERS
from teeny_tx.runtime import nvrtc

from .conftest import assert_close_elementwise, compile_error, stable_seed

TUPLES = "tests/kernels/tuples.c"


@pytest.fixture(scope="module")
def mod():
    return tx.compile(TUPLES, name=TUPLES)


# ------------------------------------------------------------ references (float64, NumPy)


def argmax_reference(x: np.ndarray, w: np.ndarray):
    """Row maximum, its first index and the payload there."""
    i = np.argmax(x, axis=1)
    return x.max(axis=1), i, w[np.arange(x.shape[0]), i]


def recurrence_reference(a: np.ndarray, b: np.ndarray, reverse: bool) -> np.ndarray:
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    h, acc = np.zeros_like(a64), np.zeros(a.shape[0])
    for t in range(a.shape[1] - 1, -1, -1) if reverse else range(a.shape[1]):
        acc = a64[:, t] * acc + b64[:, t]
        h[:, t] = acc
    return h


# ------------------------------------------------------------ the C syntax


@pytest.mark.parametrize(
    ("rows", "cols", "br", "bc"), [(1, 1, 1, 1), (7, 50, 4, 64), (33, 1000, 2, 1024)]
)
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32, np.int8])
def test_argmax_with_a_payload(mod, rows, cols, br, bc, dtype):
    rng = np.random.default_rng(stable_seed("argmax", rows, cols, np.dtype(dtype).name))
    # few distinct values, so ties are common: the lowest index wins; x and w are strided
    # views (rows of cols + 3 elements)
    x = rng.integers(-4, 5, (rows, cols + 3)).astype(dtype)[:, :cols]
    w = rng.standard_normal((rows, cols + 3)).astype(np.float32)[:, :cols]
    best = np.zeros(rows, dtype)
    where, payload = np.zeros(rows, np.int32), np.zeros(rows, np.float32)
    mod.argmax_payload.interpret[(tx.cdiv(rows, br),)](
        best, where, payload, x, w, rows, cols, cols + 3, BR=br, BC=bc, strided=True
    )
    want = argmax_reference(x, w)
    np.testing.assert_array_equal(best, want[0])
    np.testing.assert_array_equal(where, want[1])
    np.testing.assert_array_equal(payload, want[2])


@pytest.mark.parametrize(("rows", "cols", "bc"), [(1, 1, 1), (5, 1001, 1024), (3, 64, 64)])
@pytest.mark.parametrize("dtype", ["f16", "bf16", "f32", "f64"])
def test_welford_merges(mod, rows, cols, bc, dtype):
    from teeny_tx.dtypes import DTYPES

    np_dtype = DTYPES[dtype].np
    rng = np.random.default_rng(stable_seed("welford", rows, cols, dtype))
    x = (rng.standard_normal((rows, cols)) * 3 + 10).astype(np_dtype)
    acc = np.float64 if dtype == "f64" else np.float32
    mean, var = np.zeros(rows, acc), np.zeros(rows, acc)
    mod.welford.interpret[(rows,)](mean, var, x, rows, cols, BC=bc)
    x64 = x.astype(np.float64)
    acc_name = "f64" if dtype == "f64" else "f32"
    # a tree of merges: each a few roundings of the statistics' own size (sqrt(n) levels
    # deep at most), relative to the mean's magnitude for the variance (its terms are
    # deviations from running means)
    roundings = 8 + 4 * np.log2(cols + 1)
    assert_close_elementwise(mean, x64.mean(1), acc_name, ulps=roundings, scale=np.abs(x64).max(1))
    scale = (np.abs(x64 - x64.mean(1, keepdims=True)) * np.abs(x64).max(1, keepdims=True)).mean(1)
    assert_close_elementwise(
        var, x64.var(1), acc_name, ulps=4 * roundings, scale=scale + x64.var(1)
    )


@pytest.mark.parametrize(
    ("rows", "cols", "br", "bc"), [(1, 1, 1, 1), (3, 100, 2, 128), (9, 1000, 4, 1024)]
)
@pytest.mark.parametrize("reverse", [0, 1])
def test_a_linear_recurrence_scans_pairs(mod, rows, cols, br, bc, reverse):
    rng = np.random.default_rng(stable_seed("recurrence", rows, cols, reverse))
    a = rng.uniform(0.5, 1.0, (rows, cols)).astype(np.float32)
    b = rng.standard_normal((rows, cols)).astype(np.float32)
    h = np.zeros((rows, cols), np.float32)
    mod.recurrence.interpret[(tx.cdiv(rows, br),)](
        h, a, b, rows, cols, BR=br, BC=bc, REVERSE=reverse
    )
    want = recurrence_reference(a, b, bool(reverse))
    # |a| < 1: each step's rounding decays; the sum of |terms| bounds the condition
    scale = recurrence_reference(np.abs(a), np.abs(b), bool(reverse))
    assert_close_elementwise(h, want, "f32", ulps=4 * np.log2(cols + 1) + 4, scale=scale)


@pytest.mark.parametrize("n", [1, 1001, 4096])
def test_a_helper_returns_a_tuple_carried_around_a_loop(mod, n):
    x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    if n > 1:
        x[n // 2] = np.nan  # masked-off lanes read NaN too: minimum/maximum skip them
    lo, hi = np.zeros(1, np.float32), np.zeros(1, np.float32)
    mod.running_range.interpret[(1,)](lo, hi, x, n, BLOCK=128)
    assert (lo[0], hi[0]) == (np.nanmin(x), np.nanmax(x))


KERNELS = [
    (
        "argmax_payload",
        ("f32", "i32", "f32", "f32", "f32", 1000, 1000, 1000),
        {"BR": 4, "BC": 1024},
    ),
    ("welford", ("f32", "f32", "bf16", 7, 50), {"BC": 1024}),
    ("welford", ("f64", "f64", "f64", 7, 50), {"BC": 256}),
    ("recurrence", ("f32", "f32", "f32", 7, 50), {"BR": 4, "BC": 128, "REVERSE": 1}),
    ("running_range", ("f32", "f32", "f32", 1001), {"BLOCK": 512}),
]


@pytest.mark.parametrize(("name", "args", "constexprs"), KERNELS)
@pytest.mark.parametrize("arch", ["sm_90", "sm_90a"])
@pytest.mark.parametrize("warps", [4, 8])
def test_tuple_kernels_compile(mod, name, args, constexprs, arch, warps):
    spec = getattr(mod, name).specialize(*args, **constexprs, num_warps=warps, target=arch)
    result = nvrtc.compile_with_log(spec.cuda_source, name=name, arch=arch, headers=HEADERS)
    assert result.cubin[:4] == b"\x7fELF"
    assert nvrtc.spilled_bytes(result.log) == 0


def test_the_items_of_one_tuple_share_one_reduction(mod):
    """Each item's op reads the field of one tx::reduce of tuples, not a reduction of its own."""
    src = mod.argmax_payload.cuda_source("f32", "i32", "f32", "f32", "f32", 9, 9, 9, BR=4, BC=16)
    assert src.count("tx::reduce<") == 1 and "tx::Tuple3<float, int, float>" in src
    for field in (".v0", ".v1", ".v2"):
        assert f"tx_red[0]{field}" in src or f"tx_red[tx_i]{field}" in src
    scan = mod.recurrence.cuda_source("f32", "f32", "f32", 3, 9, BR=2, BC=16, REVERSE=0)
    assert scan.count("tx::scan<") == 1


@pytest.mark.parametrize(
    ("body", "where", "message"),
    [
        (
            "    tile s = reduce((o, o), 0, pair);",
            (1, 6),
            "combiner 'pair' of a tuple of 2 takes 4",
        ),
        (
            "    tile s = reduce((o, o), 0, three);",
            (2, 6),
            "combiner 'three' of a tuple of 2 returns",
        ),
        (
            "    tile s = reduce(o, 0, swap);",
            (3, 6),
            "combiner 'swap' of one tile returns one value",
        ),
        ("    store(out + o, (o, o));", (7, 21), "a tuple of 2 values is not a value here"),
        (
            "    tile s = (o, o);\n    store(out + o, s[2]);",
            (8, 22),
            "'s' holds 2 values: index 0 to 1",
        ),
        ("    tile s = (o, o);\n    s = o;", (8, 5), "'s' is a tuple of 2 values"),
        ("    tile s = (out + o, o);", (7, 15), "a tuple holds numbers, not pointers"),
        (
            "    tile s = reduce((o, expand_dims(o, 0)), 0, swap);",
            (7, 25),
            "reduce() of tiles of different shapes",
        ),
        ("    tile s = reduce((o, o, o, o, o), 0, swap);", (7, 22), "reduce() takes 1 to 4 tiles"),
        (
            "    tile s = associative_scan((o, o), 0, loops);",
            (12, 5),
            "combiner 'loops' must be straight-line",
        ),
    ],
)
def test_misused_tuples_are_located(body, where, message):
    helpers = """tile pair(tile a, tile b) { return a + b; }
tile three(tile a0, tile a1, tile b0, tile b1) { return (a0, a1, b0); }
tile swap(tile a, tile b) { return (b, a); }
"""
    loops = """tile loops(tile a0, tile a1, tile b0, tile b1)
{
    tile s = a0;
    if (b0 > 0) { s = b0; }
    return (s, a1);
}
"""
    text = helpers + "kernel k(f32 *out, const f32 *a, i32 n, const i32 BLOCK)\n{\n"
    text += "    tile o = arange(0, BLOCK);\n" + body + "\n}\n" + loops
    err = compile_error(text)
    assert err.message.startswith(message), err.message
    assert (err.loc.line, err.loc.col) == where, str(err)
    assert err.hint and "^" in str(err)


# ------------------------------------------------------------ through teeny_tx.jit


@triton.jit
def _argmax_combine(v0, i0, v1, i1):
    take = (v1 > v0) | ((v1 == v0) & (i1 < i0))
    return tl.where(take, v1, v0), tl.where(take, i1, i0)


@triton.jit
def _welford_combine(mean_1, m2_1, weight_1, mean_2, m2_2, weight_2):
    delta = mean_2 - mean_1
    new_weight = weight_1 + weight_2
    w2_over_w = tl.where(new_weight == 0.0, 0.0, weight_2 / new_weight)
    return (
        mean_1 + delta * w2_over_w,
        m2_1 + m2_2 + delta * delta * weight_1 * w2_over_w,
        new_weight,
    )


@triton.jit
def _affine(a0, b0, a1, b1):
    return a0 * a1, a1 * b0 + b1


@triton.jit
def _min_max(x):
    return tl.min(x, 0), tl.max(x, 0)


@triton.jit
def tuple_kernel(x_ptr, a_ptr, best_ptr, idx_ptr, stats_ptr, h_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=-float("inf"))
    best, where = tl.reduce((x, offs), 0, _argmax_combine)
    tl.store(best_ptr, best)
    tl.store(idx_ptr, where)
    m, i = tl.max(x, 0, return_indices=True)
    tl.store(best_ptr + 1, m)
    tl.store(idx_ptr + 1, i)
    v = tl.where(mask, x, 0.0)
    mean, m2, weight = tl.reduce((v, v * 0.0, mask.to(tl.float32)), 0, _welford_combine)
    lo, hi = _min_max(v)
    tl.store(stats_ptr, mean)
    tl.store(stats_ptr + 1, m2 / weight)
    tl.store(stats_ptr + 2, lo)
    tl.store(stats_ptr + 3, hi)
    a = tl.load(a_ptr + offs, mask=mask, other=1.0)
    _, h = tl.associative_scan((a, v), 0, _affine, reverse=True)
    tl.store(h_ptr + offs, h, mask=mask)


def test_tuples_through_jit():
    rng = np.random.default_rng(stable_seed("tuples-jit"))
    n = 1001
    x = rng.integers(-50, 50, n).astype(np.float32)
    a = rng.uniform(0.5, 1.0, n).astype(np.float32)
    best, idx = np.zeros(2, np.float32), np.zeros(2, np.int32)
    stats, h = np.zeros(4, np.float32), np.zeros(n, np.float32)
    tuple_kernel[(1,)](x, a, best, idx, stats, h, n, BLOCK=1024)
    assert list(best) == [x.max()] * 2 and list(idx) == [int(np.argmax(x))] * 2
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(stats, [x64.mean(), x64.var(), min(x.min(), 0), x.max()], rtol=1e-5)
    want = recurrence_reference(a[None], x[None], True)[0]
    scale = recurrence_reference(np.abs(a[None]), np.abs(x[None]), True)[0]
    assert_close_elementwise(h, want, "f32", ulps=48, scale=scale)


def test_tuples_translate_to_c_tuples():
    text = tuple_kernel.translate("f32", "f32", "f32", "i32", "f32", "f32", 9, BLOCK=16)
    assert "tile tuple_1 = reduce((x, offs), 0, _argmax_combine);" in text
    assert "tile best = tuple_1[0]; tile where = tuple_1[1];" in text
    assert "return (where(take, v1, v0), where(take, i1, i0));" in text


@pytest.mark.parametrize("arch", ["sm_90", "sm_90a"])
def test_tuples_through_jit_compile(arch):
    spec = tuple_kernel.specialize(
        "f32", "f32", "f32", "i32", "f32", "f32", 9, BLOCK=1024, target=arch
    )
    nvrtc.compile_with_log(spec.cuda_source, name="tuple_kernel", arch=arch, headers=HEADERS)


def test_unpacking_needs_as_many_names():
    @triton.jit
    def bad(x_ptr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        a, b, c = tl.reduce((offs, offs), 0, _argmax_combine)
        tl.store(x_ptr + offs, a + b + c)

    with pytest.raises(tx.CompileError) as info:
        bad.cuda_source("i32", BLOCK=16, target="sm_90")
    assert "holds 2 values: index 0 to 1, got 2" in info.value.message
