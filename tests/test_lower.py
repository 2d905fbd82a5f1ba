"""Lowering: dtypes and promotion (T1-T7), shapes, constexpr folding, casts, helpers, loops."""

from __future__ import annotations

import itertools

import pytest

import teeny_tx
from teeny_tx.dtypes import DTYPES, promote
from teeny_tx.lower import ir
from teeny_tx.lower.ir import Const, Op, PointerType, Var, walk_exprs

from .conftest import kernel_text, lower


def stmts(body):
    """Every statement of a body, nested ones included, in order."""
    for s in body:
        yield s
        if isinstance(s, ir.If):
            yield from stmts(s.then)
            yield from stmts(s.orelse)
        elif isinstance(s, ir.Loop):
            yield from stmts(s.init + s.body + s.step)


def decls(kernel: ir.Kernel) -> dict[str, ir.Declare]:
    return {s.name: s for s in stmts(kernel.body) if isinstance(s, ir.Declare)}


def ops(kernel: ir.Kernel, name: str) -> list[Op]:
    return [e for e in walk_exprs(kernel.body) if isinstance(e, Op) and e.op == name]


# ---------------------------------------------------------------- dtypes and promotion

TYPED = {
    "H": "f16",
    "F": "f32",
    "G": "f64",
    "B": "bf16",
    "C": "i8",
    "D": "u8",
    "S": "i32",
    "U": "u32",
    "L": "i64",
    "M": "bool",
}
TYPED_PARAMS = ", ".join(f"const {d} *p{v}" for v, d in TYPED.items()) + ", i32 n, const i32 BLOCK"
TYPED_LOADS = "\n".join(f"    tile {v} = load(p{v} + o);" for v in TYPED)


def result_type(expr: str, block: int = 128) -> str:
    """The type of ``tile r = expr;`` where H, F, ... are tiles of the dtypes in TYPED."""
    body = f"    tile o = arange(0, BLOCK);\n{TYPED_LOADS}\n    tile r = {expr};"
    kernel = lower(kernel_text(body, TYPED_PARAMS), constexprs=(("BLOCK", block),))
    return str(decls(kernel)["r"].type)


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        # T1: weak literals and constexprs adopt the typed operand's dtype
        ("H * 2.0f", "f16"),
        ("2.0 * B", "bf16"),
        ("C + 3", "i8"),
        ("D - 1", "u8"),
        ("L + 1", "i64"),
        ("H + BLOCK", "f16"),
        ("C * BLOCK", "i32"),  # 128 does not fit i8: the literal's own i32 joins the promotion
        ("C + 300", "i32"),
        ("S * 1.5f", "f32"),  # a float literal with an integer tile becomes f32
        ("C + INF", "f32"),
        ("(i32)3 + C", "i32"),  # a cast constant is typed, no longer weak
        # T2: typed operands promote by Triton's rules
        ("H * F", "f32"),
        ("H + B", "f32"),
        ("F + G", "f64"),
        ("H + S", "f16"),
        ("C + D", "u8"),
        ("S + U", "u32"),
        ("D + S", "i32"),
        ("U + L", "i64"),
        # T3: arithmetic on bool is arithmetic on i32
        ("M + M", "i32"),
        ("M + 1", "i32"),
        ("-M", "i32"),
        # bool with bool under &, |, ^ stays a mask
        ("M & (S < 0)", "bool"),
        # T5: comparisons and logic give bool
        ("S < 3.5f", "bool"),
        ("H == B", "bool"),
        ("S && F", "bool"),
        ("!C", "bool"),
        # named ops
        ("where(M, S, 2.5f)", "f32"),
        ("maximum(C, D)", "u8"),
        ("abs(C)", "i8"),
        ("sqrt(H)", "f16"),
        ("fma(H, F, 1.0f)", "f32"),
        ("cdiv(S, 16)", "i32"),
    ],
)
def test_result_dtypes(expr, expected):
    assert result_type(expr) == f"{expected}[128]"


def test_comparison_converts_operands_to_their_common_dtype():
    body = f"    tile o = arange(0, BLOCK);\n{TYPED_LOADS}\n    tile r = S < 3.5f;"
    (lt,) = ops(lower(kernel_text(body, TYPED_PARAMS)), "lt")
    assert [str(a.type) for a in lt.args] == ["f32[128]", "f32"]
    assert isinstance(lt.args[0], Op) and lt.args[0].op == "cast"


