"""teeny_tx.nn.attention and attention_backward on the NumPy interpreter against float64
references (odd sequence lengths, both head dims, causal and not, grouped-query attention,
strided views); argument checks; the Triton tutorial's form of the forward; and the kernels
of kernels/attention.c through NVRTC for sm_90 and sm_90a at the launches the wrapper makes."""

from __future__ import annotations

import numpy as np
import pytest

import teeny_tx as tx
from teeny_tx import nn
from teeny_tx.dtypes import DTYPES
from teeny_tx.kernel import HEADERS
from teeny_tx.library import attention as tattn
from teeny_tx.library import module
from teeny_tx.library.attention import attention_backward_reference, attention_reference
from teeny_tx.runtime import nvrtc
from tests.cases import GOLDEN
from tests.conftest import target_arch

from .conftest import stable_seed

# (relative, absolute) error allowed against float64, by dtype: P and dS are rounded to the
# input dtype before their products, as in every FlashAttention
TOL = {"f16": 4e-3, "bf16": 3e-2}


def _inputs(rng, b, n_q, n_kv, h_q, h_kv, d, dtype):
    np_dtype = DTYPES[dtype].np
    q = rng.standard_normal((b, n_q, h_q, d)).astype(np_dtype)
    k = rng.standard_normal((b, n_kv, h_kv, d)).astype(np_dtype)
    v = rng.standard_normal((b, n_kv, h_kv, d)).astype(np_dtype)
    return q, k, v


def _close(name, got, want, dtype):
    got = np.asarray(got, np.float64)
    scale = max(1.0, float(np.abs(want).max()))
    err = float(np.abs(got - want).max()) / scale
    assert err <= TOL[dtype], f"{name}: max error {err:.3g} (relative to {scale:.3g})"
    assert np.isfinite(got).all(), f"{name} has non-finite values"


CASES = [
    # (B, N_q, N_kv, H_q, H_kv, D)
    (1, 1, 1, 1, 1, 64),
    (2, 17, 17, 2, 2, 64),
    (1, 128, 128, 2, 1, 128),
    (1, 300, 300, 4, 2, 64),
    (1, 300, 300, 1, 1, 128),
    (1, 17, 128, 2, 1, 128),  # more keys than queries
    (1, 128, 17, 2, 2, 64),  # more queries than keys
]


def _id(c):
    return "b{}-nq{}-nk{}-h{}/{}-d{}".format(*c)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("shape", CASES, ids=_id)
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_forward_and_backward(shape, causal, dtype):
    b, n_q, n_kv, h_q, h_kv, d = shape
    rng = np.random.default_rng(stable_seed(shape, causal, dtype))
    q, k, v = _inputs(rng, b, n_q, n_kv, h_q, h_kv, d, dtype)
    o, lse = nn.attention(q, k, v, causal, interpret=True)
    want_o, want_lse = attention_reference(q, k, v, causal)
    assert o.shape == q.shape and o.dtype == q.dtype
    assert lse.shape == (b, h_q, n_q) and lse.dtype == np.float32
    _close("o", o, want_o, dtype)
    np.testing.assert_allclose(lse, want_lse, rtol=1e-5, atol=1e-5)
    do = rng.standard_normal(o.shape).astype(q.dtype)
    grads = nn.attention_backward(do, q, k, v, o, lse, causal, interpret=True)
    for name, got, want, like in zip(
        ("dq", "dk", "dv"),
        grads,
        attention_backward_reference(do, q, k, v, causal),
        (q, k, v),
        strict=True,
    ):
        assert got.shape == like.shape and got.dtype == like.dtype
        _close(name, got, want, dtype)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("shape", [CASES[1], CASES[3], CASES[5], CASES[6]], ids=_id)
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_backward_with_atomic_dq(monkeypatch, shape, causal, dtype):
    """dQ added by the dK/dV kernel with f32 atomics (ATOMIC_DQ), then cast: the same gradients
    (GQA: every query head of a group adds into its own rows; ragged and causal blocks)."""
    monkeypatch.setattr(tattn, "ATOMIC_DQ", {64: True, 128: True})
    b, n_q, n_kv, h_q, h_kv, d = shape
    rng = np.random.default_rng(stable_seed(shape, causal, dtype, "atomic"))
    q, k, v = _inputs(rng, b, n_q, n_kv, h_q, h_kv, d, dtype)
    o, lse = nn.attention(q, k, v, causal, interpret=True)
    do = rng.standard_normal(o.shape).astype(q.dtype)[:, :, ::-1]  # a strided dO as well
    grads = nn.attention_backward(do, q, k, v, o, lse, causal, interpret=True)
    want = attention_backward_reference(do, q, k, v, causal)
    for name, got, ref in zip(("dq", "dk", "dv"), grads, want, strict=True):
        _close(name, got, ref, dtype)


def test_scale_and_strided_views():
    """[B, H, N, D] arrays passed as transpose(1, 2) views, q a slice of a fused QKV array;
    a softmax scale of 0.3."""
    rng = np.random.default_rng(7)
    b, n, h, d = 2, 33, 2, 64
    qkv = rng.standard_normal((b, n, 3, h, d)).astype(np.float16)
    q = qkv[:, :, 0]  # strides (n*3*h*d, 3*h*d, d, 1)
    k = np.ascontiguousarray(rng.standard_normal((b, h, n, d)).astype(np.float16))
    v = np.ascontiguousarray(rng.standard_normal((b, h, n, d)).astype(np.float16))
    kt, vt = k.transpose(0, 2, 1, 3), v.transpose(0, 2, 1, 3)
    o, lse = nn.attention(q, kt, vt, causal=True, scale=0.3, interpret=True)
    want_o, want_lse = attention_reference(q, kt, vt, True, 0.3)
    _close("o", o, want_o, "f16")
    np.testing.assert_allclose(lse, want_lse, rtol=1e-5, atol=1e-5)
    do = rng.standard_normal(o.shape).astype(np.float16)[:, :, ::-1]  # negative head stride
    grads = nn.attention_backward(do, q, kt, vt, o, lse, True, 0.3, interpret=True)
    for name, got, want in zip(
        ("dq", "dk", "dv"),
        grads,
        attention_backward_reference(do, q, kt, vt, True, 0.3),
        strict=True,
    ):
        _close(name, got, want, "f16")


def test_column_stride():
    """A head dimension that is not contiguous (stride 2) is read in place too."""
    rng = np.random.default_rng(3)
    q, k, v = (x[..., ::2] for x in _inputs(rng, 1, 20, 20, 2, 2, 128, "f16"))
    o, _ = nn.attention(q, k, v, interpret=True)
    _close("o", o, attention_reference(q, k, v)[0], "f16")


