"""A replayed Hopper launch encodes its tensor maps from the arrays of the current call: a
tensor map embeds its global address, so a plan replayed for new arrays of the same signature
must never pass the maps of the arrays it was made for. The maps' extents and byte strides are
those of the operands' views. CPU only: the encoder and CuPy's launch are replaced by
recorders."""

from __future__ import annotations

import numpy as np
import pytest

from teeny_tx import hopper_matmul
from teeny_tx.lower.hopper import HopperConfig, plan_matmul
from teeny_tx.runtime import launch, tma


class _Recorder:
    def __init__(self):
        self.encoded = []  # (ptr, dtype, inner, outer, stride bytes, box)
        self.launches = []  # the argument tuples

    def tensor_map(self, ptr, dtype, inner, outer, stride, box):
        self.encoded.append((ptr, dtype, inner, outer, stride, tuple(box)))
        value = np.zeros(1, tma.TENSOR_MAP)
        value.view(np.uint64)[0] = ptr  # the address, where the real map keeps it too
        return value

    def function(self, grid, block, args, shared, stream):
        self.launches.append(args)


@pytest.fixture
def recorder(monkeypatch):
    rec = _Recorder()
    monkeypatch.setattr(tma, "tensor_map_2d", rec.tensor_map)
    monkeypatch.setattr(launch, "get_device", lambda: 0)
    monkeypatch.setattr(launch, "pointer_arg", np.uint64)
    monkeypatch.setattr(launch, "convert_stream", lambda s: s)
    return rec


def _kernel(rec, **kw):
    node = plan_matmul(
        dtype="f16",
        out_dtype="f16",
        bias_dtype=None,
        config=HopperConfig(128, 128, 64, 4, 8),
        **kw,
    )
    kernel = hopper_matmul.HopperMatmulKernel(node)

    class Loaded:
        def prepared(self, device, shared):
            return rec.function

        def launch(self, grid, block, args, shared, stream=None):
            rec.function(grid, block, args, shared, stream)

    kernel.__dict__["loaded"] = Loaded()  # no cubin, no device
    return kernel


@pytest.mark.parametrize("a_kmajor, b_kmajor", [(True, True), (True, False), (False, True)])
@pytest.mark.parametrize("tma_store", [False, True])
def test_replayed_launcher_maps_follow_the_pointers(recorder, a_kmajor, b_kmajor, tma_store):
    m, n, k = 300, 200, 136
    a_stride = k if a_kmajor else m
    b_stride = k if b_kmajor else n
    kernel = _kernel(recorder, a_kmajor=a_kmajor, b_kmajor=b_kmajor, tma_store=tma_store)
    run = kernel.launcher(m, n, k, a_stride, b_stride, n, 1, 1.0, 132)
    calls = [(0x10000, 0x20000, 0x30000), (0x40000, 0x50000, 0x60000), (0x70000, 0x20000, 0x30000)]
    for c, a, b in calls:
        run(c, a, b, c)
    assert len(recorder.launches) == 3
    for (c, a, b), args in zip(calls, recorder.launches, strict=True):
        maps = [x for x in args if isinstance(x, np.ndarray) and x.dtype == tma.TENSOR_MAP]
        addresses = [int(x.view(np.uint64)[0]) for x in maps]
        assert addresses == ([a, b, c] if tma_store else [a, b])
        assert int(args[len(maps)]) == c  # the C pointer beside them
    # the extents and byte strides of each map are those of the operand's view
    for ptr, _, inner, outer, stride, box in recorder.encoded:
        if ptr in (0x20000, 0x50000):
            assert (inner, outer, stride) == ((k, m, 2 * k) if a_kmajor else (m, k, 2 * m))
        elif ptr in (0x30000, 0x60000):
            assert (inner, outer, stride) == ((k, n, 2 * k) if b_kmajor else (n, k, 2 * n))
        else:
            assert (inner, outer, stride, box) == (n, m, 2 * n, (64, 64))
        assert box[0] * 2 <= 128  # the 128-byte swizzle's inner box limit


# ------------------------------------------------------------------ the driver's launch


class _FakeDriver:
    """cuLaunchKernel's stand-in: decodes the parameter array as the kernel would read it."""

    def __init__(self, maps: int, split: bool):
        self.maps, self.split = maps, split
        self.calls = []

    def __call__(self, function, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        import ctypes

        at = [params[i] for i in range(len(params))]
        maps = [int.from_bytes(ctypes.string_at(a, 8), "little") for a in at[: self.maps]]
        rest = at[self.maps :]
        values = {
            "maps": maps,
            "c": ctypes.c_uint64.from_address(rest[0]).value,
            "bias": ctypes.c_uint64.from_address(rest[1]).value,
            "sizes": [ctypes.c_int32.from_address(a).value for a in rest[2:7]],
            "alpha": ctypes.c_float.from_address(rest[7]).value,
            "extra": [ctypes.c_uint64.from_address(a).value for a in rest[8:]],
        }
        self.calls.append((function, (gx, gy, gz), (bx, by, bz), shared, stream, values))
        return 0


@pytest.mark.parametrize("tma_store,split", [(False, 1), (True, 1), (True, 3)])
def test_driver_launch_packs_what_the_kernel_reads(recorder, monkeypatch, tma_store, split):
    m, n, k = 300, 200, 1000
    node = plan_matmul(
        dtype="f16",
        out_dtype="f16",
        bias_dtype=None,
        a_kmajor=True,
        b_kmajor=False,
        tma_store=tma_store,
        config=HopperConfig(128, 128, 64, 4, 8, split_k=split),
    )
    kernel = hopper_matmul.HopperMatmulKernel(node)
    fake = _FakeDriver(3 if tma_store else 2, split > 1)
    monkeypatch.setattr(hopper_matmul, "_cu_launch_kernel", lambda: fake)
    monkeypatch.setattr(hopper_matmul, "split_pointers", lambda *args: (0x111000, 0x222000))

    class Loaded:
        def prepared(self, device, shared):
            return type("Function", (), {"ptr": 0xF00})()  # a driver handle: the direct path

    kernel.__dict__["loaded"] = Loaded()
    run = kernel.launcher(m, n, k, k, n, n, 1, 0.5, 132)
    calls = [(0x10000, 0x20000, 0x30000, 0x90000), (0x40000, 0x50000, 0x60000, 0x40000)]
    for c, a, b, bias in calls + calls[:1]:
        run(c, a, b, bias, 77)
    assert recorder.launches == []  # nothing through CuPy's launch
    assert len(fake.calls) == 3
    for (c, a, b, bias), call in zip(calls + calls[:1], fake.calls, strict=True):
        function, grid, block, shared, stream, values = call
        assert (function, stream, shared) == (0xF00, 77, node.shared_bytes)
        assert grid == (kernel.grid(m, n, 132), 1, 1) and block == (384, 1, 1)
        assert values["maps"] == ([a, b, c] if tma_store else [a, b])
        assert (values["c"], values["bias"]) == (c, bias)
        assert values["sizes"] == [m, n, k, n, 1] and values["alpha"] == 0.5
        assert values["extra"] == ([0x111000, 0x222000] if split > 1 else [])
    # the maps of a pointer triple seen before are not encoded again
    assert len({e[0] for e in recorder.encoded}) == len(recorder.encoded)
