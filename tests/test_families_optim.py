"""The optimizer family (teeny_tx/library/optimizers.py, kernels/optim.c) on the CPU path:
every optimizer and option against torch.optim's update (Lion against a float64 reference of
its paper's), one step from the same state element by element against float64 (one rounding
to the dtype), several steps against torch in the same dtype, f64/f32/f16/bf16, flat buckets
and tensor by tensor; the state dict (torch's keys, shapes and dtypes, loading both ways);
one launch per bucket; parameters without gradients, assigned gradients, param groups, a
moved parameter, an LR scheduler; the options refused; the docs' table; and every launched
specialisation compiling for sm_90."""

from __future__ import annotations

import copy
import math
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import teeny_tx.torch as ttx  # noqa: E402
from teeny_tx import TeenyError  # noqa: E402
from teeny_tx.library import families, optimizers  # noqa: E402

from .conftest import (  # noqa: E402
    UNIT_ROUNDOFF,
    assert_close_elementwise,
    compile_launches_sm90,
    dtype_name,
    recorded_launches,
    stable_seed,
)

ROOT = Path(__file__).resolve().parents[1]
DTYPES = (torch.float64, torch.float32, torch.float16, torch.bfloat16)
SHAPES = [(7,), (3, 5), (1,), (33,), (1001,)]
# every option of each optimizer at least once (torch's defaults first)
OPTIONS = [
    ("SGD", {"lr": 0.1}),
    ("SGD", {"lr": 0.05, "momentum": 0.9, "dampening": 0.1, "weight_decay": 0.01}),
    ("SGD", {"lr": 0.05, "momentum": 0.8, "nesterov": True, "maximize": True}),
    ("Adam", {}),
    ("Adam", {"lr": 0.01, "betas": (0.8, 0.99), "eps": 1e-6, "weight_decay": 0.1,
              "amsgrad": True}),
    ("Adam", {"lr": 0.01, "weight_decay": 0.1, "decoupled_weight_decay": True,
              "maximize": True}),
    ("RMSprop", {}),
    ("RMSprop", {"lr": 0.01, "alpha": 0.9, "momentum": 0.9, "centered": True,
                 "weight_decay": 0.1}),
    ("RMSprop", {"lr": 0.01, "centered": True, "maximize": True}),
    ("Adagrad", {}),
    ("Adagrad", {"lr": 0.1, "lr_decay": 0.01, "initial_accumulator_value": 0.1,
                 "weight_decay": 0.1, "eps": 1e-6, "maximize": True}),
    ("Lion", {}),
    ("Lion", {"lr": 0.01, "betas": (0.8, 0.9), "weight_decay": 0.1, "maximize": True}),
]  # fmt: skip
IDS = [f"{n}-{'-'.join(sorted(kw)) or 'defaults'}" for n, kw in OPTIONS]


class LionReference(torch.optim.Optimizer):
    """Lion (Chen et al., 2023, Algorithm 2) in torch ops, the float64 reference."""

    def __init__(self, params, lr=1e-4, betas=(0.9, 0.99), weight_decay=0.0, maximize=False):
        super().__init__(params, {"lr": lr, "betas": betas, "weight_decay": weight_decay,
                                  "maximize": maximize})  # fmt: skip

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            b1, b2 = group["betas"]
            for p in group["params"]:
                g = -p.grad if group["maximize"] else p.grad
                m = self.state[p].setdefault("exp_avg", torch.zeros_like(p))
                p.mul_(1 - group["lr"] * group["weight_decay"])
                p.add_(torch.sign(b1 * m + (1 - b1) * g), alpha=-group["lr"])
                m.mul_(b2).add_(g, alpha=1 - b2)


def reference(name: str):
    return LionReference if name == "Lion" else getattr(torch.optim, name)


def tensors(dtype, *parts, shapes=SHAPES):
    g = torch.Generator().manual_seed(stable_seed(str(dtype), *parts, shapes))
    return [torch.randn(s, generator=g, dtype=torch.float64).to(dtype) for s in shapes]


def give_grads(params, grads):
    """Gradients through autograd (which accumulates into the buckets' views)."""
    loss = sum((p * g).sum() for p, g in zip(params, grads, strict=True))
    loss.backward()


def check(got, want, dtype, before, grad, what):
    """One rounding of the float64 result to dtype, plus the difference of two f64
    computations (ours, torch's): a few f64 roundings of the magnitudes the update combines
    (the old value, the new one, the gradient and its square)."""
    u = UNIT_ROUNDOFF[dtype_name(dtype)]
    g = grad.double().abs()
    cond = before.double().abs() + want.abs() + g + g * g
    scale = want.abs() + (16 * UNIT_ROUNDOFF["f64"] / u) * cond
    if dtype == torch.float64:
        scale = scale + want.abs()  # torch's f64 result rounds too
    assert_close_elementwise(got, want, dtype, ulps=1.0, scale=scale, what=what)


