"""Launch arguments and grids are checked on the host, naming the parameter, before any GPU work."""

from __future__ import annotations

import numpy as np
import pytest

import teeny_tx
from teeny_tx import kernel as kernel_module
from teeny_tx.lower import ir
from teeny_tx.lower.ir import walk_exprs
from teeny_tx.runtime import launch, plan
from teeny_tx.runtime.grid import as_grid3 as _grid3

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


@pytest.mark.parametrize("num_stages", [0, 9, 2.0, "2", True, None])
def test_num_stages(k, num_stages):
    message = (
        "num_stages must be an int from 1 to 8 (software-pipelining depth of the loops feeding "
        f"dot), got {num_stages!r}"
    )
    args = (OUT, A, 1, 2, 1.0)
    assert launch_error(k.cuda_source, *args, BLOCK=16, num_stages=num_stages) == message
    assert launch_error(k.interpret[(1,)], *args, BLOCK=16, num_stages=num_stages) == message
    device_args = (FakeDeviceArray("<i4"), FakeDeviceArray(), 1, 2, 1.0)
    assert launch_error(k[(1,)], *device_args, BLOCK=16, num_stages=num_stages) == message


def test_num_stages_is_part_of_the_key_and_of_the_kernel():
    k = teeny_tx.compile("kernels/vector_add.c").vector_add
    two = k.specialize("f32", "f32", "f32", 4096, BLOCK=1024)
    three = k.specialize("f32", "f32", "f32", 4096, BLOCK=1024, num_stages=3)
    assert (two.kernel.num_stages, three.kernel.num_stages) == (2, 3)
    assert two.key[:2] == (4, 2) and three.key[:2] == (4, 3)
    assert k.binder.spec(three.key).num_stages == 3
    grid = lambda meta: (meta["num_stages"],)  # noqa: E731
    assert _grid3(grid, {"num_warps": 4, "num_stages": 3}) == (3, 1, 1)


# ---------------------------------------------------------------- integers equal to 1

STRIDED = kernel_text(
    "    tile offs = program_id(0) * BLOCK + arange(0, BLOCK);\n"
    "    tile mask = offs < n;\n"
    "    store(out + offs, load(a + offs * stride, mask, 0.0f), mask);",
    "f32 *out, const f32 *a, i32 n, i32 stride, const i32 BLOCK",
)


def test_integer_arguments_key_as_one_sixteen_or_none():
    k = teeny_tx.compile(STRIDED, name=KERNEL_FILE).k
    facts = {
        (n, s): k.binder.bind_host(("f32", "f32", n, s), {"BLOCK": 128}, 4, describe=True)[6:8]
        for n, s in [(1, 1), (32, 3), (np.int64(48), np.int32(1))]
    }
    assert facts == {(1, 1): (1, 1), (32, 3): (16, None), (48, 1): (16, 1)}
    spec = k.binder.spec(k.binder.bind_host(("f32", "f32", 32, 1), {"BLOCK": 128}, 4, True))
    assert (spec.div16, spec.ones) == (("n",), ("stride",))


def test_device_and_host_binders_agree_on_integers_equal_to_one():
    cupy = pytest.importorskip("cupy")
    memory = cupy.cuda.UnownedMemory(0x7F0000001000, 1 << 20, None, device_id=0)
    fake = cupy.ndarray((4096,), np.float32, memptr=cupy.cuda.MemoryPointer(memory, 0))
    k = teeny_tx.compile(STRIDED, name=KERNEL_FILE).k
    for n, stride in [(1, 1), (4096, 1), (4096, 3), (17, 32)]:
        key, values, _ = k.binder.bind_device((fake, fake, n, stride), {"BLOCK": 128}, 4)
        host = k.binder.bind_host(("f32", "f32", n, stride), {"BLOCK": 128}, 4, describe=True)
        assert key == host
        assert [int(v) for v in values[2:]] == [n, stride]  # still passed at launch


