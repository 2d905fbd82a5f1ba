"""linalg's operand preparation (orientation, K-contiguous and 16-byte aligned copies) keeps
every element where the kernel reads it: pointer + row * s0 + col * s1 inside the buffer.

The H200 run of the Hopper path died with an illegal address in ``linear`` on [4095, 1000] x
[4097, 1000]^T: the copy that pads w's rows was laid out from w's own shape [out, in] but
described with the strides of [in, out], so the kernel (and its tensor map) reached four times
past the copy. These tests run on the CPU with NumPy arrays posing as device arrays.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from teeny_tx.library import linalg


class _Dev(np.ndarray):
    """A NumPy array with CuPy's ``.data.ptr``."""

    @property
    def data(self):  # type: ignore[override]
        return SimpleNamespace(ptr=self.__array_interface__["data"][0])


class _FakeArrays:
    kind = "cupy"
    _names = {np.dtype(np.float16): "f16", np.dtype(np.float32): "f32"}
    _types = {"f16": np.float16, "f32": np.float32}

    def dtype(self, x):
        return self._names[x.dtype]

    known_dtype = dtype  # the fake's dtypes are all known

    def strides(self, x):
        return tuple(s // x.itemsize for s in x.strides)

    def empty(self, shape, dtype):
        return np.empty(shape, self._types[dtype]).view(_Dev)


def _root(x):
    while isinstance(x.base, np.ndarray):
        x = x.base
    return x


def _read(x, dims, strides):
    """The [rows, cols] operand the kernel reads from x's pointer with these element strides,
    after checking that every address lies inside x's buffer."""
    item = x.itemsize
    start = x.__array_interface__["data"][0]
    lo, hi = np.lib.array_utils.byte_bounds(_root(x))
    last = start + ((dims[0] - 1) * strides[0] + (dims[1] - 1) * strides[1]) * item
    assert lo <= start and last + item <= hi, "the kernel would read outside the buffer"
    return np.lib.stride_tricks.as_strided(
        x, shape=dims, strides=(strides[0] * item, strides[1] * item)
    )


def _prepare(arrays, a, b, p):
    a = linalg._oriented(arrays, a, p, "a")
    b = linalg._oriented(arrays, b, p, "b")
    if arrays.dtype(a) == "f32":
        a, p = linalg._k_contiguous(arrays, a, p, "a")
        b, p = linalg._k_contiguous(arrays, b, p, "b")
    a, p = linalg._aligned(arrays, a, p, "a")
    b, p = linalg._aligned(arrays, b, p, "b")
    return a, b, p


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
@pytest.mark.parametrize(
    "t, n_in, n_out", [(41, 1000 // 8, 517 // 8), (9, 24, 24), (33, 16, 7), (1, 13, 1)]
)
def test_linear_operands_stay_in_bounds(monkeypatch, dtype, t, n_in, n_out):
    """linear's p.b describes w [out, in] as [in, out] (strides swapped), as linear() does."""
    monkeypatch.setattr(linalg, "ALIGN_MIN_ELEMENTS", 1)  # every operand takes the copy path
    rng = np.random.default_rng(t * 1000 + n_in)
    arrays = _FakeArrays()
    x = rng.standard_normal((t, n_in)).astype(dtype).view(_Dev)
    w = rng.standard_normal((n_out, n_in)).astype(dtype).view(_Dev)
    (sxt, sxi), (swo, swi) = arrays.strides(x), arrays.strides(w)
    p = linalg._Product(t, n_out, n_in, 1, (0, sxt, sxi), (0, swi, swo), (0, n_out, 1))
    a, b, q = _prepare(arrays, x, w, p)
    np.testing.assert_array_equal(_read(a, (t, n_in), q.a[1:]), np.asarray(x))
    np.testing.assert_array_equal(_read(b, (n_in, n_out), q.b[1:]), np.asarray(w).T)


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_linear_backward_dw_operands_stay_in_bounds(monkeypatch, dtype):
    """dw = dy.T @ x: p.a describes dy [T, out] as [out, T]."""
    monkeypatch.setattr(linalg, "ALIGN_MIN_ELEMENTS", 1)
    rng = np.random.default_rng(5)
    arrays = _FakeArrays()
    t, n_out, n_in = 37, 21, 19
    dy = rng.standard_normal((t, n_out)).astype(dtype).view(_Dev)
    x = rng.standard_normal((t, n_in)).astype(dtype).view(_Dev)
    (sdt, sdo), (sxt, sxi) = arrays.strides(dy), arrays.strides(x)
    p = linalg._Product(n_out, n_in, t, 1, (0, sdo, sdt), (0, sxt, sxi), (0, n_in, 1))
    a, b, q = _prepare(arrays, dy, x, p)
    np.testing.assert_array_equal(_read(a, (n_out, t), q.a[1:]), np.asarray(dy).T)
    np.testing.assert_array_equal(_read(b, (t, n_in), q.b[1:]), np.asarray(x))


@pytest.mark.parametrize("transpose_a, transpose_b", [(0, 0), (0, 1), (1, 0), (1, 1)])
def test_matmul_operands_stay_in_bounds(monkeypatch, transpose_a, transpose_b):
    monkeypatch.setattr(linalg, "ALIGN_MIN_ELEMENTS", 1)
    rng = np.random.default_rng(transpose_a * 2 + transpose_b)
    arrays = _FakeArrays()
    m, k, n = 45, 1000 // 8 + 1, 99
    a = rng.standard_normal((k, m) if transpose_a else (m, k)).astype(np.float16)
    b = rng.standard_normal((n, k) if transpose_b else (k, n)).astype(np.float16)
    a = (a.T if transpose_a else a).view(_Dev)
    b = (b.T if transpose_b else b).view(_Dev)
    p = linalg._Product(m, n, k, 1, (0, *arrays.strides(a)), (0, *arrays.strides(b)), (0, n, 1))
    a2, b2, q = _prepare(arrays, a, b, p)
    np.testing.assert_array_equal(_read(a2, (m, k), q.a[1:]), np.asarray(a))
    np.testing.assert_array_equal(_read(b2, (k, n), q.b[1:]), np.asarray(b))
