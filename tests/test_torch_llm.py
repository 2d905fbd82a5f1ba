"""Liger-Kernel's language-model ops in teeny_tx.torch on CPU tensors (the interpreter):
rope, cross_entropy with weight / label_smoothing / reduction / z-loss, the fused linear +
cross-entropy, geglu and the RMSNorm with an offset. Against torch's formulas, gradcheck in
float64, opcheck, and torch.compile(fullgraph=True)."""

from __future__ import annotations

import zlib

import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402

import teeny_tx.torch as ttx  # noqa: E402
from teeny_tx import TeenyError  # noqa: E402
from teeny_tx.library import llm_ops  # noqa: E402


def _gen(name: str) -> torch.Generator:
    return torch.Generator().manual_seed(zlib.crc32(name.encode()))


def _randn(name: str, *shape: int, dtype=torch.float64) -> torch.Tensor:
    return torch.randn(*shape, generator=_gen(name), dtype=dtype)


def _targets(name: str, n: int, classes: int, ignore: int = -100) -> torch.Tensor:
    t = torch.randint(0, classes, (n,), generator=_gen(name))
    t[1 % n] = ignore
    return t


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), -1)


def _rotate_pairs(x: torch.Tensor) -> torch.Tensor:
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack((-b, a), -1).flatten(-2)


def _tables(d: int, positions: int, layout: str) -> tuple[torch.Tensor, torch.Tensor]:
    rot = ttx.RotaryEmbedding(d, positions, layout=layout)
    return rot.get_buffer("cos").double(), rot.get_buffer("sin").double()


# ---------------------------------------------------------------- rope


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize(
    ("b", "hq", "hk", "n", "d"), [(1, 1, 1, 1, 2), (2, 4, 2, 5, 8), (1, 3, 1, 7, 6)]
)
def test_rope_matches_the_formula(layout, b, hq, hk, n, d):
    name = f"rope {layout} {b} {hq} {hk} {n} {d}"
    q, k = _randn(name + "q", b, hq, n, d), _randn(name + "k", b, hk, n, d)
    cos, sin = _tables(d, 16, layout)
    cos, sin = cos[:n], sin[:n]
    rot = _rotate_half if layout == "half" else _rotate_pairs
    qo, ko = ttx.rope(q, k, cos, sin, layout=layout)
    torch.testing.assert_close(qo, q * cos + rot(q) * sin)
    torch.testing.assert_close(ko, k * cos + rot(k) * sin)


def test_rope_position_ids_and_batched_tables():
    b, h, n, d = 2, 2, 4, 8
    q, k = _randn("pos q", b, h, n, d), _randn("pos k", b, h, n, d)
    cos, sin = _tables(d, 32, "half")
    pos = torch.randint(0, 32, (b, n), generator=_gen("pos"))
    qo, ko = ttx.rope(q, k, cos, sin, pos)
    c, s = cos[pos][:, None], sin[pos][:, None]  # [B, 1, N, D]
    torch.testing.assert_close(qo, q * c + _rotate_half(q) * s)
    torch.testing.assert_close(ko, k * c + _rotate_half(k) * s)
    # the same, as Hugging Face's rotary embedding hands them: [B, N, D]
    qo2, ko2 = ttx.rope(q, k, cos[pos], sin[pos])
    torch.testing.assert_close(qo2, qo)
    torch.testing.assert_close(ko2, ko)


def test_rope_reads_strided_q_and_k():
    b, h, n, d = 2, 3, 5, 8
    qkv = _randn("strided", b, n, 3 * h, d).transpose(1, 2)  # [B, 3H, N, D], a view
    q, k = qkv[:, :h], qkv[:, h : 2 * h]
    cos, sin = _tables(d, 8, "half")
    qo, ko = ttx.rope(q, k, cos[:n], sin[:n])
    torch.testing.assert_close(qo, q * cos[:n] + _rotate_half(q) * sin[:n])
    torch.testing.assert_close(ko, k * cos[:n] + _rotate_half(k) * sin[:n])


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_rope_gradcheck(layout):
    q = _randn("gc q" + layout, 2, 2, 3, 4).requires_grad_()
    k = _randn("gc k" + layout, 2, 1, 3, 4).requires_grad_()
    cos, sin = _tables(4, 8, layout)
    pos = torch.tensor([[0, 5, 2], [7, 1, 1]])
    assert torch.autograd.gradcheck(lambda q, k: ttx.rope(q, k, cos, sin, pos, layout), (q, k))


def test_rope_opcheck_and_compile():
    q, k = _randn("oc q", 1, 2, 3, 4), _randn("oc k", 1, 2, 3, 4)
    cos, sin = _tables(4, 3, "half")
    torch.library.opcheck(llm_ops.rope_op.custom_op, (q, k, cos, sin, None, 0))
    f = torch.compile(lambda q, k: ttx.rope(q, k, cos, sin), fullgraph=True, backend="aot_eager")
    a, b = f(q, k)
    c, d = ttx.rope(q, k, cos, sin)
    torch.testing.assert_close(a, c)
    torch.testing.assert_close(b, d)


