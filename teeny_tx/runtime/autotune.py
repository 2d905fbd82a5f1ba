"""Autotuning: launch the fastest of a kernel's configs, chosen once per key and remembered.

Input: a :class:`~teeny_tx.kernel.Kernel`, its configs (values of its constexprs — tile sizes —
with ``num_warps`` and ``num_stages``) and its key (the runtime parameters whose values decide
which config is best), declared by ``#pragma autotune`` lines before the kernel
(``parse/pragmas.py``) or given in Python; then, per launch, the kernel's arguments. Output:
the launch of the chosen config, and a printable account of the choice.

A key entry ``pow2(n_rows)`` counts the bucket of an integer's value (the next power of two, 0
for 0) instead of the value (:data:`BUCKETS`): a row kernel tuned at 5000 rows serves 4097 to
8192 rows, and 64 rows get their own choice.

The first launch for a key (the key's argument values or buckets, the dtypes of all pointer
arguments, the other constexprs and the device) prunes the configs statically — the ``prune``
hook, a :class:`~teeny_tx.errors.ResourceError` for shared memory when specialising, register
spills (ptxas's report, or the cubin's register count and stack frame when the cubin came from
the cache) — then times the others with CUDA events on the launch's stream (``warmup``
launches, then the median of ``rep``) and keeps the fastest: in memory, and as JSON under
``<cache dir>/autotune/`` (the cubin cache's directory), so a new process launches the winner
without timing. The file's key covers the kernel file's text, the kernel, the prelude, NVRTC,
the target, the device, the key's values and the list of configs: changing any re-tunes.

``TEENY_TX_AUTOTUNE_PRINT=1`` prints each choice (stderr) when a process first makes or reads
it; :meth:`Autotuner.describe` returns the same lines. ``tuner.interpret[grid](...)`` runs the
first config that survives the prune hook and the shared-memory check on the interpreter,
without timing.
"""

from __future__ import annotations

import difflib
import functools
import hashlib
import json
import os
import re
import statistics
import sys
import threading
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import switches
from .._prelude import PRELUDE_SHA256
from ..dtypes import from_numpy
from ..errors import (
    CompileError,
    LaunchError,
    Location,
    RegisterSpillWarning,
    ResourceError,
    TeenyError,
)
from ..parse.pragmas import AutotuneDecl
from ..progress import Progress
from . import cache, launch, nvrtc
from .elf import cubin_resources
from .files import atomic_write
from .grid import as_grid3
from .memory import device_pointer
from .streams import torch_stream

if TYPE_CHECKING:
    from ..kernel import Kernel, Specialization

# Bump when the cache file's recipe or contents change, so old files are never read.
AUTOTUNE_FORMAT = 1
OPTIONS = ("num_warps", "num_stages")
# Spills up to this many bytes per thread are kept: a few bytes of local memory (L1-resident)
# cost less than a smaller tile (measured on the H200: the 128x256 wgmma matmul spills 4-8
# bytes and is the fastest config at 8192^3); larger spills prune the config.
SPILL_TOLERANCE = 32

Timer = Callable[["Config", Callable[[], None]], float]


def pow2_bucket(n: int) -> int:
    """The next power of two >= n (0 for n <= 0): the bucket ``pow2(name)`` keys on."""
    return 1 << (n - 1).bit_length() if n > 0 else 0


# The buckets a key entry ``bucket(name)`` may name: each maps an integer argument to the value
# the key holds.
BUCKETS: Mapping[str, Callable[[int], int]] = MappingProxyType({"pow2": pow2_bucket})
_BUCKETED = re.compile(r"\s*([A-Za-z_]\w*)\s*\(\s*([A-Za-z_]\w*)\s*\)\s*")


def key_entry(entry: str) -> tuple[str, str | None]:
    """(parameter, bucket) of a key entry: ``"n"`` -> ("n", None), ``"pow2(n)"`` ->
    ("n", "pow2")."""
    m = _BUCKETED.fullmatch(entry)
    return (m.group(2), m.group(1)) if m else (entry, None)


