"""The user-facing objects: a compiled module, its kernels, their specialisations and launches.

Input: a kernel file (path or text). Output: a :class:`Module` whose attributes are
:class:`Kernel` objects. ``kernel[grid](*args, num_warps=4, num_stages=2, stream=None,
**constexprs)`` launches on the GPU; ``kernel.interpret[grid](...)`` runs the same kernel on
NumPy; ``kernel.specialize(...)`` and ``kernel.cuda_source(...)`` compile without launching;
``kernel.tune[grid](...)`` launches the best of the configs its ``#pragma autotune`` lines
declare (``autotune.py``).

A specialisation is built once per key (see ``runtime/binder.py``) and :class:`Target`, and
kept in memory; its cubin is cached on disk by ``runtime.cache`` (keyed by ``target.arch``).
The target is the one given to :func:`compile` or to ``specialize``/``cuda_source``, else the
one ``$TEENY_TX_ARCH`` named when the module was compiled (read once, there), else the
device's (``runtime.launch.device_target``: sm_90a for kernels with ``dot`` on a Hopper GPU).

A launch of a cached specialisation costs a few microseconds of host time (every argument is
checked; the driver is called with a prebuilt parameter block: ``runtime/binder.py``). Below
that, capture the launches in a CUDA graph and replay it: under ``torch.cuda.graph(g)`` (or a
CuPy stream's ``begin_capture()``) ``kernel[grid](...)`` and the ``teeny_tx.nn`` wrappers are
recorded on the capturing stream like any launch (compile and load before capturing: call
once first); ``g.replay()`` then runs them all for one launch's host cost, on the same
buffers (copy new data into them). ``bench/bench_launch.py`` measures both.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from . import display, switches
from ._prelude import FILES
from .errors import CompileError, LaunchError, ResourceError
from .lower import ir
from .lower.build.builder import build_kernel
from .lower.build.signature import kernel_signature
from .lower.hopper.matmul import HOPPER_ARCH, HopperMatmul
from .lower.interface import Interface
from .lower.ir import walk_exprs
from .lower.passes.driver import decide
from .lower.passes.induction import rewrite_pointer_inductions
from .parse import Unit, parse
from .parse.files import read_kernel_file
from .runtime import cache, launch, nvrtc, plan, tma
from .runtime import hopper as hopper_launch
from .runtime.autotune import Autotuner, from_pragmas
from .runtime.binder import Binder, Entry
from .runtime.grid import as_grid3
from .target import Target
from .templates.emitter import emit_cuda
from .templates.hopper import render_matmul

HEADERS = {name: text for name, text in sorted(FILES.items()) if name.endswith(".cuh")}


class _Compiled:
    """What every kind of specialisation does with its CUDA source: its cubin (cached on
    disk by ``runtime.cache``, lazily) and the kernel loaded from it."""

    cuda_source: str

    @property
    def entry(self) -> str:
        raise NotImplementedError

    @property
    def arch(self) -> str:
        raise NotImplementedError

    @cached_property
    def compiled(self) -> nvrtc.CompileResult:
        """NVRTC's result (cubin and log; the log has ptxas's register and spill report)."""
        return nvrtc.compile_with_log(
            self.cuda_source, name=self.entry, arch=self.arch, headers=HEADERS
        )

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


@dataclass
class Specialization(_Compiled):
    """One compiled variant of a kernel: its IR, CUDA source and (lazily) its cubin."""

    kernel: ir.Kernel
    cuda_source: str
    key: tuple
    target: Target
    shared_mem: int = 0  # bytes of dynamic shared memory per block
    hopper_features: bool = False  # the kernel has dot(): a device target would ask for them
    # parameters (tensor maps included), shared-memory layout, block (lower/interface.py)
    interface: Interface | None = None
    switches: switches.CodegenSwitches = switches.CodegenSwitches()  # it was compiled under

    @property
    def cache_key(self) -> tuple:
        """What it is memoised by: the binder's key, the target and the code-changing
        switches (``teeny_tx/switches.py``)."""
        return self.key + (self.target.arch, self.switches)

    @property
    def arch(self) -> str:
        """The NVRTC architecture it compiles for (``target.arch``)."""
        return self.target.arch

    @property
    def entry(self) -> str:
        return self.kernel.name

    @property
    def block(self) -> tuple[int, int, int]:
        return (self.kernel.num_threads, 1, 1)

    def _repr_html_(self) -> str:  # notebooks: the CUDA by DSL line and its resources
        return display.specialization_html(self)

    def _repr_markdown_(self) -> str:
        return display.specialization_markdown(self)


@dataclass
class HopperSpecialization(_Compiled):
    """The Hopper matmul's kind of specialisation: a node planned by
    :func:`teeny_tx.lower.hopper.plan_matmul` (every decision), its CUDA source rendered by
    ``templates/hopper.py``, compiled for ``target`` (an sm_90a one: wgmma and TMA), launched
    through launch plans (``runtime/hopper.py``). Compiling needs no GPU; launching needs a
    Hopper device."""

    node: HopperMatmul
    target: Target = dataclasses.field(default_factory=lambda: Target.of(HOPPER_ARCH))
    cuda_source: str = ""

    def __post_init__(self) -> None:
        if not (self.target.wgmma and self.target.tma):
            raise CompileError(f"the Hopper matmul needs wgmma and TMA; {self.target} has not")
        if self.node.shared_bytes > self.target.max_shared_per_block:
            raise ResourceError(
                f"the Hopper matmul {self.node.name} needs {self.node.shared_bytes} bytes of "
                f"shared memory; {self.target.arch} allows {self.target.max_shared_per_block}",
                needed=self.node.shared_bytes,
                limit=self.target.max_shared_per_block,
            )
        self.cuda_source = render_matmul(self.node)

    @property
    def arch(self) -> str:
        return self.target.arch

    @property
    def entry(self) -> str:
        return self.node.name

    @property
    def block(self) -> tuple[int, int, int]:
        return (self.node.mainloop.threads, 1, 1)

    @property
    def shared_mem(self) -> int:
        return self.node.shared_bytes

    def grid(self, m: int, n: int, sms: int) -> int:
        """Blocks of the persistent grid (see ``runtime/hopper.py``)."""
        return hopper_launch.grid(self.node, m, n, sms)

    def launcher(
        self,
        m: int,
        n: int,
        k: int,
        a_stride: int,
        b_stride: int,
        scm: int,
        scn: int,
        alpha: float,
        sms: int,
    ) -> Callable[..., None]:
        """A launch function ``(c_ptr, a_ptr, b_ptr, bias_ptr, stream=None, alpha=None,
        scale_a=0, scale_b=0) -> None`` for products of these sizes and strides (its launch
        plan made per device at its first call there: ``runtime/hopper.py``). Not kept:
        whoever repeats calls keeps it (the library's plans)."""
        return hopper_launch.launcher(self, m, n, k, a_stride, b_stride, scm, scn, alpha, sms)

    def launch(
        self,
        c_ptr: int,
        a_ptr: int,
        b_ptr: int,
        bias_ptr: int,
        m: int,
        n: int,
        k: int,
        a_stride: int,
        b_stride: int,
        scm: int,
        scn: int,
        alpha: float,
        sms: int,
        stream: Any = None,
        scale_a: int = 0,
        scale_b: int = 0,
    ) -> None:
        """Queue C = epilogue(A @ B) once (a launcher made and called): ``scale_a`` /
        ``scale_b``: device pointers to the per-tensor f32 scales of a scaled (fp8) node."""
        run = hopper_launch.launcher(self, m, n, k, a_stride, b_stride, scm, scn, alpha, sms)
        run(c_ptr, a_ptr, b_ptr, bias_ptr, stream, None, scale_a, scale_b)


_hopper_specs: dict[tuple, HopperSpecialization] = {}


def hopper_specialization(node: HopperMatmul) -> HopperSpecialization:
    """The specialisation of a planned Hopper matmul ``node``, built once per process."""
    found = _hopper_specs.get(node.key)
    if found is None:
        found = _hopper_specs[node.key] = HopperSpecialization(node)
    return found


def specialise(
    unit: Unit,
    name: str,
    binder: Binder,
    key: tuple,
    target: Target | None = None,
    debug: bool = False,
    pipeline_tma: bool = False,
    codegen: switches.CodegenSwitches | None = None,
) -> Specialization:
    """Lower, lay out and emit the specialisation ``key`` of kernel ``name`` for ``target``
    (None: the device's, asking for Hopper's features when the kernel has dot());
    ``pipeline_tma``: pipelined loads by TMA where they can be (see lower/passes/pipeline.py);
    ``codegen``: the switches the passes read (None: the environment's now)."""
    codegen = switches.codegen() if codegen is None else codegen
    kernel = build_kernel(unit, name, dataclasses.replace(binder.spec(key), debug=debug))
    kernel = dataclasses.replace(kernel, pipeline_tma=pipeline_tma, switches=codegen)
    kernel = rewrite_pointer_inductions(kernel)  # pa += inc in a loop -> closed form
    hopper = _has_dot(kernel)
    if target is None:
        target = launch.device_target(hopper_features=hopper)
    kernel = dataclasses.replace(kernel, target=target)
    decided = decide(kernel, target=target)  # its interface checked against target's limits
    source, shared = emit_cuda(decided)
    return Specialization(
        decided.kernel,
        source,
        key,
        target,
        shared,
        hopper,
        interface=decided.interface,
        switches=codegen,
    )


def _has_dot(kernel: ir.Kernel) -> bool:
    return any(isinstance(e, ir.Op) and e.op == "dot" for e in walk_exprs(kernel.body))


class Kernel:
    """A kernel of a module. Index with a grid to launch:
    ``k[(programs,)](*args, **constexprs)``."""

    def __init__(self, module: Module, name: str, pipeline_tma: bool = False):
        self.module = module
        self.name = name
        self.pipeline_tma = pipeline_tma
        self.params = kernel_signature(module.unit, module.unit.functions[name])
        self.binder = Binder(name, self.params)
        # (*key, target arch, switches) -> specialisation (Specialization.cache_key)
        self._specs: dict[tuple, Specialization] = {}
        self._hopper: dict[tuple, bool] = {}  # key -> whether its kernel asks for Hopper features
        # key -> prepared launch (binder.Entry); the device's arch and $TEENY_TX_ARCH are
        # taken as fixed from a key's first launch on. The launchers find entries by
        # signature (see Binder.launcher): sig -> Entry, several signatures per key.
        self._compiled: dict[tuple, Entry] = {}
        self._entries: dict[tuple, Entry] = {}
        self._launchers: dict[tuple, Callable[..., None]] = {}
        self._tuner: Autotuner | None = None
        decl = module.unit.autotune.get(name)
        if decl is not None:  # its names are checked now, at compile time
            self._tuner = from_pragmas(self, decl)

    @cached_property
    def tma(self) -> Kernel:
        """This kernel with its pipelined loads TMA copies where they can be (see
        lower/passes/pipeline.py): the same parsed module, its own specialisations, launched like
        any kernel (``kernel.tma[grid](...)``: the tensor maps are the launch plan's)."""
        if self.pipeline_tma:
            return self
        return Kernel(self.module, self.name, pipeline_tma=True)

    def __repr__(self) -> str:
        return f"<teeny_tx kernel {self.name}({', '.join(p.describe() for p in self.params)})>"

    def _repr_html_(self) -> str:
        return display.kernel_html(self)

    def _repr_markdown_(self) -> str:
        return display.kernel_markdown(self)

    def __getitem__(self, grid) -> Callable[..., None]:
        """The launcher for ``grid`` (kept per grid tuple: indexing costs one dict look-up)."""
        try:
            launcher = self._launchers.get(grid) if type(grid) is tuple else None
        except TypeError:  # an unhashable element: as_grid3 says what is wrong with it
            launcher = None
            as_grid3(grid, {})
        if launcher is None:
            launcher = self._launcher(grid)
            if type(grid) is tuple and len(self._launchers) < 4096:
                self._launchers[grid] = launcher
        return launcher

    def _launcher(self, grid) -> Callable[..., None]:
        """The generated launch function of ``grid`` (see ``Binder.launcher``)."""
        fixed = grid if callable(grid) else as_grid3(grid, {})
        return self.binder.launcher(fixed, self._entries, self._miss, as_grid3)

    def _miss(
        self,
        sig: tuple | None,
        args: tuple,
        constexprs: dict[str, Any],
        num_warps: Any,
        num_stages: Any,
        stream: Any,
        strided: bool,
        grid: Any,
    ) -> None:
        """A launch whose signature is new (``sig``), or whose values the hot path could not
        pack (``sig`` None): every argument checked, the specialisation compiled and loaded,
        the signature remembered, then the launch."""
        key, values, _ = self.binder.bind_device(args, constexprs, num_warps, num_stages, strided)
        entry = self._entry(key)
        if sig is not None and len(self._entries) < 1 << 16:
            self._entries[sig] = entry
        grid3 = (
            as_grid3(grid, {**constexprs, "num_warps": key[0], "num_stages": key[1]})
            if callable(grid)
            else grid
        )
        device = launch.get_device()
        if entry.tma is not None:  # tensor maps after the parameters: the entry's plan
            entry.functions.get(device) or entry.prepare(device)
            torch = self.binder.torch_arguments(args)
            stream = plan.raw_stream(device, stream, torch)
            values = entry.packer.launch_values(values)
            entry.launch_maps(device, grid3, values, args, stream)
            return
        raw = plan.raw_stream(device, stream, self.binder.torch_arguments(args))
        plan.launch_prepared(entry, device, grid3, entry.packer.pack(*values), raw)

    def _entry(self, key: tuple) -> Entry:
        """The prepared launch of ``key``: compiled (or read from the cache) at its first use."""
        flipped = switches.fingerprint()  # a switch flipped since: a new specialisation
        entry = self._compiled.get((key, flipped))
        if entry is None:
            spec = self._specialization(key)  # (reads the same switches)
            interface = getattr(spec, "interface", None)  # (test doubles of a spec have none)
            maps = None
            if interface is not None and interface.tensor_maps:
                if key[-1]:
                    raise LaunchError(
                        f"kernel '{self.name}' loads its pipelined tiles with TMA, which takes "
                        "32-bit indices only: an array is too large (launch it on the kernel "
                        "without TMA copies)"
                    )
                maps = functools.partial(tma.parameters, interface)
            packer = self.binder.wide if key[-1] else self.binder.narrow
            entry = self._compiled[key, flipped] = Entry(
                spec.loaded, spec.block, spec.shared_mem, packer, key, maps
            )
        return entry

    def direct(
        self,
        grid: Any,
        args: tuple,
        num_warps: int = 4,
        num_stages: int = 2,
        strided: bool = False,
        checked: tuple[str, ...] = (),
        **constexprs: Any,
    ) -> Callable[..., None]:
        """The launch of these arguments' specialisation over ``grid`` (a grid of positive
        sizes, or a callable of the constexprs and options) on the current device,
        as a function of runtime arguments like ``args`` that skips the launcher's signature
        look-up (see :meth:`Binder.direct`: what it rechecks, what the caller promises). For
        callers that key repeated calls themselves (the kernel library's plans). Every
        argument is checked here; arguments of other kinds get the plain launcher."""
        launcher = functools.partial(
            self[grid], num_warps=num_warps, num_stages=num_stages, strided=strided, **constexprs
        )
        key, values, _ = self.binder.bind_device(args, constexprs, num_warps, num_stages, strided)
        grid3 = as_grid3(grid, {**constexprs, "num_warps": key[0], "num_stages": key[1]})
        entry, device = self._entry(key), launch.get_device()
        run = self.binder.direct(entry, grid3, device, tuple(args), key, checked, launcher, values)
        return launcher if run is None else run

    def _specialization(
        self,
        key: tuple,
        target: Target | str | None = None,
        codegen: switches.CodegenSwitches | None = None,
    ) -> Specialization:
        """The specialisation of ``key`` for ``target`` (else the module's, else the device's)
        under the code-changing switches ``codegen`` (None: the environment's now): memoised
        per ``(*key, arch, switches)``, so each target and each switch setting builds its own.
        Whether the kernel asks for Hopper features (has dot()) depends on the key only, so
        after the first build the device's target is known without lowering again."""
        chosen = Target.of(target) if target is not None else self.module.target
        codegen = switches.codegen() if codegen is None else codegen
        if chosen is None:
            hopper = self._hopper.get(key)
            if hopper is not None:
                chosen = launch.device_target(hopper_features=hopper)
        if chosen is not None:
            spec = self._specs.get(key + (chosen.arch, codegen))
            if spec is not None:
                return spec
        unit, debug = self.module.unit, self.module.debug
        tma = self.pipeline_tma or self.module.pipeline_tma
        spec = specialise(unit, self.name, self.binder, key, chosen, debug, tma, codegen)
        self._hopper[key] = spec.hopper_features
        self._specs[spec.cache_key] = spec
        return spec

    def specialize(
        self,
        *args,
        num_warps: int = 4,
        num_stages: int = 2,
        target: Target | str | None = None,
        strided: bool = False,
        **constexprs,
    ) -> Specialization:
        """Compile (without launching) for these arguments: arrays, or dtype names for pointers.
        ``target`` (a :class:`Target` or a name such as ``"sm_90a"``) overrides the module's."""
        key = self.binder.bind_host(args, constexprs, num_warps, True, num_stages, strided)
        return self._specialization(key, target)

    def cuda_source(
        self,
        *args,
        num_warps: int = 4,
        num_stages: int = 2,
        target: Target | str | None = None,
        strided: bool = False,
        **constexprs,
    ) -> str:
        """The CUDA C++ this kernel becomes for these arguments (arrays or dtype names)."""
        spec = self.specialize(
            *args,
            num_warps=num_warps,
            num_stages=num_stages,
            target=target,
            strided=strided,
            **constexprs,
        )
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
        def run(
            *args,
            num_warps: int = 4,
            num_stages: int = 2,
            stream: Any = None,
            strided: bool = False,
            arrays: Sequence[Any] = (),
            **constexprs,
        ) -> None:
            """As a GPU launch; ``stream`` is accepted and ignored (the interpreter runs at once),
            so one call can switch backends. ``arrays``: the arrays that the addresses of a
            table of pointers (``(const f16 *)load(table + g)``) point into, beside the
            pointer arguments (an address in none of them is an error at the kernel line)."""
            k = self.kernel
            key = k.binder.bind_host(
                args, constexprs, num_warps, num_stages=num_stages, strided=strided
            )
            grid3 = as_grid3(grid, {**constexprs, "num_warps": key[0], "num_stages": key[1]})
            spec = dataclasses.replace(k.binder.spec(key), debug=k.module.debug)
            ir_kernel = build_kernel(k.module.unit, k.name, spec)
            from . import interp

            interp.run(
                ir_kernel,
                grid3,
                {p.name: a for p, a in zip(ir_kernel.runtime_params, args, strict=True)},
                arrays,
            )

        return run


class Module:
    """The kernels of one file: ``module.<kernel name>`` is a :class:`Kernel`. ``target``: what
    its specialisations compile for (None: each for the device: ``launch.device_target``).
    ``pipeline_tma`` (set before its first specialisation): pipelined loads by TMA where they
    can be, for every kernel (one kernel's: :attr:`Kernel.tma`)."""

    def __init__(self, unit: Unit, debug: bool = False, target: Target | None = None):
        self.unit = unit
        self.debug = debug
        self.target = target
        self.pipeline_tma = False
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

    def _repr_html_(self) -> str:
        return display.module_html(self)

    def _repr_markdown_(self) -> str:
        return display.module_markdown(self)


def compile(  # noqa: A001
    source: str | os.PathLike,
    name: str | None = None,
    debug: bool | None = None,
    target: Target | str | None = None,
) -> Module:
    """Parse a kernel file (a path) or kernel text (a string with a newline, or one that names
    no file); ``name`` is what errors and ``#line`` directives call it. ``debug`` compiles
    device_print and device_assert in (default: the TEENY_TX_DEBUG environment variable).
    ``target`` (a :class:`Target` or a name such as ``"sm_90a"``) is what the module compiles
    for; default: ``$TEENY_TX_ARCH`` as it is now (read here, once), else the device's.

    Specialisations are checked and compiled at their first launch or ``cuda_source`` call.
    """
    is_path = isinstance(source, os.PathLike) or (
        "\n" not in source and (name is None or os.path.exists(source))
    )
    if is_path:
        filename = name or str(source)
        text = read_kernel_file(source, filename)
    else:
        text, filename = str(source), name or "<string>"
    unit = parse(text, filename)
    if not unit.kernels():
        own = [f for f in unit.functions.values() if f.decl.coord.file == filename]
        first = own[0] if own else None  # where a `kernel` was expected
        raise CompileError(
            f"{filename} defines no kernel",
            unit.loc(first.decl) if first is not None else unit.start_loc(),
            "an entry point is declared `kernel name(params) { ... }`",
        )
    if debug is None:
        debug = bool(switches.read("DEBUG"))
    return Module(unit, debug, Target.of(target) if target is not None else Target.from_env())