def test_a_stride_equal_to_one_is_a_constant_and_vectorises():
    k = teeny_tx.compile(STRIDED, name=KERNEL_FILE).k
    one = k.specialize("f32", "f32", 4096, 1, BLOCK=1024)
    three = k.cuda_source("f32", "f32", 4096, 3, BLOCK=1024)
    assert "tx::load_vec_if<4>(" in one.cuda_source and "a + offs[tx_i]," in one.cuda_source
    assert "tx::load_vec<" not in three and "* stride" in three
    # the parameter stays in the signature: the launch values do not change
    assert "int n, int stride)" in one.cuda_source and "int n, int stride)" in three
    params = {p.source_name: p for p in one.kernel.runtime_params}
    assert params["stride"].equal_to_1 and not params["n"].equal_to_1
    assert one.kernel.body and all(
        isinstance(e, ir.Const) and e.type.dtype.name == "i32" and not e.weak
        for e in walk_exprs(one.kernel.body)
        if isinstance(e, ir.Const) and e.value == 1 and e.name is None
    )


def test_a_parameter_equal_to_one_keeps_its_dtype():
    """The constant 1 is strong (the parameter's dtype), so promotion is the runtime value's:
    u8 * i32-parameter stays i32."""
    text = kernel_text(
        "    tile o = arange(0, BLOCK);\n    store(out + o, load(a + o) * n);",
        "i32 *out, const u8 *a, i32 n, const i32 BLOCK",
    )
    k = teeny_tx.compile(text, name=KERNEL_FILE).k
    assert k.specialize("i32", "u8", 1, BLOCK=16).cuda_source  # i32 result, no dtype error
    a = np.full(16, 200, np.uint8)
    for n in (1, 2):
        out = np.zeros(16, np.int32)
        k.interpret[(1,)](out, a, n, BLOCK=16)
        assert (out == 200 * n).all()


def test_an_assigned_parameter_equal_to_one_stays_a_variable():
    text = kernel_text(
        "    tile o = arange(0, BLOCK);\n    n = n + 1;\n    store(out + o, load(a + o) * n);",
        "f32 *out, const f32 *a, i32 n, const i32 BLOCK",
    )
    k = teeny_tx.compile(text, name=KERNEL_FILE).k
    spec = k.specialize("f32", "f32", 1, BLOCK=16)
    assert not spec.kernel.runtime_params[2].equal_to_1
    a, out = np.arange(16, dtype=np.float32), np.zeros(16, np.float32)
    k.interpret[(1,)](out, a, 1, BLOCK=16)
    assert (out == 2 * a).all()


@pytest.mark.parametrize("stride", [1, 3])
def test_the_interpreter_runs_a_stride_of_one_unchanged(stride):
    k = teeny_tx.compile(STRIDED, name=KERNEL_FILE).k
    n = 1000
    a = np.random.default_rng(0).standard_normal(n * stride).astype(np.float32)
    out = np.zeros(n, np.float32)
    k.interpret[(teeny_tx.cdiv(n, 256),)](out, a, n, stride, BLOCK=256)
    assert np.array_equal(out, a[::stride][:n])


# ---------------------------------------------------------------- issue 13: bad launches

BOOLS = kernel_text(
    "    tile o = arange(0, BLOCK);\n"
    "    f32 s = flag ? 2.0f : 1.0f;\n"
    "    if (TWICE) { s = s * 2.0f; }\n"
    "    store(out + o, load(a + o) * s);",
    "f32 *out, const f32 *a, bool flag, const bool TWICE, const i32 BLOCK",
)


def _bools():
    return teeny_tx.compile(BOOLS, name=KERNEL_FILE).k


@pytest.mark.parametrize(
    ("flag", "twice", "scale"),
    [(True, False, 2), (False, True, 2), (np.bool_(True), np.bool_(True), 4)],
)
def test_bool_parameters_take_true_and_false(flag, twice, scale):
    k = _bools()
    a = np.random.default_rng(1).standard_normal(16).astype(np.float32)
    out = np.zeros(16, np.float32)
    k.interpret[(1,)](out, a, flag, TWICE=twice, BLOCK=16)
    assert np.array_equal(out, a * scale)
    assert "bool flag" in k.cuda_source("f32", "f32", flag, TWICE=twice, BLOCK=16)


