"""Triton's tutorials 01-05, written in Triton's style with only the imports changed
(``teeny_tx.triton`` for ``triton``), run on the interpreter with CPU torch tensors or NumPy
arrays at reduced shapes, and checked as the tutorials check them (against torch)."""

from __future__ import annotations

import zlib

import numpy as np
import pytest
import torch

import teeny_tx.triton as triton
import teeny_tx.triton.language as tl


def seeded(name: str) -> torch.Generator:
    return torch.Generator().manual_seed(zlib.crc32(name.encode()))


# ---------------------------------------------------------------- 01 vector add


@triton.jit
def add_kernel(x_ptr, y_ptr, output_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    block_start = pid * BLOCK_SIZE
    offsets = block_start + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    output = x + y
    tl.store(output_ptr + offsets, output, mask=mask)


def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    output = torch.empty_like(x)
    n_elements = output.numel()
    grid = lambda meta: (triton.cdiv(n_elements, meta["BLOCK_SIZE"]),)  # noqa: E731
    add_kernel[grid](x, y, output, n_elements, BLOCK_SIZE=256)
    return output


@pytest.mark.parametrize("size", [1, 255, 1000, 4097])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int32])
def test_01_vector_add_torch(size, dtype):
    g = seeded(f"add{size}{dtype}")
    x = (torch.rand(size, generator=g) * 100).to(dtype)
    y = (torch.rand(size, generator=g) * 100).to(dtype)
    torch.testing.assert_close(add(x, y), x + y, rtol=0, atol=0)


def test_01_vector_add_numpy_and_tuple_grid():
    rng = np.random.default_rng(zlib.crc32(b"add-numpy"))
    x, y = rng.random(777, dtype=np.float32), rng.random(777, dtype=np.float32)
    out = np.zeros_like(x)
    add_kernel[(triton.cdiv(777, 128),)](x, y, out, 777, BLOCK_SIZE=128)
    assert np.array_equal(out, x + y)


# ---------------------------------------------------------------- 02 fused softmax


@triton.jit
def softmax_kernel(
    output_ptr, input_ptr, input_row_stride, output_row_stride, n_rows, n_cols,
    BLOCK_SIZE: tl.constexpr,
):  # fmt: skip
    row_start = tl.program_id(0)
    row_step = tl.num_programs(0)
    for row_idx in tl.range(row_start, n_rows, row_step, num_stages=2):
        row_start_ptr = input_ptr + row_idx * input_row_stride
        col_offsets = tl.arange(0, BLOCK_SIZE)
        input_ptrs = row_start_ptr + col_offsets
        mask = col_offsets < n_cols
        row = tl.load(input_ptrs, mask=mask, other=-float("inf"))
        row_minus_max = row - tl.max(row, axis=0)
        numerator = tl.exp(row_minus_max)
        denominator = tl.sum(numerator, axis=0)
        softmax_output = numerator / denominator
        output_row_start_ptr = output_ptr + row_idx * output_row_stride
        output_ptrs = output_row_start_ptr + col_offsets
        tl.store(output_ptrs, softmax_output, mask=mask)


def softmax(x: torch.Tensor, programs: int) -> torch.Tensor:
    n_rows, n_cols = x.shape
    BLOCK_SIZE = triton.next_power_of_2(n_cols)
    num_warps = 8 if BLOCK_SIZE >= 2048 else 4
    y = torch.empty_like(x)
    softmax_kernel[(min(programs, n_rows), 1, 1)](
        y, x, x.stride(0), y.stride(0), n_rows, n_cols, BLOCK_SIZE=BLOCK_SIZE,
        num_warps=num_warps,
    )  # fmt: skip
    return y


@pytest.mark.parametrize(("rows", "cols"), [(1, 1), (7, 100), (33, 781)])
def test_02_fused_softmax(rows, cols):
    x = torch.randn(rows, cols, generator=seeded(f"softmax{rows}x{cols}"))
    torch.testing.assert_close(softmax(x, programs=5), torch.softmax(x, axis=1))


def test_02_fused_softmax_strided_rows():
    base = torch.randn(9, 300, generator=seeded("softmax-strided"))
    x = base[:, :257]  # a row stride of 300: the kernel is given it
    torch.testing.assert_close(softmax(x, programs=3), torch.softmax(x, axis=1))


# ---------------------------------------------------------------- 03 matrix multiplication


