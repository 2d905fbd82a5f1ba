"""Matrix multiply: teeny_tx.linalg.matmul against cuBLAS (torch.matmul) and a Triton matmul.

Input: random normal A [M, K] and B [K, N] drawn by torch, row-major. Cases: M = N = K in
--sizes (default 1024, 2048, 4096, 8192) for each of --dtypes (default fp16, bf16); and the
--extras (default all three): "gelu", fp16 8192³ with a bias and exact GELU fused (torch: the
best of F.gelu(torch.addmm(bias, a, b)) and F.gelu(a @ b + bias)); "tf32", fp32 4096³ with TF32
inputs (torch with torch.backends.cuda.matmul.allow_tf32 = True, ours precision='tf32', Triton
input_precision="tf32"), with B row-major (our TF32 wgmma reads K-major operands only: linalg
copies B K-contiguous first, inside the timed call) and with B K-major (w.t() of a row-major
[N, K], read in place); "ragged", fp16 4095 × 4097 × 1000 (unaligned rows: 1000 is not a
multiple of 16 elements, 4097 is odd).
Output: every implementation checked first against a float32 product on the GPU (torch with
TF32 off; row by row, ‖out − ref‖ / ‖ref‖ within the tolerance of the output dtype and of
accumulating K products in f32; outputs allocated on memory poisoned with NaN), then timed as
bench_softmax.py times (a 256 MB L2 flush before each call, CUDA events, median). Rate =
2·M·N·K / time in TFLOP/s; ratios ours / cuBLAS and ours / Triton. Our tiles come from
teeny_tx.linalg.matmul_config; the Triton peer is the tutorial's grouped matmul, autotuned
over four Hopper configurations (its choice is printed). --out writes the table.

Without --preset/--sizes/--dtypes/--extras the 'large' preset runs (fp16 and bf16 4096³ and
8192³, fp16 8192³ + bias + GELU, fp8 e4m3 8192³: about 150 s on the H200); --preset all runs
every case. The Hopper path's choice of tile, stages and epilogue per product is printed
(``Hopper choice:``) and noted under the table.

Run from the repository root: python3 bench/bench_matmul.py --out /tmp/matmul.md
"""

import sys

import bench_softmax as rb
from bench_softmax import Impl, RatioTable, check_rows, fresh_outputs, tl, triton, triton_jit
from common import base_parser, median, report_failure, short_error

