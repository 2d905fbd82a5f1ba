"""Triton's tutorial kernels through the Python front end, against the same kernels as C text
and against Triton itself.

Input: the kernels of tests/test_triton_tutorials.py (vector add, fused softmax, matmul, layer
norm forward, attention forward) at H200-sized shapes, on torch CUDA tensors.
Output: one table of microseconds per launch (CUDA events, median): ours (``kernel[grid]``
of the @jit function: translation cached, each launch binding the arguments by Python's
rules), "C text" (the kernel's translation compiled by ``teeny_tx.compile`` and launched as
a C kernel: the same CUDA, so the difference is host cost), and Triton (the same Python
source under ``import triton``, where Triton is installed). Ratio = ours / C text (target
<= 1.05).

Run from the repository root: python3 bench/bench_python_frontend.py --out /tmp/pyfront.md
"""

import importlib.util
import inspect
import sys
import tempfile
from pathlib import Path

from common import REPO, Table, base_parser, emit_tables, gpu_times_ms, median, report_failure

sys.path.insert(0, str(REPO))

import torch  # noqa: E402

import teeny_tx  # noqa: E402
from tests import test_triton_tutorials as T  # noqa: E402


def _triton_module():
    """The tutorial file's kernels under the real Triton (None where it is missing)."""
    try:
        import triton  # noqa: F401
    except Exception:  # pragma: no cover - depends on the machine
        return None
    text = Path(T.__file__).read_text()
    text = text.replace("import teeny_tx.triton as triton", "import triton")
    text = text.replace("import teeny_tx.triton.language as tl", "import triton.language as tl")
    path = Path(tempfile.mkdtemp()) / "triton_tutorials.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location("triton_tutorials", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # pragma: no cover - depends on the machine
        print(report_failure("Triton peer", exc), file=sys.stderr)
        return None
    return module


def _c_kernel(fn, args, constexprs):
    """The translation of ``fn`` for these arguments, compiled as C text."""
    text = fn.translate(*args, **constexprs)
    name = inspect.getsourcefile(fn.fn)
    return getattr(teeny_tx.compile(text, name=name), fn.__name__)


def _c_opts(kernel, opts: dict) -> dict:
    """The launch options and constexprs a C kernel takes (static values were translated in),
    strided as the front end launches."""
    names = set(kernel.binder.constexpr_names) | {"num_warps", "num_stages"}
    return {**{k: v for k, v in opts.items() if k in names}, "strided": True}


def _time(launch) -> float:
    return median(gpu_times_ms(launch)) * 1e3


