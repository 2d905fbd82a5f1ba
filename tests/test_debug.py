"""static_assert, device_print and device_assert: compiled in only for debug builds."""

import numpy as np
import pytest

import teeny_tx as tx
from teeny_tx.kernel import HEADERS
from teeny_tx.runtime import nvrtc

SOURCE = """
kernel checked(f32 *out, const f32 *x, i32 n, const i32 BLOCK)
{
    static_assert(BLOCK >= 16, "BLOCK must be at least 16");
    tile offs = program_id(0) * BLOCK + arange(0, BLOCK);
    tile v = load(x + offs, offs < n, 1.0f);
    device_assert(v > 0.0f, "inputs must be positive");
    device_print("v", v, offs);
    device_print("n", n);
    store(out + offs, sqrt(v), offs < n);
}
"""


def test_static_assert_reports_the_constexprs():
    module = tx.compile(SOURCE, name="kernels/checked.c")
    with pytest.raises(
        tx.CompileError, match=r"static_assert failed: BLOCK must be at least 16"
    ) as err:
        module.checked.cuda_source("f32", "f32", 8, BLOCK=8)
    assert "kernels/checked.c:4:19" in str(err.value) and "BLOCK=8" in str(err.value)


def test_debug_ops_vanish_without_debug():
    source = tx.compile(SOURCE, name="kernels/checked.c", debug=False).checked.cuda_source(
        "f32", "f32", 64, BLOCK=64
    )
    assert "printf" not in source and "__trap" not in source


def test_debug_build_prints_and_asserts_and_compiles():
    module = tx.compile(SOURCE, name="kernels/checked.c", debug=True)
    source = module.checked.cuda_source("f32", "f32", 64, BLOCK=64)
    assert source.count("printf") == 3 and "__trap()" in source
    assert "kernels/checked.c:7: device_assert failed" in source
    assert (
        nvrtc.compile_to_cubin(source, name="checked", arch="sm_90", headers=HEADERS)[:4]
        == b"\x7fELF"
    )


def test_interpreter_prints_and_asserts(capsys):
    module = tx.compile(SOURCE, name="kernels/checked.c", debug=True)
    x = np.arange(1, 33, dtype=np.float32)
    out = np.zeros_like(x)
    module.checked.interpret[(2,)](out, x, 32, BLOCK=16)
    printed = capsys.readouterr().out
    assert "pid (1, 0, 0) idx (15,) v 32.0 31" in printed and "pid (0, 0, 0) n 32" in printed
    np.testing.assert_allclose(out, np.sqrt(x))
    x[20] = -1.0
    with pytest.raises(
        tx.InterpreterError, match=r"device_assert failed in program \(1, 0, 0\) at \(4,\): inputs"
    ):
        module.checked.interpret[(2,)](out, x, 32, BLOCK=16)


def test_debug_flag_from_environment(monkeypatch):
    monkeypatch.setenv("TEENY_TX_DEBUG", "1")
    assert tx.compile(SOURCE, name="kernels/checked.c").debug
    monkeypatch.setenv("TEENY_TX_DEBUG", "0")
    assert not tx.compile(SOURCE, name="kernels/checked.c").debug


FORMATS = r"""
kernel fmt(f32 *out, const f32 *x, i32 n, const i32 BLOCK)
{
    tile offs = arange(0, BLOCK);
    tile v = load(x + offs, offs < n, 1.0f);
    device_print("100% %s %d\r\x01\0end", v);
    device_assert(offs % 2 == 0 || v > 0.0f);
    store(out + offs, v, offs < n);
}
"""


def test_print_and_assert_text_is_a_safe_printf_format():
    """`%` is doubled and control characters are visible escapes: printf reads the user's
    text as text (no `%s` reading an int as a pointer, no raw NUL or CR in the source)."""
    module = tx.compile(FORMATS, name="kernels/fmt.c", debug=True)
    source = module.fmt.cuda_source("f32", "f32", 64, BLOCK=64)
    assert r"100%% %%s %%d\\r\\x01\\0end" in source
    assert "offs %% 2 == 0" in source  # the default message quotes the condition
    assert "\r" not in source and "\0" not in source and "\x01" not in source
    import re

    for text in re.findall(r'printf\("((?:\\.|[^"\\])*)"', source):
        conversions = re.findall(r"%(?!%)(\w+)", text.replace("%%", ""))
        user = len(re.findall(r"%(?!%)", text.replace("%%", "")))
        assert user == len(conversions) and set(conversions) <= {"d", "u", "f", "lld", "llu"}
    nvrtc.compile_to_cubin(source, name="fmt", arch="sm_90", headers=HEADERS)


def test_interpreter_prints_the_text_as_printf_would(capsys):
    module = tx.compile(FORMATS, name="kernels/fmt.c", debug=True)
    x = -np.ones(4, dtype=np.float32)
    module.fmt.interpret[(1,)](np.zeros(4, np.float32), x[:1], 1, BLOCK=4)
    printed = capsys.readouterr().out
    assert r"100% %s %d\r\x01\0end" in printed
    with pytest.raises(tx.TeenyError, match=r"device_assert\(offs % 2 == 0 \|\| v > 0.0f\);"):
        module.fmt.interpret[(1,)](np.zeros(4, np.float32), x, 4, BLOCK=4)