UNIT = "TFLOP/s"
PEERS = ["cuBLAS", "Triton"]
DTYPE_NAMES = {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32"}  # torch's
DTYPE_TO_TX = {"fp16": "f16", "bf16": "bf16", "fp32": "f32"}
# worst row's ‖out − ref‖ / ‖ref‖ against an f32 product: the output's rounding (fp16 2^-11,
# bf16 2^-8, rms about a third of it) plus f32 accumulation; TF32 inputs lose 13 mantissa bits
TOL = {"fp16": 2e-3, "bf16": 1e-2, "tf32": 3e-3}
EXTRAS = ("gelu", "tf32", "ragged", "fp8")
# subsets of the cases, each a few minutes on the H200: (sizes, dtypes, extras)
PRESETS = {
    "large": ("4096,8192", "fp16,bf16", "gelu,fp8"),
    "small": ("1024,2048", "fp16,bf16", "ragged,tf32"),
    "quick": ("2048,8192", "bf16", "none"),
    "all": ("1024,2048,4096,8192", "fp16,bf16", ",".join(EXTRAS)),
}


# The grouped matmul of Triton's tutorial, with an optional fused bias + exact GELU (no
# docstring: Triton compiles the body). Configurations typical for Hopper; autotuned per shape.
def _triton_configs():
    if triton is None:
        return []
    shapes = [(128, 256, 64, 3, 8), (128, 128, 64, 4, 4), (64, 256, 32, 4, 4), (64, 128, 64, 4, 4)]
    return [
        triton.Config({"BM": bm, "BN": bn, "BK": bk, "GROUP_M": 8}, num_stages=s, num_warps=w)
        for bm, bn, bk, s, w in shapes
    ]


def _triton_autotune(fn):
    if triton is None:
        return fn
    try:
        return triton.autotune(configs=_triton_configs(), key=["M", "N", "K", "PRECISION"])(fn)
    except Exception as exc:  # pragma: no cover - depends on the machine
        print(f"Triton autotune unavailable: {exc}", file=sys.stderr)
        return fn


@_triton_autotune
@triton_jit
def triton_matmul_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    bias_ptr,
    M,
    N,
    K,
    stride_am,
    stride_ak,
    stride_bk,
    stride_bn,
    stride_cm,
    stride_cn,
    HAS_BIAS: tl.constexpr,
    GELU: tl.constexpr,
    PRECISION: tl.constexpr,
    BM: tl.constexpr,
    BN: tl.constexpr,
    BK: tl.constexpr,
    GROUP_M: tl.constexpr,
):
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BM)
    num_n = tl.cdiv(N, BN)
    width = GROUP_M * num_n
    first_m = (pid // width) * GROUP_M
    rows = min(num_m - first_m, GROUP_M)
    pid_m = first_m + (pid % width) % rows
    pid_n = (pid % width) // rows
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a_ptrs = a_ptr + rm[:, None] * stride_am + rk[None, :] * stride_ak
    b_ptrs = b_ptr + rk[:, None] * stride_bk + rn[None, :] * stride_bn
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        a = tl.load(a_ptrs, mask=(rm[:, None] < M) & (rk[None, :] < K - k * BK), other=0.0)
        b = tl.load(b_ptrs, mask=(rk[:, None] < K - k * BK) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
        a_ptrs += BK * stride_ak
        b_ptrs += BK * stride_bk
    if HAS_BIAS:
        acc += tl.load(bias_ptr + rn, mask=rn < N, other=0.0).to(tl.float32)[None, :]
    if GELU:
        acc = 0.5 * acc * (1.0 + tl.math.erf(acc * 0.7071067811865476))
    c_ptrs = c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=mask)


def triton_matmul(a, b, bias=None, gelu=False, precision="ieee"):
    import torch

    m, k = a.shape
    n = b.shape[1]
    c = torch.empty((m, n), device=a.device, dtype=a.dtype)

    def grid(meta):
        return (triton.cdiv(m, meta["BM"]) * triton.cdiv(n, meta["BN"]),)

    triton_matmul_kernel[grid](
        a,
        b,
        c,
        a if bias is None else bias,
        m,
        n,
        k,
        a.stride(0),
        a.stride(1),
        b.stride(0),
        b.stride(1),
        c.stride(0),
        c.stride(1),
        HAS_BIAS=bias is not None,
        GELU=gelu,
        PRECISION=precision,
    )
    return c


def triton_choice() -> str:
    """The configuration Triton's autotuner picked for the last shape, if it says."""
    best = getattr(triton_matmul_kernel, "best_config", None)
    return str(best) if best is not None else "?"


# ---------------------------------------------------------------- cases


class Case:
    """One product: its name, shape, input dtype, epilogue and our precision."""

    def __init__(self, name, m, n, k, dtype, gelu=False, tf32=False, b_kmajor=False):
        self.name, self.m, self.n, self.k = name, m, n, k
        self.dtype, self.gelu, self.tf32 = dtype, gelu, tf32
        self.b_kmajor = b_kmajor  # B [K, N] as the transpose of a row-major [N, K]

    @property
    def flops(self) -> int:
        return 2 * self.m * self.n * self.k

    @property
    def tol(self) -> float:
        return TOL["tf32" if self.tf32 else self.dtype]


def cases(args) -> list[Case]:
    out = [Case(f"{dtype} {s}³", s, s, s, dtype) for dtype in args.dtypes for s in args.sizes]
    if "gelu" in args.extras:
        out.append(Case("fp16 8192³ bias+GELU", 8192, 8192, 8192, "fp16", gelu=True))
    if "tf32" in args.extras:
        out.append(Case("fp32 4096³ TF32", 4096, 4096, 4096, "fp32", tf32=True))
        # B as a linear layer's weight: K contiguous, what TF32 wgmma reads without a copy
        out.append(
            Case("fp32 4096³ TF32, B K-major", 4096, 4096, 4096, "fp32", tf32=True, b_kmajor=True)
        )
    if "ragged" in args.extras:
        out.append(Case("fp16 4095×4097×1000", 4095, 4097, 1000, "fp16"))
    return out


def reference(a, b, bias, gelu):
    """The check's reference, row chunk by row chunk: an f32 product (TF32 off), then the
    epilogue in f32."""
    import torch
    import torch.nn.functional as F

    a32, b32 = a.float(), b.float()
    bias32 = None if bias is None else bias.float()

    def rows(lo, hi):
        allow = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = False
        try:
            out = a32[lo:hi] @ b32
        finally:
            torch.backends.cuda.matmul.allow_tf32 = allow
        if bias32 is not None:
            out += bias32
        return F.gelu(out) if gelu else out

    return rows


def bench_case(case: Case, linalg, linalg_error, args, table) -> int:
    """Check and time ours, cuBLAS and Triton on one case; add its row; return the failures."""
    import torch
    import torch.nn.functional as F

    print(f"\n== {case.name}", flush=True)
    torch_dtype = getattr(torch, DTYPE_NAMES[case.dtype])
    a = torch.randn(case.m, case.k, device=rb.DEVICE, dtype=torch_dtype)
    b = torch.randn(case.k, case.n, device=rb.DEVICE, dtype=torch_dtype)
    if case.b_kmajor:
        b = b.t().contiguous().t()
    bias = torch.randn(case.n, device=rb.DEVICE, dtype=torch_dtype) if case.gelu else None
    ref = reference(a, b, bias, case.gelu)
    shape = (case.m, case.n)
    out_bytes = [case.m * case.n * a.element_size()]
    failures = 0

    def checker(fn, who):
        return lambda: check_rows(who, fresh_outputs(fn, out_bytes), shape, ref, case.tol)

    impls: list[Impl] = []
    if linalg is not None:
        precision = "tf32" if case.tf32 else "ieee"
        config = linalg.matmul_config(
            case.m, case.n, case.k, DTYPE_TO_TX[case.dtype], precision=precision
        )
        activation = "gelu" if case.gelu else None

        def ours():
            return linalg.matmul(a, b, bias=bias, activation=activation, precision=precision)

        label = hopper_label(linalg, case) or (
            "linalg.matmul (cp.async), BM={} BN={} BK={} GROUP_M={} warps={} stages={}".format(
                *config
            )
        )
        impls.append(Impl("ours", label, ours, checker(ours, "ours")))
        if args.path == "both" and label.startswith("linalg.matmul (Hopper"):

            def ours_cp_async():
                linalg.HOPPER = False
                try:
                    return ours()
                finally:
                    linalg.HOPPER = True

            impls.append(
                Impl(
                    "ours-cp.async",
                    "linalg.matmul, the cp.async + wgmma kernel (HOPPER = False)",
                    ours_cp_async,
                    checker(ours_cp_async, "ours-cp.async"),
                )
            )
    else:
        print(f"ours: unavailable ({linalg_error})", flush=True)
        failures += 1

    def with_tf32(fn):
        def run():
            allow = torch.backends.cuda.matmul.allow_tf32
            torch.backends.cuda.matmul.allow_tf32 = case.tf32
            try:
                return fn()
            finally:
                torch.backends.cuda.matmul.allow_tf32 = allow

        return run

    if case.gelu:
        spellings = {
            "F.gelu(torch.addmm(bias, a, b))": lambda: F.gelu(torch.addmm(bias, a, b)),
            "F.gelu(a @ b + bias)": lambda: F.gelu(a @ b + bias),
        }
    else:
        spellings = {"torch.matmul(a, b)": lambda: torch.matmul(a, b)}
    for label, fn in spellings.items():
        run = with_tf32(fn)
        impls.append(Impl(f"cuBLAS:{label}", label, run, checker(run, f"cuBLAS {label}")))

    if rb.triton_available():
        tri_precision = "tf32"  # TF32 for the fp32 case; fp16 and bf16 ignore it

        def tri():
            return triton_matmul(a, b, bias, case.gelu, tri_precision)

        impls.append(Impl("Triton", "tutorial matmul, autotuned", tri, checker(tri, "Triton")))

    rates: dict[str, float | None] = {}
    best: dict[str, str] = {}  # the peers' fastest spelling or configuration
    for impl in impls:
        column = impl.column.split(":")[0]
        try:
            err = impl.check()
            rb.sync()
            times = rb.time_ms(impl.run, args.warmup_ms, args.rep_ms)
        except Exception as exc:
            if column != "cuBLAS" or len(spellings) == 1:
                failures += 1
            why = report_failure(f"{case.name} {impl.column} [{impl.label}]", exc)
            if column == "ours":
                print(f"ours: unavailable ({why})", flush=True)
            table.notes.append(f"{case.name} {column} [{impl.label}] failed: {why}")
            continue
        ms = median(times)
        tflops = case.flops / (ms * 1e-3) / 1e12
        label = impl.label if column != "Triton" else f"{impl.label}: {triton_choice()}"
        print(
            f"{column:<7} [{label}] median {ms:8.4f} ms (min {times[0]:.4f}, {len(times)} calls)"
            f"  {tflops:7.1f} {UNIT}  worst row rel err {err:.2g}",
            flush=True,
        )
        if case.m * case.n * case.k <= CALLED_MAX:  # host work matters here: time it too
            us = called_us(impl.run)
            rate = case.flops / (us * 1e-6) / 1e12
            print(f"{column:<7} as called back to back: {us:7.2f} us/call  {rate:7.1f} {UNIT}")
            table.notes.append(f"{case.name} {column} as called (host included): {us:.1f} us")
        if rates.get(column) is None or tflops > rates[column]:
            rates[column], best[column] = tflops, label
    for column, label in best.items():
        if column != "ours":
            table.notes.append(f"{case.name} {column}: {label}")
    table.add(case.name, rates.get("ours"), {p: rates.get(p) for p in PEERS})
    return failures


CALLED_MAX = 2048**3  # products up to this size are also timed as a user calls them


def called_us(fn, calls: int = 200) -> float:
    """Microseconds per call of ``fn`` called back to back from Python, host work included
    (wall clock over ``calls`` calls, synchronised at both ends, no L2 flush)."""
    import time

    for _ in range(10):
        fn()
    rb.sync()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    rb.sync()
    return (time.perf_counter() - start) / calls * 1e6


def hopper_label(linalg, case) -> str | None:
    """What the Hopper path runs for ``case`` (None where linalg takes the cp.async kernel)."""
    if not getattr(linalg, "HOPPER", False):
        return None
    tma_store = getattr(linalg, "TMA_STORE", False)
    c = linalg.hopper_config(case.m, case.n, tma_store=tma_store, tf32=case.tf32)
    return (
        "linalg.matmul (Hopper TMA + wgmma, warp-specialised, persistent), BM={} BN={} BK={} "
        "stages={} GROUP_M={}, {} epilogue (the choice made: see the notes)".format(
            c.bm, c.bn, c.bk, c.stages, c.group_m, "TMA-store" if tma_store else "register"
        )
    )


# Hopper kernel configurations timed directly by --sweep: (BM, BN, BK, stages, GROUP_M, the
# epilogue through TMA stores)
SWEEP = (
    (128, 256, 64, 4, 8, False),
    (128, 256, 64, 3, 8, False),
    (128, 256, 64, 3, 8, True),
    (128, 256, 64, 4, 16, False),
    (128, 256, 64, 4, 4, False),
    (128, 128, 64, 6, 8, False),
    (128, 128, 64, 5, 8, True),
    (256, 128, 64, 4, 8, False),
    (128, 192, 64, 5, 8, False),
)


def bench_fp8(args, table, size: int = 8192) -> int:
    """fp8 e4m3 size³ with per-tensor scales, bf16 out: linalg.scaled_matmul against
    torch._scaled_mm (cuBLASLt) on the same operands (A row-major, B column-major)."""
    import torch

    from teeny_tx.library import linalg

    name = f"fp8 e4m3 {size}³ scaled, bf16 out"
    print(f"\n== {name}", flush=True)
    a = torch.randn(size, size, device="cuda").to(torch.float8_e4m3fn)
    b = torch.randn(size, size, device="cuda").to(torch.float8_e4m3fn).t()
    sa = torch.tensor([0.5], device="cuda")
    sb = torch.tensor([2.0], device="cuda")
    ref = (a.float() @ b.float()).double()
    impls = {
        "ours": lambda: linalg.scaled_matmul(a, b, sa, sb),
        "cuBLAS": lambda: torch._scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16),
        # fast accumulation: wgmma's own accumulator throughout, as our kernel does
        "cuBLAS:fast": lambda: torch._scaled_mm(
            a, b, sa, sb, out_dtype=torch.bfloat16, use_fast_accum=True
        ),
    }
    rates, failures = {}, 0
    for label, fn in impls.items():
        column = label.split(":")[0]
        try:
            out = fn()
            rb.sync()
            err = float((out.double() - ref).norm() / ref.norm())
            if not err < 1e-2:
                raise AssertionError(f"rel err {err:.3g} against the f32 product")
            times = rb.time_ms(fn, args.warmup_ms, args.rep_ms)
        except Exception as exc:
            failures += column == "ours"
            table.notes.append(f"{name} {label} failed: {report_failure(name, exc)}")
            continue
        ms = median(times)
        rate = 2 * size**3 / (ms * 1e-3) / 1e12
        rates[column] = max(rates.get(column, 0.0), rate)
        print(f"{label:<11} median {ms:8.4f} ms  {rate:7.1f} {UNIT}  rel err {err:.2g}", flush=True)
    table.notes.append(
        f"{name}: cuBLAS column = the faster of torch._scaled_mm with and without "
        "use_fast_accum; Triton not run"
    )
    table.add(name, rates.get("ours"), {"cuBLAS": rates.get("cuBLAS"), "Triton": None})
    return failures


