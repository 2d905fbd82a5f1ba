"""The CPU part of the mutant catalogue (tools/mutants.toml, run by tools/mutants.py): every
mutant applies to this tree (its text occurs exactly once), and every CPU mutant, applied in a
scratch copy, fails its targeted tests. A survivor is a hole in the suite: a test to write, not
a mutant to drop. The GPU part is tests/gpu/test_mutants_gpu.py."""

from __future__ import annotations

import pytest

from tools import mutants as catalogue

MUTANTS = catalogue.load()
CPU = [m for m in MUTANTS if m.device == "cpu"]


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.name)
def test_every_mutant_applies_to_this_tree(mutant, tmp_path):
    target = tmp_path / mutant.file
    target.parent.mkdir(parents=True)
    target.write_text((catalogue.ROOT / mutant.file).read_text())
    mutant.apply(tmp_path)
    assert target.read_text() != (catalogue.ROOT / mutant.file).read_text()


def test_a_stale_mutant_fails_loudly(tmp_path):
    stale = CPU[0].__class__(**{**CPU[0].__dict__, "find": "text that is nowhere"})
    (tmp_path / stale.file).parent.mkdir(parents=True)
    (tmp_path / stale.file).write_text((catalogue.ROOT / stale.file).read_text())
    with pytest.raises(catalogue.MutantError, match="occurs 0 times"):
        stale.apply(tmp_path)


def test_the_catalogue_covers_the_kinds_of_bug():
    """The kinds of wrong edit the catalogue must hold, each at least once."""
    files = {m.file for m in MUTANTS}
    assert any(f.startswith("kernels/") for f in files)
    assert any(f.startswith("teeny_tx/lower/") for f in files)
    assert any(f.startswith("teeny_tx/interp/") for f in files)
    assert "teeny_tx/library/torch_ops.py" in files
    assert any(f.startswith(("prelude/", "teeny_tx/templates/")) for f in files)
    assert len(CPU) >= 12 and any(m.device == "gpu" for m in MUTANTS)


@pytest.mark.parametrize("mutant", CPU, ids=lambda m: m.name)
def test_cpu_mutant_is_killed(mutant):
    result = catalogue.run(mutant)
    assert result.status == "killed", (
        f"mutant {mutant.name} ({mutant.why}) survived {' '.join(mutant.tests)}:\n{result.output}"
    )
