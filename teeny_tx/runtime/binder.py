"""Launch arguments → a specialisation key and the values to launch with.

Input: a kernel's :class:`~teeny_tx.lower.signature.ParamSpec` list and the positional
arguments, constexpr keywords, ``num_warps`` and ``num_stages`` of a call. Output: the key
(a printable tuple: ``num_warps``, ``num_stages``, pointer dtypes and alignments, per integer
argument 1 / 16 / None — equal to 1, divisible by 16, neither —, constexpr values, 32/64-bit
indices) and the launch values in parameter order.

One binder serves every use: a GPU launch (device arrays; the fast path runs on every launch
and keeps to attribute reads), the interpreter (NumPy arrays) and ``cuda_source`` (arrays or
dtype names). Every mistake raises :class:`~teeny_tx.errors.LaunchError` naming the parameter.
"""

from __future__ import annotations

from typing import Any

import cupy
import numpy as np

from ..dtypes import DTYPES, DType, from_numpy
from ..errors import LaunchError
from ..lower.signature import ParamSpec, Spec
from .launch import pointer_arg
from .memory import (
    NUMPY_NAMES,
    TORCH_DTYPE_NAMES,
    TORCH_TENSOR,
    alignment_of,
    device_pointer,
    extent_bytes,
)

_CupyArray = cupy.ndarray

INDEX_LIMIT = 2**31 - 1
MAX_STAGES = 8
_ALIGN = tuple(16 if low == 0 else low & -low for low in range(16))


