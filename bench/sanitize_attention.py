"""A small attention forward + backward for compute-sanitizer (memcheck, racecheck): GQA,
ragged N = 130, causal at D = 64 and full at D = 128, CuPy arrays, dQ by its own kernel and by
atomics (ATOMIC_DQ), K/V by TMA and by cp.async (TMA), the forward warp-specialised and not
(WARP_SPECIALIZE); prints each output's error against the float64 reference so a clean
sanitizer run is also a correct one.

Run on the GPU: compute-sanitizer --tool memcheck python3 bench/sanitize_attention.py
(``--ws``: only the warp-specialised forward, the short run racecheck needs; WARP_SPECIALIZE=2
is the ping-pong only with $TEENY_TX_WS_PINGPONG=1, else the producer alone again).
"""

from __future__ import annotations

import itertools
import sys

import cupy as cp
import numpy as np

from teeny_tx import nn
from teeny_tx.library import attention as tattn
from teeny_tx.library.attention import attention_backward_reference, attention_reference


def warp_specialized() -> None:
    """The warp-specialised forward alone, causal and not, D = 64 and 128, ragged N, GQA."""
    rng = np.random.default_rng(1)
    tattn.TMA = True
    for causal, d, ws in itertools.product((False, True), (64, 128), (1, 2)):
        tattn.WARP_SPECIALIZE = ws
        q = rng.standard_normal((1, 300, 4, d)).astype(np.float16)
        k, v = (rng.standard_normal((1, 300, 2, d)).astype(np.float16) for _ in range(2))
        o, lse = nn.attention(cp.asarray(q), cp.asarray(k), cp.asarray(v), causal)
        want_o, want_lse = attention_reference(q, k, v, causal)
        err = float(np.abs(cp.asnumpy(o).astype(np.float64) - want_o).max())
        lse_err = float(np.abs(cp.asnumpy(lse) - want_lse).max())
        print(f"WARP_SPECIALIZE={ws} causal={causal} D={d}: o error {err:.2g}, lse {lse_err:.2g}")
    # the overlapped forward warp-specialised (FlashAttention-3's schedule), producer and ping-pong
    tattn.OVERLAP, tattn.WARP_SPECIALIZE = True, None
    for causal, d, ws in itertools.product((False, True), (64, 128), (1, 2)):
        tattn.FORWARD_OVERLAP[d] = tattn.AttentionConfig(128, 64, 8, 3, ws)
        q = rng.standard_normal((1, 300, 4, d)).astype(np.float16)
        k, v = (rng.standard_normal((1, 300, 2, d)).astype(np.float16) for _ in range(2))
        o, lse = nn.attention(cp.asarray(q), cp.asarray(k), cp.asarray(v), causal)
        want_o, _ = attention_reference(q, k, v, causal)
        err = float(np.abs(cp.asnumpy(o).astype(np.float64) - want_o).max())
        print(f"overlapped, WARP_SPECIALIZE={ws} causal={causal} D={d}: o error {err:.2g}")
    tattn.OVERLAP = False


def main() -> None:
    if "--ws" in sys.argv[1:]:
        warp_specialized()
        return
    rng = np.random.default_rng(0)
    cases = itertools.product(((True, 64), (False, 128)), (False, True), (True, False), (0, 1))
    for (causal, d), atomic, tma, ws in cases:
        if ws and (atomic or not tma):
            continue  # the forward's variants: once per head dim with TMA
        tattn.ATOMIC_DQ[d], tattn.TMA, tattn.WARP_SPECIALIZE = atomic, tma, ws
        q = rng.standard_normal((1, 130, 4, d)).astype(np.float16)
        k, v = (rng.standard_normal((1, 130, 2, d)).astype(np.float16) for _ in range(2))
        do = rng.standard_normal(q.shape).astype(np.float16)
        qg, kg, vg = cp.asarray(q), cp.asarray(k), cp.asarray(v)
        o, lse = nn.attention(qg, kg, vg, causal)
        grads = nn.attention_backward(cp.asarray(do), qg, kg, vg, o, lse, causal)
        want = attention_backward_reference(do, q, k, v, causal)
        errors = [
            float(np.abs(cp.asnumpy(g).astype(np.float64) - w).max() / max(1, np.abs(w).max()))
            for g, w in zip(grads, want, strict=True)
        ]
        print(
            f"causal={causal} D={d} atomic dQ={atomic} TMA={tma} WS={ws}: dq, dk, dv errors",
            ", ".join(f"{e:.2g}" for e in errors),
        )


if __name__ == "__main__":
    main()