@dataclass(frozen=True)
class Config:
    """One candidate launch: constexpr values (``kwargs``), ``num_warps`` and ``num_stages``.

    ``str()`` gives ``BM=128, BN=256, BK=64, num_warps=8, num_stages=3``; ``repr()`` wraps it
    in ``Config(...)``."""

    kwargs: Mapping[str, Any]
    num_warps: int = 4
    num_stages: int = 2

    def __post_init__(self) -> None:
        object.__setattr__(self, "kwargs", MappingProxyType(dict(self.kwargs)))

    def __hash__(self) -> int:
        return hash((tuple(sorted(self.kwargs.items())), self.num_warps, self.num_stages))

    def __str__(self) -> str:
        settings = [f"{k}={v}" for k, v in self.kwargs.items()]
        return ", ".join(
            settings + [f"num_warps={self.num_warps}", f"num_stages={self.num_stages}"]
        )

    def __repr__(self) -> str:
        return f"Config({self})"

    def __reduce__(self) -> tuple:  # pickle and deepcopy (a mappingproxy does neither)
        return Config, (dict(self.kwargs), self.num_warps, self.num_stages)

    def to_json(self) -> dict:
        return {
            "kwargs": dict(self.kwargs),
            "num_warps": self.num_warps,
            "num_stages": self.num_stages,
        }


@dataclass(frozen=True)
class Choice:
    """The config chosen for one key, and how: its median time (None when it was the only
    config left, so nothing was timed), how many configs were timed, and why others were not."""

    config: Config
    ms: float | None
    timed: int
    total: int
    pruned: tuple[str, ...]  # "<config>: <reason>"
    cached: bool = False  # read from the disk cache rather than timed by this process

    def describe(self) -> str:
        when = f"{self.ms:.3f} ms" if self.ms is not None else "not timed: the only config left"
        counts = f"{self.timed} of {self.total} configs timed"
        if self.pruned:
            counts += f", {len(self.pruned)} pruned: {'; '.join(self.pruned)}"
        if self.cached:
            counts += "; from the disk cache"
        return f"{self.config} ({when}; {counts})"


