"""teeny_tx.torch.scaled_dot_product_attention, attention and flash_attn_func on CPU tensors:
the fused kernels on the interpreter (f16, bf16) and the blockwise path (f32, f64, masks),
against torch's SDPA in float64 with FlashAttention's criterion (our error against the float64
answer at most twice that of torch's own computation in the inputs' dtype, plus a small atol),
forward and dq/dk/dv; the routing (which calls reach the fused op; no block of scores N_q x
N_kv); torch's checks; opcheck and torch.compile(fullgraph=True)."""

from __future__ import annotations

import math
import zlib

import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402

import teeny_tx.errors  # noqa: E402
import teeny_tx.torch as ttx  # noqa: E402
from teeny_tx.library import sdpa  # noqa: E402


def _gen(name: str) -> torch.Generator:
    return torch.Generator().manual_seed(zlib.crc32(name.encode()))


def _qkv(name, b, h_q, h_kv, n_q, n_kv, d, dtype, d_v=None):
    g = _gen(name)
    q = torch.randn(b, h_q, n_q, d, generator=g).to(dtype)
    k = torch.randn(b, h_kv, n_kv, d, generator=g).to(dtype)
    v = torch.randn(b, h_kv, n_kv, d_v or d, generator=g).to(dtype)
    return q, k, v


def _grads(fn, inputs, do):
    leaves = [t.detach().clone().requires_grad_() for t in inputs]
    out = fn(*leaves)
    out.backward(do.to(out.dtype))
    return out.detach(), [t.grad for t in leaves]


def _reference(q, k, v, **kw):
    """torch's SDPA (math) in float64 on inputs of another dtype: (o, grads) for do."""
    return lambda *t: F.scaled_dot_product_attention(*(x.double() for x in t), **kw)


def _assert_flash_criterion(ours, theirs, exact, atol):
    """FlashAttention's test: |ours - exact| <= 2 |theirs - exact| + atol, as max norms."""
    err = (ours.double() - exact).abs().max().item()
    base = (theirs.double() - exact).abs().max().item()
    assert err <= 2 * base + atol, (err, base)


def _check_against_torch(name, fn, torch_fn, inputs, atol):
    do = torch.randn(torch_fn(*inputs).shape, generator=_gen(name + "do"))
    o, grads = _grads(fn, inputs, do)
    o_t, grads_t = _grads(torch_fn, inputs, do)
    o_x, grads_x = _grads(lambda *t: torch_fn(*(x.double() for x in t)), inputs, do.double())
    _assert_flash_criterion(o, o_t, o_x, atol)
    for g, g_t, g_x in zip(grads, grads_t, grads_x, strict=True):
        _assert_flash_criterion(g, g_t, g_x, atol)


def _counting(monkeypatch):
    calls = []
    real = sdpa.attention_op.impl

    def counted(*args):
        calls.append(args)
        return real(*args)

    monkeypatch.setattr(sdpa.attention_op, "impl", counted)
    monkeypatch.setattr(sdpa.attention_op, "function", None)  # (rebuilt below)
    sdpa.attention_op.register_autograd(sdpa._grad, setup_context=sdpa._setup)
    return calls


# ---------------------------------------------------------------- the fused kernels (interpreter)

FUSED = [
    # (batch, h_q, h_kv, n_q, n_kv): MHA, GQA, MQA; unequal lengths as in FlashAttention's grid
    (1, 2, 2, 37, 37),
    (2, 4, 2, 13, 47),
    (1, 3, 1, 50, 21),
    (3, 2, 1, 1, 39),
]


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("shape", FUSED, ids=str)
def test_sdpa_fused_against_torch(monkeypatch, shape, dtype, causal):
    b, h_q, h_kv, n_q, n_kv = shape
    name = f"fused{shape}{dtype}{causal}"
    inputs = _qkv(name, b, h_q, h_kv, n_q, n_kv, 64, dtype)
    calls = _counting(monkeypatch)
    kw = {"is_causal": causal, "enable_gqa": h_q != h_kv}
    _check_against_torch(
        name,
        lambda *t: ttx.scaled_dot_product_attention(*t, **kw),
        lambda *t: F.scaled_dot_product_attention(*t, **kw),
        inputs,
        atol=1e-3 if dtype == torch.float16 else 1e-2,
    )
    assert len(calls) == 1  # the fused op, not the blockwise path
    q, k, v = calls[0][:3]
    assert q.shape == (b, n_q, h_q, 64) and k.shape == (b, n_kv, h_kv, 64)
    assert q.stride(1) == 64  # the [B, H, N, D] tensor's transpose(1, 2) view: not a copy