@pytest.mark.parametrize(("a", "b"), list(itertools.combinations(DTYPES.values(), 2)))
def test_promotion_is_symmetric(a, b):
    assert promote(a, b) == promote(b, a)


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("f16", "bf16", "f32"),
        ("i8", "u8", "u8"),
        ("i32", "u32", "u32"),
        ("i64", "u32", "i64"),
        ("bool", "i8", "i8"),
        ("u16", "f16", "f16"),
        ("f32", "f64", "f64"),
        ("i16", "i16", "i16"),
    ],
)
def test_promote_rules(a, b, expected):
    assert promote(DTYPES[a], DTYPES[b]).name == expected


@pytest.mark.parametrize(
    ("expr", "value", "dtype"),
    [
        ("7 / 2", 3, "i32"),
        ("-7 / 2", -3, "i32"),
        ("-7 % 2", -1, "i32"),
        ("1 + 2.5f", 3.5, "f32"),
        ("BLOCK * 2 + 1", 257, "i32"),
        ("(u8)300", 44, "u8"),
        ("(i32)3.7f", 3, "i32"),
        ("(f16)1 / 3", 0.333251953125, "f16"),
        ("BLOCK > 64 ? 1.5f : 2.5f", 1.5, "f32"),
        ("3000000000", 3000000000, "i64"),
    ],
)
def test_constant_folding(expr, value, dtype):
    d = decls(lower(kernel_text(f"    tile r = {expr};")))["r"]
    assert isinstance(d.init, Const)
    assert (d.init.value, str(d.type)) == (value, dtype)


# ---------------------------------------------------------------- shapes


def test_arange_shapes_and_broadcasting():
    kernel = lower(
        kernel_text(
            "    tile r = arange(16, 48);\n"
            "    tile b = n + arange(0, BLOCK);\n"
            "    tile c = arange(0, BLOCK) * 2.0f + 1;\n"
            "    f32 acc[BLOCK] = 0;\n"
            "    f16 h[64] = 1.5f;"
        ),
        constexprs=(("BLOCK", 256),),
    )
    d = decls(kernel)
    assert str(d["r"].type) == "i32[32]"
    assert d["r"].init.attrs == (("start", 16), ("end", 48))
    assert str(d["b"].type) == "i32[256]"
    assert str(d["c"].type) == "f32[256]"
    assert str(d["acc"].type) == "f32[256]"
    assert d["acc"].init.op == "full" and d["acc"].init.args[0].value == 0.0
    assert str(d["h"].type) == "f16[64]" and d["h"].init.args[0].value == 1.5


def test_a_scalar_assigned_to_a_tile_is_filled():
    kernel = lower(kernel_text("    tile x = arange(0, 16);\n    x = 0;"))
    (assign,) = [s for s in stmts(kernel.body) if isinstance(s, ir.Assign)]
    assert assign.value.op == "full" and str(assign.value.type) == "i32[16]"


# ---------------------------------------------------------------- constexprs

FOLD = kernel_text(
    "    tile o = arange(0, BLOCK);\n"
    "    if (BLOCK > 512) {\n        store(out + o, 1.0f);\n"
    "    } else {\n        store(out + o, 2.0f);\n    }"
)


@pytest.mark.parametrize(("block", "value"), [(1024, 1.0), (128, 2.0)])
def test_constexpr_condition_folds_to_one_branch(block, value):
    kernel = lower(FOLD, constexprs=(("BLOCK", block),))
    assert not any(isinstance(s, ir.If) for s in stmts(kernel.body))
    (store,) = ops(kernel, "store")
    assert store.args[1].value == value
    assert str(store.args[0].type) == f"f32*[{block}]"
    assert kernel.constexprs == (("BLOCK", block),)
    assert [p.name for p in kernel.runtime_params] == ["out", "a", "n"]


def test_runtime_condition_keeps_both_branches():
    kernel = lower(FOLD.replace("BLOCK > 512", "n > 512"))
    (branch,) = [s for s in stmts(kernel.body) if isinstance(s, ir.If)]
    assert len(branch.then) == len(branch.orelse) == 1


def test_constexpr_reads_keep_their_name():
    d = decls(lower(kernel_text("    tile o = arange(0, BLOCK) + BLOCK;")))["o"]
    (const,) = [a for a in d.init.args if isinstance(a, Const)]
    assert (const.name, const.value) == ("BLOCK", 128)


def test_false_loops_vanish():
    kernel = lower(
        kernel_text("    while (0) { n += 1; }\n    for (i32 t = 0; BLOCK < 0; t += 1) { n += 1; }")
    )
    assert not any(isinstance(s, ir.Loop) for s in stmts(kernel.body))
    assert [s.name for s in kernel.body] == ["t"]  # the for-init still runs


# ---------------------------------------------------------------- casts


