"""Triton's options of operations, as the language spells them: load/store cache modifiers and
eviction policies (constants: ``load(p, mask, other, CACHE_CG, EVICT_FIRST)``, PTX's cache
operators and L2 policies on the GPU, ignored by the interpreter), ``maximum``/``minimum`` with
``PROPAGATE_NAN_ALL``, ``cast(x, T, RTZ)``, ``reduce_or``, ``#pragma unroll N`` and
``#pragma num_stages N`` (tl.range's loop_unroll_factor and num_stages), ``assume``,
``max_constancy`` and ``static_print``; in the C syntax and through teeny_tx.jit, on the
interpreter against NumPy, NVRTC for sm_90 and sm_90a, and located errors."""

from __future__ import annotations

import re

import numpy as np
import pytest

import teeny_tx as tx
import teeny_tx.triton as triton
import teeny_tx.triton.language as tl
from teeny_tx.constants import CACHE_MODIFIERS, EVICTION_POLICIES
from teeny_tx.dtypes import DTYPES
from teeny_tx.kernel import HEADERS
from teeny_tx.runtime import nvrtc

from .conftest import KERNEL_FILE, compile_error, kernel_text, lower, stable_seed

ARCHS = ["sm_90", "sm_90a"]

# ------------------------------------------------------------ cache modifiers, eviction

COPY = """kernel copy(any *out, const any *a, i32 n, const i32 BLOCK)
{
    tile o = program_id(0) * BLOCK + arange(0, BLOCK);
    tile m = o < n;
    store(out + o, load(a + o, m, 0, LOAD_CACHE, LOAD_EVICT), m, STORE_CACHE, STORE_EVICT);
    tile half = o < n / 2;  /* every other element, lane by lane */
    tile odd = load(a + 2 * o, half, 0, LOAD_CACHE, LOAD_EVICT);
    store(out + 2 * o, odd, half, STORE_CACHE, STORE_EVICT);
    if (program_id(0) == 0) {
        store(out, load(a, true, 0, LOAD_CACHE, LOAD_EVICT) + 0, true, STORE_CACHE, STORE_EVICT);
    }
}
"""
LOADS = ["0", "CACHE_CA", "CACHE_CG", "CACHE_CS", "CACHE_LU", "CACHE_CV"]
STORES = ["0", "CACHE_WB", "CACHE_CG", "CACHE_CS", "CACHE_WT"]
EVICTS = ["0", "EVICT_NORMAL", "EVICT_FIRST", "EVICT_LAST"]


def _copy(load_cache="0", load_evict="0", store_cache="0", store_evict="0"):
    text = COPY.replace("LOAD_CACHE", load_cache).replace("LOAD_EVICT", load_evict)
    text = text.replace("STORE_CACHE", store_cache).replace("STORE_EVICT", store_evict)
    return tx.compile(text, name=KERNEL_FILE)


# every load modifier, store modifier and eviction policy at least once
COMBOS = [(lc, EVICTS[k % 4], STORES[k % 5], EVICTS[(k + 2) % 4]) for k, lc in enumerate(LOADS)]


@pytest.mark.parametrize(("lc", "le", "sc", "se"), COMBOS)
@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16", "f64", "i8", "i64"])
def test_hinted_accesses_copy_on_the_interpreter(lc, le, sc, se, dtype):
    module = _copy(lc, le, sc, se)
    rng = np.random.default_rng(stable_seed("copy", lc, se, dtype))
    a = (rng.standard_normal(1001) * 50).astype(DTYPES[dtype].np)
    out = np.zeros_like(a)
    module.copy.interpret[(tx.cdiv(1001, 256),)](out, a, 1001, BLOCK=256)
    np.testing.assert_array_equal(out, a)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16", "f64", "i8", "i64"])
