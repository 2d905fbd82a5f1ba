"""Compile time of each bundled kernel (its golden specialisation), on the CPU: ours against
plain NVRTC of the same source, and what a smaller device header or NVRTC's precompiled
headers change.

Columns (seconds, the best of ``--repeats`` runs; the machine may be shared):

- ``cold``: teeny_tx.compile of the kernel file, specialise (parse, lower, emit) and the cubin,
  with an empty cubin cache (the process memo cleared too), ``TEENY_TX_PCH=0``;
- ``coldP``: the same with the runtime's precompiled header (its image made by an earlier
  compile, as after a machine's first compile);
- ``warm``: the same in a new module with the cubin cache filled (what a new process pays);
- ``nvrtc``: NVRTC alone on the generated source with the full device header (teeny_tx.cuh,
  which includes random.cuh and mma.cuh);
- ``small``: NVRTC with the header cut to what the kernel uses (random.cuh / mma.cuh left out
  when the source calls none of their helpers);
- ``pch1`` / ``pch2``: NVRTC with ``-pch`` (automatic precompiled headers, in a fresh
  ``--pch-dir``): the first compile creates the header image, the second reuses it;
- ``both``: the cut header with ``-pch`` (its image already made).

    TEENY_TX_ARCH=sm_90 python3 bench/compile_time.py [--repeats 3] [--only layer_norm]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def best(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


RANDOM_NAMES = ("philox", "uniform", "box_muller", "tx::rand", "tx::randn", "randint")
MMA_NAMES = ("Mma", "mma", "ldmatrix", "wgmma", "Swizzle", "stage_tf32")


def small_headers(source: str, headers: dict[str, str]) -> dict[str, str]:
    """The device headers with random.cuh and mma.cuh replaced by empty files where the
    source uses none of their names."""
    out = dict(headers)
    if not any(name in source for name in RANDOM_NAMES):
        out["random.cuh"] = "\n"
    if not any(name in source for name in MMA_NAMES):
        out["mma.cuh"] = "\n"
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", default="")
    options = parser.parse_args()

    import teeny_tx
    from teeny_tx.kernel import HEADERS
    from teeny_tx.runtime import cache, nvrtc
    from tests.cases import GOLDEN, KERNELS
    from tests.conftest import target_arch

    warnings.simplefilter("ignore")
    print(
        f"NVRTC {'.'.join(map(str, nvrtc.nvrtc_version()))}, device header lines: "
        + ", ".join(f"{n} {t.count(chr(10))}" for n, t in HEADERS.items())
    )
    print(
        f"{'kernel (golden)':34} {'arch':7} {'cold':>6} {'coldP':>6} {'warm':>6} {'nvrtc':>6} "
        f"{'small':>6} {'pch1':>6} {'pch2':>6} {'both':>6}"
    )
    totals = [0.0] * 8
    root = Path(tempfile.mkdtemp())
    os.environ["TEENY_TX_CACHE_DIR"] = str(root)

    def empty_cache():
        for entry in root.iterdir():
            if entry.name != "pch":
                shutil.rmtree(entry) if entry.is_dir() else entry.unlink()

    for g in GOLDEN:
        if options.only and options.only not in g.stem:
            continue
        with target_arch(g.arch):

            def ours(g=g, pch="0"):
                os.environ["TEENY_TX_PCH"] = pch
                cache.clear_memo()
                k = getattr(teeny_tx.compile(KERNELS / g.file, name=f"kernels/{g.file}"), g.kernel)
                spec = k.specialize(
                    *g.args, num_warps=g.num_warps, num_stages=g.num_stages, **g.constexprs
                )
                return spec.cubin, spec.cuda_source

            empty_cache()
            start = time.perf_counter()
            _, source = ours()
            cold = time.perf_counter() - start
            empty_cache()
            ours(pch="1")  # the machine's header image exists from the first kernel on
            empty_cache()
            start = time.perf_counter()
            ours(pch="1")
            cold_pch = time.perf_counter() - start
            warm = best(ours, options.repeats)
            os.environ["TEENY_TX_PCH"] = "0"  # the NVRTC columns pass their options
            name = g.kernel

            def plain(headers=HEADERS, extra=(), source=source, name=name, g=g):
                nvrtc.compile_to_cubin(
                    source,
                    name=name,
                    arch=g.arch,
                    options=(*nvrtc.DEFAULT_OPTIONS, *extra),
                    headers=headers,
                )

            full = best(plain, options.repeats)
            cut = small_headers(source, HEADERS)
            small = best(lambda cut=cut: plain(cut), options.repeats)
            pch_dir = Path(tempfile.mkdtemp())
            pch = ("-pch", f"--pch-dir={pch_dir}")
            try:
                start = time.perf_counter()
                plain(extra=pch)
                pch1 = time.perf_counter() - start
                pch2 = best(lambda pch=pch: plain(extra=pch), options.repeats)
                both = best(lambda pch=pch, cut=cut: plain(cut, extra=pch), options.repeats)
            except Exception as err:  # noqa: BLE001 - an NVRTC without -pch: say so
                print(f"  -pch failed: {str(err).splitlines()[0][:80]}")
                pch1 = pch2 = both = float("nan")
            shutil.rmtree(pch_dir, ignore_errors=True)
        row = (cold, cold_pch, warm, full, small, pch1, pch2, both)
        totals = [t + r for t, r in zip(totals, row, strict=True)]
        print(f"{g.stem:34} {g.arch:7} " + " ".join(f"{v:6.3f}" for v in row), flush=True)
    shutil.rmtree(root, ignore_errors=True)
    print(f"{'total':34} {'':7} " + " ".join(f"{v:6.2f}" for v in totals))


if __name__ == "__main__":
    main()
