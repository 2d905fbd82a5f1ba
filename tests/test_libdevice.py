"""CUDA's libdevice math functions (teeny_tx/lower/ops/libdevice.py): each one in a kernel on the
interpreter against an independent float64 reference (Python's ``math``, high-precision series
with ``decimal``, bisection for the inverses), for f16, bf16, f32 and f64 on odd sizes and
offset views; special values; the exact ones bit for bit; the integer ones against Python's
integers; located errors; constant folding; NVRTC for sm_90 and sm_90a; the Triton spellings
(``tl.extra.libdevice.erfinv``, ``from triton.language.extra import libdevice``).

Bounds: the interpreter computes in f64 and rounds once, so for f16, bf16 and f32 a result is
within one rounding of the reference (``ulps=2``: two unit roundoffs, a double rounding's
room); for f64 within the twin's stated bound (``F64_ULPS``)."""

from __future__ import annotations

import decimal
import math

import numpy as np
import pytest

import teeny_tx as tx
import teeny_tx.triton as triton
import teeny_tx.triton.language as tl
from teeny_tx.dtypes import DTYPES
from teeny_tx.kernel import HEADERS
from teeny_tx.lower.ops import libdevice as L
from teeny_tx.runtime import nvrtc

from .conftest import KERNEL_FILE, assert_close_elementwise, compile_error, stable_seed

FLOATS = ["f16", "bf16", "f32", "f64"]
N = 1001


def _vec(fn):
    return np.vectorize(lambda *a: float(fn(*(float(x) for x in a))), otypes=[np.float64])


# ------------------------------------------------------------ independent references

decimal.getcontext().prec = 60
_D = decimal.Decimal
_PI = _D("3.14159265358979323846264338327950288419716939937510582097494")


def _series_sin(z: decimal.Decimal) -> decimal.Decimal:
    term, total, k = z, z, 1
    while abs(term) > _D(10) ** -55:
        term = -term * z * z / ((2 * k) * (2 * k + 1))
        total += term
        k += 1
    return total


def _sinpi(x: float) -> float:
    r = _D(x) % 2  # exact: Decimal holds the float exactly
    return float(_series_sin(_PI * (r - 2 if r > 1 else r)))


def _cospi(x: float) -> float:
    return _sinpi(float(_D(x) + _D("0.5"))) if abs(x) < 2**52 else 1.0


def _bessel(order: int, modified: bool):
    """sum_k (+-1)^k (x/2)^(2k+n) / (k! (k+n)!) at 60 digits: exact for the test's |x| <= 30."""

    def f(x: float) -> float:
        half = _D(x) / 2
        term = half**order / math.factorial(order)
        total, k = term, 1
        while abs(term) > _D(10) ** -40 * max(abs(total), _D(1)):
            term = term * half * half / (k * (k + order)) * (1 if modified else -1)
            total += term
            k += 1
        return float(total)

    return f


def _bisect(fn, target: np.ndarray, lo: float, hi: float, increasing: bool) -> np.ndarray:
    """The x in [lo, hi] with fn(x) = target, to f64's last bit (60 halvings and more)."""
    a = np.full(target.shape, lo)
    b = np.full(target.shape, hi)
    for _ in range(200):
        mid = 0.5 * (a + b)
        below = (fn(mid) < target) == increasing
        a, b = np.where(below, mid, a), np.where(below, b, mid)
    return 0.5 * (a + b)


_erf, _erfc = _vec(math.erf), _vec(math.erfc)


def _erfinv(y):
    """Bisection where it is well conditioned in f64: on erf for |y| <= 1/2, else on erfc
    against 1 - |y| (exact there)."""
    a = np.abs(y)
    near = _bisect(_erf, np.where(a <= 0.5, a, 0.25), 0.0, 1.0, True)
    far = _bisect(_erfc, np.where(a <= 0.5, 0.5, 1.0 - a), 0.0, 30.0, False)
    return np.copysign(np.where(a <= 0.5, near, far), y)


