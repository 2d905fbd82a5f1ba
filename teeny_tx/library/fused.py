"""The kernels a transformer needs beyond :mod:`teeny_tx.nn`: embedding, residual add fused with
layer norm or RMS norm, GELU / ReLU / SiLU and SwiGLU with their backwards, dropout with a
device-side seed, and the AdamW step.

Input: CuPy arrays or torch CUDA tensors (f16, bf16 or f32), or NumPy arrays with
``interpret=True`` (f64 too: these kernels compute in f64 for f64 data, which is what
``torch.autograd.gradcheck`` needs). Output: new arrays of the input's library on its device,
launched on the library's current stream (:class:`teeny_tx.nn`'s ``Arrays``), except
:func:`adamw_step`, which updates its arrays in place. Kernels: ``kernels/embedding.c``,
``add_norm.c``, ``gelu.c``, ``dropout.c`` (``dropout_seeded``) and ``adamw.c``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..activations import CODES
from ..dtypes import DTYPES, acc_dtype
from ..runtime.grid import cdiv
from . import plans as _plans
from .arrays import FLOATS, Arrays
from .loader import module
from .nn import PARTIAL_BLOCK_N, PARTIAL_BLOCK_P, norm_config, partial_programs
from .plans import Launch as _Launch
from .plans import plan_key as _key
from .plans import planned as _planned
from .plans import replay as _replay

ELEMENTWISE_BLOCK = 1024
EMBED_BLOCK_T, EMBED_BLOCK_D = 16, 128
_ROUND = {"f16": 1, "bf16": 2}  # add_norm.c's ROUND: h rounded before it is normalised
ACTIVATIONS = {n: c for n, c in CODES.items() if n is not None}  # kernels/gelu.c's ACT


def wide_dtype(dtype: str) -> str:
    """The dtype the kernels compute and keep statistics in for ``dtype`` data (acc_t)."""
    return acc_dtype([DTYPES[dtype]]).name


def _size(a: Any) -> int:
    return int(np.prod(a.shape))


def _contiguous(arrays: Arrays, a: Any, name: str) -> None:
    arrays.check_dtype(a, name, FLOATS)
    ok = a.is_contiguous() if arrays.kind == "torch" else a.flags.c_contiguous
    if not ok:
        raise arrays.error(f"{name} must be contiguous; copy it first")


def _elementwise(
    fn: str,
    kernel: str,
    named: dict[str, Any],
    outputs: int,
    interpret: bool,
    *scalars: Any,
    **constexprs: Any,
) -> tuple:
    plan = _replay(interpret, fn, tuple(named.values()), scalars, tuple(constexprs.items()))
    if plan is not None:
        return plan(*named.values())
    arrays = Arrays(fn, named, interpret)
    first_name, first = next(iter(named.items()))
    for name, a in named.items():
        _contiguous(arrays, a, name)
        arrays.same(a, name, first, first_name)
    n = _size(first)
    alloc = arrays.allocator(tuple(first.shape), arrays.known_dtype(first))
    function = getattr(module("gelu.c"), kernel)
    grid = (cdiv(n, ELEMENTWISE_BLOCK),)
    launch = _Launch(arrays, function, grid, 4, BLOCK=ELEMENTWISE_BLOCK, **constexprs)

    def make(launch):
        def plan(*inputs):
            outs = tuple(alloc() for _ in range(outputs))
            launch(*outs, *inputs, *scalars, n)
            return outs

        return plan

    key = _key(interpret, fn, tuple(named.values()), scalars, tuple(constexprs.items()))
    return _planned(key, arrays, make, (launch,), *named.values())


def _act(arrays_fn: str, activation: str) -> int:
    if activation not in ACTIVATIONS:
        from ..errors import LaunchError

        raise LaunchError(
            f"{arrays_fn}: activation must be one of {', '.join(map(repr, ACTIVATIONS))}, "
            f"got {activation!r}"
        )
    return ACTIVATIONS[activation]


def activation(x: Any, activation: str, *, interpret: bool = False) -> Any:
    """act(x) elementwise: ``'gelu'`` (erf), ``'gelu_tanh'``, ``'relu'`` or ``'silu'``."""
    act = _act("activation", activation)
    return _elementwise("activation", "activation_fwd", {"x": x}, 1, interpret, ACT=act)[0]


def activation_backward(x: Any, dy: Any, activation: str, *, interpret: bool = False) -> Any:
    """dx = act'(x) * dy for the activations of :func:`activation`."""
    act = _act("activation_backward", activation)
    named = {"x": x, "dy": dy}
    return _elementwise("activation_backward", "activation_bwd", named, 1, interpret, ACT=act)[0]


