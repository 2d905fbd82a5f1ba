"""Host launch overhead of a cached teeny_tx kernel, against the same cubin launched bare by CuPy.

Input: a small vector add (--n 4096 float32 elements, BLOCK=1024: a grid of 4 programs), so the
GPU work per launch is tiny and the host path is what is measured.
Output: per-launch microseconds of --launches back-to-back launches timed with
time.perf_counter (device synchronised before and after), the median of --repeats repeats, for:
ours (``k[grid](...)`` on CuPy arrays, and on torch tensors), the same cubin through a bare
``cupy.RawModule`` function (``spec.cubin``, ``spec.entry``, ``spec.block``), and Triton's launch
of its own add kernel for reference. Ratio = ours / RawModule (target <= 1.1).
A second table times each teeny_tx.nn / linalg wrapper on a tiny input (host-bound) and
reports what it adds on top of its launches, in bare RawModule launches (target <= 1.2).

Run from the repository root: python3 bench/bench_launch.py --out /tmp/launch.md
"""

import os
import sys
import tempfile
import time
from collections.abc import Callable

from common import (
    REPO,
    Table,
    base_parser,
    cdiv,
    check_close,
    emit_tables,
    median,
    poison,
    report_failure,
)

KERNEL = REPO / "kernels" / "vector_add.c"
RAW = "RawModule (same cubin)"
OURS_CUPY, OURS_TORCH = "ours, CuPy arrays", "ours, torch tensors"
PEERS = [RAW, "Triton"]
TARGET = 1.1
WRAPPER_TARGET = 1.2  # host cost a wrapper adds on top of its launches, in bare launches


def parse_args(argv: list[str] | None = None):
    p = base_parser(__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=4096, help="elements (default 4096)")
    p.add_argument("--block", type=int, default=1024, help="BLOCK (default 1024)")
    p.add_argument("--warps", type=int, default=4, help="num_warps (default 4)")
    p.add_argument("--launches", type=int, default=20000, help="launches per timed repeat")
    p.add_argument("--repeats", type=int, default=5, help="timed repeats; the median is kept")
    args = p.parse_args(argv)
    if min(args.n, args.block, args.warps, args.launches, args.repeats) < 1:
        p.error("all sizes and counts must be positive")
    return args


def sync() -> None:
    import cupy

    cupy.cuda.runtime.deviceSynchronize()


def launch_loop_us(fn: Callable[[], object], launches: int) -> float:
    """Microseconds per launch of ``launches`` back-to-back calls, device idle before and after."""
    sync()
    t0 = time.perf_counter()
    for _ in range(launches):
        fn()
    sync()
    return (time.perf_counter() - t0) / launches * 1e6


def checked(label: str, fn, out, ref, notes: list[str]) -> bool:
    """Run ``fn`` once on a poisoned ``out`` and compare with ``ref``; note a failure."""
    try:
        poison(out)
        fn()
        sync()
        check_close(out, ref, 1e-6, 1e-6, label)
        for _ in range(500):  # warm-up: caches, lazy loads, allocator
            fn()
        sync()
        return True
    except Exception as exc:
        notes.append(f"{label} failed: {report_failure(label, exc)}")
        return False


def time_round_robin(impls: dict[str, Callable], launches: int, repeats: int, notes: list[str]):
    """Median µs per launch of each implementation; the repeats take turns, so drift is shared."""
    times: dict[str, list[float]] = {label: [] for label in impls}
    for _ in range(repeats):
        for label, fn in impls.items():
            if times[label] is None:
                continue
            try:
                times[label].append(launch_loop_us(fn, launches))
            except Exception as exc:
                notes.append(f"{label} failed while timed: {report_failure(label, exc)}")
                times[label] = None
    result = {}
    for label, ts in times.items():
        if ts:
            ts.sort()
            result[label] = median(ts)
            spread = ", ".join(f"{t:.2f}" for t in ts)
            print(f"{label:<36} median {result[label]:7.2f} µs per launch  ({spread})", flush=True)
    return result


