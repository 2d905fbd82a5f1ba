"""The op families of teeny_tx/library/families.py on the GPU: each pointwise activation and
each loss, forward and forward + backward, against torch eager and torch.compile.

Input: --n elements (default 2^26) of each --dtypes (default bf16), random normal (targets
uniform in [0, 1]), drawn by torch. Work: activations y = act(x) at torch's default
parameters, then dx = act'(x) dy; losses with reduction 'mean', then both gradients. Ours:
``teeny_tx.torch.<name>``; peers: ``torch.nn.functional.<name>`` (eager) and the same under
``torch.compile`` (inductor). The forward + backward call is ``torch.autograd.grad`` of a
fresh forward, for every implementation alike.
Output: every implementation checked first against torch eager in float64 on the GPU (TOL by
dtype), then timed with CUDA events (common.gpu_times_ms, median). Rate = bytes / time:
activations forward 2·n·size (x read, y written), forward + backward 5·n·size (x read twice, y
and dx written, dy read); losses forward 2·n·size, forward + backward 6·n·size (x and t read
twice, dx and dt written). The same run times ``torch.Tensor.copy_`` of n elements: "% of
copy" in the notes. --out writes the tables.

Run from the repository root: python3 bench/bench_families.py --out /tmp/families.md
"""

import sys

from common import Table, base_parser, check_close, emit_tables, gpu_times_ms, median, rate
from common import report_failure as failure

DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}
TOL = {"bf16": 3e-2, "fp16": 4e-3, "fp32": 2e-5}
PEERS = ["torch", "torch.compile"]
UNIT = "TB/s"


def main(argv: list[str]) -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2**26)
    parser.add_argument("--dtypes", default="bf16")
    parser.add_argument("--only", default="", help="comma-separated op names (default: all)")
    args = parser.parse_args(argv)

    import torch
    import torch.nn.functional as F

    import teeny_tx.torch as ttx
    from teeny_tx.library import families

    only = set(filter(None, args.only.split(",")))
    tables = []
    for dname in args.dtypes.split(","):
        dtype = getattr(torch, DTYPES[dname])
        size = torch.tensor([], dtype=dtype).element_size()
        g = torch.Generator(device="cuda").manual_seed(args.seed)
        x = torch.randn(args.n, device="cuda", dtype=dtype, generator=g) * 3
        t = torch.rand(args.n, device="cuda", dtype=dtype, generator=g)
        dy = torch.randn(args.n, device="cuda", dtype=dtype, generator=g)
        copy_ms = median(gpu_times_ms(lambda x=x: torch.empty_like(x).copy_(x)))
        copy_rate = rate(2 * args.n * size, copy_ms, UNIT)
        fwd = Table(f"families forward, {dname}, n={args.n}", UNIT, PEERS, digits=2)
        both = Table(f"families forward + backward, {dname}, n={args.n}", UNIT, PEERS, digits=2)
        for table in (fwd, both):
            table.notes.append(f"copy_ of the same n elements: {copy_rate:.2f} {UNIT}")

        defaults = [r for r in families.POINTWISE if None not in dict(r.params).values()]
        cases = [(r.name, 1, 2, 5) for r in defaults if not r.slope]  # (x alone: not PReLU)
        cases += [(r.name, 2, 2, 6) for r in families.LOSSES]
        for name, inputs, fwd_bytes, both_bytes in cases:
            if only and name not in only:
                continue
            ours_fn, ref_fn = getattr(ttx, name), getattr(F, name)
            impls = {"ours": ours_fn, "torch": ref_fn, "torch.compile": torch.compile(ref_fn)}
            operands = (x,) if inputs == 1 else (x, t)
            want = ref_fn(*[o.double() for o in operands])
            rates: dict[str, tuple[float | None, float | None]] = {}
            for label, fn in impls.items():
                try:
                    check_close(fn(*operands), want, TOL[dname], TOL[dname], f"{name} {label}")
                    ms = median(gpu_times_ms(lambda fn=fn, ops=operands: fn(*ops)))
                    leaves = [o.detach().requires_grad_() for o in operands]
                    grad = dy if inputs == 1 else torch.ones((), device="cuda", dtype=dtype)

                    def step(fn=fn, leaves=leaves, grad=grad):
                        return torch.autograd.grad(fn(*leaves), leaves, grad)

                    both_ms = median(gpu_times_ms(step))
                    rates[label] = (
                        rate(fwd_bytes * args.n * size, ms, UNIT),
                        rate(both_bytes * args.n * size, both_ms, UNIT),
                    )
                except Exception as exc:  # noqa: BLE001 - a failed implementation is a table note
                    fwd.notes.append(failure(f"{name} {label}", exc))
                    rates[label] = (None, None)
            for k, table in ((0, fwd), (1, both)):
                table.add(name, rates["ours"][k], {p: rates[p][k] for p in PEERS})
        tables += [fwd, both]
    emit_tables(tables, args.out)


if __name__ == "__main__":
    main(sys.argv[1:])
