"""Cross-entropy, bf16 logits: teeny_tx.nn against Triton and torch, forward, backward, both.

Input: bf16 logits of each --shapes ROWSxVOCAB (default 8192x32000 and 4096x128256), random
normal; int64 targets uniform in [0, vocab), about 1 in --ignore-every (default 16) set to
ignore_index = -100.
Work: forward: loss = mean over non-ignored rows of logsumexp(row) − row[target] (and each
row's logsumexp, kept for the backward); backward: dlogits = (softmax(row) − onehot(target)) /
n_valid on non-ignored rows, 0 on ignored ones, from the logits and the forward's logsumexp.
Ours: ``loss, lse = tnn.cross_entropy(logits, targets)``, ``tnn.cross_entropy_backward(logits,
targets, lse)``. Triton: the same split in Triton kernels (a row program with an online
logsumexp over the row, lane-wise, then a one-program mean; a count of the kept rows and a
program per (row, chunk) of the gradient), each with a few BLOCK/num_warps configs chosen by
triton.autotune. torch: ``F.cross_entropy`` (forward), ``torch.autograd.grad`` of its loss
(backward, the forward run once outside the timed region; both in one call for the third
table).
Output: three tables (forward, backward, forward + backward); every implementation checked
first against float64 on the GPU (outputs poisoned), then timed as bench_softmax.py times (L2
flushed before each call, CUDA events, median). Bytes, the same for every implementation:
forward rows·vocab·2 + rows·8 (logits, targets read) + rows·4 (lse written); backward
2·rows·vocab·2 + rows·12 (logits, targets, lse read, dlogits written); forward + backward
3·rows·vocab·2 + rows·8 (the logits read twice: nothing keeps the probabilities). --out
writes the tables.

Run from the repository root: python3 bench/bench_cross_entropy.py --out /tmp/cross_entropy.md
"""

import sys

import bench_softmax as rb
from bench_softmax import (
    TOL,
    UNIT,
    Impl,
    RatioTable,
    check_rows,
    check_value,
    fresh_outputs,
    tl,
    triton_jit,
)
from common import base_parser, report_failure

IGNORE = -100
PEERS = ["Triton", "torch"]
PROB_TOL = 6e-2  # the softmax part of dlogits: torch's bf16 log-probabilities give ~2.5% per row


# Forward, one program per row: a lane-wise online logsumexp over the row in BLOCK chunks (each
# lane keeps its running max m and sum s of exp(x - m)), combined once; then the target's
# logit and the row's loss. No docstrings in Triton kernels: Triton compiles the body.
@triton_jit
def triton_ce_fwd_kernel(
    loss_ptr, lse_ptr, logits_ptr, targets_ptr, stride, V, ignore, BLOCK: tl.constexpr
):
    row = tl.program_id(0).to(tl.int64)
    base = logits_ptr + row * stride
    m = tl.full([BLOCK], -1.0e30, tl.float32)  # finite: exp(m - new_m) is never inf - inf
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, V, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(base + cols, mask=cols < V, other=float("-inf")).to(tl.float32)
        new_m = tl.maximum(m, x)
        s = s * tl.exp(m - new_m) + tl.exp(x - new_m)
        m = new_m
    mx = tl.max(m, axis=0)
    lse = mx + tl.log(tl.sum(s * tl.exp(m - mx), axis=0))
    t = tl.load(targets_ptr + row)
    valid = t != ignore
    picked = tl.load(base + tl.where(valid, t, 0)).to(tl.float32)
    tl.store(lse_ptr + row, lse)
    tl.store(loss_ptr + row, tl.where(valid, lse - picked, 0.0))


# The mean over kept rows, one program (and the count, which the backward recomputes).
@triton_jit
def triton_ce_mean_kernel(mean_ptr, loss_ptr, targets_ptr, M, ignore, BLOCK: tl.constexpr):
    total = tl.zeros([BLOCK], tl.float32)
    kept = tl.zeros([BLOCK], tl.int32)
    for start in range(0, M, BLOCK):
        rows = start + tl.arange(0, BLOCK)
        total += tl.load(loss_ptr + rows, mask=rows < M, other=0.0)
        t = tl.load(targets_ptr + rows, mask=rows < M, other=ignore)
        kept += (t != ignore).to(tl.int32)
    tl.store(mean_ptr, tl.sum(total, axis=0) / tl.sum(kept, axis=0).to(tl.float32))


@triton_jit
def triton_ce_count_kernel(count_ptr, targets_ptr, M, ignore, BLOCK: tl.constexpr):
    kept = tl.zeros([BLOCK], tl.int32)
    for start in range(0, M, BLOCK):
        rows = start + tl.arange(0, BLOCK)
        t = tl.load(targets_ptr + rows, mask=rows < M, other=ignore)
        kept += (t != ignore).to(tl.int32)
    tl.store(count_ptr, tl.sum(kept, axis=0).to(tl.float32))


