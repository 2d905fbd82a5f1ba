"""Launch arguments → a specialisation key, the launch values, and the per-signature launcher.

Input: a kernel's :class:`~teeny_tx.lower.signature.ParamSpec` list and the positional
arguments, constexpr keywords, ``num_warps``, ``num_stages`` and ``strided`` of a call. Output:
the key (a printable tuple: ``num_warps``, ``num_stages``, pointer dtypes and alignments, per
integer argument 1 / 16 / None — equal to 1, divisible by 16, neither —, constexpr values,
32/64-bit indices) and the launch values in parameter order (device addresses and numbers).

One binder serves every use: a GPU launch (device arrays), the interpreter (NumPy arrays) and
``cuda_source`` (arrays or dtype names). Every mistake raises
:class:`~teeny_tx.errors.LaunchError` naming the parameter. The rules, the same on every path:

- a pointer argument is an array of the declared dtype whose address is a multiple of its
  element size; the kernel gets the address of its first element. A non-contiguous view
  (row gaps, transposes, steps, negative strides) is refused unless the launch says
  ``strided=True`` — the caller's promise that the kernel indexes it with strides it is given;
  a contiguous one is never read wrongly;
- a runtime scalar is a number of the declared kind in the declared range (``bool``: True or
  False; integers: int or NumPy integers; floats: any real number that fits the type);
- a constexpr is checked against its declared type the same way, and must be finite;
- ``num_warps`` is 1, 2, 4, 8, 16 or 32 and ``num_stages`` 1..8 (ints or NumPy integers).

The GPU launch is one generated function per kernel (:meth:`Binder.launcher`): it reads each
argument's type, dtype, address low bits and size (attribute reads only), forms a *signature*
tuple that decides the key, and looks the prepared launch up by it. A signature seen before was
checked in full on its first call, so the hot path checks only what can differ between calls
with one signature (contiguity, device memory, scalar ranges — the last by ``struct`` packing,
which refuses out-of-range values, and an explicit test for f32, which it would pack as inf).
Anything unusual goes to the full checks.
"""

from __future__ import annotations

import functools
import keyword
import math
import struct
import threading
from collections.abc import Callable
from typing import Any

import cupy
import ml_dtypes
import numpy as np

from ..dtypes import DTYPES, DType, from_numpy
from ..errors import CompileError, LaunchError
from ..lower.build.signature import ParamSpec, Spec
from . import launch as _launch
from . import plan as _plan
from .memory import (
    TORCH_TENSOR,
    device_pointer,
    extent_bytes,
    is_contiguous,
    span_bytes,
)
from .plan import Entry

_CupyArray = cupy.ndarray

INDEX_LIMIT = 2**31 - 1
MAX_STAGES = 8
WARPS = (1, 2, 4, 8, 16, 32)
LAUNCH_OPTIONS = ("num_warps", "num_stages", "stream", "strided")
_ALIGN = tuple(16 if low == 0 else low & -low for low in range(16))
# struct codes of launch values: one per dtype, native alignment (the kernel's parameter block
# is laid out like a C struct of its parameters); bf16 travels as its 16 bits.
_CODES = {
    "bool": "?",
    "i8": "b",
    "i16": "h",
    "i32": "i",
    "i64": "q",
    "u8": "B",
    "u16": "H",
    "u32": "I",
    "u64": "Q",
    "f16": "e",
    "bf16": "H",
    "f32": "f",
    "f64": "d",
}
_PACK_ERRORS = (struct.error, OverflowError, TypeError, ValueError)


class _Missing:
    """The default of a launcher's parameters: an argument not given."""

    def __repr__(self) -> str:
        return "<missing>"


_MISSING = _Missing()


