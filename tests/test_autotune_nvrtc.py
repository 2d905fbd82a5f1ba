"""NVRTC's precompiled-header options (no GPU needed). That its compile runs without the GIL,
what lets the autotuner's threads compile in parallel, is measured by bench/bench_cpu_paths.py
(a wall-clock measurement, not a unit test)."""

from __future__ import annotations

from teeny_tx.runtime import nvrtc

SOURCE = """
#line 7 "kernels/toy.c"
extern "C" __global__ void toy(float *out, const float *a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] * 2.0f + 1.0f;
}
"""


def test_precompiled_headers_by_default_only_for_portable_targets(monkeypatch, tmp_path):
    monkeypatch.delenv("TEENY_TX_PCH", raising=False)
    assert nvrtc.pch_arguments(tmp_path, "sm_90")[0] == "-pch"
    assert nvrtc.pch_arguments(tmp_path, "sm_90a") == []  # measured slower there (its doc)
    assert nvrtc.pch_arguments(None, "sm_90") == []
    monkeypatch.setenv("TEENY_TX_PCH", "1")
    assert nvrtc.pch_arguments(tmp_path, "sm_90a")[1].startswith(f"--pch-dir={tmp_path}")
    monkeypatch.setenv("TEENY_TX_PCH", "0")
    assert nvrtc.pch_arguments(tmp_path, "sm_90") == []
