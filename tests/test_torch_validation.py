"""The torch layer answers as torch does or raises clearly (CPU tensors, the interpreter):
no silent gradient loss through the array-level facades, options and indices checked as
torch checks them, 0-d, empty-K, meta and negative-bit inputs, a custom op whose backward
returns too few gradients, and norm rows with inf, NaN and values near the f32 maximum."""

from __future__ import annotations

import zlib

import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402

import teeny_tx.linalg as tla  # noqa: E402
import teeny_tx.nn as tnn  # noqa: E402
import teeny_tx.torch as ttx  # noqa: E402
from teeny_tx import TeenyError  # noqa: E402


def _randn(name: str, *shape: int, dtype=torch.float32) -> torch.Tensor:
    g = torch.Generator().manual_seed(zlib.crc32(name.encode()))
    return torch.randn(*shape, generator=g, dtype=dtype)


# ---------------------------------------------------------------- no silent gradient loss


@pytest.mark.parametrize(
    ("call", "instead"),
    [
        (lambda x: tnn.softmax(x), "teeny_tx.torch.softmax"),
        (lambda x: tnn.log_softmax(x), "teeny_tx.torch.log_softmax"),
        (lambda x: tnn.rms_norm(x, torch.ones(8), 1e-6), "teeny_tx.torch.rms_norm"),
        (lambda x: tnn.layer_norm(x.detach(), x[0], None), "teeny_tx.torch.layer_norm"),
        (lambda x: tla.linear(x, torch.ones(3, 8)), "teeny_tx.torch.linear"),
        (lambda x: tla.matmul(x, torch.ones(8, 3)), "teeny_tx.torch.matmul"),
        (lambda x: tnn.softmax_backward(x, x), "compute their backward themselves"),
    ],
)
def test_facades_refuse_tensors_that_require_grad(call, instead):
    x = _randn("grad", 4, 8).requires_grad_()
    with pytest.raises(TeenyError, match="requires grad") as err:
        call(x)
    assert instead in str(err.value)


def test_facades_take_detached_tensors_and_no_grad():
    x = _randn("detached", 4, 8).requires_grad_()
    # past the guard: the array-level wrappers then ask for CUDA tensors (CPU tensors here)
    with torch.no_grad(), pytest.raises(TeenyError, match="CPU torch tensor"):
        tnn.softmax(x)
    with pytest.raises(TeenyError, match="CPU torch tensor"):
        tnn.softmax(x.detach())


def test_facades_under_compile_name_the_torch_op():
    def f(x):
        return tnn.softmax(x)

    with pytest.raises(Exception, match="use teeny_tx.torch.softmax") as err:
        torch.compile(f, fullgraph=True, backend="eager")(_randn("compile", 3, 5))
    assert "_Missing" not in str(err.value)


def test_facades_keep_their_wrapper_docs():
    from teeny_tx.library import nn as library_nn

    assert tnn.softmax.__doc__ == library_nn.softmax.__doc__
    assert tnn.softmax.__wrapped__ is library_nn.softmax


# ---------------------------------------------------------------- options and indices


@pytest.mark.parametrize("approximate", ["Tanh", "fast", "", "NONE"])
def test_gelu_refuses_unknown_approximations(approximate):
    x = _randn("gelu", 5)
    with pytest.raises(RuntimeError):
        F.gelu(x, approximate=approximate)
    with pytest.raises(TeenyError, match="'none' or 'tanh'"):
        ttx.gelu(x, approximate=approximate)
    with pytest.raises(TeenyError, match="'none' or 'tanh'"):
        ttx.GELU(approximate=approximate)(x)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_takes_torchs_approximations(approximate):
    x = _randn("gelu ok " + approximate, 7, 3)
    torch.testing.assert_close(ttx.gelu(x, approximate), F.gelu(x, approximate=approximate))


@pytest.mark.parametrize("bad", [5, -1, -7, 4])
def test_cross_entropy_refuses_targets_out_of_range(bad):
    logits = _randn("ce range", 3, 4)
    targets = torch.tensor([0, bad, 1])
    with pytest.raises(IndexError):
        F.cross_entropy(logits, targets)
    with pytest.raises(IndexError, match=f"target {bad} is out of range"):
        ttx.cross_entropy(logits, targets)
    with pytest.raises(TeenyError, match="set_index_checks"):
        ttx.CrossEntropyLoss()(logits, targets)


