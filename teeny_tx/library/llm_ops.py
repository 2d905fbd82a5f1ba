"""The language-model ops of Liger-Kernel as ``teeny_tx`` torch ops: rotary position
embedding of q and k in one launch, cross-entropy with class weights, label smoothing and the
z-loss, the fused linear + cross-entropy that never holds the whole logits, GeGLU, and the
RMSNorm of Gemma (1 + w) beside Llama's.

Input: torch tensors (CUDA: the kernels of ``kernels/rope.c``, ``lm_loss.c`` and ``gelu.c``
on torch's current stream of the tensors' device; CPU: the same kernels on the interpreter).
Output: torch tensors; each op is a ``torch.library`` custom op with a fake (its forward run
without launches, as :func:`teeny_tx.torch.op` builds them) and autograd through its backward
kernels, called in eager code without the dispatcher as :class:`torch_ops.Op` does.
"""

from __future__ import annotations

from typing import Any

import torch

from ..errors import TeenyError
from ..runtime.grid import cdiv
from . import linalg, torch_ops
from .graph_ops import Launch
from .inductor_fallbacks import fake
from .loader import module
from .torch_ops import check_range, dense, library_op, rms_norm, run, stat_dtype

_ELEMENTWISE_BLOCK = 1024
# (BLOCK, num_warps) of the loss kernels: the interpreter's (short rows in tests), the GPU's
_LOSS_CONFIG = {True: (1024, 4), False: (4096, 8)}


def _launch(name: str, fake_only: bool = False) -> Launch:
    return Launch(name, fake=fake_only)


def _tracing(t: torch.Tensor) -> bool:
    """Whether ``t`` is a fake or meta tensor (shapes only: nothing to launch)."""
    return t.is_meta or isinstance(t, torch._subclasses.fake_tensor.FakeTensor)


def _no_grad_for(fn: str, **named: torch.Tensor | None) -> None:
    """A TeenyError for an argument that requires grad whose gradient ``fn`` does not compute
    (rather than a gradient silently lost)."""
    if not torch.is_grad_enabled():
        return
    for name, t in named.items():
        if t is not None and t.requires_grad:
            raise TeenyError(
                f"teeny_tx.torch.{fn} computes no gradient for {name}, which requires grad; "
                f"pass {name}.detach() (as models hold it: a buffer) or compute it in torch"
            )


# ---------------------------------------------------------------- rotary position embedding

_ROPE_LAYOUTS = {"half": 0, "interleaved": 1}