def test_casts():
    d = decls(
        lower(
            kernel_text(
                "    f32 acc[BLOCK] = 0;\n    tile h = (f16)acc;\n"
                "    tile same = (f32)acc;\n    tile t = (i8)arange(0, BLOCK);"
            )
        )
    )
    assert d["h"].init.op == "cast" and d["h"].init.attr("to").name == "f16"
    assert str(d["h"].type) == "f16[128]"
    assert isinstance(d["same"].init, Var)  # a cast to the same dtype is no node at all
    assert str(d["t"].type) == "i8[128]"


# ---------------------------------------------------------------- helpers

HELPERS = """\
tile sq(tile x) { tile y = x * x; return y; }
tile quad(tile x) { tile y = sq(x); return sq(y); }
tile scale(tile x, f32 s) { return x * s; }
tile inc(tile x) { x = x + 1.0f; return x; }
void put(f32 *p, tile v) { store(p + arange(0, 16), v); }
kernel k(f32 *out, const f32 *a, f32 v, i32 n, const i32 BLOCK)
{
    tile o = arange(0, BLOCK);
    tile x = load(a + o);
    tile y = quad(x);
    tile z = scale(x + 1.0f, 2.0f);
    tile w = scale(x, v);
    tile q = inc(x);
    put(out, (f32)arange(0, 16));
    store(out + o, x + y + z + w + q);
}
"""


def test_helpers_inline_with_unique_names_and_aliased_parameters():
    kernel = lower(HELPERS)
    names = [s.name for s in kernel.body if isinstance(s, ir.Declare)]
    assert names == [
        "o",
        "x",
        "tx_quad_sq_y",
        "tx_quad_y",
        "tx_quad_sq_y_1",
        "y",
        "tx_scale_x",
        "z",
        "w",
        "tx_inc_x",
        "q",
        "tx_put_v",
    ]
    d = decls(kernel)
    # `sq(x)` reads the caller's x directly: an unassigned parameter is an alias, not a copy
    assert d["tx_quad_sq_y"].init.args[0].name == "x"
    # a weak argument (2.0f) is folded in as a constant; a caller's scalar is aliased
    assert isinstance(d["z"].init.args[1], Const) and d["z"].init.args[1].value == 2.0
    assert d["w"].init.args[1].name == "v"


def test_helper_parameters_are_passed_by_value():
    kernel = lower(HELPERS)
    assigned = [s.name for s in stmts(kernel.body) if isinstance(s, ir.Assign)]
    assert assigned == ["tx_inc_x"]  # not the caller's x
    assert decls(kernel)["tx_inc_x"].init.name == "x"


def test_a_weak_argument_to_an_assigned_parameter_becomes_a_variable():
    text = "i32 count(i32 k) { k += 1; return k; }\n" + kernel_text("    i32 c = count(3);")
    kernel = lower(text)
    assert [s.name for s in kernel.body] == ["tx_count_k", "tx_count_k", "c"]


def test_void_helper_stores():
    (store, _) = ops(lower(HELPERS), "store")
    assert str(store.args[0].type) == "f32*[16]"


# ---------------------------------------------------------------- loops, scopes, index width

LOOPS = kernel_text(
    "    f32 acc[BLOCK] = 0;\n"
    "    for (i32 j = 0; j < n; j += 1) {\n"
    "        if (j == 3) continue;\n"
    "        if (j > 10) break;\n"
    "        acc = acc + 1.0f;\n"
    "    }\n"
    "    i32 t = 0;\n"
    "    while (t < n) { t++; }\n"
    "    do { t -= 1; } while (t > 0);"
)


def test_loops_with_break_and_continue():
    kernel = lower(LOOPS)
    loops = [s for s in kernel.body if isinstance(s, ir.Loop)]
    assert [loop.kind for loop in loops] == ["for", "while", "do"]
    for_loop = loops[0]
    assert [s.name for s in for_loop.init] == ["j"]
    assert for_loop.cond.op == "lt"
    assert [s.name for s in for_loop.step] == ["j"]
    kinds = [type(s).__name__ for s in stmts(for_loop.body)]
    assert kinds == ["If", "Continue", "If", "Break", "Assign"]
    assert [s.name for s in loops[1].body] == ["t"] and loops[1].body[0].value.op == "add"
    assert loops[2].body[0].value.op == "sub"


