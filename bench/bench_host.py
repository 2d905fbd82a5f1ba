"""Host cost of each teeny_tx.nn / linalg wrapper against bare launches of the same kernels.

``python3 bench/bench_host.py`` (GPU machine) or ``python3 bench/bench_host.py --cpu`` (no GPU:
the device mocked as in ``bench/profile_wrappers.py`` — fake device memory, a no-op driver
launch, no compiling, the autotuner's first config).

For each wrapper on a tiny input (the host path is all that is timed), on CuPy arrays and on
torch tensors (GPU only): µs per repeated call; the bare launches it makes — each kernel launch
of the wrapper's first call replayed through ``kernel[grid](...)`` with the same arguments (the
generated launcher's hot path); and the allocations of one repeated call, timed alone. ratio =
(wrapper - allocations) / bare launches: the target is <= 1.2. Timings are the best of
--repeats rounds, the rounds of wrapper, launches and allocations interleaved (a shared machine
drifts); with --cpu they are CPU time of this thread (time.thread_time), so other processes
on a shared machine count less.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TARGET = 1.2
NOTE = (
    "µs per repeated call (tiny inputs: the host path is what is timed), the best of the "
    "rounds; #l launches and 'bare us' their bare launches through the kernels' launchers "
    "(k[grid](...) with the first call's arguments); #a allocations and 'alloc us' their "
    "cost alone; ratio = (wrapper - allocs) / bare (target <= 1.2); 'w/ allocs' = wrapper / "
    "bare. linalg's Hopper path counts its own launcher's calls (the tensor maps cached per "
    "pointer) as its bare launches."
)


CLOCK = [time.perf_counter]  # --cpu: time.thread_time (the machine is shared: CPU time only)


def loop_us(fn, n: int, sync) -> float:
    clock = CLOCK[0]
    sync()
    start = clock()
    for _ in range(n):
        fn()
    sync()
    return (clock() - start) / n * 1e6


class Recorder:
    """Patches ``Kernel.__getitem__`` (every generated launcher) and the libraries' ``empty``
    so the benchmark learns what a wrapper launches (each launcher and its arguments, on the
    first call) and allocates (each allocation of one repeated call)."""

    def __init__(self, libraries):
        from teeny_tx import kernel as kernel_module

        self.launches: list | None = None
        self.allocs: list | None = None
        getitem = kernel_module.Kernel.__getitem__
        recorder = self

        def recording_getitem(kernel, grid):
            run = getitem(kernel, grid)

            def launch(*args, **kwargs):
                if recorder.launches is not None:
                    recorder.launches.append((run, args, kwargs))
                return run(*args, **kwargs)

            return launch

        kernel_module.Kernel.__getitem__ = recording_getitem
        try:  # linalg's Hopper path launches through its kernels' own launchers
            from teeny_tx import kernel as hopper_matmul

            make = hopper_matmul.HopperSpecialization.launcher

            def recording_launcher(kernel, *args, **kwargs):
                go = make(kernel, *args, **kwargs)

                def launch(*a, **k):
                    if recorder.launches is not None:
                        recorder.launches.append((go, a, k))
                    return go(*a, **k)

                return launch

            hopper_matmul.HopperSpecialization.launcher = recording_launcher
        except ImportError:
            pass
        for lib in libraries:  # before any plan binds them
            empty = lib.empty

            def recording_empty(*args, empty=empty, **kwargs):
                if recorder.allocs is not None:
                    recorder.allocs.append((empty, args, kwargs))
                return empty(*args, **kwargs)

            lib.empty = recording_empty

    def first(self, fn):
        """Run the first call of ``fn`` (no plan kept); returns the launches it made."""
        from teeny_tx.library import linalg, nn

        nn._PLANS.clear()
        linalg._PLANS.clear()
        self.launches = []
        fn()
        launches, self.launches = self.launches, None
        return launches

    def allocations(self, fn):
        self.allocs = []
        fn()
        allocs, self.allocs = self.allocs, None
        return allocs


def cases(lib, empty, int64):
    """(name, call) of every wrapper on a tiny input of library ``lib`` ("cupy"/"torch")."""
    import teeny_tx.linalg as linalg
    import teeny_tx.nn as nn

    rows, cols = 4, 1024
    f16 = np.float16
    x, dy = empty((rows, cols), f16), empty((rows, cols), f16)
    w, b = empty((cols,), f16), empty((cols,), f16)
    stat = empty((rows,), np.float32)
    targets = int64(rows)
    wide = empty((rows, 2 * cols), f16)[:, ::2]
    a, bm = empty((256, 256), f16), empty((256, 256), f16)
    ba, bb = empty((4, 64, 64), f16), empty((4, 64, 64), f16)
    return [
        ("softmax", lambda: nn.softmax(x)),
        ("softmax x[:, ::2]", lambda: nn.softmax(wide)),
        ("log_softmax", lambda: nn.log_softmax(x)),
        ("softmax_backward", lambda: nn.softmax_backward(x, dy)),
        ("layer_norm", lambda: nn.layer_norm(x, w, b)),
        ("layer_norm_backward", lambda: nn.layer_norm_backward(dy, x, w, stat, stat)),
        ("rms_norm", lambda: nn.rms_norm(x, w)),
        ("rms_norm_backward", lambda: nn.rms_norm_backward(dy, x, w, stat)),
        ("cross_entropy", lambda: nn.cross_entropy(x, targets)),
        ("cross_entropy_backward", lambda: nn.cross_entropy_backward(x, targets, stat)),
        ("dropout", lambda: nn.dropout(x, 0.1, 7)),
        ("linalg.matmul", lambda: linalg.matmul(a, bm)),
        ("linalg.linear", lambda: linalg.linear(a, bm)),
        ("linalg.bmm", lambda: linalg.bmm(ba, bb)),
        ("linalg.linear_backward", lambda: linalg.linear_backward(a, a, bm)),
    ]


def measure(recorder: Recorder, name: str, fn, sync, n: int, repeats: int) -> str:
    try:
        launches = recorder.first(fn)
        fn()
        allocs = recorder.allocations(fn)
    except Exception as err:  # noqa: BLE001 - a wrapper that refuses the case: say so
        return f"{name:26} refused: {str(err).splitlines()[0][:70]}"
    allocs = [lambda e=empty, a=args, k=kwargs: e(*a, **k) for empty, args, kwargs in allocs]
    if not launches:  # the Hopper matmul calls its cubin directly: no generated launcher
        us = min(loop_us(fn, n, sync) for _ in range(repeats))
        alloc = min(sum(loop_us(a, n, sync) for a in allocs) for _ in range(repeats))
        return (
            f"{name:26} {us:8.2f}   0 {'':8} {len(allocs):3d} {alloc:8.2f}  (Hopper path: "
            f"own us {us - alloc:.2f})"
        )
    bare = [lambda r=run, a=args, k=kwargs: r(*a, **k) for run, args, kwargs in launches]
    best = {"wrapper": float("inf"), "bare": float("inf"), "allocs": float("inf")}
    for _ in range(repeats):
        best["wrapper"] = min(best["wrapper"], loop_us(fn, n, sync))
        best["bare"] = min(best["bare"], sum(loop_us(f, n, sync) for f in bare))
        best["allocs"] = min(best["allocs"], sum(loop_us(a, n, sync) for a in allocs))
    own = best["wrapper"] - best["allocs"]
    ratio = own / best["bare"] if best["bare"] else float("nan")
    counted = best["wrapper"] / best["bare"] if best["bare"] else float("nan")
    verdict = "meets" if ratio <= TARGET else "MISSES"
    return (
        f"{name:26} {best['wrapper']:8.2f} {len(launches):3d} {best['bare']:8.2f} "
        f"{len(allocs):3d} {best['allocs']:8.2f} {ratio:6.2f} {counted:9.2f}  {verdict}"
    )


LINES: list[str] = []  # what --out writes


def say(line: str) -> None:
    print(line, flush=True)
    LINES.append(line)


def run(lib: str, recorder: Recorder, empty, int64, sync, n: int, repeats: int) -> None:
    say(
        f"\n{lib}: {'wrapper':17} {'us/call':>8} {'#l':>3} {'bare us':>8} {'#a':>3} "
        f"{'alloc us':>8} {'ratio':>6} {'w/ allocs':>9}  (ratio = (wrapper - allocs) / bare)"
    )
    for name, fn in cases(lib, empty, int64):
        say(measure(recorder, name, fn, sync, n, repeats))


def write(out: str | None) -> None:
    """The lines as a markdown section (bench/run_device.sh gathers every benchmark's)."""
    if not out:
        return
    from common import device_name, utc_now

    text = "### Wrapper host cost against bare launches of the same kernels\n\n" + NOTE + "\n\n"
    text += f"date: {utc_now()}, device: {device_name()}\n\n```text\n"
    text += "\n".join(LINES).strip("\n") + "\n```\n"
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu", action="store_true", help="mock the device (no GPU needed)")
    parser.add_argument("--calls", type=int, default=300, help="calls per timed loop")
    parser.add_argument("--repeats", type=int, default=15, help="rounds; the best is kept")
    parser.add_argument("--out", default=None, help="write the lines as markdown here")
    args = parser.parse_args()
    if args.cpu:
        from profile_wrappers import _Mock

        mock = _Mock()
        CLOCK[0] = time.thread_time
        recorder = Recorder([mock.cupy])
        targets = lambda rows: mock.array((rows,), np.int64)  # noqa: E731
        run("cupy (mocked)", recorder, mock.array, targets, lambda: None, args.calls, args.repeats)
        write(args.out)
        return
    import cupy

    try:
        import torch
    except ImportError:
        torch = None
    recorder = Recorder([cupy] + ([torch] if torch is not None else []))

    sync = cupy.cuda.runtime.deviceSynchronize
    run(
        "cupy",
        recorder,
        lambda shape, dtype: cupy.zeros(shape, dtype),
        lambda rows: cupy.zeros(rows, cupy.int64),
        sync,
        args.calls,
        args.repeats,
    )
    if torch is None:
        say("torch not importable: no torch rows")
        write(args.out)
        return
    dtypes = {np.float16: torch.float16, np.float32: torch.float32}
    run(
        "torch",
        recorder,
        lambda shape, dtype: torch.zeros(shape, dtype=dtypes[dtype], device="cuda"),
        lambda rows: torch.zeros(rows, dtype=torch.int64, device="cuda"),
        sync,
        args.calls,
        args.repeats,
    )
    write(args.out)


if __name__ == "__main__":
    main()
