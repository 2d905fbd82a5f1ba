"""``@teeny_tx.jit``: a Python function in Triton's spelling, launched as ``kernel[grid](...)``.

Input: a Python function (decorated) and, at each launch, its arguments. Output: launches of
the C text it translates to (``python_ast.translate``), compiled by ``teeny_tx.compile`` under
the Python file's name, so the C front end, the passes, the templates and NVRTC are the C
kernels' own and every coordinate names a Python line.

A launch binds the arguments by Python's rules (positional or keyword, defaults), classifies
each parameter (a tensor or array: ``any *``; an int, float or bool: an ``i32``, ``f32`` or
``bool`` scalar, or the type its annotation names; a ``tl.constexpr``: a ``const`` parameter
when it is a number, else a static value of the translation; None: static), translates once
per classification, and launches on the GPU when an argument lives there (torch CUDA tensors,
CuPy arrays), else on the NumPy interpreter (NumPy arrays, CPU torch tensors, whose memory
the interpreter writes in place). Pointers are passed as addresses of their first element, as
Triton does: kernels index strided views with the strides they are given.
"""

from __future__ import annotations

import ast
import functools
import inspect
from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import CompileError, LaunchError, TeenyError
from . import builtins as B
from .python_ast import NO, FunctionSource, Param, capture, translate

# launch options; ``arrays``: the arrays a table of pointers points into, for the interpreter
# (a GPU launch reads device addresses and ignores it)
OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg", "stream", "enable_fp_fusion", "arrays")
_SCALAR_NUMPY = {"i": "i32", "u": "u32", "f": "f32", "b": "bool"}


