"""Errors in kernel text: one per class, with message, file:line:col, the line and a caret."""

from __future__ import annotations

import numpy as np
import pytest

import teeny_tx

from .conftest import KERNEL_FILE, compile_error, kernel_text, lower, nvrtc_compile


def check(
    err: teeny_tx.CompileError, line: int, col: int, message: str, hint: str | None = None
) -> None:
    """``err`` points at ``line:col`` of the kernel file, shows that line with a caret under
    ``col``, says ``message`` (and ``hint`` when given), and carries no Python internals."""
    assert isinstance(err, teeny_tx.TeenyError)
    text = str(err)
    first, shown, caret = text.splitlines()[:3]
    assert first == f"{KERNEL_FILE}:{line}:{col}: error: {message}"
    assert shown.startswith("    ") and caret == "    " + " " * (col - 1) + "^"
    assert err.loc.source_line == shown[4:]
    if hint is not None:
        assert err.hint == hint and text.endswith(f"\n  hint: {hint}")
    for internal in ("Traceback", 'File "', "c_ast", "pycparser", "Error(", "NoneType"):
        assert internal not in text
    assert err.__cause__ is None


def body_error(body: str, *args, **constexprs) -> teeny_tx.CompileError:
    return compile_error(kernel_text(body), *args, **constexprs)


def test_syntax_error():
    err = body_error("    tile o = arange(0, BLOCK)\n    store(out + o, 1.0f);")
    check(err, 4, 5, "syntax error before 'store'")


def test_unknown_identifier_suggests_a_close_name():
    err = body_error("    tile offs = arange(0, BLOCK);\n    store(out + offz, 1.0f);")
    check(err, 4, 17, "unknown identifier 'offz'", "did you mean 'offs'?")


def test_unknown_identifier_without_a_close_name_has_no_hint():
    err = body_error("    tile x = zzzzzz;")
    check(err, 3, 14, "unknown identifier 'zzzzzz'")
    assert err.hint is None


def test_unknown_operation_suggests_an_op():
    err = body_error("    tile o = arange(0, BLOCK);\n    tile x = lod(a + o);")
    check(err, 4, 14, "unknown operation 'lod'", "did you mean 'load'?")


@pytest.mark.parametrize(
    ("call", "message"),
    [
        ("load()", "load() takes 1 to 5 arguments, got 0"),
        ("arange(0)", "arange() takes 2 arguments, got 1"),
        ("exp(1.0f, 2.0f)", "exp() takes 1 argument, got 2"),
        ("where(n > 0, 1)", "where() takes 3 arguments, got 2"),
    ],
)
def test_wrong_arity(call, message):
    err = body_error(f"    tile x = {call};")
    check(err, 3, 14, message)
    assert err.hint.startswith(call.split("(")[0] + "(")  # the op's doc line


def test_wrong_arity_of_a_helper():
    err = compile_error("tile f(tile x) { return x; }\n" + kernel_text("    tile y = f();"))
    check(err, 4, 14, "f() takes 1 argument, got 0")


def test_shape_mismatch_in_a_binary_op():
    err = body_error("    tile x = arange(0, 64) + arange(0, 128);")
    check(err, 3, 14, "shape mismatch in '+': [64] and [128] do not broadcast")


def test_shape_mismatch_in_store():
    err = body_error("    tile o = arange(0, 64);\n    store(out + o, (f32)arange(0, 128));")
    check(
        err,
        4,
        20,
        "shape mismatch in store(): value [128] through pointers [64]",
        "the value must have the pointers' shape (or be a scalar)",
    )


@pytest.mark.parametrize(
    ("stmt", "col", "message"),
    [
        (
            "    tile x = load(a + o, arange(0, 128) < n);",
            26,
            "shape mismatch in load() mask: [64] and [128] do not broadcast",
        ),
        (
            "    store(out + o, 1.0f, arange(0, 128) < n);",
            26,
            "shape mismatch in store() mask: [64] and [128] do not broadcast",
        ),
        (
            "    f32 x = load(a, arange(0, 64) < n);",
            21,
            "load() mask of shape [64] does not match pointers of shape []",
        ),
    ],
)
def test_mask_shape_differs_from_the_pointers(stmt, col, message):
    check(body_error("    tile o = arange(0, 64);\n" + stmt), 4, col, message)


