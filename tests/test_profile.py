"""``teeny_tx.profile`` (teeny_tx/profiling.py) and ``teeny-tx profile``
on the CPU: no launch, no times; ptxas's
resources, the bytes and the intensity against the H200's roofline, a bundled kernel by name,
the roofline plot, clear errors for missing shapes and scalars, and the spill diagnostic (the
largest tiles and the num_warps that compiles without spills)."""

from __future__ import annotations

import numpy as np
import pytest

import teeny_tx
from teeny_tx import cli
from teeny_tx import profiling as prof
from teeny_tx.runtime import resources

SCALE = """kernel scale(f32 *out, const any *x, i32 n, const i32 BLOCK)
{
    tile i = program_id(0) * BLOCK + arange(0, BLOCK);
    store(out + i, 2.0f * (f32)load(x + i, i < n, 0), i < n);
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


def test_profile_without_a_gpu_reports_resources_and_no_time():
    k = teeny_tx.compile(SCALE, name="scale.c").scale
    n = 1001
    rng = np.random.default_rng(1001)
    out, x = np.zeros(n, np.float32), rng.standard_normal(n).astype(np.float16)
    p = prof.profile(k, (teeny_tx.cdiv(n, 256),), out, x, n, BLOCK=256, target="sm_90")
    assert p.ms is None and p.tbps is None and p.tflops is None
    assert p.bytes == n * 4 + n * 2 and p.flops == 0 and p.roofline is prof.H200
    assert p.resources == resources.of_specialization(p.spec) and p.resources.threads == 128
    assert p.spill is None
    text = p.report()
    assert "not measured (no GPU" in text and "registers per thread" in text
    assert f"bytes moved           {6 * n}\n" in text


def test_intensity_places_a_kernel_against_the_ridge():
    k = teeny_tx.compile(SCALE, name="scale.c").scale
    p = prof.profile(k, (1,), "f32", "f32", 64, BLOCK=64, bytes=1000, flops=500_000, target="sm_90")
    assert p.intensity == 500.0 > prof.H200.ridge
    assert "compute-bound" in p.report()
    q = prof.profile(k, (1,), "f32", "f32", 64, BLOCK=64, bytes=1000, flops=1000, target="sm_90")
    assert "memory-bound" in q.report()
    r = prof.profile(k, (1,), "f32", "f32", 64, BLOCK=64, target="sm_90")
    assert r.bytes == 0 and any("bytes moved unknown" in note for note in r.notes)


def test_the_largest_tiles_come_first():
    k = teeny_tx.compile(ROW, name="row.c").row
    spec = k.specialize("f32", "f32", 100, BLOCK=1024, num_warps=2, target="sm_90")
    found = prof.tiles(spec.kernel)
    # 1024 elements over 64 threads: 16 per thread, 64 bytes for i32 and f32 alike
    assert [(t.name, t.bytes_per_thread) for t in found] == [("cols", 64), ("e", 64), ("v", 64)]
    assert found[0].where == "row.c:3" and found[2].dtype == "f32"


def test_a_spilling_kernel_names_its_tiles_and_the_num_warps_that_fix_it(monkeypatch):
    k = teeny_tx.compile(ROW, name="row.c").row
    real = resources.of_specialization
    spills = {1: 4000, 2: 600, 4: 0, 8: 0}  # ptxas's spill by num_warps, for a fast test

    def fake(spec):
        found = real(spec)
        return resources.Resources(
            found.arch, found.threads, 255, spill_stores=spills[spec.kernel.num_warps]
        )

    monkeypatch.setattr(resources, "of_specialization", fake)
    p = prof.profile(k, (1,), "f32", "f32", 100, BLOCK=2048, num_warps=1, target="sm_90")
    assert p.spill is not None and p.spill.fix_num_warps == 4 and p.spill.num_warps == 1
    assert [t.name for t in p.spill.tiles] == ["cols", "e", "v"]
    text = p.report()
    assert "spills 4000 bytes per thread (more than 32)" in text
    assert "tile cols [2048] i32 at row.c:3: 256 bytes per thread at num_warps=1" in text
    assert "num_warps=4 compiles without spills" in text
    spills.update({2: 40, 4: 40, 8: 40, 16: 40, 32: 40})
    p = prof.profile(k, (1,), "f32", "f32", 100, BLOCK=2048, num_warps=1, target="sm_90")
    assert p.spill.fix_num_warps is None and "use a smaller tile" in p.report()
    spills[1] = prof.SPILL_LIMIT  # at the limit: tolerated
    assert prof.profile(k, (1,), "f32", "f32", 100, BLOCK=2048, num_warps=1).spill is None


def test_the_cli_profiles_a_bundled_kernel_by_name(capsys, tmp_path):
    pytest.importorskip("matplotlib")
    png = tmp_path / "roof.png"
    argv = ["profile", "vector_add", "-D", "a=f16", "-D", "b=f16", "-D", "out=f16"]
    argv += ["-D", "n=4096", "-D", "BLOCK=1024", "--grid", "4", "--arch", "sm_90"]
    argv += ["--shape", "a=4096", "--shape", "b=4096", "--shape", "out=64x64", "--plot", str(png)]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert out.startswith("kernel                vector_add (sm_90)")
    assert "bytes moved           24576" in out and "occupancy" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--shape", "a=16"], "--shape b=N[xM] is needed"),
        (["--shape", "a=16", "--shape", "b=16", "--shape", "out=16", "-D", "BLOCK=16"], "-D n="),
    ],
)
def test_the_cli_says_what_is_missing(capsys, extra, message):
    assert cli.main(["profile", "vector_add", *extra]) != 0
    assert message in capsys.readouterr().err


def test_the_cli_names_the_bundled_files_of_an_unknown_one(capsys):
    assert cli.main(["profile", "no_such_kernel"]) != 0
    err = capsys.readouterr().err
    assert "no kernel file 'no_such_kernel'" in err and "softmax" in err


_REASONS = ("barrier", "long_scoreboard", "wait", "math_pipe_throttle")
_METRICS = ",".join(
    f'"smsp__average_warps_issue_stalled_{r}_per_issue_active.ratio"' for r in _REASONS
)
NCU_CSV = (
    "==PROF== Connected to process 1234\n"
    f'"ID","Kernel Name",{_METRICS}\n'
    '"","","ratio","ratio","ratio","ratio"\n'
    '"0","row","0.52","7.31","1,002.5","0.10"\n'
)


def test_ncu_stall_reasons_are_parsed_largest_first():
    assert prof.parse_ncu_stalls(NCU_CSV) == [
        ("wait", 1002.5),
        ("long_scoreboard", 7.31),
        ("barrier", 0.52),
    ]
    assert prof.parse_ncu_stalls(NCU_CSV, top=1) == [("wait", 1002.5)]
    assert prof.parse_ncu_stalls("==PROF== no kernels were profiled\n") == []


def test_without_ncu_the_profile_says_so(monkeypatch):
    monkeypatch.setattr(prof.shutil, "which", lambda name: None)
    assert prof.ncu_stalls(["true"], "k") is None


def test_the_command_run_under_ncu_drops_ncu_and_the_plot():
    from teeny_tx.profile_cli import _without_ncu

    argv = ["profile", "f.c", "--ncu", "--plot", "r.png", "-D", "n=3", "--plot=x.png"]
    assert _without_ncu(argv) == ["profile", "f.c", "-D", "n=3"]