def raw_launcher(k, a, b, out, n: int, block: int, warps: int, grid, tmp: str):
    """The same cubin as ``k`` at this binding, loaded by CuPy and launched with no wrapper."""
    import cupy
    import numpy as np

    spec = k.specialize(a, b, out, n, BLOCK=block, num_warps=warps)
    path = os.path.join(tmp, "vector_add.cubin")
    with open(path, "wb") as f:
        f.write(spec.cubin)
    func = cupy.RawModule(path=path).get_function(spec.entry)
    threads = tuple(int(x) for x in spec.block)
    params = (a, b, out, np.int32(n))
    shared = int(getattr(spec, "shared_mem", 0) or 0)
    print(f"spec: entry {spec.entry}, block {threads}, cubin {len(spec.cubin)} bytes", flush=True)
    return lambda: func(grid, threads, params, shared_mem=shared)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import cupy

    try:
        import torch
    except ImportError:
        torch = None
    try:
        from bench_vector_add import triton, triton_add_kernel
    except Exception as exc:
        triton, triton_add_kernel = None, None
        print(f"Triton peer unavailable: {exc}", flush=True)

    n, block, warps = args.n, args.block, args.warps
    grid = (cdiv(n, block),)
    table = Table(
        f"Launch overhead, vector add f32 n={n}, grid={grid[0]}",
        "µs",
        PEERS,
        higher_is_better=False,
        ratio_to=RAW,
        digits=2,
    )
    table.notes.append(
        f"median of {args.repeats} repeats of {args.launches} back-to-back launches, "
        f"time.perf_counter with the device synchronised before and after; BLOCK={block}, "
        f"num_warps={warps}; target ours / RawModule <= {TARGET}"
    )

    rs = cupy.random.RandomState(args.seed)
    a = rs.standard_normal(n, dtype=cupy.float32)
    b = rs.standard_normal(n, dtype=cupy.float32)
    out = cupy.empty_like(a)
    ref = a.astype(cupy.float64) + b.astype(cupy.float64)

    impls: dict[str, Callable] = {}  # label -> launch, for those that computed a + b

    def add(label, fn, out, ref):
        if checked(label, fn, out, ref, table.notes):
            impls[label] = fn

    k = None
    try:
        import teeny_tx as tx

        k = tx.compile(str(KERNEL)).vector_add
    except Exception as exc:
        table.notes.append(f"teeny_tx compile failed: {report_failure('teeny_tx.compile', exc)}")
    tmp = tempfile.TemporaryDirectory(prefix="teeny_tx_bench_")
    if k is not None:
        add(OURS_CUPY, lambda: k[grid](a, b, out, n, BLOCK=block, num_warps=warps), out, ref)
        try:
            add(RAW, raw_launcher(k, a, b, out, n, block, warps, grid, tmp.name), out, ref)
        except Exception as exc:
            table.notes.append(f"{RAW} setup failed: {report_failure(RAW, exc)}")

    if torch is not None and torch.cuda.is_available():
        ta, tb = torch.as_tensor(a, device="cuda"), torch.as_tensor(b, device="cuda")
        tout, tref = torch.empty_like(ta), torch.as_tensor(ref, device="cuda")
        if k is not None:
            add(
                OURS_TORCH,
                lambda: k[grid](ta, tb, tout, n, BLOCK=block, num_warps=warps),
                tout,
                tref,
            )
        if triton is not None:
            add(
                "Triton",
                lambda: triton_add_kernel[grid](ta, tb, tout, n, BLOCK_SIZE=block),
                tout,
                tref,
            )
        else:
            table.notes.append("Triton not importable: its column is n/a")
    else:
        table.notes.append("torch with CUDA not available: torch-tensor row and Triton are n/a")

    us = time_round_robin(impls, args.launches, args.repeats, table.notes)
    tmp.cleanup()
    ours_cupy, ours_torch, raw, tri = (us.get(x) for x in (OURS_CUPY, OURS_TORCH, RAW, "Triton"))
    peers = {RAW: raw, "Triton": tri}
    table.add("ours on CuPy arrays", ours_cupy, peers)
    table.add("ours on torch tensors", ours_torch, peers)
    failed = any(v is None for v in (ours_cupy, raw))
    for label, ours in (("CuPy arrays", ours_cupy), ("torch tensors", ours_torch)):
        r = table.ratio(ours, peers)
        if r is not None:
            verdict = "meets" if r <= TARGET else "MISSES"
            print(
                f"ours ({label}) / RawModule = {r:.2f}: {verdict} the target <= {TARGET}",
                flush=True,
            )
    tables = [table]
    if raw is not None and torch is not None and torch.cuda.is_available():
        tables.append(wrapper_table(torch, raw, args, table.notes))
    emit_tables(tables, args.out)
    return 1 if failed else 0


