"""bench/bench_attention.py's Triton FlashAttention-2 peer on Triton's interpreter
(TRITON_INTERPRET=1, torch CPU tensors): the forward's o and base-2 lse, and the backward's
three kernels (delta, dK/dV, dQ) against torch autograd of the math SDPA in float32, at ragged
and block-multiple lengths, D 64 and 128, causal and not, with tiles small enough that every
loop runs several blocks and the causal diagonal spans several steps, and with each of the
tiles the bench times on the GPU. Skipped where triton (or torch) is not importable.

The interpreter's tl.dot multiplies bf16 operands as their raw 16-bit patterns (Triton 3.8),
so bf16 is checked by the bench on the GPU only; fp16 and float32 are checked here.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

BENCH = Path(__file__).resolve().parents[1] / "bench"
LOG2E = 1.4426950408889634


@pytest.fixture(scope="module")
def bench():
    """bench_attention loaded with TRITON_INTERPRET=1 (read when its kernels are decorated)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TRITON_INTERPRET", "1")
        if str(BENCH) not in sys.path:
            mp.syspath_prepend(str(BENCH))  # bench/ is not a package: its scripts import common
        spec = importlib.util.spec_from_file_location(
            "bench_attention_interpreted", BENCH / "bench_attention.py"
        )
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        mp.setitem(sys.modules, spec.name, module)  # dataclasses look their module up
        spec.loader.exec_module(module)
        yield module


@pytest.fixture(scope="module")
def tri(bench):
    pytest.importorskip("triton")
    if bench.triton is None:
        pytest.skip("triton imports but bench_attention could not use it")
    return bench


def _inputs(n, d, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(1, 2, n, d, generator=g).to(dtype) for _ in range(4))


def _reference(q, k, v, do, causal):
    """o, lse2 and (dq, dk, dv) of the math SDPA in float32 (autograd)."""
    qf, kf, vf = (x.float().requires_grad_() for x in (q, k, v))
    o = torch.nn.functional.scaled_dot_product_attention(qf, kf, vf, is_causal=causal)
    grads = torch.autograd.grad(o, (qf, kf, vf), do.float())
    n, d = q.shape[2], q.shape[3]
    s = qf.detach() @ kf.detach().transpose(-1, -2) * d**-0.5
    if causal:
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    return o.detach(), torch.logsumexp(s, -1) * LOG2E, grads


def _check(bench, n, d, causal, dtype, dkdv, dq, tol):
    q, k, v, do = _inputs(n, d, dtype)
    o, lse2 = bench.triton_attention(q, k, v, causal)
    grads = bench.triton_attention_backward(do, q, k, v, o, lse2, causal, dkdv=dkdv, dq=dq)
    o_ref, lse2_ref, grads_ref = _reference(q, k, v, do, causal)
    assert lse2.dtype == torch.float32 and lse2.shape == (1, 2, n)
    errors = {"lse2": float((lse2 - lse2_ref).abs().max())}
    for name, out, ref in zip(
        ("o", "dq", "dk", "dv"), (o, *grads), (o_ref, *grads_ref), strict=True
    ):
        assert out.dtype == dtype and out.shape == ref.shape, name
        errors[name] = bench._err(out, ref)
    bad = {name: e for name, e in errors.items() if not e <= tol}  # NaN fails too
    assert not bad, f"errors above {tol}: {bad} (all: {errors})"


SMALL_DKDV = (32, 64, 4, 1)  # dK/dV: 64 keys a program, 32 queries a step (2 on the diagonal)
SMALL_DQ = (64, 32, 4, 1)  # dQ: 64 queries a program, 32 keys a step (2 on the diagonal)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("n", [1, 17, 128, 300])
def test_fp16_matches_autograd_of_math_sdpa(tri, n, d, causal):
    _check(tri, n, d, causal, torch.float16, SMALL_DKDV, SMALL_DQ, tri.TOL["fp16"])


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("n", [33, 200])
def test_float32_matches_to_rounding(tri, n, causal):
    """float32 inputs (the interpreter's dot is exact float32): errors of an algorithmic slip
    (a missed block, a wrong mask, a scale off) are far above 1e-5, fp16 rounding is not."""
    _check(tri, n, 64, causal, torch.float32, SMALL_DKDV, SMALL_DQ, 1e-5)


