"""Launches on the device: the generated launcher's values, the current stream of the
arguments' framework, CUDA-graph capture (torch and CuPy) of raw launches and of the nn
wrappers replayed on new data, and the bad-launch checks that need real device arrays."""

from __future__ import annotations

import cupy
import numpy as np
import pytest

import teeny_tx
from teeny_tx import nn

N = 1001
BLOCK = 256


@pytest.fixture(scope="module")
def add():
    return teeny_tx.compile("kernels/vector_add.c").vector_add


@pytest.fixture(scope="module")
def torch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch without CUDA")
    return torch


def _grid(n: int) -> tuple[int]:
    return (teeny_tx.cdiv(n, BLOCK),)


# ---------------------------------------------------------------- values and signatures


@pytest.mark.parametrize("n", [1, N, 2**20 + 3])
def test_repeated_launches_take_new_values_each_time(add, n):
    rng = np.random.default_rng(n)
    a, b = (cupy.asarray(rng.standard_normal(n).astype(np.float32)) for _ in range(2))
    for _ in range(3):  # the same signature: the hot path each time after the first
        out = cupy.full(n, np.nan, np.float32)
        b *= 2
        add[_grid(n)](a, b, out, n, BLOCK=BLOCK)
        np.testing.assert_array_equal(out.get(), (a + b).get())
    out = cupy.full(n, np.nan, np.float32)
    add[_grid(n)](a, b, out, n - 1 if n > 1 else n, BLOCK=BLOCK)  # another length, same key
    expect = (a + b).get()
    if n > 1:
        expect[-1] = np.nan
    np.testing.assert_array_equal(out.get(), expect)


def test_dtypes_and_offsets_switch_specialisations(add):
    rng = np.random.default_rng(0)
    for dtype in (np.float32, np.float16, np.int32, np.float64):
        base = cupy.asarray((rng.standard_normal(N + 8) * 8).astype(dtype))
        for offset in (0, 1, 3):  # alignment 16 and 4/2 bytes: different keys
            a = base[offset : offset + N]
            out = cupy.zeros(N, dtype)
            add[_grid(N)](a, a, out, N, BLOCK=BLOCK)
            np.testing.assert_array_equal(out.get(), (a + a).get())


def test_torch_tensors_and_cupy_arrays_through_one_launcher(add, torch):
    x = torch.randn(N, device="cuda")
    out = torch.empty_like(x)
    add[_grid(N)](x, x, out, N, BLOCK=BLOCK)
    torch.testing.assert_close(out, 2 * x, rtol=0, atol=0)
    c = cupy.asarray(x.cpu().numpy())
    cout = cupy.empty_like(c)
    add[_grid(N)](c, c, cout, N, BLOCK=BLOCK)
    np.testing.assert_array_equal(cout.get(), 2 * x.cpu().numpy())


def test_views_are_refused_then_honoured_with_strided(torch):
    rows = teeny_tx.compile(
        "kernel k(f32 *out, const f32 *a, i32 n, i32 stride, i32 step, const i32 BLOCK)\n"
        "{\n"
        "    i32 row = program_id(0);\n"
        "    tile cols = arange(0, BLOCK);\n"
        "    tile mask = cols < n;\n"
        "    tile x = load(a + row * stride + cols * step, mask, 0.0f);\n"
        "    store(out + row * n + cols, x, mask);\n"
        "}\n",
        name="kernels/t.c",
    ).k
    base = torch.randn(33, 90, device="cuda")
    for view in (base[:, ::3], base.t()[:40], base[:, 5:50]):
        out = torch.empty(view.shape, device="cuda")
        rows_n, cols = view.shape
        args = (out, view, cols, view.stride(0), view.stride(1))
        with pytest.raises(teeny_tx.LaunchError, match="argument 'a' is a non-contiguous view"):
            rows[(rows_n,)](*args, BLOCK=128)
        rows[(rows_n,)](*args, BLOCK=128, strided=True)
        torch.testing.assert_close(out, view, rtol=0, atol=0)


def test_misaligned_device_pointers_never_reach_the_driver(add):
    raw = cupy.zeros(4 * N + 2, np.uint8)
    memory = cupy.ndarray((N,), np.float32, memptr=raw.data + 2)  # 2 bytes past alignment
    out = cupy.zeros(N, np.float32)
    with pytest.raises(teeny_tx.LaunchError, match="is not a multiple of the f32 element size"):
        add[_grid(N)](memory, memory, out, N, BLOCK=BLOCK)
    cupy.cuda.runtime.deviceSynchronize()  # the context is still healthy
    add[_grid(N)](out, out, out, N, BLOCK=BLOCK)
    cupy.cuda.runtime.deviceSynchronize()


