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

from .conftest import nvrtc_compile, stable_seed  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
ROWS = families.POINTWISE
IDS = [r.name for r in ROWS]
# parameters other than torch's defaults, exact in f32 (the kernel's scalars are f32)
OTHER = {"elu": (0.5,), "celu": (2.0,), "hardtanh": (-2.0, 0.5), "softplus": (2.0, 5.0)}
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
    branches = dict(re.findall(r"ACT == (\d+)\) \{\s*/\* (\w+)", text))
    assert {int(k): v for k, v in branches.items()} == {r.act: r.name for r in ROWS}
    assert len({r.act for r in ROWS}) == len(ROWS) and len({r.module for r in ROWS}) == len(ROWS)
    assert all(len(r.params) <= 2 for r in ROWS)  # the kernel's scalars a and b


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
    for row in ROWS:
        dtype = ("bf16", "f16", "f32")[row.act % 3]
        source = fn.cuda_source(*[dtype] * pointers, 1.0, 2.0, 1001, ACT=row.act, BLOCK=1024)
        assert nvrtc_compile(source, kernel), row.name