def _sweep_launcher(kernel, c, a, b, size, sms, stream):
    def run():
        pointers = (c.data_ptr(), a.data_ptr(), b.data_ptr(), c.data_ptr())
        kernel.launch(*pointers, size, size, size, size, size, size, 1, 1.0, sms, stream)
        return c

    return run


def hopper_sweep(args) -> None:
    """Time the Hopper kernel itself (no linalg) over SWEEP at each --sweep size, bf16, A
    row-major and B row-major or (linear's layout) K-major; print TFLOP/s per configuration."""
    import torch

    from teeny_tx.kernel import HopperSpecialization
    from teeny_tx.lower.hopper.matmul import HopperConfig, TmaUnsupported, plan_matmul

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for size in args.sweep:
        a = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
        ref = (a.float() @ b.float()).double()
        for b_kmajor in (False, True):
            b_store = b.t().contiguous() if b_kmajor else b
            for bm, bn, bk, stages, group, tma_store in SWEEP:
                major = "K" if b_kmajor else "N"
                name = f"{size}³ bf16 B {major}-major {bm}x{bn}x{bk} s{stages} g{group}"
                name += " TMA-store epilogue" if tma_store else ""
                try:
                    node = plan_matmul(
                        dtype="bf16",
                        out_dtype="bf16",
                        a_kmajor=True,
                        b_kmajor=b_kmajor,
                        tma_store=tma_store,
                        config=HopperConfig(bm, bn, bk, stages, group),
                    )
                except TmaUnsupported as err:
                    print(f"sweep {name}: not planned ({err.message})", flush=True)
                    continue
                kernel = HopperSpecialization(node)
                c = torch.empty(size, size, device="cuda", dtype=torch.bfloat16)
                stream = torch.cuda.current_stream().cuda_stream

                run = _sweep_launcher(kernel, c, a, b_store, size, sms, stream)

                try:
                    run()
                    rb.sync()
                    err = float((c.double() - ref).norm() / ref.norm())
                    times = rb.time_ms(run, args.warmup_ms, args.rep_ms)
                except Exception as exc:
                    print(f"sweep {name}: failed ({short_error(exc)})", flush=True)
                    continue
                ms = median(times)
                tflops = 2 * size**3 / (ms * 1e-3) / 1e12
                print(
                    f"sweep {name}: {tflops:7.1f} {UNIT} (median {ms:.4f} ms, rel err {err:.2g})",
                    flush=True,
                )


