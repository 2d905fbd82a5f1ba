"""Pointer values and Triton's grouped GEMM (tutorial 08): addresses loaded from a table the host
filled, read as pointers of the element type the kernel declares (``(const f16 *)table[g]``,
``tl.load(ptrs + g).to(tl.pointer_type(tl.float16))``). On the interpreter an address maps back
to an array the launch was given (its pointer arguments and ``arrays=``); one outside all of
them is an error at the kernel line. The grouped GEMM runs in the C syntax
(tests/kernels/grouped_gemm.c, masked: any sizes) and through ``teeny_tx.jit`` (the tutorial's
kernel, whose sizes are multiples of the tiles), on random small groups, against NumPy; its CUDA
compiles for sm_90 and sm_90a."""

from __future__ import annotations

import numpy as np
import pytest

import teeny_tx as tx
import teeny_tx.triton as triton
import teeny_tx.triton.language as tl
from teeny_tx.kernel import HEADERS
from teeny_tx.runtime import nvrtc

from .conftest import KERNEL_FILE, assert_close_elementwise, compile_error, stable_seed

GROUPED = "tests/kernels/grouped_gemm.c"


@pytest.fixture(scope="module")
def grouped():
    return tx.compile(GROUPED, name=GROUPED)


def table(arrays) -> np.ndarray:
    """The host's table of addresses: one i64 per array (its first element's)."""
    return np.array([a.__array_interface__["data"][0] for a in arrays], np.int64)


