"""Golden files: the generated CUDA of every bundled kernel at its canonical specialisations.

A change to the emitter or templates shows up here as a readable diff; re-bless on purpose
with `teeny-tx golden --bless`, the only writer of golden/ (these tests compare, and the
idempotence check blesses into a temporary directory). Each golden is lowered for its own
target (Golden.arch: sm_90, the portable path, or sm_90a, Hopper's wgmma), the same on every
machine, and must compile with NVRTC for it (no GPU needed); the sm_90 ones also for sm_90a,
for Hopper builds.
"""

import difflib
import os
from pathlib import Path

import pytest

import teeny_tx as tx
from teeny_tx.kernel import HEADERS
from teeny_tx.runtime import nvrtc

from . import cases
from .cases import GOLDEN, GOLDEN_DIR, KERNELS, bless, render_all

# each golden with the targets it must compile for: its own, and sm_90a for the portable ones
TARGETS = [
    (g, arch) for g in GOLDEN for arch in ([g.arch] if g.arch != "sm_90" else ["sm_90", "sm_90a"])
]


def compare_golden(path: Path, actual: str) -> None:
    """Fail (never write) when ``actual`` differs from the committed golden file ``path``."""
    assert path.exists(), f"missing {path}: run `teeny-tx golden --bless`"
    expected = path.read_text()
    if actual != expected:
        diff = "".join(
            difflib.unified_diff(
                expected.splitlines(True), actual.splitlines(True), "golden", "now"
            )
        )
        pytest.fail(f"generated CUDA changed; if intended, run `teeny-tx golden --bless`\n{diff}")


@pytest.mark.parametrize("golden", GOLDEN, ids=lambda g: g.stem)
def test_golden_matches(golden):
    compare_golden(golden.path, golden.render())


def test_render_is_deterministic():
    golden = GOLDEN[0]
    assert golden.render() == golden.render()


@pytest.mark.parametrize(("golden", "arch"), TARGETS, ids=lambda x: getattr(x, "stem", x))
def test_golden_compiles_with_nvrtc(golden, arch):
    cubin = nvrtc.compile_to_cubin(
        golden.path.read_text(), name=golden.kernel, arch=arch, headers=HEADERS
    )
    assert cubin[:4] == b"\x7fELF"


def test_bless_is_idempotent(tmp_path):
    """Blessing twice writes nothing the second time, and a blessing of the current compiler
    equals golden/ file for file (into a temporary directory: golden/ is never written)."""
    first = bless(tmp_path)
    assert len(first) == len(render_all()) and bless(tmp_path) == []
    for path in sorted(tmp_path.iterdir()):
        assert path.read_text() == (GOLDEN_DIR / path.name).read_text(), path.name


def test_a_mutated_kernel_fails_on_every_run(monkeypatch, tmp_path):
    """A one-character wrong edit of kernels/axpby.c (beta * b becomes beta + b), compiled from
    a temporary copy, fails the golden comparison on the first run and on the second: nothing
    the comparison does re-blesses golden/."""
    from teeny_tx.library import loader

    golden = next(g for g in GOLDEN if g.file == "axpby.c")
    committed = golden.path.read_bytes()
    text = (KERNELS / "axpby.c").read_text()
    assert text.count("beta * b") == 1
    copy = tmp_path / "axpby.c"
    copy.write_text(text.replace("beta * b", "beta + b"))
    mutated = tx.compile(copy, name="kernels/axpby.c")
    monkeypatch.setattr(
        cases, "module", lambda file: mutated if file == "axpby.c" else loader.module(file)
    )
    for _ in range(2):
        with pytest.raises(pytest.fail.Exception, match="generated CUDA changed"):
            compare_golden(golden.path, golden.render())
        assert golden.path.read_bytes() == committed


def test_golden_files_are_portable():
    for g in GOLDEN:
        text = g.path.read_text()
        assert "/work/" not in text and "/home/" not in text, f"{g.path} embeds an absolute path"
        assert f'"{g.source}"' in text


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
