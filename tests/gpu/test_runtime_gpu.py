"""Runtime primitives on a CUDA device: load a cubin, convert arrays, launch, check with NumPy."""

from __future__ import annotations

import cupy
import ml_dtypes
import numpy
import pytest

from teeny_tx.errors import LaunchError, ResourceError
from teeny_tx.runtime import cache, launch, memory

pytestmark = pytest.mark.gpu

AXPI = r"""
extern "C" __global__ void axpi(float *a, const float *b, float s, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) a[i] = b[i] * s + i;
}
"""

SHARED = r"""
extern "C" __global__ void reverse_block(float *a, int n)
{
    extern __shared__ float buffer[];
    int i = threadIdx.x;
    buffer[i] = a[i];
    __syncthreads();
    a[i] = buffer[n - 1 - i];
}
"""

N = 1001
BLOCK = (128, 1, 1)
GRID = ((N + 127) // 128, 1, 1)


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TEENY_TX_CACHE_DIR", str(tmp_path / "cache"))
    cache.clear_memo()


def _kernel(source: str, symbol: str, arch: str | None = None) -> launch.LoadedKernel:
    arch = arch or launch.device_target().arch
    return launch.LoadedKernel(cache.load_or_compile(source, name=symbol, arch=arch), symbol)


def _inputs():
    rng = numpy.random.default_rng(0)
    b = rng.standard_normal(N).astype(numpy.float32)
    return b, numpy.float32(1.75)


def _expected(b, s):
    return b * s + numpy.arange(N, dtype=numpy.float32)


def _pointer_args(a, b, wrap):
    return tuple(wrap(memory.device_pointer(x)[0]) for x in (a, b))


@pytest.mark.parametrize("wrap", [launch.pointer_arg, numpy.uint64], ids=["CIntptr", "uint64"])
def test_launch_on_cupy_arrays(wrap):
    b_host, s = _inputs()
    a, b = cupy.zeros(N, cupy.float32), cupy.asarray(b_host)
    kernel = _kernel(AXPI, "axpi")
    kernel.launch(GRID, BLOCK, (*_pointer_args(a, b, wrap), s, numpy.int32(N)))
    numpy.testing.assert_allclose(a.get(), _expected(b_host, s), rtol=1e-6, atol=1e-6)


def test_launch_for_sm_90a_when_hopper(monkeypatch):
    monkeypatch.delenv("TEENY_TX_ARCH", raising=False)
    if launch.device_limits().capability != (9, 0):
        pytest.skip("sm_90a needs a compute-capability-9.0 device")
    assert launch.device_target(hopper_features=True).arch == "sm_90a"
    b_host, s = _inputs()
    a, b = cupy.zeros(N, cupy.float32), cupy.asarray(b_host)
    kernel = _kernel(AXPI, "axpi", arch="sm_90a")
    kernel.launch(GRID, BLOCK, (*_pointer_args(a, b, launch.pointer_arg), s, numpy.int32(N)))
    numpy.testing.assert_allclose(a.get(), _expected(b_host, s), rtol=1e-6, atol=1e-6)


def test_launch_on_torch_tensors():
    torch = pytest.importorskip("torch")
    b_host, s = _inputs()
    a = torch.zeros(N, dtype=torch.float32, device="cuda")
    b = torch.from_numpy(b_host).cuda()
    assert memory.device_pointer(a) == (a.data_ptr(), "f32")
    assert memory.device_pointer(torch.zeros(2, dtype=torch.bfloat16, device="cuda"))[1] == "bf16"
    kernel = _kernel(AXPI, "axpi")
    stream = torch.cuda.current_stream()
    args = (*_pointer_args(a, b, launch.pointer_arg), s, numpy.int32(N))
    kernel.launch(GRID, BLOCK, args, stream=stream)
    stream.synchronize()
    numpy.testing.assert_allclose(a.cpu().numpy(), _expected(b_host, s), rtol=1e-6, atol=1e-6)
    with pytest.raises(LaunchError, match="^host memory: got a CPU torch tensor"):
        memory.device_pointer(torch.zeros(3))


def _stream_forms():
    created = cupy.cuda.Stream(non_blocking=True)
    return {
        "none": None,
        "cupy": created,
        "external": cupy.cuda.ExternalStream(created.ptr),
        "int": created.ptr,
        "null": cupy.cuda.Stream.null,
    }


@pytest.mark.parametrize("form", ["none", "cupy", "external", "int", "null"])
def test_stream_forms(form):
    forms = _stream_forms()  # keeps the created stream alive: "external" and "int" only borrow it
    stream = forms[form]
    b_host, s = _inputs()
    a, b = cupy.zeros(N, cupy.float32), cupy.asarray(b_host)
    cupy.cuda.Device().synchronize()
    kernel = _kernel(AXPI, "axpi")
    kernel.launch(
        GRID, BLOCK, (*_pointer_args(a, b, launch.pointer_arg), s, numpy.int32(N)), 0, stream
    )
    cupy.cuda.Device().synchronize()
    numpy.testing.assert_allclose(a.get(), _expected(b_host, s), rtol=1e-6, atol=1e-6)


def test_bad_stream_is_rejected():
    a = cupy.zeros(N, cupy.float32)
    kernel = _kernel(AXPI, "axpi")
    args = (launch.pointer_arg(a.data.ptr),) * 2 + (numpy.float32(1), numpy.int32(N))
    with pytest.raises(LaunchError, match="stream must be None"):
        kernel.launch(GRID, BLOCK, args, stream="default")


def test_numpy_array_is_rejected():
    with pytest.raises(LaunchError, match="^host memory: got numpy.ndarray"):
        memory.device_pointer(numpy.zeros(N, numpy.float32))


def test_interfaces_and_views():
    a = cupy.arange(40, dtype=cupy.float32).reshape(10, 4)
    view = a[::2, 1:]
    assert memory.device_pointer(view) == (a.data.ptr + 4, "f32")
    assert memory.extent_bytes(view) == 4 * 32 + 2 * 4 + 4

    class Interface:
        __cuda_array_interface__ = a.__cuda_array_interface__

    class DLPack:
        def __dlpack__(self, stream=None, **kwargs):
            return a.__dlpack__(stream=stream, **kwargs)

        def __dlpack_device__(self):
            return a.__dlpack_device__()

    assert memory.device_pointer(Interface()) == (a.data.ptr, "f32")
    assert memory.device_pointer(DLPack()) == (a.data.ptr, "f32")
    bf16 = cupy.empty(8, dtype=ml_dtypes.bfloat16)
    assert memory.device_pointer(bf16) == (bf16.data.ptr, "bf16")


def test_device_limits(monkeypatch):
    monkeypatch.delenv("TEENY_TX_ARCH", raising=False)
    limits = launch.device_limits()
    assert launch.has_gpu()
    assert limits.max_shared_per_block_optin >= 48 * 1024
    assert limits.max_threads_per_block >= 1024 and limits.multiprocessor_count > 0
    assert launch.device_target().arch == "sm_{}{}".format(*limits.capability)


def test_large_dynamic_shared_memory_opts_in():
    limits = launch.device_limits()
    if limits.max_shared_per_block_optin <= 64 * 1024:
        pytest.skip("device has no opt-in shared memory above 64 KiB")
    host = numpy.arange(256, dtype=numpy.float32)
    a = cupy.asarray(host)
    kernel = _kernel(SHARED, "reverse_block")
    args = (launch.pointer_arg(a.data.ptr), numpy.int32(256))
    kernel.launch((1, 1, 1), (256, 1, 1), args, shared_mem=100 * 1024)
    numpy.testing.assert_array_equal(a.get(), host[::-1])
    too_much = limits.max_shared_per_block_optin + 1
    with pytest.raises(ResourceError, match=f"needs {too_much} bytes of dynamic shared memory"):
        kernel.launch((1, 1, 1), (256, 1, 1), args, shared_mem=too_much)


def test_bad_block_is_a_launch_error():
    a = cupy.zeros(N, cupy.float32)
    kernel = _kernel(AXPI, "axpi")
    args = (launch.pointer_arg(a.data.ptr),) * 2 + (numpy.float32(1), numpy.int32(N))
    with pytest.raises(LaunchError, match="launching kernel 'axpi' failed"):
        kernel.launch((1, 1, 1), (4096, 1, 1), args)


def test_cubin_for_another_arch_is_a_launch_error():
    limits = launch.device_limits()
    other = "sm_80" if limits.capability >= (9, 0) else "sm_90"
    kernel = _kernel(AXPI, "axpi", arch=other)
    a = cupy.zeros(N, cupy.float32)
    args = (launch.pointer_arg(a.data.ptr),) * 2 + (numpy.float32(1), numpy.int32(N))
    with pytest.raises(LaunchError, match="cannot load kernel 'axpi'"):
        kernel.launch(GRID, BLOCK, args)
