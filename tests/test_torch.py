"""teeny_tx.torch on CPU tensors (the kernels run on the NumPy interpreter): every custom op
through torch.library.opcheck; gradients through torch.autograd.gradcheck (float64 where the
kernels compute in f64, float32 with a matching step elsewhere); forward and backward against
torch's own ops on random data, odd sizes, strided views and each dtype; torch.compile with
fullgraph=True; the Module drop-ins' state dicts; AdamW against torch.optim.AdamW."""

from __future__ import annotations

import shutil

import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402

import teeny_tx.torch as ttx  # noqa: E402
from teeny_tx import TeenyError  # noqa: E402
from teeny_tx.library import sdpa  # noqa: E402
from teeny_tx.library import torch_ops as ops  # noqa: E402

from .conftest import UNIT_ROUNDOFF, assert_close_elementwise, dtype_name  # noqa: E402

F64 = torch.float64


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _randn(*shape, dtype=torch.float32, seed=0, scale=1.0):
    return (scale * torch.randn(*shape, generator=_gen(seed), dtype=torch.float64)).to(dtype)


def _targets(n, classes, seed=0, ignore=True):
    t = torch.randint(0, classes, (n,), generator=_gen(seed))
    if ignore and n > 2:
        t[::3] = -100
    return t


# ---------------------------------------------------------------- opcheck


def _samples(dtype):
    """(op, args) of each custom op, CPU tensors of ``dtype``, odd sizes, some strided."""

    def r(*shape, seed=0):
        return _randn(*shape, dtype=dtype, seed=seed)

    x = r(5, 37)
    wide = r(4, 3, 40)[..., :33]  # strided view: row stride 40
    w, b = r(33, seed=1), r(33, seed=2)
    return {
        "softmax": (ops.softmax_op, (x,)),
        "log_softmax": (ops.log_softmax_op, (wide,)),
        "layer_norm": (ops.layer_norm_op, (wide, w, b, 1e-5)),
        "rms_norm": (ops.rms_norm_op, (wide, w, 1e-6)),
        "dropout": (ops.dropout_op, (r(3, 41), 0.3, torch.tensor([1234]))),
        "cross_entropy": (ops.cross_entropy_op, (r(9, 11), _targets(9, 11), -100)),
        "matmul": (ops.matmul_op, (r(20, 17), r(19, 17, seed=1).t())),
        "bmm": (ops.bmm_op, (r(3, 17, 16), r(3, 16, 18, seed=1))),
        "linear": (ops.linear_op, (r(20, 17), r(19, 17, seed=1), r(19), "")),
        "linear_gelu": (ops.linear_op, (r(20, 17), r(19, 17, seed=1), None, "gelu")),
        "embedding": (ops.embedding_op, (r(10, 16), torch.randint(0, 10, (3, 5)))),
        "add_layer_norm": (ops.add_layer_norm_op, (wide, r(4, 3, 33, seed=3), w, b, 1e-5)),
        "add_rms_norm": (ops.add_rms_norm_op, (wide, r(4, 3, 33, seed=3), w, 1e-6)),
        "activation": (ops.activation_op, (r(2, 33), "gelu_tanh")),
        "swiglu": (ops.swiglu_op, (r(2, 33), r(2, 33, seed=1))),
        # the backward ops on their own (autograd calls them; compiled graphs hold them)
        "softmax_backward": (ops.softmax_backward_op, (x.softmax(-1), r(5, 37, seed=1))),
        "log_softmax_backward": (
            ops.log_softmax_backward_op,
            (x.log_softmax(-1), r(5, 37, seed=1)),
        ),
        "layer_norm_backward": (
            ops.layer_norm_backward_op,
            (r(4, 3, 33, seed=4), wide, w, *ops.layer_norm_op(wide, w, b, 1e-5)[1:]),
        ),
        "rms_norm_backward": (
            ops.rms_norm_backward_op,
            (r(4, 3, 33, seed=4), wide, w, ops.rms_norm_op(wide, w, 1e-6)[1]),
        ),
        "cross_entropy_backward": (
            ops.cross_entropy_backward_op,
            (r(9, 11), _targets(9, 11), r(9, 11).logsumexp(-1), -100),
        ),
        "linear_backward": (
            ops.linear_backward_op,
            (r(20, 19), r(20, 17, seed=1), r(19, 17, seed=2), True),
        ),
        "embedding_backward": (
            ops.embedding_backward_op,
            (r(3, 5, 16), torch.randint(0, 10, (3, 5)), 10),
        ),
        "add_layer_norm_backward": (
            ops.add_layer_norm_backward_op,
            (x, r(5, 37, seed=1), r(5, 37, seed=2), r(37), *_stats(5, 2, dtype)),
        ),
        "add_rms_norm_backward": (
            ops.add_rms_norm_backward_op,
            (x, r(5, 37, seed=1), r(5, 37, seed=2), r(37), _stats(5, 1, dtype)[0]),
        ),
        "activation_backward": (
            ops.activation_backward_op,
            (r(2, 33), r(2, 33, seed=1), "silu"),
        ),
        "swiglu_backward": (
            ops.swiglu_backward_op,
            (r(30), r(30, seed=1), r(30, seed=2)),
        ),
        "dropout_backward": (ops.dropout_backward_op, (r(3, 41), 0.3, torch.tensor([7]))),
    }