@pytest.mark.parametrize("d", [32, 40, 59, 80, 96, 111, 160, 200, 224, 256])
def test_sdpa_fused_head_dims(monkeypatch, d):
    """Every head dim from 32 to 256 runs in the fused kernels, forward and backward: those
    other than the tiles on the next tile, the columns past d masked in the loads and stores
    (59, 111: not a multiple of 8 either)."""
    name = f"headdim{d}"
    dtype = torch.float16 if d % 3 else torch.bfloat16
    inputs = _qkv(name, 1, 4, 2, 21, 45, d, dtype)
    calls = _counting(monkeypatch)
    kw = {"is_causal": d % 2 == 0, "enable_gqa": True}
    _check_against_torch(
        name,
        lambda *t: ttx.scaled_dot_product_attention(*t, **kw),
        lambda *t: F.scaled_dot_product_attention(*t, **kw),
        inputs,
        atol=1e-3 if dtype == torch.float16 else 1e-2,
    )
    assert calls and calls[0][0].shape[-1] == d


@pytest.mark.parametrize("d", [40, 111, 256])
def test_flash_attn_func_head_dims(monkeypatch, d):
    """flash_attn_func at padded head dims and 256: bottom-right causal with a window and a
    softcap, MQA, forward and backward, against the spelled-out definition."""
    name = f"flashheaddim{d}"
    g = _gen(name)
    q = torch.randn(2, 19, 3, d, generator=g).half()
    k = torch.randn(2, 40, 1, d, generator=g).half()
    v = torch.randn(2, 40, 1, d, generator=g).half()
    lo, hi = _lo_hi(19, 40, True, (13, -1))
    calls = _counting(monkeypatch)
    kw = {"causal": True, "window_size": (13, -1), "softcap": 3.0}
    _check_against_torch(
        name,
        lambda *t: ttx.flash_attn_func(*t, **kw),
        lambda *t: _explicit(*t, d**-0.5, lo, hi, 3.0, dtype=t[0].dtype),
        (q, k, v),
        atol=1e-3,
    )
    assert calls


def test_sdpa_fused_strided_views(monkeypatch):
    """q, k, v sliced out of one fused projection [B, N, 3, H, D] and permuted: read in place."""
    qkv = torch.randn(2, 19, 3, 2, 64, generator=_gen("views")).half()
    q, k, v = qkv.permute(2, 0, 3, 1, 4)
    calls = _counting(monkeypatch)
    o = ttx.scaled_dot_product_attention(q, k, v, is_causal=True)
    ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=True)
    assert (o.double() - ref).abs().max() < 2e-3
    assert calls[0][0].data_ptr() == qkv.data_ptr()


def test_attention_defaults_and_gqa():
    """attention: is_causal's default False (SDPA's), grouped-query heads without a flag."""
    q, k, v = _qkv("defaults", 1, 4, 2, 9, 9, 64, torch.float16)
    ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), enable_gqa=True)
    assert (ttx.attention(q, k, v).double() - ref).abs().max() < 2e-3
    ref_c = F.scaled_dot_product_attention(
        q.double(), k.double(), v.double(), is_causal=True, enable_gqa=True
    )
    assert (ttx.attention(q, k, v, causal=True).double() - ref_c).abs().max() < 2e-3
    assert (ref - ref_c).abs().max() > 0.1  # (the two differ: the default is not causal)


# ---------------------------------------------------------------- the blockwise path


@pytest.fixture
def small_blocks(monkeypatch):
    """Blocks of 64 keys whatever the size, so that short sequences take several blocks; the
    shapes of every block of scores are recorded."""
    monkeypatch.setattr(sdpa, "BLOCK_SCORES", 1)
    shapes = []
    real = sdpa._scores

    def recorded(*args):
        s, t = real(*args)
        shapes.append(tuple(s.shape))
        return s, t

    monkeypatch.setattr(sdpa, "_scores", recorded)
    return shapes


