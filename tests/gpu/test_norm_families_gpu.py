"""The normalisation family (kernels/norms.c) on CUDA tensors: batch, group and instance norm,
training and eval, f32/f16/bf16, against the float64 reference under the CPU tests' error
model (y, the running statistics, dx, dweight, dbias), odd and larger shapes, strided views,
the Modules against torch.nn's on the GPU (cuDNN), and torch.compile(fullgraph=True)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("torch sees no CUDA device", allow_module_level=True)

import teeny_tx.torch as ttx  # noqa: E402

from ..conftest import (  # noqa: E402
    UNIT_ROUNDOFF,
    assert_close_elementwise,
    dtype_name,
    stable_seed,
)
from ..test_families_norms import IDS, SHAPES, check, compare  # noqa: E402

DEV = "cuda"
DTYPES = (torch.float32, torch.float16, torch.bfloat16)
LARGER = {
    "batch_norm": [((256, 64, 8, 8), 1), ((4096, 1024), 1), ((3, 5, 70001), 1)],
    "group_norm": [((32, 64, 16, 16), 8), ((2, 32, 50000), 32), ((5, 33, 7), 3)],
    "instance_norm": [((16, 32, 32, 32), 1), ((2, 3, 200001), 1), ((65, 3, 9), 1)],
}


@pytest.mark.parametrize("name", IDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_training_matches_float64(name, dtype):
    for shape, groups in SHAPES[name] + LARGER[name]:
        if name == "batch_norm" or groups > 1 or shape[2:] != (1,):
            compare(name, shape, groups, dtype, True, device=DEV)


@pytest.mark.parametrize("name", ["batch_norm", "instance_norm"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_eval_mode_matches_float64(name, dtype):
    for shape in [(1, 3), (7, 3), (2, 3, 1), (2, 3, 5, 7), (64, 32, 9, 9)]:
        if name == "instance_norm" and len(shape) == 2:
            continue
        compare(name, shape, 1, dtype, False, device=DEV)


@pytest.mark.parametrize("name", IDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_strided_views(name, dtype):
    groups = 2 if name == "group_norm" else 1
    compare(name, (9, 8, 70), groups, dtype, True, lambda t: t[1:8, ::2, 3::3], device=DEV)
    compare(name, (4, 33, 16), groups, dtype, True, lambda t: t.transpose(1, 2), device=DEV)


@pytest.mark.parametrize("name", ["BatchNorm2d", "GroupNorm", "InstanceNorm2d"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_module_against_torch_on_the_gpu(name, dtype):
    """Two training steps and one in eval against torch's Module in f64 on the same rounded
    input (weight 1, bias 0: y is xhat, whose error is relative to |xhat| + (|x| + the mean
    of |x|) rstd, rstd about 1). The
    running statistics are ours rounded to dtype at each step (twice: 2 u of the value, plus
    the f32 statistics' error of the unit-variance data); eval then normalises both Modules
    with ours."""
    args = (4, 16) if name == "GroupNorm" else (16,)
    kwargs = {"affine": True, "track_running_stats": True} if name == "InstanceNorm2d" else {}
    ours = getattr(ttx, name)(*args, **kwargs).to(DEV, dtype)
    theirs = getattr(torch.nn, name)(*args, **kwargs).to(DEV, torch.float64)
    g = torch.Generator().manual_seed(stable_seed(name, str(dtype)))
    u, u32 = UNIT_ROUNDOFF[dtype_name(dtype)], UNIT_ROUNDOFF["f32"]
    for step in range(3):
        if step == 2:
            for key, value in theirs.state_dict().items():
                mine = ours.state_dict()[key]
                if value.is_floating_point():
                    scale = value.abs() + (8 * u32 / u)
                    assert_close_elementwise(mine, value, dtype, ulps=2.0, scale=scale, what=key)
                else:
                    assert torch.equal(mine.cpu(), value.cpu())
            theirs.load_state_dict(ours.state_dict())  # (copied into its f64 tensors)
        ours.train(step < 2)
        theirs.train(step < 2)
        x = torch.randn(8, 16, 13, 11, generator=g).to(DEV, dtype)
        y, want = ours(x), theirs(x.double())
        assert y.dtype == dtype
        magnitude = x.double().abs()  # the mean's rounding is relative to the mean of |x|
        cond = want.abs() + 2 * (magnitude + magnitude.mean())
        check(y, want, dtype, cond, 4, f"{name} step {step}")


def test_compiled_fullgraph():
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3), ttx.BatchNorm2d(8), torch.nn.ReLU(), ttx.GroupNorm(2, 8)
    ).to(DEV)
    ref = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8), torch.nn.ReLU(), torch.nn.GroupNorm(2, 8)
    ).to(DEV)
    ref.load_state_dict(model.state_dict())
    compiled = torch.compile(model, fullgraph=True)
    x = torch.randn(4, 3, 16, 16, device=DEV, requires_grad=True)
    got = compiled(x)
    (gx,) = torch.autograd.grad(got.square().sum(), x)
    want = ref(x)
    (wx,) = torch.autograd.grad(want.square().sum(), x)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(gx, wx, rtol=1e-3, atol=1e-3)
    torch.testing.assert_close(model[1].running_var, ref[1].running_var, rtol=1e-5, atol=1e-6)
