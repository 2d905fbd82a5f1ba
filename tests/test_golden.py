"""Golden files: the generated CUDA of every bundled kernel at its canonical specialisations.

A change to the emitter or templates shows up here as a readable diff; re-bless on purpose
with `teeny-tx golden --bless`. Every golden file must also compile with NVRTC for sm_90
(no GPU needed) and, for Hopper builds, sm_90a.
"""

import difflib

import pytest

from teeny_tx.kernel import HEADERS
from teeny_tx.library import GOLDEN, bless
from teeny_tx.runtime import nvrtc


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


@pytest.mark.parametrize("arch", ["sm_90", "sm_90a"])
@pytest.mark.parametrize("golden", GOLDEN, ids=lambda g: g.stem)
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