def _stats(rows, n, dtype):
    """``n`` statistics per row (a mean, a positive rstd), in the ops' statistics dtype."""
    stat = ops.stat_dtype(torch.empty(0, dtype=dtype))
    return [_randn(rows, seed=10 + i, dtype=stat).abs() + 0.5 for i in range(n)]


SAMPLES = {torch.float32: _samples(torch.float32), F64: _samples(F64)}


@pytest.mark.parametrize("dtype", list(SAMPLES), ids=str)
@pytest.mark.parametrize("name", list(SAMPLES[torch.float32]))
def test_opcheck(name, dtype):
    """Every op's fake (shapes, dtypes: f64 statistics for f64 data), schema and autograd
    registration, in f32 and f64."""
    op, args = SAMPLES[dtype][name]
    grads = not name.endswith("_backward")  # backward ops have no autograd (no double backward)
    args = tuple(
        a.detach().clone().requires_grad_(grads and a.is_floating_point())
        if isinstance(a, torch.Tensor)
        else a
        for a in args
    )
    torch.library.opcheck(op.custom_op, args)


# ---------------------------------------------------------------- gradcheck


def _f64(*shape, seed=0, scale=1.0):
    return _randn(*shape, dtype=F64, seed=seed, scale=scale).requires_grad_()


# Every op with a backward, in float64: the kernels compute in acc_t, which is f64 for f64
# data (statistics and partial sums too; dot() accumulates f64 in f64), so finite differences
# (torch's default step 1e-6) and the backward kernels agree to gradcheck's default tolerances.
GRADCHECK_F64 = {
    "softmax": lambda: (ttx.softmax, (_f64(3, 7),)),
    "softmax_dim0": lambda: (lambda x: ttx.softmax(x, 0), (_f64(5, 3),)),
    "log_softmax": lambda: (ttx.log_softmax, (_f64(3, 7, scale=2.0),)),
    "layer_norm": lambda: (
        lambda x, w, b: ttx.layer_norm(x, (6,), w, b),
        (_f64(3, 6), _f64(6, seed=1), _f64(6, seed=2)),
    ),
    "layer_norm_strided": lambda: (
        lambda x, w, b: ttx.layer_norm(x[:, 1:6], (5,), w, b),
        (_f64(3, 8), _f64(5, seed=1), _f64(5, seed=2)),
    ),
    "rms_norm": lambda: (lambda x, w: ttx.rms_norm(x, (9,), w), (_f64(4, 9), _f64(9, seed=1))),
    "cross_entropy": lambda: (
        lambda x: ttx.cross_entropy(x, torch.tensor([2, -100, 0, 4])),
        (_f64(4, 5, scale=2.0),),
    ),
    "cross_entropy_1x1": lambda: (
        lambda x: ttx.cross_entropy(x, torch.tensor([0])),
        (_f64(1, 1),),
    ),
    "matmul": lambda: (ttx.matmul, (_f64(5, 4), _f64(4, 3, seed=1))),
    "bmm": lambda: (ttx.matmul, (_f64(2, 3, 2), _f64(2, 2, 3, seed=1))),
    "linear": lambda: (
        lambda x, w, b: ttx.linear(x, w, b),
        (_f64(2, 3, 4), _f64(3, 4, seed=1), _f64(3, seed=2)),
    ),
    "linear_silu": lambda: (
        lambda x, w, b: ttx.linear(x, w, b, "silu"),
        (_f64(5, 4), _f64(3, 4, seed=1), _f64(3, seed=2)),
    ),
    "linear_gelu": lambda: (
        lambda x, w: ttx.linear(x, w, None, "gelu"),
        (_f64(5, 4), _f64(3, 4, seed=1)),
    ),
    "gelu": lambda: (lambda x: ttx.gelu(x), (_f64(3, 7, scale=2.0),)),
    "gelu_tanh": lambda: (lambda x: ttx.gelu(x, "tanh"), (_f64(3, 7, scale=2.0),)),
    "silu": lambda: (ttx.silu, (_f64(19, scale=2.0),)),
    "swiglu": lambda: (ttx.swiglu, (_f64(5, 6), _f64(5, 6, seed=1))),
    "dropout": lambda: (
        lambda x: ttx.dropout(x, 0.4, seed=torch.tensor([99])),
        (_f64(7, 9),),
    ),
    "embedding": lambda: (
        lambda w: ttx.embedding(torch.tensor([[1, 4, 1], [0, 4, 4]]), w),
        (_f64(5, 6),),
    ),
    "add_layer_norm": lambda: (
        lambda x, r, w, b: ttx.add_layer_norm(x, r, w, b),
        (_f64(3, 5), _f64(3, 5, seed=1), _f64(5, seed=2), _f64(5, seed=3)),
    ),
    "add_rms_norm": lambda: (
        lambda x, r, w: ttx.add_rms_norm(x, r, w),
        (_f64(3, 5), _f64(3, 5, seed=1), _f64(5, seed=2)),
    ),
    "attention": lambda: (
        lambda q, k, v: ttx.attention(q, k, v, causal=True),
        (_f64(1, 1, 4, 3), _f64(1, 1, 4, 3, seed=1), _f64(1, 1, 4, 3, seed=2)),
    ),
}