def test_rope_refuses_what_it_cannot_do():
    q, k = _randn("bad q", 1, 2, 3, 4), _randn("bad k", 1, 2, 3, 4)
    cos, sin = _tables(4, 3, "half")
    with pytest.raises(TeenyError, match="layout must be"):
        ttx.rope(q, k, cos, sin, layout="neox")
    with pytest.raises(TeenyError, match="share B, N"):
        ttx.rope(q, k[:, :, :2], cos, sin)
    with pytest.raises(TeenyError, match="computes no gradient for cos"):
        ttx.rope(q, k, cos.clone().requires_grad_(), sin)
    with pytest.raises(IndexError, match="position 9"):
        ttx.rope(q, k, cos, sin, torch.tensor([[0, 9, 1]]))


# ---------------------------------------------------------------- cross-entropy with options

OPTIONS = [
    {},
    {"reduction": "sum"},
    {"reduction": "none"},
    {"label_smoothing": 0.25},
    {"weight": True},
    {"weight": True, "label_smoothing": 0.1},
    {"weight": True, "label_smoothing": 0.1, "reduction": "sum"},
    {"weight": True, "reduction": "none", "ignore_index": 3},
]


def _options(kw: dict, classes: int) -> dict:
    kw = dict(kw)
    if kw.get("weight"):
        kw["weight"] = torch.rand(classes, generator=_gen("weight"), dtype=torch.float64) + 0.1
    return kw


@pytest.mark.parametrize("kw", OPTIONS, ids=lambda kw: "-".join(kw) or "default")
@pytest.mark.parametrize(("n", "c"), [(1, 1), (7, 11), (5, 1500)])
def test_cross_entropy_options_match_torch(kw, n, c):
    kw = _options(kw, c)
    x = _randn(f"ce {n} {c}", n, c).requires_grad_()
    t = _targets(f"ce t {n} {c}", n, c, kw.get("ignore_index", -100))
    ours, theirs = ttx.cross_entropy(x, t, **kw), F.cross_entropy(x, t, **kw)
    torch.testing.assert_close(ours, theirs, rtol=1e-7, atol=1e-8, equal_nan=True)
    if torch.isfinite(theirs).all():
        g = torch.randn(theirs.shape, generator=_gen("ce g"), dtype=torch.float64)
        (a,) = torch.autograd.grad(ours, x, g)
        (b,) = torch.autograd.grad(theirs, x, g)
        torch.testing.assert_close(a, b, rtol=1e-7, atol=1e-8)


def test_cross_entropy_z_loss_is_lse_squared():
    x, t = _randn("z", 6, 9), _targets("z t", 6, 9)
    kept = t != -100
    lse = torch.logsumexp(x, -1)
    want = F.cross_entropy(x, t, reduction="none") + 1e-2 * lse**2 * kept
    got = ttx.cross_entropy(x, t, reduction="none", z_loss=1e-2)
    torch.testing.assert_close(got, want)


def test_cross_entropy_options_gradcheck_and_opcheck():
    x = _randn("gc ce", 4, 6).requires_grad_()
    t = _targets("gc ce t", 4, 6)
    w = torch.rand(6, generator=_gen("gc w"), dtype=torch.float64) + 0.5

    def f(x):
        return ttx.cross_entropy(x, t, w, label_smoothing=0.2, z_loss=0.05)

    assert torch.autograd.gradcheck(f, (x,))
    torch.library.opcheck(llm_ops.lm_loss_op.custom_op, (x.detach(), t, w, -100, 0.2, 0.05))
    g = torch.compile(f, fullgraph=True, backend="aot_eager")
    torch.testing.assert_close(g(x), f(x))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_cross_entropy_options_low_precision(dtype):
    x = _randn("lp", 9, 37, dtype=torch.float32).to(dtype)
    t = _targets("lp t", 9, 37)
    ours = ttx.cross_entropy(x, t, label_smoothing=0.1, reduction="sum")
    theirs = F.cross_entropy(x.float(), t, label_smoothing=0.1, reduction="sum")
    torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-5)


def test_cross_entropy_refuses_bad_options():
    x, t = _randn("opts", 3, 4), torch.tensor([0, 1, 2])
    with pytest.raises(TeenyError, match="reduction must be"):
        ttx.cross_entropy(x, t, reduction="avg")
    with pytest.raises(TeenyError, match="label_smoothing must be in"):
        ttx.cross_entropy(x, t, label_smoothing=1.5)
    with pytest.raises(TeenyError, match="weight must be"):
        ttx.cross_entropy(x, t, torch.ones(3, dtype=torch.float64))
    with pytest.raises(TeenyError, match="computes no gradient for weight"):
        ttx.cross_entropy(x, t, torch.ones(4, dtype=torch.float64, requires_grad=True))
    with pytest.raises(IndexError):
        ttx.cross_entropy(x, torch.tensor([0, 4, 1]), label_smoothing=0.1)


