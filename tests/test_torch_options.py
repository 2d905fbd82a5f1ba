"""Options of the torch layer and of teeny_tx.linalg that no other test ran, on the CPU (the
interpreter): attention with causal=False and True (passed explicitly: the default is the
wrapper's to change), cross_entropy's ignore_index, Dropout in training mode, LayerNorm without
its affine parameters, layer_norm without weight and bias, log_softmax over another dimension,
the Attention module without causal mask and bias, Embedding's refused scale_grad_by_freq, and
linalg's precision= and out_dtype=. Each against torch in float64 (tests/test_torch.py's
_both: element-wise bounds, gradients included) or an exact property."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402

import teeny_tx.torch as ttx  # noqa: E402
from teeny_tx.library import linalg  # noqa: E402

from .conftest import UNIT_ROUNDOFF, assert_close_elementwise, stable_seed  # noqa: E402
from .test_torch import _both, _gen, _randn  # noqa: E402


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("shape", [(2, 3, 17, 16), (1, 2, 33, 8)], ids=str)
def test_attention_against_sdpa(shape, causal):
    """teeny_tx.torch.attention (q, k, v [B, H, N, D]) with causal= given, forward and
    backward, against F.scaled_dot_product_attention(is_causal=causal)."""
    seed = stable_seed("attention", shape, causal)
    q, k, v = (_randn(*shape, seed=seed + i) for i in range(3))
    _both(
        lambda q, k, v: ttx.attention(q, k, v, causal=causal),
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=causal),
        [q, k, v],
    )


def test_attention_causal_flag_changes_the_result():
    """The last query sees every key with or without the mask; the first sees only itself."""
    q, k, v = (_randn(1, 1, 9, 8, seed=i) for i in range(3))
    full, causal = ttx.attention(q, k, v, causal=False), ttx.attention(q, k, v, causal=True)
    torch.testing.assert_close(full[..., -1, :], causal[..., -1, :], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(causal[..., 0, :], v[..., 0, :], rtol=1e-5, atol=1e-6)
    assert not torch.allclose(full[..., 0, :], causal[..., 0, :], rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("ignore_index", [3, 0, -1])
def test_cross_entropy_ignore_index(ignore_index, dtype):
    """A caller's ignore_index: its rows add nothing to the mean and get no gradient."""
    classes = 11
    logits = _randn(13, classes, dtype=dtype, scale=2.0, seed=stable_seed("ce", ignore_index))
    t = torch.randint(0, classes, (13,), generator=_gen(5))
    t[::4] = ignore_index if ignore_index >= 0 else -1
    if ignore_index < 0:
        t[t == -1] = ignore_index
    _both(
        lambda x: ttx.cross_entropy(x, t, ignore_index=ignore_index),
        lambda x: F.cross_entropy(x, t, ignore_index=ignore_index),
        [logits],
    )
    x = logits.detach().clone().requires_grad_()
    ttx.cross_entropy(x, t, ignore_index=ignore_index).backward()
    assert torch.all(x.grad[t == ignore_index] == 0)


def test_embedding_scale_grad_by_freq_is_refused():
    module = ttx.Embedding(10, 4, scale_grad_by_freq=True)
    with pytest.raises(ValueError, match="scale_grad_by_freq"):
        module(torch.tensor([1, 1, 2]))


