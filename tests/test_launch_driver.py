"""The launchers' driver path: cuLaunchKernel from a prebuilt parameter array (no GPU needed).

The driver call is replaced by a recorder that reads what cuLaunchKernel would read: the
function handle, grid, block, shared memory, stream handle, and each parameter through the
``void*`` array it is given. Checked: it sends exactly what CuPy's function is sent on the
other path, for the launcher and for direct launches (the plans'); a thread gets its own
parameter buffer; a thread with no current context is launched through CuPy's function; other
driver errors name the kernel; a launcher whose constexprs cannot be Python parameters still
checks everything; a repeated linalg.bmm replays its plan.
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any

import numpy as np
import pytest

import teeny_tx
from teeny_tx import kernel as kernel_module
from teeny_tx.errors import LaunchError
from teeny_tx.library import arrays as arrays_module
from teeny_tx.library import linalg, loader
from teeny_tx.runtime import binder as binder_module
from teeny_tx.runtime import launch, plan

from .conftest import KERNEL_FILE, kernel_text
from .test_launch_direct import Device, count_calls

HANDLE = 0xC0FFEE


class FakeDriverError(Exception):
    def __init__(self, status: int):
        super().__init__(f"CUDA_ERROR {status}")
        self.status = status


class Function:
    """A loaded CuPy function stand-in: a driver handle, and calls recorded when used."""

    def __init__(self, record: list, fmt: str):
        self.ptr = HANDLE
        self.record, self.fmt = record, fmt

    def __call__(self, grid, block, pointers, shared, stream):
        raw = ctypes.string_at(pointers[0].ptr, binder_module.struct.calcsize(self.fmt))
        values = binder_module.struct.unpack(self.fmt, raw)
        grid, block = tuple(grid) + (1,) * (3 - len(grid)), tuple(block)
        self.record.append(("cupy", self.ptr, grid, block, values, shared, stream, 0))


class Driver:
    """The mocked driver: launches recorded as cuLaunchKernel would read them."""

    def __init__(self, monkeypatch, devices: int = 1):
        self.launches: list = []
        self.fail: list[int] = []  # statuses the next launches return (then success)
        self.stream = 0
        self.device_asked = 0
        self.made_current: list[int] = []  # devices whose context a retry made current
        driver = self

        def launch_kernel(handle, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
            if driver.fail:
                raise FakeDriverError(driver.fail.pop(0))
            packer = driver.packers.get(params, driver.packer)  # the slot's own (narrow/wide)
            count = max(len(packer.offsets), 1)
            array = (ctypes.c_void_p * count).from_address(params)
            first = array[0]
            assert [a - first for a in array][: len(packer.offsets)] == list(packer.offsets)
            values = packer.struct.unpack(ctypes.string_at(first, packer.struct.size))
            driver.launches.append(
                ("driver", handle, (gx, gy, gz), (bx, by, bz), values, shared, stream, extra)
            )

        class Stream:
            @property
            def ptr(self):
                return driver.stream

        def get_device():
            driver.device_asked += 1
            return 0

        self.packers: dict[int, Any] = {}  # slot.params -> the packer whose slot it is
        new_slot = binder_module.Packer.new_slot

        def recorded_slot(packer):
            slot = new_slot(packer)
            driver.packers[slot.params] = packer
            return slot

        monkeypatch.setattr(binder_module.Packer, "new_slot", recorded_slot)
        monkeypatch.setattr(plan, "launch_kernel", launch_kernel)
        monkeypatch.setattr(launch, "current_stream", lambda device: Stream())
        monkeypatch.setattr(launch, "DriverError", FakeDriverError)
        monkeypatch.setattr(launch, "get_device", get_device)
        monkeypatch.setattr(launch, "single_device", lambda: devices == 1)
        monkeypatch.setattr(launch, "make_current", driver.made_current.append)

    def kernel(self, monkeypatch, text: str | None = None, name: str = "vector_add"):
        """A kernel whose specialisations load as :class:`Function` stand-ins."""
        if text is None:
            k = getattr(teeny_tx.compile("kernels/vector_add.c"), name)
        else:
            k = getattr(teeny_tx.compile(text, name=KERNEL_FILE), name)
        driver = self

        class Loaded:
            def __init__(self, fmt):
                self.fmt = fmt

            def prepared(self, device, shared):
                return Function(driver.launches, self.fmt)

            def error(self, device, err, grid, block, shared):
                return LaunchError(f"launching kernel '{k.name}' failed: {err}")

        class Spec:
            def __init__(self, key):
                self.loaded = Loaded((k.binder.wide if key[-1] else k.binder.narrow).format)
                self.block, self.shared_mem = (key[0] * 32, 1, 1), 0

        monkeypatch.setattr(k, "_specialization", lambda key: Spec(key))
        self.packer = k.binder.narrow
        return k


def arrays(device: Device, n: int = 4096, dtype=np.float32) -> tuple:
    return tuple(device.array((n,), dtype) for _ in range(3))


@pytest.fixture
def driver(monkeypatch):
    return Driver(monkeypatch)


@pytest.fixture
def device(monkeypatch):
    return Device(monkeypatch)


def test_first_and_hot_launches_send_the_same_through_the_driver(device, driver, monkeypatch):
    k = driver.kernel(monkeypatch)
    a, b, out = arrays(device)
    run = k[(4,)]
    run(a, b, out, 4096, BLOCK=1024)  # a new signature: every check, plan.launch_prepared
    run(a, b, out, 4096, BLOCK=1024)  # the hot path
    run(a, b, out, 4000, BLOCK=1024, num_warps=8)  # another key
    run(a, b, out, 4000, BLOCK=1024, num_warps=8)
    first, driven, _, driven8 = driver.launches
    values = (a.data.ptr, b.data.ptr, out.data.ptr, 4096)
    assert first == driven == ("driver", HANDLE, (4, 1, 1), (128, 1, 1), values, 0, 0, 0)
    assert driven8[3:5] == ((256, 1, 1), (*values[:3], 4000))
    assert driver.device_asked == 2  # only the misses asked: one device is device 0


def test_the_driver_launch_uses_the_current_and_the_given_stream(device, driver, monkeypatch):
    k = driver.kernel(monkeypatch)
    a, b, out = arrays(device)
    k[(2, 3)](a, b, out, 64, BLOCK=64)
    driver.stream = 0x5000
    k[(2, 3)](a, b, out, 64, BLOCK=64)
    k[(2, 3)](a, b, out, 64, BLOCK=64, stream=0x6000)  # a raw handle, as torch's
    assert [x[6] for x in driver.launches[1:]] == [0x5000, 0x6000]
    assert driver.launches[-1][2] == (2, 3, 1)


def test_a_grid_function_is_called_per_launch(device, driver, monkeypatch):
    k = driver.kernel(monkeypatch)
    a, b, out = arrays(device)
    seen = []

    def grid(meta):
        seen.append(meta["BLOCK"])
        return (4096 // meta["BLOCK"],)

    for block in (1024, 1024, 256):
        k[grid](a, b, out, 4096, BLOCK=block)
    assert seen == [1024, 1024, 256]
    assert [x[2] for x in driver.launches] == [(4, 1, 1), (4, 1, 1), (16, 1, 1)]


def test_the_driver_launch_checks_every_argument(device, driver, monkeypatch):
    k = driver.kernel(monkeypatch)
    a, b, out = arrays(device)
    run = k[(4,)]
    run(a, b, out, 4096, BLOCK=1024)
    halves = arrays(device, dtype=np.float16)
    with pytest.raises(LaunchError, match="'n' = 4294967296 does not fit i32|got float"):
        run(a, b, out, 4.0, BLOCK=1024)
    with pytest.raises(LaunchError, match=r"vector_add\(\) takes 4 positional arguments"):
        run(a, b, out, BLOCK=1024)
    with pytest.raises(LaunchError, match=r"takes 4 positional arguments .* got 5"):
        run(a, b, out, 4096, 5, BLOCK=1024)
    with pytest.raises(LaunchError, match="needs constexpr BLOCK by keyword"):
        run(a, b, out, 4096)
    with pytest.raises(LaunchError, match="unknown keyword argument 'BLCK'"):
        run(a, b, out, 4096, BLOCK=1024, BLCK=3)
    with pytest.raises(LaunchError, match="non-contiguous view"):
        run(device.array((8192,))[::2], b, out, 4096, BLOCK=1024)
    with pytest.raises(LaunchError, match="num_warps must be"):
        run(a, b, out, 4096, BLOCK=1024, num_warps=3)
    run(*halves, 4096, BLOCK=1024)  # another dtype: another specialisation, launched
    assert driver.launches[-1][0] == "driver" and len(k._compiled) == 2
    n_launches = len(driver.launches)
    run(a, b, out, 2**40, BLOCK=1024)  # beyond i32: the full checks widen it
    assert len(driver.launches) == n_launches + 1 and driver.launches[-1][4][-1] == 2**40


def test_a_new_thread_gets_its_own_parameter_buffer(device, driver, monkeypatch):
    k = driver.kernel(monkeypatch)
    a, b, out = arrays(device)
    run = k[(4,)]
    run(a, b, out, 4096, BLOCK=1024)
    run(a, b, out, 4096, BLOCK=1024)
    main = k.binder.narrow.main
    slots = []

    def other():
        slots.append(k.binder.narrow.slot())
        run(a, b, out, 4096, BLOCK=1024)

    thread = threading.Thread(target=other)
    thread.start()
    thread.join()
    assert main[0] == threading.get_ident() and slots[0] is not main[1]
    assert driver.launches[-1][4] == driver.launches[1][4]
    assert k.binder.narrow.slot() is main[1]


def test_no_current_context_makes_it_current_and_launches_again(device, driver, monkeypatch):
    k = driver.kernel(monkeypatch)
    a, b, out = arrays(device)
    run = k[(4,)]
    driver.fail = [launch.INVALID_CONTEXT]  # a new thread's first launch
    run(a, b, out, 4096, BLOCK=1024)
    assert driver.made_current == [0] and len(driver.launches) == 1
    driver.fail = [launch.INVALID_CONTEXT]  # the hot path's
    driver.stream = 0x7000
    run(a, b, out, 16, BLOCK=1024)
    retried = driver.launches[-1]
    assert driver.made_current == [0, 0] and retried[4][-1] == 16
    assert retried[6] == 0x7000  # the same stream
    driver.fail = [launch.INVALID_CONTEXT, launch.INVALID_CONTEXT]  # still none: the error
    with pytest.raises(LaunchError, match="failed: CUDA_ERROR 201"):
        run(a, b, out, 16, BLOCK=1024)
    driver.fail = [700]  # CUDA_ERROR_ILLEGAL_ADDRESS: the error, naming the kernel
    with pytest.raises(LaunchError, match="launching kernel 'vector_add' failed: CUDA_ERROR 700"):
        run(a, b, out, 16, BLOCK=1024)


def test_constexprs_that_cannot_be_python_parameters(device, driver, monkeypatch):
    text = kernel_text(
        "    tile o = arange(0, 16);\n    store(out + o, load(out + o) + (f32)(from + _tx_x));",
        "f32 *out, const i32 from, const i32 _tx_x",
    )
    k = driver.kernel(monkeypatch, text, name="k")
    assert not k.binder._named and k.binder._prefix == "_tx__"
    (out,) = arrays(device, 16)[:1]
    for _ in range(2):
        k[(1,)](out, **{"from": 3, "_tx_x": 4})
    assert [x[0] for x in driver.launches] == ["driver", "driver"]
    with pytest.raises(LaunchError, match="needs constexpr from by keyword"):
        k[(1,)](out, _tx_x=4)
    named = kernel_text(
        "    tile o = arange(0, 16);\n    store(out + o, load(out + o) + (f32)(_tx_entries));",
        "f32 *out, const i32 _tx_entries",
    )
    k2 = driver.kernel(monkeypatch, named, name="k")
    assert k2.binder._named and k2.binder._prefix == "_tx__"
    for value in (5, 5, 6):
        k2[(1,)](out, _tx_entries=value)
    assert [x[0] for x in driver.launches[2:]] == ["driver"] * 3
    assert [x[4][-1] for x in driver.launches[2:]] == [5, 5, 6] or len(k2._compiled) == 2


def test_a_direct_launch_goes_through_the_driver(device, driver, monkeypatch):
    k = driver.kernel(monkeypatch)
    a, b, out = arrays(device)
    k[(4,)](a, b, out, 4096, BLOCK=1024)
    run = k.direct((4,), (a, b, out, 4096), 4, BLOCK=1024)
    driver.stream = 0x9000
    a2, b2, out2 = arrays(device)
    run(a2, b2, out2, 4096)
    assert driver.launches[-1][:7] == (
        "driver",
        HANDLE,
        (4, 1, 1),
        (128, 1, 1),
        (a2.data.ptr, b2.data.ptr, out2.data.ptr, 4096),
        0,
        0x9000,
    )
    driver.fail = [launch.INVALID_CONTEXT]
    run(a, b, out, 4096)
    assert driver.made_current == [0] and driver.launches[-1][6] == 0x9000


def test_a_repeated_bmm_replays_its_plan(device, monkeypatch):
    monkeypatch.setattr(linalg, "TUNE", False)
    monkeypatch.setattr(linalg, "module", _fresh_module())  # launchers that hold the mock
    monkeypatch.setattr(linalg, "_PLANS", {})
    a, b = device.array((3, 17, 40)), device.array((3, 40, 24))
    first = linalg.bmm(a, b, alpha=0.5)
    assert first.shape == (3, 17, 24) and len(device.launches) == 1 and len(linalg._PLANS) == 1
    checks = count_calls(monkeypatch, arrays_module.Arrays, "__init__")
    binds = count_calls(monkeypatch, binder_module.Binder, "bind_device")
    again = linalg.bmm(device.array((3, 17, 40)), device.array((3, 40, 24)), alpha=0.5)
    assert checks[0] == binds[0] == 0 and again.shape == first.shape
    one, two = device.launches
    assert one[0] == two[0] and one[1] == two[1]  # grid and block
    assert one[2][4:] == two[2][4:]  # sizes, strides, alpha: all but the four pointers
    assert two[2][-1] == 0.5
    linalg.bmm(a, b, alpha=2.0)  # alpha is a value, not part of the signature
    assert device.launches[-1][2][-1] == 2.0 and checks[0] == 0
    with pytest.raises(LaunchError, match="batch sizes differ"):
        linalg.bmm(a, device.array((2, 40, 24)))


def _fresh_module():
    import functools

    return functools.cache(lambda f: teeny_tx.compile(loader.kernel_text(f), name=f"kernels/{f}"))


@pytest.mark.parametrize("which", ["matmul", "linear", "linear bias"])
def test_a_repeated_product_replays_as_a_direct_launch(device, monkeypatch, which):
    monkeypatch.setattr(linalg, "TUNE", False)
    monkeypatch.setattr(linalg, "HOPPER", False)  # the mma.sync kernel: the generated launch
    monkeypatch.setattr(linalg, "module", _fresh_module())
    monkeypatch.setattr(linalg, "_PLANS", {})
    a, w, bias = device.array((33, 40)), device.array((24, 40)), device.array((24,))

    def call(a):
        if which == "matmul":
            return linalg.matmul(a, device.array((40, 24)), alpha=0.25)
        return linalg.linear(a, w, bias if which == "linear bias" else None)

    first = call(a)
    checks = count_calls(monkeypatch, arrays_module.Arrays, "__init__")
    launchers = count_calls(monkeypatch, kernel_module.Kernel, "__getitem__")
    second = call(device.array((33, 40)))
    assert checks[0] == launchers[0] == 0 and second.shape == first.shape == (33, 24)
    one, two = device.launches
    assert one[:2] == two[:2] and one[2][4:] == two[2][4:]
    assert two[2][0] == second.data.ptr and two[2][0] != one[2][0]
    misaligned = device.array((33 * 40 + 1,))[1:].reshape(33, 40)  # a 2-byte offset
    call(misaligned)  # another signature (its alignment): checked, planned on its own
    assert checks[0] == 1


SCALARS = kernel_text(
    "    tile o = arange(0, BLOCK);\n    store(out + o, (i32)(load(a + o) * scale) + n + small);",
    "i32 *out, const f32 *a, i32 n, u8 small, f32 scale, const i32 BLOCK",
)


@pytest.mark.parametrize("given", range(5))
def test_a_missing_argument_of_any_kind_gets_the_arity_error(device, driver, monkeypatch, given):
    k = driver.kernel(monkeypatch, SCALARS, name="k")
    out, a = device.array((64,), np.int32), device.array((64,), np.float32)
    full = (out, a, 64, 3, 0.5)
    run = k[(1,)]
    run(*full, BLOCK=64)
    run(*full, BLOCK=64)  # the hot path knows this signature: a short call must not use it
    with pytest.raises(LaunchError, match=rf"k\(\) takes 5 positional arguments .*, got {given}"):
        run(*full[:given], BLOCK=64)
    with pytest.raises(LaunchError, match="needs constexpr BLOCK by keyword"):
        run(*full)
    assert len(driver.launches) == 2


def test_a_batch_of_one_product_is_a_bmm_like_any_other(device, monkeypatch):
    monkeypatch.setattr(linalg, "TUNE", False)
    monkeypatch.setattr(linalg, "module", _fresh_module())
    monkeypatch.setattr(linalg, "_PLANS", {})
    a, b = device.array((1, 1, 1)), device.array((1, 1, 48))
    for _ in range(2):  # planned, then replayed
        c = linalg.bmm(a, b, alpha=0.5)
        assert c.shape == (1, 1, 48)
    first, again = device.launches
    assert first[0] == again[0] == (1, 1, 1) and first[2][4:] == again[2][4:]


def test_with_several_devices_each_launch_asks_for_the_current_one(device, monkeypatch):
    driver = Driver(monkeypatch, devices=2)
    k = driver.kernel(monkeypatch)
    a, b, out = arrays(device)
    run = k[(4,)]
    for _ in range(3):
        run(a, b, out, 4096, BLOCK=1024)
    assert driver.device_asked == 3  # the miss once, then each hot launch
    assert [x[0] for x in driver.launches] == ["driver"] * 3
    (entry,) = set(k._entries.values())
    assert entry.handles == {0: HANDLE}
