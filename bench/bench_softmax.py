"""Row softmax, y = softmax(x, dim=-1), fp32: teeny_tx.nn against a Triton row kernel and torch.

Input: fp32 x of --rows × each of --cols (default 8192 × 1024, 4096, 16384), and a "looped" case
--looped-rows × --looped-cols (default 8192 × 262144, 8 GiB in and 8 GiB out: a row far longer
than one program's tile, so the kernel must loop over it), random normal, drawn by torch.
Output: every implementation checked first against a float64 softmax on the GPU, its output
poisoned with NaN before the run; then timed: CUDA events around each call, a 256 MB write
before each call (as triton.testing.do_bench does) so L2 holds nothing and host launch time
stays hidden, warm-up, median. Rate = bytes / time, bytes = x read once + y written once
(2·rows·cols·4). The same run times ``torch.Tensor.copy_`` of x (the same bytes) as the
ceiling: "% of copy". Peers: a Triton kernel of one row per program (not run on the looped case:
a 262144-wide row does not fit one program), and ``torch.softmax``. --out writes the table.

This file also holds the helpers the other reduction benchmarks import (bench_layernorm.py,
bench_rmsnorm.py, bench_cross_entropy.py): the L2-flushing timer, the row-wise check against a
float64 reference, the "ours: unavailable" handling, and a table with extra ratio columns.

Run from the repository root: python3 bench/bench_softmax.py --out /tmp/softmax.md
"""

import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace

from common import (
    NA,
    Table,
    base_parser,
    cupy_on_torch_stream,
    emit_tables,
    median,
    poison,
    rate,
    report_failure,
    short_error,
)

try:  # optional peer: the table shows n/a where Triton is missing
    import triton
    import triton.language as tl

    TRITON_ERROR = None
except Exception as _exc:  # pragma: no cover - depends on the machine
    triton = None
    tl = SimpleNamespace(constexpr=int)  # kernel annotations still evaluate; never launched
    TRITON_ERROR = short_error(_exc)

# =============================================================================================
# Shared by the reduction benchmarks
#
# Triton kernels here and in the files that import these spell their annotations
# `tl.constexpr`: Triton's interpreter (TRITON_INTERPRET=1) recognises only that spelling.


DEVICE = "cuda"  # a CPU dry run of these scripts (fake timings, Triton interpreter) changes it
FLUSH_BYTES = 256 * 2**20  # written before each timed call: four times the H200's 60 MB L2
UNIT = "TB/s"
TOL = {"fp32": 1e-5, "fp16": 5e-3, "bf16": 2e-2}  # worst row's ‖out − ref‖ / ‖ref‖, by dtype


def triton_jit(fn: Callable) -> Callable:
    """triton.jit where Triton works; otherwise the plain function (and the column is n/a)."""
    global triton, TRITON_ERROR
    if triton is None:
        return fn
    try:
        return triton.jit(fn)
    except Exception as exc:  # pragma: no cover - depends on the machine
        print(f"Triton peer unavailable: triton.jit failed: {exc}", file=sys.stderr)
        triton, TRITON_ERROR = None, short_error(exc)
        return fn


def triton_available() -> bool:
    return triton is not None


def next_power_of_2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def sync() -> None:
    import torch

    if DEVICE == "cuda":
        torch.cuda.synchronize()


def sm_count() -> int:
    import torch

    return torch.cuda.get_device_properties(0).multi_processor_count if DEVICE == "cuda" else 4