class Binder:
    def __init__(self, kernel: str, params: tuple[ParamSpec, ...]):
        self.kernel = kernel
        self.params = params
        self.runtime = tuple(p for p in params if p.kind != "constexpr")
        self.constexpr_names = tuple(p.name for p in params if p.kind == "constexpr")
        self._pointer_slots = tuple(i for i, p in enumerate(self.runtime) if p.kind == "pointer")
        # bind_device(args, constexprs, num_warps, num_stages=2)
        #   -> (key, launch values, 64-bit indices):
        # generated per signature by _fast_path, called on every GPU launch.
        self.bind_device = self._fast_path()

    # ------------------------------------------------------------ checks shared by all modes

    def check_call(
        self, args: tuple, constexprs: dict[str, Any], num_warps: Any, num_stages: Any = 2
    ) -> None:
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
        for name in self.constexpr_names:
            value = constexprs[name]
            if not isinstance(value, (int, float, bool, np.integer, np.floating)):
                raise LaunchError(
                    f"constexpr '{name}' must be a number, got {type(value).__name__}"
                )
        if not isinstance(num_warps, int) or num_warps not in (1, 2, 4, 8, 16, 32):
            raise LaunchError(f"num_warps must be 1, 2, 4, 8, 16 or 32, got {num_warps!r}")
        if type(num_stages) is not int or not 1 <= num_stages <= MAX_STAGES:
            raise LaunchError(
                f"num_stages must be an int from 1 to {MAX_STAGES} (software-pipelining depth "
                f"of the loops feeding dot), got {num_stages!r}"
            )

    # ------------------------------------------------------------ device launches (hot path)

    def _fast_path(self):
        """Generate this signature's launch binder: straight-line Python, one statement group
        per parameter, so a launch pays attribute reads and table look-ups only (the same
        technique as Triton's generated launcher). Anything unusual drops to the slow checks."""
        lines = [
            "def bind(args, constexprs, num_warps, num_stages=2):",
            f"    if len(args) != {len(self.runtime)} "
            f"or len(constexprs) != {len(self.constexpr_names)}:",
            "        self.check_call(args, constexprs, num_warps, num_stages)",
            f"    {''.join(f'a{i}, ' for i in range(len(self.runtime)))}= args",
            "    big = False",
        ]
        key, values = ["num_warps", "num_stages"], []
        for i, p in enumerate(self.runtime):
            a = f"a{i}"
            if p.kind == "pointer":
                check = (
                    f"    if d{i} != {p.dtype.name!r}: "
                    f"raise self._dtype_error(self.runtime[{i}], d{i})"
                    if p.dtype is not None
                    else None
                )
                lines += [
                    f"    if type({a}) is CupyArray and {a}._c_contiguous:",
                    f"        p{i} = {a}.data.ptr",
                    f"        d{i} = NAMES.get({a}.dtype) or device_pointer({a}, {p.name!r})[1]",
                    f"        v{i} = {a}",
                    f"        big = big or {a}.nbytes > INDEX_BYTES[d{i}]",
                    f"    elif type({a}) is TORCH[0] and {a}.is_cuda and {a}.dtype in TORCH_NAMES:",
                    f"        p{i} = {a}.data_ptr()",
                    f"        d{i} = TORCH_NAMES[{a}.dtype]",
                    f"        v{i} = pointer_arg(p{i})",
                    f"        big = big or extent_bytes({a}) > INDEX_BYTES[d{i}]",
                    "    else:",
                    f"        p{i}, d{i} = device_pointer({a}, {p.name!r})",
                    f"        v{i} = pointer_arg(p{i})",
                    f"        big = big or extent_bytes({a}) > INDEX_BYTES[d{i}]",
                ]
                if check:
                    lines.append(check)
                key += [f"d{i}", f"ALIGN[p{i} & 15]"]
                values.append(f"v{i}")
            elif p.dtype.is_float:
                lines.append(
                    f"    if type({a}) is not float and not is_number({a}): "
                    f"self._not_a_number({i}, {a})"
                )
                key.append("None")
                values.append(f"T{i}({a})")
            else:
                lo, hi = _range(p.dtype)
                lines += [
                    f"    if type({a}) is not int or not {lo} <= {a} <= {hi}:",
                    f"        big = self._check_int({i}, {a}) or big",
                ]
                key.append(
                    f"(1 if {a} == 1 else 16 if {a} % 16 == 0 else None)"
                    if p.dtype.is_int
                    else "None"
                )
                values.append(f"T{i}({a}) if {lo} <= {a} <= {hi} else {a}")
        if self.constexpr_names:
            lines += ["    try:"]
            lines += [
                f"        c{j} = constexprs[{n!r}]" for j, n in enumerate(self.constexpr_names)
            ]
            lines += [
                "    except KeyError:",
                "        self.check_call(args, constexprs, num_warps, num_stages)",
            ]
            key += [f"c{j}" for j in range(len(self.constexpr_names))]
        lines += [
            f"    values = [{', '.join(values)}]",
            "    if big:",
            "        values = list(self._widen(values))",
            f"    return ({', '.join(key)}, big), values, big",
        ]
        scope = {
            "self": self,
            "CupyArray": _CupyArray,
            "NAMES": NUMPY_NAMES,
            "INDEX_BYTES": _INDEX_BYTES,
            "ALIGN": _ALIGN,
            "device_pointer": device_pointer,
            "extent_bytes": extent_bytes,
            "pointer_arg": pointer_arg,
            "is_number": self._is_number,
            "TORCH": TORCH_TENSOR,
            "TORCH_NAMES": TORCH_DTYPE_NAMES,
        }
        scope.update(
            {f"T{i}": _slot(p)[1] for i, p in enumerate(self.runtime) if p.kind == "scalar"}
        )
        self.fast_path_source = "\n".join(lines) + "\n"
        exec(compile(self.fast_path_source, f"<teeny_tx binder for {self.kernel}>", "exec"), scope)
        return scope["bind"]

    def _not_a_number(self, slot: int, a: Any) -> None:
        p = self.runtime[slot]
        raise LaunchError(f"argument '{p.name}' ({p.describe()}) must be a number, got {_what(a)}")

    def _widen(self, values: list):
        """64-bit indices: `i32` scalars travel as i64."""
        for p, v in zip(self.runtime, values, strict=True):
            yield np.int64(v) if p.kind == "scalar" and p.dtype.name == "i32" else v

    @staticmethod
    def _is_number(a: Any) -> bool:
        return isinstance(a, (int, float, np.integer, np.floating)) and not isinstance(a, bool)

    def _check_int(self, slot: int, a: Any) -> bool:
        """Whether an i32 argument needs 64-bit indices; raises for anything else wrong."""
        p = self.runtime[slot]
        if not isinstance(a, (int, np.integer)) or isinstance(a, bool):
            raise LaunchError(
                f"argument '{p.name}' ({p.describe()}) must be an integer, got {_what(a)}"
            )
        lo, hi = _range(p.dtype)
        if lo <= a <= hi:
            return False
        if p.dtype.name == "i32" and -(2**63) <= a < 2**63:
            return True
        raise LaunchError(f"argument '{p.name}' = {a} does not fit {p.dtype}")

    def _scalars(self, args: tuple) -> tuple[list, bool]:
        facts = []
        big = False
        for i, (p, a) in enumerate(zip(self.runtime, args, strict=True)):
            if p.kind != "scalar":
                continue
            if p.dtype.is_int:
                lo, hi = _range(p.dtype)
                if not isinstance(a, (int, np.integer)) or isinstance(a, bool) or not lo <= a <= hi:
                    big = self._check_int(i, a) or big
                facts.append(1 if a == 1 else 16 if a % 16 == 0 else None)
            else:
                if not self._is_number(a):
                    raise LaunchError(
                        f"argument '{p.name}' ({p.describe()}) must be a number, got {_what(a)}"
                    )
                facts.append(None)
        return facts, big

    # ------------------------------------------------------------ interpreter and inspection

    def bind_host(
        self,
        args: tuple,
        constexprs: dict[str, Any],
        num_warps: int,
        describe: bool = False,
        num_stages: int = 2,
    ) -> tuple:
        """Arguments as the interpreter (NumPy arrays) or cuda_source (arrays or dtype names)
        give them."""
        self.check_call(args, constexprs, num_warps, num_stages)
        key: list = [num_warps, num_stages]
        big = False
        for p, a in zip(self.runtime, args, strict=True):
            if p.kind != "pointer":
                continue
            if describe and isinstance(a, str):
                if a not in DTYPES:
                    raise LaunchError(f"argument '{p.name}': unknown dtype name '{a}'")
                dtype, align, count = a, 16, 0
            elif isinstance(a, np.ndarray):
                d = from_numpy(a.dtype)
                if d is None:
                    raise LaunchError(f"argument '{p.name}': unsupported dtype {a.dtype}")
                dtype, align, count = d.name, alignment_of(a.__array_interface__["data"][0]), a.size
            elif describe:
                ptr, dtype = device_pointer(a, p.name)
                align, count = alignment_of(ptr), extent_bytes(a) // DTYPES[dtype].itemsize
            else:
                raise LaunchError(
                    f"argument '{p.name}': the interpreter runs on NumPy arrays, got {_what(a)}; "
                    "copy it to the host first (cupy: x.get(), torch: x.cpu().numpy())"
                )
            if p.dtype is not None and dtype != p.dtype.name:
                raise self._dtype_error(p, dtype)
            key += [dtype, align]
            big = big or count > INDEX_LIMIT
        scalars, big_scalar = self._scalars(args)
        key.extend(scalars)
        key.extend(constexprs[n] for n in self.constexpr_names)
        key.append(big or big_scalar)
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


