"""Direct launches and the wrappers' plans, on a mocked device (no GPU needed).

CuPy arrays over fake device memory, ``cupy.empty`` a bump allocator, compiling skipped and the
driver launch replaced by a recorder of what it would send (grid, block, the unpacked
parameter block, shared memory, stream). Checked: a direct launch sends exactly what the
kernel's launcher sends; it goes back to the launcher when an alignment or a checked scalar's
key facts change, and a value that does not fit still gets the launcher's error; every
wrapper's repeated call replays its plan (no argument checks, no launcher, no signature look-up)
and launches what its first, fully checked call launched, argument for argument.
"""

from __future__ import annotations

import functools
import math

import cupy
import numpy as np
import pytest

import teeny_tx
from teeny_tx import kernel as kernel_module
from teeny_tx.errors import LaunchError
from teeny_tx.library import arrays as arrays_module
from teeny_tx.library import nn, plans
from teeny_tx.library.loader import kernel_text
from teeny_tx.runtime import binder as binder_module
from teeny_tx.runtime import launch, plan

BASE = 0x7F0000000000


class Device:
    """The mocked device: fake memory, a bump allocator, recorded launches."""

    def __init__(self, monkeypatch, record_launches: bool = True):
        self.memory = cupy.cuda.UnownedMemory(BASE, 1 << 40, None, device_id=0)
        self.next = BASE
        self.launches: list[tuple] = []
        self.slots: dict[int, tuple] = {}  # slot.params (its void* array) -> (slot, packer)
        device = self

        def empty(shape, dtype=np.float32, order="C"):
            shape = (shape,) if isinstance(shape, int) else tuple(shape)
            size = math.prod(shape) * np.dtype(dtype).itemsize
            offset = self.next - BASE
            self.next += (size + 255) // 256 * 256 or 256
            return cupy.ndarray(shape, dtype, cupy.cuda.MemoryPointer(self.memory, offset))

        class Function:  # a loaded kernel's stand-in: its driver handle
            ptr = 0xF00D

        def launch_kernel(handle, gx, gy, gz, bx, by, bz, shared_mem, stream, params, extra):
            assert handle == Function.ptr and extra == 0
            slot, packer = device.slots[params]
            values = packer.struct.unpack_from(slot.buffer)
            device.launches.append(((gx, gy, gz), (bx, by, bz), values, shared_mem, stream))

        class Stream:
            ptr = 0

        class Loaded:
            def prepared(self, index, shared):
                return Function()

            def error(self, *args):
                raise AssertionError(args)

        class Spec:
            def __init__(self, key):
                self.loaded = Loaded()
                self.block, self.shared_mem = (key[0] * 32, 1, 1), 0

        new_slot = binder_module.Packer.new_slot

        def recorded_slot(packer):
            slot = new_slot(packer)
            device.slots[slot.params] = (slot, packer)
            return slot

        limits = launch.DeviceLimits("mock H200", (9, 0), 232448, 1024, 65536, 132)
        monkeypatch.setattr(cupy, "empty", empty)
        monkeypatch.setattr(cupy, "zeros", empty)  # the split kernels' slots: fake memory too
        monkeypatch.setattr(cupy, "ascontiguousarray", lambda a: empty(a.shape, a.dtype))
        monkeypatch.setattr(cupy.cuda.runtime, "getDevice", lambda: 0)
        monkeypatch.setattr(launch, "get_device", lambda: 0)
        if record_launches:  # (else the caller's own stand-in of the driver records them)
            monkeypatch.setattr(launch, "current_stream", lambda device: Stream())
            monkeypatch.setattr(plan, "launch_kernel", launch_kernel)
        monkeypatch.setattr(launch, "has_gpu", lambda: True)
        monkeypatch.setattr(launch, "device_limits", lambda device=None: limits)
        monkeypatch.setattr(kernel_module.Kernel, "_specialization", lambda self, key: Spec(key))
        monkeypatch.setattr(binder_module.Packer, "new_slot", recorded_slot)
        # the library's kernels compiled afresh for this test (their launchers and entries
        # then hold the mock, never the process's own modules), no tuning, no kept plans
        fresh = functools.cache(lambda f: teeny_tx.compile(kernel_text(f), name=f"kernels/{f}"))
        monkeypatch.setattr(nn, "module", fresh)
        monkeypatch.setattr(nn, "_norm_kernel", functools.cache(nn._norm_kernel.__wrapped__))
        monkeypatch.setattr(nn, "_ce_kernel", functools.cache(nn._ce_kernel.__wrapped__))
        fresh_plans: dict = {}  # the plans' one table, as nn and plans both name it
        monkeypatch.setattr(plans, "PLANS", fresh_plans)
        monkeypatch.setattr(nn, "_PLANS", fresh_plans)
        monkeypatch.setattr(nn, "TUNE", False)

    def array(self, shape, dtype=np.float16):
        return cupy.empty(shape, dtype)


