"""The pooling family (kernels/pool.c) on CUDA tensors: every pool and option of the CPU tests
and ResNet-sized ones, f32/f16/bf16, max values and indices equal to torch's, averages and
every gradient against the float64 reference under the CPU tests' error model, strided views,
and a compiled model (fullgraph=True)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("torch sees no CUDA device", allow_module_level=True)

import teeny_tx.torch as ttx  # noqa: E402

from ..test_families_pool import ALL, ROW, check_pool, data  # noqa: E402

DEV = "cuda"
DTYPES = (torch.float32, torch.float16, torch.bfloat16)
LARGER = [
    ("max_pool2d", (32, 64, 112, 112), {"kernel_size": 3, "stride": 2, "padding": 1}),
    ("max_pool2d", (8, 16, 57, 57), {"kernel_size": 3, "stride": 2, "ceil_mode": True,
                                      "return_indices": True}),
    ("max_pool1d", (16, 32, 10001), {"kernel_size": 5, "stride": 3, "dilation": 2}),
    ("avg_pool2d", (32, 64, 56, 56), {"kernel_size": 2}),
    ("avg_pool2d", (8, 16, 33, 31), {"kernel_size": 3, "stride": 2, "padding": 1,
                                      "ceil_mode": True, "count_include_pad": False}),
    ("avg_pool1d", (16, 32, 10001), {"kernel_size": 4, "stride": 4}),
    ("adaptive_avg_pool2d", (64, 512, 7, 7), {"output_size": 1}),
    ("adaptive_avg_pool2d", (8, 16, 37, 41), {"output_size": (6, 9)}),
    ("adaptive_max_pool2d", (8, 16, 37, 41), {"output_size": (7, 5), "return_indices": True}),
]  # fmt: skip


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", ALL, ids=lambda c: f"{c[0]}-{c[1]}-{sorted(c[2].items())}")
def test_matches_torch(case, dtype):
    name, shape, kw = case
    check_pool(name, data(shape, dtype, device=DEV), kw, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", LARGER, ids=lambda c: f"{c[0]}-{c[1]}")
def test_larger(case, dtype):
    name, shape, kw = case
    check_pool(name, data(shape, dtype, device=DEV), kw, dtype)


@pytest.mark.parametrize("name", list(ROW))
def test_strided_views(name):
    base = data((5, 8, 40, 64), torch.bfloat16, device=DEV)
    x = base[1:, ::2, 3:, ::3] if ROW[name].dims == 2 else base[0, 1:, 3, ::2]
    kw = {"output_size": (5, 4)} if ROW[name].adaptive else {"kernel_size": 3, "stride": 2}
    check_pool(name, x, kw, torch.bfloat16)


def test_compiled_fullgraph():
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3), ttx.MaxPool2d(3, 2, 1), ttx.AvgPool2d(2), ttx.AdaptiveAvgPool2d(1)
    ).to(DEV)
    x = data((4, 3, 32, 32), torch.float32, device=DEV).requires_grad_()
    got = torch.compile(model, fullgraph=True)(x)
    (gx,) = torch.autograd.grad(got.square().sum(), x)
    f = torch.nn.functional
    want = f.adaptive_avg_pool2d(f.avg_pool2d(f.max_pool2d(model[0](x), 3, 2, 1), 2), 1)
    (wx,) = torch.autograd.grad(want.square().sum(), x)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(gx, wx, rtol=1e-4, atol=1e-4)
