"""Pointer tiles that change layout: the loop Triton's matmul tutorial writes (``pa += BK * sak``
feeding dot) and a pointer tile passed through trans(). Both build for the GPU (they raised an
internal AttributeError in code generation: a pointer element has no itemsize), compile with
NVRTC for sm_90 and sm_90a, and run on the interpreter against NumPy."""

from __future__ import annotations

import numpy as np
import pytest

import teeny_tx as tx
from teeny_tx.kernel import HEADERS
from teeny_tx.runtime import nvrtc

KERNELS = ("mm_advance", "mm_trans_ptr")


@pytest.fixture(scope="module")
def mod():
    return tx.compile("tests/kernels/pointer_loops.c", name="tests/kernels/pointer_loops.c")


@pytest.mark.parametrize("name", KERNELS)
@pytest.mark.parametrize("arch", ["sm_90", "sm_90a"])
def test_builds_and_compiles(mod, name, arch, monkeypatch):
    monkeypatch.setenv("TEENY_TX_ARCH", arch)
    spec = getattr(mod, name).specialize(
        "f32",
        "f16",
        "f16",
        *(256, 256, 256, 256, 1, 256, 1, 256, 1),
        BM=64,
        BN=64,
        BK=32,
        num_warps=4,
        num_stages=3,
    )
    assert spec.arch == arch
    result = nvrtc.compile_with_log(spec.cuda_source, name=name, arch=arch, headers=HEADERS)
    assert result.cubin[:4] == b"\x7fELF"
    assert nvrtc.spilled_bytes(result.log) == 0


@pytest.mark.parametrize("name", KERNELS)
@pytest.mark.parametrize("mnk", [(1, 1, 1), (37, 50, 45), (64, 33, 96)])
def test_interpreter_matches_numpy(mod, name, mnk):
    m, n, k = mnk
    rng = np.random.default_rng(m * n + k)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    c = np.zeros((m, n), np.float32)
    grid = (tx.cdiv(m, 32), tx.cdiv(n, 32))
    getattr(mod, name).interpret[grid](c, a, b, m, n, k, k, 1, n, 1, n, 1, BM=32, BN=32, BK=16)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(c, ref, rtol=1e-5, atol=1e-4 * max(1.0, np.abs(ref).max()))