class Autotuner:
    """``tuner[grid](*args, stream=None, **constexprs)`` launches ``kernel`` with the best of
    ``configs`` for these arguments (tuning on the first launch of each key).

    ``key`` names runtime parameters: integers (their values count, or their buckets for an
    entry ``"pow2(n)"``) or pointers (their dtypes count; the dtypes of all pointers always
    count). ``prune(config, args)`` returns True to
    drop a config before it is compiled. ``timer(config, launch)`` returns milliseconds; the
    default times ``launch`` with CUDA events (``warmup`` runs, then the median of ``rep``,
    each after a flush of the L2 cache unless ``flush_l2`` is False).
    ``grid`` may be a callable of the meta dict: the runtime arguments by name, the config's
    values, the other constexprs, ``num_warps`` and ``num_stages``.
    """

    def __init__(
        self,
        kernel: Kernel,
        configs: Iterable[Config],
        key: Sequence[str] = (),
        prune: Callable[[Config, tuple], bool] | None = None,
        warmup: int = 5,
        rep: int = 20,
        timer: Timer | None = None,
        flush_l2: bool = True,
    ):
        self.kernel = kernel
        self.flush_l2 = flush_l2
        self.configs = tuple(configs)
        self.key = tuple(key)
        self.prune = prune
        self.warmup, self.rep = warmup, rep
        self.timer = timer
        if not self.configs:
            raise LaunchError(f"the autotuner of kernel {kernel.name} has no config")
        for c in self.configs:
            if not isinstance(c, Config):
                raise LaunchError(f"autotuner configs must be teeny_tx.Config, got {c!r}")
            for name, value in c.kwargs.items():
                check_setting(kernel, name, value)
            check_setting(kernel, "num_warps", c.num_warps)
            check_setting(kernel, "num_stages", c.num_stages)
        entries = [key_entry(e) for e in self.key]
        for name, bucket in entries:
            check_key(kernel, name, bucket=bucket)
        names = [name for name, _ in entries]
        if len(set(names)) != len(names):
            raise LaunchError(f"the autotune key {list(self.key)} names a parameter twice")
        runtime = kernel.binder.runtime
        slots = {p.name: i for i, p in enumerate(runtime)}
        self._key_slots = tuple(
            (slots[n], runtime[slots[n]].kind == "pointer", BUCKETS[b] if b else None)
            for n, b in entries
        )
        self._dtype_slots = tuple(
            i
            for i, p in enumerate(runtime)
            if p.kind == "pointer" and p.dtype is None and p.name not in names
        )
        self._tuned_names = frozenset(n for c in self.configs for n in c.kwargs) | set(OPTIONS)
        self._chosen: dict[tuple, Choice] = {}
        self._tuning: dict[tuple, threading.Lock] = {}  # one tuning per key across threads
        self._tuning_lock = threading.Lock()
        self._first: dict[tuple, Config] = {}  # the interpreter's choice, per key
        self._devices: dict[int, str] = {}

    def __repr__(self) -> str:
        return (
            f"<teeny_tx autotuner of {self.kernel.name}: key({', '.join(self.key)}), "
            f"{len(self.configs)} configs>"
        )

    def __getitem__(self, grid: Any) -> TunedLaunch:
        return TunedLaunch(self, grid)

    @property
    def interpret(self) -> _TunedInterpret:
        """``tuner.interpret[grid](*numpy_arrays, **constexprs)``: the first config that survives
        the prune hook and the shared-memory check, on the NumPy interpreter (no timing)."""
        return _TunedInterpret(self)

    def best(self, *args, **constexprs) -> Config:
        """The config chosen for these arguments, tuning first if no choice is known: that
        needs a custom ``timer``, or the grid (``tuner[grid].best(...)``)."""
        return self[None].best(*args, **constexprs)

    def describe(self, *args, **constexprs) -> str:
        """``kernel[key values]: config (time; timed, pruned)`` for these arguments (tuning
        first if needed, as :meth:`best`), or one line per key chosen so far without them."""
        if args:
            key = self._key(args, constexprs)
            choice = self._chosen.get(key) or self._choose(key, args, constexprs, None, None)
            return self._line(key, choice)
        return "\n".join(self._line(key, choice) for key, choice in self._chosen.items())

    # ------------------------------------------------------------ the key

    def _key(self, args: tuple, constexprs: dict) -> tuple:
        runtime = self.kernel.binder.runtime
        if len(args) != len(runtime):
            names = ", ".join(p.name for p in runtime)
            raise LaunchError(
                f"{self.kernel.name}() takes {len(runtime)} positional arguments ({names}), "
                f"got {len(args)}"
            )
        if constexprs and not self._tuned_names.isdisjoint(constexprs):
            taken = sorted(self._tuned_names.intersection(constexprs))
            raise LaunchError(
                f"{', '.join(taken)} of kernel {self.kernel.name} "
                f"{'is' if len(taken) == 1 else 'are'} chosen by its autotuner's configs; "
                "do not pass them to a tuned launch"
            )
        values = tuple(
            _dtype_name(args[i], runtime[i].name)
            if pointer
            else _integer(args[i], runtime[i])
            if bucket is None
            else bucket(_integer(args[i], runtime[i]))
            for i, pointer, bucket in self._key_slots
        )
        dtypes = tuple(_dtype_name(args[i], runtime[i].name) for i in self._dtype_slots)
        extra = tuple(sorted(constexprs.items())) if constexprs else ()
        device = launch.get_device() if launch.has_gpu() else -1
        return values, dtypes, extra, device

    def _line(self, key: tuple, choice: Choice) -> str:
        values, _, extra, _ = key
        shown = [f"{n}={v}" for n, v in zip(self.key, values, strict=True)]
        shown += [f"{n}={v}" for n, v in extra]
        return f"{self.kernel.name}[{', '.join(shown)}]: {choice.describe()}"

    # ------------------------------------------------------------ choosing

    def _choose(
        self,
        key: tuple,
        args: tuple,
        constexprs: dict,
        grid: Any,
        stream: Any,
        strided: bool = False,
    ) -> Choice:
        """The choice for ``key``: known, read from its record, or tuned now. Threads asking
        for one key at once wait for one tuning (a lock per key), not one each."""
        with self._tuning_lock:
            lock = self._tuning.setdefault(key, threading.Lock())
        with lock:
            known = self._chosen.get(key)
            if known is not None:
                return known
            path = self._cache_path(key)
            choice = _read(path, self.configs) if path is not None else None
            if choice is not None and path is not None:
                # a record names a config the checks of today may prune (a new device limit,
                # another spill report): re-checked before it is used, else a re-tune
                problem = self._static_problem(choice.config, args, constexprs, True)
                if problem:
                    _warn_record(path, f"names {choice.config}, which is pruned now: {problem}")
                    choice = None
            if choice is None:
                choice = self._tune(args, constexprs, grid, stream, strided)
                if path is not None:
                    _write(path, self._record(key, choice))
            self._chosen[key] = choice
        if switches.read("AUTOTUNE_PRINT"):
            print(self._line(key, choice), file=sys.stderr)
        return choice

    def _tune(
        self, args: tuple, constexprs: dict, grid: Any, stream: Any, strided: bool = False
    ) -> Choice:
        survivors, pruned = [], []
        problems = self._static_problems(args, constexprs, strided)
        for c, reason in zip(self.configs, problems, strict=True):
            if reason:
                pruned.append(f"{c}: {reason}")
            else:
                survivors.append(c)
        total = len(self.configs)
        if len(survivors) == 1:
            return Choice(survivors[0], None, 0, total, tuple(pruned))
        timed = []
        if survivors:
            if self.timer is None and grid is None:
                raise LaunchError(
                    f"tuning kernel {self.kernel.name} times launches, which need the grid: "
                    "call tuner[grid](...) or tuner[grid].best(...)"
                )
            if stream is None:  # time where the inputs were made: torch's stream for tensors
                stream = _torch_stream(args)
            timer = self.timer or self._event_timer(stream)
            meter = Progress(len(survivors), f"autotune {self.kernel.name}")
            for c in survivors:
                try:
                    run = functools.partial(
                        self._launch, c, grid, args, constexprs, stream, strided
                    )
                    ms = timer(c, run)
                except ResourceError as err:  # the device allows less than the target
                    pruned.append(f"{c}: {_shared_reason(err)}")
                    meter.step(f"{c}: pruned")
                    continue
                except LaunchError as err:  # the arguments passed specialize: out of resources
                    pruned.append(f"{c}: {err}")
                    meter.step(f"{c}: pruned")
                    continue
                timed.append((ms, c))
                fastest = min(timed, key=lambda t: t[0])
                meter.step(f"{c}: {ms:.4f} ms; best {fastest[1]} {fastest[0]:.4f} ms")
            meter.close()
        if not timed:
            raise LaunchError(
                f"every autotune config of kernel {self.kernel.name} was pruned:\n  "
                + "\n  ".join(pruned)
            )
        ms, best = min(timed, key=lambda t: t[0])
        return Choice(best, float(ms), len(timed), total, tuple(pruned))

    def _specialize(
        self, c: Config, args: tuple, constexprs: dict, strided: bool = False
    ) -> Specialization:
        return self.kernel.specialize(
            *args,
            num_warps=c.num_warps,
            num_stages=c.num_stages,
            strided=strided,
            **c.kwargs,
            **constexprs,
        )

    def _static_problem(
        self, c: Config, args: tuple, constexprs: dict, compile_cubin: bool
    ) -> str | None:
        """Why ``c`` cannot be a good launch for ``args`` (None: it can)."""
        if self.prune is not None and self.prune(c, args):
            return "dropped by the prune hook"
        try:
            spec = self._specialize(c, args, constexprs)
        except ResourceError as err:
            return _shared_reason(err)
        except CompileError:
            if compile_cubin:
                raise
            return None  # the CUDA path refuses it; the interpreter reports its own errors
        return _register_problem(spec) if compile_cubin else None

    def _static_problems(
        self, args: tuple, constexprs: dict, strided: bool = False
    ) -> list[str | None]:
        """Why each config cannot be a good launch (None: it can), its cubin compiled.

        Specialising (parse, lower, emit: Python) runs config after config; NVRTC, which
        releases the GIL, compiles the cubins on a pool of ``compile_workers()`` threads, the
        ptxas spill report of each kept for that config."""
        specs: list[Specialization | None] = []
        problems: list[str | None] = []
        for c in self.configs:
            if self.prune is not None and self.prune(c, args):
                problems.append("dropped by the prune hook")
                specs.append(None)
                continue
            try:
                specs.append(self._specialize(c, args, constexprs, strided))
                problems.append(None)
            except ResourceError as err:
                problems.append(_shared_reason(err))
                specs.append(None)
        reports = compile_cubins(specs)
        return [
            problem if spec is None else _register_problem(spec, reports.get(i))
            for i, (spec, problem) in enumerate(zip(specs, problems, strict=True))
        ]

    def _launch(
        self,
        c: Config,
        grid: Any,
        args: tuple,
        constexprs: dict,
        stream: Any,
        strided: bool = False,
    ) -> None:
        if grid is None:
            raise LaunchError(f"launching kernel {self.kernel.name} needs a grid: tuner[grid]")
        if callable(grid):
            grid = as_grid3(grid, self._meta(c, args, constexprs))
        self.kernel[grid](
            *args,
            num_warps=c.num_warps,
            num_stages=c.num_stages,
            stream=stream,
            strided=strided,
            **c.kwargs,
            **constexprs,
        )

    def _meta(self, c: Config, args: tuple, constexprs: dict) -> dict[str, Any]:
        names = (p.name for p in self.kernel.binder.runtime)
        return {
            **dict(zip(names, args, strict=True)),
            **c.kwargs,
            **constexprs,
            "num_warps": c.num_warps,
            "num_stages": c.num_stages,
        }

    def _event_timer(self, stream: Any) -> Timer:
        """Median milliseconds of ``rep`` launches (after ``warmup``), by CUDA events on the
        launches' stream: the one given, else torch's current stream for torch tensors, else
        CuPy's current stream. With ``flush_l2`` each timed launch follows a memset of twice
        the device's L2 cache (Triton's do_bench does the same with 256 MB), so a config is
        timed reading its inputs from memory, as the benchmarks and a model's first touch of
        a tensor do, not from an L2 that the previous launch filled (measured on the H200: a
        norm at 8192 x 1024 fp16, 32 MB of inputs, fits the 50 MB L2, and the config fastest
        from L2 was 0.63x Triton from memory)."""
        import cupy

        flush = None
        if self.flush_l2:
            l2 = cupy.cuda.Device().attributes.get("L2CacheSize", 0)
            flush = cupy.empty(2 * l2 if l2 else 256 << 20, dtype=cupy.uint8)

        def timer(config: Config, run: Callable[[], None]) -> float:
            events = (
                launch.convert_stream(stream)
                if stream is not None
                else cupy.cuda.get_current_stream()
            )
            for _ in range(self.warmup):
                run()
            start, end = cupy.cuda.Event(), cupy.cuda.Event()
            times = []
            for _ in range(max(self.rep, 1)):
                if flush is not None:
                    cupy.cuda.runtime.memsetAsync(flush.data.ptr, 0, flush.nbytes, events.ptr)
                start.record(events)
                run()
                end.record(events)
                end.synchronize()
                times.append(cupy.cuda.get_elapsed_time(start, end))
            return statistics.median(times)

        return timer

    # ------------------------------------------------------------ the disk cache

    def _device(self, index: int) -> str:
        """The device a choice was made on: name and compute capability, and the target."""
        text = self._devices.get(index)
        if text is None:
            if index < 0:
                text = "no GPU"
            else:
                limits = launch.device_limits(index)
                text = f"{limits.name} (sm_{limits.capability[0]}{limits.capability[1]})"
            target = self.kernel.module.target or launch.device_target()
            text = self._devices[index] = f"{text}, target {target.arch}"
        return text

    def _cache_path(self, key: tuple) -> Path | None:
        values, dtypes, extra, device = key
        unit = self.kernel.module.unit
        recipe = [
            AUTOTUNE_FORMAT,
            hashlib.sha256(unit.text.encode()).hexdigest(),
            self.kernel.name,
            PRELUDE_SHA256,
            list(nvrtc.nvrtc_version()),
            self._device(device),
            [[n, _plain(v)] for n, v in zip(self.key, values, strict=True)],
            list(dtypes),
            [[n, _plain(v)] for n, v in extra],
            [str(c) for c in self.configs],
        ]
        digest = hashlib.sha256(json.dumps(recipe).encode()).hexdigest()
        try:
            directory = cache.cache_dir()
        except OSError:
            return None
        return directory / "autotune" / digest[:2] / f"{digest}.json"

    def _record(self, key: tuple, choice: Choice) -> dict:
        values, dtypes, extra, device = key
        return {
            "format": AUTOTUNE_FORMAT,
            "kernel": self.kernel.name,
            "file": self.kernel.module.unit.filename,
            "key": {n: _plain(v) for n, v in zip(self.key, values, strict=True)},
            "dtypes": list(dtypes),
            "constexprs": {n: _plain(v) for n, v in extra},
            "device": self._device(device),
            "config": choice.config.to_json(),
            "ms": choice.ms,
            "timed": choice.timed,
            "total": choice.total,
            "pruned": list(choice.pruned),
        }


