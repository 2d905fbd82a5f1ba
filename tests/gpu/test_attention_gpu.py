"""teeny_tx.nn.attention on the GPU: torch tensors against torch's scaled_dot_product_attention
(forward) and its autograd (dQ, dK, dV), and against float64 on the host; CuPy arrays against
the interpreter's float64 reference; sequence lengths 1, 1000 and 4097, the benchmark shapes,
grouped-query attention, [B, H, N, D] tensors passed as transposed views."""

from __future__ import annotations

import numpy as np
import pytest

from teeny_tx import nn
from teeny_tx.library import attention as tattn
from teeny_tx.library import module
from teeny_tx.library.attention import attention_reference

from ..conftest import stable_seed

cp = pytest.importorskip("cupy")

# Each output is checked element by element against float64 (check_attention): P and dS are
# rounded to the input dtype before their products (as in every FlashAttention kernel; torch's
# flash and cuDNN backends do the same), so an element errs by a few unit roundoffs of the input
# dtype times the sum of the magnitudes it is a product of (its condition), plus one rounding
# of the output. ROUNDINGS counts the roundings of P (or dS) and of its product's f32 sum: 2
# (the interpreter's kernels pass at 1 on every shape of tests/test_attention.py).
ROUNDINGS = 2
UNIT = {"f16": 2.0**-11, "bf16": 2.0**-8}
TORCH_DTYPES = {"f16": "float16", "bf16": "bfloat16"}


@pytest.fixture(scope="module")
def torch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")
    return torch


@pytest.fixture(autouse=True)
def fixed_configs(monkeypatch):
    """The fixed configs (test_tuned_launch takes the autotuner's)."""
    monkeypatch.setattr(tattn, "TUNE", False)


def _as_torch(x):
    """A float64 torch tensor on the GPU (the CPU without one) of a torch tensor, CuPy array
    or NumPy array."""
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    if isinstance(x, torch.Tensor):
        return x.detach().to(device, torch.float64)
    if hasattr(x, "get"):  # a CuPy array
        x = x.get()
    return torch.from_numpy(np.asarray(x).astype(np.float64)).to(device)


