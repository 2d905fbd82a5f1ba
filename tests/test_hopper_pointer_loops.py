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
def test_builds_and_compiles(mod, name, arch):
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
        target=arch,
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


# ------------------------------------------------------------ the pointer induction rewrite


def _loop_assigns(kernel, name):
    from teeny_tx.lower import ir
    from teeny_tx.lower.ir import walk_stmts

    loops = [s for s in walk_stmts(kernel.body) if isinstance(s, ir.Loop)]
    return [
        any(isinstance(t, ir.Assign) and t.name == name for t in walk_stmts(lp.body))
        for lp in loops
    ]


@pytest.mark.parametrize("case,rewritten", [(0, False), (1, False), (2, True), (3, False)])
def test_rewrite_applies_only_where_it_keeps_the_meaning(mod, case, rewritten):
    """The rewritten IR (what the GPU path lowers) runs on the interpreter exactly as the
    kernel does; only the loop whose pointer is dead after it, with no continue and a loop-
    invariant increment, loses its pointer assignment."""
    from teeny_tx import interp

    x = np.random.default_rng(case).standard_normal(4000).astype(np.float32)
    spec = mod.advance_cases.specialize("f32", "f32", 9, 32, CASE=case, B=32)
    assert _loop_assigns(spec.kernel, "p") == [not rewritten]
    want = np.zeros(32, np.float32)
    got = np.zeros(32, np.float32)
    mod.advance_cases.interpret[(1,)](want, x, 9, 32, CASE=case, B=32)
    interp.run(spec.kernel, (1, 1, 1), {"out": got, "x": x, "n": 9, "stride": 32})
    np.testing.assert_array_equal(got, want)


def test_the_tutorial_loop_pipelines_like_the_index_form(mod):
    """After the rewrite, the loads of mm_advance are cp.async-pipelined into wgmma at the
    128x256x64 tile, and no pointer tile moves through shared memory."""
    spec = mod.mm_advance.specialize(
        "f32",
        "f16",
        "f16",
        *(4096, 4096, 4096, 4096, 1, 4096, 1, 4096, 1),
        BM=128,
        BN=256,
        BK=64,
        num_warps=8,
        num_stages=4,
        target="sm_90a",
    )
    src = spec.cuda_source
    assert "software pipeline, 4 stages: a_t, b_t" in src
    assert "tx::wgmma<" in src
    assert _loop_assigns(spec.kernel, "pa") == [False]
    for line in src.splitlines():
        assert not ("relayout<" in line and (", pa," in line or ", pb," in line)), line
    a = np.random.default_rng(1).standard_normal((70, 90)).astype(np.float16)
    b = np.random.default_rng(2).standard_normal((90, 50)).astype(np.float16)
    from teeny_tx import interp

    small = mod.mm_advance.specialize(
        "f32", "f16", "f16", *(70, 50, 90, 90, 1, 50, 1, 50, 1), BM=32, BN=32, BK=16, num_warps=4
    )
    got = np.zeros((70, 50), np.float32)
    args = dict(
        zip(
            ("c", "a", "b", "M", "N", "K", "sam", "sak", "sbk", "sbn", "scm", "scn"),
            (got, a, b, 70, 50, 90, 90, 1, 50, 1, 50, 1),
            strict=True,
        )
    )
    interp.run(small.kernel, (3, 2, 1), args)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-3)
