"""The normalisation family (teeny_tx/library/norm_families.py, kernels/norms.c) on the CPU
path: batch, group and instance norm in training and eval mode against a float64 reference
(and torch's own f64 result), f64/f32/f16/bf16, reduced axes of 1, 7, 33 and 1001 elements,
strided views; the running statistics; dx, dweight and dbias against float64 gradients;
gradcheck, opcheck, the Module drop-ins against torch.nn's (several steps, momentum None,
affine and tracking off), torch.compile(fullgraph=True), bad input, the docs' table, and every
launched specialisation compiling for sm_90."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import teeny_tx.torch as ttx  # noqa: E402
from teeny_tx import TeenyError  # noqa: E402
from teeny_tx.library import families, norm_families  # noqa: E402

from .conftest import (  # noqa: E402
    UNIT_ROUNDOFF,
    assert_close_elementwise,
    compile_launches_sm90,
    dtype_name,
    recorded_launches,
    stable_seed,
)

ROOT = Path(__file__).resolve().parents[1]
F = torch.nn.functional
DTYPES = (torch.float64, torch.float32, torch.float16, torch.bfloat16)
IDS = [r.name for r in norm_families.NORMS]
OURS = norm_families.FUNCTIONS
# (shape, num_groups); the elements per statistic are in the comments
SHAPES = {
    "batch_norm": [((7, 3), 1), ((1, 3, 33), 1), ((1, 2, 1001), 1), ((3, 2, 5, 7), 1),
                   ((2, 3, 2, 3, 4), 1)],  # 7, 33, 1001, 105, 48
    "group_norm": [((2, 4, 1), 4), ((1, 7, 1), 1), ((2, 6, 11), 2), ((1, 2, 1001), 2),
                   ((2, 6, 3, 5), 3)],  # 1, 7, 33, 1001, 30
    "instance_norm": [((2, 3, 7), 1), ((1, 2, 33), 1), ((1, 2, 1001), 1), ((2, 3, 5, 7), 1)],
}  # fmt: skip


def call(name: str, fn, x, w, b, rm, rv, training: bool, groups: int, momentum=0.1, eps=1e-5):
    """``fn`` (ours or torch's) with torch's positional signature of ``name``."""
    if name == "group_norm":
        return fn(x, groups, w, b, eps)
    return fn(x, rm, rv, w, b, training, momentum, eps)


def tensors(name: str, shape, dtype, *, offset: float = 2.0, device: str = "cpu"):
    """x (mean ``offset``, std 3), weight, bias, running mean and var, and dy, of ``dtype``
    on ``device``."""
    g = torch.Generator().manual_seed(stable_seed(name, shape, str(dtype)))
    c = shape[1]
    x = torch.randn(shape, generator=g, dtype=torch.float64) * 3 + offset
    w, b = torch.randn(c, generator=g, dtype=torch.float64), torch.randn(c, generator=g)
    rm = torch.randn(c, generator=g, dtype=torch.float64)
    rv = torch.rand(c, generator=g, dtype=torch.float64) + 0.5
    dy = torch.randn(shape, generator=g, dtype=torch.float64)
    return [t.to(device, dtype) for t in (x, w, b, rm, rv, dy)]


def segment_sum(t, name: str, groups: int):
    """Each element replaced by the sum of ``t`` over its statistic's elements."""
    n, c = t.shape[0], t.shape[1]
    t3 = t.reshape(n, c, -1)
    if name == "batch_norm":
        s = t3.sum((0, 2), keepdim=True).expand_as(t3)
    elif name == "instance_norm":
        s = t3.sum(2, keepdim=True).expand_as(t3)
    else:
        per_group = t3.reshape(n, groups, -1)
        s = per_group.sum(2, keepdim=True).expand_as(per_group)
    return s.reshape(t.shape)


def check(got, want, dtype, condition, k: float, what: str):
    """|got - want| <= u(dtype) |want| (the one rounding to dtype) + k u(acc) condition (the
    computation in f32, or f64 for f64 data, whose error is relative to ``condition``). The
    f64 reference is torch's f64 result: its own error counts the same again."""
    if dtype == torch.float64:
        k = 2 * k + 1
    u = UNIT_ROUNDOFF[dtype_name(dtype)]
    u_acc = UNIT_ROUNDOFF["f64" if dtype == torch.float64 else "f32"]
    scale = want.abs() + (k * u_acc / u) * condition
    assert_close_elementwise(got, want, dtype, ulps=1.0, scale=scale, what=what)


def normalised(name, x64, y64, w64, b64, groups, training: bool, rv64):
    """(xhat, rstd, count) of the reference: xhat from its output, rstd per element."""
    view = (-1,) + (1,) * (x64.dim() - 2)
    xhat = (y64 - b64.view(view)) / w64.view(view)
    if not training:
        return xhat, (1 / torch.sqrt(rv64 + 1e-5)).view(view).expand_as(x64), 1
    count = segment_sum(torch.ones_like(x64), name, groups)
    mean = segment_sum(x64, name, groups) / count
    var = segment_sum((x64 - mean) ** 2, name, groups) / count
    return xhat, 1 / torch.sqrt(var + 1e-5), count


def compare(name, shape, groups, dtype, training, transform=lambda t: t, device="cpu"):
    """Ours against the float64 reference (torch in f64 on the same rounded inputs): y, the
    running statistics, dx, dweight, dbias, under the error model of ``check``."""
    x = transform(tensors(name, shape, dtype, device=device)[0]).requires_grad_()
    shape = tuple(x.shape)
    _, w0, b0, rm0, rv0, dy = tensors(name, shape, dtype, device=device)
    if not x.is_contiguous():  # the parameters and buffers as views too
        w0, b0, rm0, rv0 = (torch.stack([t, t], 1).view(-1)[::2] for t in (w0, b0, rm0, rv0))
        assert not w0.is_contiguous()
    w, b = w0.clone().requires_grad_(), b0.clone().requires_grad_()
    rm, rv = rm0.clone(), rv0.clone()
    y = call(name, OURS[name], x, w, b, rm, rv, training, groups)
    assert y.dtype == dtype and y.shape == x.shape
    x64 = x.detach().double().requires_grad_()
    w64, b64 = w0.double().requires_grad_(), b0.double().requires_grad_()
    rm64, rv64 = rm0.double(), rv0.double()
    y64 = call(name, getattr(F, name), x64, w64, b64, rm64, rv64, training, groups)
    xhat, rstd, count = normalised(name, x64.detach(), y64.detach(), w64.detach(), b64.detach(),
                                   groups, training, rv0.double())  # fmt: skip
    view = (-1,) + (1,) * (len(shape) - 2)
    wv, bv, xd = w64.detach().view(view), b64.detach().view(view), x64.detach()
    # y = xhat w + b: xhat errs by the roundings of x - mean (relative to |x| rstd, and the
    # mean's own to the mean of |x| over the statistic's elements) and of rstd
    if training:
        spread = (xd.abs() + segment_sum(xd.abs(), name, groups) / count) * rstd
    else:  # x - running_mean
        spread = (xd.abs() + rm64.abs().view(view)) * rstd
    check(y, y64, dtype, wv.abs() * (xhat.abs() + spread) + bv.abs(), 4, f"{name} y")
    if training and name != "group_norm":
        momentum, mean = 0.1, segment_sum(xd, name, groups) / count
        sigma = torch.sqrt(segment_sum((xd - mean) ** 2, name, groups) / count)
        reduce = (0,) + tuple(range(2, len(shape)))
        per_c = (mean.abs() + sigma).amax(reduce)
        check(rm, rm64, dtype, 0.9 * rm0.double().abs() + momentum * per_c, 8, "running_mean")
        cond_v = (sigma**2 + mean.abs() * sigma).amax(reduce) * 2
        check(rv, rv64, dtype, 0.9 * rv0.double().abs() + momentum * cond_v, 8, "running_var")
    else:  # eval mode and group norm leave them alone
        assert torch.equal(rm, rm0) and torch.equal(rv, rv0)
    gx, gw, gb = torch.autograd.grad(y, (x, w, b), dy)
    rx, rw, rb = torch.autograd.grad(y64, (x64, w64, b64), dy.double())
    dims = (0,) + tuple(range(2, len(shape)))
    dyd = dy.double()
    # dw, db: sums over the channel's elements; xhat errs as above
    check(gw, rw, dtype, (dyd.abs() * (xhat.abs() + xd.abs() * rstd)).sum(dims), 16, "dweight")
    check(gb, rb, dtype, dyd.abs().sum(dims), 16, "dbias")
    g = (dyd * wv).abs()
    if training:  # dx = rstd (w dy - (sum(w dy) + xhat sum(w dy xhat)) / count)
        inner = segment_sum(g, name, groups) + (xhat.abs() + xd.abs() * rstd) * segment_sum(
            g * xhat.abs(), name, groups
        )
        cond = rstd * (g + inner / count)
    else:
        cond = rstd * g
    check(gx, rx, dtype, cond, 4, "dx")
    return y, y64


@pytest.mark.parametrize("name", IDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_training_matches_float64(name, dtype):
    for shape, groups in SHAPES[name]:
        if name == "batch_norm" or groups > 1 or shape[2:] != (1,):
            compare(name, shape, groups, dtype, training=True)


@pytest.mark.parametrize("name", ["batch_norm", "instance_norm"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_eval_mode_uses_the_running_statistics(name, dtype):
    for shape in [(1, 3), (7, 3), (2, 3, 1), (1, 2, 1001), (2, 3, 5, 7)]:
        if name == "instance_norm" and len(shape) == 2:
            continue
        compare(name, shape, 1, dtype, training=False)


@pytest.mark.parametrize("name", IDS)
def test_against_torch_f64(name):
    shape, groups = SHAPES[name][-1]
    y, want = compare(name, shape, groups, torch.float64, training=True)
    torch.testing.assert_close(y, want, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("name", IDS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_strided_and_offset_views(name, dtype):
    groups = 2 if name == "group_norm" else 1
    # a [3, 4, 9] view of a [5, 8, 28] tensor at an offset, steps 2 and 3
    compare(name, (5, 8, 28), groups, dtype, True, lambda t: t[1:4, ::2, 1::3])
    compare(name, (4, 9, 6), groups, dtype, True, lambda t: t.transpose(1, 2)[:, :8])


def test_large_mean_small_spread_f32():
    """Welford per lane and Chan across lanes: no cancellation of sum(x^2) - n mean^2."""
    x0, w, b, rm, rv, _ = tensors("offset", (4, 2, 1001), torch.float32, offset=1e4)
    for name in IDS:
        y = call(name, OURS[name], x0, w, b, rm.clone(), rv.clone(), True, 2)
        y64 = call(name, getattr(F, name), x0.double(), w.double(), b.double(), rm.double(),
                   rv.double(), True, 2)  # fmt: skip
        # relative to |x| rstd ~ 1e4 / 3: the rounding of x itself
        cond = w.double().abs().view(-1, 1) * (1e4 / 3) + b.double().abs().view(-1, 1)
        check(y, y64, torch.float32, cond, 8, name)


@pytest.mark.parametrize("name", IDS)
def test_gradcheck_f64(name):
    x, w, b, rm, rv, _ = tensors(name + "gradcheck", (2, 4, 3), torch.float64)
    for t in (x, w, b):
        t.requires_grad_()
    fn = functools.partial(call, name, OURS[name])
    assert torch.autograd.gradcheck(lambda x, w, b: fn(x, w, b, None, None, True, 2), (x, w, b))
    if name != "group_norm":  # eval: the statistics are constants
        assert torch.autograd.gradcheck(lambda x, w, b: fn(x, w, b, rm, rv, False, 1), (x, w, b))


def test_opcheck_batch_norm():
    x, w, b, rm, rv, _ = tensors("opcheck", (4, 3, 5), torch.float64)
    x.requires_grad_()
    op = torch.ops.teeny_tx.batch_norm.default
    torch.library.opcheck(op, (x, w, b, rm, rv, 1, True, 0.1, 1e-5))
    torch.library.opcheck(op, (x, w, b, rm, rv, 1, False, 0.1, 1e-5))
    torch.library.opcheck(torch.ops.teeny_tx.group_norm.default,
                          (x, w, b, None, None, 3, True, 0.0, 1e-5))  # fmt: skip


def test_no_affine_and_no_running_statistics():
    x, _, _, _, _, dy = tensors("plain", (3, 4, 6), torch.float64)
    x.requires_grad_()
    for name in IDS:
        y = call(name, OURS[name], x, None, None, None, None, True, 2)
        want = call(name, getattr(F, name), x, None, None, None, None, True, 2)
        torch.testing.assert_close(y, want, rtol=1e-13, atol=1e-13)
        torch.testing.assert_close(
            torch.autograd.grad(y, x, dy), torch.autograd.grad(want, x, dy), rtol=1e-12, atol=1e-13
        )


def test_empty_batch():
    x = torch.empty(0, 3, 4, dtype=torch.float64, requires_grad=True)
    w = torch.ones(3, dtype=torch.float64, requires_grad=True)
    rm, rv = torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64)
    y = ttx.batch_norm(x, rm, rv, w, None, True)
    assert y.shape == (0, 3, 4) and torch.equal(rm, torch.zeros(3, dtype=torch.float64))
    (gw,) = torch.autograd.grad(y.sum(), w)
    assert torch.equal(gw, torch.zeros(3, dtype=torch.float64))
    assert ttx.group_norm(x, 3).shape == (0, 3, 4)


MODULE_CASES = [
    ("BatchNorm1d", (4,), {}, (6, 4)),
    ("BatchNorm1d", (4,), {"momentum": None}, (5, 4, 7)),
    ("BatchNorm2d", (3,), {"affine": False}, (2, 3, 5, 4)),
    ("BatchNorm2d", (3,), {"track_running_stats": False}, (2, 3, 5, 4)),
    ("BatchNorm3d", (2,), {"eps": 1e-3, "momentum": 0.3}, (2, 2, 3, 4, 5)),
    ("GroupNorm", (2, 6), {}, (3, 6, 7)),
    ("GroupNorm", (3, 6), {"affine": False, "eps": 1e-4}, (2, 6, 4, 5)),
    ("InstanceNorm1d", (4,), {}, (3, 4, 9)),
    ("InstanceNorm1d", (4,), {"affine": True, "track_running_stats": True}, (4, 9)),
    ("InstanceNorm2d", (3,), {"affine": True, "track_running_stats": True}, (2, 3, 5, 6)),
]


@pytest.mark.parametrize("case", MODULE_CASES, ids=lambda c: f"{c[0]}-{sorted(c[2])}")
def test_module_is_a_drop_in_for_torch_nn(case):
    """Three training steps then eval: outputs, gradients of x and the parameters, buffers."""
    name, args, kwargs, shape = case
    ours_cls, theirs_cls = norm_families.MODULES[name], getattr(torch.nn, name)
    assert ours_cls is getattr(ttx, name) and issubclass(ours_cls, theirs_cls)
    ours = ours_cls(*args, **kwargs, dtype=torch.float64)
    theirs = theirs_cls(*args, **kwargs, dtype=torch.float64)
    assert repr(ours) == repr(theirs)
    with torch.no_grad():
        for p in theirs.parameters():
            p.uniform_(0.5, 1.5)
    ours.load_state_dict(theirs.state_dict())
    assert ours.state_dict().keys() == theirs.state_dict().keys()
    g = torch.Generator().manual_seed(stable_seed(case))
    for step in range(4):
        training = step < 3
        ours.train(training)
        theirs.train(training)
        x = (torch.randn(shape, generator=g, dtype=torch.float64) * 2 + 1).requires_grad_()
        xr = x.detach().clone().requires_grad_()
        y, want = ours(x), theirs(xr)
        torch.testing.assert_close(y, want, rtol=1e-12, atol=1e-13)
        dy = torch.randn(shape, generator=g, dtype=torch.float64)
        got = torch.autograd.grad(y, [x, *ours.parameters()], dy)
        ref = torch.autograd.grad(want, [xr, *theirs.parameters()], dy)
        torch.testing.assert_close(got, ref, rtol=1e-11, atol=1e-12)
        for key, value in theirs.state_dict().items():
            torch.testing.assert_close(ours.state_dict()[key], value, rtol=1e-13, atol=1e-14)


def test_compiled_module_fullgraph_updates_the_buffers():
    def model(cls):
        torch.manual_seed(0)
        return torch.nn.Sequential(
            torch.nn.Linear(6, 8, dtype=torch.float64), cls(8, dtype=torch.float64)
        )

    ours, theirs = model(ttx.BatchNorm1d), model(torch.nn.BatchNorm1d)
    compiled = torch.compile(ours, fullgraph=True, backend="aot_eager")
    x = tensors("compile", (5, 6), torch.float64)[0].requires_grad_()
    for _ in range(2):
        got = compiled(x)
        (gx,) = torch.autograd.grad(got.square().sum(), x)
        want = theirs(x)
        (wx,) = torch.autograd.grad(want.square().sum(), x)
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(gx, wx, rtol=1e-11, atol=1e-12)
    for key, value in theirs.state_dict().items():
        torch.testing.assert_close(ours.state_dict()[key], value, rtol=1e-12, atol=1e-13)


def test_bad_input_is_a_clear_error():
    x, w, b, rm, rv, _ = tensors("bad", (2, 3, 5), torch.float32)
    cases = [
        (lambda: ttx.batch_norm(x[0, 0], None, None, training=True), "2 dimensions or more"),
        (lambda: ttx.batch_norm(x, rm[:2], rv, training=True), r"running_mean must be \[3\]"),
        (lambda: ttx.batch_norm(x, None, None, w[:2], training=True), r"weight must be \[3\]"),
        (lambda: ttx.batch_norm(x, None, None), "must be given in evaluation mode"),
        (lambda: ttx.batch_norm(x.int(), None, None, training=True), "must be a float tensor"),
        (lambda: ttx.batch_norm(x, None, None, w.int(), training=True), "weight must be a float"),
        (lambda: ttx.batch_norm(x[:1, :, :1], None, None, training=True), "more than 1 value"),
        (lambda: ttx.batch_norm(x, None, None, training=True, eps=0.0), "eps must be positive"),
        (lambda: ttx.group_norm(x, 2), "divisible by num_groups=2"),
        (lambda: ttx.group_norm(x, 0), "divisible by num_groups=0"),
        (lambda: ttx.instance_norm(x[:, :, :1]), "more than 1 value"),
    ]
    for fn, says in cases:
        with pytest.raises(TeenyError, match=says):
            fn()


def test_docs_table_is_generated_from_the_family_table():
    page = (ROOT / "docs" / "families.md").read_text()
    assert families.docs_section("norms") in page, "stale: python -m teeny_tx.library.families"
    for r in norm_families.NORMS:
        assert "|" not in r.statistics + r.running
        assert all(m in norm_families.MODULES for m in r.modules)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32], ids=str)
def test_every_launch_compiles_for_sm90(dtype):
    """The specialisations the ops launch (forward and backward, training and eval), as the
    GPU would compile them for dtype data with f32 statistics."""

    def run():
        for name in IDS:
            for shape in [(2, 4, 5), (7, 4, 1), (1, 2, 1001)]:  # 1-element rows, long rows
                x, w, b, rm, rv, dy = tensors(name + "sm90", shape, dtype)
                x.requires_grad_()
                modes = (True, False) if name != "group_norm" else (True,)
                for training in modes if shape[2] > 1 else (False,):
                    y = call(name, OURS[name], x, w, b, rm, rv, training, 2)
                    torch.autograd.grad(y, x, dy)

    names = compile_launches_sm90(recorded_launches(run))
    kernels = {"norm_row_stats", "norm_combine", "norm_running", "norm_eval_stats"}
    assert names == kernels | {"norm_apply", "norm_bwd_rows", "norm_bwd_sums", "norm_bwd_dx"}
