"""``teeny_tx.profile`` (teeny_tx/profiling.py) and ``teeny-tx profile``
on the GPU: the launch is timed, the rates are
bytes and flops over that time and below the roofline's ceilings, the output is right, and a
kernel that really spills is reported with the num_warps that does not."""

from __future__ import annotations

import shutil
import subprocess
import sys

import cupy as cp
import numpy as np
import pytest

import teeny_tx
from teeny_tx import cli
from teeny_tx import profiling as prof

COPY = """kernel copy(any *out, const any *x, i32 n, const i32 BLOCK)
{
    tile i = program_id(0) * BLOCK + arange(0, BLOCK);
    store(out + i, load(x + i, i < n, 0), i < n);
}
"""

ROW = """kernel row(f32 *out, const f32 *x, i32 n, const i32 BLOCK)
{
    tile cols = arange(0, BLOCK);
    tile v = load(x + program_id(0) * n + cols, cols < n, 0);
    tile e = exp(v);
    store(out + program_id(0) * n + cols, e / sum(e, 0), cols < n);
}
"""


def test_a_copy_is_timed_and_below_the_copy_ceiling():
    n = (1 << 26) + 3
    x = cp.asarray(np.random.default_rng(26).standard_normal(n).astype(np.float32))
    out = cp.zeros_like(x)
    k = teeny_tx.compile(COPY, name="copy.c").copy
    p = prof.profile(k, (teeny_tx.cdiv(n, 4096),), out, x, n, BLOCK=4096, num_warps=8)
    assert cp.array_equal(out, x)
    assert p.ms is not None and p.ms > 0 and p.bytes == 8 * n
    assert p.tbps == p.bytes / (p.ms * 1e-3) / 1e12
    assert 0.5 < p.tbps < 1.2 * p.roofline.tbps, p.report()
    assert "TB/s (" in p.report() and "not measured" not in p.report()


def test_a_spilling_row_kernel_is_diagnosed():
    n = 32768
    x = cp.asarray(np.random.default_rng(3).standard_normal((4, n)).astype(np.float32))
    out = cp.zeros_like(x)
    k = teeny_tx.compile(ROW, name="row.c").row
    p = prof.profile(k, (4,), out, x, n, BLOCK=n, num_warps=2)
    assert p.spill is not None and p.spill.spilled > prof.SPILL_LIMIT, p.report()
    assert p.spill.fix_num_warps is not None and p.spill.fix_num_warps > 2
    e = np.exp(cp.asnumpy(x))
    np.testing.assert_allclose(cp.asnumpy(out), e / e.sum(1, keepdims=True), rtol=1e-5)
    fixed = prof.profile(k, (4,), out, x, n, BLOCK=n, num_warps=p.spill.fix_num_warps)
    assert fixed.spill is None and fixed.resources.spilled == 0


def test_the_cli_times_a_bundled_kernel(capsys, tmp_path):
    png = tmp_path / "roof.png"
    n = 1 << 24
    argv = ["profile", "vector_add", "-D", "a=bf16", "-D", "b=bf16", "-D", "out=bf16"]
    argv += ["-D", f"n={n}", "-D", "BLOCK=2048", "--grid", str(n // 2048), "--num-warps", "8"]
    argv += ["--shape", f"a={n}", "--shape", f"b={n}", "--shape", f"out={n}", "--plot", str(png)]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert "time " in out and " us" in out and "TB/s (" in out
    assert png.is_file()


@pytest.mark.skipif(shutil.which("ncu") is None, reason="ncu is not on PATH")
def test_ncu_adds_the_main_stall_reasons():
    n = 1 << 22
    argv = [sys.executable, "-m", "teeny_tx.cli", "profile", "vector_add", "--ncu"]
    argv += ["-D", f"n={n}", "-D", "BLOCK=1024", "--grid", str(n // 1024)]
    argv += ["--shape", f"a={n}", "--shape", f"b={n}", "--shape", f"out={n}"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "stalls (ncu, warps per issued instruction): " in done.stdout, done.stdout
