"""Host launch overhead of a cached teeny_tx kernel, against the same cubin launched bare by CuPy.

Input: a small vector add (--n 4096 float32 elements, BLOCK=1024: a grid of 4 programs), so the
GPU work per launch is tiny and the host path is what is measured.
Output: per-launch microseconds of --launches back-to-back launches timed with
time.perf_counter (device synchronised before and after), the median of --repeats repeats taken
in turn, for: ours (``k[grid](...)``: every argument checked, launched through cuLaunchKernel
from the launcher's parameter array) on CuPy arrays and on torch tensors; the same cubin
through a bare ``cupy.RawModule`` function (``spec.cubin``, ``spec.entry``, ``spec.block``);
Triton's launch of its own add kernel; and two floors below any checked launch: CuPy's driver
binding called with a prebuilt parameter array (no checks at all), and one launch of a CUDA
graph of --graph launches (per kernel). Ratio = ours / RawModule (target <= 1.1).

A second section times each teeny_tx.nn / linalg wrapper on a tiny input (host-bound), on
CuPy arrays and on torch tensors, against the bare launches of the same kernels and its
allocations (bench_host.py's method: ratio = (wrapper - allocations) / bare launches, target
<= 1.2; also wrapper / bare with the allocations counted). The wrappers run with their
default configs (nn.TUNE and linalg.TUNE off: the host path is the same, the tuner's timing
would only cost the first calls).

Run from the repository root: python3 bench/bench_launch.py --out /tmp/launch.md
"""

import os
import sys
import tempfile
import time
from collections.abc import Callable

import numpy as np
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
FLOOR, GRAPH = "cuLaunchKernel, prebuilt params, no checks", "CUDA graph, per kernel"
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
    p.add_argument("--graph", type=int, default=100, help="launches captured in the graph")
    p.add_argument("--no-wrappers", action="store_true", help="skip the wrappers' section")
    p.add_argument("--calls", type=int, default=300, help="calls per timed wrapper loop")
    p.add_argument("--wrapper-repeats", type=int, default=7, help="wrapper rounds (best kept)")
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


def floor_launcher(k, a, b, out, n: int, block: int, warps: int, grid):
    """cuLaunchKernel through CuPy's binding with a parameter array built once: the cost of
    the driver call itself from Python, with no checks and no per-launch work."""
    import ctypes

    import cupy
    from cupy_backends.cuda.api import driver

    spec = k.specialize(a, b, out, n, BLOCK=block, num_warps=warps)
    function = spec.loaded.prepared(cupy.cuda.runtime.getDevice(), 0)
    values = [ctypes.c_uint64(x.data.ptr) for x in (a, b, out)] + [ctypes.c_int32(n)]
    params = (ctypes.c_void_p * 4)(*[ctypes.addressof(v) for v in values])
    address, handle = ctypes.addressof(params), function.ptr
    gx, (bx, by, bz) = grid[0], spec.block
    launch = driver.launchKernel

    def run():
        launch(handle, gx, 1, 1, bx, by, bz, 0, 0, address, 0)

    run.keep = (values, params)  # type: ignore[attr-defined]
    return run


def graph_launcher(launch_one, count: int):
    """One launch of a CUDA graph holding ``count`` launches of ``launch_one(stream)``, and
    the number of kernels it runs (time per kernel = time per call / count)."""
    import cupy

    stream = cupy.cuda.Stream(non_blocking=True)
    launch_one(stream)  # compiled and loaded outside the capture
    stream.synchronize()
    stream.begin_capture()
    try:
        for _ in range(count):
            launch_one(stream)
    finally:
        graph = stream.end_capture()
    upload = getattr(graph, "upload", None)
    if upload is not None:
        upload(stream)

    def run():
        graph.launch(stream)

    return run, stream


