"""The kernel library as PyTorch operators: ``torch.library`` custom ops in the ``teeny_tx``
namespace, and the functional forms a model calls.

Input: torch tensors. CUDA tensors launch the library's kernels on the GPU, on torch's current
stream; CPU tensors run the same kernels on the NumPy interpreter (zero-copy NumPy views in,
tensors out). Output: torch tensors. Every op has a fake (meta) implementation, so
``torch.compile(fullgraph=True)`` traces it without a graph break, and autograd through the
library's backward kernels (``torch.library.register_autograd``), so ``loss.backward()`` works
and ``torch.library.opcheck`` / ``torch.autograd.gradcheck`` pass.

Ops (``torch.ops.teeny_tx.<name>``): softmax, log_softmax and their backwards; layer_norm,
rms_norm and their backwards; dropout; cross_entropy; matmul, bmm, linear (fused bias and
activation epilogue) and linear_backward; and, from :mod:`teeny_tx.library.fused`, embedding,
add_layer_norm, add_rms_norm, gelu, swiglu, activation backwards and the AdamW step.

Rows are the last dimension: row ops take any shape ``[..., C]`` and any strides (a view whose
last dimension is not contiguous is copied once). CUDA graphs: each op compiles, loads and
(for products) autotunes its kernels at its first call for a shape; run it once before
capturing (torch's own rule for warm-up), or the capture fails with a :class:`TeenyError`
that says so.
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch.utils._python_dispatch import _get_current_dispatch_mode as _dispatch_mode

from ..dtypes import DTYPES
from ..errors import TeenyError
from ..runtime.streams import torch_stream_pointer
from . import fused, linalg, nn
from .inductor_fallbacks import fake, track

LIB = "teeny_tx"
_BF16 = DTYPES["bf16"].np

# ---------------------------------------------------------------- tensors <-> arrays


def to_numpy(t: torch.Tensor) -> np.ndarray:
    """A NumPy view of a CPU tensor (same memory and strides; bf16 as ml_dtypes.bfloat16)."""
    t = t.detach()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(_BF16)
    return t.numpy()


def from_numpy(a: Any) -> Any:
    """A CPU tensor sharing ``a``'s memory (bf16 included); anything else unchanged."""
    if not isinstance(a, np.ndarray):
        return a
    if not a.flags.c_contiguous:  # (np.ascontiguousarray would make a 0-d array 1-d)
        a = a.copy()
    if a.dtype == _BF16:
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(a)


def current_stream(device: torch.device) -> int:
    """torch's current stream on ``device`` as a raw handle. The one place this layer picks a
    stream: remove it once launches default to the current stream of torch tensors."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    return torch_stream_pointer(index)


def on_device(index: int) -> Any:
    """The device guard of one launch: CuPy's current device made ``index`` (the tensors'
    device) for its duration; nothing to do when it already is. The launchers of the library
    launch on CuPy's current device, so every CUDA launch of this layer runs under this."""
    import cupy

    if cupy.cuda.runtime.getDevice() == index:
        return contextlib.nullcontext()
    return cupy.cuda.Device(index)


def capture_error(name: str, err: Exception) -> TeenyError:
    return TeenyError(
        f"teeny_tx.{name} failed during CUDA graph capture ({type(err).__name__}: {err}). "
        "An op compiles, loads and autotunes its kernels at its first call for each shape and "
        "dtype; run it once on the capturing device before torch.cuda.graph(...)"
    )


