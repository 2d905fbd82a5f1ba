"""teeny_tx.nn on the GPU: on CuPy arrays against the float64 references of ROW_CASES and
against the interpreter; on torch tensors against torch's own functions (F.softmax,
F.log_softmax, F.layer_norm, F.rms_norm or its formula in float64, F.cross_entropy; autograd
for the backward passes)."""

from __future__ import annotations

import numpy as np
import pytest

import teeny_tx as tx
from teeny_tx.dtypes import from_numpy
from teeny_tx.library import module, nn

from ..cases import ROW_CASES
from ..conftest import stable_seed

cp = pytest.importorskip("cupy")

ROWS = (1, 3, 1000)
COLS = (1, 17, 1000, 4097)
LONG = 65537  # the looped kernels: softmax family and cross-entropy
DTYPES = ("f32", "f16", "bf16")
DTYPES_NP = {"f32": np.float32, "f16": np.float16}


def _shapes(long_rows: bool, long_rows_max: int = ROWS[-1]):
    """ROWS x COLS, and ROWS (up to ``long_rows_max``) x LONG where the function loops."""
    shapes = [(r, c) for r in ROWS for c in COLS]
    return shapes + [(r, LONG) for r in ROWS if long_rows and r <= long_rows_max]


def _case_params():
    """The float64 references run on the host: long rows at 1 and 3 rows only (1000 x LONG is
    checked against torch, on the device)."""
    return [
        pytest.param(case, dtype, r, c, id=f"{case.name}-{dtype}-{r}x{c}")
        for case in ROW_CASES
        for dtype in case.dtypes
        for r, c in _shapes(case.long_rows, long_rows_max=3)
    ]


@pytest.fixture(autouse=True)
def default_norm_configs(monkeypatch, request):
    """The many-shape tests launch each norm's first kept config (no tuning per shape: that
    is test_norms_through_the_autotuner's, which keeps the autotuner)."""
    if "autotuner" not in request.node.name:
        monkeypatch.setattr(nn, "TUNE", False)


def _host_args(case, dtype, rows, cols, seed=0):
    rng = np.random.default_rng(stable_seed(case.name, dtype, rows, cols, seed))
    return case.make(rng, rows, cols, dtype)


def _on_device_strided(a):
    """A host array on the GPU; a 2-D one as the view [:, :cols] of a wider one (NaN padding,
    built on the host)."""
    if a.ndim != 2:
        return cp.asarray(a)
    wide = np.full((a.shape[0], a.shape[1] + 7), np.nan, dtype=a.dtype)
    wide[:, : a.shape[1]] = a
    return cp.asarray(wide)[:, : a.shape[1]]


# ---------------------------------------------------------------- CuPy


@pytest.mark.parametrize("case,dtype,rows,cols", _case_params())
def test_cupy_against_float64(case, dtype, rows, cols):
    args = _host_args(case, dtype, rows, cols)
    outs = case.run([cp.asarray(a) for a in args])
    assert all(isinstance(o, cp.ndarray) for o in outs)
    case.check([cp.asnumpy(o) for o in outs], args, rows, cols)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", ROW_CASES, ids=lambda c: c.name)
def test_cupy_strided_rows(case, dtype):
    for rows, cols in [(5, 1000)] + ([(2, 21000)] if case.long_rows else []):
        args = _host_args(case, dtype, rows, cols, seed=1)
        outs = case.run([_on_device_strided(a) for a in args])
        case.check([cp.asnumpy(o) for o in outs], args, rows, cols)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", ROW_CASES, ids=lambda c: c.name)
def test_cupy_agrees_with_interpreter(case, dtype):
    rows, cols = 100, 4097
    args = _host_args(case, dtype, rows, cols, seed=2)
    gpu = [cp.asnumpy(o) for o in case.run([cp.asarray(a) for a in args])]
    host = case.run(args, interpret=True)
    for g, h in zip(gpu, host, strict=True):
        assert g.dtype == h.dtype and g.shape == h.shape
    case.check(gpu, args, rows, cols)  # both within the error model of the float64 reference
    case.check(host, args, rows, cols)