@triton.autotune(
    configs=[
        triton.Config(
            {"BLOCK_SIZE_M": 32, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 16, "GROUP_SIZE_M": 2}
        ),
        triton.Config(
            {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 4}
        ),
    ],
    key=["M", "N", "K"],
)  # fmt: skip
@triton.jit
def matmul_kernel(
    a_ptr, b_ptr, c_ptr, M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr, ACTIVATION: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    offs_am = (pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)) % M
    offs_bn = (pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)) % N
    offs_k = tl.arange(0, BLOCK_SIZE_K)
    a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)

    accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_SIZE_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_SIZE_K, other=0.0)
        accumulator = tl.dot(a, b, accumulator)
        a_ptrs += BLOCK_SIZE_K * stride_ak
        b_ptrs += BLOCK_SIZE_K * stride_bk
    if ACTIVATION == "leaky_relu":
        accumulator = leaky_relu(accumulator)
    c = accumulator.to(tl.float16)

    offs_cm = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    offs_cn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    tl.store(c_ptrs, c, mask=c_mask)


@triton.jit
def leaky_relu(x):
    return tl.where(x >= 0, x, 0.01 * x)


def matmul(a: torch.Tensor, b: torch.Tensor, activation: str = "") -> torch.Tensor:
    assert a.shape[1] == b.shape[0], "Incompatible dimensions"
    M, K = a.shape
    K, N = b.shape
    c = torch.empty((M, N), device=a.device, dtype=torch.float16)
    grid = lambda META: (  # noqa: E731
        triton.cdiv(M, META["BLOCK_SIZE_M"]) * triton.cdiv(N, META["BLOCK_SIZE_N"]),
    )
    matmul_kernel[grid](
        a, b, c, M, N, K,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        ACTIVATION=activation,
    )  # fmt: skip
    return c


@pytest.mark.parametrize(("m", "n", "k"), [(16, 16, 16), (70, 50, 45), (128, 96, 64)])
@pytest.mark.parametrize("activation", ["", "leaky_relu"])
def test_03_matmul(m, n, k, activation):
    g = seeded(f"matmul{m}{n}{k}{activation}")
    a = torch.randn((m, k), generator=g).to(torch.float16)
    b = torch.randn((k, n), generator=g).to(torch.float16)
    ref = a.float() @ b.float()
    if activation:
        ref = torch.nn.functional.leaky_relu(ref, 0.01)
    torch.testing.assert_close(matmul(a, b, activation), ref.half(), atol=1e-2, rtol=1e-2)


def test_03_matmul_transposed_operand():
    g = seeded("matmul-transposed")
    a = torch.randn((40, 33), generator=g).to(torch.float16)
    b = torch.randn((48, 33), generator=g).to(torch.float16).T  # strides (1, 33)
    ref = (a.float() @ b.float()).half()
    torch.testing.assert_close(matmul(a, b), ref, atol=1e-2, rtol=1e-2)


# ---------------------------------------------------------------- 04 low-memory dropout


