"""The runtime: generated CUDA → cubin (NVRTC, cached) → launches on CuPy's device.

Input: CUDA source from the emitter and user arrays at launch. Output: queued kernels.
``nvrtc`` compiles, ``cache`` remembers cubins, ``memory`` turns arrays into launch values,
``launch`` loads cubins and launches them.
"""

from teeny_tx.runtime.cache import cache_dir, cache_key, clear_memo, load_or_compile
from teeny_tx.runtime.launch import (
    DeviceLimits,
    KernelAttributes,
    LoadedKernel,
    device_limits,
    has_gpu,
    pointer_arg,
)
from teeny_tx.runtime.memory import alignment_of, describe, device_pointer, extent_bytes
from teeny_tx.runtime.nvrtc import (
    DEFAULT_OPTIONS,
    CompileResult,
    compile_to_cubin,
    compile_with_log,
    nvrtc_version,
)

__all__ = [
    "DEFAULT_OPTIONS",
    "CompileResult",
    "DeviceLimits",
    "KernelAttributes",
    "LoadedKernel",
    "alignment_of",
    "cache_dir",
    "cache_key",
    "clear_memo",
    "compile_to_cubin",
    "compile_with_log",
    "describe",
    "device_limits",
    "device_pointer",
    "extent_bytes",
    "has_gpu",
    "load_or_compile",
    "nvrtc_version",
    "pointer_arg",
]
