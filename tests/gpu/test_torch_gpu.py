"""teeny_tx.torch on CUDA tensors: every op forward and backward against torch's own, for each
dtype, odd sizes and strided views; under torch.compile(fullgraph=True) (aot_eager and
inductor); captured in a CUDA graph and replayed on new data; on a side stream; the capture of
a cold op failing with a clear error; a user's op (tests/kernels/bias_tanh.c); AdamW against
torch.optim.AdamW; the GPT at full size: step-1 gradients and a few losses against torch."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("torch sees no CUDA device", allow_module_level=True)

import torch.nn.functional as F  # noqa: E402

import teeny_tx.torch as ttx  # noqa: E402
from teeny_tx import TeenyError  # noqa: E402
from teeny_tx.library import linalg, nn  # noqa: E402
from teeny_tx.library import torch_ops as ops  # noqa: E402

from ..test_torch import _close  # noqa: E402
from ..test_torch_graph_ops import bias_tanh  # noqa: E402

DEV = "cuda"
DTYPES = (torch.float32, torch.float16, torch.bfloat16)


@pytest.fixture(autouse=True)
def _ieee_f32_untuned(monkeypatch):
    """torch's references multiply f32 in IEEE f32, as teeny_tx does; the library launches
    its default configs (no autotuning of every shape these tests make)."""
    old = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    monkeypatch.setattr(linalg, "TUNE", False)
    if hasattr(nn, "TUNE"):
        monkeypatch.setattr(nn, "TUNE", False)
    yield
    torch.backends.cuda.matmul.allow_tf32 = old


def _randn(*shape, dtype=torch.float32, seed=0, scale=1.0):
    g = torch.Generator(device=DEV).manual_seed(seed)
    return (scale * torch.randn(*shape, generator=g, device=DEV)).to(dtype)


def _both(ours, theirs, inputs, dtype=None, seed=9, reduction=64):
    """Forward and backward of ``ours`` against ``theirs`` (plain torch) in float64 on the same
    values, element by element (tests/test_torch.py's _close: unit roundoffs of the result's
    dtype, the row's compute error, and twice the error of ``theirs`` run by torch in the
    inputs' dtype, the peer); the output and every float input's gradient."""
    a = [x.detach().clone().requires_grad_(x.is_floating_point()) for x in inputs]
    r = [x.detach().double().requires_grad_() if x.is_floating_point() else x for x in inputs]
    p = [x.detach().clone().requires_grad_(x.is_floating_point()) for x in inputs]
    ya, yr, yp = ours(*a), theirs(*r), theirs(*p)
    _close(ya, yr, yp, "output", reduction=reduction)
    out = ya.dtype
    g = _randn(*yr.shape, seed=seed).to(out) if yr.dim() else torch.tensor(1.3, device=DEV)
    ya.backward(g.to(out))
    yr.backward(g.double())
    yp.backward(g.to(yp.dtype))
    floor = float(g.double().abs().max())
    for xa, xr, xp in zip(a, r, p, strict=True):
        if xr.grad is not None:
            _close(xa.grad, xr.grad, xp.grad, "gradient", floor, reduction)


def _cases(dtype, shape):
    """(name, ours, theirs, inputs) for every op at ``shape`` [..., C]."""
    c = shape[-1]
    x, r = _randn(*shape, dtype=dtype, scale=2.0), _randn(*shape, dtype=dtype, seed=1)
    w, b = _randn(c, dtype=dtype, seed=2) + 1, _randn(c, dtype=dtype, seed=3)
    f = lambda fn: fn  # noqa: E731  (theirs: plain torch, run in float64 and in dtype)
    rows = x.reshape(-1, c)
    t = torch.randint(0, c, (rows.shape[0],), device=DEV)
    if rows.shape[0] > 2:  # (a single row ignored would leave nothing to average: NaN)
        t[::3] = -100
    wl = _randn(24, c, dtype=dtype, seed=4)
    idx = torch.randint(0, 50, (3, 7), device=DEV)
    return [
        ("softmax", ttx.softmax, f(lambda x: torch.softmax(x, -1)), [x]),
        ("log_softmax", ttx.log_softmax, f(lambda x: torch.log_softmax(x, -1)), [x]),
        (
            "layer_norm",
            lambda x, w, b: ttx.layer_norm(x, (c,), w, b),
            f(lambda x, w, b: F.layer_norm(x, (c,), w, b)),
            [x, w, b],
        ),
        (
            "rms_norm",
            lambda x, w: ttx.rms_norm(x, (c,), w),
            f(lambda x, w: F.rms_norm(x, (c,), w, 1e-6)),
            [x, w],
        ),
        (
            "add_layer_norm",
            lambda x, r, w, b: ttx.add_layer_norm(x, r, w, b)[0],
            lambda x, r, w, b: f(lambda h, w, b: F.layer_norm(h, (c,), w, b))(x + r, w, b),
            [x, r, w, b],
        ),
        (
            "add_rms_norm",
            lambda x, r, w: ttx.add_rms_norm(x, r, w)[0],
            lambda x, r, w: f(lambda h, w: F.rms_norm(h, (c,), w, 1e-6))(x + r, w),
            [x, r, w],
        ),
        (
            "cross_entropy",
            lambda x: ttx.cross_entropy(x, t),
            lambda x: F.cross_entropy(x, t),
            [rows],
        ),
        (
            "linear_gelu",
            lambda x, w: ttx.linear(x, w, None, "gelu"),
            f(lambda x, w: F.gelu(F.linear(x, w))),
            [x, wl],
        ),
        ("matmul", ttx.matmul, f(torch.matmul), [rows, wl.t()]),
        ("gelu", ttx.gelu, f(F.gelu), [x]),
        ("silu", ttx.silu, f(F.silu), [x]),
        ("swiglu", ttx.swiglu, f(lambda g, u: F.silu(g) * u), [x, r]),
        (
            "embedding",
            lambda w: ttx.embedding(idx, w),
            lambda w: F.embedding(idx, w),
            [_randn(50, c, dtype=dtype)],
        ),
    ]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(1, 1), (3, 1001), (2, 33, 64)], ids=str)
def test_every_op_against_torch(shape, dtype):
    for name, ours, theirs, inputs in _cases(dtype, shape):
        # products sum over K = the rows' length (C) or, for the weights' gradients, the rows
        k = max(shape[-1], 64) if name in ("linear_gelu", "matmul") else 64
        try:
            _both(ours, theirs, inputs, dtype, reduction=k)
        except AssertionError as err:
            raise AssertionError(f"{name}: {err}") from None


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("rows,classes", [(1, 1), (5, 1), (1, 7), (4, 1001)])
def test_cross_entropy_edge_rows(rows, classes, dtype):
    """One row, one class (loss 0, gradient 0) and every row ignored (loss NaN, gradient 0),
    as torch."""
    x = _randn(rows, classes, dtype=dtype, scale=3.0)
    kept = torch.randint(0, classes, (rows,), device=DEV)
    for t in (kept, torch.full((rows,), -100, device=DEV)):
        _both(
            lambda x, t=t: ttx.cross_entropy(x, t),
            lambda x, t=t: F.cross_entropy(x, t),
            [x],
            dtype,
        )


def test_float64_row_ops_against_torch():
    """f64 on the GPU: the row kernels compute in f64 (acc_t), statistics included."""
    f64 = torch.float64
    x, r = _randn(3, 1001, dtype=f64, scale=2.0), _randn(3, 1001, dtype=f64, seed=1)
    w, b = _randn(1001, dtype=f64, seed=2) + 1, _randn(1001, dtype=f64, seed=3)
    t = torch.randint(0, 1001, (3,), device=DEV)
    for ours, theirs, inputs in (
        (ttx.softmax, lambda x: torch.softmax(x, -1), [x]),
        (ttx.log_softmax, lambda x: torch.log_softmax(x, -1), [x]),
        (
            lambda x, w, b: ttx.layer_norm(x, (1001,), w, b),
            lambda x, w, b: F.layer_norm(x, (1001,), w, b),
            [x, w, b],
        ),
        (
            lambda x, w: ttx.rms_norm(x, (1001,), w),
            lambda x, w: F.rms_norm(x, (1001,), w, 1e-6),
            [x, w],
        ),
        (
            lambda x, r, w, b: ttx.add_layer_norm(x, r, w, b)[0],
            lambda x, r, w, b: F.layer_norm(x + r, (1001,), w, b),
            [x, r, w, b],
        ),
        (lambda x: ttx.cross_entropy(x, t), lambda x: F.cross_entropy(x, t), [x]),
        (ttx.gelu, F.gelu, [x]),
    ):
        _both(ours, theirs, inputs, f64)
    with pytest.raises(TeenyError, match="f64 products run on the interpreter only"):
        ttx.matmul(x, x.t())


def test_strided_views():
    x = _randn(8, 2, 100)[:, 1, 5:70]
    _both(ttx.softmax, lambda x: torch.softmax(x, -1), [x], torch.float32)
    _both(lambda x: ttx.softmax(x, 0), lambda x: torch.softmax(x, 0), [x], torch.float32)
    w = _randn(65, seed=1)
    _both(
        lambda x, w: ttx.layer_norm(x, (65,), w),
        lambda x, w: F.layer_norm(x, (65,), w),
        [x.t().contiguous().t()[:, :65], w],
        torch.float32,
    )


def _model_fn(x, w1, w2, ln_w, ln_b, t):
    h = ttx.layer_norm(x, (x.shape[-1],), ln_w, ln_b)
    h = ttx.linear(h, w1, None, "gelu")
    y, _ = ttx.add_layer_norm(ttx.linear(h, w2), x, ln_w, ln_b)
    return ttx.cross_entropy(ttx.softmax(y, -1).reshape(-1, y.shape[-1]) * 3.0, t)


def _model_inputs():
    t = torch.randint(0, 64, (4 * 33,), device=DEV)
    return [
        _randn(4, 33, 64),
        _randn(128, 64, seed=1),
        _randn(64, 128, seed=2),
        _randn(64, seed=3) + 1,
        _randn(64, seed=4),
        t,
    ]


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_compile_fullgraph(backend):
    torch._dynamo.reset()
    compiled = torch.compile(_model_fn, fullgraph=True, backend=backend)
    inputs = _model_inputs()
    a = [x.clone().requires_grad_(x.is_floating_point()) for x in inputs]
    b = [x.clone().requires_grad_(x.is_floating_point()) for x in inputs]
    la, lb = compiled(*a), _model_fn(*b)
    torch.testing.assert_close(la, lb, rtol=1e-5, atol=1e-6)
    la.backward()
    lb.backward()
    for xa, xb in zip(a, b, strict=True):
        if xb.grad is not None:
            torch.testing.assert_close(xa.grad, xb.grad, rtol=1e-4, atol=1e-6)


def test_cuda_graph_capture_and_replay():
    inputs = _model_inputs()
    static = [x.clone().requires_grad_(x.is_floating_point()) for x in inputs]
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up: compile, load and tune every kernel first
        for _ in range(2):
            _model_fn(*static).backward()
    torch.cuda.current_stream().wait_stream(side)
    for x in static:
        if x.grad is not None:
            x.grad.zero_()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        loss = _model_fn(*static)
        loss.backward()
    for seed in (11, 12):
        fresh = _model_inputs()
        fresh[0] = _randn(4, 33, 64, seed=seed)
        with torch.no_grad():
            for s, f in zip(static, fresh, strict=True):
                s.copy_(f)
                if s.grad is not None:
                    s.grad.zero_()
        graph.replay()
        ref = [x.clone().requires_grad_(x.is_floating_point()) for x in fresh]
        want = _model_fn(*ref)
        want.backward()
        torch.testing.assert_close(loss, want, rtol=1e-5, atol=1e-6)
        for s, r in zip(static, ref, strict=True):
            if r.grad is not None:
                torch.testing.assert_close(s.grad, r.grad, rtol=1e-4, atol=1e-6)


def test_capture_of_a_cold_op_fails_clearly_or_replays_right():
    """An op whose kernels were never compiled for this shape, captured cold: either the
    capture fails and a TeenyError saying to warm up is in the chain, or the replay is right
    (compiling and loading a module during capture can succeed)."""
    x, w = _randn(5, 3001), _randn(3001, seed=1)
    out = torch.empty(5, 3001, device=DEV)
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph):
            out.copy_(ops.add_rms_norm_op(x, x, w, 1e-6)[0])
    except Exception as err:  # noqa: BLE001 - torch may wrap ours while ending the capture
        chain, e = [], err
        while e is not None:
            chain.append(e)
            e = e.__cause__ or e.__context__
        assert any(
            isinstance(e, TeenyError) and "before torch.cuda.graph" in str(e) for e in chain
        ), repr(err)
        return
    graph.replay()
    torch.testing.assert_close(out, F.rms_norm(2 * x, (3001,), w, 1e-6), rtol=1e-5, atol=1e-5)


def test_side_stream():
    x = _randn(2048, 1024)
    w = _randn(1024, seed=1) + 1
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        y = ttx.layer_norm(x * 2.0, (1024,), w)
    torch.cuda.current_stream().wait_stream(s)
    torch.testing.assert_close(y, F.layer_norm(x * 2.0, (1024,), w), rtol=1e-5, atol=1e-5)


def test_user_op_on_gpu():
    g = torch.Generator(device=DEV).manual_seed(0)
    x = torch.randn(333, 1001, device=DEV, generator=g, requires_grad=True)
    b = torch.randn(1001, device=DEV, generator=g, requires_grad=True)
    y = bias_tanh(x, b)
    xr, br = x.detach().double().requires_grad_(), b.detach().double().requires_grad_()
    ref = torch.tanh(xr + br)
    torch.testing.assert_close(y.double(), ref, rtol=1e-5, atol=1e-5)
    y.sum().backward()
    ref.sum().backward()
    torch.testing.assert_close(x.grad.double(), xr.grad, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(b.grad.double(), br.grad, rtol=1e-4, atol=1e-3)
    torch.library.opcheck(bias_tanh, (x.detach()[:5, :7].clone(), b.detach()[:7].clone()))


def test_adamw_matches_torch():
    ps = [_randn(1001, 33), _randn(7, seed=1)]
    ours = [p.clone().requires_grad_() for p in ps]
    theirs = [p.clone().requires_grad_() for p in ps]
    kw = {"lr": 1e-2, "betas": (0.9, 0.95), "weight_decay": 0.1}
    oa, ob = ttx.AdamW(ours, **kw), torch.optim.AdamW(theirs, **kw, foreach=False)
    for step in range(4):
        for a, b in zip(ours, theirs, strict=True):
            a.grad = _randn(*a.shape, seed=20 + step)
            b.grad = a.grad.clone()
        if step == 2:  # a schedule's change reaches the replayed launches
            oa.param_groups[0]["lr"] = ob.param_groups[0]["lr"] = 3e-3
        oa.step()
        ob.step()
    for a, b in zip(ours, theirs, strict=True):
        torch.testing.assert_close(a, b, rtol=2e-6, atol=2e-6)


def _torch_add_layer_norm_gelu(x, r, w, b, seed, dtype):
    """torch's (x + r, gelu(layer_norm(x + r)), dx, dw, db) computed in ``dtype``."""
    xt, wt, bt = (t.detach().to(dtype).requires_grad_() for t in (x, w, b))
    ht = xt + r.to(dtype)
    gt = F.gelu(F.layer_norm(ht, (384,), wt, bt, 1e-5))
    (gt * _randn(257, 384, seed=seed + 5).to(x.dtype).to(dtype)).sum().backward()
    return ht.detach(), gt.detach(), xt.grad, wt.grad, bt.grad


@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16), ids=str)
def test_repeated_calls_replay_on_new_data(dtype):
    """The second and third calls of a shape replay the first call's plan (fused add + layer
    norm, its backward, the activation backward): new data, new results, torch's."""
    for seed in range(3):
        x, r = _randn(257, 384, dtype=dtype, seed=seed), _randn(257, 384, dtype=dtype, seed=9)
        w, b = _randn(384, seed=seed + 3), _randn(384, seed=seed + 4)
        w, b = w.to(dtype).requires_grad_(), b.to(dtype).requires_grad_()
        xs = x.clone().requires_grad_()
        y, h = ttx.add_layer_norm(xs, r, w, b)
        g = ttx.gelu(y)
        (g * _randn(257, 384, dtype=dtype, seed=seed + 5)).sum().backward()
        ref = _torch_add_layer_norm_gelu(x, r, w, b, seed, torch.float64)
        peer = _torch_add_layer_norm_gelu(x, r, w, b, seed, dtype)
        ours = (h, g.detach(), xs.grad, w.grad, b.grad)
        for what, got, want, near in zip(
            ("h", "y", "dx", "dw", "db"), ours, ref, peer, strict=True
        ):
            _close(got, want, near, what, floor=1.0)


def test_gpt_full_size_tracks_torch(tmp_path):
    train = Path(__file__).resolve().parents[2] / "examples" / "gpt" / "train.py"
    spec = importlib.util.spec_from_file_location("gpt_train", train)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    status = module.main(["--config", "full", "--steps", "5", "--out", str(tmp_path)])
    assert status == 0
