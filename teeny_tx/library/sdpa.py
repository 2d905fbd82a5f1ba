"""Attention as PyTorch users call it: ``scaled_dot_product_attention`` (the signature, defaults
and checks of ``torch.nn.functional.scaled_dot_product_attention``, [..., H, N, D]),
``attention`` (the same on [B, H, N, D] with grouped-query heads taken as they come),
``flash_attn_func`` (FlashAttention's, [B, N, H, D]) and ``flash_attn_varlen_func`` (its packed
sequences, [total_tokens, H, D] with ``cu_seqlens``: the fused op ``teeny_tx::attention_varlen``
only), and the custom ops behind them.

Input: torch tensors, CUDA (the GPU) or CPU (the NumPy interpreter for the fused kernels).
Output: the attention output, shaped as SDPA's (or FlashAttention's) and of the inputs' dtype.

Routing, one rule (:func:`_fused_takes`): every call the fused kernels take goes to the op
``teeny_tx::attention`` (kernels/attention.c through :mod:`teeny_tx.library.attention`;
f16/bf16, the kernels' head dims, no explicit mask, no dropout): a [B, H, N, D] tensor is
passed as its [B, N, H, D] ``transpose(1, 2)`` view, which the kernels read in place, grouped
query heads as they are (query head h reads key/value head h // (H_q / H_kv)), seqlen_q and
seqlen_k unequal. Every other call takes the blockwise path (:class:`_Blockwise`): an online
softmax over blocks of keys in float32 (float64 for float64 inputs) whose backward recomputes
each block's probabilities from the saved log-sum-exp, so no more than N_q x block scores of a
batch are ever held (:data:`BLOCK_SCORES`), in the forward or the backward; it takes boolean
and additive masks (broadcast over batch and heads, with the additive mask's gradient), value
head dims unlike the query's, float32 and float64. Dropout is refused (NotImplementedError).

Masks: ``is_causal`` is SDPA's, aligned at the top left (query i sees keys j <= i);
``flash_attn_func(causal=True)`` is FlashAttention's, aligned at the bottom right (query i
sees keys j <= i + N_kv - N_q); windows and softcap as FlashAttention defines them
(:func:`teeny_tx.library.attention.band` is the one home of the band these make).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from ..errors import TeenyError
from . import attention as library
from .inductor_fallbacks import fake
from .torch_ops import dense, library_op, run, to_numpy

# The blockwise path's block of keys: as many keys as keep one block's scores (batch x query
# heads x N_q x block) at or under this many elements, at least 64 (tests make it small).
BLOCK_SCORES = 1 << 22
_FUSED_DTYPES = (torch.float16, torch.bfloat16)


class AttentionError(TeenyError, RuntimeError):
    """Bad arguments to an attention function: a TeenyError that is also the RuntimeError
    torch's own functions raise for them."""


# ---------------------------------------------------------------- the fused op


