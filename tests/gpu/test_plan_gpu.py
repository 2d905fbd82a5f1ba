"""Launch plans on the device: the attention forward's TMA form launched by ``kernel.tma[grid]``
(its tensor maps the plan's) and replayed by its direct plan at new addresses, each call against
float64 on the host; the same call through the cp.async kernels for comparison. sm_90 only
(TMA)."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from teeny_tx import nn
from teeny_tx.library import attention as tattn
from teeny_tx.library import module, plans
from teeny_tx.library.attention import attention_reference

cp = pytest.importorskip("cupy")
TOL = 6e-3  # f16, as tests/gpu/test_attention_gpu.py


@pytest.fixture(autouse=True)
def hopper(monkeypatch):
    try:
        if cp.cuda.runtime.getDeviceCount() == 0:
            pytest.skip("no CUDA device")
    except cp.cuda.runtime.CUDARuntimeError:
        pytest.skip("no CUDA device")
    if cp.cuda.Device().compute_capability != "90":
        pytest.skip("TMA needs a compute capability 9.0 device")
    monkeypatch.setattr(tattn, "TUNE", False)
    plans.PLANS.clear()
    yield
    plans.PLANS.clear()


def _qkv(seed: int, shape: tuple[int, int, int, int]):
    rng = np.random.default_rng(seed)
    host = [rng.standard_normal(shape).astype(np.float16) for _ in range(3)]
    return host, [cp.asarray(x) for x in host]


def _check(o, lse, host, causal):
    want_o, want_lse = attention_reference(*host, causal)
    got = cp.asnumpy(o).astype(np.float64)
    assert np.abs(got - want_o).max() / max(1, np.abs(want_o).max()) <= TOL
    np.testing.assert_allclose(cp.asnumpy(lse), want_lse, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("d", [64, 128])
def test_the_tma_form_launches_and_replays_through_its_plan(monkeypatch, causal, d):
    shape = (2, 333, 3, d)
    seed = zlib.crc32(f"plan tma {causal} {d}".encode())
    host, dev = _qkv(seed, shape)
    monkeypatch.setattr(tattn, "TMA", False)
    _check(*nn.attention(*dev, causal), host, causal)  # the cp.async kernels
    plans.PLANS.clear()
    monkeypatch.setattr(tattn, "TMA", True)
    _check(*nn.attention(*dev, causal), host, causal)  # kernel.tma[grid]: the entry's plan
    entries = module("attention.c").attention_fwd.tma._compiled.values()
    assert any(e.tma is not None and e.plans for e in entries)
    for step in range(2):  # the call's plan replayed: the direct plan at new addresses
        host, dev = _qkv(seed + 1 + step, shape)
        _check(*nn.attention(*dev, causal), host, causal)
    assert len(plans.PLANS) == 1
