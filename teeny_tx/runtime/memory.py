"""User arrays → (device address, dtype name) and byte extents, on every launch's hot path.

Input: a CuPy array, a PyTorch tensor, or anything exposing ``__cuda_array_interface__`` or
DLPack. Output: ``(pointer, dtype)`` where dtype is one of teeny_tx's names (``f32``, ``bf16``,
...), the pointer's alignment, and the bytes an array view spans. Host memory and foreign
objects raise :class:`~teeny_tx.errors.LaunchError` naming what was received.

Dispatch is one dict lookup on ``type(obj)``; an unseen type is classified once (duck typing,
torch is never imported here) and its reader is remembered.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, NoReturn

import cupy
import numpy

from teeny_tx.dtypes import DTYPES, TORCH_NAMES
from teeny_tx.errors import LaunchError

Reader = Callable[[Any], tuple[int, str]]
Extent = Callable[[Any], int]

NUMPY_NAMES: dict[numpy.dtype, str] = {d.np: d.name for d in DTYPES.values()}
# __cuda_array_interface__ typestrs; bf16 has none (it reads as the ambiguous "<V2").
_TYPESTR_NAMES: dict[str, str] = {
    dtype.str: name for dtype, name in NUMPY_NAMES.items() if name != "bf16"
} | {"|b1": "bool", "<b1": "bool"}
TORCH_DTYPE_NAMES: dict[Any, str] = {}  # torch.dtype → name, filled when the first tensor arrives

_DLPACK_CUDA = 2
_DLPACK_DEVICES = {
    1: "CPU",
    2: "CUDA",
    3: "CUDA pinned host",
    4: "OpenCL",
    10: "ROCm",
    13: "CUDA managed",
}

_HOST_HINT = "move it to the GPU with cupy.asarray(x) (or x.cuda() for a torch tensor)"


def device_pointer(obj: Any, param: str = "") -> tuple[int, str]:
    """(device address, dtype name) of a GPU array. ``param`` only names it in errors."""
    try:
        return (_readers.get(type(obj)) or _classify(obj)[0])(obj)
    except LaunchError as err:
        if not param:
            raise
        raise LaunchError(f"argument '{param}': {err}") from None


def extent_bytes(obj: Any) -> int:
    """Bytes from the lowest to one past the highest element of the view (0 when empty)."""
    return (_extents.get(type(obj)) or _classify(obj)[1])(obj)


def is_contiguous(obj: Any) -> bool:
    """Whether the array's elements are adjacent in C order (dimensions of length 1 and empty
    arrays are contiguous whatever their strides), for any array kind the readers take."""
    if isinstance(obj, (numpy.ndarray, cupy.ndarray)):
        return bool(obj.flags.c_contiguous)
    if _readers.get(type(obj)) is _torch_pointer or _is_torch(type(obj)):
        return bool(obj.is_contiguous())
    interface = getattr(obj, "__cuda_array_interface__", None)
    if interface is not None:
        strides = interface.get("strides")
        if strides is None:
            return True
        shape = interface["shape"]
        itemsize = int(interface["typestr"][2:])
        return _dense(shape, strides, itemsize)
    if hasattr(obj, "__dlpack__"):
        return bool(_dlpack_to_cupy(obj).flags.c_contiguous)
    return True


def _dense(shape: Any, strides: Any, itemsize: int) -> bool:
    if 0 in shape:
        return True
    step = itemsize
    for size, stride in zip(reversed(shape), reversed(strides), strict=True):
        if size != 1 and stride != step:
            return False
        step *= size
    return True


def alignment_of(ptr: int) -> int:
    """The largest power of two, at most 16, dividing ``ptr`` (16 for a null pointer)."""
    return _ALIGNMENTS[ptr & 15]


# Index: the pointer's low four bits; value: the largest power of two (<= 16) dividing them.
_ALIGNMENTS = tuple(16 if low == 0 else low & -low for low in range(16))


def describe(obj: Any) -> str:
    """'module.Type (dtype D, shape S)' for error messages."""
    kind = type(obj)
    module = kind.__module__
    text = kind.__qualname__ if module == "builtins" else f"{module}.{kind.__qualname__}"
    details = [
        f"{field} {getattr(obj, field)}"
        for field in ("dtype", "shape")
        if _has_plain_attr(obj, field)
    ]
    return f"{text} ({', '.join(details)})" if details else text


def _has_plain_attr(obj: Any, field: str) -> bool:
    try:
        value = getattr(obj, field)
    except Exception:  # noqa: BLE001 - a failing property just is not shown
        return False
    return not callable(value)


# --- readers, one per kind of array -------------------------------------------------------


def _cupy_pointer(array: cupy.ndarray) -> tuple[int, str]:
    name = NUMPY_NAMES.get(array.dtype)
    if name is None:
        _unsupported_dtype(array, array.dtype)
    return array.data.ptr, name


def _cupy_extent(array: cupy.ndarray) -> int:
    # _c_contiguous is CuPy's cached flag (array.flags builds an object: 8x slower).
    if array._c_contiguous:
        return array.nbytes
    return _span(array.shape, array.strides, array.itemsize)


def _torch_pointer(tensor: Any) -> tuple[int, str]:
    _seen_torch(type(tensor))
    if not tensor.is_cuda:
        raise LaunchError(f"host memory: got a CPU torch tensor {describe(tensor)}; {_HOST_HINT}")
    name = TORCH_DTYPE_NAMES.get(tensor.dtype) or _torch_name(tensor)
    return tensor.data_ptr(), name


# torch.Tensor, once a tensor has been seen (torch is never imported here): the launch binder's
# fast path compares argument types against TORCH_TENSOR[0].
TORCH_TENSOR: list = [None]


def _seen_torch(kind: type) -> None:
    if TORCH_TENSOR[0] is None and kind.__name__ == "Tensor":
        TORCH_TENSOR[0] = kind


def _torch_name(tensor: Any) -> str:
    """Look a torch dtype up by its spelling once, then remember it by identity."""
    spelling = str(tensor.dtype).removeprefix("torch.")
    name = TORCH_NAMES.get(spelling)
    if name is None:
        _unsupported_dtype(tensor, tensor.dtype)
    TORCH_DTYPE_NAMES[tensor.dtype] = name
    return name


def _torch_extent(tensor: Any) -> int:
    size = tensor.element_size()
    if tensor.is_contiguous():
        return tensor.numel() * size
    return _span(tensor.shape, [step * size for step in tensor.stride()], size)


def _interface_pointer(obj: Any) -> tuple[int, str]:
    interface = obj.__cuda_array_interface__
    name = _TYPESTR_NAMES.get(interface["typestr"])
    if name is None:
        _unsupported_dtype(obj, interface["typestr"])
    return interface["data"][0], name


def _interface_extent(obj: Any) -> int:
    interface = obj.__cuda_array_interface__
    itemsize = int(interface["typestr"][2:])
    shape = interface["shape"]
    strides = interface.get("strides") or _contiguous_strides(shape, itemsize)
    return _span(shape, strides, itemsize)


def _dlpack_pointer(obj: Any) -> tuple[int, str]:
    return _cupy_pointer(_dlpack_to_cupy(obj))


def _dlpack_extent(obj: Any) -> int:
    return _cupy_extent(_dlpack_to_cupy(obj))


def _dlpack_to_cupy(obj: Any) -> cupy.ndarray:
    device_type = obj.__dlpack_device__()[0]
    if device_type != _DLPACK_CUDA:
        where = _DLPACK_DEVICES.get(int(device_type), f"device type {device_type}")
        raise LaunchError(f"{where} memory: got {describe(obj)} via DLPack; {_HOST_HINT}")
    return cupy.from_dlpack(obj)


def _host_array(obj: Any) -> Any:
    raise LaunchError(f"host memory: got {describe(obj)}; {_HOST_HINT}")


def _unrelated(obj: Any) -> Any:
    raise LaunchError(
        f"expected a GPU array (cupy.ndarray, torch CUDA tensor, __cuda_array_interface__ or "
        f"DLPack), got {describe(obj)}"
    )


def _unsupported_dtype(obj: Any, dtype: Any) -> NoReturn:
    supported = ", ".join(TORCH_NAMES.values())
    raise LaunchError(
        f"unsupported dtype {dtype} in {describe(obj)}; teeny_tx arrays hold {supported}"
    )


# --- classification of an unseen type ------------------------------------------------------


def _classify(obj: Any) -> tuple[Reader, Extent]:
    """Pick the reader and extent for ``obj``; remember them when the type alone decides."""
    kind = type(obj)
    for test, reader, extent in _KINDS:
        if test(kind):
            _readers[kind], _extents[kind] = reader, extent
            return reader, extent
    # Attributes set on the instance only: decide for this object, remember nothing.
    if hasattr(obj, "__cuda_array_interface__"):
        return _interface_pointer, _interface_extent
    if hasattr(obj, "__dlpack__") and hasattr(obj, "__dlpack_device__"):
        return _dlpack_pointer, _dlpack_extent
    return _unrelated, _unrelated


def _is_torch(kind: type) -> bool:
    return "torch" in sys.modules and issubclass(kind, sys.modules["torch"].Tensor)


def _has(*names: str) -> Callable[[type], bool]:
    return lambda kind: all(hasattr(kind, name) for name in names)


_KINDS: tuple[tuple[Callable[[type], bool], Reader, Extent], ...] = (
    (lambda kind: issubclass(kind, cupy.ndarray), _cupy_pointer, _cupy_extent),
    (_is_torch, _torch_pointer, _torch_extent),
    (lambda kind: issubclass(kind, numpy.ndarray), _host_array, _host_array),
    (lambda kind: issubclass(kind, numpy.generic), _unrelated, _unrelated),
    (_has("__cuda_array_interface__"), _interface_pointer, _interface_extent),
    (_has("__dlpack__", "__dlpack_device__"), _dlpack_pointer, _dlpack_extent),
    (_has("__array_interface__"), _host_array, _host_array),
    (_has("__array__"), _host_array, _host_array),
)

_readers: dict[type, Reader] = {cupy.ndarray: _cupy_pointer}
_extents: dict[type, Extent] = {cupy.ndarray: _cupy_extent}


# --- geometry --------------------------------------------------------------------------------


def span_bytes(shape: Any, strides: Any, itemsize: int) -> int:
    """Bytes from the lowest to one past the highest element of a view (0 when empty)."""
    return _span(shape, strides, itemsize)


def _span(shape: Any, strides: Any, itemsize: int) -> int:
    if 0 in shape:
        return 0
    pairs = zip(shape, strides, strict=True)
    return itemsize + sum((size - 1) * abs(stride) for size, stride in pairs)


def _contiguous_strides(shape: Any, itemsize: int) -> list[int]:
    strides, step = [], itemsize
    for size in reversed(shape):
        strides.append(step)
        step *= size
    return strides[::-1]