class Binder:
    def __init__(self, kernel: str, params: tuple[ParamSpec, ...]):
        self.kernel = kernel
        self.params = params
        for p in params:
            if p.kind == "constexpr" and p.name in LAUNCH_OPTIONS:
                raise CompileError(
                    f"constexpr '{p.name}' of kernel {kernel} has the name of a launch option",
                    p.loc,
                    f"{', '.join(LAUNCH_OPTIONS)} are keywords of every launch "
                    f"(kernel[grid](..., {p.name}=...)); rename the parameter",
                )
        self.runtime = tuple(p for p in params if p.kind != "constexpr")
        self.constexprs = tuple(p for p in params if p.kind == "constexpr")
        self.constexpr_names = tuple(p.name for p in self.constexprs)
        self._pointer_slots = tuple(i for i, p in enumerate(self.runtime) if p.kind == "pointer")
        self.narrow = Packer(self.runtime, wide=False)
        self.wide = Packer(self.runtime, wide=True)

    # ------------------------------------------------------------ checks shared by all modes

    def check_call(
        self, args: tuple, constexprs: dict[str, Any], num_warps: Any, num_stages: Any = 2
    ) -> tuple[int, int, dict[str, Any]]:
        """Check the shape of a call; returns (num_warps, num_stages, constexprs), normalised
        (NumPy integers as ints, integral float constexprs refused, floats as floats)."""
        if type(args) is not tuple:
            args = tuple(args)
        if len(args) != len(self.runtime):
            names = ", ".join(p.name for p in self.runtime)
            raise LaunchError(
                f"{self.kernel}() takes {len(self.runtime)} positional argument"
                f"{'s' if len(self.runtime) != 1 else ''} ({names}), got {len(args)}"
                + (
                    f"; constexprs ({', '.join(self.constexpr_names)}) go by keyword"
                    if self.constexpr_names
                    else ""
                )
            )
        unknown = sorted(set(constexprs) - set(self.constexpr_names))
        if unknown:
            raise LaunchError(
                f"{self.kernel}() got unknown keyword argument{'s' if len(unknown) > 1 else ''} "
                f"{', '.join(map(repr, unknown))}; "
                f"its constexprs are {', '.join(self.constexpr_names) or 'none'}"
            )
        missing = [n for n in self.constexpr_names if n not in constexprs]
        if missing:
            raise LaunchError(
                f"{self.kernel}() needs constexpr {', '.join(missing)} by keyword, "
                f"e.g. {missing[0]}=..."
            )
        values = {p.name: constexpr_value(p, constexprs[p.name]) for p in self.constexprs}
        return launch_warps(num_warps), launch_stages(num_stages), values

    # ------------------------------------------------------------ one argument, fully checked

    def _scalar(self, slot: int, a: Any) -> tuple[Any, Any, bool]:
        """(value to pack, key fact, needs 64-bit indices) of a runtime scalar."""
        p = self.runtime[slot]
        d = p.scalar
        if d.kind == "b":
            if not isinstance(a, (bool, np.bool_)):
                raise LaunchError(
                    f"argument '{p.name}' ({p.describe()}) must be True or False, got {_show(a)}"
                )
            return bool(a), None, False
        if d.is_int:
            if not _is_integer(a):
                raise LaunchError(
                    f"argument '{p.name}' ({p.describe()}) must be an integer, got {_what(a)}"
                )
            a = int(a)
            lo, hi = _range(d)
            big = False
            if not lo <= a <= hi:
                if d.name == "i32" and -(2**63) <= a < 2**63:
                    big = True
                else:
                    raise LaunchError(f"argument '{p.name}' = {a} does not fit {d}")
            return a, (1 if a == 1 else 16 if a % 16 == 0 else None), big
        if not _is_real(a):
            raise LaunchError(
                f"argument '{p.name}' ({p.describe()}) must be a number, got {_what(a)}"
            )
        try:
            value = float(a)
            fits = not math.isfinite(value) or abs(value) <= _float_max(d)
        except OverflowError:  # an int beyond any float
            fits = False
        if not fits:
            raise LaunchError(
                f"argument '{p.name}' = {a} does not fit {d} (largest finite {_float_max(d):g})"
            )
        return value, None, False

    def _pointer(self, slot: int, a: Any, strided: bool) -> tuple[int, str, int]:
        """(address, dtype name, bytes spanned) of a GPU array argument, checked."""
        p = self.runtime[slot]
        ptr, dtype = device_pointer(a, p.name)
        return ptr, dtype, self._view(p, a, ptr, dtype, strided)

    def _view(self, p: ParamSpec, a: Any, ptr: int, dtype: str, strided: bool) -> int:
        if p.dtype is not None and dtype != p.dtype.name:
            raise self._dtype_error(p, dtype)
        size = DTYPES[dtype].itemsize
        if ptr % size:
            raise LaunchError(
                f"argument '{p.name}': address {ptr:#x} is not a multiple of the {dtype} element "
                f"size ({size} bytes); a misaligned view cannot be read by the GPU — copy it"
            )
        if not strided and not is_contiguous(a):
            raise self._strided_error(p, a)
        if isinstance(a, np.ndarray):
            return span_bytes(a.shape, a.strides, a.itemsize)
        return extent_bytes(a)

    def _strided_error(self, p: ParamSpec, a: Any) -> LaunchError:
        shape, strides = _geometry(a)
        return LaunchError(
            f"argument '{p.name}' is a non-contiguous view (shape {shape}, strides {strides} in "
            f"elements): the kernel gets only the address of its first element and would read "
            "it as contiguous memory. Pass a contiguous copy (x.contiguous(), "
            "cupy.ascontiguousarray(x), numpy.ascontiguousarray(x)), or launch with "
            "strided=True if the kernel indexes it with strides you pass"
        )

    # ------------------------------------------------------------ device launches: full path

    def bind_device(
        self,
        args: tuple,
        constexprs: dict[str, Any],
        num_warps: Any,
        num_stages: Any = 2,
        strided: bool = False,
    ) -> tuple[tuple, list, bool]:
        """(key, launch values, 64-bit indices) of a GPU launch, every argument checked."""
        warps, stages, cvalues = self.check_call(args, constexprs, num_warps, num_stages)
        key: list = [warps, stages]
        values: list = []
        big = False
        facts = []
        for i, (p, a) in enumerate(zip(self.runtime, args, strict=True)):
            if p.kind == "pointer":
                ptr, dtype, extent = self._pointer(i, a, strided)
                key += [dtype, _ALIGN[ptr & 15]]
                big = big or extent > INDEX_LIMIT * DTYPES[dtype].itemsize
                values.append(ptr)
            else:
                value, fact, wide = self._scalar(i, a)
                facts.append(fact)
                big = big or wide
                values.append(value)
        key += facts
        key += [cvalues[n] for n in self.constexpr_names]
        key.append(big)
        return tuple(key), values, big

    def torch_arguments(self, args: tuple) -> bool:
        """Whether any argument is a torch tensor (its launch then runs on torch's stream)."""
        torch = TORCH_TENSOR[0]
        return torch is not None and any(isinstance(a, torch) for a in args)

    # ------------------------------------------------------------ device launches: hot path

    def launcher(
        self,
        grid: Any,
        entries: dict,
        miss: Callable[..., Any],
        grid3: Callable[[Any, dict], tuple],
    ) -> Callable[..., None]:
        """The launch function of one grid (a 3-tuple, or a callable of the meta-parameters).

        ``entries`` maps signatures to prepared launches (:class:`Entry`), shared by every grid
        of the kernel; ``miss(signature, args, constexprs, num_warps, num_stages, stream,
        strided, grid)`` checks, compiles, stores and launches a signature not seen before.
        """
        prefix = self._prefix
        scope = {
            prefix + name: value
            for name, value in {
                "self": self,
                "entries": entries,
                "last": [((), None)],  # the last signature seen and its entry
                "miss": miss,
                "fixed": None if callable(grid) else grid,
                "grid_fn": grid if callable(grid) else None,
                "CupyArray": _CupyArray,
                "TORCH": TORCH_TENSOR,
                "extent": extent_bytes,
                "launch_warps": launch_warps,
                "launch_stages": launch_stages,
                "grid3": grid3,
                "get_device": _launch.get_device,
                "TORCH_RAW": _launch.TORCH_RAW_STREAM,
                "torch_raw": _launch.torch_raw_stream,
                "current_stream": _launch.current_stream,
                "stream_ptr": _launch.stream_pointer,
                "launch_kernel": _plan.launch_kernel,
                "driver_error": _launch.DriverError,
                "retry": _retry,
                "call": _call,
                "ident": threading.get_ident,
                "PACK_ERRORS": _PACK_ERRORS,
                "F32_MAX": _F32_MAX,
                "bf16_bits": bf16_bits,
                "other": self._other,
                "not_contiguous": self._not_contiguous,
                "bad_call": self._bad_call,
                "checked_miss": self._checked_miss,
                "M": _MISSING,
            }.items()
        }
        one = _launch.single_device()
        fixed = None if callable(grid) else grid
        source = self._launcher_source(one, fixed)
        exec(compile(source, f"<teeny_tx launcher of {self.kernel}>", "exec"), scope)
        return scope[prefix + "run"]

    @functools.cached_property
    def _prefix(self) -> str:
        """The prefix of every name a generated launcher defines: one that no constexpr name
        (a parameter of the launcher) starts with."""
        prefix = "_tx_"
        while any(name.startswith(prefix) for name in self.constexpr_names):
            prefix += "_"
        return prefix

    @functools.cached_property
    def _named(self) -> bool:
        """Whether the constexprs can be the launcher's keyword parameters (each a Python
        identifier that is not a keyword); else they arrive as ``**constexprs``."""
        return all(n.isidentifier() and not keyword.iskeyword(n) for n in self.constexpr_names)

    def _checked_miss(self, miss: Callable[..., Any], sig: tuple | None, args: tuple,
                      constexprs: dict, *rest: Any) -> Any:  # fmt: skip
        """The launcher's miss, after the check for arguments not given (the hot path leaves
        them to this: a signature holding one is never stored)."""
        if any(a is _MISSING for a in args) or any(v is _MISSING for v in constexprs.values()):
            self._bad_call(args, constexprs, rest[0], rest[1])
        return miss(sig, args, constexprs, *rest)

    def _arity_error(self, given: int) -> None:
        """The full check's error for a call with ``given`` positional arguments."""
        self.check_call((None,) * given, {}, 4, 2)
        raise LaunchError(f"{self.kernel}(): argument {given + 1} is missing")  # pragma: no cover

    def _bad_call(self, args: tuple, constexprs: dict, num_warps: Any, num_stages: Any) -> None:
        """A call with missing, extra or unknown arguments: the full check says which."""
        args = tuple(a for a in args if a is not _MISSING)
        constexprs = {k: v for k, v in constexprs.items() if v is not _MISSING}
        self.check_call(args, constexprs, num_warps, num_stages)
        raise LaunchError(f"{self.kernel}(): runtime arguments go by position")  # pragma: no cover

    def _launcher_source(self, one_device: bool, fixed: tuple | None) -> str:
        """The generated launcher, which launches through cuLaunchKernel (``plan.py``'s one
        call); ``one_device``: device 0 without asking; ``fixed``: the grid (else the
        launcher's grid function makes it per call)."""
        P = self._prefix
        n_args, n_const = len(self.runtime), len(self.constexprs)
        names = [f"{P}{i}" for i in range(n_args)]
        args_tuple = f"({''.join(n + ', ' for n in names)})"
        options = "num_warps=4, num_stages=2, stream=None, strided=False"
        if self._named:
            consts = [p.name for p in self.constexprs]
            params = [f"{n}={P}M" for n in names] + [f"*{P}extra"]
            params += [f"{c}={P}M" for c in consts] + [options, f"**{P}unknown"]
            constexprs = "{" + ", ".join(f"{c!r}: {c}" for c in consts) + "}"
            # a missing argument (the default, M) is found off the hot path: a pointer or an
            # integer goes to the full checks (other, fact), any other to the look-up's miss
            lines = [
                f"def {P}run({', '.join(params)}):",
                f"    if {P}extra or {P}unknown:",
                f"        {P}bad_call({args_tuple} + {P}extra, {{**{constexprs}, **{P}unknown}},"
                " num_warps, num_stages)",
            ]
        else:
            consts = [f"{P}c{j}" for j in range(n_const)]
            constexprs = f"{P}constexprs"
            lines = [
                f"def {P}run(*{P}args, {options}, **{P}constexprs):",
                f"    if len({P}args) != {n_args} or len({P}constexprs) != {n_const}:",
                f"        {P}self.check_call({P}args, {P}constexprs, num_warps, num_stages)",
            ]
            if n_args:
                lines.append(f"    {''.join(n + ', ' for n in names)}= {P}args")
            if n_const:
                lines.append("    try:")
                lines += [
                    f"        {c} = {P}constexprs[{p.name!r}]"
                    for c, p in zip(consts, self.constexprs, strict=True)
                ]
                lines += [
                    "    except KeyError:",
                    f"        {P}self.check_call({P}args, {P}constexprs, num_warps, num_stages)",
                ]
        lines += [
            "    if type(num_warps) is not int or type(num_stages) is not int:",
            f"        num_warps = {P}launch_warps(num_warps)",
            f"        num_stages = {P}launch_stages(num_stages)",
            f"    {P}torch = False",
        ]
        sig = ["num_warps", "num_stages"]
        packed, sizes = [], []
        for i, p in enumerate(self.runtime):
            a, t, ptr, n = names[i], f"{P}t{i}", f"{P}p{i}", f"{P}n{i}"
            if p.kind == "pointer":
                lines += [
                    f"    {P}k = type({a})",
                    f"    if {P}k is {P}CupyArray:",
                    f"        if {a}._c_contiguous:",
                    f"            {n} = {a}.size",
                    "        elif strided:",
                    f"            {n} = {P}extent({a})",
                    "        else:",
                    f"            {P}not_contiguous({i}, {a})",
                    f"        {ptr} = {a}.data.ptr",
                    f"        {t} = {a}.dtype",
                    f"    elif {P}k is {P}TORCH[0] and {a}.is_cuda:",
                    f"        if {a}.is_contiguous():",
                    f"            {n} = {a}.numel()",
                    "        elif strided:",
                    f"            {n} = {P}extent({a})",
                    "        else:",
                    f"            {P}not_contiguous({i}, {a})",
                    f"        {ptr} = {a}.data_ptr()",
                    f"        {t} = {a}.dtype",
                    f"        {P}torch = True",
                    "    else:",
                    f"        {ptr}, {t}, {n}, {P}torch{i} = {P}other({i}, {a}, strided)",
                    f"        {P}torch = {P}torch or {P}torch{i}",
                ]
                sizes.append(n)
                sig += [t, f"{ptr} & 15"]
                packed.append(ptr)
            elif p.scalar.is_int:
                f = f"{P}f{i}"
                lines += [
                    f"    if type({a}) is int:",
                    f"        {f} = {a} & 15 if {a} != 1 else -1",
                    "    else:",
                    f"        {f} = {P}self.fact({i}, {a})",
                ]
                sig += [f"type({a})", f]
                packed.append(a)
            else:
                sig.append(f"type({a})")
                packed.append(f"{P}bf16_bits({a})" if p.scalar.name == "bf16" else a)
        for c in consts:
            sig += [c, f"type({c})"]
        # 64-bit indices: an array of more elements (bytes when not contiguous) than i32 holds
        sig.append(" or ".join(f"{n} > {INDEX_LIMIT}" for n in sizes) if sizes else "False")
        miss = (
            f"{P}checked_miss({P}miss, SIG, {args_tuple}, {constexprs}, num_warps, num_stages,"
            f" stream, strided, {P}fixed or {P}grid_fn)"
        )
        lines += [
            f"    {P}sig = ({', '.join(sig)},)",
            f"    {P}hit = {P}last[0]",
            f"    if {P}sig != {P}hit[0]:",
            f"        {P}hit = {P}entries.get({P}sig)",
            f"        if {P}hit is None:",
            f"            return {miss.replace('SIG', P + 'sig', 1)}",
            f"        {P}hit = {P}last[0] = ({P}sig, *{P}hit.fast)",
            f"    _, {P}entry, {P}handle, {P}packer, {P}bx, {P}by, {P}bz, {P}shared = {P}hit",
        ]
        if fixed is None:
            lines.append(
                f"    {P}grid = {P}grid3({P}grid_fn, {{**{constexprs}, 'num_warps': num_warps,"
                " 'num_stages': num_stages})"
            )
            g0, g1, g2 = (f"{P}grid[{j}]" for j in range(3))
            grid = f"{P}grid"
        else:
            g0, g1, g2 = (str(int(g)) for g in fixed)
            grid = f"{P}fixed"
        wide_floats = [names[i] for i, p in enumerate(self.runtime) if _narrowing(p)]
        if wide_floats:  # struct packs an f32 too large as inf: the full checks refuse it
            tests = " or ".join(f"{a} > {P}F32_MAX or {a} < -{P}F32_MAX" for a in wide_floats)
            lines += [f"    if {tests}:", f"        return {miss.replace('SIG', 'None', 1)}"]
        lines += [
            f"    {P}main = {P}packer.main",
            f"    {P}slot = {P}main[1] if {P}main[0] == {P}ident() else {P}packer.slot()",
            "    try:",
            f"        {P}packer.pack_into({P}slot.buffer, 0, {', '.join(packed)})",
            f"    except {P}PACK_ERRORS:",
            f"        return {miss.replace('SIG', 'None', 1)}",
        ]
        call = f"{P}call({P}entry, {P}device, {grid}, {P}slot, stream, {P}torch, {args_tuple})"
        if one_device:  # the handle of device 0 is the entry's (Entry.fast)
            lines += [
                f"    {P}device = 0",
                f"    if {P}handle is None:",
                f"        {P}handle = {P}entry.prepare_handle(0)",
                f"        {P}last[0] = ({P}sig, *{P}entry.fast)",
            ]
        else:
            lines += [
                f"    {P}device = {P}get_device()",
                f"    {P}handle = {P}entry.handles.get({P}device)",
                f"    if {P}handle is None:",
                f"        {P}handle = {P}entry.prepare_handle({P}device)",
            ]
        lines += [
            f"    if not {P}handle:",
            f"        return {call}",
            "    if stream is not None:",
            f"        {P}stream = {P}stream_ptr(stream)",
            f"    elif {P}torch:",
            f"        {P}stream = ({P}TORCH_RAW[0] or {P}torch_raw())({P}device)",
            "    else:",
            f"        {P}stream = {P}current_stream({P}device).ptr",
            "    try:",
            "        "
            + _plan.launch_call(
                f"{P}launch_kernel",
                f"{P}handle",
                (g0, g1, g2),
                (f"{P}bx", f"{P}by", f"{P}bz"),
                f"{P}shared",
                f"{P}stream",
                f"{P}slot.params",
            ),
            f"    except {P}driver_error as {P}err:",
            f"        {P}retry({P}entry, {P}device, {P}err, {grid}, {P}slot, {P}stream)",
        ]
        return "\n".join(lines) + "\n"

    # ------------------------------------------------------------ device launches: direct

    def direct(
        self,
        entry: Entry,
        grid: tuple,
        device: int,
        args: tuple,
        key: tuple,
        checked: tuple[str, ...],
        fallback: Callable[..., None],
        values: list | None = None,
    ) -> Callable[..., None] | None:
        """A launch of one prepared specialisation with no signature look-up: the plans of
        the kernel library's wrappers, which key their own calls on every array's shape,
        strides, dtype and device (what fixes this launch's key but the addresses).

        ``args`` are the checked runtime arguments that made ``key``; the function returned
        takes runtime arguments of the same kinds (CuPy arrays or CUDA tensors where they
        were) and launches over ``grid`` on the current stream of ``device`` (which must be
        the current device). Rechecked per call: each pointer's alignment against the key's
        (its low bits), and the scalars named in ``checked`` (their type and the key's
        facts: equal to 1, divisible by 16); the other scalars are the caller's promise to
        be the values the key was made with. Anything that differs, or a value that does not
        pack, goes to ``fallback`` (the kernel's launcher: full checks, their errors). None
        when an argument is neither a CuPy array nor a CUDA tensor (no direct launch then).
        A TMA entry's direct launch is a :class:`~teeny_tx.runtime.plan.Plan` made from
        ``values`` (the checked launch values of ``args``): see :meth:`_direct_plan`.
        """
        torch = TORCH_TENSOR[0]
        pointer, is_torch = {}, False
        for i, (p, a) in enumerate(zip(self.runtime, args, strict=True)):
            if p.kind != "pointer":
                continue
            if type(a) is _CupyArray:
                pointer[i] = f"a{i}.data.ptr"
            elif torch is not None and type(a) is torch and a.is_cuda:
                pointer[i], is_torch = f"a{i}.data_ptr()", True
            else:
                return None
        if entry.tma is not None:
            if values is None:
                raise LaunchError(f"{self.kernel}: a direct TMA launch needs its launch values")
            plan_values = entry.packer.launch_values(values)
            return self._direct_plan(
                entry, grid, device, args, plan_values, checked, fallback, is_torch
            )
        handle = entry.handles.get(device) or entry.prepare_handle(device)
        scope = {
            "handle": handle,
            "grid": grid,
            "block": entry.block,
            "shared": entry.shared,
            "entry": entry,
            "packer": entry.packer,
            "pack_into": entry.packer.pack_into,
            "fallback": fallback,
            "TORCH_RAW": _launch.TORCH_RAW_STREAM,
            "torch_raw": _launch.torch_raw_stream,
            "current_stream": _launch.current_stream,
            "launch_kernel": _plan.launch_kernel,
            "retry": _retry,
            "ident": threading.get_ident,
            "device": device,
            "driver_error": _launch.DriverError,
            "PACK_ERRORS": _PACK_ERRORS,
            "F32_MAX": _F32_MAX,
            "bf16_bits": bf16_bits,
            "error": entry.error,
        }
        source = self._direct_source(key, pointer, set(checked), is_torch, grid, entry.block)
        exec(compile(source, f"<teeny_tx direct launch of {self.kernel}>", "exec"), scope)
        return scope["run"]

    def _direct_plan(
        self,
        entry: Entry,
        grid: tuple,
        device: int,
        args: tuple,
        values: list,
        checked: tuple[str, ...],
        fallback: Callable[..., None],
        torch: bool,
    ) -> Callable[..., None]:
        """:meth:`direct` of a TMA entry: its plan for these arguments (the tensor maps
        encoded once, their addresses rewritten per call). A call whose scalars named in
        ``checked`` differ from these, or whose addresses break their alignment, goes to
        ``fallback``."""
        extents = {self.runtime[i].name: extent_bytes(args[i]) for i in self._pointer_slots}
        plan, slots = entry.plan(device, grid, values, extents)
        fixed = [(i, args[i]) for i, p in enumerate(self.runtime) if p.name in checked]
        unchecked = sorted(set(checked) - {self.runtime[i].name for i, _ in fixed})
        if unchecked:
            raise LaunchError(f"{self.kernel}: checked names no scalar: {', '.join(unchecked)}")
        if torch:
            raw = _launch.TORCH_RAW_STREAM[0] or _launch.torch_raw_stream()

            def stream() -> int:
                return raw(device)

            def address(a: Any) -> int:
                return a.data_ptr()
        else:
            current = _launch.current_stream

            def stream() -> int:
                return current(device).ptr

            def address(a: Any) -> int:
                return a.data.ptr

        def run(*call: Any) -> None:
            for i, value in fixed:
                if call[i] != value or type(call[i]) is not type(value):
                    return fallback(*call)
            if not plan([address(call[i]) for i in slots], stream()):
                fallback(*call)
            return None

        return run

    def _direct_source(
        self,
        key: tuple,
        pointer: dict[int, str],
        checked: set,
        torch: bool,
        grid: tuple = (1, 1, 1),
        block: tuple = (1, 1, 1),
    ) -> str:
        names = [f"a{i}" for i in range(len(self.runtime))]
        every = ", ".join(names)
        lines = [f"def run({every}):"]
        aligned, packed, pos = [], [], 2
        for i, p in enumerate(self.runtime):
            if p.kind == "pointer":
                lines.append(f"    p{i} = {pointer[i]}")
                if key[pos + 1] > 1:  # the key's alignment: the low bits that must be 0
                    aligned.append(f"p{i} & {key[pos + 1] - 1}")
                packed.append(f"p{i}")
                pos += 2
            else:
                packed.append(f"bf16_bits(a{i})" if p.scalar.name == "bf16" else f"a{i}")
        scalars = [p for p in self.runtime if p.kind == "scalar"]
        facts = dict(zip([p.name for p in scalars], key[pos : pos + len(scalars)], strict=True))
        tests = [f"({' | '.join(aligned)})"] if aligned else []
        for i, p in enumerate(self.runtime):
            if p.kind == "pointer" or p.name not in checked:
                continue
            a = f"a{i}"
            kind = "int" if p.scalar.is_int else "bool" if p.scalar.kind == "b" else "float"
            tests.append(f"type({a}) is not {kind}")
            if _narrowing(p):
                tests.append(f"{a} > F32_MAX or {a} < -F32_MAX")
            if p.scalar.is_int:  # the key's fact of it: 1, divisible by 16, or neither
                fact = facts[p.name]
                if fact == 1:
                    tests.append(f"{a} != 1")
                elif fact == 16:
                    tests.append(f"{a} & 15")
                else:
                    tests.append(f"{a} == 1 or not {a} & 15")
        unchecked = sorted(set(checked) - {p.name for p in scalars})
        if unchecked:
            raise LaunchError(f"{self.kernel}: checked names no scalar: {', '.join(unchecked)}")
        if tests:
            lines += [f"    if {' or '.join(tests)}:", f"        return fallback({every})"]
        lines += [
            "    main = packer.main",
            "    slot = main[1] if main[0] == ident() else packer.slot()",
            "    try:",
            f"        pack_into(slot.buffer, 0, {', '.join(packed)})",
            "    except PACK_ERRORS:",
            f"        return fallback({every})",
        ]
        gdims = tuple(str(int(d)) for d in grid)
        bdims = tuple(str(int(d)) for d in block)
        lines += [
            "    stream = "
            + ("(TORCH_RAW[0] or torch_raw())(device)" if torch else "current_stream(device).ptr"),
            "    try:",
            "        "
            + _plan.launch_call(
                "launch_kernel", "handle", gdims, bdims, "shared", "stream", "slot.params"
            ),
            "    except driver_error as err:",
            "        retry(entry, device, err, grid, slot, stream)",
        ]
        return "\n".join(lines) + "\n"

    def fact(self, slot: int, a: Any) -> int:
        """The signature's fact of an integer scalar that is not a Python int (NumPy
        integers): the same encoding as the hot path's, after the full check."""
        if a is _MISSING:
            self._arity_error(slot)
        self._scalar(slot, a)
        a = int(a)
        return a & 15 if a != 1 else -1

    def _other(self, slot: int, a: Any, strided: bool) -> tuple[int, str, int, bool]:
        """A pointer argument that is not a plain CuPy array or CUDA tensor: fully checked.
        Its dtype is returned by name (signatures of these never meet a CuPy or torch one)."""
        if a is _MISSING:
            self._arity_error(slot)
        ptr, dtype, extent = self._pointer(slot, a, strided)
        torch = TORCH_TENSOR[0]
        return ptr, dtype, extent, torch is not None and isinstance(a, torch)

    def _not_contiguous(self, slot: int, a: Any) -> None:
        raise self._strided_error(self.runtime[slot], a)

    # ------------------------------------------------------------ interpreter and inspection

    def bind_host(
        self,
        args: tuple,
        constexprs: dict[str, Any],
        num_warps: Any,
        describe: bool = False,
        num_stages: Any = 2,
        strided: bool = False,
    ) -> tuple:
        """Arguments as the interpreter (NumPy arrays) or cuda_source (arrays or dtype names)
        give them."""
        warps, stages, cvalues = self.check_call(args, constexprs, num_warps, num_stages)
        key: list = [warps, stages]
        big = False
        facts = []
        for i, (p, a) in enumerate(zip(self.runtime, args, strict=True)):
            if p.kind != "pointer":
                _, fact, wide = self._scalar(i, a)
                facts.append(fact)
                big = big or wide
                continue
            if describe and isinstance(a, str):
                if a not in DTYPES:
                    raise LaunchError(f"argument '{p.name}': unknown dtype name '{a}'")
                if p.dtype is not None and a != p.dtype.name:
                    raise self._dtype_error(p, a)
                dtype, align, extent = a, 16, 0
            elif isinstance(a, np.ndarray):
                d = from_numpy(a.dtype)
                if d is None:
                    raise LaunchError(f"argument '{p.name}': unsupported dtype {a.dtype}")
                ptr = a.__array_interface__["data"][0]
                dtype, align = d.name, _ALIGN[ptr & 15]
                extent = self._view(p, a, ptr, d.name, strided)
            elif describe:
                ptr, dtype, extent = self._pointer(i, a, strided)
                align = _ALIGN[ptr & 15]
            else:
                raise LaunchError(
                    f"argument '{p.name}': the interpreter runs on NumPy arrays, got {_what(a)}; "
                    "copy it to the host first (cupy: x.get(), torch: x.cpu().numpy())"
                )
            key += [dtype, align]
            big = big or extent > INDEX_LIMIT * DTYPES[dtype].itemsize
        key += facts
        key += [cvalues[n] for n in self.constexpr_names]
        key.append(big)
        return tuple(key)

    # ------------------------------------------------------------ key → specialisation

    def spec(self, key: tuple) -> Spec:
        num_warps, num_stages, index64 = key[0], key[1], key[-1]
        pos = 2
        pointer_dtypes, align = [], []
        for i in self._pointer_slots:
            p = self.runtime[i]
            pointer_dtypes.append((p.name, DTYPES[key[pos]]))
            align.append((p.name, key[pos + 1]))
            pos += 2
        div16, ones = [], []
        for p in self.runtime:
            if p.kind == "scalar":
                if key[pos] == 16:
                    div16.append(p.name)
                elif key[pos] == 1:
                    ones.append(p.name)
                pos += 1
        constexprs = tuple(
            zip(self.constexpr_names, key[pos : pos + len(self.constexpr_names)], strict=True)
        )
        return Spec(
            constexprs=constexprs,
            pointer_dtypes=tuple(pointer_dtypes),
            align=tuple(align),
            div16=tuple(div16),
            ones=tuple(ones),
            num_warps=num_warps,
            num_stages=num_stages,
            index64=index64,
        )

    def _dtype_error(self, p: ParamSpec, got: str) -> LaunchError:
        return LaunchError(
            f"argument '{p.name}': kernel {self.kernel} declares `{p.describe()}` "
            f"but got a {got} array"
            f"; pass {p.dtype} data or declare the parameter `any *`"
        )