class TunedLaunch:
    """``tuner[grid]``: call it to launch the chosen config; ``best`` only chooses."""

    def __init__(self, tuner: Autotuner, grid: Any):
        self.tuner = tuner
        self.grid = grid
        if grid is not None and not callable(grid):
            as_grid3(grid, {})  # a bad fixed grid fails here, as kernel[grid] does

    def __call__(self, *args, stream: Any = None, strided: bool = False, **constexprs) -> None:
        """Launch the chosen config; ``strided`` as a kernel launch's (views passed as they
        are), for the timing launches too."""
        tuner = self.tuner
        key = tuner._key(args, constexprs)
        choice = tuner._chosen.get(key) or tuner._choose(
            key, args, constexprs, self.grid, stream, strided
        )
        tuner._launch(choice.config, self.grid, args, constexprs, stream, strided)

    def best(self, *args, stream: Any = None, strided: bool = False, **constexprs) -> Config:
        """The config for these arguments: known, read from the disk cache, or tuned now."""
        tuner = self.tuner
        key = tuner._key(args, constexprs)
        choice = tuner._chosen.get(key) or tuner._choose(
            key, args, constexprs, self.grid, stream, strided
        )
        return choice.config


class _TunedInterpret:
    def __init__(self, tuner: Autotuner):
        self.tuner = tuner

    def __getitem__(self, grid: Any) -> Callable[..., None]:
        def run(*args, **constexprs) -> None:
            tuner = self.tuner
            key = tuner._key(args, constexprs)[:3]
            config = tuner._first.get(key)
            if config is None:
                config = tuner._first[key] = self.first(args, constexprs)
            launch_grid = as_grid3(grid, tuner._meta(config, args, constexprs))
            tuner.kernel.interpret[launch_grid](
                *args,
                num_warps=config.num_warps,
                num_stages=config.num_stages,
                **config.kwargs,
                **constexprs,
            )

        return run

    def first(self, args: tuple, constexprs: dict) -> Config:
        pruned = []
        for c in self.tuner.configs:
            reason = self.tuner._static_problem(c, args, constexprs, compile_cubin=False)
            if reason is None:
                return c
            pruned.append(f"{c}: {reason}")
        raise LaunchError(
            f"every autotune config of kernel {self.tuner.kernel.name} was pruned:\n  "
            + "\n  ".join(pruned)
        )


