"""``import teeny_tx.triton.language as tl``: Triton's ``triton.language`` names.

Input: nothing. Output: the builtins, dtypes and ``constexpr`` of ``frontend/builtins.py``
under Triton's names (``tl.load``, ``tl.float16``...), and ``tl.math`` with the math
functions. The translator recognises them by identity; called outside a ``@jit`` function
they raise. ``tl.acc_t`` is this language's compute type (f64 for f64 data, else f32).
"""

from __future__ import annotations

import types

from ..frontend.builtins import (
    ALIASES,
    BUILTINS,
    DTYPE_OBJECTS,
    DType,
    PointerDType,
    constexpr,
    pointer_type,
)

globals().update(BUILTINS)
globals().update(DTYPE_OBJECTS)
globals().update({alias: DTYPE_OBJECTS[name] for alias, name in ALIASES.items()})
dtype = DType
tensor = object  # annotations only

_MATH = "exp exp2 log log2 sqrt sqrt_rn rsqrt sin cos erf abs floor ceil sigmoid tanh pow fma"
_MATH += " div_rn fdiv cdiv maximum minimum"
math = types.SimpleNamespace(**{n: BUILTINS[n] for n in _MATH.split()})

__all__ = sorted(BUILTINS) + sorted(DTYPE_OBJECTS) + sorted(ALIASES)
__all__ += ["constexpr", "math", "pointer_type", "PointerDType"]
