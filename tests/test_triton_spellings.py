"""Triton spellings a porter reaches for: debug_barrier(), bitcast(x, T), multiple_of() and
max_contiguous() hints (op-table entries on both backends), and the refusals that name the way to
write what is not supported (an integer cast to a pointer, associative_scan over several tiles);
the hex-literal rule (C's: 0x9E3779B9 is a u32)."""

from __future__ import annotations

import numpy as np
import pytest

import teeny_tx
from teeny_tx.dtypes import DTYPES

from .conftest import KERNEL_FILE, compile_error, kernel_text, lower, nvrtc_compile

BITS = """kernel bits(TO *out, const any *x, i32 n, const i32 BLOCK)
{
    tile o = program_id(0) * BLOCK + arange(0, BLOCK);
    tile v = load(x + o, o < n);
    debug_barrier();
    store(out + o, bitcast(v, TO), o < n);
}
"""
PAIRS = [
    ("f32", "u32"),
    ("f32", "i32"),
    ("u32", "f32"),
    ("f16", "u16"),
    ("bf16", "i16"),
    ("u16", "bf16"),
    ("f64", "u64"),
    ("i64", "f64"),
    ("i8", "u8"),
]


@pytest.mark.parametrize(("src", "to"), PAIRS)
@pytest.mark.parametrize("n", [1, 1001])
def test_bitcast_reads_the_same_bits_on_the_interpreter(src, to, n):
    module = teeny_tx.compile(BITS.replace("TO", to), name=KERNEL_FILE)
    rng = np.random.default_rng(n)
    width = DTYPES[src].itemsize
    raw = rng.integers(0, 256, size=n * width, dtype=np.uint8)
    x = raw.view(DTYPES[src].np)
    out = np.zeros(n, DTYPES[to].np)
    module.bits.interpret[(teeny_tx.cdiv(n, 256),)](out, x, n, BLOCK=256)
    np.testing.assert_array_equal(out.view(np.uint8), raw)


@pytest.mark.parametrize(("src", "to"), PAIRS[:4])
def test_bitcast_and_debug_barrier_compile_through_nvrtc(src, to):
    module = teeny_tx.compile(BITS.replace("TO", to), name=KERNEL_FILE)
    source = module.bits.cuda_source(to, src, 1001, BLOCK=256)
    assert "tx::debug_barrier();" in source and "tx::bitcast<" in source
    nvrtc_compile(source, "bits")


def test_bitcast_of_constants_folds():
    k = lower(kernel_text("    u32 one = bitcast(1.0f, u32);\n    store(out, bitcast(one, f32));"))
    assert k.body[0].init.value == 0x3F800000


@pytest.mark.parametrize(
    ("expr", "col", "message"),
    [
        ("bitcast(n, f16)", 13, "bitcast() from i32 (32 bits) to f16 (16 bits)"),
        ("bitcast(n, 3)", 24, "the second argument of bitcast() is a type name"),
        (
            "bitcast(a, u64)",
            13,
            "bitcast() reinterprets numbers of equal width, not const f32* as u64",
        ),
        (
            "(f32 *)n",
            13,
            "an address is a 64-bit integer: (T *)x takes an i64 or u64 value, got i32",
        ),
        (
            "multiple_of(n, 12)",
            13,
            "the multiple_of() bound must be a positive power of two, got 12",
        ),
        (
            "max_contiguous(1.5f, 16)",
            13,
            "max_contiguous() takes integer or pointer values, got f32",
        ),
    ],
)
def test_misuses_are_located(expr, col, message):
    err = compile_error(kernel_text(f"    tile y = {expr};"))
    assert (err.loc.line, err.loc.col, err.message) == (3, col + 1, message)


STRIDED = """kernel rows(f32 *out, const f32 *x, i32 stride, const i32 BLOCK)
{
    tile o = START + arange(0, BLOCK);
    store(out + o, load(x + o));
}
"""


def test_hints_widen_the_accesses_the_analysis_cannot_prove():
    plain = STRIDED.replace("START", "program_id(0) * stride")
    hinted = STRIDED.replace("START", "multiple_of(program_id(0) * stride, 4)")
    both = STRIDED.replace(
        "START + arange(0, BLOCK)",
        "max_contiguous(multiple_of(program_id(0) * stride + arange(0, BLOCK) * 1, 4), 4)",
    )

    def source(text):
        return teeny_tx.compile(text, name=KERNEL_FILE).rows.cuda_source("f32", "f32", 3, BLOCK=512)

    assert "load_vec" not in source(plain)
    assert "tx::load_vec<4>" in source(hinted) and "tx::store_vec<4>" in source(hinted)
    assert "tx::load_vec<4>" in source(both)
    nvrtc_compile(source(hinted), "rows")
    x = np.arange(4 * 512, dtype=np.float32)
    for text in (plain, hinted):  # a true promise changes speed, never the result
        out = np.zeros_like(x)
        teeny_tx.compile(text, name=KERNEL_FILE).rows.interpret[(4,)](out, x, 512, BLOCK=512)
        np.testing.assert_array_equal(out, x)