@pytest.mark.parametrize("bad", [2, 0.5, float("nan"), 1, "yes", None])
def test_bool_parameters_refuse_anything_else(bad):
    k = _bools()
    message = (
        f"argument 'flag' (bool flag) must be True or False, got {bad!r}"
        if not isinstance(bad, (str, type(None)))
        else f"argument 'flag' (bool flag) must be True or False, got {type(bad).__name__}"
    )
    assert launch_error(k.cuda_source, "f32", "f32", bad, TWICE=False, BLOCK=16) == message
    assert launch_error(k.interpret[(1,)], A, A, bad, TWICE=False, BLOCK=16) == message
    device = (FakeDeviceArray(), FakeDeviceArray())
    assert launch_error(k[(1,)], *device, bad, TWICE=False, BLOCK=16) == message
    if isinstance(bad, (int, float)):
        text = launch_error(k.cuda_source, "f32", "f32", True, TWICE=bad, BLOCK=16)
        assert text == f"constexpr 'TWICE' (const bool TWICE) must be True or False, got {bad!r}"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (float("nan"), "constexpr 'BLOCK' (const i32 BLOCK) must be an integer, got nan"),
        (
            2**32 + 128,
            "constexpr 'BLOCK' (const i32 BLOCK) = 4294967424 does not fit i32 "
            "(-2147483648..2147483647)",
        ),
        (
            127.9,
            "constexpr 'BLOCK' (const i32 BLOCK) must be an integer, got 127.9; round it first",
        ),
        (16.0, "constexpr 'BLOCK' (const i32 BLOCK) must be an integer, got 16.0; round it first"),
        (True, "constexpr 'BLOCK' (const i32 BLOCK) must be a number, got True"),
        ("16", "constexpr 'BLOCK' must be a number, got str"),
    ],
)
def test_constexpr_values_are_checked_against_their_type(k, value, message):
    args = (OUT, A, 1, 2, 1.0)
    assert launch_error(k.cuda_source, *args, BLOCK=value) == message
    assert launch_error(k.interpret[(1,)], *args, BLOCK=value) == message
    device = (FakeDeviceArray("<i4"), FakeDeviceArray(), 1, 2, 1.0)
    assert launch_error(k[(1,)], *device, BLOCK=value) == message


def test_constexpr_numpy_integers_and_float_constexprs():
    text = kernel_text(
        "    tile o = arange(0, BLOCK);\n    store(out + o, load(a + o) * SCALE);",
        "f32 *out, const f32 *a, const f32 SCALE, const i32 BLOCK",
    )
    k = teeny_tx.compile(text, name=KERNEL_FILE).k
    one = k.specialize("f32", "f32", SCALE=2, BLOCK=np.int64(16))
    two = k.specialize("f32", "f32", SCALE=2.0, BLOCK=16)
    assert one is two and dict(k.binder.spec(one.key).constexprs) == {"SCALE": 2.0, "BLOCK": 16}
    assert type(one.key[-2]) is int and type(one.key[-3]) is float
    message = launch_error(k.cuda_source, "f32", "f32", SCALE=float("inf"), BLOCK=16)
    assert message.startswith("constexpr 'SCALE' (const f32 SCALE) must be finite, got inf")
    message = launch_error(k.cuda_source, "f32", "f32", SCALE=1e39, BLOCK=16)
    assert message == "constexpr 'SCALE' (const f32 SCALE) = 1e+39 does not fit f32"


@pytest.mark.parametrize("name", ["num_warps", "num_stages", "stream", "strided"])
def test_a_constexpr_named_like_a_launch_option_is_a_compile_error(name):
    text = kernel_text(
        "    tile o = arange(0, 16);\n    store(out + o, load(a + o));",
        f"f32 *out, const f32 *a, const i32 {name}",
    )
    with pytest.raises(teeny_tx.CompileError) as info:
        teeny_tx.compile(text, name=KERNEL_FILE)
    message = str(info.value)
    assert f"constexpr '{name}' of kernel k has the name of a launch option" in message
    assert f"{KERNEL_FILE}:1:" in message and "rename the parameter" in message


