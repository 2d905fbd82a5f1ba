"""teeny_tx.linalg on the GPU, on CuPy arrays (and torch tensors where torch has CUDA), against
float64 products computed on the device: f16/bf16 at 1024^3, a ragged 4095 x 4097 x 1000 f16,
f32 at 512^3 in IEEE, TF32 and TF32x3 (TF32 measurably less accurate than IEEE), every
epilogue, column-major and offset operands, bmm, the linear layer forward and backward, the
interpreter's results, and the generated code: mma.sync and cp.async in the PTX of an f16
matmul."""

from __future__ import annotations

import numpy as np
import pytest

from teeny_tx.dtypes import DTYPES
from teeny_tx.kernel import HEADERS
from teeny_tx.library import linalg, module
from teeny_tx.runtime import nvrtc

cp = pytest.importorskip("cupy")

TUNED = (
    "test_matmul_1024",
    "test_matmul_ragged_4095_4097_1000",
    "test_bias_gelu_epilogue",
    "test_repeated_calls_replay_a_plan",
)


@pytest.fixture(autouse=True)
def _tuning_only_where_asked(request, monkeypatch):
    """The autotuner times 7 configs per new shape: the tests named in TUNED launch through it
    (linalg's default); the others take matmul_config's tiles, to keep the run short."""
    if request.node.originalname not in TUNED:
        monkeypatch.setattr(linalg, "TUNE", False)


UNIT = {"f32": 2.0**-24, "f16": 2.0**-11, "bf16": 2.0**-8}  # unit roundoff of the output


def _host(shape, dtype: str, seed: int, scale: float = 1.0) -> np.ndarray:
    """Random normal values exactly representable in ``dtype`` (a NumPy array)."""
    rng = np.random.default_rng(seed)
    return (scale * rng.standard_normal(shape)).astype(np.float32).astype(DTYPES[dtype].np)


def _pair(shape, dtype: str, seed: int, layout: str = "row", scale: float = 1.0):
    """(host values, the same values on the GPU): row-major; "col", column-major (the transpose
    of a row-major array); "offset", a view into a larger array at an offset. The device
    layouts are views of copies of host arrays (CuPy has no bfloat16 kernels)."""
    x = _host(shape, dtype, seed, scale)
    if layout == "col":
        return x, cp.asarray(np.ascontiguousarray(x.T)).T
    if layout == "offset":
        big = np.zeros((shape[0] + 3, shape[1] + 8), x.dtype)
        big[3:, 5 : 5 + shape[1]] = x
        return x, cp.asarray(big)[3:, 5 : 5 + shape[1]]
    return x, cp.asarray(x)


def _dev64(x):
    """A host array, or a contiguous device array of any dtype, as float64 on the device."""
    if isinstance(x, np.ndarray):
        return cp.asarray(x.astype(np.float64))
    if x.dtype == np.dtype(DTYPES["bf16"].np):  # CuPy has no bfloat16 arithmetic
        return cp.asarray(cp.asnumpy(x).astype(np.float64))
    return x.astype(cp.float64)


def _act(z, activation):
    if activation == "gelu":
        from cupyx.scipy.special import erf

        return 0.5 * z * (1.0 + erf(z / np.sqrt(2.0)))
    if activation == "gelu_tanh":
        return 0.5 * z * (1.0 + cp.tanh(np.sqrt(2.0 / np.pi) * (z + 0.044715 * z**3)))
    if activation == "relu":
        return cp.maximum(z, 0.0)
    if activation == "silu":
        return z / (1.0 + cp.exp(-z))
    return z