@triton.jit
def _seeded_dropout(x_ptr, output_ptr, n_elements, p, seed, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    block_start = pid * BLOCK_SIZE
    offsets = block_start + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    random = tl.rand(seed, offsets)
    x_keep = random > p
    output = tl.where(x_keep, x / (1 - p), 0.0)
    tl.store(output_ptr + offsets, output, mask=mask)


def seeded_dropout(x: torch.Tensor, p: float, seed: int) -> torch.Tensor:
    output = torch.empty_like(x)
    assert x.is_contiguous()
    n_elements = x.numel()
    grid = lambda meta: (triton.cdiv(n_elements, meta["BLOCK_SIZE"]),)  # noqa: E731
    _seeded_dropout[grid](x, output, n_elements, p, seed, BLOCK_SIZE=1024)
    return output


def test_04_low_memory_dropout():
    x = torch.randn(size=(2500,), generator=seeded("dropout")) + 5.0  # never 0
    p = 0.5
    out = seeded_dropout(x, p=p, seed=123)
    again = seeded_dropout(x, p=p, seed=123)
    other = seeded_dropout(x, p=p, seed=512)
    assert torch.equal(out, again)  # the same seed gives the same mask
    assert not torch.equal(out, other)
    kept = out != 0
    torch.testing.assert_close(out[kept], x[kept] / (1 - p))
    assert 0.4 < kept.float().mean().item() < 0.6
    # the bundled C kernel keeps the same lanes (the same Philox words, the same rand)
    import teeny_tx

    ref = np.zeros(2500, np.float32)
    c_dropout = teeny_tx.compile("kernels/dropout.c").dropout
    c_dropout.interpret[(3,)](ref, x.numpy(), p, 123, 2500, BLOCK=1024)
    assert np.array_equal(out.numpy(), ref)


# ---------------------------------------------------------------- 05 layer norm


@triton.jit
def _layer_norm_fwd_fused(
    X, Y, W, B, Mean, Rstd, stride, N, eps, BLOCK_SIZE: tl.constexpr,
):  # fmt: skip
    row = tl.program_id(0)
    Y += row * stride
    X += row * stride
    mean = 0
    _mean = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        a = tl.load(X + cols, mask=cols < N, other=0.0).to(tl.float32)
        _mean += a
    mean = tl.sum(_mean, axis=0) / N
    _var = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        x = tl.load(X + cols, mask=cols < N, other=0.0).to(tl.float32)
        x = tl.where(cols < N, x - mean, 0.0)
        _var += x * x
    var = tl.sum(_var, axis=0) / N
    rstd = 1 / tl.sqrt(var + eps)
    tl.store(Mean + row, mean)
    tl.store(Rstd + row, rstd)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        mask = cols < N
        w = tl.load(W + cols, mask=mask)
        b = tl.load(B + cols, mask=mask)
        x = tl.load(X + cols, mask=mask, other=0.0).to(tl.float32)
        x_hat = (x - mean) * rstd
        y = x_hat * w + b
        tl.store(Y + cols, y, mask=mask)


@triton.jit
def _layer_norm_bwd_dx_fused(
    DX, DY, DW, DB, X, W, Mean, Rstd, Lock, stride, N,
    GROUP_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr,
):  # fmt: skip
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE_N)
    mask = cols < N
    X += row * stride
    DY += row * stride
    DX += row * stride
    lock_id = row % GROUP_SIZE_M
    Lock += lock_id
    Count = Lock + GROUP_SIZE_M
    DW = DW + lock_id * N + cols
    DB = DB + lock_id * N + cols
    x = tl.load(X + cols, mask=mask, other=0).to(tl.float32)
    dy = tl.load(DY + cols, mask=mask, other=0).to(tl.float32)
    w = tl.load(W + cols, mask=mask).to(tl.float32)
    mean = tl.load(Mean + row)
    rstd = tl.load(Rstd + row)
    xhat = (x - mean) * rstd
    wdy = w * dy
    xhat = tl.where(mask, xhat, 0.0)
    wdy = tl.where(mask, wdy, 0.0)
    c1 = tl.sum(xhat * wdy, axis=0) / N
    c2 = tl.sum(wdy, axis=0) / N
    dx = (wdy - (xhat * c1 + c2)) * rstd
    tl.store(DX + cols, dx, mask=mask)
    partial_dw = (dy * xhat).to(tl.float32)
    partial_db = (dy).to(tl.float32)
    while tl.atomic_cas(Lock, 0, 1) == 1:
        pass
    count = tl.load(Count)
    if count == 0:
        tl.atomic_xchg(Count, 1)
    else:
        partial_dw += tl.load(DW, mask=mask)
        partial_db += tl.load(DB, mask=mask)
    tl.store(DW, partial_dw, mask=mask)
    tl.store(DB, partial_db, mask=mask)
    tl.debug_barrier()
    tl.atomic_xchg(Lock, 0)


