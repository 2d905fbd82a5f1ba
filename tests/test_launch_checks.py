"""Launch arguments and grids are checked on the host, naming the parameter, before any GPU work."""

from __future__ import annotations

import numpy as np
import pytest

import teeny_tx
from teeny_tx import kernel as kernel_module
from teeny_tx.kernel import _grid3
from teeny_tx.runtime import launch

from .conftest import KERNEL_FILE, kernel_text

TEXT = kernel_text(
    "    tile o = arange(0, BLOCK);\n    store(out + o, (i32)(load(a + o) * scale) + n + small);",
    "i32 *out, const f32 *a, i32 n, u8 small, f32 scale, const i32 BLOCK",
)
OUT = np.zeros(256, np.int32)
A = np.zeros(256, np.float32)


class FakeDeviceArray:
    """A GPU array as far as the binder can tell (``__cuda_array_interface__``), on no device."""

    def __init__(self, typestr: str = "<f4", ptr: int = 0x7F0000000000):
        self.__cuda_array_interface__ = {
            "shape": (256,),
            "typestr": typestr,
            "data": (ptr, False),
            "strides": None,
            "version": 3,
        }


class CpuDLPack:
    """An array that offers DLPack from host memory."""

    def __dlpack__(self, stream=None):  # pragma: no cover - never reached
        raise AssertionError("the binder must not export host memory")

    def __dlpack_device__(self):
        return (1, 0)


@pytest.fixture
def k(monkeypatch):
    """The kernel, with every step past the binder (specialising, loading, launching) forbidden."""

    def forbidden(*args, **kwargs):
        raise AssertionError("the launch got past the argument checks")

    monkeypatch.setattr(kernel_module, "specialise", forbidden)
    monkeypatch.setattr(launch, "LoadedKernel", forbidden)
    return teeny_tx.compile(TEXT, name=KERNEL_FILE).k


def launch_error(fn, *args, **kwargs) -> str:
    with pytest.raises(teeny_tx.LaunchError) as info:
        fn(*args, **kwargs)
    assert isinstance(info.value, teeny_tx.TeenyError)
    return str(info.value)


def test_good_arguments_get_past_the_checks(k):
    # the guard of the fixture works: well-formed arguments reach specialisation
    with pytest.raises(AssertionError, match="got past the argument checks"):
        k[(1,)](FakeDeviceArray("<i4"), FakeDeviceArray(), 1, 2, 1.0, BLOCK=16)


def test_wrong_number_of_positional_arguments_lists_the_parameters(k):
    message = (
        "k() takes 5 positional arguments (out, a, n, small, scale), got 2; "
        "constexprs (BLOCK) go by keyword"
    )
    assert launch_error(k.cuda_source, OUT, A, BLOCK=16) == message
    assert launch_error(k[(1,)], FakeDeviceArray("<i4"), FakeDeviceArray(), BLOCK=16) == message
    assert launch_error(k.interpret[(1,)], OUT, A, BLOCK=16) == message


def test_unknown_keyword(k):
    message = "k() got unknown keyword argument 'BLOK'; its constexprs are BLOCK"
    assert launch_error(k.cuda_source, OUT, A, 1, 2, 1.0, BLOK=16) == message
    assert (
        launch_error(k[(1,)], FakeDeviceArray("<i4"), FakeDeviceArray(), 1, 2, 1.0, BLOK=16)
        == message
    )


def test_missing_constexpr(k):
    message = "k() needs constexpr BLOCK by keyword, e.g. BLOCK=..."
    assert launch_error(k.cuda_source, OUT, A, 1, 2, 1.0) == message
    assert launch_error(k[(1,)], FakeDeviceArray("<i4"), FakeDeviceArray(), 1, 2, 1.0) == message


def test_constexpr_must_be_a_number(k):
    assert (
        launch_error(k.cuda_source, OUT, A, 1, 2, 1.0, BLOCK="16")
        == "constexpr 'BLOCK' must be a number, got str"
    )


def test_host_array_to_a_gpu_launch_is_refused_before_any_gpu_work(k):
    message = launch_error(k[(1,)], OUT, A, 1, 2, 1.0, BLOCK=16)
    assert message.startswith(
        "argument 'out': host memory: got numpy.ndarray (dtype int32, shape (256,))"
    )
    assert "cupy.asarray" in message
    message = launch_error(k[(1,)], FakeDeviceArray("<i4"), CpuDLPack(), 1, 2, 1.0, BLOCK=16)
    assert message.startswith("argument 'a': CPU memory: got ") and "via DLPack" in message
    message = launch_error(k[(1,)], [1, 2], A, 1, 2, 1.0, BLOCK=16)
    assert message.startswith("argument 'out': expected a GPU array")


def test_pointer_dtype_must_match_the_declaration(k):
    message = (
        "argument 'out': kernel k declares `i32 *out` but got a f32 array; "
        "pass i32 data or declare the parameter `any *`"
    )
    assert launch_error(k.cuda_source, A, A, 1, 2, 1.0, BLOCK=16) == message
    assert launch_error(k.specialize, A, A, 1, 2, 1.0, BLOCK=16) == message
    assert launch_error(k.cuda_source, "f32", "f32", 1, 2, 1.0, BLOCK=16) == message
    assert (
        launch_error(k[(1,)], FakeDeviceArray("<f4"), FakeDeviceArray(), 1, 2, 1.0, BLOCK=16)
        == message
    )


