"""What lets the autotuner's threads compile its configs in parallel (no GPU needed): NVRTC's
compile runs without the GIL, so another thread keeps running Python while one compiles."""

from __future__ import annotations

import threading
import time

from teeny_tx.runtime import nvrtc

SOURCE = """
#line 7 "kernels/toy.c"
extern "C" __global__ void toy(float *out, const float *a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] * 2.0f + 1.0f;
}
"""


def test_threads_keep_running_python_while_nvrtc_compiles():
    source = SOURCE + "".join(  # a larger program: a compile of a few tenths of a second
        f'extern "C" __global__ void k{i}(float *o) {{ o[threadIdx.x] = sinf(o[{i}]); }}\n'
        for i in range(40)
    )
    done = threading.Event()
    ticks = [0]

    def count():  # pure Python: runs only while the compiling thread does not hold the GIL
        while not done.is_set():
            ticks[0] += 1
            time.sleep(0)

    counter = threading.Thread(target=count)
    counter.start()
    try:
        time.sleep(0.05)  # the counter is running
        start, before = time.perf_counter(), ticks[0]
        nvrtc.compile_to_cubin(source, name="toy", arch="sm_90")
        seconds, during = time.perf_counter() - start, ticks[0] - before
    finally:
        done.set()
        counter.join()
    assert seconds > 0.05 and during > 100  # the other thread ran during the compile


def test_precompiled_headers_by_default_only_for_portable_targets(monkeypatch, tmp_path):
    monkeypatch.delenv("TEENY_TX_PCH", raising=False)
    assert nvrtc.pch_arguments(tmp_path, "sm_90")[0] == "-pch"
    assert nvrtc.pch_arguments(tmp_path, "sm_90a") == []  # measured slower there (its doc)
    assert nvrtc.pch_arguments(None, "sm_90") == []
    monkeypatch.setenv("TEENY_TX_PCH", "1")
    assert nvrtc.pch_arguments(tmp_path, "sm_90a")[1].startswith(f"--pch-dir={tmp_path}")
    monkeypatch.setenv("TEENY_TX_PCH", "0")
    assert nvrtc.pch_arguments(tmp_path, "sm_90") == []