@pytest.mark.parametrize("name", list(GRADCHECK_F64))
def test_gradcheck_float64(name):
    fn, args = GRADCHECK_F64[name]()
    assert torch.autograd.gradcheck(fn, args)


def test_float64_ops_compute_in_float64():
    """What gradcheck relies on, checked directly: f64 data in, f64 results out and the
    statistics in f64, within 1e-13 of torch's float64 ops (an f32 step anywhere would show
    as an error near 1e-7)."""
    x = _randn(6, 37, dtype=F64, scale=3.0)
    w, b = _randn(37, dtype=F64, seed=1), _randn(37, dtype=F64, seed=2)
    y, mean, rstd = ops.layer_norm_op(x, w, b, 0.0)
    assert mean.dtype == rstd.dtype == F64
    torch.testing.assert_close(y, F.layer_norm(x, (37,), w, b, 0.0), rtol=1e-13, atol=1e-13)
    torch.testing.assert_close(rstd, 1 / x.var(-1, unbiased=False).sqrt(), rtol=1e-13, atol=0)
    loss, lse = ops.cross_entropy_op(x, _targets(6, 37), -100)
    assert loss.dtype == lse.dtype == F64
    torch.testing.assert_close(loss, F.cross_entropy(x, _targets(6, 37)), rtol=1e-14, atol=0)
    torch.testing.assert_close(ttx.softmax(x), x.softmax(-1), rtol=1e-14, atol=1e-16)
    a, m = _randn(33, 40, dtype=F64), _randn(40, 17, dtype=F64, seed=1)
    torch.testing.assert_close(ttx.matmul(a, m), a @ m, rtol=1e-14, atol=1e-13)


# ---------------------------------------------------------------- against torch

# The bound of assert_close_elementwise for a result of dtype T computed in C (f32; f64 for
# f64) from inputs exact in T: 2 unit roundoffs of T of the element itself (its final rounding
# plus C's error, far below it), ROW unit roundoffs of C of the largest element of its row
# (these ops reduce over the last dimension: an element that is a difference of terms of the
# row's size, a layer-norm output near zero or a gradient, errs by C's rounding of the row's
# terms, not of itself; 64 covers rows of 1001 terms summed as trees, exp and log to a few
# ulp; for f64 the interpreter's f64 log_softmax of 1001 columns measured 300: the row's lse
# error, |lse| ~ 7, in every element, as large as torch's own in f64), and twice the largest
# error in the row of torch's own computation in T (the op's conditioning: a backward that
# reads its saved output rounded to T inherits that rounding). A gradient's row magnitude is
# at least the incoming gradient's (``floor``): a one-element softmax's gradient is exactly 0,
# which torch's float64 misses by u * |g|.
ROW = {torch.float64: 2048.0}  # else 64 (f32)
COMPUTE = {torch.float64: torch.float64}  # else f32


def _rowmax(t):
    """max |t| over the last dimension, kept as a dimension (the whole tensor for a scalar)."""
    t = t.detach().double().abs()
    return t.amax(-1, keepdim=True) if t.dim() else t


def _close(got, want, peer, what, floor=0.0, reduction=64):
    """``got`` against the float64 reference ``want``, element by element (the bound above);
    NaN exactly where ``want`` is NaN (an all-ignored loss). ``reduction``: the longest sum an
    element is (a product's K); its rounding grows with the length, past ROW's 64 terms."""
    assert got.shape == want.shape, (got.shape, want.shape)
    nan = want.isnan()
    want0 = want.detach().double().masked_fill(nan, 0.0)
    u_compute = UNIT_ROUNDOFF[dtype_name(COMPUTE.get(got.dtype, torch.float32))]
    u = UNIT_ROUNDOFF[dtype_name(got.dtype)]
    peer_err = (peer.detach().double() - want.detach().double()).masked_fill(nan, 0.0)
    terms = ROW.get(got.dtype, 64.0) * max(1.0, reduction / 64)
    row = terms * u_compute / (2 * u)  # in units of 2u, the ulps below
    scale = want0.abs() + row * _rowmax(want0).clamp(min=floor)
    # the peer's error, the largest of its row, at every element of the row
    row_peer = want.detach().double() + _rowmax(peer_err).expand_as(want0)
    assert_close_elementwise(got, want, got.dtype, ulps=2.0, scale=scale, peer=row_peer, what=what)


