"""Runtime primitives without a GPU: NVRTC to cubin, the cubin cache, array conversion."""

from __future__ import annotations

import hashlib
import multiprocessing
import types

import cupy
import ml_dtypes
import numpy
import pytest

from teeny_tx.errors import LaunchError, NvrtcError
from teeny_tx.runtime import cache, elf, launch, memory, nvrtc

ELF_MAGIC = b"\x7fELF"

HALF_KERNEL = r"""
#include <cuda_fp16.h>
#include <cuda_bf16.h>
extern "C" __global__ void halves(__half *out, const __nv_bfloat16 *in, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = __float2half(__bfloat162float(in[i]) * 2.0f);
}
"""

BROKEN_KERNEL = """\
extern "C" __global__ void broken(float *out)
{
#line 7 "kernels/foo.c"
    out[0] = undefined_name;
}
"""


# --- nvrtc -----------------------------------------------------------------------------------


@pytest.mark.parametrize("arch", ["sm_90", "sm_90a"])
def test_compiles_fp16_bf16_kernel_to_cubin(arch):
    cubin = nvrtc.compile_to_cubin(HALF_KERNEL, name="halves", arch=arch)
    assert cubin.startswith(ELF_MAGIC)
    assert elf.elf_extent(cubin) == len(cubin)


def test_nvrtc_error_points_at_kernel_line():
    with pytest.raises(NvrtcError) as caught:
        nvrtc.compile_to_cubin(BROKEN_KERNEL, name="broken", arch="sm_90")
    message = str(caught.value)
    assert "kernels/foo.c(7)" in message
    assert 'identifier "undefined_name" is undefined' in message
    assert "kernel 'broken'" in message and "sm_90" in message
    assert "kernels/foo.c(7)" in caught.value.log


def test_in_memory_headers_are_included():
    source = '#include "scale.h"\nextern "C" __global__ void k(float *a) { a[0] = SCALE; }\n'
    cubin = nvrtc.compile_to_cubin(
        source, name="k", arch="sm_90", headers={"scale.h": "#define SCALE 3.0f\n"}
    )
    assert cubin.startswith(ELF_MAGIC)


def test_warnings_are_kept_in_the_log():
    source = 'extern "C" __global__ void k(float *a) { int unused; a[0] = 1.0f; }\n'
    result = nvrtc.compile_with_log(source, name="k", arch="sm_90")
    assert result.cubin.startswith(ELF_MAGIC)
    assert "unused" in result.log


def test_rejects_a_target_that_is_not_sm():
    with pytest.raises(NvrtcError, match="unsupported target 'compute_90'"):
        nvrtc.compile_to_cubin(HALF_KERNEL, name="halves", arch="compute_90")


def test_cupy_stripped_byte_is_restored():
    cubin = nvrtc.compile_to_cubin(HALF_KERNEL, name="halves", arch="sm_90")
    assert nvrtc.repair_cubin(cubin[:-1]) == cubin
    assert nvrtc.repair_cubin(cubin) == cubin
    assert nvrtc.repair_cubin(b"not an elf") == b"not an elf"


def test_nvrtc_version_is_a_pair():
    major, minor = nvrtc.nvrtc_version()
    assert major >= 12 and minor >= 0


# --- cache -----------------------------------------------------------------------------------


@pytest.fixture
def cache_env(tmp_path, monkeypatch):
    """A fresh cache directory and memo, and a count of NVRTC compilations."""
    monkeypatch.setenv("TEENY_TX_CACHE_DIR", str(tmp_path / "cache"))
    cache.clear_memo()
    calls = []
    real = nvrtc.compile_with_log

    def counting(*args, **kwargs):
        calls.append(kwargs["name"])
        return real(*args, **kwargs)

    monkeypatch.setattr(nvrtc, "compile_with_log", counting)
    yield types.SimpleNamespace(dir=tmp_path / "cache", calls=calls)
    cache.clear_memo()