def check(
    got, a, b, out_dtype, *, bias=None, activation=None, alpha=1.0, acc_rtol=None, rel_tol=None
):
    """``got`` (on the device) against act(alpha * a @ b + bias) in float64 (``a``, ``b`` and
    ``bias`` host values), elementwise: |error| <= the output dtype's rounding of |ref| +
    acc_rtol * (alpha * |a| @ |b| + |bias|), acc_rtol by default 2 K 2^-24 (a bound on f32
    accumulation over K); and as a whole: ‖error‖ / ‖ref‖ <= rel_tol, by default 2 units of
    the output dtype + 1e-5. Returns ‖error‖ / ‖ref‖."""
    assert got.dtype == np.dtype(DTYPES[out_dtype].np), (got.dtype, out_dtype)
    a64, b64 = _dev64(a), _dev64(b)
    bias64 = 0.0 if bias is None else _dev64(bias)
    ref = _act(alpha * cp.matmul(a64, b64) + bias64, activation)
    scale = abs(alpha) * cp.matmul(cp.abs(a64), cp.abs(b64)) + cp.abs(bias64)
    if acc_rtol is None:
        acc_rtol = 2 * a.shape[-1] * 2.0**-24
    tol = 1.01 * UNIT[out_dtype] * cp.abs(ref) + acc_rtol * scale + 1e-30
    got64 = _dev64(got)
    assert got64.shape == ref.shape, (got64.shape, ref.shape)
    err = cp.abs(got64 - ref)
    bad = ~(err <= tol)
    if bool(bad.any()):
        at = np.unravel_index(int(cp.argmax(bad.astype(cp.int8))), bad.shape)
        raise AssertionError(
            f"{int(bad.sum())} of {bad.size} elements wrong; at {tuple(map(int, at))}: got "
            f"{float(got64[at])!r}, expected {float(ref[at])!r} (tolerance {float(tol[at]):.3g})"
        )
    rel = float(cp.linalg.norm(err)) / max(float(cp.linalg.norm(ref)), 1e-300)
    assert rel <= (2 * UNIT[out_dtype] + 1e-5 if rel_tol is None else rel_tol), rel
    return rel


# ---------------------------------------------------------------- matmul


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_matmul_1024(dtype):
    (a, da), (b, db) = _pair((1024, 1024), dtype, 1), _pair((1024, 1024), dtype, 2)
    check(linalg.matmul(da, db), a, b, dtype)


def test_matmul_ragged_4095_4097_1000():
    (a, da), (b, db) = _pair((4095, 1000), "f16", 3), _pair((1000, 4097), "f16", 4)
    check(linalg.matmul(da, db), a, b, "f16")


@pytest.mark.parametrize("mnk", [(1, 1, 1), (17, 300, 33), (300, 17, 1000), (64, 64, 64)])
def test_matmul_small_and_odd(mnk):
    m, n, k = mnk
    (a, da), (b, db) = _pair((m, k), "bf16", m), _pair((k, n), "bf16", n + 1)
    check(linalg.matmul(da, db, out_dtype="f32"), a, b, "f32")


def test_f32_precisions_512():
    """IEEE is the default; TF32's error against float64 is clearly larger than IEEE's, and
    TF32x3 recovers nearly f32."""
    (a, da), (b, db) = _pair((512, 512), "f32", 5), _pair((512, 512), "f32", 6)
    ieee = check(linalg.matmul(da, db), a, b, "f32")
    assert check(linalg.matmul(da, db, precision="ieee"), a, b, "f32") == ieee
    tf32 = check(
        linalg.matmul(da, db, precision="tf32"), a, b, "f32", acc_rtol=2.0**-9, rel_tol=2e-3
    )
    tf32x3 = check(linalg.matmul(da, db, precision="tf32x3"), a, b, "f32", acc_rtol=1e-4)
    assert ieee < 2e-6 and tf32x3 < 1e-5
    assert 1e-4 < tf32 < 2e-3 and tf32 > 20 * ieee, (ieee, tf32)


@pytest.mark.parametrize("activation", ["gelu", "gelu_tanh"])
@pytest.mark.parametrize("out_dtype", ["f16", "f32"])
def test_bias_gelu_epilogue(activation, out_dtype):
    (a, da), (b, db) = _pair((1024, 512), "f16", 7, scale=0.25), _pair((512, 768), "f16", 8)
    bias, bias_d = _pair((1, 768), "f16", 9)
    bias, bias_d = bias[0], bias_d[0]
    got = linalg.matmul(da, db, bias=bias_d, activation=activation, alpha=0.5, out_dtype=out_dtype)
    check(got, a, b, out_dtype, bias=bias, activation=activation, alpha=0.5)


@pytest.mark.parametrize("activation", [None, "relu", "silu"])
def test_other_epilogues(activation):
    (a, da), (b, db) = _pair((300, 200), "bf16", 10), _pair((200, 260), "bf16", 11)
    bias = _host(260, "f32", 12)
    got = linalg.matmul(da, db, bias=cp.asarray(bias), activation=activation, out_dtype="f32")
    check(got, a, b, "f32", bias=bias, activation=activation)