@pytest.fixture
def device(monkeypatch):
    return Device(monkeypatch)


def count_calls(monkeypatch, owner, name: str) -> list[int]:
    """Count the calls of ``owner.name`` (a list of one count)."""
    calls = [0]
    original = getattr(owner, name)

    def counted(*args, **kwargs):
        calls[0] += 1
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, counted)
    return calls


# ---------------------------------------------------------------- Kernel.direct


def softmax_args(device, x):
    rows, cols = x.shape
    return (device.array(x.shape, x.dtype), x, rows, cols, x.strides[0] // x.itemsize, 1, cols)


def test_direct_sends_what_the_launcher_sends(device):
    kernel = nn.module("softmax.c").softmax
    x = device.array((5, 1001))
    args = softmax_args(device, x)
    kernel[(5,)](*args, num_warps=4, strided=True, BLOCK=1024, ROWS=1)
    run = kernel.direct((5,), args, 4, strided=True, BLOCK=1024, ROWS=1)
    run(*args)
    assert len(device.launches) == 2
    assert device.launches[0] == device.launches[1]
    other = softmax_args(device, device.array((5, 1001)))  # new addresses: they are sent
    run(*other)
    assert device.launches[2][2][:2] == (other[0].data.ptr, other[1].data.ptr)


def test_direct_goes_back_to_the_launcher_on_another_alignment(device, monkeypatch):
    kernel = nn.module("softmax.c").softmax
    x = device.array((4, 1025))
    args = softmax_args(device, x[:, :1024])
    misses = count_calls(monkeypatch, kernel, "_miss")  # before the launcher is made
    run = kernel.direct((4,), args, 4, strided=True, BLOCK=1024, ROWS=1)
    run(*args)
    assert misses[0] == 0
    shifted = x[:, 1:]  # 2-byte aligned: the key's 16-byte vector loads would fault
    run(args[0], shifted, *args[2:])
    assert misses[0] == 1  # the launcher: a new signature, its own specialisation
    assert device.launches[-1][2][1] == shifted.data.ptr


def test_direct_checks_the_scalars_it_is_told_to(device, monkeypatch):
    mod = nn.module("cross_entropy.c")
    count, targets = device.array((1,), np.float32), device.array((7,), np.int64)
    args = (count, targets, 7, -100)
    misses = count_calls(monkeypatch, mod.cross_entropy_count, "_miss")
    run = mod.cross_entropy_count.direct((1,), args, 4, checked=("ignore_index",), BLOCK=1024)
    run(count, targets, 7, -99)  # neither 1 nor a multiple of 16, as -100: the same key
    assert misses[0] == 0 and device.launches[-1][2][-1] == -99
    run(count, targets, 7, 32)  # divisible by 16: another specialisation
    assert misses[0] == 1 and device.launches[-1][2][-1] == 32
    run(count, targets, 7, np.int64(5))  # not a Python int: the launcher's full checks
    assert misses[0] == 2 and device.launches[-1][2][-1] == 5


def test_direct_values_that_do_not_fit_get_the_launchers_error(device):
    kernel = nn._norm_kernel("layernorm.c", "layer_norm_fwd")
    x, w, b = device.array((3, 64)), device.array((64,)), device.array((64,))
    stat = device.array((3,), np.float32)
    args = (device.array((3, 64)), stat, stat, x, w, b, 3, 64, 64, 1, 64, 1e-5)
    run = kernel.direct((3,), args, 1, strided=True, checked=("eps",), BLOCK=64, ROWS=1, EVEN=1)
    with pytest.raises(LaunchError, match="'eps' = 1e\\+300 does not fit f32"):
        run(*args[:-1], 1e300)
    with pytest.raises(LaunchError, match="'eps'.*must be a number"):
        run(*args[:-1], "1e-5")


# ---------------------------------------------------------------- the wrappers' plans


def wrapper_cases(device):
    rows, cols = 3, 1001
    x, dy = device.array((rows, cols)), device.array((rows, cols))
    wide = device.array((rows, 2 * cols))[:, ::2]
    w, b = device.array((cols,)), device.array((cols,))
    stat = device.array((rows,), np.float32)
    targets = device.array((rows,), np.int64)
    w_view = device.array((2 * cols,))[::2]
    return {
        "softmax": (nn.softmax, (x,)),
        "softmax strided": (nn.softmax, (wide,)),
        "log_softmax": (nn.log_softmax, (x,)),
        "softmax_backward": (nn.softmax_backward, (x, dy)),
        "log_softmax_backward": (nn.log_softmax_backward, (x, wide)),
        "layer_norm": (nn.layer_norm, (x, w, b, 1e-5)),
        "layer_norm weight view": (nn.layer_norm, (wide, w_view, b, 1e-3)),
        "layer_norm_backward": (nn.layer_norm_backward, (dy, x, w, stat, stat)),
        "rms_norm": (nn.rms_norm, (x, w)),
        "rms_norm_backward": (nn.rms_norm_backward, (dy, wide, w_view, stat)),
        "cross_entropy": (nn.cross_entropy, (x, targets, 5)),
        "cross_entropy_backward": (nn.cross_entropy_backward, (x, targets, stat, -100, 0.5)),
        "dropout": (nn.dropout, (x, 0.25, 12345)),
        "dropout_backward": (nn.dropout_backward, (wide, 0.5, 1)),
    }


def roles(device, launches, inputs, outputs) -> list:
    """The launches with each pointer replaced by its role: which input or output it is, or
    scratch (partial sums) — so two calls with different allocations compare equal."""
    named = {a.data.ptr: f"in{i}" for i, a in enumerate(inputs) if hasattr(a, "data")}
    named |= {a.data.ptr: f"out{i}" for i, a in enumerate(outputs)}

    def role(v):
        if isinstance(v, int) and BASE <= v < BASE + (1 << 40):
            return named.get(v, "scratch")
        return v

    return [(g, blk, tuple(map(role, values)), s, st) for g, blk, values, s, st in launches]


CASES = [
    "softmax",
    "softmax strided",
    "log_softmax",
    "softmax_backward",
    "log_softmax_backward",
    "layer_norm",
    "layer_norm weight view",
    "layer_norm_backward",
    "rms_norm",
    "rms_norm_backward",
    "cross_entropy",
    "cross_entropy_backward",
    "dropout",
    "dropout_backward",
]


@pytest.mark.parametrize("case", CASES)
def test_a_repeated_call_replays_its_plan(device, monkeypatch, case):
    fn, inputs = wrapper_cases(device)[case]
    first = fn(*inputs)
    outputs = first if isinstance(first, tuple) else (first,)
    launched = roles(device, device.launches, inputs, outputs)
    assert launched and len(nn._PLANS) == 1
    checks = count_calls(monkeypatch, arrays_module.Arrays, "__init__")
    binds = count_calls(monkeypatch, binder_module.Binder, "bind_device")
    launchers = count_calls(monkeypatch, kernel_module.Kernel, "__getitem__")
    for _ in range(3):
        device.launches.clear()
        again = fn(*inputs)
        outputs = again if isinstance(again, tuple) else (again,)
        assert all(o.data.ptr != f.data.ptr for o, f in zip(outputs, first, strict=False))
        assert roles(device, device.launches, inputs, outputs) == launched
    assert checks[0] == binds[0] == launchers[0] == 0  # the plan alone: no checks, no look-up
    assert len(nn._PLANS) == 1


def test_a_new_signature_is_checked_again(device, monkeypatch):
    x, w, b = device.array((3, 64)), device.array((64,)), device.array((64,))
    nn.layer_norm(x, w, b)
    checks = count_calls(monkeypatch, arrays_module.Arrays, "__init__")
    nn.layer_norm(x, w, b)
    assert checks[0] == 0
    with pytest.raises(LaunchError, match="weight must have shape \\(64,\\)"):
        nn.layer_norm(x, device.array((65,)), b)  # same x: the weight's signature differs
    with pytest.raises(LaunchError, match="bias has dtype int32"):
        nn.layer_norm(x, w, device.array((64,), np.int32))
    nn.layer_norm(device.array((3, 64), np.float32), device.array((64,), np.float32), b)
    assert checks[0] == 3 and len(nn._PLANS) == 2


def test_values_are_still_checked_on_a_replay(device):
    x = device.array((3, 64))
    nn.dropout(x, 0.5, 1)
    with pytest.raises(LaunchError, match="p must be in \\[0, 1\\), got 1.5"):
        nn.dropout(x, 1.5, 1)
    w, b = device.array((64,)), device.array((64,))
    nn.layer_norm(x, w, b)
    with pytest.raises(LaunchError, match="'eps' = 1e\\+300 does not fit f32"):
        nn.layer_norm(x, w, b, 1e300)
    nn.cross_entropy(x, device.array((3,), np.int64), 5)
    with pytest.raises(LaunchError, match="'ignore_index' = 18446744073709551616 does not fit"):
        nn.cross_entropy(x, device.array((3,), np.int64), 2**64)


def test_a_plan_replays_only_on_its_device(device, monkeypatch):
    x = device.array((3, 64))
    nn.softmax(x)
    checks = count_calls(monkeypatch, arrays_module.Arrays, "__init__")
    nn.softmax(x)
    assert checks[0] == 0
    monkeypatch.setattr(launch, "get_device", lambda: 1)
    monkeypatch.setattr(cupy.cuda, "Device", lambda index: _Entered(index))
    monkeypatch.setattr(cupy.cuda.runtime, "getDevice", lambda: 1)
    nn.softmax(x)
    assert checks[0] == 1  # another current device: the full path, which enters device 0


class _Entered:
    def __init__(self, index):
        self.index = index

    def __enter__(self):
        launch.get_device = lambda: self.index  # monkeypatch restores it after the test
        return self

    def __exit__(self, *exc):
        launch.get_device = lambda: 1