@triton.jit
def _layer_norm_bwd_dwdb(
    DW, DB, FINAL_DW, FINAL_DB, M, N,
    BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(0)
    cols = pid * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    dw = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    db = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for i in range(0, M, BLOCK_SIZE_M):
        rows = i + tl.arange(0, BLOCK_SIZE_M)
        mask = (rows[:, None] < M) & (cols[None, :] < N)
        offs = rows[:, None] * N + cols[None, :]
        dw += tl.load(DW + offs, mask=mask, other=0.0)
        db += tl.load(DB + offs, mask=mask, other=0.0)
    sum_dw = tl.sum(dw, axis=0)
    sum_db = tl.sum(db, axis=0)
    tl.store(FINAL_DW + cols, sum_dw, mask=cols < N)
    tl.store(FINAL_DB + cols, sum_db, mask=cols < N)


def layer_norm_fwd(x, weight, bias, eps, block):
    M, N = x.shape
    y = torch.empty_like(x)
    mean = torch.empty((M,), dtype=torch.float32, device=x.device)
    rstd = torch.empty((M,), dtype=torch.float32, device=x.device)
    _layer_norm_fwd_fused[(M,)](x, y, weight, bias, mean, rstd, x.stride(0), N, eps,
                                BLOCK_SIZE=block, num_warps=4)  # fmt: skip
    return y, mean, rstd


def layer_norm_bwd(dy, x, w, mean, rstd, group_size_m):
    M, N = x.shape
    BLOCK_SIZE_N = triton.next_power_of_2(N)
    locks = torch.zeros(2 * group_size_m, dtype=torch.int32, device=x.device)
    _dw = torch.zeros((group_size_m, N), dtype=torch.float32, device=x.device)
    _db = torch.zeros((group_size_m, N), dtype=torch.float32, device=x.device)
    dw = torch.empty((N,), dtype=w.dtype, device=x.device)
    db = torch.empty((N,), dtype=w.dtype, device=x.device)
    dx = torch.empty_like(dy)
    _layer_norm_bwd_dx_fused[(M,)](
        dx, dy, _dw, _db, x, w, mean, rstd, locks, x.stride(0), N,
        BLOCK_SIZE_N=BLOCK_SIZE_N, GROUP_SIZE_M=group_size_m,
    )  # fmt: skip
    grid = lambda meta: (triton.cdiv(N, meta["BLOCK_SIZE_N"]),)  # noqa: E731
    _layer_norm_bwd_dwdb[grid](_dw, _db, dw, db, min(group_size_m, M), N,
                               BLOCK_SIZE_M=32, BLOCK_SIZE_N=128)  # fmt: skip
    return dx, dw, db


@pytest.mark.parametrize(("m", "n", "block"), [(3, 100, 32), (17, 257, 128), (8, 64, 64)])
def test_05_layer_norm_forward_and_backward(m, n, block):
    g = seeded(f"layernorm{m}x{n}")
    x = -2.3 + 0.5 * torch.randn((m, n), generator=g, dtype=torch.float32)
    w = torch.rand((n,), generator=g, dtype=torch.float32)
    b = torch.rand((n,), generator=g, dtype=torch.float32)
    dy = 0.1 * torch.randn((m, n), generator=g, dtype=torch.float32)
    y, mean, rstd = layer_norm_fwd(x, w, b, 1e-5, block)
    xr, wr, br = (t.clone().requires_grad_(True) for t in (x, w, b))
    ref = torch.nn.functional.layer_norm(xr, (n,), wr, br, 1e-5)
    torch.testing.assert_close(y, ref.detach(), atol=1e-5, rtol=1e-5)
    ref.backward(dy)
    dx, dw, db = layer_norm_bwd(dy, x, w, mean, rstd, group_size_m=4)
    torch.testing.assert_close(dx, xr.grad, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(dw, wr.grad, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(db, br.grad, atol=1e-4, rtol=1e-4)


# ---------------------------------------------------------------- 06 fused attention (forward)


@triton.jit
def _attn_fwd(
    Q, K, V, Out, sm_scale,
    stride_qz, stride_qh, stride_qm, stride_qk,
    stride_kz, stride_kh, stride_kn, stride_kk,
    stride_vz, stride_vh, stride_vn, stride_vk,
    stride_oz, stride_oh, stride_om, stride_ok,
    H, N_CTX,
    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr,
):  # fmt: skip
    start_m = tl.program_id(0)
    off_hz = tl.program_id(1)
    off_z = off_hz // H
    off_h = off_hz % H
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    q_ptrs = Q + off_z * stride_qz + off_h * stride_qh
    q_ptrs += offs_m[:, None] * stride_qm + offs_d[None, :] * stride_qk
    q = tl.load(q_ptrs, mask=offs_m[:, None] < N_CTX, other=0.0)
    m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32) + 1.0
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * 1.44269504  # 1/log(2)
    hi = tl.minimum((start_m + 1) * BLOCK_M, N_CTX) if CAUSAL else N_CTX
    k_base = K + off_z * stride_kz + off_h * stride_kh
    v_base = V + off_z * stride_vz + off_h * stride_vh
    for start_n in range(0, hi, BLOCK_N):
        cols = start_n + offs_n
        k = tl.load(
            k_base + offs_d[:, None] * stride_kk + cols[None, :] * stride_kn,
            mask=cols[None, :] < N_CTX,
            other=0.0,
        )
        qk = tl.dot(q, k)
        valid = cols[None, :] < N_CTX
        if CAUSAL:
            valid = valid & (offs_m[:, None] >= cols[None, :])
        qk = tl.where(valid, qk * qk_scale, -1.0e6)
        m_ij = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.math.exp2(qk - m_ij[:, None])
        l_ij = tl.sum(p, 1)
        alpha = tl.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + l_ij
        acc = acc * alpha[:, None]
        v = tl.load(
            v_base + cols[:, None] * stride_vn + offs_d[None, :] * stride_vk,
            mask=cols[:, None] < N_CTX,
            other=0.0,
        )
        acc = tl.dot(p.to(tl.float16), v, acc)
        m_i = m_ij
    acc = acc / l_i[:, None]
    o_ptrs = Out + off_z * stride_oz + off_h * stride_oh
    o_ptrs += offs_m[:, None] * stride_om + offs_d[None, :] * stride_ok
    tl.store(o_ptrs, acc.to(Out.dtype.element_ty), mask=offs_m[:, None] < N_CTX)


def attention(q, k, v, causal: bool, sm_scale: float) -> torch.Tensor:
    Z, H, N_CTX, HEAD_DIM = q.shape
    o = torch.empty_like(q)
    BLOCK_M, BLOCK_N = 16, 16
    grid = (triton.cdiv(N_CTX, BLOCK_M), Z * H, 1)
    _attn_fwd[grid](
        q, k, v, o, sm_scale, *q.stride(), *k.stride(), *v.stride(), *o.stride(), H, N_CTX,
        HEAD_DIM=HEAD_DIM, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, CAUSAL=causal,
    )  # fmt: skip
    return o


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(("z", "h", "n_ctx", "d"), [(1, 2, 50, 16), (2, 1, 32, 32)])
def test_06_fused_attention_forward(z, h, n_ctx, d, causal):
    g = seeded(f"attention{z}{h}{n_ctx}{d}{causal}")
    q, k, v = (
        (0.5 * torch.randn((z, h, n_ctx, d), generator=g)).to(torch.float16) for _ in range(3)
    )
    sm_scale = d**-0.5
    out = attention(q, k, v, causal, sm_scale)
    ref = torch.nn.functional.scaled_dot_product_attention(
        q.float(), k.float(), v.float(), is_causal=causal, scale=sm_scale
    )
    torch.testing.assert_close(out.float(), ref, atol=1e-2, rtol=1e-2)


# ---------------------------------------------------------------- NVRTC, without a GPU

NVRTC_CASES = [
    (add_kernel, ("f16", "f16", "f16", 1000), {"BLOCK_SIZE": 1024}),
    (softmax_kernel, ("f32", "f32", 781, 781, 1823, 781), {"BLOCK_SIZE": 1024}),
    (
        matmul_kernel.fn,
        ("f16", "f16", "f16", 512, 512, 512, 512, 1, 512, 1, 512, 1),
        {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 8},
    ),
    (_seeded_dropout, ("f32", "f32", 1000, 0.5, 123), {"BLOCK_SIZE": 1024}),
    (_layer_norm_fwd_fused, ("f16", "f16", "f16", "f16", "f32", "f32", 512, 512, 1e-5), {}),
    (
        _layer_norm_bwd_dx_fused,
        ("f16", "f16", "f32", "f32", "f16", "f16", "f32", "f32", "i32", 512, 512),
        {"GROUP_SIZE_M": 64, "BLOCK_SIZE_N": 512},
    ),
    (_attn_fwd, ("f16",) * 4 + (0.125,) + (65536, 16384, 64, 1) * 4 + (4, 1000), {}),
]


@pytest.mark.parametrize(("fn", "args", "constexprs"), NVRTC_CASES, ids=lambda v: "")
def test_tutorial_kernels_compile_with_nvrtc(fn, args, constexprs):
    from .conftest import nvrtc_compile

    extra = {
        "_layer_norm_fwd_fused": {"BLOCK_SIZE": 512},
        "_attn_fwd": {"HEAD_DIM": 64, "BLOCK_M": 128, "BLOCK_N": 64, "CAUSAL": True},
        "matmul_kernel": {"ACTIVATION": "leaky_relu"},
    }.get(fn.__name__, {})
    source = fn.cuda_source(*args, num_warps=8, target="sm_90", **constexprs, **extra)
    src = fn._tx_source()
    first_statement = src.first + src.tree.body[0].lineno - 1
    assert f'#line {first_statement} "{__file__}"' in source
    assert nvrtc_compile(source, fn.__name__)