BLOCKWISE = [
    # (batch, h_q, h_kv, n_q, n_kv, d, d_v)
    (1, 2, 2, 5, 150, 8, 8),
    (2, 4, 2, 70, 131, 16, 5),
    (1, 3, 1, 3, 199, 4, 4),
    (2, 2, 1, 130, 65, 8, 8),
]


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("shape", BLOCKWISE, ids=str)
def test_sdpa_blockwise_against_torch(small_blocks, shape, dtype, causal):
    b, h_q, h_kv, n_q, n_kv, d, d_v = shape
    name = f"block{shape}{dtype}{causal}"
    inputs = _qkv(name, b, h_q, h_kv, n_q, n_kv, d, dtype, d_v)
    kw = {"is_causal": causal, "enable_gqa": h_q != h_kv, "scale": 0.3}
    _check_against_torch(
        name,
        lambda *t: ttx.scaled_dot_product_attention(*t, **kw),
        lambda *t: F.scaled_dot_product_attention(*t, **kw),
        inputs,
        atol=1e-5 if dtype == torch.float32 else 1e-12,
    )
    assert small_blocks and all(s[-1] <= 64 for s in small_blocks)  # never N_q x N_kv
    assert len(small_blocks) >= 2 * math.ceil(n_kv / 64)  # forward and backward, by blocks


@pytest.mark.parametrize(
    "mask_shape", [(9, 140), (1, 1, 9, 140), (2, 1, 9, 1), (3, 9, 140)], ids=str
)
@pytest.mark.parametrize("kind", ["bool", "float"])
def test_sdpa_blockwise_masks(small_blocks, mask_shape, kind):
    """Boolean and additive masks broadcast over batch and heads; the additive mask's
    gradient; a boolean mask that hides every key of a row gives 0 there, as torch does."""
    g = _gen(f"mask{mask_shape}{kind}")
    q, k, v = _qkv(f"mask{mask_shape}{kind}", 2, 3, 3, 9, 140, 8, torch.float64)
    if kind == "bool":
        mask = torch.rand(mask_shape, generator=g) > 0.3
        mask[..., 4, :] = False  # a row with no key
        mask_grad = False
    else:
        mask = torch.randn(mask_shape, generator=g, dtype=torch.float64)
        mask_grad = True
    inputs = (q, k, v, mask)
    do = torch.randn(2, 3, 9, 8, generator=g, dtype=torch.float64)

    def ours(q, k, v, m):
        return ttx.scaled_dot_product_attention(q, k, v, attn_mask=m)

    def theirs(q, k, v, m):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=m)

    leaves = [t.clone().requires_grad_(t.is_floating_point()) for t in inputs]
    o = ours(*leaves)
    o.backward(do)
    refs = [t.clone().requires_grad_(t.is_floating_point()) for t in inputs]
    r = theirs(*refs)
    r.backward(do)
    torch.testing.assert_close(o, r, rtol=1e-10, atol=1e-10)
    for a, b in zip(leaves[: 3 + mask_grad], refs[: 3 + mask_grad], strict=True):
        torch.testing.assert_close(a.grad, b.grad, rtol=1e-10, atol=1e-10)


def test_sdpa_blockwise_gradcheck(small_blocks):
    q, k, v = _qkv("gradcheck", 1, 2, 1, 4, 70, 3, torch.float64)
    mask = torch.randn(4, 70, generator=_gen("gradcheck mask"), dtype=torch.float64)
    args = [t.requires_grad_() for t in (q, k, v, mask)]

    def fn(q, k, v, m):
        return ttx.scaled_dot_product_attention(q, k, v, attn_mask=m, enable_gqa=True)

    assert torch.autograd.gradcheck(fn, args)


def test_sdpa_ranks():
    """2-D, 3-D and 5-D inputs as torch takes them ([..., L, E])."""
    for shape in [(7, 8), (3, 7, 8), (2, 2, 3, 7, 8)]:
        q = torch.randn(shape, generator=_gen(str(shape)), dtype=torch.float64)
        torch.testing.assert_close(
            ttx.scaled_dot_product_attention(q, q, q, is_causal=True),
            F.scaled_dot_product_attention(q, q, q, is_causal=True),
        )


