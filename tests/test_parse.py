"""Parsing: kernel files with several functions, coordinates in the user's file, syntax errors."""

from __future__ import annotations

from pathlib import Path

import pytest

import teeny_tx
from teeny_tx._prelude import FILES as PRELUDE_FILES
from teeny_tx.parse import parse, strip_comments

from .conftest import KERNEL_FILE, compile_error, kernel_text

MULTI = """\
/* A file with helpers and kernels.
   The comment spans lines; numbering must survive it. */
tile twice(tile x) { return x + x; }   // a helper

kernel first(f32 *out, const f32 *a, const i32 BLOCK)
{
    tile o = arange(0, BLOCK);  /* inline */ store(out + o, twice(load(a + o)));
}

tile halve(tile x)
{
    return x * 0.5f;
}

kernel second(f32 *out, i32 n, const i32 BLOCK)
{
    // only a comment here: tile broken = ;
    tile o = arange(0, BLOCK);
    store(out + o, halve((f32)o), o < n);
}
"""


def test_several_kernels_and_helpers():
    unit = parse(MULTI, KERNEL_FILE)
    own = [name for name, fn in unit.functions.items() if fn.decl.coord.file == KERNEL_FILE]
    assert own == ["twice", "first", "halve", "second"]  # after the prelude's helpers
    assert {"gelu_exact", "group_pid_m"} <= set(unit.functions) - set(own)
    assert unit.kernels() == ["first", "second"]
    assert "arange" in unit.prototypes and "load" in unit.prototypes
    module = teeny_tx.compile(MULTI, name=KERNEL_FILE)
    assert sorted(module.kernels) == ["first", "second"]
    assert [p.name for p in module.second.params] == ["out", "n", "BLOCK"]


def test_errors_in_prelude_helpers_name_their_file():
    """A prelude helper's lines are located in its own file (prelude/activations.h), with the
    line's text, not at a line of the joined prelude."""
    text = "kernel k(f32 *out)\n{\n    store(out, gelu_exact(out));\n}\n"
    with pytest.raises(teeny_tx.CompileError) as err:
        teeny_tx.compile(text, name=KERNEL_FILE).k.cuda_source("f32")
    loc = err.value.loc
    line = PRELUDE_FILES["activations.h"].split("\n")[loc.line - 1]
    assert loc.file == "prelude/activations.h" and loc.source_line == line
    assert "return 0.5f * x" in line


def test_bundled_kernel_file_parses():
    path = Path(__file__).parents[1] / "kernels" / "activations.c"
    module = teeny_tx.compile(path)
    assert {"gelu", "silu", "leaky_relu", "clamp"} <= set(module.kernels)
    assert "gelu_tanh" not in module.kernels  # a helper, not an entry point


@pytest.mark.parametrize(
    ("name", "line", "col", "text"),
    [
        ("twice", 3, 6, "tile twice(tile x) { return x + x; }   // a helper"),
        ("first", 5, 8, "kernel first(f32 *out, const f32 *a, const i32 BLOCK)"),
        ("halve", 10, 6, "tile halve(tile x)"),
        ("second", 15, 8, "kernel second(f32 *out, i32 n, const i32 BLOCK)"),
    ],
)
def test_coordinates_point_into_the_users_file(name, line, col, text):
    unit = parse(MULTI, KERNEL_FILE)
    loc = unit.loc(unit.functions[name].decl.coord)
    assert (loc.file, loc.line, loc.col, loc.source_line) == (KERNEL_FILE, line, col, text)
    assert str(loc) == f"{KERNEL_FILE}:{line}:{col}"


def test_loc_accepts_a_node_and_statements_keep_columns_after_comments():
    unit = parse(MULTI, KERNEL_FILE)
    body = unit.functions["first"].body.block_items
    decl, call = body  # `tile o = ...;  /* inline */ store(...)` on one line
    assert unit.loc(decl).line == unit.loc(call).line == 7
    assert unit.loc(call).col == MULTI.splitlines()[6].index("store") + 1
    second = unit.functions["second"].body.block_items
    assert unit.loc(second[0]).line == 18  # the `//` line with `tile broken = ;` was ignored


def test_strip_comments_keeps_lines_columns_and_strings():
    text = 'a /* x\n y */ b // c /* d\n"/* kept */" e'
    out = strip_comments(text)
    assert len(out) == len(text)
    assert out.split("\n") == ["a" + " " * 5, " " * 6 + "b" + " " * 10, '"/* kept */" e']


def test_windows_line_ends_parse_with_the_same_coordinates():
    unit = parse(MULTI.replace("\n", "\r\n"), KERNEL_FILE)
    loc = unit.loc(unit.functions["second"].decl.coord)
    assert (loc.line, loc.col) == (15, 8)
    assert loc.source_line == "kernel second(f32 *out, i32 n, const i32 BLOCK)"


def _assert_points_at(err: teeny_tx.CompileError, line: int, col: int, source: str) -> None:
    text = str(err)
    assert text.startswith(f"{KERNEL_FILE}:{line}:{col}: error: ")
    shown, caret = text.splitlines()[1:3]
    assert shown == "    " + source
    assert caret == "    " + " " * (col - 1) + "^"


