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
    """100003 atomic adds to one address, in whatever order the GPU makes them, every one
    counted once: the values are chosen so that every partial sum, in any order, is exact in
    the dtype (integers; multiples of 2^-10 whose absolute sum stays below 2^24 units for f32
    and f64; for f16, 1000 nonzero multiples of 1/8 whose absolute sum stays below 256), so the
    total must equal the float64 sum exactly, not within a tolerance."""
    rng = np.random.default_rng(1)
    n = 100_003
    if np.dtype(dtype).kind in "iu":
        x = rng.integers(0, 100, size=n).astype(dtype)
    elif dtype == np.float16:
        x = np.zeros(n, dtype)
        where = rng.choice(n, 1000, replace=False)
        x[where] = rng.choice([-1.0, 1.0], 1000) * rng.integers(1, 3, 1000) / 8  # |sum| < 256
    else:
        x = (rng.integers(-100, 101, size=n) / 1024).astype(dtype)  # sum |x| < 2^24 / 1024
    total = cp.zeros(1, dtype)
    atomics.contended[(tx.cdiv(n, 1024),)](total, cp.asarray(x), n, BLOCK=1024)
    expect = x.astype(np.float64).sum()
    assert np.abs(x.astype(np.float64)).sum() < {np.float16: 256, np.float32: 2**14}.get(
        dtype, 2**40
    )
    if np.dtype(dtype).kind in "iu":
        assert int(total.get()[0]) == int(expect)
    else:
        assert float(total.get()[0]) == expect


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