class JITFunction:
    """A ``@jit`` function: a kernel (``f[grid](*args)``) or a helper other kernels call."""

    def __init__(self, fn: Callable, **options: Any):
        self.fn = fn
        self.options = options
        functools.update_wrapper(self, fn)
        self.__name__: str = fn.__name__
        self.signature = inspect.signature(fn)
        self.arg_names = list(self.signature.parameters)
        self._source: FunctionSource | None = None
        self._programs: dict[tuple, Any] = {}  # classification -> (Program, Module)
        self._modules: dict[str, Any] = {}  # C text -> Module

    def __repr__(self) -> str:
        return f"<teeny_tx.jit {self.__name__}>"

    def _tx_source(self) -> FunctionSource:
        if self._source is None:
            self._source = capture(self.fn)
        return self._source

    @property
    def src(self) -> str:
        """The function's Python source."""
        return inspect.getsource(self.fn)

    @functools.cached_property
    def annotations(self) -> dict[str, str]:
        """Each annotated parameter's annotation, as written (``tl.constexpr``)."""
        args = self._tx_source().tree.args.args
        return {a.arg: ast.unparse(a.annotation) for a in args if a.annotation is not None}

    @functools.cached_property
    def constexpr_names(self) -> list[str]:
        return [n for n, text in self.annotations.items() if text.endswith("constexpr")]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise TeenyError(
            f"{self.__name__} is a @jit function: launch it as {self.__name__}[grid](...), or "
            "call it from another @jit function"
        )

    def __getitem__(self, grid: Any) -> Callable[..., None]:
        return lambda *args, **kwargs: self.run(*args, grid=grid, **kwargs)

    # ------------------------------------------------------------------ translation

    def bind(self, args: tuple, kwargs: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """(argument of each parameter, launch options) of a call."""
        options = {k: kwargs.pop(k) for k in list(kwargs) if k in OPTIONS}
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise LaunchError(f"{self.__name__}(): {exc}") from None
        bound.apply_defaults()
        values = {
            k: (v.value if isinstance(v, B.constexpr) else v) for k, v in bound.arguments.items()
        }
        return values, options

    def classify(self, values: dict[str, Any]) -> list[Param]:
        """How each parameter is passed, from its argument (see the module docstring)."""
        constexprs, annotations = self.constexpr_names, self.annotations
        return [
            classify_argument(name, values[name], name in constexprs, annotations.get(name))
            for name in self.arg_names
        ]

    def program(self, params: list[Param]) -> Any:
        """The translation for ``params`` (a Program), translated once per classification."""
        key = tuple((p.name, p.kind, p.ctype, _hashable(p.value), p.dtype) for p in params)
        entry = self._programs.get(key)
        if entry is None:
            program = translate(self, params)
            entry = self._programs[key] = (program, self._module(program))
        return entry

    def _module(self, program: Any) -> Any:
        from ..kernel import compile as tx_compile

        text = program.text()
        module = self._modules.get(text)
        if module is None:
            try:
                module = tx_compile(text, name=program.filename)
            except CompileError as err:
                raise program.remap(err) from None
            self._modules[text] = module
        return module

    def translate(self, *args: Any, **kwargs: Any) -> str:
        """The C text this function becomes for these arguments (arrays, or dtype names such
        as ``"f16"`` for pointers)."""
        values, _ = self.bind(args, dict(kwargs))
        return translate(self, self.classify(values)).text()

    def specialize(self, *args: Any, **kwargs: Any) -> Any:
        """The Specialization of these arguments (arrays or dtype names), compiled without a
        launch; ``num_warps``, ``num_stages`` and ``target`` as ``Kernel.specialize``."""
        target = kwargs.pop("target", None)
        values, options = self.bind(args, dict(kwargs))
        params = self.classify(values)
        program, module = self.program(params)
        runtime, constexprs = _split(params, values)
        kernel = getattr(module, self.__name__)
        opts = {k: options[k] for k in ("num_warps", "num_stages") if k in options}
        try:
            return kernel.specialize(*runtime, target=target, strided=True, **opts, **constexprs)
        except CompileError as err:
            raise program.remap(err) from None

    def cuda_source(self, *args: Any, **kwargs: Any) -> str:
        """The CUDA C++ of these arguments, ``#line`` directives naming the Python file."""
        return self.specialize(*args, **kwargs).cuda_source

    # ------------------------------------------------------------------ launch

    def run(self, *args: Any, grid: Any, **kwargs: Any) -> None:
        values, options = self.bind(args, dict(kwargs))
        params = self.classify(values)
        program, module = self.program(params)
        kernel = getattr(module, self.__name__)
        runtime, constexprs = _split(params, values)
        warps, stages = options.get("num_warps", 4), options.get("num_stages", 2)
        if callable(grid):
            grid = grid({**values, "num_warps": warps, "num_stages": stages})
        if isinstance(grid, int):
            grid = (grid,)
        grid = tuple(int(g) for g in grid)
        on_device = any(_on_device(v) for v in runtime)
        try:
            if on_device:
                launch = kernel[grid]
                stream = options.get("stream")
                launch(
                    *runtime,
                    num_warps=warps,
                    num_stages=stages,
                    stream=stream,
                    strided=True,
                    **constexprs,
                )
            else:
                host = [_host_array(v) for v in runtime]
                arrays = [_host_array(v) for v in options.get("arrays", ())]
                kernel.interpret[grid](
                    *host,
                    num_warps=warps,
                    num_stages=stages,
                    strided=True,
                    arrays=arrays,
                    **constexprs,
                )
        except CompileError as err:
            raise program.remap(err) from None


def jit(fn: Callable | None = None, **options: Any) -> Any:
    """Decorate a Python function written in Triton's spelling: ``@teeny_tx.jit`` (or
    ``@triton.jit`` through ``teeny_tx.triton``). Triton's options (``do_not_specialize``,
    ``debug``, ``noinline``) are accepted and ignored."""
    if fn is None:
        return lambda f: JITFunction(f, **options)
    return JITFunction(fn, **options)


# ---------------------------------------------------------------------- arguments


def classify_argument(name: str, value: Any, constexpr: bool, annotation: str | None) -> Param:
    if constexpr:
        if isinstance(value, (bool, np.bool_)):
            return Param(name, "constexpr", "bool", bool(value))
        if isinstance(value, (int, np.integer)):
            return Param(
                name, "constexpr", "i32" if -(2**31) <= value < 2**31 else "i64", int(value)
            )
        if isinstance(value, (float, np.floating)):
            return Param(name, "constexpr", "f32", float(value))
        return Param(name, "static", "", value)
    if value is None:
        return Param(name, "static", "", None)
    dtype = _pointer_dtype(value)
    if dtype is not None:
        return Param(name, "pointer", "any", NO, dtype)
    if annotation is not None:
        d = B.DTYPE_OBJECTS.get(annotation.rsplit(".", 1)[-1])
        if d is not None:
            return Param(name, "scalar", d.tx)
    if isinstance(value, (bool, np.bool_)):
        return Param(name, "scalar", "bool")
    if isinstance(value, int):
        return Param(name, "scalar", "i32" if -(2**31) <= value < 2**31 else "i64")
    if isinstance(value, float):
        return Param(name, "scalar", "f32")
    if isinstance(value, np.generic):
        from ..dtypes import from_numpy

        nd = from_numpy(value.dtype)
        if nd is not None:
            return Param(name, "scalar", nd.name)
    if isinstance(value, (str, tuple, B.DType)):
        return Param(name, "static", "", value)
    raise LaunchError(
        f"argument '{name}': {type(value).__name__} is neither a tensor, an array nor a number "
        "(mark a compile-time parameter `: tl.constexpr`)"
    )


def _pointer_dtype(value: Any) -> str | None:
    """The element dtype name of an array argument (or a dtype name standing for one)."""
    from ..dtypes import DTYPES, TORCH_NAMES, from_numpy

    if isinstance(value, str) and value in DTYPES:
        return value
    dtype = getattr(value, "dtype", None)
    if dtype is None or isinstance(value, np.generic):
        return None
    if hasattr(value, "data_ptr"):  # a torch tensor (CUDA ones have __cuda_array_interface__)
        return TORCH_NAMES.get(str(dtype).rsplit(".", 1)[-1])
    if isinstance(value, np.ndarray) or hasattr(value, "__cuda_array_interface__"):
        d = from_numpy(np.dtype(dtype))
        return d.name if d is not None else None
    return None


def _split(params: list[Param], values: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    runtime = [values[p.name] for p in params if p.kind in ("pointer", "scalar")]
    constexprs = {p.name: values[p.name] for p in params if p.kind == "constexpr"}
    return runtime, constexprs


def _on_device(value: Any) -> bool:
    if hasattr(value, "__cuda_array_interface__"):
        return True
    return bool(getattr(value, "is_cuda", False))


def _host_array(value: Any) -> Any:
    """A CPU torch tensor as a NumPy view of its memory (writes go through); else as is."""
    if hasattr(value, "data_ptr") and not isinstance(value, np.ndarray):
        import torch

        value = value.detach()  # the same memory, without autograd's refusal
        if value.dtype == torch.bfloat16:
            import ml_dtypes

            return value.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
        return value.numpy()
    return value


def _hashable(value: Any) -> Any:
    try:
        hash(value)
    except TypeError:
        return repr(value)
    return value