# ---------------------------------------------------------------- declarations


def from_pragmas(kernel: Kernel, decl: AutotuneDecl) -> Autotuner:
    """The autotuner that a kernel's ``#pragma autotune`` lines declare; names are checked
    against the kernel's parameters here (CompileError at the pragma)."""
    for s in decl.key:
        check_key(kernel, s.name, s.loc, s.value)
    configs = []
    for c in decl.configs:
        options = {"num_warps": 4, "num_stages": 2}
        kwargs = {}
        for s in c.settings:
            check_setting(kernel, s.name, s.value, s.loc)
            if s.name in OPTIONS:
                options[s.name] = s.value
            else:
                kwargs[s.name] = s.value
        configs.append(Config(kwargs, **options))
    key = [f"{s.value}({s.name})" if s.value else s.name for s in decl.key]
    return Autotuner(kernel, configs, key=key)


def _error(message: str, loc: Location | None, hint: str | None = None) -> TeenyError:
    """A CompileError at a pragma, or a LaunchError for configs given in Python."""
    if loc is not None:
        return CompileError(message, loc, hint)
    return LaunchError(f"{message}; {hint}" if hint else message)


def check_key(
    kernel: Kernel, name: str, loc: Location | None = None, bucket: str | None = None
) -> None:
    if bucket is not None and bucket not in BUCKETS:
        raise _error(
            f"the autotune key buckets '{name}' by '{bucket}', which is not a bucket",
            loc,
            f"the buckets are {', '.join(BUCKETS)}: key({next(iter(BUCKETS))}({name}))",
        )
    params = {p.name: p for p in kernel.params}
    p = params.get(name)
    if p is None:
        close = difflib.get_close_matches(name, list(params), n=1)
        raise _error(
            f"the autotune key names '{name}', which is not a parameter of kernel {kernel.name}",
            loc,
            f"did you mean '{close[0]}'?" if close else "the key names runtime parameters",
        )
    if p.kind == "constexpr":
        raise _error(
            f"the autotune key names '{name}', a constexpr of kernel {kernel.name}",
            loc,
            "constexprs a config does not set are part of every key already; the key names "
            "runtime integer or pointer parameters",
        )
    if bucket is not None and p.kind != "scalar":
        raise _error(
            f"the autotune key buckets '{name}', a pointer of kernel {kernel.name}",
            loc,
            "a pointer's dtype counts, not a value: bucket integer parameters",
        )
    if p.kind == "scalar" and (p.dtype is None or not p.dtype.is_int):
        raise _error(
            f"the autotune key names '{name}', a {p.dtype} parameter",
            loc,
            "the key names runtime integer parameters (their values) or pointers (their dtypes)",
        )


