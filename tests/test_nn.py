"""teeny_tx.nn on the NumPy interpreter, through its wrappers (interpret=True), against the
float64 NumPy references of teeny_tx.library.ROW_CASES; argument checks; the launch heuristic;
and every kernel of the nn files through NVRTC for sm_90 at the launches the wrappers make."""

from __future__ import annotations

import numpy as np
import pytest

import teeny_tx as tx
from teeny_tx.dtypes import DTYPES
from teeny_tx.library import nn
from teeny_tx.library.arrays import Arrays

from .cases import ROW_CASES, cross_entropy_reference
from .conftest import nvrtc_compile, stable_seed

CASES = {c.name: c for c in ROW_CASES}
COLS = (1, 17, 1000, 4097)
LONG = 65537  # longer than one tile: the looped kernels (softmax family, cross-entropy)


def _params():
    """Every case and dtype at rows 1, 3, 100 x COLS, and long rows at 1 and 3 rows where the
    case has looped kernels; two cases at 1000 rows."""
    out = []
    for case in ROW_CASES:
        shapes = [(d, r, c) for d in case.dtypes for r in (1, 3, 100) for c in COLS]
        if case.long_rows:
            shapes += [(d, r, LONG) for d in case.dtypes for r in (1, 3)]
        out += [pytest.param(case, *s, id=f"{case.name}-{s[0]}-{s[1]}x{s[2]}") for s in shapes]
    out.append(pytest.param(CASES["softmax"], "f32", 1000, 1000, id="softmax-f32-1000x1000"))
    out.append(
        pytest.param(
            CASES["layer_norm_backward"], "f32", 1000, 17, id="layer_norm_backward-f32-1000x17"
        )
    )
    return out


def _run(case, dtype: str, rows: int, cols: int, seed: int = 0, wrap=None, **kwargs) -> float:
    rng = np.random.default_rng(stable_seed(case.name, dtype, rows, cols, seed))
    args = case.make(rng, rows, cols, dtype)
    run_args = [wrap(a) for a in args] if wrap else args
    outs = case.run(run_args, interpret=True, **kwargs)
    return case.check(outs, args, rows, cols, **kwargs)


@pytest.mark.parametrize("case,dtype,rows,cols", _params())
def test_wrapper_on_interpreter(case, dtype, rows, cols):
    _run(case, dtype, rows, cols)


