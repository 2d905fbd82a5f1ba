"""A small attention forward + backward for compute-sanitizer (memcheck, racecheck): GQA,
ragged N = 130, causal at D = 64 and full at D = 128, CuPy arrays, dQ by its own kernel and by
atomics (ATOMIC_DQ), K/V by TMA and by cp.async (TMA); prints each gradient's error against the
float64 reference so a clean sanitizer run is also a correct one.

Run on the GPU: compute-sanitizer --tool memcheck python3 bench/sanitize_attention.py
"""

from __future__ import annotations

import itertools

import cupy as cp
import numpy as np

from teeny_tx import nn
from teeny_tx.library import attention as tattn
from teeny_tx.library.attention import attention_backward_reference


def main() -> None:
    rng = np.random.default_rng(0)
    cases = itertools.product(((True, 64), (False, 128)), (False, True), (True, False))
    for (causal, d), atomic, tma in cases:
        tattn.ATOMIC_DQ[d], tattn.TMA = atomic, tma
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
            f"causal={causal} D={d} atomic dQ={atomic} TMA={tma}: dq, dk, dv errors",
            ", ".join(f"{e:.2g}" for e in errors),
        )


if __name__ == "__main__":
    main()