@pytest.mark.parametrize("d", [24, 264])
def test_sdpa_fused_head_dim_without_kernel_goes_blockwise(monkeypatch, small_blocks, d):
    """f16 with a head dim the kernels do not take (below 32, above 256): the blockwise path,
    never N^2."""
    calls = _counting(monkeypatch)
    q, k, v = _qkv(f"d{d}", 1, 2, 2, 20, 100, d, torch.float16)
    o = ttx.scaled_dot_product_attention(q, k, v, is_causal=True)
    ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=True)
    assert not calls
    assert (o.double() - ref).abs().max() < 2e-3
    assert all(s[-1] <= 64 for s in small_blocks)


# ---------------------------------------------------------------- torch's checks


@pytest.mark.parametrize(
    ("shapes", "kw", "match"),
    [
        (((2, 8, 5, 16), (2, 2, 7, 16), (2, 2, 7, 16)), {}, "enable_gqa=True"),
        (((2, 8, 5, 16), (2, 3, 7, 16), (2, 3, 7, 16)), {"enable_gqa": True}, "must divide"),
        (((2, 8, 5, 16), (2, 8, 7, 8), (2, 8, 7, 16)), {}, "head dim"),
        (((2, 8, 5, 16), (2, 8, 7, 16), (2, 8, 6, 16)), {}, "must match"),
        (((2, 8, 5, 16), (3, 8, 7, 16), (3, 8, 7, 16)), {}, "must match"),
        (((16,), (16,), (16,)), {}, "at least 2 dimensional"),
        (((2, 2, 5, 16),) * 3, {"dropout_p": 1.5}, "between 0 and 1"),
        (((2, 2, 5, 16),) * 3, {"scale": math.inf}, "finite"),
        (((2, 2, 5, 16),) * 3, {"attn_mask": torch.ones(5, 4, dtype=torch.bool)}, "broadcast"),
        (((2, 2, 5, 16),) * 3, {"attn_mask": torch.ones(5, 5).bool(), "is_causal": True}, "both"),
    ],
)
def test_sdpa_checks(shapes, kw, match):
    q, k, v = (torch.zeros(s) for s in shapes)
    with pytest.raises(RuntimeError, match=match):
        ttx.scaled_dot_product_attention(q, k, v, **kw)


def test_sdpa_checks_dtype_and_dropout():
    q = torch.zeros(1, 1, 4, 8)
    with pytest.raises(RuntimeError, match="same dtype"):
        ttx.scaled_dot_product_attention(q, q.half(), q)
    with pytest.raises(NotImplementedError, match="dropout_p"):
        ttx.scaled_dot_product_attention(q, q, q, dropout_p=0.1)


# ---------------------------------------------------------------- flash_attn_func


def _explicit(q, k, v, scale, lo, hi, softcap=0.0, dtype=torch.float64, slopes=None):
    """FlashAttention's definition, [B, N, H, D] in ``dtype``, spelled out: the band i + lo <=
    j <= i + hi, softcap, rows without keys 0."""
    qf, kf, vf = (t.to(dtype).transpose(1, 2) for t in (q, k, v))
    g = qf.shape[1] // kf.shape[1]
    kf, vf = kf.repeat_interleave(g, 1), vf.repeat_interleave(g, 1)
    s = qf @ kf.transpose(-1, -2) * scale
    if softcap:
        s = softcap * torch.tanh(s / softcap)
    i = torch.arange(s.shape[-2])[:, None]
    j = torch.arange(s.shape[-1])[None, :]
    if slopes is not None:  # ALiBi: - slope * |i + N_kv - N_q - j|
        dist = (i + s.shape[-1] - s.shape[-2] - j).abs().to(dtype)
        s = s - slopes.to(dtype).reshape(-1, s.shape[1], 1, 1) * dist
    s = s.masked_fill(~((j >= i + lo) & (j <= i + hi)), -math.inf)
    p = torch.softmax(s, -1).nan_to_num(0.0)
    return (p @ vf).transpose(1, 2)


FLASH = [
    # (n_q, n_kv, causal, window, softcap)
    (11, 150, True, (-1, -1), 0.0),  # bottom right: query i sees keys <= i + 139
    (150, 70, True, (-1, -1), 0.0),  # the first 80 queries see no key
    (40, 140, False, (20, 5), 0.0),
    (90, 90, True, (33, -1), 0.0),
    (30, 100, False, (-1, -1), 0.7),
    (30, 100, True, (50, 0), 2.0),
]


