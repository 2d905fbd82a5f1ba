"""Vector add, out = a + b: teeny_tx against torch, Triton and a CuPy 16-byte-vector kernel.

Input: --n elements (default 2^28) per dtype in --dtypes, random normal inputs drawn by torch.
Output: for each dtype, every implementation checked against a float64 sum first, then timed
with CUDA events (warm-up, many calls, median); the rate counts 3·n·itemsize bytes (read a and
b, write out). Prints every configuration and a table (ours = best teeny_tx configuration,
each peer = its best configuration, ratio = ours / best peer); --out writes it as markdown.

Run from the repository root: python3 bench/bench_vector_add.py --out /tmp/vector_add.md
"""

import sys
from collections.abc import Callable

from common import (
    REPO,
    Table,
    base_parser,
    cdiv,
    check_close,
    cupy_on_torch_stream,
    emit_tables,
    gpu_times_ms,
    median,
    parse_size,
    poison,
    rate,
    report_failure,
)

try:  # optional peer: the table shows n/a where Triton is missing
    import triton
    import triton.language as tl

    _constexpr = tl.constexpr
except Exception:  # pragma: no cover - depends on the machine
    triton = None
    tl = None
    _constexpr = int


def _triton_jit(fn: Callable) -> Callable:
    """triton.jit where Triton works; otherwise the plain function (and the column is n/a)."""
    global triton
    if triton is None:
        return fn
    try:
        return triton.jit(fn)
    except Exception as exc:  # pragma: no cover - depends on the machine
        print(f"Triton peer unavailable: triton.jit failed: {exc}", file=sys.stderr)
        triton = None
        return fn