def check_setting(kernel: Kernel, name: str, value: Any, loc: Location | None = None) -> None:
    if name == "num_warps":
        if type(value) is not int or value not in (1, 2, 4, 8, 16, 32):
            raise _error(f"num_warps must be 1, 2, 4, 8, 16 or 32, got {value!r}", loc)
        return
    if name == "num_stages":
        if type(value) is not int or not 1 <= value <= 8:
            raise _error(f"num_stages must be an int from 1 to 8, got {value!r}", loc)
        return
    constexprs = [p.name for p in kernel.params if p.kind == "constexpr"]
    if name not in constexprs:
        close = difflib.get_close_matches(name, constexprs + list(OPTIONS), n=1)
        raise _error(
            f"an autotune config sets '{name}', which is not a constexpr of kernel {kernel.name}",
            loc,
            f"did you mean '{close[0]}'?"
            if close
            else f"configs set constexprs ({', '.join(constexprs) or 'none'}), num_warps and "
            "num_stages",
        )
    if isinstance(value, str) or not isinstance(value, (int, float, bool, np.integer, np.floating)):
        raise _error(f"the config value of '{name}' must be a number, got {value!r}", loc)


# ---------------------------------------------------------------- helpers


def _dtype_name(a: Any, param: str) -> str:
    """The dtype name of a pointer argument: an array of any kind, or a dtype name."""
    if isinstance(a, str):
        return a
    if isinstance(a, np.ndarray):
        d = from_numpy(a.dtype)
        if d is None:
            raise LaunchError(f"argument '{param}': unsupported dtype {a.dtype}")
        return d.name
    return device_pointer(a, param)[1]


