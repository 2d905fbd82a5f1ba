"""One launch interface: every launch of the package goes through runtime/plan.py.

Checked without a GPU: the package's source spells the ``cuLaunchKernel`` call once
(``plan.launch_call``) and takes the binding once; the generated launchers of every bundled
kernel embed that call; a :class:`~teeny_tx.runtime.plan.Plan` lays its parameter block out as
the kernel reads it (tensor maps 64-byte aligned), rewrites addresses and tensor maps per call
and refuses an address off its alignment; the attention forward's TMA form launches through
``kernel.tma[grid]`` and its direct launch through a plan (the driver binding replaced by a
recorder that reads the block as ``cuLaunchKernel`` would).
"""

from __future__ import annotations

import ast
import ctypes
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest

import teeny_tx
from teeny_tx.library import KERNEL_FILES, kernel_text
from teeny_tx.runtime import launch, plan, tma

from .test_launch_direct import Device

PACKAGE = Path(teeny_tx.__file__).parent
NAMES = ("launch_kernel", "launchKernel", "cuLaunchKernel")
HANDLE = 0xC0FFEE


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        first = body[0] if isinstance(body, list) and body else None
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
            found.add(id(first.value))
    return found


def _mentions() -> dict[str, list[tuple[str, int]]]:
    """Per module of the package, what in its code (not its docstrings) names the driver's
    launch: a call of it, the binding taken (``launchKernel``), or call text (a string)."""
    out: dict[str, list[tuple[str, int]]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docs = _docstrings(tree)
        found = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                f = node.func
                name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
                if name.lstrip("_") in NAMES or name.endswith("launch_kernel"):
                    found.append(("call", node.lineno))
            elif isinstance(node, ast.Attribute) and node.attr in NAMES[1:]:
                found.append(("binding", node.lineno))
            elif (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and id(node) not in docs
                and any(n + "(" in node.value for n in NAMES)
            ):
                found.append(("text", node.lineno))
        if found:
            out[str(path.relative_to(PACKAGE))] = found
    return out


def test_the_package_spells_the_driver_launch_once():
    """One binding (CuPy's launchKernel, taken in plan.py), no direct call of it anywhere,
    and its call written once: the text launch_call returns, which plan.launch_block and the
    generated launchers are made of."""
    mentions = _mentions()
    assert set(mentions) == {"runtime/plan.py"}, mentions
    assert [kind for kind, _ in mentions["runtime/plan.py"]] == ["binding"], mentions
    tree = ast.parse((PACKAGE / "runtime" / "plan.py").read_text(encoding="utf-8"))
    texts = [  # f-strings of a call (the name, then its eleven arguments but the last)
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.JoinedStr)
        and sum(isinstance(v, ast.FormattedValue) for v in node.values) == 11
        and isinstance(node.values[-1], ast.Constant)
        and node.values[-1].value.endswith(", 0)")
    ]
    assert len(texts) == 1
    assert plan.launch_block.__code__.co_names == ("launch_kernel",)
    assert "ctypes.CDLL" not in (PACKAGE / "runtime" / "plan.py").read_text()
    opened = [p for p in PACKAGE.rglob("*.py") if '"libcuda.so.1"' in p.read_text()]
    assert [str(p.relative_to(PACKAGE)) for p in opened] == ["runtime/tma.py"]


@pytest.mark.parametrize("file", KERNEL_FILES)
def test_every_bundled_kernels_launcher_makes_the_one_call(file):
    """Each generated launcher (one device and several, a fixed grid and a grid function)
    makes exactly the call plan.launch_call spells, and nothing else launches in it but
    CuPy's function where no driver handle is at hand."""
    mod = teeny_tx.compile(kernel_text(file), name=f"kernels/{file}")
    for name, k in mod.kernels.items():
        b = k.binder
        P = b._prefix
        call = plan.launch_call(
            f"{P}launch_kernel", f"{P}handle", ("", "", ""), ("", "", ""), "", "", ""
        ).split("(")[0]
        for one, fixed in ((True, (3, 1, 1)), (False, None)):
            source = b._launcher_source(one, fixed)
            assert source.count(call + "(") == 1, (file, name)
            assert source.count("launch_kernel") == 1, (file, name)


class _Loaded:
    """A loaded kernel stand-in: a function with a driver handle (or none: CuPy's path)."""

    def __init__(self, calls: list, handle: int | None = HANDLE):
        self.calls = calls
        self.handle = handle

    def prepared(self, device, shared):
        calls = self.calls

        class Function:
            ptr = self.handle

            def __call__(self, grid, block, pointers, shared_mem, stream):
                calls.append(("cupy", grid, block, [p.ptr for p in pointers], stream))

        return Function()

    def error(self, device, err, grid, block, shared):
        return teeny_tx.LaunchError(f"failed: {err}")