@pytest.mark.parametrize("p", [0.25, 0.7])
def test_dropout_module_in_training_mode(p):
    """nn.Dropout semantics: in training, each element kept with probability 1 - p and scaled
    by 1 / (1 - p), the gradient through the same mask; in eval mode the identity."""
    torch.manual_seed(stable_seed("dropout", p))
    x = _randn(64, 257, seed=4) + 3.0  # no zeros of its own
    module = ttx.Dropout(p).train()
    xg = x.clone().requires_grad_()
    y = module(xg)
    kept = y != 0
    torch.testing.assert_close(y[kept], x[kept] / (1 - p), rtol=2**-23, atol=0)
    frac, n = kept.double().mean().item(), kept.numel()
    sigma = (p * (1 - p) / n) ** 0.5
    assert abs(frac - (1 - p)) < 6 * sigma, frac  # 6 sigma: never by chance
    y.backward(torch.ones_like(y))
    torch.testing.assert_close(xg.grad, kept.float() / (1 - p), rtol=2**-23, atol=0)
    assert not torch.equal(module(x), y)  # a new mask per call
    assert torch.equal(module.eval()(x), x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_layer_norm_module_without_affine(dtype):
    x = _randn(5, 37, dtype=dtype, scale=2.0, seed=8)
    ours, theirs = (
        ttx.LayerNorm(37, elementwise_affine=False),
        torch.nn.LayerNorm(37, elementwise_affine=False),
    )
    assert ours.weight is None and ours.bias is None
    _both(ours, theirs, [x])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
def test_layer_norm_without_weight_and_bias(dtype):
    x = _randn(4, 3, 50, dtype=dtype, scale=2.0, seed=9)
    _both(lambda x: ttx.layer_norm(x, (50,)), lambda x: F.layer_norm(x, (50,)), [x])
    _both(lambda x: ttx.layer_norm(x, 50, eps=0.5), lambda x: F.layer_norm(x, (50,), eps=0.5), [x])


@pytest.mark.parametrize("dim", [0, 1, -2])
def test_log_softmax_and_softmax_over_another_dimension(dim):
    x = _randn(6, 19, 5, scale=2.0, seed=10)
    _both(lambda x: ttx.log_softmax(x, dim), lambda x: torch.log_softmax(x, dim), [x])
    _both(lambda x: ttx.softmax(x, dim), lambda x: torch.softmax(x, dim), [x])


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_attention_module_without_causal_mask_and_bias(causal):
    """Attention(causal=..., bias=False) against the same projections and SDPA in torch."""
    torch.manual_seed(11)
    module = ttx.Attention(24, 3, causal=causal, bias=False)
    assert module.qkv.bias is None and module.proj.bias is None
    x = _randn(2, 13, 24, seed=12)

    def reference(x):
        b, n, e = x.shape
        qkv = F.linear(x, module.qkv.weight.to(x.dtype)).view(b, n, 3, 3, e // 3)
        q, k, v = qkv.permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        return F.linear(y.transpose(1, 2).reshape(b, n, e), module.proj.weight.to(x.dtype))

    _both(module, reference, [x])


def _ab(m, k, n, dtype, seed):
    rng = np.random.default_rng(stable_seed("linalg", m, k, n, dtype, seed))
    a = rng.standard_normal((m, k)).astype(np.float32).astype(dtype)
    b = rng.standard_normal((k, n)).astype(np.float32).astype(dtype)
    return a, b


def test_linalg_precision_is_honoured():
    """f32 products: 'ieee' within f32's accumulation error of |a| @ |b|; 'tf32' rounds the
    inputs to TF32 (unit roundoff 2^-11 each), so its error exceeds ieee's bound somewhere and
    stays within 2 * 2^-11 * (|a| @ |b|) plus f32's; 'tf32x3' recovers close to f32."""
    a, b = _ab(33, 64, 19, np.float32, 0)
    want = a.astype(np.float64) @ b.astype(np.float64)
    mags = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
    k = a.shape[1]
    ieee_bound = k * UNIT_ROUNDOFF["f32"] * mags  # K sequential f32 roundings, at most
    got = {p: linalg.matmul(a, b, precision=p, interpret=True) for p in ("ieee", "tf32", "tf32x3")}
    assert all(g.dtype == np.float32 for g in got.values())
    for p, ulps in (("ieee", 0.0), ("tf32x3", 8.0)):
        assert np.all(np.abs(got[p] - want) <= ieee_bound + ulps * UNIT_ROUNDOFF["f32"] * mags), p
    err = np.abs(got["tf32"] - want)
    assert np.all(err <= (2 * 2.0**-11 + k * UNIT_ROUNDOFF["f32"]) * mags)
    assert np.any(err > ieee_bound), "precision='tf32' computed like 'ieee'"


@pytest.mark.parametrize("out_dtype", ["f32", "bf16", np.float16])
def test_linalg_out_dtype(out_dtype):
    """f16 inputs, C in out_dtype: f16 products are exact in f32 and accumulate there, so C is
    the f32 sum rounded once to out_dtype."""
    a, b = _ab(17, 40, 23, np.float16, 1)
    want = a.astype(np.float64) @ b.astype(np.float64)
    c = linalg.matmul(a, b, out_dtype=out_dtype, interpret=True)
    name = (
        {"f32": "f32", "bf16": "bf16"}.get(out_dtype, "f16")
        if isinstance(out_dtype, str)
        else "f16"
    )
    assert c.dtype.name == {"f32": "float32", "bf16": "bfloat16", "f16": "float16"}[name]
    mags = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
    # one rounding to out_dtype (2 u for margin on |C|) and f32's accumulation of 40 terms
    scale = np.abs(want) + 40 * UNIT_ROUNDOFF["f32"] / (2 * UNIT_ROUNDOFF[name]) * mags
    assert_close_elementwise(c, want, name, ulps=2.0, scale=scale, what=f"out_dtype={out_dtype}")
    c_bias = linalg.linear(a, b.T.copy(), None, out_dtype=out_dtype, interpret=True)
    assert c_bias.dtype == c.dtype


@pytest.mark.parametrize("cols", [32768, 16411])
def test_long_row_backward_reads_every_chunk(cols):
    """The looped kernels' backward over rows of whole chunks (32768: the last chunk full, so a
    loop that stops a chunk early drops a sixteenth of the row's dot product or more) and of a
    ragged end, element by element against float64."""
    x = _randn(2, cols, scale=2.0, seed=stable_seed("long", cols))
    _both(ttx.softmax, lambda x: torch.softmax(x, -1), [x])
    _both(ttx.log_softmax, lambda x: torch.log_softmax(x, -1), [x])
