"""lower/passes/dot_plan.py's deferred waits: a wgmma dot that is a statement's whole value is
issued without waiting for it, and an ir.WgmmaWait goes before the first statement that touches its
result, so the work in between runs while the tensor cores multiply (the softmax of one key block
while the product with the previous block's probabilities runs)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import teeny_tx as tx
from teeny_tx.lower import ir
from teeny_tx.lower.ir import Op, walk_exprs, walk_stmts

# two products per iteration, work between them and the first use of the second: the shape of
# attention's overlapped forward (S of the next block, then P V of this one)
OVERLAP = """
kernel overlap(f32 *out, const f16 *a, const f16 *b, const f16 *v, i32 n, const i32 M,
               const i32 N, const i32 K)
{
    tile rm = arange(0, M);
    tile rn = arange(0, N);
    tile rk = expand_dims(arange(0, K), 0);
    tile a_t = load(a + expand_dims(rm, 1) * K + rk);
    f32 acc[M][K] = 0;
    tile p = (f16)dot(a_t, trans(load(b + expand_dims(rn, 1) * K + rk)));
    for (i32 start = 0; start < n; start += N) {
        tile b_t = load(b + (expand_dims(rn, 1) + start) * K + rk);
        tile v_t = load(v + (expand_dims(rn, 1) + start) * K + rk);
        tile s = dot(a_t, trans(b_t));
        acc = dot(p, v_t, acc);
        s = s * 0.5f;
        tile e = exp2(s - expand_dims(max(s, 1), 1));
        tile r = sum(e, 1);
        acc = acc * expand_dims(1.0f / (r + 1.0f), 1);
        p = (f16)e;
    }
    store(out + expand_dims(rm, 1) * K + rk, acc);
}
"""

# one product at the end of the body: nothing would run between it and its wait
MATMUL = """
kernel mm(f32 *out, const f16 *a, const f16 *b, i32 k, const i32 M, const i32 N, const i32 K)
{
    tile rm = expand_dims(arange(0, M), 1);
    tile rn = expand_dims(arange(0, N), 0);
    tile rk = arange(0, K);
    f32 acc[M][N] = 0;
    for (i32 start = 0; start < k; start += K) {
        tile a_t = load(a + rm * k + expand_dims(rk, 0) + start);
        tile b_t = load(b + (expand_dims(rk, 1) + start) * N + rn);
        acc = dot(a_t, b_t, acc);
    }
    store(out + rm * N + rn, acc);
}
"""

OVERLAP_ARGS = ("f32", "f16", "f16", "f16", 256)
OVERLAP_META = {"M": 128, "N": 64, "K": 64, "num_warps": 8, "num_stages": 2}


def _compile(source: str, name: str):
    return tx.compile(source, name=name)


def _spec(kernel, *args, arch="sm_90a", **meta):
    return kernel.specialize(*args, target=arch, **meta)


def _loop_body(spec) -> tuple[ir.Stmt, ...]:
    (p,) = [s for s in walk_stmts(spec.kernel.body) if isinstance(s, ir.PipelinedLoop)]
    return p.loop.body


def _dot_plans(stmts):
    return [e.attr("plan") for e in walk_exprs(stmts) if isinstance(e, Op) and e.op == "dot"]


def _kind(s: ir.Stmt) -> str:
    if isinstance(s, ir.WgmmaWait):
        return f"wait<{s.pending}>({','.join(v.name for v in s.results)})"
    if isinstance(s, (ir.Declare, ir.Assign)):
        value = s.init if isinstance(s, ir.Declare) else s.value
        dot = isinstance(value, Op) and value.op == "dot"
        return f"{s.name}=dot" if dot else s.name
    return type(s).__name__


def test_waits_go_before_the_first_use():
    spec = _spec(_compile(OVERLAP, "overlap.c").overlap, *OVERLAP_ARGS, **OVERLAP_META)
    body = _loop_body(spec)
    order = [_kind(s) for s in body]
    assert order == [
        "Staged", "Staged", "s=dot", "acc=dot",
        "wait<1>(s)", "s", "e", "r",  # the scores' wait lets the second product run on
        "wait<0>(acc)", "acc", "p",
    ], order  # fmt: skip
    s_plan, acc_plan = _dot_plans(body)
    assert s_plan.deferred and acc_plan.deferred
    assert acc_plan.register_a and acc_plan.fragments.startswith("tx_a_frags")
    assert not s_plan.fragments
    second = [s for s in body if isinstance(s, ir.WgmmaWait)][1]
    # what ran while the second product did is fenced before its wait; its A registers after
    assert [v.name for v in second.computed] == ["s", "e", "r"]
    assert second.fragments == ((acc_plan.fragments, 4),)


def test_the_loop_of_a_matmul_is_unchanged():
    """A block where the wait would come right after its dot keeps the plain wgmma (the
    matmul's CUDA does not change)."""
    k = _compile(MATMUL, "mm.c").mm
    spec = _spec(k, "f32", "f16", "f16", 256, M=128, N=128, K=64, num_warps=4, num_stages=2)
    body = _loop_body(spec)
    assert not any(isinstance(s, ir.WgmmaWait) for s in walk_stmts(body))
    assert [p.deferred for p in _dot_plans(body)] == [False]
    assert "wgmma_async" not in k.cuda_source(
        "f32", "f16", "f16", 256, M=128, N=128, K=64, num_warps=4, num_stages=2, target="sm_90a"
    )


def test_mma_sync_and_the_switch_defer_nothing(monkeypatch):
    k = _compile(OVERLAP, "overlap.c").overlap
    body = _loop_body(_spec(k, *OVERLAP_ARGS, arch="sm_90", **OVERLAP_META))
    assert not any(isinstance(s, ir.WgmmaWait) for s in body)
    monkeypatch.setenv("TEENY_TX_DEFER_WAITS", "0")
    k = _compile(OVERLAP, "overlap_off.c").overlap
    body = _loop_body(_spec(k, *OVERLAP_ARGS, **OVERLAP_META))
    assert not any(isinstance(s, ir.WgmmaWait) for s in body)
    assert not any(p.deferred for p in _dot_plans(body))


def test_generated_cuda_issues_then_waits():
    k = _compile(OVERLAP, "overlap.c").overlap
    src = k.cuda_source(*OVERLAP_ARGS, target="sm_90a", **OVERLAP_META)
    loop = src[src.index("for (int start = 0;") :]
    issue_s = loop.index("tx::wgmma_async<")
    issue_pv = loop.index("tx::wgmma_rs_async<")
    wait1 = loop.index("tx::wgmma_wait<1>();  // s ready")
    wait0 = loop.index("tx::wgmma_wait<0>();  // acc ready")
    exp = loop.index("tx::exp2(")
    assert issue_s < issue_pv < wait1 < exp < wait0
    # before the second wait: the fences of what was computed, then the block's end
    between = loop[exp:wait0]
    assert "tx::fence_registers<" in between and "tx::block_boundary();" in between
    assert "tx::fence_fragments<4>(tx_a_frags" in loop[wait0 : wait0 + 400]


def _cuobjdump() -> str | None:
    found = shutil.which("cuobjdump")
    if found:
        return found
    try:  # the nvidia-cuda-cuobjdump wheel
        import nvidia.cu13 as cu13

        path = Path(next(iter(cu13.__path__))) / "bin" / "cuobjdump"
        return str(path) if path.exists() else None
    except (ImportError, StopIteration):
        return None


def test_ptxas_keeps_the_softmax_between_the_waits(tmp_path):
    """The SASS of the loop: both products issued, the scores' wait (DEPBAR <= 1), the
    exponentials, then the product's wait (DEPBAR <= 0): ptxas did not hoist the second wait
    above the work (it does without tx::block_boundary), and nothing spills."""
    from teeny_tx.kernel import HEADERS
    from teeny_tx.runtime import nvrtc

    k = _compile(OVERLAP, "overlap.c").overlap
    src = k.cuda_source(*OVERLAP_ARGS, target="sm_90a", **OVERLAP_META)
    result = nvrtc.compile_with_log(src, name="overlap", arch="sm_90a", headers=HEADERS)
    assert nvrtc.spilled_bytes(result.log) == 0, result.log
    tool = _cuobjdump()
    if tool is None:
        pytest.skip("no cuobjdump here")
    path = tmp_path / "k.cubin"
    path.write_bytes(result.cubin)
    env = dict(os.environ, PATH=f"{Path(tool).parent}:{os.environ.get('PATH', '')}")
    sass = subprocess.run([tool, "-sass", str(path)], capture_output=True, text=True, env=env)
    ops = re.findall(r"(HGMMA\S*|WARPGROUP\.DEPBAR\.LE gsb0, 0x\d|MUFU\.EX2)", sass.stdout)
    # the loop: its register-A product (HGMMA with a register operand) is the second issued
    waits = [i for i, o in enumerate(ops) if o.startswith("WARPGROUP")]
    pairs = [(a, b) for a, b in zip(waits, waits[1:], strict=False) if ops[a].endswith("0x1")]
    assert pairs, ops
    first, second = pairs[0]
    assert ops[second].endswith("0x0")
    assert ops[first + 1 : second].count("MUFU.EX2") >= 32  # [128, 64] / 256 threads


def test_overlap_kernel_on_the_interpreter():
    """The interpreter runs the kernel as written (the waits are a GPU plan): against NumPy."""
    k = _compile(OVERLAP, "overlap.c").overlap
    rng = np.random.default_rng(0)
    m, n, d = 32, 16, 16
    a = (rng.standard_normal((m, d)) / 4).astype(np.float16)
    b = (rng.standard_normal((48, d)) / 4).astype(np.float16)
    v = rng.standard_normal((48, d)).astype(np.float16)
    out = np.zeros((m, d), np.float32)
    k.interpret[(1,)](out, a, b, v, 48, M=m, N=n, K=d, num_warps=4)
    a64, b64, v64 = (x.astype(np.float64) for x in (a, b, v))
    p = (a64 @ b64[:n].T).astype(np.float16).astype(np.float64)
    acc = np.zeros((m, d))
    for start in range(0, 48, n):
        s = (a64 @ b64[start : start + n].T).astype(np.float32) * 0.5
        e = np.exp2(s - s.max(1, keepdims=True))
        acc = acc + p @ v64[start : start + n]
        acc = acc * (1.0 / (e.sum(1, keepdims=True) + 1.0))
        p = e.astype(np.float16).astype(np.float64)
    np.testing.assert_allclose(out, acc, rtol=2e-2, atol=2e-2)
