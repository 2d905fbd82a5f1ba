"""Random numbers (Philox4x32-10) and dropout, on the CPU.

The NumPy Philox reproduces Random123's known-answer vectors, so it is Philox4x32-10; the
device header's code, built for the host with a C++ compiler, computes the same bits; the
interpreter runs the ops through the same NumPy functions; NVRTC compiles them for sm_90.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import teeny_tx
from teeny_tx.dtypes import DTYPES
from teeny_tx.kernel import HEADERS
from teeny_tx.lower.ir import Const
from teeny_tx.lower.ops import random as rng

from .cases import CASES, dropout_reference
from .conftest import (
    EVERY_RANDOM_OP,
    KERNEL_FILE,
    compile_error,
    every_random_op,
    kernel_text,
    lower,
    nvrtc_compile,
)

# Random123's kat_vectors, the "philox4x32 10" lines: counter (4 words), key (2), result (4).
KAT = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    (
        (0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344),
        (0xA4093822, 0x299F31D0),
        (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1),
    ),
]

# ---------------------------------------------------------------- the generator itself


def test_numpy_philox_reproduces_random123_known_answers():
    for counter, key, expected in KAT:
        assert [int(w) for w in rng.philox4x32_10(*counter, *key)] == list(expected)
    counters, keys, expected = (np.array(column, np.uint32).T for column in zip(*KAT, strict=True))
    words = rng.philox4x32_10(*counters, *keys)  # elementwise over arrays
    np.testing.assert_array_equal(np.stack(words), expected)


def test_seed_is_the_key_and_offset_the_counter():
    seed, offset = np.int64(-0x1234_5678_9ABC), np.arange(-3, 5, dtype=np.int64) * 2**31
    s, o = np.uint64(seed.astype(np.uint64)), offset.astype(np.uint64)
    lo = np.uint64(0xFFFFFFFF)
    expected = rng.philox4x32_10(o & lo, o >> np.uint64(32), 0, 0, s & lo, s >> np.uint64(32))
    for got, want in zip(rng.philox(seed, offset), expected, strict=True):
        np.testing.assert_array_equal(got, want)
    # a signed offset is sign-extended: i32 and i64 offsets of one value name the same number
    small = np.arange(-5, 5, dtype=np.int32)
    np.testing.assert_array_equal(rng.randint(7, small), rng.randint(7, small.astype(np.int64)))


def test_words_and_conversions():
    offs = np.arange(4096)
    words = rng.philox(99, offs)
    np.testing.assert_array_equal(rng.randint(99, offs), words[0])
    for k in range(4):
        np.testing.assert_array_equal(rng.randint4x(99, offs, k), words[k])
    u = rng.rand(99, offs)
    assert u.dtype == np.float32
    np.testing.assert_array_equal(u.astype(np.float64) * 2**24, words[0] >> 8)
    assert rng.uniform(np.uint32(0xFFFFFFFF)) == np.float32(1 - 2**-24)
    assert rng.uniform(np.uint32(0)) == 0.0


def test_rand_is_uniform():
    n = 10**6
    u = rng.rand(20261129, np.arange(n)).astype(np.float64)
    assert u.min() >= 0.0 and u.max() < 1.0
    assert abs(u.mean() - 0.5) < 5 * np.sqrt(1 / 12 / n)
    assert abs(u.var() - 1 / 12) < 5 * np.sqrt((1 / 80 - 1 / 144) / n)
    counts = np.bincount((u * 16).astype(int), minlength=16)
    assert np.all(np.abs(counts - n / 16) < 5 * np.sqrt(n / 16))


def test_randn_is_standard_normal():
    n = 10**6
    z32 = rng.randn(-42, np.arange(n))
    assert z32.dtype == np.float32
    z = z32.astype(np.float64)
    assert np.isfinite(z).all()
    assert abs(z.mean()) < 5 / np.sqrt(n)
    assert abs(z.var() - 1.0) < 5 * np.sqrt(2 / n)
    assert np.abs(z).max() <= np.sqrt(48 * np.log(2)) + 1e-6
    assert abs(np.mean(np.abs(z) < 1.0) - 0.682689) < 5 * np.sqrt(0.2166 / n)


def test_seeds_and_offsets_decorrelate():
    a, b = rng.rand(1, np.arange(10**5)), rng.rand(2, np.arange(10**5))
    assert abs(np.corrcoef(a, b)[0, 1]) < 5 / np.sqrt(10**5)
    assert abs(np.corrcoef(a[:-1], a[1:])[0, 1]) < 5 / np.sqrt(10**5)


def test_box_muller_extremes():
    """u1 = 1 gives 0; the largest radius is sqrt(-2 log 2^-24); cos(0) = 1."""
    assert rng.box_muller(np.uint32(0), np.uint32(0)) == 0.0
    top = rng.box_muller(np.uint32(0xFFFFFFFF), np.uint32(0))
    np.testing.assert_allclose(top, np.sqrt(48 * np.log(2)), rtol=1e-6)


# ---------------------------------------------------------------- the device code, on the host

HOST_SHIM = """
#include <cmath>
#include <cstdio>
#include <math.h>
#define __device__
#define __forceinline__ inline
struct uint4 { unsigned int x, y, z, w; };
inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) { return {a, b, c, d}; }
inline unsigned __umulhi(unsigned a, unsigned b) {
    return (unsigned)(((unsigned long long)a * b) >> 32);
}
"""

HOST_MAIN = """
int main() {
    const unsigned long long seeds[] = {0ull, 42ull, 0xFFFFFFFFFFFFFFFFull, 0x123456789ABCull};
    for (unsigned long long seed : seeds)
        for (long long off = -300; off < 700; ++off) {
            uint4 w = tx::philox(seed, (unsigned long long)off);
            float u = tx::rand(seed, off), z = tx::randn(seed, off);
            unsigned ub, zb;
            std::memcpy(&ub, &u, 4);
            std::memcpy(&zb, &z, 4);
            std::printf("%u %u %u %u %u %u %u %u\\n", w.x, w.y, w.z, w.w, tx::randint(seed, off),
                        tx::randint4x<2>(seed, off), ub, zb);
        }
    return 0;
}
"""


@pytest.mark.skipif(shutil.which("c++") is None, reason="no host C++ compiler")
def test_device_header_on_the_host_matches_numpy(tmp_path: Path):
    """random.cuh built for the CPU (shims for the CUDA builtins) gives NumPy's words and
    floats: the device code and its NumPy twin compute the same thing, bit for bit."""
    source = tmp_path / "random_host.cpp"
    source.write_text(
        HOST_SHIM + "#include <cstring>\n" + HEADERS["random.cuh"] + HOST_MAIN, encoding="utf-8"
    )
    exe = tmp_path / "random_host"
    subprocess.run(
        ["c++", "-std=c++17", "-O1", "-ffp-contract=off", str(source), "-o", str(exe)],
        check=True,
        capture_output=True,
    )
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    got = np.array([line.split() for line in out.splitlines()], dtype=np.uint64).astype(np.uint32)
    offs = np.arange(-300, 700, dtype=np.int64)
    seeds = [0, 42, 0xFFFFFFFFFFFFFFFF, 0x123456789ABC]
    rows = np.concatenate([np.stack(rng.philox(np.uint64(s), offs), axis=1) for s in seeds])
    np.testing.assert_array_equal(got[:, :4], rows)
    np.testing.assert_array_equal(got[:, 4], rows[:, 0])
    np.testing.assert_array_equal(got[:, 5], rows[:, 2])
    rand = np.concatenate([rng.rand(np.uint64(s), offs) for s in seeds])
    np.testing.assert_array_equal(got[:, 6].view(np.float32), rand)
    randn = np.concatenate([rng.randn(np.uint64(s), offs) for s in seeds])
    np.testing.assert_allclose(got[:, 7].view(np.float32), randn, rtol=1e-6, atol=1e-6)


# ---------------------------------------------------------------- the ops in kernels


@pytest.mark.parametrize(
    ("n", "seed", "base"), [(1, 0, 0), (1001, -7, -500), (4099, 2**40 + 3, 17)]
)
def test_every_op_on_the_interpreter_equals_numpy(n, seed, base):
    u, z, w, w4 = every_random_op(n, seed, base)
    offs = base + np.arange(n)
    np.testing.assert_array_equal(u, rng.rand(seed, offs))
    np.testing.assert_array_equal(z, rng.randn(seed, offs))
    np.testing.assert_array_equal(w, rng.randint(seed, offs))
    np.testing.assert_array_equal(w4, np.stack(rng.philox(seed, offs), axis=1))


def test_64_bit_indices_give_the_same_numbers():
    """Offsets are sign-extended to u64, so `i32` offsets mean the same at either width."""
    narrow = every_random_op(3000, 5, -1500)
    wide = every_random_op(3000, 5, -1500, wide=2**31 + 1)
    k = teeny_tx.compile(EVERY_RANDOM_OP, name=KERNEL_FILE).every
    assert "long long offs" in k.cuda_source(
        "f32", "f32", "u32", "u32", 5, -1500, 3000, 2**31 + 1, BLOCK=1024
    )
    for a, b in zip(narrow, wide, strict=True):
        np.testing.assert_array_equal(a, b)


def test_seed_tiles_and_scalar_offsets_broadcast():
    src = """