@library_op("attention")
def attention_op(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool,
    scale: float,
    bottom_right: bool,
    window_left: int,
    window_right: int,
    softcap: float,
    alibi_slopes: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(o [B, N_q, H_q, D], lse f32 [B, H_q, N_q]) for q [B, N_q, H_q, D], k and v
    [B, N_kv, H_kv, D]: :func:`teeny_tx.library.attention.attention`."""
    return run(
        "attention",
        library.attention,
        q,
        k,
        v,
        causal,
        scale,
        **_options(bottom_right, window_left, window_right, softcap, alibi_slopes),
    )


def _options(
    bottom_right: bool, left: int, right: int, softcap: float, slopes: Any = None
) -> dict[str, Any]:
    """The library's keyword options, only those away from their defaults (so a call without
    them runs wherever the library has no such option); slopes as NumPy for CPU tensors."""
    options: dict[str, Any] = {}
    if slopes is not None:
        options["alibi_slopes"] = slopes if slopes.is_cuda else to_numpy(slopes)
    if bottom_right:
        options["bottom_right"] = True
    if (left, right) != (-1, -1):
        options["window"] = (left, right)
    if softcap:
        options["softcap"] = softcap
    return options


@fake(attention_op)
def _(q, k, v, causal, scale, bottom_right, window_left, window_right, softcap, alibi_slopes):
    b, n, h, _ = q.shape
    return q.new_empty(q.shape), q.new_empty((b, h, n), dtype=torch.float32)


@library_op("attention_backward")
def attention_backward_op(
    do: torch.Tensor,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    o: torch.Tensor,
    lse: torch.Tensor,
    causal: bool,
    scale: float,
    bottom_right: bool,
    window_left: int,
    window_right: int,
    softcap: float,
    alibi_slopes: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return run(
        "attention_backward",
        library.attention_backward,
        do,
        q,
        k,
        v,
        o,
        lse,
        causal,
        scale,
        **_options(bottom_right, window_left, window_right, softcap, alibi_slopes),
    )


@fake(attention_backward_op)
def _(do, q, k, v, o, lse, causal, scale, bottom_right, window_left, window_right, softcap, _a):
    return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)


def _setup(ctx, inputs, output):
    q, k, v, *options = inputs
    ctx.options = options
    ctx.save_for_backward(q, k, v, *output)
    ctx.mark_non_differentiable(output[1])


def _grad(ctx, do, _dlse):
    q, k, v, o, lse = ctx.saved_tensors
    dq, dk, dv = attention_backward_op(dense(do), q, k, v, o, lse, *ctx.options)
    return (dq, dk, dv) + (None,) * len(ctx.options)


attention_op.register_autograd(_grad, setup_context=_setup)


# ---------------------------------------------------------------- the fused op, packed sequences


@library_op("attention_varlen")
def attention_varlen_op(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cu_seqlens_q: torch.Tensor,
    cu_seqlens_k: torch.Tensor,
    max_seqlen_q: int,
    max_seqlen_k: int,
    causal: bool,
    scale: float,
    window_left: int,
    window_right: int,
    softcap: float,
    alibi_slopes: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(o [total_q, H_q, D], lse f32 [H_q, total_q]) of packed sequences, bottom right:
    :func:`teeny_tx.library.attention.attention_varlen`."""
    return run(
        "attention_varlen",
        library.attention_varlen,
        q,
        k,
        v,
        cu_seqlens_q,
        cu_seqlens_k,
        max_seqlen_q,
        max_seqlen_k,
        causal,
        scale,
        **_options(False, window_left, window_right, softcap, alibi_slopes),
    )


@fake(attention_varlen_op)
def _(q, k, v, cu_q, cu_k, max_q, max_k, causal, scale, left, right, softcap, alibi_slopes):
    total, h, _ = q.shape
    return q.new_empty(q.shape), q.new_empty((h, total), dtype=torch.float32)


@library_op("attention_varlen_backward")
def attention_varlen_backward_op(
    do: torch.Tensor,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    o: torch.Tensor,
    lse: torch.Tensor,
    cu_seqlens_q: torch.Tensor,
    cu_seqlens_k: torch.Tensor,
    max_seqlen_q: int,
    max_seqlen_k: int,
    causal: bool,
    scale: float,
    window_left: int,
    window_right: int,
    softcap: float,
    alibi_slopes: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return run(
        "attention_varlen_backward",
        library.attention_varlen_backward,
        do,
        q,
        k,
        v,
        o,
        lse,
        cu_seqlens_q,
        cu_seqlens_k,
        max_seqlen_q,
        max_seqlen_k,
        causal,
        scale,
        **_options(False, window_left, window_right, softcap, alibi_slopes),
    )


@fake(attention_varlen_backward_op)
def _(do, q, k, v, o, lse, cu_q, cu_k, max_q, max_k, causal, scale, left, right, cap, _a):
    return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)


def _setup_varlen(ctx, inputs, output):
    q, k, v, cu_q, cu_k, *options = inputs
    ctx.options = options
    ctx.save_for_backward(q, k, v, *output, cu_q, cu_k)
    ctx.mark_non_differentiable(output[1])