@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("which", [0, 1, 2])
def test_each_gpu_tile_is_correct(tri, which, d):
    """The tiles the bench picks from on the GPU, at a length that leaves a ragged block;
    causal, which runs both the masked and the whole loops of both kernels."""
    dkdv, dq = tri.TRITON_BWD_DKDV[d][which], tri.TRITON_BWD_DQ[d][which]
    _check(tri, 300, d, True, torch.float16, dkdv, dq, tri.TOL["fp16"])


def test_default_tiles_off_gpu_are_the_first(tri):
    q, k, v, do = _inputs(40, 64, torch.float16)
    o, lse2 = tri.triton_attention(q, k, v, True)
    got = tri.triton_attention_backward(do, q, k, v, o, lse2, True)
    first = tri.triton_attention_backward(
        do, q, k, v, o, lse2, True, dkdv=tri.TRITON_BWD_DKDV[64][0], dq=tri.TRITON_BWD_DQ[64][0]
    )
    for a, b in zip(got, first, strict=True):
        assert torch.equal(a, b)
    assert not tri.TRITON_BWD_CHOSEN  # nothing is timed off the GPU


def test_rejects_strided_inputs_and_bad_tiles(tri):
    q, k, v, do = _inputs(64, 64, torch.float16)
    o, lse2 = tri.triton_attention(q, k, v, False)
    with pytest.raises(ValueError, match="^k: want a contiguous"):
        tri.triton_attention_backward(do, q, k.transpose(1, 2), v, o, lse2, False)
    with pytest.raises(ValueError, match="^lse2: want a float32"):
        tri.triton_attention_backward(do, q, k, v, o, lse2.double(), False)
    with pytest.raises(ValueError, match="BN must be a multiple of BM"):
        tri.triton_attention_backward(do, q, k, v, o, lse2, False, dkdv=(64, 32, 4, 1))
    with pytest.raises(ValueError, match="BM must be a multiple of BN"):
        tri.triton_attention_backward(do, q, k, v, o, lse2, False, dq=(32, 64, 4, 1))


def test_table_adds_ours_over_triton_column(bench):
    """Where Triton ran, the table gains "ours / Triton" after "ours / best peer"; else the
    table is common.Table's, unchanged."""
    rows: list[tuple[str, float | None, dict[str, float | None]]] = [
        ("fp16 N=1024 D=64", 300.0, {"cuDNN": 400.0, "Triton": 250.0}),
        ("fp16 N=4096 D=64", None, {"cuDNN": 400.0, "Triton": 250.0}),
        ("fp16 N=16384 D=64", 300.0, {"cuDNN": 400.0, "Triton": None}),
    ]
    tables = []
    for also in (True, False):
        table = bench.AttentionTable("t", "TFLOP/s", bench.PEERS, also_to_triton=also)
        for case, ours, peers in rows:
            table.add(case, ours, peers)
        table.notes.append("a note")
        tables.append(table.markdown("date", "device").splitlines())
    with_col, plain = tables
    head = "| case | ours (TFLOP/s) | cuDNN (TFLOP/s) | flash (TFLOP/s) | efficient (TFLOP/s) "
    head += "| Triton (TFLOP/s) | ours / best peer |"
    assert plain[4] == head and with_col[4] == head + " ours / Triton |"
    assert with_col[5] == plain[5] + "---:|"
    assert with_col[6] == "| fp16 N=1024 D=64 | 300.0 | 400.0 | n/a | n/a | 250.0 | 0.75 | 1.20 |"
    assert with_col[7].endswith("| n/a | n/a |") and with_col[8].endswith("| 0.75 | n/a |")
    assert with_col[9:] == plain[9:] and plain[-1] == "- a note"
