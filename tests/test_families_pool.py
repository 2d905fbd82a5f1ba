"""The pooling family (teeny_tx/library/pool_families.py, kernels/pool.c) on the CPU path:
every pool against torch's (max pools and their indices equal, averages against the float64
reference under an element-wise error model), every dtype, kernel, stride, padding, dilation,
ceil mode, count_include_pad and divisor_override cases, pooled axes of 1, 7, 33 and 1001,
adaptive windows smaller and larger than the input, NaN and -inf, strided views; the gradient
against the float64 adjoint; gradcheck, opcheck, the Modules against torch.nn's,
torch.compile(fullgraph=True), the arguments torch refuses, the docs' table and every
launched specialisation compiling for sm_90."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import teeny_tx.torch as ttx  # noqa: E402
from teeny_tx import TeenyError  # noqa: E402
from teeny_tx.library import families, pool_families  # noqa: E402

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
ROW = {r.name: r for r in pool_families.POOLS}
OURS = pool_families.FUNCTIONS
_1D = [(2, 3, 7), (1, 2, 1001), (3, 1), (2, 33)]
_2D = [(2, 3, 7, 9), (1, 2, 33, 5), (1, 1, 1, 7), (2, 1001, 1)]
# (name, shapes, keyword arguments): kernels larger than an input are skipped per shape
CASES = [
    ("max_pool1d", _1D, {"kernel_size": 1}),
    ("max_pool1d", _1D, {"kernel_size": 3, "return_indices": True}),
    ("max_pool1d", _1D, {"kernel_size": 3, "stride": 2, "padding": 1, "dilation": 2,
                         "ceil_mode": True}),
    ("max_pool1d", _1D, {"kernel_size": 7, "stride": 1, "padding": 3}),
    ("max_pool2d", _2D, {"kernel_size": (1, 2)}),
    ("max_pool2d", _2D, {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True,
                         "return_indices": True}),
    ("max_pool2d", _2D, {"kernel_size": (2, 3), "stride": (1, 2), "padding": (1, 1),
                         "dilation": (2, 1)}),
    ("avg_pool1d", _1D, {"kernel_size": 2}),
    ("avg_pool1d", _1D, {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True}),
    ("avg_pool1d", _1D, {"kernel_size": 4, "stride": 3, "padding": 2, "ceil_mode": True,
                         "count_include_pad": False}),
    ("avg_pool2d", _2D, {"kernel_size": 3}),
    ("avg_pool2d", _2D, {"kernel_size": (3, 2), "stride": 2, "padding": 1, "ceil_mode": True,
                         "count_include_pad": False}),
    ("avg_pool2d", _2D, {"kernel_size": 3, "stride": (2, 1), "padding": 1, "ceil_mode": True}),
    ("avg_pool2d", _2D, {"kernel_size": 2, "padding": 1, "divisor_override": 3}),
    ("adaptive_avg_pool2d", _2D, {"output_size": 1}),
    ("adaptive_avg_pool2d", _2D, {"output_size": (3, None)}),
    ("adaptive_avg_pool2d", _2D, {"output_size": (5, 13)}),
    ("adaptive_max_pool2d", _2D, {"output_size": (2, 3), "return_indices": True}),
    ("adaptive_max_pool2d", _2D, {"output_size": (11, 6)}),
]  # fmt: skip


def fits(name: str, shape, kw) -> bool:
    """Whether torch pools ``shape`` with ``kw`` (every window starts inside the input) and
    every window holds an element (a dilated window can step over a one-row input: torch's
    f64 kernel aborts there, its f32 one gives indices outside the plane)."""
    try:
        getattr(F, name)(torch.zeros(shape), **kw)
    except RuntimeError:
        return False
    if ROW[name].kind == "max":
        indices = getattr(F, name)(torch.zeros(shape), **{**kw, "return_indices": True})[1]
        plane = math.prod(shape[-ROW[name].dims :])
        return bool((indices < plane).all())
    return True


ALL = [(name, shape, kw) for name, shapes, kw in CASES for shape in shapes if fits(name, shape, kw)]


def data(shape, dtype, *parts, device="cpu"):
    g = torch.Generator().manual_seed(stable_seed(shape, str(dtype), *parts))
    return (torch.randn(shape, generator=g, dtype=torch.float64) * 3).to(device, dtype)


def first(y):
    return y[0] if isinstance(y, tuple) else y


def terms(name: str, x, kw, out_shape) -> int:
    """The most elements one output adds up (its window's size)."""
    if "output_size" in kw:
        n, o = x.shape[-2:], out_shape[-2:]
        return math.prod(-(-a // max(b, 1)) + 1 for a, b in zip(n, o, strict=True))
    k = kw["kernel_size"]
    return math.prod((k,) * (1 if name.endswith("1d") else 2) if isinstance(k, int) else k)


def check_pool(name, x, kw, dtype):
    """Forward (max: equal values and indices; average: one rounding plus the f32 sum's error
    relative to the pool of |x|), then dx against the float64 adjoint (one rounding plus the
    sum's error relative to the adjoint of |dy|)."""
    x = x.detach().requires_grad_()
    got, want = OURS[name](x, **kw), getattr(F, name)(x.detach(), **kw)
    u = UNIT_ROUNDOFF[dtype_name(dtype)]
    u_acc = UNIT_ROUNDOFF["f64" if dtype == torch.float64 else "f32"]
    x64 = x.detach().double().requires_grad_()
    want64 = first(getattr(F, name)(x64, **kw))
    k = terms(name, x, kw, want64.shape) + 1
    if dtype == torch.float64:
        k = 2 * k + 1  # torch's f64 result errs too
    if ROW[name].kind == "max":
        if kw.get("return_indices"):
            assert torch.equal(got[1], want[1]), "indices"
        assert torch.equal(first(got), first(want)), "max values"
    else:
        cond = getattr(F, name)(x64.detach().abs(), **kw)
        scale = want64.detach().abs() + (k * u_acc / u) * cond
        assert_close_elementwise(first(got), want64, dtype, ulps=1.0, scale=scale, what="avg")
    dy = data(tuple(want64.shape), dtype, "dy", device=x.device)
    (dx,) = torch.autograd.grad(first(got), x, dy)
    (ref,) = torch.autograd.grad(want64, x64, dy.double())
    x64 = x.detach().double().requires_grad_()
    (cond,) = torch.autograd.grad(first(getattr(F, name)(x64, **kw)), x64, dy.double().abs())
    scale = ref.abs() + (k * u_acc / u) * cond
    assert_close_elementwise(dx, ref, dtype, ulps=1.0, scale=scale, what=f"{name} dx")


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", ALL, ids=lambda c: f"{c[0]}-{c[1]}-{sorted(c[2].items())}")
def test_matches_torch(case, dtype):
    name, shape, kw = case
    check_pool(name, data(shape, dtype), kw, dtype)


@pytest.mark.parametrize("name", list(ROW))
def test_strided_and_offset_views(name):
    dims = ROW[name].dims
    base = data((3, 6, 15, 22), torch.float32)
    x = base[1:, ::2, 1:, ::3] if dims == 2 else base[0, 1:, 3, ::2]
    assert not x.is_contiguous()
    kw = {"output_size": (3, 4)} if ROW[name].adaptive else {"kernel_size": 3, "stride": 2}
    check_pool(name, x, kw, torch.float32)


def test_nan_and_infinity_pick_torchs_index():
    x = data((2, 2, 6, 6), torch.float32)
    x[0, 0, 1, 1] = x[0, 0, 2, 2] = float("nan")  # two NaNs in one window: the last wins
    x[0, 1] = -float("inf")  # all -inf: the window's first index
    x[1, 0, :, :3] = 2.0  # ties: the first
    for name, kw in [("max_pool2d", {"kernel_size": 3, "padding": 1}),
                     ("adaptive_max_pool2d", {"output_size": 4})]:  # fmt: skip
        y, idx = OURS[name](x, **kw, return_indices=True)
        want, want_idx = getattr(F, name)(x, **kw, return_indices=True)
        assert torch.equal(idx, want_idx)
        torch.testing.assert_close(y, want, equal_nan=True, rtol=0, atol=0)


@pytest.mark.parametrize("name", list(ROW))
def test_gradcheck_f64(name):
    x = (
        data((2, 2, 5, 6), torch.float64)[..., 0, :]
        if ROW[name].dims == 1
        else data((2, 2, 5, 6), torch.float64)
    )
    x.requires_grad_()
    kw = {"output_size": (3, 4)} if ROW[name].adaptive else {"kernel_size": 2, "padding": 1}
    assert torch.autograd.gradcheck(lambda t: first(OURS[name](t, **kw)), (x,))


def test_opcheck():
    x = data((2, 3, 6, 7), torch.float64).requires_grad_()
    w = pool_families.window(ROW["max_pool2d"], x, {"kernel_size": 3, "stride": 2, "padding": 1,
                                                    "dilation": 1, "ceil_mode": True})  # fmt: skip
    for name in ("max_pool2d", "avg_pool2d"):
        op = getattr(torch.ops.teeny_tx, name).default
        torch.library.opcheck(op, (x, w.flat(), False, 0))


MODULE_CASES = [
    ("MaxPool1d", (3,), {"stride": 2, "padding": 1, "return_indices": True}, (2, 3, 9)),
    ("MaxPool2d", (3,), {"stride": 2, "ceil_mode": True}, (2, 3, 9, 8)),
    ("MaxPool2d", ((2, 3),), {"dilation": 2, "return_indices": True}, (3, 9, 8)),
    ("AvgPool1d", (3,), {"stride": 2, "count_include_pad": False, "padding": 1}, (2, 3, 9)),
    ("AvgPool2d", (3,), {"padding": 1, "divisor_override": 4}, (2, 3, 9, 8)),
    ("AvgPool2d", (2,), {"ceil_mode": True}, (3, 9, 7)),
    ("AdaptiveAvgPool2d", ((4, None),), {}, (2, 3, 9, 8)),
    ("AdaptiveMaxPool2d", (5,), {"return_indices": True}, (3, 9, 7)),
]


@pytest.mark.parametrize("case", MODULE_CASES, ids=lambda c: f"{c[0]}-{sorted(c[2])}")
def test_module_is_a_drop_in_for_torch_nn(case):
    name, args, kwargs, shape = case
    ours_cls, theirs_cls = pool_families.MODULES[name], getattr(torch.nn, name)
    assert ours_cls is getattr(ttx, name) and issubclass(ours_cls, theirs_cls)
    ours, theirs = ours_cls(*args, **kwargs), theirs_cls(*args, **kwargs)
    assert repr(ours) == repr(theirs)
    x = data(shape, torch.float64, name).requires_grad_()
    got, want = ours(x), theirs(x)
    assert isinstance(got, tuple) == isinstance(want, tuple)
    if isinstance(want, tuple):
        assert torch.equal(got[1], want[1])
    torch.testing.assert_close(first(got), first(want), rtol=1e-14, atol=1e-14)
    dy = data(tuple(first(want).shape), torch.float64, name, "dy")
    torch.testing.assert_close(
        torch.autograd.grad(first(got), x, dy),
        torch.autograd.grad(first(want), x, dy),
        rtol=1e-14,
        atol=1e-14,
    )


def test_compiled_module_fullgraph():
    model = torch.nn.Sequential(
        ttx.MaxPool2d(3, stride=2, padding=1), ttx.AvgPool2d(2), ttx.AdaptiveAvgPool2d((2, 3))
    )
    x = data((2, 3, 17, 19), torch.float64).requires_grad_()
    got = torch.compile(model, fullgraph=True, backend="aot_eager")(x)
    (gx,) = torch.autograd.grad(got.square().sum(), x)
    want = F.adaptive_avg_pool2d(F.avg_pool2d(F.max_pool2d(x, 3, 2, 1), 2), (2, 3))
    (wx,) = torch.autograd.grad(want.square().sum(), x)
    torch.testing.assert_close(got, want, rtol=1e-13, atol=1e-13)
    torch.testing.assert_close(gx, wx, rtol=1e-13, atol=1e-13)


def test_empty_batch():
    x = torch.empty(0, 3, 6, 6, dtype=torch.float64, requires_grad=True)
    y, idx = ttx.max_pool2d(x, 2, return_indices=True)
    assert y.shape == idx.shape == (0, 3, 3, 3)
    (dx,) = torch.autograd.grad(y.sum(), x)
    assert dx.shape == x.shape
    assert ttx.adaptive_avg_pool2d(data((1, 2, 4, 4), torch.float64), (0, 2)).shape == (1, 2, 0, 2)


def test_bad_arguments_are_a_clear_error():
    x = data((2, 3, 7, 9), torch.float32)
    cases = [
        (lambda: ttx.max_pool2d(x, 10), r"larger than the padded input \[7, 9\]"),
        (lambda: ttx.avg_pool1d(x[0, :, 0, :2], 3), r"larger than the padded input \[2\]"),
        (lambda: ttx.max_pool2d(x, 0), "must be positive"),
        (lambda: ttx.max_pool2d(x, 3, stride=0), "must be positive"),
        (lambda: ttx.max_pool2d(x, 3, padding=2), "more than half"),
        (lambda: ttx.avg_pool2d(x, 3, padding=-1), "must be non-negative"),
        (lambda: ttx.avg_pool2d(x, 3, divisor_override=0), "must not be zero"),
        (lambda: ttx.max_pool2d(x[0, 0], 2), r"must be \[C, H, W\] or \[N, C, H, W\]"),
        (lambda: ttx.max_pool1d(x, 2), r"must be \[C, L\] or \[N, C, L\]"),
        (lambda: ttx.max_pool2d(x, (2, 3, 4)), "kernel_size must be an int or a tuple of 2"),
        (lambda: ttx.max_pool2d(x.int(), 2), "must be a float tensor"),
        (lambda: ttx.max_pool2d(data((2, 3, 0, 4), torch.float32), 2), "empty channel or"),
        (lambda: ttx.adaptive_avg_pool2d(x, (-1, 2)), "must be >= 0"),
        (lambda: ttx.adaptive_max_pool2d(x, (1, 2, 3)), "must be an int or a pair"),
    ]
    for fn, says in cases:
        with pytest.raises(TeenyError, match=says):
            fn()


def test_docs_table_is_generated_from_the_family_table():
    page = (ROOT / "docs" / "families.md").read_text()
    assert families.docs_section("pooling") in page, "stale: python -m teeny_tx.library.families"
    for r in pool_families.POOLS:
        assert "|" not in r.window


POSITIONAL = {
    "max_pool1d": (3, 2, 1, 2, True, True),
    "max_pool2d": (3, 2, 1, 2, True, True),
    "avg_pool1d": (3, 2, 1, True, False),
    "avg_pool2d": (3, 2, 1, True, False, 5),
    "adaptive_avg_pool2d": ((3, 4),),
    "adaptive_max_pool2d": ((3, 4), True),
}


@pytest.mark.parametrize("name", list(ROW))
def test_positional_arguments_are_torchs(name):
    """Every parameter of the table, positionally, in torch's order (and no more)."""
    values = POSITIONAL[name]
    assert len(values) == len(ROW[name].params)
    x = (
        data((2, 3, 9, 10), torch.float64)[:, :, 0]
        if ROW[name].dims == 1
        else data((2, 3, 9, 10), torch.float64)
    )
    got, want = OURS[name](x, *values), getattr(F, name)(x, *values)
    assert isinstance(got, tuple) == isinstance(want, tuple)
    torch.testing.assert_close(got, want, rtol=1e-14, atol=1e-14)
    with pytest.raises(TypeError):
        OURS[name](x, *values, 1)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32], ids=str)
def test_every_launch_compiles_for_sm90(dtype):
    def run():
        for name, shape, kw in ALL[::4]:
            x = data(shape, dtype).requires_grad_()
            torch.autograd.grad(first(OURS[name](x, **kw)).sum(), x)

    assert compile_launches_sm90(recorded_launches(run)) == {"pool_fwd", "pool_bwd"}
