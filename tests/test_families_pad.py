"""The padding family (teeny_tx/library/pad_families.py, kernels/pad.c) on the CPU path: every
mode over 1, 2 and 3 dimensions against torch's F.pad (a pad is a copy: equal, every dtype),
the gradient against a float64 reference (a sum of the outputs that read each input, bounded
element by element), pads of every sign, sizes 1, 7, 33 and 1001, strided views, gradcheck,
opcheck, every padding Module against torch.nn's, torch.compile(fullgraph=True), the pads
torch refuses, the docs' table and every launched specialisation compiling for sm_90."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import teeny_tx.torch as ttx  # noqa: E402
from teeny_tx import TeenyError  # noqa: E402
from teeny_tx.library import families, pad_families  # noqa: E402

from .conftest import (  # noqa: E402
    UNIT_ROUNDOFF,
    assert_close_elementwise,
    compile_launches_sm90,
    dtype_name,
    recorded_launches,
    stable_seed,
)

ROOT = Path(__file__).resolve().parents[1]
F = torch.nn.functional
DTYPES = (torch.float64, torch.float32, torch.float16, torch.bfloat16)
MODES = [r.mode for r in pad_families.PADS]
# (shape, pad) per number of padded dimensions; sizes 1, 7, 33, 1001 along a padded axis
CASES = {
    1: [((2, 3, 7), (2, 3)), ((1, 2, 33), (-4, 6)), ((2, 1001), (5, -3)), ((3, 2, 1), (0, 0)),
        ((2, 2, 1), (1, 1))],
    2: [((2, 3, 7, 9), (2, 1, -1, 3)), ((2, 33, 5), (0, 4, 6, 0)), ((1, 1, 1, 7), (0, 2, 1, 1))],
    3: [((1, 2, 5, 6, 7), (1, 2, 3, -1, 0, 4)), ((2, 3, 4, 33), (-2, 5, 1, 1, 2, 0)),
        ((1, 2, 3, 4, 5), (1, 1, 1, 1, 1, 1))],
}  # fmt: skip


def legal(mode: str, shape, pad) -> bool:
    """Whether torch pads ``shape`` by ``pad`` in ``mode`` (and circular pads do not wrap
    twice round what negative pads leave, where torch reads memory it never wrote)."""
    k = len(pad) // 2
    if mode != "constant" and len(shape) not in (k + 1, k + 2):
        return False
    for j in range(k):
        n, lo, hi = shape[-1 - j], pad[2 * j], pad[2 * j + 1]
        left = n - max(-lo, 0) - max(-hi, 0)
        if mode == "reflect" and (lo >= n or hi >= n or n + lo + hi < 1):
            return False
        if mode == "replicate" and n + lo + hi < 1:
            return False
        if mode == "circular" and (max(lo, hi) > min(n, left) or left < 0):
            return False
    return True


def cases():
    for items in CASES.values():
        for shape, pad in items:
            for mode in MODES:
                if legal(mode, shape, pad):
                    yield mode, shape, pad


ALL = list(cases())


def data(shape, dtype, *parts, device="cpu"):
    g = torch.Generator().manual_seed(stable_seed(shape, str(dtype), *parts))
    return (torch.randn(shape, generator=g, dtype=torch.float64) * 3).to(device, dtype)


def value_of(mode: str):
    return 0.75 if mode == "constant" else None


def check_pad(mode, x, pad, dtype):
    """Forward equal to torch's; dx against the float64 adjoint, bounded by its one rounding
    to dtype plus the f32 sum's error relative to the sum of |dy| it adds."""
    x = x.detach().requires_grad_()
    got = ttx.pad(x, pad, mode, value_of(mode))
    want = F.pad(x.detach(), pad, mode, value_of(mode))
    assert got.dtype == dtype and got.shape == want.shape
    assert torch.equal(got, want), (mode, pad)
    dy = data(tuple(want.shape), dtype, "dy", device=x.device)
    (dx,) = torch.autograd.grad(got, x, dy)
    x64 = x.detach().double().requires_grad_()
    (want64,) = torch.autograd.grad(F.pad(x64, pad, mode, value_of(mode)), x64, dy.double())
    x64 = x.detach().double().requires_grad_()
    (cond,) = torch.autograd.grad(F.pad(x64, pad, mode, value_of(mode)), x64, dy.double().abs())
    u = UNIT_ROUNDOFF[dtype_name(dtype)]
    u_acc = UNIT_ROUNDOFF["f64" if dtype == torch.float64 else "f32"]
    k = 16 if dtype != torch.float64 else 33  # terms summed; torch's f64 sum errs too
    scale = want64.abs() + (k * u_acc / u) * cond
    assert_close_elementwise(dx, want64, dtype, ulps=1.0, scale=scale, what=f"{mode} {pad}")


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", ALL, ids=lambda c: f"{c[0]}-{c[1]}-{c[2]}")
def test_matches_torch(case, dtype):
    mode, shape, pad = case
    check_pad(mode, data(shape, dtype), pad, dtype)


@pytest.mark.parametrize("mode", MODES)
def test_strided_and_offset_views(mode):
    base = data((3, 5, 9, 16), torch.float32)
    x = base[1:, ::2, 1:, ::3]  # [2, 3, 8, 6] at an offset, steps 2 and 3
    assert not x.is_contiguous()
    check_pad(mode, x, (2, 1, 1, 3), torch.float32)
    check_pad(mode, base.transpose(2, 3)[0], (3, 0, -2, 4), torch.float32)


@pytest.mark.parametrize("mode", MODES)
def test_gradcheck_f64(mode):
    x = data((2, 3, 4), torch.float64).requires_grad_()
    assert torch.autograd.gradcheck(lambda t: ttx.pad(t, (2, 1, -1, 2), mode, value_of(mode)), (x,))