def one_step(name, kw, dtype, flat, device="cpu", shapes=SHAPES):
    """Two steps of ours, then its state loaded into torch's optimizer on f64 copies: one more
    step of each from the same state and gradient agrees to one rounding of the dtype (the
    parameters and every state)."""
    params = [torch.nn.Parameter(t.to(device)) for t in tensors(dtype, name, "p", shapes=shapes)]
    opt = optimizers.CLASSES[name](params, **kw, flat=flat)
    for step in range(2):
        opt.zero_grad()
        give_grads(params, [g.to(device) for g in tensors(dtype, name, "g", step, shapes=shapes)])
        opt.step()
    before = [p.detach().clone() for p in params]
    state = copy.deepcopy(opt.state_dict())
    params64 = [torch.nn.Parameter(p.detach().double().clone()) for p in params]
    opt64 = reference(name)(params64, **kw)
    opt64.load_state_dict(state)
    grads = [g.to(device) for g in tensors(dtype, name, "g", 2, shapes=shapes)]
    opt.zero_grad()
    give_grads(params, grads)
    opt.step()
    give_grads(params64, [g.double() for g in grads])
    opt64.step()
    for i, (p, want) in enumerate(zip(params, params64, strict=True)):
        lr = kw.get("lr", 0.01)
        check(p, want.detach(), dtype, before[i], lr * grads[i], f"{name} param {i}")
        for key, value in opt64.state[want].items():
            if key == "step":
                assert float(opt.state[p][key]) == float(value) == 3.0
            else:
                old = state["state"][i][key]
                check(opt.state[p][key], value, dtype, old, grads[i], f"{name} {key} {i}")