def swiglu(gate: Any, up: Any, *, interpret: bool = False) -> Any:
    """silu(gate) * up elementwise."""
    return _elementwise("swiglu", "swiglu_fwd", {"gate": gate, "up": up}, 1, interpret)[0]


def swiglu_backward(gate: Any, up: Any, dy: Any, *, interpret: bool = False) -> tuple[Any, Any]:
    """(dgate, dup) of :func:`swiglu`."""
    named = {"gate": gate, "up": up, "dy": dy}
    dg, du = _elementwise("swiglu_backward", "swiglu_bwd", named, 2, interpret)
    return dg, du


# ---------------------------------------------------------------- dropout


def _dropout(fn: str, x: Any, p: float, seed: Any, interpret: bool) -> Any:
    arrays = Arrays(fn, {"x": x, "seed": seed}, interpret)
    _contiguous(arrays, x, "x")
    arrays.vector(seed, "seed", 1, ("i64",), "one seed")
    if not 0.0 <= p < 1.0:
        raise arrays.error(f"p must be in [0, 1), got {p}")
    n = _size(x)
    with arrays.device():
        out = arrays.empty(tuple(x.shape), arrays.known_dtype(x), like=x)
        args = (out, x, float(p), seed, n)
        kernel = module("dropout.c").dropout_seeded
        arrays.launch(kernel, (cdiv(n, ELEMENTWISE_BLOCK),), args, 4, BLOCK=ELEMENTWISE_BLOCK)
    return out


def dropout(x: Any, p: float, seed: Any, *, interpret: bool = False) -> Any:
    """x / (1 - p) where a Philox uniform of (seed[0], element index) exceeds p, else 0, as
    :func:`teeny_tx.nn.dropout` but with ``seed`` an i64 array [1] on the device."""
    return _dropout("dropout", x, p, seed, interpret)


def dropout_backward(dy: Any, p: float, seed: Any, *, interpret: bool = False) -> Any:
    """dx of :func:`dropout` (the same seed array regenerates the same mask)."""
    return _dropout("dropout_backward", dy, p, seed, interpret)


# ---------------------------------------------------------------- embedding


def embedding(weight: Any, indices: Any, *, interpret: bool = False) -> Any:
    """weight [num, dim] rows at ``indices`` (int64 [n], contiguous): [n, dim]; an index
    outside [0, num) gives a row of NaN."""
    arrays = Arrays("embedding", {"weight": weight, "indices": indices}, interpret)
    num, dim, w_stride = arrays.matrix(weight, "weight", FLOATS)
    n = int(indices.shape[0]) if len(indices.shape) == 1 else -1
    arrays.vector(indices, "indices", n, ("i64",), "one per token")
    with arrays.device():
        out = arrays.empty((n, dim), arrays.known_dtype(weight))
        grid = (cdiv(n, EMBED_BLOCK_T), cdiv(dim, EMBED_BLOCK_D))
        args = (out, weight, indices, n, dim, num, w_stride)
        blocks = {"BLOCK_T": EMBED_BLOCK_T, "BLOCK_D": EMBED_BLOCK_D}
        arrays.launch(module("embedding.c").embedding_fwd, grid, args, 4, **blocks)
    return out


def embedding_backward(dy: Any, indices: Any, num: int, *, interpret: bool = False) -> Any:
    """dweight [num, dim] of :func:`embedding` from dy [n, dim]: rows of dy added at their
    indices (atomic adds into an f32 table, f64 for f64, converted to dy's dtype)."""
    arrays = Arrays("embedding_backward", {"dy": dy, "indices": indices}, interpret)
    n, dim, dy_stride = arrays.matrix(dy, "dy", FLOATS)
    arrays.vector(indices, "indices", n, ("i64",), "dy's rows")
    if n > 1 and dy_stride != dim:
        raise arrays.error("dy must be contiguous; copy it first")
    dtype = arrays.known_dtype(dy)
    acc_dtype = wide_dtype(dtype)
    with arrays.device():
        acc = arrays.empty((int(num), dim), acc_dtype)
        acc[...] = 0
        grid = (cdiv(n, EMBED_BLOCK_T), cdiv(dim, EMBED_BLOCK_D))
        args = (acc, dy, indices, n, dim, int(num))
        blocks = {"BLOCK_T": EMBED_BLOCK_T, "BLOCK_D": EMBED_BLOCK_D}
        arrays.launch(module("embedding.c").embedding_bwd, grid, args, 4, **blocks)
        if dtype == acc_dtype:
            return acc
        out = arrays.empty((int(num), dim), dtype)
        out[...] = acc
    return out


