"""The user-facing objects: a compiled module, its kernels, their specialisations and launches.

Input: a kernel file (path or text). Output: a :class:`Module` whose attributes are
:class:`Kernel` objects. ``kernel[grid](*args, num_warps=4, num_stages=2, stream=None,
**constexprs)`` launches on the GPU; ``kernel.interpret[grid](...)`` runs the same kernel on
NumPy; ``kernel.specialize(...)`` and ``kernel.cuda_source(...)`` compile without launching;
``kernel.tune[grid](...)`` launches the best of the configs its ``#pragma autotune`` lines
declare (``autotune.py``).

A specialisation is built once per key (see ``binder.py``) and target architecture (the one
``runtime.nvrtc.target_arch`` gives: ``$TEENY_TX_ARCH``, else the device) and kept in memory;
its cubin is cached on disk by ``runtime.cache``.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ._prelude import FILES
from .binder import Binder
from .errors import CompileError, LaunchError, ResourceError, TeenyError
from .lower import ir
from .lower.builder import build_kernel
from .lower.hopper_induction import rewrite_pointer_inductions
from .lower.layout import assign_layouts, walk_exprs
from .lower.signature import kernel_signature
from .parse import Unit, parse
from .runtime import cache, launch, nvrtc
from .templates.emitter import emit_cuda

if TYPE_CHECKING:
    from .autotune import Autotuner

# Dynamic shared memory a block may opt into, by target (CUDA's documented limits).
SHARED_LIMIT = {
    "sm_80": 166912,
    "sm_86": 101376,
    "sm_89": 101376,
    "sm_90": 232448,
    "sm_90a": 232448,
}

HEADERS = {name: text for name, text in sorted(FILES.items()) if name.endswith(".cuh")}


@dataclass
class Specialization:
    """One compiled variant of a kernel: its IR, CUDA source and (lazily) its cubin."""

    kernel: ir.Kernel
    cuda_source: str
    key: tuple
    shared_mem: int = 0  # bytes of dynamic shared memory per block
    arch: str = field(default_factory=nvrtc.target_arch)
    hopper_features: bool = False  # the kernel has dot(): its target was chosen asking for them

    @property
    def entry(self) -> str:
        return self.kernel.name

    @property
    def block(self) -> tuple[int, int, int]:
        return (self.kernel.num_threads, 1, 1)

    @cached_property
    def cubin(self) -> bytes:
        return cache.load_or_compile(
            self.cuda_source,
            name=self.entry,
            arch=self.arch,
            options=nvrtc.DEFAULT_OPTIONS,
            headers=HEADERS,
        )

    @cached_property
    def loaded(self) -> launch.LoadedKernel:
        return launch.LoadedKernel(self.cubin, self.entry)


def specialise(
    unit: Unit, name: str, binder: Binder, key: tuple, debug: bool = False
) -> Specialization:
    kernel = build_kernel(unit, name, dataclasses.replace(binder.spec(key), debug=debug))
    kernel = rewrite_pointer_inductions(kernel)  # pa += inc in a loop -> closed form
    # kernels with dot() take Hopper's features (wgmma) where the device has them
    hopper = _has_dot(kernel)
    arch = nvrtc.target_arch(hopper_features=hopper)
    annotated, layouts = assign_layouts(kernel, wgmma=arch == "sm_90a")
    source, shared = emit_cuda(annotated, layouts)
    limit = SHARED_LIMIT.get(arch, SHARED_LIMIT["sm_90"])
    if shared > limit:
        raise ResourceError(
            f"kernel {name} needs {shared} bytes of shared memory per block for its reductions, "
            f"layout changes and pipeline stages; {arch} allows {limit}. "
            "Use smaller tiles, fewer num_stages or fewer warps."
        )
    return Specialization(annotated, source, key, shared, arch, hopper)


def _has_dot(kernel: ir.Kernel) -> bool:
    return any(isinstance(e, ir.Op) and e.op == "dot" for e in walk_exprs(kernel.body))


def _grid3(grid: Any, meta: dict[str, Any]) -> tuple[int, int, int]:
    if callable(grid):
        grid = grid(meta)
    if isinstance(grid, int):
        grid = (grid,)
    if not isinstance(grid, (tuple, list)) or not 1 <= len(grid) <= 3:
        raise LaunchError(
            "the grid must be a tuple of 1 to 3 positive ints (or a callable giving one), "
            f"got {grid!r}"
        )
    out = []
    for g in grid:
        if isinstance(g, bool) or not isinstance(g, (int, np.integer)) or g <= 0:
            raise LaunchError(f"grid sizes must be positive ints, got {tuple(grid)!r}")
        out.append(int(g))
    limits = (2**31 - 1, 65535, 65535)
    for g, lim, axis in zip(out, limits, "xyz", strict=False):
        if g > lim:
            raise LaunchError(f"grid size {g} along {axis} exceeds the CUDA limit {lim}")
    return tuple(out + [1] * (3 - len(out)))


class Kernel:
    """A kernel of a module. Index with a grid to launch:
    ``k[(programs,)](*args, **constexprs)``."""

    def __init__(self, module: Module, name: str):
        self.module = module
        self.name = name
        self.params = kernel_signature(module.unit, module.unit.functions[name])
        self.binder = Binder(name, self.params)
        self._specs: dict[tuple, Specialization] = {}  # (*key, target arch) -> specialisation
        self._hopper: dict[tuple, bool] = {}  # key -> whether its kernel asks for Hopper features
        # key -> (loaded kernel, block, shared memory, functions by device); the device and
        # $TEENY_TX_ARCH are taken as fixed from a key's first launch on
        self._compiled: dict[tuple, tuple] = {}
        self._launchers: dict[tuple, Callable[..., None]] = {}
        self._tuner: Autotuner | None = None
        decl = module.unit.autotune.get(name)
        if decl is not None:  # its names are checked now, at compile time
            from .autotune import from_pragmas

            self._tuner = from_pragmas(self, decl)

    def __repr__(self) -> str:
        return f"<teeny_tx kernel {self.name}({', '.join(p.describe() for p in self.params)})>"

    def __getitem__(self, grid) -> Callable[..., None]:
        """The launcher for ``grid`` (kept per grid tuple: indexing costs one dict look-up)."""
        launcher = self._launchers.get(grid) if type(grid) is tuple else None
        if launcher is None:
            launcher = self._launcher(grid)
            if type(grid) is tuple and len(self._launchers) < 4096:
                self._launchers[grid] = launcher
        return launcher

    def _launcher(self, grid) -> Callable[..., None]:
        fixed = None if callable(grid) else _grid3(grid, {})
        bind = self.binder.bind_device
        compiled = self._compiled
        get_device, convert_stream, driver_error = (
            launch.get_device,
            launch.convert_stream,
            launch.DriverError,
        )

        def run(
            *args, num_warps: int = 4, num_stages: int = 2, stream: Any = None, **constexprs
        ) -> None:
            key, values, _ = bind(args, constexprs, num_warps, num_stages)
            entry = compiled.get(key)
            if entry is None:
                entry = self._compile(key, args, constexprs, num_warps, num_stages)
            loaded, block, shared, functions = entry
            device = get_device()
            function = functions.get(device)
            if function is None:
                function = functions[device] = loaded.prepared(device, shared)
            grid3 = fixed or _grid3(
                grid, {**constexprs, "num_warps": num_warps, "num_stages": num_stages}
            )
            if stream is not None:
                stream = convert_stream(stream)
            try:
                function(grid3, block, values, shared, stream)
            except driver_error as err:
                raise loaded.error(device, err, grid3, block, shared) from None

        return run

    def _compile(self, key: tuple, args, constexprs, num_warps, num_stages) -> tuple:
        self.binder.check_call(args, constexprs, num_warps, num_stages)
        spec = self._specialization(key)
        entry = self._compiled[key] = (spec.loaded, spec.block, spec.shared_mem, {})
        return entry

    def _specialization(self, key: tuple) -> Specialization:
        """The specialisation of ``key`` for the target specialise() chooses now: memoised per
        ``(*key, arch)``, so a changed ``$TEENY_TX_ARCH`` (or device) builds its own. Whether
        the kernel asks for Hopper features (has dot()) depends on the key only, so after the
        first build the arch costs one ``target_arch`` call to know."""
        hopper = self._hopper.get(key)
        if hopper is not None:
            spec = self._specs.get((*key, nvrtc.target_arch(hopper_features=hopper)))
            if spec is not None:
                return spec
        spec = specialise(self.module.unit, self.name, self.binder, key, self.module.debug)
        self._hopper[key] = spec.hopper_features
        self._specs[(*key, spec.arch)] = spec
        return spec

    def specialize(
        self, *args, num_warps: int = 4, num_stages: int = 2, **constexprs
    ) -> Specialization:
        """Compile (without launching) for these arguments: arrays, or dtype names for pointers."""
        key = self.binder.bind_host(args, constexprs, num_warps, True, num_stages)
        return self._specialization(key)

    def cuda_source(self, *args, num_warps: int = 4, num_stages: int = 2, **constexprs) -> str:
        """The CUDA C++ this kernel becomes for these arguments (arrays or dtype names)."""
        spec = self.specialize(*args, num_warps=num_warps, num_stages=num_stages, **constexprs)
        return spec.cuda_source

    @property
    def tune(self) -> Autotuner:
        """``kernel.tune[grid](*args, **constexprs)``: launch the config chosen for these
        arguments by the autotuner that the kernel's ``#pragma autotune`` lines declare (see
        ``autotune.py``)."""
        if self._tuner is None:
            raise LaunchError(
                f"kernel {self.name} declares no autotune configs: put `#pragma autotune "
                "config(...)` lines (and `#pragma autotune key(...)`) directly before it, or "
                "build teeny_tx.Autotuner(kernel, configs, key=...)"
            )
        return self._tuner

    @property
    def interpret(self) -> _Interpret:
        """``kernel.interpret[grid](*numpy_arrays, **constexprs)``: run on the NumPy interpreter."""
        return _Interpret(self)


class _Interpret:
    def __init__(self, kernel: Kernel):
        self.kernel = kernel

    def __getitem__(self, grid):
        def run(*args, num_warps: int = 4, num_stages: int = 2, **constexprs) -> None:
            k = self.kernel
            grid3 = _grid3(grid, {**constexprs, "num_warps": num_warps, "num_stages": num_stages})
            key = k.binder.bind_host(args, constexprs, num_warps, num_stages=num_stages)
            spec = dataclasses.replace(k.binder.spec(key), debug=k.module.debug)
            ir_kernel = build_kernel(k.module.unit, k.name, spec)
            from . import interpreter

            interpreter.run(
                ir_kernel,
                grid3,
                {p.name: a for p, a in zip(ir_kernel.runtime_params, args, strict=True)},
            )

        return run


class Module:
    """The kernels of one file: ``module.<kernel name>`` is a :class:`Kernel`."""

    def __init__(self, unit: Unit, debug: bool = False):
        self.unit = unit
        self.debug = debug
        self.kernels = {name: Kernel(self, name) for name in unit.kernels()}

    def __getattr__(self, name: str) -> Kernel:
        kernels = self.__dict__.get("kernels", {})
        if name in kernels:
            return kernels[name]
        close = difflib.get_close_matches(name, list(kernels), n=1)
        hint = f"; did you mean '{close[0]}'?" if close else ""
        raise AttributeError(
            f"{self.unit.filename} has no kernel '{name}' (kernels: {', '.join(kernels)}){hint}"
        )

    def __dir__(self):
        return list(super().__dir__()) + list(self.kernels)

    def __repr__(self) -> str:
        return f"<teeny_tx module {self.unit.filename}: {', '.join(self.kernels)}>"


def compile(  # noqa: A001
    source: str | os.PathLike, name: str | None = None, debug: bool | None = None
) -> Module:
    """Parse a kernel file (a path) or kernel text (a string with a newline, or one that names
    no file); ``name`` is what errors and ``#line`` directives call it. ``debug`` compiles
    device_print and device_assert in (default: the TEENY_TX_DEBUG environment variable).

    Specialisations are checked and compiled at their first launch or ``cuda_source`` call.
    """
    is_path = isinstance(source, os.PathLike) or (
        "\n" not in source and (name is None or os.path.exists(source))
    )
    if is_path:
        path = Path(source)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise TeenyError(f"cannot read kernel file {path}: {exc.strerror}") from None
        filename = name or str(source)
    else:
        text, filename = str(source), name or "<string>"
    unit = parse(text, filename)
    if not unit.kernels():
        raise CompileError(
            f"{filename} defines no kernel",
            None,
            "an entry point is declared `kernel name(params) { ... }`",
        )
    if debug is None:
        debug = os.environ.get("TEENY_TX_DEBUG", "") not in ("", "0")
    return Module(unit, debug)