@pytest.mark.parametrize("case", FLASH, ids=str)
def test_flash_attn_func_blockwise(small_blocks, case):
    n_q, n_kv, causal, window, softcap = case
    g = _gen(f"flash{case}")
    q = torch.randn(2, n_q, 4, 8, generator=g, dtype=torch.float64)
    k = torch.randn(2, n_kv, 2, 8, generator=g, dtype=torch.float64)
    v = torch.randn(2, n_kv, 2, 8, generator=g, dtype=torch.float64)
    left, right = window
    diag = n_kv - n_q
    right = 0 if causal else right
    lo = diag - left if left >= 0 else -(10**9)
    hi = diag + right if right >= 0 else 10**9
    kw = {"causal": causal, "window_size": window, "softcap": softcap, "softmax_scale": 0.5}
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    out, lse = ttx.flash_attn_func(*leaves, **kw, return_lse=True)
    want = _explicit(q, k, v, 0.5, lo, hi, softcap)
    torch.testing.assert_close(out, want, rtol=1e-10, atol=1e-10)
    assert lse.shape == (2, 4, n_q) and lse.dtype == torch.float32
    do = torch.randn(out.shape, generator=g, dtype=torch.float64)
    out.backward(do)
    refs = [t.clone().requires_grad_() for t in (q, k, v)]
    _explicit(*refs, 0.5, lo, hi, softcap).backward(do)
    for a, b in zip(leaves, refs, strict=True):
        torch.testing.assert_close(a.grad, b.grad, rtol=1e-9, atol=1e-10)


def _lo_hi(n_q, n_kv, causal, window):
    left, right = window
    diag = n_kv - n_q
    right = 0 if causal else right
    lo = diag - left if left >= 0 else -(10**9)
    hi = diag + right if right >= 0 else 10**9
    return lo, hi


FLASH_FUSED = [
    # (n_q, n_kv, causal, window, softcap): bottom-right causal both ways, windows, softcap
    (11, 97, True, (-1, -1), 0.0),
    (97, 40, True, (-1, -1), 0.0),  # the first 57 queries see no key: 0, and no gradient
    (40, 97, False, (20, 5), 0.0),
    (70, 70, True, (33, -1), 0.0),
    (30, 70, False, (-1, -1), 0.7),
    (45, 64, True, (31, 0), 5.0),
]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("case", FLASH_FUSED, ids=str)
def test_flash_attn_func_fused(monkeypatch, case, dtype):
    """The kernels' BAND and SOFTCAP on the interpreter (forward and backward) against the
    spelled-out definition in float64, with FlashAttention's criterion."""
    n_q, n_kv, causal, window, softcap = case
    name = f"flashfused{case}{dtype}"
    g = _gen(name)
    q = torch.randn(2, n_q, 4, 64, generator=g).to(dtype)
    k = torch.randn(2, n_kv, 2, 64, generator=g).to(dtype)
    v = torch.randn(2, n_kv, 2, 64, generator=g).to(dtype)
    lo, hi = _lo_hi(n_q, n_kv, causal, window)
    calls = _counting(monkeypatch)
    kw = {"causal": causal, "window_size": window, "softcap": softcap}
    _check_against_torch(
        name,
        lambda *t: ttx.flash_attn_func(*t, **kw),
        lambda *t: _explicit(*t, 0.125, lo, hi, softcap, dtype=t[0].dtype),
        (q, k, v),
        atol=1e-3 if dtype == torch.float16 else 1e-2,
    )
    assert calls and all(c[5] for c in calls)  # the fused op, bottom right
    out, lse = ttx.flash_attn_func(q, k, v, **kw, return_lse=True)
    if causal and n_q > n_kv:  # rows without keys
        assert torch.all(out[:, : n_q - n_kv] == 0) and torch.all(
            lse[..., : n_q - n_kv] == math.inf
        )