def test_cross_entropy_ignore_index_is_not_out_of_range():
    logits = _randn("ce ignore", 4, 6)
    for ignore in (-100, 9, -3):
        targets = torch.tensor([0, ignore, 5, ignore])
        torch.testing.assert_close(
            ttx.cross_entropy(logits, targets, ignore_index=ignore),
            F.cross_entropy(logits, targets, ignore_index=ignore),
        )


@pytest.mark.parametrize("bad", [4, -1, 100])
def test_embedding_refuses_indices_out_of_range(bad):
    table = _randn("embedding range", 4, 3)
    indices = torch.tensor([[0, 1], [bad, 2]])
    with pytest.raises(IndexError):
        F.embedding(indices, table)
    with pytest.raises(IndexError, match=f"index {bad} is out of range"):
        ttx.embedding(indices, table)


def test_index_checks_can_be_turned_off():
    table = _randn("checks off", 4, 3)
    old = ttx.set_index_checks(False)
    try:
        assert old is True
        ttx.embedding(torch.tensor([0, 3]), table)  # in range: works either way
        out = ttx.cross_entropy(_randn("checks off ce", 2, 3), torch.tensor([0, 7]))
        assert out.shape == ()  # not checked: the documented opt-out for speed
    finally:
        ttx.set_index_checks(old)
    with pytest.raises(IndexError):
        ttx.embedding(torch.tensor([9]), table)


# ---------------------------------------------------------------- 0-d, empty, meta, views


@pytest.mark.parametrize("dim", [0, -1])
def test_zero_dim_softmax_is_torchs(dim):
    x = torch.tensor(1.5, dtype=torch.float64, requires_grad=True)
    for ours, theirs in ((ttx.softmax, torch.softmax), (ttx.log_softmax, torch.log_softmax)):
        y = ours(x, dim)
        assert y.shape == ()
        torch.testing.assert_close(y, theirs(x, dim))
        (g,) = torch.autograd.grad(y * 3.0, x)
        (h,) = torch.autograd.grad(theirs(x, dim) * 3.0, x)
        torch.testing.assert_close(g, h)


def test_zero_dim_softmax_refuses_other_dims():
    with pytest.raises(IndexError, match="Dimension out of range"):
        ttx.softmax(torch.tensor(1.0), 1)


@pytest.mark.parametrize("fn", ["layer_norm", "rms_norm"])
def test_zero_dim_norms_raise_clearly(fn):
    with pytest.raises(TeenyError, match="0-d input"):
        getattr(ttx, fn)(torch.tensor(2.0), (1,))


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("activation", [None, "gelu", "silu"])
def test_linear_with_no_in_features_is_torchs(bias, activation):
    x = torch.zeros(3, 2, 0, dtype=torch.float64, requires_grad=True)
    w = torch.zeros(4, 0, dtype=torch.float64, requires_grad=True)
    b = _randn("linear k0", 4, dtype=torch.float64).requires_grad_() if bias else None
    y = ttx.linear(x, w, b, activation)
    z = F.linear(x, w, b)
    z = {None: z, "gelu": F.gelu(z), "silu": F.silu(z)}[activation]
    torch.testing.assert_close(y, z)
    y.sum().backward()
    assert w.grad is not None and w.grad.shape == (4, 0)
    if bias:
        assert b is not None and b.grad is not None
        torch.testing.assert_close(b.grad, torch.autograd.grad(z.sum(), b)[0])


def test_linear_refuses_mismatched_features():
    with pytest.raises(TeenyError, match="do not match"):
        ttx.linear(_randn("mismatch", 3, 5), _randn("mismatch w", 4, 6))
    with pytest.raises(TeenyError, match="activation must be one of"):
        ttx.linear(_randn("act", 3, 5), _randn("act w", 4, 5), None, "tanh")


@pytest.mark.parametrize(
    "call",
    [
        lambda x: ttx.softmax(x),
        lambda x: ttx.log_softmax(x),
        lambda x: ttx.layer_norm(x, (8,)),
        lambda x: ttx.rms_norm(x, (8,)),
        lambda x: ttx.gelu(x),
        lambda x: ttx.linear(x, torch.empty(5, 8, device="meta")),
    ],
)
def test_meta_tensors_give_shapes(call):
    x = torch.empty(3, 4, 8, device="meta")
    y = call(x)
    assert y.device.type == "meta"
    assert y.shape[:2] == (3, 4)