def _peer(theirs, inputs):
    """``theirs`` by torch in the inputs' dtype, where the CPU has the op in it; else in f32
    rounded to the dtype once (its output and the inputs' gradients)."""
    p = [x.detach().clone().requires_grad_(x.is_floating_point()) for x in inputs]
    try:
        return p, theirs(*p), lambda x: x
    except RuntimeError:  # "not implemented for 'Half'"
        p = [x.detach().float().requires_grad_() if x.is_floating_point() else x for x in inputs]
        dtype = next(x.dtype for x in inputs if x.is_floating_point())
        return p, theirs(*p).to(dtype), lambda x: x.to(dtype)


def _both(ours, theirs, inputs, seed=7):
    """Forward and backward of ``ours`` and ``theirs`` (the same function in plain torch) on
    copies of ``inputs``: ours against theirs in float64 on the same values, element by element
    (_close), theirs in the inputs' dtype the peer; the output and every float input's
    gradient."""
    a = [x.detach().clone().requires_grad_(x.is_floating_point()) for x in inputs]
    r = [x.detach().double().requires_grad_() if x.is_floating_point() else x for x in inputs]
    ya, yr = ours(*a), theirs(*r)
    p, yp, rounded = _peer(theirs, inputs)
    _close(ya, yr, yp, "output")
    dtype = ya.dtype
    g = _randn(*yr.shape, seed=seed).to(dtype) if yr.dim() else torch.tensor(1.7, dtype=dtype)
    ya.backward(g)
    yr.backward(g.double())
    yp.backward(g.to(yp.dtype))
    for xa, xr, xp in zip(a, r, p, strict=True):
        if xr.grad is not None:
            floor = float(g.detach().double().abs().max())
            _close(xa.grad, xr.grad, rounded(xp.grad), "gradient", floor)


DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)


SHAPES = ((1, 1), (3, 1001), (2, 5, 64))


def _rows_of(shape, dtype, seed=0, scale=2.0):
    return _randn(*shape, dtype=dtype, seed=seed, scale=scale)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_row_ops_against_torch(shape, dtype):
    x = _rows_of(shape, dtype)
    c = shape[-1]
    w, b = _randn(c, dtype=dtype, seed=1) + 1, _randn(c, dtype=dtype, seed=2)
    r = _rows_of(shape, dtype, seed=3)
    _both(ttx.softmax, lambda x: torch.softmax(x, -1), [x])
    _both(ttx.log_softmax, lambda x: torch.log_softmax(x, -1), [x])
    _both(
        lambda x, w, b: ttx.layer_norm(x, (c,), w, b),
        lambda x, w, b: F.layer_norm(x, (c,), w, b),
        [x, w, b],
    )
    _both(
        lambda x, w: ttx.rms_norm(x, (c,), w, 1e-6),
        lambda x, w: F.rms_norm(x, (c,), w, 1e-6),
        [x, w],
    )
    _both(
        lambda x, r, w, b: sum(ttx.add_layer_norm(x, r, w, b)),
        lambda x, r, w, b: sum(_ref_add_layer_norm(x, r, w, b)),
        [x, r, w, b],
    )
    _both(
        lambda x, r, w: sum(ttx.add_rms_norm(x, r, w)),
        lambda x, r, w: sum(_ref_add_rms_norm(x, r, w)),
        [x, r, w],
    )


def _ref_add_layer_norm(x, r, w, b):
    h = x + r
    return F.layer_norm(h, (h.shape[-1],), w, b), h


def _ref_add_rms_norm(x, r, w):
    h = x + r
    return F.rms_norm(h, (h.shape[-1],), w, 1e-6), h


@pytest.mark.parametrize("dtype", [torch.float32, F64], ids=str)
def test_long_rows_take_the_looped_kernels(dtype):
    """Rows longer than one tile (nn.MAX_ROW_BLOCK): the chunked online-softmax kernels."""
    x = _rows_of((2, 16411), dtype)
    _both(ttx.softmax, lambda x: torch.softmax(x, -1), [x])
    _both(ttx.log_softmax, lambda x: torch.log_softmax(x, -1), [x])


