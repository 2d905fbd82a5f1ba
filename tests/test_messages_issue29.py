"""Messages of issue 29: kernels may not take CUDA math function names (refused at parse, with
the reason); an escape without its digits (``"\\x"``) is a located error; adjacent string
literals are one string (``device_print("?" "?=")`` printed the quotes)."""

from __future__ import annotations

import numpy as np
import pytest

import teeny_tx
from teeny_tx.parse.reserved import MATH_FUNCTION_NAMES, why_reserved

from .conftest import KERNEL_FILE, kernel_text, nvrtc_compile


@pytest.mark.parametrize("name", ["expf", "fmaxf", "sqrtf", "powf", "rsqrtf", "fabs", "frexp"])
def test_a_kernel_named_like_a_cuda_math_function_is_refused_at_parse(name):
    with pytest.raises(teeny_tx.CompileError) as info:
        teeny_tx.compile(kernel_text("    return;", name=name), name=KERNEL_FILE)
    text = str(info.value)
    assert text.startswith(f"{KERNEL_FILE}:1:8: error: '{name}' is reserved: it is a CUDA math")
    assert f"rename it, e.g. '{name}_'" in text


def test_a_local_may_take_a_math_function_name_and_the_cuda_compiles():
    text = kernel_text("    f32 expf = 2.0f;\n    store(out, expf);")
    source = teeny_tx.compile(text, name=KERNEL_FILE).k.cuda_source("f32", "f32", 3, BLOCK=4)
    nvrtc_compile(source, "k")


def test_the_math_names_are_not_the_languages():
    from teeny_tx.lower.ops.registry import OPS

    assert not {n for n, op in OPS.items() if op.prelude} & MATH_FUNCTION_NAMES
    assert why_reserved("expf") is None and why_reserved("expf", kernel=True) is not None


@pytest.mark.parametrize("escape", ["\\x", "\\xg", "\\u12", "\\U1234"])
def test_an_escape_without_its_digits_is_located(escape):
    text = kernel_text(f'    device_print("a{escape}", 1);')
    with pytest.raises(teeny_tx.CompileError) as info:
        teeny_tx.compile(text, name=KERNEL_FILE, debug=True).k.cuda_source("f32", "f32", 3, BLOCK=4)
    first = str(info.value).splitlines()[0]
    assert first.startswith(f"{KERNEL_FILE}:3:18: error: escape '\\")
    assert "without its hexadecimal digits in a string" in first


@pytest.mark.parametrize(
    ("literal", "printed"),
    [('"?" "?="', "??="), ('"a" "b"', "ab"), ('"\\x41" "B"', "AB"), ('"x" \n    "y"', "xy")],
)
def test_adjacent_string_literals_are_one_string(literal, printed, capsys):
    text = kernel_text(f"    device_print({literal}, n);")
    kernel = teeny_tx.compile(text, name=KERNEL_FILE, debug=True).k
    kernel.interpret[(1,)](np.zeros(1, np.float32), np.zeros(1, np.float32), 7, BLOCK=4)
    assert capsys.readouterr().out.splitlines()[0] == f"pid (0, 0, 0) {printed} 7"
    source = kernel.cuda_source("f32", "f32", 7, BLOCK=4)
    escaped = printed.replace("?", "\\?")
    assert f'printf("pid (%d, %d, %d) {escaped} %d\\n"' in source
    nvrtc_compile(source, "k")