def test_meta_cross_entropy_gives_a_scalar():
    out = ttx.cross_entropy(
        torch.empty(6, 5, device="meta"), torch.empty(6, dtype=torch.long, device="meta")
    )
    assert out.device.type == "meta" and out.shape == ()


@pytest.mark.parametrize(
    ("ours", "theirs"),
    [
        (lambda x: ttx.softmax(x), lambda x: torch.softmax(x, -1)),
        (lambda x: ttx.layer_norm(x, (6,)), lambda x: F.layer_norm(x, (6,))),
        (lambda x: ttx.gelu(x), F.gelu),
    ],
)
def test_negative_bit_views_are_read_as_their_values(ours, theirs):
    base = _randn("neg view", 5, 6)
    neg = torch._neg_view(base)
    assert neg.is_neg()
    torch.testing.assert_close(ours(neg), theirs(-base))


# ---------------------------------------------------------------- op(): the backward's count


def test_op_backward_with_too_few_gradients_says_so():
    def forward(launch, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return x * y

    def backward(launch, x, y, out, dout):
        return dout * y  # one gradient where grads_for names two

    f = ttx.op("teeny_tx_validation::too_few", forward, backward)
    x = _randn("too few x", 3).requires_grad_()
    y = _randn("too few y", 3).requires_grad_()
    with pytest.raises(TeenyError, match=r"one tensor per input named in grads_for, 2 in all"):
        f(x, y).sum().backward()


# ---------------------------------------------------------------- norm rows at the edges

BIG = 3e38
INF, NAN = float("inf"), float("nan")


@pytest.mark.parametrize(
    "row",
    [
        # rows whose sum or squared deviations overflow f32 (values near 3e38, or 1e30 with
        # five columns) are not guaranteed: the kernels keep one pass of f32 sums, for speed
        # (scaling each row by its largest value cost the forward ~20% on the H200); torch's
        # f32 kernels give NaN there
        [1e18, 2e18, 3e18, 4e18, 5e18],
        [1e-30, 2e-30, 3e-30, 0.0, -1e-30],
        [1.0, 2.0, 3.0, 4.0, 5.0],
    ],
)
@pytest.mark.parametrize("fused", [False, True])
def test_layer_norm_of_large_and_tiny_rows_is_the_float64_answer(row, fused):
    x = torch.tensor([row, [0.5, -1.0, 2.0, 3.0, -4.0]], dtype=torch.float32)
    w, b = _randn("ln w", 5), _randn("ln b", 5)
    if fused:
        y = ttx.add_layer_norm(x, torch.zeros_like(x), w, b)[0]
    else:
        y = ttx.layer_norm(x, (5,), w, b)
    want = F.layer_norm(x.double(), (5,), w.double(), b.double())
    assert torch.isfinite(y).all()
    torch.testing.assert_close(y.double(), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "row", [[INF, 1.0, 2.0], [1.0, -INF, 2.0], [NAN, 1.0, 2.0], [INF, -INF, 0.0], [BIG, NAN, 1.0]]
)
def test_layer_norm_of_rows_with_inf_or_nan_is_torchs(row):
    x = torch.tensor([row, [1.0, 2.0, 4.0]], dtype=torch.float32)
    y = ttx.layer_norm(x, (3,))
    want = F.layer_norm(x, (3,))
    assert torch.equal(torch.isnan(y), torch.isnan(want))
    torch.testing.assert_close(y[1], want[1])


# ---------------------------------------------------------------- several devices


class _FakeCupy:
    """A stand-in for cupy: device 0 current; Device(i) records that it was entered."""

    def __init__(self):
        self.entered: list[int] = []
        fake = self

        class Device:
            def __init__(self, index):
                self.index = index

            def __enter__(self):
                fake.entered.append(self.index)

            def __exit__(self, *exc):
                return False

        class Runtime:
            @staticmethod
            def getDevice():
                return 0

        self.cuda = type("cuda", (), {"Device": Device, "runtime": Runtime})


def test_launches_are_guarded_onto_the_tensors_device(monkeypatch):
    import sys

    from teeny_tx.library import torch_ops

    fake = _FakeCupy()
    monkeypatch.setitem(sys.modules, "cupy", fake)
    with torch_ops.on_device(1):  # tensors on device 1, device 0 current: switch for the launch
        assert fake.entered == [1]
    with torch_ops.on_device(0):  # already current: nothing entered
        pass
    assert fake.entered == [1]
