"""lower/names.py: one allocator for every generated name, so none shadows a user's or another.

Checked on tests/kernels/names.c, a pipelined dot loop whose parameters, locals, loop variable
and operands are named like the compiler's temporaries, for both dot lowerings (sm_90:
mma.sync, sm_90a: wgmma): NVRTC compiles the CUDA, every name the CUDA declares is either the
user's own (declared where the kernel declares it) or starts with tx_, and the user's names
are read where the kernel reads them. The interpreter gives the NumPy result (the GPU test in
tests/gpu/test_names_gpu.py compares the GPU with it).
"""

import re

import numpy as np
import pytest

import teeny_tx as tx
from teeny_tx.kernel import HEADERS
from teeny_tx.lower.names import FIXED, REGISTER, Names
from teeny_tx.parse.reserved import GENERATED_PREFIX
from teeny_tx.runtime import nvrtc
from tests.conftest import KERNEL_FILE, kernel_text, lower

NAMES_FILE = "tests/kernels/names.c"
USER_NAMES = {"BM", "BN", "BK", "i", "L0", "load_0", "mask", "acc_0", "stage_ahead", "value"}
PARAMS = {"c", "a", "b", "M", "N", "K", "stage", "k_ahead"}
# (arch, tiles BM BN BK, num_warps): sm_90a takes wgmma at 16 rows per warp, sm_90 mma.sync
TARGETS = [("sm_90", (64, 64, 32), 4), ("sm_90a", (64, 64, 64), 4)]

_DECLARED = re.compile(
    r"(?:\bint|\bfloat|\bbool|__half|\bunsigned char)\*?(?: const)? (\w+)(?:\[| =|;)"
)


def names_source(arch: str, tiles, warps: int, stages: int = 3, offsets=(32, 64)) -> str:
    bm, bn, bk = tiles
    kernel = tx.compile(NAMES_FILE, name=NAMES_FILE).names
    return kernel.cuda_source(
        "f32", "f16", "f16", 256, 256, 256, *offsets,
        BM=bm, BN=bn, BK=bk, num_warps=warps, num_stages=stages,
        target=arch,
    )  # fmt: skip


@pytest.mark.parametrize(("arch", "tiles", "warps"), TARGETS)
def test_generated_names_never_shadow_user_names(arch, tiles, warps):
    src = names_source(arch, tiles, warps)
    assert ("wgmma.mma_async" in src) == (arch == "sm_90a")
    assert "tx::cp_async16(" in src, "the loop is software-pipelined"
    declared = _DECLARED.findall(src.split('extern "C"', 1)[1])
    generated = [n for n in declared if n.startswith(GENERATED_PREFIX)]
    users = [n for n in declared if not n.startswith(GENERATED_PREFIX)]
    # every user local is declared once, except the loop variable: the main loop declares it,
    # the prologue and the look-ahead copies rebind it to the iteration they copy for
    assert set(users) <= USER_NAMES and set(USER_NAMES) <= set(users), users
    assert {n for n in users if users.count(n) > 1} <= {"stage_ahead"}
    # generated names: each one unique, except the register index of every tile loop
    repeated = {n for n in generated if generated.count(n) > 1}
    assert repeated <= {REGISTER}, repeated
    assert not set(generated) & (USER_NAMES | PARAMS)
    # the parameters are read where the kernel reads them: inside the copies' addresses
    copies = [line for line in src.splitlines() if "tx::cp_async16(" in line]
    assert all(
        re.search(r"\ba \+ stage \+ (tx::wrap_mul<int>\()?(i|tx_i_cvt)\[", line)
        for line in copies[::2]
    ), copies[0]
    assert all(re.search(r"\bb \+ k_ahead \+ ", line) for line in copies[1::2]), copies[1]
    cubin = nvrtc.compile_to_cubin(src, name="names", arch=arch, headers=HEADERS)
    assert cubin[:4] == b"\x7fELF"


def test_the_interpreter_reads_the_user_names():
    m, n, k, stage, k_ahead = 70, 50, 90, 5, 3
    rng = np.random.default_rng(1)
    a = rng.standard_normal(stage + m * k).astype(np.float16)
    b = rng.standard_normal(k_ahead + k * n).astype(np.float16)
    c = np.zeros((m, n), np.float32)
    kernel = tx.compile(NAMES_FILE, name=NAMES_FILE).names
    kernel.interpret[(tx.cdiv(m, 32), tx.cdiv(n, 32))](
        c, a, b, m, n, k, stage, k_ahead, BM=32, BN=32, BK=32
    )
    want = a[stage:].reshape(m, k).astype(np.float64) @ b[k_ahead:].reshape(k, n)
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-5)


def test_allocator_counts_per_prefix_and_skips_taken_and_fixed_names():
    names = Names(taken={"tx_load", "tx_x_1"})
    assert [names.fresh("load") for _ in range(3)] == ["tx_load_1", "tx_load_2", "tx_load_3"]
    assert [names.fresh("x") for _ in range(3)] == ["tx_x", "tx_x_2", "tx_x_3"]
    assert names.fresh("i") == "tx_i_1" and REGISTER == "tx_i" and REGISTER in FIXED
    assert names.fresh("L3") == "tx_L3_1"  # tx_L3 is a layout's alias
    again = Names(taken={"tx_load", "tx_x_1"})
    assert [again.fresh("load") for _ in range(3)] == ["tx_load_1", "tx_load_2", "tx_load_3"]


def test_shadowed_and_inlined_names_are_generated():
    """A local shadowing another and an inlined helper's locals get tx_ names; a local named
    like the register index (`i`) or a layout alias (`L0`) keeps its name."""
    text = "f32 twice(f32 i) { f32 L0 = i + i; return L0; }\n" + kernel_text(
        "    i32 i = 1;\n    {\n        i32 i = 2;\n        store(out, (f32)i);\n    }\n"
        "    store(out, twice((f32)i));"
    )
    kernel = lower(text)
    from teeny_tx.lower import ir
    from teeny_tx.lower.ir import walk_stmts

    declared = [s.name for s in walk_stmts(kernel.body) if isinstance(s, ir.Declare)]
    assert declared[:2] == ["i", "tx_i_1"]  # never tx_i: the register index's
    assert all(n.startswith("tx_twice_") for n in declared[2:]), declared
    src = tx.compile(text, name=KERNEL_FILE).k.cuda_source("f32", "f32", 10, BLOCK=128)
    assert "int i = 1;" in src and "int tx_i_1 = 2;" in src