def _strided(a: np.ndarray) -> np.ndarray:
    """A 2-D array as the view [:, :cols] of a wider one (row stride cols + 7, NaN padding)."""
    if a.ndim != 2:
        return a
    wide = np.full((a.shape[0], a.shape[1] + 7), np.nan, dtype=a.dtype)
    wide[:, : a.shape[1]] = a
    return wide[:, : a.shape[1]]


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
@pytest.mark.parametrize("case", ROW_CASES, ids=lambda c: c.name)
def test_strided_rows(case, dtype):
    _run(case, dtype, 5, 1000, wrap=_strided)
    if case.long_rows:
        _run(case, dtype, 2, 5000 + LONG // 4, wrap=_strided)


def _every_other_column(a: np.ndarray) -> np.ndarray:
    """A 2-D array as the view [:, ::2] of one twice as wide (column stride 2, NaN between);
    a 1-D one (weights, targets) as a view with step 2 too."""
    wide = np.full((*a.shape[:-1], 2 * a.shape[-1]), np.nan if a.dtype.kind == "f" else 0)
    wide = wide.astype(a.dtype)
    wide[..., ::2] = a
    return wide[..., ::2]


def _reversed_columns(a: np.ndarray) -> np.ndarray:
    """A 2-D array as a view with column stride -1 (a reversed copy, reversed back)."""
    return np.ascontiguousarray(a[:, ::-1])[:, ::-1] if a.ndim == 2 else a


@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize("case", ROW_CASES, ids=lambda c: c.name)
def test_column_strided_views(case, dtype):
    """x[:, ::2] (and 1-D arguments with a step, copied by the wrappers where they must be
    contiguous: weights and targets; statistics from a forward stay refused) and negative
    column strides, as torch and NumPy accept them."""

    def wrap(a):
        if a.ndim == 1 and case.name.endswith("backward") and a.dtype == np.float32:
            return a  # mean / rstd / lse: the forward's, contiguous
        return _every_other_column(a)

    _run(case, dtype, 5, 1001, wrap=wrap)
    _run(case, dtype, 3, 17, wrap=_reversed_columns)
    if case.long_rows:
        _run(case, dtype, 2, 5000 + LONG // 4, wrap=wrap)


NORM_CASES = ("layer_norm", "layer_norm_backward", "rms_norm", "rms_norm_backward")


_KERNELS = {
    "layer_norm": ("layernorm.c", "layer_norm_fwd"),
    "layer_norm_backward": ("layernorm.c", "layer_norm_bwd_dx"),
    "rms_norm": ("rmsnorm.c", "rms_norm_fwd"),
    "rms_norm_backward": ("rmsnorm.c", "rms_norm_bwd_dx"),
}


def _configs(case_name: str):
    file, name = _KERNELS[case_name]
    return tx.compile(f"kernels/{file}").kernels[name].tune.configs


@pytest.mark.parametrize(
    "case_name,index",
    [(n, i) for n in NORM_CASES for i in range(len(_configs(n)))],
)
def test_every_norm_config_on_the_interpreter(case_name, index):
    """Each #pragma autotune config of the norm kernels, forced, against float64: one column,
    1001 columns over 7 rows (a partial last group of ROWS), 1000 rows of 17 strided columns
    (several rows per backward program)."""
    case = CASES[case_name]
    config = _configs(case_name)[index]
    backward = case_name.endswith("backward")
    for dtype, rows, cols, wrap in [
        ("f32", 1, 1, None),
        ("bf16", 7, 1001, None),
        ("f16", 1000 if backward else 9, 17, _strided),
    ]:
        rng = np.random.default_rng(stable_seed(case_name, index, cols))
        args = case.make(rng, rows, cols, dtype)
        outs = case.run([wrap(a) for a in args] if wrap else args, interpret=True, config=config)
        case.check(outs, args, rows, cols)


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_every_softmax_rows_config_on_the_interpreter(name):
    """Each #pragma autotune config (ROWS, num_warps) of the one-tile softmax kernels, launched
    as teeny_tx.nn launches them, against float64: one column, 7 rows of 1001 (a partial last
    group of ROWS), 9 rows of 17 strided columns; rows of a partial group are not written."""
    case = CASES[name]
    kernel = tx.compile("kernels/softmax.c").kernels[name]
    for c in kernel.tune.configs:
        for dtype, rows, cols, wrap in [
            ("f32", 1, 1, None),
            ("bf16", 7, 1001, None),
            ("f16", 9, 17, _every_other_column),
        ]:
            rng = np.random.default_rng(stable_seed(name, cols))
            (x,) = case.make(rng, rows, cols, dtype)
            xv = wrap(x) if wrap else x
            y = np.full((rows + 1, cols), np.nan, x.dtype)  # a row past the end: untouched
            stride, step = (st // x.itemsize for st in xv.strides)
            grid = (-(-rows // c.kwargs["ROWS"]),)
            block = nn.norm_block(cols)
            kernel.interpret[grid](
                y,
                xv,
                rows,
                cols,
                stride,
                step,
                cols,
                num_warps=c.num_warps,
                BLOCK=block,
                strided=True,
                **c.kwargs,
            )
            assert np.isnan(y[rows].astype(np.float32)).all()
            case.check([y[:rows]], (x,), rows, cols)


@pytest.mark.parametrize("case_name", NORM_CASES)
def test_norm_prune_keeps_a_config_that_fits_every_width(case_name):
    kernel = nn._norm_kernel(*_KERNELS[case_name])
    names = [p.name for p in kernel.binder.runtime]
    lo, hi = nn.NORM_ELEMENTS["bwd" if "dw_part" in names else "fwd"]
    for cols in (1, 2, 17, 1000, 1024, 4096, 4097, 8192, 16384, 65536):
        launch = [8192 if n == "n_rows" else 0 for n in names]
        launch[names.index("n_cols")] = cols
        kept = [c for c in kernel.tune.configs if not nn.norm_prune(c, tuple(launch), kernel)]
        assert kept, cols
        block = nn.norm_block(cols)
        elements = [c.kwargs["ROWS"] * block // (32 * c.num_warps) for c in kept]
        assert len(set(elements)) == 1 or lo <= min(elements) <= max(elements) <= hi, cols


def test_strided_outputs_do_not_touch_padding():
    x = _strided(np.random.default_rng(0).standard_normal((4, 33)).astype(np.float32))
    y = nn.softmax(x, interpret=True)
    assert y.shape == (4, 33) and np.isnan(x.base[:, 33:]).all()
    np.testing.assert_allclose(y.sum(axis=1), 1.0, rtol=1e-6)


def test_norm_eps_and_grad_keywords():
    _run(CASES["layer_norm"], "f32", 3, 17, eps=0.25)
    _run(CASES["rms_norm"], "f32", 3, 17, eps=0.25)
    _run(CASES["cross_entropy_backward"], "f32", 3, 1000, grad=2.5)


# ---------------------------------------------------------------- cross-entropy edge cases


def _logits(rows: int, cols: int) -> np.ndarray:
    return np.random.default_rng(rows * cols).standard_normal((rows, cols)).astype(np.float32)


def test_cross_entropy_every_row_ignored_gives_nan_loss_and_zero_gradient():
    logits = _logits(4, 100)
    targets = np.full(4, -100, np.int64)
    loss, lse = nn.cross_entropy(logits, targets, interpret=True)
    assert loss.shape == () and loss.dtype == np.float32 and np.isnan(loss)
    np.testing.assert_allclose(
        lse, cross_entropy_reference(logits.astype(np.float64), targets)[1], rtol=1e-6
    )
    d = nn.cross_entropy_backward(logits, targets, lse, interpret=True)
    assert not d.any()


def test_cross_entropy_custom_ignore_index():
    logits = _logits(6, 50)
    targets = np.array([3, 7, 3, 0, 49, 3], np.int64)  # class 3 is the ignored one here
    loss, lse = nn.cross_entropy(logits, targets, ignore_index=3, interpret=True)
    ref_loss, ref_lse = cross_entropy_reference(logits.astype(np.float64), targets, ignore_index=3)
    np.testing.assert_allclose(loss, ref_loss, rtol=1e-6)
    d = nn.cross_entropy_backward(logits, targets, lse, ignore_index=3, interpret=True)
    assert not d[[0, 2, 5]].any() and d[[1, 3, 4]].all()
    np.testing.assert_allclose(d[1:2].sum(), 0.0, atol=1e-6)


def test_cross_entropy_target_out_of_range_gives_nan():
    logits = _logits(3, 10)
    losses_only = nn.cross_entropy(logits, np.array([1, 10, 2], np.int64), interpret=True)[0]
    assert np.isnan(losses_only)
    assert np.isnan(nn.cross_entropy(logits, np.array([-1, 2, 2], np.int64), interpret=True)[0])


def test_empty_batch():
    x = np.zeros((0, 17), np.float32)
    assert nn.softmax(x, interpret=True).shape == (0, 17)
    y, mean, rstd = nn.layer_norm(
        x, np.ones(17, np.float32), np.zeros(17, np.float32), interpret=True
    )
    assert y.shape == (0, 17) and mean.shape == rstd.shape == (0,)
    dx, dw, db = nn.layer_norm_backward(x, x, np.ones(17, np.float32), mean, rstd, interpret=True)
    assert dx.shape == (0, 17) and not dw.any() and not db.any()
    loss, lse = nn.cross_entropy(x, np.zeros(0, np.int64), interpret=True)
    assert np.isnan(loss) and lse.shape == (0,)


# ---------------------------------------------------------------- argument checks


def _f32(*shape):
    return np.zeros(shape, np.float32)


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: nn.softmax(_f32(2, 3, 4), interpret=True), r"softmax: x must be 2-D"),
        (
            lambda: nn.softmax(np.zeros((2, 3), np.int32), interpret=True),
            r"x has dtype int32; this takes f32, f16, bf16, f64",
        ),
        (lambda: nn.softmax(_f32(2, 3)), r"NumPy array; pass CuPy arrays or torch CUDA tensors"),
        (
            lambda: nn.softmax_backward(_f32(2, 3), _f32(2, 4), interpret=True),
            r"dy has shape \(2, 4\) but y has \(2, 3\)",
        ),
        (
            lambda: nn.softmax_backward(_f32(2, 3), np.zeros((2, 3), np.float16), interpret=True),
            r"dy is f16 but y is f32",
        ),
        (
            lambda: nn.layer_norm(_f32(2, 3), _f32(4), _f32(3), interpret=True),
            r"weight must have shape \(3,\)",
        ),
        (
            lambda: nn.layer_norm_backward(
                _f32(2, 3), _f32(2, 3), _f32(3), _f32(3), _f32(2), interpret=True
            ),
            r"mean must have shape \(2,\)",
        ),
        (
            lambda: nn.rms_norm_backward(
                _f32(2, 3), _f32(2, 3), _f32(3), np.zeros(2, np.float16), interpret=True
            ),
            r"rstd has dtype float16; this takes f32",
        ),
        (
            lambda: nn.rms_norm_backward(
                _f32(2, 6), _f32(2, 6), _f32(6), _f32(4)[::2], interpret=True
            ),
            r"rstd must be contiguous",
        ),
        (
            lambda: nn.layer_norm(_f32(2, 3), _f32(3), _f32(3), config=(1, 4), interpret=True),
            r"config must be a teeny_tx.Config",
        ),
        (
            lambda: nn.layer_norm(_f32(1, 70000), _f32(70000), _f32(70000), interpret=True),
            r"longer than 65536",
        ),
        (
            lambda: nn.cross_entropy(_f32(2, 3), np.zeros(2, np.int32), interpret=True),
            r"targets has dtype int32; this takes i64",
        ),
        (
            lambda: nn.cross_entropy(_f32(2, 3), np.zeros(3, np.int64), interpret=True),
            r"targets must have shape \(2,\)",
        ),
        (
            lambda: nn.cross_entropy_backward(
                _f32(2, 3), np.zeros(2, np.int64), _f32(3), interpret=True
            ),
            r"lse must have shape \(2,\)",
        ),
        (lambda: nn.softmax([[1.0]], interpret=True), r"list; interpret=True runs on NumPy arrays"),
    ],
)
def test_bad_arguments_raise_launch_errors(call, match):
    with pytest.raises(tx.LaunchError, match=match):
        call()


def test_known_dtype_names_each_dtype_and_refuses_one_without_a_name():
    """Arrays.known_dtype, the dtype the wrappers allocate and launch by once an argument is
    checked: the name of each of teeny_tx's dtypes, a LaunchError naming the call for a dtype
    teeny_tx has no name for (the checks refuse such arrays first, as complex64 here)."""
    for name, dtype in DTYPES.items():
        x = np.zeros((2, 3), dtype.np)
        assert Arrays("softmax", {"x": x}, True).known_dtype(x) == name
    z = np.zeros((2, 3), np.complex64)
    with pytest.raises(tx.LaunchError, match="softmax: dtype complex64 is not one teeny_tx takes"):
        Arrays("softmax", {"x": z}, True).known_dtype(z)
    with pytest.raises(tx.LaunchError, match="x has dtype complex64; this takes f32"):
        nn.softmax(z, interpret=True)


# ---------------------------------------------------------------- the launch heuristic


@pytest.mark.parametrize(
    "cols,expected",
    [
        (1, (1, 1, False)),
        (17, (32, 1, False)),
        (1000, (1024, 4, False)),
        (4097, (8192, 16, False)),
        (16384, (16384, 16, False)),
        (16385, (4096, 16, True)),
        (65537, (4096, 16, True)),
    ],
)
def test_row_config(cols, expected):
    c = nn.row_config(cols)
    assert (c.block, c.num_warps, c.looped) == expected


def test_backward_programs_cover_every_row_once():
    for rows in (1, 3, 100, 527, 528, 529, 10_000):
        for c in _configs("layer_norm_backward"):
            programs = nn.backward_programs(rows, 132, c)
            per = -(-rows // programs)
            assert programs <= 4 * 132 and (programs - 1) * per < rows <= programs * per


def test_partial_programs_cover_every_row_once():
    for rows in (1, 3, 100, 527, 528, 529, 10_000):
        programs, per = nn.partial_programs(rows, 132)
        assert programs <= 4 * 132 and (programs - 1) * per < rows <= programs * per


# ---------------------------------------------------------------- split softmax


def _split_run(name: str, x: np.ndarray, config, spins: int):
    """(y, slots, count) of one launch of softmax_split for ``name`` (softmax, log_softmax) on
    the interpreter, as teeny_tx.nn launches it (slots sized for the least CHUNK, zero first)."""
    kernel = tx.compile("kernels/softmax.c").softmax_split
    rows, cols = x.shape
    chunk = config.kwargs["CHUNK"]
    slots_n = nn._split_slots(kernel, cols)
    least = min(c.kwargs["CHUNK"] for c in kernel.tune.configs)
    y = np.full(x.shape, np.nan, x.dtype)
    slots = np.zeros(rows * -(-cols // least), np.int64)
    done = np.zeros(rows, np.int32)
    grid = (rows * -(-cols // chunk),)
    stride, step = (s // x.itemsize for s in x.strides)
    kernel.interpret[grid](
        y,
        slots,
        done,
        x,
        cols,
        stride,
        step,
        cols,
        spins,
        num_warps=config.num_warps,
        SLOTS=slots_n,
        LOG=int(name == "log_softmax"),
        strided=True,
        **config.kwargs,
    )
    return y, slots, done


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_split_softmax_every_config_on_the_interpreter(name):
    """Each config of softmax_split (LOG = 0 and 1) on rows of LONG columns (a last chunk of
    one column) with -INF entries, a row of only -INF and a row with a NaN (NaN rows, as the
    one-tile and _looped kernels give), as a column-strided view: against float64 and the
    _looped kernel;
    the same bits whether the programs wait for the other chunks (spins > 0) or compute them
    (spins = 0), and the slots and counts zero again afterwards."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((4, LONG)).astype(np.float32) * 3
    x[0, rng.integers(0, LONG, 100)] = -np.inf
    x[1] = -np.inf
    x[2, 12345] = np.nan
    wide = np.full((4, 2 * LONG), np.nan, np.float32)
    wide[:, ::2] = x
    view = wide[:, ::2]
    log = name.startswith("log")
    x64 = x.astype(np.float64)
    with np.errstate(invalid="ignore"):
        m = x64.max(axis=1, keepdims=True)
        lse = m + np.log(np.exp(x64 - m).sum(axis=1, keepdims=True))
        expected = x64 - lse if log else np.exp(x64 - lse)
    looped = tx.compile("kernels/softmax.c").kernels[name + "_looped"]
    y_looped = np.empty_like(x)
    looped.interpret[(4,)](y_looped, x, LONG, LONG, 1, LONG, BLOCK=4096, num_warps=16)
    kernel = tx.compile("kernels/softmax.c").softmax_split
    for config in kernel.tune.configs:
        y, slots, done = _split_run(name, view, config, spins=0)
        y2, slots2, done2 = _split_run(name, view, config, spins=3)
        np.testing.assert_array_equal(y, y2)
        assert not slots.any() and not done.any() and not slots2.any() and not done2.any()
        assert np.isnan(y[1:3]).all() and np.isnan(y_looped[1:3]).all()
        for r in (0, 3):
            np.testing.assert_allclose(y[r], expected[r], rtol=2e-5, atol=1e-4 if log else 0)
            np.testing.assert_allclose(y[r], y_looped[r], rtol=2e-5, atol=1e-4 if log else 0)


def test_cross_entropy_chunks_every_config_on_the_interpreter():
    """Each config of cross_entropy_chunks, then cross_entropy_rows, against cross_entropy_fwd
    (one program per row) on 5 rows of 9001 columns as a column-strided view, with an ignored
    row, a target out of range (NaN loss) and a row of -INF but its target."""
    mod = tx.compile("kernels/cross_entropy.c")
    chunks, per_row = mod.kernels["cross_entropy_chunks"], mod.kernels["cross_entropy_rows"]
    whole = mod.kernels["cross_entropy_fwd"]
    rng = np.random.default_rng(3)
    rows, cols = 5, 9001
    x = (rng.standard_normal((rows, cols)) * 4).astype(np.float32)
    x[3] = -np.inf
    x[3, 7] = 2.0
    view = _every_other_column(x)
    targets = np.array([5, -100, 9001, 7, 9000], np.int64)
    ref_loss, ref_lse = np.empty(rows, np.float32), np.empty(rows, np.float32)
    whole.interpret[(rows,)](ref_loss, ref_lse, x, targets, cols, cols, 1, -100, BLOCK=4096)
    assert np.isnan(ref_loss[2]) and ref_loss[1] == 0
    slots_n = nn._split_slots(chunks, cols)
    for c in chunks.tune.configs:
        n_chunks = -(-cols // c.kwargs["CHUNK"])
        slots = np.zeros(rows * n_chunks, np.int64)
        chunks.interpret[(rows * n_chunks,)](
            slots, view, cols, 2 * cols, 2, num_warps=c.num_warps, strided=True, **c.kwargs
        )
        for block_rows in (1, 4):  # a partial last group of rows too
            loss, lse = np.full(rows, np.nan, np.float32), np.full(rows, np.nan, np.float32)
            per_row.interpret[(-(-rows // block_rows),)](
                loss,
                lse,
                slots,
                view,
                targets,
                rows,
                cols,
                n_chunks,
                2 * cols,
                2,
                -100,
                ROWS=block_rows,
                SLOTS=slots_n,
                strided=True,
            )
            np.testing.assert_allclose(lse, ref_lse, rtol=1e-6)
            np.testing.assert_allclose(loss, ref_loss, rtol=1e-5, atol=1e-6, equal_nan=True)


def test_split_softmax_applies_to_long_rows_of_f16_bf16_f32(monkeypatch):
    """With SPLIT_SOFTMAX on, long rows of f16, bf16 and f32 take softmax_split; f64 rows (a
    chunk's statistics do not pack into 64 bits) and rows of more than MAX_SLOTS chunks keep
    the _looped kernels (which every long row takes with it off, the default)."""
    kernel = tx.compile("kernels/softmax.c").softmax_split
    least = min(c.kwargs["CHUNK"] for c in kernel.tune.configs)
    assert nn._split_slots(kernel, LONG) == 1 << (-(-LONG // least) - 1).bit_length()
    assert nn._split_slots(kernel, least * nn.MAX_SLOTS) == nn.MAX_SLOTS
    assert nn._split_slots(kernel, least * nn.MAX_SLOTS + 1) == 0
    launched = []
    bound = Arrays.bound

    def record(self, kernel, grid, num_warps, **constexprs):
        launched.append(kernel.name)
        return bound(self, kernel, grid, num_warps, **constexprs)

    import unittest.mock

    monkeypatch.setattr(nn, "SPLIT_SOFTMAX", True)
    with unittest.mock.patch.object(Arrays, "bound", record):
        for dtype in ("f32", "f16", "bf16", "f64"):
            x = np.random.default_rng(1).standard_normal((2, 20000)).astype(DTYPES[dtype].np)
            y = nn.softmax(x, interpret=True)
            np.testing.assert_allclose(y.astype(np.float64).sum(axis=1), 1.0, rtol=1e-2)
    assert launched == ["softmax_split"] * 3 + ["softmax_looped"]
    monkeypatch.setattr(nn, "SPLIT_SOFTMAX", False)
    launched.clear()
    with unittest.mock.patch.object(Arrays, "bound", record):
        nn.softmax(np.zeros((2, 20000), np.float32), interpret=True)
    assert launched == ["softmax_looped"]
    assert "log_softmax_split" not in tx.compile("kernels/softmax.c").kernels  # one kernel, LOG


# ---------------------------------------------------------------- NVRTC, as the wrappers launch


@pytest.mark.parametrize("split", [False, True], ids=["two-pass", "split"])
def test_every_nn_kernel_compiles_with_nvrtc_at_the_wrappers_launches(monkeypatch, split):
    """Record the launches the wrappers make over row lengths that take every branch of
    row_config (dtypes in turn), then compile each kernel once per (BLOCK, num_warps)."""
    launches = {}

    bound = Arrays.bound

    def record(self, kernel, grid, num_warps, **constexprs):
        run = bound(self, kernel, grid, num_warps, **constexprs)

        def launch(*args):
            key = (kernel.name, num_warps, tuple(sorted(constexprs.items())))
            launches.setdefault(key, (kernel, args, num_warps, constexprs))
            run(*args)

        return launch

    monkeypatch.setattr(Arrays, "bound", record)
    monkeypatch.setattr(nn, "SPLIT_SOFTMAX", split)  # softmax_split or the _looped forwards
    dtypes = ("bf16", "f16", "f32")
    for i, (case, cols) in enumerate(
        (c, n) for c in ROW_CASES for n in (1, 17, 1000, 4096, 4097, LONG)
    ):
        if cols == LONG and not case.long_rows:
            continue
        dtype = dtypes[i % 3]
        args = case.make(np.random.default_rng(i), 3, cols, dtype)
        case.run(args, interpret=True)
        # f64: the _looped softmax kernels and cross_entropy_fwd (the split kernels take f16,
        # bf16 and f32)
        if cols == LONG and case.name in ("softmax", "log_softmax", "cross_entropy"):
            case.run(case.make(np.random.default_rng(i), 3, cols, "f64"), interpret=True)
    compiled = set()
    for kernel, args, num_warps, constexprs in launches.values():
        spec = kernel.specialize(*args, num_warps=num_warps, strided=True, **constexprs)
        assert nvrtc_compile(spec.cuda_source, kernel.name).startswith(b"\x7fELF")
        compiled.add(kernel.name)
    files = ("softmax.c", "layernorm.c", "rmsnorm.c", "cross_entropy.c")
    every = {name for f in files for name in tx.compile(f"kernels/{f}").kernels}
    assert compiled == every - (set() if split else {"softmax_split"})


def test_reference_dtypes_are_the_wrappers():
    """The outputs keep the input's dtype; statistics are f32."""
    x = np.ones((2, 5), DTYPES["bf16"].np)
    w = np.ones(5, np.float16)
    y, mean, rstd = nn.layer_norm(x, w, w, interpret=True)
    assert (y.dtype, mean.dtype, rstd.dtype) == (x.dtype, np.float32, np.float32)
    dx, dw, db = nn.layer_norm_backward(x, x, w, mean, rstd, interpret=True)
    assert (dx.dtype, dw.dtype, db.dtype) == (x.dtype, w.dtype, w.dtype)


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("shape", [(1,), (1001,), (37, 129)])
def test_dropout_wrappers_on_the_interpreter(shape, dtype):
    rng = np.random.default_rng(len(shape))
    x = rng.standard_normal(shape).astype(np.float32).astype(DTYPES[dtype].np)
    y = nn.dropout(x, 0.3, 1234, interpret=True)
    dx = nn.dropout_backward(np.ones_like(x), 0.3, 1234, interpret=True)  # the mask / (1 - p)
    keep = dx.astype(np.float64) != 0
    if x.size > 1000:
        assert 0.65 < keep.mean() < 0.75
    np.testing.assert_allclose(dx.astype(np.float64)[keep], 1 / 0.7, rtol=1e-2)
    expected = x.astype(np.float64) * dx.astype(np.float64)
    np.testing.assert_allclose(y.astype(np.float64), expected, rtol=1e-2, atol=1e-6)


def test_dropout_refuses_bad_arguments():
    with pytest.raises(tx.LaunchError, match="p must be in"):
        nn.dropout(np.ones(4, np.float32), 1.0, 0, interpret=True)
    with pytest.raises(tx.LaunchError, match="p must be in"):
        nn.dropout_backward(np.ones(4, np.float32), -0.1, 0, interpret=True)


def test_dropout_copies_a_view_first():
    x = np.random.default_rng(3).standard_normal((4, 8)).astype(np.float32)
    got = nn.dropout(x[:, ::2], 0.5, 7, interpret=True)
    assert got.flags.c_contiguous
    np.testing.assert_array_equal(
        got, nn.dropout(np.ascontiguousarray(x[:, ::2]), 0.5, 7, interpret=True)
    )
