"""The pointwise loss family (families.LOSSES, kernels/losses.c) on the CPU path: every row and
reduction against torch's function in f64 and f32 (odd sizes, strided views, non-default
parameters, empty inputs), both gradients against torch's autograd, gradcheck, opcheck, the
Module drop-ins, bad input, the kernel's branches and the docs' table."""

from __future__ import annotations

import functools
import math
import re
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import teeny_tx.torch as ttx  # noqa: E402
from teeny_tx import TeenyError  # noqa: E402
from teeny_tx.library import families  # noqa: E402
from teeny_tx.library.loader import kernel_text, module  # noqa: E402

from .conftest import nvrtc_compile, stable_seed  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
ROWS = families.LOSSES
IDS = [r.name for r in ROWS]
REDUCTIONS = families.REDUCTIONS
OTHER = {"smooth_l1_loss": {"beta": 0.5}, "huber_loss": {"delta": 2.0}}


def pair(name: str, shape: tuple[int, ...], dtype=torch.float64):
    g = torch.Generator().manual_seed(stable_seed(name, shape))
    x = torch.randn(shape, generator=g, dtype=torch.float64) * 2
    t = torch.rand(shape, generator=g, dtype=torch.float64)  # BCE targets lie in [0, 1]
    return x.to(dtype), t.to(dtype)


def options(row: families.Loss) -> list[dict[str, float]]:
    return [{}, OTHER[row.name]] if row.name in OTHER else [{}]


@pytest.mark.parametrize("row", ROWS, ids=IDS)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("shape", [(1,), (1001,), (3, 1100)])
def test_forward_and_gradients_match_torch_f64(row, reduction, shape):
    x0, t0 = pair(row.name, shape)
    for kw in options(row):
        x, t = x0.clone().requires_grad_(), t0.clone().requires_grad_()
        rx, rt = x0.clone().requires_grad_(), t0.clone().requires_grad_()
        got = families.FUNCTIONS[row.name](x, t, reduction=reduction, **kw)
        want = row.reference(rx, rt, reduction=reduction, **kw)
        assert got.shape == want.shape and got.dtype == torch.float64
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-13)
        g = pair(row.name + "g", tuple(want.shape))[0]
        torch.testing.assert_close(
            torch.autograd.grad(got, (x, t), g),
            torch.autograd.grad(want, (rx, rt), g),
            rtol=1e-12,
            atol=1e-14,
        )


@pytest.mark.parametrize("row", ROWS, ids=IDS)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_strided_views_f32(row, reduction):
    xb, tb = pair(row.name + "strided", (40, 31), torch.float32)
    x, t = xb.t()[::2], tb[:, ::2].t()  # two different non-contiguous layouts
    assert x.shape == t.shape and not x.is_contiguous() and not t.is_contiguous()
    for kw in options(row):
        got = families.FUNCTIONS[row.name](x, t, reduction=reduction, **kw)
        want = row.reference(x, t, reduction=reduction, **kw)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_gradcheck_f64(row):
    x, t = pair(row.name + "gradcheck", (13,))
    x.requires_grad_()
    t.requires_grad_()
    fn = families.FUNCTIONS[row.name]
    for reduction in REDUCTIONS:
        assert torch.autograd.gradcheck(functools.partial(fn, reduction=reduction), (x, t))


def test_opcheck_huber_loss():
    x, t = pair("opcheck", (4, 7))
    x.requires_grad_()
    for reduction in REDUCTIONS:
        torch.library.opcheck(torch.ops.teeny_tx.huber_loss.default, (x, t, 2.0, reduction))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_empty_input(reduction):
    x = torch.empty(0, dtype=torch.float64)
    got = ttx.mse_loss(x, x, reduction=reduction)
    want = torch.nn.functional.mse_loss(x, x, reduction=reduction)
    assert got.shape == want.shape
    if reduction == "mean":
        assert math.isnan(got.item())
    elif reduction == "sum":
        assert got.item() == 0.0


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_module_is_a_drop_in_for_torch_nn(row):
    ours, theirs = families.MODULES[row.module], getattr(torch.nn, row.module)
    assert ours is getattr(ttx, row.module) and issubclass(ours, theirs)
    x, t = pair(row.name + "module", (5, 9))
    for kw in options(row):
        for reduction in REDUCTIONS:
            a, b = ours(reduction=reduction, **kw), theirs(reduction=reduction, **kw)
            assert repr(a) == repr(b)
            torch.testing.assert_close(a(x, t), b(x, t), rtol=1e-12, atol=1e-13)


