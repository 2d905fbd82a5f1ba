"""``triton.testing``: ``do_bench``, the time of a function on the GPU in milliseconds.

Input: a callable that launches work on the current stream. Output: its time per call,
measured with CUDA events (torch's when torch has a GPU, else CuPy's) after a warm-up.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import TeenyError


def do_bench(
    fn: Callable[[], Any],
    warmup: int = 25,
    rep: int = 100,
    grad_to_none: Any = None,
    quantiles: list[float] | None = None,
    return_mode: str = "mean",
) -> Any:
    """Milliseconds per call of ``fn``: ``warmup`` and ``rep`` are milliseconds, as Triton's;
    ``quantiles`` gives a list of those quantiles instead, ``return_mode`` min, max, mean or
    median."""
    import numpy as np

    event, sync = _events()
    fn()
    sync()
    start, end = event(), event()
    start.record()
    for _ in range(5):
        fn()
    end.record()
    sync()
    estimate = max(_elapsed(start, end) / 5, 1e-3)
    n_warm, n_rep = max(1, int(warmup / estimate)), max(1, int(rep / estimate))
    for _ in range(n_warm):
        fn()
    times = []
    for _ in range(n_rep):
        s, e = event(), event()
        s.record()
        fn()
        e.record()
        times.append((s, e))
    sync()
    ms = np.array([_elapsed(s, e) for s, e in times])
    if quantiles is not None:
        out = [float(q) for q in np.quantile(ms, quantiles)]
        return out[0] if len(out) == 1 else out
    return float(getattr(np, return_mode)(ms))


def _events() -> tuple[Callable[[], Any], Callable[[], None]]:
    try:
        import torch

        if torch.cuda.is_available():
            return (lambda: torch.cuda.Event(enable_timing=True)), torch.cuda.synchronize
    except ImportError:
        pass
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() > 0:
            return cupy.cuda.Event, cupy.cuda.Device().synchronize
    except Exception:
        pass
    raise TeenyError("do_bench needs a GPU (torch or CuPy with a CUDA device)")


def _elapsed(start: Any, end: Any) -> float:
    if hasattr(start, "elapsed_time"):
        return float(start.elapsed_time(end))
    import cupy

    return float(cupy.cuda.get_elapsed_time(start, end))