def test_declared_shape_is_checked():
    err = body_error("    f32 acc[64] = (f32)arange(0, 128);")
    check(err, 3, 9, "shape mismatch: 'acc' is [64] but the value is [128]")


@pytest.mark.parametrize(
    ("loop", "value", "change"),
    [
        ("for (i32 t = 0; t < n; t += 1)", "arange(0, 128)", "shape from [64] to [128]"),
        ("for (i32 t = 0; t < n; t += 1)", "(f32)x", "dtype from i32 to f32"),
        ("while (n > 0)", "x * 0.5f", "dtype from i32 to f32"),
    ],
)
def test_loop_carried_tile_keeps_shape_and_dtype(loop, value, change):
    err = body_error(f"    tile x = arange(0, 64);\n    {loop} {{\n        x = {value};\n    }}")
    check(err, 5, 9, f"tile 'x' is carried around the loop and changes {change}")


def test_tile_changing_dtype_outside_a_loop_does_not_mention_loops():
    err = body_error("    tile x = arange(0, 64);\n    x = (f32)x;")
    check(err, 4, 5, "tile 'x' changes dtype from i32 to f32", "cast the value: x = (i32)(...)")


def test_arange_bound_must_be_constant():
    err = body_error("    tile x = arange(0, n);")
    check(
        err,
        3,
        24,
        "the end of arange() must be a compile-time constant",
        "use literals and `const` parameters (constexprs) here",
    )


@pytest.mark.parametrize(("bounds", "n"), [("0, 100", 100), ("8, 8", 0), ("4, 0", -4)])
def test_arange_must_span_a_power_of_two(bounds, n):
    err = body_error(f"    tile x = arange({bounds});")
    check(err, 3, 14, f"arange({bounds}) must span a positive power of two, got {n} elements")


def test_constexpr_not_given():
    with pytest.raises(
        teeny_tx.LaunchError, match=r"^k\(\) needs constexpr BLOCK by keyword, e.g. BLOCK=\.\.\.$"
    ):
        teeny_tx.compile(kernel_text("    return;"), name=KERNEL_FILE).k.cuda_source(
            "f32", "f32", 10
        )
    with pytest.raises(teeny_tx.CompileError) as info:
        lower(kernel_text("    return;"), constexprs=())
    check(
        info.value,
        1,
        51,
        "constexpr parameter 'BLOCK' has no value",
        "pass it by keyword at launch, e.g. BLOCK=...",
    )


@pytest.mark.parametrize(
    "stmt", ["if (x < n) {\n        return;\n    }", "while (x < n) {\n        return;\n    }"]
)
def test_tile_condition(stmt):
    err = body_error(f"    tile x = arange(0, BLOCK);\n    {stmt}")
    check(
        err,
        4,
        stmt.index("x") + 5,
        "a condition must be a scalar, got a tile bool[128]",
        "branch on scalars; select lanes of a tile with where() or a mask",
    )


def test_store_through_a_const_pointer():
    err = body_error("    tile x = arange(0, BLOCK);\n    store(a + x, 1.0f);")
    check(
        err,
        4,
        11,
        "store() through a read-only pointer",
        "the parameter is declared `const`; drop `const` to write through it",
    )


@pytest.mark.parametrize("op", ["exp", "sqrt", "sigmoid"])
def test_math_on_an_integer_tile_suggests_a_cast(op):
    err = body_error(f"    tile x = {op}(arange(0, BLOCK));")
    check(
        err, 3, 14, f"{op} needs a float operand, got i32[128]", f"convert first, e.g. {op}((f32)x)"
    )


def test_indexing_a_tile():
    err = body_error("    tile x = arange(0, BLOCK);\n    f32 y = x[3];")
    check(
        err,
        4,
        13,
        "tiles are whole-block values and cannot be indexed",
        "select lanes with masks and where(); read memory with load(p + offsets)",
    )