def _grad_varlen(ctx, do, _dlse):
    q, k, v, o, lse, cu_q, cu_k = ctx.saved_tensors
    grads = attention_varlen_backward_op(dense(do), q, k, v, o, lse, cu_q, cu_k, *ctx.options)
    return (*grads, None, None) + (None,) * len(ctx.options)


attention_varlen_op.register_autograd(_grad_varlen, setup_context=_setup_varlen)


# ---------------------------------------------------------------- the blockwise path


def _block(b: int, h: int, n_q: int, n_kv: int) -> int:
    return max(64, min(n_kv, BLOCK_SCORES // max(1, b * h * n_q)))


def _band_mask(band: tuple[int, int] | None, n_q: int, start: int, stop: int, device) -> Any:
    """[N_q, stop - start] bool, True where query i may see key j (i + lo <= j <= i + hi);
    None without a band."""
    if band is None:
        return None
    lo, hi = band
    i = torch.arange(n_q, device=device)[:, None]
    j = torch.arange(start, stop, device=device)[None, :]
    return (j >= i + lo) & (j <= i + hi)


class _Blockwise(torch.autograd.Function):
    """o = softmax(softcap(scale q k^T) + mask) v on [B, H_kv, G, N, D] (G query heads per
    key/value head; k, v [B, H_kv, 1, N_kv, D]), one block of keys at a time; the mask is
    [B, H_kv, G, N_q, N_kv] (an expanded view) or None. The backward recomputes each block."""

    @staticmethod
    def forward(ctx, q, k, v, mask, scale, band, softcap):  # noqa: PLR0913
        acc_dtype = torch.float64 if q.dtype == torch.float64 else torch.float32
        qf = q.to(acc_dtype)
        b, hk, g, n_q, _ = q.shape
        n_kv = k.shape[-2]
        block = _block(b, hk * g, n_q, n_kv)
        m = q.new_full((b, hk, g, n_q), -math.inf, dtype=acc_dtype)
        total = q.new_zeros((b, hk, g, n_q), dtype=acc_dtype)
        acc = q.new_zeros((b, hk, g, n_q, v.shape[-1]), dtype=acc_dtype)
        for start in range(0, n_kv, block):
            stop = min(start + block, n_kv)
            s, _ = _scores(qf, k, mask, scale, band, softcap, start, stop)
            m_new = torch.maximum(m, s.amax(-1))
            m_safe = torch.where(m_new == -math.inf, 0.0, m_new)  # rows with no key yet
            p = torch.exp(s - m_safe[..., None])
            alpha = torch.exp(m - m_safe)
            total = total * alpha + p.sum(-1)
            acc = acc * alpha[..., None] + p @ v[..., start:stop, :].to(acc_dtype)
            m = m_new
        empty = total == 0  # rows that see no key: 0 out, and an lse no exponential reaches
        o = acc / torch.where(empty, 1.0, total)[..., None]
        lse = torch.where(empty, math.inf, torch.where(m == -math.inf, 0.0, m) + total.log())
        ctx.save_for_backward(q, k, v, o, lse, mask)
        ctx.scale, ctx.band, ctx.softcap, ctx.block = scale, band, softcap, block
        lse32 = lse.to(torch.float32)
        ctx.mark_non_differentiable(lse32)
        return o.to(q.dtype), lse32

    @staticmethod
    def backward(ctx, do, _dlse):
        q, k, v, o, lse, mask = ctx.saved_tensors
        acc_dtype = o.dtype
        qf, dof = q.to(acc_dtype), do.to(acc_dtype)
        delta = (dof * o).sum(-1, keepdim=True)
        dq = torch.zeros_like(qf)
        dk = torch.zeros(k.shape, dtype=acc_dtype, device=k.device)
        dv = torch.zeros(v.shape, dtype=acc_dtype, device=v.device)
        want_mask = mask is not None and ctx.needs_input_grad[3]
        dmask = torch.zeros(mask.shape, dtype=acc_dtype, device=q.device) if want_mask else None
        n_kv = k.shape[-2]
        for start in range(0, n_kv, ctx.block):
            stop = min(start + ctx.block, n_kv)
            s, t = _scores(qf, k, mask, ctx.scale, ctx.band, ctx.softcap, start, stop)
            p = torch.exp(s - lse[..., None])
            kc, vc = k[..., start:stop, :].to(acc_dtype), v[..., start:stop, :].to(acc_dtype)
            dv[..., start:stop, :] = (p.transpose(-1, -2) @ dof).sum(2, keepdim=True)
            ds = p * (dof @ vc.transpose(-1, -2) - delta)
            if dmask is not None:
                dmask[..., start:stop] = ds
            if t is not None:  # d(cap tanh(x / cap)) / dx = 1 - tanh^2
                ds = ds * (1 - t * t)
            dq += ds @ kc * ctx.scale
            dk[..., start:stop, :] = (ds.transpose(-1, -2) @ qf).sum(2, keepdim=True) * ctx.scale
        grads = (dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype))
        return (*grads, dmask, None, None, None)


def _scores(qf, k, mask, scale, band, softcap, start, stop):
    """(scores of keys [start, stop) after softcap, band and mask; tanh of the softcap or
    None), [B, H_kv, G, N_q, stop - start]."""
    s = qf @ k[..., start:stop, :].to(qf.dtype).transpose(-1, -2) * scale
    t = None
    if softcap:
        t = torch.tanh(s / softcap)
        s = t * softcap
    ok = _band_mask(band, qf.shape[-2], start, stop, qf.device)
    if ok is not None:
        s = s.masked_fill(~ok, -math.inf)
    if mask is not None:
        chunk = mask[..., start:stop]
        s = s.masked_fill(~chunk, -math.inf) if chunk.dtype == torch.bool else s + chunk
    return s, t


def _blockwise(q, k, v, mask, scale, band, softcap):
    """The blockwise path on [B, H, N, D] tensors; mask None or [B, H_q, N_q, N_kv]
    (expanded); returns (o [B, H_q, N_q, D_v], lse f32 [B, H_q, N_q])."""
    b, h_q, n_q, _ = q.shape
    h_kv = k.shape[1]
    g = h_q // h_kv
    q5 = q.reshape(b, h_kv, g, n_q, q.shape[-1])
    k5, v5 = k.unsqueeze(2), v.unsqueeze(2)
    # (a view: splitting the head dimension of the expanded mask; autograd sums its gradient
    # back over the broadcast dimensions)
    m5 = None if mask is None else mask.reshape(b, h_kv, g, n_q, k.shape[2])
    o, lse = _Blockwise.apply(q5, k5, v5, m5, scale, band, softcap)
    return o.reshape(b, h_q, n_q, v.shape[-1]), lse.reshape(b, h_q, n_q)


# ---------------------------------------------------------------- routing


def _fused_takes(q, k, v, attn_mask, dropout_p, band, softcap, alibi=None) -> bool:
    """Whether the fused kernels take this call (see the module's docstring)."""
    if attn_mask is not None or dropout_p or q.dtype not in _FUSED_DTYPES:
        return False
    if q.shape[-1] != v.shape[-1] or q.device.type not in ("cuda", "cpu"):
        return False
    if alibi is not None and alibi.dtype != torch.float32:
        return False
    grad = torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v))
    gpu = q.device.type == "cuda"
    return library.supports(q.shape[-1], backward=grad, band=band, softcap=bool(softcap), gpu=gpu)