def _error(fn, *args, **kw) -> str:
    with pytest.raises(tx.LaunchError) as info:
        fn(*args, interpret=True, **kw)
    return str(info.value)


def test_argument_checks():
    rng = np.random.default_rng(0)
    q, k, v = _inputs(rng, 1, 16, 16, 4, 2, 64, "f16")
    assert "4-D" in _error(nn.attention, q[0], k, v)
    assert "head_dim 24 is not supported; this takes 32 to 256" in _error(
        nn.attention, q[..., :24], k[..., :24], v[..., :24]
    )
    assert "head_dim 64 but k and v have 128" in _error(
        nn.attention, q, np.concatenate([k, k], -1), np.concatenate([v, v], -1)
    )
    assert "must divide" in _error(nn.attention, q[:, :, :3], k, v)
    assert "dtype float32" in _error(nn.attention, q.astype(np.float32), k, v)
    assert "k is bf16 but q is f16" in _error(nn.attention, q, k.astype(DTYPES["bf16"].np), v)
    assert "k has shape" in _error(nn.attention, q, k, v[:, :8])
    assert "batch" in _error(nn.attention, q, np.concatenate([k, k]), np.concatenate([v, v]))
    assert "no rows" in _error(nn.attention, q, k[:, :0], v[:, :0])
    assert "finite" in _error(nn.attention, q, k, v, scale=float("nan"))
    o, lse = nn.attention(q, k, v, interpret=True)
    assert "lse must have shape" in _error(nn.attention_backward, o, q, k, v, o, lse[:, :2])
    assert "lse has dtype" in _error(nn.attention_backward, o, q, k, v, o, lse.astype(np.float64))
    assert "do has shape" in _error(nn.attention_backward, o[:, :8], q, k, v, o, lse)
    q, k, v = _inputs(rng, 1, 16, 16, 2, 1, 264, "f16")
    assert "head_dim 264 is not supported" in _error(nn.attention, q, k, v)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize(
    ("shape", "dtype"),
    [
        ((1, 33, 70, 2, 1, 40), "f16"),
        ((2, 17, 17, 2, 2, 59), "bf16"),  # not a multiple of 8: element-wise loads
        ((1, 70, 33, 3, 1, 96), "f16"),
        ((1, 21, 40, 2, 2, 111), "bf16"),
        ((1, 40, 21, 2, 1, 160), "f16"),
        ((1, 17, 50, 2, 2, 256), "bf16"),  # 256: the backward on its own tiles
    ],
    ids=str,
)
def test_head_dims_forward_and_backward(shape, dtype, causal):
    """Head dims other than 64 and 128 (padded to the next tile in the loads, and 256),
    forward and backward, against float64; a column view (q, k, v sliced out of wider rows,
    their strides not those of the head dim) as well."""
    b, n_q, n_kv, h_q, h_kv, d = shape
    rng = np.random.default_rng(stable_seed(shape, causal, dtype, "head dims"))
    q, k, v = _inputs(rng, b, n_q, n_kv, h_q, h_kv, d + 8, dtype)
    q, k, v = q[..., 8:], k[..., :d], v[..., 4 : d + 4]
    o, lse = nn.attention(q, k, v, causal, interpret=True)
    want_o, want_lse = attention_reference(q, k, v, causal)
    assert o.shape == q.shape
    _close("o", o, want_o, dtype)
    np.testing.assert_allclose(lse, want_lse, rtol=1e-5, atol=1e-5)
    do = rng.standard_normal(o.shape).astype(q.dtype)
    grads = nn.attention_backward(do, q, k, v, o, lse, causal, interpret=True)
    want = attention_backward_reference(do, q, k, v, causal)
    for name, got, ref, like in zip(("dq", "dk", "dv"), grads, want, (q, k, v), strict=True):
        assert got.shape == like.shape
        _close(name, got, ref, dtype)


def test_padded_head_dims_keep_their_promise(monkeypatch):
    """A padded head dim that is a multiple of 8 is read in 16-byte groups (the kernels'
    promise): an array that could break it (an address off 16 bytes, a stride off a multiple of
    8 elements, a column stride other than 1) is passed as a contiguous copy, the others as
    they are; other head dims, and the interpreter, pass every array as it is."""
    buffer = np.random.default_rng(0).standard_normal(4096).astype(np.float16)
    first = (-buffer.ctypes.data % 16) // 2  # the first element at a 16-byte boundary

    def view(offset, shape, strides):  # in elements, from that boundary
        a = buffer[first + offset :]
        return np.lib.stride_tricks.as_strided(a, shape, tuple(2 * x for x in strides))

    # host arrays standing in for device ones: their addresses are the kernels'
    monkeypatch.setattr(tattn, "device_pointer", lambda a: (a.ctypes.data, "f16"))
    shape = (2, 6, 2, 40)
    fine = [
        view(0, shape, (6 * 2 * 40, 80, 40, 1)),  # contiguous
        view(8, shape, (6 * 2 * 104, 208, 104, 1)),  # rows of 104, 16 bytes in
        view(0, shape, (6 * 2 * 40, 40, 6 * 40, 1)),  # a [B, H, N, D] transpose
        view(0, (1, 6, 2, 40), (7, 80, 40, 1)),  # an odd stride of a dimension of 1
    ]
    broken = [
        view(4, shape, (6 * 2 * 40, 80, 40, 1)),  # 8 bytes in
        view(0, shape, (6 * 2 * 44, 88, 44, 1)),  # rows of 44
        view(0, shape, (6 * 2 * 80, 160, 80, 2)),  # column stride 2
    ]
    kept = tattn._kept(False, *fine, *broken)
    assert all(got is a for got, a in zip(kept[: len(fine)], fine, strict=True))
    for got, a in zip(kept[len(fine) :], broken, strict=True):
        assert got is not a and got.flags.c_contiguous and np.array_equal(got, a)
    assert tattn._kept(True, broken[0])[0] is broken[0]  # the interpreter reads anything
    for d in (64, 59):  # 64: its own tile; 59: element-wise loads; neither promises
        a = view(4, (1, 6, 2, d), (12 * d, 2 * d, d, 1))
        assert tattn._kept(False, a)[0] is a


