"""The pointwise activation family (teeny_tx/library/families.py, kernels/pointwise.c) on the
CPU path: every row's op against torch's function in f64 and f32 (odd sizes, a strided view,
the kinks, non-default parameters), its gradient against torch's autograd, gradcheck, opcheck,
the Module drop-ins against torch.nn's, torch.compile(fullgraph=True), bad input, the kernel's
branches and the docs' table against the family table, and every branch compiling for sm_90."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import teeny_tx.torch as ttx  # noqa: E402
from teeny_tx import TeenyError  # noqa: E402
from teeny_tx.library import families  # noqa: E402
from teeny_tx.library.loader import kernel_text, module  # noqa: E402

from .conftest import (  # noqa: E402
    UNIT_ROUNDOFF,
    assert_close_elementwise,
    compile_launches_sm90,
    dtype_name,
    nvrtc_compile,
    recorded_launches,
    stable_seed,
)

ROOT = Path(__file__).resolve().parents[1]
ROWS = [r for r in families.POINTWISE if not r.slope]  # scalar parameters (PReLU: below)
IDS = [r.name for r in ROWS]
# parameters other than torch's defaults, exact in f32 (the kernel's scalars are f32); the only
# ones of a row whose parameters have no defaults (threshold)
OTHER = {
    "elu": (0.5,),
    "celu": (2.0,),
    "hardtanh": (-2.0, 0.5),
    "softplus": (2.0, 5.0),
    "threshold": (0.5, -2.0),
}
KINKS = [0.0, -3.0, 3.0, -1.0, 1.0, 6.0, -2.0, 0.5, 2.5, 10.0, 21.0, -30.0, 40.0]


def data(name: str, shape: tuple[int, ...], dtype=torch.float64) -> torch.Tensor:
    g = torch.Generator().manual_seed(stable_seed(name, shape))
    x = torch.randn(shape, generator=g, dtype=torch.float64) * 4
    flat = x.view(-1)
    k = min(len(KINKS), flat.numel())
    flat[:k] = torch.tensor(KINKS[:k], dtype=torch.float64)
    return x.to(dtype)


def cases(row: families.Pointwise) -> list[tuple[float, ...]]:
    defaults = tuple(d for _, d in row.params)
    if None in defaults:  # torch has no defaults for them
        return [OTHER[row.name]]
    return [defaults, OTHER[row.name]] if row.name in OTHER else [defaults]


@pytest.mark.parametrize("row", ROWS, ids=IDS)
@pytest.mark.parametrize("shape", [(1,), (1001,), (7, 33)])
def test_forward_matches_torch_f64(row, shape):
    x = data(row.name, shape)
    for values in cases(row):
        got = families.FUNCTIONS[row.name](x, *values)
        assert got.shape == x.shape and got.dtype == torch.float64
        torch.testing.assert_close(got, row.reference(x, *values), rtol=1e-13, atol=1e-14)


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_forward_of_a_strided_view_f32(row):
    base = data(row.name, (40, 26), torch.float32)
    x = base.t()[::3, 1:]  # non-contiguous, odd sizes
    assert not x.is_contiguous()
    for values in cases(row):
        got = families.FUNCTIONS[row.name](x, *values)
        torch.testing.assert_close(got, row.reference(x, *values), rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_gradient_matches_torch_f64(row):
    base = data(row.name + "grad", (34, 31))
    for values in cases(row):
        x = base.clone().t()[::2].requires_grad_()
        ref = base.clone().t()[::2].requires_grad_()
        dy = data(row.name + "dy", tuple(x.shape))
        (got,) = torch.autograd.grad(families.FUNCTIONS[row.name](x, *values), x, dy)
        (want,) = torch.autograd.grad(row.reference(ref, *values), ref, dy)
        # torch's f64 hardsigmoid gradient is 1/6 rounded to f32 (0.1666666716...)
        tol = 1e-7 if row.name == "hardsigmoid" else 1e-12
        torch.testing.assert_close(got, want, rtol=tol, atol=tol)


@pytest.mark.parametrize("name", ["elu", "softplus", "mish", "hardtanh", "logsigmoid", "selu"])
def test_gradcheck_f64(name):
    g = torch.Generator().manual_seed(stable_seed("gradcheck", name))
    x = (torch.randn(23, generator=g, dtype=torch.float64) * 3).requires_grad_()
    assert torch.autograd.gradcheck(ttx.__dict__[name], (x,))


def test_opcheck_elu_and_softplus():
    x = data("opcheck", (5, 9)).requires_grad_()
    torch.library.opcheck(torch.ops.teeny_tx.elu.default, (x, 0.5))
    torch.library.opcheck(torch.ops.teeny_tx.softplus.default, (x.float(), 2.0, 5.0))


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_module_is_a_drop_in_for_torch_nn(row):
    ours, theirs = families.MODULES[row.module], getattr(torch.nn, row.module)
    assert ours is getattr(ttx, row.module) and issubclass(ours, theirs)
    values = OTHER.get(row.name, ())
    a, b = ours(*values), theirs(*values)
    assert repr(a) == repr(b)
    x = data(row.name + "module", (3, 17))
    torch.testing.assert_close(a(x), b(x), rtol=1e-13, atol=1e-14)
    if "inplace" in vars(b):
        y = x.clone()
        out = ours(*values, inplace=True)(y)
        assert out.data_ptr() == y.data_ptr()
        torch.testing.assert_close(y, b(x), rtol=1e-13, atol=1e-14)


def test_functional_keeps_torchs_argument_names_and_defaults():
    x = data("kwargs", (50,))
    torch.testing.assert_close(
        ttx.hardtanh(x, max_val=0.5), torch.nn.functional.hardtanh(x, max_val=0.5)
    )
    torch.testing.assert_close(
        ttx.softplus(x, threshold=2.0), torch.nn.functional.softplus(x, threshold=2.0)
    )
    with pytest.raises(TypeError):
        ttx.elu(x, 1.0, 2.0)


def test_compiled_module_fullgraph():
    model = torch.nn.Sequential(
        torch.nn.Linear(8, 8, dtype=torch.float64), ttx.Mish(), ttx.ELU(0.5)
    )
    x = data("compile", (4, 8)).requires_grad_()
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
    got = compiled(x)
    got.sum().backward()
    grad = x.grad.clone()
    x.grad = None
    want = torch.nn.functional.elu(torch.nn.functional.mish(model[0](x)), 0.5)
    want.sum().backward()
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-13)
    torch.testing.assert_close(grad, x.grad, rtol=1e-12, atol=1e-13)


def test_empty_and_integer_inputs():
    empty = torch.empty(0, 3, dtype=torch.float64)
    assert ttx.tanh(empty).shape == (0, 3)
    with pytest.raises(TeenyError, match=r"teeny_tx.torch.relu6: x must be a float tensor"):
        ttx.relu6(torch.arange(5))


def test_parameters_torch_refuses_are_a_clear_error():
    x = data("checks", (9,))
    with pytest.raises(TeenyError, match="teeny_tx.torch.celu: alpha must be non-zero, not 0.0"):
        ttx.CELU(alpha=0.0)(x)
    with pytest.raises(RuntimeError, match="alpha cannot be 0"):  # torch refuses it too
        torch.nn.functional.celu(x, alpha=0.0)
    torch.testing.assert_close(ttx.celu(x, -0.5), torch.nn.functional.celu(x, -0.5))


def test_kernel_branches_are_the_tables_rows():
    text = kernel_text(families.KERNEL_FILE)
    rows = families.POINTWISE
    branches = dict(re.findall(r"ACT == (\d+)\) \{\s*/\* (\w+)", text))
    assert {int(k): v for k, v in branches.items()} == {r.act: r.name for r in rows}
    assert len({r.act for r in rows}) == len(rows) and len({r.module for r in rows}) == len(rows)
    assert all(len(r.params) <= 2 for r in rows)  # the kernel's scalars a and b


def test_docs_table_is_generated_from_the_family_table():
    page = (ROOT / "docs" / "families.md").read_text()
    assert families.docs_section() in page, "stale: python -m teeny_tx.library.families"
    assert families.rewrite_docs(page) == page
    for r in ROWS:  # a '|' in a formula would split the table's cells
        assert "|" not in r.forward + r.backward
    assert "families.md" in (ROOT / "mkdocs.yml").read_text()


@pytest.mark.parametrize("kernel", ["pointwise_fwd", "pointwise_bwd"])
def test_every_branch_compiles_for_sm90(kernel):
    fn = getattr(module(families.KERNEL_FILE), kernel)
    pointers = 2 if kernel == "pointwise_fwd" else 3
    for row in families.POINTWISE:
        dtype = ("bf16", "f16", "f32")[row.act % 3]
        source = fn.cuda_source(*[dtype] * pointers, 1.0, 2.0, 1001, ACT=row.act, BLOCK=1024)
        assert nvrtc_compile(source, kernel), row.name


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_infinities_and_nan_as_torch(row):
    """y and dy/dx at +-inf, NaN and 0 are torch's (softsign's gradient at +-inf is 0, the
    limit, where torch's formula gives NaN)."""
    x = torch.tensor([float("inf"), -float("inf"), float("nan"), 0.0], dtype=torch.float64)
    for values in cases(row):
        ours, ref = x.clone().requires_grad_(), x.clone().requires_grad_()
        y, want = families.FUNCTIONS[row.name](ours, *values), row.reference(ref, *values)
        torch.testing.assert_close(y, want, equal_nan=True, rtol=0, atol=0)
        (gx,) = torch.autograd.grad(y.sum(), ours)
        (gref,) = torch.autograd.grad(want.sum(), ref)
        if row.name == "softsign":
            assert gx[:2].tolist() == [0.0, 0.0] and gref[:2].isnan().all()
            gx, gref = gx[2:], gref[2:]
        torch.testing.assert_close(gx, gref, equal_nan=True, rtol=0, atol=1e-16)


