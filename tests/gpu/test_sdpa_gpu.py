"""teeny_tx.torch.scaled_dot_product_attention and flash_attn_func on the H200: FlashAttention's
test grid ((seqlen_q, seqlen_k) pairs, MHA/MQA/GQA, batch 1-3, fp16/bf16, head dims 32 to 256,
causal top left (SDPA) and bottom right (FlashAttention), sliding windows, softcap), forward and
dq/dk/dv, with FlashAttention's criterion: our error against a float64 answer at most twice
that of torch's same computation in the input dtype, plus a small atol. Each call is asserted
to reach the fused op (never the blockwise path); the blockwise path on CUDA against SDPA."""

from __future__ import annotations

import math
import zlib

import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402

import teeny_tx.errors  # noqa: E402
import teeny_tx.torch as ttx  # noqa: E402
from teeny_tx.library import sdpa  # noqa: E402

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="torch sees no CUDA")

SEQLENS = [(113, 203), (128, 217), (108, 256), (512, 256), (1023, 1024), (1, 239), (3, 799)]
HEADS = [(4, 4), (4, 1), (6, 2)]  # MHA, MQA, GQA
ATOL = {torch.float16: 2e-3, torch.bfloat16: 1.5e-2}


def _gen(name: str) -> torch.Generator:
    return torch.Generator(device="cuda").manual_seed(zlib.crc32(name.encode()))


def _counting(monkeypatch):
    calls = []
    real = sdpa.attention_op.impl

    def counted(*args):
        calls.append(args)
        return real(*args)

    monkeypatch.setattr(sdpa.attention_op, "impl", counted)
    monkeypatch.setattr(sdpa.attention_op, "function", None)
    sdpa.attention_op.register_autograd(sdpa._grad, setup_context=sdpa._setup)
    return calls


def _run(fn, inputs, do):
    leaves = [t.detach().clone().requires_grad_() for t in inputs]
    out = fn(*leaves)
    out.backward(do.to(out.dtype))
    return out.detach(), [t.grad for t in leaves]


def _criterion(fn, ref, inputs, name, atol):
    """ours vs float64: at most 2x torch-in-dtype vs float64 + atol (forward and gradients)."""
    do = torch.randn(ref(*inputs).shape, device="cuda", generator=_gen(name + "do"))
    ours, g_ours = _run(fn, inputs, do)
    theirs, g_theirs = _run(ref, inputs, do)
    exact, g_exact = _run(lambda *t: ref(*(x.double() for x in t)), inputs, do.double())
    for a, b, x in zip([ours, *g_ours], [theirs, *g_theirs], [exact, *g_exact], strict=True):
        err = (a.double() - x).abs().max().item()
        base = (b.double() - x).abs().max().item()
        assert err <= 2 * base + atol, (err, base)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("d", [32, 64, 128])
@pytest.mark.parametrize("heads", HEADS, ids=str)
@pytest.mark.parametrize("seqlens", SEQLENS, ids=str)
def test_sdpa_grid(monkeypatch, seqlens, heads, d, dtype, causal):
    """SDPA's [B, H, N, D], is_causal top left, enable_gqa."""
    (n_q, n_kv), (h_q, h_kv) = seqlens, heads
    b = 1 + (n_q + n_kv) % 3
    name = f"sdpa{seqlens}{heads}{d}{dtype}{causal}"
    g = _gen(name)
    q = torch.randn(b, h_q, n_q, d, device="cuda", generator=g).to(dtype)
    k = torch.randn(b, h_kv, n_kv, d, device="cuda", generator=g).to(dtype)
    v = torch.randn(b, h_kv, n_kv, d, device="cuda", generator=g).to(dtype)
    kw = {"is_causal": causal, "enable_gqa": h_q != h_kv}
    calls = _counting(monkeypatch)
    _criterion(
        lambda *t: ttx.scaled_dot_product_attention(*t, **kw),
        lambda *t: F.scaled_dot_product_attention(*t, **kw),
        (q, k, v),
        name,
        ATOL[dtype],
    )
    assert calls


