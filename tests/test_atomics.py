"""Atomics on the interpreter (lanes in order, exact), and their CUDA through NVRTC."""

import numpy as np
import pytest

import teeny_tx as tx
from teeny_tx.kernel import HEADERS
from teeny_tx.runtime import nvrtc

from .conftest import ATOMIC_KINDS as KINDS
from .conftest import stable_seed


def test_histogram(atomics):
    rng = np.random.default_rng(0)
    values = rng.integers(0, 17, size=1001).astype(np.int32)
    bins = np.zeros(17, np.int32)
    atomics.histogram.interpret[(tx.cdiv(1001, 256),)](bins, values, 1001, BLOCK=256)
    np.testing.assert_array_equal(bins, np.bincount(values, minlength=17))


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float32, np.float64])
def test_contention_on_one_address(atomics, dtype):
    rng = np.random.default_rng(1)
    x = (rng.standard_normal(3000) * 10).astype(dtype)
    total = np.zeros(1, dtype)
    atomics.contended.interpret[(tx.cdiv(3000, 512),)](total, x, 3000, BLOCK=512)
    np.testing.assert_allclose(total[0], x.astype(np.float64).sum(), rtol=1e-5)


def test_scalar_atomic_runs_once_per_program(atomics):
    x = np.arange(4096, dtype=np.float32)
    total, old = np.zeros(1, np.float32), np.zeros(4, np.float32)
    atomics.scalar_sum.interpret[(4,)](total, old, x, 4096, BLOCK=1024)
    sums = x.reshape(4, 1024).sum(1)
    assert total[0] == sums.sum()
    np.testing.assert_array_equal(old, np.concatenate([[0], np.cumsum(sums)[:-1]]))


@pytest.mark.parametrize("kind", KINDS)
def test_update_returns_old_values_in_lane_order(atomics, kind):
    rng = np.random.default_rng(KINDS.index(kind))
    n, m = 300, 7
    src = rng.integers(-1000, 1000, size=n).astype(np.int32)
    dst = rng.integers(-1000, 1000, size=m).astype(np.int32)
    expect_dst, expect_old = dst.copy(), np.zeros(n, np.int32)
    apply = {
        "add": np.add,
        "max": np.maximum,
        "min": np.minimum,
        "and": np.bitwise_and,
        "or": np.bitwise_or,
        "xor": np.bitwise_xor,
        "xchg": lambda a, b: b,
    }[kind]
    for i in range(n):  # one program, lanes in order
        expect_old[i] = expect_dst[i % m]
        expect_dst[i % m] = apply(expect_dst[i % m], src[i])
    old = np.zeros(n, np.int32)
    atomics.update.interpret[(1,)](dst, src, old, n, m, KIND=KINDS.index(kind), BLOCK=512)
    np.testing.assert_array_equal(dst, expect_dst)
    np.testing.assert_array_equal(old, expect_old)


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("kind", ["add", "max", "min", "xchg"])
def test_float_updates_return_old_values_in_lane_order(atomics, kind, dtype):
    """The float forms (atomic max and min of floats ignore NaN, as CUDA's fmax/fmin): values
    small integers and halves, so that every sum is exact in f16 too."""
    rng = np.random.default_rng(stable_seed("float-update", kind, np.dtype(dtype).name))
    n, m = 300, 7
    src = (rng.integers(-8, 8, size=n) / 2).astype(dtype)
    dst = (rng.integers(-8, 8, size=m) / 2).astype(dtype)
    apply = {"add": np.add, "max": np.fmax, "min": np.fmin, "xchg": lambda a, b: b}[kind]
    expect_dst, expect_old = dst.copy(), np.zeros(n, dtype)
    for i in range(n):
        expect_old[i] = expect_dst[i % m]
        expect_dst[i % m] = apply(expect_dst[i % m], src[i])
    old = np.zeros(n, dtype)
    atomics.update.interpret[(1,)](dst, src, old, n, m, KIND=KINDS.index(kind), BLOCK=512)
    np.testing.assert_array_equal(dst, expect_dst)
    np.testing.assert_array_equal(old, expect_old)


def test_spin_lock(atomics):
    lock, counter = np.zeros(1, np.int32), np.zeros(1, np.int32)
    atomics.locked_increment.interpret[(50,)](lock, counter, BLOCK=32)
    assert counter[0] == 50 and lock[0] == 0


def test_atomics_refuse_read_only_pointers_and_bad_types():
    src = "kernel k(const f32 *p) { atomic_add(p, 1.0f); }"
    with pytest.raises(tx.CompileError, match="read-only"):
        tx.compile(src, name="kernels/k.c").k.cuda_source("f32")
    src = "kernel k(f32 *p) { atomic_and(p, 1.0f); }"
    with pytest.raises(tx.CompileError, match="does not support f32"):
        tx.compile(src, name="kernels/k.c").k.cuda_source("f32")


CUDA_CASES = (
    [("update", ("i32", "i32", "i32", 100, 7), {"KIND": k, "BLOCK": 256}) for k in range(7)]
    + [
        ("update", (dt, dt, dt, 100, 7), {"KIND": k, "BLOCK": 256})
        for dt in ("f16", "bf16", "f32", "f64", "i64", "u32", "u64")
        for k in (0, 1, 2, 6)
    ]
    + [
        ("histogram", ("i32", "i32", 100), {"BLOCK": 64}),
        ("contended", ("f32", "f32", 100), {"BLOCK": 1024}),
        ("scalar_sum", ("f32", "f32", "f32", 100), {"BLOCK": 1024}),
        ("locked_increment", ("i32", "i32"), {"BLOCK": 32}),
    ]
)


@pytest.mark.parametrize("name,args,constexprs", CUDA_CASES)
def test_atomic_kernels_compile_for_sm90(atomics, name, args, constexprs):
    source = getattr(atomics, name).cuda_source(*args, **constexprs)
    assert (
        nvrtc.compile_to_cubin(source, name=name, arch="sm_90", headers=HEADERS)[:4] == b"\x7fELF"
    )