def test_row_ops_take_strided_views():
    base = _randn(6, 2, 50)
    x = base[:, 1, 3:40]  # row stride 100, offset view
    xt = _randn(37, 6).t()  # last dimension not contiguous: copied once
    for view in (x, xt):
        _both(ttx.softmax, lambda x: torch.softmax(x, -1), [view])
        _both(lambda x: ttx.softmax(x, 0), lambda x: torch.softmax(x, 0), [view])
        w = _randn(view.shape[-1], seed=1)
        _both(
            lambda x, w: ttx.layer_norm(x, (w.shape[0],), w),
            lambda x, w: F.layer_norm(x, (w.shape[0],), w),
            [view, w],
        )


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("rows,classes", [(1, 1), (7, 1001), (33, 17)])
def test_cross_entropy_against_torch(rows, classes, dtype):
    logits = _randn(rows, classes, dtype=dtype, scale=2.0)
    t = _targets(rows, classes)
    _both(
        lambda x: ttx.cross_entropy(x, t),
        lambda x: F.cross_entropy(x, t),
        [logits],
    )


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("rows,classes", [(1, 1), (5, 1), (1, 7)])
def test_cross_entropy_edge_rows(rows, classes, dtype):
    """One row, one class (loss 0, gradient 0) and every row ignored (loss NaN, gradient 0),
    as torch."""
    logits = _randn(rows, classes, dtype=dtype, scale=3.0)
    for t in (_targets(rows, classes, ignore=False), torch.full((rows,), -100)):
        _both(
            lambda x, t=t: ttx.cross_entropy(x, t),
            lambda x, t=t: F.cross_entropy(x, t),
            [logits],
        )


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("activation", [None, "gelu", "gelu_tanh", "relu", "silu"])
def test_linear_against_torch(activation, dtype):
    x, w, b = _randn(2, 17, 33, dtype=dtype), _randn(24, 33, dtype=dtype, seed=1), _randn(24)
    b = b.to(dtype)
    act = {
        None: lambda y: y,
        "gelu": F.gelu,
        "gelu_tanh": lambda y: F.gelu(y, approximate="tanh"),
        "relu": F.relu,
        "silu": F.silu,
    }[activation]
    _both(
        lambda x, w, b: ttx.linear(x, w, b, activation),
        lambda x, w, b: act(F.linear(x, w, b)),
        [x, w, b],
    )


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_matmul_against_torch(dtype):
    a, b = _randn(19, 33, dtype=dtype), _randn(40, 21, dtype=dtype, seed=1)[7:40, ::1]
    _both(ttx.matmul, lambda a, b: a @ b, [a, b])
    a3, b3 = _randn(3, 17, 16, dtype=dtype), _randn(3, 18, 16, dtype=dtype).transpose(1, 2)
    _both(ttx.matmul, lambda a, b: torch.bmm(a, b), [a3, b3])


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("n", [1, 1001])
def test_elementwise_against_torch(n, dtype):
    x, y = _randn(n, dtype=dtype, scale=3.0), _randn(n, dtype=dtype, seed=1)
    for ours, theirs in (
        (ttx.gelu, F.gelu),
        (lambda x: ttx.gelu(x, "tanh"), lambda x: F.gelu(x, approximate="tanh")),
        (ttx.silu, F.silu),
        (ttx.relu, F.relu),
    ):
        _both(ours, theirs, [x])
    _both(ttx.swiglu, lambda g, u: F.silu(g) * u, [x, y])


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_embedding_against_torch(dtype):
    w = _randn(50, 19, dtype=dtype)
    idx = torch.randint(0, 50, (4, 33), generator=_gen(3))
    idx[0, :5] = 7  # repeated indices: their gradients add
    _both(lambda w: ttx.embedding(idx, w), lambda w: F.embedding(idx, w), [w])


def test_embedding_out_of_range_reads_nan_unchecked():
    w = _randn(4, 3)
    old = ttx.set_index_checks(False)  # checked, it raises (tests/test_torch_validation.py)
    try:
        out = ttx.embedding(torch.tensor([0, 4, -1]), w)
    finally:
        ttx.set_index_checks(old)
    assert torch.equal(out[0], w[0]) and out[1:].isnan().all()


def test_dropout_mask_and_gradient():
    x = _randn(64, 65).requires_grad_()
    seed = torch.tensor([42])
    y = ttx.dropout(x, 0.25, seed=seed)
    kept = y != 0
    assert 0.65 < kept.float().mean().item() < 0.85
    torch.testing.assert_close(y[kept], x[kept] / 0.75)
    y.backward(torch.ones_like(y))
    torch.testing.assert_close(x.grad, kept.float() / 0.75)
    assert torch.equal(ttx.dropout(x, 0.25, seed=seed), y)  # the seed decides the mask
    assert not torch.equal(ttx.dropout(x, 0.25), y)
    assert ttx.dropout(x, 0.25, training=False) is x


def test_errors_name_the_problem():
    with pytest.raises(TeenyError, match="last dimension only"):
        ttx.layer_norm(_randn(3, 4), (3, 4))
    with pytest.raises(TeenyError, match="reduction must be 'mean', 'sum' or 'none'"):
        ttx.cross_entropy(_randn(3, 4), torch.tensor([0, 1, 2]), reduction="max")
    with pytest.raises(TeenyError, match="f32, f16, bf16"):
        ttx.softmax(torch.ones(3, 4, dtype=torch.int32))