# ---------------------------------------------------------------- launch values


class Packer:
    """The launch values of one parameter list, packed into one buffer per thread.

    ``pack(*values)`` writes the values (addresses as u64, scalars in their declared type, or
    i64 for i32 scalars when ``wide``) into the calling thread's buffer, laid out as the
    kernel's parameter block, and returns the list of ``CPointer`` objects that point at each
    value: what CuPy's ``Function`` passes to ``cuLaunchKernel`` as is (the buffer's
    ``params`` is the same as one ``void*`` array, for the driver's launch). The struct
    refuses values that do not fit (``struct.error`` / ``OverflowError``), so the launcher's
    hot path gets range checks for free and sends those calls to the full checks.

    The buffer of the first thread that launches is ``main`` (``(thread id, buffer)``, read
    in one step by the launchers); other threads get theirs from :meth:`slot`. A launch's
    values are read by the driver during the launch call, which may let another thread run
    (it releases the GIL), so threads never share a buffer.
    """

    def __init__(self, runtime: tuple[ParamSpec, ...], wide: bool):
        codes = []
        for p in runtime:
            if p.kind == "pointer":
                codes.append("Q")
            elif wide and p.scalar.name == "i32":
                codes.append("q")
            else:
                codes.append(_CODES[p.scalar.name])
        self.codes = tuple(codes)
        self.names = tuple(p.name for p in runtime)
        self.pointer_slots = tuple(i for i, p in enumerate(runtime) if p.kind == "pointer")
        self.bf16_slots = tuple(i for i, p in enumerate(runtime) if p.dtype is not None
                                and p.kind != "pointer" and p.dtype.name == "bf16")  # fmt: skip
        self.format = "@" + "".join(codes)
        self.struct = struct.Struct(self.format)
        self.offsets = _offsets(codes)
        self.pack_into = self.struct.pack_into
        self.local = threading.local()
        self.main: tuple[int | None, Any] = (None, None)
        self._lock = threading.Lock()

    def new_slot(self) -> Any:
        """A new parameter buffer of this layout."""
        return _launch.ParamBuffer(self.struct.size, self.offsets)

    def slot(self) -> Any:
        """The calling thread's parameter buffer (made on its first launch)."""
        me = threading.get_ident()
        main = self.main
        if main[0] == me:
            return main[1]
        if main[0] is None:
            with self._lock:
                if self.main[0] is None:
                    self.main = (me, self.new_slot())
                    return self.main[1]
        found = getattr(self.local, "slot", None)
        if found is None:
            found = self.local.slot = self.new_slot()
        return found

    def launch_values(self, values: Any) -> list:
        """Checked launch values (``Binder.bind_device``'s) as the kernel receives them, read
        back from this layout (a float as its parameter's type rounds it, a bf16 scalar as its
        16 bits): what a launcher's packed buffer holds for the same call."""
        out = list(values)
        for i in self.bf16_slots:
            out[i] = bf16_bits(out[i])
        return list(self.struct.unpack(self.struct.pack(*out)))

    def pack(self, *values: Any) -> int:
        """``values`` written into one of this thread's parameter buffers: the address of its
        ``void*`` array, as ``cuLaunchKernel`` takes it (valid until this thread's next
        pack; the driver copies the values when the launch is made)."""
        slot = self.slot()
        self.pack_into(slot.buffer, 0, *values)
        return slot.params


