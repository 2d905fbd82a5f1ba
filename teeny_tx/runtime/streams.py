"""Streams of the array libraries: torch's current CUDA stream as a raw handle, in one place.

Input: a device index. Output: the ``cudaStream_t`` value a launch takes (CuPy's current stream
is CuPy's own: launches without a stream use it). Every layer that launches on torch's stream
(the generated launchers, the autotuner, the kernel library, the torch ops) reads it here.
"""

from __future__ import annotations

from typing import Any

_torch_raw_stream: list = [None]
TORCH_RAW_STREAM = _torch_raw_stream  # [torch's raw current-stream function, once found]


def torch_raw_stream() -> Any:
    """torch's function of a device → the raw handle of its current stream (found once):
    ``torch._C._cuda_getCurrentRawStream``, the call Triton's launcher uses
    (``torch.cuda.current_stream`` builds a Python object per call)."""
    raw = _torch_raw_stream[0]
    if raw is None:
        raw = _torch_raw_stream[0] = _find_torch_raw_stream()
    return raw


def torch_stream_pointer(device: int) -> int:
    """The raw handle of torch's current stream on ``device``."""
    return torch_raw_stream()(device)


def torch_stream(torch: Any, device: int) -> int:
    """As :func:`torch_stream_pointer` (``torch``: the module, which the caller has imported)."""
    del torch
    return torch_stream_pointer(device)


def _find_torch_raw_stream() -> Any:
    import torch

    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return raw
    return lambda device: torch.cuda.current_stream(device).cuda_stream