@pytest.mark.parametrize(
    ("lc", "le", "sc", "se"),
    [
        ("CACHE_CG", "EVICT_FIRST", "CACHE_CS", "EVICT_LAST"),
        ("CACHE_LU", "0", "CACHE_WT", "0"),
        ("0", "EVICT_LAST", "0", "EVICT_FIRST"),
        ("CACHE_CV", "EVICT_NORMAL", "CACHE_WB", "0"),
    ],
)
def test_hinted_accesses_compile(lc, le, sc, se, dtype, arch):
    """Vector (16 bytes), lane by lane and scalar accesses, each with its PTX."""
    module = _copy(lc, le, sc, se)
    spec = module.copy.specialize(dtype, dtype, 4096, BLOCK=1024, target=arch)
    src = spec.cuda_source
    if lc != "0" or le not in ("0", "EVICT_NORMAL"):
        assert (
            "tx::Hint<" in src
            and "tx::load_vec" in src
            and "::load(a + tx::wrap_mul<int>(2, o[tx_i]))" in src
        )
    result = nvrtc.compile_with_log(src, name="copy", arch=arch, headers=HEADERS)
    assert result.cubin[:4] == b"\x7fELF"


def test_hint_attrs():
    text = kernel_text(
        "    tile o = arange(0, BLOCK);\n"
        "    store(out + o, load(a + o, o < n, 0, CACHE_CG, EVICT_FIRST), o < n, CACHE_WT);"
    )
    k = lower(text)
    store = k.body[-1].expr
    load = store.args[1]
    assert (load.attr("cache"), load.attr("evict")) == (31, 41)
    assert (store.attr("cache"), store.attr("evict")) == (36, None)
    plain = lower(kernel_text("    tile o = arange(0, BLOCK);\n    store(out + o, load(a + o));"))
    assert plain.body[-1].expr.attrs == (("masked", False),)
    src = tx.compile(text, name=KERNEL_FILE).k.cuda_source("f32", "f32", 10, BLOCK=128)
    assert "tx::Hint<tx::CACHE_CG, tx::EVICT_FIRST>" in src and "tx::Hint<tx::CACHE_WT, 0>" in src


def test_the_device_header_enumerates_the_hints():
    from teeny_tx import _prelude

    header = _prelude.FILES["access.cuh"]
    (enum,) = re.findall(r"enum \{([^}]*CACHE_CA[^}]*)\}", header)
    pairs = dict(re.findall(r"(\w+) = (\d+)", enum))
    assert pairs == {c.name: str(c.value) for c in (*CACHE_MODIFIERS, *EVICTION_POLICIES)}


@pytest.mark.parametrize(
    ("body", "col", "message"),
    [
        ("store(out + o, load(a + o, o < n, 0, CACHE_WT));", 42, "the cache modifier of load()"),
        ("store(out + o, load(a + o), o < n, CACHE_LU);", 40, "the cache modifier of store()"),
        (
            "store(out + o, load(a + o, o < n, 0, 0, CACHE_CG));",
            45,
            "the eviction policy of load()",
        ),
        ("store(out + o, load(a + o, o < n, 0, n));", 42, "the cache hint of load() must be"),
    ],
)
def test_bad_hints_are_located(body, col, message):
    err = compile_error(kernel_text(f"    tile o = arange(0, BLOCK);\n    {body}"))
    assert (err.loc.line, err.loc.col) == (4, col), str(err)
    assert err.message.startswith(message), err.message


# ------------------------------------------------------------ propagate_nan

MINMAX = """kernel mm(any *hi, any *lo, const any *a, const any *b, i32 n, const i32 BLOCK)
{
    tile o = arange(0, BLOCK);
    tile m = o < n;
    tile x = load(a + o, m);
    tile y = load(b + o, m);
    store(hi + o, maximum(x, y, PROPAGATE), m);
    store(lo + o, minimum(x, y, PROPAGATE), m);
}
"""


@pytest.mark.parametrize("dtype", ["f16", "bf16", "f32", "f64", "i32", "u8"])
@pytest.mark.parametrize("propagate", ["PROPAGATE_NAN_NONE", "PROPAGATE_NAN_ALL"])
def test_propagate_nan(dtype, propagate):
    np_dtype = DTYPES[dtype].np
    rng = np.random.default_rng(stable_seed("minmax", dtype, propagate))
    a, b = (rng.integers(0, 100, 1001).astype(np_dtype) for _ in range(2))
    if DTYPES[dtype].is_float:
        a[::7] = np.nan
        b[::5] = np.nan
    hi, lo = np.zeros_like(a), np.zeros_like(a)
    module = tx.compile(MINMAX.replace("PROPAGATE", propagate), name=KERNEL_FILE)
    module.mm.interpret[(1,)](hi, lo, a, b, 1001, BLOCK=1024)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    if propagate.endswith("ALL"):
        want_hi, want_lo = np.maximum(a64, b64), np.minimum(a64, b64)
    else:
        want_hi, want_lo = np.fmax(a64, b64), np.fmin(a64, b64)
    np.testing.assert_array_equal(hi.astype(np.float64), want_hi)
    np.testing.assert_array_equal(lo.astype(np.float64), want_lo)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("dtype", ["f16", "bf16", "f32", "f64", "i32"])