def _erfcinv(t):
    """erfcinv(t) = erfinv(1 - t), 1 - t exact for t in [1/2, 3/2]; bisection on erfc beyond."""
    middle = np.abs(1.0 - t) <= 0.5
    low = _bisect(_erfc, np.where(t < 0.5, t, 0.25), 0.0, 30.0, False)
    high = -_bisect(_erfc, np.where(t > 1.5, 2.0 - t, 0.25), 0.0, 30.0, False)
    return np.where(middle, _erfinv(np.where(middle, 1.0 - t, 0.0)), np.where(t < 0.5, low, high))


def _normcdf_exact(x: float) -> float:
    return 0.5 * math.erfc(-x / math.sqrt(2.0)) if abs(x) < 1 else _normcdf_decimal(x)


def _normcdf_decimal(x: float) -> float:
    # erfc of the exact argument -x / sqrt(2): the f64 argument and erfc's derivative
    z = -_D(x) / _D(2).sqrt()
    zf = float(z)
    return 0.5 * (math.erfc(zf) - 2 / math.sqrt(math.pi) * math.exp(-zf * zf) * float(z - _D(zf)))


def _round_half_away(x: float) -> float:
    return math.copysign(math.floor(abs(x) + 0.5) if abs(x) < 2**52 else abs(x), x)


# name -> (reference on f64 values, domain (lo, hi), f64 ulps of the reference and twin)
UNARY = {
    "tan": (math.tan, (-1.5, 1.5), 4),
    "asin": (math.asin, (-1.0, 1.0), 4),
    "acos": (math.acos, (-1.0, 1.0), 4),
    "atan": (math.atan, (-10.0, 10.0), 4),
    "sinh": (math.sinh, (-10.0, 10.0), 4),
    "cosh": (math.cosh, (-10.0, 10.0), 4),
    "asinh": (math.asinh, (-100.0, 100.0), 4),
    "acosh": (math.acosh, (1.0, 100.0), 4),
    "atanh": (math.atanh, (-0.99, 0.99), 4),
    "exp10": (lambda x: 10.0**x, (-30.0, 30.0), 4),
    "expm1": (math.expm1, (-5.0, 5.0), 4),
    "log10": (math.log10, (1e-3, 1e3), 4),
    "log1p": (math.log1p, (-0.9, 10.0), 4),
    "cbrt": (math.cbrt, (-100.0, 100.0), 4),
    "rcbrt": (lambda x: 1.0 / math.cbrt(x), (0.01, 100.0), 4),
    "erfc": (math.erfc, (-3.0, 9.0), 4),
    "erfcx": (lambda x: float((_D(x) ** 2).exp() * _D(math.erfc(x))), (-3.0, 8.0), 8),
    "normcdf": (_normcdf_exact, (-8.0, 8.0), 8),
    "lgamma": (math.lgamma, (0.1, 30.0), 4),
    "tgamma": (math.gamma, (0.1, 20.0), 4),
    "trunc": (lambda x: float(math.trunc(x)), (-100.0, 100.0), 0),
    "round": (_round_half_away, (-100.0, 100.0), 0),
    "rint": (lambda x: float(round(x)), (-100.0, 100.0), 0),
    "nearbyint": (lambda x: float(round(x)), (-100.0, 100.0), 0),
    "sinpi": (_sinpi, (-4.0, 4.0), 4),
    "cospi": (_cospi, (-4.0, 4.0), 4),
    "logb": (lambda x: float(math.frexp(x)[1] - 1), (-6e4, 6e4), 0),
    "j0": (_bessel(0, False), (-30.0, 30.0), None),
    "j1": (_bessel(1, False), (-30.0, 30.0), None),
    "cyl_bessel_i0": (_bessel(0, True), (-30.0, 30.0), 8),
    "cyl_bessel_i1": (_bessel(1, True), (-30.0, 30.0), 8),
}
INVERSES = {
    "erfinv": (_erfinv, (-1.0, 1.0)),
    "erfcinv": (_erfcinv, (0.0, 2.0)),
    "normcdfinv": (lambda p: -math.sqrt(2.0) * _erfcinv(2.0 * p), (0.0, 1.0)),
}
BINARY = {
    "atan2": (math.atan2, (-10.0, 10.0), 4),
    "hypot": (math.hypot, (-1e3, 1e3), 4),
    "rhypot": (lambda x, y: 1.0 / math.hypot(x, y), (-1e3, 1e3), 4),
    "fmod": (math.fmod, (-100.0, 100.0), 0),
    "remainder": (math.remainder, (-100.0, 100.0), 0),
    "copysign": (math.copysign, (-100.0, 100.0), 0),
    "fdim": (lambda x, y: x - y if x > y else 0.0, (-100.0, 100.0), 0),
}
NORMS = {
    "norm3d": (lambda a, b, c: math.hypot(a, b, c), 3),
    "rnorm3d": (lambda a, b, c: 1.0 / math.hypot(a, b, c), 3),
    "norm4d": (lambda a, b, c, d: math.hypot(a, b, c, d), 4),
    "rnorm4d": (lambda a, b, c, d: 1.0 / math.hypot(a, b, c, d), 4),
}


