"""acc_t, the compute type (prelude/language.h, dtypes.acc_dtype), and dot() on f64: acc_t is
f32 for f16/bf16/f32 data (the CUDA is that of the kernel with f32 written out, but for its
DSL comments) and f64 for f64 data (the interpreter sums in f64; NVRTC compiles the f64
specialisation, dot's FMA path included); a parameter declared acc_t is a clear error."""

from __future__ import annotations

import re

import numpy as np
import pytest

import teeny_tx as tx
from teeny_tx.dtypes import F32, F64, acc_dtype, from_name

from .conftest import KERNEL_FILE, compile_error, nvrtc_compile

SUM = """
kernel k(any *out, const any *x, i32 n, const i32 BLOCK)
{
    tile offs = arange(0, BLOCK);
    tile v = where(offs < n, (acc_t)load(x + offs, offs < n, 1.0f) - 1.0f, 0.0f);
    acc_t s[BLOCK] = 0;
    s += v;
    store(out + offs, v * 0.0f + sum(s), offs < n);
}
"""

DOT = """
kernel k(any *c, const any *a, const any *b, const i32 M, const i32 N, const i32 K)
{
    tile rm = expand_dims(arange(0, M), 1);
    tile rn = expand_dims(arange(0, N), 0);
    tile rk = arange(0, K);
    acc_t acc[M][N] = 0;
    acc = dot(load(a + rm * K + expand_dims(rk, 0)), load(b + expand_dims(rk, 1) * N + rn), acc);
    store(c + rm * N + rn, acc);
}
"""


def test_acc_dtype_is_f64_only_for_f64_pointees():
    assert acc_dtype([from_name(n) for n in ("f16", "i64")]) == F32
    assert acc_dtype([from_name(n) for n in ("bf16", "f32", "i32")]) == F32
    assert acc_dtype([from_name("f32"), from_name("f64")]) == F64
    assert acc_dtype([]) == F32


def test_acc_t_sums_f64_data_in_f64():
    """1 + i * 1e-10 rounds to 1 in f32: an f32 step anywhere would make the sum 0."""
    mod = tx.compile(SUM, name=KERNEL_FILE)
    n = 37
    x = 1.0 + 1e-10 * np.arange(n)
    out = np.empty(n)
    mod.k.interpret[(1,)](out, x, n, BLOCK=64)
    want = (x - 1.0).sum()
    assert out.dtype == np.float64
    np.testing.assert_allclose(out, want, rtol=1e-12)
    xf = x.astype(np.float32)
    outf = np.empty(n, np.float32)
    mod.k.interpret[(1,)](outf, xf, n, BLOCK=64)
    assert np.all(outf == 0.0)  # f32 data: computed in f32, as written


@pytest.mark.parametrize("dtype", ["f16", "bf16", "f32"])
def test_acc_t_is_f32_spelled_out_for_narrower_data(dtype):
    ours = tx.compile(SUM, name=KERNEL_FILE).k.cuda_source(dtype, dtype, 10, BLOCK=64)
    written = SUM.replace("(acc_t)", "(f32)").replace("acc_t s", "f32 s")
    theirs = tx.compile(written, name=KERNEL_FILE).k.cuda_source(dtype, dtype, 10, BLOCK=64)

    def code(text):  # the DSL lines echoed as comments differ, nothing else
        return [line for line in text.splitlines() if not line.lstrip().startswith("//")]

    assert code(ours) == code(theirs)
    assert ours != theirs


def test_acc_t_f64_specialisation_compiles_for_sm90():
    source = tx.compile(SUM, name=KERNEL_FILE).k.cuda_source("f64", "f64", 10, BLOCK=64)
    assert re.search(r"\bdouble s\[", source) and "float" not in source.split("kernel k")[-1]
    assert nvrtc_compile(source, "k")


def test_a_parameter_cannot_be_acc_t():
    err = compile_error("kernel k(acc_t *out, i32 n)\n{\n}\n", "f32", 1)
    assert "cannot be declared acc_t" in str(err) and "any *p" in str(err)


@pytest.mark.parametrize("m,n,k", [(16, 16, 16), (32, 64, 16)])
def test_dot_f64_accumulates_in_f64(m, n, k):
    rng = np.random.default_rng(m + n + k)
    a, b = rng.standard_normal((m, k)), rng.standard_normal((k, n))
    a[0, 0] = 1e8  # products whose sum f32 would round
    c = np.empty((m, n))
    tx.compile(DOT, name=KERNEL_FILE).k.interpret[(1,)](c, a, b, M=m, N=n, K=k)
    np.testing.assert_allclose(c, a @ b, rtol=1e-13, atol=1e-13 * np.abs(a @ b).max())


def test_dot_f64_compiles_to_fma_for_sm90():
    source = tx.compile(DOT, name=KERNEL_FILE).k.cuda_source("f64", "f64", "f64", M=32, N=32, K=16)
    assert "tx::dot_fma<" in source and "double acc[" in source
    assert nvrtc_compile(source, "k")


def test_dot_of_mixed_f64_is_refused():
    text = DOT.replace("load(b + expand_dims", "(f32)load(b + expand_dims")
    err = compile_error(text, "f64", "f64", "f64", M=16, N=16, K=16)
    assert "one dtype" in str(err)