def test_propagate_nan_compiles(arch, dtype):
    module = tx.compile(MINMAX.replace("PROPAGATE", "PROPAGATE_NAN_ALL"), name=KERNEL_FILE)
    spec = module.mm.specialize(*[dtype] * 4, 1001, BLOCK=1024, target=arch)
    assert "tx::maximum_nan(" in spec.cuda_source
    nvrtc.compile_with_log(spec.cuda_source, name="mm", arch=arch, headers=HEADERS)


def test_propagate_nan_is_a_constant():
    err = compile_error(kernel_text("    store(out, maximum(1.0f, 2.0f, n));"))
    assert err.message.startswith("the third argument of maximum() is PROPAGATE_NAN_NONE")
    assert (err.loc.line, err.loc.col) == (3, 36)


# ------------------------------------------------------------ cast(x, T, RTZ)

RTZ = """kernel narrow(any *out, const any *a, i32 n, const i32 BLOCK)
{
    tile o = program_id(0) * BLOCK + arange(0, BLOCK);
    tile m = o < n;
    store(out + o, cast(load(a + o, m), TO, ROUNDING), m);
}
"""


def _toward_zero_reference(x: np.ndarray, to: str) -> np.ndarray:
    """The largest-magnitude value of ``to`` not beyond |x|, by search in its sorted values."""
    x64 = x.astype(np.float64)
    if to == "bf16":  # truncating an f32's low 16 bits is rounding it toward zero
        f32 = x.astype(np.float32) if x.dtype == np.float32 else None
        if f32 is not None:
            bits = (f32.view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32)
            return bits.astype(DTYPES["bf16"].np)
    if to == "f16":
        grid = np.arange(0x7C01, dtype=np.uint16).view(np.float16).astype(np.float64)  # +0..inf
        k = np.searchsorted(grid, np.abs(x64), side="right") - 1
        mag = np.where(np.isinf(x64), np.inf, grid[np.clip(k, 0, None)])
        mag = np.where(np.abs(x64) >= 65536.0, np.where(np.isinf(x64), np.inf, 65504.0), mag)
        out = np.copysign(mag, x64)
        return np.where(np.isnan(x64), np.nan, out).astype(np.float16)
    nearest = x64.astype(DTYPES[to].np)
    away = np.isfinite(x64) & (np.abs(nearest.astype(np.float64)) > np.abs(x64))
    return np.where(away, np.nextafter(nearest, nearest.dtype.type(0)), nearest)


@pytest.mark.parametrize(
    ("src", "to"),
    [("f32", "f16"), ("f32", "bf16"), ("f64", "f32"), ("f64", "f16"), ("f64", "bf16")],
)
def test_rtz_casts_round_toward_zero(src, to):
    rng = np.random.default_rng(stable_seed("rtz", src, to))
    x = (rng.standard_normal(1001) * 10.0 ** rng.integers(-8, 8, 1001)).astype(DTYPES[src].np)
    x[:6] = np.array([np.inf, -np.inf, np.nan, 1e30, -1e30, 65519.0])
    module = tx.compile(RTZ.replace("TO", to).replace("ROUNDING", "RTZ"), name=KERNEL_FILE)
    out = np.zeros(1001, DTYPES[to].np)
    module.narrow.interpret[(1,)](out, x, 1001, BLOCK=1024)
    want = _toward_zero_reference(x, to)
    np.testing.assert_array_equal(out.astype(np.float64), want.astype(np.float64))
    rtne = tx.compile(RTZ.replace("TO", to).replace("ROUNDING", "RTNE"), name=KERNEL_FILE)
    nearest = np.zeros(1001, DTYPES[to].np)
    rtne.narrow.interpret[(1,)](nearest, x, 1001, BLOCK=1024)
    assert not np.array_equal(nearest.astype(np.float64), out.astype(np.float64), equal_nan=True)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize(
    ("src", "to"),
    [("f32", "f16"), ("f32", "bf16"), ("f64", "f32"), ("f64", "f16"), ("f64", "bf16")],
)
def test_rtz_casts_compile(src, to, arch):
    module = tx.compile(RTZ.replace("TO", to).replace("ROUNDING", "RTZ"), name=KERNEL_FILE)
    spec = module.narrow.specialize(to, src, 1001, BLOCK=1024, target=arch)
    assert "tx::cast_rtz<" in spec.cuda_source
    nvrtc.compile_with_log(spec.cuda_source, name="narrow", arch=arch, headers=HEADERS)