def test_dereferencing_a_pointer():
    err = body_error("    f32 y = *a;")
    check(
        err,
        3,
        13,
        "pointers are read with load(), not *",
        "write load(p) or load(p + offsets, mask)",
    )
    check(body_error("    f32 y = *(a + 1);"), 3, 13, "pointers are read with load(), not *")


@pytest.mark.parametrize("stmt", ["BLOCK = 3;", "BLOCK += 1;", "BLOCK++;"])
def test_assigning_a_constexpr(stmt):
    check(body_error(f"    {stmt}"), 3, 5, "'BLOCK' is a constant and cannot be assigned")


def test_return_with_a_value_in_a_kernel():
    check(body_error("    return 1;"), 3, 5, "a kernel returns nothing; write `return;`")


@pytest.mark.parametrize(
    ("stmt", "word"), [("break;", "break"), ("if (n > 0) {\n        continue;\n    }", "continue")]
)
def test_break_or_continue_outside_a_loop(stmt, word):
    err = body_error(f"    {stmt}")
    line = 3 + stmt.count("\n") // 2
    check(err, line, 5 + 4 * (line - 3), f"'{word}' outside a loop")


def test_recursion_in_helpers():
    text = "tile f(tile x) { return g(x); }\ntile g(tile x) { return f(x); }\n" + kernel_text(
        "    tile y = f(arange(0, 16));"
    )
    check(compile_error(text), 2, 25, "helper 'f' calls itself; recursion is not supported")


@pytest.mark.parametrize(
    ("ctype", "use"),
    [
        ("float", "f32"),
        ("double", "f64"),
        ("int", "i32"),
        ("unsigned char", "u8"),
        ("long long", "i64"),
    ],
)
def test_c_element_type_in_a_parameter(ctype, use):
    text = f"kernel k({ctype} *x, i32 n)\n{{\n    return;\n}}\n"
    err = compile_error(text, "f32", 1)
    check(err, 1, 10 + len(ctype) + 1, f"unknown element type '{ctype}'", f"use {use}")


def test_redeclaration_in_one_scope():
    err = body_error("    i32 t = 1;\n    i32 t = 2;")
    check(err, 4, 9, "'t' is already declared in this scope")
    check(body_error("    i32 n = 1;"), 3, 9, "'n' is already declared in this scope")


def test_names_cuda_reserves_cannot_name_parameters_or_kernels():
    err = compile_error("kernel k(f32 *out, i32 this)\n{\n    return;\n}\n", "f32", 1)
    why = "it is a reserved name of C, C++ or CUDA"
    check(err, 1, 24, f"'this' is reserved: {why}", "rename it, e.g. 'this_'")
    err = compile_error("kernel tx(f32 *out)\n{\n    return;\n}\n", "f32", name="tx")
    check(err, 1, 8, f"'tx' is reserved: {why}", "rename it, e.g. 'my_tx'")


# Unsupported constructs each get one clear error at their location, never a Python exception.
@pytest.mark.parametrize(
    ("stmt", "col", "message"),
    [
        ("f32 y = a->x;", 13, "unsupported expression (StructRef)"),
        ("i32 y = sizeof(f32);", 13, "unsupported operator 'sizeof'"),
        ('i32 y = "abc";', 13, "string literals are not supported here"),
        ("i32 y = (n, 3);", 14, "a tuple of 2 values is not a value here"),
        ("switch (n) { case 1: break; }", 5, "unsupported statement (Switch)"),
        ("i32 y = &n;", 13, "'&' (address-of) is not supported"),
        ("i32 y = n++;", 13, "++/-- are statements here, not expressions"),
        ("f32 y = ~1.5f;", 13, "~ needs integer operands, got f32"),
        ("load(a);", 5, "the value of load(...) is not used"),
        ("tile x;", 10, "`tile x` needs an initial value to infer its type"),
        ("i32 x[3] = 0;", 11, "tile dimensions must be positive powers of two, got 3"),
        ("f32 x[4] = {1, 2};", 9, "initializer lists are not supported"),
        ("f32 *p = a;", 9, "cannot assign const f32* to pointer 'p' of type f32*"),
        ("i32 p = program_id(3);", 24, "program_id() axis must be 0, 1 or 2, got 3"),
        ("f32 p = load(n);", 18, "load() needs pointers, got i32"),
        ("bool b = a < a;", 14, "pointers cannot be compared"),
        ("f32 x = load(a + 1.5f);", 18, "a pointer offset must be an integer, got f32"),
        ("tile x = cdiv(1.5f, 2);", 14, "cdiv needs integer operands, got f32"),
        ("tile x = (tile)n;", 14, "casts convert to an element type, e.g. (f32)x"),
    ],
)
def test_unsupported_constructs(stmt, col, message):
    check(body_error(f"    {stmt}"), 3, col, message)