def test_threshold_has_torchs_required_arguments():
    x = data("threshold", (40,))
    with pytest.raises(TypeError):
        ttx.threshold(x)
    torch.testing.assert_close(
        ttx.threshold(x, value=1.5, threshold=-0.25), torch.nn.functional.threshold(x, -0.25, 1.5)
    )


# ---------------------------------------------------------------- PReLU: a tensor of slopes

PRELU_SHAPES = [(1,), (7,), (3, 1), (2, 3, 33), (2, 5, 1001), (2, 4, 3, 5)]


def prelu_case(shape, dtype, channels: bool, device="cpu"):
    g = torch.Generator().manual_seed(stable_seed("prelu", shape, str(dtype), channels))
    x = (torch.randn(shape, generator=g, dtype=torch.float64) * 3).to(device, dtype)
    c = shape[1] if channels and len(shape) >= 2 else 1
    w = (torch.rand(c, generator=g, dtype=torch.float64) - 0.3).to(device, dtype)
    dy = torch.randn(shape, generator=g, dtype=torch.float64).to(device, dtype)
    return x, w, dy


def check_prelu(x, w, dy, dtype):
    """y and dx: one rounding of the float64 result (both a product of two elements); dw: a
    sum of x dy, one rounding plus 16 u(acc) of the sum of |x dy|."""
    xg, wg = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
    y = ttx.prelu(xg, wg)
    assert y.dtype == dtype and y.shape == x.shape
    x64, w64 = x.detach().double().requires_grad_(), w.detach().double().requires_grad_()
    want = torch.nn.functional.prelu(x64, w64)
    assert_close_elementwise(y, want, dtype, ulps=1.0, what="prelu y")
    gx, gw = torch.autograd.grad(y, (xg, wg), dy)
    rx, rw = torch.autograd.grad(want, (x64, w64), dy.double())
    assert_close_elementwise(gx, rx, dtype, ulps=1.0, what="prelu dx")
    terms = torch.where(x64.detach() <= 0, (x64.detach() * dy.double()).abs(), 0.0)
    if w.numel() == 1:
        cond = terms.sum().reshape(w.shape)
    else:
        cond = terms.transpose(0, 1).reshape(w.numel(), -1).sum(1)
    u = UNIT_ROUNDOFF[dtype_name(dtype)]
    u_acc = UNIT_ROUNDOFF["f64" if dtype == torch.float64 else "f32"]
    scale = rw.abs() + (16 * u_acc / u) * (rw.abs() + cond.abs())
    assert_close_elementwise(gw, rw, dtype, ulps=1.0, scale=scale, what="prelu dweight")


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("shape", PRELU_SHAPES)
def test_prelu_matches_float64(shape, dtype):
    for channels in (False, True):
        check_prelu(*prelu_case(shape, dtype, channels), dtype)