def test_a_runtime_scalar_may_be_named_like_a_launch_option():
    text = kernel_text(
        "    tile o = arange(0, BLOCK);\n    store(out + o, load(a + o) * stream);",
        "f32 *out, const f32 *a, f32 stream, const i32 BLOCK",
    )
    k = teeny_tx.compile(text, name=KERNEL_FILE).k
    a, out = np.arange(16, dtype=np.float32), np.zeros(16, np.float32)
    k.interpret[(1,)](out, a, 3.0, BLOCK=16)
    assert np.array_equal(out, 3 * a)


def test_num_warps_bool_is_refused_and_numpy_integers_are_taken(k):
    args = (OUT, A, 1, 2, 1.0)
    message = "num_warps must be 1, 2, 4, 8, 16 or 32, got True"
    assert launch_error(k.cuda_source, *args, BLOCK=16, num_warps=True) == message
    device = (FakeDeviceArray("<i4"), FakeDeviceArray(), 1, 2, 1.0)
    assert launch_error(k[(1,)], *device, BLOCK=16, num_warps=True) == message
    key = k.binder.bind_host(args, {"BLOCK": 16}, np.int64(8), num_stages=np.int32(3))
    assert key[:2] == (8, 3) and all(type(v) is int for v in key[:2])


@pytest.mark.parametrize("grid", [([1],), ({},), [[2]], (np.int64(2), [1])])
def test_unhashable_grids_are_launch_errors(k, grid):
    assert launch_error(k.__getitem__, grid).startswith("grid sizes must be positive ints")


def test_numpy_integer_grids_launch(k):
    assert _grid3(np.int64(3), {}) == (3, 1, 1)
    with pytest.raises(AssertionError, match="got past the argument checks"):
        k[(np.int64(2), np.int32(1))](
            FakeDeviceArray("<i4"), FakeDeviceArray(), 1, 2, 1.0, BLOCK=16
        )


def test_interpret_accepts_stream_so_one_call_switches_backends():
    k = teeny_tx.compile("kernels/vector_add.c").vector_add
    a = np.arange(1001, dtype=np.float32)
    out = np.zeros_like(a)
    for launch_on in (k.interpret,):
        launch_on[(teeny_tx.cdiv(1001, 256),)](a, a, out, 1001, BLOCK=256, stream=None)
    assert np.array_equal(out, 2 * a)
    out[:] = 0
    k.interpret[(4,)](a, a, out, 1001, BLOCK=256, stream=object())  # ignored: runs at once
    assert np.array_equal(out, 2 * a)


# --- views: refused unless strided=True, then honoured exactly as the GPU would read them

ROWS = kernel_text(
    "    i32 row = program_id(0);\n"
    "    tile cols = arange(0, BLOCK);\n"
    "    tile mask = cols < n;\n"
    "    tile x = load(a + row * stride + cols * step, mask, 0.0f);\n"
    "    store(out + row * n + cols, x + 1.0f, mask);",
    "f32 *out, const f32 *a, i32 n, i32 stride, i32 step, const i32 BLOCK",
)


def _rows():
    return teeny_tx.compile(ROWS, name=KERNEL_FILE).k


def _views():
    base = np.random.default_rng(2).standard_normal((7, 40)).astype(np.float32)
    return {
        "columns stepped": base[:, ::2],
        "transposed": base[:5, :7].T,
        "negative strides": base[::-1],
        "row gaps": base[:, :13],
    }


