"""Messages of issue 27: a dot on sm_90a that falls back from wgmma to mma.sync is a
PerformanceWarning at its line naming the tile dimension to change (silenced by
TEENY_TX_PERF_WARNINGS=0 or a warnings filter); "did you mean" suggests operations (and helpers)
for an unknown operation, never a kernel; each of Triton's names the language spells otherwise
answers with this language's spelling (or why it is absent), in the C syntax and through the
Python front end."""

from __future__ import annotations

import warnings

import pytest

import teeny_tx as tx
import teeny_tx.triton as triton
import teeny_tx.triton.language as tl
from teeny_tx.lower.ops.spellings import rows

from .conftest import KERNEL_FILE, compile_error, kernel_text

MM = "tests/kernels/pointer_loops.c"
ARGS = ("f32", "f16", "f16", *(256,) * 4, 1, 256, 1, 256, 1)


def _warnings(bm, bn, bk, warps, arch="sm_90a"):
    module = tx.compile(MM, name=MM)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        spec = module.mm_advance.specialize(
            *ARGS, BM=bm, BN=bn, BK=bk, num_warps=warps, target=arch
        )
    found = [w for w in caught if issubclass(w.category, tx.PerformanceWarning)]
    return spec, found


@pytest.mark.parametrize(
    ("tiles", "says"),
    [
        ((64, 64, 32, 4), "the K tile is 32 (64 bytes of f16): wgmma reads whole 128-byte panels, "
         "so make it a multiple of 64"),
        ((128, 64, 64, 4), "the M tile is 128: wgmma takes 16 rows per warp, M = 16 x num_warps "
         "= 64; make the M tile 64, or num_warps 8"),
        ((64, 32, 64, 4), "the N tile is 32: wgmma takes a multiple of 64 up to 256; make it 64"),
        ((32, 64, 64, 2), "num_warps is 2: wgmma runs whole warpgroups, so make it 4 or 8"),
    ],
)  # fmt: skip
def test_a_dot_that_misses_wgmma_says_which_tile_to_change(tiles, says):
    spec, found = _warnings(*tiles)
    assert "tx::wgmma<" not in spec.cuda_source
    (w,) = found
    assert says in str(w.message) and "mma.sync, not wgmma" in str(w.message)
    assert (w.filename, w.lineno) == (MM, 18)  # the dot's line
    assert "TEENY_TX_PERF_WARNINGS=0" in str(w.message)


def test_no_warning_where_wgmma_fits_or_the_target_has_none():
    spec, found = _warnings(64, 64, 64, 4)
    assert "tx::wgmma<" in spec.cuda_source and not found
    _, found = _warnings(64, 64, 32, 4, arch="sm_90")
    assert not found


def test_the_warning_is_silenced_by_its_switch_and_by_a_filter(monkeypatch):
    assert issubclass(tx.PerformanceWarning, UserWarning)
    monkeypatch.setenv("TEENY_TX_PERF_WARNINGS", "0")
    assert not _warnings(64, 64, 32, 4)[1]
    monkeypatch.delenv("TEENY_TX_PERF_WARNINGS")
    module = tx.compile(MM, name=MM)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.filterwarnings("ignore", category=tx.PerformanceWarning)
        module.mm_advance.specialize(*ARGS, BM=64, BN=64, BK=16, num_warps=4, target="sm_90a")
    assert not [w for w in caught if issubclass(w.category, tx.PerformanceWarning)]


@triton.jit
def _matmul(a_ptr, b_ptr, c_ptr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm, rn, rk = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
    a = tl.load(a_ptr + rm[:, None] * BK + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * BN + rn[None, :])
    c = tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], c)


def test_the_warning_of_a_jit_kernel_names_its_python_line():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _matmul.specialize("f16", "f16", "f32", BM=64, BN=64, BK=16, num_warps=4, target="sm_90a")
    (w,) = [w for w in caught if issubclass(w.category, tx.PerformanceWarning)]
    assert w.filename == __file__ and "the K tile is 16" in str(w.message)
    import inspect

    lines, first = inspect.getsourcelines(_matmul.fn)
    assert w.lineno == first + next(k for k, text in enumerate(lines) if "tl.dot" in text)


