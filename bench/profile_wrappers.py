"""Host cost of the teeny_tx.nn / linalg wrappers per call: where the time goes.

``python3 bench/profile_wrappers.py`` (GPU machine): µs per call of each wrapper on tiny
inputs (torch tensors and CuPy arrays), a bare launch of vector_add, and a cProfile of softmax.

``python3 bench/profile_wrappers.py --cpu`` (no GPU needed): the same Python with the device
mocked — CuPy arrays over fake device addresses, ``cupy.empty`` a bump allocator, the driver
launch a no-op, compiling skipped, the autotuner's choice the kernel's first config — so the
numbers are the wrappers' own host work on this machine: the Python a repeated call runs, with
CuPy's allocation and ``cuLaunchKernel`` left out. Each wrapper is shown against the bare
launches it makes (``launches x`` the bare launch's cost): the target is at most 1.2x.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def per_call(fn, n=200, repeats=40, sync=lambda: None):
    """The best of ``repeats`` runs of ``n`` calls, µs per call (the machine is shared)."""
    for _ in range(50):
        fn()
    sync()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(n):
            fn()
        sync()
        best = min(best, (time.perf_counter() - start) / n * 1e6)
    return best


# ---------------------------------------------------------------- the mocked device


class _Mock:
    """Patches that let the GPU path run without a GPU (see the module doc)."""

    def __init__(self):
        import cupy

        from teeny_tx import kernel as kernel_module
        from teeny_tx.runtime import launch

        self.cupy = cupy
        self.next = 0x7F0000000000
        memory = cupy.cuda.UnownedMemory(self.next, 1 << 40, None, device_id=0)
        self.memory = memory
        self.launches = 0
        self.allocations = 0

        def empty(shape, dtype=np.float32, order="C"):
            self.allocations += 1
            shape = (shape,) if isinstance(shape, int) else tuple(shape)
            size = math.prod(shape) * np.dtype(dtype).itemsize
            offset = self.next - 0x7F0000000000
            self.next += (size + 255) // 256 * 256 or 256
            return cupy.ndarray(shape, dtype, cupy.cuda.MemoryPointer(memory, offset))

        mock = self

        class Loaded:
            def prepared(self, device, shared):
                def function(grid, block, pointers, shared_mem, stream):
                    mock.launches += 1

                return function

            def error(self, *args):
                raise AssertionError(args)

        class Spec:
            def __init__(self, key):
                self.loaded = Loaded()
                self.block, self.shared_mem = (key[0] * 32, 1, 1), 0

        limits = launch.DeviceLimits("mock H200", (9, 0), 232448, 1024, 65536, 132)
        cupy.empty = empty
        cupy.cuda.runtime.getDevice = lambda: 0
        launch.get_device = lambda: 0
        launch.has_gpu = lambda: True
        launch.device_limits = lambda device=None: limits
        kernel_module.Kernel._specialization = lambda self, key: Spec(key)
        self._patch_tuner()

    def _patch_tuner(self):
        """The autotuner picks each kernel's first config without compiling or timing."""
        from teeny_tx.runtime import autotune

        def choose(self, key, args, constexprs, grid, stream, strided=False):
            choice = autotune.Choice(self.configs[0], None, 0, len(self.configs), ())
            self._chosen[key] = choice
            return choice

        autotune.Autotuner._choose = choose

    def array(self, shape, dtype):
        return self.cupy.empty(shape, dtype)


def _cases(mock: _Mock):
    """bench_host's wrapper calls, on the mock's arrays."""
    from bench_host import cases

    return cases("mock", mock.array, lambda n: mock.array((n,), np.int64))


def cpu_main() -> None:
    mock = _Mock()
    import teeny_tx

    vector_add = teeny_tx.compile("kernels/vector_add.c").vector_add
    va, vb, vo = (mock.array((4096,), np.float32) for _ in range(3))
    run = vector_add[(4,)]
    bare = per_call(lambda: run(va, vb, vo, 4096, BLOCK=1024))
    alloc = per_call(lambda: mock.array((4, 1024), np.float16))
    print(f"bare launch (vector_add, CuPy arrays, driver mocked): {bare:6.2f} us")
    print(f"one mocked allocation (a CuPy array over fake memory): {alloc:6.2f} us\n")
    print(
        f"{'wrapper':28} {'us/call':>8} {'launches':>8} {'allocs':>6} {'bare x n':>9} "
        f"{'ratio':>6} {'ratio w/o allocs':>16}"
    )
    for name, fn in _cases(mock):
        try:
            fn()  # the first call plans (checks, chooses, allocates what tuning needs)
        except Exception as err:  # noqa: BLE001 - a wrapper that refuses the case
            print(f"{name:28} refused: {str(err)[:60]}")
            continue
        before, allocs = mock.launches, mock.allocations
        fn()
        launches, allocs = mock.launches - before, mock.allocations - allocs
        us = per_call(fn)
        budget = launches * bare
        ratio = us / budget if budget else float("nan")
        own = (us - allocs * alloc) / budget if budget else float("nan")
        print(
            f"{name:28} {us:8.2f} {launches:8d} {allocs:6d} {budget:9.2f} {ratio:6.2f} {own:16.2f}"
        )


# ---------------------------------------------------------------- on the GPU


def gpu_main() -> None:
    import cProfile
    import pstats

    import cupy as cp
    import torch

    import teeny_tx
    import teeny_tx.nn as tnn

    sync = torch.cuda.synchronize
    x = torch.randn(4, 1024, device="cuda")
    w, b = torch.randn(1024, device="cuda"), torch.randn(1024, device="cuda")
    xc = cp.asarray(x)
    vector_add = teeny_tx.compile("kernels/vector_add.c").vector_add
    va, vb, vo = (cp.zeros(4096, cp.float32) for _ in range(3))
    run = vector_add[(4,)]
    print(
        f"bare launch cupy   {per_call(lambda: run(va, vb, vo, 4096, BLOCK=1024), sync=sync):7.2f}"
    )
    print(f"softmax torch      {per_call(lambda: tnn.softmax(x), sync=sync):7.2f} us/call")
    print(f"softmax cupy       {per_call(lambda: tnn.softmax(xc), sync=sync):7.2f} us/call")
    print(f"layer_norm torch   {per_call(lambda: tnn.layer_norm(x, w, b), sync=sync):7.2f} us/call")
    print(f"rms_norm torch     {per_call(lambda: tnn.rms_norm(x, w), sync=sync):7.2f} us/call")
    print(f"torch.softmax      {per_call(lambda: torch.softmax(x, -1), sync=sync):7.2f} us/call")
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(2000):
        tnn.softmax(x)
    profile.disable()
    pstats.Stats(profile).sort_stats("tottime").print_stats(18)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu", action="store_true", help="mock the device (no GPU needed)")
    if parser.parse_args().cpu:
        cpu_main()
    else:
        gpu_main()