# ---------------------------------------------------------------- residual add + norm


def _add_norm_args(fn: str, x: Any, r: Any, weights: dict[str, Any], interpret: bool):
    arrays = Arrays(fn, {"x": x, "residual": r, **weights}, interpret)
    rows, cols, x_stride = arrays.matrix(x, "x", FLOATS)
    _, _, r_stride = arrays.matrix(r, "residual", FLOATS)
    arrays.same(r, "residual", x, "x")
    for name, w in weights.items():
        arrays.vector(w, name, cols, FLOATS, "x's columns")
    return arrays, rows, cols, x_stride, r_stride, norm_config(arrays, cols)


def add_layer_norm(
    x: Any, residual: Any, weight: Any, bias: Any, eps: float = 1e-5, *, interpret: bool = False
) -> tuple[Any, Any, Any, Any]:
    """(y, h, mean, rstd): h = x + residual and y = layer_norm(h) per row of [rows, cols],
    one pass; mean and rstd f32 [rows] (f64 for f64 data)."""
    plan = _replay(interpret, "add_layer_norm", (x, residual, weight, bias))
    if plan is not None:
        return plan(x, residual, weight, bias, eps)
    arrays, rows, cols, xs, rs, config = _add_norm_args(
        "add_layer_norm", x, residual, {"weight": weight, "bias": bias}, interpret
    )
    dtype = arrays.known_dtype(x)
    alloc = arrays.allocator((rows, cols), dtype)
    alloc_stat = arrays.allocator((rows,), wide_dtype(dtype))
    kernel = module("add_norm.c").add_layer_norm_fwd
    first = _Launch(
        arrays,
        kernel,
        (rows,),
        config.num_warps,
        ("eps",),
        ROUND=_ROUND.get(dtype, 0),
        BLOCK=config.block,
    )

    def make(launch):
        def plan(x, residual, weight, bias, eps):
            y, h, mean, rstd = alloc(), alloc(), alloc_stat(), alloc_stat()
            launch(
                y, h, mean, rstd, x, residual, weight, bias, cols, xs, rs, cols, cols, float(eps)
            )
            return y, h, mean, rstd

        return plan

    key = _key(interpret, "add_layer_norm", (x, residual, weight, bias))
    return _planned(key, arrays, make, (first,), x, residual, weight, bias, float(eps))


def add_rms_norm(
    x: Any, residual: Any, weight: Any, eps: float = 1e-6, *, interpret: bool = False
) -> tuple[Any, Any, Any]:
    """(y, h, rstd): h = x + residual and y = rms_norm(h) per row, one pass."""
    arrays, rows, cols, xs, rs, config = _add_norm_args(
        "add_rms_norm", x, residual, {"weight": weight}, interpret
    )
    dtype = arrays.known_dtype(x)
    with arrays.device():
        y, h = arrays.empty((rows, cols), dtype), arrays.empty((rows, cols), dtype)
        rstd = arrays.empty((rows,), wide_dtype(dtype))
        args = (y, h, rstd, x, residual, weight, cols, xs, rs, cols, cols, float(eps))
        kernel = module("add_norm.c").add_rms_norm_fwd
        arrays.launch(
            kernel, (rows,), args, config.num_warps, ROUND=_ROUND.get(dtype, 0), BLOCK=config.block
        )
    return y, h, rstd


def _column_sum(arrays: Arrays, part: Any, parts: int, cols: int, dtype: str) -> Any:
    out = arrays.empty((cols,), dtype)
    grid = (cdiv(cols, PARTIAL_BLOCK_N),)
    args = (out, part, parts, cols)
    blocks = {"BLOCK_P": PARTIAL_BLOCK_P, "BLOCK_N": PARTIAL_BLOCK_N}
    arrays.launch(module("add_norm.c").column_sum, grid, args, 4, **blocks)
    return out