@pytest.mark.parametrize("overlap", [False, True], ids=["fwd", "overlap-flag"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("shape", [(1, 1, 1, 1, 1), (2, 70, 70, 2, 1), (1, 45, 100, 2, 2)])
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_forward_head_dim_256(monkeypatch, shape, causal, dtype, overlap):
    """D = 256 runs attention_fwd (also with OVERLAP: the overlapped forward takes 64 and
    128 only)."""
    monkeypatch.setattr(tattn, "OVERLAP", overlap)
    b, n_q, n_kv, h_q, h_kv = shape
    rng = np.random.default_rng(stable_seed(shape, causal, dtype))
    q, k, v = _inputs(rng, b, n_q, n_kv, h_q, h_kv, 256, dtype)
    o, lse = nn.attention(q, k, v, causal, interpret=True)
    want_o, want_lse = attention_reference(q, k, v, causal)
    _close("o", o, want_o, dtype)
    np.testing.assert_allclose(lse, want_lse, rtol=1e-5, atol=1e-5)


def test_empty_batch():
    rng = np.random.default_rng(0)
    q, k, v = _inputs(rng, 0, 16, 16, 2, 2, 64, "f16")
    o, lse = nn.attention(q, k, v, interpret=True)
    assert o.shape == q.shape and lse.shape == (0, 2, 16)


# The forward as Triton's fused-attention tutorial writes it (K read transposed as [D, BN]
# through loop-carried pointers, no masks, the causal diagonal as a second loop): the form the
# issue reported; at D = 128 its pointer tiles change layout, through shared memory
TUTORIAL = """
kernel attn_tut(f16 *out, f32 *M, const f16 *Q, const f16 *K, const f16 *V, f32 sm_scale,
                i32 stride_z, i32 stride_h, i32 stride_m, i32 N_CTX, i32 H,
                const i32 BLOCK_M, const i32 BLOCK_N, const i32 HEAD_DIM, const i32 STAGE)
{
    i32 start_m = program_id(0);
    i32 off_hz = program_id(1);
    i32 offset = (off_hz / H) * stride_z + (off_hz % H) * stride_h;
    tile offs_m = start_m * BLOCK_M + arange(0, BLOCK_M);
    tile offs_n = arange(0, BLOCK_N);
    tile offs_d = arange(0, HEAD_DIM);
    f32 m_i[BLOCK_M] = -INF;
    f32 l_i[BLOCK_M] = 1.0f;
    f32 acc[BLOCK_M][HEAD_DIM] = 0;
    f32 qk_scale = sm_scale * 1.44269504f;
    tile q = load(Q + offset + expand_dims(offs_m, 1) * stride_m + expand_dims(offs_d, 0));
    tile pk = K + offset + expand_dims(offs_d, 1) + expand_dims(offs_n, 0) * stride_m;
    tile pv = V + offset + expand_dims(offs_n, 1) * stride_m + expand_dims(offs_d, 0);
    i32 hi = STAGE == 3 ? start_m * BLOCK_M : N_CTX;
    for (i32 start_n = 0; start_n < hi; start_n += BLOCK_N) {
        tile qk = dot(q, load(pk));
        tile m_ij = maximum(m_i, max(qk, 1) * qk_scale);
        tile p = exp2(qk * qk_scale - expand_dims(m_ij, 1));
        tile alpha = exp2(m_i - m_ij);
        l_i = l_i * alpha + sum(p, 1);
        acc = dot((f16)p, load(pv), acc * expand_dims(alpha, 1));
        m_i = m_ij;
        pk += BLOCK_N * stride_m;
        pv += BLOCK_N * stride_m;
    }
    if (STAGE == 3) {
        for (i32 start_n = hi; start_n < hi + BLOCK_M; start_n += BLOCK_N) {
            tile mask = expand_dims(offs_m, 1) >= start_n + expand_dims(offs_n, 0);
            tile qk = dot(q, load(pk)) * qk_scale + where(mask, 0.0f, -1.0e6f);
            tile m_ij = maximum(m_i, max(qk, 1));
            tile p = exp2(qk - expand_dims(m_ij, 1));
            tile alpha = exp2(m_i - m_ij);
            l_i = l_i * alpha + sum(p, 1);
            acc = dot((f16)p, load(pv), acc * expand_dims(alpha, 1));
            m_i = m_ij;
            pk += BLOCK_N * stride_m;
            pv += BLOCK_N * stride_m;
        }
    }
    store(M + off_hz * N_CTX + offs_m, m_i + log2(l_i));
    store(out + offset + expand_dims(offs_m, 1) * stride_m + expand_dims(offs_d, 0),
          (f16)(acc / expand_dims(l_i, 1)));
}
"""


def _tutorial_args(n, h, d):
    return (n * h * d, d, h * d, n, h)


@pytest.mark.parametrize("stage", [1, 3], ids=["full", "causal"])
def test_tutorial_form_on_interpreter(stage):
    k = tx.compile(TUTORIAL, name="kernels/attn_tut.c").attn_tut
    rng = np.random.default_rng(stage)
    b, n, h, d = 1, 64, 2, 64
    q, kk, v = _inputs(rng, b, n, n, h, h, d, "f16")
    out, m = np.zeros_like(q), np.zeros((b, h, n), np.float32)
    k.interpret[(n // 32, b * h)](
        out,
        m,
        q,
        kk,
        v,
        0.125,
        *_tutorial_args(n, h, d),
        BLOCK_M=32,
        BLOCK_N=16,
        HEAD_DIM=d,
        STAGE=stage,
    )
    want_o, want_lse = attention_reference(q, kk, v, stage == 3, 0.125)
    _close("o", out, want_o, "f16")
    np.testing.assert_allclose(m, want_lse / np.log(2), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("arch", ["sm_90", "sm_90a"])
@pytest.mark.parametrize("d", [64, 128])
def test_tutorial_form_generates_cuda(arch, d):
    """Both targets lower it (the H200 once stopped here before launch); sm_90a with wgmma."""
    k = tx.compile(TUTORIAL, name="kernels/attn_tut.c").attn_tut
    with target_arch(arch):
        spec = k.specialize(
            "f16",
            "f32",
            "f16",
            "f16",
            "f16",
            0.125,
            *_tutorial_args(4096, 32, d),
            BLOCK_M=128,
            BLOCK_N=64,
            HEAD_DIM=d,
            STAGE=3,
            num_warps=8,
            num_stages=3,
        )
        source = spec.cuda_source
    assert ("tx::wgmma<" in source) == (arch == "sm_90a")
    assert "tx::relayout" in source or d == 64  # at D = 128 the K pointers change layout


# NVRTC: the wrapper's fixed launches, both targets, the variants the goldens do not cover
# (the goldens compile f16 D=128 forward, bf16 D=64 causal forward and each backward kernel)
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("shape", CASES, ids=_id)
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_overlapped_forward(monkeypatch, shape, causal, dtype):
    """attention_fwd_overlap (the wrapper's OVERLAP flag): key block 0 before the loop, block
    j + 1's scores with block j's product, the last product after it; every N of CASES, GQA."""
    monkeypatch.setattr(tattn, "OVERLAP", True)
    b, n_q, n_kv, h_q, h_kv, d = shape
    rng = np.random.default_rng(stable_seed(shape, causal, dtype, 1))
    q, k, v = _inputs(rng, b, n_q, n_kv, h_q, h_kv, d, dtype)
    o, lse = nn.attention(q, k, v, causal, interpret=True)
    want_o, want_lse = attention_reference(q, k, v, causal)
    assert o.shape == q.shape and o.dtype == q.dtype
    _close("o", o, want_o, dtype)
    np.testing.assert_allclose(lse, want_lse, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("arch", ["sm_90", "sm_90a"])
@pytest.mark.parametrize(
    ("kernel", "dtype", "d", "causal"),
    [
        ("attention_fwd", "bf16", 128, 1),
        ("attention_fwd", "f16", 256, 1),
        ("attention_fwd_overlap", "f16", 64, 0),
        ("attention_fwd_overlap", "bf16", 128, 1),
        ("attention_bwd_dkdv", "bf16", 64, 0),
        ("attention_bwd_dq", "f16", 64, 1),
        ("attention_bwd_dkdv+atomic", "bf16", 128, 1),
        ("attention_bwd_dkdv+atomic", "f16", 64, 0),
        ("attention_bwd_dq_cast", "f16", 64, 0),
        ("attention_fwd+ws", "bf16", 64, 1),  # warp-specialised on sm_90a (refused on sm_90)
        ("attention_bwd_dq+ws", "f16", 128, 0),
    ],
)
def test_nvrtc_compiles(kernel, dtype, d, causal, arch):
    from tests.cases import _attention_bwd_args, _attention_fwd_args

    kernel, _, variant = kernel.partition("+")
    config = {
        "attention_fwd": tattn.FORWARD,
        "attention_fwd_overlap": tattn.FORWARD_OVERLAP,
        "attention_bwd_dkdv": tattn.BACKWARD_DKDV_ATOMIC if variant else tattn.BACKWARD_DKDV,
        "attention_bwd_dq": tattn.BACKWARD_DQ,
        "attention_bwd_dq_cast": {d: tattn.AttentionConfig(tattn.PREPROCESS_BM, 0, 4)},
    }[kernel][d]
    args = (
        _attention_fwd_args(dtype, d, overlap=kernel == "attention_fwd_overlap")
        if kernel.startswith("attention_fwd")
        else _attention_bwd_args(kernel, dtype, d)
    )
    flags = {"D": d, "BM": config.bm} | ({} if kernel == "attention_fwd_overlap" else {"DH": d})
    if kernel == "attention_fwd_overlap":
        flags |= {"CAUSAL": causal, "BF16": int(dtype == "bf16"), "BN": config.bn}
        flags["WARP_SPECIALIZE"] = 0
    elif kernel != "attention_bwd_dq_cast":
        flags |= {"BAND": causal, "SOFTCAP": 0, "ALIBI": 0, "BN": config.bn}
        flags["BF16"] = int(dtype == "bf16")
    if kernel == "attention_bwd_dkdv":
        flags["ATOMIC_DQ"] = int(variant == "atomic")
    if kernel in ("attention_fwd", "attention_bwd_dq"):
        flags["WARP_SPECIALIZE"] = int(variant == "ws")
    # the warp-specialised form takes TMA pipelines: the wrapper's TMA module
    k = getattr(module("attention.c"), kernel)
    k = k.tma if variant == "ws" else k
    with target_arch(arch):
        # the overlapped forward with its own ring depth (the others' fit at the default 2)
        stages = config.num_stages if kernel == "attention_fwd_overlap" else 2
        spec = k.specialize(*args, num_warps=config.num_warps, num_stages=stages, **flags)
        result = nvrtc.compile_with_log(spec.cuda_source, name=kernel, arch=arch, headers=HEADERS)
    assert result.cubin[:4] == b"\x7fELF"
    if kernel == "attention_fwd_overlap" and arch == "sm_90a":  # mma.sync (sm_90) spills
        assert nvrtc.spilled_bytes(result.log) == 0, result.log
    if variant == "ws":
        assert spec.kernel.producer_warps == (4 if arch == "sm_90a" else 0)


# NVRTC: the head dims other than the tiles (padded in the loads; 59, 111 and 201 not multiples
# of 8) and 256's backward, at the wrapper's own fixed configs and forms (the TMA module, as
# GPU launches take it), both targets
HEAD_DIMS = [40, 59, 80, 96, 111, 160, 200, 201, 256]
HEAD_DIM_KERNELS = [
    "attention_fwd",
    "attention_bwd_preprocess",
    "attention_bwd_dkdv",
    "attention_bwd_dq",
    "attention_bwd_dq_cast",
]


def _head_dim_spec(kernel, d, dtype, arch, n_kv=4096):
    from tests.cases import _attention_bwd_args, _attention_fwd_args

    config = {
        "attention_fwd": tattn._forward_config(d, True, n_kv, False),
        "attention_bwd_dkdv": tattn._dkdv_config(d, False),
        "attention_bwd_dq": tattn._dq_config(d),
    }.get(kernel, tattn.AttentionConfig(tattn.PREPROCESS_BM, 0, 4))
    args = (
        _attention_fwd_args(dtype, d)
        if kernel == "attention_fwd"
        else _attention_bwd_args(kernel, dtype, d)
    )
    flags = {"D": tattn.tile_of(d), "DH": d, "BM": config.bm}
    if kernel in ("attention_fwd", "attention_bwd_dkdv", "attention_bwd_dq"):
        flags |= {"BAND": 1, "SOFTCAP": 0, "ALIBI": 0, "BN": config.bn}
        flags |= {"BF16": int(dtype == "bf16")}
        flags |= {"ATOMIC_DQ": 0} if kernel == "attention_bwd_dkdv" else {"WARP_SPECIALIZE": 0}
    k = getattr(module("attention.c"), kernel)
    with target_arch(arch):
        spec = (k.tma if "BN" in flags else k).specialize(
            *args,
            num_warps=config.num_warps,
            num_stages=config.num_stages,
            strided=True,
            **flags,
        )
        return spec, nvrtc.compile_with_log(
            spec.cuda_source, name=kernel, arch=arch, headers=HEADERS
        )


@pytest.mark.parametrize(
    ("d", "arch"),
    [(d, "sm_90a") for d in HEAD_DIMS] + [(d, "sm_90") for d in (40, 111, 256)],
    ids=str,
)
def test_nvrtc_compiles_head_dims(d, arch):
    """Each kernel of the backward and the forward builds: a padded head dim once failed in
    NVRTC (a zero-sized register array: the column index shared by the K loads and O's store
    took a slice of the accumulator's layout). A multiple of 8 keeps its pipelined 16-byte
    copies (the wrapper's alignment promise); 256's backward tiles hold their accumulators in
    registers."""
    dtype = "bf16" if d % 3 == 0 else "f16"
    for kernel, n_kv in [(k, 4096) for k in HEAD_DIM_KERNELS] + [("attention_fwd", 512)]:
        spec, result = _head_dim_spec(kernel, d, dtype, arch, n_kv)  # (512: short causal)
        assert result.cubin[:4] == b"\x7fELF", kernel
        source = spec.cuda_source
        if kernel in ("attention_fwd", "attention_bwd_dkdv", "attention_bwd_dq"):
            pipelined = "tx::cp_async16(" in source or "tma_load" in source
            assert pipelined == (d % 8 == 0), kernel
        forward = kernel == "attention_fwd"
        if arch == "sm_90a" and d in ((40, 96, 111) if forward else (40, 256)):
            assert nvrtc.spilled_bytes(result.log) == 0, (kernel, result.log)


# Packed sequences (varlen): the library's arrays-level functions on the interpreter, and the
# kernels through NVRTC at the wrapper's configs
def _varlen_reference(q, k, v, do, cu_q, cu_k, causal, bottom_right):
    """(o, lse [H_q, total_q], dq, dk, dv) in float64, sequence by sequence, the softmax's
    Jacobian written out as in attention_backward_reference (a row that sees no key: 0, lse
    +inf, no gradient)."""
    total_q, h_q, d = q.shape
    group = h_q // k.shape[1]
    o, dq = np.zeros(q.shape), np.zeros(q.shape)
    dk, dv = np.zeros(k.shape), np.zeros(k.shape)
    lse = np.full((h_q, total_q), np.inf)
    for b in range(len(cu_q) - 1):
        qs, ks = slice(cu_q[b], cu_q[b + 1]), slice(cu_k[b], cu_k[b + 1])
        n_q, n_kv = qs.stop - qs.start, ks.stop - ks.start
        qf, dof = (x[qs].astype(np.float64).transpose(1, 0, 2) for x in (q, do))
        kf, vf = (np.repeat(x[ks].astype(np.float64).transpose(1, 0, 2), group, 0) for x in (k, v))
        s = qf @ kf.transpose(0, 2, 1) / np.sqrt(d)
        if causal:
            diag = n_kv - n_q if bottom_right else 0
            s = np.where(np.arange(n_kv)[None] <= np.arange(n_q)[:, None] + diag, s, -np.inf)
        m = s.max(-1, keepdims=True, initial=-np.inf)
        m = np.where(np.isfinite(m), m, 0.0)
        e = np.exp(s - m)
        total = e.sum(-1, keepdims=True)
        p = e / np.where(total > 0, total, 1.0)
        o[qs] = (p @ vf).transpose(1, 0, 2)
        lse[:, qs] = np.where(total > 0, m + np.log(np.where(total > 0, total, 1.0)), np.inf)[
            ..., 0
        ]
        dp = dof @ vf.transpose(0, 2, 1)
        ds = p * (dp - (dp * p).sum(-1, keepdims=True))
        dq[qs] = (ds @ kf / np.sqrt(d)).transpose(1, 0, 2)
        for g, out in (
            (ds.transpose(0, 2, 1) @ qf / np.sqrt(d), dk),
            (p.transpose(0, 2, 1) @ dof, dv),
        ):
            out[ks] = g.reshape(k.shape[1], group, n_kv, d).sum(1).transpose(1, 0, 2)
    return o, lse, dq, dk, dv


@pytest.mark.parametrize("bottom_right", [True, False], ids=["bottom-right", "top-left"])
@pytest.mark.parametrize(
    ("lengths_q", "lengths_k", "d"),
    [([3, 0, 41, 1], [30, 2, 17, 1], 64), ([20, 9], [9, 20], 96)],
    ids=str,
)
def test_varlen_forward_and_backward(lengths_q, lengths_k, d, bottom_right):
    """nn-level attention_varlen (NumPy, interpreter) against float64 sequence by sequence:
    o, lse [H_q, total_q] (+inf where a row sees no key) and the gradients (0 for keys no
    query sees); the causal band at each sequence's bottom right, or (bottom_right=False) its
    top left."""
    rng = np.random.default_rng(stable_seed(lengths_q, lengths_k, d, bottom_right))
    cu_q = np.concatenate([[0], np.cumsum(lengths_q)]).astype(np.int32)
    cu_k = np.concatenate([[0], np.cumsum(lengths_k)]).astype(np.int32)
    q = rng.standard_normal((cu_q[-1], 4, d)).astype(np.float16)
    k = rng.standard_normal((cu_k[-1], 2, d)).astype(np.float16)
    v = rng.standard_normal((cu_k[-1], 2, d)).astype(np.float16)
    do = rng.standard_normal(q.shape).astype(np.float16)
    top_q, top_k = max(lengths_q), max(lengths_k)
    kw = {"bottom_right": bottom_right, "interpret": True}
    o, lse = tattn.attention_varlen(q, k, v, cu_q, cu_k, top_q, top_k, True, **kw)
    want = _varlen_reference(q, k, v, do, cu_q, cu_k, True, bottom_right)
    assert o.shape == q.shape and lse.shape == (4, cu_q[-1]) and lse.dtype == np.float32
    _close("o", o, want[0], "f16")
    np.testing.assert_allclose(lse, want[1], rtol=1e-5, atol=1e-5)
    unseen = bottom_right and any(a > b for a, b in zip(lengths_q, lengths_k, strict=True))
    assert np.isinf(lse).any() == unseen  # rows that see no key (and only those)
    grads = tattn.attention_varlen_backward(
        do, q, k, v, o, lse, cu_q, cu_k, top_q, top_k, True, **kw
    )
    for name, got, ref, like in zip(("dq", "dk", "dv"), grads, want[2:], (q, k, v), strict=True):
        assert got.shape == like.shape and got.dtype == like.dtype
        _close(name, got, ref, "f16")


def test_varlen_through_the_nn_facade():
    """teeny_tx.nn.attention_varlen is the library's (NumPy here), and a torch tensor that
    requires grad is sent to the autograd op instead."""
    rng = np.random.default_rng(3)
    cu = np.array([0, 5, 12], np.int32)
    q, k, v = (rng.standard_normal((12, 2, 32)).astype(np.float16) for _ in range(3))
    got = nn.attention_varlen(q, k, v, cu, cu, 7, 7, True, interpret=True)
    want = tattn.attention_varlen(q, k, v, cu, cu, 7, 7, True, interpret=True)
    for a, b in zip(got, want, strict=True):
        np.testing.assert_array_equal(a, b)
    torch = pytest.importorskip("torch")
    t = torch.from_numpy(q.astype(np.float32)).requires_grad_()
    with pytest.raises(tx.TeenyError, match="flash_attn_varlen_func"):
        nn.attention_varlen(t, t, t, torch.from_numpy(cu), torch.from_numpy(cu), 7, 7)


def test_varlen_argument_checks():
    rng = np.random.default_rng(0)
    q = rng.standard_normal((10, 2, 64)).astype(np.float16)
    cu = np.array([0, 4, 10], np.int32)
    assert "3-D" in _error(tattn.attention_varlen, q[None], q, q, cu, cu, 6, 6)
    assert "cu_seqlens_q has dtype int64" in _error(
        tattn.attention_varlen, q, q, q, cu.astype(np.int64), cu, 6, 6
    )
    assert "contiguous" in _error(
        tattn.attention_varlen, q, q, q, np.array([0, 0, 4, 4, 10, 10], np.int32)[::2], cu, 6, 6
    )
    assert "non-decreasing" in _error(
        tattn.attention_varlen, q, q, q, np.array([0, 5, 4, 10], np.int32), cu[[0, 1, 1, 2]], 6, 6
    )
    assert "max_seqlen_q=5 is below the length of sequence 1 (6)" in _error(
        tattn.attention_varlen, q, q, q, cu, cu, 5, 6
    )
    assert "int >= 0" in _error(tattn.attention_varlen, q, q, q, cu, cu, -1, 6)
    o, lse = tattn.attention_varlen(q, q, q, cu, cu, 6, 6, interpret=True)
    assert "lse must have shape (2, 10)" in _error(
        tattn.attention_varlen_backward, o, q, q, q, o, lse[:1], cu, cu, 6, 6
    )


def _varlen_spec(kernel, d, dtype, arch, max_k=4096):
    config = {
        "attention_varlen_fwd": tattn._forward_config(d, True, max_k, False),
        "attention_varlen_bwd_dkdv": tattn._dkdv_config(d, False),
        "attention_varlen_bwd_dq": tattn._dq_config(d),
    }[kernel]
    s3 = (d, 32 * d, 1)  # (head, row, column) of contiguous [total, 32, d]
    head = (32, 1, 8192, 1 << 30, 0, 1)  # h, group, total_q, left, right, bottom_right
    tail = ("f32", 0)  # the slopes (never read without ALiBi) and their batch stride
    args = {
        "attention_varlen_fwd": (dtype, "f32", dtype, dtype, dtype, "i32", "i32", *head)
        + s3 * 4
        + (0.18, 0.0, 0.0, *tail),
        "attention_varlen_bwd_dkdv": (*(dtype,) * 6, "f32", "f32", "i32", "i32", 32, *head)
        + s3 * 6
        + (0.18, 0.125, 0.0, 0.0, *tail),
        "attention_varlen_bwd_dq": (*(dtype,) * 5, "f32", "f32", "i32", "i32", *head)
        + s3 * 5
        + (0.18, 0.125, 0.0, 0.0, *tail),
    }[kernel]
    flags = {"D": tattn.tile_of(d), "DH": d, "BM": config.bm, "BN": config.bn}
    flags |= {"BAND": 1, "SOFTCAP": 0, "ALIBI": 0, "BF16": int(dtype == "bf16")}
    k = getattr(module("attention.c"), kernel).tma
    with target_arch(arch):
        spec = k.specialize(
            *args, num_warps=config.num_warps, num_stages=config.num_stages, strided=True, **flags
        )
        return spec, nvrtc.compile_with_log(
            spec.cuda_source, name=kernel, arch=arch, headers=HEADERS
        )


@pytest.mark.parametrize(
    ("d", "arch"),
    [
        (64, "sm_90a"),
        (128, "sm_90a"),
        (40, "sm_90a"),
        (111, "sm_90a"),
        (256, "sm_90a"),
        (64, "sm_90"),
        (40, "sm_90"),
    ],
    ids=str,
)
def test_nvrtc_compiles_varlen(d, arch):
    """The varlen kernels build at the wrapper's configs; the K/V (Q/dO) loads of a head dim
    that is a multiple of 8 are pipelined 16-byte copies (cp.async: each sequence's length
    bounds them, not a kernel parameter, so no TMA)."""
    dtype = "bf16" if d == 128 else "f16"
    kernels = ["attention_varlen_fwd", "attention_varlen_bwd_dkdv", "attention_varlen_bwd_dq"]
    for kernel, max_k in [(k, 4096) for k in kernels] + [("attention_varlen_fwd", 512)]:
        spec, result = _varlen_spec(kernel, d, dtype, arch, max_k)  # (512: short causal)
        assert result.cubin[:4] == b"\x7fELF", kernel
        assert ("tx::cp_async16(" in spec.cuda_source) == (d % 8 == 0), kernel
        if arch == "sm_90a" and d in (40, 64) or (d == 256 and "bwd" in kernel):
            assert nvrtc.spilled_bytes(result.log) == 0, (kernel, result.log)


# Row and column statistics of an accumulator (the online softmax's max and sum) computed in
# the accumulator's own registers: quad shuffles along N, and through shared memory only across
# warps; the row vectors broadcast back without a layout change
ROW_STATS = """
kernel row_stats(f32 *out, f32 *rows, f32 *cols, const f16 *a, const f16 *b,
                 const i32 M, const i32 N, const i32 K)
{
    tile rm = expand_dims(arange(0, M), 1);
    tile rn = expand_dims(arange(0, N), 0);
    tile rk = arange(0, K);
    tile s = dot(load(a + rm * K + expand_dims(rk, 0)), load(b + expand_dims(rk, 1) * N + rn));
    tile m = max(s, 1, 1);
    tile e = exp2(s - m);
    f32 total[M] = sum(e, 1);
    store(out + rm * N + rn, e / expand_dims(total, 1));
    store(rows + arange(0, M), total);
    store(cols + arange(0, N), sum(s, 0));
}
"""


def _row_stats_reference(a, b):
    s = a.astype(np.float64) @ b.astype(np.float64)
    e = np.exp2(s - s.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True), e.sum(1), s.sum(0)


def test_accumulator_row_stats_on_interpreter():
    k = tx.compile(ROW_STATS, name="kernels/row_stats.c").row_stats
    rng = np.random.default_rng(1)
    a = rng.standard_normal((64, 32)).astype(np.float16)
    b = rng.standard_normal((32, 64)).astype(np.float16)
    out, rows, cols = (
        np.zeros((64, 64), np.float32),
        np.zeros(64, np.float32),
        np.zeros(64, np.float32),
    )
    k.interpret[(1,)](out, rows, cols, a, b, M=64, N=64, K=32)
    for got, want in zip((out, rows, cols), _row_stats_reference(a, b), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("arch", ["sm_90", "sm_90a"])
@pytest.mark.parametrize(("m", "num_warps"), [(64, 4), (32, 4)], ids=["64x4", "32x4"])
def test_accumulator_row_stats_stay_in_registers(arch, m, num_warps):
    """sm_90a at M = 64 with 4 warps: wgmma; the others mma.sync (M = 32: 2x2 warps, so the
    row sums cross two warps through shared memory). No layout change touches an accumulator
    tile; the rows, the row sums and the column sums come from tx::reduce on it."""
    k = tx.compile(ROW_STATS, name="kernels/row_stats.c").row_stats
    with target_arch(arch):
        spec = k.specialize("f32", "f32", "f32", "f16", "f16", M=m, N=64, K=32, num_warps=num_warps)
        source = spec.cuda_source
        cubin = nvrtc.compile_to_cubin(source, name="row_stats", arch=arch, headers=HEADERS)
    assert cubin[:4] == b"\x7fELF"
    mma = {
        line.split()[1]
        for line in source.splitlines()
        if line.strip().startswith("using tx_L") and "tx::Mma<" in line
    }
    full = next(
        name
        for name in mma
        if f"tx::Ints<{m}, 64>" in source.split(f"using {name} =")[1].split("\n")[0]
    )
    assert f"tx::reduce<{full}, " in source
    assert source.count(f"tx::reduce<{full}, ") == 3
    for line in source.splitlines():
        if "tx::relayout<" in line:
            assert f"tx::relayout<{full}," not in line, line


# A product whose A operand is computed from another product (attention's P): on sm_90a wgmma
# reads it from the accumulator's registers (tx::wgmma_rs), elsewhere it is staged
CHAINED = """
kernel chained(f32 *out, const f16 *a, const f16 *b, const f16 *c, const i32 M, const i32 N,
               const i32 K, const i32 D)
{
    tile rm = expand_dims(arange(0, M), 1);
    tile rn = arange(0, N);
    tile rk = arange(0, K);
    tile rd = expand_dims(arange(0, D), 0);
    tile s = dot(load(a + rm * K + expand_dims(rk, 0)), load(b + expand_dims(rk, 1) * N + rn));
    tile p = exp2(s - max(s, 1, 1));
    tile o = dot((f16)p, load(c + expand_dims(rn, 1) * D + rd));
    store(out + rm * D + rd, o);
}
"""


def chained_reference(a, b, c):
    s = a.astype(np.float64) @ b.astype(np.float64)
    p = np.exp2(s - s.max(1, keepdims=True)).astype(np.float16).astype(np.float64)
    return p @ c.astype(np.float64)


def test_chained_dot_on_interpreter():
    k = tx.compile(CHAINED, name="kernels/chained.c").chained
    rng = np.random.default_rng(2)
    a, b, c = (rng.standard_normal(s).astype(np.float16) for s in ((64, 32), (32, 64), (64, 128)))
    out = np.zeros((64, 128), np.float32)
    k.interpret[(1,)](out, a, b, c, M=64, N=64, K=32, D=128)
    np.testing.assert_allclose(out, chained_reference(a, b, c), rtol=1e-3, atol=1e-2)


@pytest.mark.parametrize("arch", ["sm_90", "sm_90a"])
def test_chained_dot_reads_a_from_registers(arch):
    k = tx.compile(CHAINED, name="kernels/chained.c").chained
    with target_arch(arch):
        spec = k.specialize("f32", "f16", "f16", "f16", M=64, N=64, K=64, D=128, num_warps=4)
        source = spec.cuda_source
        cubin = nvrtc.compile_to_cubin(source, name="chained", arch=arch, headers=HEADERS)
    assert cubin[:4] == b"\x7fELF"
    assert ("tx::wgmma_rs<" in source) == (arch == "sm_90a")
    assert source.count("tx::stage<") == (3 if arch == "sm_90a" else 4)  # a, b, (P), c


def _scratch_clobbers(source: str) -> list[str]:
    """Lines that use the shared scratch buffer while a staged dot operand lives in it: from
    the operand's staging to the product that reads it."""
    live, bad = False, []
    for line in source.splitlines():
        if "tx_smem" in line and "SmemTile" not in line and "reinterpret_cast" in line:
            live = True  # an operand staged in the scratch buffer
        elif any(f in line for f in ("tx::mma<", "tx::wgmma<", "tx::wgmma_rs<", "tx::dot_fma<")):
            live = False
        elif live and "tx_smem" in line:
            bad.append(line.strip())
    return bad


@pytest.mark.parametrize("arch", ["sm_90", "sm_90a"])
@pytest.mark.parametrize(
    ("m", "n", "num_warps"), [(64, 64, 4), (32, 64, 4), (128, 64, 8), (64, 128, 4)]
)
def test_staged_operands_are_not_overwritten(arch, m, n, num_warps):
    """Both operands' registers are computed before either is staged: computing B's (its index
    tiles moved between layouts through the scratch buffer) overwrote a staged A (the first
    H200 run: the row statistics and chained products wrong on every configuration)."""
    chained = tx.compile(CHAINED, name="kernels/chained.c").chained
    row_stats = tx.compile(ROW_STATS, name="kernels/row_stats.c").row_stats
    with target_arch(arch):
        sources = [
            chained.specialize(
                "f32", "f16", "f16", "f16", M=m, N=n, K=64, D=128, num_warps=num_warps
            ).cuda_source,
            row_stats.specialize(
                "f32", "f32", "f32", "f16", "f16", M=m, N=64, K=32, num_warps=num_warps
            ).cuda_source,
        ]
    for source in sources:
        assert "tx::stage<" in source
        assert _scratch_clobbers(source) == []


def test_scratch_clobber_check_sees_a_clobber():
    """The check above on the order the emitter had: A staged, then B's index tiles moved."""
    source = "\n".join(
        [
            "__half* smem_a_0 = reinterpret_cast<__half*>(tx::align1024(tx_smem) + 0);",
            "tx::stage<L4, 0, 1, TileA_0, false>(smem_a_0, load_0);",
            "tx::relayout<L1, L5>(converted_2, rk, tx_smem, [](int r) { return 0; });",
            "tx::wgmma<L3, TileA_0, true, TileB_0, false, 64, 0>(acc_0, smem_a_0, smem_b_0, f);",
        ]
    )
    assert len(_scratch_clobbers(source)) == 1


def test_attention_forward_reads_p_from_registers():
    """P's product is wgmma's register-A form; in attention_fwd it waits for itself (only
    m_i = m_new follows it), in attention_fwd_overlap it runs on while the softmax does."""
    by_stem = {g.stem: g for g in GOLDEN}
    plain = by_stem["attention_fwd.f16.d128.sm90a"].render()
    assert "tx::wgmma_rs<" in plain and "wgmma_async" not in plain
    overlap = by_stem["attention_fwd_overlap.f16.d128.tma.sm90a"].render()
    assert "tx::wgmma_rs_async<" in overlap and "tx::wgmma_wait<1>();  // s ready" in overlap


# f32 atomics of a product's result (the backward's dQ by atomics): added from the
# accumulator's own registers, with no layout change between the product and the atomics
ATOMIC_DOT = """
kernel atomic_dot(f32 *out, const f16 *a, const f16 *b, i32 m, const i32 M, const i32 N,
                  const i32 K)
{
    tile rm = expand_dims(arange(0, M), 1);
    tile rn = expand_dims(arange(0, N), 0);
    tile rk = arange(0, K);
    tile s = dot(load(a + rm * K + expand_dims(rk, 0), rm < m, 0),
                 load(b + expand_dims(rk, 1) * N + rn));
    atomic_add(out + rm * N + rn, s, rm < m, RELAXED);
    atomic_add(out + rm * N + rn, s * 2.0f, rm < m, RELAXED);
}
"""


def test_atomic_dot_on_interpreter():
    k = tx.compile(ATOMIC_DOT, name="kernels/atomic_dot.c").atomic_dot
    rng = np.random.default_rng(4)
    a = rng.standard_normal((64, 32)).astype(np.float16)
    b = rng.standard_normal((32, 64)).astype(np.float16)
    out = rng.standard_normal((64, 64)).astype(np.float32)
    want = out.astype(np.float64)
    want[:50] += 3 * (a[:50].astype(np.float64) @ b.astype(np.float64))
    k.interpret[(1,)](out, a, b, 50, M=64, N=64, K=32)
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("arch", ["sm_90", "sm_90a"])
@pytest.mark.parametrize(("m", "num_warps"), [(64, 4), (64, 8)], ids=["64x4", "64x8"])
def test_atomic_dot_stays_in_registers(arch, m, num_warps):
    """sm_90a with 4 warps: wgmma; else mma.sync. Each atomic reads the accumulator's registers
    (the atomics' loop runs over the Mma layout); the accumulator never moves through
    tx::relayout."""
    k = tx.compile(ATOMIC_DOT, name="kernels/atomic_dot.c").atomic_dot
    with target_arch(arch):
        spec = k.specialize("f32", "f16", "f16", 64, M=m, N=64, K=32, num_warps=num_warps)
        source = spec.cuda_source
        cubin = nvrtc.compile_to_cubin(source, name="atomic_dot", arch=arch, headers=HEADERS)
    assert cubin[:4] == b"\x7fELF"
    mma = [
        line.split()[1]
        for line in source.splitlines()
        if line.strip().startswith("using tx_L") and f"tx::Mma<tx::Ints<{m}, 64>" in line
    ]
    assert len(mma) == 1
    assert f"tx::relayout<{mma[0]}," not in source  # (index tiles of the loads may move)
    atomics = [line for line in source.splitlines() if "tx::atomic_add(" in line]
    assert len(atomics) == 2
    assert all(f"tx_i < {mma[0]}::REGS" in line for line in atomics)


def test_tma_only_for_arrays_a_tensor_map_reads():
    """The wrapper loads K/V by TMA only where every array is 16-byte aligned, with positive
    strides (a tensor map's are) and 32-bit offsets; other calls take cp.async."""
    q = np.zeros((1, 8, 2, 64), np.float16)
    assert tattn._tma_fits((q, 3, 0.5, q.transpose(0, 2, 1, 3)))
    assert not tattn._tma_fits((q, q[:, :, ::-1]))
    assert not tattn._tma_fits((np.broadcast_to(q[:, :1], q.shape),))
    flat = np.zeros(q.size + 8, np.float16)
    start = (-flat.ctypes.data % 16) // 2  # the first 16-byte aligned element
    aligned = flat[start : start + q.size].reshape(q.shape)
    assert tattn._tma_fits((aligned,))
    assert not tattn._tma_fits((flat[start + 4 : start + 4 + q.size].reshape(q.shape),))


def test_plans_are_keyed_on_the_settings_they_were_made_under(monkeypatch):
    """A GPU call replays an earlier call's plan only under the same module flags and config
    table entries (a sweep or a test that changes them gets launches made under the new
    ones)."""
    q = np.zeros((1, 8, 2, 64), np.float16)
    tables = (tattn.FORWARD, tattn.FORWARD_OVERLAP)
    seen = {tattn._settings(q, *tables)}
    monkeypatch.setitem(tattn.FORWARD, 64, tattn.AttentionConfig(64, 64, 4, 3))
    seen.add(tattn._settings(q, *tables))
    for flag in ("TMA", "TUNE", "OVERLAP"):
        monkeypatch.setattr(tattn, flag, not getattr(tattn, flag))
        seen.add(tattn._settings(q, *tables))
    assert len(seen) == 5
    assert tattn._settings(q[..., :32], *tables) != tattn._settings(q, *tables)  # by head dim


def test_the_causal_forward_of_short_sequences_takes_its_own_tiles():
    """Causal and n_kv <= SHORT: FORWARD_SHORT_CAUSAL; otherwise FORWARD (or the overlapped
    forward's table)."""
    for d in (64, 128):
        short = tattn.FORWARD_SHORT_CAUSAL[d]
        assert tattn._forward_config(d, True, tattn.SHORT, False) == short
        assert tattn._forward_config(d, True, 1, False) == short
        assert tattn._forward_config(d, True, tattn.SHORT + 1, False) == tattn.FORWARD[d]
        assert tattn._forward_config(d, False, 1, False) == tattn.FORWARD[d]
        assert tattn._forward_config(d, True, 1, True) == tattn.FORWARD_OVERLAP[d]
    assert tattn._forward_config(256, True, 1, False) == tattn.FORWARD[256]


def test_a_plan_launch_is_the_tma_forms_direct_launch(monkeypatch):
    """_Pipelined.fast after a TMA launch: the direct launch (a launch plan) that _launch's
    TMA branch made the maker of; after any other launch, the full path every call."""
    made = []
    monkeypatch.setattr(tattn, "_launch", lambda *a, **k: lambda: made.append(a[3]) or "run")
    launch = tattn._Pipelined(tattn._Where("cupy", 0, None), None, None, tattn.FORWARD[64])
    launch("a", 1)
    assert launch.fast() == "run" and made == [("a", 1)]
    monkeypatch.setattr(tattn, "_launch", lambda *a, **k: None)
    plain = tattn._Pipelined(tattn._Where("cupy", 0, None), None, None, tattn.FORWARD[64])
    plain("a", 1)
    assert plain.fast() is plain  # no TMA launch was made: the full path every call