def _kernel(name: str, arity: int) -> str:
    loads = ", ".join(f"load(x{k} + o, m)" for k in range(arity))
    params = ", ".join(f"const any *x{k}" for k in range(arity))
    return (
        f"kernel k(any *out, {params}, i32 n, const i32 BLOCK)\n{{\n"
        "    tile o = arange(0, BLOCK);\n    tile m = o < n;\n"
        f"    store(out + o, {name}({loads}), m);\n}}\n"
    )


def _run(name: str, inputs: list[np.ndarray], out_dtype) -> np.ndarray:
    module = tx.compile(_kernel(name, len(inputs)), name=KERNEL_FILE)
    n = inputs[0].size
    out = np.zeros(n, out_dtype)
    module.k.interpret[(1,)](out, *inputs, n, BLOCK=1024, strided=True)
    return out


def _inputs(dtype: str, lo: float, hi: float, seed, count: int = 1) -> list[np.ndarray]:
    """``count`` arrays of N values in [lo, hi] in ``dtype``, each an offset view."""
    rng = np.random.default_rng(stable_seed(*seed))
    out = []
    for _ in range(count):
        values = rng.uniform(lo, hi, N + 1).astype(DTYPES[dtype].np)
        out.append(values[1:])  # an offset view: its first element is not the allocation's
    return out


def _check(got, want, dtype: str, f64_ulps, what: str, scale=None) -> None:
    if dtype != "f64":  # the reference rounded to the dtype (overflowing to inf with it)
        with np.errstate(over="ignore"):
            rounded = np.asarray(want).astype(DTYPES[dtype].np).astype(np.float64)
        assert_close_elementwise(got, rounded, dtype, ulps=2, scale=scale, what=what)
    elif f64_ulps is None:  # an absolute bound
        assert_close_elementwise(got, want, dtype, ulps=0, atol=1e-15, what=what)
    else:
        assert_close_elementwise(
            got, want, dtype, ulps=max(2 * f64_ulps, 1), scale=scale, what=what
        )


# ------------------------------------------------------------ the float functions


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_functions_against_float64_references(name, dtype):
    ref, (lo, hi), ulps = UNARY[name]
    (x,) = _inputs(dtype, lo, hi, (name, dtype))
    if name in ("round", "rint", "nearbyint"):  # and the halfway cases
        x[:8] = np.array([0.5, 1.5, 2.5, -0.5, -2.5, 3.5, -1.5, 0.49999997], np.float64)
    got = _run(name, [x], x.dtype)
    want = _vec(ref)(x.astype(np.float64))
    _check(got, want, dtype, ulps, name)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", sorted(INVERSES))