def test_opcheck():
    x = data((2, 3, 5), torch.float64).requires_grad_()
    for mode in MODES:
        op = getattr(torch.ops.teeny_tx, f"pad_{mode}").default
        torch.library.opcheck(op, (x, [2, 1], 0.5 if mode == "constant" else 0.0))


MODULES = sorted(pad_families.MODULES)


def module_args(name: str):
    dims = int(name[-2])
    padding = (2, 1, 0, 3, 1, 2)[: 2 * dims]
    value = (0.5,) if name.startswith("Constant") else ()
    shape = (2, 3, 4, 5, 6)[: dims + 2]
    return (padding, *value), shape


@pytest.mark.parametrize("name", MODULES)
def test_module_is_a_drop_in_for_torch_nn(name):
    ours_cls, theirs_cls = pad_families.MODULES[name], getattr(torch.nn, name)
    assert ours_cls is getattr(ttx, name) and issubclass(ours_cls, theirs_cls)
    args, shape = module_args(name)
    for padding in (args[0], 1):  # a tuple, or one int for every side
        ours, theirs = ours_cls(padding, *args[1:]), theirs_cls(padding, *args[1:])
        assert repr(ours) == repr(theirs)
        for s in (shape, shape[1:]):  # batched and unbatched
            x = data(s, torch.float64, name).requires_grad_()
            y, want = ours(x), theirs(x)
            assert torch.equal(y, want)
            dy = data(tuple(want.shape), torch.float64, name, "dy")
            torch.testing.assert_close(
                torch.autograd.grad(y, x, dy), torch.autograd.grad(want, x, dy), rtol=0, atol=1e-13
            )


def test_compiled_module_fullgraph():
    model = torch.nn.Sequential(ttx.ReflectionPad2d(2), torch.nn.Conv2d(3, 4, 3), ttx.ZeroPad2d(1))
    model = model.double()
    x = data((2, 3, 8, 7), torch.float64).requires_grad_()
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
    got = compiled(x)
    (gx,) = torch.autograd.grad(got.square().sum(), x)
    want = F.pad(model[1](F.pad(x, (2, 2, 2, 2), "reflect")), (1, 1, 1, 1))
    (wx,) = torch.autograd.grad(want.square().sum(), x)
    torch.testing.assert_close(got, want, rtol=1e-13, atol=1e-13)
    torch.testing.assert_close(gx, wx, rtol=1e-12, atol=1e-12)


def test_empty_tensors():
    x = torch.empty(0, 3, 4, dtype=torch.float64, requires_grad=True)
    y = ttx.pad(x, (1, 2), "reflect")
    assert y.shape == (0, 3, 7)
    (dx,) = torch.autograd.grad(y.sum(), x)
    assert dx.shape == x.shape
    z = ttx.pad(torch.empty(2, 0, dtype=torch.float64), (1, 1), value=2.0)
    assert torch.equal(z, torch.full((2, 2), 2.0, dtype=torch.float64))


def test_bad_pads_are_a_clear_error():
    x = data((2, 3, 5), torch.float32)
    cases = [
        (lambda: ttx.pad(x, (1, 2, 3)), "must be even"),
        (lambda: ttx.pad(x, (1,) * 8), "8 pads for a tensor of 3 dimensions"),
        (lambda: ttx.pad(data((1,) * 5, torch.float32), (1,) * 8), "at most the last 3"),
        (lambda: ttx.pad(x, (-4, -2)), "crops more than the whole dimension"),
        (lambda: ttx.pad(x, (0, 0, -2, -2)), "crops more than the whole dimension"),
        (lambda: ttx.pad(x, (5, 1), "reflect"), "each pad must be less than the size"),
        (lambda: ttx.pad(x, (-5, 0), "replicate"), "leaves an output of size 0"),
        (lambda: ttx.pad(x, (6, 0), "circular"), "wraps around more than once"),
        (lambda: ttx.pad(x, (-2, 4), "circular"), "wraps around more than once"),
        (lambda: ttx.pad(x, (1, 1), "reflect", 2.0), "takes no value"),
        (lambda: ttx.pad(x, (1, 1), "bogus"), "mode must be one of"),
        (lambda: ttx.pad(x, (1, 1, 1, 1, 1, 1), "reflect"), "pads the last 3 dimension"),
        (lambda: ttx.pad(x[0, 0], (1, 1), "replicate"), "not of a 1-d one"),
        (lambda: ttx.pad(x.int(), (1, 1)), "must be a float tensor"),
        (lambda: ttx.pad(x, (1.5, 1)), "must be a tuple of ints"),
        (lambda: ttx.pad(torch.empty(2, 0), (1, 1), "reflect"), "cannot pad the empty"),
    ]
    for fn, says in cases:
        with pytest.raises(TeenyError, match=says):
            fn()


def test_docs_table_is_generated_from_the_family_table():
    page = (ROOT / "docs" / "families.md").read_text()
    assert families.docs_section("padding") in page, "stale: python -m teeny_tx.library.families"
    assert {r.code for r in pad_families.PADS} == {0, 1, 2, 3}
    for r in pad_families.PADS:
        assert "|" not in r.source + r.pads


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32], ids=str)
def test_every_launch_compiles_for_sm90(dtype):
    def run():
        for mode, shape, pad in ALL[::3]:
            x = data(shape, dtype).requires_grad_()
            torch.autograd.grad(ttx.pad(x, pad, mode, value_of(mode)).sum(), x)

    assert compile_launches_sm90(recorded_launches(run)) == {"pad_fwd", "pad_bwd_dim"}