@pytest.mark.parametrize("which", list(_views()))
def test_non_contiguous_views_are_refused_naming_the_parameter(which):
    view = _views()[which]
    k = _rows()
    out = np.zeros(view.size, np.float32)
    rows, cols = view.shape
    args = (out, view, cols, view.strides[0] // 4, view.strides[1] // 4)
    message = launch_error(k.interpret[(rows,)], *args, BLOCK=64)
    strides = tuple(s // 4 for s in view.strides)
    assert message.startswith(
        f"argument 'a' is a non-contiguous view (shape {view.shape}, strides {strides} in "
        "elements): the kernel gets only the address of its first element"
    )
    assert "strided=True" in message
    assert launch_error(k.cuda_source, *args, BLOCK=64) == message
    fake = FakeDeviceArray()
    fake.__cuda_array_interface__.update(shape=view.shape, strides=view.strides)
    device = launch_error(k[(rows,)], FakeDeviceArray(), fake, *args[2:], BLOCK=64)
    assert device.startswith("argument 'a' is a non-contiguous view") and "strided=True" in device


@pytest.mark.parametrize("which", list(_views()))
def test_strided_true_honours_views_as_the_gpu_reads_them(which):
    view = _views()[which]
    k = _rows()
    rows, cols = view.shape
    out = np.zeros((rows, cols), np.float32)
    k.interpret[(rows,)](
        out, view, cols, view.strides[0] // 4, view.strides[1] // 4, BLOCK=64, strided=True
    )
    assert np.array_equal(out, view + 1.0)


def test_misaligned_pointers_are_refused():
    raw = np.zeros(1026, np.uint8)
    shifted = np.frombuffer(raw.data, np.float32, 256, 2)
    k = teeny_tx.compile("kernels/vector_add.c").vector_add
    out = np.zeros(256, np.float32)
    for run in (k.interpret[(1,)], k.cuda_source):
        message = launch_error(run, shifted, out, out, 256, BLOCK=256)
        assert (
            message.startswith("argument 'a': address 0x")
            and "is not a multiple of the f32 " in message
        )
        assert launch_error(run, shifted, out, out, 256, BLOCK=256, strided=True) == message
    fake = FakeDeviceArray(ptr=0x7F0000000002)
    message = launch_error(k[(1,)], fake, FakeDeviceArray(), FakeDeviceArray(), 256, BLOCK=256)
    assert message.startswith("argument 'a': address 0x7f0000000002 is not a multiple")


def test_contiguous_views_of_any_shape_pass():
    k = teeny_tx.compile("kernels/vector_add.c").vector_add
    base = np.arange(64, dtype=np.float32).reshape(8, 8)
    out = np.zeros(16, np.float32)
    k.interpret[(1,)](base[2:4], base[2:4], out, 16, BLOCK=16)  # rows: contiguous
    assert np.array_equal(out, 2 * base[2:4].ravel())
    k.interpret[(1,)](base[:, :1][3:4], base[3:4, :1], out, 1, BLOCK=16)  # one element
    assert out[0] == 2 * base[3, 0]


# ---------------------------------------------------------------- the launcher's hot path


class FakeLoaded:
    """A loaded kernel whose launches are recorded: the parameter block read back through the
    void* array the launcher hands to cuLaunchKernel, as the driver would read it."""

    def __init__(self, fmt: str):
        self.fmt = fmt
        self.launches: list = []
        self.ptr = id(self)  # its driver handle

    def prepared(self, device, shared):
        return self

    def launch(self, grid, block, params, stream) -> None:
        import ctypes
        import struct

        first = ctypes.c_void_p.from_address(params).value
        raw = ctypes.string_at(first, struct.calcsize(self.fmt))
        self.launches.append((grid, block, struct.unpack(self.fmt, raw), stream))


@pytest.fixture
def hot(monkeypatch):
    """vector_add with compiling replaced by a recorder; returns (kernel, loaded, misses)."""
    k = teeny_tx.compile("kernels/vector_add.c").vector_add
    loaded = FakeLoaded(k.binder.narrow.format)
    wide = FakeLoaded(k.binder.wide.format)
    specs = []

    class Spec:
        def __init__(self, key):
            self.loaded = wide if key[-1] else loaded
            self.block, self.shared_mem = (key[0] * 32, 1, 1), 0

    def specialization(key):
        specs.append(key)
        return Spec(key)

    def launch_kernel(handle, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        fake = {loaded.ptr: loaded, wide.ptr: wide}[handle]
        fake.launch((gx, gy, gz), (bx, by, bz), params, stream)

    monkeypatch.setattr(k, "_specialization", specialization)
    monkeypatch.setattr(launch, "get_device", lambda: 0)
    monkeypatch.setattr(launch, "current_stream", lambda device: type("S", (), {"ptr": 0}))
    monkeypatch.setattr(plan, "launch_kernel", launch_kernel)
    return k, loaded, wide, specs


def test_the_hot_path_packs_each_launch_and_compiles_once_per_key(hot):
    k, loaded, _, specs = hot
    a, b, out = (FakeDeviceArray(ptr=0x7F0000000000 + 256 * i) for i in range(3))
    run = k[(4,)]
    for n in (4096, 4096, 1000, 4000):
        run(a, b, out, n, BLOCK=1024)
    assert [launched[2] for launched in loaded.launches] == [
        (0x7F0000000000, 0x7F0000000100, 0x7F0000000200, n) for n in (4096, 4096, 1000, 4000)
    ]
    assert [launched[0] for launched in loaded.launches] == [(4, 1, 1)] * 4
    # 4096 and 4000 are multiples of 16, 1000 is not: two keys, two compiles
    assert len(specs) == 2 and {key[-3] for key in specs} == {16, None}
    assert len(k._entries) == 2  # one signature per key here: 4096 and 4000 share low bits


def test_the_hot_path_sends_values_that_do_not_fit_to_the_full_checks(hot):
    k, loaded, wide, specs = hot
    args = [FakeDeviceArray() for _ in range(3)]
    run = k[(4,)]
    run(*args, 64, BLOCK=1024)
    run(*args, 2**40, BLOCK=1024)  # an i32 beyond 32 bits: 64-bit indices, widened
    assert wide.launches[-1][2][-1] == 2**40 and specs[-1][-1] is True
    assert launch_error(run, *args, 2**63, BLOCK=1024) == f"argument 'n' = {2**63} does not fit i32"
    assert launch_error(run, *args, 1.5, BLOCK=1024) == (
        "argument 'n' (i32 n) must be an integer, got float"
    )
    assert launch_error(run, *args, True, BLOCK=1024) == (
        "argument 'n' (i32 n) must be an integer, got bool"
    )
    run(*args, np.int64(64), BLOCK=1024)
    assert loaded.launches[-1][2][-1] == 64 and len(loaded.launches) == 2


def test_the_hot_path_rechecks_what_a_signature_does_not_fix(hot):
    k, loaded, _, _ = hot
    a = [FakeDeviceArray() for _ in range(3)]
    k[(1,)](*a, 64, BLOCK=1024)
    k[(1,)](*a, 64, BLOCK=1024, num_warps=np.int64(4))
    assert len(loaded.launches) == 2
    assert launch_error(k[(1,)], *a, 64, BLOCK=1024.0).endswith("got 1024.0; round it first")
    assert launch_error(k[(1,)], *a, 64, BLOCK=1024, num_warps=True).endswith("got True")
    strided = FakeDeviceArray()
    strided.__cuda_array_interface__["strides"] = (8,)
    message = launch_error(k[(1,)], strided, a[1], a[2], 64, BLOCK=1024)
    assert message.startswith("argument 'a' is a non-contiguous view (shape (256,), strides (2,)")
    k[(1,)](strided, a[1], a[2], 64, BLOCK=1024, strided=True)
    assert len(loaded.launches) == 3


def test_parameter_blocks_follow_the_c_layout():
    text = kernel_text(
        "    tile o = arange(0, 16);\n    store(out + o, load(a + o) * (f32)h + (f32)(b8 + n));",
        "f32 *out, i8 b8, i64 n, f16 h, const f32 *a, bf16 w, u8 c, f64 d",
    )
    binder = teeny_tx.compile(text, name=KERNEL_FILE).k.binder
    assert binder.narrow.offsets == (0, 8, 16, 24, 32, 40, 42, 48)
    assert binder.narrow.struct.size == 56
