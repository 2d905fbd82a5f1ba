"""The GPU part of the mutant catalogue (tools/mutants.toml): every GPU mutant, applied in a
scratch copy, fails its targeted GPU tests. Skips without a GPU
(tests/gpu/conftest.py)."""

from __future__ import annotations

import pytest

from tools import mutants as catalogue

GPU = [m for m in catalogue.load() if m.device == "gpu"]  # tests/gpu/conftest.py skips


@pytest.mark.parametrize("mutant", GPU, ids=lambda m: m.name)
def test_gpu_mutant_is_killed(mutant):
    result = catalogue.run(mutant)
    assert result.status == "killed", (
        f"mutant {mutant.name} ({mutant.why}) survived {' '.join(mutant.tests)}:\n{result.output}"
    )
