"""The progress meter (teeny_tx/progress.py) and where it runs: on a terminal it rewrites one
line of stderr per step (a real pty, and a stream that says it is a terminal); on a pipe, a
file or with TEENY_TX_QUIET=1 it writes nothing. The autotuner reports config i of n and the
best so far; ``teeny-tx demo`` and ``teeny-tx golden`` step through their cases."""

from __future__ import annotations

import io
import os
import sys

import pytest

import teeny_tx
from teeny_tx import Autotuner, cli, progress
from teeny_tx.progress import Progress

from .conftest import KERNEL_FILE


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def loud(monkeypatch):
    monkeypatch.delenv("TEENY_TX_QUIET", raising=False)


def test_a_terminal_sees_each_step_rewritten_in_place():
    out = Terminal()
    with Progress(3, "work", stream=out) as p:
        for note in ("a long first note", "b", "c"):
            p.step(note)
    pad = " " * (len("work  1/3  a long first note") - len("work  2/3  b"))
    # a shorter line pads out what the longer one left behind; one newline at the end
    assert out.getvalue() == (
        "\rwork  1/3  a long first note\rwork  2/3  b" + pad + "\rwork  3/3  c\n"
    )


def test_a_real_pty_is_a_terminal():
    master, slave = os.openpty()
    with os.fdopen(slave, "w") as stream:
        assert progress.enabled(stream)
        with Progress(2, "pty", stream=stream) as p:
            p.step("x")
            p.step("y")
    data = b""
    while True:  # everything the slave wrote; EIO (or b"") once it is closed and drained
        try:
            chunk = os.read(master, 4096)
        except OSError:
            break
        if not chunk:
            break
        data += chunk
    os.close(master)
    data = data.decode()
    assert "pty  1/2  x" in data and "pty  2/2  y" in data


@pytest.mark.parametrize("quiet", [None, "1"])
def test_a_pipe_or_quiet_sees_nothing(monkeypatch, quiet):
    if quiet:
        monkeypatch.setenv("TEENY_TX_QUIET", quiet)
        stream: io.StringIO = Terminal()
    else:
        stream = io.StringIO()  # not a terminal
    with Progress(2, "work", stream=stream) as p:
        p.step("a")
        p.step("b")
        p.clear()
    assert stream.getvalue() == "" and p.done == 2


def test_quiet_zero_is_not_quiet(monkeypatch):
    monkeypatch.setenv("TEENY_TX_QUIET", "0")
    assert progress.enabled(Terminal())
    assert not progress.enabled(io.StringIO())


def test_clear_blanks_the_line():
    out = Terminal()
    p = Progress(1, "job", stream=out)
    p.step("now")
    p.clear()
    assert out.getvalue() == "\rjob  1/1  now\r" + " " * len("job  1/1  now") + "\r"


ROWS = """#pragma autotune key(n)
#pragma autotune config(BLOCK=64)
#pragma autotune config(BLOCK=128)
#pragma autotune config(BLOCK=256)
kernel k(f32 *out, i32 n, const i32 BLOCK)
{
    tile i = program_id(0) * BLOCK + arange(0, BLOCK);
    store(out + i, 1.0f, i < n);
}
"""


@pytest.mark.parametrize("terminal", [True, False])
def test_autotuning_reports_config_i_of_n_and_the_best(monkeypatch, tmp_path, terminal):
    monkeypatch.setenv("TEENY_TX_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("TEENY_TX_AUTOTUNE_PRINT", raising=False)
    err = Terminal() if terminal else io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    k = teeny_tx.compile(ROWS, name=KERNEL_FILE).k
    times = {64: 0.3, 128: 0.1, 256: 0.2}
    tuner = Autotuner(
        k, k.tune.configs, key=k.tune.key, timer=lambda c, run: times[c.kwargs["BLOCK"]]
    )
    assert tuner.best("f32", 1000).kwargs == {"BLOCK": 128}
    text = err.getvalue()
    if not terminal:
        assert text == ""
        return
    lines = [s.rstrip() for s in text.replace("\n", "\r").split("\r") if s.strip()]
    steps = [s for s in lines if s.startswith("autotune k")]  # (NVRTC's meter may come first)
    c64, c128, c256 = (str(c) for c in k.tune.configs)
    assert steps == [
        f"autotune k  1/3  {c64}: 0.3000 ms; best {c64} 0.3000 ms",
        f"autotune k  2/3  {c128}: 0.1000 ms; best {c128} 0.1000 ms",
        f"autotune k  3/3  {c256}: 0.2000 ms; best {c128} 0.1000 ms",
    ]
    assert "BLOCK=256" in c256
    assert text.endswith("\n")


def test_golden_steps_through_its_files(monkeypatch, capsys):
    err = Terminal()
    monkeypatch.setattr(sys, "stderr", err)
    cases = cli.checkout_cases("golden")
    first = cases.GOLDEN[:2]
    monkeypatch.setattr(cases, "GOLDEN", first)
    monkeypatch.setattr(cases, "HOPPER_GOLDENS", {})
    assert cli.main(["golden"]) == 0
    text = err.getvalue()
    assert f"teeny-tx golden  1/2  {first[0].path.name}" in text
    assert f"teeny-tx golden  2/2  {first[1].path.name}" in text
    assert "2 of 2 golden files match" in capsys.readouterr().out


def test_the_parallel_compiles_step_once_per_config(monkeypatch, tmp_path):
    from teeny_tx.runtime import autotune

    monkeypatch.setenv("TEENY_TX_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("TEENY_TX_COMPILE_THREADS", "2")
    err = Terminal()
    monkeypatch.setattr(sys, "stderr", err)
    k = teeny_tx.compile(ROWS, name=KERNEL_FILE).k
    specs = [k.specialize("f32", 1000, BLOCK=b, target="sm_90") for b in (64, 128, 256)]
    autotune.compile_cubins([specs[0], None, specs[1], specs[2]])
    assert all("cubin" in spec.__dict__ for spec in specs)  # compiled, memoised
    steps = [s.rstrip() for s in err.getvalue().rstrip("\n").split("\r") if s.strip()]
    assert [s.split("  ")[1] for s in steps] == ["1/3", "2/3", "3/3"]
    assert all(s.startswith("NVRTC 2 threads  ") and s.endswith("  k") for s in steps)