# ---------------------------------------------------------------- fused linear + cross-entropy


@pytest.mark.parametrize(
    "kw",
    [{}, {"reduction": "sum"}, {"label_smoothing": 0.1}, {"bias": True}, {"class_weight": True}],
    ids=lambda kw: "-".join(kw) or "default",
)
def test_fused_linear_cross_entropy_matches_torch(kw):
    n, h, v = 19, 6, 13  # 19 tokens: chunks of flce_chunk(19, 13, 6) = 3, the last short
    x = _randn("flce x", n, h).requires_grad_()
    w = _randn("flce w", v, h).requires_grad_()
    t = _targets("flce t", n, v)
    b = _randn("flce b", v).requires_grad_() if kw.pop("bias", False) else None
    cw = torch.rand(v, generator=_gen("cw"), dtype=torch.float64) + 0.2
    cw = cw if kw.pop("class_weight", False) else None
    ours = ttx.fused_linear_cross_entropy(x, w, t, b, class_weight=cw, **kw)
    theirs = F.cross_entropy(F.linear(x, w, b), t, weight=cw, **kw)
    torch.testing.assert_close(ours, theirs)
    params = [p for p in (x, w, b) if p is not None]
    got = torch.autograd.grad(ours * 1.5, params)
    want = torch.autograd.grad(theirs * 1.5, params)
    for a, e in zip(got, want, strict=True):
        torch.testing.assert_close(a, e)


def test_fused_linear_cross_entropy_gradcheck_and_compile():
    x = _randn("flce gc x", 5, 3).requires_grad_()
    w = _randn("flce gc w", 7, 3).requires_grad_()
    t = _targets("flce gc t", 5, 7)

    def f(x, w):
        return ttx.fused_linear_cross_entropy(x, w, t, label_smoothing=0.1, z_loss=0.01)

    assert torch.autograd.gradcheck(f, (x, w))
    g = torch.compile(f, fullgraph=True, backend="aot_eager")
    torch.testing.assert_close(g(x, w), f(x, w))


def test_fused_linear_cross_entropy_chunks_are_small():
    assert llm_ops.flce_chunk(8192, 128256, 4096) * 4 <= 8192  # under 1/4 of the logits
    assert llm_ops.flce_chunk(8192, 128256, 4096) == 256
    assert llm_ops.flce_chunk(1, 10, 10) == 1
    with pytest.raises(TeenyError, match="'mean' or 'sum'"):
        ttx.fused_linear_cross_entropy(
            _randn("n", 2, 3), _randn("w", 4, 3), torch.tensor([0, 1]), reduction="none"
        )


# ---------------------------------------------------------------- geglu, RMSNorm with offset


@pytest.mark.parametrize("approximate", ["tanh", "none"])
def test_geglu(approximate):
    g = _randn("geglu g" + approximate, 3, 70).requires_grad_()
    u = _randn("geglu u" + approximate, 3, 70).requires_grad_()
    torch.testing.assert_close(ttx.geglu(g, u, approximate), F.gelu(g, approximate=approximate) * u)
    assert torch.autograd.gradcheck(lambda g, u: ttx.geglu(g, u, approximate), (g, u))
    with pytest.raises(TeenyError, match="'none' or 'tanh'"):
        ttx.geglu(g, u, "fast")


def test_gated_mlp_matches_torch():
    torch.manual_seed(zlib.crc32(b"mlp"))
    for activation, act in (
        ("silu", F.silu),
        ("gelu_tanh", lambda z: F.gelu(z, approximate="tanh")),
    ):
        mlp = ttx.GEGLUMLP(6, 10, activation).double()
        x = _randn("mlp x", 2, 3, 6)
        want = mlp.down_proj(act(mlp.gate_proj(x)) * mlp.up_proj(x))
        torch.testing.assert_close(mlp(x), want)


@pytest.mark.parametrize("offset", [0.0, 1.0])
@pytest.mark.parametrize("mode", ["llama", "gemma", "none"])
def test_rms_norm_offset(offset, mode):
    x = _randn("rms x", 4, 33).requires_grad_()
    w = _randn("rms w", 33).requires_grad_()

    def want(x, w):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * (offset + w)

    torch.testing.assert_close(ttx.rms_norm_offset(x, w, 1e-6, offset, mode), want(x, w))
    assert torch.autograd.gradcheck(
        lambda x, w: ttx.rms_norm_offset(x, w, 1e-6, offset, mode), (x, w)
    )
    norm = ttx.LigerRMSNorm(33, offset=offset, init_fn="zeros" if offset else "ones").double()
    torch.testing.assert_close(norm(x), want(x, norm.weight))
    with pytest.raises(TeenyError, match="casting_mode must be"):
        ttx.rms_norm_offset(x, w, casting_mode="fp32")