def test_host_arrays_are_refused(add, torch):
    host = torch.randn(N)
    out = torch.empty(N, device="cuda")
    with pytest.raises(teeny_tx.LaunchError, match="argument 'a': host memory"):
        add[_grid(N)](host, out, out, N, BLOCK=BLOCK)
    with pytest.raises(teeny_tx.LaunchError, match="argument 'a': host memory"):
        add[_grid(N)](np.zeros(N, np.float32), out, out, N, BLOCK=BLOCK)


# ---------------------------------------------------------------- streams


def test_torch_launches_run_on_torchs_current_stream(add, torch):
    side = torch.cuda.Stream()
    x = torch.zeros(N, device="cuda")
    out = torch.full((N,), -1.0, device="cuda")
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        torch.cuda._sleep(100_000_000)  # the side stream is busy for tens of milliseconds
        x.fill_(3.0)
        add[_grid(N)](x, x, out, N, BLOCK=BLOCK)  # ordered after the fill only on `side`
    side.synchronize()
    torch.testing.assert_close(out, torch.full_like(out, 6.0), rtol=0, atol=0)


def test_cupy_launches_run_on_cupys_current_stream(add):
    a = cupy.arange(N, dtype=np.float32)
    out = cupy.zeros(N, np.float32)
    side = cupy.cuda.Stream(non_blocking=True)
    with side:
        a2 = a * 2  # on `side`
        add[_grid(N)](a2, a2, out, N, BLOCK=BLOCK)
    side.synchronize()
    np.testing.assert_array_equal(out.get(), 4 * np.arange(N, dtype=np.float32))


@pytest.mark.parametrize("kind", ["cupy", "torch", "int"])
def test_an_explicit_stream_wins(add, torch, kind):
    x = torch.arange(N, dtype=torch.float32, device="cuda")
    out = torch.zeros(N, device="cuda")
    torch_side = torch.cuda.Stream()
    cupy_side = cupy.cuda.Stream(non_blocking=True)
    stream = {"cupy": cupy_side, "torch": torch_side, "int": torch_side.cuda_stream}[kind]
    torch.cuda.synchronize()
    add[_grid(N)](x, x, out, N, BLOCK=BLOCK, stream=stream)
    (cupy_side if kind == "cupy" else torch_side).synchronize()
    torch.testing.assert_close(out, 2 * x, rtol=0, atol=0)


# ---------------------------------------------------------------- CUDA graphs


def test_raw_launch_captured_in_a_torch_graph_replays_on_new_data(add, torch):
    x = torch.randn(N, device="cuda")
    out = torch.empty_like(x)
    add[_grid(N)](x, x, out, N, BLOCK=BLOCK)  # compile and load before capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        add[_grid(N)](x, x, out, N, BLOCK=BLOCK)
    for _ in range(3):
        x.copy_(torch.randn(N, device="cuda"))
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(out, 2 * x, rtol=0, atol=0)


def test_raw_launch_captured_in_a_cupy_graph_replays_on_new_data(add):
    a = cupy.asarray(np.random.default_rng(3).standard_normal(N).astype(np.float32))
    out = cupy.empty_like(a)
    add[_grid(N)](a, a, out, N, BLOCK=BLOCK)
    cupy.cuda.runtime.deviceSynchronize()
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        stream.begin_capture()
        add[_grid(N)](a, a, out, N, BLOCK=BLOCK)
        graph = stream.end_capture()
    for seed in range(3):
        a[...] = cupy.asarray(np.random.default_rng(seed).standard_normal(N).astype(np.float32))
        out.fill(np.nan)
        cupy.cuda.runtime.deviceSynchronize()
        graph.launch(stream)
        stream.synchronize()
        np.testing.assert_array_equal(out.get(), (2 * a).get())


def _wrapper_calls(torch):
    rows, cols = 67, 1001
    x = torch.randn(rows, cols, device="cuda", dtype=torch.float16)
    w = torch.randn(cols, device="cuda", dtype=torch.float16)
    b = torch.randn(cols, device="cuda", dtype=torch.float16)
    targets = torch.randint(0, cols, (rows,), device="cuda")
    calls = {
        "softmax": (lambda: nn.softmax(x), lambda: torch.softmax(x.float(), -1)),
        "layer_norm": (
            lambda: nn.layer_norm(x, w, b)[0],
            lambda: torch.nn.functional.layer_norm(x.float(), (cols,), w.float(), b.float()),
        ),
        "rms_norm": (
            lambda: nn.rms_norm(x, w)[0],
            lambda: (
                x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()
            ),
        ),
        "cross_entropy": (
            lambda: nn.cross_entropy(x, targets)[0],
            lambda: torch.nn.functional.cross_entropy(x.float(), targets),
        ),
    }
    return x, calls


