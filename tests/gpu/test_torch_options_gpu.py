"""Options no other GPU test ran: teeny_tx.nn.attention with N_q != N_kv (and GQA) against
float64 by FlashAttention's criterion; teeny_tx.torch.attention (the fused op) with causal=False
and causal=True, always passed explicitly, forward and backward; the torch cross-entropy's
ignore_index; the dropout, relu and tanh-GELU torch ops; linalg.scaled_matmul(activation=).
Comparisons are element-wise against float64 (tests/test_torch.py's bound, through
tests/gpu/test_torch_gpu.py's _both)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("torch sees no CUDA device", allow_module_level=True)

import torch.nn.functional as F  # noqa: E402

import teeny_tx.torch as ttx  # noqa: E402
from teeny_tx import nn  # noqa: E402
from teeny_tx.library.attention import attention_reference  # noqa: E402

from ..conftest import UNIT_ROUNDOFF, assert_close_elementwise, stable_seed  # noqa: E402
from .test_torch_gpu import DEV, _both, _randn  # noqa: E402

TORCH = {"f16": torch.float16, "bf16": torch.bfloat16}


def _flash_criterion(got, want, peer, dtype: str, what: str) -> None:
    """FlashAttention's test criterion, element by element: |got - want| <= 2 * max|peer - want|
    (torch's SDPA in the input dtype: what attention's conditioning and the dtype cost anyone)
    + 2 unit roundoffs of |want| (the output's rounding) + 1e-6 (the atol)."""
    want = want.double()
    peer_err = float((peer.double() - want).abs().max())
    err = (got.double() - want).abs()
    bound = 2 * peer_err + 2 * UNIT_ROUNDOFF[dtype] * want.abs() + 1e-6
    worst = float((err / bound).max())
    assert worst <= 1.0, f"{what}: error {worst:.3g}x the bound (torch's error {peer_err:.3g})"


def _bnhd(shape, dtype, seed):
    return _randn(*shape, dtype=TORCH[dtype], seed=seed)


# (B, N_q, N_kv, H_q, H_kv, D): fewer and more keys than queries, ragged, grouped heads
NQ_NE_NKV = [
    (1, 17, 300, 2, 1, 64),
    (2, 300, 17, 4, 2, 64),
    (1, 1000, 129, 4, 4, 128),
    (1, 1, 4097, 8, 2, 128),
]


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("shape", NQ_NE_NKV, ids=lambda s: "b{}-nq{}-nk{}-h{}/{}-d{}".format(*s))
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_nq_ne_nkv_gqa_attention_against_float64(shape, causal, dtype):
    """o by FlashAttention's criterion (_flash_criterion) against float64; lse within f32's
    rounding of its terms."""
    b, nq, nk, hq, hkv, d = shape
    seed = stable_seed("nq_ne_nkv", shape, causal, dtype)
    q = _bnhd((b, nq, hq, d), dtype, seed)
    k, v = (_bnhd((b, nk, hkv, d), dtype, seed + i) for i in (1, 2))
    o, lse = nn.attention(q, k, v, causal=causal)
    host = [t.float().cpu().numpy() for t in (q, k, v)]
    want_o, want_lse = attention_reference(*host, causal)
    # torch in the input dtype: [B, H, N, D], key/value heads repeated for the groups
    qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))
    kt, vt = (t.repeat_interleave(hq // hkv, dim=1) for t in (kt, vt))
    peer = F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal).transpose(1, 2)
    _flash_criterion(o, torch.from_numpy(want_o).to(DEV), peer, dtype, "o")
    lse_err = np.abs(lse.cpu().numpy().astype(np.float64) - want_lse)
    assert np.all(lse_err <= 64 * UNIT_ROUNDOFF["f32"] * (1 + np.abs(want_lse)))


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("shape", [(2, 3, 129, 64), (1, 4, 1000, 128)], ids=str)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_torch_attention_on_the_gpu(shape, causal, dtype):
    """teeny_tx.torch.attention (q, k, v [B, H, N, D]; the fused op for f16/bf16, D 64 or
    128) with causal= given: o, dq, dk, dv against SDPA in float64 by FlashAttention's
    criterion (_flash_criterion; the peer: SDPA in the dtype)."""
    seed = stable_seed("torch_attention", shape, causal)
    name = {torch.float16: "f16", torch.bfloat16: "bf16"}[dtype]
    inputs = [_randn(*shape, dtype=dtype, seed=seed + i) for i in range(3)]
    g = _randn(*shape, dtype=dtype, seed=seed + 3)
    results = []
    for run, dt in (
        (ttx.attention, dtype),
        (F.scaled_dot_product_attention, torch.float64),
        (F.scaled_dot_product_attention, dtype),
    ):
        q, k, v = (t.detach().to(dt).requires_grad_() for t in inputs)
        o = run(q, k, v, causal=causal) if run is ttx.attention else run(q, k, v, is_causal=causal)
        o.backward(g.to(dt))
        results.append((o.detach(), q.grad, k.grad, v.grad))
    for what, got, want, peer in zip(("o", "dq", "dk", "dv"), *results, strict=True):
        _flash_criterion(got, want, peer, name, what)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("ignore_index", [3, -1])
def test_cross_entropy_ignore_index_on_the_gpu(ignore_index, dtype):
    logits = _randn(37, 1001, dtype=dtype, scale=2.0, seed=stable_seed("ce-gpu", ignore_index))
    t = torch.randint(
        0, 1001, (37,), device=DEV, generator=torch.Generator(device=DEV).manual_seed(2)
    )
    t[::4] = ignore_index
    _both(
        lambda x: ttx.cross_entropy(x, t, ignore_index=ignore_index),
        lambda x: F.cross_entropy(x, t, ignore_index=ignore_index),
        [logits],
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_relu_and_tanh_gelu_on_the_gpu(dtype):
    x = _randn(3, 1001, dtype=dtype, scale=3.0, seed=5)
    _both(ttx.relu, F.relu, [x])
    _both(lambda x: ttx.gelu(x, "tanh"), lambda x: F.gelu(x, approximate="tanh"), [x])


@pytest.mark.parametrize("p", [0.1, 0.5])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_dropout_on_the_gpu(p, dtype):
    """Kept elements scaled by 1 / (1 - p) (to the dtype's rounding), the kept
    fraction within 6 sigma of 1 - p, the gradient through the same mask, a seed reproducing
    its mask; eval mode the identity."""
    x = _randn(129, 1001, dtype=dtype, seed=6) + 4.0  # no zeros of its own
    seed = torch.tensor([stable_seed("dropout-gpu", p)], dtype=torch.int64, device=DEV)
    xs = x.clone().requires_grad_()
    y = ttx.dropout(xs, p, True, seed)
    kept = y != 0
    scale = 1 / (1 - float(np.float32(p)))  # p reaches the kernel as an f32
    # computed in f32 (x * 1 / (1 - p): two roundings), then rounded to the dtype: 3 u
    assert_close_elementwise(y[kept], x.double()[kept] * scale, y.dtype, ulps=3.0, what="kept")
    frac = kept.double().mean().item()
    assert abs(frac - (1 - p)) < 6 * (p * (1 - p) / kept.numel()) ** 0.5, frac
    y.backward(torch.ones_like(y))
    assert torch.equal(xs.grad != 0, kept)
    assert torch.equal(ttx.dropout(x, p, True, seed) != 0, kept)  # the same seed, mask
    assert torch.equal(ttx.Dropout(p).eval()(x), x)


# Hopper's fp8 wgmma accumulates with about 14 mantissa bits (measured by DeepGEMM and the
# DeepSeek-V3 report; tests/gpu/test_hopper_gpu.py's fp8 check holds f32 output to 2e-3)
FP8_ACCUMULATOR_ROUNDOFF = 2.0**-14


@pytest.mark.parametrize("activation", ["gelu", "gelu_tanh", "relu", "silu"])
def test_scaled_matmul_activation(activation):
    """linalg.scaled_matmul(activation=) on fp8 (sm_90): act(scale_a * scale_b * a @ b + bias)
    against float64 of the dequantised values, element by element: fp8 products are exact, but
    wgmma's fp8 accumulator keeps about 14 mantissa bits (FP8_ACCUMULATOR_ROUNDOFF; as
    tests/gpu/test_hopper_gpu.py's fp8 check says): each of the K / 32 wgmma steps rounds the
    running sum at 2^-14 of |a| @ |b| * scales, times the activation's slope <= 1.13; then
    one rounding to bf16 (2 unit roundoffs of |C|)."""
    from teeny_tx.library import linalg

    if torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("fp8 wgmma needs sm_90")
    torch.manual_seed(stable_seed("fp8", activation))
    m, n, k = 257, 136, 256
    dt = torch.float8_e4m3fn
    a = (torch.randn(m, k, device=DEV) * 2).to(dt)
    b = (torch.randn(n, k, device=DEV) * 2).to(dt).t()
    sa, sb = torch.tensor([0.5], device=DEV), torch.tensor([0.25], device=DEV)
    bias = torch.randn(n, device=DEV, dtype=torch.bfloat16)
    c = linalg.scaled_matmul(a, b, sa, sb, bias=bias, activation=activation)
    a64, b64 = a.double(), b.double()
    pre = 0.125 * (a64 @ b64) + bias.double()
    act = {
        "gelu": F.gelu,
        "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"),
        "relu": F.relu,
        "silu": F.silu,
    }[activation]
    want = act(pre)
    mags = 0.125 * (a64.abs() @ b64.abs()) + bias.double().abs()
    steps = k // 32  # one wgmma m64nNk32 instruction per 32 of K
    bound = 2 * UNIT_ROUNDOFF["bf16"] * want.abs() + 1.13 * steps * FP8_ACCUMULATOR_ROUNDOFF * mags
    err = (c.double() - want).abs()
    bad = err > bound + 1e-30
    worst = int((err - bound).argmax())
    assert c.dtype == torch.bfloat16 and not bool(bad.any()), (
        f"{int(bad.sum())} of {bad.numel()} out of bounds; worst at {divmod(worst, n)}: "
        f"{float(c.double().flatten()[worst])} vs {float(want.flatten()[worst])} "
        f"(pre-activation {float(pre.flatten()[worst])}, bound {float(bound.flatten()[worst])})"
    )
    plain = linalg.scaled_matmul(a, b, sa, sb, bias=bias)
    assert not torch.equal(plain, c)  # the activation is applied, not ignored


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_module_and_functional_options_on_the_gpu(dtype):
    """LayerNorm(elementwise_affine=False), layer_norm without weight and bias, log_softmax
    and softmax over dim 0, Attention(causal=False, bias=False): forward and backward."""
    x = _randn(6, 33, 40, dtype=dtype, scale=2.0, seed=21)
    ln = ttx.LayerNorm(40, elementwise_affine=False)
    _both(ln, torch.nn.LayerNorm(40, elementwise_affine=False), [x])
    _both(lambda x: ttx.layer_norm(x, (40,)), lambda x: F.layer_norm(x, (40,)), [x])
    _both(lambda x: ttx.log_softmax(x, 0), lambda x: torch.log_softmax(x, 0), [x])
    _both(lambda x: ttx.softmax(x, 1), lambda x: torch.softmax(x, 1), [x])
    torch.manual_seed(22)
    module = ttx.Attention(128, 2, causal=False, bias=False).to(DEV, dtype)

    def reference(x):
        b, n, e = x.shape
        qkv = F.linear(x, module.qkv.weight.to(x.dtype)).view(b, n, 3, 2, e // 2)
        q, k, v = qkv.permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=False)
        return F.linear(y.transpose(1, 2).reshape(b, n, e), module.proj.weight.to(x.dtype))

    _both(module, reference, [_randn(2, 65, 128, dtype=dtype, seed=23)])


def test_linalg_precision_and_out_dtype_on_the_gpu():
    """precision='tf32' rounds f32 inputs (its error exceeds IEEE f32's bound somewhere and
    stays within 2 * 2^-10 * |a| @ |b|: TF32 by truncation on Hopper); 'ieee' within K * 2^-24
    of it; f16 inputs with out_dtype f32 are the f32 sum of exact products."""
    from teeny_tx.library import linalg

    a, b = _randn(257, 512, seed=31), _randn(512, 129, seed=32)
    want = a.double() @ b.double()
    mags = a.double().abs() @ b.double().abs()
    ieee_bound = 512 * UNIT_ROUNDOFF["f32"] * mags
    ieee = linalg.matmul(a, b, precision="ieee")
    tf32 = linalg.matmul(a, b, precision="tf32")
    assert bool(((ieee.double() - want).abs() <= ieee_bound).all())
    err = (tf32.double() - want).abs()
    assert bool((err <= 2 * 2.0**-10 * mags + ieee_bound).all())
    assert bool((err > ieee_bound).any()), "precision='tf32' computed like 'ieee'"
    h, g = a.half(), b.half()
    c = linalg.matmul(h, g, out_dtype=torch.float32)
    assert c.dtype == torch.float32
    want_h = h.double() @ g.double()
    bound = 512 * UNIT_ROUNDOFF["f32"] * (h.double().abs() @ g.double().abs())
    bound += 2 * UNIT_ROUNDOFF["f32"] * want_h.abs()
    assert bool(((c.double() - want_h).abs() <= bound).all())
