"""The pointwise activation family (kernels/pointwise.c) on CUDA tensors: every row's forward
and gradient against torch's, for f32, f16 and bf16, odd sizes and a strided view, with
torch's default and other parameters; PReLU (y, dx and dweight, one slope or one per channel)
against float64; Module drop-ins under torch.compile(fullgraph=True); the loss family
(kernels/losses.c: every row and reduction, forward and both gradients) likewise."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("torch sees no CUDA device", allow_module_level=True)

import teeny_tx.torch as ttx  # noqa: E402
from teeny_tx.library import families  # noqa: E402

from ..conftest import assert_close_elementwise, stable_seed  # noqa: E402
from ..test_families import (  # noqa: E402
    IDS,
    OTHER,
    PRELU_SHAPES,
    ROWS,
    cases,
    check_prelu,
    prelu_case,
)
from ..test_families_losses import OTHER as LOSS_OTHER  # noqa: E402

DEV = "cuda"
DTYPES = (torch.float32, torch.float16, torch.bfloat16)
# both sides compute in f32 and round once; f16/bf16 may differ by an ulp of the result
TOL = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}


def data(name: str, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    g = torch.Generator().manual_seed(stable_seed(name, shape, str(dtype)))
    x = torch.randn(shape, generator=g, dtype=torch.float32) * 4
    return x.to(DEV, dtype)


@pytest.mark.parametrize("row", ROWS, ids=IDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(1,), (1001,), (129, 67)])
def test_forward_and_gradient_match_torch(row, dtype, shape):
    tol = TOL[dtype]
    for values in cases(row):
        x = data(row.name, shape, dtype).requires_grad_()
        ref = x.detach().clone().requires_grad_()
        dy = data(row.name + "dy", shape, dtype)
        got = families.FUNCTIONS[row.name](x, *values)
        want = row.reference(ref, *values)
        assert got.dtype == dtype and got.device == x.device
        (gx,) = torch.autograd.grad(got, x, dy)
        (gref,) = torch.autograd.grad(want, ref, dy)
        if dtype == torch.float32:
            torch.testing.assert_close(got, want, rtol=tol, atol=tol)
            torch.testing.assert_close(gx, gref, rtol=tol, atol=tol)
            continue
        # f16/bf16: against float64, within a few roundings of the dtype plus twice torch's own
        # error in the dtype (FlashAttention's criterion: torch's half formulas round in the
        # dtype between steps, so the two half results may differ by more than an ulp)
        x64 = x.detach().double().requires_grad_()
        want64 = row.reference(x64, *values)
        (g64,) = torch.autograd.grad(want64, x64, dy.double())
        scale = want64.detach().abs() + x64.detach().abs()  # x - f(x) cancels (tanhshrink)
        assert_close_elementwise(got, want64, dtype, scale=scale, peer=want, what="forward")
        gscale = g64.abs() + dy.double().abs()
        assert_close_elementwise(gx, g64, dtype, scale=gscale, peer=gref, what="gradient")


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_strided_view_f32(row):
    base = data(row.name + "strided", (300, 77), torch.float32)
    x = base.t()[::2, 3:].requires_grad_()
    ref = x.detach().clone().requires_grad_()
    values = OTHER.get(row.name, ())
    got, want = families.FUNCTIONS[row.name](x, *values), row.reference(ref, *values)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    dy = torch.ones_like(got)
    (gx,), (gref,) = torch.autograd.grad(got, x, dy), torch.autograd.grad(want, ref, dy)
    torch.testing.assert_close(gx, gref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", PRELU_SHAPES + [(64, 256, 56, 56), (4096, 1000)], ids=str)
def test_prelu_matches_float64(shape, dtype):
    for channels in (False, True):
        check_prelu(*prelu_case(shape, dtype, channels, device=DEV), dtype)


def test_compiled_drop_ins_fullgraph():
    model = torch.nn.Sequential(
        torch.nn.Linear(64, 64), ttx.Hardswish(), torch.nn.Linear(64, 64), ttx.Softplus(beta=2.0)
    ).to(DEV)
    x = data("compile", (33, 64), torch.float32).requires_grad_()
    got = torch.compile(model, fullgraph=True)(x)
    got.sum().backward()
    grad = x.grad.clone()
    x.grad = None
    h = torch.nn.functional.hardswish(model[0](x))
    want = torch.nn.functional.softplus(model[2](h), beta=2.0)
    want.sum().backward()
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(grad, x.grad, rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------- the loss family

LOSS_ROWS = families.LOSSES


@pytest.mark.parametrize("row", LOSS_ROWS, ids=[r.name for r in LOSS_ROWS])
@pytest.mark.parametrize("reduction", families.REDUCTIONS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(1,), (1001,), (129, 67)])
def test_losses_forward_and_gradients_match_torch(row, reduction, dtype, shape):
    tol = TOL[dtype]
    g = torch.Generator().manual_seed(stable_seed(row.name, reduction, shape, str(dtype)))
    x0 = torch.randn(shape, generator=g).to(DEV, dtype)
    t0 = torch.rand(shape, generator=g).to(DEV, dtype)
    kws = [{}, LOSS_OTHER[row.name]] if row.name in LOSS_OTHER else [{}]
    for kw in kws:
        x, t = x0.clone().requires_grad_(), t0.clone().requires_grad_()
        rx, rt = x0.clone().requires_grad_(), t0.clone().requires_grad_()
        got = families.FUNCTIONS[row.name](x, t, reduction=reduction, **kw)
        want = row.reference(rx, rt, reduction=reduction, **kw)
        assert got.shape == want.shape and got.dtype == dtype
        torch.testing.assert_close(got, want, rtol=tol, atol=tol)
        dy = torch.randn(want.shape, generator=g).to(DEV, dtype)
        ours = torch.autograd.grad(got, (x, t), dy)
        theirs = torch.autograd.grad(want, (rx, rt), dy)
        torch.testing.assert_close(ours, theirs, rtol=tol, atol=tol)


def test_loss_module_on_strided_views_f32():
    base = torch.randn(300, 77, device=DEV)
    x, t = base.t()[::2], torch.rand(77, 300, device=DEV)[::2]
    for name in ("MSELoss", "BCEWithLogitsLoss", "HuberLoss"):
        got = getattr(ttx, name)()(x, t)
        want = getattr(torch.nn, name)()(x, t)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