@pytest.mark.parametrize("slopes_shape", ["heads", "batch_heads"])
@pytest.mark.parametrize("case", [(37, 53, False), (37, 53, True), (60, 21, True)], ids=str)
def test_flash_attn_func_alibi(monkeypatch, case, slopes_shape):
    """ALiBi in the kernels (forward and backward, interpreter): slopes [H_q] or [B, H_q]."""
    n_q, n_kv, causal = case
    name = f"alibi{case}{slopes_shape}"
    g = _gen(name)
    q = torch.randn(2, n_q, 4, 64, generator=g).half()
    k = torch.randn(2, n_kv, 2, 64, generator=g).half()
    v = torch.randn(2, n_kv, 2, 64, generator=g).half()
    shape = (4,) if slopes_shape == "heads" else (2, 4)
    slopes = torch.rand(shape, generator=g) * 0.5
    lo, hi = _lo_hi(n_q, n_kv, causal, (-1, -1))
    calls = _counting(monkeypatch)
    _check_against_torch(
        name,
        lambda *t: ttx.flash_attn_func(*t, causal=causal, alibi_slopes=slopes),
        lambda *t: _explicit(*t, 0.125, lo, hi, dtype=t[0].dtype, slopes=slopes),
        (q, k, v),
        atol=1e-3,
    )
    assert calls and calls[0][-1] is not None


def test_flash_attn_func_refuses_what_it_lacks():
    q = torch.zeros(1, 4, 2, 8)
    with pytest.raises(NotImplementedError, match="alibi_slopes"):
        ttx.flash_attn_func(q, q, q, alibi_slopes=torch.zeros(2))
    with pytest.raises(NotImplementedError, match="dropout_p"):
        ttx.flash_attn_func(q, q, q, dropout_p=0.1)
    with pytest.raises(ValueError, match="window_size"):
        ttx.flash_attn_func(q, q, q, window_size=(-2, 0))
    with pytest.raises(ValueError, match="softcap"):
        ttx.flash_attn_func(q, q, q, softcap=-1.0)
    with pytest.raises(RuntimeError, match="4-D"):
        ttx.flash_attn_func(q[0], q[0], q[0])


# ---------------------------------------------------------------- flash_attn_varlen_func


def _offsets(lengths):
    return torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.int32)


def _packed(name, lengths_q, lengths_k, h_q, h_kv, d, dtype):
    g = _gen(name)
    q = torch.randn(sum(lengths_q), h_q, d, generator=g).to(dtype)
    k = torch.randn(sum(lengths_k), h_kv, d, generator=g).to(dtype)
    v = torch.randn(sum(lengths_k), h_kv, d, generator=g).to(dtype)
    return q, k, v


def _per_sequence(lengths_q, lengths_k, causal, window, softcap, slopes=None, scale=None):
    """The reference: each sequence on its own, FlashAttention's definition (bottom right)
    spelled out in the inputs' dtype, the outputs packed again."""
    cu_q, cu_k = _offsets(lengths_q).tolist(), _offsets(lengths_k).tolist()

    def fn(q, k, v):
        outs = []
        for b, (n_q, n_kv) in enumerate(zip(lengths_q, lengths_k, strict=True)):
            lo, hi = _lo_hi(n_q, n_kv, causal, window)
            qs, ks = slice(cu_q[b], cu_q[b + 1]), slice(cu_k[b], cu_k[b + 1])
            alibi = None if slopes is None else (slopes if slopes.dim() == 1 else slopes[b])
            sc = q.shape[-1] ** -0.5 if scale is None else scale
            o = _explicit(
                q[None, qs], k[None, ks], v[None, ks], sc, lo, hi, softcap, q.dtype, alibi
            )
            outs.append(o[0])
        return torch.cat(outs)

    return fn


VARLEN = [
    # (lengths_q, lengths_k): empty and one-token sequences, n_q above and below n_kv
    ([1, 13, 0, 40, 2], [1, 13, 5, 40, 30]),
    ([37], [21]),
    ([3, 70, 9], [50, 1, 9]),
]