def _offsets(codes: list[str]) -> tuple[int, ...]:
    offsets = []
    for i in range(len(codes)):
        prefix = struct.calcsize("@" + "".join(codes[: i + 1]))
        offsets.append(prefix - struct.calcsize("@" + codes[i]))
    return tuple(offsets)


def _call(
    entry: Entry, device: int, grid: tuple, slot: Any, stream: Any, torch: bool, args: tuple
) -> None:
    """A launch the hot path has no driver handle for: a TMA entry's through its plan (the
    values the launcher packed, the arrays' extents), any other (its first launch on this
    device) prepared there and launched (``plan.launch_prepared``)."""
    raw = _plan.raw_stream(device, stream, torch)
    if entry.tma is not None:
        values = entry.packer.struct.unpack_from(slot.buffer)
        entry.launch_maps(device, grid, values, args, raw)
        return
    _plan.launch_prepared(entry, device, grid, slot.params, raw)


def _retry(entry: Entry, device: int, err: Exception, grid: tuple, slot: Any, stream: int):
    """A hot-path launch that failed: with no context current on this thread (a new thread),
    made current and launched again (``plan.again``); else the launch's error."""
    handle = entry.handles[device]
    gx, gy, gz = grid
    args = (handle, gx, gy, gz, entry.bx, entry.by, entry.bz, entry.shared, stream, slot.params)
    _plan.again(device, err, args, lambda e: entry.error(device, e, grid))


