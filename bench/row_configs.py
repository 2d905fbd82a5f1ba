"""ptxas's view of the norm kernels' autotune configs: registers, stack frame, spills, occupancy.

Runs without a GPU (NVRTC for ``$TEENY_TX_ARCH``, default sm_90): for each kernel of
kernels/layernorm.c and rmsnorm.c, each width of the benchmark (1024, 4096, 8192 columns, f16)
and each ``#pragma autotune`` config that :func:`teeny_tx.nn.norm_prune` keeps, compile the
specialisation the wrapper would launch and print what ptxas reports. Blocks/SM is what the
register file allows (65536 registers, at most 2048 threads per SM); rows/SM is how many rows
that keeps in flight. The autotuner prunes configs that spill more than 32 bytes.

    TEENY_TX_ARCH=sm_90 python3 bench/row_configs.py [--widths 1024,4096,8192]
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("TEENY_TX_ARCH", "sm_90")


def _kernels(nn, d: str, rows: int):
    """(name, kernel, cols -> launch arguments as the wrappers pass them, dtype names for
    arrays) of the four tuned norm kernels."""
    yield (
        "layer_norm_fwd",
        nn._norm_kernel("layernorm.c", "layer_norm_fwd"),
        lambda n: (d, "f32", "f32", d, d, d, rows, n, n, 1, n, 1e-5),
    )
    yield (
        "layer_norm_bwd_dx",
        nn._norm_kernel("layernorm.c", "layer_norm_bwd_dx"),
        lambda n: (d, "f32", "f32", d, d, d, "f32", "f32", rows, n, n, 1, n, 1, n),
    )
    yield (
        "rms_norm_fwd",
        nn._norm_kernel("rmsnorm.c", "rms_norm_fwd"),
        lambda n: (d, "f32", d, d, rows, n, n, 1, n, 1e-6),
    )
    yield (
        "rms_norm_bwd_dx",
        nn._norm_kernel("rmsnorm.c", "rms_norm_bwd_dx"),
        lambda n: (d, "f32", d, d, d, "f32", rows, n, n, 1, n, 1, n),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--widths", default="1024,4096,8192")
    parser.add_argument("--dtype", default="f16")
    widths = [int(w) for w in parser.parse_args().widths.split(",")]
    dtype = parser.parse_args().dtype

    from teeny_tx.errors import RegisterSpillWarning
    from teeny_tx.library import nn
    from teeny_tx.runtime.autotune import compile_cubins
    from teeny_tx.runtime.elf import cubin_resources

    rows = 8192
    jobs = []
    for name, kernel, args_of in _kernels(nn, dtype, rows):
        for cols in widths:
            args = args_of(cols)
            block = nn.norm_block(cols)
            for c in kernel.tune.configs:
                if nn.norm_prune(c, args, kernel):
                    continue
                spec = kernel.specialize(
                    *args,
                    num_warps=c.num_warps,
                    BLOCK=block,
                    EVEN=int(block == cols),
                    **c.kwargs,
                    strided=True,
                )
                jobs.append((name, cols, c, spec))
    reports = compile_cubins([job[3] for job in jobs])
    print(
        f"{'kernel':20} {'cols':>5} {'config':24} {'regs':>4} {'frame':>5} {'spill':>5} "
        f"{'blk/SM':>6} {'rows/SM':>7}"
    )
    for i, (name, cols, c, spec) in enumerate(jobs):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            cubin = spec.cubin
        spills = [w.message.spilled for w in caught if issubclass(w.category, RegisterSpillWarning)]
        spilled = str(reports.get(i) or (spills[0] if spills else 0))
        regs, frame = cubin_resources(cubin)
        threads = 32 * c.num_warps
        blocks = min(2048 // threads, 65536 // max(1, regs * threads))
        rows_sm = blocks * c.kwargs["ROWS"]
        config = "".join(f"{k[0]}{v} " for k, v in c.kwargs.items()) + f"warps={c.num_warps}"
        print(
            f"{name:20} {cols:5d} {config:24} {regs:4d} {frame:5d} {spilled:>5} "
            f"{blocks:6d} {rows_sm:7d}"
        )


if __name__ == "__main__":
    main()
