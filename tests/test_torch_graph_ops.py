"""teeny_tx.torch.op: a user's forward and backward kernels (tests/kernels/bias_tanh.c) as a
custom op, on CPU tensors through the interpreter: gradcheck in float64, opcheck,
torch.compile(fullgraph=True) forward and backward, strided inputs, each dtype against torch,
and the errors of a badly declared op. The same op is the worked example of
docs/graph-ops.md."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import teeny_tx as tx  # noqa: E402
import teeny_tx.torch as ttx  # noqa: E402
from teeny_tx import TeenyError, cdiv  # noqa: E402

MOD = tx.compile(
    Path(__file__).parent / "kernels" / "bias_tanh.c", name="tests/kernels/bias_tanh.c"
)
BR, BC = 16, 64


def forward(launch, x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    x = x if x.stride(1) == 1 else x.contiguous()
    rows, cols = x.shape
    y = x.new_empty((rows, cols))
    grid = (cdiv(rows, BR), cdiv(cols, BC))
    # x may be a row-strided view: the kernel indexes it with the row stride it is passed
    launch(
        MOD.bias_tanh_fwd,
        grid,
        y,
        x,
        bias,
        rows,
        cols,
        x.stride(0),
        BLOCK_R=BR,
        BLOCK_C=BC,
        strided=True,
    )
    return y


def backward(
    launch, x: torch.Tensor, bias: torch.Tensor, y: torch.Tensor, dy: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    rows, cols = y.shape
    dx, dbias = torch.empty_like(y), torch.zeros_like(bias)
    grid = (cdiv(rows, BR), cdiv(cols, BC))
    launch(MOD.bias_tanh_bwd, grid, dx, dbias, y, dy, rows, cols, BLOCK_R=BR, BLOCK_C=BC)
    return dx, dbias


bias_tanh = ttx.op("teeny_tx_tests::bias_tanh", forward, backward)


def _inputs(rows, cols, dtype=torch.float64, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, cols, generator=g, dtype=torch.float64).to(dtype)
    b = torch.randn(cols, generator=g, dtype=torch.float64).to(dtype)
    return x.requires_grad_(), b.requires_grad_()


@pytest.mark.parametrize("rows,cols", [(1, 1), (5, 70), (17, 3)])
def test_gradcheck_float64(rows, cols):
    assert torch.autograd.gradcheck(bias_tanh, _inputs(rows, cols))


def test_opcheck():
    torch.library.opcheck(bias_tanh, _inputs(19, 65, torch.float32))


def test_registered_in_its_namespace():
    assert torch.ops.teeny_tx_tests.bias_tanh.default is not None
    assert torch.ops.teeny_tx_tests.bias_tanh_backward.default is not None


@pytest.mark.parametrize(
    "dtype,tol", [(torch.float32, 1e-6), (torch.float16, 2e-3), (torch.bfloat16, 2e-2)], ids=str
)
def test_against_torch(dtype, tol):
    x, b = _inputs(33, 1001, dtype)
    xr, br = (t.detach().double().requires_grad_() for t in (x, b))
    y, ref = bias_tanh(x, b), torch.tanh(xr + br)
    torch.testing.assert_close(y.double(), ref, rtol=tol, atol=tol)
    g = torch.randn(y.shape, generator=torch.Generator().manual_seed(1)).to(dtype)
    y.backward(g)
    ref.backward(g.double())
    torch.testing.assert_close(x.grad.double(), xr.grad, rtol=tol, atol=tol)
    scale = xr.grad.abs().sum(0).max().item()  # dbias sums 33 rows of rounded terms
    torch.testing.assert_close(b.grad.double(), br.grad, rtol=tol, atol=tol * scale)


def test_strided_input():
    base, b = _inputs(8, 90)
    x = base.detach()[1::2, 5:80]  # row stride 180, offset view
    y = bias_tanh(x, b.detach()[:75])
    torch.testing.assert_close(y, torch.tanh(x + b.detach()[:75]))
    xt = base.detach()[:, :8].t()  # columns not contiguous: the forward copies
    torch.testing.assert_close(bias_tanh(xt, b.detach()[:8]), torch.tanh(xt + b.detach()[:8]))


def test_compile_fullgraph():
    torch._dynamo.reset()
    x, b = _inputs(9, 20, torch.float32)
    f = torch.compile(
        lambda x, b: (bias_tanh(x, b) * 3.0).sum(), fullgraph=True, backend="aot_eager"
    )
    f(x, b).backward()
    xr, br = (t.detach().clone().requires_grad_() for t in (x, b))
    (torch.tanh(xr + br) * 3.0).sum().backward()
    torch.testing.assert_close(x.grad, xr.grad)
    torch.testing.assert_close(b.grad, br.grad, rtol=1e-5, atol=1e-5)


def test_forward_without_hints_is_an_error():
    def untyped(launch, x):
        return x

    with pytest.raises(TeenyError, match="needs a type hint"):
        ttx.op("teeny_tx_tests::untyped", untyped)


def test_grads_for_names_inputs():
    with pytest.raises(TeenyError, match="not inputs of forward"):
        ttx.op("teeny_tx_tests::bad_grads", forward, backward, grads_for=("z",))


def test_cpu_false_refuses_cpu_tensors():
    def fwd(launch, x: torch.Tensor) -> torch.Tensor:
        y = torch.empty_like(x)
        launch(MOD.bias_tanh_fwd, (1, 1), y, x, x, 1, 1, 1, BLOCK_R=BR, BLOCK_C=BC)
        return y

    gpu_only = ttx.op("teeny_tx_tests::gpu_only", fwd, cpu=False)
    with pytest.raises(TeenyError, match="no CPU implementation"):
        gpu_only(torch.ones(1, 1))