def run(name: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``fn`` (an array-level library function) on torch tensors: on the GPU for CUDA tensors,
    else on the interpreter with NumPy views; outputs come back as tensors."""
    first = next(a for a in args if isinstance(a, torch.Tensor))
    if any(isinstance(a, torch.Tensor) and a.is_neg() for a in args):
        # a negative-bit view (torch._neg_view) stores -x; the kernels read memory
        args = tuple(a.resolve_neg() if isinstance(a, torch.Tensor) else a for a in args)
    if first.is_cuda:
        with on_device(first.get_device()):
            if not torch.cuda.is_current_stream_capturing():
                return fn(*args, **kwargs)
            try:
                return fn(*args, **kwargs)
            except Exception as err:  # noqa: BLE001 - re-raised with the capture rule
                raise capture_error(name, err) from err
    arrays = [to_numpy(a) if isinstance(a, torch.Tensor) else a for a in args]
    out = fn(*arrays, interpret=True, **kwargs)
    if isinstance(out, tuple):
        return tuple(from_numpy(o) for o in out)
    return from_numpy(out)


def rows(x: torch.Tensor) -> torch.Tensor:
    """``x`` as [rows, C] with a contiguous last dimension (a view when strides allow)."""
    x2 = x.reshape(math.prod(x.shape[:-1]), x.shape[-1]) if x.dim() != 2 else x
    return x2 if x2.stride(-1) == 1 or x2.shape[-1] <= 1 else x2.contiguous()


def stat_dtype(x: torch.Tensor) -> torch.dtype:
    """The dtype of the statistics (mean, rstd, lse, the loss) an op returns for ``x``: the
    kernels' compute type, float64 for float64 data, else float32."""
    return torch.float64 if x.dtype == torch.float64 else torch.float32


def dense(g: torch.Tensor) -> torch.Tensor:
    """A gradient as a kernel reads it: autograd may hand an expanded (stride 0) tensor."""
    return g if g.is_contiguous() else g.contiguous()


def eager(args: tuple) -> bool:
    """Whether a call may take an op's eager path: not while torch.compile traces, nor under a
    dispatch mode, a torch-function mode or a functorch transform, and only on plain tensors
    and parameters (no FakeTensor or other subclass). Everything else takes the dispatcher."""
    if (
        torch.compiler.is_compiling()
        or _dispatch_mode() is not None
        or torch._C._is_torch_function_mode_enabled()
        or torch._C._functorch.peek_interpreter_stack() is not None
    ):
        return False
    return all(type(a) in _PLAIN and not a.is_meta for a in args if isinstance(a, torch.Tensor))


_PLAIN = (torch.Tensor, torch.nn.Parameter)  # (a Parameter dispatches as a plain tensor)


class Op:
    """One ``teeny_tx`` op: ``custom_op`` is its ``torch.library`` custom op (what
    torch.compile, ``opcheck``, fake tensors and dispatch modes see, and what
    ``torch.ops.teeny_tx.<name>`` calls), ``impl`` its implementation.

    Called in plain eager code (see :func:`eager`), it skips the dispatcher: ``impl`` runs
    directly, inside a ``torch.autograd.Function`` made of the same ``setup_context`` and
    backward that :meth:`register_autograd` gave the custom op, so gradients are the same
    computation. Why: a custom op's Python dispatch (autograd key, redispatch, backend
    wrapper) cost about 100 µs of host time per call on the H200's host, more than most of
    the kernels it launches in a model's step."""

    def __init__(self, custom_op: Any, impl: Callable[..., Any]):
        self.custom_op, self.impl = custom_op, impl
        self.function: Any = None  # the autograd.Function of the eager path, once registered
        functools.update_wrapper(self, impl)

    def register_fake(self, fn: Callable) -> Callable:
        return self.custom_op.register_fake(fn)

    def register_autograd(self, backward: Callable, *, setup_context: Callable) -> None:
        self.custom_op.register_autograd(backward, setup_context=setup_context)
        impl = self.impl

        def forward(ctx: Any, *args: Any) -> Any:
            out = impl(*args)
            setup_context(ctx, args, out)
            return out

        self.function = type(
            f"{self.custom_op._name}_function",
            (torch.autograd.Function,),
            {"forward": staticmethod(forward), "backward": staticmethod(backward)},
        )

    def __call__(self, *args: Any) -> Any:
        if not eager(args):
            return self.custom_op(*args)
        if self.function is not None and torch.is_grad_enabled():
            return self.function.apply(*args)
        return self.impl(*args)


def library_op(name: str) -> Callable[[Callable], Op]:
    """A decorator: ``fn`` as the custom op teeny_tx::name (tracked, with its Python twin)."""

    def make(fn: Callable) -> Op:
        return Op(track(torch.library.custom_op(f"{LIB}::{name}", mutates_args=())(fn)), fn)

    return make


# ---------------------------------------------------------------- index checks

_CHECKS = {"indices": True}


def set_index_checks(enabled: bool) -> bool:
    """Whether ``cross_entropy`` checks its targets and ``embedding`` its indices (default
    True), as torch does: a target outside [0, C) that is not ``ignore_index``, or an index
    outside [0, num_embeddings), raises an ``IndexError`` (a :class:`TeenyError`) instead of
    giving NaN or reading outside the table. The check reads the indices on the host (on a
    GPU, one synchronisation per call), and is skipped during CUDA-graph capture, where
    nothing may synchronise. ``set_index_checks(False)`` turns it off for speed. Returns the
    setting it replaces."""
    old, _CHECKS["indices"] = _CHECKS["indices"], bool(enabled)
    return old


class IndexOutOfRange(TeenyError, IndexError):
    """A target or index outside its range (torch raises IndexError there too)."""


def check_range(fn: str, what: str, t: torch.Tensor, size: int, ignore: int | None) -> None:
    if not _CHECKS["indices"] or t.numel() == 0:
        return
    if t.is_cuda and torch.cuda.is_current_stream_capturing():
        return
    bad = (t < 0) | (t >= size)
    if ignore is not None:
        bad &= t != ignore
    if bool(bad.any()):
        value = int(t[bad].reshape(-1)[0])
        allowed = f"[0, {size})" + ("" if ignore is None else f" or ignore_index={ignore}")
        raise IndexOutOfRange(
            f"teeny_tx.torch.{fn}: {what} {value} is out of range {allowed} (turn this check "
            "off with teeny_tx.torch.set_index_checks(False))"
        )


# ---------------------------------------------------------------- softmax, log_softmax


@library_op("softmax")
def softmax_op(x: torch.Tensor) -> torch.Tensor:
    return run("softmax", nn.softmax, rows(x)).view(x.shape)


@library_op("log_softmax")
def log_softmax_op(x: torch.Tensor) -> torch.Tensor:
    return run("log_softmax", nn.log_softmax, rows(x)).view(x.shape)


@library_op("softmax_backward")
def softmax_backward_op(y: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
    return run("softmax_backward", nn.softmax_backward, rows(y), rows(dy)).view(y.shape)


@library_op("log_softmax_backward")
def log_softmax_backward_op(y: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
    return run("log_softmax_backward", nn.log_softmax_backward, rows(y), rows(dy)).view(y.shape)


def _like(x: torch.Tensor, *_: Any) -> torch.Tensor:
    return x.new_empty(x.shape)


for _forward, _backward in (
    (softmax_op, softmax_backward_op),
    (log_softmax_op, log_softmax_backward_op),
):
    fake(_forward)(_like)
    fake(_backward)(_like)


def _save_output(ctx, inputs, output) -> None:
    ctx.save_for_backward(output)


def _softmax_grad(ctx, dy):
    (y,) = ctx.saved_tensors
    return softmax_backward_op(y, dense(dy))


def _log_softmax_grad(ctx, dy):
    (y,) = ctx.saved_tensors
    return log_softmax_backward_op(y, dense(dy))


softmax_op.register_autograd(_softmax_grad, setup_context=_save_output)
log_softmax_op.register_autograd(_log_softmax_grad, setup_context=_save_output)


# ---------------------------------------------------------------- layer norm, RMS norm


@library_op("layer_norm")
def layer_norm_op(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    y, mean, rstd = run("layer_norm", nn.layer_norm, rows(x), weight, bias, eps)
    return y.view(x.shape), mean, rstd


@fake(layer_norm_op)
def _(x, weight, bias, eps):
    n = x.numel() // x.shape[-1] if x.shape[-1] else 0
    stat = x.new_empty((n,), dtype=stat_dtype(x))
    return x.new_empty(x.shape), stat, stat.new_empty((n,))


@library_op("layer_norm_backward")
def layer_norm_backward_op(
    dy: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, mean: torch.Tensor, rstd: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    dx, dw, db = run(
        "layer_norm_backward", nn.layer_norm_backward, rows(dy), rows(x), weight, mean, rstd
    )
    return dx.view(x.shape), dw, db


@fake(layer_norm_backward_op)
def _(dy, x, weight, mean, rstd):
    return x.new_empty(x.shape), weight.new_empty(weight.shape), weight.new_empty(weight.shape)


def _layer_norm_setup(ctx, inputs, output) -> None:
    x, weight, _, _ = inputs
    _, mean, rstd = output
    ctx.save_for_backward(x, weight, mean, rstd)
    ctx.mark_non_differentiable(mean, rstd)


def _layer_norm_grad(ctx, dy, _dmean, _drstd):
    x, weight, mean, rstd = ctx.saved_tensors
    dx, dw, db = layer_norm_backward_op(dense(dy), x, weight, mean, rstd)
    return dx, dw, db, None


layer_norm_op.register_autograd(_layer_norm_grad, setup_context=_layer_norm_setup)


@library_op("rms_norm")
def rms_norm_op(
    x: torch.Tensor, weight: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    y, rstd = run("rms_norm", nn.rms_norm, rows(x), weight, eps)
    return y.view(x.shape), rstd


@fake(rms_norm_op)
def _(x, weight, eps):
    n = x.numel() // x.shape[-1] if x.shape[-1] else 0
    return x.new_empty(x.shape), x.new_empty((n,), dtype=stat_dtype(x))


@library_op("rms_norm_backward")
def rms_norm_backward_op(
    dy: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, rstd: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    dx, dw = run("rms_norm_backward", nn.rms_norm_backward, rows(dy), rows(x), weight, rstd)
    return dx.view(x.shape), dw


@fake(rms_norm_backward_op)
def _(dy, x, weight, rstd):
    return x.new_empty(x.shape), weight.new_empty(weight.shape)


def _rms_norm_setup(ctx, inputs, output) -> None:
    x, weight, _ = inputs
    ctx.save_for_backward(x, weight, output[1])
    ctx.mark_non_differentiable(output[1])


def _rms_norm_grad(ctx, dy, _drstd):
    x, weight, rstd = ctx.saved_tensors
    dx, dw = rms_norm_backward_op(dense(dy), x, weight, rstd)
    return dx, dw, None


rms_norm_op.register_autograd(_rms_norm_grad, setup_context=_rms_norm_setup)


# ---------------------------------------------------------------- dropout


@library_op("dropout")
def dropout_op(x: torch.Tensor, p: float, seed: torch.Tensor) -> torch.Tensor:
    """``seed``: an int64 tensor of one element on x's device (read on the device, so a CUDA
    graph replays with whatever seed the tensor holds)."""
    return run("dropout", fused.dropout, x.contiguous(), p, seed).view(x.shape)


@library_op("dropout_backward")
def dropout_backward_op(dy: torch.Tensor, p: float, seed: torch.Tensor) -> torch.Tensor:
    return run("dropout_backward", fused.dropout_backward, dy.contiguous(), p, seed).view(dy.shape)


fake(dropout_op)(_like)
fake(dropout_backward_op)(_like)


def _dropout_setup(ctx, inputs, output) -> None:
    ctx.p = inputs[1]
    ctx.save_for_backward(inputs[2])


def _dropout_grad(ctx, dy):
    (seed,) = ctx.saved_tensors
    return dropout_backward_op(dense(dy), ctx.p, seed), None, None


dropout_op.register_autograd(_dropout_grad, setup_context=_dropout_setup)


# ---------------------------------------------------------------- cross-entropy


@library_op("cross_entropy")
def cross_entropy_op(
    logits: torch.Tensor, targets: torch.Tensor, ignore_index: int
) -> tuple[torch.Tensor, torch.Tensor]:
    check_range("cross_entropy", "target", targets, logits.shape[-1], ignore_index)
    return run("cross_entropy", nn.cross_entropy, rows(logits), targets.contiguous(), ignore_index)


@fake(cross_entropy_op)
def _(logits, targets, ignore_index):
    stat = logits.new_empty((logits.shape[0],), dtype=stat_dtype(logits))
    return logits.new_empty((), dtype=stat.dtype), stat


@library_op("cross_entropy_backward")
def cross_entropy_backward_op(
    logits: torch.Tensor, targets: torch.Tensor, lse: torch.Tensor, ignore_index: int
) -> torch.Tensor:
    return run(
        "cross_entropy_backward",
        nn.cross_entropy_backward,
        rows(logits),
        targets.contiguous(),
        lse,
        ignore_index,
    )


@fake(cross_entropy_backward_op)
def _(logits, targets, lse, ignore_index):
    return logits.new_empty(logits.shape)


def _cross_entropy_setup(ctx, inputs, output) -> None:
    logits, targets, ignore_index = inputs
    ctx.ignore_index = ignore_index
    ctx.save_for_backward(logits, targets, output[1])
    ctx.mark_non_differentiable(output[1])


def _cross_entropy_grad(ctx, dloss, _dlse):
    logits, targets, lse = ctx.saved_tensors
    # the kernel scales by 1 / count on the device; dloss (a tensor) scales after, so nothing
    # waits for the device to read it
    dlogits = cross_entropy_backward_op(logits, targets, lse, ctx.ignore_index)
    return dlogits * dloss.to(dlogits.dtype), None, None


cross_entropy_op.register_autograd(_cross_entropy_grad, setup_context=_cross_entropy_setup)


# ---------------------------------------------------------------- matrix products


@library_op("matmul")
def matmul_op(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return run("matmul", linalg.matmul, a, b)


@fake(matmul_op)
def _(a, b):
    return a.new_empty((a.shape[0], b.shape[1]))


def _save_inputs(ctx, inputs, output) -> None:
    ctx.save_for_backward(*inputs)


def _matmul_grad(ctx, dc):
    a, b = ctx.saved_tensors
    dc = dense(dc)
    da = matmul_op(dc, b.t()) if ctx.needs_input_grad[0] else None
    db = matmul_op(a.t(), dc) if ctx.needs_input_grad[1] else None
    return da, db


matmul_op.register_autograd(_matmul_grad, setup_context=_save_inputs)


@library_op("bmm")
def bmm_op(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return run("bmm", linalg.bmm, a, b)


@fake(bmm_op)
def _(a, b):
    return a.new_empty((a.shape[0], a.shape[1], b.shape[2]))


def _bmm_grad(ctx, dc):
    a, b = ctx.saved_tensors
    dc = dense(dc)
    da = bmm_op(dc, b.transpose(1, 2)) if ctx.needs_input_grad[0] else None
    db = bmm_op(a.transpose(1, 2), dc) if ctx.needs_input_grad[1] else None
    return da, db


bmm_op.register_autograd(_bmm_grad, setup_context=_save_inputs)


def _activation(activation: str) -> str | None:
    return activation or None


@library_op("linear")
def linear_op(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, activation: str
) -> torch.Tensor:
    """y = activation(x @ weight.T + bias) for x [T, in]; activation '' (none), 'gelu',
    'gelu_tanh', 'relu' or 'silu', fused into the product's epilogue."""
    return run("linear", linalg.linear, x, weight, bias, _activation(activation))


@fake(linear_op)
def _(x, weight, bias, activation):
    return x.new_empty((x.shape[0], weight.shape[0]))


@library_op("linear_backward")
def linear_backward_op(
    dy: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, need_bias_grad: bool
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    dx, dw, db = run("linear_backward", linalg.linear_backward, dy, x, weight, need_bias_grad)
    if db is None:  # a custom op returns tensors: an empty one stands for "no bias"
        db = dw.new_empty((0,))
    return dx, dw, db


@fake(linear_backward_op)
def _(dy, x, weight, need_bias_grad):
    db = weight.new_empty((weight.shape[0],) if need_bias_grad else (0,))
    return x.new_empty(x.shape), weight.new_empty(weight.shape), db


def _linear_setup(ctx, inputs, output) -> None:
    x, weight, bias, activation = inputs
    ctx.activation = activation
    ctx.has_bias = bias is not None
    ctx.save_for_backward(x, weight, bias)


def _linear_grad(ctx, dy):
    x, weight, bias = ctx.saved_tensors
    dy = dense(dy)
    if ctx.activation:  # the pre-activation is recomputed, not kept from the forward
        z = linear_op(x, weight, bias, "")
        dy = activation_backward_op(z, dy, ctx.activation)
    dx, dw, db = linear_backward_op(dy, x, weight, ctx.has_bias)
    return dx, dw, db if ctx.has_bias else None, None


linear_op.register_autograd(_linear_grad, setup_context=_linear_setup)


# ---------------------------------------------------------------- kernels of teeny_tx.library.fused


@library_op("embedding")
def embedding_op(weight: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
    """weight [V, D] rows picked by ``indices`` (int64, any shape): [*indices.shape, D]."""
    flat = indices.reshape(-1).contiguous()
    check_range("embedding", "index", flat, weight.shape[0], None)
    out = run("embedding", fused.embedding, weight.contiguous(), flat)
    return out.view(*indices.shape, weight.shape[1])


@fake(embedding_op)
def _(weight, indices):
    return weight.new_empty((*indices.shape, weight.shape[1]))


@library_op("embedding_backward")
def embedding_backward_op(dy: torch.Tensor, indices: torch.Tensor, num: int) -> torch.Tensor:
    flat = indices.reshape(-1).contiguous()
    return run("embedding_backward", fused.embedding_backward, rows(dy), flat, num)


@fake(embedding_backward_op)
def _(dy, indices, num):
    return dy.new_empty((num, dy.shape[-1]))


def _embedding_setup(ctx, inputs, output) -> None:
    weight, indices = inputs
    ctx.num = weight.shape[0]
    ctx.save_for_backward(indices)


def _embedding_grad(ctx, dy):
    (indices,) = ctx.saved_tensors
    return embedding_backward_op(dense(dy), indices, ctx.num), None


embedding_op.register_autograd(_embedding_grad, setup_context=_embedding_setup)


@library_op("add_layer_norm")
def add_layer_norm_op(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(y, h, mean, rstd): h = x + residual, y = layer_norm(h); one pass over the rows."""
    y, h, mean, rstd = run(
        "add_layer_norm", fused.add_layer_norm, rows(x), rows(residual), weight, bias, eps
    )
    return y.view(x.shape), h.view(x.shape), mean, rstd


@fake(add_layer_norm_op)
def _(x, residual, weight, bias, eps):
    n = x.numel() // x.shape[-1] if x.shape[-1] else 0
    stat = x.new_empty((n,), dtype=stat_dtype(x))
    return x.new_empty(x.shape), x.new_empty(x.shape), stat, stat.new_empty((n,))


@library_op("add_layer_norm_backward")
def add_layer_norm_backward_op(
    dy: torch.Tensor,
    dh: torch.Tensor,
    h: torch.Tensor,
    weight: torch.Tensor,
    mean: torch.Tensor,
    rstd: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(dh_total, dweight, dbias): dh_total = layer_norm's dx + dh, the gradient of both x and
    residual."""
    dx, dw, db = run(
        "add_layer_norm_backward",
        fused.add_layer_norm_backward,
        rows(dy),
        rows(dh),
        rows(h),
        weight,
        mean,
        rstd,
    )
    return dx.view(h.shape), dw, db


@fake(add_layer_norm_backward_op)
def _(dy, dh, h, weight, mean, rstd):
    return h.new_empty(h.shape), weight.new_empty(weight.shape), weight.new_empty(weight.shape)


def _add_norm_setup(ctx, inputs, output) -> None:
    weight = inputs[2]
    _, h, *stats = output
    ctx.save_for_backward(h, weight, *stats)
    ctx.mark_non_differentiable(*stats)


def _add_layer_norm_grad(ctx, dy, dh, _dmean, _drstd):
    h, weight, mean, rstd = ctx.saved_tensors
    dy = dense(dy) if dy is not None else torch.zeros_like(h)
    dh = dense(dh) if dh is not None else torch.zeros_like(h)
    dx, dw, db = add_layer_norm_backward_op(dy, dh, h, weight, mean, rstd)
    return dx, dx, dw, db, None


add_layer_norm_op.register_autograd(_add_layer_norm_grad, setup_context=_add_norm_setup)


@library_op("add_rms_norm")
def add_rms_norm_op(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(y, h, rstd): h = x + residual, y = rms_norm(h); one pass over the rows."""
    y, h, rstd = run("add_rms_norm", fused.add_rms_norm, rows(x), rows(residual), weight, eps)
    return y.view(x.shape), h.view(x.shape), rstd


@fake(add_rms_norm_op)
def _(x, residual, weight, eps):
    n = x.numel() // x.shape[-1] if x.shape[-1] else 0
    return x.new_empty(x.shape), x.new_empty(x.shape), x.new_empty((n,), dtype=stat_dtype(x))


@library_op("add_rms_norm_backward")
def add_rms_norm_backward_op(
    dy: torch.Tensor, dh: torch.Tensor, h: torch.Tensor, weight: torch.Tensor, rstd: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    dx, dw = run(
        "add_rms_norm_backward",
        fused.add_rms_norm_backward,
        rows(dy),
        rows(dh),
        rows(h),
        weight,
        rstd,
    )
    return dx.view(h.shape), dw


@fake(add_rms_norm_backward_op)
def _(dy, dh, h, weight, rstd):
    return h.new_empty(h.shape), weight.new_empty(weight.shape)


def _add_rms_norm_grad(ctx, dy, dh, _drstd):
    h, weight, rstd = ctx.saved_tensors
    dy = dense(dy) if dy is not None else torch.zeros_like(h)
    dh = dense(dh) if dh is not None else torch.zeros_like(h)
    dx, dw = add_rms_norm_backward_op(dy, dh, h, weight, rstd)
    return dx, dx, dw, None


add_rms_norm_op.register_autograd(_add_rms_norm_grad, setup_context=_add_norm_setup)


@library_op("activation")
def activation_op(x: torch.Tensor, activation: str) -> torch.Tensor:
    """'gelu' (exact), 'gelu_tanh', 'relu' or 'silu' elementwise, any shape."""
    return run("activation", fused.activation, x.contiguous(), activation).view(x.shape)


@library_op("activation_backward")
def activation_backward_op(x: torch.Tensor, dy: torch.Tensor, activation: str) -> torch.Tensor:
    out = run(
        "activation_backward", fused.activation_backward, x.contiguous(), dense(dy), activation
    )
    return out.view(x.shape)


fake(activation_op)(_like)
fake(activation_backward_op)(_like)


def _activation_setup(ctx, inputs, output) -> None:
    ctx.activation = inputs[1]
    ctx.save_for_backward(inputs[0])


def _activation_grad(ctx, dy):
    (x,) = ctx.saved_tensors
    return activation_backward_op(x, dy, ctx.activation), None


activation_op.register_autograd(_activation_grad, setup_context=_activation_setup)


@library_op("swiglu")
def swiglu_op(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """silu(gate) * up elementwise (gate and up of one shape)."""
    return run("swiglu", fused.swiglu, gate.contiguous(), up.contiguous()).view(gate.shape)


fake(swiglu_op)(_like)


@library_op("swiglu_backward")
def swiglu_backward_op(
    gate: torch.Tensor, up: torch.Tensor, dy: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    dg, du = run(
        "swiglu_backward", fused.swiglu_backward, gate.contiguous(), up.contiguous(), dense(dy)
    )
    return dg.view(gate.shape), du.view(gate.shape)


@fake(swiglu_backward_op)
def _(gate, up, dy):
    return gate.new_empty(gate.shape), gate.new_empty(gate.shape)


def _swiglu_grad(ctx, dy):
    gate, up = ctx.saved_tensors
    return swiglu_backward_op(gate, up, dy)


swiglu_op.register_autograd(_swiglu_grad, setup_context=_save_inputs)


# ---------------------------------------------------------------- attention
#
# teeny_tx/library/sdpa.py: the ops teeny_tx::attention and teeny_tx::attention_backward
# (kernels/attention.c), scaled_dot_product_attention, attention and flash_attn_func.
# --------------------------------------------------------------------------------------------


# ---------------------------------------------------------------- functional forms


def _along(op: Any, x: torch.Tensor, dim: int) -> torch.Tensor:
    """``op`` (a row op of the last dimension) along ``dim`` of ``x``; a 0-d ``x`` is one row
    of one element (torch's rule: dim 0 or -1)."""
    if x.dim() == 0:
        if dim not in (0, -1):
            raise IndexError(
                f"Dimension out of range (expected to be in range of [-1, 0], but got {dim})"
            )
        return op(x.reshape(1)).reshape(())
    if dim in (-1, x.dim() - 1):
        return op(x)
    return op(x.movedim(dim, -1)).movedim(-1, dim)


def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """torch.softmax(x, dim) through kernels/softmax.c."""
    return _along(softmax_op, x, dim)


def log_softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """torch.log_softmax(x, dim) through kernels/softmax.c."""
    return _along(log_softmax_op, x, dim)


def _last_dim(normalized_shape: Any, x: torch.Tensor, fn: str) -> int:
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if x.dim() == 0:
        raise TeenyError(
            f"teeny_tx.torch.{fn} normalises the last dimension; a 0-d input has none "
            f"(normalized_shape {shape}); reshape it to [1] first"
        )
    if len(shape) != 1 or shape[0] != x.shape[-1]:
        raise TeenyError(
            f"teeny_tx.torch.{fn} normalises the last dimension only: normalized_shape must be "
            f"({x.shape[-1]},) for an input of shape {tuple(x.shape)}, got {shape}"
        )
    return shape[0]


def layer_norm(
    x: torch.Tensor,
    normalized_shape: Any,
    weight: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    eps: float = 1e-5,
) -> torch.Tensor:
    """F.layer_norm over the last dimension through kernels/layernorm.c."""
    n = _last_dim(normalized_shape, x, "layer_norm")
    weight = weight if weight is not None else x.new_ones(n)
    bias = bias if bias is not None else x.new_zeros(n)
    return layer_norm_op(x, weight, bias, eps)[0]


def rms_norm(
    x: torch.Tensor,
    normalized_shape: Any,
    weight: torch.Tensor | None = None,
    eps: float | None = 1e-6,
) -> torch.Tensor:
    """F.rms_norm over the last dimension through kernels/rmsnorm.c (eps None or left out:
    1e-6)."""
    n = _last_dim(normalized_shape, x, "rms_norm")
    weight = weight if weight is not None else x.new_ones(n)
    return rms_norm_op(x, weight, 1e-6 if eps is None else eps)[0]


def new_seed(device: torch.device | str) -> torch.Tensor:
    """A random int64 seed tensor [1] on ``device`` from torch's generator (traceable, and
    safe in CUDA-graph capture)."""
    return torch.randint(-(2**62), 2**62, (1,), dtype=torch.int64, device=device)


def dropout(
    x: torch.Tensor, p: float = 0.5, training: bool = True, seed: torch.Tensor | None = None
) -> torch.Tensor:
    """F.dropout through kernels/dropout.c: Philox of (seed, element index), the mask
    regenerated by the backward. ``seed``: an int64 tensor [1], default a new one."""
    if not training or p == 0.0:
        return x
    return dropout_op(x, float(p), new_seed(x.device) if seed is None else seed)


def cross_entropy(
    logits: torch.Tensor,
    targets: torch.Tensor,
    ignore_index: int = -100,
    reduction: str = "mean",
) -> torch.Tensor:
    """F.cross_entropy(logits [N, C], targets [N] int64), mean over the rows not ignored."""
    if reduction != "mean":
        raise TeenyError(f"teeny_tx.torch.cross_entropy takes reduction='mean', got {reduction!r}")
    return cross_entropy_op(
        logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index
    )[0]


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a @ b for 2-D [M, K] @ [K, N], or 3-D batches [B, M, K] @ [B, K, N]."""
    return bmm_op(a, b) if a.dim() == 3 else matmul_op(a, b)


def linear(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    activation: str | None = None,
) -> torch.Tensor:
    """activation(F.linear(x, weight, bias)) for x [..., in]; the bias and activation run in
    the product's epilogue."""
    if weight.dim() != 2 or x.dim() == 0 or x.shape[-1] != weight.shape[1]:
        raise TeenyError(
            f"teeny_tx.torch.linear: x {tuple(x.shape)} and weight {tuple(weight.shape)} do not "
            "match: weight is [out_features, in_features], x [..., in_features]"
        )
    if activation not in _ACTIVATIONS:
        raise TeenyError(
            f"teeny_tx.torch.linear: activation must be one of {sorted(_ACTIVATIONS, key=str)}, "
            f"got {activation!r}"
        )
    if x.shape[-1] == 0:  # no products to take: torch's zeros (+ bias), then the activation
        z = x.new_zeros((*x.shape[:-1], weight.shape[0])) + (0.0 * weight.sum())
        z = z if bias is None else z + bias
        return z if not activation else activation_op(z, activation)
    y = linear_op(x.reshape(-1, x.shape[-1]), weight, bias, activation or "")
    return y.view(*x.shape[:-1], weight.shape[0])


_ACTIVATIONS = (None, "", "gelu", "gelu_tanh", "relu", "silu")


def embedding(indices: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """F.embedding(indices, weight): the backward scatters with atomics (kernels/embedding.c)."""
    return embedding_op(weight, indices)


def add_layer_norm(
    x: torch.Tensor,
    residual: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor,
    eps: float = 1e-5,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(layer_norm(x + residual), x + residual), in one pass (kernels/add_norm.c)."""
    y, h, _, _ = add_layer_norm_op(x, residual, weight, bias, eps)
    return y, h


def add_rms_norm(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6
) -> tuple[torch.Tensor, torch.Tensor]:
    """(rms_norm(x + residual), x + residual), in one pass (kernels/add_norm.c)."""
    y, h, _ = add_rms_norm_op(x, residual, weight, eps)
    return y, h


def gelu(x: torch.Tensor, approximate: str = "none") -> torch.Tensor:
    """F.gelu(x, approximate) (kernels/gelu.c, forward and backward); approximate 'none' or
    'tanh', as torch."""
    if approximate not in ("none", "tanh"):
        raise TeenyError(
            f"teeny_tx.torch.gelu: approximate must be 'none' or 'tanh', got {approximate!r}"
        )
    return activation_op(x, "gelu_tanh" if approximate == "tanh" else "gelu")


def silu(x: torch.Tensor) -> torch.Tensor:
    return activation_op(x, "silu")


def relu(x: torch.Tensor) -> torch.Tensor:
    return activation_op(x, "relu")


def swiglu(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """F.silu(gate) * up (kernels/gelu.c)."""
    return swiglu_op(gate, up)
