"""Layer norm forward and backward, fp16 and bf16: teeny_tx.nn against Triton kernels and torch.

Input: x of each --dtypes (default fp16, bf16), --rows × each of --cols (default 8192 × 1024,
4096, 8192), random normal;
weight 1 + 0.5·N(0, 1) and bias 0.5·N(0, 1) (never ones and zeros), dy random normal; eps 1e-5.
Forward: y = (x − mean) · rstd · w + b, with mean and rstd (fp32, one per row) saved.
Backward: dx, dw = Σ_rows dy · x̂, db = Σ_rows dy, from dy, x, w, mean, rstd.
Output: every implementation checked first against float64 on the GPU (outputs poisoned), then
timed as bench_softmax.py times (L2 flushed before each call, CUDA events, median). Bytes, the
same for every implementation: forward x + w + b read, y + mean + rstd written
(2·rows·cols·2 + 2·cols·2 + rows·8); backward dy + x + w + mean + rstd read, dx + dw + db
written (3·rows·cols·2 + 3·cols·2 + rows·8). Peers: Triton kernels written here after the
layer-norm tutorial's algorithm, and torch: ``F.layer_norm`` forward; backward
``torch.autograd.grad`` of a forward run outside the timed region. --out writes the tables.

Run from the repository root: python3 bench/bench_layernorm.py --out /tmp/layernorm.md
"""

import os
import sys
from pathlib import Path

import bench_softmax as rb
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

EPS = 1e-5
PEERS = ["Triton", "torch"]


