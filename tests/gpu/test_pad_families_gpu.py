"""The padding family (kernels/pad.c) on CUDA tensors: every mode over 1, 2 and 3 dimensions,
f32/f16/bf16, forward equal to torch's and the gradient against the float64 adjoint (the CPU
tests' cases and larger ones), strided views, and a compiled model (fullgraph=True)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("torch sees no CUDA device", allow_module_level=True)

import teeny_tx.torch as ttx  # noqa: E402

from ..test_families_pad import ALL, MODES, check_pad, data, legal  # noqa: E402

DEV = "cuda"
DTYPES = (torch.float32, torch.float16, torch.bfloat16)
LARGER = [
    ((8, 64, 56, 56), (3, 3, 3, 3)),
    ((4, 16, 1001), (7, -2)),
    ((2, 8, 16, 17, 18), (2, 1, 1, 2, 3, 0)),
    ((1, 3, 224, 224), (-5, 100, 0, 9)),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", ALL, ids=lambda c: f"{c[0]}-{c[1]}-{c[2]}")
def test_matches_torch(case, dtype):
    mode, shape, pad = case
    check_pad(mode, data(shape, dtype, device=DEV), pad, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("mode", MODES)
def test_larger(mode, dtype):
    for shape, pad in LARGER:
        if legal(mode, shape, pad):
            check_pad(mode, data(shape, dtype, device=DEV), pad, dtype)


@pytest.mark.parametrize("mode", MODES)
def test_strided_views(mode):
    base = data((5, 9, 40, 64), torch.bfloat16, device=DEV)
    check_pad(mode, base[1:, ::2, 3:, ::3], (2, 1, 1, 3), torch.bfloat16)
    check_pad(mode, base.transpose(2, 3)[0], (3, 0, -2, 4), torch.bfloat16)


def test_compiled_fullgraph():
    model = torch.nn.Sequential(
        ttx.ReflectionPad2d(1), torch.nn.Conv2d(3, 8, 3), ttx.ReplicationPad2d((0, 2, 1, 0))
    ).to(DEV)
    x = data((4, 3, 32, 32), torch.float32, device=DEV).requires_grad_()
    got = torch.compile(model, fullgraph=True)(x)
    (gx,) = torch.autograd.grad(got.square().sum(), x)
    want = torch.nn.functional.pad(
        model[1](torch.nn.functional.pad(x, (1, 1, 1, 1), "reflect")), (0, 2, 1, 0), "replicate"
    )
    (wx,) = torch.autograd.grad(want.square().sum(), x)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(gx, wx, rtol=1e-4, atol=1e-4)