# ---------------------------------------------------------------- values and their checks


def launch_warps(num_warps: Any) -> int:
    if _is_integer(num_warps) and int(num_warps) in WARPS:
        return int(num_warps)
    raise LaunchError(f"num_warps must be 1, 2, 4, 8, 16 or 32, got {num_warps!r}")


def launch_stages(num_stages: Any) -> int:
    if _is_integer(num_stages) and 1 <= int(num_stages) <= MAX_STAGES:
        return int(num_stages)
    raise LaunchError(
        f"num_stages must be an int from 1 to {MAX_STAGES} (software-pipelining depth "
        f"of the loops feeding dot), got {num_stages!r}"
    )


def constexpr_value(p: ParamSpec, value: Any) -> Any:
    """``value`` as the constexpr ``p`` declares it (bool, int or float), or a LaunchError."""
    d = p.scalar
    where = f"constexpr '{p.name}' ({p.describe()})"
    if not isinstance(value, (int, float, np.integer, np.floating, np.bool_)):
        raise LaunchError(f"constexpr '{p.name}' must be a number, got {_what(value)}")
    if d.kind == "b":
        if not isinstance(value, (bool, np.bool_)):
            raise LaunchError(f"{where} must be True or False, got {_show(value)}")
        return bool(value)
    if isinstance(value, (bool, np.bool_)):
        raise LaunchError(f"{where} must be a number, got {value!r}")
    if d.is_int:
        if not _is_integer(value):
            raise LaunchError(
                f"{where} must be an integer, got {_show(value)}"
                + ("" if not _is_real(value) or not math.isfinite(value) else "; round it first")
            )
        value = int(value)
        lo, hi = _range(d)
        if not lo <= value <= hi:
            raise LaunchError(f"{where} = {value} does not fit {d} ({lo}..{hi})")
        return value
    value = float(value)
    if not math.isfinite(value):
        raise LaunchError(
            f"{where} must be finite, got {value!r}; write INF or NAN in the kernel instead"
        )
    if abs(value) > _float_max(d):
        raise LaunchError(f"{where} = {value!r} does not fit {d}")
    return value