def _explicit(q, k, v, scale, lo, hi, softcap):
    """FlashAttention's definition on [B, N, H, D] in the inputs' dtype."""
    qf, kf, vf = (t.transpose(1, 2) for t in (q, k, v))
    g = qf.shape[1] // kf.shape[1]
    kf, vf = kf.repeat_interleave(g, 1), vf.repeat_interleave(g, 1)
    s = qf @ kf.transpose(-1, -2) * scale
    if softcap:
        s = softcap * torch.tanh(s / softcap)
    i = torch.arange(s.shape[-2], device=s.device)[:, None]
    j = torch.arange(s.shape[-1], device=s.device)[None, :]
    s = s.masked_fill(~((j >= i + lo) & (j <= i + hi)), -math.inf)
    p = torch.softmax(s.float(), -1).nan_to_num(0.0).to(s.dtype)
    return (p @ vf).transpose(1, 2)


@pytest.mark.parametrize("softcap", [0.0, 30.0], ids=["nocap", "softcap"])
@pytest.mark.parametrize("window", [(-1, -1), (64, 0), (100, 17)], ids=str)
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("seqlens", SEQLENS, ids=str)
def test_flash_attn_func_grid(monkeypatch, seqlens, dtype, causal, window, softcap):
    """flash_attn_func's [B, N, H, D]: bottom-right causal, windows, softcap (GQA, D = 128)."""
    n_q, n_kv = seqlens
    name = f"flash{seqlens}{dtype}{causal}{window}{softcap}"
    g = _gen(name)
    q = torch.randn(2, n_q, 6, 128, device="cuda", generator=g).to(dtype)
    k = torch.randn(2, n_kv, 2, 128, device="cuda", generator=g).to(dtype)
    v = torch.randn(2, n_kv, 2, 128, device="cuda", generator=g).to(dtype)
    left, right = window
    diag = n_kv - n_q
    right = 0 if causal else right
    lo = diag - left if left >= 0 else -(10**9)
    hi = diag + right if right >= 0 else 10**9
    kw = {"causal": causal, "window_size": window, "softcap": softcap}
    calls = _counting(monkeypatch)
    _criterion(
        lambda *t: ttx.flash_attn_func(*t, **kw),
        lambda *t: _explicit(*t, 128**-0.5, lo, hi, softcap),
        (q, k, v),
        name,
        ATOL[dtype],
    )
    assert calls


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("seqlens", SEQLENS, ids=str)
def test_flash_attn_func_alibi(monkeypatch, seqlens, causal):
    """ALiBi slopes [B, H_q] (fp16, GQA, D = 64): forward and gradients."""
    n_q, n_kv = seqlens
    name = f"alibi{seqlens}{causal}"
    g = _gen(name)
    q = torch.randn(2, n_q, 4, 64, device="cuda", generator=g).half()
    k = torch.randn(2, n_kv, 2, 64, device="cuda", generator=g).half()
    v = torch.randn(2, n_kv, 2, 64, device="cuda", generator=g).half()
    slopes = torch.rand(2, 4, device="cuda", generator=g) * 0.3
    diag = n_kv - n_q
    lo, hi = -(10**9), (diag if causal else 10**9)

    def ref(q, k, v):
        i = torch.arange(n_q, device="cuda")[:, None]
        j = torch.arange(n_kv, device="cuda")[None, :]
        bias = -slopes[:, :, None, None] * (i + diag - j).abs()
        qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))
        kt, vt = kt.repeat_interleave(2, 1), vt.repeat_interleave(2, 1)
        s = (qt @ kt.transpose(-1, -2)).float() * 0.125 + bias
        s = s.masked_fill(~((j >= i + lo) & (j <= i + hi)), -math.inf)
        p = torch.softmax(s, -1).nan_to_num(0.0).to(q.dtype)
        return (p @ vt).transpose(1, 2)

    calls = _counting(monkeypatch)
    _criterion(
        lambda *t: ttx.flash_attn_func(*t, causal=causal, alibi_slopes=slopes),
        ref,
        (q, k, v),
        name,
        ATOL[torch.float16],
    )
    assert calls


