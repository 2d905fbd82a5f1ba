"""teeny_tx: a block-programming kernel language (Triton's model, C syntax) compiled to CUDA.

``teeny_tx.compile(path)`` parses a kernel file; ``module.kernel[grid](*args, **constexprs)``
launches it on a GPU through NVRTC and CuPy; ``module.kernel.interpret[grid](...)`` runs it
on NumPy; ``module.kernel.cuda_source(...)`` shows the generated CUDA;
``module.kernel.tune[grid](...)`` launches the best of its ``#pragma autotune`` configs.
``teeny_tx.Target`` names what the CUDA is compiled for (``compile(path, target="sm_90a")``;
default: ``$TEENY_TX_ARCH``, read once per ``compile``, else the device).
``teeny_tx.show(kernel, *args, **constexprs)`` displays a specialisation (its CUDA by DSL line
and its resources); in notebooks, ``%load_ext teeny_tx.notebook`` gives the ``%%teeny_tx``
cell magic. ``teeny_tx.profile(kernel, grid, *args, **constexprs)`` times a launch against the
roofline and reports its resources (``teeny-tx profile`` on the command line).
"""

from ._prelude import PRELUDE
from .display import show
from .errors import (
    CompileError,
    InterpreterError,
    LaunchError,
    NvrtcError,
    PerformanceWarning,
    RegisterSpillWarning,
    ResourceError,
    TeenyError,
)
from .frontend import jit
from .kernel import Kernel, Module, Specialization, compile
from .profiling import profile
from .runtime.autotune import Autotuner, Config
from .runtime.grid import cdiv
from .target import Target

__version__ = "0.1.0"


__all__ = [
    "PRELUDE",
    "Autotuner",
    "Config",
    "CompileError",
    "InterpreterError",
    "Kernel",
    "LaunchError",
    "Module",
    "NvrtcError",
    "PerformanceWarning",
    "RegisterSpillWarning",
    "ResourceError",
    "Specialization",
    "Target",
    "TeenyError",
    "cdiv",
    "compile",
    "jit",
    "profile",
    "show",
]