def test_inverse_functions_against_bisection(name, dtype):
    ref, (lo, hi) = INVERSES[name]
    (x,) = _inputs(dtype, lo, hi, (name, dtype))
    x = np.clip(x, np.nextafter(x.dtype.type(lo), x.dtype.type(hi)), None)  # the open interval
    x = np.where(x >= hi, np.nextafter(x.dtype.type(hi), x.dtype.type(lo)), x).astype(x.dtype)
    got = _run(name, [x], x.dtype)
    _check(got, ref(x.astype(np.float64)), dtype, 4, name)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_functions_against_float64_references(name, dtype):
    ref, (lo, hi), ulps = BINARY[name]
    x, y = _inputs(dtype, lo, hi, (name, dtype), 2)
    got = _run(name, [x, y], x.dtype)
    _check(got, _vec(ref)(x.astype(np.float64), y.astype(np.float64)), dtype, ulps, name)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", sorted(NORMS))
def test_norms(name, dtype):
    ref, arity = NORMS[name]
    xs = _inputs(dtype, -100.0, 100.0, (name, dtype), arity)
    got = _run(name, xs, xs[0].dtype)
    _check(got, _vec(ref)(*(x.astype(np.float64) for x in xs)), dtype, 4, name)


@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_nextafter_steps_one_float(dtype):
    x, y = _inputs(dtype, -10.0, 10.0, ("nextafter", dtype), 2)
    y[:3] = x[:3]  # toward itself: itself
    got = _run("nextafter", [x, y], x.dtype)
    np.testing.assert_array_equal(got[:3], x[:3])
    # one step of the integers the bits read as (x and y are nonzero and alike in sign here,
    # or x's sign is kept), in the direction of y
    bits = np.int64 if dtype == "f64" else np.int32
    step = got.view(bits).astype(object) - x.view(bits).astype(object)
    toward = np.sign(y.astype(np.float64) - x.astype(np.float64)) * np.where(x < 0, -1, 1)
    assert list(step[3:]) == list(toward[3:].astype(int))


@pytest.mark.parametrize("dtype", FLOATS)
def test_ldexp_and_scalbn_scale_by_powers_of_two(dtype):
    (x,) = _inputs(dtype, -4.0, 4.0, ("ldexp", dtype))
    rng = np.random.default_rng(stable_seed("ldexp-n", dtype))
    limit = {"f16": 12, "bf16": 100, "f32": 100, "f64": 1000}[dtype]
    n = rng.integers(-limit, limit, N).astype(np.int32)
    want = _vec(lambda a, b: math.ldexp(a, int(b)))(x.astype(np.float64), n)
    for name in ("ldexp", "scalbn"):
        got = _run(name, [x, n], x.dtype)
        # exact but for the rounding of results below the normal range: one rounding
        assert_close_elementwise(got, want, dtype, ulps=1, what=name)


SPECIALS = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 2.0**-149, 3.0e38, -0.75, 2.0**-130]


@pytest.mark.parametrize("dtype", FLOATS)
def test_predicates_and_exponents_of_special_values(dtype):
    with np.errstate(over="ignore"):  # 3e38 is inf in f16
        x = np.array(SPECIALS, np.float64).astype(DTYPES[dtype].np)
    x64 = x.astype(np.float64)
    for name, fn in (
        ("isnan", np.isnan),
        ("isinf", np.isinf),
        ("isfinite", np.isfinite),
        ("signbit", np.signbit),
    ):
        np.testing.assert_array_equal(_run(name, [x], np.bool_), fn(x64), err_msg=name)
    finite = np.isfinite(x64) & (x64 != 0)
    exponents = np.where(finite, np.frexp(np.where(finite, x64, 1.0))[1] - 1, 0)
    want = np.where(np.isinf(x64), 2**31 - 1, np.where(finite, exponents, -(2**31)))
    np.testing.assert_array_equal(_run("ilogb", [x], np.int32), want)
    logb = np.where(x64 == 0, -np.inf, np.where(finite, exponents, np.abs(x64)))
    np.testing.assert_array_equal(_run("logb", [x], x.dtype), logb.astype(x.dtype))


@pytest.mark.parametrize("dtype", FLOATS)
def test_rounding_to_i64(dtype):
    x = np.array([0.5, 1.5, 2.5, -0.5, -2.5, 3.49, -7.0, 1000.5], np.float64)
    x = x.astype(DTYPES[dtype].np)
    x64 = x.astype(np.float64)
    np.testing.assert_array_equal(_run("llrint", [x], np.int64), np.rint(x64).astype(np.int64))
    away = [int(_round_half_away(float(v))) for v in x64]
    np.testing.assert_array_equal(_run("llround", [x], np.int64), away)


