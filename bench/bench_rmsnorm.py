"""RMS norm forward and backward, fp16: teeny_tx.nn against torch's formula and F.rms_norm.

Input: fp16 x of --rows × each of --cols (default 8192 × 1024, 4096, 8192), random normal;
weight 1 + 0.5·N(0, 1), dy random normal; eps 1e-6.
Forward: y = x · rstd · w, rstd = 1 / sqrt(mean(x²) + eps) (fp32, one per row, saved).
Backward: dx = rstd · (w·dy − x̂ · mean(x̂ · w·dy)), x̂ = x · rstd; dw = Σ_rows dy · x̂.
Output: every implementation checked first against float64 on the GPU (outputs poisoned), then
timed as bench_softmax.py times (L2 flushed before each call, CUDA events, median). Bytes, the
same for every implementation: forward x + w read, y + rstd written (2·rows·cols·2 + cols·2 +
rows·4); backward dy + x + w + rstd read, dx + dw written (3·rows·cols·2 + 2·cols·2 + rows·4).
Peers: torch's reference formula ``x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w``
and ``torch.nn.functional.rms_norm`` where this torch has it; backward: ``torch.autograd.grad``
of each, the forward run outside the timed region. --out writes the tables.

Run from the repository root: python3 bench/bench_rmsnorm.py --out /tmp/rmsnorm.md
"""

import sys

import bench_softmax as rb
from bench_softmax import TOL, UNIT, Impl, RatioTable, check_rows, check_value, fresh_outputs
from common import report_failure

EPS = 1e-6
FORMULA, FUSED = "torch formula", "F.rms_norm"
PEERS = [FORMULA, FUSED]


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
    args = p.parse_args(argv)
    args.cols = rb.parse_cols(p, args.cols)
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


def bench_case(rows, cols, tnn, nn_error, args, fwd_table, bwd_table) -> int:
    """Check and time forward and backward on one shape; add the rows; return the failures."""
    import torch

    case = f"{rows}×{cols}"
    print(f"\n== RMS norm fp16 {case}", flush=True)
    dev, half, tol = rb.DEVICE, torch.float16, TOL["fp16"]
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
    else:
        failures += rb.ours_missing(case, nn_error)
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
        f"RMS norm forward fp16 ({UNIT}, bytes = x + w read, y + rstd written)",
        UNIT,
        PEERS,
        digits=3,
        also_to=[FORMULA],
    )
    bwd = RatioTable(
        f"RMS norm backward fp16 ({UNIT}, bytes = dy + x + w + rstd read, dx + dw written)",
        UNIT,
        PEERS,
        digits=3,
        also_to=[FORMULA],
    )
    fwd.notes.append(rb.method_note(args))
    fwd.notes.append(
        "bytes: 2·rows·cols·2 + cols·2 + rows·4 (rstd fp32), the same count for every "
        f"implementation; {FORMULA}: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w "
        f"in fp16 (several kernels); {FUSED}: torch.nn.functional.rms_norm(x, (cols,), w, eps)"
    )
    bwd.notes.append(rb.method_note(args))
    bwd.notes.append(
        "bytes: 3·rows·cols·2 + 2·cols·2 + rows·4, the same count for every implementation; "
        "peers: torch.autograd.grad(y, (x, w), dy, retain_graph=True), the forward run once "
        "outside the timed region"
    )
    if torch_fused() is None:
        for table in (fwd, bwd):
            table.notes.append(f"this torch has no {FUSED}: its column is n/a")
    tnn, nn_error = rb.load_nn()
    if tnn is None:
        for table in (fwd, bwd):
            table.notes.append(f"ours: unavailable ({nn_error})")
    failures = 0
    with rb.on_torch_stream():
        for cols in args.cols:
            try:
                failures += bench_case(args.rows, cols, tnn, nn_error, args, fwd, bwd)
            except Exception as exc:
                failures += 1
                fwd.notes.append(f"{args.rows}×{cols}: {report_failure(str(cols), exc)}")
            rb.free()
    return rb.finish([fwd] if args.skip_backward else [fwd, bwd], args.out, failures)


if __name__ == "__main__":
    sys.exit(main())