def test_helper_errors():
    text = "tile f(tile x) { if (1) return x; return x; }\n" + kernel_text(
        "    tile y = f(arange(0, 16));"
    )
    check(compile_error(text), 1, 25, "a helper function may only return at its end")
    text = "tile f(tile x) { tile y = x; }\n" + kernel_text("    tile y = f(arange(0, 16));")
    check(compile_error(text), 1, 6, "helper 'f' must end with `return <value>;`")
    text = "kernel g(f32 *o)\n{\n    return;\n}\n" + kernel_text("    g(out);")
    check(compile_error(text), 7, 5, "'g' is a kernel and cannot be called")


REDUCTION_ERRORS = [
    ("tile x = load(a + arange(0, BLOCK)); f32 s = sum(x, 1);", "sum() axis 1 is out of range"),
    ("tile x = load(a + arange(0, BLOCK)); tile i = argmax(x);", "argmax() takes 2 to 3 arguments"),
    (
        "tile x = load(a + arange(0, BLOCK)); f32 s = reduce(x, 0, n);",
        "reduce() needs the name of a helper",
    ),
    (
        "tile x = load(a + arange(0, BLOCK)); tile y = cat(x, arange(0, 2 * BLOCK));",
        "shape mismatch in cat()",
    ),
    (
        "tile x = load(a + arange(0, BLOCK)); tile y = split(x, 0);",
        "split() needs a last dimension of size 2",
    ),
    (
        "tile x = load(a + arange(0, BLOCK)); tile y = cumsum(x, 3);",
        "cumsum() axis 3 is out of range",
    ),
]


@pytest.mark.parametrize("body,message", REDUCTION_ERRORS)
def test_reduction_and_shape_errors_point_at_the_call(body, message):
    err = compile_error(kernel_text(body))
    assert message in str(err)
    assert "kernels/t.c:" in str(err) and "^" in str(err)


# ---------------------------------------------------------------- the front end's edges (#13)
# Every syntax error is at a token of the file (pycparser raises some without coordinates);
# nesting and size have limits with located errors; every literal form is read or refused;
# line markers, line splices and control characters are refused; constant op arguments are
# checked for their type.


@pytest.mark.parametrize(
    ("stmt", "col", "message"),
    [
        ("tile x = n + ;", 18, "syntax error: expected an expression, got ';'"),
        ("tile x = (n * );", 19, "syntax error: expected an expression, got ')'"),
        ("tile x = [n];", 14, "syntax error: expected an expression, got '['"),
        ("store(out, );", 16, "syntax error: expected an expression, got ')'"),
    ],
)
def test_syntax_errors_pycparser_leaves_unplaced_are_at_their_token(stmt, col, message):
    check(body_error(f"    {stmt}"), 3, col, message)


def test_a_missing_closing_brace_is_reported_at_the_end_of_the_file():
    err = compile_error(
        "kernel k(f32 *out, const f32 *a, i32 n, const i32 BLOCK)\n{\n    if (n) {\n"
    )
    check(err, 3, 13, "unexpected end of file", "a closing '}', ')' or ';' is missing")