def test_unique_names_with_shadowing_in_nested_scopes():
    kernel = lower(
        kernel_text(
            "    tile o = arange(0, BLOCK);\n"
            "    i32 t = 1;\n"
            "    {\n        i32 t = 5;\n        tile o = arange(0, 64);\n"
            "        store(out + o, (f32)t);\n    }\n"
            "    for (i32 t = 0; t < n; t += 1) { store(out + o, (f32)t); }\n"
            "    store(out + o, (f32)t);"
        )
    )
    assert [s.name for s in kernel.body if isinstance(s, ir.Declare)] == ["o", "t", "tx_t", "tx_o"]
    inner, looped, outer = ops(kernel, "store")
    assert inner.args[0].args[1].name == "tx_o" and inner.args[1].args[0].name == "tx_t"
    assert looped.args[0].args[1].name == "o" and looped.args[1].args[0].name == "tx_t_1"
    assert outer.args[1].args[0].name == "t"


def test_locals_keep_their_names_and_cuda_names_are_refused():
    kernel = lower(
        kernel_text("    i32 i = 2;\n    i32 L0 = 5;\n    i32 load_0 = 6;\n    i32 value = 8;")
    )
    # the compiler's own names all start with tx_, so a local keeps its name
    assert [s.name for s in kernel.body] == ["i", "L0", "load_0", "value"]
    for reserved in ("tx", "blockIdx", "new"):  # C/CUDA names are refused (parse/reserved.py)
        with pytest.raises(teeny_tx.CompileError, match=f"'{reserved}' is reserved"):
            lower(kernel_text(f"    i32 {reserved} = 3;"))


def test_const_pointer_locals_are_read_only_pointers_not_constants():
    kernel = lower(kernel_text("    const f32 *p = a + 1;\n    p += 4;\n    store(out, load(p));"))
    d = decls(kernel)["p"]
    assert d.type.dtype == PointerType(DTYPES["f32"], const=True)
    assert [s.name for s in kernel.body if isinstance(s, ir.Assign)] == ["p"]


@pytest.mark.parametrize("index64", [False, True])
def test_index64_widens_i32_values(index64):
    kernel = lower(
        kernel_text(
            "    i32 pid = program_id(0);\n    tile o = pid * BLOCK + arange(0, BLOCK);\n"
            "    f32 s = 1.0f;\n    store(out + o, load(a + o, o < n, s));"
        ),
        index64=index64,
    )
    i = "i64" if index64 else "i32"
    d = decls(kernel)
    assert (str(d["pid"].type), str(d["o"].type), str(d["s"].type)) == (i, f"{i}[128]", "f32")
    assert [str(p.type) for p in kernel.params] == ["f32*", "const f32*", i, i]
    assert kernel.index64 is index64


def test_any_pointer_takes_the_specialisations_dtype_and_alignment():
    text = kernel_text("    store(out + arange(0, BLOCK), 1.0f);", "any *out, const i32 BLOCK")
    kernel = lower(text, pointer_dtypes=(("out", DTYPES["f16"]),))
    assert str(kernel.params[0].type) == "f16*" and kernel.params[0].align == 2
    kernel = lower(text, pointer_dtypes=(("out", DTYPES["f16"]),), align=(("out", 16),))
    assert kernel.params[0].align == 16


def test_every_node_carries_its_source_location():
    kernel = lower(LOOPS)
    for s in stmts(kernel.body):
        assert s.loc.file == "kernels/t.c" and 3 <= s.loc.line <= 11
    for e in walk_exprs(kernel.body):
        assert e.loc.file == "kernels/t.c" and 3 <= e.loc.line <= 11


def test_lowering_errors_are_compile_errors():
    with pytest.raises(
        teeny_tx.CompileError, match=r"kernels/t.c:3:\d+: error: unknown identifier 'm'"
    ):
        lower(kernel_text("    tile x = m;"))


@pytest.mark.parametrize(
    ("init", "value", "message"),
    [
        ("out + arange(0, BLOCK)", "0", r"cannot assign i32 to pointer 'p' of type f32\*\[128\]"),
        ("out", "0", r"cannot assign i32 to pointer 'p' of type f32\*"),
        ("out", "2.5f", r"cannot assign f32 to pointer 'p' of type f32\*"),
        ("out", "a", r"cannot assign const f32\* to pointer 'p' of type f32\*"),
    ],
)
def test_a_pointer_variable_takes_only_pointers_of_its_type(init, value, message):
    """A `tile` variable holding pointers refuses a number or another pointer type at the
    assignment's line (a literal used to reach the integer conversion of a pointer type)."""
    text = kernel_text(f"    tile p = {init};\n    p = {value};\n    store(p, 1.0f);")
    with pytest.raises(teeny_tx.CompileError, match=rf"kernels/t.c:4:5: error: {message}"):
        lower(text)
    # the same variable assigned a pointer of its type is an ordinary assignment
    kernel = lower(kernel_text(f"    tile p = {init};\n    p = p + 1;\n    store(p, 1.0f);"))
    assert [s.name for s in kernel.body if isinstance(s, ir.Assign)] == ["p"]
