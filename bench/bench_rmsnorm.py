"""RMS norm forward and backward, fp16 and bf16: teeny_tx.nn against Triton kernels, torch's
formula and F.rms_norm.

Input: x of each --dtypes (default fp16, bf16), --rows × each of --cols (default 8192 × 1024,
4096, 8192), random normal;
weight 1 + 0.5·N(0, 1), dy random normal; eps 1e-6.
Forward: y = x · rstd · w, rstd = 1 / sqrt(mean(x²) + eps) (fp32, one per row, saved).
Backward: dx = rstd · (w·dy − x̂ · mean(x̂ · w·dy)), x̂ = x · rstd; dw = Σ_rows dy · x̂.
Output: every implementation checked first against float64 on the GPU (outputs poisoned), then
timed as bench_softmax.py times (L2 flushed before each call, CUDA events, median). Bytes, the
same for every implementation: forward x + w read, y + rstd written (2·rows·cols·2 + cols·2 +
rows·4); backward dy + x + w + rstd read, dx + dw written (3·rows·cols·2 + 2·cols·2 + rows·4).
Peers: Triton kernels written here as bench_layernorm.py's (forward: one row per program;
backward: dx row by row with per-group partial dw in registers, then a kernel summing the
groups), torch's reference formula ``x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w``
and ``torch.nn.functional.rms_norm`` where this torch has it; backward: ``torch.autograd.grad``
of each, the forward run outside the timed region. --out writes the tables.

Run from the repository root: python3 bench/bench_rmsnorm.py --out /tmp/rmsnorm.md
"""

import os
import sys

import bench_softmax as rb
from bench_layernorm import BWD_BLOCK_G, BWD_BLOCK_N, bwd_warps, config_impls, fwd_warps
from bench_softmax import (
    TOL,
    UNIT,
    Impl,
    RatioTable,
    check_rows,
    check_value,
    fresh_outputs,
    next_power_of_2,
    sync,
    tl,
    triton_jit,
)
from common import cdiv, poison, report_failure

EPS = 1e-6
FORMULA, FUSED = "torch formula", "F.rms_norm"
PEERS = ["Triton", FORMULA, FUSED]


# Forward, one row per program, the whole row one tile (no docstrings: Triton compiles the body).
@triton_jit
def triton_rms_fwd_kernel(y_ptr, x_ptr, w_ptr, rstd_ptr, stride, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / N + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * stride + cols, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)
    tl.store(rstd_ptr + row, rstd)