# The standard masked 1-D add of Triton's tutorial (no docstring: Triton compiles the body).
@_triton_jit
def triton_add_kernel(a_ptr, b_ptr, out_ptr, n, BLOCK_SIZE: _constexpr):
    pid = tl.program_id(axis=0)
    offs = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n
    x = tl.load(a_ptr + offs, mask=mask)
    y = tl.load(b_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


KERNEL = REPO / "kernels" / "vector_add.c"
UNIT = "TB/s"
PEERS = ["torch", "Triton", "CuPy vec16"]
TRITON_BLOCKS = (1024, 4096)
CUPY_THREADS = 256

# dtype name -> (aliases, rtol, atol) for the check against the float64 sum.
DTYPES = {
    "float32": (("fp32", "f32", "float"), 1e-6, 1e-6),
    "float16": (("fp16", "f16", "half"), 1e-3, 1e-5),
    "bfloat16": (("bf16",), 8e-3, 1e-5),
}

# CUDA element type and the add of one pair, per dtype; the sum is formed in float, as torch does.
CUDA_ADD = {
    "float32": ("float", "x + y"),
    "float16": ("__half", "__float2half_rn(__half2float(x) + __half2float(y))"),
    "bfloat16": ("__nv_bfloat16", "__float2bfloat16_rn(__bfloat162float(x) + __bfloat162float(y))"),
}

CUPY_SOURCE = r"""
#include <cuda_fp16.h>
#include <cuda_bf16.h>

typedef %(ctype)s T;
#define V (16 / (int)sizeof(T))   /* elements per 16-byte access: 4 floats, 8 halves */

struct __align__(16) Pack { T v[V]; };

__device__ __forceinline__ T add1(T x, T y) { return %(expr)s; }

/* Thread i adds pack i (16-byte load, load, store); threads 0..V-1 also add the scalar tail. */
extern "C" __global__ void add_vec16(const T* __restrict__ a, const T* __restrict__ b,
                                     T* __restrict__ out, long long n)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long nvec = n / V;
    if (i < nvec) {
        Pack x = reinterpret_cast<const Pack*>(a)[i];
        Pack y = reinterpret_cast<const Pack*>(b)[i];
        Pack z;
#pragma unroll
        for (int j = 0; j < V; ++j) z.v[j] = add1(x.v[j], y.v[j]);
        reinterpret_cast<Pack*>(out)[i] = z;
    }
    long long t = nvec * V + i;
    if (i < V && t < n) out[t] = add1(a[t], b[t]);
}
"""


def parse_args(argv: list[str] | None = None):
    p = base_parser(__doc__.splitlines()[0])
    p.add_argument(
        "--n",
        type=parse_size,
        default=2**28,
        help="elements per vector: an integer, or 2^K / 2**K (default 2^28)",
    )
    p.add_argument(
        "--dtypes",
        default="float32,float16,bfloat16",
        help="comma-separated: float32/fp32, float16/fp16, bfloat16/bf16",
    )
    p.add_argument("--blocks", default="1024,2048,4096", help="teeny_tx BLOCK values to try")
    p.add_argument("--warps", default="4,8", help="teeny_tx num_warps values to try")
    p.add_argument("--warmup-ms", type=float, default=25.0)
    p.add_argument("--rep-ms", type=float, default=200.0)
    args = p.parse_args(argv)
    if args.n < 1:
        p.error("--n must be positive")
    args.dtypes = [canonical_dtype(p, d) for d in args.dtypes.split(",") if d.strip()]
    args.blocks = [int(x) for x in args.blocks.split(",") if x.strip()]
    args.warps = [int(x) for x in args.warps.split(",") if x.strip()]
    return args


def canonical_dtype(parser, name: str) -> str:
    name = name.strip().lower()
    for canon, (aliases, _, _) in DTYPES.items():
        if name == canon or name in aliases:
            return canon
    parser.error(f"unknown dtype {name!r}; choose from {', '.join(DTYPES)}")


def size_label(n: int) -> str:
    k = n.bit_length() - 1
    return f"2^{k}" if n == 1 << k else str(n)


def cupy_view(t):
    """A CuPy array on a torch tensor's memory (no copy); bf16 travels as int16 bits."""
    import cupy
    import torch

    return cupy.asarray(t.view(torch.int16) if t.dtype == torch.bfloat16 else t)


def candidates(dtype: str, a, b, out, n: int, k, args) -> list[tuple[str, str, Callable]]:
    """(column, configuration, launch) for every implementation and configuration to try."""
    import cupy
    import numpy as np
    import torch

    found: list[tuple[str, str, Callable]] = []
    if k is not None:
        for block in args.blocks:
            for warps in args.warps:
                grid = (cdiv(n, block),)

                def ours(k=k, grid=grid, block=block, warps=warps):
                    k[grid](a, b, out, n, BLOCK=block, num_warps=warps)

                found.append(("ours", f"BLOCK={block}/num_warps={warps}", ours))

    found.append(("torch", "torch.add(out=)", lambda: torch.add(a, b, out=out)))

    if triton is not None:
        for block in TRITON_BLOCKS:
            grid = (cdiv(n, block),)

            def tri(grid=grid, block=block):
                triton_add_kernel[grid](a, b, out, n, BLOCK_SIZE=block)

            found.append(("Triton", f"BLOCK_SIZE={block}", tri))

    ctype, expr = CUDA_ADD[dtype]
    vec = 16 // a.element_size()
    config = f"{vec}x{ctype} per access, {CUPY_THREADS} threads"
    try:
        kern = cupy.RawKernel(
            CUPY_SOURCE % {"ctype": ctype, "expr": expr}, "add_vec16", options=("-std=c++17",)
        )
        if any(t.data_ptr() % 16 for t in (a, b, out)):
            raise RuntimeError("a torch allocation is not 16-byte aligned")
        ca, cb, cout = cupy_view(a), cupy_view(b), cupy_view(out)
        blocks = (cdiv(max(n // vec, vec), CUPY_THREADS),)
        nn = np.int64(n)

        def vec16():
            kern(blocks, (CUPY_THREADS,), (ca, cb, cout, nn))
    except Exception as exc:  # reported like a failed launch, with the other failures

        def vec16(exc=exc):
            raise exc

    found.append(("CuPy vec16", config, vec16))
    return found


def bench_dtype(dtype: str, n: int, k, args, table: Table) -> int:
    """Check and time every implementation for one dtype; add a row; return the failure count."""
    import torch

    _, rtol, atol = DTYPES[dtype]
    tdtype = getattr(torch, dtype)
    gen = torch.Generator(device="cuda").manual_seed(args.seed)
    a = torch.randn(n, device="cuda", dtype=tdtype, generator=gen)
    b = torch.randn(n, device="cuda", dtype=tdtype, generator=gen)
    ref = a.double() + b.double()
    out = torch.empty_like(a)
    nbytes = 3 * n * a.element_size()
    case = f"{dtype} n={size_label(n)}"
    print(f"\n== {case}: {nbytes / 1e9:.3f} GB moved per call", flush=True)

    failures = 0
    best: dict[str, tuple[float, str]] = {}
    listing: dict[str, list[str]] = {}
    for column, config, fn in candidates(dtype, a, b, out, n, k, args):
        label = f"{column} [{config}]"
        try:
            poison(out)
            fn()
            torch.cuda.synchronize()
            err = check_close(out, ref, rtol, atol, f"{case} {label}")
            times = gpu_times_ms(fn, args.warmup_ms, args.rep_ms)
        except Exception as exc:
            failures += 1
            listing.setdefault(column, []).append(f"{config} FAILED")
            table.notes.append(f"{case} {label} failed: {report_failure(label, exc)}")
            continue
        ms = median(times)
        r = rate(nbytes, ms, UNIT)
        print(
            f"{label:<50} median {ms:8.4f} ms (min {times[0]:.4f}, max {times[-1]:.4f}, "
            f"{len(times)} calls)  {r:6.3f} {UNIT}  max|err| {err:.3g}",
            flush=True,
        )
        listing.setdefault(column, []).append(f"{config} {r:.3f}")
        if column not in best or r > best[column][0]:
            best[column] = (r, config)

    ours = best.get("ours", (None, ""))[0]
    table.add(case, ours, {p: best[p][0] if p in best else None for p in PEERS})
    for column in ["ours", *PEERS]:  # every configuration, where there was a choice
        if len(listing.get(column, [])) > 1:
            chosen = f"; best {best[column][1]}" if column in best else ""
            table.notes.append(f"{case} {column}: " + ", ".join(listing[column]) + chosen)
    del a, b, ref, out
    torch.cuda.empty_cache()
    return failures


def load_ours(table: Table):
    """teeny_tx's vector_add from kernels/vector_add.c; None (and a note) if that fails."""
    try:
        import teeny_tx as tx

        return tx.compile(str(KERNEL)).vector_add
    except Exception as exc:
        table.notes.append(
            f"teeny_tx could not compile {KERNEL.name}: {report_failure('teeny_tx.compile', exc)}"
        )
        return None


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("no CUDA device: nothing to measure", file=sys.stderr)
        return 2
    table = Table(f"Vector add, out = a + b ({UNIT}, bytes = 3·n·itemsize)", UNIT, PEERS, digits=3)
    table.notes.append(
        f"median of CUDA-event timings after {args.warmup_ms:g} ms warm-up, "
        f"about {args.rep_ms:g} ms of calls; each peer its best configuration"
    )
    if triton is None:
        table.notes.append("Triton not importable: its column is n/a")
    k = load_ours(table)
    failures = 0 if k is not None else 1
    with cupy_on_torch_stream():
        for dtype in args.dtypes:
            try:
                failures += bench_dtype(dtype, args.n, k, args, table)
            except Exception as exc:
                failures += 1
                table.notes.append(f"{dtype}: {report_failure(dtype, exc)}")
    emit_tables([table], args.out)
    if failures:
        print(
            f"{failures} implementation(s) or step(s) failed; see the notes above", file=sys.stderr
        )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