@pytest.mark.parametrize("layout_a", ["row", "col", "offset"])
@pytest.mark.parametrize("layout_b", ["row", "col", "offset"])
def test_operand_layouts(layout_a, layout_b):
    (a, da), (b, db) = (
        _pair((333, 256), "f16", 13, layout_a),
        _pair((256, 190), "f16", 14, layout_b),
    )
    check(linalg.matmul(da, db), a, b, "f16")


def test_column_major_large():
    (a, da), (b, db) = (
        _pair((1024, 1024), "bf16", 15, "col"),
        _pair((1024, 1024), "bf16", 16, "col"),
    )
    check(linalg.matmul(da, db), a, b, "bf16")


def test_explicit_config():
    (a, da), (b, db) = _pair((500, 300), "f16", 17), _pair((300, 400), "f16", 18)
    for config in [(64, 64, 32, 4, 4, 2), (128, 128, 64, 8, 4, 4), (128, 256, 64, 8, 8, 3)]:
        check(linalg.matmul(da, db, config=config), a, b, "f16")


# ---------------------------------------------------------------- bmm and the linear layer


@pytest.mark.parametrize("dtype", ["f16", "f32"])
def test_bmm(dtype):
    a, b = _host((4, 256, 192), dtype, 19), _host((4, 192, 160), dtype, 20)
    got = linalg.bmm(cp.asarray(a), cp.asarray(b))
    for i in range(4):
        check(got[i], a[i], b[i], dtype)


def test_bmm_strided():
    a, b = _host((3, 200, 130), "bf16", 21), _host((3, 200, 170), "bf16", 22)
    da = cp.asarray(a).transpose(0, 2, 1)  # [3, 130, 200], contiguous along M
    db = cp.asarray(b)[:, :, 10:]  # [3, 200, 160] at an offset
    got = linalg.bmm(da, db, alpha=0.5, out_dtype="f32")
    for i in range(3):
        check(got[i], a[i].T, b[i, :, 10:], "f32", alpha=0.5)


def test_linear_forward_and_backward():
    t, n_in, n_out = 1000, 768, 512
    (x, x_d), (w, w_d) = _pair((t, n_in), "bf16", 23), _pair((n_out, n_in), "bf16", 24, scale=0.05)
    (bias, bias_d), (dy, dy_d) = _pair((1, n_out), "bf16", 25), _pair((t, n_out), "bf16", 26)
    bias, bias_d = bias[0], bias_d[0]
    check(linalg.linear(x_d, w_d, bias_d), x, w.T, "bf16", bias=bias)
    got = linalg.linear(x_d, w_d, bias_d, "gelu")
    check(got, x, w.T, "bf16", bias=bias, activation="gelu")
    for seed in (26, 126):  # the second call replays the first's plan, on new data
        dy, dy_d = _pair((t, n_out), "bf16", seed)
        dx, dw, db = linalg.linear_backward(dy_d, x_d, w_d)
        check(dx, dy, w, "bf16")
        check(dw, dy.T, x, "bf16")
        check(db[None, :], np.ones((1, t), np.float32), dy, "bf16")


@pytest.mark.parametrize("hopper", [False, True])
def test_linear_with_padded_copies(monkeypatch, hopper):
    """w [out, in] with in = 1000 (rows off 16 elements) and dy [T, out] with out = 517 are
    copied into padded buffers: the copies are laid out as the product's operands (w^T, dy^T),
    not as the arrays (which read 4x past the copy: an illegal address on the H200)."""
    if hopper and cp.cuda.Device().compute_capability != "90":
        pytest.skip("the TMA + wgmma path needs a compute capability 9.0 device")
    monkeypatch.setattr(linalg, "HOPPER", hopper)
    monkeypatch.setattr(linalg, "TUNE", hopper)  # TUNE off: matmul_config's cp.async tiles
    t, n_in, n_out = 300, 1000, 517
    (x, x_d), (w, w_d) = _pair((t, n_in), "f16", 41), _pair((n_out, n_in), "f16", 42, scale=0.05)
    (bias, bias_d), (dy, dy_d) = _pair((1, n_out), "f16", 43), _pair((t, n_out), "f16", 44)
    bias, bias_d = bias[0], bias_d[0]
    for _ in range(2):  # the second call replays the plan: the same copies, then the launch
        got = linalg.linear(x_d, w_d, bias_d, "gelu")
        check(got, x, w.T, "f16", bias=bias, activation="gelu")
    dx, dw, _ = linalg.linear_backward(dy_d, x_d, w_d, False)
    check(dx, dy, w, "f16")
    check(dw, dy.T, x, "f16")


