"""The kernels the torch layer added (kernels/gelu.c, embedding.c, add_norm.c, adamw.c and
dropout.c's dropout_seeded), through teeny_tx.library.fused on NumPy arrays (the interpreter; no
torch needed), against float64 NumPy references: odd sizes, every dtype they take (f32, f16, bf16,
f64); argument errors; and each kernel's CUDA compiled by NVRTC for sm_90."""

from __future__ import annotations

from math import erf

import numpy as np
import pytest

from teeny_tx import LaunchError
from teeny_tx.dtypes import DTYPES
from teeny_tx.library import fused, module
from tests.cases import dropout_reference

from .conftest import nvrtc_compile

TYPES = ("f32", "f16", "bf16", "f64")
TOL = {"f32": 3e-6, "f16": 2e-3, "bf16": 1.6e-2, "f64": 1e-13}


def _data(rng, shape, dtype, scale=1.0, shift=0.0):
    x = scale * rng.standard_normal(shape) + shift
    return x.astype(np.float32).astype(DTYPES[dtype].np)


def _check(got, want, dtype, scale=None):
    got = np.asarray(got).astype(np.float64)
    assert got.shape == np.shape(want)
    scale = float(np.max(np.abs(want), initial=0.0)) if scale is None else scale
    err = float(np.max(np.abs(got - want), initial=0.0))
    assert err <= TOL[dtype] * (1.0 + scale), f"max error {err} (scale {scale})"


_erf = np.vectorize(erf)


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


ACT = {
    "gelu": (
        lambda x: 0.5 * x * (1 + _erf(x / np.sqrt(2))),
        lambda x: 0.5 * (1 + _erf(x / np.sqrt(2))) + x * np.exp(-x * x / 2) / np.sqrt(2 * np.pi),
    ),
    "gelu_tanh": (
        lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3))),
        None,  # checked by finite differences below
    ),
    "relu": (lambda x: np.maximum(x, 0.0), lambda x: (x > 0).astype(np.float64)),
    "silu": (lambda x: x * _sigmoid(x), lambda x: _sigmoid(x) * (1 + x * (1 - _sigmoid(x)))),
}


@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("n", [1, 1001])
@pytest.mark.parametrize("name", list(ACT))
def test_activation(name, n, dtype):
    rng = np.random.default_rng(n)
    x, dy = _data(rng, n, dtype, 3.0), _data(rng, n, dtype)
    f, df = ACT[name]
    xd = x.astype(np.float64)
    _check(fused.activation(x, name, interpret=True), f(xd), dtype)
    want = None
    if df is None:  # central differences of the float64 forward: exact to ~1e-8
        h = 1e-4
        want = (f(xd + h) - f(xd - h)) / (2 * h) * dy.astype(np.float64)
    else:
        want = df(xd) * dy.astype(np.float64)
    dx = fused.activation_backward(x, dy, name, interpret=True)
    _check(dx, want, "f32" if df is None and dtype == "f64" else dtype)


def test_activation_large():
    rng = np.random.default_rng(0)
    x = _data(rng, 2**20 + 3, "f32", 3.0)
    _check(fused.activation(x, "silu", interpret=True), ACT["silu"][0](x.astype(np.float64)), "f32")


@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("n", [1, 1001])
def test_swiglu(n, dtype):
    rng = np.random.default_rng(n)
    g, u, dy = (_data(rng, (n,), dtype, 2.0) for _ in range(3))
    gd, ud, dyd = (a.astype(np.float64) for a in (g, u, dy))
    s = _sigmoid(gd)
    _check(fused.swiglu(g, u, interpret=True), gd * s * ud, dtype)
    dg, du = fused.swiglu_backward(g, u, dy, interpret=True)
    _check(dg, dyd * ud * s * (1 + gd * (1 - s)), dtype)
    _check(du, dyd * gd * s, dtype)