NORMS = ("layer_norm", "layer_norm_backward", "rms_norm", "rms_norm_backward")


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("name", NORMS)
def test_norms_through_the_autotuner(name, dtype):
    """The norms as users call them: configs timed on the first call of each row length,
    then the plan replayed; a view of x (column stride 2) takes the same choice."""
    case = next(c for c in ROW_CASES if c.name == name)
    for rows, cols in [(1000, 1000), (257, 4097), (64, 8192)]:
        args = _host_args(case, dtype, rows, cols, seed=3)
        device = [cp.asarray(a) for a in args]
        for _ in range(2):  # tuned, then replayed
            outs = case.run(device)
            case.check([cp.asnumpy(o) for o in outs], args, rows, cols)
        wide = [_every_other_column(a) for a in args]
        outs = case.run(wide)
        case.check([cp.asnumpy(o) for o in outs], args, rows, cols)


SOFTMAXES = ("softmax", "log_softmax", "softmax_backward", "log_softmax_backward")


@pytest.mark.parametrize("dtype", ["f32", "bf16"])  # each tunes 7 configs per kernel and dtype
@pytest.mark.parametrize("name", SOFTMAXES)
def test_looped_softmax_through_the_autotuner(name, dtype):
    """Rows longer than one tile: the split kernels' (forward) and the _looped kernels'
    (backward) configs are timed on the first call, then replayed; an odd length (2^18 + 3)
    and a strided view."""
    case = next(c for c in ROW_CASES if c.name == name)
    for rows, cols in [(3, 2**18 + 3), (40, 16385)]:
        args = _host_args(case, dtype, rows, cols, seed=4)
        device = [cp.asarray(a) for a in args]
        for _ in range(2):  # tuned, then replayed
            outs = case.run(device)
            case.check([cp.asnumpy(o) for o in outs], args, rows, cols)
        outs = case.run([_every_other_column(a) for a in args])
        case.check([cp.asnumpy(o) for o in outs], args, rows, cols)


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_looped_softmax_config_is_right(dtype):
    """Each #pragma autotune config of softmax_looped, launched directly, on 5 rows of 2^16 + 1
    columns (a last chunk of one column for every BLOCK)."""
    case = next(c for c in ROW_CASES if c.name == "softmax")
    rows, cols = 5, 2**16 + 1
    (x,) = _host_args(case, dtype, rows, cols, seed=5)
    kernel = module("softmax.c").softmax_looped
    d = cp.asarray(x)
    for c in kernel.tune.configs:
        y = cp.asarray(np.full(x.shape, np.nan, x.dtype))  # NaN first (built on the host: bf16)
        kernel[(rows,)](y, d, cols, cols, 1, cols, num_warps=c.num_warps, **c.kwargs)
        case.check([cp.asnumpy(y)], (x,), rows, cols)


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_every_softmax_rows_config_is_right(name, dtype):
    """Each #pragma autotune config (ROWS, num_warps) of the one-tile softmax kernels that
    teeny_tx.nn's prune keeps (the configs it can launch; the interpreter test runs them all),
    launched directly as nn launches them, on 1001 rows of 1000 and 33 rows of 4097 columns
    (partial last groups of ROWS): against float64."""
    case = next(c for c in ROW_CASES if c.name == name)
    kernel = nn._norm_kernel("softmax.c", name)
    for rows, cols in [(1001, 1000), (33, 4097)]:
        (x,) = _host_args(case, dtype, rows, cols, seed=7)
        d = cp.asarray(x)
        launch = (d, d, rows, cols, cols, 1, cols)
        for c in [c for c in kernel.tune.configs if not nn.norm_prune(c, launch, kernel)]:
            y = cp.asarray(np.full(x.shape, np.nan, x.dtype))
            grid = (-(-rows // c.kwargs["ROWS"]),)
            kernel[grid](
                y,
                d,
                rows,
                cols,
                cols,
                1,
                cols,
                num_warps=c.num_warps,
                BLOCK=nn.norm_block(cols),
                **c.kwargs,
            )
            case.check([cp.asnumpy(y)], (x,), rows, cols)


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_every_split_softmax_config_is_right(name, dtype):
    """Each #pragma autotune config of softmax_split (LOG for log_softmax), launched directly as
    teeny_tx.nn launches it, on 5 rows of 2^16 + 1 columns (a last chunk of one column) and on
    400 rows of 2^16 + 3 (up to 6800 programs: more than the device holds at once): against
    float64; the same bits when no program waits (spins = 0: each computes the other chunks
    itself); the slots and counts zero again after each launch."""
    case = next(c for c in ROW_CASES if c.name == name)
    kernel = module("softmax.c").softmax_split
    least = min(c.kwargs["CHUNK"] for c in kernel.tune.configs)
    for rows, cols in [(5, 2**16 + 1), (400, 2**16 + 3)]:
        (x,) = _host_args(case, dtype, rows, cols, seed=6)
        d = cp.asarray(x)
        slots = cp.zeros(rows * -(-cols // least), cp.int64)
        done = cp.zeros(rows, cp.int32)
        for c in kernel.tune.configs:
            grid = (rows * -(-cols // c.kwargs["CHUNK"]),)
            outs = []
            for spins in (nn.SPLIT_SPINS, 0):
                y = cp.asarray(np.full(x.shape, np.nan, x.dtype))  # NaN first (host: bf16)
                kernel[grid](
                    y,
                    slots,
                    done,
                    d,
                    cols,
                    cols,
                    1,
                    cols,
                    spins,
                    num_warps=c.num_warps,
                    SLOTS=nn._split_slots(kernel, cols),
                    LOG=int(name == "log_softmax"),
                    **c.kwargs,
                )
                assert not slots.any() and not done.any(), c
                outs.append(cp.asnumpy(y))
            case.check(outs[:1], (x,), rows, cols)
            np.testing.assert_array_equal(outs[0].view(np.uint8), outs[1].view(np.uint8))


@pytest.mark.parametrize("dtype", ["f32", "f16"])  # CuPy has no bf16: test_torch_* have it
def test_every_cross_entropy_chunks_config_is_right(dtype):
    """Each config of cross_entropy_chunks, then cross_entropy_rows, launched directly as
    teeny_tx.nn launches them, on 600 rows of 32001 columns (targets with ignored rows): lse
    and loss against cross_entropy_fwd (a program per row) on the same device."""
    mod = module("cross_entropy.c")
    chunks, per_row, whole = mod.cross_entropy_chunks, mod.cross_entropy_rows, mod.cross_entropy_fwd
    rows, cols = 600, 32001
    rng = np.random.default_rng(8)
    x = cp.asarray(rng.standard_normal((rows, cols)).astype(DTYPES_NP[dtype]))
    targets = cp.asarray(rng.integers(0, cols, rows).astype(np.int64))
    targets[::7] = -100
    ref_loss, ref_lse = cp.empty(rows, cp.float32), cp.empty(rows, cp.float32)
    whole[(rows,)](ref_loss, ref_lse, x, targets, cols, cols, 1, -100, BLOCK=4096, num_warps=16)
    slots_n = nn._split_slots(chunks, cols)
    for c in chunks.tune.configs:
        n_chunks = -(-cols // c.kwargs["CHUNK"])
        slots = cp.empty(rows * n_chunks, cp.int64)
        chunks[(rows * n_chunks,)](slots, x, cols, cols, 1, num_warps=c.num_warps, **c.kwargs)
        loss, lse = cp.full(rows, cp.nan, cp.float32), cp.full(rows, cp.nan, cp.float32)
        per_row[(-(-rows // 64),)](
            loss,
            lse,
            slots,
            x,
            targets,
            rows,
            cols,
            n_chunks,
            cols,
            1,
            -100,
            num_warps=4,
            ROWS=64,
            SLOTS=slots_n,
        )
        np.testing.assert_allclose(cp.asnumpy(lse), cp.asnumpy(ref_lse), rtol=1e-6)
        np.testing.assert_allclose(cp.asnumpy(loss), cp.asnumpy(ref_loss), rtol=2e-5, atol=2e-5)


def _every_other_column(a):
    """A 2-D host array on the GPU as the view [:, ::2] of one twice as wide."""
    if a.ndim != 2:
        return cp.asarray(a)
    wide = cp.zeros((a.shape[0], 2 * a.shape[1]), dtype=a.dtype)
    wide[:, ::2] = cp.asarray(a)
    return wide[:, ::2]


def test_plans_replay_on_new_arrays_and_follow_the_device_arrays():
    """A repeated call with a new array of one signature writes new outputs from the new
    data (the plan binds no array), and torch tensors and CuPy arrays keep separate plans."""
    rng = np.random.default_rng(11)
    a = rng.standard_normal((33, 1000)).astype(np.float32)
    b = rng.standard_normal((33, 1000)).astype(np.float32)
    ya, yb = nn.softmax(cp.asarray(a)), nn.softmax(cp.asarray(b))
    assert ya.data.ptr != yb.data.ptr
    case = next(c for c in ROW_CASES if c.name == "softmax")
    case.check([cp.asnumpy(ya)], (a,), 33, 1000)
    case.check([cp.asnumpy(yb)], (b,), 33, 1000)


@pytest.mark.parametrize("case", ROW_CASES, ids=lambda c: c.name)
def test_a_replay_on_a_view_of_another_alignment_is_right(case):
    """The plan of [:, :cols] views (16-byte aligned) replayed on [:, 1:cols + 1] views of the
    same shape and strides (2- or 4-byte aligned): the direct launch sees the address and goes
    back to the launcher, whose specialisation reads lane by lane; then the aligned views
    again (the direct launch), each against float64."""
    rows, cols, dtype = 5, 1024, "f16" if "f16" in case.dtypes else case.dtypes[0]
    for shift in (0, 1, 0):
        args = _host_args(case, dtype, rows, cols, seed=shift)
        on_device = []
        for a in args:
            if a.ndim != 2:
                on_device.append(cp.asarray(a))
                continue
            wide = np.full((rows, cols + 8), np.nan, dtype=a.dtype)
            wide[:, shift : shift + cols] = a
            on_device.append(cp.asarray(wide)[:, shift : shift + cols])
        outs = case.run(on_device)
        case.check([cp.asnumpy(o) for o in outs], args, rows, cols)


def test_cupy_mixed_with_numpy_is_refused():
    x = cp.zeros((2, 3), cp.float32)
    with pytest.raises(tx.LaunchError, match="one library"):
        nn.layer_norm(x, np.ones(3, np.float32), np.zeros(3, np.float32))
    with pytest.raises(tx.LaunchError, match="interpret=True runs on NumPy arrays"):
        nn.softmax(x, interpret=True)


# ---------------------------------------------------------------- torch, against torch


@pytest.fixture(scope="module")
def torch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")
    return torch


TORCH_DTYPES = {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}


def _params(long_rows: bool):
    return [
        pytest.param(dtype, r, c, id=f"{dtype}-{r}x{c}")
        for dtype in DTYPES
        for r, c in _shapes(long_rows)
    ]


def _randn(torch, rows, cols, dtype, scale=1.0, shift=0.0, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed + 7919 * rows + cols)
    x = torch.randn(rows, cols, device="cuda", generator=g) * scale + shift
    return x.to(getattr(torch, TORCH_DTYPES[dtype]))


CASE = {c.name: c for c in ROW_CASES}


def _host(t) -> np.ndarray:
    """A torch tensor (any device) as a NumPy array of its dtype (bf16 through ml_dtypes)."""
    t = t.detach().cpu()
    if t.dtype.is_floating_point:
        name = str(t.dtype).removeprefix("torch.")
        np_dtype = {"float64": np.float64, "float32": np.float32, "float16": np.float16}.get(name)
        return t.double().numpy().astype(np_dtype or tx.dtypes.DTYPES["bf16"].np)
    return t.numpy()


def _against(name: str, ours, args, theirs, what: str, **kwargs) -> None:
    """Our outputs of ROW_CASES' ``name`` on ``args`` (torch tensors) against the float64
    reference within the case's error model, and against torch's (``theirs``: a dict from
    output index to torch's tensor) within our bound plus torch's, computed in its output's
    dtype (torch may round to it at each step: cross-entropy's rows' losses, then the mean)."""
    case = CASE[name]
    ours = [_host(o) for o in (ours if isinstance(ours, tuple | list) else (ours,))]
    host_args = [_host(a) for a in args]
    rows, cols = host_args[0].shape if host_args[0].ndim == 2 else (1, host_args[0].size)
    case.check(ours, host_args, rows, cols, **kwargs)
    mine = case.bounds(host_args, [from_numpy(o.dtype).name for o in ours], cols, **kwargs)
    picked = {i: _host(t) for i, t in theirs.items()}
    for i, t in picked.items():
        name = from_numpy(t.dtype).name
        peer = case.bounds(host_args, [name] * len(ours), cols, compute=name, **kwargs)
        got, ref = ours[i].astype(np.float64), t.astype(np.float64)
        assert got.shape == ref.shape, f"{what} output {i}: shape {got.shape}, torch {ref.shape}"
        bound = np.broadcast_to(mine[i] + peer[i], got.shape)
        bad = ~(np.abs(got - ref) <= bound) & ~(np.isnan(got) & np.isnan(ref))
        if bad.any():
            at = np.unravel_index(np.argmax(bad), bad.shape) if bad.ndim else ()
            raise AssertionError(
                f"{what} output {i}: {int(bad.sum())} elements out of bounds; at {at}: "
                f"{got[at]!r}, torch {ref[at]!r} (bound {bound[at]:.3g})"
            )


def _grad_of(torch, fn, inputs, dy):
    leaves = [t.detach().clone().requires_grad_(True) for t in inputs]
    out = fn(*leaves)
    return out.detach(), torch.autograd.grad(out, leaves, dy)


@pytest.mark.parametrize("dtype,rows,cols", _params(True))
@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
def test_torch_softmax(torch, log, dtype, rows, cols):
    F = torch.nn.functional
    forward = F.log_softmax if log else F.softmax
    ours_fwd, ours_bwd = (
        (nn.log_softmax, nn.log_softmax_backward) if log else (nn.softmax, nn.softmax_backward)
    )
    x = _randn(torch, rows, cols, dtype, 2.0)
    dy = _randn(torch, rows, cols, dtype, seed=1)
    y = ours_fwd(x)
    assert isinstance(y, torch.Tensor) and y.dtype == x.dtype and y.device == x.device
    y_ref, (dx_ref,) = _grad_of(torch, lambda t: forward(t, dim=1), [x], dy)
    name = "log_softmax" if log else "softmax"
    _against(name, y, [x], {0: y_ref}, "y")
    _against(f"{name}_backward", ours_bwd(y_ref, dy), [y_ref, dy], {0: dx_ref}, "dx")


@pytest.mark.parametrize("dtype,rows,cols", _params(False))
def test_torch_layer_norm(torch, dtype, rows, cols):
    F = torch.nn.functional
    eps = 1e-5
    x = _randn(torch, rows, cols, dtype, 2.0, 0.5)
    w = _randn(torch, 1, cols, dtype, 0.5, 1.0, seed=2)[0]
    b = _randn(torch, 1, cols, dtype, 0.5, seed=3)[0]
    dy = _randn(torch, rows, cols, dtype, seed=4)
    y, mean, rstd = nn.layer_norm(x, w, b, eps=eps)
    assert mean.dtype == rstd.dtype == torch.float32
    fn = lambda x_, w_, b_: F.layer_norm(x_, (cols,), w_, b_, eps)  # noqa: E731
    y_ref, (dx_ref, dw_ref, db_ref) = _grad_of(torch, fn, [x, w, b], dy)
    x64 = x.double()
    stats = {1: x64.mean(dim=1), 2: (x64.var(dim=1, unbiased=False) + eps).rsqrt()}
    _against("layer_norm", (y, mean, rstd), [x, w, b], {0: y_ref, **stats}, "y", eps=eps)
    dx, dw, db = nn.layer_norm_backward(dy, x, w, mean, rstd)
    grads = {0: dx_ref, 1: dw_ref, 2: db_ref}
    _against("layer_norm_backward", (dx, dw, db), [dy, x, w, mean, rstd], grads, "dx, dw, db")


@pytest.mark.parametrize("dtype,rows,cols", _params(False))
def test_torch_rms_norm(torch, dtype, rows, cols):
    """Against F.rms_norm where this torch has it, always against its formula in float64."""
    eps = 1e-6
    x = _randn(torch, rows, cols, dtype, 2.0, 0.5)
    w = _randn(torch, 1, cols, dtype, 0.5, 1.0, seed=2)[0]
    dy = _randn(torch, rows, cols, dtype, seed=4)

    def formula(x_, w_):
        return x_ * torch.rsqrt(x_.pow(2).mean(dim=-1, keepdim=True) + eps) * w_

    y, rstd = nn.rms_norm(x, w, eps=eps)
    fused = getattr(torch.nn.functional, "rms_norm", None)
    if fused is not None:
        _against(
            "rms_norm", (y, rstd), [x, w], {0: fused(x, (cols,), w, eps)}, "F.rms_norm", eps=eps
        )
    y_ref, (dx_ref, dw_ref) = _grad_of(torch, formula, [x.double(), w.double()], dy.double())
    rstd_ref = (x.double().pow(2).mean(dim=1) + eps).rsqrt()
    _against("rms_norm", (y, rstd), [x, w], {0: y_ref, 1: rstd_ref}, "y", eps=eps)
    dx, dw = nn.rms_norm_backward(dy, x, w, rstd)
    _against("rms_norm_backward", (dx, dw), [dy, x, w, rstd], {0: dx_ref, 1: dw_ref}, "dx, dw")


def _targets(torch, rows, cols, ignore_index=-100):
    g = torch.Generator(device="cuda").manual_seed(rows + cols)
    t = torch.randint(0, cols, (rows,), device="cuda", generator=g)
    ignored = torch.rand(rows, device="cuda", generator=g) < 0.25
    ignored[0], ignored[-1] = rows > 1, False
    return torch.where(ignored, torch.full_like(t, ignore_index), t)


@pytest.mark.parametrize("dtype,rows,cols", _params(True))
def test_torch_cross_entropy(torch, dtype, rows, cols):
    F = torch.nn.functional
    logits = _randn(torch, rows, cols, dtype, 2.0)
    targets = _targets(torch, rows, cols)
    loss, lse = nn.cross_entropy(logits, targets)
    assert loss.shape == () and loss.dtype == lse.dtype == torch.float32
    leaf = logits.detach().clone().requires_grad_(True)
    loss_ref = F.cross_entropy(leaf, targets, ignore_index=-100)
    (d_ref,) = torch.autograd.grad(loss_ref, leaf)
    lse_ref = torch.logsumexp(logits.double(), dim=1)
    _against("cross_entropy", (loss, lse), [logits, targets], {0: loss_ref, 1: lse_ref}, "loss")
    d = nn.cross_entropy_backward(logits, targets, lse)
    assert d.dtype == logits.dtype
    _against("cross_entropy_backward", d, [logits, targets, lse], {0: d_ref}, "dlogits")
    assert not bool(d[targets == -100].any()), "ignored rows must have zero gradient"


def test_torch_cross_entropy_grad_and_ignore_index(torch):
    F = torch.nn.functional
    logits = _randn(torch, 64, 1000, "f32")
    targets = _targets(torch, 64, 1000, ignore_index=5)
    leaf = logits.clone().requires_grad_(True)
    loss_ref = F.cross_entropy(leaf, targets, ignore_index=5)
    (d_ref,) = torch.autograd.grad(loss_ref * 2.5, leaf)
    loss, lse = nn.cross_entropy(logits, targets, ignore_index=5)
    args = [logits, targets]
    _against("cross_entropy", (loss, lse), args, {0: loss_ref}, "loss", ignore_index=5)
    d = nn.cross_entropy_backward(logits, targets, lse, ignore_index=5, grad=2.5)
    kw = {"ignore_index": 5, "grad": 2.5}
    _against("cross_entropy_backward", d, [*args, lse], {0: d_ref}, "d", **kw)


def test_torch_strided_views_and_empty_like(torch):
    F = torch.nn.functional
    big = _randn(torch, 300, 1100, "bf16")
    x = big[:, :1000]
    assert not x.is_contiguous()
    _against("softmax", nn.softmax(x), [x], {0: F.softmax(x, dim=1)}, "softmax of a view")
    w, b = torch.ones(1000, device="cuda", dtype=torch.bfloat16), big[0, :1000] * 0
    y = nn.layer_norm(x, w, b)
    _against(
        "layer_norm", y, [x, w, b], {0: F.layer_norm(x, (1000,), w, b)}, "layer_norm of a view"
    )
    t = _targets(torch, 300, 1000)
    _against("cross_entropy", nn.cross_entropy(x, t), [x, t], {0: F.cross_entropy(x, t)}, "loss")


def test_torch_runs_on_the_current_stream(torch):
    F = torch.nn.functional
    x = _randn(torch, 1000, 4097, "f32")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        y = nn.softmax(x)
        ref = F.softmax(x, dim=1)
    side.synchronize()
    _against("softmax", y, [x], {0: ref}, "softmax on a side stream")


def test_torch_host_tensor_is_refused(torch):
    with pytest.raises(tx.LaunchError, match="CPU torch tensor"):
        nn.softmax(torch.zeros(2, 3))
    with pytest.raises(tx.LaunchError, match="one library"):
        nn.softmax_backward(torch.zeros(2, 3, device="cuda"), cp.zeros((2, 3), cp.float32))


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_dropout_wrappers_match_the_interpreter(dtype):
    """Philox is bit-identical on both backends, so the GPU mask equals the interpreter's."""
    x = np.random.default_rng(5).standard_normal((257, 129)).astype(dtype)
    gpu = cp.asnumpy(nn.dropout(cp.asarray(x), 0.25, 99))
    host = nn.dropout(x, 0.25, 99, interpret=True)
    np.testing.assert_array_equal(gpu != 0, host != 0)
    np.testing.assert_allclose(gpu.astype(np.float64), host.astype(np.float64), rtol=1e-3)
    back = cp.asnumpy(nn.dropout_backward(cp.ones_like(cp.asarray(x)), 0.25, 99))
    np.testing.assert_array_equal(back != 0, host != 0)