def _add_norm_backward(fn, dy, dh, h, weight, stats, interpret):
    arrays = Arrays(fn, {"dy": dy, "dh": dh, "h": h, "weight": weight, **stats}, interpret)
    rows, cols, h_stride = arrays.matrix(h, "h", FLOATS)
    _, _, dy_stride = arrays.matrix(dy, "dy", FLOATS)
    _, _, dh_stride = arrays.matrix(dh, "dh", FLOATS)
    arrays.same(dy, "dy", h, "h")
    arrays.same(dh, "dh", h, "h")
    arrays.vector(weight, "weight", cols, FLOATS, "h's columns")
    stat = wide_dtype(arrays.known_dtype(h))
    for name, s in stats.items():
        arrays.vector(s, name, rows, (stat,), "h's rows")
    return arrays, rows, cols, (dy_stride, dh_stride, h_stride), norm_config(arrays, cols)


def add_layer_norm_backward(
    dy: Any, dh: Any, h: Any, weight: Any, mean: Any, rstd: Any, *, interpret: bool = False
) -> tuple[Any, Any, Any]:
    """(dh_total, dweight, dbias) of :func:`add_layer_norm`: dh_total, the gradient of x and of
    residual alike, is layer norm's dx plus ``dh``, the gradient that reached h directly."""
    named = (dy, dh, h, weight, mean, rstd)
    plan = _replay(interpret, "add_layer_norm_backward", named)
    if plan is not None:
        return plan(*named)
    arrays, rows, cols, strides, config = _add_norm_backward(
        "add_layer_norm_backward", dy, dh, h, weight, {"mean": mean, "rstd": rstd}, interpret
    )
    dtype, w_dtype = arrays.known_dtype(h), arrays.known_dtype(weight)
    acc = wide_dtype(dtype)
    with arrays.device():
        programs, per_program = partial_programs(rows, arrays.sms())
    parts = max(programs, 1)
    alloc_dx = arrays.allocator((rows, cols), dtype)
    alloc_part = arrays.allocator((parts, cols), acc)
    alloc_w = arrays.allocator((cols,), w_dtype)
    kernel = module("add_norm.c").add_layer_norm_bwd
    column_sum = module("add_norm.c").column_sum
    sum_grid = (cdiv(cols, PARTIAL_BLOCK_N),)
    launches = (
        _Launch(arrays, kernel, (programs,), config.num_warps, BLOCK=config.block),
        _Launch(arrays, column_sum, sum_grid, 4, BLOCK_P=PARTIAL_BLOCK_P, BLOCK_N=PARTIAL_BLOCK_N),
        _Launch(arrays, column_sum, sum_grid, 4, BLOCK_P=PARTIAL_BLOCK_P, BLOCK_N=PARTIAL_BLOCK_N),
    )

    def make(rows_launch, dw_launch, db_launch):
        def plan(dy, dh, h, weight, mean, rstd):
            dx, dw_part, db_part = alloc_dx(), alloc_part(), alloc_part()
            rows_launch(
                dx,
                dw_part,
                db_part,
                dy,
                dh,
                h,
                weight,
                mean,
                rstd,
                rows,
                cols,
                *strides,
                cols,
                per_program,
            )
            if programs == 0:
                dw_part[...] = 0
                db_part[...] = 0
            dw, db = alloc_w(), alloc_w()
            dw_launch(dw, dw_part, parts, cols)
            db_launch(db, db_part, parts, cols)
            return dx, dw, db

        return plan

    key = _key(interpret, "add_layer_norm_backward", named)
    return _planned(key, arrays, make, launches, *named)


def add_rms_norm_backward(
    dy: Any, dh: Any, h: Any, weight: Any, rstd: Any, *, interpret: bool = False
) -> tuple[Any, Any]:
    """(dh_total, dweight) of :func:`add_rms_norm`."""
    arrays, rows, cols, strides, config = _add_norm_backward(
        "add_rms_norm_backward", dy, dh, h, weight, {"rstd": rstd}, interpret
    )
    dtype, w_dtype = arrays.known_dtype(h), arrays.known_dtype(weight)
    with arrays.device():
        programs, per_program = partial_programs(rows, arrays.sms())
        dx = arrays.empty((rows, cols), dtype)
        parts = max(programs, 1)
        dw_part = arrays.empty((parts, cols), wide_dtype(dtype))
        args = (dx, dw_part, dy, dh, h, weight, rstd, rows, cols, *strides, cols, per_program)
        kernel = module("add_norm.c").add_rms_norm_bwd
        arrays.launch(kernel, (programs,), args, config.num_warps, BLOCK=config.block)
        if programs == 0:
            dw_part[...] = 0
        dw = _column_sum(arrays, dw_part, parts, cols, w_dtype)
    return dx, dw


