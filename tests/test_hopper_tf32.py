"""TF32 on the Hopper path (CPU): f32 operands planned as wgmma's tf32 kind (K = 8 per
instruction, f32 tiles of one 128-byte panel loaded by TMA), K-major only; the generated
kernel compiles for sm_90a without spills and assembles to HGMMA ... TF32; the table's TF32
tiles; and linalg sends f32 products with precision='tf32' there (a mocked sm_90a device),
IEEE f32 and operands the tensor cores cannot read K-major to the cp.async kernel."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from teeny_tx.library import hopper_configs as hc
from teeny_tx.library import linalg
from teeny_tx.lower.hopper.matmul import HopperConfig, TmaUnsupported, plan_matmul
from tests.test_hopper_configs import _sass  # SASS through cuobjdump, where there is one

TF32 = dict(dtype="f32", out_dtype="f32", a_kmajor=True, b_kmajor=True, bias_dtype=None)


def test_f32_plans_as_tf32_with_one_panel_of_k():
    node = plan_matmul(**TF32, config=HopperConfig(128, 256, 64, 4))
    m = node.mainloop
    assert (m.instruction, m.k_step, m.bk) == ("tf32", 8, 32)  # BK: 128 bytes of f32
    assert node.a.panel == 32 and node.a.box == (32, 128) and node.b.box == (32, 256)
    assert node.stage_bytes == (128 + 256) * 32 * 4


@pytest.mark.parametrize("a_kmajor,b_kmajor", [(False, True), (True, False), (False, False)])
def test_tf32_needs_both_operands_k_major(a_kmajor, b_kmajor):
    with pytest.raises(TmaUnsupported, match="K-major only"):
        plan_matmul(**(TF32 | dict(a_kmajor=a_kmajor, b_kmajor=b_kmajor)))


def test_the_tf32_table():
    first = hc.table_candidates(4096, 4096, 132, True, 4096, tf32=True)[0]
    assert hc.with_epilogue(first, True, 4, 4) == hc.Candidate(
        HopperConfig(128, 256, 32, 4, 8, store_panels=1), True
    )
    small = hc.table_candidates(1024, 1024, 132, True, 1024, tf32=True)[0]
    assert (small.bm, small.bn, small.bk, small.split_k) == (64, 128, 32, 1)
    long_k = hc.table_candidates(512, 512, 132, True, 16384, tf32=True)[0]
    assert (long_k.bm, long_k.bn, long_k.bk, long_k.split_k) == (128, 128, 32, 8)
    for tma_store in (False, True):
        for config in hc.table_configs(tma_store, tf32=True):
            plan_matmul(**TF32, tma_store=tma_store, config=config)  # every row fits


@pytest.mark.parametrize(
    "tma_store,config,bias",
    [
        (False, HopperConfig(128, 256, 32, 4), None),
        (True, HopperConfig(128, 256, 32, 4, store_panels=1), "f32"),
        (True, HopperConfig(128, 128, 32, 5, split_k=2), None),
        (False, HopperConfig(256, 128, 32, 4, atoms=2), None),
    ],
)
def test_tf32_compiles_for_sm90a_without_spills(tma_store, config, bias, tmp_path):
    from teeny_tx.kernel import HopperSpecialization
    from teeny_tx.runtime import nvrtc

    product = TF32 | {"bias_dtype": bias, "activation": 1 if bias else 0}
    kernel = HopperSpecialization(plan_matmul(**product, tma_store=tma_store, config=config))
    assert f"wgmma.mma_async.sync.aligned.m64n{config.bn}k8.f32.tf32.tf32" in kernel.cuda_source
    assert "using T = float;" in kernel.cuda_source
    result = kernel.compiled
    assert nvrtc.spilled_bytes(result.log) == 0, result.log
    assert "0 bytes stack frame" in result.log
    sass = _sass(result.cubin, tmp_path)
    if sass is None:
        return
    assert f"HGMMA.64x{config.bn}x8.F32.TF32" in sass
    assert sass.count("HGMMA") >= 4 * config.atoms  # 4 k8 steps per 32-deep stage
    assert "UTMALDG" in sass and "LDL" not in sass and "STL" not in sass


# ------------------------------------------------------------------ linalg's routing


class _Dev(np.ndarray):
    """A NumPy array posing as a CuPy one (``.data.ptr``)."""

    @property
    def data(self):  # type: ignore[override]
        return SimpleNamespace(ptr=self.__array_interface__["data"][0])


class _Arrays:
    kind = "cupy"
    first = SimpleNamespace(device=SimpleNamespace(id=0))

    def dtype(self, x):
        return {np.dtype(np.float32): "f32", np.dtype(np.float16): "f16"}[x.dtype]

    known_dtype = dtype  # the fake's dtypes are all known

    def sms(self):
        return 132


def _aligned(shape, order="C"):
    raw = np.zeros(int(np.prod(shape)) + 16, np.float32)
    start = (-raw.__array_interface__["data"][0] % 16) // 4
    return raw[start : start + int(np.prod(shape))].reshape(shape, order=order).view(_Dev)


@pytest.fixture
def sm90a(monkeypatch):
    monkeypatch.setattr(linalg, "HOPPER", True)
    monkeypatch.setattr(linalg, "_hopper_device", lambda device: True)
    monkeypatch.setattr(linalg, "_spilled_bytes", lambda kernel, device: 0)
    monkeypatch.setattr(hc, "TUNE", False)
    hc.CHOICES.clear()
    yield
    hc.CHOICES.clear()


def _plan(a, b, m, n, k, precision):
    strides = [tuple(s // 4 for s in x.strides) for x in (a, b)]
    p = linalg._Product(m, n, k, 1, (0, *strides[0]), (0, *strides[1]), (0, n, 1))
    out = _aligned((m, n))
    return linalg._hopper_plan(_Arrays(), out, a, b, None, p, None, precision)


def test_linalg_sends_tf32_products_to_the_hopper_kernel(sm90a):
    m, n, k = 1000, 520, 1000
    a = _aligned((m, k))  # row-major: K contiguous
    b = _aligned((n, k)).T  # [K, N] with K contiguous: a linear layer's weight, no copy
    run = _plan(a, b, m, n, k, linalg.PRECISIONS["TF32"])
    assert run is not None, hc.report()
    node = run.kernel.node
    assert node.mainloop.instruction == "tf32" and node.a.kmajor and node.b.kmajor
    # 40 tiles of 128 x 128 (less than half a wave), 32 K blocks: three K slices each
    assert run.choice == "128x128x32 s5 g8 split3 tma-store epilogue: chosen"


def test_linalg_keeps_ieee_f32_and_mn_major_tf32_off_the_hopper_kernel(sm90a):
    m, n, k = 256, 256, 256
    a = _aligned((m, k))
    assert _plan(a, _aligned((n, k)).T, m, n, k, linalg.PRECISIONS["IEEE"]) is None
    # B [K, N] row-major (N contiguous): wgmma cannot read TF32 transposed; _k_contiguous
    # copies such an operand first where it is large, else the cp.async kernel runs
    assert _plan(a, _aligned((k, n)), m, n, k, linalg.PRECISIONS["TF32"]) is None
    assert "K-major only" in hc.report()