def bf16_bits(value: Any) -> int:
    """The 16 bits of ``value`` rounded to bf16 (what a bf16 parameter receives)."""
    if not _is_real(value) or (math.isfinite(value) and abs(value) > _BF16_MAX):
        raise OverflowError(value)  # the launcher's full checks say why
    return int(np.array(value, dtype=DTYPES["bf16"].np).view(np.uint16))


_BF16_MAX = float(ml_dtypes.finfo(ml_dtypes.bfloat16).max)
_F32_MAX = float(np.finfo(np.float32).max)


def _narrowing(p: ParamSpec) -> bool:
    """Whether ``p`` is an f32 scalar: the one type struct packs silently out of range (as
    inf; f16 and bf16 values too large raise OverflowError, which the launchers catch)."""
    return p.kind == "scalar" and p.scalar.name == "f32"


def scalar_value(value: Any, dtype: DType) -> Any:
    """A Python number as the exactly typed NumPy scalar the CUDA parameter expects."""
    if dtype.name == "bf16":
        return np.array(value, dtype=dtype.np).view(np.uint16)[()]
    return dtype.np.type(value)


def _is_integer(a: Any) -> bool:
    return isinstance(a, (int, np.integer)) and not isinstance(a, (bool, np.bool_))


def _is_real(a: Any) -> bool:
    return isinstance(a, (int, float, np.integer, np.floating)) and not isinstance(
        a, (bool, np.bool_)
    )