def time_ms(fn: Callable[[], object], warmup_ms: float, rep_ms: float) -> list[float]:
    """Sorted milliseconds of ``fn``, one CUDA event pair per call, L2 flushed before each.

    The method of ``triton.testing.do_bench``: a 256 MB buffer is zeroed before every call, so
    no input stays in L2 and the GPU is busy while the host launches the timed call (host
    launch overhead stays out as long as it is shorter than the flush, about 0.1 ms). Warm-up of
    about ``warmup_ms``, then about ``rep_ms`` of timed calls (10 to 1000).
    """
    import torch

    flush = torch.empty(FLUSH_BYTES // 4, dtype=torch.int32, device=DEVICE)
    fn()
    sync()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    estimate = 0.0  # from 5 calls, each after a flush
    for _ in range(5):
        flush.zero_()
        start.record()
        fn()
        end.record()
        sync()
        estimate += start.elapsed_time(end) / 5
    estimate = max(estimate, 1e-3)
    for _ in range(min(1000, max(1, int(warmup_ms / estimate)))):
        fn()
    reps = min(1000, max(10, int(rep_ms / estimate)))
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    sync()
    for s, e in zip(starts, ends, strict=True):
        flush.zero_()
        s.record()
        fn()
        e.record()
    sync()
    return sorted(s.elapsed_time(e) for s, e in zip(starts, ends, strict=True))


def as_tensor(x: object):
    """A torch tensor for an output (torch tensors pass through; CuPy arrays are wrapped)."""
    import torch

    return x if isinstance(x, torch.Tensor) else torch.as_tensor(x, device=DEVICE)


def fresh_outputs(fn: Callable[[], object], nbytes: Sequence[int]) -> object:
    """Call ``fn``, which allocates its own outputs, on memory poisoned with NaN (best effort).

    torch's allocator cache is emptied, then blocks of the outputs' sizes are filled with 0xFF
    bytes (NaN in fp32, fp16, bf16 and fp64) and freed, so the outputs ``fn`` allocates next
    most likely land on NaN: an element it never writes then fails the check instead of
    showing a stale, correct-looking value left there by an earlier implementation.
    """
    import torch

    if DEVICE == "cuda":
        torch.cuda.empty_cache()
    blocks = [torch.empty(int(n), dtype=torch.uint8, device=DEVICE).fill_(255) for n in nbytes]
    sync()
    del blocks
    out = fn()
    sync()
    return out


def _row_chunk(cols: int) -> int:
    return max(1, 2**24 // max(cols, 1))  # 16 M float64 elements (128 MB) per temporary


def check_rows(
    name: str,
    out: object,
    shape: tuple[int, ...],
    ref_rows: Callable[[int, int], object],
    tol: float,
    view: Callable[[object, int, int], object] | None = None,
) -> float:
    """Raise AssertionError unless ``out`` matches its float64 reference, row by row.

    ``out`` must have ``shape`` (rows first; a 0-d or 1-d output is one row). ``ref_rows(lo,
    hi)`` gives the reference for rows lo:hi in float64 (computed chunk by chunk, so the
    references of 8 GiB outputs never exist whole). Every element must be finite (a poisoned,
    unwritten one is NaN); for every row, ‖out − ref‖ / ‖ref‖ <= ``tol``, and a row whose
    reference is zero must be exactly zero. ``view(chunk, lo, hi)``, if given, is applied to
    both chunks first (to check a part of each row). Returns the worst row's relative error.
    """
    import torch

    out = as_tensor(out)
    if tuple(out.shape) != tuple(shape):
        raise AssertionError(f"{name}: shape {tuple(out.shape)}, expected {tuple(shape)}")
    rows = shape[0] if len(shape) > 1 else 1
    flat = out.reshape(rows, -1)
    worst = 0.0
    step = _row_chunk(flat.shape[1])
    for lo in range(0, rows, step):
        hi = min(rows, lo + step)
        o = flat[lo:hi].double()
        r = torch.as_tensor(ref_rows(lo, hi), device=o.device).double().reshape(hi - lo, -1)
        bad = int((~torch.isfinite(o)).sum())
        if bad:
            raise AssertionError(f"{name}: {bad} non-finite elements in rows {lo}:{hi}")
        if view is not None:
            o, r = view(o, lo, hi), view(r, lo, hi)
        diff = (o - r).norm(dim=1)
        norm = r.norm(dim=1)
        rel = torch.where(norm > 0, diff / norm.clamp_min(1e-300), diff * float("inf"))
        rel = torch.nan_to_num(rel, nan=0.0, posinf=float("inf"))  # nan: 0 · inf, a zero row
        k = int(rel.argmax())
        if float(rel[k]) > worst:
            worst = float(rel[k])
        if float(rel[k]) > tol:
            raise AssertionError(
                f"{name}: row {lo + k} has relative error {float(rel[k]):.3g} > {tol:g} "
                f"(‖out − ref‖ = {float(diff[k]):.4g}, ‖ref‖ = {float(norm[k]):.4g})"
            )
    return worst


def check_value(name: str, out: object, ref: object, tol: float) -> float:
    """check_rows for a whole small output (a loss, dw, db, per-row statistics): one row."""
    import torch

    ref = torch.as_tensor(ref, device=DEVICE).double()
    out = as_tensor(out)
    if out.numel() != ref.numel():
        raise AssertionError(f"{name}: shape {tuple(out.shape)}, expected {tuple(ref.shape)}")
    shape = (1, ref.numel())
    return check_rows(name, out.reshape(shape), shape, lambda lo, hi: ref, tol)


@dataclass
class Impl:
    """One implementation in one case: its column, what it calls, its timed call and its check.

    ``check`` poisons the outputs, runs once, compares with the reference (raising on a wrong
    result) and returns the worst relative error; ``run`` is what is timed.
    """

    column: str
    label: str
    run: Callable[[], object]
    check: Callable[[], float]


@dataclass
class RatioTable(Table):
    """common.Table with extra columns: ours over named peers, and rates as % of a ceiling.

    ``also_to`` adds an "ours / <peer>" column per name; ``ceiling`` names a measured ceiling
    (such as torch's copy), kept out of the peers, shown with its rate per row (``ceilings``)
    and with ``pct_of_ceiling``'s columns ("ours" or peers) as a percentage of it.
    """

    also_to: list[str] = field(default_factory=list)
    ceiling: str | None = None
    pct_of_ceiling: list[str] = field(default_factory=list)
    ceilings: dict[str, float | None] = field(default_factory=dict)

    def markdown(self, date: str, device: str) -> str:
        def fmt(v: float | None, digits: int = self.digits) -> str:
            return NA if v is None else f"{v:.{digits}f}"

        def div(a: float | None, b: float | None) -> float | None:
            return None if a is None or not b else a / b

        head = ["case", f"ours ({self.unit})", *[f"{p} ({self.unit})" for p in self.peers]]
        head += [self.ratio_label(), *[f"ours / {p}" for p in self.also_to]]
        if self.ceiling:
            head.append(f"{self.ceiling} ({self.unit})")
            head += [f"{c} % of {self.ceiling}" for c in self.pct_of_ceiling]
        lines = [f"### {self.title}", "", f"date: {date}, device: {device}", ""]
        lines.append("| " + " | ".join(head) + " |")
        lines.append("|" + "|".join(["---"] + ["---:"] * (len(head) - 1)) + "|")
        for case, ours, peers in self.rows:
            cells = [case, fmt(ours), *[fmt(peers.get(p)) for p in self.peers]]
            cells.append(fmt(self.ratio(ours, peers), 2))
            cells += [fmt(div(ours, peers.get(p)), 2) for p in self.also_to]
            if self.ceiling:
                top = self.ceilings.get(case)
                cells.append(fmt(top))
                for c in self.pct_of_ceiling:
                    v = ours if c == "ours" else peers.get(c)
                    pct = div(v, top)
                    cells.append(NA if pct is None else f"{100 * pct:.0f}%")
            lines.append("| " + " | ".join(cells) + " |")
        if self.notes:
            lines.append("")
            lines.extend(f"- {note}" for note in self.notes)
        return "\n".join(lines) + "\n"


def load_nn() -> tuple[object | None, str | None]:
    """(teeny_tx.nn, None), or (None, the error) where it does not import."""
    try:
        import teeny_tx.nn as tnn

        return tnn, None
    except Exception as exc:
        report_failure("import teeny_tx.nn", exc)
        return None, short_error(exc)


def measure(
    case: str, impls: Sequence[Impl], nbytes: int, args, table: Table
) -> tuple[dict[str, float | None], int]:
    """Check, then time, each implementation; (rate per column in TB/s, number of failures).

    A failure (a raise, or a wrong result) is noted under the table and leaves its column
    n/a; "ours" failing prints "ours: unavailable (<error>)".
    """
    rates: dict[str, float | None] = {}
    failures = 0
    for impl in impls:
        label = f"{impl.column} [{impl.label}]"
        try:
            err = impl.check()
            sync()
            times = time_ms(impl.run, args.warmup_ms, args.rep_ms)
        except Exception as exc:
            failures += 1
            rates[impl.column] = None
            why = report_failure(f"{case} {label}", exc)
            if impl.column == "ours":
                print(f"ours: unavailable ({why})", flush=True)
            table.notes.append(f"{case} {label} failed: {why}")
            continue
        ms = median(times)
        rates[impl.column] = rate(nbytes, ms, UNIT)
        print(
            f"{label:<58} median {ms:9.4f} ms (min {times[0]:.4f}, max {times[-1]:.4f}, "
            f"{len(times)} calls)  {rates[impl.column]:6.3f} {UNIT}  worst row rel err {err:.2g}",
            flush=True,
        )
    return rates, failures


def ours_missing(case: str, error: str) -> int:
    """Print the unavailable line for a case where teeny_tx.nn did not import; one failure."""
    print(f"ours: unavailable ({error})", flush=True)
    return 1


def reduction_parser(description: str, rows: int, cols: str):
    """The arguments every reduction benchmark takes."""
    p = base_parser(description)
    p.add_argument("--rows", type=int, default=rows, help=f"rows (default {rows})")
    p.add_argument("--cols", default=cols, help=f"comma-separated row lengths (default {cols})")
    p.add_argument("--warmup-ms", type=float, default=25.0)
    p.add_argument("--rep-ms", type=float, default=100.0)
    return p


def parse_cols(parser, text: str) -> list[int]:
    cols = [int(c) for c in text.split(",") if c.strip()]
    if not cols or min(cols) < 1:
        parser.error("--cols needs positive integers")
    return cols


def method_note(args) -> str:
    return (
        f"median of CUDA-event timings, each call after a 256 MB L2 flush (do_bench's method), "
        f"after {args.warmup_ms:g} ms of warm-up, about {args.rep_ms:g} ms of calls (10 to "
        f"1000); each output checked first against float64 (worst row ‖out − ref‖/‖ref‖), "
        f"poisoned with NaN beforehand (outputs that an implementation allocates itself: "
        f"torch's cache emptied and refilled with NaN blocks of their sizes, best effort)"
    )


def start(args) -> int | None:
    """Exit status 2 where torch has no GPU (nothing to measure); else None."""
    import torch

    if DEVICE == "cuda" and not torch.cuda.is_available():
        print("no CUDA device: nothing to measure", file=sys.stderr)
        return 2
    torch.manual_seed(args.seed)
    return None


def finish(tables: Sequence[Table], out: str | None, failures: int) -> int:
    emit_tables(tables, out)
    if failures:
        print(f"{failures} implementation(s) or step(s) failed; see the notes", file=sys.stderr)
    return 1 if failures else 0


def on_torch_stream():
    """common.cupy_on_torch_stream where CuPy imports, else nothing (torch-only work)."""
    import contextlib

    try:
        import cupy  # noqa: F401
    except Exception:
        return contextlib.nullcontext()
    return cupy_on_torch_stream()


def free() -> None:
    import gc

    import torch

    gc.collect()
    if DEVICE == "cuda":
        torch.cuda.empty_cache()


# =============================================================================================
# Softmax


# One row per program; the whole row is one tile of BLOCK = next_power_of_2(cols) elements
# (the fused-softmax tutorial's algorithm; no docstring: Triton compiles the body).
@triton_jit
def triton_softmax_kernel(out_ptr, in_ptr, n_cols, in_stride, out_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * in_stride + cols, mask=mask, other=-float("inf"))
    z = x - tl.max(x, axis=0)
    num = tl.exp(z)
    y = num / tl.sum(num, axis=0)
    tl.store(out_ptr + row * out_stride + cols, y, mask=mask)


def softmax_warps(block: int) -> int:
    """The tutorial's heuristic: more warps as the row grows (4, then 8 from 2048, 16 from 4096)."""
    return 4 if block < 2048 else 8 if block < 4096 else 16


TRITON_MAX_COLS = 16384  # the row kernel holds a whole row in one program's registers
PEERS = ["Triton", "torch"]


def parse_args(argv: list[str] | None = None):
    p = reduction_parser(__doc__.splitlines()[0], 8192, "1024,4096,16384")
    p.add_argument("--looped-rows", type=int, default=8192, help="looped case rows (0: skip)")
    p.add_argument("--looped-cols", type=int, default=262144, help="looped case row length")
    p.add_argument(
        "--configs",
        action="store_true",
        default=os.environ.get("TEENY_TX_BENCH_CONFIGS", "") not in ("", "0"),
        help="looped case: also time each config of softmax_split and the two-pass "
        "softmax_looped ($TEENY_TX_BENCH_CONFIGS=1)",
    )
    args = p.parse_args(argv)
    args.cols = parse_cols(p, args.cols)
    return args


def softmax_ref(x) -> Callable[[int, int], object]:
    def rows(lo: int, hi: int):
        x64 = x[lo:hi].double()
        e = (x64 - x64.amax(dim=1, keepdim=True)).exp()
        return e / e.sum(dim=1, keepdim=True)

    return rows


def bench_case(rows: int, cols: int, looped: bool, tnn, nn_error, args, table) -> int:
    """Check and time every implementation on one shape; add the row; return the failures."""
    import torch

    case = f"{rows}×{cols}" + (" looped" if looped else "")
    shape = (rows, cols)
    nbytes = 2 * rows * cols * 4
    print(f"\n== softmax fp32 {case}: {nbytes / 1e9:.3f} GB moved per call", flush=True)
    x = torch.randn(shape, device=DEVICE, dtype=torch.float32)
    ref = softmax_ref(x)
    tol = TOL["fp32"]
    impls: list[Impl] = []
    failures = 0

    if tnn is not None:
        impls.append(
            Impl(
                "ours",
                "teeny_tx.nn.softmax",
                lambda: tnn.softmax(x),
                lambda: check_rows(
                    "ours y", fresh_outputs(lambda: tnn.softmax(x), [nbytes // 2]), shape, ref, tol
                ),
            )
        )
        if looped and args.configs:  # each config of the split kernel, launched directly
            from teeny_tx.library import module
            from teeny_tx.library import nn as lib_nn

            split = module("softmax.c").softmax_split
            slots_n = lib_nn._split_slots(split, cols)
            least = min(c.kwargs["CHUNK"] for c in split.tune.configs)
            y_cfg = torch.empty_like(x)  # one output for every config (8 GiB each)
            slots = torch.zeros(rows * -(-cols // least), dtype=torch.int64, device=DEVICE)
            done = torch.zeros(rows, dtype=torch.int32, device=DEVICE)
            for c in split.tune.configs:
                grid = (rows * -(-cols // c.kwargs["CHUNK"]),)

                def run(c=c, grid=grid, y_cfg=y_cfg):  # the kernel leaves slots, done zero
                    split[grid](
                        y_cfg,
                        slots,
                        done,
                        x,
                        cols,
                        x.stride(0),
                        1,
                        cols,
                        lib_nn.SPLIT_SPINS,
                        num_warps=c.num_warps,
                        SLOTS=slots_n,
                        LOG=0,
                        **c.kwargs,
                    )

                def check(run=run, y_cfg=y_cfg):
                    poison(y_cfg)
                    run()
                    sync()
                    return check_rows("cfg y", y_cfg, shape, ref, tol)

                label = f"split CHUNK={c.kwargs['CHUNK']}, num_warps={c.num_warps}"
                impls.append(Impl(f"cfg {label}", label, run, check))
            looped_kernel = module("softmax.c").softmax_looped
            c = looped_kernel.tune.configs[0]

            def run_looped(c=c, y_cfg=y_cfg):
                looped_kernel[(rows,)](
                    y_cfg, x, cols, x.stride(0), 1, cols, num_warps=c.num_warps, **c.kwargs
                )

            def check_looped(run=run_looped, y_cfg=y_cfg):
                poison(y_cfg)
                run()
                sync()
                return check_rows("two-pass y", y_cfg, shape, ref, tol)

            label = f"two-pass softmax_looped BLOCK={c.kwargs['BLOCK']}, num_warps={c.num_warps}"
            impls.append(Impl(f"cfg {label}", label, run_looped, check_looped))
    else:
        failures += ours_missing(case, nn_error)

    if triton_available() and cols <= TRITON_MAX_COLS:
        block = next_power_of_2(cols)
        warps = softmax_warps(block)
        y_tri = torch.empty_like(x)

        def tri():
            triton_softmax_kernel[(rows,)](
                y_tri, x, cols, x.stride(0), y_tri.stride(0), BLOCK=block, num_warps=warps
            )

        def tri_check():
            poison(y_tri)
            tri()
            sync()
            return check_rows("Triton y", y_tri, shape, ref, tol)

        impls.append(Impl("Triton", f"row kernel BLOCK={block}, num_warps={warps}", tri, tri_check))
    elif triton_available() and not looped:
        table.notes.append(
            f"{case}: no Triton column: the one-row-per-program kernel holds a whole row in "
            f"registers (up to {TRITON_MAX_COLS} columns here); torch is the peer"
        )

    impls.append(
        Impl(
            "torch",
            "torch.softmax(x, -1)",
            lambda: torch.softmax(x, -1),
            lambda: check_rows(
                "torch y",
                fresh_outputs(lambda: torch.softmax(x, -1), [nbytes // 2]),
                shape,
                ref,
                tol,
            ),
        )
    )

    dst = torch.empty_like(x)

    def copy_check() -> float:
        poison(dst)
        dst.copy_(x)
        sync()
        if not torch.equal(dst, x):
            raise AssertionError("copy_: destination differs from the source")
        return 0.0

    impls.append(Impl("copy_", "dst.copy_(x), the same bytes", lambda: dst.copy_(x), copy_check))

    rates, bad = measure(case, impls, nbytes, args, table)
    failures += bad
    table.add(case, rates.get("ours"), {p: rates.get(p) for p in PEERS})
    table.ceilings[case] = rates.get("copy_")
    return failures  # the tensors go with this frame; main() then calls free()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    status = start(args)
    if status is not None:
        return status
    table = RatioTable(
        f"Softmax fp32 over rows ({UNIT}, bytes = x read + y written = 2·rows·cols·4)",
        UNIT,
        PEERS,
        digits=3,
        also_to=["torch"],
        ceiling="copy_",
        pct_of_ceiling=["ours", "torch"],
    )
    table.notes.append(method_note(args))
    table.notes.append(
        "Triton: one row per program, BLOCK = next_power_of_2(cols), num_warps 4 / 8 / 16 "
        "from 2048 / 4096 columns (the fused-softmax tutorial's heuristic); copy_ = "
        "torch.Tensor.copy_ of x into another fp32 tensor, the same bytes, in the same run"
    )
    if args.looped_rows:
        table.notes.append(
            f"looped case {args.looped_rows}×{args.looped_cols}: rows too long for one "
            f"program's tile; peers torch only"
        )
    if not triton_available():
        table.notes.append(f"Triton not usable ({TRITON_ERROR}): its column is n/a")
    tnn, nn_error = load_nn()
    if tnn is None:
        table.notes.append(f"ours: unavailable ({nn_error})")
    shapes = [(args.rows, c, False) for c in args.cols]
    if args.looped_rows:
        shapes.append((args.looped_rows, args.looped_cols, True))
    failures = 0
    with on_torch_stream():
        for rows, cols, looped in shapes:
            try:
                failures += bench_case(rows, cols, looped, tnn, nn_error, args, table)
            except Exception as exc:
                failures += 1
                table.notes.append(f"{rows}×{cols}: {report_failure(f'{rows}×{cols}', exc)}")
            free()
    return finish([table], args.out, failures)


if __name__ == "__main__":
    sys.exit(main())