def test_cast_is_the_c_cast_and_folds():
    k = lower(
        kernel_text("    f32 y = (f32)cast(1.0009765625f + 0.0001f, f16, RTZ);\n    store(out, y);")
    )
    assert k.body[0].init.value == 1.0009765625
    same = lower(kernel_text("    tile o = arange(0, BLOCK);\n    store(out + o, cast(o, f32));"))
    assert same.body[-1].expr.args[1].op == "cast"


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        ("cast(n, f16, RTZ)", "RTZ rounds a float narrowed to a narrower float, not i32 to f16"),
        ("cast(1.5f, f64, RTZ)", "RTZ rounds a float narrowed to a narrower float, not f32 to f64"),
        ("cast(1.5f, f16, 7)", "the rounding of cast() is RTNE or RTZ"),
        ("cast(1.5f, 3)", "the second argument of cast() is a type name"),
    ],
)
def test_bad_casts_are_located(expr, message):
    err = compile_error(kernel_text(f"    f32 y = (f32){expr};\n    store(out, y);"))
    assert err.message.startswith(message), err.message
    assert err.loc.line == 3 and err.hint


# ------------------------------------------------------------ reduce_or

REDUCE_OR = """kernel bits(any *out, const any *a, i32 n, const i32 R, const i32 C)
{
    tile r = arange(0, R);
    tile c = arange(0, C);
    tile m = (expand_dims(r, 1) < n) & (expand_dims(c, 0) < C);
    tile x = load(a + expand_dims(r, 1) * C + expand_dims(c, 0), m, 0);
    store(out + c, reduce_or(x, 0));
    store(out + C + r, reduce_or(x, 1));
    store(out + C + R, reduce_or(x));
}
"""


@pytest.mark.parametrize("dtype", ["bool", "i8", "u16", "i32", "u64"])
def test_reduce_or(dtype):
    np_dtype = DTYPES[dtype].np
    rng = np.random.default_rng(stable_seed("reduce_or", dtype))
    x = rng.integers(0, 2, (13, 64)) << rng.integers(0, DTYPES[dtype].bits, (13, 64))
    x = x.astype(np_dtype) if dtype != "bool" else (rng.random((13, 64)) < 0.05)
    out = np.zeros(64 + 16 + 1, np_dtype)
    module = tx.compile(REDUCE_OR, name=KERNEL_FILE)
    module.bits.interpret[(1,)](out, x, 13, R=16, C=64)
    np.testing.assert_array_equal(out[:64], np.bitwise_or.reduce(x, axis=0))
    np.testing.assert_array_equal(out[64:77], np.bitwise_or.reduce(x, axis=1))
    assert out[80] == np.bitwise_or.reduce(x.reshape(-1))


@pytest.mark.parametrize("arch", ARCHS)
def test_reduce_or_compiles(arch):
    module = tx.compile(REDUCE_OR, name=KERNEL_FILE)
    for dtype in ("bool", "i32", "u64"):
        spec = module.bits.specialize(dtype, dtype, 13, R=16, C=64, target=arch)
        nvrtc.compile_with_log(spec.cuda_source, name="bits", arch=arch, headers=HEADERS)


def test_reduce_or_of_floats_is_refused():
    err = compile_error(
        kernel_text("    tile o = (f32)arange(0, BLOCK);\n    store(out, reduce_or(o));")
    )
    assert err.message == "reduce_or needs integer operands, got f32[128]"


