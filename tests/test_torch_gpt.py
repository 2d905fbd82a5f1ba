"""examples/gpt: the tiny configuration for a few steps on CPU tensors (teeny_tx's kernels on
the interpreter) against the same model in plain torch, from one initialisation on the same
batches: every parameter's gradient at step 1 within 1e-4 of torch's (relative to its largest
element) and each loss within 1e-3 relative (train.py's checks, exit status 0)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

TRAIN = Path(__file__).resolve().parents[1] / "examples" / "gpt" / "train.py"


def _train():
    spec = importlib.util.spec_from_file_location("gpt_train", TRAIN)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_tiny_gpt_tracks_torch(tmp_path, capsys):
    status = _train().main(
        ["--config", "tiny", "--steps", "3", "--device", "cpu", "--out", str(tmp_path)]
    )
    out = capsys.readouterr().out
    assert status == 0, out
    assert "step 1 gradients: 29 parameters" in out and "ok" in out
    record = json.loads((tmp_path / "losses.json").read_text())
    ours, theirs = record["losses"]["teeny_tx"], record["losses"]["torch"]
    assert len(ours) == len(theirs) == 3
    assert ours[-1] < ours[0]  # it learns
    for a, b in zip(ours, theirs, strict=True):
        assert abs(a - b) <= 1e-3 * abs(b)