@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("tokens,dim", [(1, 1), (1001, 19), (40, 300)])
def test_embedding(tokens, dim, dtype):
    rng = np.random.default_rng(tokens)
    w = _data(rng, (57, dim), dtype)
    idx = rng.integers(0, 57, tokens, dtype=np.int64)
    out = fused.embedding(w, idx, interpret=True)
    assert out.dtype == w.dtype and np.array_equal(out, w[idx])
    dy = _data(rng, (tokens, dim), dtype)
    want = np.zeros((57, dim))
    np.add.at(want, idx, dy.astype(np.float64))
    _check(fused.embedding_backward(dy, idx, 57, interpret=True), want, dtype)


def test_embedding_strided_table_and_bad_indices():
    rng = np.random.default_rng(0)
    table = _data(rng, (10, 40), "f32")[:, 3:20]  # row stride 40
    out = fused.embedding(table, np.array([3, 10, -1, 0]), interpret=True)
    assert np.array_equal(out[[0, 3]], table[[3, 0]]) and np.isnan(out[1:3]).all()
    dw = fused.embedding_backward(
        np.ones((2, 17), np.float32), np.array([12, 1]), 10, interpret=True
    )
    assert dw[1].sum() == 17 and dw.sum() == 17  # the index outside the table adds nothing


def _ln(h, w, b, eps=1e-5):
    mean = h.mean(1, keepdims=True)
    rstd = 1 / np.sqrt(((h - mean) ** 2).mean(1, keepdims=True) + np.float32(eps))
    return (h - mean) * rstd * w + b, mean[:, 0], rstd[:, 0]


def _ln_backward(dy, dh, h, w, mean, rstd):
    hhat = (h - mean[:, None]) * rstd[:, None]
    g = w * dy
    dx = rstd[:, None] * (g - hhat * (g * hhat).mean(1, keepdims=True) - g.mean(1, keepdims=True))
    return dx + dh, (dy * hhat).sum(0), dy.sum(0)


def _rounded(x, r, dtype):
    return (x.astype(np.float64) + r).astype(DTYPES[dtype].np).astype(np.float64)


@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("rows,cols", [(1, 1), (3, 1001), (300, 17)])
def test_add_layer_norm(rows, cols, dtype):
    rng = np.random.default_rng(rows * cols)
    x, r = _data(rng, (rows, cols), dtype, 2.0, 0.5), _data(rng, (rows, cols), dtype)
    w, b = _data(rng, cols, dtype, 0.5, 1.0), _data(rng, cols, dtype, 0.5)
    y, h, mean, rstd = fused.add_layer_norm(x, r, w, b, interpret=True)
    hd = _rounded(x, r, dtype)
    want, want_mean, want_rstd = _ln(hd, w.astype(np.float64), b.astype(np.float64))
    _check(h, hd, dtype)
    _check(y, want, dtype)
    _check(mean, want_mean, "f64" if dtype == "f64" else "f32")
    assert rstd.dtype == (np.float64 if dtype == "f64" else np.float32)
    dy, dh = _data(rng, (rows, cols), dtype), _data(rng, (rows, cols), dtype)
    dx, dw, db = fused.add_layer_norm_backward(dy, dh, h, w, mean, rstd, interpret=True)
    f64 = [a.astype(np.float64) for a in (dy, dh, h, w, mean, rstd)]
    want_dx, want_dw, want_db = _ln_backward(*f64)
    terms = float(np.max(np.abs(f64[0] * f64[3] * f64[5][:, None]), initial=0.0))
    _check(dx, want_dx, dtype, scale=max(terms, float(np.abs(want_dx).max())))
    _check(dw, want_dw, dtype, scale=float(np.abs(dy.astype(np.float64)).sum(0).max()))
    _check(db, want_db, dtype, scale=float(np.abs(dy.astype(np.float64)).sum(0).max()))