@pytest.mark.parametrize(
    ("causal", "window", "softcap"),
    [(False, (-1, -1), 0.0), (True, (-1, -1), 0.0), (False, (6, 3), 0.0), (True, (9, 0), 4.0)],
    ids=str,
)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("lengths", VARLEN, ids=str)
def test_flash_attn_varlen_func_against_sequences(lengths, dtype, causal, window, softcap):
    """Packed sequences (GQA) in the fused kernels on the interpreter, forward and dq/dk/dv,
    against each sequence's own attention (FlashAttention's criterion, float64 reference)."""
    lengths_q, lengths_k = lengths
    name = f"varlen{lengths}{dtype}{causal}{window}{softcap}"
    q, k, v = _packed(name, lengths_q, lengths_k, 4, 2, 64, dtype)
    cu_q, cu_k = _offsets(lengths_q), _offsets(lengths_k)
    kw = {"causal": causal, "window_size": window, "softcap": softcap}
    _check_against_torch(
        name,
        lambda *t: ttx.flash_attn_varlen_func(*t, cu_q, cu_k, max(lengths_q), max(lengths_k), **kw),
        _per_sequence(lengths_q, lengths_k, causal, window, softcap),
        (q, k, v),
        atol=1e-3 if dtype == torch.float16 else 1e-2,
    )


@pytest.mark.parametrize("d", [40, 111, 256])
def test_flash_attn_varlen_func_head_dims_and_alibi(d):
    """Padded head dims and 256, MQA, ALiBi slopes [B, H_q], a scale of its own, and
    max_seqlen larger than the longest sequence (the extra programs exit at once)."""
    lengths_q, lengths_k = [17, 1, 30], [17, 33, 8]
    name = f"varlenheaddim{d}"
    q, k, v = _packed(name, lengths_q, lengths_k, 3, 1, d, torch.float16)
    slopes = torch.rand(3, 3, generator=_gen(name + "slopes")) * 0.5
    cu_q, cu_k = _offsets(lengths_q), _offsets(lengths_k)
    _check_against_torch(
        name,
        lambda *t: ttx.flash_attn_varlen_func(
            *t, cu_q, cu_k, 64, 40, causal=True, alibi_slopes=slopes, softmax_scale=0.1
        ),
        _per_sequence(lengths_q, lengths_k, True, (-1, -1), 0.0, slopes, scale=0.1),
        (q, k, v),
        atol=1e-3,
    )


def test_flash_attn_varlen_func_lse_and_views():
    """The lse [H_q, total_q] of each sequence's rows (+inf where a row sees no key), and q, k,
    v sliced out of one packed QKV projection [total, 3, H, D], read in place."""
    lengths = [7, 0, 19, 3]
    qkv = torch.randn(29, 3, 2, 64, generator=_gen("varlen views")).half()
    q, k, v = qkv.unbind(1)
    cu = _offsets(lengths)
    out, lse = ttx.flash_attn_varlen_func(q, k, v, cu, cu, 19, 19, causal=True, return_lse=True)
    assert out.shape == (29, 2, 64) and lse.shape == (2, 29) and lse.dtype == torch.float32
    for b, (s, e) in enumerate(zip(cu[:-1].tolist(), cu[1:].tolist(), strict=True)):
        if s == e:
            continue
        o_b, lse_b = ttx.flash_attn_func(
            q[None, s:e], k[None, s:e], v[None, s:e], causal=True, return_lse=True
        )
        torch.testing.assert_close(out[s:e], o_b[0], rtol=0, atol=0, msg=f"sequence {b}")
        torch.testing.assert_close(lse[:, s:e], lse_b[0], rtol=0, atol=0)
    k_short = k[:20]  # the last query sequence sees no key: 0, and lse +inf
    cu_k = torch.tensor([0, 7, 7, 20, 20], dtype=torch.int32)
    out, lse = ttx.flash_attn_varlen_func(q, k_short, v[:20], cu, cu_k, 19, 13, return_lse=True)
    assert torch.all(out[26:] == 0) and torch.all(lse[:, 26:] == math.inf)
    assert torch.isfinite(lse[:, :26]).all()


