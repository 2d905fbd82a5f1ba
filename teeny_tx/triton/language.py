"""``import teeny_tx.triton.language as tl``: Triton's ``triton.language`` names.

Input: nothing. Output: the builtins, dtypes and ``constexpr`` of ``frontend/builtins.py``
under Triton's names (``tl.load``, ``tl.float16``...), and ``tl.math`` with the math
functions. The translator recognises them by identity; called outside a ``@jit`` function
they raise. ``tl.acc_t`` is this language's compute type (f64 for f64 data, else f32).
"""

from __future__ import annotations

import sys
import types

from ..frontend.builtins import (
    ALIASES,
    BUILTINS,
    DTYPE_OBJECTS,
    LIBDEVICE,
    LIBDEVICE_OWN,
    LIBDEVICE_RENAMED,
    DType,
    PointerDType,
    PropagateNan,
    constexpr,
    pointer_type,
)

# libdevice's functions live in `libdevice` below, as in Triton (tl.umulhi is Triton's own)
_LIBDEVICE_ONLY = (set(LIBDEVICE_OWN) | set(LIBDEVICE_RENAMED)) - {"umulhi"}
globals().update({n: f for n, f in BUILTINS.items() if n not in _LIBDEVICE_ONLY})
globals().update(DTYPE_OBJECTS)
globals().update({alias: DTYPE_OBJECTS[name] for alias, name in ALIASES.items()})
dtype = DType
tensor = object  # annotations only

_MATH = "exp exp2 log log2 sqrt sqrt_rn rsqrt sin cos erf abs floor ceil sigmoid tanh pow fma"
_MATH += " div_rn fdiv cdiv maximum minimum umulhi"
math = types.SimpleNamespace(**{n: BUILTINS[n] for n in _MATH.split()})

# `from triton.language.extra import libdevice`, `tl.extra.cuda.libdevice`: CUDA's libdevice
libdevice = types.ModuleType(f"{__name__}.extra.libdevice", "CUDA's libdevice math functions")
libdevice.__dict__.update({n: BUILTINS[n] for n in LIBDEVICE})
_cuda = types.ModuleType(f"{__name__}.extra.cuda", "libdevice for CUDA")
_cuda.libdevice = libdevice  # type: ignore[attr-defined]
extra = types.ModuleType(f"{__name__}.extra", "triton.language.extra: libdevice")
extra.libdevice = libdevice  # type: ignore[attr-defined]
extra.cuda = _cuda  # type: ignore[attr-defined]
for _module in (extra, _cuda, libdevice):
    sys.modules[_module.__name__] = _module
sys.modules[f"{_cuda.__name__}.libdevice"] = libdevice

__all__ = sorted(set(BUILTINS) - _LIBDEVICE_ONLY) + sorted(DTYPE_OBJECTS) + sorted(ALIASES)
__all__ += ["constexpr", "math", "extra", "pointer_type", "PointerDType", "PropagateNan"]