@pytest.mark.parametrize("dtype", FLOATS)
def test_poles_and_edges_follow_c(dtype):
    x = np.array([0.0, -0.0, -1.0, -2.0, np.inf, -np.inf, np.nan], np.float64)
    x = x.astype(DTYPES[dtype].np)
    lg = _run("lgamma", [x], x.dtype).astype(np.float64)
    np.testing.assert_array_equal(lg, [np.inf, np.inf, np.inf, np.inf, np.inf, np.inf, np.nan])
    tg = _run("tgamma", [x], x.dtype).astype(np.float64)
    np.testing.assert_array_equal(tg, [np.inf, -np.inf, np.nan, np.nan, np.inf, np.nan, np.nan])
    y = np.array([-1.0, 1.0, 0.0, -0.0, 1.5, np.nan], np.float64).astype(x.dtype)
    inv = _run("erfinv", [y], x.dtype).astype(np.float64)
    np.testing.assert_array_equal(inv, [-np.inf, np.inf, 0.0, -0.0, np.nan, np.nan])
    assert np.signbit(inv[3])
    t = np.array([0.0, 2.0, 1.0, -1.0], np.float64).astype(x.dtype)
    np.testing.assert_array_equal(
        _run("erfcinv", [t], x.dtype).astype(np.float64), [np.inf, -np.inf, 0.0, np.nan]
    )


# ------------------------------------------------------------ integers

INTS = ["i32", "u32", "i64", "u64"]


def _int_inputs(dtype: str, seed) -> np.ndarray:
    d = DTYPES[dtype]
    rng = np.random.default_rng(stable_seed(*seed))
    raw = rng.integers(0, 2**63, N, dtype=np.uint64) | rng.integers(0, 2, N, dtype=np.uint64) << 63
    values = raw.astype(np.uint64 if d.bits == 64 else np.uint32).view(d.np)
    values[:4] = (
        np.array([0, 1, 2**d.bits - 1, 2 ** (d.bits - 1)], np.uint64)
        .astype(np.uint64 if d.bits == 64 else np.uint32)
        .view(d.np)
    )
    return values


def _bits(v, width: int) -> int:
    return int(v) & ((1 << width) - 1)


@pytest.mark.parametrize("dtype", INTS)
def test_integer_bits(dtype):
    width = DTYPES[dtype].bits
    x = _int_inputs(dtype, ("bits", dtype))
    u = [_bits(v, width) for v in x]
    np.testing.assert_array_equal(_run("popc", [x], np.int32), [bin(v).count("1") for v in u])
    np.testing.assert_array_equal(_run("clz", [x], np.int32), [width - v.bit_length() for v in u])
    np.testing.assert_array_equal(_run("ffs", [x], np.int32), [(v & -v).bit_length() for v in u])
    brev = [int(f"{v:0{width}b}"[::-1], 2) for v in u]
    got = _run("brev", [x], x.dtype)
    assert [_bits(v, width) for v in got] == brev
    y = _int_inputs(dtype, ("bits-y", dtype))
    high = [(a * _bits(b, width)) >> width for a, b in zip(u, y, strict=True)]
    assert [_bits(v, width) for v in _run("umulhi", [x, y], x.dtype)] == high


# ------------------------------------------------------------ typing, folding, errors


def test_constants_fold_through_the_twins():
    from .conftest import kernel_text, lower

    k = lower(
        kernel_text("    f32 y = erfinv(0.5f) + popc(255) + ilogb(1024.0f);\n    store(out, y);")
    )
    assert k.body[0].init.value == pytest.approx(float(np.float32(0.4769362762044699)) + 8 + 10)