@pytest.mark.parametrize("flat", [True, False], ids=["flat", "per-tensor"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", OPTIONS, ids=IDS)
def test_one_step_matches_float64(case, dtype, flat):
    one_step(*case, dtype, flat)


def test_a_strided_parameter_steps_in_place():
    """flat=False on a transposed parameter: stepped on a contiguous copy, copied back (f64:
    the path is what is tested)."""
    base = tensors(torch.float64, "strided", "p")[1]
    ours = torch.nn.Parameter(base.t())
    theirs = torch.nn.Parameter(base.t().clone())
    assert not ours.is_contiguous()
    opt_a = ttx.Adam([ours], lr=0.1, flat=False)
    opt_b = torch.optim.Adam([theirs], lr=0.1)
    for step in range(3):
        for p, o in ((ours, opt_a), (theirs, opt_b)):
            o.zero_grad()
            give_grads([p], [tensors(torch.float64, "strided", "g", step)[1].t()])
            o.step()
    assert not ours.is_contiguous()
    torch.testing.assert_close(ours, theirs, rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=str)
@pytest.mark.parametrize("case", OPTIONS, ids=IDS)
def test_steps_like_torch(case, dtype):
    """Five steps of training a small model from one start against float64: each step's update
    errs by a few roundings of its size and each stored value by one, so the bound is 4 u per
    step of |p| plus the path the parameter travelled, plus twice torch's own distance in the
    dtype (Lion: float64 alone). (In f16 and bf16 the states' own roundings, torch's too,
    steer the trajectory; the one-step test bounds those dtypes.)"""
    name, kw = case
    torch.manual_seed(stable_seed(name, str(dtype)))
    model = torch.nn.Sequential(torch.nn.Linear(6, 9), torch.nn.Tanh(), torch.nn.Linear(9, 2))
    ours, peer, exact = model.to(dtype), copy.deepcopy(model), copy.deepcopy(model).double()
    opts = [
        optimizers.CLASSES[name](ours.parameters(), **kw),
        reference(name)(exact.parameters(), **kw),
    ]
    if name != "Lion":
        opts.append(getattr(torch.optim, name)(peer.parameters(), **kw))
    g = torch.Generator().manual_seed(stable_seed(name, "data"))
    steps = 5
    path = [torch.zeros_like(p) for p in exact.parameters()]
    for _ in range(steps):
        x = torch.randn(8, 6, generator=g, dtype=torch.float64)
        start = [p.detach().clone() for p in exact.parameters()]
        for m, o in zip((ours, exact, peer), opts, strict=False):
            o.zero_grad()
            m(x.to(next(m.parameters()).dtype)).square().mean().backward()
            o.step()
        for d, s, p in zip(path, start, exact.parameters(), strict=True):
            d += (p.detach() - s).abs()
    for i, ((key, p), want) in enumerate(zip(ours.named_parameters(), exact.parameters(),
                                             strict=True)):  # fmt: skip
        other = dict(peer.named_parameters())[key] if name != "Lion" else None
        assert_close_elementwise(p, want, dtype, ulps=4.0 * steps, scale=want.abs() + path[i],
                                 peer=other, what=f"{name} {key}")  # fmt: skip


@pytest.mark.parametrize("case", OPTIONS, ids=IDS)
def test_state_dict_is_torchs_and_loads_both_ways(case):
    name, kw = case
    params = [torch.nn.Parameter(t) for t in tensors(torch.float32, name, "sd")]
    theirs = [torch.nn.Parameter(p.detach().clone()) for p in params]
    ours = optimizers.CLASSES[name](params, **kw)
    ref = reference(name)(theirs, **kw)
    for step in range(2):
        for o, ps in ((ours, params), (ref, theirs)):
            o.zero_grad()
            give_grads(ps, tensors(torch.float32, name, "g", step))
            o.step()
    a, b = ours.state_dict(), ref.state_dict()
    assert a["param_groups"] == b["param_groups"]
    assert a["state"].keys() == b["state"].keys()
    for i, state in b["state"].items():
        assert a["state"][i].keys() == state.keys()
        for key, value in state.items():
            got = a["state"][i][key]
            assert got.shape == value.shape and got.dtype == value.dtype, (i, key)
    # torch's state into ours (a fresh optimizer over fresh buckets), and ours into torch's
    again = [torch.nn.Parameter(p.detach().clone()) for p in theirs]
    loaded = optimizers.CLASSES[name](again, **kw)
    loaded.load_state_dict(ref.state_dict())
    ref.load_state_dict(copy.deepcopy(ours.state_dict()))
    for o, ps in ((loaded, again), (ref, theirs), (ours, params)):
        o.zero_grad()
        give_grads(ps, tensors(torch.float32, name, "g", 9))
        o.step()
    for p, q, r in zip(params, theirs, again, strict=True):
        torch.testing.assert_close(p, q, rtol=2e-6, atol=1e-6)
        torch.testing.assert_close(r, q, rtol=2e-6, atol=1e-6)


def test_one_launch_per_bucket():
    """A group of f32 and f64 parameters (two buckets) and a second group: three launches."""
    f32 = [torch.nn.Parameter(t) for t in tensors(torch.float32, "launches")]
    f64 = [torch.nn.Parameter(t) for t in tensors(torch.float64, "launches")]
    extra = [torch.nn.Parameter(torch.ones(4, 3))]
    opt = ttx.optim.Adam([{"params": f32 + f64}, {"params": extra, "lr": 0.1}])
    everything = f32 + f64 + extra
    give_grads(everything, [torch.ones_like(p) for p in everything])
    launches = recorded_launches(opt.step)
    assert [k.name for k, _, _ in launches] == ["optim_step"] * 3
    assert [args[5] for _, args, _ in launches] == [sum(p.numel() for p in f32),
                                                    sum(p.numel() for p in f64), 12]  # fmt: skip
    bucket = opt._buckets[0][0]  # the parameters, their gradients and state are its views
    offset = f32[0].numel() * 4
    assert f32[1].data_ptr() == bucket.param.data_ptr() + offset
    assert f32[1].grad.data_ptr() == bucket.grad.data_ptr() + offset
    assert opt.state[f32[1]]["exp_avg"].data_ptr() == bucket.states["exp_avg"].data_ptr() + offset


def test_buckets_fall_back_as_torch_would():
    """No gradient for one parameter (skipped, the others stepped one by one), an assigned
    gradient (copied in), a parameter moved off its bucket: torch's result each time."""
    torch.manual_seed(0)  # (f64: the paths are what is tested, not the rounding)
    ours = torch.nn.Sequential(torch.nn.Linear(4, 5), torch.nn.Linear(5, 3)).double()
    theirs = copy.deepcopy(ours)
    opt_a = ttx.SGD(ours.parameters(), lr=0.05, momentum=0.9)
    opt_b = torch.optim.SGD(theirs.parameters(), lr=0.05, momentum=0.9)
    x = torch.randn(6, 4, dtype=torch.float64)
    for step in range(4):
        for m, o in ((ours, opt_a), (theirs, opt_b)):
            o.zero_grad()
            m(x).square().mean().backward()
            if step == 1:
                m[0].bias.grad = None  # this parameter is not stepped this time
            if step == 2:
                m[1].weight.grad = torch.full_like(m[1].weight, 0.5)  # assigned
        launches = recorded_launches(opt_a.step)
        opt_b.step()
        assert len(launches) == (1 if step != 1 else 3)
        for p, q in zip(ours.parameters(), theirs.parameters(), strict=True):
            torch.testing.assert_close(p, q, rtol=1e-13, atol=1e-15)
    ours[0].weight.data = ours[0].weight.data.clone()  # leaves the bucket
    for m, o in ((ours, opt_a), (theirs, opt_b)):
        o.zero_grad()
        m(x).square().mean().backward()
        o.step()
    for p, q in zip(ours.parameters(), theirs.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=1e-13, atol=1e-15)


def test_param_groups_and_a_scheduler():
    torch.manual_seed(1)
    ours = torch.nn.Sequential(torch.nn.Linear(4, 5), torch.nn.Linear(5, 3)).double()
    theirs = copy.deepcopy(ours)
    groups = lambda m: [{"params": m[0].parameters()}, {"params": m[1].parameters(), "lr": 0.3}]  # noqa: E731
    opt_a, opt_b = ttx.RMSprop(groups(ours), lr=0.01), torch.optim.RMSprop(groups(theirs), lr=0.01)
    sched = [torch.optim.lr_scheduler.StepLR(o, 2, 0.5) for o in (opt_a, opt_b)]
    x = torch.randn(6, 4, dtype=torch.float64)
    for _ in range(5):
        for m, o, s in zip((ours, theirs), (opt_a, opt_b), sched, strict=True):
            o.zero_grad()
            m(x).square().mean().backward()
            o.step()
            s.step()
    assert opt_a.param_groups[1]["lr"] == opt_b.param_groups[1]["lr"] == 0.3 * 0.25
    for p, q in zip(ours.parameters(), theirs.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=1e-13, atol=1e-15)


def test_the_classes_are_torchs():
    for row in optimizers.OPTIMIZERS:
        cls = optimizers.CLASSES[row.name]
        assert cls is getattr(ttx, row.name) is getattr(ttx.optim, row.name)
        if row.torch:
            assert issubclass(cls, getattr(torch.optim, row.torch))
        assert "flat" in str(cls.__init__.__signature__)
    p = [torch.nn.Parameter(torch.zeros(3))]
    assert ttx.Adam(p).defaults == torch.optim.Adam(p).defaults


def test_options_refused_are_a_clear_error():
    p = [torch.nn.Parameter(torch.zeros(3))]
    for fn, says in [
        (lambda: ttx.Adam(p, differentiable=True), "differentiable=True is not supported"),
        (lambda: ttx.RMSprop(p, capturable=True), "capturable=True is not supported"),
        (lambda: ttx.SGD(p, lr=torch.tensor(0.1)), "lr must be floats"),
        (lambda: ttx.Adam(p, betas=(torch.tensor(0.9), torch.tensor(0.99))), "betas must be"),
    ]:
        with pytest.raises(TeenyError, match=says):
            fn()
    with pytest.raises(ValueError):  # torch's own checks
        ttx.SGD(p, lr=-1.0)
    with pytest.raises(ValueError):
        ttx.Lion(p, betas=(1.5, 0.9))


def test_docs_table_is_generated_from_the_family_table():
    page = (ROOT / "docs" / "families.md").read_text()
    assert families.docs_section("optimizers") in page, "stale: python -m teeny_tx.library.families"
    assert len({r.algo for r in optimizers.OPTIMIZERS}) == len(optimizers.OPTIMIZERS)
    for r in optimizers.OPTIMIZERS:
        assert "|" not in r.update and len(r.slots) <= 3  # the kernel's s0, s1, s2


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32], ids=str)
def test_every_launch_compiles_for_sm90(dtype):
    def run():
        for name, kw in OPTIONS:
            params = [torch.nn.Parameter(t) for t in tensors(dtype, name, "sm90")[:2]]
            opt = optimizers.CLASSES[name](params, **kw)
            for _ in range(2):  # SGD's first step differs
                opt.zero_grad()
                give_grads(params, tensors(dtype, name, "sm90")[:2])
                opt.step()

    assert compile_launches_sm90(recorded_launches(run)) == {"optim_step"}


def test_adamw_shares_the_bucket():
    """teeny_tx.torch.AdamW's flat buffers are optimizers.Bucket's."""
    from teeny_tx.library import modules

    p = [torch.nn.Parameter(torch.zeros(3)), torch.nn.Parameter(torch.ones(2, 2))]
    opt = modules.AdamW(p, lr=1e-3)
    assert isinstance(opt._buckets[0][0], optimizers.Bucket)
    assert math.isclose(float(opt._buckets[0][0].exp_avg.numel()), 7.0)
