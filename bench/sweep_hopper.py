"""Sweep of the Hopper matmul's configurations: TFLOP/s of every candidate per product, with
cuBLAS (torch.matmul) and teeny_tx.linalg.matmul (its own choice) timed in the same run.

Input: random normal operands drawn by torch, A [M, K] row-major and B [K, N] row-major (the
ragged product's B [1000, 4097] padded to rows of 4112 elements, as linalg pads it). Cases:
fp16 and bf16 4096³, 8192³, 4095 × 4097 × 1000, 1024³, 2048³, and fp16 8192³ + bias + exact
GELU (cuBLAS column: the best of F.gelu(torch.addmm(bias, a, b)) and F.gelu(a @ b + bias)).
Candidates: hopper_configs' table choice for the product, then its variants (group size;
4 stages; 256 x 128 with two 128-row consumers; TMA stores through panel buffers; the
ping-pong schedule; 2-CTA clusters with B multicast; split-K for products of few tiles; see
hopper_configs.variants). Also fp16 2048 x 2048 x 8192, 512 x 512 x 16384, 64 x 4096 x 8192.

Every implementation is checked first, against an f32 product (TF32 off) on the GPU: C
poisoned with NaN, then the worst row's ‖out − ref‖ / ‖ref‖ within 2e-3 (fp16) or 1e-2
(bf16); only checked ones are timed (L2 flushed before each call, CUDA events, median).
Rates are 2·M·N·K / time; the ratio is to cuBLAS of the same run. For 1024³ and 2048³ the
time as a user calls it (host included, back-to-back calls) is printed too.

Candidates are built without the watchdog (linalg built its kernels with one until today:
the table's choice is also timed with it, to show its cost) and run in child processes by
family (base, atoms2, panels, pingpong, cluster, splitk, tuned), each under a time limit, so a
kernel that fails or hangs costs its family, not the sweep (the tuned family, which times
every family's kernels, is then skipped); the kernels are compiled first, in parallel processes,
into the cubin cache the children read. The summary at the end gives, per case, cuBLAS,
linalg's choice and the best candidate.

Run from the repository root on the H200 (about 2 minutes):
    python3 bench/sweep_hopper.py --json /tmp/sweep_hopper.json
    python3 bench/sweep_hopper.py --cases bf16:8192 --families base,cluster
Without a GPU, --dry lists the candidates and compiles them for sm_90a (ptxas's spills).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

FAMILIES = ("base", "atoms2", "panels", "pingpong", "cluster", "splitk", "tuned")
WATCHDOG = 1 << 30  # what linalg built its kernels with until 2026-12-01 (its cost is timed)
TOL = {"f16": 2e-3, "bf16": 1e-2}


@dataclass(frozen=True)
class Case:
    dtype: str  # f16 or bf16
    m: int
    n: int
    k: int
    gelu: bool = False

    @property
    def name(self) -> str:
        shape = f"{self.m}³" if self.m == self.n == self.k else f"{self.m}x{self.n}x{self.k}"
        return f"{self.dtype} {shape}" + (" +bias+gelu" if self.gelu else "")

    @property
    def lead_b(self) -> int:
        """B's row stride in elements: N rounded up to 16 elements (what linalg pads to, so
        linalg copies nothing and both sides time the same kernel work)."""
        return -(-self.n // 16) * 16

    @property
    def tma_store_ok(self) -> bool:
        return self.n % 8 == 0  # C [M, N] contiguous: rows of 16-byte multiples

    @property
    def flops(self) -> int:
        return 2 * self.m * self.n * self.k


def all_cases() -> list[Case]:
    out = []
    for dtype in ("f16", "bf16"):
        out += [Case(dtype, s, s, s) for s in (4096, 8192)]
        out.append(Case(dtype, 4095, 4097, 1000))
        out += [Case(dtype, s, s, s) for s in (1024, 2048)]
    out.append(Case("f16", 8192, 8192, 8192, gelu=True))
    # few tiles, long K (split-K's products)
    out += [
        Case("f16", 2048, 2048, 8192),
        Case("f16", 512, 512, 16384),
        Case("f16", 64, 4096, 8192),
    ]
    return out


def family(candidate) -> str:
    """The newest mechanism a candidate uses (a failure there costs only that family)."""
    c = candidate.config
    if c.split_k > 1:
        return "splitk"
    if c.cluster > 1:
        return "cluster"
    if c.pingpong:
        return "pingpong"
    if c.store_panels and candidate.tma_store:
        return "panels"
    if c.atoms > 1:
        return "atoms2"
    return "base"


def candidates(case: Case, sms: int) -> list:
    """The table's choice for ``case``, then hopper_configs' variants of it."""
    from teeny_tx.library import hopper_configs as hc
    from teeny_tx.lower.hopper.matmul import ITEMSIZE

    size = ITEMSIZE[case.dtype]
    base = hc.table_candidates(case.m, case.n, sms, case.tma_store_ok, case.k)[0]
    first = hc.with_epilogue(base, case.tma_store_ok, size, size)
    return list(dict.fromkeys([first, *hc.variants(first, case.tma_store_ok)]))


def node_for(case: Case, candidate, watchdog: int = 0):
    from teeny_tx.lower.hopper.matmul import plan_matmul

    return plan_matmul(
        dtype=case.dtype,
        out_dtype=case.dtype,
        a_kmajor=True,
        b_kmajor=False,
        bias_dtype=case.dtype if case.gelu else None,
        activation=1 if case.gelu else 0,
        pairs=case.n % 2 == 0,
        tma_store=candidate.tma_store,
        config=candidate.config,
        watchdog=watchdog,
    )


def plans(cases: list[Case], families: tuple[str, ...], sms: int) -> list[tuple]:
    """(case, candidate, node or the reason it does not plan) for every candidate."""
    from teeny_tx.lower.hopper.matmul import TmaUnsupported

    out = []
    for case in cases:
        for cand in candidates(case, sms):
            if family(cand) not in families:
                continue
            try:
                out.append((case, cand, node_for(case, cand)))
            except TmaUnsupported as err:
                out.append((case, cand, str(err).splitlines()[0]))
        if "base" in families:  # the table's choice with a watchdog
            first = candidates(case, sms)[0]
            out.append((case, first, node_for(case, first, watchdog=WATCHDOG)))
    return out


def _compile(node) -> tuple[str, int, str]:
    """(label, the kernel's stack frame in bytes, error): compiled once, into the on-disk
    cubin cache the children read (a frame without the watchdog's printf means spills)."""
    from teeny_tx.kernel import HopperSpecialization
    from teeny_tx.runtime.elf import cubin_resources

    kernel = HopperSpecialization(node)
    try:
        return node.label, cubin_resources(kernel.cubin)[1], ""
    except Exception as err:  # noqa: BLE001 - reported per kernel
        return node.label, -1, str(err).splitlines()[0]


def compile_all(nodes: list, workers: int) -> dict[tuple, tuple[int, str]]:
    """Spills and errors per node key, compiled in ``workers`` processes."""
    unique = list({n.key: n for n in nodes}.values())
    with ProcessPoolExecutor(max_workers=max(1, workers)) as pool:
        results = list(pool.map(_compile, unique))
    return {n.key: (spills, err) for n, (_, spills, err) in zip(unique, results, strict=True)}


# ------------------------------------------------------------------ on the GPU (children)


def _operands(case: Case, seed: int = 0):
    import torch

    dt = {"f16": torch.float16, "bf16": torch.bfloat16}[case.dtype]
    g = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn(case.m, case.k, device="cuda", generator=g).to(dt)
    b_full = torch.zeros(case.k, case.lead_b, device="cuda", dtype=dt)
    b = b_full[:, : case.n]
    b.copy_(torch.randn(case.k, case.n, device="cuda", generator=g).to(dt))
    bias = torch.randn(case.n, device="cuda", generator=g).to(dt) if case.gelu else None
    return a, b, bias


def _reference(case: Case, a, b, bias):
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    ref = a.float() @ b.float()
    if bias is not None:
        ref = torch.nn.functional.gelu(ref + bias.float())
    return ref


def _row_error(out, ref) -> float:
    err = (out.float() - ref).norm(dim=1) / ref.norm(dim=1).clamp_min(1e-30)
    value = float(err.max())
    return value if value == value else float("inf")  # NaN (an unwritten tile) fails


def _timed(fn, case: Case, ref, out_of, results: list, who: str, extra: dict) -> None:
    """Check ``fn`` (its output ``out_of(fn())``) against ``ref``, then time it."""
    import bench_softmax as rb
    from common import median

    try:
        out = out_of(fn())
        rb.sync()
        err = _row_error(out, ref)
        if not err <= TOL[case.dtype]:
            raise AssertionError(f"worst row error {err:.3g} > {TOL[case.dtype]}")
        ms = median(rb.time_ms(fn, 5.0, 30.0))
    except Exception as exc:  # noqa: BLE001 - one line per failure, the sweep goes on
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        print(f"sweep {case.name:<24} {who:<52} FAILED {text}", flush=True)
        results.append({"case": case.name, "who": who, "error": text, **extra})
        return
    rate = case.flops / (ms * 1e-3) / 1e12
    print(f"sweep {case.name:<24} {who:<52} {rate:7.1f} TFLOP/s  {ms:8.4f} ms  err {err:.2g}")
    sys.stdout.flush()
    results.append({"case": case.name, "who": who, "tflops": rate, "ms": ms, "err": err, **extra})


def _called_us(fn, calls: int = 100) -> float:
    import bench_softmax as rb

    for _ in range(5):
        fn()
    rb.sync()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    rb.sync()
    return (time.perf_counter() - start) / calls * 1e6


def child(cases: list[Case], fam: str, out_path: str) -> None:
    """One family's measurements (base: also cuBLAS and linalg's choice; tuned: linalg with
    its tuner on), appended to ``out_path`` as JSON lines."""
    import torch

    from teeny_tx.library import hopper_configs

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    results: list[dict] = []
    if fam == "tuned":
        hopper_configs.TUNE = True
    for case in cases:  # each case's lines written at once: a later hang loses only its own
        measure(case, fam, sms, results)
        torch.cuda.empty_cache()
        with open(out_path, "a") as f:
            f.writelines(json.dumps(r) + "\n" for r in results)
        results.clear()


def measure(case: Case, fam: str, sms: int, results: list[dict]) -> None:
    """One case's measurements for family ``fam``."""
    import torch

    from teeny_tx.kernel import HopperSpecialization
    from teeny_tx.library import hopper_configs, linalg
    from teeny_tx.lower.hopper.matmul import TmaUnsupported

    stream = torch.cuda.current_stream().cuda_stream
    a, b, bias = _operands(case)
    ref = _reference(case, a, b, bias)
    c = torch.empty(case.m, case.n, device="cuda", dtype=a.dtype)
    act = "gelu" if case.gelu else None
    gelu = torch.nn.functional.gelu
    same = lambda x: x  # noqa: E731 - the output is the call's result
    in_c = lambda x: c  # noqa: E731 - the output is c

    def ours():
        return linalg.matmul(a, b, bias=bias, activation=act)

    if fam in ("base", "tuned"):
        who = "linalg.matmul" + (" (tuned)" if fam == "tuned" else " (its choice)")
        _timed(ours, case, ref, same, results, who, {"family": fam})
        for line in linalg.hopper_report().splitlines():
            if line.startswith(f"{case.m}x{case.n}x{case.k} "):
                print(f"      choice: {line}", flush=True)
    if fam == "base":
        peers = {"cuBLAS torch.matmul": lambda: a @ b}
        if case.gelu:
            peers = {
                "cuBLAS addmm+gelu": lambda: gelu(torch.addmm(bias, a, b)),
                "cuBLAS matmul+bias+gelu": lambda: gelu(a @ b + bias),
            }
        for who, fn in peers.items():
            _timed(fn, case, ref, same, results, who, {"family": "cuBLAS"})
        if case.m <= 2048:
            us = {"linalg": _called_us(ours), "torch": _called_us(lambda: a @ b)}
            print(
                f"sweep {case.name:<24} as called (host included): linalg "
                f"{us['linalg']:.1f} us, torch {us['torch']:.1f} us",
                flush=True,
            )
            results.append({"case": case.name, "who": "called_us", **us})
        # the table's choice with the watchdog linalg built in until today (its cost, against
        # the same kernel without it among the candidates below)
        first = candidates(case, sms)[0]
        kernel = HopperSpecialization(node_for(case, first, watchdog=WATCHDOG))
        c.fill_(float("nan"))
        run = _launch(kernel, case, a, b, c, bias, sms, stream)
        who = f"{kernel.node.label}, watchdog"
        _timed(run, case, ref, in_c, results, who, {"family": "base", "watchdog": WATCHDOG})
    if fam == "tuned":
        return
    for cand in candidates(case, sms):
        if family(cand) != fam:
            continue
        try:
            kernel = HopperSpecialization(node_for(case, cand))
        except TmaUnsupported as err:
            reason = str(err).splitlines()[0]
            print(f"sweep {case.name:<24} {hopper_configs.label(cand):<52} not planned: {reason}")
            continue
        c.fill_(float("nan"))
        run = _launch(kernel, case, a, b, c, bias, sms, stream)
        _timed(run, case, ref, in_c, results, kernel.node.label, {"family": fam})


def _launch(kernel, case: Case, a, b, c, bias, sms: int, stream):
    go = kernel.launcher(case.m, case.n, case.k, case.k, case.lead_b, case.n, 1, 1.0, sms)
    pointers = (c.data_ptr(), a.data_ptr(), b.data_ptr())
    bias_ptr = c.data_ptr() if bias is None else bias.data_ptr()

    def run():
        go(*pointers, bias_ptr, stream)
        return c

    return run


# ------------------------------------------------------------------ the orchestrator


def _cell(x: float | None, peer: float | None = None) -> str:
    """A rate (TFLOP/s), or with ``peer`` its ratio to it; a dash where there is none."""
    if peer is not None:
        return f"{x / peer:6.2f}" if x is not None and peer else "     -"
    return f"{x:7.1f}" if x is not None else "      -"


def summary(rows: list[dict]) -> None:
    cases = list(dict.fromkeys(r["case"] for r in rows))
    print("\n== summary (TFLOP/s; ratio to cuBLAS of this run)")
    print(f"{'case':<24} {'cuBLAS':>7} {'linalg':>7} {'ratio':>6} {'best':>7} {'ratio':>6}  best")
    for name in cases:
        ok = [r for r in rows if r["case"] == name and "tflops" in r]
        peer = max((r["tflops"] for r in ok if r.get("family") == "cuBLAS"), default=None)
        mine = next((r["tflops"] for r in ok if r["who"] == "linalg.matmul (its choice)"), None)
        best = max((r for r in ok if r.get("family") != "cuBLAS"), key=lambda r: r["tflops"],
                   default=None)  # fmt: skip
        top = best["tflops"] if best else None
        print(
            f"{name:<24} {_cell(peer)} {_cell(mine)} {_cell(mine, peer)} {_cell(top)} "
            f"{_cell(top, peer)}  {best['who'] if best else '-'}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="", help="e.g. bf16:8192,f16:4095x4097x1000,gelu")
    parser.add_argument("--families", default=",".join(FAMILIES))
    parser.add_argument("--json", default=None, help="write every measurement here (JSON)")
    parser.add_argument("--timeout", type=float, default=90.0, help="seconds per family")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--dry", action="store_true", help="no GPU: plan and compile only")
    parser.add_argument("--sms", type=int, default=132)
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--results", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    cases = select(args.cases)
    families = tuple(f for f in args.families.split(",") if f)
    if args.child:
        child(cases, args.child, args.results)
        return 0
    start = time.perf_counter()
    planned = plans(cases, families, args.sms)
    nodes = [p[2] for p in planned if not isinstance(p[2], str)]
    compiled = compile_all(nodes, args.workers)
    print(f"compiled {len(compiled)} kernels in {time.perf_counter() - start:.1f} s")
    for case, cand, node in planned:
        if isinstance(node, str):
            print(f"plan {case.name:<24} {family(cand):<8} not planned: {node}")
            continue
        spills, err = compiled[node.key]
        state = err or (f"stack frame {spills} bytes" if spills else "no stack, no spills")
        label = node.label + (", watchdog" if node.watchdog else "")
        print(f"plan {case.name:<24} {family(cand):<8} {label:<62} {state}")
    if args.dry:
        return 0
    results = Path(args.json or "/tmp/sweep_hopper.jsonl").with_suffix(".jsonl")
    results.unlink(missing_ok=True)
    failed = []
    for fam in families:
        if fam == "tuned" and failed:  # the tuner times those families' kernels too
            print(f"\n== family tuned: skipped ({', '.join(failed)} failed)", flush=True)
            continue
        command = [sys.executable, __file__, "--child", fam, "--results", str(results)]
        command += ["--cases", args.cases] if args.cases else []
        print(f"\n== family {fam}", flush=True)
        try:
            done = subprocess.run(command, timeout=args.timeout, check=False)
            if done.returncode:
                print(f"family {fam}: exited with status {done.returncode}", flush=True)
                failed.append(fam)
        except subprocess.TimeoutExpired:
            print(f"family {fam}: stopped after {args.timeout:.0f} s (a hang?)", flush=True)
            failed.append(fam)
    rows = []
    if results.exists():
        rows = [json.loads(line) for line in results.read_text().splitlines() if line]
    summary(rows)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    print(f"\nsweep took {time.perf_counter() - start:.0f} s")
    return 0


def select(text: str) -> list[Case]:
    """Cases named by ``dtype:size`` or ``dtype:MxNxK`` or ``gelu`` (all when empty)."""
    cases = all_cases()
    if not text:
        return cases
    chosen = []
    for item in text.split(","):
        if item == "gelu":
            chosen += [c for c in cases if c.gelu]
            continue
        dtype, _, shape = item.partition(":")
        dims = [int(x) for x in shape.split("x")]
        m, n, k = dims * 3 if len(dims) == 1 else dims
        chosen += [c for c in cases if (c.dtype, c.m, c.n, c.k, c.gelu) == (dtype, m, n, k, False)]
    return chosen


if __name__ == "__main__":
    sys.exit(main())
