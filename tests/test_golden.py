"""Golden files: the generated CUDA of every bundled kernel at its canonical specialisations.

A change to the emitter or templates shows up here as a readable diff; re-bless on purpose
with `teeny-tx golden --bless`. Each golden is lowered for its own target (Golden.arch: sm_90,
the portable path, or sm_90a, Hopper's wgmma), the same on every machine, and must compile with
NVRTC for it (no GPU needed); the sm_90 ones also for sm_90a, for Hopper builds.
"""

import difflib
import os

import pytest

import teeny_tx as tx
from teeny_tx.kernel import HEADERS
from teeny_tx.runtime import nvrtc

from .cases import GOLDEN, KERNELS, bless

# each golden with the targets it must compile for: its own, and sm_90a for the portable ones
TARGETS = [
    (g, arch) for g in GOLDEN for arch in ([g.arch] if g.arch != "sm_90" else ["sm_90", "sm_90a"])
]


@pytest.mark.parametrize("golden", GOLDEN, ids=lambda g: g.stem)
def test_golden_matches(golden):
    assert golden.path.exists(), f"missing {golden.path}: run `teeny-tx golden --bless`"
    expected = golden.path.read_text()
    actual = golden.render()
    if actual != expected:
        diff = "".join(
            difflib.unified_diff(
                expected.splitlines(True), actual.splitlines(True), "golden", "now"
            )
        )
        pytest.fail(f"generated CUDA changed; if intended, run `teeny-tx golden --bless`\n{diff}")


def test_render_is_deterministic():
    golden = GOLDEN[0]
    assert golden.render() == golden.render()


@pytest.mark.parametrize(("golden", "arch"), TARGETS, ids=lambda x: getattr(x, "stem", x))
def test_golden_compiles_with_nvrtc(golden, arch):
    cubin = nvrtc.compile_to_cubin(
        golden.path.read_text(), name=golden.kernel, arch=arch, headers=HEADERS
    )
    assert cubin[:4] == b"\x7fELF"


def test_bless_is_idempotent():
    assert bless() == []


def test_golden_files_are_portable():
    for g in GOLDEN:
        text = g.path.read_text()
        assert "/work/" not in text and "/home/" not in text, f"{g.path} embeds an absolute path"
        assert f'"kernels/{g.file}"' in text


def test_matmul_goldens_cover_both_lowerings():
    matmuls = {g.stem: g for g in GOLDEN if g.kernel == "matmul"}
    assert {g.arch for g in matmuls.values()} == {"sm_90", "sm_90a"}
    for g in matmuls.values():
        text = g.path.read_text()
        if g.arch == "sm_90a":
            assert "wgmma.mma_async" in text, g.stem
        else:
            assert "wgmma" not in text and "tx::Mma" in text, g.stem


@pytest.mark.parametrize("outside", [None, "sm_90", "sm_90a", "sm_80"])
def test_render_ignores_the_machine_target(monkeypatch, outside):
    """A golden renders for its own arch whatever TEENY_TX_ARCH (or the GPU) would choose, and
    leaves TEENY_TX_ARCH as it found it."""
    if outside is None:
        monkeypatch.delenv("TEENY_TX_ARCH", raising=False)
    else:
        monkeypatch.setenv("TEENY_TX_ARCH", outside)
    for g in GOLDEN:
        if g.kernel == "matmul":
            assert g.render() == g.path.read_text(), g.stem
    assert os.environ.get("TEENY_TX_ARCH") == outside


def test_the_environment_is_read_once_per_module(monkeypatch):
    """TEENY_TX_ARCH is read when a module is compiled; changing it later does not change what
    that module's kernels compile for (an explicit target still does)."""
    monkeypatch.setenv("TEENY_TX_ARCH", "sm_90a")
    matmul = tx.compile(KERNELS / "matmul.c", name="kernels/matmul.c").matmul
    golden = next(g for g in GOLDEN if g.stem == "matmul.f16.bias_gelu.sm90a")
    options = {"num_warps": golden.num_warps, "num_stages": golden.num_stages}
    monkeypatch.setenv("TEENY_TX_ARCH", "sm_90")
    spec = matmul.specialize(*golden.args, **options, **golden.constexprs)
    assert spec.arch == "sm_90a" and spec.target.wgmma
    assert spec.cuda_source == golden.path.read_text()
    portable = matmul.specialize(*golden.args, **options, target="sm_90", **golden.constexprs)
    assert portable.arch == "sm_90" and "wgmma" not in portable.cuda_source
    assert os.environ["TEENY_TX_ARCH"] == "sm_90"  # compiling never writes it


def test_specialisations_are_memoised_per_target():
    """A specialisation built for one target is not reused for another (the memo key holds the
    arch)."""
    matmul = tx.compile(KERNELS / "matmul.c", name="kernels/matmul.c").matmul  # fresh: no memo
    golden = next(g for g in GOLDEN if g.stem == "matmul.f16.bias_gelu.sm90a")

    def source(arch):
        spec = matmul.specialize(
            *golden.args,
            num_warps=golden.num_warps,
            num_stages=golden.num_stages,
            target=arch,
            **golden.constexprs,
        )
        assert spec.arch == arch
        return spec.cuda_source

    portable = source("sm_90")
    hopper = source("sm_90a")
    assert hopper != portable
    assert "wgmma.mma_async" in hopper and "wgmma" not in portable
    assert source("sm_90") == portable  # each target's specialisation stays memoised
    assert hopper == golden.path.read_text()