def load_linalg():
    """(teeny_tx.linalg, None), or (None, the error) where it does not import."""
    try:
        from teeny_tx.library import linalg

        return linalg, None
    except Exception as exc:
        report_failure("import teeny_tx.linalg", exc)
        return None, short_error(exc)


def parse_args(argv: list[str] | None = None):
    p = base_parser(__doc__.splitlines()[0])
    p.add_argument(
        "--sizes", default=None, help="M = N = K of the square cases (all: 1024,2048,4096,8192)"
    )
    p.add_argument("--dtypes", default=None, help="input dtypes of the square cases (fp16,bf16)")
    p.add_argument(
        "--extras",
        default=None,
        help=f"other cases, comma-separated from {', '.join(EXTRAS)}, or 'none'",
    )
    p.add_argument(
        "--preset",
        choices=sorted(PRESETS),
        default=None,
        help="a subset that fits one device call (overrides --sizes/--dtypes/--extras); "
        "without --preset, --sizes, --dtypes and --extras: 'large' (about 150 s); 'all': "
        "every case",
    )
    p.add_argument(
        "--epilogue",
        choices=("tma-store", "register"),
        default="tma-store",
        help="the Hopper path's epilogue (linalg.TMA_STORE): through TMA stores where C "
        "allows it (the default), or from registers",
    )
    p.add_argument(
        "--path",
        choices=("hopper", "both", "cp.async"),
        default="hopper",
        help="hopper: linalg.HOPPER = True (the TMA path); both: also linalg's cp.async kernel "
        "(autotuned on first use: slow) next to it; cp.async: the cp.async kernel alone",
    )
    p.add_argument(
        "--sweep",
        default="",
        help="sizes (M = N = K, bf16) at which to time the Hopper kernel's configurations "
        "directly, before the table (e.g. 8192); empty: no sweep",
    )
    p.add_argument("--warmup-ms", type=float, default=25.0)
    p.add_argument("--rep-ms", type=float, default=100.0)
    args = p.parse_args(argv)
    if args.preset is None and args.sizes is args.dtypes is args.extras is None:
        args.preset = "large"
    if args.preset:
        args.sizes, args.dtypes, args.extras = PRESETS[args.preset]
    else:
        args.sizes = args.sizes or PRESETS["all"][0]
        args.dtypes = args.dtypes or PRESETS["all"][1]
        args.extras = args.extras or PRESETS["all"][2]
    args.sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    args.sweep = [int(s) for s in args.sweep.split(",") if s.strip()]
    args.dtypes = [d.strip() for d in args.dtypes.split(",") if d.strip()]
    bad = [d for d in args.dtypes if d not in ("fp16", "bf16")]
    if bad or not args.dtypes:
        p.error(f"--dtypes takes fp16 and bf16, got {args.dtypes}")
    if not args.sizes or min(args.sizes) < 1:
        p.error("--sizes needs positive integers")
    args.extras = [e for e in args.extras.split(",") if e.strip() and e != "none"]
    if set(args.extras) - set(EXTRAS):
        p.error(f"--extras takes {', '.join(EXTRAS)} or none, got {args.extras}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    status = rb.start(args)
    if status is not None:
        return status
    table = RatioTable(
        f"Matrix multiply ({UNIT}, 2·M·N·K / time)",
        UNIT,
        PEERS,
        ratio_to="cuBLAS",
        also_to=["Triton"],
    )
    table.notes.append(rb.method_note(args))
    table.notes.append(
        "reference: the f32 product (TF32 off) and the epilogue in f32; tolerance of the worst "
        f"row's ‖out − ref‖/‖ref‖: {TOL}; cuBLAS = torch.matmul (bias+GELU: the best torch "
        "spelling), TF32 case with torch.backends.cuda.matmul.allow_tf32 = True"
    )
    if not rb.triton_available():
        table.notes.append(f"Triton not usable ({rb.TRITON_ERROR}): its column is n/a")
    linalg, linalg_error = load_linalg()
    if linalg is not None:
        linalg.HOPPER = args.path != "cp.async"
        linalg.TMA_STORE = args.epilogue == "tma-store"
    if linalg is None:
        table.notes.append(f"ours: unavailable ({linalg_error})")
    failures = 0
    if args.sweep and linalg is not None:
        try:
            hopper_sweep(args)
        except Exception as exc:
            report_failure("Hopper sweep", exc)
    with rb.on_torch_stream():
        if "fp8" in args.extras and linalg is not None:
            try:
                failures += bench_fp8(args, table)
            except Exception as exc:
                failures += 1
                table.notes.append(f"fp8: {report_failure('fp8', exc)}")
            rb.free()
        for case in cases(args):
            try:
                failures += bench_case(case, linalg, linalg_error, args, table)
            except Exception as exc:
                failures += 1
                table.notes.append(f"{case.name}: {report_failure(case.name, exc)}")
            rb.free()
    if linalg is not None and getattr(linalg, "hopper_report", None):
        for line in linalg.hopper_report().splitlines():  # each product's config and why
            print(f"Hopper choice: {line}", flush=True)
            table.notes.append(f"Hopper choice: {line}")
    return rb.finish([table], args.out, failures)


if __name__ == "__main__":
    sys.exit(main())
