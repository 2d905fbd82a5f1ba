"""Atomics on the GPU under contention: exact for integers, within rounding for floats."""

import numpy as np
import pytest

import teeny_tx as tx

from ..conftest import ATOMIC_KINDS as KINDS

cp = pytest.importorskip("cupy")


def test_histogram_many_programs(atomics):
    rng = np.random.default_rng(0)
    n = 2**20 + 3
    values = rng.integers(0, 37, size=n).astype(np.int32)
    bins = cp.zeros(37, cp.int32)
    atomics.histogram[(tx.cdiv(n, 1024),)](bins, cp.asarray(values), n, BLOCK=1024)
    np.testing.assert_array_equal(cp.asnumpy(bins), np.bincount(values, minlength=37))


@pytest.mark.parametrize(
    "dtype", [np.int32, np.int64, np.uint32, np.float32, np.float64, np.float16]
)
def test_contention_on_one_address(atomics, dtype):
    rng = np.random.default_rng(1)
    n = 100_003
    if np.dtype(dtype).kind in "iu":
        x = rng.integers(0, 100, size=n).astype(dtype)
    else:
        x = (rng.standard_normal(n) * 0.01).astype(dtype)
    total = cp.zeros(1, dtype)
    atomics.contended[(tx.cdiv(n, 1024),)](total, cp.asarray(x), n, BLOCK=1024)
    expect = x.astype(np.float64).sum()
    if np.dtype(dtype).kind in "iu":
        assert int(total.get()[0]) == int(expect)
    else:
        tol = {np.float16: 0.5, np.float32: 1e-3, np.float64: 1e-9}[dtype]
        assert abs(float(total.get()[0]) - expect) <= tol * max(1.0, abs(expect)) + tol


def test_scalar_atomic_runs_once_per_program(atomics):
    n = 64 * 1024
    x = np.ones(n, np.float32)
    total, old = cp.zeros(1, cp.float32), cp.zeros(64, cp.float32)
    atomics.scalar_sum[(64,)](total, old, cp.asarray(x), n, BLOCK=1024)
    assert float(total.get()[0]) == n
    assert sorted(cp.asnumpy(old).tolist()) == [1024.0 * k for k in range(64)]


@pytest.mark.parametrize("kind", KINDS)
def test_update_final_values(atomics, kind):
    """Many programs hit 7 addresses; the final values are order-independent except xchg."""
    rng = np.random.default_rng(KINDS.index(kind))
    n, m = 50_000, 7
    src = rng.integers(0, 1 << 20, size=n).astype(np.int32)
    dst = rng.integers(0, 1 << 20, size=m).astype(np.int32)
    d_dst, old = cp.asarray(dst), cp.zeros(n, cp.int32)
    atomics.update[(tx.cdiv(n, 256),)](
        d_dst, cp.asarray(src), old, n, m, KIND=KINDS.index(kind), BLOCK=256
    )
    got = cp.asnumpy(d_dst)
    groups = [src[i::m] for i in range(m)]
    if kind == "xchg":
        assert all(got[i] in set(groups[i].tolist()) for i in range(m))
        return
    reduce = {
        "add": np.add,
        "max": np.maximum,
        "min": np.minimum,
        "and": np.bitwise_and,
        "or": np.bitwise_or,
        "xor": np.bitwise_xor,
    }[kind]
    exact = [
        reduce.reduce(np.concatenate([[dst[i]], groups[i]]).astype(np.int64)) for i in range(m)
    ]
    expect = np.array(exact, np.int64).astype(np.int32)  # int32 addition wraps on the GPU
    np.testing.assert_array_equal(got, expect)


def test_spin_lock_serialises_programs(atomics):
    lock, counter = cp.zeros(1, cp.int32), cp.zeros(1, cp.int32)
    atomics.locked_increment[(500,)](lock, counter, BLOCK=32)
    assert int(counter.get()[0]) == 500 and int(lock.get()[0]) == 0