# ------------------------------------------------------------ did you mean


HELPERS = """tile my_scale(tile x) { return x * 2.0f; }
kernel k_sort(f32 *x) { return; }
"""


@pytest.mark.parametrize(
    ("call", "hint"),
    [
        ("lod(a)", "did you mean 'load'?"),
        ("my_scal(1.0f)", "did you mean 'my_scale'?"),
        ("k_sortt(a)", None),  # a kernel is never the suggestion
        ("maximun(1.0f, 2.0f)", "did you mean 'maximum'?"),
    ],
)
def test_did_you_mean_suggests_operations_and_helpers(call, hint):
    err = compile_error(HELPERS + kernel_text(f"    f32 y = {call};\n    store(out, y);"))
    assert err.message.startswith("unknown operation")
    assert err.hint == hint


def test_an_unknown_value_suggests_a_variable():
    err = compile_error(
        kernel_text("    tile offs = arange(0, BLOCK);\n    store(out + ofs, 1.0f);")
    )
    assert (err.message, err.hint) == ("unknown identifier 'ofs'", "did you mean 'offs'?")


# ------------------------------------------------------------ Triton's other spellings

RENAMED = [r for r in rows() if r.status in ("differs", "absent")]


@pytest.mark.parametrize("row", RENAMED, ids=lambda r: r.qualified)
def test_each_of_tritons_other_names_answers_with_the_spelling_here(row):
    err = compile_error(kernel_text(f"    f32 y = {row.name}(1.0f);\n    store(out, y);"))
    assert err.message == f"unknown operation '{row.name}'"
    assert (err.loc.line, err.loc.col) == (3, 13)
    if row.status == "differs":
        assert err.hint.startswith(f"Triton's {row.qualified} is written {row.spelling} here")
    else:
        assert err.hint == f"{row.qualified} is not in the language: {row.note}"


def test_the_renamed_names_are_what_issue_27_counted():
    names = {r.name for r in RENAMED if r.section != "libdevice" and r.status == "differs"}
    assert {"clamp", "div_rn", "fdiv", "sqrt_rn", "view", "ravel", "interleave", "softmax"} <= names


def test_the_python_front_end_answers_with_the_spelling_too():
    @triton.jit
    def ravels(x_ptr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, tl.ravel(tl.load(x_ptr + offs)))

    with pytest.raises(tx.CompileError) as info:
        ravels.translate("f32", BLOCK=16)
    assert info.value.hint == "Triton's tl.ravel is written `reshape(x, M * N)` here"


def test_an_absent_operation_says_why():
    text = kernel_text("    store(out, sort(1.0f));")
    with pytest.raises(tx.CompileError) as info:
        tx.compile(text, name=KERNEL_FILE).k.cuda_source("f32", "f32", 3, BLOCK=4)
    assert info.value.hint.startswith("tl.sort is not in the language")


def test_the_librarys_own_kernels_do_not_warn():
    """The bundled kernels (compiled as kernels/<file> by the library) chose their tiles: a
    matmul config that runs mma.sync on sm_90a is no PerformanceWarning to its caller."""
    from teeny_tx.library.loader import kernel_text

    mod = tx.compile(kernel_text("matmul.c"), name="kernels/matmul.c")
    args = ("f16",) * 4 + (64, 64, 64, 64, 1, 64, 1, 64, 1, 0, 0, 0, 1.0)
    flags = {"HAS_BIAS": 0, "ACT": 0, "PRECISION": 20, "A_T": 0, "B_T": 0, "GROUP_M": 8}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        mod.matmul.cuda_source(*args, BM=64, BN=32, BK=32, target="sm_90a", **flags)
    assert not [w for w in caught if issubclass(w.category, tx.PerformanceWarning)]
    same = tx.compile(kernel_text("matmul.c"), name="user/matmul.c")  # the same text, a user's
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        same.matmul.cuda_source(*args, BM=64, BN=32, BK=32, target="sm_90a", **flags)
    assert [w for w in caught if issubclass(w.category, tx.PerformanceWarning)]