def main() -> None:
    args = base_parser(__doc__.split("\n")[0]).parse_args()
    torch.manual_seed(args.seed)
    peer = _triton_module()
    table = Table(
        "Tutorial kernels: Python front end, C text, Triton",
        "us",
        ["C text", "Triton"],
        higher_is_better=False,
        ratio_to="C text",
    )
    dev = "cuda"

    n = 1 << 24
    x, y = torch.rand(n, device=dev), torch.rand(n, device=dev)
    out = torch.empty_like(x)
    grid = (teeny_tx.cdiv(n, 1024),)
    c = _c_kernel(T.add_kernel, (x, y, out, n), {"BLOCK_SIZE": 1024})
    table.add(
        "vector add 2^24 f32",
        _time(lambda: T.add_kernel[grid](x, y, out, n, BLOCK_SIZE=1024)),
        {
            "C text": _time(lambda: c[grid](x, y, out, n, **_c_opts(c, {"BLOCK_SIZE": 1024}))),
            "Triton": _time(lambda: peer.add_kernel[grid](x, y, out, n, BLOCK_SIZE=1024))
            if peer
            else None,
        },
    )

    rows, cols = 4096, 2048
    a = torch.randn(rows, cols, device=dev)
    o = torch.empty_like(a)
    sargs = (o, a, a.stride(0), o.stride(0), rows, cols)
    sgrid = (rows,)
    c = _c_kernel(T.softmax_kernel, sargs, {"BLOCK_SIZE": 2048})
    table.add(
        "softmax 4096x2048 f32",
        _time(lambda: T.softmax_kernel[sgrid](*sargs, BLOCK_SIZE=2048, num_warps=8)),
        {
            "C text": _time(
                lambda: c[sgrid](*sargs, **_c_opts(c, {"BLOCK_SIZE": 2048, "num_warps": 8}))
            ),
            "Triton": _time(
                lambda: peer.softmax_kernel[sgrid](*sargs, BLOCK_SIZE=2048, num_warps=8)
            )
            if peer
            else None,
        },
    )

    m, nn = 4096, 4096
    xl = torch.randn(m, nn, device=dev, dtype=torch.float16)
    w, b = (
        torch.rand(nn, device=dev, dtype=torch.float16),
        torch.rand(nn, device=dev, dtype=torch.float16),
    )
    yl = torch.empty_like(xl)
    mean = torch.empty(m, device=dev)
    rstd = torch.empty(m, device=dev)
    largs = (xl, yl, w, b, mean, rstd, xl.stride(0), nn, 1e-5)
    c = _c_kernel(T._layer_norm_fwd_fused, largs, {"BLOCK_SIZE": 4096})
    lopts = {"BLOCK_SIZE": 4096, "num_warps": 8}
    table.add(
        "layer norm fwd 4096x4096 f16",
        _time(lambda: T._layer_norm_fwd_fused[(m,)](*largs, **lopts)),
        {
            "C text": _time(lambda: c[(m,)](*largs, **_c_opts(c, lopts))),
            "Triton": _time(lambda: peer._layer_norm_fwd_fused[(m,)](*largs, **lopts))
            if peer
            else None,
        },
    )

    size = 4096
    ma = torch.randn(size, size, device=dev, dtype=torch.float16)
    mb = torch.randn(size, size, device=dev, dtype=torch.float16)
    mc = torch.empty(size, size, device=dev, dtype=torch.float16)
    meta = {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 8}
    margs = (ma, mb, mc, size, size, size, *ma.stride(), *mb.stride(), *mc.stride())
    mgrid = (teeny_tx.cdiv(size, 128) ** 2,)
    mopts = {**meta, "ACTIVATION": "", "num_warps": 8, "num_stages": 3}
    inner = T.matmul_kernel.fn  # the @jit function under the autotuner: one fixed config
    c = _c_kernel(inner, margs, {**meta, "ACTIVATION": ""})
    table.add(
        "matmul 4096^3 f16",
        _time(lambda: inner[mgrid](*margs, **mopts)),
        {
            "C text": _time(lambda: c[mgrid](*margs, **_c_opts(c, mopts))),
            "Triton": _time(lambda: peer.matmul_kernel.fn[mgrid](*margs, **mopts))
            if peer
            else None,
        },
    )

    z, h, ctx, d = 4, 16, 2048, 64
    q, k, v = (torch.randn(z, h, ctx, d, device=dev, dtype=torch.float16) for _ in range(3))
    ao = torch.empty_like(q)
    aargs = (q, k, v, ao, 0.125, *q.stride(), *k.stride(), *v.stride(), *ao.stride(), h, ctx)
    ameta = {"HEAD_DIM": d, "BLOCK_M": 128, "BLOCK_N": 64, "CAUSAL": False}
    agrid = (teeny_tx.cdiv(ctx, 128), z * h, 1)
    c = _c_kernel(T._attn_fwd, aargs, ameta)
    aopts = {**ameta, "num_warps": 8, "num_stages": 3}
    table.add(
        "attention fwd 4x16x2048x64 f16",
        _time(lambda: T._attn_fwd[agrid](*aargs, **ameta, num_warps=8, num_stages=3)),
        {
            "C text": _time(lambda: c[agrid](*aargs, **_c_opts(c, aopts))),
            "Triton": _time(
                lambda: peer._attn_fwd[agrid](*aargs, **ameta, num_warps=8, num_stages=3)
            )
            if peer
            else None,
        },
    )
    table.notes.append(
        "C text: the translation (teeny-tx translate) compiled as a C kernel; the same CUDA."
    )
    emit_tables([table], args.out)


if __name__ == "__main__":
    main()
