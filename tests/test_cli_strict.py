"""teeny-tx compile is strict: -D names the kernel lacks, and unknown --arch targets, are usage
errors; an integer scalar without -D compiles the general code (not the equal-to-1 case)."""

import pytest

from teeny_tx import cli


def test_a_define_the_kernel_does_not_have_is_an_error(capsys):
    assert cli.main(["compile", "kernels/vector_add.c", "-D", "BLOCK=256", "-D", "BLOK=64"]) == 2
    err = capsys.readouterr().err
    assert "-D BLOK: no such parameter of vector_add" in err and "BLOCK, a, b, n, out" in err


def test_an_integer_scalar_without_a_define_is_the_general_case(capsys):
    assert cli.main(["compile", "kernels/vector_add.c", "-D", "BLOCK=256"]) == 0
    general = capsys.readouterr().out
    header = general.splitlines()[1]
    assert "n % 16" not in header and "n == 1" not in header
    assert "offs < 1" not in general and "mask" in general
    assert cli.main(["compile", "kernels/vector_add.c", "-D", "BLOCK=256", "-D", "n=1"]) == 0
    one = capsys.readouterr().out
    assert one != general  # n=1 is the specialisation a launch with 1 gets, asked for by name
    assert cli.main(["compile", "kernels/vector_add.c", "-D", "BLOCK=256", "-D", "n=32"]) == 0
    assert "n % 16 == 0" in capsys.readouterr().out.splitlines()[1]


@pytest.mark.parametrize("arch", ["sm_91", "sm_9", "compute_90", "SM_90", ""])
def test_an_unknown_arch_is_a_usage_error(arch, capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["compile", "kernels/vector_add.c", "-D", "BLOCK=256", "--arch", arch])
    assert exit_.value.code == 2
    assert "unknown target" in capsys.readouterr().err


@pytest.mark.parametrize("arch", cli.KNOWN_ARCHS)
def test_every_known_arch_is_accepted(arch, monkeypatch, capsys):
    monkeypatch.setenv("TEENY_TX_ARCH", "sm_90")  # --arch sets it for the process
    assert cli.main(["compile", "kernels/vector_add.c", "-D", "BLOCK=256", "--arch", arch]) == 0
    assert "vector_add" in capsys.readouterr().out
