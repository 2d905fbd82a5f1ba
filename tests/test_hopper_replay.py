"""A replayed Hopper launch encodes its tensor maps from the arrays of the current call: a
tensor map embeds its global address, so a plan replayed for new arrays of the same signature
must never pass the maps of the arrays it was made for. The maps' extents and byte strides are
those of the operands' views. CPU only: the encoder and CuPy's launch are replaced by
recorders."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from teeny_tx.kernel import HopperSpecialization
from teeny_tx.lower.hopper.matmul import HopperConfig, plan_matmul
from teeny_tx.runtime import hopper, launch, plan, tma


class _Recorder:
    """The encoder, the map's address rewrite and the driver's launch, recorded: a fake map
    keeps its address in its first 8 bytes (where the real one keeps it too)."""

    def __init__(self):
        self.encoded = []  # (ptr, dtype, dims, strides, box)
        self.calls = []  # (handle, grid, block, shared, stream, params address)
        self.layout = (2, False)  # (maps, split): the block read at the launch, as the driver does

    def tensor_map(self, ptr, dtype, dims, strides, box):
        self.encoded.append((ptr, dtype, tuple(dims), tuple(strides), tuple(box)))
        value = np.zeros(1, tma.TENSOR_MAP)
        value.view(np.uint64)[0] = ptr
        return value

    def launch_kernel(self, handle, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        values = _read(params, *self.layout)
        self.calls.append((handle, (gx, gy, gz), (bx, by, bz), shared, stream, values))


@pytest.fixture(params=["replace", "encode"])
def recorder(monkeypatch, request):
    """With libcuda's cuTensorMapReplaceAddress, and without it (each map encoded again)."""
    rec = _Recorder()
    rec.mode = request.param

    def replace(address, ptr):
        ctypes.c_uint64.from_address(address).value = ptr
        return 0

    monkeypatch.setattr(tma, "tensor_map", rec.tensor_map)
    rewrite = replace if request.param == "replace" else None
    monkeypatch.setattr(tma, "replace_address", lambda: rewrite)
    monkeypatch.setattr(plan, "launch_kernel", rec.launch_kernel)
    monkeypatch.setattr(launch, "get_device", lambda: 0)
    monkeypatch.setattr(launch, "current_stream", lambda device: type("S", (), {"ptr": 0x55}))
    monkeypatch.setattr(hopper, "split_pointers", lambda *args: [0x111000, 0x222000])
    return rec


def _kernel(**kw):
    split = kw.pop("split", 1)
    node = plan_matmul(
        dtype="f16",
        out_dtype="f16",
        bias_dtype=None,
        config=HopperConfig(128, 128, 64, 4, 8, split_k=split),
        **kw,
    )
    kernel = HopperSpecialization(node)

    class Loaded:
        def prepared(self, device, shared):
            return type("Function", (), {"ptr": 0xF00})()  # a driver handle

    kernel.__dict__["loaded"] = Loaded()  # no cubin, no device
    return kernel


def _read(params: int, maps: int, split: bool) -> dict:
    count = maps + 8 + (2 if split else 0)
    at = list((ctypes.c_void_p * count).from_address(params))
    assert all(a % 64 == 0 for a in at[:maps])  # CUtensorMap parameters: 64-byte aligned
    rest = at[maps:]
    return {
        "maps": [ctypes.c_uint64.from_address(a).value for a in at[:maps]],
        "c": ctypes.c_uint64.from_address(rest[0]).value,
        "bias": ctypes.c_uint64.from_address(rest[1]).value,
        "sizes": [ctypes.c_int32.from_address(a).value for a in rest[2:7]],
        "alpha": ctypes.c_float.from_address(rest[7]).value,
        "extra": [ctypes.c_uint64.from_address(a).value for a in rest[8:]],
    }


