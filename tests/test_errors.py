"""Errors in kernel text: one per class, with message, file:line:col, the line and a caret."""

from __future__ import annotations

import pytest

import teeny_tx

from .conftest import KERNEL_FILE, compile_error, kernel_text, lower


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
        ("load()", "load() takes 1 to 3 arguments, got 0"),
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
        ("i32 y = (n, 3);", 14, "unsupported expression (ExprList)"),
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
