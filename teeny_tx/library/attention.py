"""Attention: FlashAttention-2 forward and backward, the kernels of ``kernels/attention.c``.

Input: q [B, N_q, H_q, D], k and v [B, N_kv, H_kv, D] (f16 or bf16, one dtype; D any head dim
from 32 to 256, forward and backward; H_kv dividing H_q: grouped-query attention), as CuPy
arrays or torch CUDA tensors, or NumPy arrays with ``interpret=True``. Any strides: a
[B, H, N, D] array passed as its ``transpose(1, 2)`` view, or q, k and v sliced out of one fused
projection, are read in place (at a padded head dim that is a multiple of 8, a view whose
address or strides are not multiples of 16 bytes is copied first: :func:`_kept`).
Output: o [B, N_q, H_q, D] (contiguous, the inputs' dtype) and lse f32 [B, H_q, N_q], the
natural log-sum-exp of each row of scaled scores; the backward gives dq, dk, dv shaped and
typed as q, k, v. Each function checks its arguments (``LaunchError``) and launches on the
current stream of the arrays' library (nothing waits for the device).

``causal=True`` masks key j > query i (torch's ``is_causal``: the triangle aligned at the top
left); ``bottom_right=True`` aligns it (and ``window``) at the bottom right, FlashAttention's
rule, j > i + N_kv - N_q; ``window=(left, right)`` keeps keys from ``left`` before the diagonal
to ``right`` after it (-1: unbounded); ``softcap`` > 0 caps the scores at +-softcap with tanh
(:func:`band`, :class:`_Band`). A query that sees no key gives 0 (lse +inf). ``scale``
defaults to 1/sqrt(D). GPU launches take the fixed configs
:data:`FORWARD`, :data:`BACKWARD_DKDV` and :data:`BACKWARD_DQ` (by head dim), or, with the
module flag ``TUNE = True``, the fastest of each kernel's ``#pragma autotune`` configs (timed
once per shape); the interpreter takes :data:`INTERPRET` (small tiles, the same kernels).
GPU launches load the pipelined K/V (Q/dO) tiles with TMA (``lower/pipeline.py``; the module
flag :data:`TMA`, on; the fixed configs) where the arrays' strides allow it, else cp.async.

Packed sequences (FlashAttention's varlen): :func:`attention_varlen` and
:func:`attention_varlen_backward` take q [total_q, H_q, D], k and v [total_kv, H_kv, D] and the
i32 offsets cu_seqlens_q, cu_seqlens_k [B + 1]; each sequence attends within itself, its band
aligned at its own bottom right; lse is f32 [H_q, total_q]. The kernels' grid covers the longest
sequence and each program returns past its own (no padding, no copy).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from .. import switches
from ..errors import LaunchError
from ..runtime.grid import cdiv
from ..runtime.memory import device_pointer
from ..runtime.streams import torch_stream
from .arrays import Arrays
from .loader import module
from .plans import Launch, plan_key, planned, replay

LOG2E = 1.4426950408889634
# The head dims taken, forward and backward, on the GPU and the interpreter: every one from 32
# to 256. Each runs on the smallest tile of TILES that holds it (the kernels' D, a power of
# two), its columns past the head dim (DH < D) masked in each load and store: zeros in,
# nothing out, never a padded copy. A head dim that is a multiple of 8 keeps 16-byte loads
# (kernels/attention.c, head_cols: the arrays' strides and addresses are checked for it,
# :func:`_aligned`); any other reads element by element (no pipelined copies: the loads'
# registers spill, 0.8-1.8 KB a thread at 111 on sm_90a, so it runs, but slowly).
HEAD_DIM_RANGE = (32, 256)
# The forward at 256: 128 x 64 tiles (its two [128, 256] f32 halves of O take 128 of a thread's
# registers; ptxas spills 130-160 bytes per thread, before the key loop only; H200,
# 2026-12-01, N=4096, TFLOP/s ours / cuDNN: fp16 485 / 622, causal 391 / 561, bf16 492 / 642).
# The backward at 256 on 8 warps of 64 x 32 tiles: the dK/dV kernel's two [BN, 256] f32
# accumulators fit 248 registers at BN = 32 (64 x 64 tiles need 264 KB of shared memory for
# their rings, 4 warps of 64 x 32 spill 504 bytes); dQ likewise (242 registers, no spill; 8
# warps of 64 x 64 spill 92 bytes). NVRTC sm_90a, 2026-12-02; not measured on a GPU.
TILES = (32, 64, 128, 256)


def tile_of(d: int) -> int:
    """The head-dim tile (the kernels' D) of head dim ``d``: the smallest in :data:`TILES`."""
    return next((t for t in TILES if d <= t), 0)


DTYPES = ("f16", "bf16")
TUNE = False  # True: GPU launches through the kernels' #pragma autotune configs
# GPU launches load the pipelined K/V (Q/dO) tiles with TMA (lower/pipeline.py) where the
# arrays allow it (positive strides, 32-bit offsets); False: cp.async. Measured faster in all
# eight cases (H200, 2026-12-01 15:23Z, N=4096 fp16, TFLOP/s cp.async / TMA): fwd D=128 424 /
# 448, causal 370 / 385; bwd D=128 336 / 372, causal 305 / 326; fwd D=64 326 / 335, causal
# 283 / 295; bwd D=64 269 / 280, causal 244 / 269.
TMA = True


class AttentionConfig(NamedTuple):
    """One launch of an attention kernel: BM query rows and BN key rows per tile;
    ``warp_specialize`` (the forward's WARP_SPECIALIZE, lower/warp_spec.py): 1, a producer
    warpgroup issues the pipelined TMA copies; 2, also the two compute warpgroups take turns
    at the products (ping-pong); 0 neither. Where TMA does not apply the kernel keeps its form."""

    bm: int
    bn: int
    num_warps: int
    num_stages: int = 2
    warp_specialize: int = 0


# by head dim: the fastest of bench/sweep_attention.py on the H200 (2026-12-01, N=4096, B=4,
# H=32, fp16, causal and not; BENCHMARKS.md). On sm_90a the 16-rows-per-warp tiles (BM = 16 *
# num_warps for the forward and dQ, BN = 16 * num_warps for dK/dV) run on wgmma. dK/dV at D = 128
# holds two [128, 128] f32 accumulators per 256 threads (ptxas spills about 100 bytes; 4 warps
# of 64 x 64 or BM = 32 are slower), and its 3-stage ring does not fit in shared memory.
FORWARD = {
    32: AttentionConfig(128, 64, 8, 3),  # (64's; not measured)
    64: AttentionConfig(128, 64, 8, 3),
    128: AttentionConfig(128, 128, 8, 3),
    256: AttentionConfig(128, 64, 8, 2),  # 3 stages of 64 x 256 K and V do not fit
}
# the causal forward of short sequences (n_kv <= SHORT): with 128-row tiles most programs do only
# a few key blocks and pay their prologue and epilogue alone on the SM; 64 x 64 tiles of 4 warps
# run several programs per SM (H200, 2026-12-01 19:35–20:45Z, main 02f8c28, N=1024 fp16
# causal, TFLOP/s, FORWARD / 64 x 64: D=64 178 / 220, D=128 220 / 226;
# bench/sweep_attention.py --n 1024)
SHORT = 1024
FORWARD_SHORT_CAUSAL = {
    32: AttentionConfig(64, 64, 4, 2),
    64: AttentionConfig(64, 64, 4, 2),
    128: AttentionConfig(64, 64, 4, 2),
}
# the forward whose softmax of key block j + 1 runs while the product of block j does
# (attention_fwd_overlap: deferred wgmma waits, lower/dot_plan.py); OVERLAP: the wrapper
# launches it instead of attention_fwd (D = 64 and 128). Its prologue and epilogue products
# read a scratch buffer beside the ring, so 3 stages of 128 x 128 tiles do not fit. Measured
# slower in all four cases (H200, 2026-12-01 17:20Z, N=4096 fp16, TFLOP/s, attention_fwd /
# the best overlap config): D=128 446 / 420, causal 388 / 324; D=64 330 / 334 (128 x 64 s3),
# causal 291 / 246 (docs/attention.md), so it is off.
OVERLAP = False
# The warp-specialised schedule of the forward and of dQ (their WARP_SPECIALIZE: 1, a producer
# warpgroup issues the K/V copies and the compute warps take up to 240 registers each; 2, also
# the two compute warpgroups' ping-pong): None follows FORWARD's and BACKWARD_DQ's
# warp_specialize; 0, 1 or 2 forces it for both at every head dim (benchmarks: the environment
# variable $TEENY_TX_ATTENTION_WS, read once at import). dK/dV's key loop is nested in its loop
# over a group's heads, which warp specialisation does not take (lower/warp_spec.py).
WARP_SPECIALIZE: int | None = switches.read("ATTENTION_WS")
FORWARD_OVERLAP = {64: AttentionConfig(128, 64, 8, 3), 128: AttentionConfig(128, 64, 8, 3)}
BACKWARD_DKDV = {
    32: AttentionConfig(64, 64, 4),
    64: AttentionConfig(64, 64, 4),
    128: AttentionConfig(64, 128, 8),
    256: AttentionConfig(64, 32, 8),  # (see TILES; not measured)
}
BACKWARD_DQ = {
    32: AttentionConfig(64, 64, 4),
    64: AttentionConfig(64, 64, 4),
    128: AttentionConfig(128, 128, 8),
    256: AttentionConfig(64, 32, 8),  # (see TILES; not measured)
}
# dQ by f32 atomics (by head dim): the dK/dV kernel also adds each key block's dS K into an f32
# buffer, which a cast kernel scales and writes as dq, instead of a dQ kernel of its own that
# computes P and dS a second time; BACKWARD_DKDV_ATOMIC are that kernel's configs. Measured
# slower at every case (H200, 2026-12-01, bench/sweep_attention.py --tables FIXED ATOMIC_DQ,
# N=4096 fp16, TFLOP/s, two kernels / atomics): D=128 337 / 206, causal 308 / 169; D=64 270 /
# 200, causal 246 / 148: the f32 adds move (N / BN) x N x D x 4 bytes per head through L2.
ATOMIC_DQ = {32: False, 64: False, 128: False, 256: False}
BACKWARD_DKDV_ATOMIC = {
    32: AttentionConfig(64, 64, 4),
    64: AttentionConfig(64, 64, 4),
    128: AttentionConfig(64, 128, 8),
    256: AttentionConfig(64, 32, 8),
}
# Head dims that are not a multiple of 8 (by tile): their loads are element by element (no
# pipelined copies), each in registers of its own, so the tables above spill (at 111 on 128's
# configs: forward 784 bytes a thread, dK/dV 1452, dQ 1804); these 8-warp tiles do not, or
# barely (111: dK/dV 8 bytes; 201 on 256's: forward 352, dK/dV 80). NVRTC sm_90a, 2026-12-02;
# not measured on a GPU.
UNALIGNED_FORWARD = {
    32: AttentionConfig(64, 64, 8),
    64: AttentionConfig(64, 64, 8),
    128: AttentionConfig(64, 64, 8),
    256: AttentionConfig(32, 64, 8),
}
UNALIGNED_DKDV = {
    32: AttentionConfig(64, 32, 8),
    64: AttentionConfig(64, 32, 8),
    128: AttentionConfig(64, 32, 8),
    256: AttentionConfig(32, 16, 8),
}
UNALIGNED_DQ = {
    32: AttentionConfig(64, 32, 8),
    64: AttentionConfig(64, 32, 8),
    128: AttentionConfig(64, 32, 8),
    256: AttentionConfig(16, 32, 8),
}
PREPROCESS_BM = 64
INTERPRET = AttentionConfig(32, 32, 4)  # small tiles: the interpreter runs programs one by one


UNBOUNDED = 1 << 30  # a band's side that bounds nothing (far past any sequence's length)


def band(
    n_q: int, n_kv: int, causal: bool, bottom_right: bool = False, window: tuple = (-1, -1)
) -> tuple[int, int] | None:
    """The keys query i sees, as offsets (lo, hi): i + lo <= j <= i + hi; None where every
    query sees every key. The diagonal is j = i (top left, SDPA's ``is_causal``) or j = i +
    n_kv - n_q (``bottom_right``: FlashAttention's alignment); ``causal`` ends the band at the
    diagonal; ``window`` (left, right), -1 unbounded, keeps keys from ``left`` before to
    ``right`` after it (FlashAttention's ``window_size``)."""
    diagonal = n_kv - n_q if bottom_right else 0
    left, right = (int(w) for w in window)
    if causal:
        right = 0 if right < 0 else min(right, 0)
    lo = diagonal - left if left >= 0 else -UNBOUNDED
    hi = diagonal + right if right >= 0 else UNBOUNDED
    if lo <= 1 - n_q and hi >= n_kv - 1:
        return None
    return lo, hi


def supports(
    d: int,
    *,
    backward: bool = False,
    band: tuple[int, int] | None = None,
    softcap: bool = False,
    gpu: bool = False,
) -> bool:
    """Whether the kernels take head dim ``d`` (forward, or forward and backward), the
    ``band`` (:func:`band`; every band is taken) and a softcap (taken): every head dim of
    :data:`HEAD_DIM_RANGE`, forward and backward, on the GPU (``gpu``) and the interpreter."""
    lo, hi = HEAD_DIM_RANGE
    return lo <= d <= hi


class _Band(NamedTuple):
    """The kernels' mask and score options of one call: BAND with (lo, hi), SOFTCAP with
    cap_in = scale / cap and cap_out = cap * log2(e)."""

    band: tuple[int, int] | None
    softcap: float

    def constexprs(self) -> dict[str, int]:
        return {"BAND": int(self.band is not None), "SOFTCAP": int(bool(self.softcap))}

    def bounds(self) -> tuple[int, int]:
        return self.band if self.band is not None else (-UNBOUNDED, UNBOUNDED)

    def caps(self, scale: float) -> tuple[float, float]:
        if not self.softcap:
            return 0.0, 0.0
        return scale / self.softcap, self.softcap * LOG2E

    def top_left_causal(self) -> bool:
        """Whether the band is at most the top-left triangle (the overlapped forward's
        CAUSAL), with no softcap."""
        return not self.softcap and self.band in (None, (-UNBOUNDED, 0))


def _window_softcap(window: Any, softcap: Any) -> tuple[int, int, float]:
    """(left, right, softcap) of a call, checked."""
    try:
        softcap = float(softcap)
        left, right = (int(w) for w in window)
    except (TypeError, ValueError):
        raise LaunchError(
            f"attention: window must be a pair of ints and softcap a number, got {window!r} "
            f"and {softcap!r}"
        ) from None
    if not math.isfinite(softcap) or softcap < 0:
        raise LaunchError(f"attention: softcap must be a finite number >= 0, got {softcap}")
    if left < -1 or right < -1:
        raise LaunchError(f"attention: window entries must be >= -1 (-1: unbounded), got {window}")
    return left, right, softcap


def _band_of(q: Any, k: Any, causal: bool, bottom_right: bool, window: Any, softcap: Any) -> _Band:
    """The call's :class:`_Band`, from the shapes of q and k (unchecked: the shape checks come
    after and say what is wrong)."""
    left, right, softcap = _window_softcap(window, softcap)
    shape_q, shape_k = tuple(getattr(q, "shape", ())), tuple(getattr(k, "shape", ()))
    if len(shape_q) != 4 or len(shape_k) != 4:
        return _Band(None, softcap)
    return _Band(band(shape_q[1], shape_k[1], causal, bottom_right, (left, right)), softcap)


def _strides4(arrays: Arrays, a: Any) -> tuple[int, int, int, int]:
    b, n, h, d = arrays.strides(a)
    return b, h, n, d  # the kernels take (batch, head, row, column)


def _check(fn: str, named: dict[str, Any], interpret: bool) -> tuple[Arrays, dict[str, tuple]]:
    """The arrays' library and each 4-D argument's shape, after the checks every call shares."""
    arrays = Arrays(fn, named, interpret)
    shapes = {}
    for name, a in named.items():
        if len(a.shape) != 4:
            raise arrays.error(
                f"{name} must be 4-D [batch, seq, heads, head_dim], got shape {tuple(a.shape)}"
            )
        arrays.check_dtype(a, name, DTYPES)
        shapes[name] = tuple(int(x) for x in a.shape)
    first = next(iter(named))
    for name, a in named.items():
        if arrays.dtype(a) != arrays.dtype(named[first]):
            raise arrays.error(
                f"{name} is {arrays.dtype(a)} but {first} is {arrays.dtype(named[first])}; "
                "they must match"
            )
    return arrays, shapes


def _dtype(arrays: Arrays, a: Any) -> str:
    """The dtype name of an array the checks took (one of :data:`DTYPES`)."""
    name = arrays.dtype(a)
    if name is None or name not in DTYPES:
        raise arrays.error(f"q has dtype {a.dtype}; this takes {', '.join(DTYPES)}")
    return name


def _qkv(arrays: Arrays, shapes: dict[str, tuple]) -> tuple[int, int, int, int, int, int]:
    """(B, N_q, N_kv, H_q, H_kv, D), checked; D one :func:`supports` takes."""
    b, n_q, h_q, d = shapes["q"]
    if shapes["k"] != shapes["v"]:
        raise arrays.error(f"k has shape {shapes['k']} but v has {shapes['v']}; they must match")
    bk, n_kv, h_kv, dk = shapes["k"]
    if bk != b:
        raise arrays.error(f"q has batch {b} but k and v have {bk}")
    if dk != d:
        raise arrays.error(f"q has head_dim {d} but k and v have {dk}")
    if not supports(d):
        lo, hi = HEAD_DIM_RANGE
        raise arrays.error(f"head_dim {d} is not supported; this takes {lo} to {hi}")
    if h_kv == 0 or h_q % h_kv:
        raise arrays.error(
            f"q has {h_q} heads and k, v have {h_kv}: the number of key/value heads must divide "
            "the number of query heads (grouped-query attention)"
        )
    if n_kv == 0 and n_q > 0:
        raise arrays.error("k and v have no rows: every query needs at least one key")
    return b, n_q, n_kv, h_q, h_kv, d


def _scales(d: int, scale: float | None) -> tuple[float, float]:
    scale = 1.0 / math.sqrt(d) if scale is None else float(scale)
    if not math.isfinite(scale):
        raise LaunchError(f"attention: scale must be a finite number, got {scale}")
    return scale, scale * LOG2E


def _element_strides(a: Any) -> tuple[int, ...]:
    stride = getattr(a, "stride", None)
    if callable(stride):  # a torch tensor
        return tuple(stride())
    return tuple(x // a.itemsize for x in a.strides)


# the padded head dims whose loads are promised 16-byte groups (kernels/attention.c, head_cols)
_PROMISED = frozenset(d for d in range(8, 257, 8) if d not in TILES)


def _aligned(a: Any) -> bool:
    """Whether a GPU array keeps that promise: a 16-byte aligned address, a column stride of 1
    and every other stride (of a dimension longer than 1) a multiple of 8 elements."""
    try:
        strides = _element_strides(a)
        address = device_pointer(a)[0]
    except (AttributeError, TypeError, LaunchError):  # not a GPU array: the checks say so
        return True
    rows = zip(a.shape[:-1], strides[:-1], strict=True)
    if strides[-1] != 1 or any(s % 8 for n, s in rows if n > 1):
        return False
    return address % 16 == 0


def _kept(interpret: bool, *arrays: Any) -> tuple[Any, ...]:
    """The head-dim arrays of a call as the kernels may read them: where the head dim is one of
    :data:`_PROMISED`, a GPU array that breaks the promise (:func:`_aligned`; an odd view) is
    replaced by a contiguous copy, so that no launch, nor any replay of a plan (whose key holds
    no address), reads it misaligned; every other array as it is."""
    shape = getattr(arrays[0], "shape", ())
    if interpret or not shape or shape[-1] not in _PROMISED:
        return arrays
    kept = []
    for a in arrays:
        if getattr(a, "shape", ())[-1:] == shape[-1:] and not _aligned(a):
            if hasattr(a, "clone"):  # a torch tensor: torch is imported
                import torch

                a = a.clone(memory_format=torch.contiguous_format)
            else:
                a = a.copy(order="C")
        kept.append(a)
    return tuple(kept)


def _tma_fits(args: tuple) -> bool:
    """Whether TMA can read every array argument: 16-byte aligned addresses and positive
    strides (a tensor map's are), and 32-bit element offsets (its launches take 32-bit
    indices)."""
    for a in args:
        if isinstance(a, (int, float)):
            continue
        address = a.ctypes.data if isinstance(a, np.ndarray) else device_pointer(a)[0]
        if address % 16:
            return False
        strides = _element_strides(a)
        if any(s <= 0 for s in strides):
            return False
        if 1 + sum((n - 1) * s for n, s in zip(a.shape, strides, strict=True)) >= 2**31:
            return False
    return True


class _Where(NamedTuple):
    """The arrays' library and device: what a launch needs of a call besides its arguments
    (a plan keeps this, not the first call's arrays)."""

    kind: str  # "numpy", "cupy" or "torch"
    device: int  # -1 for NumPy
    torch: Any  # the torch module for torch tensors, else None

    @classmethod
    def of(cls, arrays: Arrays) -> _Where:
        if arrays.kind == "numpy":
            return cls("numpy", -1, None)
        if arrays.kind == "torch":
            return cls("torch", arrays.first.device.index, arrays.torch)
        return cls("cupy", arrays.first.device.id, None)

    def stream(self) -> Any:
        """The stream object a launcher takes: torch's current one, else None (CuPy's)."""
        return torch_stream(self.torch, self.device) if self.kind == "torch" else None


def _launch(
    where: _Where, kernel, grid, args: tuple, fixed: AttentionConfig, **constexprs
) -> Callable[[], Callable[..., None]] | None:
    """Through the kernel's autotune configs on the GPU; ``fixed`` on the interpreter; with
    :data:`TMA` (or $TEENY_TX_PIPELINE_TMA naming the kernel), ``fixed`` on the kernel's TMA
    form (``kernel.tma``: the same parsed module) where the arrays allow it. Returns, for a
    TMA launch, the maker of its direct launch (a launch plan, ``Kernel.direct``) for calls
    with arrays like these; None for any other launch."""
    if 0 in grid(fixed._asdict() | {"BM": fixed.bm, "BN": fixed.bn}):
        return None
    use_tma = (TMA and not TUNE) or switches.codegen().tma_for(kernel.name)
    if where.kind != "numpy" and use_tma and _tma_fits(args):
        meta = {"BM": fixed.bm, "BN": fixed.bn}
        g = tuple(grid(meta))
        options = dict(num_warps=fixed.num_warps, num_stages=fixed.num_stages, strided=True)
        kernel.tma[g](*args, stream=where.stream(), **options, **constexprs, **meta)
        return lambda: kernel.tma.direct(g, args, **options, **constexprs, **meta)
    if where.kind == "numpy" or not TUNE:
        config = INTERPRET if where.kind == "numpy" else fixed
        meta = {"BM": config.bm, "BN": config.bn}
        g = grid(meta)
        if where.kind == "numpy":
            kernel.interpret[g](
                *args, num_warps=config.num_warps, strided=True, **constexprs, **meta
            )
        else:
            kernel[g](
                *args,
                num_warps=config.num_warps,
                num_stages=config.num_stages,
                stream=where.stream(),
                strided=True,  # q, k, v, o and their grads are indexed with their own strides
                **constexprs,
                **meta,
            )
        return None
    kernel.tune[grid](*args, stream=where.stream(), strided=True, **constexprs)
    return None


class _Pipelined:
    """One launch of a pipelined attention kernel in a plan (plans.py). Called, it launches
    through :func:`_launch` (every argument checked; TMA where the arrays allow it) and keeps
    the TMA launch's maker of its direct launch; :meth:`fast` is then that direct launch (a
    launch plan of ``runtime/plan.py``: the tensor maps encoded once, their addresses
    rewritten per call), which a plan's later calls make at their arrays' addresses. A call
    whose addresses break the first one's alignment goes to the kernel's launcher, and every
    launch that was not a TMA one takes the full path."""

    def __init__(self, where: _Where, kernel, grid, fixed: AttentionConfig, **constexprs):
        self.where, self.kernel, self.grid, self.fixed = where, kernel, grid, fixed
        self.constexprs = constexprs
        self.direct: Callable[[], Callable[..., None]] | None = None

    def __call__(self, *args: Any) -> None:
        self.direct = _launch(
            self.where, self.kernel, self.grid, args, self.fixed, **self.constexprs
        )

    def fast(self) -> Callable[..., None]:
        made, self.direct = self.direct, None
        return self if made is None else made()


def _settings(q: Any, *tables: dict) -> tuple:
    """What a plan's launches were chosen by besides the arrays: the module's flags and the
    config tables' entries for q's head dim (a plan made under other settings never replays)."""
    shape = getattr(q, "shape", ())
    d = tile_of(shape[-1]) if shape else None
    settings = (TMA, TUNE, OVERLAP, SHORT, WARP_SPECIALIZE)
    return (*settings, *(table.get(d) for table in tables))


def _forward_config(d: int, causal: bool, n_kv: int, overlap: bool) -> AttentionConfig:
    """The forward's fixed config for head dim ``d`` (on its tile)."""
    tile = tile_of(d)
    if d % 8:
        return UNALIGNED_FORWARD[tile]
    if overlap:
        return FORWARD_OVERLAP[tile]
    if causal and n_kv <= SHORT and tile in FORWARD_SHORT_CAUSAL:
        return FORWARD_SHORT_CAUSAL[tile]
    return FORWARD[tile]


def _dkdv_config(d: int, atomic: bool) -> AttentionConfig:
    tile = tile_of(d)
    if d % 8:
        return UNALIGNED_DKDV[tile]
    return (BACKWARD_DKDV_ATOMIC if atomic else BACKWARD_DKDV)[tile]


def _dq_config(d: int) -> AttentionConfig:
    return (UNALIGNED_DQ if d % 8 else BACKWARD_DQ)[tile_of(d)]


def _strides_of(shape: tuple[int, ...]) -> tuple[int, int, int, int]:
    """(batch, head, row, column) strides of a contiguous [B, N, H, D] array of ``shape``."""
    _, n, h, d = shape
    return n * h * d, d, h * d, 1


def attention(
    q: Any,
    k: Any,
    v: Any,
    causal: bool = False,
    scale: float | None = None,
    *,
    bottom_right: bool = False,
    window: tuple[int, int] = (-1, -1),
    softcap: float = 0.0,
    alibi_slopes: Any = None,
    interpret: bool = False,
) -> tuple[Any, Any]:
    """(o, lse): o = softmax(scale * q k^T [+ causal mask]) v per batch and head, lse f32
    [B, H_q, N_q] = log(sum(exp(scale * q k^T))) per row. q [B, N_q, H_q, D], k and v
    [B, N_kv, H_kv, D]. ``bottom_right``, ``window``: the band of keys each query sees
    (:func:`band`); ``softcap`` > 0: softcap * tanh(scale * q k^T / softcap) as the scores;
    ``alibi_slopes`` (f32 [H_q] or [B, H_q]): the scores less slope * |i + diagonal - j|."""
    q, k, v = _kept(interpret, q, k, v)
    mask = _band_of(q, k, causal, bottom_right, window, softcap)
    tables = (FORWARD, FORWARD_OVERLAP, FORWARD_SHORT_CAUSAL, UNALIGNED_FORWARD)
    options = (mask, scale, alibi_slopes is not None, *_settings(q, *tables))
    inputs = (q, k, v) + (() if alibi_slopes is None else (alibi_slopes,))
    hit = replay(interpret, "attention", inputs, *options)
    if hit is not None:
        return hit(*inputs)
    arrays, shapes = _check("attention", {"q": q, "k": k, "v": v}, interpret)
    b, n_q, n_kv, h_q, h_kv, d = _qkv(arrays, shapes)
    tile = tile_of(d)
    scale, qk_scale = _scales(d, scale)
    dtype = _dtype(arrays, q)
    kernels = module("attention.c")
    # D = 256: its scratch and ring do not fit; the overlapped forward takes no band but the
    # top-left triangle, and no softcap
    overlap = OVERLAP and d in FORWARD_OVERLAP and mask.top_left_causal()  # (d == its tile)
    overlap = overlap and alibi_slopes is None
    alibi = _alibi(arrays, alibi_slopes, b, h_q, n_q, n_kv, bottom_right)
    kernel = kernels.attention_fwd_overlap if overlap else kernels.attention_fwd
    config = _forward_config(d, mask.band is not None, n_kv, overlap)
    ws = config.warp_specialize if WARP_SPECIALIZE is None else WARP_SPECIALIZE
    alloc_o = arrays.allocator((b, n_q, h_q, d), dtype)
    alloc_lse = arrays.allocator((b, h_q, n_q), "f32")
    strides: tuple[int, ...] = _strides4(arrays, q) + _strides4(arrays, k)
    strides += _strides4(arrays, v) + _strides_of((b, n_q, h_q, d))
    if overlap:
        rest: tuple[Any, ...] = (n_q, n_kv, h_q, h_q // h_kv, *strides, qk_scale)
        extra = {"CAUSAL": int(mask.band is not None), "WARP_SPECIALIZE": int(ws)}
    else:
        rest = (n_q, n_kv, h_q, h_q // h_kv, *mask.bounds(), *strides, qk_scale)
        rest += mask.caps(scale)
        extra = {"WARP_SPECIALIZE": int(ws), "DH": d, **mask.constexprs()}
        extra["ALIBI"] = int(alibi_slopes is not None)
    first = _Pipelined(
        _Where.of(arrays),
        kernel,
        lambda meta: (cdiv(n_q, meta["BM"]), b * h_q, 1),
        config,
        BF16=int(dtype == "bf16"),
        D=tile,
        **extra,
    )

    def make(launch):
        def plan(q, k, v, *slopes):
            o, lse = alloc_o(), alloc_lse()
            if overlap:
                launch(o, lse, q, k, v, *rest)
            else:  # (without ALiBi the kernel never reads its slopes: lse stands in)
                launch(o, lse, q, k, v, *rest, slopes[0] if slopes else lse, *alibi)
            return o, lse

        return plan

    key = plan_key(interpret, "attention", inputs, *options)
    return planned(key, arrays, make, (first,), *inputs)


def _alibi(
    arrays: Arrays, slopes: Any, b: int, h_q: int, n_q: int, n_kv: int, bottom_right: bool
) -> tuple[int, int]:
    """(ssb, alibi_off) of the kernels for ALiBi slopes (f32 [H_q] or [B, H_q], checked)."""
    if slopes is None:
        return 0, 0
    if type(slopes) is not type(arrays.first):
        raise arrays.error("alibi_slopes must be an array of the same library as q")
    shape = tuple(slopes.shape)
    if shape not in ((h_q,), (b, h_q)):
        raise arrays.error(f"alibi_slopes must have shape {(h_q,)} or {(b, h_q)}, got {shape}")
    arrays.check_dtype(slopes, "alibi_slopes", ("f32",))
    strides = arrays.strides(slopes)
    if strides[-1] != 1:
        raise arrays.error("alibi_slopes must be contiguous in its last dimension")
    return (strides[0] if len(shape) == 2 else 0), (n_kv - n_q if bottom_right else 0)


def attention_backward(
    do: Any,
    q: Any,
    k: Any,
    v: Any,
    o: Any,
    lse: Any,
    causal: bool = False,
    scale: float | None = None,
    *,
    bottom_right: bool = False,
    window: tuple[int, int] = (-1, -1),
    softcap: float = 0.0,
    alibi_slopes: Any = None,
    interpret: bool = False,
) -> tuple[Any, Any, Any]:
    """(dq, dk, dv), the gradients of :func:`attention`'s o for the output gradient ``do``,
    from its inputs and its outputs ``o`` and ``lse`` (the same causal, scale and options)."""
    do, q, k, v, o = _kept(interpret, do, q, k, v, o)
    mask = _band_of(q, k, causal, bottom_right, window, softcap)
    tables: tuple[dict[int, Any], ...] = (BACKWARD_DKDV, BACKWARD_DQ, BACKWARD_DKDV_ATOMIC)
    tables += (ATOMIC_DQ, UNALIGNED_DKDV, UNALIGNED_DQ)
    options = (mask, scale, alibi_slopes is not None, *_settings(q, *tables))
    inputs = (do, q, k, v, o, lse) + (() if alibi_slopes is None else (alibi_slopes,))
    hit = replay(interpret, "attention_backward", inputs, *options)
    if hit is not None:
        return hit(*inputs)
    arrays, shapes = _check(
        "attention_backward", {"do": do, "q": q, "k": k, "v": v, "o": o}, interpret
    )
    b, n_q, n_kv, h_q, h_kv, d = _qkv(arrays, shapes)
    tile = tile_of(d)
    for name in ("o", "do"):
        if shapes[name] != shapes["q"]:
            raise arrays.error(f"{name} has shape {shapes[name]} but q has {shapes['q']}")
    if tuple(lse.shape) != (b, h_q, n_q):
        raise arrays.error(f"lse must have shape {(b, h_q, n_q)}, got {tuple(lse.shape)}")
    arrays.check_dtype(lse, "lse", ("f32",))
    if n_q and arrays.strides(lse) != (h_q * n_q, n_q, 1):
        raise arrays.error("lse must be contiguous, as attention() returns it")
    scale, qk_scale = _scales(d, scale)
    dtype = _dtype(arrays, q)
    mod = module("attention.c")
    flags = {**mask.constexprs(), "BF16": int(dtype == "bf16"), "D": tile, "DH": d}
    flags["ALIBI"] = int(alibi_slopes is not None)
    alibi = _alibi(arrays, alibi_slopes, b, h_q, n_q, n_kv, bottom_right)
    band_args = (*mask.caps(scale), *mask.bounds())
    group = h_q // h_kv
    atomic = ATOMIC_DQ[tile]
    where = _Where.of(arrays)
    alloc_dq = arrays.allocator((b, n_q, h_q, d), dtype)
    alloc_kv = arrays.allocator((b, n_kv, h_kv, d), dtype)
    alloc_rows = arrays.allocator((b, h_q, n_q), "f32")
    # the f32 rows dQ is added into (ATOMIC_DQ), [B, H_q, N_q, D]; without atomics the
    # kernel never touches its dq_acc argument, which is then delta
    alloc_acc = arrays.allocator((b, h_q, n_q, tile), "f32") if atomic else None
    empty = 0 in (b, n_q, h_q)
    q_strides, kv_strides = _strides_of((b, n_q, h_q, d)), _strides_of((b, n_kv, h_kv, d))
    pre_rest = (n_q, h_q) + _strides4(arrays, o) + _strides4(arrays, do)
    qkv: tuple[int, ...] = _strides4(arrays, q) + _strides4(arrays, k) + _strides4(arrays, v)
    qkv += _strides4(arrays, do)
    dkdv_rest: tuple[Any, ...] = (n_q, n_kv, h_q, h_kv, group, *qkv, *kv_strides, *kv_strides)
    dkdv_rest += (qk_scale, scale, *band_args)
    rows_grid = (cdiv(n_q, PREPROCESS_BM), b * h_q)
    dq_ws = _dq_config(d).warp_specialize if WARP_SPECIALIZE is None else WARP_SPECIALIZE
    launches = (
        Launch(arrays, mod.attention_bwd_preprocess, rows_grid, 4, D=tile, DH=d, BM=PREPROCESS_BM),
        _Pipelined(
            where,
            mod.attention_bwd_dkdv,
            lambda meta: (cdiv(n_kv, meta["BN"]), b * h_kv, 1),
            _dkdv_config(d, atomic),
            ATOMIC_DQ=int(atomic),
            **flags,
        ),
        Launch(arrays, mod.attention_bwd_dq_cast, rows_grid, 4, D=tile, DH=d, BM=PREPROCESS_BM)
        if atomic
        else _Pipelined(
            where,
            mod.attention_bwd_dq,
            lambda meta: (cdiv(n_q, meta["BM"]), b * h_q, 1),
            _dq_config(d),
            WARP_SPECIALIZE=int(dq_ws),
            **flags,
        ),
    )

    def make(preprocess, dkdv, last):
        def plan(do, q, k, v, o, lse, *slopes):
            ab = (slopes[0] if slopes else lse, *alibi)  # (lse: never read without ALiBi)
            dq, dk, dv, delta = alloc_dq(), alloc_kv(), alloc_kv(), alloc_rows()
            if empty:
                _zero(where.kind, dk, dv)
                return dq, dk, dv
            preprocess(delta, o, do, *pre_rest)
            dq_acc = delta
            if alloc_acc is not None:
                dq_acc = alloc_acc()
                _zero(where.kind, dq_acc)
            dkdv(dk, dv, q, k, v, do, lse, delta, dq_acc, *dkdv_rest, *ab)
            if alloc_acc is not None:
                last(dq, dq_acc, n_q, h_q, *q_strides, scale)
            else:
                last(
                    dq,
                    q,
                    k,
                    v,
                    do,
                    lse,
                    delta,
                    n_q,
                    n_kv,
                    h_q,
                    group,
                    *qkv,
                    *q_strides,
                    qk_scale,
                    scale,
                    *band_args,
                    *ab,
                )
            return dq, dk, dv

        return plan

    key = plan_key(interpret, "attention_backward", inputs, *options)
    return planned(key, arrays, make, launches, *inputs)


# ---------------------------------------------------------------- packed sequences (varlen)


class _Packed(NamedTuple):
    """The checked sizes of a call on packed sequences."""

    n_seq: int
    total_q: int
    total_kv: int
    h_q: int
    h_kv: int
    d: int


def _host(arrays: Arrays, a: Any) -> np.ndarray:
    """A host copy of a small array (the sequence offsets)."""
    if arrays.kind == "numpy":
        return np.asarray(a)
    if arrays.kind == "torch":
        return a.cpu().numpy()
    return a.get()


def _capturing(arrays: Arrays) -> bool:
    """Whether the current stream is capturing a CUDA graph (no host copy may be made)."""
    if arrays.kind == "torch":
        return bool(arrays.torch.cuda.is_current_stream_capturing())
    if arrays.kind == "cupy":
        import cupy

        return bool(cupy.cuda.get_current_stream().is_capturing())
    return False


def _count(arrays: Arrays, name: str, x: Any) -> int:
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, np.integer)) or x < 0:
        raise arrays.error(f"{name} must be an int >= 0 (a length of sequence), got {x!r}")
    return int(x)


def _packed(
    fn: str,
    named: dict[str, Any],
    cu_q: Any,
    cu_k: Any,
    max_q: Any,
    max_k: Any,
    interpret: bool,
) -> tuple[Arrays, _Packed, int, int]:
    """The arrays' library, the call's sizes and (max_seqlen_q, max_seqlen_k), checked: q [total_q,
    H_q, D], k and v [total_kv, H_kv, D] of one dtype; cu_seqlens_q and cu_seqlens_k i32 [B + 1],
    contiguous, of the arrays' library and device; and, read back from the device (unless the
    stream is capturing a graph), offsets from 0, non-decreasing, ending at total_q and
    total_kv, no sequence longer than max_seqlen_q (max_seqlen_k)."""
    arrays = Arrays(fn, {**named, "cu_seqlens_q": cu_q, "cu_seqlens_k": cu_k}, interpret)
    shapes = {}
    for name, a in named.items():
        if len(a.shape) != 3:
            raise arrays.error(
                f"{name} must be 3-D [total_tokens, heads, head_dim] (packed sequences), got "
                f"shape {tuple(a.shape)}"
            )
        arrays.check_dtype(a, name, DTYPES)
        shapes[name] = tuple(int(x) for x in a.shape)
    for name, a in named.items():
        if arrays.dtype(a) != arrays.dtype(named["q"]):
            raise arrays.error(
                f"{name} is {arrays.dtype(a)} but q is {arrays.dtype(named['q'])}; they must match"
            )
    total_q, h_q, d = shapes["q"]
    if shapes["k"] != shapes["v"]:
        raise arrays.error(f"k has shape {shapes['k']} but v has {shapes['v']}; they must match")
    total_kv, h_kv, dk = shapes["k"]
    if dk != d:
        raise arrays.error(f"q has head_dim {d} but k and v have {dk}")
    if not supports(d):
        lo, hi = HEAD_DIM_RANGE
        raise arrays.error(f"head_dim {d} is not supported; this takes {lo} to {hi}")
    if h_kv == 0 or h_q % h_kv:
        raise arrays.error(
            f"q has {h_q} heads and k, v have {h_kv}: the number of key/value heads must divide "
            "the number of query heads (grouped-query attention)"
        )
    for name, cu in (("cu_seqlens_q", cu_q), ("cu_seqlens_k", cu_k)):
        if len(cu.shape) != 1 or cu.shape[0] < 2:
            raise arrays.error(
                f"{name} must be 1-D [batch + 1] (each sequence's first row, then the total), "
                f"got shape {tuple(cu.shape)}"
            )
        arrays.check_dtype(cu, name, ("i32",))
        if arrays.strides(cu) != (1,):
            raise arrays.error(f"{name} must be contiguous, got stride {arrays.strides(cu)[0]}")
    if cu_q.shape != cu_k.shape:
        raise arrays.error(
            f"cu_seqlens_q has {cu_q.shape[0]} entries but cu_seqlens_k has {cu_k.shape[0]}: "
            "both are batch + 1 long"
        )
    tops = _count(arrays, "max_seqlen_q", max_q), _count(arrays, "max_seqlen_k", max_k)
    if not _capturing(arrays):
        for name, cu, total, rows, top in (
            ("cu_seqlens_q", cu_q, total_q, "q", tops[0]),
            ("cu_seqlens_k", cu_k, total_kv, "k and v", tops[1]),
        ):
            c = _host(arrays, cu).astype(np.int64)
            lengths = np.diff(c)
            if c[0] != 0:
                raise arrays.error(f"{name} must start at 0, got {c[0]}")
            if (lengths < 0).any():
                i = int(np.argmax(lengths < 0))
                raise arrays.error(
                    f"{name} must be non-decreasing (cumulative sequence lengths): entry "
                    f"{i + 1} ({c[i + 1]}) is below entry {i} ({c[i]})"
                )
            if c[-1] != total:
                raise arrays.error(
                    f"{name} ends at {c[-1]} but {rows} have {total} rows: its last entry is "
                    "the total number of tokens"
                )
            if lengths.max() > top:
                i = int(np.argmax(lengths))
                raise arrays.error(
                    f"max_seqlen_{name[-1]}={top} is below the length of sequence {i} "
                    f"({lengths[i]})"
                )
    dims = _Packed(cu_q.shape[0] - 1, total_q, total_kv, h_q, h_kv, d)
    return arrays, dims, tops[0], tops[1]


def _strides3(arrays: Arrays, a: Any) -> tuple[int, int, int]:
    n, h, d = arrays.strides(a)
    return h, n, d  # the varlen kernels take (head, row, column)


def _varlen_band(causal: bool, left: int, right: int) -> tuple[int, int, int]:
    """(BAND, left, right) of the varlen kernels: each side's reach from a sequence's diagonal,
    UNBOUNDED where it has none (causal: right at most 0); BAND 0 where neither is bounded."""
    if causal:
        right = 0 if right < 0 else min(right, 0)
    band = int(left >= 0 or right >= 0)
    return band, (left if left >= 0 else UNBOUNDED), (right if right >= 0 else UNBOUNDED)


def _varlen_slopes(arrays: Arrays, slopes: Any, dims: _Packed) -> int:
    return _alibi(arrays, slopes, dims.n_seq, dims.h_q, 0, 0, False)[0]


def attention_varlen(
    q: Any,
    k: Any,
    v: Any,
    cu_seqlens_q: Any,
    cu_seqlens_k: Any,
    max_seqlen_q: int,
    max_seqlen_k: int,
    causal: bool = False,
    scale: float | None = None,
    *,
    bottom_right: bool = True,
    window: tuple[int, int] = (-1, -1),
    softcap: float = 0.0,
    alibi_slopes: Any = None,
    interpret: bool = False,
) -> tuple[Any, Any]:
    """(o, lse) of packed sequences (FlashAttention's varlen): q [total_q, H_q, D], k and v
    [total_kv, H_kv, D], sequence b the rows cu_seqlens_q[b] .. cu_seqlens_q[b + 1] - 1 of q and
    cu_seqlens_k[b] .. cu_seqlens_k[b + 1] - 1 of k and v (i32 [B + 1] arrays of the same
    library and device), attending within itself only; max_seqlen_q and max_seqlen_k bound the
    sequences' lengths (the grid's). o [total_q, H_q, D] like q, lse f32 [H_q, total_q].
    ``causal`` and ``window`` align each sequence's band at its bottom right (FlashAttention's
    rule; ``bottom_right=False``: the top left), ``softcap`` and ``alibi_slopes`` (f32 [H_q] or
    [B, H_q]: slope * |i + n_kv - n_q - j| per sequence) as in :func:`attention`. A query that
    sees no key (its band empty, or its sequence without keys) gives 0 and lse +inf. The
    offsets are read back once per call to check them (a device sync; skipped while a CUDA
    graph is captured)."""
    q, k, v = _kept(interpret, q, k, v)
    left, right, softcap = _window_softcap(window, softcap)
    arrays, dims, max_q, max_k = _packed(
        "attention_varlen",
        {"q": q, "k": k, "v": v},
        cu_seqlens_q,
        cu_seqlens_k,
        max_seqlen_q,
        max_seqlen_k,
        interpret,
    )
    band_flag, left, right = _varlen_band(causal, left, right)
    d, tile = dims.d, tile_of(dims.d)
    scale, qk_scale = _scales(d, scale)
    ssb = _varlen_slopes(arrays, alibi_slopes, dims)
    tables = (FORWARD, FORWARD_SHORT_CAUSAL, UNALIGNED_FORWARD)
    options = (band_flag, left, right, bool(bottom_right), softcap, scale, max_q, max_k)
    options += (alibi_slopes is not None, *_settings(q, *tables))
    inputs = (q, k, v, cu_seqlens_q, cu_seqlens_k)
    inputs += () if alibi_slopes is None else (alibi_slopes,)
    hit = replay(interpret, "attention_varlen", inputs, *options)
    if hit is not None:
        return hit(*inputs)
    dtype = _dtype(arrays, q)
    h_q, total_q = dims.h_q, dims.total_q
    alloc_o = arrays.allocator((total_q, h_q, d), dtype)
    alloc_lse = arrays.allocator((h_q, total_q), "f32")
    rest: tuple[Any, ...] = (h_q, h_q // dims.h_kv, total_q, left, right, int(bool(bottom_right)))
    rest += _strides3(arrays, q) + _strides3(arrays, k) + _strides3(arrays, v)
    rest += (d, h_q * d, 1, qk_scale, *_Band(None, softcap).caps(scale))
    first = _Pipelined(
        _Where.of(arrays),
        module("attention.c").attention_varlen_fwd,
        lambda meta: (cdiv(max_q, meta["BM"]), dims.n_seq * h_q, 1),
        _forward_config(d, bool(band_flag), max_k, False),
        BAND=band_flag,
        SOFTCAP=int(bool(softcap)),
        ALIBI=int(alibi_slopes is not None),
        BF16=int(dtype == "bf16"),
        D=tile,
        DH=d,
    )

    def make(launch):
        def plan(q, k, v, cu_q, cu_k, *slopes):
            o, lse = alloc_o(), alloc_lse()
            # (without ALiBi the kernel never reads its slopes: lse stands in)
            launch(o, lse, q, k, v, cu_q, cu_k, *rest, slopes[0] if slopes else lse, ssb)
            return o, lse

        return plan

    key = plan_key(interpret, "attention_varlen", inputs, *options)
    return planned(key, arrays, make, (first,), *inputs)


def attention_varlen_backward(
    do: Any,
    q: Any,
    k: Any,
    v: Any,
    o: Any,
    lse: Any,
    cu_seqlens_q: Any,
    cu_seqlens_k: Any,
    max_seqlen_q: int,
    max_seqlen_k: int,
    causal: bool = False,
    scale: float | None = None,
    *,
    bottom_right: bool = True,
    window: tuple[int, int] = (-1, -1),
    softcap: float = 0.0,
    alibi_slopes: Any = None,
    interpret: bool = False,
) -> tuple[Any, Any, Any]:
    """(dq, dk, dv) of :func:`attention_varlen`'s o for the output gradient ``do``, from its
    inputs and its outputs ``o`` and ``lse`` (the same options), shaped and typed as q, k, v."""
    do, q, k, v, o = _kept(interpret, do, q, k, v, o)
    left, right, softcap = _window_softcap(window, softcap)
    arrays, dims, max_q, max_k = _packed(
        "attention_varlen_backward",
        {"do": do, "q": q, "k": k, "v": v, "o": o},
        cu_seqlens_q,
        cu_seqlens_k,
        max_seqlen_q,
        max_seqlen_k,
        interpret,
    )
    for name, a in (("o", o), ("do", do)):
        if tuple(a.shape) != tuple(q.shape):
            raise arrays.error(f"{name} has shape {tuple(a.shape)} but q has {tuple(q.shape)}")
    h_q, total_q, d = dims.h_q, dims.total_q, dims.d
    if tuple(lse.shape) != (h_q, total_q):
        raise arrays.error(f"lse must have shape {(h_q, total_q)}, got {tuple(lse.shape)}")
    arrays.check_dtype(lse, "lse", ("f32",))
    if total_q and arrays.strides(lse) != (total_q, 1):
        raise arrays.error("lse must be contiguous, as attention_varlen() returns it")
    band_flag, left, right = _varlen_band(causal, left, right)
    scale, qk_scale = _scales(d, scale)
    ssb = _varlen_slopes(arrays, alibi_slopes, dims)
    tables = (BACKWARD_DKDV, BACKWARD_DQ, UNALIGNED_DKDV, UNALIGNED_DQ)
    options = (band_flag, left, right, bool(bottom_right), softcap, scale, max_q, max_k)
    options += (alibi_slopes is not None, *_settings(q, *tables))
    inputs = (do, q, k, v, o, lse, cu_seqlens_q, cu_seqlens_k)
    inputs += () if alibi_slopes is None else (alibi_slopes,)
    hit = replay(interpret, "attention_varlen_backward", inputs, *options)
    if hit is not None:
        return hit(*inputs)
    tile, dtype, h_kv = tile_of(d), _dtype(arrays, q), dims.h_kv
    mod = module("attention.c")
    flags = {"BAND": band_flag, "SOFTCAP": int(bool(softcap)), "BF16": int(dtype == "bf16")}
    flags |= {"ALIBI": int(alibi_slopes is not None), "D": tile, "DH": d}
    where = _Where.of(arrays)
    alloc_dq = arrays.allocator((total_q, h_q, d), dtype)
    alloc_kv = arrays.allocator((dims.total_kv, h_kv, d), dtype)
    alloc_rows = arrays.allocator((h_q, total_q), "f32")
    seq = (h_q // h_kv, total_q, left, right, int(bool(bottom_right)))
    qkv: tuple[int, ...] = _strides3(arrays, q) + _strides3(arrays, k) + _strides3(arrays, v)
    qkv += _strides3(arrays, do)
    dense = (d, h_kv * d, 1)  # dk and dv: contiguous [total_kv, H_kv, D]
    tail = (qk_scale, scale, *_Band(None, softcap).caps(scale))
    # delta by the fixed-length preprocess: the packed rows as one sequence of total_q rows
    pre_rest = (total_q, h_q, 0, *_strides3(arrays, o), 0, *_strides3(arrays, do))
    launches = (
        Launch(
            arrays,
            mod.attention_bwd_preprocess,
            (cdiv(total_q, PREPROCESS_BM), h_q),
            4,
            D=tile,
            DH=d,
            BM=PREPROCESS_BM,
        ),
        _Pipelined(
            where,
            mod.attention_varlen_bwd_dkdv,
            lambda meta: (cdiv(max_k, meta["BN"]), dims.n_seq * h_kv, 1),
            _dkdv_config(d, False),
            **flags,
        ),
        _Pipelined(
            where,
            mod.attention_varlen_bwd_dq,
            lambda meta: (cdiv(max_q, meta["BM"]), dims.n_seq * h_q, 1),
            _dq_config(d),
            **flags,
        ),
    )

    def make(preprocess, dkdv, dq_launch):
        def plan(do, q, k, v, o, lse, cu_q, cu_k, *slopes):
            ab = (slopes[0] if slopes else lse, ssb)  # (lse: never read without ALiBi)
            dq, dk, dv, delta = alloc_dq(), alloc_kv(), alloc_kv(), alloc_rows()
            preprocess(delta, o, do, *pre_rest)
            dkdv(
                dk,
                dv,
                q,
                k,
                v,
                do,
                lse,
                delta,
                cu_q,
                cu_k,
                h_q,
                h_kv,
                *seq,
                *qkv,
                *dense,
                *dense,
                *tail,
                *ab,
            )
            dq_launch(
                dq, q, k, v, do, lse, delta, cu_q, cu_k, h_q, *seq, *qkv, d, h_q * d, 1, *tail, *ab
            )
            return dq, dk, dv

        return plan

    key = plan_key(interpret, "attention_varlen_backward", inputs, *options)
    return planned(key, arrays, make, launches, *inputs)


def _zero(kind: str, *outs: Any) -> None:
    for a in outs:
        if kind == "torch":
            a.zero_()
        else:
            a[...] = 0


# ---------------------------------------------------------------- float64 references


def attention_reference(q: Any, k: Any, v: Any, causal: bool = False, scale: float | None = None):
    """(o, lse) of :func:`attention` in float64 NumPy, from NumPy arrays of the same layout."""
    o, lse, _ = _reference_forward(q, k, v, causal, scale)
    return o, lse


def attention_backward_reference(
    do: Any, q: Any, k: Any, v: Any, causal: bool = False, scale: float | None = None
):
    """(dq, dk, dv) of :func:`attention_backward` in float64 NumPy (the softmax's Jacobian
    written out: dS = P * (dP - rowsum(dP * P)); a key/value head sums over its group)."""
    import numpy as np

    _, _, (p, qf, kf, vf, scale) = _reference_forward(q, k, v, causal, scale)
    dof = np.asarray(do, np.float64).transpose(0, 2, 1, 3)
    dv = p.transpose(0, 1, 3, 2) @ dof
    dp = dof @ vf.transpose(0, 1, 3, 2)
    ds = p * (dp - (dp * p).sum(-1, keepdims=True))
    dq = ds @ kf * scale
    dk = ds.transpose(0, 1, 3, 2) @ qf * scale
    b, h_q, n_kv, d = dk.shape
    h_kv = np.shape(k)[2]
    dk = dk.reshape(b, h_kv, h_q // h_kv, n_kv, d).sum(2)
    dv = dv.reshape(b, h_kv, h_q // h_kv, n_kv, d).sum(2)
    return tuple(x.transpose(0, 2, 1, 3) for x in (dq, dk, dv))


def _reference_forward(q, k, v, causal, scale):
    import numpy as np

    qf, kf, vf = (np.asarray(x, np.float64).transpose(0, 2, 1, 3) for x in (q, k, v))
    group = qf.shape[1] // kf.shape[1]
    kf, vf = np.repeat(kf, group, axis=1), np.repeat(vf, group, axis=1)
    scale = 1.0 / math.sqrt(qf.shape[-1]) if scale is None else float(scale)
    s = qf @ kf.transpose(0, 1, 3, 2) * scale
    if causal:
        n_q, n_kv = s.shape[-2:]
        s = np.where(np.arange(n_kv)[None, :] <= np.arange(n_q)[:, None], s, -np.inf)
    m = s.max(-1, keepdims=True)
    e = np.exp(s - m)
    total = e.sum(-1, keepdims=True)
    p = e / total
    lse = (m + np.log(total))[..., 0]
    return (p @ vf).transpose(0, 2, 1, 3), lse, (p, qf, kf, vf, scale)