# FlashAttention's head dims: the tiles and the others, padded in the loads (59, 111: not a
# multiple of 8), up to 256, forward and backward
HEAD_DIMS = [32, 40, 59, 64, 80, 96, 111, 128, 160, 192, 224, 256]
HEAD_DIM_SEQLENS = [(113, 203), (128, 217), (512, 256), (1023, 1024), (1, 239), (3, 799)]


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("d", HEAD_DIMS)
@pytest.mark.parametrize("seqlens", HEAD_DIM_SEQLENS, ids=str)
def test_flash_attn_func_head_dims(monkeypatch, seqlens, d, dtype, causal):
    """flash_attn_func at every head dim of FlashAttention's grid (GQA, bottom-right causal),
    forward and dq/dk/dv, in the fused kernels."""
    n_q, n_kv = seqlens
    name = f"headdim{seqlens}{d}{dtype}{causal}"
    g = _gen(name)
    b = 1 + (n_q + d) % 3
    q = torch.randn(b, n_q, 4, d, device="cuda", generator=g).to(dtype)
    k = torch.randn(b, n_kv, 2, d, device="cuda", generator=g).to(dtype)
    v = torch.randn(b, n_kv, 2, d, device="cuda", generator=g).to(dtype)
    diag = n_kv - n_q
    lo, hi = -(10**9), (diag if causal else 10**9)
    calls = _counting(monkeypatch)
    _criterion(
        lambda *t: ttx.flash_attn_func(*t, causal=causal),
        lambda *t: _explicit(*t, d**-0.5, lo, hi, 0.0),
        (q, k, v),
        name,
        ATOL[dtype],
    )
    assert calls and calls[0][0].shape[-1] == d


@pytest.mark.parametrize("d", [40, 111, 200, 256])
@pytest.mark.parametrize("seqlens", [(113, 203), (1023, 1024)], ids=str)
def test_sdpa_head_dims(monkeypatch, seqlens, d):
    """SDPA's [B, H, N, D] (the kernels read its transpose in place) at padded head dims."""
    n_q, n_kv = seqlens
    name = f"sdpaheaddim{seqlens}{d}"
    g = _gen(name)
    q = torch.randn(2, 6, n_q, d, device="cuda", generator=g).half()
    k = torch.randn(2, 2, n_kv, d, device="cuda", generator=g).half()
    v = torch.randn(2, 2, n_kv, d, device="cuda", generator=g).half()
    kw = {"is_causal": True, "enable_gqa": True}
    calls = _counting(monkeypatch)
    _criterion(
        lambda *t: ttx.scaled_dot_product_attention(*t, **kw),
        lambda *t: F.scaled_dot_product_attention(*t, **kw),
        (q, k, v),
        name,
        ATOL[torch.float16],
    )
    assert calls


@pytest.mark.parametrize("d", [40, 96, 200])
def test_padded_head_dim_misaligned_views(d):
    """A padded head dim read in 16-byte groups: q 8 bytes off a 16-byte boundary and k with
    rows of d + 4 elements are passed as copies, so the results are the aligned inputs' own,
    bit for bit, forward and backward."""
    g = _gen(f"misaligned{d}")
    n, h = 300, 4
    flat = torch.randn(2 * n * h * d + 4, device="cuda", generator=g).half()
    q = flat[4:].view(2, n, h, d)
    k = torch.randn(2, n, 2, d + 4, device="cuda", generator=g).half()[..., :d]
    v = torch.randn(2, n, 2, d, device="cuda", generator=g).half()
    assert q.data_ptr() % 16 == 8 and k.stride(2) % 8 == 4  # (heads d + 4 apart)
    do = torch.randn(2, n, h, d, device="cuda", generator=g).half()

    def run(q, k, v):
        q, k, v = (t.detach().requires_grad_() for t in (q, k, v))  # (views stay views)
        out = ttx.flash_attn_func(q, k, v, causal=True)
        out.backward(do)
        return out, q.grad, k.grad, v.grad

    got = run(q, k, v)
    want = run(q.contiguous().clone(), k.contiguous(), v)
    for a, b in zip(got, want, strict=True):
        assert torch.equal(a, b)