# ------------------------------------------------------------ loop pragmas

LOOP = """kernel mm(f32 *c, const f16 *a, const f16 *b, i32 K,
          const i32 BM, const i32 BN, const i32 BK)
{
    tile rm = arange(0, BM);
    tile rn = arange(0, BN);
    tile rk = arange(0, BK);
    f32 acc[BM][BN] = 0;
    PRAGMAS
    for (i32 k = 0; k < K; k += BK) {
        tile x = load(a + expand_dims(rm, 1) * K + k + expand_dims(rk, 0));
        tile y = load(b + (k + expand_dims(rk, 1)) * BN + expand_dims(rn, 0));
        acc = dot(x, y, acc);
    }
    f32 total = 0;
    #pragma unroll 4
    for (i32 i = 0; i < K; i++) { total += 1.0f; }
    store(c + expand_dims(rm, 1) * BN + expand_dims(rn, 0), acc + total);
}
"""


def _loop_module(pragmas: str):
    return tx.compile(LOOP.replace("PRAGMAS", pragmas), name=KERNEL_FILE)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("stages", [2, 3, 4])
def test_num_stages_pragma_sets_the_loops_pipeline(stages, arch):
    module = _loop_module(f"#pragma num_stages {stages}")
    spec = module.mm.specialize(
        "f32", "f16", "f16", 256, BM=64, BN=64, BK=32, num_stages=2, target=arch
    )
    src = spec.cuda_source
    assert f"software pipeline, {stages} stages" in src
    assert "#pragma unroll 4" in src
    nvrtc.compile_with_log(src, name="mm", arch=arch, headers=HEADERS)


def test_num_stages_one_leaves_the_loop_unpipelined():
    module = _loop_module("#pragma num_stages 1\n    #pragma unroll 2")
    src = module.mm.cuda_source("f32", "f16", "f16", 256, BM=64, BN=64, BK=32, num_stages=3)
    assert "software pipeline" not in src and "#pragma unroll 2" in src


def test_loop_pragmas_leave_the_results_alone():
    a = np.random.default_rng(0).standard_normal((16, 64)).astype(np.float16)
    b = np.random.default_rng(1).standard_normal((64, 16)).astype(np.float16)
    outs = []
    for pragmas in ("", "#pragma num_stages 3\n    #pragma unroll 2"):
        c = np.zeros((16, 16), np.float32)
        _loop_module(pragmas).mm.interpret[(1,)](c, a, b, 64, BM=16, BN=16, BK=16)
        outs.append(c)
    np.testing.assert_array_equal(outs[0], outs[1])
    want = a.astype(np.float64) @ b.astype(np.float64) + 64
    np.testing.assert_allclose(outs[0], want, rtol=1e-5)


@pytest.mark.parametrize(
    ("pragmas", "message"),
    [
        ("#pragma unroll 2\n    f32 z = 0;", "#pragma unroll must directly precede a loop"),
        ("#pragma unroll", "#pragma unroll takes one number"),
        ("#pragma unroll -2", "#pragma unroll takes a positive integer"),
        ("#pragma unroll x", "#pragma unroll takes a positive integer or an integer constexpr"),
        ("#pragma pipeline 3", "unknown pragma 'pipeline 3' in a kernel"),
        ("#pragma unroll 2\n    #pragma unroll 3", "#pragma unroll given twice for one loop"),
    ],
)
def test_bad_loop_pragmas_are_located(pragmas, message):
    err = compile_error(
        LOOP.replace("PRAGMAS", pragmas), "f32", "f16", "f16", 64, BM=16, BN=16, BK=16, name="mm"
    )
    assert err.message.startswith(message), err.message
    assert err.loc.line in (8, 9) and err.hint


# ------------------------------------------------------------ assume, max_constancy, static_print

HINTED = """kernel k(f32 *out, const f32 *a, i32 n, const i32 BLOCK)
{
    assume(n > 0);
    tile o = program_id(0) * BLOCK + arange(0, BLOCK);
    assume(o >= 0);
    tile row = max_constancy(o / 4, 4);
    static_print("row is", row, "and BLOCK", BLOCK);
    store(out + o, load(a + o, o < n) + (f32)row, o < n);
}
"""