def pieces(a, ta) -> list[str]:
    """ns per call of what a launch's host path is made of (printed: where the time goes)."""
    import timeit

    import cupy

    from teeny_tx.runtime import launch

    scope = {"a": a, "t": ta, "cupy": cupy, "launch": launch}
    stmts = [
        "launch.current_stream(0).ptr",
        "cupy.cuda.runtime.getDevice()",
        "a.data.ptr",
        "a.size",
        "a.dtype",
        "a._c_contiguous",
        "cupy.empty((4, 1024), cupy.float16)",
    ]
    if ta is not None:
        import torch

        scope["torch"] = torch
        scope["raw"] = launch.torch_raw_stream()
        stmts += [
            "raw(0)",
            "t.data_ptr()",
            "t.numel()",
            "t.dtype",
            "t.is_contiguous()",
            "t.is_cuda",
            "torch.empty((4, 1024), dtype=torch.float16, device='cuda')",
        ]
    lines = []
    for stmt in stmts:
        try:
            n = 20000
            best = min(timeit.repeat(stmt, globals=scope, number=n, repeat=5)) / n * 1e9
            lines.append(f"{stmt:64} {best:8.1f} ns")
        except Exception as exc:  # noqa: BLE001 - a piece that does not exist here
            lines.append(f"{stmt:64} failed: {exc}")
    return lines


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
    graph_stream = None
    if k is not None:
        run = k[grid]
        add(OURS_CUPY, lambda: run(a, b, out, n, BLOCK=block, num_warps=warps), out, ref)
        try:
            add(RAW, raw_launcher(k, a, b, out, n, block, warps, grid, tmp.name), out, ref)
        except Exception as exc:
            table.notes.append(f"{RAW} setup failed: {report_failure(RAW, exc)}")
        try:
            add(FLOOR, floor_launcher(k, a, b, out, n, block, warps, grid), out, ref)
        except Exception as exc:
            table.notes.append(f"{FLOOR} setup failed: {report_failure(FLOOR, exc)}")
        try:
            graph, graph_stream = graph_launcher(
                lambda s: run(a, b, out, n, BLOCK=block, num_warps=warps, stream=s), args.graph
            )
            add(GRAPH, graph, out, ref)
        except Exception as exc:
            table.notes.append(f"{GRAPH} setup failed: {report_failure(GRAPH, exc)}")

    if torch is not None and torch.cuda.is_available():
        ta, tb = torch.as_tensor(a, device="cuda"), torch.as_tensor(b, device="cuda")
        tout, tref = torch.empty_like(ta), torch.as_tensor(ref, device="cuda")
        if k is not None:
            add(
                OURS_TORCH,
                lambda: run(ta, tb, tout, n, BLOCK=block, num_warps=warps),
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
    try:
        parts = pieces(a, ta if torch is not None and torch.cuda.is_available() else None)
        print("\nwhat a launch's host path is made of (best of 5 x 20000):", flush=True)
        print("\n".join(parts), flush=True)
    except Exception as exc:  # noqa: BLE001 - diagnostics only
        print(f"pieces failed: {exc}", flush=True)
    if GRAPH in us:
        us[GRAPH] /= args.graph
    tmp.cleanup()
    raw, tri = us.get(RAW), us.get("Triton")
    peers = {RAW: raw, "Triton": tri}
    rows = [
        ("ours on CuPy arrays", OURS_CUPY),
        ("ours on torch tensors", OURS_TORCH),
        ("floor: cuLaunchKernel of a prebuilt parameter array, no checks", FLOOR),
        (f"floor: one CUDA graph of {args.graph} of our launches, per kernel", GRAPH),
    ]
    for case, label in rows:
        table.add(case, us.get(label), peers)
    failed = any(us.get(x) is None for x in (OURS_CUPY, RAW))
    for label in (OURS_CUPY, OURS_TORCH):
        r = table.ratio(us.get(label), peers)
        if r is not None:
            verdict = "meets" if r <= TARGET else "MISSES"
            print(f"{label} / RawModule = {r:.2f}: {verdict} the target <= {TARGET}", flush=True)
    text = emit_tables([table], None)
    if not args.no_wrappers:
        text += "\n" + wrapper_section(torch, args)
    if args.out:
        from pathlib import Path

        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text)
    del graph_stream
    return 1 if failed else 0


def wrapper_section(torch, args) -> str:
    """bench_host's table (each wrapper against bare launches of its kernels), CuPy and torch."""
    import bench_host
    import cupy

    from teeny_tx.library import linalg, nn

    nn.TUNE = False
    linalg.TUNE = False
    bench_host.LINES.clear()
    libraries = [cupy] + ([torch] if torch is not None else [])
    recorder = bench_host.Recorder(libraries)
    sync = cupy.cuda.runtime.deviceSynchronize
    try:
        bench_host.run(
            "cupy",
            recorder,
            lambda shape, dtype: cupy.zeros(shape, dtype),
            lambda rows: cupy.zeros(rows, cupy.int64),
            sync,
            args.calls,
            args.wrapper_repeats,
        )
        if torch is not None and torch.cuda.is_available():
            dtypes = {np.float16: torch.float16, np.float32: torch.float32}
            bench_host.run(
                "torch",
                recorder,
                lambda shape, dtype: torch.zeros(shape, dtype=dtypes[dtype], device="cuda"),
                lambda rows: torch.zeros(rows, dtype=torch.int64, device="cuda"),
                sync,
                args.calls,
                args.wrapper_repeats,
            )
    except Exception as exc:  # noqa: BLE001 - the launch table stands on its own
        bench_host.say(f"wrapper section failed: {report_failure('wrappers', exc)}")
    body = "\n".join(bench_host.LINES).strip("\n")
    return (
        "### Wrapper host cost against bare launches of the same kernels\n\n"
        f"{bench_host.NOTE}\n\n```text\n{body}\n```\n"
    )


if __name__ == "__main__":
    sys.exit(main())
