"""teeny_tx.Target: features and limits derived from the architecture name, the environment
read (never written) at the public boundary, and the device's default."""

from __future__ import annotations

import os

import pytest

import teeny_tx as tx
from teeny_tx.runtime import launch
from teeny_tx.target import Target


@pytest.mark.parametrize(
    ("arch", "sm", "wgmma", "tma", "mma_sync", "shared"),
    [
        ("sm_80", 80, False, False, True, 166912),
        ("sm_86", 86, False, False, True, 101376),
        ("sm_89", 89, False, False, True, 101376),
        ("sm_90", 90, False, True, True, 232448),
        ("sm_90a", 90, True, True, True, 232448),
        ("sm_75", 75, False, False, False, 49152),
    ],
)
def test_features_follow_the_architecture(arch, sm, wgmma, tma, mma_sync, shared):
    t = Target.from_arch(arch)
    assert (t.arch, t.sm, t.wgmma, t.tma, t.mma_sync) == (arch, sm, wgmma, tma, mma_sync)
    assert t.setmaxnreg == wgmma and t.arch_specific == arch.endswith("a")
    assert t.clusters == tma and t.cp_async == mma_sync
    assert t.max_shared_per_block == shared and t.max_registers_per_thread == 255
    assert str(t) == arch and Target.of(arch) == t and Target.of(t) is t


@pytest.mark.parametrize("bad", ["sm90", "sm_9", "compute_90", "sm_90b", "", "SM_90"])
def test_a_bad_name_is_a_clear_error(bad):
    with pytest.raises(tx.TeenyError, match="expected sm_XY or sm_XYa"):
        Target.from_arch(bad)


def test_targets_are_frozen_and_hashable():
    t = Target.from_arch("sm_90a")
    with pytest.raises(AttributeError):
        t.wgmma = False  # type: ignore[misc]
    assert {t: 1}[Target.from_arch("sm_90a")] == 1


def test_from_env_reads_the_variable(monkeypatch):
    monkeypatch.setenv("TEENY_TX_ARCH", "sm_80")
    assert Target.from_env() == Target.from_arch("sm_80")
    monkeypatch.setenv("TEENY_TX_ARCH", "")
    assert Target.from_env() is None
    monkeypatch.delenv("TEENY_TX_ARCH")
    assert Target.from_env() is None


def test_the_device_default_without_a_gpu():
    if launch.has_gpu():
        pytest.skip("checks the no-GPU default")
    assert launch.device_target().arch == "sm_90"
    assert launch.device_target(hopper_features=True).arch == "sm_90"
    assert Target.for_capability((9, 0), hopper_features=True).arch == "sm_90a"
    assert Target.for_capability((9, 0)).arch == "sm_90"
    assert Target.for_capability((8, 6), hopper_features=True).arch == "sm_86"


def test_compile_takes_a_target_and_never_writes_the_environment(monkeypatch):
    monkeypatch.delenv("TEENY_TX_ARCH", raising=False)
    text = "kernel k(f32 *out, const i32 BLOCK)\n{\n    store(out + arange(0, BLOCK), 1.0f);\n}\n"
    module = tx.compile(text, name="kernels/t.c", target="sm_90a")
    assert module.target == Target.from_arch("sm_90a")
    assert module.k.specialize("f32", BLOCK=128).target.arch == "sm_90a"
    assert module.k.specialize("f32", BLOCK=128, target="sm_80").arch == "sm_80"
    assert "TEENY_TX_ARCH" not in os.environ
    monkeypatch.setenv("TEENY_TX_ARCH", "sm_89")
    assert tx.compile(text, name="kernels/t.c").target.arch == "sm_89"


def test_target_is_public():
    assert tx.Target is Target