def nested(depth: int) -> str:
    return (
        "    tile o = arange(0, BLOCK);\n    store(out + o, "
        + "(" * depth
        + "1.0f"
        + ")" * depth
        + ");"
    )


def test_deep_nesting_is_a_located_error_not_a_recursion_error():
    err = body_error(nested(200))
    assert (err.loc.line, err.message) == (4, "brackets nest more than 64 deep")
    assert err.loc.source_line[err.loc.col - 1] == "("
    teeny_tx.compile(kernel_text(nested(60)), name=KERNEL_FILE).k.cuda_source(
        "f32", "f32", 4, BLOCK=16
    )


@pytest.mark.parametrize("terms", [500, 3000])
def test_a_long_sum_is_a_located_error(terms):
    err = body_error("    tile x = " + " + ".join(["n"] * terms) + ";")
    assert err.loc.line == 3 and f"one '+' chain has {terms} terms; at most 128" in err.message
    assert "named steps" in err.hint  # a flat sum is no nesting (tests/test_nesting_issue29.py)


def test_sums_and_unary_chains_within_the_limit_compile_on_both_backends():
    body = (
        "    tile o = arange(0, BLOCK);\n    tile x = "
        + " + ".join(["load(a + o)"] * 40)
        + ";\n    store(out + o, "
        + "- " * 30
        + "x);"
    )
    module = teeny_tx.compile(kernel_text(body), name=KERNEL_FILE)
    nvrtc_compile(module.k.cuda_source("f32", "f32", 16, BLOCK=16), "k")
    a = np.arange(16, dtype=np.float32)
    out = np.zeros(16, np.float32)
    module.k.interpret[(1,)](out, a, 16, BLOCK=16)
    np.testing.assert_array_equal(out, 40 * a)