def test_an_integer_cast_to_a_pointer_reads_an_address():
    """An i64 loaded from memory becomes a pointer (tests/test_grouped_gemm.py runs it)."""
    body = "    tile p = (f32 *)load(addrs);\n    store(p, 1.0f);"
    text = kernel_text(body, "f32 *out, const i64 *addrs")
    source = teeny_tx.compile(text, name=KERNEL_FILE).k.cuda_source("f32", "i64")
    assert "reinterpret_cast<float*>(" in source
    nvrtc_compile(source, "k")


def test_a_scan_over_several_tiles_names_the_tuple_spelling():
    """Several tiles as separate arguments: the hint writes them as one tuple
    (tests/test_tuples.py runs tuple scans)."""
    for call in ("associative_scan(o, o, 0, f)", "reduce(o, o, 0, f)"):
        err = compile_error(kernel_text(f"    tile o = arange(0, BLOCK);\n    tile s = {call};"))
        assert err.loc.line == 4 and "as a tuple: reduce((x, i), axis, combine)" in err.hint


RECURRENCE = """
tile pack(tile a, tile b)
{
    return ((u64)bitcast(a, u32) << 32) | (u64)bitcast(b, u32);
}

u64 combine(u64 x, u64 y)
{
    return ((u64)bitcast(bitcast((u32)(x >> 32), f32) * bitcast((u32)(y >> 32), f32), u32) << 32)
        | (u64)bitcast(bitcast((u32)(y >> 32), f32) * bitcast((u32)x, f32)
                       + bitcast((u32)y, f32), u32);
}

kernel recur(f32 *h, const f32 *a, const f32 *b, const i32 N)
{
    tile o = arange(0, N);
    tile s = associative_scan(pack(load(a + o), load(b + o)), 0, combine);
    store(h + o, bitcast((u32)s, f32));
}
"""


def recurrence(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    h, acc = np.zeros(a.size), 0.0
    for t in range(a.size):
        acc = float(a[t]) * acc + float(b[t])
        h[t] = acc
    return h


@pytest.mark.parametrize("n", [1, 64, 1024])
def test_the_packed_pair_scan_computes_a_linear_recurrence(n):
    module = teeny_tx.compile(RECURRENCE, name=KERNEL_FILE)
    rng = np.random.default_rng(n)
    a = rng.uniform(0.5, 1.0, n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    h = np.zeros(n, np.float32)
    module.recur.interpret[(1,)](h, a, b, N=n)
    np.testing.assert_allclose(h, recurrence(a, b), rtol=1e-4, atol=1e-4)
    nvrtc_compile(module.recur.cuda_source("f32", "f32", "f32", N=n), "recur")


@pytest.mark.parametrize(
    ("literal", "dtype"),
    [
        ("0x9E3779B9", "u32"),  # C: unsigned int holds it, int does not
        ("0x7fffffff", "i32"),  # int holds it: weak, adopts the tile's i32
        ("2654435769", "i64"),  # a decimal literal C types as long
        ("0x100000000", "i64"),
        ("0xFFFFFFFFFFFFFFFF", "u64"),
        ("0x9E3779B9u", "u32"),
        ("037777777777", "u32"),  # octal follows the hex rule
    ],
)
def test_hex_literals_follow_cs_types(literal, dtype):
    k = lower(kernel_text(f"    tile o = arange(0, BLOCK);\n    tile h = o * {literal};"))
    assert str(k.body[1].type) == f"{dtype}[128]"


def test_a_golden_ratio_hash_stays_32_bit_and_wraps_as_in_c():
    module = teeny_tx.compile(
        "kernel h(u32 *out, const i32 BLOCK)\n{\n    tile o = arange(0, BLOCK);\n"
        "    store(out + o, (o ^ 0x9E3779B9) * 0x85EBCA6B);\n}\n",
        name=KERNEL_FILE,
    )
    out = np.zeros(256, np.uint32)
    module.h.interpret[(1,)](out, BLOCK=256)
    o = np.arange(256, dtype=np.uint32)
    np.testing.assert_array_equal(out, (o ^ np.uint32(0x9E3779B9)) * np.uint32(0x85EBCA6B))