def _attend(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    attn_mask: Any,
    dropout_p: float,
    causal: bool,
    bottom_right: bool,
    window: tuple[int, int],
    softcap: float,
    scale: float,
    alibi: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(o [B, H_q, N_q, D_v], lse f32 [B, H_q, N_q]) of checked [B, H, N, D] tensors, through
    the fused op or the blockwise path."""
    if dropout_p:
        raise NotImplementedError(
            "teeny_tx attention: dropout_p > 0 is not supported (the kernels have no dropout "
            "yet); pass dropout_p=0.0"
        )
    n_q, n_kv = q.shape[2], k.shape[2]
    band = library.band(n_q, n_kv, causal, bottom_right, window)
    if _fused_takes(q, k, v, attn_mask, dropout_p, band, softcap, alibi):
        o, lse = attention_op(
            q.transpose(1, 2),
            k.transpose(1, 2),
            v.transpose(1, 2),
            causal,
            scale,
            bottom_right,
            int(window[0]),
            int(window[1]),
            float(softcap),
            alibi,
        )
        return o.transpose(1, 2), lse
    if alibi is not None:
        raise NotImplementedError(
            "teeny_tx attention: alibi_slopes runs in the fused kernels only (f16/bf16 q, k, v, "
            "their head dims, f32 slopes); this call would take the blockwise path"
        )
    mask = None
    if attn_mask is not None:
        mask = attn_mask.expand(q.shape[0], q.shape[1], n_q, n_kv)
    return _blockwise(q, k, v, mask, scale, band, softcap)


def _check(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa, fn):
    """torch's checks of SDPA's arguments, with its messages (AttentionError)."""
    tensors = (query, key, value)
    if any(not isinstance(t, torch.Tensor) for t in tensors):
        raise AttentionError(f"{fn}: query, key and value must be tensors")
    if not (query.dtype == key.dtype == value.dtype):
        raise AttentionError(
            f"{fn}: Expected query, key, and value to have the same dtype, but got query.dtype: "
            f"{query.dtype} key.dtype: {key.dtype} and value.dtype: {value.dtype} instead."
        )
    if not (query.device == key.device == value.device):
        raise AttentionError(
            f"{fn}: Expected query, key, and value to have the same device type, but got "
            f"query.device: {query.device} key.device: {key.device} and value.device: "
            f"{value.device} instead."
        )
    if not query.is_floating_point():
        raise AttentionError(f"{fn}: query must be a floating-point tensor, got {query.dtype}")
    if min(t.dim() for t in tensors) < 2:
        raise AttentionError(
            f"{fn}: Expected query, key, and value to all be at least 2 dimensional, but got "
            f"query.dim: {query.dim()} key.dim: {key.dim()} and value.dim: {value.dim()} "
            "instead."
        )
    if not (query.dim() == key.dim() == value.dim()):
        raise AttentionError(
            f"{fn}: query, key and value must have the same number of dimensions, got "
            f"{query.dim()}, {key.dim()} and {value.dim()}"
        )
    if query.shape[:-3] != key.shape[:-3] or key.shape[:-1] != value.shape[:-1]:
        raise AttentionError(
            f"{fn}: batch dimensions must match: query {tuple(query.shape)}, key "
            f"{tuple(key.shape)}, value {tuple(value.shape)} (key and value must agree in all "
            "but the last dimension)"
        )
    if query.shape[-1] != key.shape[-1]:
        raise AttentionError(
            f"{fn}: query has head dim {query.shape[-1]} but key has {key.shape[-1]}; they must "
            "match (value's may differ)"
        )
    if query.dim() >= 3:
        h_q, h_kv = query.shape[-3], key.shape[-3]
        if h_q != h_kv and not enable_gqa:
            raise AttentionError(
                f"{fn}: query has {h_q} heads but key and value have {h_kv}: pass "
                "enable_gqa=True for grouped-query attention (the size of tensor a "
                f"({h_q}) must match the size of tensor b ({h_kv}) at dimension -3)"
            )
        if h_kv == 0 or h_q % h_kv:
            raise AttentionError(
                f"{fn}: Number of heads in key and value must divide the number of heads in "
                f"query: query has {h_q}, key and value {h_kv}"
            )
    if not 0.0 <= dropout_p <= 1.0:
        raise AttentionError(
            f"{fn}: dropout probability has to be between 0 and 1, but got {dropout_p}"
        )
    if scale is not None and not math.isfinite(float(scale)):
        raise AttentionError(f"{fn}: scale must be a finite number, got {scale}")
    if attn_mask is not None:
        if is_causal:
            raise AttentionError(
                f"{fn}: pass attn_mask or is_causal=True, not both (SDPA's documented rule)"
            )
        if not isinstance(attn_mask, torch.Tensor):
            raise AttentionError(f"{fn}: attn_mask must be a tensor or None")
        if attn_mask.dtype != torch.bool and attn_mask.dtype != query.dtype:
            raise AttentionError(
                f"{fn}: Expected attn_mask dtype to be bool or float or to match query dtype, "
                f"but got attn_mask.dtype: {attn_mask.dtype} and query.dtype: {query.dtype}"
            )
        want = (*query.shape[:-1], key.shape[-2])
        try:
            torch.broadcast_shapes(attn_mask.shape, want)
        except RuntimeError:
            raise AttentionError(
                f"{fn}: attn_mask of shape {tuple(attn_mask.shape)} does not broadcast to the "
                f"scores' shape {want}"
            ) from None
        if torch.broadcast_shapes(attn_mask.shape, want) != want:
            raise AttentionError(
                f"{fn}: attn_mask of shape {tuple(attn_mask.shape)} does not broadcast to the "
                f"scores' shape {want}"
            )


def _as_4d(t: torch.Tensor) -> torch.Tensor:
    """[..., H, N, D] as [B, H, N, D] (a view where the leading dimensions allow it)."""
    if t.dim() == 4:
        return t
    if t.dim() < 4:
        return t.reshape((1,) * (4 - t.dim()) + tuple(t.shape))
    return t.reshape(-1, *t.shape[-3:])


def scaled_dot_product_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> torch.Tensor:
    """torch.nn.functional.scaled_dot_product_attention: query [..., H_q, L, E], key
    [..., H_kv, S, E], value [..., H_kv, S, E_v] -> [..., H_q, L, E_v]. ``is_causal`` masks
    key j > query i (top left); ``attn_mask`` a bool (True: attend) or additive float mask
    broadcast to [..., H_q, L, S]; ``scale`` default 1/sqrt(E); ``enable_gqa``: H_kv may
    divide H_q. The fused kernels where they apply, else the blockwise path; dropout_p > 0
    raises NotImplementedError."""
    fn = "scaled_dot_product_attention"
    _check(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa, fn)
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else float(scale)
    q, k, v = _as_4d(query), _as_4d(key), _as_4d(value)
    mask = None
    if attn_mask is not None:
        mask = attn_mask.reshape((1,) * (query.dim() - attn_mask.dim()) + tuple(attn_mask.shape))
        mask = _as_4d(mask.expand(*query.shape[:-1], key.shape[-2]))
    o, _ = _attend(q, k, v, mask, dropout_p, bool(is_causal), False, (-1, -1), 0.0, scale)
    return o.reshape(*query.shape[:-1], value.shape[-1])


def attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool = False,
    scale: float | None = None,
) -> torch.Tensor:
    """softmax(scale q k^T [+ causal mask]) v for q [B, H_q, N_q, D], k and v [B, H_kv, N_kv,
    D] (SDPA's layout, ``is_causal`` and its default False; grouped-query heads as they come,
    H_kv dividing H_q): :func:`scaled_dot_product_attention` with ``enable_gqa=True``."""
    return scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale, enable_gqa=True)


def flash_attn_func(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    dropout_p: float = 0.0,
    softmax_scale: float | None = None,
    causal: bool = False,
    window_size: tuple[int, int] = (-1, -1),
    softcap: float = 0.0,
    alibi_slopes: torch.Tensor | None = None,
    deterministic: bool = False,
    return_lse: bool = False,
) -> Any:
    """FlashAttention's ``flash_attn_func``: q [B, N_q, H_q, D], k and v [B, N_kv, H_kv, D]
    (H_kv dividing H_q) -> out [B, N_q, H_q, D], and with ``return_lse`` (out, lse f32
    [B, H_q, N_q]). ``causal`` and ``window_size`` (left, right; -1 unbounded) align at the
    bottom right: query i sees keys j with i + N_kv - N_q - left <= j <= i + N_kv - N_q +
    right (causal: right = 0); a query that sees no key gives 0 (and lse +inf). ``softcap`` >
    0 takes softcap * tanh(scores / softcap); ``alibi_slopes`` ([H_q] or [B, H_q]) subtracts
    slope * |i + N_kv - N_q - j| (in the fused kernels only: NotImplementedError where the
    call would take the blockwise path). The backward is deterministic whatever
    ``deterministic`` says (no atomics). ``dropout_p`` > 0 raises NotImplementedError."""
    fn = "flash_attn_func"
    if dropout_p:
        raise NotImplementedError(f"{fn}: dropout_p > 0 is not supported; pass dropout_p=0.0")
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor) or t.dim() != 4:
            shape = tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
            raise AttentionError(
                f"{fn}: {name} must be 4-D [batch, seqlen, heads, head_dim], got {shape}"
            )
    window = _window(window_size, fn)
    if not isinstance(softcap, (int, float)) or not math.isfinite(softcap) or softcap < 0:
        raise ValueError(f"{fn}: softcap must be a finite number >= 0, got {softcap!r}")
    qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
    _check(qt, kt, vt, None, 0.0, False, softmax_scale, True, fn)
    scale = 1.0 / math.sqrt(q.shape[-1]) if softmax_scale is None else float(softmax_scale)
    if alibi_slopes is not None:
        want = ((q.shape[2],), (q.shape[0], q.shape[2]))
        if not isinstance(alibi_slopes, torch.Tensor) or tuple(alibi_slopes.shape) not in want:
            raise AttentionError(
                f"{fn}: alibi_slopes must be a tensor of shape {want[0]} or {want[1]}"
            )
        alibi_slopes = alibi_slopes.to(device=q.device, dtype=torch.float32).contiguous()
    o, lse = _attend(
        qt, kt, vt, None, 0.0, bool(causal), True, window, float(softcap), scale, alibi_slopes
    )
    out = o.transpose(1, 2)
    return (out, lse) if return_lse else out


def flash_attn_varlen_func(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cu_seqlens_q: torch.Tensor,
    cu_seqlens_k: torch.Tensor,
    max_seqlen_q: int,
    max_seqlen_k: int,
    dropout_p: float = 0.0,
    softmax_scale: float | None = None,
    causal: bool = False,
    window_size: tuple[int, int] = (-1, -1),
    softcap: float = 0.0,
    alibi_slopes: torch.Tensor | None = None,
    deterministic: bool = False,
    return_attn_probs: bool = False,
    return_lse: bool = False,
) -> Any:
    """FlashAttention's ``flash_attn_varlen_func``: packed sequences, q [total_q, H_q, D], k and
    v [total_k, H_kv, D] (H_kv dividing H_q), sequence b the rows cu_seqlens_q[b] ..
    cu_seqlens_q[b + 1] - 1 of q and cu_seqlens_k[b] .. cu_seqlens_k[b + 1] - 1 of k and v
    (int32 [B + 1] tensors on q's device), each attending within itself; max_seqlen_q and
    max_seqlen_k at least the longest sequences. Returns out [total_q, H_q, D], and with
    ``return_lse`` or ``return_attn_probs`` (out, lse f32 [H_q, total_q]): the probabilities
    themselves are never formed. ``causal``, ``window_size``, ``softcap`` and
    ``alibi_slopes`` ([H_q] or [B, H_q]) as :func:`flash_attn_func` takes them, aligned at each
    sequence's own bottom right; a query that sees no key gives 0 (lse +inf). The fused
    kernels only (f16/bf16, head dims 32 to 256; anything else raises AttentionError), forward
    and backward, with no padding and no copy: the grid covers the longest sequence and each
    program ends at its own sequence's length. The offsets are checked on the host (from 0,
    non-decreasing, ending at total_q and total_k; a device sync per call, skipped while a
    CUDA graph is captured). The backward is deterministic (no atomics); ``dropout_p`` > 0
    raises NotImplementedError."""
    fn = "flash_attn_varlen_func"
    if dropout_p:
        raise NotImplementedError(f"{fn}: dropout_p > 0 is not supported; pass dropout_p=0.0")
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor) or t.dim() != 3:
            shape = tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
            raise AttentionError(
                f"{fn}: {name} must be 3-D [total_tokens, heads, head_dim], got {shape}"
            )
    if not (q.dtype == k.dtype == v.dtype) or q.dtype not in _FUSED_DTYPES:
        raise AttentionError(
            f"{fn}: q, k and v must all be float16 or all bfloat16 (it runs in the fused "
            f"kernels), got {q.dtype}, {k.dtype} and {v.dtype}"
        )
    if not (q.device == k.device == v.device) or q.device.type not in ("cuda", "cpu"):
        raise AttentionError(
            f"{fn}: q, k and v must be on one CUDA device (or the CPU: the interpreter), got "
            f"{q.device}, {k.device} and {v.device}"
        )
    if k.shape != v.shape or k.shape[-1] != q.shape[-1]:
        raise AttentionError(
            f"{fn}: k and v must have one shape and q's head dim: q {tuple(q.shape)}, k "
            f"{tuple(k.shape)}, v {tuple(v.shape)}"
        )
    if k.shape[1] == 0 or q.shape[1] % k.shape[1]:
        raise AttentionError(
            f"{fn}: the number of key/value heads ({k.shape[1]}) must divide the number of "
            f"query heads ({q.shape[1]})"
        )
    lo, hi = library.HEAD_DIM_RANGE
    if not library.supports(q.shape[-1]):
        raise AttentionError(f"{fn}: head dim {q.shape[-1]} is not supported; it takes {lo}-{hi}")
    for name, cu in (("cu_seqlens_q", cu_seqlens_q), ("cu_seqlens_k", cu_seqlens_k)):
        if not isinstance(cu, torch.Tensor) or cu.dtype != torch.int32 or cu.dim() != 1:
            what = f"{cu.dtype} {tuple(cu.shape)}" if isinstance(cu, torch.Tensor) else type(cu)
            raise AttentionError(
                f"{fn}: {name} must be a 1-D torch.int32 tensor [batch + 1], got {what}"
            )
        if cu.device != q.device:
            raise AttentionError(
                f"{fn}: {name} is on {cu.device} but q is on {q.device}: pass the offsets on "
                "q's device"
            )
    for name, n in (("max_seqlen_q", max_seqlen_q), ("max_seqlen_k", max_seqlen_k)):
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise AttentionError(f"{fn}: {name} must be an int >= 0, got {n!r}")
    window = _window(window_size, fn)
    if not isinstance(softcap, (int, float)) or not math.isfinite(softcap) or softcap < 0:
        raise ValueError(f"{fn}: softcap must be a finite number >= 0, got {softcap!r}")
    if softmax_scale is not None and not math.isfinite(float(softmax_scale)):
        raise AttentionError(f"{fn}: softmax_scale must be a finite number, got {softmax_scale}")
    scale = 1.0 / math.sqrt(q.shape[-1]) if softmax_scale is None else float(softmax_scale)
    if alibi_slopes is not None:
        want = ((q.shape[1],), (cu_seqlens_q.shape[0] - 1, q.shape[1]))
        if not isinstance(alibi_slopes, torch.Tensor) or tuple(alibi_slopes.shape) not in want:
            raise AttentionError(
                f"{fn}: alibi_slopes must be a tensor of shape {want[0]} or {want[1]}"
            )
        alibi_slopes = alibi_slopes.to(device=q.device, dtype=torch.float32).contiguous()
    out, lse = attention_varlen_op(
        q,
        k,
        v,
        cu_seqlens_q,
        cu_seqlens_k,
        max_seqlen_q,
        max_seqlen_k,
        bool(causal),
        scale,
        window[0],
        window[1],
        float(softcap),
        alibi_slopes,
    )
    return (out, lse) if return_lse or return_attn_probs else out


def _window(window_size: Any, fn: str) -> tuple[int, int]:
    try:
        left, right = (int(w) for w in window_size)
    except (TypeError, ValueError):
        raise ValueError(
            f"{fn}: window_size must be a pair (left, right) of ints, got {window_size!r}"
        ) from None
    if left < -1 or right < -1:
        raise ValueError(
            f"{fn}: window_size entries must be >= -1 (-1: unbounded), got {window_size!r}"
        )
    return left, right