def test_bad_input_is_a_clear_error():
    x, t = pair("bad", (6,))
    with pytest.raises(TeenyError, match=r"l1_loss: input \(6,\) and target \(5,\) differ"):
        ttx.l1_loss(x, t[:5])
    with pytest.raises(TeenyError, match="one dtype"):
        ttx.mse_loss(x, t.float())
    with pytest.raises(TeenyError, match="reduction must be one of"):
        ttx.mse_loss(x, t, reduction="avg")
    with pytest.raises(TeenyError, match="pos_weight is not supported"):
        ttx.BCEWithLogitsLoss(pos_weight=torch.ones(6, dtype=torch.float64))(x, t)
    with pytest.raises(TypeError):  # keyword-only past the target: no silent misbinding
        ttx.huber_loss(x, t, "sum")


def test_parameters_torch_refuses_are_a_clear_error():
    x, t = pair("checks", (9,))
    for fn, kw, says in [
        ("huber_loss", {"delta": 0.0}, "delta must be positive, not 0.0"),
        ("smooth_l1_loss", {"beta": -1.0}, "beta must be non-negative, not -1.0"),
    ]:
        with pytest.raises(TeenyError, match=f"teeny_tx.torch.{fn}: {says}"):
            getattr(ttx, fn)(x, t, **kw)
        with pytest.raises(RuntimeError):  # torch refuses it too
            getattr(torch.nn.functional, fn)(x, t, **kw)
    # beta = 0 is L1, as in torch
    xg, tg = x.clone().requires_grad_(), t.clone().requires_grad_()
    got = ttx.smooth_l1_loss(xg, tg, beta=0.0)
    want = torch.nn.functional.smooth_l1_loss(x, t, beta=0.0)
    torch.testing.assert_close(got, want, rtol=1e-13, atol=1e-14)
    torch.testing.assert_close(torch.autograd.grad(got, xg)[0], torch.sign(x - t) / 9)


def test_kernel_branches_are_the_tables_rows():
    text = kernel_text(families.LOSS_FILE)
    branches = {int(k): v for k, v in re.findall(r"LOSS == (\d+)\) \{\s*/\* (\w+)", text)}
    branches[1] = re.search(r"tile l = d \* d;\s*/\* (\w+)", text).group(1)
    assert branches == {r.loss: r.name for r in ROWS}
    assert all(len(r.params) <= 1 for r in ROWS)  # the kernels' scalar a


def test_docs_tables_are_generated_from_the_family_tables():
    page = (ROOT / "docs" / "families.md").read_text()
    for family in families.FAMILIES:
        assert families.docs_section(family) in page, "stale: python -m teeny_tx.library.families"
    assert families.rewrite_docs(page) == page
    for r in ROWS:
        assert "|" not in r.forward + r.backward


def test_every_branch_compiles_for_sm90():
    m = module(families.LOSS_FILE)
    for row in ROWS:
        dtype = ("bf16", "f16", "f32")[row.loss % 3]
        src = m.loss_bwd.cuda_source(
            dtype, dtype, dtype, dtype, dtype, 1.0, 7.0, 1001, LOSS=row.loss, REDUCED=1, BLOCK=1024
        )
        assert nvrtc_compile(src, "loss_bwd"), row.name
        src = m.loss_partial.cuda_source("f32", dtype, dtype, 1.0, 1001, LOSS=row.loss, BLOCK=1024)
        assert nvrtc_compile(src, "loss_partial"), row.name
    src = m.loss_total.cuda_source("bf16", "f32", 3, 1001.0, BLOCK=1024)
    assert nvrtc_compile(src, "loss_total")