@pytest.mark.parametrize("a_kmajor, b_kmajor", [(True, True), (True, False), (False, True)])
@pytest.mark.parametrize("tma_store", [False, True])
def test_replayed_launcher_maps_follow_the_pointers(recorder, a_kmajor, b_kmajor, tma_store):
    m, n, k = 300, 200, 136
    a_stride = k if a_kmajor else m
    b_stride = k if b_kmajor else n
    kernel = _kernel(a_kmajor=a_kmajor, b_kmajor=b_kmajor, tma_store=tma_store)
    recorder.layout = (3 if tma_store else 2, False)
    run = kernel.launcher(m, n, k, a_stride, b_stride, n, 1, 1.0, 132)
    calls = [(0x10000, 0x20000, 0x30000), (0x40000, 0x50000, 0x60000), (0x70000, 0x20000, 0x30000)]
    for c, a, b in calls:
        run(c, a, b, c)
    assert len(recorder.calls) == 3
    for (c, a, b), call in zip(calls, recorder.calls, strict=True):
        values = call[-1]
        assert values["maps"] == ([a, b, c] if tma_store else [a, b])
        assert values["c"] == c  # the C pointer beside them

    # the extents and byte strides of each map are those of the operand's view (a row's
    # stride at least its bytes rounded up to 16, as TMA takes it)
    def view(inner, outer, stride):
        return (inner, outer, max(stride, -(-inner * 2 // 16) * 16))

    for ptr, _, dims, strides, box in recorder.encoded:
        if ptr in (0x20000, 0x50000):
            assert (*dims, *strides) == (view(k, m, 2 * k) if a_kmajor else view(m, k, 2 * m))
        elif ptr in (0x30000, 0x60000):
            assert (*dims, *strides) == (view(k, n, 2 * k) if b_kmajor else view(n, k, 2 * n))
        else:
            assert (*dims, *strides, box) == (*view(n, m, 2 * n), (64, 64))
        assert box[0] * 2 <= 128  # the 128-byte swizzle's inner box limit


@pytest.mark.parametrize("tma_store,split", [(False, 1), (True, 1), (True, 3)])
def test_driver_launch_packs_what_the_kernel_reads(recorder, tma_store, split):
    m, n, k = 300, 200, 1000
    kernel = _kernel(a_kmajor=True, b_kmajor=False, tma_store=tma_store, split=split)
    node = kernel.node
    recorder.layout = (3 if tma_store else 2, split > 1)
    run = kernel.launcher(m, n, k, k, n, n, 1, 0.5, 132)
    calls = [(0x10000, 0x20000, 0x30000, 0x90000), (0x40000, 0x50000, 0x60000, 0x40000)]
    for c, a, b, bias in calls + calls[:1]:
        run(c, a, b, bias, 77)
    run(*calls[1], None, 2.0)  # alpha of the call; CuPy's current stream
    assert len(recorder.calls) == 4
    for (c, a, b, bias), call in zip(calls + calls[:1] + calls[1:], recorder.calls, strict=True):
        function, grid, block, shared, stream, values = call
        assert (function, shared) == (0xF00, node.shared_bytes)
        assert grid == (kernel.grid(m, n, 132), 1, 1) and block == (384, 1, 1)
        assert values["maps"] == ([a, b, c] if tma_store else [a, b])
        assert (values["c"], values["bias"]) == (c, bias)
        assert values["sizes"] == [m, n, k, n, 1]
        assert values["extra"] == ([0x111000, 0x222000] if split > 1 else [])
    assert [c[4] for c in recorder.calls] == [77, 77, 77, 0x55]
    assert [c[-1]["alpha"] for c in recorder.calls] == [0.5, 0.5, 0.5, 2.0]
    # with cuTensorMapReplaceAddress each map is encoded once, at the first call's address;
    # without it, once per call whose address changed (the encoder's cache keeps them)
    first = [0x20000, 0x30000] + ([0x10000] if tma_store else [])
    if recorder.mode == "replace":
        assert sorted(e[0] for e in recorder.encoded) == sorted(first)
    else:
        assert len(recorder.encoded) == len(first) * 4