def _integer(a: Any, p: Any) -> int:
    if isinstance(a, (int, np.integer)) and not isinstance(a, bool):
        return int(a)
    raise LaunchError(f"argument '{p.name}' ({p.describe()}) must be an integer, got {a!r}")


def _plain(v: Any) -> Any:
    """A key value as JSON holds it (NumPy scalars become Python numbers)."""
    return v.item() if isinstance(v, np.generic) else v


def _torch_stream(args: tuple) -> int | None:
    """torch's current stream (a raw handle) when an argument is a torch CUDA tensor."""
    for a in args:
        kind = type(a)
        if kind.__name__ == "Tensor" and kind.__module__.startswith("torch") and a.is_cuda:
            return torch_stream(sys.modules["torch"], a.device.index)
    return None


def _shared_reason(err: ResourceError) -> str:
    if err.needed is not None and err.limit is not None:
        return f"shared memory {err.needed} > {err.limit} bytes"
    return str(err)


def compile_workers() -> int:
    """Threads that compile a tuner's configs: ``$TEENY_TX_COMPILE_THREADS``, else one per CPU
    (at most 16). 1 compiles them one after another."""
    threads = switches.read("COMPILE_THREADS")
    if threads is not None and threads >= 1:
        return int(threads)
    return max(1, min(16, os.cpu_count() or 1))


def compile_cubins(specs: list[Specialization | None]) -> dict[int, int]:
    """Compile the cubins of ``specs`` (None entries skipped) on a thread pool, in parallel
    when more than one needs NVRTC; returns the bytes each spilled (RegisterSpillWarning). A failed
    compile is left for the caller's ``spec.cubin`` to raise again, in order."""
    todo = [(i, spec) for i, spec in enumerate(specs) if spec is not None]
    workers = min(compile_workers(), len(todo))
    if workers <= 1:
        return {}
    local = threading.local()
    reports: dict[int, int] = {}
    others: list = []

    def show(message, category, filename, lineno, file=None, line=None):  # noqa: ANN001
        index = getattr(local, "index", None)
        if index is not None and issubclass(category, RegisterSpillWarning):
            reports[index] = message.spilled
        else:
            others.append((message, category, filename, lineno))

    def compile_one(item: tuple[int, Specialization]) -> None:
        local.index = item[0]
        try:
            _ = item[1].cubin  # compiled and memoised on the specialisation
        except Exception:  # noqa: BLE001 - raised again, in order, by the caller
            pass
        finally:
            local.index = None
            with done:  # one thread at a time on the meter's line
                meter.step(item[1].entry)

    done, meter = threading.Lock(), Progress(len(todo), f"NVRTC {workers} threads")
    with warnings.catch_warnings(), meter:
        warnings.simplefilter("always")
        warnings.showwarning = show
        with ThreadPoolExecutor(workers, thread_name_prefix="teeny_tx_nvrtc") as pool:
            list(pool.map(compile_one, todo))
    for message, category, filename, lineno in others:  # not ours to swallow
        warnings.warn_explicit(message, category, filename, lineno)
    return reports