# ---------------------------------------------------------------- AdamW


def _adamw_scalars(step: int, lr: float, beta1: float, beta2: float, eps: float, wd: float):
    """The kernel's f64 scalars for step number ``step``: the hyperparameters, then
    torch.optim.AdamW's step size lr / (1 - beta1^t) and sqrt(1 - beta2^t)."""
    step_size = lr / (1.0 - beta1**step)
    bc2_sqrt = (1.0 - beta2**step) ** 0.5
    return tuple(map(float, (lr, beta1, beta2, eps, wd, step_size, bc2_sqrt)))


AdamWReplay = Callable[[Any, Any, Any, Any, int, float, float, float, float, float], None]


def adamw_step(
    param: Any,
    grad: Any,
    exp_avg: Any,
    exp_avg_sq: Any,
    step: int,
    *,
    lr: float,
    beta1: float = 0.9,
    beta2: float = 0.999,
    eps: float = 1e-8,
    weight_decay: float = 1e-2,
    interpret: bool = False,
) -> AdamWReplay | None:
    """One AdamW step of torch.optim.AdamW's arithmetic, in place on ``param`` and the moments
    ``exp_avg``, ``exp_avg_sq`` (f32, f64 for f64 params), for step number ``step`` (from 1).
    All four contiguous and of one size; one launch.

    Returns, for a GPU launch, the replay of this step for later steps of arrays like these
    (the same shapes, dtypes and device; any addresses), a function of ``(param, grad,
    exp_avg, exp_avg_sq, step, lr, beta1, beta2, eps, weight_decay)`` that skips the checks
    made here and launches directly (each pointer's alignment still checked) on the current
    stream of the current device, which must be the arrays' (the optimizer keeps one per
    parameter). None on the interpreter or when nothing was launched. The replay is also the
    plan of arrays like these in the library's plan cache (plans.py): a later call with such
    arrays is that replay."""
    operands = (param, grad, exp_avg, exp_avg_sq)
    plan = _replay(interpret, "adamw_step", operands)
    if plan is not None:
        plan(*operands, step, lr, beta1, beta2, eps, weight_decay)
        return plan
    named = {"param": param, "grad": grad, "exp_avg": exp_avg, "exp_avg_sq": exp_avg_sq}
    arrays = Arrays("adamw_step", named, interpret)
    for name, a in named.items():
        _contiguous(arrays, a, name)
    arrays.same(grad, "grad", param, "param")
    moment = wide_dtype(arrays.known_dtype(param))
    for name in ("exp_avg", "exp_avg_sq"):
        arrays.check_dtype(named[name], name, (moment,))
        if tuple(named[name].shape) != tuple(param.shape):
            raise arrays.error(f"{name} must have param's shape {tuple(param.shape)}")
    if step < 1:
        raise arrays.error(f"step counts from 1, got {step}")
    n = _size(param)
    scalars = _adamw_scalars(step, lr, beta1, beta2, eps, weight_decay)
    grid = (cdiv(n, ELEMENTWISE_BLOCK),)
    with arrays.device():
        args = (param, grad, exp_avg, exp_avg_sq, n, *scalars)
        kernel = module("adamw.c").adamw_step
        arrays.launch(kernel, grid, args, 4, BLOCK=ELEMENTWISE_BLOCK)
        if arrays.kind == "numpy" or n == 0:
            return None
        # f64 scalars carry no specialisation facts; n is the same for every replay
        launch = kernel.direct(grid, args, 4, strided=True, BLOCK=ELEMENTWISE_BLOCK)

    def replay(p, g, m, v, step, lr, beta1, beta2, eps, weight_decay):
        launch(p, g, m, v, n, *_adamw_scalars(step, lr, beta1, beta2, eps, weight_decay))

    key = _key(interpret, "adamw_step", operands)
    if key is not None:
        first = arrays.first
        device = first.device.index if arrays.kind == "torch" else first.device.id
        _plans.keep(_plans.PLANS, key, (device, replay))
    return replay