def test_linear_backward_many_tokens_small_layer():
    """db over 20000 rows: chunks of rows over ~4 programs per SM, then their f32 partials."""
    x, x_d = _pair((20000, 32), "f16", 28)
    w, w_d = _pair((48, 32), "f16", 29)
    for seed in (27, 127):  # the second call replays the partial sums' two launches
        dy, dy_d = _pair((20000, 48), "f16", seed)
        dx, dw, db = linalg.linear_backward(dy_d, x_d, w_d)
        check(dx, dy, w, "f16")
        check(dw, dy.T, x, "f16")
        check(db[None, :], np.ones((1, 20000), np.float32), dy, "f16")


def test_agrees_with_interpreter():
    a, b, bias = _host((70, 64), "f32", 30), _host((64, 33), "f32", 31), _host(33, "f32", 32)
    config = (64, 64, 32, 2, 4, 2)
    host = linalg.matmul(a, b, bias=bias, activation="silu", config=config, interpret=True)
    dev = linalg.matmul(
        cp.asarray(a), cp.asarray(b), bias=cp.asarray(bias), activation="silu", config=config
    )
    np.testing.assert_allclose(cp.asnumpy(dev), host, rtol=1e-5, atol=1e-5)


def test_torch_tensors():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA")
    torch.manual_seed(0)
    a = torch.randn(500, 300, device="cuda", dtype=torch.float16)
    b = torch.randn(300, 200, device="cuda", dtype=torch.float16)
    bias = torch.randn(200, device="cuda", dtype=torch.float16)
    got = linalg.matmul(a, b, bias=bias, activation="gelu", out_dtype=torch.float32)
    assert isinstance(got, torch.Tensor) and got.dtype == torch.float32 and got.is_cuda
    ref = torch.nn.functional.gelu(a.double() @ b.double() + bias.double())
    torch.testing.assert_close(got.double(), ref, rtol=1e-4, atol=1e-4)
    x = a.to(torch.bfloat16)
    w = torch.randn(64, 300, device="cuda", dtype=torch.bfloat16)
    y = linalg.linear(x, w)
    ref = torch.nn.functional.linear(x.double(), w.double())
    torch.testing.assert_close(y.double(), ref, rtol=1e-2, atol=1e-2)
    dy = torch.randn(500, 64, device="cuda", dtype=torch.bfloat16)
    dx, dw, db = linalg.linear_backward(dy, x, w)
    torch.testing.assert_close(dx.double(), dy.double() @ w.double(), rtol=1e-2, atol=1e-1)
    torch.testing.assert_close(dw.double(), dy.double().T @ x.double(), rtol=1e-2, atol=1e-1)
    torch.testing.assert_close(db.double(), dy.double().sum(0), rtol=1e-2, atol=1e-1)


# ---------------------------------------------------------------- generated code


def _ptx(source: str) -> bytes:
    """NVRTC's PTX of a generated kernel for sm_90 (no GPU needed)."""
    lib = nvrtc._nvrtc
    program = lib.createProgram(
        source, "matmul.cu", [t.encode() for t in HEADERS.values()], [h.encode() for h in HEADERS]
    )
    try:
        lib.compileProgram(program, nvrtc.nvrtc_arguments("sm_90", nvrtc.DEFAULT_OPTIONS))
        return lib.getPTX(program)
    finally:
        lib.destroyProgram(program)