@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("rows,cols", [(1, 1), (3, 1001), (300, 17)])
def test_add_rms_norm(rows, cols, dtype):
    rng = np.random.default_rng(rows + cols)
    x, r = _data(rng, (rows, cols), dtype, 2.0, 0.5), _data(rng, (rows, cols), dtype)
    w = _data(rng, cols, dtype, 0.5, 1.0)
    y, h, rstd = fused.add_rms_norm(x, r, w, interpret=True)
    hd = _rounded(x, r, dtype)
    want_rstd = 1 / np.sqrt((hd * hd).mean(1) + np.float32(1e-6))
    _check(y, hd * want_rstd[:, None] * w.astype(np.float64), dtype)
    dy, dh = _data(rng, (rows, cols), dtype), _data(rng, (rows, cols), dtype)
    dx, dw = fused.add_rms_norm_backward(dy, dh, h, w, rstd, interpret=True)
    dyd, dhd, wd, rs = (a.astype(np.float64) for a in (dy, dh, w, rstd))
    hhat = h.astype(np.float64) * rs[:, None]
    g = wd * dyd
    want_dx = rs[:, None] * (g - hhat * (g * hhat).mean(1, keepdims=True)) + dhd
    terms = float(np.max(np.abs(g * rs[:, None]), initial=0.0))
    _check(dx, want_dx, dtype, scale=max(terms, float(np.abs(want_dx).max())))
    _check(dw, (dyd * hhat).sum(0), dtype, scale=float(np.abs(dyd).sum(0).max() * 3))


def test_add_norm_strided_rows():
    rng = np.random.default_rng(5)
    x = _data(rng, (6, 50), "f32")[:, :33]
    r = _data(rng, (6, 40), "f32")[:, 2:35]
    w, b = _data(rng, 33, "f32"), _data(rng, 33, "f32")
    y, h, _, _ = fused.add_layer_norm(x, r, w, b, interpret=True)
    hd = x.astype(np.float64) + r
    _check(h, hd, "f32")
    _check(y, _ln(hd, w.astype(np.float64), b.astype(np.float64))[0], "f32")


@pytest.mark.parametrize("dtype", ("f32", "f16", "bf16", "f64"))
def test_adamw_step_matches_torch_formula(dtype):
    rng = np.random.default_rng(1)
    n = 1001
    p, g = _data(rng, n, dtype), _data(rng, n, dtype)
    moment = np.float64 if dtype == "f64" else np.float32
    m, v = rng.standard_normal(n).astype(moment) * 0.1, rng.random(n).astype(moment) * 0.01
    lr, b1, b2, eps, wd, t = 1e-2, 0.9, 0.95, 1e-8, 0.1, 3
    pd, gd, md, vd = (a.astype(np.float64) for a in (p, g, m, v))
    pd = pd * (1 - lr * wd)
    md = b1 * md + (1 - b1) * gd
    vd = b2 * vd + (1 - b2) * gd * gd
    want_p = pd - lr / (1 - b1**t) * md / (np.sqrt(vd) / np.sqrt(1 - b2**t) + eps)
    fused.adamw_step(
        p, g, m, v, t, lr=lr, beta1=b1, beta2=b2, eps=eps, weight_decay=wd, interpret=True
    )
    _check(m, md, "f64" if dtype == "f64" else "f32")
    _check(v, vd, "f64" if dtype == "f64" else "f32")
    _check(p, want_p, dtype)


@pytest.mark.parametrize("dtype", TYPES)
def test_dropout_seeded(dtype):
    rng = np.random.default_rng(2)
    x = _data(rng, (7, 143), dtype)
    seed = np.array([-(2**62) + 12345], np.int64)
    y = fused.dropout(x, 0.3, seed, interpret=True)
    want = dropout_reference(x.astype(np.float64).reshape(-1), 0.3, int(seed[0])).reshape(x.shape)
    _check(y, want, dtype)
    dx = fused.dropout_backward(x, 0.3, seed, interpret=True)
    _check(dx, want, dtype)


