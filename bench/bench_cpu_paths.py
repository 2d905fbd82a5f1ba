"""Two CPU-side measurements that were wall-clock asserts in unit tests (no GPU needed).

``python3 bench/bench_cpu_paths.py``: (1) the interpreter's vector add of 2**20 + 3 elements
(1025 programs of 1024): seconds, best of --repeats; (2) NVRTC's compile of a 41-kernel program
while another thread counts in pure Python: the compile's seconds and the counter's ticks during
it (ticks > 0 in thousands: the compile released the GIL, which lets the autotuner's threads
compile configs in parallel), with the ticks per second of the counter alone as the peer.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

VECTOR_ADD = """
kernel vector_add(const f32 *a, const f32 *b, f32 *out, i32 n, const i32 BLOCK)
{
    tile offs = program_id(0) * BLOCK + arange(0, BLOCK);
    tile mask = offs < n;
    store(out + offs, load(a + offs, mask) + load(b + offs, mask), mask);
}
"""

TOY = """
#line 7 "kernels/toy.c"
extern "C" __global__ void toy(float *out, const float *a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] * 2.0f + 1.0f;
}
"""


def interpreter_vector_add(repeats: int) -> float:
    import teeny_tx as tx

    n = 2**20 + 3
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(n, np.float32), rng.standard_normal(n, np.float32)
    out = np.zeros(n, np.float32)
    k = tx.compile(VECTOR_ADD, name="kernels/bench.c").vector_add
    k.interpret[(tx.cdiv(n, 1024),)](a, b, out, n, BLOCK=1024)  # lowered once, not timed
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        k.interpret[(tx.cdiv(n, 1024),)](a, b, out, n, BLOCK=1024)
        best = min(best, time.perf_counter() - start)
    assert np.array_equal(out, a + b)
    return best


def ticks_while(work, seconds: float | None = None) -> tuple[float, int]:
    """(seconds, ticks of a pure-Python counter thread) while ``work()`` runs (or sleeping)."""
    done, ticks = threading.Event(), [0]

    def count():
        while not done.is_set():
            ticks[0] += 1
            time.sleep(0)

    counter = threading.Thread(target=count)
    counter.start()
    try:
        time.sleep(0.05)
        start, before = time.perf_counter(), ticks[0]
        work() if seconds is None else time.sleep(seconds)
        return time.perf_counter() - start, ticks[0] - before
    finally:
        done.set()
        counter.join()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(f"interpreter vector_add n=2**20+3: {interpreter_vector_add(args.repeats):.3f} s")
    from teeny_tx.runtime import nvrtc

    source = TOY + "".join(
        f'extern "C" __global__ void k{i}(float *o) {{ o[threadIdx.x] = sinf(o[{i}]); }}\n'
        for i in range(40)
    )
    seconds, during = ticks_while(lambda: nvrtc.compile_to_cubin(source, name="toy", arch="sm_90"))
    idle_seconds, idle = ticks_while(None, seconds)
    print(
        f"nvrtc compile: {seconds:.3f} s, counter ticks during it {during} "
        f"(alone: {idle} in {idle_seconds:.3f} s; ratio {during / max(idle, 1):.2f})"
    )


if __name__ == "__main__":
    main()
