"""The optimizer family (kernels/optim.c) on CUDA tensors: every optimizer and option, one
step from the same state against float64 (one rounding of f32/f16/bf16), flat buckets and
tensor by tensor, large tensors; a model trained against torch's fused and foreach steps in
f32; and one launch per bucket."""

from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("torch sees no CUDA device", allow_module_level=True)

import teeny_tx.torch as ttx  # noqa: E402
from teeny_tx.library import optimizers  # noqa: E402

from ..conftest import assert_close_elementwise, recorded_launches, stable_seed  # noqa: E402
from ..test_families_optim import IDS, OPTIONS, give_grads, one_step  # noqa: E402

DEV = "cuda"
DTYPES = (torch.float32, torch.float16, torch.bfloat16)
LARGE = [(1,), (7,), (1000, 1001), (4096, 33), (3, 3, 64, 64)]


@pytest.mark.parametrize("flat", [True, False], ids=["flat", "per-tensor"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", OPTIONS, ids=IDS)
def test_one_step_matches_float64(case, dtype, flat):
    one_step(*case, dtype, flat, device=DEV, shapes=LARGE)


@pytest.mark.parametrize("case", [c for c in OPTIONS if c[0] != "Lion"], ids=str)
@pytest.mark.parametrize("impl", ["foreach", "fused"])
def test_training_against_torch_f32(case, impl):
    """Ten steps of a model: within a rounding per step of torch's foreach or fused step
    (torch computes in f32 per operation; ours in f64, rounding once)."""
    name, kw = case
    if impl == "fused" and name in ("RMSprop", "Adagrad"):
        pytest.skip(f"torch has no fused {name} for CUDA tensors")
    torch.manual_seed(stable_seed(name, impl))
    model = torch.nn.Sequential(
        torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 10)
    ).to(DEV)
    theirs = copy.deepcopy(model)
    opt_a = optimizers.CLASSES[name](model.parameters(), **kw)
    opt_b = getattr(torch.optim, name)(theirs.parameters(), **kw, **{impl: True})
    path = [torch.zeros_like(p) for p in theirs.parameters()]
    for _ in range(10):
        x = torch.randn(32, 64, device=DEV)
        start = [p.detach().clone() for p in theirs.parameters()]
        for m, o in ((model, opt_a), (theirs, opt_b)):
            o.zero_grad()
            m(x).square().mean().backward()
            o.step()
        for d, s, p in zip(path, start, theirs.parameters(), strict=True):
            d += (p.detach() - s).abs()
    for p, q, d in zip(model.parameters(), theirs.parameters(), path, strict=True):
        assert_close_elementwise(p, q.double(), torch.float32, ulps=40.0, scale=q.abs() + d,
                                 what=name)  # fmt: skip


def test_one_launch_per_bucket_on_the_gpu():
    model = torch.nn.Sequential(*[torch.nn.Linear(32, 32) for _ in range(50)]).to(DEV)
    opt = ttx.optim.Adam(model.parameters(), lr=1e-3)
    give_grads(list(model.parameters()), [torch.ones_like(p) for p in model.parameters()])
    launches = recorded_launches(opt.step)
    assert [k.name for k, _, _ in launches] == ["optim_step"]  # 100 tensors, one launch
    torch.cuda.synchronize()
