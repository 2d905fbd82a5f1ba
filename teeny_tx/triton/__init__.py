"""``import teeny_tx.triton as triton``: Triton's host API over the Python front end.

Input: ``@triton.jit`` functions and Triton's launch idioms. Output: launches through
``teeny_tx.frontend``: ``triton.jit``, ``triton.cdiv``, ``triton.next_power_of_2``,
``@triton.autotune(configs=[triton.Config(...)], key=[...])``, ``@triton.heuristics``,
``triton.testing.do_bench`` (``testing.py``); ``teeny_tx.triton.language`` is ``tl``.

The autotuner times each config with ``do_bench`` on the GPU, once per value of its key; on
the interpreter (NumPy arrays, CPU tensors) timing means nothing, and the first config that
``prune_configs_by`` keeps is launched.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from typing import Any

from ..frontend.jit import JITFunction, jit
from ..runtime.grid import cdiv
from . import language, testing


def next_power_of_2(n: int) -> int:
    """The smallest power of two >= n (1 for n <= 1)."""
    n = int(n)
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


class Config:
    """A set of meta-parameters and launch options for the autotuner."""

    def __init__(
        self,
        kwargs: dict[str, Any],
        num_warps: int = 4,
        num_stages: int = 2,
        num_ctas: int = 1,
        maxnreg: int | None = None,
        pre_hook: Callable | None = None,
    ):
        self.kwargs = dict(kwargs)
        self.num_warps = num_warps
        self.num_stages = num_stages
        self.num_ctas = num_ctas
        self.maxnreg = maxnreg
        self.pre_hook = pre_hook

    def all_kwargs(self) -> dict[str, Any]:
        return {**self.kwargs, "num_warps": self.num_warps, "num_stages": self.num_stages}

    def __repr__(self) -> str:
        items = ", ".join(f"{k}: {v}" for k, v in self.kwargs.items())
        return f"Config({items}, num_warps: {self.num_warps}, num_stages: {self.num_stages})"


def _inner(fn: Any) -> JITFunction:
    while not isinstance(fn, JITFunction):
        fn = fn.fn
    return fn


class _Wrapper:
    """A launchable wrapper of a @jit function (autotuner, heuristics)."""

    fn: Any

    def run(self, *args: Any, grid: Any, **kwargs: Any) -> None:
        raise NotImplementedError

    def __getitem__(self, grid: Any) -> Callable[..., None]:
        return lambda *args, **kwargs: self.run(*args, grid=grid, **kwargs)

    @property
    def arg_names(self) -> list[str]:
        return _inner(self.fn).arg_names

    def named(self, args: tuple, kwargs: dict[str, Any]) -> dict[str, Any]:
        return {**dict(zip(self.arg_names, args, strict=False)), **kwargs}

    def translate(self, *args: Any, **kwargs: Any) -> str:
        return _inner(self.fn).translate(*args, **kwargs)


class Autotuner(_Wrapper):
    """``@triton.autotune``: the fastest config per value of ``key`` (see the docstring)."""

    def __init__(
        self,
        fn: Any,
        configs: list[Config],
        key: list[str],
        prune_configs_by: dict[str, Callable] | None = None,
        reset_to_zero: list[str] | None = None,
        restore_value: list[str] | None = None,
        warmup: int = 25,
        rep: int = 100,
        **_: Any,
    ):
        self.fn = fn
        self.configs = configs or [Config({})]
        self.key = list(key)
        self.prune = prune_configs_by or {}
        self.reset_to_zero = list(reset_to_zero or [])
        self.restore_value = list(restore_value or [])
        self.warmup, self.rep = warmup, rep
        self.cache: dict[tuple, Config] = {}
        self.best_config: Config | None = None

    def run(self, *args: Any, grid: Any, **kwargs: Any) -> None:
        named = self.named(args, kwargs)
        key = tuple(_key_value(named.get(k)) for k in self.key)
        config = self.cache.get(key)
        if config is None:
            configs = self.configs
            early = self.prune.get("early_config_prune")
            if early is not None:
                configs = list(early(configs, named)) or configs
            on_device = builtins.any(_jit_on_device(v) for v in named.values())
            if on_device and len(configs) > 1:
                times = [self._time(c, args, kwargs, grid, named) for c in configs]
                config = configs[min(range(len(configs)), key=times.__getitem__)]
            else:
                config = configs[0]
            self.cache[key] = config
        self.best_config = config
        self._launch(config, args, kwargs, grid)

    def _launch(self, config: Config, args: tuple, kwargs: dict, grid: Any) -> None:
        if config.pre_hook is not None:
            config.pre_hook({**self.named(args, kwargs), **config.all_kwargs()})
        self.fn.run(*args, grid=grid, **kwargs, **config.all_kwargs())

    def _time(self, config: Config, args: tuple, kwargs: dict, grid: Any, named: dict) -> float:
        saved = {n: named[n].clone() for n in self.restore_value if hasattr(named[n], "clone")}

        def once() -> None:
            for n in self.reset_to_zero:
                named[n].zero_()
            self._launch(config, args, kwargs, grid)

        try:
            ms = testing.do_bench(once, warmup=self.warmup, rep=self.rep)
        except Exception:  # a config that does not compile or launch is skipped
            ms = float("inf")
        for n, v in saved.items():
            named[n].copy_(v)
        return ms


class Heuristics(_Wrapper):
    """``@triton.heuristics({"NAME": lambda args: ...})``: meta-parameters from the arguments."""

    def __init__(self, fn: Any, values: dict[str, Callable[[dict], Any]]):
        self.fn = fn
        self.values = values

    def run(self, *args: Any, grid: Any, **kwargs: Any) -> None:
        named = self.named(args, kwargs)
        for name, rule in self.values.items():
            kwargs[name] = rule(named)
            named[name] = kwargs[name]
        self.fn.run(*args, grid=grid, **kwargs)


def autotune(configs: list[Config], key: list[str], **options: Any) -> Callable[[Any], Autotuner]:
    """Triton's ``@triton.autotune`` decorator."""
    return lambda fn: Autotuner(fn, configs, key, **options)


def heuristics(values: dict[str, Callable[[dict], Any]]) -> Callable[[Any], Heuristics]:
    """Triton's ``@triton.heuristics`` decorator."""
    return lambda fn: Heuristics(fn, values)


def _key_value(v: Any) -> Any:
    dtype = getattr(v, "dtype", None)
    if dtype is not None and hasattr(v, "shape"):
        return str(dtype)
    return v


def _jit_on_device(v: Any) -> bool:
    return hasattr(v, "__cuda_array_interface__") or bool(getattr(v, "is_cuda", False))


__all__ = [
    "Autotuner",
    "Config",
    "Heuristics",
    "JITFunction",
    "autotune",
    "cdiv",
    "heuristics",
    "jit",
    "language",
    "next_power_of_2",
    "testing",
]