def _cached_file(directory, source, name="halves", arch="sm_90"):
    key = cache.cache_key(source, name, arch, nvrtc.DEFAULT_OPTIONS, {})
    path = cache.entry_path(key)
    assert path is not None and path.parent.parent == directory
    return path


def _cubin_of(path):
    """The cubin inside a cache entry (after the magic line and the digest)."""
    return path.read_bytes()[len(cache.ENTRY_MAGIC) + 32 :]


def test_cache_second_call_skips_nvrtc(cache_env):
    first = cache.load_or_compile(HALF_KERNEL, name="halves", arch="sm_90")
    second = cache.load_or_compile(HALF_KERNEL, name="halves", arch="sm_90")
    assert first == second and cache_env.calls == ["halves"]
    assert _cubin_of(_cached_file(cache_env.dir, HALF_KERNEL)) == first
    cache.clear_memo()
    assert cache.load_or_compile(HALF_KERNEL, name="halves", arch="sm_90") == first
    assert cache_env.calls == ["halves"]  # read back from disk


def test_cache_key_covers_every_input():
    base = ("src", "k", "sm_90", nvrtc.DEFAULT_OPTIONS, {})
    variants = [
        ("src2", "k", "sm_90", nvrtc.DEFAULT_OPTIONS, {}),
        ("src", "k2", "sm_90", nvrtc.DEFAULT_OPTIONS, {}),
        ("src", "k", "sm_90a", nvrtc.DEFAULT_OPTIONS, {}),
        ("src", "k", "sm_90", (*nvrtc.DEFAULT_OPTIONS, "-lineinfo"), {}),
        ("src", "k", "sm_90", nvrtc.DEFAULT_OPTIONS, {"h.h": "x"}),
    ]
    keys = {cache.cache_key(*base)} | {cache.cache_key(*variant) for variant in variants}
    assert len(keys) == 1 + len(variants)
    assert cache.cache_key(*base) == cache.cache_key(*base)
    assert len(cache.cache_key(*base)) == 64