def test_errors():
    x = np.ones((4, 5), np.float32)
    with pytest.raises(LaunchError, match="activation must be one of"):
        fused.activation(x, "tanh", interpret=True)
    with pytest.raises(LaunchError, match="must be contiguous"):
        fused.swiglu(x[:, ::2], x[:, ::2], interpret=True)
    with pytest.raises(LaunchError, match="has dtype int32"):
        fused.activation(np.ones(3, np.int32), "relu", interpret=True)
    with pytest.raises(LaunchError, match="p must be in"):
        fused.dropout(x, 1.0, np.zeros(1, np.int64), interpret=True)
    with pytest.raises(LaunchError, match="residual has shape"):
        fused.add_rms_norm(x, np.ones((4, 6), np.float32), np.ones(5, np.float32), interpret=True)
    with pytest.raises(LaunchError, match="step counts from 1"):
        z = np.zeros(3, np.float32)
        fused.adamw_step(z, z, z.copy(), z.copy(), 0, lr=1e-3, interpret=True)


# kernel, argument dtypes (pointers) and scalars, constexprs, num_warps: as teeny_tx.library.fused
# launches them
COMPILED = [
    ("gelu.c", "activation_fwd", ("bf16", "bf16", 1000), {"ACT": 1, "BLOCK": 1024}),
    ("gelu.c", "activation_bwd", ("f16", "f16", "f16", 1000), {"ACT": 2, "BLOCK": 1024}),
    ("gelu.c", "swiglu_fwd", ("bf16",) * 3 + (1000,), {"BLOCK": 1024}),
    ("gelu.c", "swiglu_bwd", ("f32",) * 5 + (1000,), {"BLOCK": 1024}),
    (
        "embedding.c",
        "embedding_fwd",
        ("bf16", "bf16", "i64", 4096, 384, 65, 384),
        {"BLOCK_T": 16, "BLOCK_D": 128},
    ),
    (
        "embedding.c",
        "embedding_bwd",
        ("f32", "bf16", "i64", 4096, 384, 65),
        {"BLOCK_T": 16, "BLOCK_D": 128},
    ),
    (
        "add_norm.c",
        "add_layer_norm_fwd",
        ("bf16", "bf16", "f32", "f32", "bf16", "bf16", "bf16", "bf16") + (384,) * 5 + (1e-5,),
        {"ROUND": 2, "BLOCK": 512},
    ),
    (
        "add_norm.c",
        "add_layer_norm_bwd",
        ("f32", "f32", "f32", "f32", "f32", "f32", "f32", "f32", "f32")
        + (16384, 384, 384, 384, 384, 384, 32),
        {"BLOCK": 512},
    ),
    (
        "add_norm.c",
        "add_rms_norm_fwd",
        ("f16", "f16", "f32", "f16", "f16", "f16") + (1000,) * 5 + (1e-6,),
        {"ROUND": 1, "BLOCK": 1024},
    ),
    (
        "add_norm.c",
        "add_rms_norm_bwd",
        ("bf16", "f32", "bf16", "bf16", "bf16", "bf16", "f32")
        + (8192, 1000, 1000, 1000, 1000, 1000, 16),
        {"BLOCK": 1024},
    ),
    ("add_norm.c", "column_sum", ("bf16", "f32", 528, 384), {"BLOCK_P": 32, "BLOCK_N": 128}),
    (
        "adamw.c",
        "adamw_step",
        ("bf16", "bf16", "f32", "f32", 1 << 20) + (1e-3, 0.9, 0.95, 1e-8, 0.1, 1e-2, 0.5),
        {"BLOCK": 1024},
    ),
    ("dropout.c", "dropout_seeded", ("f16", "f16", 0.1, "i64", 1000), {"BLOCK": 1024}),
]


@pytest.mark.parametrize(
    "file,kernel,args,constexprs", COMPILED, ids=[f"{c[0]}:{c[1]}" for c in COMPILED]
)
def test_nvrtc_compiles(file, kernel, args, constexprs):
    source = getattr(module(file), kernel).cuda_source(*args, **constexprs)
    assert f"kernels/{file}" in source  # #line directives point at the kernel file
    assert nvrtc_compile(source, kernel)