@pytest.mark.parametrize(
    ("expr", "col", "message"),
    [
        ("erfinv(n)", 14, "erfinv needs a float operand, got i32"),
        ("nextafter((f16)a[0], (f16)a[1])", 14, "nextafter() steps to the neighbour in f32 or f64"),
        ("ldexp(a[0], 1.5f)", 14, "ldexp()'s exponent needs integer operands, got f32"),
        ("popc((i16)n)", 14, "popc() takes 32- or 64-bit integers, got i16"),
        ("popc(a[0])", 14, "popc needs integer operands, got f32"),
        ("atan2(a, a)", 14, "atan2 needs a float operand"),
    ],
)
def test_misuses_are_located(expr, col, message):
    from .conftest import kernel_text

    err = compile_error(kernel_text(f"    tile y = {expr};\n    store(out, (f32)y);"))
    assert (err.loc.line, err.loc.col) == (3, col), str(err)
    assert err.message.startswith(message), err.message
    assert err.hint or "needs integer" in err.message


def _every_function() -> str:
    from teeny_tx.lower.ops.table import OPS

    lines = []
    for k, name in enumerate(L.NAMES):
        arity = OPS[name].arity[0]
        if name in ("popc", "clz", "ffs", "brev", "umulhi"):
            args = ", ".join(["bits"] * arity)
        elif name in ("ldexp", "scalbn"):
            args = "x, (i32)bits"
        else:
            args = ", ".join(["x"] * arity)
        if name == "nextafter":
            args = "(f32)x, (f32)x"
        lines.append(f"    store(out + {k} * BLOCK + o, (f32){name}({args}), m);")
    return (
        "kernel every(f32 *out, const any *a, const u32 *w, i32 n, const i32 BLOCK)\n{\n"
        "    tile o = arange(0, BLOCK);\n    tile m = o < n;\n    tile x = load(a + o, m);\n"
        "    tile bits = load(w + o, m);\n" + "\n".join(lines) + "\n}\n"
    )


@pytest.mark.parametrize("arch", ["sm_90", "sm_90a"])
@pytest.mark.parametrize("dtype", FLOATS)
def test_every_function_compiles(arch, dtype):
    module = tx.compile(_every_function(), name=KERNEL_FILE)
    spec = module.every.specialize("f32", dtype, "u32", N, BLOCK=128, target=arch)
    result = nvrtc.compile_with_log(spec.cuda_source, name="every", arch=arch, headers=HEADERS)
    assert result.cubin[:4] == b"\x7fELF"


def test_every_function_runs_on_the_interpreter():
    """The kernel the GPU test compares: every function of the module, one row each."""
    module = tx.compile(_every_function(), name=KERNEL_FILE)
    x = np.linspace(0.05, 0.95, N).astype(np.float32)
    w = np.arange(N, dtype=np.uint32) * 2654435761
    out = np.zeros(len(L.NAMES) * 1024, np.float32)
    module.every.interpret[(1,)](out, x, w, N, BLOCK=1024)
    rows = out.reshape(len(L.NAMES), 1024)[:, :N]
    assert np.all(np.isfinite(rows[L.NAMES.index("erfinv")]))
    np.testing.assert_array_equal(rows[L.NAMES.index("popc")], [bin(int(v)).count("1") for v in w])


# ------------------------------------------------------------ Triton's spellings


@triton.jit
def _libdevice_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.extra.libdevice.erfinv(x) + tl.extra.cuda.libdevice.tan(x)
    y += tl.extra.libdevice.isfinited(x).to(tl.float32) + tl.umulhi(offs, offs).to(tl.float32)
    tl.store(y_ptr + offs, y, mask=mask)


def test_triton_names_reach_the_functions():
    from teeny_tx.triton.language.extra import libdevice
    from teeny_tx.triton.language.extra.cuda import libdevice as cuda_libdevice

    assert libdevice is cuda_libdevice is tl.extra.libdevice
    assert {n for n in L.NAMES} <= set(dir(libdevice))
    assert not hasattr(tl, "erfinv") and hasattr(tl, "umulhi")
    text = _libdevice_kernel.translate("f32", "f32", 9, BLOCK=16)
    assert (
        "erfinv(x) + tan(x)" in text and "(f32)isfinite(x)" in text and "umulhi(offs, offs)" in text
    )