def test_a_file_past_the_size_limit_is_refused_at_the_line_that_crosses_it():
    from teeny_tx.parse.checks import MAX_SOURCE_BYTES

    line = "    i32 x0 = 1;\n"
    body = "".join(line.replace("x0", f"x{k}") for k in range(MAX_SOURCE_BYTES // len(line) + 10))
    err = body_error(body)
    assert (
        err.message.startswith("the kernel file is ")
        and f"limit is {MAX_SOURCE_BYTES}" in err.message
    )
    assert 3 < err.loc.line < body.count("\n") + 3 and err.loc.source_line.startswith("    i32 x")


@pytest.mark.parametrize(
    ("literal", "value"),
    [
        ("0x1p3", 8.0),
        ("0x1.8p1f", 3.0),
        ("0X.8P0", 0.5),
        ("'a'", 97),
        ("'\\x41'", 65),
        ("'\\101'", 65),
        ("'\\n'", 10),
        ("0b101", 5),
        ("017", 15),
        ("1e-3f", 1e-3),
    ],
)
def test_literal_forms_are_read_as_c_reads_them(literal, value):
    k = lower(kernel_text(f"    static_assert({literal} == {literal});\n    f64 x = {literal};"))
    assert k.body[0].init.value == pytest.approx(value)


@pytest.mark.parametrize(
    ("literal", "message"),
    [
        ("'ab'", "a character constant holds one character, got 'ab'"),
        ("L'a'", "wide and Unicode character constants (L'a') are not supported"),
        ("u'a'", "wide and Unicode character constants (u'a') are not supported"),
        ("'\\q'", "unknown escape sequence '\\q' in a character constant"),
        ("99999999999999999999", "integer literal '99999999999999999999' does not fit in 64 bits"),
        ("9223372036854775808", "integer literal '9223372036854775808' does not fit in i64"),
    ],
)
def test_literal_forms_the_language_refuses_are_located(literal, message):
    check(body_error(f"    f64 x = {literal};"), 3, 13, message)


@pytest.mark.parametrize(
    "call",
    ['static_assert(1, "a\\qb");', 'device_print("a\\qb", n);', 'device_assert(n > 0, "\\q");'],
)
def test_bad_escapes_in_message_strings_are_located(call):
    err = body_error(f"    {call}")
    assert err.loc.line == 3 and err.message == "unknown escape sequence '\\q' in a string"
    assert err.loc.source_line[err.loc.col - 1] == '"'


@pytest.mark.parametrize(
    ("call", "col", "message"),
    [
        (
            "program_id(1.0)",
            24,
            "the axis of program_id() must be an integer constant, got f32 1.0",
        ),
        (
            "num_programs(0.5f)",
            26,
            "the axis of num_programs() must be an integer constant, got f32 0.5",
        ),
        ("arange(0.0, 16)", 20, "the start of arange() must be an integer constant, got f32 0.0"),
    ],
)
def test_constant_op_arguments_of_the_wrong_type_are_located(call, col, message):
    check(body_error(f"    i32 p = {call};"), 3, col, message)


def test_an_unknown_function_called_as_a_statement_is_an_unknown_operation():
    check(
        body_error("    stor(out, 1.0f);"),
        3,
        5,
        "unknown operation 'stor'",
        "did you mean 'store'?",
    )
    check(body_error("    frobnicate(out);"), 3, 5, "unknown operation 'frobnicate'")


@pytest.mark.parametrize("marker", ['#line 100 "fake.c"', '# 7 "other.c"', "  #  line 3"])
def test_line_markers_in_kernel_text_are_refused(marker):
    err = body_error(f"    tile x = 1;\n{marker}\n    tile y = 2;")
    assert (err.loc.file, err.loc.line) == (KERNEL_FILE, 4)
    assert err.message.startswith("line markers (#line")


def test_a_comment_ending_in_a_backslash_splices_nothing():
    err = body_error("    tile x = 1; // a note \\\n    tile y = 2;")
    check(
        err,
        3,
        27,
        "a line may not end in a backslash (C would join the next line to it)",
        "remove the backslash; statements may span lines without one",
    )


@pytest.mark.parametrize("char", ["\x00", "\x01", "\x1b", "\r", "\x08"])
def test_control_characters_are_refused_where_they_stand(char):
    err = body_error(f"    tile x{char} = 1;")
    assert (err.loc.line, err.loc.col) == (3, 11) and "cannot appear in kernel text" in err.message


@pytest.mark.parametrize("name", ['kernels/a"b.c', "kernels/a\nb.c", "kernels\\a.c", "k\x00.c"])
def test_a_kernel_name_that_cannot_be_a_line_marker_is_refused_at_the_api(name):
    with pytest.raises(teeny_tx.CompileError, match="cannot appear in a #line directive") as info:
        teeny_tx.compile(kernel_text("    return;"), name=name)
    assert info.value.loc is None and "plain path" in info.value.hint


@pytest.mark.parametrize(
    ("decl", "dtype", "value"),
    [
        ("i32 x = (i32)NAN;", "i32", 0),
        ("i32 x = -INF;", "i32", -(2**31)),
        ("u8 x = (u8)INF;", "u8", 255),
        ("i64 x = (i64)(-INF);", "i64", -(2**63)),
        ("u64 x = (u64)NAN;", "u64", 0),
        ("i8 x = (i8)300.0f;", "i8", 127),
        ("u16 x = (u16)-1.5f;", "u16", 0),
    ],
)
def test_nan_and_inf_into_integers_saturate_at_compile_time(decl, dtype, value):
    k = lower(kernel_text(f"    {decl}"))
    assert str(k.body[0].type) == dtype and k.body[0].init.value == value


def test_minus_inf_fills_an_integer_tile_on_both_backends():
    module = teeny_tx.compile(
        "kernel k(i32 *out, const i32 BLOCK)\n{\n    i32 t[BLOCK] = -INF;\n"
        "    store(out + arange(0, BLOCK), t);\n}\n",
        name=KERNEL_FILE,
    )
    out = np.zeros(16, np.int32)
    module.k.interpret[(1,)](out, BLOCK=16)
    assert (out == -(2**31)).all()
    nvrtc_compile(module.k.cuda_source("i32", BLOCK=16), "k")