kernel k(u32 *out, f32 *u, const i32 K, const i32 BLOCK)
{
    tile i = arange(0, BLOCK);
    store(out + i, randint4x((u32)i * 3u, 11, K));
    store(u + i, rand(i, i + 1));
}
"""
    out, u = np.zeros(64, np.uint32), np.zeros(64, np.float32)
    teeny_tx.compile(src, name=KERNEL_FILE).k.interpret[(1,)](out, u, K=3, BLOCK=64)
    i = np.arange(64)
    np.testing.assert_array_equal(out, rng.randint4x((i * 3).astype(np.uint32), 11, 3))
    np.testing.assert_array_equal(u, rng.rand(i, i + 1))


def test_result_types_and_broadcast_shapes():
    body = """
    tile i = arange(0, BLOCK);
    tile r1 = rand(n, i);
    tile r2 = randn(i, 3);
    tile r3 = randint((i64)n, (u8)i);
    tile r4 = randint4x(1, i, 2);
    f32 r5 = rand(n, 7);
    store(out + i, r1 + r2 + (f32)r3 + (f32)r4 + r5);
"""
    kernel = lower(kernel_text(body))
    types = {s.name: s.type for s in kernel.body if getattr(s, "name", "").startswith("r")}
    assert {k: (str(t.dtype), t.shape) for k, t in types.items()} == {
        "r1": ("f32", (128,)),
        "r2": ("f32", (128,)),
        "r3": ("u32", (128,)),
        "r4": ("u32", (128,)),
        "r5": ("f32", ()),
    }


def test_constant_arguments_fold():
    kernel = lower(kernel_text("    f32 x = rand(12345, 678);\n    store(out, x);"))
    init = kernel.body[0].init
    assert isinstance(init, Const) and init.value == float(rng.rand(12345, 678))


@pytest.mark.parametrize(
    ("call", "message", "hint"),
    [
        ("rand(1.5f, i)", "rand() needs an integer seed, got f32", rng._SEED_HINT),
        ("randn(x, i)", "randn() needs an integer seed, got f32[128]", rng._SEED_HINT),
        ("randint(n, x)", "randint() needs an integer offset, got f32[128]", rng._OFFSET_HINT),
        ("rand(n, i < 3)", "rand() needs an integer offset, got bool[128]", rng._OFFSET_HINT),
        ("rand(a, i)", "rand() needs an integer seed, got const f32*", rng._SEED_HINT),
        (
            "randint4x(n, i, 4)",
            "randint4x() takes the word index k as a constant 0, 1, 2 or 3, got 4",
            "write the index as a literal or a const parameter",
        ),
        (
            "randint4x(n, i, n)",
            "randint4x() takes the word index k as a constant 0, 1, 2 or 3, got a non-constant i32",
            None,
        ),
        (
            "rand(i, arange(0, 64))",
            "shape mismatch in rand(): [128] and [64] do not broadcast",
            None,
        ),
    ],
)
def test_typing_errors(call, message, hint):
    body = f"    tile i = arange(0, BLOCK);\n    tile x = (f32)i;\n    tile r = {call};"
    err = compile_error(kernel_text(body))
    assert err.message == message
    assert err.loc.line == 5 and err.loc.file == KERNEL_FILE
    if hint is not None:
        assert err.hint == hint


def test_nvrtc_compiles_every_random_op_for_sm_90():
    k = teeny_tx.compile(EVERY_RANDOM_OP, name=KERNEL_FILE).every
    for wide in (0, 2**31 + 1):
        source = k.cuda_source("f32", "f32", "u32", "u32", 5, 0, 4096, wide, BLOCK=1024)
        assert "tx::randint4x<3>(" in source and "tx::randn(" in source
        assert nvrtc_compile(source, "every").startswith(b"\x7fELF")


def test_random_header_is_included_by_the_device_header():
    assert "random.cuh" in HEADERS
    assert '#include "random.cuh"' in HEADERS["teeny_tx.cuh"]


# ---------------------------------------------------------------- dropout

DROPOUT = {c.name: c for c in CASES if c.name.startswith("dropout")}


@pytest.mark.parametrize("n", [1, 1001, 2**20 + 3])
@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_dropout_on_the_interpreter(dtype, n):
    case = DROPOUT["dropout"]
    gen = np.random.default_rng(n)
    xs, scalars = case.make(n, dtype, gen)
    out = np.full(n, np.nan, DTYPES[dtype].np)
    case.launch((teeny_tx.cdiv(n, 4096),), case.args(out, xs, scalars, n), True, BLOCK=4096)
    case.check(out, xs, scalars, dtype)
    p, seed = scalars
    kept = np.mean(out.astype(np.float64) != 0)
    if n > 10**5:
        assert abs(kept - (1 - p)) < 5 * np.sqrt(p * (1 - p) / n)


def test_dropout_backward_regenerates_the_forward_mask():
    n, p, seed = 100_003, 0.3, -(2**62) + 11
    gen = np.random.default_rng(0)
    x = gen.standard_normal(n).astype(np.float32) + 10.0  # never 0: zeros mark dropped lanes
    dy = gen.standard_normal(n).astype(np.float32)
    mod = teeny_tx.compile(Path(__file__).parents[1] / "kernels" / "dropout.c")
    out, dx = np.zeros(n, np.float32), np.full(n, np.nan, np.float32)
    grid = (teeny_tx.cdiv(n, 1024),)
    mod.dropout.interpret[grid](out, x, p, seed, n, BLOCK=1024)
    mod.dropout_backward.interpret[grid](dx, dy, p, seed, n, BLOCK=1024)
    keep = out != 0
    np.testing.assert_array_equal(keep, rng.rand(seed, np.arange(n)) > np.float32(p))
    np.testing.assert_array_equal(dx[~keep], 0.0)
    np.testing.assert_array_equal(dx[keep], dy[keep] / (np.float32(1) - np.float32(p)))
    np.testing.assert_allclose(dx, dropout_reference(dy.astype(np.float64), p, seed), rtol=2e-7)


def test_dropout_with_p_one_drops_everything():
    n = 5000
    x = np.ones(n, np.float32)
    out = np.full(n, np.nan, np.float32)
    mod = teeny_tx.compile(Path(__file__).parents[1] / "kernels" / "dropout.c")
    mod.dropout.interpret[(teeny_tx.cdiv(n, 1024),)](out, x, 1.0, 3, n, BLOCK=1024)
    np.testing.assert_array_equal(out, 0.0)
