"""Streams of the array libraries: torch's current CUDA stream as a raw handle.

Input: the torch module and a device index. Output: the ``cudaStream_t`` value a launch takes
(CuPy's current stream is CuPy's own: launches without a stream use it).
"""

from __future__ import annotations

from typing import Any


def torch_stream(torch: Any, device: int) -> int:
    """torch's current stream on ``device`` as a raw handle (the call Triton's launcher uses;
    torch.cuda.current_stream builds a Python object each time)."""
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    return raw(device) if raw is not None else torch.cuda.current_stream(device).cuda_stream