def test_dtype_names_and_array_dtypes_are_checked(k):
    assert (
        launch_error(k.cuda_source, "float32", "f32", 1, 2, 1.0, BLOCK=16)
        == "argument 'out': unknown dtype name 'float32'"
    )
    message = launch_error(k.cuda_source, np.zeros(4, np.complex64), "f32", 1, 2, 1.0, BLOCK=16)
    assert message == "argument 'out': unsupported dtype complex64"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((1.5, 2, 1.0), "argument 'n' (i32 n) must be an integer, got float"),
        ((True, 2, 1.0), "argument 'n' (i32 n) must be an integer, got bool"),
        ((np.float32(1), 2, 1.0), "argument 'n' (i32 n) must be an integer, got numpy.float32"),
        ((1, 256, 1.0), "argument 'small' = 256 does not fit u8"),
        ((1, -1, 1.0), "argument 'small' = -1 does not fit u8"),
        ((2**63, 2, 1.0), f"argument 'n' = {2**63} does not fit i32"),
        ((1, 2, "x"), "argument 'scale' (f32 scale) must be a number, got str"),
    ],
)
def test_scalar_arguments(k, args, message):
    assert launch_error(k.cuda_source, OUT, A, *args, BLOCK=16) == message
    assert (
        launch_error(k[(1,)], FakeDeviceArray("<i4"), FakeDeviceArray(), *args, BLOCK=16) == message
    )


def test_scalars_that_fit_are_accepted():
    k = teeny_tx.compile(TEXT, name=KERNEL_FILE).k
    spec = k.specialize(OUT, A, np.int64(3), np.uint8(255), np.float32(1.0), BLOCK=16)
    assert spec.kernel.index64 is False
    assert (
        k.specialize(OUT, A, 2**40, 0, 1, BLOCK=16).kernel.index64 is True
    )  # i32 n widens, never wraps


@pytest.mark.parametrize("num_warps", [3, 0, 64, 4.0, "4"])
def test_num_warps(k, num_warps):
    message = f"num_warps must be 1, 2, 4, 8, 16 or 32, got {num_warps!r}"
    assert launch_error(k.cuda_source, OUT, A, 1, 2, 1.0, BLOCK=16, num_warps=num_warps) == message
    args = (FakeDeviceArray("<i4"), FakeDeviceArray(), 1, 2, 1.0)
    assert launch_error(k[(1,)], *args, BLOCK=16, num_warps=num_warps) == message


@pytest.mark.parametrize(
    ("grid", "message"),
    [
        ((), "the grid must be a tuple of 1 to 3 positive ints (or a callable giving one), got ()"),
        (
            (1, 2, 3, 4),
            "the grid must be a tuple of 1 to 3 positive ints (or a callable giving one), "
            "got (1, 2, 3, 4)",
        ),
        (
            "x",
            "the grid must be a tuple of 1 to 3 positive ints (or a callable giving one), got 'x'",
        ),
        ((0,), "grid sizes must be positive ints, got (0,)"),
        ((-1,), "grid sizes must be positive ints, got (-1,)"),
        ((1.5,), "grid sizes must be positive ints, got (1.5,)"),
        ((True,), "grid sizes must be positive ints, got (True,)"),
        ((2**31,), "grid size 2147483648 along x exceeds the CUDA limit 2147483647"),
        ((1, 65536), "grid size 65536 along y exceeds the CUDA limit 65535"),
    ],
)
def test_bad_grids(k, grid, message):
    assert launch_error(_grid3, grid, {}) == message
    assert launch_error(k.__getitem__, grid) == message


@pytest.mark.parametrize(
    ("grid", "expected"),
    [
        ((7,), (7, 1, 1)),
        (5, (5, 1, 1)),
        ([2, 3], (2, 3, 1)),
        ((1, 65535, 65535), (1, 65535, 65535)),
    ],
)
def test_good_grids(grid, expected):
    assert _grid3(grid, {}) == expected


def test_callable_grid_sees_the_constexprs(k):
    grid = lambda meta: (teeny_tx.cdiv(1000, meta["BLOCK"]),)  # noqa: E731
    assert _grid3(grid, {"BLOCK": 128, "num_warps": 4}) == (8, 1, 1)
    assert (
        launch_error(_grid3, lambda meta: (0,), {}) == "grid sizes must be positive ints, got (0,)"
    )
    # the callable grid is evaluated at the call; the host array is then refused
    message = launch_error(k[grid], OUT, A, 1, 2, 1.0, BLOCK=128)
    assert "host memory" in message


def test_numpy_integer_grid_sizes_are_accepted():
    assert _grid3((np.int64(4), np.int32(2)), {}) == (4, 2, 1)


def test_numpy_integer_scalars_bind_like_python_ints():
    """np.int64(5) for an i32 parameter is an in-range integer, not a 64-bit-index request."""
    import numpy as np

    import teeny_tx as tx

    k = tx.compile("kernels/vector_add.c").vector_add
    a = k.binder.bind_host(("f32", "f32", "f32", np.int64(4096)), {"BLOCK": 1024}, 4, describe=True)
    b = k.binder.bind_host(("f32", "f32", "f32", 4096), {"BLOCK": 1024}, 4, describe=True)
    assert a == b and a[-1] is False