def test_f16_matmul_uses_mma_sync_and_cp_async():
    """The f16 matmul as linalg launches it at 4096^3, for the portable target sm_90: tensor
    cores (mma.sync fed by ldmatrix) and a cp.async software pipeline in the K loop. (On this
    H200 the same launch compiles for sm_90a and uses wgmma: tests/gpu/test_dot_gpu.py checks
    its SASS.)"""
    config = linalg.matmul_config(4096, 4096, 4096, "f16")
    source = module("matmul.c").matmul.cuda_source(
        "f16",
        "f16",
        "f16",
        "f16",
        4096,
        4096,
        4096,
        4096,
        1,
        4096,
        1,
        4096,
        1,
        0,
        0,
        0,
        1.0,
        HAS_BIAS=0,
        ACT=0,
        PRECISION=20,
        A_T=0,
        B_T=0,
        BM=config.bm,
        BN=config.bn,
        BK=config.bk,
        GROUP_M=config.group_m,
        num_warps=config.num_warps,
        num_stages=config.num_stages,
        target="sm_90",
    )
    assert "mma.sync" in source and "cp.async" in source
    ptx = _ptx(source)
    assert b"mma.sync.aligned" in ptx and b"cp.async" in ptx and b"ldmatrix" in ptx


def test_repeated_calls_replay_a_plan():
    """A second call with arrays of the same signature skips the checks and the tuner (a
    plan), and still computes its own product; a new signature takes the checked path."""
    linalg._PLANS.clear()
    results = []
    for seed in (10, 11):
        (a, da), (b, db) = _pair((200, 96), "f16", seed), _pair((96, 136), "f16", seed + 1)
        results.append((linalg.matmul(da, db, alpha=0.5), a, b))
    assert len(linalg._PLANS) == 1
    for got, a, b in results:
        check(got, a, b, "f16", alpha=0.5)
    (a, da), (b, db) = _pair((200, 96), "f16", 12, layout="col"), _pair((96, 136), "f16", 13)
    check(linalg.matmul(da, db), a, b, "f16")
    assert len(linalg._PLANS) == 2


# ---------------------------------------------------------------- the Hopper TMA path


@pytest.fixture
def hopper_launches(monkeypatch):
    """linalg as a user calls it (tuned launches: ``TUNE`` on, no ``config``) with its Hopper
    path on (sm_90 only); the list of the Hopper kernel's launches (node keys).

    The autouse fixture above turns ``TUNE`` off, and with it linalg passes matmul_config's
    tiles and runs the cp.async kernel: these tests turn it back on, or they would check the
    cp.async kernel under the Hopper tests' names. Each launch is counted where it happens:
    ``HopperMatmulKernel.launch`` (the general path) and every call of a function that
    ``HopperMatmulKernel.launcher`` made (what linalg's plans and their replays call). The
    caches that keep launchers across calls (linalg's plans and choices, the kernels' own
    launcher caches) are emptied first, so every launcher of the test is made, and counted,
    inside it."""
    if cp.cuda.Device().compute_capability != "90":
        pytest.skip("the TMA + wgmma path needs a compute capability 9.0 device")
    from teeny_tx import kernel as hopper_matmul

    monkeypatch.setattr(linalg, "HOPPER", True)
    monkeypatch.setattr(linalg, "TUNE", True)
    monkeypatch.setattr(linalg, "WATCHDOG", 1 << 26)  # a pipeline bug traps, not hangs
    launches: list[tuple] = []
    original = hopper_matmul.HopperSpecialization.launch

    def counted(self, *args, **kwargs):
        launches.append(self.node.key)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(hopper_matmul.HopperSpecialization, "launch", counted)
    make_launcher = hopper_matmul.HopperSpecialization.launcher

    def counted_launcher(self, *args, **kwargs):  # linalg's path: a launcher per product size
        run = make_launcher(self, *args, **kwargs)

        def run_counted(*call, **kw):
            launches.append(self.node.key)
            return run(*call, **kw)

        return run_counted

    monkeypatch.setattr(hopper_matmul.HopperSpecialization, "launcher", counted_launcher)

    def forget() -> None:
        linalg._PLANS.clear()
        linalg.HOPPER_CHOICES.clear()

    forget()
    yield launches
    forget()