def test_eager_calls_skip_the_dispatcher_and_traced_calls_do_not(monkeypatch):
    """A plain eager call runs the op's implementation directly (with the same autograd
    formulas); under a dispatch mode (here fake tensors) the call goes to the custom op."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    calls = []
    real = ops.softmax_op.custom_op

    def counting(*args):
        calls.append(args)
        return real(*args)

    monkeypatch.setattr(ops.softmax_op, "custom_op", counting)
    x = _randn(3, 7).requires_grad_()
    y = ttx.softmax(x)
    (y * _randn(3, 7, seed=1)).sum().backward()
    assert calls == [] and x.grad is not None
    expected = torch.softmax(x.detach(), -1)
    torch.testing.assert_close(y.detach(), expected)
    with FakeTensorMode() as mode:
        ttx.softmax(mode.from_tensor(torch.randn(3, 7)))
    assert len(calls) == 1
    # parameters are plain tensors to it too: a module's call takes the eager path
    linear_calls = []
    real_linear = ops.linear_op.custom_op
    monkeypatch.setattr(
        ops.linear_op, "custom_op", lambda *a: linear_calls.append(a) or real_linear(*a)
    )
    layer = ttx.Linear(7, 5)
    layer(x).sum().backward()
    assert linear_calls == [] and layer.weight.grad is not None


# ---------------------------------------------------------------- torch.compile


def _block(x, w1, b1, w2, ln_w, ln_b, emb, idx, targets):
    h = ttx.embedding(idx, emb) + x
    y, h = ttx.add_layer_norm(h, x, ln_w, ln_b)
    y = ttx.linear(y, w1, b1, "gelu")
    y = ttx.dropout(y, 0.1, seed=torch.tensor([5]))
    y = ttx.softmax(ttx.linear(y, w2), -1) + ttx.rms_norm(h, (h.shape[-1],))
    return ttx.cross_entropy(y.reshape(-1, y.shape[-1]), targets)


def _block_inputs():
    return [
        _randn(2, 5, 16),
        _randn(24, 16, seed=1),
        _randn(24, seed=2),
        _randn(16, 24, seed=3),
        _randn(16, seed=4),
        _randn(16, seed=5),
        _randn(11, 16, seed=6),
        torch.randint(0, 11, (2, 5), generator=_gen(7)),
        _targets(10, 16),
    ]


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_compile_fullgraph(backend):
    graphs = []

    def counting(gm, example_inputs):
        graphs.append(gm)
        return torch._dynamo.backends.registry.lookup_backend(backend)(gm, example_inputs)

    torch._dynamo.reset()
    compiled = torch.compile(_block, fullgraph=True, backend=counting)
    inputs = _block_inputs()
    a = [x.clone().requires_grad_(x.is_floating_point()) for x in inputs]
    b = [x.clone().requires_grad_(x.is_floating_point()) for x in inputs]
    la, lb = compiled(*a), _block(*b)
    assert len(graphs) == 1
    assert torch.equal(la, lb)
    la.backward()
    lb.backward()
    for xa, xb in zip(a, b, strict=True):
        if xb.grad is not None:
            assert torch.equal(xa.grad, xb.grad)
    ops_in_graph = {str(n.target) for n in graphs[0].graph.nodes if n.op == "call_function"}
    assert any("teeny_tx" in t for t in ops_in_graph)


@pytest.mark.skipif(shutil.which("g++") is None, reason="inductor on the CPU needs g++")
def test_compile_inductor_gets_explicit_fallbacks():
    """Under inductor (with the fallbacks of inductor_fallbacks) the compiled block computes
    what the eager one does, gradients included."""
    torch._dynamo.reset()
    compiled = torch.compile(_block, fullgraph=True, backend="inductor")
    inputs = _block_inputs()
    a = [x.clone().requires_grad_(x.is_floating_point()) for x in inputs]
    b = [x.clone().requires_grad_(x.is_floating_point()) for x in inputs]
    la, lb = compiled(*a), _block(*b)
    la.backward()
    lb.backward()
    torch.testing.assert_close(la, lb)
    for xa, xb in zip(a, b, strict=True):
        if xb.grad is not None:
            torch.testing.assert_close(xa.grad, xb.grad)


_FALLBACKS_PROBE = """
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
import teeny_tx.torch as ttx
from teeny_tx.library import inductor_fallbacks
from torch._inductor import lowering
ops = [getattr(torch.ops.teeny_tx, q.split("::")[1]).default for q in inductor_fallbacks.OPS]
before = sum(op in lowering.lowerings for op in ops)
with FakeTensorMode() as mode:
    ttx.softmax(mode.from_tensor(torch.randn(3, 5)), -1)