def test_prelu_strided_gradcheck_module_and_errors():
    x, w, dy = prelu_case((6, 4, 10), torch.float32, True)
    check_prelu(x.transpose(0, 2)[::2].transpose(0, 2)[:, :, 1:], w, dy[:, :, :4], torch.float32)
    xs, ws, _ = prelu_case((2, 3, 4), torch.float64, True)
    assert torch.autograd.gradcheck(ttx.prelu, (xs.requires_grad_(), ws.requires_grad_()))
    ours, theirs = ttx.PReLU(3, init=0.1), torch.nn.PReLU(3, init=0.1)
    assert isinstance(ours, torch.nn.PReLU) and repr(ours) == repr(theirs)
    assert ours.state_dict().keys() == theirs.state_dict().keys()
    x = prelu_case((2, 3, 4), torch.float32, True)[0]
    y, want = ours(x), theirs(x)
    torch.testing.assert_close(y, want, rtol=0, atol=0)
    torch.testing.assert_close(
        torch.autograd.grad(y.sum(), ours.weight), torch.autograd.grad(want.sum(), theirs.weight)
    )
    torch.library.opcheck(torch.ops.teeny_tx.prelu.default, (xs, ws))
    for fn, says in [
        (lambda: ttx.prelu(x, torch.ones(2)), "2 slopes for an input of 3 channels"),
        (lambda: ttx.prelu(x, torch.ones(1, 3)), "weight must be 1 or C slopes"),
        (lambda: ttx.prelu(x.int(), torch.ones(3)), "input must be a float tensor"),
        (lambda: ttx.prelu(x, torch.ones(3, dtype=torch.int32)), "weight must be a float"),
    ]:
        with pytest.raises(TeenyError, match=says):
            fn()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32], ids=str)
def test_prelu_launches_compile_for_sm90(dtype):
    def run():
        for shape in PRELU_SHAPES:
            x, w, dy = prelu_case(shape, dtype, True)
            x.requires_grad_()
            w.requires_grad_()
            torch.autograd.grad(ttx.prelu(x, w), (x, w), dy)

    names = compile_launches_sm90(recorded_launches(run))
    assert names == {"prelu_fwd", "prelu_bwd", "prelu_wsum"}
