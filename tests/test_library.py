"""The bundled kernels on the NumPy interpreter, against float64 NumPy references."""

import numpy as np
import pytest

import teeny_tx as tx
from teeny_tx.dtypes import DTYPES

from .cases import CASES
from .conftest import stable_seed

SIZES = (1, 7, 1001, 2**20 + 3)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_bundled_kernel_on_interpreter(case, dtype, n):
    if n > 2**16 and dtype != "f32" and case.name not in ("vector_add", "gelu_exact"):
        pytest.skip("large sizes run for f32 and two kernels per dtype, to keep CI short")
    rng = np.random.default_rng(stable_seed(case.name, dtype, n))
    xs, scalars = case.make(n, dtype, rng)
    out = np.full(n, np.nan, dtype=DTYPES[dtype].np)
    case.launch((tx.cdiv(n, 1024),), case.args(out, xs, scalars, n), interpret=True)
    case.check(out, xs, scalars, dtype)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_bundled_kernel_on_offset_views(case):
    """Views that start one element into their buffer: 4-byte aligned, still correct."""
    n, dtype = 1001, "f32"
    rng = np.random.default_rng(7)
    xs, scalars = case.make(n + 1, dtype, rng)
    views = [x[1:] for x in xs]
    buffer = np.full(n + 2, -7.0, dtype=np.float32)
    out = buffer[1:-1]
    case.launch((tx.cdiv(n, 256),), case.args(out, views, scalars, n), interpret=True, BLOCK=256)
    case.check(out, [np.ascontiguousarray(v) for v in views], scalars, dtype)
    assert buffer[0] == -7.0 and buffer[-1] == -7.0, "wrote outside the output view"


def test_specialisation_tracks_alignment():
    k = tx.compile("kernels/vector_add.c").vector_add
    a = np.zeros(1025, dtype=np.float32)
    aligned = k.cuda_source(a[:1024], a[:1024], a[:1024], 1024, BLOCK=1024)
    shifted = k.cuda_source(a[1:], a[1:], a[1:], 1024, BLOCK=1024)
    assert "load_vec_if<4>" in aligned  # n % 16 == 0: one mask test per vector
    assert "load_vec" not in shifted and "align 4" in shifted


def test_device_and_host_binders_agree_on_the_key():
    """The launch fast path and the interpreter/inspection binder must build the same key."""
    cupy = pytest.importorskip("cupy")
    memory = cupy.cuda.UnownedMemory(0x7F0000001000, 1 << 20, None, device_id=0)

    def fake(n):
        return cupy.ndarray((n,), np.float32, memptr=cupy.cuda.MemoryPointer(memory, 0))

    k = tx.compile("kernels/axpby.c").axpby
    args = (fake(4096), fake(4096), fake(4096), 0.5, 2.0, 4096)
    key, values, big = k.binder.bind_device(args, {"BLOCK": 1024}, 4)
    host = k.binder.bind_host(
        ("f32", "f32", "f32", 0.5, 2.0, 4096), {"BLOCK": 1024}, 4, describe=True
    )
    assert key == host and not big
    assert dict(k.binder.spec(key).constexprs) == {"BLOCK": 1024}
    # scalars travel in their declared types: f32, f32, i32 after three 8-byte addresses
    assert values[3:] == [0.5, 2.0, 4096] and k.binder.narrow.format == "@QQQffi"
