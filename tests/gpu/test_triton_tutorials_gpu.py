"""Triton's tutorials 01-05 (the kernels of tests/test_triton_tutorials.py) on the GPU, on
torch CUDA tensors and CuPy arrays, checked against torch; the autotuner timing its configs
with do_bench; the Python kernels' speed beside the same kernels written in C syntax."""

from __future__ import annotations

import zlib

import pytest

torch = pytest.importorskip("torch")

import teeny_tx  # noqa: E402
import teeny_tx.triton as triton  # noqa: E402
from tests import test_triton_tutorials as T  # noqa: E402


def _gen(name: str):
    return torch.Generator(device="cuda").manual_seed(zlib.crc32(name.encode()))


@pytest.fixture(autouse=True)
def _torch_cuda():
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA device")


@pytest.mark.parametrize("size", [1, 1000, 98432])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_01_vector_add(size, dtype):
    g = _gen(f"add{size}")
    x = torch.rand(size, device="cuda", generator=g).to(dtype)
    y = torch.rand(size, device="cuda", generator=g).to(dtype)
    torch.testing.assert_close(T.add(x, y), x + y, rtol=0, atol=0)


def test_01_vector_add_cupy():
    cp = pytest.importorskip("cupy")
    x = cp.random.default_rng(1).random(5000, dtype=cp.float32)
    y = cp.random.default_rng(2).random(5000, dtype=cp.float32)
    out = cp.empty_like(x)
    T.add_kernel[(triton.cdiv(5000, 1024),)](x, y, out, 5000, BLOCK_SIZE=1024)
    assert bool(cp.array_equal(out, x + y))


@pytest.mark.parametrize(("rows", "cols"), [(1, 1), (1823, 781), (4096, 2048)])
def test_02_fused_softmax(rows, cols):
    x = torch.randn(rows, cols, device="cuda", generator=_gen("softmax"))
    torch.testing.assert_close(T.softmax(x, programs=264), torch.softmax(x, axis=1))


@pytest.mark.parametrize(("m", "n", "k"), [(128, 128, 64), (512, 384, 256), (333, 250, 123)])
def test_03_matmul_autotuned(m, n, k):
    g = _gen(f"matmul{m}")
    a = torch.randn((m, k), device="cuda", generator=g).half()
    b = torch.randn((k, n), device="cuda", generator=g).half()
    torch.testing.assert_close(T.matmul(a, b), (a.float() @ b.float()).half(), atol=2e-2, rtol=2e-2)
    assert T.matmul_kernel.best_config is not None


def test_04_dropout():
    x = torch.randn(10000, device="cuda", generator=_gen("dropout")) + 5.0
    out = T.seeded_dropout(x, p=0.5, seed=123)
    assert torch.equal(out, T.seeded_dropout(x, p=0.5, seed=123))
    kept = out != 0
    torch.testing.assert_close(out[kept], x[kept] * 2)
    cpu = T.seeded_dropout(x.cpu(), p=0.5, seed=123)  # the interpreter keeps the same lanes
    assert torch.equal(cpu, out.cpu())


@pytest.mark.parametrize(("m", "n"), [(1151, 1024), (64, 4000)])
def test_05_layer_norm(m, n):
    g = _gen(f"layernorm{m}")
    x = -2.3 + 0.5 * torch.randn((m, n), device="cuda", generator=g)
    w = torch.rand((n,), device="cuda", generator=g)
    b = torch.rand((n,), device="cuda", generator=g)
    dy = 0.1 * torch.randn((m, n), device="cuda", generator=g)
    y, mean, rstd = T.layer_norm_fwd(x, w, b, 1e-5, 1024)
    xr, wr, br = (t.clone().requires_grad_(True) for t in (x, w, b))
    ref = torch.nn.functional.layer_norm(xr, (n,), wr, br, 1e-5)
    torch.testing.assert_close(y, ref.detach(), atol=1e-4, rtol=1e-4)
    ref.backward(dy)
    dx, dw, db = T.layer_norm_bwd(dy, x, w, mean, rstd, group_size_m=64)
    torch.testing.assert_close(dx, xr.grad, atol=1e-3, rtol=1e-3)
    torch.testing.assert_close(dw, wr.grad, atol=1e-3, rtol=1e-3)
    torch.testing.assert_close(db, br.grad, atol=1e-3, rtol=1e-3)


@pytest.mark.parametrize("causal", [False, True])
def test_06_fused_attention_forward(causal):
    g = _gen(f"attention{causal}")
    q, k, v = (
        (0.5 * torch.randn((2, 4, 1000, 64), device="cuda", generator=g)).half() for _ in range(3)
    )
    out = T.attention(q, k, v, causal, 0.125)
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=0.125)
    torch.testing.assert_close(out, ref, atol=1e-2, rtol=1e-2)


def test_python_vector_add_is_as_fast_as_the_c_one(capsys):
    """The same CUDA, so the same speed: printed beside each other (the coordinator reads
    the ratio; no wall-clock assert)."""
    from tests.test_frontend_corpus import ROOT, vector_add

    n = 1 << 24
    a, b = torch.rand(n, device="cuda"), torch.rand(n, device="cuda")
    out = torch.empty_like(a)
    c = teeny_tx.compile(str(ROOT / "kernels" / "vector_add.c")).vector_add
    grid = (triton.cdiv(n, 1024),)
    py = triton.testing.do_bench(lambda: vector_add[grid](a, b, out, n, BLOCK=1024))
    cc = triton.testing.do_bench(lambda: c[grid](a, b, out, n, BLOCK=1024))
    with capsys.disabled():
        print(
            f"\nvector_add 2^24 f32: python {py * 1e3:.1f} us, C {cc * 1e3:.1f} us, {py / cc:.3f}x"
        )
    torch.testing.assert_close(out, a + b)