# Backward: program g takes rows g, g + G, ...; dx row by row, its partial dw in registers,
# written once to row g of a [G, N] fp32 buffer; then the layer-norm bench's sum kernel shape.
@triton_jit
def triton_rms_bwd_dx_kernel(
    dx_ptr, dy_ptr, x_ptr, w_ptr, rstd_ptr, dw_part_ptr, stride, M, N, BLOCK: tl.constexpr
):
    g = tl.program_id(0)
    n_groups = tl.num_programs(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    dw = tl.zeros([BLOCK], dtype=tl.float32)
    for row in tl.range(g, M, n_groups):
        offs = row * stride + cols  # 32-bit: bench_case checks rows · cols < 2^31
        rstd = tl.load(rstd_ptr + row)
        xhat = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32) * rstd
        dy = tl.load(dy_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        wdy = w * dy
        c1 = tl.sum(xhat * wdy, axis=0) / N
        tl.store(dx_ptr + offs, ((wdy - xhat * c1) * rstd).to(dx_ptr.dtype.element_ty), mask=mask)
        dw += dy * xhat
    tl.store(dw_part_ptr + g * N + cols, dw, mask=mask)


@triton_jit
def triton_rms_bwd_dw_kernel(
    dw_ptr, dw_part_ptr, G, N, BLOCK_G: tl.constexpr, BLOCK_N: tl.constexpr
):
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    dw = tl.zeros([BLOCK_G, BLOCK_N], dtype=tl.float32)
    for i in range(0, G, BLOCK_G):
        rows = i + tl.arange(0, BLOCK_G)
        mask = (rows[:, None] < G) & (cols[None, :] < N)
        dw += tl.load(dw_part_ptr + rows[:, None] * N + cols[None, :], mask=mask, other=0.0)
    tl.store(dw_ptr + cols, tl.sum(dw, axis=0).to(dw_ptr.dtype.element_ty), mask=cols < N)


def torch_formula(x, w):
    import torch

    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * w


def torch_fused():
    """torch.nn.functional.rms_norm as f(x, w), or None where this torch lacks it."""
    import torch.nn.functional as F

    fn = getattr(F, "rms_norm", None)
    if fn is None:
        return None
    return lambda x, w: fn(x, (x.shape[-1],), w, EPS)


def parse_args(argv: list[str] | None = None):
    p = rb.reduction_parser(__doc__.splitlines()[0], 8192, "1024,4096,8192")
    p.add_argument("--skip-backward", action="store_true", help="time the forward only")
    p.add_argument(
        "--configs",
        action="store_true",
        default=os.environ.get("TEENY_TX_BENCH_CONFIGS", "") not in ("", "0"),
        help="also time every config the prune keeps, first dtype only, into the log "
        "($TEENY_TX_BENCH_CONFIGS=1)",
    )
    p.add_argument("--dtypes", default="fp16,bf16", help="comma-separated: fp16, bf16")
    args = p.parse_args(argv)
    args.cols = rb.parse_cols(p, args.cols)
    args.dtypes = [d.strip() for d in args.dtypes.split(",") if d.strip()]
    if not args.dtypes or set(args.dtypes) - {"fp16", "bf16"}:
        p.error("--dtypes takes fp16 and/or bf16")
    return args


class Reference:
    """float64 rstd and dw of one case, computed chunk by chunk; y and dx rows on demand."""

    def __init__(self, x, w, dy):
        import torch

        self.x, self.w64, self.dy = x, w.double(), dy
        rows, cols = x.shape
        self.rstd = torch.empty(rows, dtype=torch.float64, device=x.device)
        self.dw = torch.zeros(cols, dtype=torch.float64, device=x.device)
        step = max(1, 2**24 // cols)
        for lo in range(0, rows, step):
            hi = min(rows, lo + step)
            self.rstd[lo:hi] = (x[lo:hi].double().pow(2).mean(dim=1) + EPS).rsqrt()
            self.dw += (dy[lo:hi].double() * self.xhat(lo, hi)).sum(dim=0)

    def xhat(self, lo: int, hi: int):
        return self.x[lo:hi].double() * self.rstd[lo:hi, None]

    def y(self, lo: int, hi: int):
        return self.xhat(lo, hi) * self.w64

    def dx(self, lo: int, hi: int):
        xhat = self.xhat(lo, hi)
        wdy = self.dy[lo:hi].double() * self.w64
        return (wdy - xhat * (xhat * wdy).mean(dim=1, keepdim=True)) * self.rstd[lo:hi, None]


def bench_case(rows, cols, dtype, tnn, nn_error, args, fwd_table, bwd_table) -> int:
    """Check and time forward and backward on one shape and dtype; add the rows; return the
    failures."""
    import torch

    case = f"{dtype} {rows}×{cols}"
    print(f"\n== RMS norm {case}", flush=True)
    half = {"fp16": torch.float16, "bf16": torch.bfloat16}[dtype]
    dev, tol = rb.DEVICE, TOL[dtype]
    if rows * cols >= 2**31:
        raise ValueError(f"{case}: the Triton backward's 32-bit offsets need rows · cols < 2^31")
    x = torch.randn(rows, cols, device=dev, dtype=half)
    w = (1 + 0.5 * torch.randn(cols, device=dev)).to(half)
    dy = torch.randn(rows, cols, device=dev, dtype=half)
    ref = Reference(x, w, dy)
    shape = (rows, cols)
    mn, nk = rows * cols * 2, cols * 2
    peers = {FORMULA: torch_formula}
    fused = torch_fused()
    if fused is not None:
        peers[FUSED] = fused
    failures = 0

    # ---- forward
    impls: list[Impl] = []
    ours_rstd = {}
    if tnn is not None:

        def ours_fwd():
            return tnn.rms_norm(x, w, eps=EPS)

        def ours_fwd_check():
            y, rstd = fresh_outputs(ours_fwd, [mn, rows * 4])
            err = check_rows("ours y", y, shape, ref.y, tol)
            ours_rstd["rstd"] = rstd
            return max(err, check_value("ours rstd", rstd, ref.rstd, 1e-4))

        impls.append(Impl("ours", "teeny_tx.nn.rms_norm", ours_fwd, ours_fwd_check))

        def cfg_fwd_check(run):
            y, rstd = fresh_outputs(run, [mn, rows * 4])
            err = check_rows("cfg y", y, shape, ref.y, tol)
            return max(err, check_value("cfg rstd", rstd, ref.rstd, 1e-4))

        impls += config_impls(
            args,
            "rmsnorm.c",
            "rms_norm_fwd",
            x,
            cols,
            lambda c: lambda: tnn.rms_norm(x, w, eps=EPS, config=c),
            cfg_fwd_check,
        )
    else:
        failures += rb.ours_missing(case, nn_error)
    block = next_power_of_2(cols)
    if rb.triton_available():
        y_t = torch.empty_like(x)
        rstd_t = torch.empty(rows, device=dev, dtype=torch.float32)
        warps = fwd_warps(block)

        def tri_fwd():
            triton_rms_fwd_kernel[(rows,)](
                y_t, x, w, rstd_t, x.stride(0), cols, EPS, BLOCK=block, num_warps=warps
            )

        def tri_fwd_check():
            for t in (y_t, rstd_t):
                poison(t)
            tri_fwd()
            sync()
            err = check_rows("Triton y", y_t, shape, ref.y, tol)
            return max(err, check_value("Triton rstd", rstd_t, ref.rstd, 1e-4))

        label = f"row kernel BLOCK={block}, num_warps={warps}"
        impls.append(Impl("Triton", label, tri_fwd, tri_fwd_check))
    for name, fn in peers.items():

        def run(fn=fn):
            return fn(x, w)

        def check(run=run, name=name):
            return check_rows(f"{name} y", fresh_outputs(run, [mn]), shape, ref.y, tol)

        impls.append(Impl(name, name, run, check))
    rates, bad = rb.measure(f"fwd {case}", impls, 2 * mn + nk + rows * 4, args, fwd_table)
    failures += bad
    fwd_table.add(case, rates.get("ours"), {p: rates.get(p) for p in PEERS})
    if args.skip_backward:
        return failures

    # ---- backward
    def check_bwd(who, outs):
        dx, dw = outs
        err = check_rows(f"{who} dx", dx, shape, ref.dx, tol)
        return max(err, check_value(f"{who} dw", dw, ref.dw, tol))

    impls = []
    if tnn is not None:
        rstd_o = ours_rstd.get("rstd", ref.rstd.float())  # the reference's where ours' failed

        def ours_bwd():
            return tnn.rms_norm_backward(dy, x, w, rstd_o)

        impls.append(
            Impl(
                "ours",
                "teeny_tx.nn.rms_norm_backward",
                ours_bwd,
                lambda: check_bwd("ours", fresh_outputs(ours_bwd, [mn, nk])),
            )
        )
        impls += config_impls(
            args,
            "rmsnorm.c",
            "rms_norm_bwd_dx",
            x,
            cols,
            lambda c: lambda: tnn.rms_norm_backward(dy, x, w, rstd_o, config=c),
            lambda run: check_bwd("cfg", fresh_outputs(run, [mn, nk])),
        )
    if rb.triton_available():
        rstd32 = ref.rstd.float()
        groups = min(rows, rb.sm_count() * max(1, 16 // bwd_warps(block)))
        dx_t, dw_t = torch.empty_like(x), torch.empty_like(w)
        dw_part = torch.empty(groups, cols, device=dev, dtype=torch.float32)
        warps = bwd_warps(block)
        grid2 = (cdiv(cols, BWD_BLOCK_N),)

        def tri_bwd():
            triton_rms_bwd_dx_kernel[(groups,)](
                dx_t,
                dy,
                x,
                w,
                rstd32,
                dw_part,
                x.stride(0),
                rows,
                cols,
                BLOCK=block,
                num_warps=warps,
            )
            triton_rms_bwd_dw_kernel[grid2](
                dw_t, dw_part, groups, cols, BLOCK_G=BWD_BLOCK_G, BLOCK_N=BWD_BLOCK_N
            )

        def tri_bwd_check():
            for t in (dx_t, dw_t, dw_part):
                poison(t)
            tri_bwd()
            sync()
            return check_bwd("Triton", (dx_t, dw_t))

        label = f"dx + partial dw in {groups} groups, num_warps={warps}; then the sum"
        impls.append(Impl("Triton", label, tri_bwd, tri_bwd_check))
    for name, fn in peers.items():
        xg = x.detach().clone().requires_grad_(True)
        wg = w.detach().clone().requires_grad_(True)
        y_graph = fn(xg, wg)  # the forward stays out of the timing

        def run(y_graph=y_graph, xg=xg, wg=wg):
            return torch.autograd.grad(y_graph, (xg, wg), dy, retain_graph=True)

        def check(run=run, name=name):
            return check_bwd(name, fresh_outputs(run, [mn, nk]))

        impls.append(Impl(name, f"torch.autograd.grad of {name}", run, check))
    rates, bad = rb.measure(f"bwd {case}", impls, 3 * mn + 2 * nk + rows * 4, args, bwd_table)
    failures += bad
    bwd_table.add(case, rates.get("ours"), {p: rates.get(p) for p in PEERS})
    return failures


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    status = rb.start(args)
    if status is not None:
        return status
    fwd = RatioTable(
        f"RMS norm forward fp16 / bf16 ({UNIT}, bytes = x + w read, y + rstd written)",
        UNIT,
        PEERS,
        digits=3,
        also_to=["Triton", FORMULA],
    )
    bwd = RatioTable(
        f"RMS norm backward fp16 / bf16 ({UNIT}, bytes = dy + x + w + rstd read, dx + dw written)",
        UNIT,
        PEERS,
        digits=3,
        also_to=["Triton", FORMULA],
    )
    fwd.notes.append(rb.method_note(args))
    fwd.notes.append(
        "bytes: 2·rows·cols·2 + cols·2 + rows·4 (rstd fp32), the same count for every "
        f"implementation; {FORMULA}: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w "
        f"in the input dtype (several kernels); {FUSED}: "
        "torch.nn.functional.rms_norm(x, (cols,), w, eps); Triton: one row per program, BLOCK = "
        "next_power_of_2(cols), num_warps = min(max(BLOCK // 256, 1), 8)"
    )
    bwd.notes.append(rb.method_note(args))
    bwd.notes.append(
        "bytes: 3·rows·cols·2 + 2·cols·2 + rows·4, the same count for every implementation; "
        "peers: torch.autograd.grad(y, (x, w), dy, retain_graph=True), the forward run once "
        "outside the timed region"
    )
    for table in (fwd, bwd):
        if not rb.triton_available():
            table.notes.append(f"Triton not usable ({rb.TRITON_ERROR}): its column is n/a")
    if torch_fused() is None:
        for table in (fwd, bwd):
            table.notes.append(f"this torch has no {FUSED}: its column is n/a")
    tnn, nn_error = rb.load_nn()
    if tnn is None:
        for table in (fwd, bwd):
            table.notes.append(f"ours: unavailable ({nn_error})")
    failures = 0
    with rb.on_torch_stream():
        for dtype in args.dtypes:
            for cols in args.cols:
                try:
                    failures += bench_case(args.rows, cols, dtype, tnn, nn_error, args, fwd, bwd)
                except Exception as exc:
                    failures += 1
                    what = f"{dtype} {args.rows}×{cols}"
                    fwd.notes.append(f"{what}: {report_failure(what, exc)}")
                rb.free()
    return rb.finish([fwd] if args.skip_backward else [fwd, bwd], args.out, failures)


if __name__ == "__main__":
    sys.exit(main())