def test_missing_semicolon():
    text = kernel_text("    tile o = arange(0, BLOCK)\n    store(out + o, 1.0f);")
    err = compile_error(text)
    assert err.message == "syntax error before 'store'"
    assert "missing ';'" in err.hint
    _assert_points_at(err, 4, 5, "    store(out + o, 1.0f);")


def test_unknown_c_type_name_suggests_the_element_type():
    # `float` is a C keyword, so pycparser accepts it; the lowering names the type to use.
    err = compile_error(kernel_text("    float x = 1;"))
    assert err.message == "unknown element type 'float'"
    assert err.hint == "use f32"
    _assert_points_at(err, 3, 11, "    float x = 1;")


def test_unknown_type_name_is_a_syntax_error():
    # A name pycparser does not know as a type reads as an expression: `flt x` is two names.
    err = compile_error(kernel_text("    flt x = 1;"))
    assert err.message == "syntax error before 'x'"
    assert "unknown type name" in err.hint
    _assert_points_at(err, 3, 9, "    flt x = 1;")


def test_python_style_module_prefix_is_refused():
    err = compile_error(kernel_text("    tile o = arange(0, BLOCK);\n    tile x = tl.load(a + o);"))
    assert err.message == "only named functions can be called"
    assert err.hint == "operations are called by name alone: write load(...)"
    _assert_points_at(err, 4, 14, "    tile x = tl.load(a + o);")


def test_python_keyword_argument_is_refused():
    err = compile_error(
        kernel_text("    tile o = arange(0, BLOCK);\n    tile x = load(a + o, mask=o < n);")
    )
    assert err.message == "assignments are statements here, not expressions"
    _assert_points_at(err, 4, 26, "    tile x = load(a + o, mask=o < n);")


def test_python_def_is_a_syntax_error():
    err = compile_error("def k(x):\n    return x\n")
    assert str(err).startswith(f"{KERNEL_FILE}:1:1: error: ")
    assert "def k(x):" in str(err)


def test_illegal_character():
    err = compile_error(kernel_text("    tile x = 3 @ 4;"))
    assert err.message == "Illegal character '@'"
    _assert_points_at(err, 3, 16, "    tile x = 3 @ 4;")


def test_unterminated_comment():
    err = compile_error(kernel_text("    /* never closed\n    tile x = arange(0, BLOCK);"))
    assert err.message == "unterminated comment: this /* has no closing */"
    _assert_points_at(err, 3, 5, "    /* never closed")


def test_preprocessor_directive_is_refused():
    err = compile_error("#define N 4\n" + kernel_text("    return;"))
    assert err.message.startswith("preprocessor directives")
    assert "const" in err.hint
    _assert_points_at(err, 1, 1, "#define N 4")


def test_redefining_an_operation_is_refused():
    err = compile_error("tile exp(tile x) { return x; }\n" + kernel_text("    return;"))
    assert err.message == "'exp' is an operation of the language and cannot be redefined"
    assert err.hint == "rename the function"
    _assert_points_at(err, 1, 6, "tile exp(tile x) { return x; }")


def test_defining_a_function_twice_is_refused():
    err = compile_error(kernel_text("    return;") + kernel_text("    return;"))
    assert err.message == "function 'k' is defined twice"
    _assert_points_at(err, 5, 8, "kernel k(f32 *out, const f32 *a, i32 n, const i32 BLOCK)")


@pytest.mark.parametrize("decl", ["i32 N = 3;", "extern const f32 SCALE;", "f32 table[4];"])
def test_top_level_declarations_are_refused(decl):
    err = compile_error(decl + "\n" + kernel_text("    return;"))
    assert err.message == "only functions may appear at the top level of a kernel file"
    assert err.hint == "declare constants as `const` kernel parameters instead"
    assert str(err).startswith(f"{KERNEL_FILE}:1:")
    assert decl in str(err)


@pytest.mark.parametrize("text", ["", "/* nothing */\n", "tile f(tile x) { return x; }\n"])
def test_a_file_without_kernels_is_refused(text):
    with pytest.raises(teeny_tx.CompileError) as info:
        teeny_tx.compile(text, name=KERNEL_FILE)
    assert info.value.message == f"{KERNEL_FILE} defines no kernel"
    assert "kernel name(params)" in info.value.hint
    loc = info.value.loc  # at the file's first helper, else its first line, with the text
    assert loc.file == KERNEL_FILE and loc.line == 1 and loc.source_line == text.split("\n")[0]


def test_compile_reads_a_path_and_reports_a_missing_file(tmp_path):
    path = tmp_path / "k.c"
    path.write_text(kernel_text("    return;"))
    assert list(teeny_tx.compile(path).kernels) == ["k"]
    assert teeny_tx.compile(str(path)).unit.filename == str(path)
    with pytest.raises(teeny_tx.TeenyError, match="cannot read kernel file"):
        teeny_tx.compile(tmp_path / "missing.c")


def test_tab_indented_lines_keep_the_caret_under_the_column():
    err = compile_error(kernel_text("\ttile x = lod(a);"))
    assert str(err).startswith(f"{KERNEL_FILE}:3:11: error: unknown operation 'lod'")
    shown, caret = str(err).splitlines()[1:3]
    assert caret.index("^") == shown.index("lod")