# flash_attn_varlen_func: packed sequences of mixed lengths (one-token, ragged, over 1024)
VARLEN = [
    ([1, 113, 1023, 2, 512], [1, 113, 1023, 2, 512]),
    ([1, 113, 1023, 2, 512], [239, 1, 1024, 799, 256]),
    ([128, 3, 700], [217, 799, 300]),
]


def _offsets(lengths):
    return torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], device="cuda").int()


def _per_sequence(lengths_q, lengths_k, causal, window, softcap, scale):
    """Each sequence by FlashAttention's definition on its own (bottom right), packed again."""
    cu_q, cu_k = _offsets(lengths_q).tolist(), _offsets(lengths_k).tolist()

    def ref(q, k, v):
        outs = []
        for b, (n_q, n_kv) in enumerate(zip(lengths_q, lengths_k, strict=True)):
            left, right = window
            diag = n_kv - n_q
            right = 0 if causal else right
            lo = diag - left if left >= 0 else -(10**9)
            hi = diag + right if right >= 0 else 10**9
            qs, ks = slice(cu_q[b], cu_q[b + 1]), slice(cu_k[b], cu_k[b + 1])
            outs.append(_explicit(q[None, qs], k[None, ks], v[None, ks], scale, lo, hi, softcap)[0])
        return torch.cat(outs)

    return ref


@pytest.mark.parametrize("window", [(-1, -1), (100, 17)], ids=str)
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("d", [64, 128, 40])
@pytest.mark.parametrize("lengths", VARLEN, ids=str)
def test_flash_attn_varlen_func(lengths, d, dtype, causal, window):
    """Packed sequences (GQA 6/2) in the fused kernels, forward and dq/dk/dv, against each
    sequence's own attention, with FlashAttention's criterion."""
    lengths_q, lengths_k = lengths
    name = f"varlen{lengths}{d}{dtype}{causal}{window}"
    g = _gen(name)
    q = torch.randn(sum(lengths_q), 6, d, device="cuda", generator=g).to(dtype)
    k = torch.randn(sum(lengths_k), 2, d, device="cuda", generator=g).to(dtype)
    v = torch.randn(sum(lengths_k), 2, d, device="cuda", generator=g).to(dtype)
    cu_q, cu_k = _offsets(lengths_q), _offsets(lengths_k)
    kw = {"causal": causal, "window_size": window}
    _criterion(
        lambda *t: ttx.flash_attn_varlen_func(*t, cu_q, cu_k, max(lengths_q), max(lengths_k), **kw),
        _per_sequence(lengths_q, lengths_k, causal, window, 0.0, d**-0.5),
        (q, k, v),
        name,
        ATOL[dtype],
    )


@pytest.mark.parametrize("d", [111, 256])
def test_flash_attn_varlen_func_head_dims_softcap_alibi(d):
    """A head dim that is not a multiple of 8 and 256, MQA, softcap and ALiBi [H_q]."""
    lengths_q, lengths_k = [1, 113, 1023, 2, 512], [239, 1, 1024, 799, 256]
    name = f"varlenextra{d}"
    g = _gen(name)
    q = torch.randn(sum(lengths_q), 4, d, device="cuda", generator=g).half()
    k = torch.randn(sum(lengths_k), 1, d, device="cuda", generator=g).half()
    v = torch.randn(sum(lengths_k), 1, d, device="cuda", generator=g).half()
    slopes = torch.rand(4, device="cuda", generator=g) * 0.1
    cu_q, cu_k = _offsets(lengths_q), _offsets(lengths_k)
    kw = {"causal": True, "softcap": 20.0, "alibi_slopes": slopes}
    cu_q_l, cu_k_l = cu_q.tolist(), cu_k.tolist()

    def ref(q, k, v):
        outs = []
        for b, (n_q, n_kv) in enumerate(zip(lengths_q, lengths_k, strict=True)):
            qs, ks = slice(cu_q_l[b], cu_q_l[b + 1]), slice(cu_k_l[b], cu_k_l[b + 1])
            qt, kt, vt = (t[None, s].transpose(1, 2) for t, s in ((q, qs), (k, ks), (v, ks)))
            kt, vt = kt.expand(-1, 4, -1, -1), vt.expand(-1, 4, -1, -1)
            s = (qt @ kt.transpose(-1, -2)).float() * d**-0.5
            s = 20.0 * torch.tanh(s / 20.0)
            i = torch.arange(n_q, device="cuda")[:, None]
            j = torch.arange(n_kv, device="cuda")[None, :]
            s = s - slopes[:, None, None] * (i + n_kv - n_q - j).abs()
            s = s.masked_fill(j > i + n_kv - n_q, -math.inf)
            p = torch.softmax(s, -1).nan_to_num(0.0).to(q.dtype)
            outs.append((p @ vt).transpose(1, 2)[0])
        return torch.cat(outs)

    _criterion(
        lambda *t: ttx.flash_attn_varlen_func(*t, cu_q, cu_k, max(lengths_q), max(lengths_k), **kw),
        ref,
        (q, k, v),
        name,
        ATOL[torch.float16],
    )