def _float_max(d: DType) -> float:
    return float(ml_dtypes.finfo(d.np).max)


def _range(dtype: DType) -> tuple[int, int]:
    if dtype.kind == "u":
        return 0, (1 << dtype.bits) - 1
    if dtype.kind == "b":
        return 0, 1
    return -(1 << (dtype.bits - 1)), (1 << (dtype.bits - 1)) - 1


def _geometry(a: Any) -> tuple[Any, Any]:
    """(shape, strides in elements) of an array of any library, for messages."""
    try:
        return _shape_and_strides(a)
    except Exception:  # noqa: BLE001 - a DLPack-only object: the message does without
        return "?", "?"


def _shape_and_strides(a: Any) -> tuple[tuple, tuple]:
    if hasattr(a, "stride") and callable(a.stride):  # torch
        return tuple(int(n) for n in a.shape), tuple(int(s) for s in a.stride())
    if isinstance(a, (np.ndarray, cupy.ndarray)):
        return a.shape, tuple(s // a.itemsize for s in a.strides)
    interface = a.__cuda_array_interface__
    itemsize = int(interface["typestr"][2:])
    strides = interface.get("strides") or ()
    return tuple(interface["shape"]), tuple(int(s) // itemsize for s in strides)


def _show(a: Any) -> str:
    return repr(a) if isinstance(a, (int, float, bool, np.number, np.bool_)) else _what(a)


def _what(a: Any) -> str:
    t = type(a)
    return t.__name__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__name__}"
