"""Cross-entropy forward + backward, bf16 logits: teeny_tx.nn against torch, timed together.

Input: bf16 logits of --rows × --vocab (default 8192 × 32000), random normal; int64 targets
uniform in [0, vocab), about 1 in --ignore-every (default 16) set to ignore_index = -100.
Work: loss = mean over non-ignored rows of logsumexp(row) − row[target], and its gradient
dlogits = (softmax(row) − onehot(target)) / n_valid on non-ignored rows, 0 on ignored ones.
Ours: ``loss, lse = tnn.cross_entropy(logits, targets)`` then
``tnn.cross_entropy_backward(logits, targets, lse)``; torch: ``F.cross_entropy`` and
``torch.autograd.grad`` of its loss. Each pair is one timed call.
Output: every implementation checked first against float64 on the GPU (outputs poisoned), then
timed as bench_softmax.py times (L2 flushed before each call, CUDA events, median). Bytes, the
same for every implementation: logits + targets read once, loss + dlogits written once
(2·rows·vocab·2 + rows·8 + 4); a forward then backward that keeps no probabilities reads the
logits twice (3·rows·vocab·2), so 100% of copy bandwidth is out of its reach. --out writes the
table.

Run from the repository root: python3 bench/bench_cross_entropy.py --out /tmp/cross_entropy.md
"""

import sys

import bench_softmax as rb
from bench_softmax import TOL, UNIT, Impl, RatioTable, check_rows, check_value, fresh_outputs
from common import base_parser, report_failure

IGNORE = -100
PEERS = ["torch"]
PROB_TOL = 6e-2  # the softmax part of dlogits: torch's bf16 log-probabilities give ~2.5% per row


def parse_args(argv: list[str] | None = None):
    p = base_parser(__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=8192, help="rows (tokens), default 8192")
    p.add_argument("--vocab", type=int, default=32000, help="row length (classes), default 32000")
    p.add_argument("--ignore-every", type=int, default=16, help="about 1 row in N is ignored")
    p.add_argument("--warmup-ms", type=float, default=25.0)
    p.add_argument("--rep-ms", type=float, default=100.0)
    args = p.parse_args(argv)
    if min(args.rows, args.vocab, args.ignore_every) < 1:
        p.error("--rows, --vocab and --ignore-every must be positive")
    return args


class Reference:
    """float64 loss and dlogits rows of one case, computed chunk by chunk on the GPU."""

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


def check(who: str, outs, ref: Reference) -> float:
    """Check (loss, dlogits): the loss, whole rows, and the rows without their target column."""
    loss, dlogits = outs
    shape = tuple(ref.logits.shape)
    err = check_value(f"{who} loss", loss, ref.loss, TOL["bf16"])
    err = max(err, check_rows(f"{who} dlogits", dlogits, shape, ref.dlogits, TOL["bf16"]))
    part = check_rows(
        f"{who} dlogits without target column",
        dlogits,
        shape,
        ref.dlogits,
        PROB_TOL,
        view=ref.without_target,
    )
    return max(err, part)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    status = rb.start(args)
    if status is not None:
        return status
    import torch
    import torch.nn.functional as F

    rows, vocab = args.rows, args.vocab
    case = f"{rows}×{vocab}"
    table = RatioTable(
        f"Cross-entropy forward + backward, bf16 logits ({UNIT}, bytes = logits + targets read, "
        f"loss + dlogits written)",
        UNIT,
        PEERS,
        digits=3,
    )
    table.notes.append(rb.method_note(args))
    table.notes.append(
        f"bytes: 2·rows·vocab·2 + rows·8 + 4; targets int64, about 1 row in {args.ignore_every} "
        f"= ignore_index {IGNORE}, loss = mean over the others; ours: tnn.cross_entropy then "
        f"tnn.cross_entropy_backward; torch: F.cross_entropy(logits, targets, "
        f"ignore_index={IGNORE}) then torch.autograd.grad(loss, logits); each pair one timed call"
    )
    table.notes.append(
        f"checks: loss and whole dlogits rows within {TOL['bf16']:g} (‖out − ref‖/‖ref‖), "
        f"the rows without their target column within {PROB_TOL:g}, ignored rows exactly 0"
    )
    tnn, nn_error = rb.load_nn()
    if tnn is None:
        table.notes.append(f"ours: unavailable ({nn_error})")
    failures = 0
    print(f"\n== cross-entropy bf16 {case}", flush=True)
    try:
        with rb.on_torch_stream():
            dev = rb.DEVICE
            logits = torch.randn(rows, vocab, device=dev, dtype=torch.bfloat16)
            targets = torch.randint(0, vocab, (rows,), device=dev, dtype=torch.int64)
            ignored = torch.randint(0, args.ignore_every, (rows,), device=dev) == 0
            ignored[0], ignored[-1] = rows > 1, False  # at least one ignored and one kept row
            targets[ignored] = IGNORE
            ref = Reference(logits, targets)
            print(f"{rows - ref.n_valid} of {rows} rows ignored", flush=True)
            grad_bytes = rows * vocab * 2
            impls: list[Impl] = []
            if tnn is not None:

                def ours():
                    loss, lse = tnn.cross_entropy(logits, targets, ignore_index=IGNORE)
                    grad = tnn.cross_entropy_backward(logits, targets, lse, ignore_index=IGNORE)
                    return loss, grad

                impls.append(
                    Impl(
                        "ours",
                        "tnn.cross_entropy + tnn.cross_entropy_backward",
                        ours,
                        lambda: check("ours", fresh_outputs(ours, [grad_bytes, rows * 4]), ref),
                    )
                )
            else:
                failures += rb.ours_missing(case, nn_error)
            leaf = logits.detach().clone().requires_grad_(True)

            def peer():
                loss = F.cross_entropy(leaf, targets, ignore_index=IGNORE)
                (grad,) = torch.autograd.grad(loss, (leaf,))
                return loss, grad

            impls.append(
                Impl(
                    "torch",
                    "F.cross_entropy + autograd.grad",
                    peer,
                    lambda: check("torch", fresh_outputs(peer, [grad_bytes]), ref),
                )
            )
            nbytes = 2 * rows * vocab * 2 + rows * 8 + 4
            rates, bad = rb.measure(case, impls, nbytes, args, table)
            failures += bad
            table.add(case, rates.get("ours"), {p: rates.get(p) for p in PEERS})
    except Exception as exc:
        failures += 1
        table.notes.append(f"{case}: {report_failure(case, exc)}")
    return rb.finish([table], args.out, failures)


if __name__ == "__main__":
    sys.exit(main())