# Backward, one program per (row, BLOCK columns): p = exp(x - lse), dlogits = (p - onehot) *
# grad / count, zero on ignored rows.
@triton_jit
def triton_ce_bwd_kernel(
    d_ptr, logits_ptr, targets_ptr, lse_ptr, count_ptr, stride, V, ignore, grad, BLOCK: tl.constexpr
):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < V
    t = tl.load(targets_ptr + row)
    x = tl.load(logits_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    p = tl.exp(x - tl.load(lse_ptr + row))
    scale = grad / tl.load(count_ptr)
    g = tl.where(t != ignore, (p - (cols == t).to(tl.float32)) * scale, 0.0)
    tl.store(d_ptr + row * stride + cols, g.to(d_ptr.dtype.element_ty), mask=mask)


MEAN_BLOCK = 1024
FWD_CONFIGS = [(4096, 8), (4096, 16), (8192, 16), (2048, 8)]  # (BLOCK, num_warps)
BWD_CONFIGS = [(4096, 8), (4096, 16), (8192, 16), (2048, 4)]


def _tuned(kernel, configs, key):
    """triton.autotune of ``kernel`` over (BLOCK, num_warps) ``configs``, keyed by ``key``."""
    import triton

    return triton.autotune([triton.Config({"BLOCK": b}, num_warps=w) for b, w in configs], key=key)(
        kernel
    )


def parse_args(argv: list[str] | None = None):
    p = base_parser(__doc__.splitlines()[0])
    p.add_argument(
        "--shapes",
        default="8192x32000,4096x128256",
        help="comma-separated ROWSxVOCAB (default 8192x32000,4096x128256)",
    )
    p.add_argument("--ignore-every", type=int, default=16, help="about 1 row in N is ignored")
    p.add_argument("--warmup-ms", type=float, default=25.0)
    p.add_argument("--rep-ms", type=float, default=100.0)
    args = p.parse_args(argv)
    try:
        args.shapes = [tuple(int(n) for n in s.lower().split("x")) for s in args.shapes.split(",")]
    except ValueError:
        p.error("--shapes takes ROWSxVOCAB[,ROWSxVOCAB...]")
    if any(len(s) != 2 or min(s) < 1 for s in args.shapes) or args.ignore_every < 1:
        p.error("--shapes needs positive ROWSxVOCAB pairs, --ignore-every a positive count")
    return args


class Reference:
    """float64 loss, lse and dlogits rows of one case, computed chunk by chunk on the GPU."""

    def __init__(self, logits, targets):
        import torch

        rows, vocab = logits.shape
        self.logits, self.targets = logits, targets
        self.valid = targets != IGNORE
        self.n_valid = int(self.valid.sum())
        self.safe = torch.where(self.valid, targets, 0)  # a column to gather on ignored rows
        self.lse = torch.empty(rows, dtype=torch.float64, device=logits.device)
        step = max(1, 2**24 // vocab)
        for lo in range(0, rows, step):
            hi = min(rows, lo + step)
            self.lse[lo:hi] = torch.logsumexp(logits[lo:hi].double(), dim=1)
        picked = logits.gather(1, self.safe[:, None])[:, 0].double()
        self.loss = ((self.lse - picked) * self.valid).sum() / self.n_valid

    def onehot(self, lo: int, hi: int, like):
        import torch

        hot = torch.zeros_like(like)
        hot.scatter_(1, self.safe[lo:hi, None], 1.0)
        return hot

    def dlogits(self, lo: int, hi: int):
        p = (self.logits[lo:hi].double() - self.lse[lo:hi, None]).exp()
        grad = (p - self.onehot(lo, hi, p)) / self.n_valid
        return grad * self.valid[lo:hi, None]

    def without_target(self, chunk, lo: int, hi: int):
        """The softmax part of a dlogits chunk: each row's target column set to zero."""
        return chunk * (1 - self.onehot(lo, hi, chunk))


def check_loss(who: str, loss, lse, ref: Reference) -> float:
    err = check_value(f"{who} loss", loss, ref.loss, TOL["bf16"])
    if lse is not None:  # f32 logsumexp of bf16 logits: close to float64's
        err = max(err, check_value(f"{who} lse", lse, ref.lse, 1e-5))
    return err


def check_grad(who: str, dlogits, ref: Reference) -> float:
    """Whole rows, and the rows without their target column (the softmax part)."""
    shape = tuple(ref.logits.shape)
    err = check_rows(f"{who} dlogits", dlogits, shape, ref.dlogits, TOL["bf16"])
    part = check_rows(
        f"{who} dlogits without target column",
        dlogits,
        shape,
        ref.dlogits,
        PROB_TOL,
        view=ref.without_target,
    )
    return max(err, part)


def bench_case(rows: int, vocab: int, tnn, nn_error, args, tables) -> int:
    """Check and time every implementation on one shape; add a row to each table."""
    import torch
    import torch.nn.functional as F

    fwd_table, bwd_table, both_table = tables
    case = f"{rows}×{vocab}"
    print(f"\n== cross-entropy bf16 {case}", flush=True)
    dev = rb.DEVICE
    logits = torch.randn(rows, vocab, device=dev, dtype=torch.bfloat16)
    targets = torch.randint(0, vocab, (rows,), device=dev, dtype=torch.int64)
    ignored = torch.randint(0, args.ignore_every, (rows,), device=dev) == 0
    ignored[0], ignored[-1] = rows > 1, False  # at least one ignored and one kept row
    targets[ignored] = IGNORE
    ref = Reference(logits, targets)
    print(f"{rows - ref.n_valid} of {rows} rows ignored", flush=True)
    grad_bytes = rows * vocab * 2
    fwd: list[Impl] = []
    bwd: list[Impl] = []
    both: list[Impl] = []
    failures = 0

    if tnn is not None:
        _, lse_ours = tnn.cross_entropy(logits, targets, ignore_index=IGNORE)

        def ours_fwd():
            return tnn.cross_entropy(logits, targets, ignore_index=IGNORE)

        def ours_bwd():
            return tnn.cross_entropy_backward(logits, targets, lse_ours, ignore_index=IGNORE)

        def ours_both():
            loss, lse = tnn.cross_entropy(logits, targets, ignore_index=IGNORE)
            return loss, tnn.cross_entropy_backward(logits, targets, lse, ignore_index=IGNORE)

        def ours_both_check():
            loss, grad = fresh_outputs(ours_both, [grad_bytes, rows * 4])
            return max(check_loss("ours", loss, None, ref), check_grad("ours", grad, ref))

        label = "tnn.cross_entropy"
        fwd.append(
            Impl(
                "ours",
                label,
                ours_fwd,
                lambda: check_loss("ours", *fresh_outputs(ours_fwd, [rows * 8]), ref),
            )
        )
        bwd.append(
            Impl(
                "ours",
                "tnn.cross_entropy_backward",
                ours_bwd,
                lambda: check_grad("ours", fresh_outputs(ours_bwd, [grad_bytes]), ref),
            )
        )
        both.append(Impl("ours", "both, one call", ours_both, ours_both_check))
    else:
        failures += rb.ours_missing(case, nn_error)

    if rb.triton_available():
        fwd_k = _tuned(triton_ce_fwd_kernel, FWD_CONFIGS, ["V"])
        bwd_k = _tuned(triton_ce_bwd_kernel, BWD_CONFIGS, ["V"])
        losses = torch.empty(rows, device=dev, dtype=torch.float32)
        lse_tri = torch.empty(rows, device=dev, dtype=torch.float32)
        mean_tri = torch.empty((), device=dev, dtype=torch.float32)
        count_tri = torch.empty(1, device=dev, dtype=torch.float32)
        d_tri = torch.empty_like(logits)
        stride = logits.stride(0)

        def tri_fwd():
            fwd_k[(rows,)](losses, lse_tri, logits, targets, stride, vocab, IGNORE)
            triton_ce_mean_kernel[(1,)](
                mean_tri, losses, targets, rows, IGNORE, BLOCK=MEAN_BLOCK, num_warps=4
            )
            return mean_tri, lse_tri

        def tri_bwd():
            triton_ce_count_kernel[(1,)](
                count_tri, targets, rows, IGNORE, BLOCK=MEAN_BLOCK, num_warps=4
            )

            def grid(meta):
                return (rows, -(-vocab // meta["BLOCK"]))

            bwd_k[grid](d_tri, logits, targets, lse_tri, count_tri, stride, vocab, IGNORE, 1.0)
            return d_tri

        def tri_both():
            tri_fwd()
            return mean_tri, tri_bwd()

        def tri_fwd_check():
            rb.poison(losses), rb.poison(lse_tri), rb.poison(mean_tri)
            tri_fwd()
            rb.sync()
            return check_loss("Triton", mean_tri, lse_tri, ref)

        def tri_bwd_check():
            tri_fwd()  # lse
            rb.poison(d_tri)
            tri_bwd()
            rb.sync()
            return check_grad("Triton", d_tri, ref)

        def tri_both_check():
            rb.poison(d_tri), rb.poison(mean_tri)
            tri_both()
            rb.sync()
            return max(check_loss("Triton", mean_tri, None, ref), check_grad("Triton", d_tri, ref))

        fwd.append(Impl("Triton", "row kernel + mean kernel", tri_fwd, tri_fwd_check))
        bwd.append(Impl("Triton", "count kernel + (row, chunk) kernel", tri_bwd, tri_bwd_check))
        both.append(Impl("Triton", "forward then backward", tri_both, tri_both_check))

    leaf = logits.detach().clone().requires_grad_(True)

    def torch_fwd():
        with torch.no_grad():
            return F.cross_entropy(logits, targets, ignore_index=IGNORE)

    loss_graph = F.cross_entropy(leaf, targets, ignore_index=IGNORE)

    def torch_bwd():
        (grad,) = torch.autograd.grad(loss_graph, (leaf,), retain_graph=True)
        return grad

    def torch_both():
        loss = F.cross_entropy(leaf, targets, ignore_index=IGNORE)
        (grad,) = torch.autograd.grad(loss, (leaf,))
        return loss, grad

    fwd.append(
        Impl(
            "torch",
            "F.cross_entropy",
            torch_fwd,
            lambda: check_loss("torch", fresh_outputs(torch_fwd, [4]), None, ref),
        )
    )
    bwd.append(
        Impl(
            "torch",
            "autograd.grad (forward outside)",
            torch_bwd,
            lambda: check_grad("torch", fresh_outputs(torch_bwd, [grad_bytes]), ref),
        )
    )
    both.append(
        Impl(
            "torch",
            "F.cross_entropy + autograd.grad",
            torch_both,
            lambda: max(
                check_loss("torch", fresh_outputs(torch_both, [grad_bytes])[0], None, ref),
                check_grad("torch", torch_both()[1], ref),
            ),
        )
    )

    sizes = (
        rows * vocab * 2 + rows * 12,
        2 * rows * vocab * 2 + rows * 12,
        3 * rows * vocab * 2 + rows * 8,
    )
    for table, impls, nbytes in zip(tables, (fwd, bwd, both), sizes, strict=True):
        rates, bad = rb.measure(case, impls, nbytes, args, table)
        failures += bad
        table.add(case, rates.get("ours"), {p: rates.get(p) for p in PEERS})
    return failures


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    status = rb.start(args)
    if status is not None:
        return status
    titles = (
        "Cross-entropy forward, bf16 logits ({u}, bytes = logits + targets read, lse written)",
        "Cross-entropy backward, bf16 logits ({u}, bytes = logits + targets + lse read, "
        "dlogits written)",
        "Cross-entropy forward + backward, bf16 logits ({u}, bytes = logits read twice, "
        "dlogits written)",
    )
    tables = [
        RatioTable(t.format(u=UNIT), UNIT, PEERS, digits=3, also_to=["torch"]) for t in titles
    ]
    notes = [
        rb.method_note(args),
        f"targets int64, about 1 row in {args.ignore_every} = ignore_index {IGNORE}, loss = mean "
        f"over the others; ours: tnn.cross_entropy, tnn.cross_entropy_backward(logits, targets, "
        f"lse); Triton: a row kernel (lane-wise online logsumexp) + a one-program mean, then a "
        f"count kernel + a (row, chunk) gradient kernel, BLOCK and num_warps by triton.autotune "
        f"(forward {FWD_CONFIGS}, backward {BWD_CONFIGS}); torch: F.cross_entropy and "
        f"torch.autograd.grad (the backward table: the graph built once outside the timed call)",
        f"checks: loss and whole dlogits rows within {TOL['bf16']:g} (‖out − ref‖/‖ref‖), the "
        f"rows without their target column within {PROB_TOL:g}, ignored rows exactly 0",
        "Liger-style kernels fuse the gradient into the forward (one read of the logits, the "
        "gradient written over them): a different contract from torch's (and ours), which keep "
        "the logits and compute the gradient when the backward runs",
    ]
    for t in tables:
        t.notes.extend(notes)
    if not rb.triton_available():
        tables[0].notes.append(f"Triton not usable ({rb.TRITON_ERROR}): its column is n/a")
    tnn, nn_error = rb.load_nn()
    if tnn is None:
        tables[0].notes.append(f"ours: unavailable ({nn_error})")
    failures = 0
    with rb.on_torch_stream():
        for rows, vocab in args.shapes:
            try:
                failures += bench_case(rows, vocab, tnn, nn_error, args, tables)
            except Exception as exc:
                failures += 1
                case = f"{rows}×{vocab}"
                tables[0].notes.append(f"{case}: {report_failure(case, exc)}")
            rb.free()
    return rb.finish(tables, args.out, failures)


if __name__ == "__main__":
    sys.exit(main())