def random_groups(seed: int, multiple: int = 1, most: int = 70):
    """2-5 problems (M, N, K) of random small sizes (multiples of ``multiple``), f16 operands
    A [M, K], B [K, N] (B a strided view for some) and f16 outputs C [M, N]."""
    rng = np.random.default_rng(seed)
    groups = []
    for g in range(int(rng.integers(2, 6))):
        m, n, k = (int(rng.integers(1, most // multiple + 1)) * multiple for _ in range(3))
        a = rng.standard_normal((m, k)).astype(np.float16)
        b = rng.standard_normal((k, n + (3 if g % 2 else 0))).astype(np.float16)
        b = b[:, :n] if g % 2 else b  # a view whose row stride is not n
        groups.append((a, b, np.zeros((m, n), np.float16)))
    return groups


def check(groups) -> None:
    for a, b, c in groups:
        want = a.astype(np.float64) @ b.astype(np.float64)
        scale = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
        # f32 accumulation (a few roundings of u32, far below f16's) then one rounding to f16
        assert_close_elementwise(c, want, "f16", ulps=1.5, scale=scale, atol=2.0**-24)


def sizes_and_strides(groups):
    sizes = np.array([(a.shape[0], c.shape[1], a.shape[1]) for a, b, c in groups], np.int32)
    lds = np.array([(a.strides[0] // 2, b.strides[0] // 2, c.shape[1]) for a, b, c in groups])
    return sizes.reshape(-1), lds.astype(np.int32).reshape(-1)


# ------------------------------------------------------------ the C syntax


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize(("bm", "bn", "bk", "programs"), [(16, 16, 16, 3), (32, 64, 32, 5)])
def test_grouped_gemm_in_c_on_the_interpreter(grouped, seed, bm, bn, bk, programs):
    groups = random_groups(stable_seed("grouped-c", seed, bm))
    a, b, c = (table(x) for x in zip(*groups, strict=True))
    sizes, lds = sizes_and_strides(groups)
    arrays = [x for group in groups for x in group]
    grouped.grouped_matmul.interpret[(programs,)](
        a, b, c, sizes, lds, len(groups), NUM_SM=programs, BM=bm, BN=bn, BK=bk, arrays=arrays
    )
    check(groups)


@pytest.mark.parametrize("arch", ["sm_90", "sm_90a"])
def test_grouped_gemm_in_c_compiles(grouped, arch):
    spec = grouped.grouped_matmul.specialize(
        "i64", "i64", "i64", "i32", "i32", 8,
        NUM_SM=132, BM=128, BN=128, BK=64, num_warps=8, num_stages=3, target=arch,
    )  # fmt: skip
    src = spec.cuda_source
    assert "reinterpret_cast<const __half*>(" in src and "reinterpret_cast<__half*>(" in src
    assert ("tx::wgmma<" in src) == (arch == "sm_90a")
    result = nvrtc.compile_with_log(src, name="grouped_matmul", arch=arch, headers=HEADERS)
    assert result.cubin[:4] == b"\x7fELF"


# ------------------------------------------------------------ tutorial 08, through teeny_tx.jit


@triton.jit
def grouped_matmul_kernel(
    # device tensor of matrices pointers
    group_a_ptrs,
    group_b_ptrs,
    group_c_ptrs,
    # device tensor of gemm sizes. its shape is [group_size, 3]
    # dim 0 is group_size, dim 1 is the values of <M, N, K> of each gemm
    group_gemm_sizes,
    # device tensor of leading dimension sizes. its shape is [group_size, 3]
    # dim 0 is group_size, dim 1 is the values of <lda, ldb, ldc> of each gemm
    g_lds,
    # number of gemms
    group_size,
    # number of virtual SM
    NUM_SM: tl.constexpr,
    # tile sizes
    BLOCK_SIZE_M: tl.constexpr,
    BLOCK_SIZE_N: tl.constexpr,
    BLOCK_SIZE_K: tl.constexpr,
):
    tile_idx = tl.program_id(0)
    last_problem_end = 0
    for g in range(group_size):
        # get the gemm size of the current problem
        gm = tl.load(group_gemm_sizes + g * 3)
        gn = tl.load(group_gemm_sizes + g * 3 + 1)
        gk = tl.load(group_gemm_sizes + g * 3 + 2)
        num_m_tiles = tl.cdiv(gm, BLOCK_SIZE_M)
        num_n_tiles = tl.cdiv(gn, BLOCK_SIZE_N)
        num_tiles = num_m_tiles * num_n_tiles
        # iterate through the tiles in the current gemm problem
        while tile_idx >= last_problem_end and tile_idx < last_problem_end + num_tiles:
            # pick up a tile from the current gemm problem
            k = gk
            lda = tl.load(g_lds + g * 3)
            ldb = tl.load(g_lds + g * 3 + 1)
            ldc = tl.load(g_lds + g * 3 + 2)
            a_ptr = tl.load(group_a_ptrs + g).to(tl.pointer_type(tl.float16))
            b_ptr = tl.load(group_b_ptrs + g).to(tl.pointer_type(tl.float16))
            c_ptr = tl.load(group_c_ptrs + g).to(tl.pointer_type(tl.float16))
            # figure out tile coordinates
            tile_idx_in_gemm = tile_idx - last_problem_end
            tile_m_idx = tile_idx_in_gemm // num_n_tiles
            tile_n_idx = tile_idx_in_gemm % num_n_tiles

            # do regular gemm here
            offs_am = tile_m_idx * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
            offs_bn = tile_n_idx * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
            offs_k = tl.arange(0, BLOCK_SIZE_K)
            a_ptrs = a_ptr + offs_am[:, None] * lda + offs_k[None, :]
            b_ptrs = b_ptr + offs_k[:, None] * ldb + offs_bn[None, :]
            accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
            for kk in range(0, tl.cdiv(k, BLOCK_SIZE_K)):  # noqa: B007
                # hint to Triton compiler to do proper loop pipelining
                tl.multiple_of(a_ptrs, [16, 16])
                tl.multiple_of(b_ptrs, [16, 16])
                # assume full tile for now
                a = tl.load(a_ptrs)
                b = tl.load(b_ptrs)
                accumulator += tl.dot(a, b)
                a_ptrs += BLOCK_SIZE_K
                b_ptrs += BLOCK_SIZE_K * ldb
            c = accumulator.to(tl.float16)

            offs_cm = tile_m_idx * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
            offs_cn = tile_n_idx * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
            c_ptrs = c_ptr + ldc * offs_cm[:, None] + offs_cn[None, :]

            # assumes full tile for now
            tl.store(c_ptrs, c)

            # go to the next tile by advancing NUM_SM
            tile_idx += NUM_SM

        # get ready to go to the next gemm problem
        last_problem_end = last_problem_end + num_tiles


def group_gemm_fn(groups, programs: int = 4, block: int = 16) -> None:
    """The tutorial's host code, with NumPy arrays for the interpreter."""
    a, b, c = (table(x) for x in zip(*groups, strict=True))
    sizes, lds = sizes_and_strides(groups)
    arrays = [x for group in groups for x in group]
    grid = lambda meta: (meta["NUM_SM"],)  # noqa: E731
    grouped_matmul_kernel[grid](
        a, b, c, sizes, lds, len(groups),
        NUM_SM=programs, BLOCK_SIZE_M=block, BLOCK_SIZE_N=block, BLOCK_SIZE_K=block,
        arrays=arrays,
    )  # fmt: skip


@pytest.mark.parametrize("seed", range(4))
def test_tutorial_08_grouped_gemm_through_jit(seed):
    groups = random_groups(stable_seed("grouped-jit", seed), multiple=16, most=64)
    group_gemm_fn(groups, programs=3 + seed)
    check(groups)


def test_tutorial_08_reads_an_address_as_a_pointer():
    text = grouped_matmul_kernel.translate("i64", "i64", "i64", "i32", "i32", 3, 4, 16, 16, 16)
    assert "tile a_ptr = (f16 *)load(group_a_ptrs + g);" in text
    assert "multiple_of" not in text  # a discarded hint changes nothing


@pytest.mark.parametrize("arch", ["sm_90", "sm_90a"])
def test_tutorial_08_compiles(arch):
    spec = grouped_matmul_kernel.specialize(
        "i64", "i64", "i64", "i32", "i32", 3, NUM_SM=132,
        BLOCK_SIZE_M=128, BLOCK_SIZE_N=128, BLOCK_SIZE_K=64, num_warps=8, target=arch,
    )  # fmt: skip
    result = nvrtc.compile_with_log(
        spec.cuda_source, name="grouped_matmul_kernel", arch=arch, headers=HEADERS
    )
    assert result.cubin[:4] == b"\x7fELF"


# ------------------------------------------------------------ pointer values, one by one

GATHER = """kernel gather(f32 *out, const any *table, const i32 *sizes, const i32 BLOCK)
{
    i32 g = program_id(0);
    const f32 *x = (const f32 *)table[g];
    tile o = arange(0, BLOCK);
    store(out + g * BLOCK + o, load(x + o, o < sizes[g], -1.0f) * 2.0f);
}
"""


def gather_reference(xs, block):
    out = np.full((len(xs), block), -2.0, np.float32)
    for g, x in enumerate(xs):
        out[g, : x.size] = x * 2
    return out


@pytest.mark.parametrize("dtype", [np.int64, np.uint64])
def test_addresses_in_a_table_read_as_pointers(dtype):
    """Addresses into three arrays, one of them a view into the middle of another allocation."""
    rng = np.random.default_rng(stable_seed("gather", np.dtype(dtype).name))
    base = rng.standard_normal(200).astype(np.float32)
    xs = [rng.standard_normal(37).astype(np.float32), base[:1], base[100:164]]
    module = tx.compile(GATHER, name=KERNEL_FILE)
    out = np.zeros((3, 64), np.float32)
    sizes = np.array([x.size for x in xs], np.int32)
    module.gather.interpret[(3,)](
        out, table(xs).astype(dtype), sizes, BLOCK=64, arrays=[xs[0], base]
    )
    np.testing.assert_array_equal(out, gather_reference(xs, 64))


def test_an_address_inside_an_argument_needs_no_arrays():
    """The pointer arguments are registered: an address into one of them resolves alone."""
    text = """kernel pick(f32 *out, const f32 *src, const i64 *table, const i32 BLOCK)
{
    i32 g = program_id(0);
    const f32 *p = (const f32 *)table[g];
    tile o = arange(0, BLOCK);
    store(out + g * BLOCK + o, load(p + o));
}
"""
    x = np.arange(64, dtype=np.float32)
    out = np.zeros((2, 16), np.float32)
    addresses = np.array([x[8:].ctypes.data, x[40:].ctypes.data], np.int64)
    tx.compile(text, name=KERNEL_FILE).pick.interpret[(2,)](out, x[3:], addresses, BLOCK=16)
    np.testing.assert_array_equal(out, np.stack([x[8:24], x[40:56]]))


def test_an_address_outside_every_array_names_the_kernel_line():
    x = np.arange(8, dtype=np.float32)
    stray = np.arange(8, dtype=np.float32)  # never given to the launch
    module = tx.compile(GATHER, name=KERNEL_FILE)
    out = np.zeros((1, 8), np.float32)
    with pytest.raises(tx.InterpreterError) as info:
        module.gather.interpret[(1,)](
            out, table([stray]), np.array([8], np.int32), BLOCK=8, arrays=[x]
        )
    text = str(info.value)
    assert "kernels/t.c:4:" in text and "is in no array of this launch" in text
    assert "arrays=" in text and "^" in text


def test_an_address_past_the_array_is_out_of_bounds_at_the_load():
    x = np.arange(8, dtype=np.float32)
    module = tx.compile(GATHER, name=KERNEL_FILE)
    out = np.zeros((1, 16), np.float32)
    with pytest.raises(tx.InterpreterError) as info:
        module.gather.interpret[(1,)](
            out, table([x]), np.array([16], np.int32), BLOCK=16, arrays=[x]
        )
    assert "kernels/t.c:6:" in str(info.value) and "out of bounds" in str(info.value)


def test_a_tile_of_addresses():
    """A tile of addresses into one array: each lane its own pointer."""
    text = """kernel k(f32 *out, const u64 *table, const i32 BLOCK)
{
    tile o = arange(0, BLOCK);
    tile p = (const f32 *)load(table + o);
    store(out + o, load(p) + 1.0f);
}
"""
    x = np.random.default_rng(1).standard_normal(100).astype(np.float32)
    picks = np.random.default_rng(2).integers(0, 100, 32)
    addresses = (x.ctypes.data + 4 * picks).astype(np.uint64)
    out = np.zeros(32, np.float32)
    tx.compile(text, name=KERNEL_FILE).k.interpret[(1,)](out, addresses, BLOCK=32, arrays=[x])
    np.testing.assert_array_equal(out, x[picks] + 1)


@pytest.mark.parametrize(
    ("line", "col", "message"),
    [
        ("const f32 *p = (const f32 *)load(idx);", 20, "an address is a 64-bit integer"),
        ("const f32 *p = (const f32 *)7;", 20, "a constant cannot become a pointer"),
        ("const f32 *p = (const f32 *)(f64)load(table);", 20, "an address is a 64-bit integer"),
    ],
)
def test_bad_addresses_are_refused_at_the_cast(line, col, message):
    text = (
        "kernel k(f32 *out, const i64 *table, const i32 *idx, const i32 BLOCK)\n{\n"
        f"    {line}\n    store(out, load(p));\n}}\n"
    )
    err = compile_error(text, "f32", "i64", "i32", BLOCK=4)
    assert (err.loc.line, err.loc.col) == (3, col) and err.message.startswith(message)
    assert err.hint and "table" in err.hint