@pytest.mark.parametrize("damage", ["truncate", "garbage", "empty"])
def test_cache_damaged_file_is_recompiled(cache_env, damage):
    good = cache.load_or_compile(HALF_KERNEL, name="halves", arch="sm_90")
    path = _cached_file(cache_env.dir, HALF_KERNEL)
    damaged = {"truncate": good[: len(good) // 2], "garbage": b"garbage" * 50, "empty": b""}
    path.write_bytes(damaged[damage])
    cache.clear_memo()
    with pytest.warns(RuntimeWarning, match="failed verification"):
        assert cache.load_or_compile(HALF_KERNEL, name="halves", arch="sm_90") == good
    assert cache_env.calls == ["halves", "halves"]
    assert _cubin_of(path) == good


def test_cache_dir_follows_env_without_restart(cache_env, tmp_path, monkeypatch):
    cache.load_or_compile(HALF_KERNEL, name="halves", arch="sm_90")
    assert _cached_file(cache_env.dir, HALF_KERNEL).exists()
    other = tmp_path / "other"
    monkeypatch.setenv("TEENY_TX_CACHE_DIR", str(other))
    assert cache.cache_dir() == other and other.is_dir()
    cache.clear_memo()
    cache.load_or_compile(HALF_KERNEL, name="halves", arch="sm_90")
    assert _cached_file(other, HALF_KERNEL).exists()


def test_cache_dir_defaults_to_xdg(monkeypatch, tmp_path):
    monkeypatch.delenv("TEENY_TX_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.cache_dir() == tmp_path / "xdg" / "teeny_tx"


def test_unwritable_cache_still_compiles(cache_env, tmp_path, monkeypatch):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("TEENY_TX_CACHE_DIR", str(blocker / "cache"))
    with pytest.warns(RuntimeWarning, match="cannot write its kernel cache"):
        cubin = cache.load_or_compile(HALF_KERNEL, name="halves", arch="sm_90")
    assert cubin.startswith(ELF_MAGIC)


def _compile_in_child(cache_dir, barrier, results):
    import os

    os.environ["TEENY_TX_CACHE_DIR"] = cache_dir
    from teeny_tx.runtime import cache as child_cache

    barrier.wait()
    cubin = child_cache.load_or_compile(HALF_KERNEL, name="halves", arch="sm_90")
    results.put(cubin)


def test_cache_concurrent_processes_agree(tmp_path):
    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(4), context.Queue()
    workers = [
        context.Process(target=_compile_in_child, args=(str(tmp_path), barrier, results))
        for _ in range(4)
    ]
    for worker in workers:
        worker.start()
    cubins = [results.get(timeout=120) for _ in workers]
    for worker in workers:
        worker.join(timeout=60)
        assert worker.exitcode == 0
    assert len({hashlib.sha256(cubin).hexdigest() for cubin in cubins}) == 1
    assert cubins[0].startswith(ELF_MAGIC)
    files = [path for path in tmp_path.rglob("*") if path.is_file() and path.name != "secret"]
    assert [path.suffix for path in files] == [".cubin"]  # one entry, no temporaries left
    assert _cubin_of(files[0]) == cubins[0]


# --- memory ----------------------------------------------------------------------------------


def _fake_cupy(shape, dtype, address=0x7F00_0000_1000, view=slice(None)):
    """A cupy.ndarray over memory that is never touched: CuPy builds it without a GPU."""
    memory_ = cupy.cuda.UnownedMemory(address, 1 << 20, None, device_id=0)
    array = cupy.ndarray(shape, dtype, memptr=cupy.cuda.MemoryPointer(memory_, 0))
    return array[view]


class _Interface:
    def __init__(self, **interface):
        self.__cuda_array_interface__ = {"version": 3, "strides": None, **interface}


class _HostArray:
    __array_interface__ = {"shape": (2,), "typestr": "<f4", "data": (0, False), "version": 3}


class _HostDLPack:
    def __dlpack__(self, stream=None):
        raise AssertionError("must not be exported")

    def __dlpack_device__(self):
        return (1, 0)


@pytest.mark.parametrize(
    "dtype, name",
    [
        (numpy.float32, "f32"),
        (numpy.int64, "i64"),
        (numpy.bool_, "bool"),
        (numpy.uint8, "u8"),
        (numpy.float16, "f16"),
        (ml_dtypes.bfloat16, "bf16"),
    ],
)
def test_device_pointer_of_cupy_array(dtype, name):
    array = _fake_cupy((10, 4), dtype)
    assert memory.device_pointer(array) == (0x7F00_0000_1000, name)


def test_device_pointer_of_cupy_view_and_extent():
    array = _fake_cupy((10, 4), numpy.float32, view=(slice(None, None, 2), slice(1, None)))
    assert memory.device_pointer(array) == (0x7F00_0000_1004, "f32")
    assert memory.extent_bytes(array) == 4 * 32 + 2 * 4 + 4
    assert memory.extent_bytes(_fake_cupy((10, 4), numpy.float64)) == 320
    assert memory.extent_bytes(_fake_cupy((0, 4), numpy.float64)) == 0


def test_device_pointer_of_cuda_array_interface():
    obj = _Interface(data=(0x1230, False), typestr="<f2", shape=(3, 5))
    assert memory.device_pointer(obj) == (0x1230, "f16")
    assert memory.extent_bytes(obj) == 30
    strided = _Interface(data=(0x1230, False), typestr="<i4", shape=(3, 5), strides=(80, 8))
    assert memory.extent_bytes(strided) == 2 * 80 + 4 * 8 + 4


def test_numpy_array_is_host_memory():
    with pytest.raises(LaunchError) as caught:
        memory.device_pointer(numpy.zeros(7, numpy.float32))
    assert str(caught.value) == (
        "host memory: got numpy.ndarray (dtype float32, shape (7,)); move it to the GPU with "
        "cupy.asarray(x) (or x.cuda() for a torch tensor)"
    )


def test_parameter_name_prefixes_the_message():
    with pytest.raises(LaunchError, match=r"^argument 'x_ptr': host memory: got numpy.ndarray"):
        memory.device_pointer(numpy.zeros(3), "x_ptr")


def test_unrelated_object_is_named():
    with pytest.raises(LaunchError) as caught:
        memory.device_pointer(object())
    assert str(caught.value) == (
        "expected a GPU array (cupy.ndarray, torch CUDA tensor, __cuda_array_interface__ or "
        "DLPack), got object"
    )
    with pytest.raises(LaunchError, match=r"got int$"):
        memory.device_pointer(3)


def test_host_dlpack_and_array_interface_are_host_memory():
    with pytest.raises(LaunchError, match=r"^CPU memory: got .*_HostDLPack via DLPack; move it"):
        memory.device_pointer(_HostDLPack())
    with pytest.raises(LaunchError, match=r"^host memory: got .*_HostArray; move it"):
        memory.device_pointer(_HostArray())


def test_cpu_torch_like_tensor_is_host_memory():
    tensor = types.SimpleNamespace(is_cuda=False, dtype="torch.float32", shape=(3,))
    with pytest.raises(LaunchError, match=r"^host memory: got a CPU torch tensor"):
        memory._torch_pointer(tensor)


def test_unsupported_dtype_is_named():
    with pytest.raises(LaunchError, match=r"^unsupported dtype complex64 in cupy.ndarray"):
        memory.device_pointer(_fake_cupy((4,), numpy.complex64))
    with pytest.raises(LaunchError, match=r"^unsupported dtype >f4"):
        memory.device_pointer(_Interface(data=(16, False), typestr=">f4", shape=(2,)))


@pytest.mark.parametrize(
    "ptr, alignment",
    [
        (0x1000, 16),
        (0x1008, 8),
        (0x1004, 4),
        (0x1002, 2),
        (0x1001, 1),
        (0x7F00_0000_0030, 16),
        (0x7F00_0000_0028, 8),
        (0, 16),
    ],
)
def test_alignment_of(ptr, alignment):
    assert memory.alignment_of(ptr) == alignment


# --- launch, without a device ----------------------------------------------------------------


@pytest.mark.skipif(launch.has_gpu(), reason="checks the no-device behaviour")
def test_no_device_is_reported():
    assert launch.has_gpu() is False
    with pytest.raises(LaunchError, match="no CUDA device is visible"):
        launch.device_limits()


def test_pointer_arg_is_a_cupy_pointer():
    assert isinstance(launch.pointer_arg(0x7F00_0000_1000), cupy.cuda.function.CPointer)


class _TorchLikeStream:
    cuda_stream = 77


def test_stream_kinds():
    assert launch._stream_kind(5)(5).ptr == 5
    torch_like = _TorchLikeStream()
    assert launch._stream_kind(torch_like)(torch_like).ptr == 77
    with pytest.raises(LaunchError, match="stream must be None"):
        launch._stream_kind("default")


def test_tiles_that_outgrow_the_registers_are_reported(tmp_path, monkeypatch):
    """ptxas's spill report becomes a RegisterSpillWarning naming the kernel and the fix."""
    import warnings

    import teeny_tx
    from teeny_tx.errors import RegisterSpillWarning

    monkeypatch.setenv("TEENY_TX_CACHE_DIR", str(tmp_path))
    cache.clear_memo()
    kernel = teeny_tx.compile("kernels/vector_add.c", name="kernels/vector_add.c").vector_add
    with warnings.catch_warnings():
        warnings.simplefilter("error", RegisterSpillWarning)
        assert kernel.specialize("f32", "f32", "f32", 1000, BLOCK=1024, num_warps=4).cubin
    with pytest.warns(RegisterSpillWarning, match="kernel 'vector_add' spills .* raise num_warps"):
        assert kernel.specialize("f32", "f32", "f32", 1000, BLOCK=4096, num_warps=1).cubin