def test_assume_max_constancy_and_static_print(capsys):
    module = tx.compile(HINTED, name=KERNEL_FILE)
    x = np.arange(1001, dtype=np.float32)
    out = np.zeros_like(x)
    module.k.interpret[(4,)](out, x, 1001, BLOCK=256)
    np.testing.assert_array_equal(out, x + np.arange(1001) // 4)
    printed = capsys.readouterr().out
    assert "kernels/t.c:7: static_print: row is i32[256] and BLOCK 256 (i32, weak)" in printed
    with pytest.raises(tx.InterpreterError) as info:
        module.k.interpret[(1,)](out, x, 0, BLOCK=256)
    assert "assume() does not hold in program (0, 0, 0): assume(n > 0);" in str(info.value)
    assert "kernels/t.c:3:" in str(info.value)


@pytest.mark.parametrize("arch", ARCHS)
def test_assume_compiles_to_builtin_assume(arch):
    module = tx.compile(HINTED, name=KERNEL_FILE)
    src = module.k.specialize("f32", "f32", 1001, BLOCK=256, target=arch).cuda_source
    assert "__builtin_assume(n > 0);" in src and src.count("__builtin_assume(") == 2
    nvrtc.compile_with_log(src, name="k", arch=arch, headers=HEADERS)


def test_a_false_constant_assumption_is_a_compile_error():
    err = compile_error(kernel_text("    assume(BLOCK < 0);\n    store(out, 1.0f);"))
    assert err.message == "assume() of a condition that is false" and err.loc.line == 3


# ------------------------------------------------------------ through teeny_tx.jit


@triton.jit
def options_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr, STAGES: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for i in tl.range(0, 3, num_stages=STAGES, loop_unroll_factor=2):
        x = tl.load(
            x_ptr + offs, mask=mask, other=0.0, cache_modifier=".cg", eviction_policy="evict_first"
        )
        acc = tl.maximum(acc, x + i, propagate_nan=tl.PropagateNan.ALL)
    tl.assume(n > 0)
    tl.static_print("acc:", acc)
    half = acc.to(tl.float16, fp_downcast_rounding="rtz")
    flags = tl.reduce_or(offs, 0)
    tl.store(y_ptr + offs, half.to(tl.float32) + flags, mask=mask, cache_modifier=".cs")


def test_triton_options_through_jit(capsys):
    x = np.linspace(-3, 3, 1001).astype(np.float32)
    x[5] = np.nan
    y = np.zeros_like(x)
    options_kernel[(1,)](x, y, 1001, BLOCK=1024, STAGES=3)
    acc = np.zeros_like(x)
    for i in range(3):
        acc = np.maximum(acc, x + np.float32(i))  # NaN propagates
    want = _toward_zero_reference(acc, "f16").astype(np.float32) + 1023
    np.testing.assert_array_equal(y, want)
    assert "static_print: acc: f32[1024]" in capsys.readouterr().out
    text = options_kernel.translate("f32", "f32", 9, BLOCK=16, STAGES=3)
    assert '_Pragma("num_stages STAGES") _Pragma("unroll 2") for (' in text
    assert "load(x_ptr + offs, mask, 0.0f, CACHE_CG, EVICT_FIRST)" in text
    assert "maximum(acc, x + i, PROPAGATE_NAN_ALL)" in text and "cast(acc, f16, RTZ)" in text


@pytest.mark.parametrize("arch", ARCHS)
def test_triton_options_compile(arch):
    spec = options_kernel.specialize("f32", "f32", 9, BLOCK=1024, STAGES=3, target=arch)
    assert "#pragma unroll 2" in spec.cuda_source
    nvrtc.compile_with_log(spec.cuda_source, name="options_kernel", arch=arch, headers=HEADERS)


def test_bad_triton_options_are_located():
    @triton.jit
    def bad(x_ptr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, tl.load(x_ptr + offs, cache_modifier=".wt"))

    with pytest.raises(tx.CompileError) as info:
        bad.translate("f32", BLOCK=16)
    assert "cache_modifier is one of '.ca', '.cg', '.cs', '.lu', '.cv'" in info.value.message
