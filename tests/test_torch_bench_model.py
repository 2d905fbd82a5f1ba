"""bench/bench_model.py --smoke: the tiny GPT trained for two steps on the CPU with each
implementation (teeny_tx's kernels on the interpreter, eager and under torch.compile with
aot_eager; torch eager and compiled): every row measured, the losses of all four equal to
torch eager's within f32 rounding, the table and the loss plot written."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

BENCH = Path(__file__).resolve().parents[1] / "bench"


def _bench():
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))  # bench/ is not a package: its scripts import common
    spec = importlib.util.spec_from_file_location("bench_model", BENCH / "bench_model.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_smoke_trains_every_implementation(tmp_path, capsys):
    table, png = tmp_path / "model.md", tmp_path / "loss.png"
    args = ["--smoke", "--steps", "2", "--out", str(table), "--plot", str(png)]
    status = _bench().main(args)
    out = capsys.readouterr().out
    assert status == 0, out
    text = table.read_text()
    assert re.search(r"^date: \d{4}-\d\d-\d\dT[\d:]+Z, device: CPU", text, re.M), text
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 7 and cells[0] in (
            "teeny_tx",
            "teeny_tx+compile",
            "torch",
            "torch+compile",
        ):
            rows[cells[0]] = cells
    assert set(rows) == {"teeny_tx", "teeny_tx+compile", "torch", "torch+compile"}, text
    first, last = float(rows["torch"][4]), float(rows["torch"][5])
    assert last < first  # it learns
    for name, cells in rows.items():
        assert float(cells[1].replace(",", "")) > 0, name
        assert abs(float(cells[5]) - last) <= 1e-4 * last, (name, cells)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_graph_rows_need_cuda(capsys):
    """The +graph rows replay a CUDA graph: on the CPU they are refused by name, not run."""
    with pytest.raises(SystemExit):
        _bench().main(["--smoke", "--impls", "teeny_tx+graph"])
    assert "choose from teeny_tx, teeny_tx+compile, torch, torch+compile" in capsys.readouterr().err