def test_flash_attn_varlen_func_checks_on_cuda():
    """Offsets on the host for CUDA q, k, v are refused (by the torch layer, before any
    launch); offsets that are wrong are found on the device's copy."""
    q = torch.zeros(10, 2, 64, device="cuda").half()
    cu = torch.tensor([0, 4, 10], dtype=torch.int32)
    with pytest.raises(RuntimeError, match="cu_seqlens_q is on cpu but q is on cuda"):
        ttx.flash_attn_varlen_func(q, q, q, cu, cu.cuda(), 6, 6)
    bad = torch.tensor([0, 7, 4, 10], dtype=torch.int32, device="cuda")
    with pytest.raises(teeny_tx.errors.TeenyError, match="non-decreasing"):
        ttx.flash_attn_varlen_func(q, q, q, bad, bad, 6, 6)
    with pytest.raises(teeny_tx.errors.TeenyError, match="ends at 9"):
        ttx.flash_attn_varlen_func(
            q, q, q, cu.cuda() - torch.tensor([0, 0, 1]).cuda().int(), cu.cuda(), 6, 6
        )


def test_flash_attn_varlen_func_cuda_graph_and_compile():
    """Captured in a CUDA graph (the offsets are not read back while capturing) and replayed
    on new data; torch.compile(fullgraph=True) the same."""
    lengths = [300, 1, 77]
    g = _gen("varlen graph")
    cu = _offsets(lengths)
    q, k, v = (torch.randn(378, 4, 64, device="cuda", generator=g).half() for _ in range(3))

    def fn(q, k, v):
        return ttx.flash_attn_varlen_func(q, k, v, cu, cu, 300, 300, causal=True)

    want = fn(q, k, v)
    static = [torch.randn(t.shape, device="cuda", generator=g).half() for t in (q, k, v)]
    fn(*static)  # warm up: kernels compiled and loaded before the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn(*static)
    for s, t in zip(static, (q, k, v), strict=True):
        s.copy_(t)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, want)
    torch._dynamo.reset()
    torch.testing.assert_close(torch.compile(fn, fullgraph=True)(q, k, v), want)


def test_blockwise_path_on_cuda():
    """float32 and a boolean mask: the blockwise path, against SDPA."""
    g = _gen("blockwise")
    q = torch.randn(2, 4, 300, 48, device="cuda", generator=g)
    k = torch.randn(2, 2, 500, 48, device="cuda", generator=g)
    v = torch.randn(2, 2, 500, 40, device="cuda", generator=g)
    mask = torch.rand(300, 500, device="cuda", generator=g) > 0.2
    ours = ttx.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
    torch.testing.assert_close(ours, ref, rtol=1e-4, atol=1e-4)


def test_compile_fullgraph_cuda():
    torch._dynamo.reset()

    def fn(q, k, v):
        return ttx.flash_attn_func(q, k, v, causal=True, window_size=(64, 0))

    g = _gen("compile")
    q, k, v = (torch.randn(1, 200, 2, 64, device="cuda", generator=g).half() for _ in range(3))
    compiled = torch.compile(fn, fullgraph=True)
    torch.testing.assert_close(compiled(q, k, v), fn(q, k, v))