print(len(ops), before, sum(op in lowering.lowerings for op in ops))
"""


def test_first_fake_call_registers_inductor_fallbacks():
    """Once inductor is imported, the first fake-tensor call gives every teeny_tx op its
    explicit fallback (in a fresh interpreter: no earlier compile has made them)."""
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-c", _FALLBACKS_PROBE], capture_output=True, text=True, check=True
    )
    n_ops, before, after = map(int, out.stdout.split())
    assert n_ops >= 20
    assert (before, after) == (0, n_ops)


# ---------------------------------------------------------------- modules, optimizer


@pytest.mark.parametrize(
    "ours,theirs,x",
    [
        (lambda: ttx.LayerNorm(33), lambda: torch.nn.LayerNorm(33), lambda: _randn(4, 33)),
        (lambda: ttx.RMSNorm(33), lambda: torch.nn.RMSNorm(33, eps=1e-6), lambda: _randn(4, 33)),
        (lambda: ttx.Linear(33, 7), lambda: torch.nn.Linear(33, 7), lambda: _randn(2, 4, 33)),
        (
            lambda: ttx.Linear(33, 7, bias=False),
            lambda: torch.nn.Linear(33, 7, bias=False),
            lambda: _randn(4, 33),
        ),
        (
            lambda: ttx.Embedding(10, 6),
            lambda: torch.nn.Embedding(10, 6),
            lambda: torch.randint(0, 10, (3, 4), generator=_gen(1)),
        ),
        (lambda: ttx.GELU("tanh"), lambda: torch.nn.GELU("tanh"), lambda: _randn(4, 9)),
        (lambda: ttx.Dropout(0.3).eval(), lambda: torch.nn.Dropout(0.3).eval(), lambda: _randn(9)),
    ],
)
def test_modules_match_torch(ours, theirs, x):
    torch.manual_seed(0)
    reference = theirs()
    with torch.no_grad():
        for p in reference.parameters():
            p.copy_(_randn(*p.shape, seed=p.numel()))
    module = ours()
    assert list(module.state_dict()) == list(reference.state_dict())
    module.load_state_dict(reference.state_dict())
    inp = x()
    torch.testing.assert_close(module(inp), reference(inp), rtol=2e-5, atol=2e-5)
    assert list(reference.state_dict()) == list(module.state_dict())


def test_cross_entropy_loss_module():
    logits, t = _randn(6, 9).requires_grad_(), _targets(6, 9)
    loss = ttx.CrossEntropyLoss()(logits, t)
    torch.testing.assert_close(loss, torch.nn.CrossEntropyLoss()(logits, t))
    w = torch.rand(9, generator=_gen(5)) + 0.1
    for kw in ({"reduction": "sum"}, {"reduction": "none"}, {"weight": w, "label_smoothing": 0.1}):
        ours = ttx.CrossEntropyLoss(**kw)(logits, t)
        torch.testing.assert_close(ours, torch.nn.CrossEntropyLoss(**kw)(logits, t))


def test_attention_matches_torch_sdpa():
    torch.manual_seed(0)
    attn = ttx.Attention(32, 4)
    x = _randn(2, 9, 32).requires_grad_()
    y = attn(x)
    qkv = F.linear(x, attn.qkv.weight, attn.qkv.bias).view(2, 9, 3, 4, 8).permute(2, 0, 3, 1, 4)
    ref = F.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], is_causal=True)
    ref = F.linear(ref.transpose(1, 2).reshape(2, 9, 32), attn.proj.weight, attn.proj.bias)
    torch.testing.assert_close(y, ref, rtol=1e-5, atol=1e-5)
    y.sum().backward()
    assert attn.qkv.weight.grad is not None


@pytest.mark.parametrize("flat", [True, False], ids=["flat", "per-tensor"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_adamw_matches_torch(dtype, flat):
    params = [_randn(33, 5, dtype=dtype), _randn(1001, dtype=dtype, seed=1)]
    ours = [p.clone().requires_grad_() for p in params]
    theirs = [p.clone().requires_grad_() for p in params]
    settings = {"lr": 1e-2, "betas": (0.8, 0.99), "eps": 1e-8, "weight_decay": 0.1}
    opt_a = ttx.AdamW(ours, **settings, flat=flat)
    opt_b = torch.optim.AdamW(theirs, **settings)
    for step in range(4):
        for a, b in zip(ours, theirs, strict=True):
            g = _randn(*a.shape, dtype=dtype, seed=10 + step)
            a.grad, b.grad = g.clone(), g.clone()
        opt_a.step()
        opt_b.step()
    tol = 1e-6 if dtype == torch.float32 else 1e-12
    for a, b in zip(ours, theirs, strict=True):
        torch.testing.assert_close(a, b, rtol=tol, atol=tol)
    state_a, state_b = opt_a.state[ours[0]], opt_b.state[theirs[0]]
    torch.testing.assert_close(state_a["exp_avg_sq"].to(dtype), state_b["exp_avg_sq"])


def _two_layers(dtype, seed):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(9, 17), torch.nn.Tanh(), torch.nn.Linear(17, 3))
    model = model.to(dtype)
    model.unused = torch.nn.Parameter(_randn(5, dtype=torch.float32, seed=9))  # another dtype
    return model


def test_adamw_flat_buckets_train_like_torch():
    """A training loop (backward accumulating into the buckets, zero_grad, an lr change, a
    parameter without a gradient, a state-dict round trip) steps as torch.optim.AdamW does
    with gradients that start at zero and zero_grad(set_to_none=False) (a bucket's rule); a
    gradient set to None by hand skips its parameter in both. Each bucket (one per dtype) is
    one flat buffer, and the parameters are views of it."""
    dtype = torch.float64
    ours, theirs = _two_layers(dtype, 0), _two_layers(dtype, 0)
    theirs.load_state_dict(ours.state_dict())
    settings = {"lr": 1e-2, "betas": (0.9, 0.95), "weight_decay": 0.1}
    opt_a = ttx.AdamW(ours.parameters(), **settings)
    for p in theirs.parameters():
        p.grad = torch.zeros_like(p)
    opt_b = torch.optim.AdamW(theirs.parameters(), **settings)
    for step in range(7):
        x = _randn(11, 9, dtype=dtype, seed=20 + step)
        for model, opt in ((ours, opt_a), (theirs, opt_b)):
            opt.zero_grad(set_to_none=False)
            loss = model(x).square().mean()
            if step == 3:  # the unused parameter gets a gradient in one step only
                loss = loss + model.unused.square().sum()
            loss.backward()
            if step == 5:  # by hand: not stepped, in either
                model[0].bias.grad = None
            if step == 4:
                opt.param_groups[0]["lr"] = 3e-3
            opt.step()
        if step == 2:  # resume from a state dict: moments go back into the bucket
            saved = opt_a.state_dict()
            opt_a = ttx.AdamW(ours.parameters(), **settings)
            opt_a.load_state_dict(saved)
        for a, b in zip(ours.parameters(), theirs.parameters(), strict=True):
            tol = 1e-12 if a.dtype == torch.float64 else 1e-6
            torch.testing.assert_close(a, b, rtol=tol, atol=tol)
    buckets = [flat for flats in opt_a._buckets for flat in flats]
    assert sorted(len(f.params) for f in buckets) == [1, 4]
    four = next(f for f in buckets if len(f.params) == 4)
    assert ours[0].weight.data_ptr() == four.param.data_ptr()  # views of the bucket's buffer
    assert ours[2].bias.data_ptr() == four.param.data_ptr() + (four.param.numel() - 3) * 8


def test_adamw_flat_steps_each_bucket_in_one_launch(monkeypatch):
    """Four parameters of one dtype: one adamw_step launch per step, not four."""
    from teeny_tx.library import fused

    launches = []
    real = fused.adamw_step
    monkeypatch.setattr(fused, "adamw_step", lambda *a, **k: launches.append(a) or real(*a, **k))
    model = _two_layers(torch.float32, 1)
    del model.unused
    opt = ttx.AdamW(model.parameters(), lr=1e-3)
    for _ in range(2):
        opt.zero_grad()
        model(_randn(4, 9)).sum().backward()
        opt.step()
    total = sum(p.numel() for p in model.parameters())
    assert len(launches) == 2 and tuple(launches[0][0].shape) == (total,)


@pytest.mark.parametrize("dtype,tol", [(torch.float16, 3e-3), (torch.bfloat16, 2e-2)], ids=str)
def test_fused_attention_against_sdpa(dtype, tol):
    q, k, v = (_randn(1, 2, 37, 64, dtype=dtype, seed=s).requires_grad_() for s in range(3))
    y = ttx.attention(q, k, v, causal=True)
    refs = [t.detach().float().requires_grad_() for t in (q, k, v)]
    ref = F.scaled_dot_product_attention(*refs, is_causal=True)
    torch.testing.assert_close(y.float(), ref, rtol=tol, atol=tol)
    g = _randn(*y.shape, seed=5).to(dtype)
    y.backward(g)
    ref.backward(g.float())
    for t, r in zip((q, k, v), refs, strict=True):
        torch.testing.assert_close(t.grad.float(), r.grad, rtol=2 * tol, atol=2 * tol)
    torch.library.opcheck(
        sdpa.attention_op.custom_op,
        (
            q.detach().transpose(1, 2),
            k.detach().transpose(1, 2),
            v.detach().transpose(1, 2),
            True,
            0.125,
            False,
            -1,
            -1,
            0.0,
            None,
        ),
    )