@pytest.mark.parametrize("op", ["softmax", "layer_norm", "rms_norm", "cross_entropy"])
def test_nn_wrappers_captured_in_a_torch_graph_replay_on_new_data(torch, op):
    x, calls = _wrapper_calls(torch)
    ours, reference = calls[op]
    ours()  # compile, load and choose configs before capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = ours()
    for seed in range(2):
        torch.manual_seed(seed)
        x.copy_(torch.randn_like(x))
        graph.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(y.float(), reference(), rtol=2e-2, atol=2e-2)


def test_nn_softmax_captured_in_a_cupy_graph_replays_on_new_data():
    rng = np.random.default_rng(5)
    x = cupy.asarray(rng.standard_normal((67, 1001)).astype(np.float32))
    nn.softmax(x)  # compile and load; the pool then holds a block of the output's size
    cupy.cuda.runtime.deviceSynchronize()
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        stream.begin_capture()
        y = nn.softmax(x)
        graph = stream.end_capture()
    x[...] = cupy.asarray(rng.standard_normal((67, 1001)).astype(np.float32))
    # the copy ran on the default stream, which a non-blocking stream does not wait for
    cupy.cuda.runtime.deviceSynchronize()
    graph.launch(stream)
    stream.synchronize()
    host = x.get().astype(np.float64)
    expect = np.exp(host - host.max(1, keepdims=True))
    np.testing.assert_allclose(y.get(), expect / expect.sum(1, keepdims=True), rtol=1e-5)


# ---------------------------------------------------------------- the driver's launch


@pytest.mark.parametrize("n", [1, N, 2**20 + 3])
def test_driver_launches_compute_on_cupy_and_torch(torch, n):
    """The first launch of a signature (plan.launch_prepared) and the hot path's after it
    both go through cuLaunchKernel, on CuPy arrays and torch tensors."""
    add = teeny_tx.compile("kernels/vector_add.c").vector_add
    rng = np.random.default_rng(n)
    a, b = (cupy.asarray(rng.standard_normal(n).astype(np.float32)) for _ in range(2))
    ta, tb = torch.as_tensor(a, device="cuda"), torch.as_tensor(b, device="cuda")
    for _ in range(3):  # the first launch of a signature, then the launcher's hot path
        out = cupy.full(n, np.nan, np.float32)
        tout = torch.full((n,), float("nan"), device="cuda")
        a += 1
        ta += 1
        add[_grid(n)](a, b, out, n, BLOCK=BLOCK)
        add[_grid(n)](ta, tb, tout, n, BLOCK=BLOCK)
        np.testing.assert_array_equal(out.get(), (a + b).get())
        np.testing.assert_array_equal(tout.cpu().numpy(), (ta + tb).cpu().numpy())
    (entry,) = {id(e): e for e in add._entries.values()}.values()
    assert entry.handles[0] == entry.functions[0].ptr  # the driver's handle


def test_launches_from_new_threads_get_their_own_buffers_and_context(add):
    import threading

    n = 4096
    inputs = [cupy.full(n, float(i), np.float32) for i in range(6)]
    outs = [cupy.full(n, np.nan, np.float32) for _ in inputs]
    add[_grid(n)](inputs[0], inputs[0], outs[0], n, BLOCK=BLOCK)  # known on this thread
    errors = []

    def work(i):
        try:  # a new thread: no context current until the first launch makes it so
            for _ in range(50):
                add[_grid(n)](inputs[i], inputs[i], outs[i], n, BLOCK=BLOCK)
            cupy.cuda.get_current_stream().synchronize()
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(1, len(inputs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    cupy.cuda.runtime.deviceSynchronize()
    for i, out in enumerate(outs[1:], start=1):
        np.testing.assert_array_equal(out.get(), np.full(n, 2.0 * i, np.float32))


@pytest.mark.parametrize("shape", [(1, 1, 1), (3, 65, 33), (4, 128, 64)])
def test_a_replayed_bmm_computes_each_new_product(shape):
    from teeny_tx import linalg

    batch, m, k = shape
    rng = np.random.default_rng(m)
    for _ in range(3):  # the first call plans, the next replay it
        a = cupy.asarray(rng.standard_normal((batch, m, k)).astype(np.float16))
        b = cupy.asarray(rng.standard_normal((batch, k, 48)).astype(np.float16))
        c = linalg.bmm(a, b, alpha=0.5)
        ref = 0.5 * np.matmul(a.get().astype(np.float32), b.get().astype(np.float32))
        np.testing.assert_allclose(c.get().astype(np.float32), ref, rtol=2e-2, atol=2e-2)