def _slot(p: ParamSpec) -> tuple:
    """What the hot path needs of a parameter: (name, dtype name or NumPy type, lo, hi).
    lo is None for pointers and False for float scalars."""
    if p.kind == "pointer":
        return (p.name, p.dtype.name if p.dtype else None, None, None)
    if p.dtype.is_int or p.dtype.kind == "b":
        lo, hi = _range(p.dtype)
        return (p.name, p.dtype.np.type, lo, hi)
    return (
        p.name,
        (lambda v, d=p.dtype: scalar_value(v, d)) if p.dtype.name == "bf16" else p.dtype.np.type,
        False,
        None,
    )


_INDEX_BYTES = {name: INDEX_LIMIT * d.itemsize for name, d in DTYPES.items()}


def scalar_value(value: Any, dtype: DType) -> Any:
    """A Python number as the exactly typed NumPy scalar the CUDA parameter expects."""
    if dtype.name == "bf16":
        return np.array(value, dtype=dtype.np).view(np.uint16)[()]
    return dtype.np.type(value)


def _range(dtype: DType) -> tuple[int, int]:
    if dtype.kind == "u":
        return 0, (1 << dtype.bits) - 1
    if dtype.kind == "b":
        return 0, 1
    return -(1 << (dtype.bits - 1)), (1 << (dtype.bits - 1)) - 1


def _what(a: Any) -> str:
    t = type(a)
    return t.__name__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__name__}"