@pytest.fixture
def driver(monkeypatch):
    """The driver binding replaced: each launch recorded with its parameter array read."""
    calls: list = []

    def launch_kernel(handle, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        calls.append(("driver", handle, (gx, gy, gz), (bx, by, bz), shared, stream, params))

    def replace(address, ptr):  # a fake map keeps its address in its first 8 bytes
        ctypes.c_uint64.from_address(address).value = ptr
        return 0

    encoded: list = []

    def tensor_map(ptr, dtype, dims, strides, box):
        encoded.append((ptr, dtype, tuple(dims), tuple(strides), tuple(box)))
        return np.frombuffer(ptr.to_bytes(8, "little") * 16, dtype=tma.TENSOR_MAP).copy()

    monkeypatch.setattr(plan, "launch_kernel", launch_kernel)
    monkeypatch.setattr(tma, "replace_address", lambda: replace)
    monkeypatch.setattr(tma, "tensor_map", tensor_map)
    monkeypatch.setattr(launch, "current_stream", lambda device: type("S", (), {"ptr": 0x55}))
    monkeypatch.setattr(launch, "single_device", lambda: True)
    return calls, encoded


def _read(params: int, codes) -> list:
    array = (ctypes.c_void_p * len(codes)).from_address(params)
    out = []
    for code, address in zip(codes, array, strict=True):
        if code == plan.MAP:
            assert address % 64 == 0  # a CUtensorMap parameter is 64-byte aligned
            out.append(("map", ctypes.c_uint64.from_address(address).value))
        else:
            size = struct.calcsize("@" + code)
            assert address % size == 0
            out.append(struct.unpack("@" + code, ctypes.string_at(address, size))[0])
    return out


def test_a_plan_writes_addresses_and_maps_into_its_block(driver):
    calls, encoded = driver
    codes = ("Q", "i", "Q", "f", "h", plan.MAP, "Q", plan.MAP)
    rng = np.random.default_rng(zlib.crc32(b"plan block"))
    first = [int(x) * 16 for x in rng.integers(1 << 20, 1 << 30, size=3)]
    values = [first[0], 7, first[1], 0.5, -3, None, first[2], None]
    maps = (
        plan.MapSlot(5, 1, "f16", (64, 9), (128,), (64, 8)),
        plan.MapSlot(7, 2, "bf16", (32, 5, 3), (64, 320), (32, 5, 1)),
    )
    made = plan.Plan(_Loaded([]), 0, (4, 2), (128,), 96, codes, values, (0, 2, 6), maps, (0,) * 3)
    assert made((*first,), 0x77)
    later = [a + 4096 for a in first]
    assert made(later, 0x78, ((3, 2.0),))
    assert not made([later[0] + 8, *later[1:]], 0x79)  # off the 16-byte alignment
    (_, h1, g1, b1, s1, st1, p1), (_, _, _, _, _, st2, p2) = calls
    assert (h1, g1, b1, s1, st1, st2) == (HANDLE, (4, 2, 1), (128, 1, 1), 96, 0x77, 0x78)
    assert _read(p2, codes) == [
        later[0], 7, later[1], 2.0, -3, ("map", later[1]), later[2], ("map", later[2])
    ]  # fmt: skip
    # each map encoded once, at the first addresses; later ones replaced in place
    assert [e[0] for e in encoded] == [first[1], first[2]]


def test_a_plan_without_a_context_makes_it_current_and_launches_again(driver, monkeypatch):
    calls, _ = driver
    made_current: list = []

    class NoContext(Exception):
        status = launch.INVALID_CONTEXT

    failures = [NoContext(), NoContext(), NoContext()]
    recorded = plan.launch_kernel

    def flaky(*args):
        if failures:
            raise failures.pop(0)
        recorded(*args)

    monkeypatch.setattr(launch, "DriverError", NoContext)
    monkeypatch.setattr(launch, "make_current", made_current.append)
    monkeypatch.setattr(plan, "launch_kernel", flaky)
    made = plan.Plan(_Loaded([]), 0, (1,), (32,), 0, ("Q",), (0x1000,), (0,))
    with pytest.raises(teeny_tx.LaunchError, match="failed"):  # no context, twice: the error
        made([0x2000], 5)
    assert made_current == [0] and calls == []
    assert made([0x3000], 6)  # no context, then one after make_current
    assert made_current == [0, 0] and len(calls) == 1 and calls[0][5] == 6
    assert _read(calls[0][6], ("Q",)) == [0x3000]


# ---------------------------------------------------------------- attention's TMA form

N, H, D = 256, 2, 128
STRIDES = (N * H * D, D, H * D, 1)


BAND = (-(1 << 30), 0)  # the band (lo, hi) of the kernel's mask, unused with BAND = 0


@pytest.fixture
def tma_forward(monkeypatch):
    """attention_fwd's TMA form (``kernel.tma``) whose specialisations are the real decided
    kernel for sm_90a with a stand-in for its cubin."""
    k = teeny_tx.compile(kernel_text("attention.c"), name="kernels/attention.c").attention_fwd
    args = ("f16", "f32", "f16", "f16", "f16", N, N, H, 1, *BAND) + STRIDES * 4
    args += (0.18, 0.0, 0.0, "f32", 0, 0)  # the scale; softcap and ALiBi off
    flags = {"BAND": 0, "SOFTCAP": 0, "ALIBI": 0, "BF16": 0, "D": D, "DH": D, "BM": 128}
    flags |= {"BN": 128, "WARP_SPECIALIZE": 0}
    real = k.tma.specialize(
        *args, num_warps=8, num_stages=3, target="sm_90a", strided=True, **flags
    )
    assert tma.pipeline_copies(real.kernel)  # its K and V loads are TMA copies
    plain = k.specialize(*args, num_warps=8, num_stages=3, target="sm_90a", strided=True, **flags)
    assert not tma.pipeline_copies(plain.kernel)  # the kernel's own form: cp.async copies

    class Spec:
        kernel, interface = real.kernel, real.interface
        block, shared_mem = real.block, real.shared_mem
        loaded = _Loaded([])

    return k, flags, Spec


def test_kernel_grid_launches_the_tma_form_through_its_plan(monkeypatch, driver, tma_forward):
    calls, encoded = driver
    k, flags, spec = tma_forward
    device = Device(monkeypatch, record_launches=False)
    monkeypatch.setattr(k.tma, "_specialization", lambda key: spec)
    shape = (1, N, H, D)
    for _ in range(2):  # the first call every check (the miss), the second the hot path
        o, q, kk, v = (device.array(shape) for _ in range(4))
        lse = device.array((1, H, N), np.float32)
        slopes = device.array((1,), np.float32)
        k.tma[(2, 2, 1)](
            o, lse, q, kk, v, N, N, H, 1, *BAND, *STRIDES * 4, 0.18, 0.0, 0.0, slopes, 0, 0,
            num_warps=8, num_stages=3, strided=True, **flags,
        )  # fmt: skip
        *_, params = calls[-1]
        entry = next(iter(k.tma._compiled.values()))
        codes = (*entry.packer.codes, plan.MAP, plan.MAP)
        got = _read(params, codes)
        assert got[:5] == [x.data.ptr for x in (o, lse, q, kk, v)]
        assert got[-2:] == [("map", kk.data.ptr), ("map", v.data.ptr)]
    assert [c[0] for c in calls] == ["driver", "driver"]
    assert calls[0][2:4] == ((2, 2, 1), spec.block)
    assert len(entry.plans) == 1  # one plan for the grid and sizes: its addresses rewritten
    dims = [e[2] for e in encoded]
    assert dims[0][:2] == (D, N) and dims[0] == dims[1]
    # direct: the plan the library's replays call, at new addresses
    args = (o, lse, q, kk, v, N, N, H, 1, *BAND, *STRIDES * 4, 0.18, 0.0, 0.0, slopes, 0, 0)
    run = k.tma.direct((2, 2, 1), args, 8, 3, strided=True, **flags)
    moved = [device.array(shape) for _ in range(4)]
    run(moved[0], lse, moved[1], moved[2], moved[3], *args[5:])
    got = _read(calls[-1][-1], codes)
    assert got[-2:] == [("map", moved[2].data.ptr), ("map", moved[3].data.ptr)]
    assert len(calls) == 3


def test_adamw_steps_replay_from_the_library_plan_cache(monkeypatch):
    """AdamW's replay is its plan in plans.PLANS: a later step with arrays like the first's
    (other addresses) is that replay, with no argument checks, launching at its arrays."""
    from teeny_tx.library import arrays as arrays_module
    from teeny_tx.library import fused, plans

    from .test_launch_direct import count_calls

    device = Device(monkeypatch)
    n = 1000 + zlib.crc32(b"adamw plan") % 97
    first = fused.adamw_step(*(device.array((n,), np.float32) for _ in range(4)), 1, lr=1e-3)
    assert first is not None and len(plans.PLANS) == 1
    checks = count_calls(monkeypatch, arrays_module.Arrays, "__init__")
    later = [device.array((n,), np.float32) for _ in range(4)]
    again = fused.adamw_step(*later, 2, lr=1e-3)
    assert again is first and checks[0] == 0 and len(device.launches) == 2
    assert device.launches[-1][2][:4] == tuple(a.data.ptr for a in later)
    assert device.launches[-1][2][4] == n