# Forward, one row per program: the whole row in one tile; mean, then the variance of the
# centred row, then normalise (the tutorial's algorithm, with BLOCK >= cols so its column loops
# run once). No docstrings in Triton kernels: Triton compiles the body.
@triton_jit
def triton_ln_fwd_kernel(
    y_ptr, x_ptr, w_ptr, b_ptr, mean_ptr, rstd_ptr, stride, N, eps, BLOCK: tl.constexpr
):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / N
    xc = tl.where(mask, x - mean, 0.0)
    var = tl.sum(xc * xc, axis=0) / N
    rstd = 1.0 / tl.sqrt(var + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    y = xc * rstd * w + b
    tl.store(y_ptr + row * stride + cols, y.to(y_ptr.dtype.element_ty), mask=mask)
    tl.store(mean_ptr + row, mean)
    tl.store(rstd_ptr + row, rstd)


# Backward, first pass: dx row by row, and this program's partial dw, db over its group of rows
# (rows g, g + G, g + 2G, ...), kept in registers and written once to row g of [G, N] fp32
# buffers: the tutorial's per-group partial sums, without its locks (one group per program).
@triton_jit
def triton_ln_bwd_dx_kernel(
    dx_ptr,
    dy_ptr,
    x_ptr,
    w_ptr,
    mean_ptr,
    rstd_ptr,
    dw_part_ptr,
    db_part_ptr,
    stride,
    M,
    N,
    BLOCK: tl.constexpr,
):
    g = tl.program_id(0)
    n_groups = tl.num_programs(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    dw = tl.zeros([BLOCK], dtype=tl.float32)
    db = tl.zeros([BLOCK], dtype=tl.float32)
    for row in tl.range(g, M, n_groups):
        offs = row * stride + cols  # 32-bit: bench_case checks rows · cols < 2^31
        x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(dy_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        mean = tl.load(mean_ptr + row)
        rstd = tl.load(rstd_ptr + row)
        xhat = tl.where(mask, (x - mean) * rstd, 0.0)
        wdy = w * dy
        c1 = tl.sum(xhat * wdy, axis=0) / N
        c2 = tl.sum(wdy, axis=0) / N
        dx = (wdy - (xhat * c1 + c2)) * rstd
        tl.store(dx_ptr + offs, dx.to(dx_ptr.dtype.element_ty), mask=mask)
        dw += dy * xhat
        db += dy
    tl.store(dw_part_ptr + g * N + cols, dw, mask=mask)
    tl.store(db_part_ptr + g * N + cols, db, mask=mask)


# Backward, second pass: sum the G partial rows, BLOCK_N columns per program.
@triton_jit
def triton_ln_bwd_dwdb_kernel(
    dw_ptr, db_ptr, dw_part_ptr, db_part_ptr, G, N, BLOCK_G: tl.constexpr, BLOCK_N: tl.constexpr
):
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    dw = tl.zeros([BLOCK_G, BLOCK_N], dtype=tl.float32)
    db = tl.zeros([BLOCK_G, BLOCK_N], dtype=tl.float32)
    for i in range(0, G, BLOCK_G):
        rows = i + tl.arange(0, BLOCK_G)
        mask = (rows[:, None] < G) & (cols[None, :] < N)
        offs = rows[:, None] * N + cols[None, :]
        dw += tl.load(dw_part_ptr + offs, mask=mask, other=0.0)
        db += tl.load(db_part_ptr + offs, mask=mask, other=0.0)
    tl.store(dw_ptr + cols, tl.sum(dw, axis=0).to(dw_ptr.dtype.element_ty), mask=cols < N)
    tl.store(db_ptr + cols, tl.sum(db, axis=0).to(db_ptr.dtype.element_ty), mask=cols < N)


def fwd_warps(block: int) -> int:
    """The tutorial's heuristic: one warp per 256 elements of the row, 1 to 8."""
    return min(max(block // 256, 1), 8)


def bwd_warps(block: int) -> int:
    """As the forward, up to 16: the backward keeps w, dw and db tiles live across its loop."""
    return min(max(block // 256, 1), 16)


BWD_BLOCK_G, BWD_BLOCK_N = 32, 32


def dtype_of(x) -> str:
    """fp16 or bf16: the --dtypes name of a torch tensor's dtype."""
    return "bf16" if "bfloat16" in str(x.dtype) else "fp16"


# --variants: kernels/layernorm.c's forward as it is and edited (the text replaced before it is
# compiled), each launched directly with the configs the prune keeps: which change wins.
_WB = (
    "    tile wv = expand_dims((acc_t)load(w + cols, col_mask, 0.0f), 0);\n"
    "    tile bv = expand_dims((acc_t)load(b + cols, col_mask, 0.0f), 0);\n"
)
FWD_VARIANTS = {
    "file": [],
    "early w, b": [  # the weights loaded with the row, before the reductions
        (_WB, ""),
        (
            "    tile mu = sum(v, 1) / n_cols;\n",
            _WB.replace("(acc_t)", "") + "    tile mu = sum(v, 1) / n_cols;\n",
        ),
        (
            "centred * expand_dims(r, 1) * wv + bv",
            "centred * expand_dims(r, 1) * (acc_t)wv + (acc_t)bv",
        ),
    ],
    "one-pass stats": [  # var = E[x^2] - mean^2: the two sums independent (a probe of the
        # reductions' latency; not exact enough to ship when |mean| >> std)
        (
            "    tile r = rsqrt(sum(centred * centred, 1) / n_cols + eps);\n",
            "    tile r = rsqrt(maximum(sum(v * v, 1) / n_cols - mu * mu, 0.0f) + eps);\n",
        ),
    ],
}


def variant_impls(args, x, w, b, outs, check) -> list:
    """With --variants: one Impl per (variant of FWD_VARIANTS, config the prune keeps)."""
    if not args.variants or dtype_of(x) != args.dtypes[0]:
        return []
    import teeny_tx
    from teeny_tx.library import nn

    rows, cols = x.shape
    block = nn.norm_block(cols)
    path = Path(__file__).resolve().parents[1] / "kernels" / "layernorm.c"
    base = path.read_text()
    kept = nn._norm_kept(
        nn._norm_kernel("layernorm.c", "layer_norm_fwd"), (block, rows, False, nn._vector(x))
    )
    impls = []
    for name, edits in FWD_VARIANTS.items():
        text = base
        for old, new in edits:
            if old not in text:
                raise ValueError(f"variant {name!r}: {old!r} is not in kernels/layernorm.c")
            text = text.replace(old, new, 1)
        kernel = teeny_tx.compile(text, name="kernels/layernorm.c").layer_norm_fwd
        for c in kernel.tune.configs:
            if c not in kept:
                continue
            grid = (cdiv(rows, c.kwargs["ROWS"]),)
            sizes = (rows, cols, x.stride(0), 1, cols, EPS)

            def run(kernel=kernel, grid=grid, c=c, sizes=sizes):
                kernel[grid](
                    *outs,
                    x,
                    w,
                    b,
                    *sizes,
                    num_warps=c.num_warps,
                    BLOCK=block,
                    EVEN=int(block == cols),
                    **c.kwargs,
                )

            label = f"{name}: ROWS={c.kwargs['ROWS']}, num_warps={c.num_warps}"
            impls.append(Impl(f"var {label}", label, run, lambda run=run: check(run)))
    return impls


def config_impls(args, file: str, kernel: str, x, cols: int, make_run, check) -> list:
    """With --configs: one Impl per config of ``kernel`` that teeny_tx.nn's prune keeps for
    ``x`` [rows, cols] (``make_run(config)`` calls the wrapper with ``config=``), to rank the
    tuner's choice among them; their rates go to the log only. ``check(run)`` checks one
    call."""
    if not args.configs or dtype_of(x) != args.dtypes[0]:  # the sweeps: the first dtype only
        return []
    rows = x.shape[0]
    from teeny_tx.library import nn

    k = nn._norm_kernel(file, kernel)
    backward = "dw_part" in [p.name for p in k.binder.runtime]
    kept = nn._norm_kept(k, (nn.norm_block(cols), rows, backward, nn._vector(x)))
    impls = []
    for c in k.tune.configs:
        if c in kept:
            run = make_run(c)
            label = (
                ", ".join(f"{k}={v}" for k, v in c.kwargs.items()) + f", num_warps={c.num_warps}"
            )
            impls.append(Impl(f"cfg {label}", label, run, lambda run=run: check(run)))
    return impls


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
    p.add_argument(
        "--variants",
        action="store_true",
        default=os.environ.get("TEENY_TX_BENCH_VARIANTS", "") not in ("", "0"),
        help="also time edited forward kernels (FWD_VARIANTS) per kept config, first dtype "
        "only, into the log ($TEENY_TX_BENCH_VARIANTS=1)",
    )
    args = p.parse_args(argv)
    args.cols = rb.parse_cols(p, args.cols)
    args.dtypes = [d.strip() for d in args.dtypes.split(",") if d.strip()]
    if not args.dtypes or set(args.dtypes) - {"fp16", "bf16"}:
        p.error("--dtypes takes fp16 and/or bf16")
    return args


class Reference:
    """float64 statistics and gradients of one case, computed chunk by chunk on the GPU."""

    def __init__(self, x, w, b, dy):
        import torch

        self.x, self.w64, self.b64, self.dy = x, w.double(), b.double(), dy
        rows, cols = x.shape
        self.mean = torch.empty(rows, dtype=torch.float64, device=x.device)
        self.rstd = torch.empty_like(self.mean)
        self.dw = torch.zeros(cols, dtype=torch.float64, device=x.device)
        self.db = torch.zeros_like(self.dw)
        step = max(1, 2**24 // cols)
        for lo in range(0, rows, step):
            hi = min(rows, lo + step)
            x64 = x[lo:hi].double()
            mean = x64.mean(dim=1)
            self.mean[lo:hi] = mean
            self.rstd[lo:hi] = ((x64 - mean[:, None]).pow(2).mean(dim=1) + EPS).rsqrt()
            dy64 = dy[lo:hi].double()
            self.dw += (dy64 * self.xhat(lo, hi)).sum(dim=0)
            self.db += dy64.sum(dim=0)

    def xhat(self, lo: int, hi: int):
        return (self.x[lo:hi].double() - self.mean[lo:hi, None]) * self.rstd[lo:hi, None]

    def y(self, lo: int, hi: int):
        return self.xhat(lo, hi) * self.w64 + self.b64

    def dx(self, lo: int, hi: int):
        xhat = self.xhat(lo, hi)
        wdy = self.dy[lo:hi].double() * self.w64
        c1 = (xhat * wdy).mean(dim=1, keepdim=True)
        c2 = wdy.mean(dim=1, keepdim=True)
        return (wdy - xhat * c1 - c2) * self.rstd[lo:hi, None]


def check_fwd(who: str, outs, ref: Reference, stats: bool) -> float:
    """Check (y, mean, rstd), or y alone where ``stats`` is False; the worst relative error."""
    tol = TOL[ref.dtype]
    y = outs[0] if stats else outs
    err = check_rows(f"{who} y", y, tuple(ref.x.shape), ref.y, tol)
    if stats:
        err = max(err, check_value(f"{who} mean", outs[1], ref.mean, 1e-4))
        err = max(err, check_value(f"{who} rstd", outs[2], ref.rstd, 1e-4))
    return err


def check_bwd(who: str, outs, ref: Reference) -> float:
    tol = TOL[ref.dtype]
    dx, dw, db = outs
    err = check_rows(f"{who} dx", dx, tuple(ref.x.shape), ref.dx, tol)
    err = max(err, check_value(f"{who} dw", dw, ref.dw, tol))
    return max(err, check_value(f"{who} db", db, ref.db, tol))


def bench_case(rows, cols, dtype, tnn, nn_error, args, fwd_table, bwd_table) -> int:
    """Check and time forward and backward on one shape and dtype; add the rows; return the
    failures."""
    import torch
    import torch.nn.functional as F

    case = f"{dtype} {rows}×{cols}"
    print(f"\n== layer norm {case}", flush=True)
    dev, half = rb.DEVICE, {"fp16": torch.float16, "bf16": torch.bfloat16}[dtype]
    x = torch.randn(rows, cols, device=dev, dtype=half)
    w = (1 + 0.5 * torch.randn(cols, device=dev)).to(half)
    b = (0.5 * torch.randn(cols, device=dev)).to(half)
    dy = torch.randn(rows, cols, device=dev, dtype=half)
    if rows * cols >= 2**31:
        raise ValueError(f"{case}: the Triton backward's 32-bit offsets need rows · cols < 2^31")
    ref = Reference(x, w, b, dy)
    ref.dtype = dtype
    mn, nk = rows * cols * 2, cols * 2
    block = next_power_of_2(cols)
    failures = 0

    # ---- forward
    fwd_bytes = 2 * mn + 2 * nk + rows * 8
    impls: list[Impl] = []
    ours_stats = {}
    if tnn is not None:

        def ours_fwd():
            return tnn.layer_norm(x, w, b, eps=EPS)

        def ours_fwd_check():
            outs = fresh_outputs(ours_fwd, [mn, rows * 4, rows * 4])
            err = check_fwd("ours", outs, ref, stats=True)
            ours_stats["mean"], ours_stats["rstd"] = outs[1], outs[2]
            return err

        impls.append(Impl("ours", "teeny_tx.nn.layer_norm", ours_fwd, ours_fwd_check))
        impls += config_impls(
            args,
            "layernorm.c",
            "layer_norm_fwd",
            x,
            cols,
            lambda c: lambda: tnn.layer_norm(x, w, b, eps=EPS, config=c),
            lambda run: check_fwd("cfg", fresh_outputs(run, [mn, rows * 4, rows * 4]), ref, True),
        )
    else:
        failures += rb.ours_missing(case, nn_error)

    y_v = torch.empty_like(x)
    mean_v = torch.empty(rows, device=dev, dtype=torch.float32)
    rstd_v = torch.empty_like(mean_v)

    def var_check(run):
        for t in (y_v, mean_v, rstd_v):
            poison(t)
        run()
        sync()
        return check_fwd("variant", (y_v, mean_v, rstd_v), ref, stats=True)

    impls += variant_impls(args, x, w, b, (y_v, mean_v, rstd_v), var_check)

    if rb.triton_available():
        y_t = torch.empty_like(x)
        mean_t = torch.empty(rows, device=dev, dtype=torch.float32)
        rstd_t = torch.empty_like(mean_t)
        warps = fwd_warps(block)

        def tri_fwd():
            triton_ln_fwd_kernel[(rows,)](
                y_t, x, w, b, mean_t, rstd_t, x.stride(0), cols, EPS, BLOCK=block, num_warps=warps
            )

        def tri_fwd_check():
            for t in (y_t, mean_t, rstd_t):
                poison(t)
            tri_fwd()
            sync()
            return check_fwd("Triton", (y_t, mean_t, rstd_t), ref, stats=True)

        label = f"row kernel BLOCK={block}, num_warps={warps}"
        impls.append(Impl("Triton", label, tri_fwd, tri_fwd_check))

    def torch_fwd():
        return F.layer_norm(x, (cols,), w, b, EPS)

    impls.append(
        Impl(
            "torch",
            "F.layer_norm",
            torch_fwd,
            lambda: check_fwd("torch", fresh_outputs(torch_fwd, [mn]), ref, stats=False),
        )
    )
    rates, bad = rb.measure(f"fwd {case}", impls, fwd_bytes, args, fwd_table)
    failures += bad
    fwd_table.add(case, rates.get("ours"), {p: rates.get(p) for p in PEERS})
    if args.skip_backward:
        return failures

    # ---- backward
    bwd_bytes = 3 * mn + 3 * nk + rows * 8
    impls = []
    # ours gets its own forward's statistics where that ran; the Triton peer the reference's
    mean32, rstd32 = ref.mean.float(), ref.rstd.float()
    if tnn is not None:
        mean_o = ours_stats.get("mean", mean32)
        rstd_o = ours_stats.get("rstd", rstd32)

        def ours_bwd():
            return tnn.layer_norm_backward(dy, x, w, mean_o, rstd_o)

        impls.append(
            Impl(
                "ours",
                "teeny_tx.nn.layer_norm_backward",
                ours_bwd,
                lambda: check_bwd("ours", fresh_outputs(ours_bwd, [mn, nk, nk]), ref),
            )
        )
        impls += config_impls(
            args,
            "layernorm.c",
            "layer_norm_bwd_dx",
            x,
            cols,
            lambda c: lambda: tnn.layer_norm_backward(dy, x, w, mean_o, rstd_o, config=c),
            lambda run: check_bwd("cfg", fresh_outputs(run, [mn, nk, nk]), ref),
        )

    if rb.triton_available():
        groups = min(rows, rb.sm_count() * max(1, 16 // bwd_warps(block)))
        dx_t = torch.empty_like(x)
        dw_t, db_t = torch.empty_like(w), torch.empty_like(b)
        dw_part = torch.empty(groups, cols, device=dev, dtype=torch.float32)
        db_part = torch.empty_like(dw_part)
        warps = bwd_warps(block)
        grid2 = (cdiv(cols, BWD_BLOCK_N),)

        def tri_bwd():
            triton_ln_bwd_dx_kernel[(groups,)](
                dx_t,
                dy,
                x,
                w,
                mean32,
                rstd32,
                dw_part,
                db_part,
                x.stride(0),
                rows,
                cols,
                BLOCK=block,
                num_warps=warps,
            )
            triton_ln_bwd_dwdb_kernel[grid2](
                dw_t, db_t, dw_part, db_part, groups, cols, BLOCK_G=BWD_BLOCK_G, BLOCK_N=BWD_BLOCK_N
            )

        def tri_bwd_check():
            for t in (dx_t, dw_t, db_t, dw_part, db_part):
                poison(t)
            tri_bwd()
            sync()
            return check_bwd("Triton", (dx_t, dw_t, db_t), ref)

        label = f"dx + partial dw/db in {groups} groups, num_warps={warps}; then the sum"
        impls.append(Impl("Triton", label, tri_bwd, tri_bwd_check))

    xg = x.detach().clone().requires_grad_(True)
    wg = w.detach().clone().requires_grad_(True)
    bg = b.detach().clone().requires_grad_(True)
    y_graph = F.layer_norm(xg, (cols,), wg, bg, EPS)  # the forward stays out of the timing

    def torch_bwd():
        return torch.autograd.grad(y_graph, (xg, wg, bg), dy, retain_graph=True)

    impls.append(
        Impl(
            "torch",
            "torch.autograd.grad of F.layer_norm",
            torch_bwd,
            lambda: check_bwd("torch", fresh_outputs(torch_bwd, [mn, nk, nk]), ref),
        )
    )
    rates, bad = rb.measure(f"bwd {case}", impls, bwd_bytes, args, bwd_table)
    failures += bad
    bwd_table.add(case, rates.get("ours"), {p: rates.get(p) for p in PEERS})
    return failures


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    status = rb.start(args)
    if status is not None:
        return status
    fwd = RatioTable(
        f"Layer norm forward fp16 / bf16 ({UNIT}, bytes = x + w + b read, y + mean + rstd written)",
        UNIT,
        PEERS,
        digits=3,
        also_to=["torch"],
    )
    bwd = RatioTable(
        f"Layer norm backward fp16 / bf16 ({UNIT}, bytes = dy + x + w + mean + rstd read, "
        f"dx + dw + db written)",
        UNIT,
        PEERS,
        digits=3,
        also_to=["torch"],
    )
    fwd.notes.append(rb.method_note(args))
    fwd.notes.append(
        "bytes: 2·rows·cols·2 + 2·cols·2 + rows·8 (mean, rstd fp32), the same count for every "
        "implementation; Triton: one row per program, BLOCK = next_power_of_2(cols), "
        "num_warps = min(max(BLOCK // 256, 1), 8); torch: F.layer_norm(x, (cols,), w, b, 1e-5)"
    )
    bwd.notes.append(rb.method_note(args))
    bwd.notes.append(
        "bytes: 3·rows·cols·2 + 3·cols·2 + rows·8, the same count for every implementation "
        "(the Triton peer's [G, cols] fp32 partial sums are extra traffic, not counted); "
        "Triton: G = SMs · 16 / num_warps programs each take every G-th row, write dx and keep "
        "partial dw, db in registers, then a second kernel sums the G partials; torch: "
        "torch.autograd.grad(y, (x, w, b), dy, retain_graph=True) with the forward run once "
        "outside the timed region"
    )
    for table in (fwd, bwd):
        if not rb.triton_available():
            table.notes.append(f"Triton not usable ({rb.TRITON_ERROR}): its column is n/a")
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