def test_flash_attn_varlen_func_checks():
    q = torch.zeros(10, 2, 64, dtype=torch.float16)
    cu = torch.tensor([0, 4, 10], dtype=torch.int32)
    fn = ttx.flash_attn_varlen_func

    def error(*args, **kw):
        with pytest.raises(teeny_tx.errors.TeenyError) as info:
            fn(*args, **kw)
        return str(info.value)

    assert "torch.int32" in error(q, q, q, cu.long(), cu, 6, 6)
    assert "1-D" in error(q, q, q, cu[None], cu, 6, 6)
    assert "3-D" in error(q[None], q, q, cu, cu, 6, 6)
    assert "float16 or all bfloat16" in error(q.float(), q.float(), q.float(), cu, cu, 6, 6)
    assert "float16 or all bfloat16" in error(q, q.bfloat16(), q, cu, cu, 6, 6)
    assert "is on meta" in error(q, q, q, cu.to("meta"), cu, 6, 6)
    assert "must divide" in error(torch.zeros(10, 3, 64).half(), q, q, cu, cu, 6, 6)
    assert "head dim 24" in error(q[..., :24], q[..., :24], q[..., :24], cu, cu, 6, 6)
    assert "max_seqlen_q must be an int" in error(q, q, q, cu, cu, 6.0, 6)
    bad = torch.tensor([0, 7, 4, 10], dtype=torch.int32)
    assert "non-decreasing" in error(q, q, q, bad, bad, 6, 6)
    assert "ends at 9" in error(q, q, q, torch.tensor([0, 4, 9], dtype=torch.int32), cu, 6, 6)
    assert "must start at 0" in error(
        q, q, q, torch.tensor([1, 4, 10], dtype=torch.int32), cu, 6, 6
    )
    assert "max_seqlen_k=5 is below the length of sequence 1 (6)" in error(q, q, q, cu, cu, 6, 5)
    assert "both are batch + 1 long" in error(q, q, q, cu, cu[:2].clone(), 6, 6)
    with pytest.raises(NotImplementedError, match="dropout_p"):
        fn(q, q, q, cu, cu, 6, 6, dropout_p=0.1)
    with pytest.raises(ValueError, match="window_size"):
        fn(q, q, q, cu, cu, 6, 6, window_size=(-3, 0))
    with pytest.raises(ValueError, match="softcap"):
        fn(q, q, q, cu, cu, 6, 6, softcap=-1.0)


# ---------------------------------------------------------------- opcheck, torch.compile


def test_attention_op_opcheck():
    q, k, v = (t.transpose(1, 2) for t in _qkv("opcheck", 1, 4, 2, 9, 17, 64, torch.float16))
    for causal in (False, True):
        torch.library.opcheck(
            sdpa.attention_op.custom_op, (q, k, v, causal, 0.125, False, -1, -1, 0.0, None)
        )


def test_attention_varlen_op_opcheck():
    q, k, v = _packed("varlen opcheck", [5, 9], [7, 3], 4, 2, 64, torch.float16)
    cu_q, cu_k = _offsets([5, 9]), _offsets([7, 3])
    for causal in (False, True):
        args = (q, k, v, cu_q, cu_k, 9, 7, causal, 0.125, -1, -1, 0.0, None)
        torch.library.opcheck(sdpa.attention_varlen_op.custom_op, args)


def test_flash_attn_varlen_func_compile_fullgraph():
    torch._dynamo.reset()
    cu_q, cu_k = _offsets([5, 9]), _offsets([7, 3])

    def fn(q, k, v):
        return ttx.flash_attn_varlen_func(q, k, v, cu_q, cu_k, 9, 7, causal=True)

    compiled = torch.compile(fn, fullgraph=True, backend="aot_eager")
    inputs = _packed("varlen compile", [5, 9], [7, 3], 4, 2, 64, torch.float16)
    a = [t.clone().requires_grad_() for t in inputs]
    b = [t.clone().requires_grad_() for t in inputs]
    ya, yb = compiled(*a), fn(*b)
    torch.testing.assert_close(ya, yb)
    ya.float().sum().backward()
    yb.float().sum().backward()
    for x, y in zip(a, b, strict=True):
        torch.testing.assert_close(x.grad, y.grad)


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32], ids=["fused", "blockwise"])
def test_sdpa_compile_fullgraph(dtype):
    torch._dynamo.reset()

    def fn(q, k, v):
        return ttx.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)

    compiled = torch.compile(fn, fullgraph=True, backend="aot_eager")
    inputs = _qkv(f"compile{dtype}", 1, 4, 2, 9, 17, 64, dtype)
    a = [t.clone().requires_grad_() for t in inputs]
    b = [t.clone().requires_grad_() for t in inputs]
    ya, yb = compiled(*a), fn(*b)
    torch.testing.assert_close(ya, yb)
    ya.float().sum().backward()
    yb.float().sum().backward()
    for x, y in zip(a, b, strict=True):
        torch.testing.assert_close(x.grad, y.grad)