def _padded(shape, dtype: str, seed: int, layout: str):
    """(host values, the same values on the GPU) whose rows (``layout`` "row") or columns
    ("col") are padded to 16 bytes: any M, N, K stays TMA-addressable without a copy."""
    rows, cols = shape if layout == "row" else shape[::-1]
    x = _host((rows, cols), dtype, seed)
    lead = -(-cols // 8) * 8
    big = np.zeros((rows, lead), x.dtype)
    big[:, :cols] = x
    dev = cp.asarray(big)[:, :cols]
    return (x, dev) if layout == "row" else (np.ascontiguousarray(x.T), dev.T)


@pytest.mark.parametrize(
    "mnk,dtype,layout_a,layout_b",
    [
        ((1024, 1024, 1024), "f16", "row", "row"),
        ((1024, 1024, 1024), "bf16", "row", "col"),
        ((2048, 2048, 2048), "bf16", "col", "row"),
        ((640, 384, 200), "f16", "col", "col"),
        ((4095, 4097, 1000), "f16", "row", "row"),
        ((1, 8, 8), "f16", "row", "row"),
    ],
)
def test_hopper_path_matches_float64(hopper_launches, mnk, dtype, layout_a, layout_b):
    m, n, k = mnk
    (a, da), (b, db) = _pair((m, k), dtype, m + 1, layout_a), _pair((k, n), dtype, n, layout_b)
    check(linalg.matmul(da, db), a, b, dtype)
    assert len(hopper_launches) == 1, f"not the Hopper path: {linalg.hopper_report()}"
    check(linalg.matmul(da, db), a, b, dtype)  # the replayed plan (copying what the first did)
    assert len(hopper_launches) == 2, "the second call did not launch the Hopper kernel"


@pytest.mark.parametrize(
    "mnk,layout_a,layout_b",
    [((17, 301, 41), "row", "row"), ((129, 255, 999), "col", "row"), ((1001, 67, 3), "row", "col")],
)
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_hopper_path_odd_sizes(hopper_launches, mnk, dtype, layout_a, layout_b):
    """Odd M, N and K through TMA's zero-filled boxes and the bounded register epilogue (C's
    odd rows rule out TMA stores): operands with padded leading dimensions stay on the path."""
    m, n, k = mnk
    a, da = _padded((m, k), dtype, m, layout_a)
    b, db = _padded((k, n), dtype, n + 1, layout_b)
    check(linalg.matmul(da, db), a, b, dtype)
    assert len(hopper_launches) == 1, f"not the Hopper path: {linalg.hopper_report()}"


def test_hopper_launch_count_sees_other_paths(hopper_launches, monkeypatch):
    """The count is of Hopper launches, nothing else: a product TMA cannot address (rows of
    600 bytes, too small to be copied into aligned rows) takes the cp.async kernel, correctly,
    and leaves the count at zero; so do TUNE off (the state that made these tests check the
    cp.async kernel) and HOPPER off; with both on it counts (a plan made under another switch
    is not replayed)."""
    (a, da), (b, db) = _pair((17, 40), "bf16", 1), _pair((40, 300), "bf16", 2)
    check(linalg.matmul(da, db), a, b, "bf16")
    assert hopper_launches == []
    (a, da), (b, db) = _pair((256, 256), "f16", 3), _pair((256, 256), "f16", 4)
    monkeypatch.setattr(linalg, "TUNE", False)  # what the 15 tests ran under: matmul_config's
    check(linalg.matmul(da, db), a, b, "f16")  # tiles, the cp.async kernel
    assert hopper_launches == []
    monkeypatch.setattr(linalg, "HOPPER", False)
    check(linalg.matmul(da, db), a, b, "f16")
    assert hopper_launches == []
    monkeypatch.setattr(linalg, "HOPPER", True)
    monkeypatch.setattr(linalg, "TUNE", True)
    check(linalg.matmul(da, db), a, b, "f16")
    assert len(hopper_launches) == 1


@pytest.mark.parametrize("activation", ["gelu", "gelu_tanh", "relu", "silu"])
@pytest.mark.parametrize("out_dtype", ["f16", "f32"])
def test_hopper_path_epilogues(hopper_launches, activation, out_dtype):
    (a, da), (b, db) = _pair((1024, 512), "f16", 7, scale=0.25), _pair((512, 768), "f16", 8)
    bias, bias_d = _pair((1, 768), "f16", 9)
    bias, bias_d = bias[0], bias_d[0]
    got = linalg.matmul(da, db, bias=bias_d, activation=activation, alpha=0.5, out_dtype=out_dtype)
    check(got, a, b, out_dtype, bias=bias, activation=activation, alpha=0.5)
    assert len(hopper_launches) == 1, f"not the Hopper path: {linalg.hopper_report()}"


@pytest.mark.parametrize(
    "mnk,dtype,layout_b",
    [((512, 512, 16384), "f16", "row"), ((512, 520, 16384), "bf16", "col"), ((64, 4096, 8192),
     "f16", "row"), ((300, 1001, 4096), "bf16", "row"), ((33, 250, 3000), "f16", "col")],
)  # fmt: skip
def test_hopper_split_k_products(hopper_launches, mnk, dtype, layout_b):
    """Products of few tiles and long K take split-K from the table (units per tile whose f32
    partials the tile's last unit adds in a fixed order): right against float64, and the same
    bits on a second call (the replayed plan, reusing the workspace and counters)."""
    m, n, k = mnk
    a, da = _padded((m, k), dtype, m, "row")
    b, db = _padded((k, n), dtype, n, layout_b)
    first = linalg.matmul(da, db)
    check(first, a, b, dtype)
    assert len(hopper_launches) == 1 and " split" in linalg.hopper_report(), linalg.hopper_report()
    again = linalg.matmul(da, db)
    assert len(hopper_launches) == 2
    assert bool((cp.asnumpy(first.view(cp.uint16) if first.dtype.itemsize == 2 else first)
                 == cp.asnumpy(again.view(cp.uint16) if again.dtype.itemsize == 2 else again)
                 ).all())  # fmt: skip


@pytest.mark.parametrize(
    "mnk,layout_b,bias",
    [((1024, 1024, 1024), "col", False), ((1001, 520, 999), "col", True),
     ((2048, 2048, 512), "row", False), ((4096, 4096, 4096), "col", False)],
)  # fmt: skip
def test_hopper_path_tf32(hopper_launches, mnk, layout_b, bias):
    """f32 with precision='tf32' on the Hopper kernel (wgmma tf32, f32 tiles by TMA): B
    K-major as a linear layer's weight is read in place; a row-major B is made K-contiguous
    first (TF32 wgmma reads K-major only). TF32 by truncation: within 2^-9 of each product."""
    m, n, k = mnk
    a, da = _padded((m, k), "f32", m, "row")
    b, db = _padded((k, n), "f32", n, layout_b)
    bias_h = bias_d = None
    if bias:
        bias_h, bias_d = _pair((1, n), "f32", 11)
        bias_h, bias_d = bias_h[0], bias_d[0]
    act = "gelu" if bias else None
    for calls in (1, 2):  # the second replays the plan (with B's copy where it was copied)
        got = linalg.matmul(da, db, bias=bias_d, activation=act, precision="tf32")
        err = check(got, a, b, "f32", bias=bias_h, activation=act, acc_rtol=2.0**-9, rel_tol=2e-3)
        assert len(hopper_launches) == calls, f"not the Hopper path: {linalg.hopper_report()}"
        assert 1e-5 < err < 2e-3  # TF32's error, not IEEE f32's
    assert "x32 s" in linalg.hopper_report()  # a TF32 tile (BK = 32 f32)


# ---------------------------------------------------------------- pointer-advance loops


@pytest.mark.parametrize("name", ["mm_advance", "mm_trans_ptr"])
@pytest.mark.parametrize("stages", [1, 3])
def test_pointer_tile_loops_on_the_gpu(name, stages):
    """The tutorial's loop (pointer tiles advanced in the loop) and a pointer tile through
    trans() build and run, against float64 and the interpreter."""
    import teeny_tx as tx

    mod = tx.compile("tests/kernels/pointer_loops.c", name="tests/kernels/pointer_loops.c")
    m, n, k = 300, 200, 333
    (a, da), (b, db) = _pair((m, k), "f16", 11), _pair((k, n), "f16", 12)
    c = cp.zeros((m, n), np.float32)
    args = (m, n, k, k, 1, n, 1, n, 1)
    getattr(mod, name)[(tx.cdiv(m, 64), tx.cdiv(n, 64))](
        c, da, db, *args, BM=64, BN=64, BK=32, num_warps=4, num_stages=stages
    )
    check(c, a, b, "f32", rel_tol=2e-6)
    host = np.zeros((m, n), np.float32)
    getattr(mod, name).interpret[(tx.cdiv(m, 64), tx.cdiv(n, 64))](
        host, a, b, *args, BM=64, BN=64, BK=32
    )
    np.testing.assert_allclose(cp.asnumpy(c), host, rtol=1e-5, atol=1e-4)