def check_attention(q, k, v, o, causal, scale=None, do=None, grads=(), what=""):
    """o (and, given do, grads = (dq, dk, dv)) of attention over [B, N, H, D] q, k, v (GQA:
    H_q a multiple of H_kv; causal top left) against float64 on the device, element by
    element: |ours - exact| <= ROUNDINGS * u * condition + u * |exact| + 1e-6, u the input
    dtype's unit roundoff. Conditions: o: P |V|; dv: P^T |dO|; dq: scale |dS| |K| and dk:
    scale |dS|^T |Q| with |dS| = P (|dP| + |D| + rowsum |dO||O|) (D is computed from the
    rounded O). Heads in chunks whose N x N float64 matrices hold at most 2^24 elements (the
    GPU tests run in parallel processes on one device: a few hundred MB each, freed after)."""
    import torch

    dtype = "bf16" if str(getattr(q, "dtype", "")).endswith("bfloat16") else "f16"
    u = UNIT[dtype]
    q, k, v, o = (_as_torch(x) for x in (q, k, v, o))
    b, n_q, h_q, d = q.shape
    n_kv, h_kv = k.shape[1], k.shape[2]
    chunk = max(1, 2**24 // (b * n_q * n_kv))
    device = q.device
    scale = d**-0.5 if scale is None else scale
    group = h_q // h_kv
    outs = {"o": o}
    if do is not None:
        outs |= dict(zip(("dq", "dk", "dv"), (_as_torch(g) for g in grads), strict=True))
        do = _as_torch(do)
    exact = {name: torch.zeros_like(t) for name, t in outs.items()}
    cond = {name: torch.zeros_like(t) for name, t in outs.items()}
    mask = torch.ones(n_q, n_kv, dtype=torch.bool, device=device).triu(1) if causal else None
    for h0 in range(0, h_q, chunk):
        hs = slice(h0, min(h0 + chunk, h_q))
        kv = torch.arange(hs.start, hs.stop, device=device) // group
        qh = q[:, :, hs].transpose(1, 2)  # [B, h, N_q, D]
        kh, vh = (t[:, :, kv].transpose(1, 2) for t in (k, v))
        s = qh @ kh.transpose(-1, -2) * scale
        if mask is not None:
            s = s.masked_fill(mask, float("-inf"))
        p = torch.softmax(s, -1).nan_to_num(0.0)
        oh = p @ vh
        exact["o"][:, :, hs] = oh.transpose(1, 2)
        cond["o"][:, :, hs] = (p @ vh.abs()).transpose(1, 2)
        if do is None:
            continue
        doh = do[:, :, hs].transpose(1, 2)
        dp = doh @ vh.transpose(-1, -2)
        big_d = (doh * oh).sum(-1, keepdim=True)
        ds = p * (dp - big_d)
        ds_abs = p * (dp.abs() + big_d.abs() + (doh.abs() * oh.abs()).sum(-1, keepdim=True))
        exact["dq"][:, :, hs] = (ds @ kh * scale).transpose(1, 2)
        cond["dq"][:, :, hs] = (ds_abs @ kh.abs() * scale).transpose(1, 2)
        for name, val, c in (
            ("dk", ds.transpose(-1, -2) @ qh * scale, ds_abs.transpose(-1, -2) @ qh.abs() * scale),
            ("dv", p.transpose(-1, -2) @ doh, p.transpose(-1, -2) @ doh.abs()),
        ):
            exact[name].index_add_(2, kv, val.transpose(1, 2))
            cond[name].index_add_(2, kv, c.transpose(1, 2))
    del s, p
    if device.type == "cuda":
        torch.cuda.empty_cache()  # this process's cached blocks back to the other workers
    for name, got in outs.items():
        want = exact[name]
        bound = ROUNDINGS * u * cond[name] + u * want.abs() + 1e-6
        err = (got - want).abs()
        bad = ~(err <= bound)
        if bool(bad.any()):
            at = tuple(int(i) for i in bad.nonzero()[0])
            raise AssertionError(
                f"{what} {name} [{dtype}]: {int(bad.sum())} of {bad.numel()} elements out of "
                f"bounds; worst at {at}: {got[at].item()!r}, expected {want[at].item()!r} "
                f"(bound {bound[at].item():.3g})"
            )


def _bnhd(torch, b, n, h, d, dtype, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(b, h, n, d, device="cuda", generator=g).to(getattr(torch, TORCH_DTYPES[dtype]))
    return x.transpose(1, 2)  # a [B, N, H, D] view of a [B, H, N, D] tensor


def _sdpa(torch, q, k, v, causal, scale=None):
    """torch's SDPA in [B, N, H, D]; GQA by repeating k and v (all torch versions)."""
    group = q.shape[2] // k.shape[2]
    qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
    kt, vt = kt.repeat_interleave(group, 1), vt.repeat_interleave(group, 1)
    o = torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=causal, scale=scale)
    return o.transpose(1, 2)


SHAPES = [
    # (B, N, H_q, H_kv, D)
    (1, 1, 2, 2, 64),
    (2, 1000, 4, 2, 64),
    (1, 1000, 2, 1, 128),
    (1, 4097, 2, 2, 128),
    (1, 4097, 4, 1, 64),
]
BENCH = [(4, 1024, 32, 32, 64), (4, 1024, 32, 32, 128), (4, 4096, 32, 32, 128)]


def _id(s):
    return "b{}-n{}-h{}/{}-d{}".format(*s)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("shape", SHAPES + BENCH, ids=_id)
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_against_torch_sdpa(torch, shape, causal, dtype):
    _against_sdpa(torch, shape, causal, dtype)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_tuned_launch(torch, monkeypatch, causal):
    """Through the kernels' #pragma autotune configs (timed on first use of the shape)."""
    monkeypatch.setattr(tattn, "TUNE", True)
    _against_sdpa(torch, (4, 1024, 32, 32, 128), causal, "bf16")


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("shape", SHAPES + BENCH[1:], ids=_id)
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_atomic_dq_against_torch_sdpa(torch, monkeypatch, shape, causal, dtype):
    """dQ added by the dK/dV kernel with f32 atomics, then cast (ATOMIC_DQ)."""
    monkeypatch.setattr(tattn, "ATOMIC_DQ", {64: True, 128: True})
    _against_sdpa(torch, shape, causal, dtype)


@pytest.mark.parametrize("atomic", [False, True], ids=["dq-kernel", "dq-atomic"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("shape", SHAPES + BENCH[1:], ids=_id)
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_tma_pipelines_against_torch_sdpa(torch, monkeypatch, shape, causal, dtype, atomic):
    """Every attention kernel with its pipelined K/V (Q/dO) tiles loaded by TMA boxes (the
    wrapper's default; here also through $TEENY_TX_PIPELINE_TMA): ragged N (the boxes' zero
    fill), N = 1, GQA, strided views; both dQ paths."""
    monkeypatch.setenv("TEENY_TX_PIPELINE_TMA", "1")
    monkeypatch.setattr(tattn, "ATOMIC_DQ", {64: atomic, 128: atomic})
    _against_sdpa(torch, shape, causal, dtype)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("shape", SHAPES + BENCH[1:], ids=_id)
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_cp_async_pipelines_against_torch_sdpa(torch, monkeypatch, shape, causal, dtype):
    """The same with TMA off (attention.TMA = False): every thread's cp.async copies."""
    monkeypatch.setattr(tattn, "TMA", False)
    _against_sdpa(torch, shape, causal, dtype)


OVERLAP_CONFIGS = [(128, 64, 8, 2), (128, 64, 8, 3), (128, 128, 8, 2)]


def _overlapped_forward(torch, monkeypatch, shape, causal, dtype, config, tma):
    monkeypatch.setattr(tattn, "OVERLAP", True)
    monkeypatch.setattr(tattn, "TMA", tma)
    b, n, h_q, h_kv, d = shape
    monkeypatch.setitem(tattn.FORWARD_OVERLAP, d, tattn.AttentionConfig(*config))
    q = _bnhd(torch, b, n, h_q, d, dtype, 0)
    k, v = (_bnhd(torch, b, n, h_kv, d, dtype, seed) for seed in (1, 2))
    o, lse = nn.attention(q, k, v, causal=causal)
    check_attention(q, k, v, o, causal, what="overlapped forward")
    ref_lse = torch.logsumexp(_scores(torch, q, k, causal), dim=-1)  # [B, H_q, N]
    assert float((lse.double() - ref_lse.double()).abs().max()) < 1e-2


@pytest.mark.parametrize("config", OVERLAP_CONFIGS, ids=lambda c: "x".join(map(str, c)))
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("shape", SHAPES + BENCH[1:2], ids=_id)
def test_overlapped_forward_against_torch_sdpa(torch, monkeypatch, shape, causal, config):
    """The forward whose softmax overlaps the tensor cores (attention_fwd_overlap: deferred
    wgmma waits), each of its configs, f16, K/V by TMA: o against SDPA, lse against f32."""
    _overlapped_forward(torch, monkeypatch, shape, causal, "f16", config, True)


# FlashAttention-3's forward schedule whole: the overlapped forward warp-specialised, a producer
# warpgroup (WS 1) and the compute warpgroups' ping-pong (WS 2, $TEENY_TX_WS_PINGPONG=1)
FA3_CONFIGS = [(128, 64, 8, 3, 1), (128, 64, 8, 3, 2), (128, 64, 8, 2, 2)]


@pytest.mark.parametrize("config", FA3_CONFIGS, ids=lambda c: "x".join(map(str, c)))
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("shape", SHAPES + BENCH[1:2], ids=_id)
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_warp_specialized_overlapped_forward(torch, monkeypatch, shape, causal, config, dtype):
    """The overlapped forward with a producer warpgroup, and with the ping-pong: o against
    float64 element by element, lse against f32; the producer is launched (its TMA form's
    source has the producer's setmaxnreg)."""
    from teeny_tx.library import plans

    monkeypatch.setenv("TEENY_TX_WS_PINGPONG", "1" if config[4] == 2 else "0")
    plans.PLANS.clear()  # this test's own specialisations, not an earlier test's replay
    tma_form = module("attention.c").attention_fwd_overlap.tma
    specs: dict = {}
    for name, fresh in (("_specs", specs), ("_compiled", {}), ("_entries", {})):
        monkeypatch.setattr(tma_form, name, fresh)
    _overlapped_forward(torch, monkeypatch, shape, causal, dtype, config, True)
    sources = [s.cuda_source for s in specs.values()]
    assert sources and all("producer_registers" in src for src in sources)
    assert all(("tx_warpgroup" in src) == (config[4] == 2) for src in sources)


@pytest.mark.parametrize("tma", [True, False], ids=["tma", "cp.async"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("shape", SHAPES, ids=_id)
def test_overlapped_forward_bf16(torch, monkeypatch, shape, causal, tma):
    """The same in bf16 with the wrapper's config, K/V by TMA and by cp.async."""
    d = shape[-1]
    config = tuple(tattn.FORWARD_OVERLAP[d])
    _overlapped_forward(torch, monkeypatch, shape, causal, "bf16", config, tma)


def _warp_specialized(monkeypatch, stages=None, mode=1) -> dict:
    """The wrapper's forward and dQ warp-specialised (their WARP_SPECIALIZE = ``mode``; 2 asks
    for the ping-pong, which without $TEENY_TX_WS_PINGPONG=1 is refused: the producer alone
    again), K/V by TMA; ``stages``: the ring's depth at every head dim (else the config
    table's). Returns this test's own specialisations of the TMA forms by kernel name: the
    plans start empty (no replay of an earlier test's launch) and each TMA kernel's memo is a
    fresh dict for this test only, so the counts read per-test state, not a process-wide memo."""
    from teeny_tx.library import plans

    plans.PLANS.clear()  # a cache: emptying it costs later calls one full path each
    launched = {}
    for name in ("attention_fwd", "attention_bwd_dq"):
        launched[name] = {}
        tma_form = getattr(module("attention.c"), name).tma
        monkeypatch.setattr(tma_form, "_specs", launched[name])
        # and no prepared launch of an earlier test: each call specialises again, here
        monkeypatch.setattr(tma_form, "_compiled", {})
        monkeypatch.setattr(tma_form, "_entries", {})
    monkeypatch.delenv("TEENY_TX_WS_PINGPONG", raising=False)
    monkeypatch.setattr(tattn, "WARP_SPECIALIZE", mode)
    monkeypatch.setattr(tattn, "TMA", True)
    if stages is not None:
        for d, c in list(tattn.FORWARD.items()):
            monkeypatch.setitem(tattn.FORWARD, d, c._replace(num_stages=stages))
    return launched


def _producer_launches(launched: dict, name: str = "attention_fwd") -> int:
    """How many of this test's own specialisations of ``name``'s TMA form took the producer
    warpgroup."""
    return sum(1 for s in launched[name].values() if s.kernel.producer_warps == 4)


WS_SHAPES = SHAPES + BENCH[1:] + [(1, 4097, 8, 2, 128), (2, 300, 6, 3, 64)]


@pytest.mark.parametrize("mode", [1, 2], ids=["producer", "pingpong"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("shape", WS_SHAPES, ids=_id)
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_warp_specialized_forward_against_torch_sdpa(
    torch, monkeypatch, shape, causal, dtype, mode
):
    """The forward with a producer warpgroup issuing the K/V copies (lower/passes/warp_spec.py):
    N = 1,
    ragged N (the boxes' zero fill), GQA, [B, H, N, D] views; o against SDPA, lse against
    float64 where it fits, else f32; WARP_SPECIALIZE 1 and 2 (the ping-pong refused: the same)."""
    launched = _warp_specialized(monkeypatch, mode=mode)
    b, n, h_q, h_kv, d = shape
    seed = stable_seed(shape, causal, dtype, "ws") % 2**31
    q = _bnhd(torch, b, n, h_q, d, dtype, seed)
    k, v = (_bnhd(torch, b, n, h_kv, d, dtype, seed + i) for i in (1, 2))
    o, lse = nn.attention(q, k, v, causal=causal)
    check_attention(q, k, v, o, causal, what="warp-specialised forward")
    if b * h_q * n * n <= 2**27:
        _check_lse(torch, q, k, lse, causal)
    else:
        ref_lse = torch.logsumexp(_scores(torch, q, k, causal), dim=-1)
        assert float((lse.double() - ref_lse.double()).abs().max()) < 1e-2
    assert _producer_launches(launched) >= 1


@pytest.mark.parametrize("mode", [1, 2], ids=["producer", "pingpong"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("shape", SHAPES + BENCH[1:2], ids=_id)
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_warp_specialized_backward_against_torch_sdpa(
    torch, monkeypatch, shape, causal, dtype, mode
):
    """The forward and dQ warp-specialised (the wrapper's WARP_SPECIALIZE forces both): o,
    lse, dq, dk, dv against SDPA and its autograd."""
    launched = _warp_specialized(monkeypatch, mode=mode)
    _against_sdpa(torch, shape, causal, dtype)
    assert _producer_launches(launched, "attention_bwd_dq") >= 1


@pytest.mark.parametrize("mode", [1, 2], ids=["producer", "pingpong"])
@pytest.mark.parametrize("stages", [2, 4])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("shape", [(1, 4097, 2, 1, 64), (2, 1000, 4, 2, 128)], ids=_id)
def test_warp_specialized_ring_depths(torch, monkeypatch, shape, causal, stages, mode):
    """Rings of 2 and 4 stages (the producer waits for a stage's release sooner or later)."""
    if stages == 4 and shape[-1] == 128:
        stages = 2  # 4 stages of 128 x 128 K and V do not fit beside Q
    _warp_specialized(monkeypatch, stages, mode)
    b, n, h_q, h_kv, d = shape
    q = _bnhd(torch, b, n, h_q, d, "f16", 0)
    k, v = (_bnhd(torch, b, n, h_kv, d, "f16", seed) for seed in (1, 2))
    o, lse = nn.attention(q, k, v, causal=causal)
    check_attention(q, k, v, o, causal, what=f"{stages}-stage ring")
    _check_lse(torch, q, k, lse, causal)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_warp_specialized_cupy_against_float64(monkeypatch, causal):
    """CuPy arrays, ragged N, GQA, scale 0.2, the warp-specialised forward: float64 on the
    host; and the same launch again (replayed) at new addresses; then with the ping-pong."""
    launched = _warp_specialized(monkeypatch, mode=1 + causal)
    rng = np.random.default_rng(12)
    for _ in range(2):
        q = rng.standard_normal((2, 1001, 4, 64)).astype(np.float16)
        k, v = (rng.standard_normal((2, 1001, 2, 64)).astype(np.float16) for _ in range(2))
        o, lse = nn.attention(cp.asarray(q), cp.asarray(k), cp.asarray(v), causal, 0.2)
        _, want_lse = attention_reference(q, k, v, causal, 0.2)
        check_attention(q, k, v, o, causal, 0.2, what="CuPy, warp-specialised")
        np.testing.assert_allclose(cp.asnumpy(lse), want_lse, rtol=1e-4, atol=1e-4)
    assert _producer_launches(launched) >= 1


def _scores(torch, q, k, causal):
    """scale * q k^T in f32, [B, H_q, N_q, N_kv], masked when causal (GQA by repetition)."""
    group = q.shape[2] // k.shape[2]
    qt = q.transpose(1, 2).float()
    kt = k.transpose(1, 2).float().repeat_interleave(group, 1)
    s = qt @ kt.transpose(-1, -2) / q.shape[-1] ** 0.5
    if causal:
        n_q, n_kv = s.shape[-2:]
        s = s.masked_fill(torch.ones(n_q, n_kv, device=s.device).triu(1).bool(), float("-inf"))
    return s


@pytest.mark.parametrize("tma", [True, False], ids=["tma", "cp.async"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("shape", [(1, 1, 2, 2, 256), (2, 1000, 4, 2, 256), (1, 4097, 2, 1, 256)])
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_forward_head_dim_256(torch, monkeypatch, shape, causal, dtype, tma):
    """The forward at D = 256 (attention_fwd, 128 x 64 tiles) against SDPA; lse against f32."""
    monkeypatch.setattr(tattn, "TMA", tma)
    b, n, h_q, h_kv, d = shape
    q = _bnhd(torch, b, n, h_q, d, dtype, 0)
    k, v = (_bnhd(torch, b, n, h_kv, d, dtype, seed) for seed in (1, 2))
    o, lse = nn.attention(q, k, v, causal=causal)
    check_attention(q, k, v, o, causal, what="D = 256")
    ref_lse = torch.logsumexp(_scores(torch, q, k, causal), dim=-1)
    assert float((lse.double() - ref_lse.double()).abs().max()) < 1e-2


def test_negative_strides_take_cp_async():
    """A tensor map's strides are positive: a view with a negative stride falls back to
    cp.async (the wrapper decides per call) and is still right (CuPy views may step back)."""
    rng = np.random.default_rng(2)
    q, k, v = (rng.standard_normal((1, 300, 2, 64)).astype(np.float16) for _ in range(3))
    q = q[:, :, ::-1]  # a negative head stride
    o, lse = nn.attention(cp.asarray(q[:, :, ::-1])[:, :, ::-1], cp.asarray(k), cp.asarray(v), True)
    _, want_lse = attention_reference(q, k, v, True)
    check_attention(q, k, v, o, True, what="negative strides")
    np.testing.assert_allclose(cp.asnumpy(lse), want_lse, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_replayed_launches_compute_each_new_call(torch, causal):
    """Calls with arrays like an earlier call's replay its TMA launches (launch plans of kernel.tma)
    at the new addresses: each call's o and gradients are its own, also for views 8 and 4
    bytes off the alignment the first call was specialised for (their own specialisations,
    narrower loads), forward and backward against float64."""
    shape = (2, 1000, 4, 2, 64)
    for seed in range(3):
        _against_sdpa(torch, shape, causal, "f16", seed=seed)
    b, n, h_q, h_kv, d = shape
    for offset in (4, 2):  # 8 and 4 bytes past a 16-byte boundary
        base = torch.randn(b * n * h_q * d + offset, device="cuda", dtype=torch.float16)
        q = base[offset:].view(b, n, h_q, d)
        heads = (h_kv, h_kv, h_q)
        k, v, do = (_bnhd(torch, b, n, hh, d, "f16", 7 + i) for i, hh in enumerate(heads))
        o, lse = nn.attention(q, k, v, causal)
        grads = nn.attention_backward(do, q, k, v, o, lse, causal)
        # float64 on the host, not SDPA: on the H200 (2026-12-01) torch SDPA's default backend
        # was 0.5-0.7 (relative) off float64 for q 4 or 8 bytes off a 16-byte boundary
        check_attention(q, k, v, o, causal, do=do, grads=grads, what=f"{offset} elements off")


def _against_sdpa(torch, shape, causal, dtype, seed=None):
    b, n, h_q, h_kv, d = shape
    seed = stable_seed(shape, causal, dtype, seed) % 2**31
    q = _bnhd(torch, b, n, h_q, d, dtype, seed).requires_grad_()
    k = _bnhd(torch, b, n, h_kv, d, dtype, seed + 1).requires_grad_()
    v = _bnhd(torch, b, n, h_kv, d, dtype, seed + 2).requires_grad_()
    o, lse = nn.attention(q.detach(), k.detach(), v.detach(), causal)
    ref = _sdpa(torch, q, k, v, causal)
    assert o.shape == q.shape and o.dtype == q.dtype and lse.shape == (b, h_q, n)
    if b * h_q * n * n <= 2**27:  # lse: float64 on the device, for the shapes it fits
        _check_lse(torch, q, k, lse, causal)
    do = _bnhd(torch, b, n, h_q, d, dtype, seed + 3)
    dq, dk, dv = nn.attention_backward(do, q.detach(), k.detach(), v.detach(), o, lse, causal)
    ref.backward(do)
    for ours, theirs in ((dq, q.grad), (dk, k.grad), (dv, v.grad)):
        assert ours.shape == theirs.shape and ours.dtype == theirs.dtype
    check_attention(q, k, v, o, causal, do=do, grads=(dq, dk, dv), what=str(shape))


def _check_lse(torch, q, k, lse, causal):
    n, h_q, d = q.shape[1], q.shape[2], q.shape[3]
    h_kv = k.shape[2]
    qd, kd = q.detach().double().transpose(1, 2), k.detach().double().transpose(1, 2)
    kd = kd.repeat_interleave(h_q // h_kv, 1)
    s = qd @ kd.transpose(-1, -2) / d**0.5
    if causal:
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device="cuda").triu(1), float("-inf"))
    torch.testing.assert_close(lse.double(), torch.logsumexp(s, -1), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_cupy_against_float64(causal, dtype):
    """CuPy arrays, [B, N, H, D] contiguous, ragged N, GQA, scale 0.2: float64 on the host."""
    import ml_dtypes

    np_dtype = np.float16 if dtype == "f16" else ml_dtypes.bfloat16
    rng = np.random.default_rng(11)
    b, n, h_q, h_kv, d = 2, 1000, 4, 2, 128
    q = rng.standard_normal((b, n, h_q, d)).astype(np_dtype)
    k = rng.standard_normal((b, n, h_kv, d)).astype(np_dtype)
    v = rng.standard_normal((b, n, h_kv, d)).astype(np_dtype)
    o, lse = nn.attention(cp.asarray(q), cp.asarray(k), cp.asarray(v), causal, 0.2)
    assert isinstance(o, cp.ndarray)
    _, want_lse = attention_reference(q, k, v, causal, 0.2)
    np.testing.assert_allclose(cp.asnumpy(lse), want_lse, rtol=1e-4, atol=1e-4)
    do = rng.standard_normal(q.shape).astype(np_dtype)
    grads = nn.attention_backward(
        cp.asarray(do), cp.asarray(q), cp.asarray(k), cp.asarray(v), o, lse, causal, 0.2
    )
    check_attention(q, k, v, o, causal, 0.2, do=do, grads=grads, what=f"CuPy {dtype}")


def test_gpu_agrees_with_interpreter():
    rng = np.random.default_rng(5)
    q, k, v = (rng.standard_normal((1, 300, 2, 64)).astype(np.float16) for _ in range(3))
    o_host, lse_host = nn.attention(q, k, v, True, interpret=True)
    o, lse = nn.attention(cp.asarray(q), cp.asarray(k), cp.asarray(v), True)
    np.testing.assert_allclose(
        cp.asnumpy(o).astype(np.float32), o_host.astype(np.float32), rtol=2e-3, atol=2e-3
    )
    np.testing.assert_allclose(cp.asnumpy(lse), lse_host, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("m", "num_warps"), [(64, 4), (32, 4), (128, 8)])
def test_accumulator_row_stats(m, num_warps):
    """Reductions on accumulator tiles (quad shuffles; across warps through shared memory at
    M=32, mma.sync with 2x2 warps) against float64."""
    import teeny_tx as tx
    from tests.test_attention import ROW_STATS, _row_stats_reference

    k = tx.compile(ROW_STATS, name="kernels/row_stats.c").row_stats
    rng = np.random.default_rng(m)
    a = rng.standard_normal((m, 32)).astype(np.float16)
    b = rng.standard_normal((32, 64)).astype(np.float16)
    out, rows, cols = (
        cp.zeros((m, 64), cp.float32),
        cp.zeros(m, cp.float32),
        cp.zeros(64, cp.float32),
    )
    k[(1,)](out, rows, cols, cp.asarray(a), cp.asarray(b), M=m, N=64, K=32, num_warps=num_warps)
    for name, got, want in zip(
        ("out", "rows", "cols"), (out, rows, cols), _row_stats_reference(a, b), strict=True
    ):
        np.testing.assert_allclose(cp.asnumpy(got), want, rtol=1e-4, atol=1e-4, err_msg=name)


@pytest.mark.parametrize(("m", "num_warps"), [(64, 4), (128, 8), (32, 4)])
@pytest.mark.parametrize("n", [64, 128])
def test_chained_dot(m, num_warps, n):
    """dot((f16)p, c) with p computed from dot(a, b): on the H200 (sm_90a) wgmma reads p from
    the accumulator's registers when M = 16 * num_warps (tx::wgmma_rs), else it is staged."""
    import teeny_tx as tx
    from tests.test_attention import CHAINED, chained_reference

    k = tx.compile(CHAINED, name="kernels/chained.c").chained
    rng = np.random.default_rng(m + n)
    a = rng.standard_normal((m, 64)).astype(np.float16)
    b = rng.standard_normal((64, n)).astype(np.float16)
    c = rng.standard_normal((n, 128)).astype(np.float16)
    out = cp.zeros((m, 128), cp.float32)
    k[(1,)](out, *(cp.asarray(x) for x in (a, b, c)), M=m, N=n, K=64, D=128, num_warps=num_warps)
    np.testing.assert_allclose(cp.asnumpy(out), chained_reference(a, b, c), rtol=2e-3, atol=2e-2)


@pytest.mark.parametrize(("m", "num_warps"), [(64, 4), (64, 8), (128, 8)])
def test_atomic_dot(m, num_warps):
    """f32 atomics of a product added from the accumulator's registers (wgmma at 16 rows per
    warp, else mma.sync), masked rows untouched, two adds per element: against float64."""
    import teeny_tx as tx
    from tests.test_attention import ATOMIC_DOT

    k = tx.compile(ATOMIC_DOT, name="kernels/atomic_dot.c").atomic_dot
    rng = np.random.default_rng(m + num_warps)
    a = rng.standard_normal((m, 32)).astype(np.float16)
    b = rng.standard_normal((32, 64)).astype(np.float16)
    base = rng.standard_normal((m, 64)).astype(np.float32)
    rows = m - 7
    want = base.astype(np.float64)
    want[:rows] += 3 * (a[:rows].astype(np.float64) @ b.astype(np.float64))
    out = cp.asarray(base)
    k[(1,)](out, cp.asarray(a), cp.asarray(b), rows, M=m, N=64, K=32, num_warps=num_warps)
    np.testing.assert_allclose(cp.asnumpy(out), want, rtol=1e-4, atol=1e-4)
