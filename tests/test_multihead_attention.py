"""teeny_tx.torch.MultiheadAttention against torch.nn.MultiheadAttention with the same
weights (CPU tensors: the interpreter): batch-first and not, unbatched input, separate k/v
dims, bool and float attn_mask and key_padding_mask, the causal hint; gradients of the input
and of every parameter; the paths it leaves to torch say so."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import teeny_tx.torch as ttx  # noqa: E402
from teeny_tx.library import sdpa as sdpa_module  # noqa: E402

from .conftest import stable_seed  # noqa: E402


def _pair(seed, embed=32, heads=4, **kw):
    torch.manual_seed(stable_seed("mha", seed))
    ref = torch.nn.MultiheadAttention(embed, heads, **kw).double()
    ours = ttx.MultiheadAttention(embed, heads, **kw).double()
    ours.load_state_dict(ref.state_dict())
    return ref, ours


def _close(a, b):
    torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-9)  # float64 both: one computation


def _run(module, q, k, v, **kw):
    leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    out, weights = module(*leaves, need_weights=False, **kw)
    out.sum().backward()
    grads = [t.grad for t in leaves] + [p.grad for p in module.parameters()]
    return out, weights, grads


CASES = [
    ("seq-first", {}, (7, 2), (11, 2)),
    ("batch-first", {"batch_first": True}, (2, 7), (2, 11)),
    ("kdim-vdim", {"kdim": 24, "vdim": 40, "batch_first": True}, (2, 7), (2, 11)),
    ("no-bias", {"bias": False}, (5, 3), (5, 3)),
]


@pytest.mark.parametrize("name,kw,q_shape,kv_shape", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("mask", ["none", "bool", "float", "padding", "both"])
def test_matches_torch(name, kw, q_shape, kv_shape, mask):
    ref, ours = _pair(name + mask, **kw)
    e, kd, vd = 32, kw.get("kdim", 32), kw.get("vdim", 32)
    g = torch.Generator().manual_seed(stable_seed("mha inputs", name, mask))
    q = torch.randn(*q_shape, e, generator=g, dtype=torch.float64)
    k = torch.randn(*kv_shape, kd, generator=g, dtype=torch.float64)
    v = torch.randn(*kv_shape, vd, generator=g, dtype=torch.float64)
    b = q_shape[0] if kw.get("batch_first") else q_shape[1]
    n_q = q_shape[1] if kw.get("batch_first") else q_shape[0]
    n_kv = kv_shape[1] if kw.get("batch_first") else kv_shape[0]
    extra = {}
    if mask in ("bool", "both"):
        extra["attn_mask"] = torch.rand(n_q, n_kv, generator=g) < 0.3
        extra["attn_mask"][:, 0] = False  # every query sees a key
    if mask == "float":
        extra["attn_mask"] = torch.randn(b * 4, n_q, n_kv, generator=g, dtype=torch.float64)
    if mask in ("padding", "both"):
        pad = torch.zeros(b, n_kv, dtype=torch.bool)
        pad[:, -2:] = True  # the last two keys of every sequence are padding
        extra["key_padding_mask"] = pad
    want, want_w, want_g = _run(ref, q, k, v, **extra)
    got, got_w, got_g = _run(ours, q, k, v, **extra)
    assert got_w is None and want_w is None
    _close(got, want)
    for a, b_ in zip(got_g, want_g, strict=True):
        _close(a, b_)


def test_unbatched_and_the_causal_hint():
    ref, ours = _pair("unbatched")
    g = torch.Generator().manual_seed(5)
    x = torch.randn(9, 32, generator=g, dtype=torch.float64)
    causal = torch.ones(9, 9, dtype=torch.bool).triu(1)
    want = ref(x, x, x, need_weights=False, attn_mask=causal, is_causal=True)[0]
    got = ours(x, x, x, need_weights=False, attn_mask=causal, is_causal=True)[0]
    _close(got, want)
    _close(ours(x, x, x, need_weights=False)[0], ref(x, x, x, need_weights=False)[0])
    with pytest.raises(RuntimeError, match="need attn_mask if specifying the is_causal hint"):
        ours(x, x, x, need_weights=False, is_causal=True)


def test_what_it_leaves_to_torch_it_names_once():
    ref, ours = _pair("weights")
    x = torch.randn(6, 2, 32, dtype=torch.float64)
    ttx.MultiheadAttention._warned.clear()
    with pytest.warns(UserWarning, match="need_weights=True returns the attention weights"):
        got, w = ours(x, x, x)  # torch's default: the weights too
    want, want_w = ref(x, x, x)
    _close(got, want)
    _close(w, want_w)
    drop = ttx.MultiheadAttention(32, 4, dropout=0.5).train()
    with pytest.warns(UserWarning, match="dropout=0.5 while training"):
        drop(x.float(), x.float(), x.float(), need_weights=False)


def _spy(fn, calls):
    def spied(*args, **kwargs):
        calls.append(fn(*args, **kwargs))
        return calls[-1]

    return spied


def test_half_precision_runs_the_fused_kernels_and_matches_float64(monkeypatch):
    """f16 [B, L, E] through the kernels (the interpreter on the CPU) against torch's module
    in float64, element by element: a few f16 roundings (the projections, P, the attention
    output, the output projection) of the output projection's condition |O| |W_o|^T + |b_o|,
    O the float64 attention output."""
    from .conftest import assert_close_elementwise

    ref, ours = _pair("half", embed=64, heads=2, batch_first=True)  # head dim 32: the kernels'
    g = torch.Generator().manual_seed(9)
    x = torch.randn(2, 40, 64, generator=g, dtype=torch.float64)
    causal = torch.ones(40, 40, dtype=torch.bool).triu(1)
    kw = {"need_weights": False, "attn_mask": causal, "is_causal": True}
    exact = ref(x, x, x, **kw)[0]
    w_q, w_k, w_v = ref.in_proj_weight.detach().chunk(3)
    b_q, b_k, b_v = ref.in_proj_bias.detach().chunk(3)
    heads = [(x @ w.T + bias).view(2, 40, 2, 32).transpose(1, 2)
             for w, bias in ((w_q, b_q), (w_k, b_k), (w_v, b_v))]  # fmt: skip
    o = torch.nn.functional.scaled_dot_product_attention(*heads, is_causal=True)
    o = o.transpose(1, 2).reshape(2, 40, 64)
    w_o, b_o = ref.out_proj.weight.detach(), ref.out_proj.bias.detach()
    torch.testing.assert_close(o @ w_o.T + b_o, exact)  # the reference's own pieces
    cond = o.abs() @ w_o.abs().T + b_o.abs()
    calls = []
    monkeypatch.setattr(sdpa_module, "_fused_takes", _spy(sdpa_module._fused_takes, calls))
    got = ours.half()(x.half(), x.half(), x.half(), **kw)[0]
    assert got.dtype == torch.float16 and calls == [True]  # the fused kernels took it
    assert_close_elementwise(got, exact, "f16", ulps=8.0, scale=cond, what="MHA f16")
