"""Every teeny-tx usage mistake is one line on stderr and exit status 2, never a traceback."""

from __future__ import annotations

import os

import pytest

from teeny_tx import cli

BASE = ["compile", "kernels/vector_add.c", "-D", "BLOCK=256"]


def _one_line_usage_error(capsys, argv) -> str:
    try:
        code = cli.main(argv)
    except SystemExit as exc:  # argparse's own usage errors
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err
    return err


def test_a_define_without_a_value_is_a_usage_error(capsys) -> None:
    err = _one_line_usage_error(capsys, [*BASE, "-D", "BLOCK"])
    assert "-D takes NAME=VALUE, got 'BLOCK'" in err and err.count("\n") == 1


def test_an_unknown_kernel_name_lists_the_file_s_kernels(capsys) -> None:
    err = _one_line_usage_error(capsys, [*BASE, "-k", "vector_sub"])
    assert "no such kernel" in err and "vector_add" in err


@pytest.mark.parametrize("where", ["missing/dir/out.cu", "DIR", "/dev/full"])
def test_an_output_that_cannot_be_written_is_a_usage_error(capsys, tmp_path, where) -> None:
    if where == "/dev/full" and not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full on this system")
    target = {"DIR": str(tmp_path)}.get(where, where)
    if where.startswith("missing"):
        target = str(tmp_path / where)
    err = _one_line_usage_error(capsys, [*BASE, "-o", target])
    assert "cannot write" in err


@pytest.mark.parametrize("seed", ["-1", "x"])
def test_demo_refuses_a_bad_seed(capsys, seed) -> None:
    err = _one_line_usage_error(capsys, ["demo", "--interpret", "--seed", seed])
    assert "--seed" in err


def test_a_latin1_kernel_file_is_a_located_error_not_a_traceback(capsys, tmp_path) -> None:
    path = tmp_path / "k.c"
    with open("kernels/vector_add.c", "rb") as f:
        path.write_bytes(f.read() + b"/* \xe9 */\n")
    assert cli.main(["compile", str(path), "-D", "BLOCK=256"]) == 1
    err = capsys.readouterr().err
    assert "not UTF-8" in err and "Traceback" not in err