def _register_problem(spec: Specialization, report: int | None = None) -> str | None:
    """Spills or too many registers: ptxas's report when this compile ran NVRTC (``report``:
    the bytes spilled when :func:`compile_cubins` compiled it), else what the cubin records (a
    cubin from the cache, or compiled earlier in this process)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cubin = spec.cubin
    spilled = report or 0  # from compile_cubins, when it compiled this one
    for w in caught:
        if isinstance(w.message, RegisterSpillWarning):
            spilled = w.message.spilled
        else:  # not ours to swallow
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    if spilled > SPILL_TOLERANCE:
        return f"spills {spilled} bytes per thread to local memory"
    registers, frame = cubin_resources(cubin)
    most = spec.target.max_registers_per_thread
    if registers > most:
        return f"needs {registers} registers per thread (at most {most})"
    cap = min(most, spec.target.registers_per_sm // spec.kernel.num_threads)
    if frame > SPILL_TOLERANCE and registers >= cap:
        return f"uses all {registers} registers and a {frame}-byte stack frame (spills)"
    return None


MAX_RECORD_BYTES = 1 << 20  # a winners record is a few hundred bytes


def _read(path: Path, configs: tuple[Config, ...]) -> Choice | None:
    """The choice a cache file holds, or None when it is missing, or (with a warning, once
    per file) damaged: not the schema of :meth:`Autotuner._record` (a JSON object of exactly
    these types, its config one of the tuner's), too large or too deeply nested to be one."""
    try:
        if path.stat().st_size > MAX_RECORD_BYTES:
            _warn_record(path, f"is larger than {MAX_RECORD_BYTES} bytes")
            return None
        text = path.read_text(encoding="utf-8")
    except OSError:
        return None  # no record (or an unreadable one): a miss
    try:
        record = json.loads(text)
    except (ValueError, RecursionError):
        _warn_record(path, "is not JSON (or nests too deeply)")
        return None
    problem = _record_problem(record)
    if problem:
        _warn_record(path, problem)
        return None
    if record["format"] != AUTOTUNE_FORMAT:
        return None  # an older format: a miss, not damage
    c = record["config"]
    config = Config(c["kwargs"], num_warps=c["num_warps"], num_stages=c["num_stages"])
    if config not in configs:
        return None  # the tuner's configs changed: a miss
    ms = record["ms"]
    return Choice(
        config,
        None if ms is None else float(ms),
        record["timed"],
        record["total"],
        tuple(record["pruned"]),
        cached=True,
    )


def _is_int(x: Any) -> bool:
    return type(x) is int


def _record_problem(record: Any) -> str | None:
    """What makes ``record`` not a winners record (None: it is one)."""
    if not isinstance(record, dict):
        return f"holds a {type(record).__name__}, not an object"
    need: dict[str, type | tuple[type, ...]] = {
        "format": int, "config": dict, "ms": (int, float, type(None)), "timed": int,
        "total": int, "pruned": list,
    }  # fmt: skip
    for name, kind in need.items():
        if name not in record:
            return f"has no {name!r}"
        value = record[name]
        if not isinstance(value, kind) or isinstance(value, bool):
            return f"has {name!r} of type {type(value).__name__}"
    c = record["config"]
    if not isinstance(c.get("kwargs"), dict) or not all(
        isinstance(k, str) and isinstance(v, int | float) for k, v in c["kwargs"].items()
    ):
        return "has a config whose kwargs are not names of integers"
    if not (_is_int(c.get("num_warps")) and _is_int(c.get("num_stages"))):
        return "has a config whose num_warps or num_stages is not an integer"
    if not all(isinstance(p, str) for p in record["pruned"]):
        return "has 'pruned' entries that are not text"
    ms = record["ms"]
    if ms is not None and not (0 <= ms < float("inf")):
        return f"has 'ms' = {ms!r}"
    if not (0 <= record["timed"] <= record["total"]):
        return "has 'timed' outside [0, total]"
    return None


_record_warned: set[Path] = set()


def _warn_record(path: Path, problem: str) -> None:
    if path not in _record_warned:
        _record_warned.add(path)
        warnings.warn(
            f"autotune record {path} {problem}: ignored, the kernel is tuned again",
            stacklevel=4,
        )


_warned: set[Path] = set()


def _write(path: Path, record: dict) -> None:
    """Write ``record`` atomically (a temporary file, then a rename), as the cubin cache does;
    a directory that cannot be written costs a warning and a re-tune in the next process."""
    try:
        atomic_write(path, json.dumps(record, indent=1, sort_keys=True).encode("utf-8"))
    except OSError as err:
        if path.parent not in _warned:
            _warned.add(path.parent)
            warnings.warn(
                f"teeny_tx cannot write its autotune cache in {path.parent} ({err}); "
                "kernels will be re-tuned in each process",
                RuntimeWarning,
                stacklevel=4,
            )
