"""fast_exp2: 2^x by the hardware's approximation with results below 2^-126 flushed to zero.

On the interpreter, against float64 for every float dtype at odd sizes; exp2 beside it keeps
what fast_exp2 flushes; and in the SASS for sm_90 (where cuobjdump is installed), fast_exp2 is
the bare MUFU.EX2 while exp2 keeps its float compare (the subnormal fix-up) around it."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

import teeny_tx as tx

from .test_hopper import _cuobjdump

SRC = """
kernel apply(any *y, const any *x, i32 n, const i32 FAST, const i32 BLOCK) {
    tile i = program_id(0) * BLOCK + arange(0, BLOCK);
    tile v = load(x + i, i < n, 0);
    store(y + i, FAST ? fast_exp2(v) : exp2(v), i < n);
}
"""

TINY = np.finfo(np.float32).tiny  # 2^-126


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    path = tmp_path_factory.mktemp("fast_exp2") / "apply.c"
    path.write_text(SRC)
    return tx.compile(str(path)).apply


def _dtypes():
    from teeny_tx.dtypes import DTYPES

    return [DTYPES[name].numpy for name in ("f32", "f16", "bf16", "f64")]


def _run(kernel, x: np.ndarray, fast: int) -> np.ndarray:
    y = np.zeros_like(x)
    block = 1024
    kernel.interpret[(tx.cdiv(x.size, block),)](y, x, x.size, FAST=fast, BLOCK=block)
    return y


CASES = [(n, dtype) for n in (1, 1001) for dtype in _dtypes()] + [(2**20 + 3, np.float32)]


@pytest.mark.parametrize("n,dtype", CASES, ids=str)
def test_interpreter_against_float64(kernel, n, dtype):
    rng = np.random.default_rng(n)
    x = rng.uniform(-140, 8, n).astype(dtype)
    got = _run(kernel, x, 1).astype(np.float64)
    ref = np.exp2(x.astype(np.float64))
    if np.dtype(dtype) != np.float64:
        ref = np.where(ref < TINY, 0.0, ref)  # flushed, computed in f32
    rtol = {np.dtype(np.float32): 2e-7, np.dtype(np.float64): 1e-15}.get(np.dtype(dtype), 8e-3)
    np.testing.assert_allclose(got, ref.astype(dtype).astype(np.float64), rtol=rtol, atol=0)


def test_exp2_keeps_what_fast_exp2_flushes(kernel):
    x = np.linspace(-148, -127, 64, dtype=np.float32)  # 2^x is subnormal in f32
    assert (_run(kernel, x, 0) > 0).all()
    assert (_run(kernel, x, 1) == 0).all()
    normal = np.linspace(-126, 30, 512, dtype=np.float32)
    np.testing.assert_allclose(_run(kernel, normal, 1), _run(kernel, normal, 0), rtol=2e-7)


@pytest.mark.parametrize("fast", [0, 1])
def test_sass_of_fast_exp2_is_the_bare_mufu(kernel, fast, tmp_path):
    spec = kernel.specialize("f32", "f32", 1 << 20, FAST=fast, BLOCK=1024, target="sm_90")
    assert ("tx::fast_exp2(" in spec.cuda_source) == bool(fast)
    tool = _cuobjdump()
    if tool is None:
        pytest.skip("cuobjdump is not installed")
    path = tmp_path / "k.cubin"
    path.write_bytes(spec.cubin)
    sass = subprocess.run([tool, "-sass", str(path)], capture_output=True, text=True).stdout
    assert "MUFU.EX2" in sass
    assert ("FSETP" in sass) == (not fast), sass