def _pow2(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


def _rope_launch(
    name: str,
    q: torch.Tensor,
    k: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    positions: torch.Tensor | None,
    layout: int,
    backward: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    b, hq, n, d = q.shape
    hk = k.shape[1]
    q = q if q.stride(-1) == 1 else q.contiguous()
    k = k if k.stride(-1) == 1 else k.contiguous()
    q_out, k_out = q.new_empty((b, hq, n, d)), k.new_empty((b, hk, n, d))
    if _tracing(q) or q.numel() == 0:
        return q_out, k_out
    cs = cos.reshape(-1, d).contiguous(), sin.reshape(-1, d).contiguous()
    cs_batch = 0 if cos.dim() < 3 or cos.shape[0] == 1 else n
    pos = positions.reshape(-1).contiguous() if positions is not None else q.new_zeros(1).long()
    _launch(name)(
        module("rope.c").rope,
        (b * n,),
        q_out,
        k_out,
        q,
        k,
        *cs,
        pos,
        n,
        hq,
        hk,
        d // 2,
        q.stride(0),
        q.stride(1),
        q.stride(2),
        k.stride(0),
        k.stride(1),
        k.stride(2),
        cs_batch,
        strided=True,
        num_warps=4,
        POS=int(positions is not None),
        INTERLEAVED=layout,
        BACKWARD=backward,
        HEADS=_pow2(max(hq, hk)),
        HALF=_pow2(d // 2),
    )
    return q_out, k_out


@library_op("rope")
def rope_op(
    q: torch.Tensor,
    k: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    positions: torch.Tensor | None,
    layout: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(q', k') rotated: q [B, Hq, N, D], k [B, Hk, N, D]; cos, sin [N, D], [1 or B, N, D], or
    [P, D] with ``positions`` [B, N]; ``layout`` 0 rotate-half, 1 interleaved."""
    return _rope_launch("rope", q, k, cos, sin, positions, layout, 0)


@library_op("rope_backward")
def rope_backward_op(
    dq: torch.Tensor,
    dk: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    positions: torch.Tensor | None,
    layout: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    return _rope_launch("rope_backward", dq, dk, cos, sin, positions, layout, 1)


fake(rope_op)(
    lambda q, k, cos, sin, positions, layout: (q.new_empty(q.shape), k.new_empty(k.shape))
)
fake(rope_backward_op)(
    lambda dq, dk, cos, sin, positions, layout: (dq.new_empty(dq.shape), dk.new_empty(dk.shape))
)


def _rope_setup(ctx, inputs, output) -> None:
    _, _, cos, sin, positions, layout = inputs
    ctx.layout, ctx.has_positions = layout, positions is not None
    ctx.save_for_backward(cos, sin, *(() if positions is None else (positions,)))


def _rope_grad(ctx, dq, dk):
    cos, sin, *positions = ctx.saved_tensors
    pos = positions[0] if ctx.has_positions else None
    dq = dense(dq) if dq is not None else None
    dk = dense(dk) if dk is not None else None
    if dq is None or dk is None:
        raise TeenyError("teeny_tx.torch.rope: both rotated outputs need a gradient")
    gq, gk = rope_backward_op(dq, dk, cos, sin, pos, ctx.layout)
    return gq, gk, None, None, None, None


rope_op.register_autograd(_rope_grad, setup_context=_rope_setup)


def rope(
    q: torch.Tensor,
    k: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    position_ids: torch.Tensor | None = None,
    layout: str = "half",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rotary position embedding of q [B, Hq, N, D] and k [B, Hk, N, D] in one launch
    (kernels/rope.c), Hugging Face's ``apply_rotary_pos_emb(q, k, cos, sin)``: ``q * cos +
    rotate_half(q) * sin``. ``cos`` and ``sin`` as Hugging Face's rotary embedding returns
    them ([B or 1, N, D] or [N, D]), or tables [P, D] indexed by ``position_ids`` [B, N].
    ``layout``: 'half' (Llama, GPT-NeoX, Qwen, Mistral: pairs (i, i + D/2)) or 'interleaved'
    (GPT-J: pairs (2i, 2i + 1)). No gradient for cos and sin (refused if they require one)."""
    if layout not in _ROPE_LAYOUTS:
        raise TeenyError(
            f"teeny_tx.torch.rope: layout must be 'half' or 'interleaved', got {layout!r}"
        )
    if q.dim() != 4 or k.dim() != 4:
        raise TeenyError(
            f"teeny_tx.torch.rope takes q and k [B, H, N, D], got {tuple(q.shape)} and "
            f"{tuple(k.shape)}"
        )
    b, _, n, d = q.shape
    if k.shape[0] != b or k.shape[2:] != q.shape[2:] or d % 2:
        raise TeenyError(
            f"teeny_tx.torch.rope: q {tuple(q.shape)} and k {tuple(k.shape)} must share B, N "
            "and an even D (heads may differ)"
        )
    if cos.shape != sin.shape or cos.shape[-1] != d or k.dtype != q.dtype:
        raise TeenyError(
            f"teeny_tx.torch.rope: cos {tuple(cos.shape)} and sin {tuple(sin.shape)} must be "
            f"one shape [..., {d}], q and k one dtype"
        )
    if position_ids is not None:
        if cos.dim() != 2 or tuple(position_ids.shape) not in ((b, n), (1, n), (n,)):
            raise TeenyError(
                "teeny_tx.torch.rope: with position_ids [B, N], cos and sin are tables [P, D]"
            )
        position_ids = position_ids.expand(b, n) if position_ids.dim() == 2 else position_ids
        position_ids = position_ids.expand(b, n).long()
        check_range("rope", "position", position_ids, cos.shape[0], None)
    else:
        rows = cos.reshape(-1, d).shape[0]
        if cos.dim() == 2 and cos.shape[0] == n:
            pass
        elif cos.dim() != 3 or cos.shape[1] != n or cos.shape[0] not in (1, b) or not rows:
            raise TeenyError(
                f"teeny_tx.torch.rope: cos and sin must be [1 or {b}, {n}, {d}] or [{n}, {d}] "
                f"(or tables with position_ids), got {tuple(cos.shape)}"
            )
    _no_grad_for("rope", cos=cos, sin=sin)
    return rope_op(q, k, cos.to(q.dtype), sin.to(q.dtype), position_ids, _ROPE_LAYOUTS[layout])


class RotaryEmbedding(torch.nn.Module):
    """cos and sin tables of a rotary embedding (base ``theta``, ``dim`` = the head size,
    inverse frequencies theta^(-2i/dim)), and their application to q and k: ``forward(q, k,
    position_ids=None)``, positions 0..N-1 when none are given."""

    def __init__(
        self, dim: int, max_positions: int = 2048, theta: float = 10000.0, layout: str = "half"
    ):
        super().__init__()
        self.dim, self.layout = dim, layout
        inv = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
        freqs = torch.outer(torch.arange(max_positions, dtype=torch.float64), inv)
        full = (
            torch.cat((freqs, freqs), -1)
            if layout == "half"
            else torch.repeat_interleave(freqs, 2, -1)
        )
        self.register_buffer("cos", full.cos().float(), persistent=False)
        self.register_buffer("sin", full.sin().float(), persistent=False)

    def forward(
        self, q: torch.Tensor, k: torch.Tensor, position_ids: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        cos, sin = self.get_buffer("cos"), self.get_buffer("sin")
        if position_ids is None:
            n = q.shape[2]
            return rope(q, k, cos[:n], sin[:n], None, self.layout)
        return rope(q, k, cos, sin, position_ids, self.layout)


# ---------------------------------------------------------------- cross-entropy with options


def _loss_config(logits: torch.Tensor) -> tuple[int, int]:
    return _LOSS_CONFIG[not logits.is_cuda]


def _lm_loss_forward(
    name: str,
    logits: torch.Tensor,
    targets: torch.Tensor,
    weight: torch.Tensor | None,
    ignore_index: int,
    smoothing: float,
    z_coef: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    n, c = logits.shape
    loss = logits.new_empty((n,), dtype=stat_dtype(logits))
    lse = loss.new_empty((n,))
    if _tracing(logits) or n == 0:
        return loss, lse
    kernel = module("lm_loss.c").lm_loss_fwd
    args = (loss, lse, logits, targets, weight if weight is not None else loss)
    sizes = (c, logits.stride(0), ignore_index, smoothing, z_coef)
    block, warps = _loss_config(logits)
    weighted = int(weight is not None)
    _launch(name)(kernel, (n,), *args, *sizes, num_warps=warps, WEIGHTED=weighted, BLOCK=block)
    return loss, lse


def _lm_loss_backward(
    name: str,
    dlogits: torch.Tensor,
    logits: torch.Tensor,
    targets: torch.Tensor,
    weight: torch.Tensor | None,
    lse: torch.Tensor,
    grad: torch.Tensor,
    ignore_index: int,
    smoothing: float,
    z_coef: float,
) -> None:
    n, c = logits.shape
    if _tracing(logits) or n == 0 or c == 0:
        return
    kernel = module("lm_loss.c").lm_loss_bwd
    total = weight.sum(dtype=lse.dtype).reshape(1) if weight is not None else lse
    args = (dlogits, logits, targets, weight if weight is not None else lse, total, lse, grad)
    sizes = (c, logits.stride(0), dlogits.stride(0), ignore_index, smoothing, z_coef)
    block, warps = _loss_config(logits)
    weighted = int(weight is not None)
    _launch(name)(
        kernel,
        (n, cdiv(c, block)),
        *args,
        *sizes,
        num_warps=warps,
        WEIGHTED=weighted,
        BLOCK=block,
    )


@library_op("lm_loss")
def lm_loss_op(
    logits: torch.Tensor,
    targets: torch.Tensor,
    weight: torch.Tensor | None,
    ignore_index: int,
    smoothing: float,
    z_coef: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(loss [N], lse [N]) per row of logits [N, C] (kernels/lm_loss.c)."""
    check_range("cross_entropy", "target", targets, logits.shape[-1], ignore_index)
    return _lm_loss_forward("lm_loss", logits, targets, weight, ignore_index, smoothing, z_coef)


@fake(lm_loss_op)
def _(logits, targets, weight, ignore_index, smoothing, z_coef):
    loss = logits.new_empty((logits.shape[0],), dtype=stat_dtype(logits))
    return loss, loss.new_empty(loss.shape)


@library_op("lm_loss_backward")
def lm_loss_backward_op(
    grad: torch.Tensor,
    logits: torch.Tensor,
    targets: torch.Tensor,
    weight: torch.Tensor | None,
    lse: torch.Tensor,
    ignore_index: int,
    smoothing: float,
    z_coef: float,
) -> torch.Tensor:
    dlogits = logits.new_empty(logits.shape)
    _lm_loss_backward(
        "lm_loss_backward",
        dlogits,
        logits,
        targets,
        weight,
        lse,
        grad,
        ignore_index,
        smoothing,
        z_coef,
    )
    return dlogits


@fake(lm_loss_backward_op)
def _(grad, logits, targets, weight, lse, ignore_index, smoothing, z_coef):
    return logits.new_empty(logits.shape)


def _lm_loss_setup(ctx, inputs, output) -> None:
    logits, targets, weight, ignore_index, smoothing, z_coef = inputs
    ctx.options = (ignore_index, smoothing, z_coef)
    ctx.has_weight = weight is not None
    ctx.save_for_backward(logits, targets, output[1], *(() if weight is None else (weight,)))
    ctx.mark_non_differentiable(output[1])


def _lm_loss_grad(ctx, dloss, _dlse):
    logits, targets, lse, *weight = ctx.saved_tensors
    w = weight[0] if ctx.has_weight else None
    dlogits = lm_loss_backward_op(dense(dloss), logits, targets, w, lse, *ctx.options)
    return dlogits, None, None, None, None, None


lm_loss_op.register_autograd(_lm_loss_grad, setup_context=_lm_loss_setup)

_REDUCTIONS = ("mean", "sum", "none")


def _loss_checks(
    fn: str,
    logits_shape: tuple,
    targets: torch.Tensor,
    weight: torch.Tensor | None,
    reduction: str,
    label_smoothing: float,
) -> None:
    if reduction not in _REDUCTIONS:
        raise TeenyError(
            f"teeny_tx.torch.{fn}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}"
        )
    if not 0.0 <= label_smoothing <= 1.0:
        raise TeenyError(
            f"teeny_tx.torch.{fn}: label_smoothing must be in [0, 1], got {label_smoothing}"
        )
    if targets.dtype != torch.long or targets.is_floating_point():
        raise TeenyError(
            f"teeny_tx.torch.{fn} takes class indices (int64 targets), got {targets.dtype}"
        )
    if targets.numel() != logits_shape[0]:
        raise TeenyError(
            f"teeny_tx.torch.{fn}: {targets.numel()} targets for {logits_shape[0]} rows of logits"
        )
    if weight is not None and tuple(weight.shape) != (logits_shape[1],):
        raise TeenyError(
            f"teeny_tx.torch.{fn}: weight must be [{logits_shape[1]}], got {tuple(weight.shape)}"
        )
    _no_grad_for(fn, weight=weight)


def _reduce(
    rows: torch.Tensor,
    targets: torch.Tensor,
    weight: torch.Tensor | None,
    ignore_index: int,
    reduction: str,
) -> torch.Tensor:
    """torch's reduction of per-row losses: the mean divides by the weight of the targets
    kept (their number without class weights)."""
    if reduction == "none":
        return rows
    if reduction == "sum":
        return rows.sum()
    kept = targets != ignore_index
    if weight is None:
        return rows.sum() / kept.sum().to(rows.dtype)
    picked = weight.to(rows.dtype)[torch.where(kept, targets, 0)]
    return rows.sum() / torch.where(kept, picked, 0.0).sum()


def cross_entropy(
    logits: torch.Tensor,
    targets: torch.Tensor,
    weight: torch.Tensor | None = None,
    ignore_index: int = -100,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
    z_loss: float = 0.0,
) -> torch.Tensor:
    """F.cross_entropy(logits [..., C], targets [...] int64, weight, ignore_index=,
    reduction=, label_smoothing=) through kernels/lm_loss.c, plus Liger's z-loss
    (``z_loss * logsumexp^2`` added to each row kept). Targets outside [0, C) that are not
    ``ignore_index`` raise IndexError as in torch (``set_index_checks(False)`` skips the
    check). The row loss is f32 (f64 for f64 logits)."""
    flat = logits.reshape(-1, logits.shape[-1])
    flat_t = targets.reshape(-1)
    _loss_checks("cross_entropy", tuple(flat.shape), flat_t, weight, reduction, label_smoothing)
    if weight is None and not label_smoothing and not z_loss and reduction == "mean":
        return torch_ops.cross_entropy(flat, flat_t, ignore_index=ignore_index)
    rows, _ = lm_loss_op(flat, flat_t, weight, ignore_index, float(label_smoothing), float(z_loss))
    out = _reduce(rows, flat_t, weight, ignore_index, reduction)
    return out.view(targets.shape) if reduction == "none" else out


# ---------------------------------------------------------------- fused linear + cross-entropy


def flce_chunk(n: int, vocab: int, hidden: int) -> int:
    """Rows of a chunk of the fused linear cross-entropy: at most an eighth of the tokens (the
    chunk's logits, the only extra memory, stay under 1/8 of the whole), fewer when the vocab
    is much wider than the hidden size (as Liger: n / (vocab / hidden))."""
    return max(1, cdiv(n, max(8, cdiv(vocab, max(hidden, 1)))))


def _flce(
    x: torch.Tensor,
    weight: torch.Tensor,
    targets: torch.Tensor,
    bias: torch.Tensor | None,
    class_weight: torch.Tensor | None,
    ignore_index: int,
    smoothing: float,
    z_coef: float,
    reduction_sum: bool,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    n, h = x.shape
    v = weight.shape[0]
    stat = stat_dtype(x)
    grad_x, grad_w = x.new_empty((n, h)), torch.zeros_like(weight)
    grad_b = torch.zeros_like(bias) if bias is not None else weight.new_empty((0,))
    if _tracing(x):
        return x.new_empty((), dtype=stat), grad_x, grad_w, grad_b
    kept = targets != ignore_index
    if class_weight is None:
        denom = kept.sum().to(stat)
    else:
        denom = torch.where(kept, class_weight.to(stat)[torch.where(kept, targets, 0)], 0.0).sum()
    scale = torch.ones((), dtype=stat, device=x.device) if reduction_sum else 1.0 / denom
    total = torch.zeros((), dtype=stat, device=x.device)
    chunk = flce_chunk(n, v, h)
    for start in range(0, n, chunk):
        xc, tc = x[start : start + chunk], targets[start : start + chunk]
        logits = run("fused_linear_cross_entropy", linalg.linear, xc, weight, bias, None)
        rows, lse = _lm_loss_forward(
            "fused_linear_cross_entropy", logits, tc, class_weight, ignore_index, smoothing, z_coef
        )
        total += rows.sum()
        g = scale.expand(tc.shape[0]).contiguous()
        _lm_loss_backward(  # in place: the chunk's logits become their gradient
            "fused_linear_cross_entropy",
            logits,
            logits,
            tc,
            class_weight,
            lse,
            g,
            ignore_index,
            smoothing,
            z_coef,
        )
        grad_x[start : start + chunk] = run(
            "fused_linear_cross_entropy", linalg.matmul, logits, weight
        )
        # dW += dlogits^T x: torch's addmm accumulates in place (the library's products have
        # no accumulating epilogue yet; a product and an add would hold a second [V, H])
        grad_w.addmm_(logits.t(), xc)
        if bias is not None:
            grad_b += logits.sum(0)
    return total * scale, grad_x, grad_w, grad_b


@library_op("fused_linear_cross_entropy")
def flce_op(
    x: torch.Tensor,
    weight: torch.Tensor,
    targets: torch.Tensor,
    bias: torch.Tensor | None,
    class_weight: torch.Tensor | None,
    ignore_index: int,
    smoothing: float,
    z_coef: float,
    reduction_sum: bool,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(loss, dloss/dx, dloss/dweight, dloss/dbias) of cross_entropy(x @ weight.T + bias,
    targets), chunk by chunk of tokens: the gradients are computed in the forward, as Liger
    does, so the logits are never whole."""
    check_range("fused_linear_cross_entropy", "target", targets, weight.shape[0], ignore_index)
    return _flce(
        x, weight, targets, bias, class_weight, ignore_index, smoothing, z_coef, reduction_sum
    )


@fake(flce_op)
def _(x, weight, targets, bias, class_weight, ignore_index, smoothing, z_coef, reduction_sum):
    grad_b = bias.new_empty(bias.shape) if bias is not None else weight.new_empty((0,))
    loss = x.new_empty((), dtype=stat_dtype(x))
    return loss, x.new_empty(x.shape), weight.new_empty(weight.shape), grad_b


def _flce_setup(ctx, inputs, output) -> None:
    ctx.has_bias = inputs[3] is not None
    ctx.save_for_backward(*output[1:])
    ctx.mark_non_differentiable(*output[1:])


def _flce_grad(ctx, dloss, *_):
    grad_x, grad_w, grad_b = ctx.saved_tensors
    dx = grad_x * dloss.to(grad_x.dtype)
    dw = grad_w * dloss.to(grad_w.dtype)
    db = grad_b * dloss.to(grad_b.dtype) if ctx.has_bias else None
    return dx, dw, None, db, None, None, None, None, None


flce_op.register_autograd(_flce_grad, setup_context=_flce_setup)


def fused_linear_cross_entropy(
    x: torch.Tensor,
    weight: torch.Tensor,
    targets: torch.Tensor,
    bias: torch.Tensor | None = None,
    ignore_index: int = -100,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
    class_weight: torch.Tensor | None = None,
    z_loss: float = 0.0,
) -> torch.Tensor:
    """F.cross_entropy(F.linear(x, weight, bias), targets, ...) for x [..., H], weight [V, H]
    (an LM head), without the [tokens, V] logits: chunks of :func:`flce_chunk` tokens, each's
    logits turned into their gradient in place and multiplied into dx, dW (and db) during the
    forward. ``reduction`` 'mean' or 'sum'. The backward only scales those gradients."""
    h = x.shape[-1]
    flat, flat_t = x.reshape(-1, h), targets.reshape(-1)
    if weight.dim() != 2 or weight.shape[1] != h:
        raise TeenyError(
            f"teeny_tx.torch.fused_linear_cross_entropy: weight must be [V, {h}], got "
            f"{tuple(weight.shape)}"
        )
    shape = (flat.shape[0], weight.shape[0])
    _loss_checks("fused_linear_cross_entropy", shape, flat_t, class_weight, reduction, 0.0)
    if reduction == "none":
        raise TeenyError(
            "teeny_tx.torch.fused_linear_cross_entropy takes reduction 'mean' or 'sum' (its "
            "gradient is computed in the forward); use linear + cross_entropy for 'none'"
        )
    if not 0.0 <= label_smoothing <= 1.0:
        raise TeenyError(
            "teeny_tx.torch.fused_linear_cross_entropy: label_smoothing must be in [0, 1]"
        )
    flat = flat if flat.is_contiguous() else flat.contiguous()
    loss, *_ = flce_op(
        flat,
        weight,
        flat_t.contiguous(),
        bias,
        class_weight,
        ignore_index,
        float(label_smoothing),
        float(z_loss),
        reduction == "sum",
    )
    return loss


# ---------------------------------------------------------------- GeGLU, RMSNorm with offset

_GLU = {"gelu": 1, "gelu_tanh": 2, "silu": 4}


def _glu_launch(name: str, out: tuple, *args: Any, act: int) -> None:
    n = args[0].numel()
    if _tracing(args[0]) or n == 0:
        return
    grid = (cdiv(n, _ELEMENTWISE_BLOCK),)
    kernel = module("gelu.c").glu_bwd if len(out) == 2 else module("gelu.c").glu_fwd
    _launch(name)(kernel, grid, *out, *args, n, ACT=act, BLOCK=_ELEMENTWISE_BLOCK)


@library_op("glu")
def glu_op(gate: torch.Tensor, up: torch.Tensor, act: int) -> torch.Tensor:
    """act(gate) * up elementwise (act numbered as kernels/gelu.c: 1 GELU, 2 tanh GELU, 4
    SiLU)."""
    gate, up = gate.contiguous(), up.contiguous()
    y = gate.new_empty(gate.shape)
    _glu_launch("glu", (y,), gate, up, act=act)
    return y


@library_op("glu_backward")
def glu_backward_op(
    gate: torch.Tensor, up: torch.Tensor, dy: torch.Tensor, act: int
) -> tuple[torch.Tensor, torch.Tensor]:
    gate, up = gate.contiguous(), up.contiguous()
    dg, du = gate.new_empty(gate.shape), gate.new_empty(gate.shape)
    _glu_launch("glu_backward", (dg, du), gate, up, dy, act=act)
    return dg, du


fake(glu_op)(lambda gate, up, act: gate.new_empty(gate.shape))
fake(glu_backward_op)(
    lambda gate, up, dy, act: (gate.new_empty(gate.shape), gate.new_empty(gate.shape))
)


def _glu_setup(ctx, inputs, output) -> None:
    ctx.act = inputs[2]
    ctx.save_for_backward(inputs[0], inputs[1])


def _glu_grad(ctx, dy):
    gate, up = ctx.saved_tensors
    dg, du = glu_backward_op(gate, up, dense(dy), ctx.act)
    return dg, du, None


glu_op.register_autograd(_glu_grad, setup_context=_glu_setup)


def geglu(gate: torch.Tensor, up: torch.Tensor, approximate: str = "tanh") -> torch.Tensor:
    """F.gelu(gate, approximate=approximate) * up in one pass (kernels/gelu.c); 'tanh' by
    default, as Gemma's and Liger's GeGLU."""
    if approximate not in ("none", "tanh"):
        raise TeenyError(
            f"teeny_tx.torch.geglu: approximate must be 'none' or 'tanh', got {approximate!r}"
        )
    if gate.shape != up.shape or gate.dtype != up.dtype:
        raise TeenyError(
            f"teeny_tx.torch.geglu: gate {tuple(gate.shape)} {gate.dtype} and up "
            f"{tuple(up.shape)} {up.dtype} must have one shape and dtype"
        )
    return glu_op(gate, up, _GLU["gelu_tanh" if approximate == "tanh" else "gelu"])


_CASTING = ("llama", "gemma", "none")


def rms_norm_offset(
    x: torch.Tensor,
    weight: torch.Tensor,
    eps: float = 1e-6,
    offset: float = 0.0,
    casting_mode: str = "llama",
) -> torch.Tensor:
    """Liger's RMSNorm: x / rms(x) * (offset + weight) over the last dimension
    (kernels/rmsnorm.c; offset 1.0 is Gemma's 1 + w, whose gradient reaches ``weight``).
    ``casting_mode`` 'llama', 'gemma' or 'none' (Liger's names): the kernel computes in f32 (f64
    for f64 data) and rounds once at the store in every mode, so the modes, which differ in
    where a low-precision input's intermediates are rounded, give the same result: within one
    rounding of each."""
    if casting_mode not in _CASTING:
        raise TeenyError(
            f"teeny_tx.torch.rms_norm: casting_mode must be one of {_CASTING}, got {casting_mode!r}"
        )
    w = weight + offset if offset else weight
    return rms_norm(x, (x.shape[-1],), w, eps)


class RMSNorm(torch.nn.Module):
    """torch.nn.RMSNorm's parameters (``weight``, ones, or zeros with an offset of 1 as
    Gemma's) with Liger's ``offset`` and ``casting_mode``."""

    def __init__(
        self,
        hidden_size: int,
        eps: float = 1e-6,
        offset: float = 0.0,
        casting_mode: str = "llama",
        init_fn: str = "ones",
    ):
        super().__init__()
        if init_fn not in ("ones", "zeros"):
            raise TeenyError(f"RMSNorm: init_fn must be 'ones' or 'zeros', got {init_fn!r}")
        fill = torch.ones if init_fn == "ones" else torch.zeros
        self.weight = torch.nn.Parameter(fill(hidden_size))
        self.eps, self.offset, self.casting_mode = eps, offset, casting_mode

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rms_norm_offset(x, self.weight, self.eps, self.offset, self.casting_mode)


class GEGLUMLP(torch.nn.Module):
    """The gated MLP of Llama (SwiGLU, ``activation='silu'``) and Gemma (GeGLU,
    ``'gelu_tanh'``): down(act(gate(x)) * up(x)), without biases, Hugging Face's names."""

    def __init__(self, hidden_size: int, intermediate_size: int, activation: str = "silu"):
        super().__init__()
        if activation not in _GLU:
            raise TeenyError(f"GEGLUMLP: activation must be one of {sorted(_GLU)}")
        self.act = _GLU[activation]
        self.gate_proj = torch.nn.Linear(hidden_size, intermediate_size, bias=False)
        self.up_proj = torch.nn.Linear(hidden_size, intermediate_size, bias=False)
        self.down_proj = torch.nn.Linear(intermediate_size, hidden_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        from .torch_ops import linear

        gate, up = linear(x, self.gate_proj.weight), linear(x, self.up_proj.weight)
        return linear(glu_op(gate, up, self.act), self.down_proj.weight)


class FusedLinearCrossEntropyLoss(torch.nn.Module):
    """``forward(x, lm_head_weight, targets, bias=None)``: :func:`fused_linear_cross_entropy`
    with the options given here."""

    def __init__(
        self,
        ignore_index: int = -100,
        reduction: str = "mean",
        label_smoothing: float = 0.0,
        z_loss: float = 0.0,
    ):
        super().__init__()
        self.ignore_index, self.reduction = ignore_index, reduction
        self.label_smoothing, self.z_loss = label_smoothing, z_loss

    def forward(
        self,
        x: torch.Tensor,
        weight: torch.Tensor,
        targets: torch.Tensor,
        bias: torch.Tensor | None = None,
    ) -> torch.Tensor:
        return fused_linear_cross_entropy(
            x,
            weight,
            targets,
            bias,
            self.ignore_index,
            self.reduction,
            self.label_smoothing,
            None,
            self.z_loss,
        )