# wrapper -> (call on tiny inputs, launches it makes)
def _wrappers(torch) -> dict[str, tuple[Callable, int]]:
    from teeny_tx import linalg, nn

    rows, cols = 8, 256
    x = torch.randn(rows, cols, device="cuda", dtype=torch.float16)
    w = torch.randn(cols, device="cuda", dtype=torch.float16)
    b = torch.randn(cols, device="cuda", dtype=torch.float16)
    t = torch.randint(0, cols, (rows,), device="cuda")
    _, mean, rstd = nn.layer_norm(x, w, b)
    _, rrstd = nn.rms_norm(x, w)
    _, lse = nn.cross_entropy(x, t)
    y = nn.softmax(x)
    m = torch.randn(64, 64, device="cuda", dtype=torch.float16)
    return {
        "nn.softmax": (lambda: nn.softmax(x), 1),
        "nn.log_softmax": (lambda: nn.log_softmax(x), 1),
        "nn.softmax_backward": (lambda: nn.softmax_backward(y, x), 1),
        "nn.layer_norm": (lambda: nn.layer_norm(x, w, b), 1),
        "nn.layer_norm_backward": (lambda: nn.layer_norm_backward(x, x, w, mean, rstd), 2),
        "nn.rms_norm": (lambda: nn.rms_norm(x, w), 1),
        "nn.rms_norm_backward": (lambda: nn.rms_norm_backward(x, x, w, rrstd), 2),
        "nn.cross_entropy": (lambda: nn.cross_entropy(x, t), 2),
        "nn.cross_entropy_backward": (lambda: nn.cross_entropy_backward(x, t, lse), 2),
        "nn.dropout": (lambda: nn.dropout(x, 0.1, 7), 1),
        "linalg.matmul": (lambda: linalg.matmul(m, m), 1),
    }


def wrapper_table(torch, raw_us: float, args, notes: list[str]) -> Table:
    """µs per call of each wrapper on torch tensors, and its host cost beyond its launches."""
    table = Table(
        "Wrapper host cost on torch tensors (tiny inputs: the host path is what is timed)",
        "µs",
        ["launches x RawModule"],
        higher_is_better=False,
        ratio_to="launches x RawModule",
        digits=2,
    )
    table.notes.append(
        f"a bare RawModule launch took {raw_us:.2f} µs in this run; 'added' = (wrapper - "
        f"launches x bare launch) / bare launch, target <= {WRAPPER_TARGET}"
    )
    try:
        calls = _wrappers(torch)
    except Exception as exc:
        table.notes.append(f"wrapper setup failed: {report_failure('wrappers', exc)}")
        return table
    launches = max(1000, args.launches // 10)
    for label, (fn, count) in calls.items():
        try:
            for _ in range(200):
                fn()
            ts = sorted(launch_loop_us(fn, launches) for _ in range(args.repeats))
        except Exception as exc:
            table.notes.append(f"{label} failed: {report_failure(label, exc)}")
            continue
        us = median(ts)
        bare = count * raw_us
        added = (us - bare) / raw_us
        verdict = "meets" if added <= WRAPPER_TARGET else "MISSES"
        print(
            f"{label:<28} {us:7.2f} µs, {count} launch(es): adds {added:.2f} bare launches "
            f"({verdict} <= {WRAPPER_TARGET})",
            flush=True,
        )
        table.add(
            f"{label} ({count} launches; adds {added:.2f})", us, {"launches x RawModule": bare}
        )
    return table


if __name__ == "__main__":
    sys.exit(main())
