"""Profile one launch of a kernel: time and rates against the roofline, and its resources.

Input: a :class:`~teeny_tx.kernel.Kernel`, a grid and its arguments (device arrays on a GPU;
NumPy arrays or dtype names without one), optionally the bytes it moves and the flops it does.
Output: a :class:`Profile` — the median time of repeated launches (GPU only), the achieved
TB/s and TFLOP/s and their fraction of the device's measured ceilings, ptxas's registers,
spills, shared memory and occupancy (``runtime/resources.py``, no GPU needed), and, where the
kernel spills more than :data:`SPILL_LIMIT` bytes per thread, the tile that holds the most
registers and the ``num_warps`` that compiles without spills (:class:`SpillReport`).
Where ncu is on PATH, ``teeny-tx profile --ncu`` runs itself once more under ncu and adds
the kernel's main stall reasons (:func:`ncu_stalls`). ``Profile.report()`` is the text
``teeny-tx profile`` prints; ``plot_roofline`` draws the
kernel on the roofline (matplotlib, the docs extra).

Without a GPU nothing is launched: the times and rates are omitted and the arithmetic
intensity (flops per byte) alone places the kernel against the roofline.
"""

from __future__ import annotations

import csv
import math
import re
import shutil
import statistics
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import TeenyError
from .lower import ir
from .lower.ir import walk_stmts
from .runtime import resources as res

if TYPE_CHECKING:
    from .kernel import Kernel, Specialization


@dataclass(frozen=True)
class Roofline:
    """A device's measured ceilings: copy bandwidth (TB/s) and dense bf16 tensor-core rate."""

    device: str
    tbps: float
    tflops: float

    @property
    def ridge(self) -> float:
        """Flops per byte where the kernel stops being bound by memory."""
        return self.tflops / self.tbps


# Measured on the H200 (BENCHMARKS.md: the copy benchmark's best, ~4.3 TB/s, and the dense bf16
# matmul's peak measured with cuBLAS, ~790 TFLOP/s); other devices are compared with it too.
H200 = Roofline("NVIDIA H200", 4.3, 790.0)
ROOFLINES = {H200.device: H200}

# A kernel spilling more than this many bytes per thread is reported (autotune prunes above
# its own SPILL_TOLERANCE, the same number: a few bytes of local memory stay in L1).
SPILL_LIMIT = 32


@dataclass(frozen=True)
class Tile:
    """A named tile of the kernel and its share of each thread's registers."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    bytes_per_thread: int
    where: str  # file:line


@dataclass(frozen=True)
class SpillReport:
    """Why a kernel spills: its largest tiles (at most three, largest first), and the num_warps
    that would not spill (None: none up to 32 warps compiles without; use a smaller tile)."""

    spilled: int
    tiles: tuple[Tile, ...]
    num_warps: int
    fix_num_warps: int | None

    def text(self) -> str:
        lines = [f"spills {self.spilled} bytes per thread (more than {SPILL_LIMIT})"]
        for t in self.tiles:
            shape = "x".join(map(str, t.shape))
            lines.append(
                f"  tile {t.name} [{shape}] {t.dtype} at {t.where}: "
                f"{t.bytes_per_thread} bytes per thread at num_warps={self.num_warps}"
            )
        if self.fix_num_warps is not None:
            lines.append(f"  num_warps={self.fix_num_warps} compiles without spills")
        else:
            lines.append("  no num_warps up to 32 removes them: use a smaller tile")
        return "\n".join(lines)


@dataclass
class Profile:
    """What :func:`profile` measured and read."""

    kernel: str
    spec: Specialization
    resources: res.Resources | None
    roofline: Roofline
    bytes: int
    flops: int
    ms: float | None = None  # median of the timed launches; None without a GPU
    spill: SpillReport | None = None
    notes: list[str] = field(default_factory=list)
    stalls: list[tuple[str, float]] | None = None  # ncu's main stall reasons, where it ran

    @property
    def tbps(self) -> float | None:
        return None if self.ms is None else self.bytes / (self.ms * 1e-3) / 1e12

    @property
    def tflops(self) -> float | None:
        return None if self.ms is None or not self.flops else self.flops / (self.ms * 1e-3) / 1e12

    @property
    def intensity(self) -> float:
        """Flops per byte moved."""
        return self.flops / self.bytes if self.bytes else 0.0

    def rows(self) -> list[tuple[str, str]]:
        roof = self.roofline
        rows = [("kernel", f"{self.kernel} ({self.spec.arch})")]
        if self.ms is None:
            rows.append(("time", "not measured (no GPU: resources only)"))
        else:
            rows.append(("time", f"{self.ms * 1e3:.2f} us"))
            tbps = self.bytes / (self.ms * 1e-3) / 1e12
            rows.append(("bandwidth", f"{tbps:.3f} TB/s ({tbps / roof.tbps:.0%} of copy)"))
            if self.tflops is not None:
                share = self.tflops / roof.tflops
                rows.append(("compute", f"{self.tflops:.1f} TFLOP/s ({share:.0%} of bf16 dense)"))
        rows.append(("bytes moved", f"{self.bytes}"))
        if self.flops:
            bound = "compute" if self.intensity > roof.ridge else "memory"
            rows.append(
                (
                    "intensity",
                    f"{self.intensity:.2f} flop/B (ridge {roof.ridge:.0f}: {bound}-bound)",
                )
            )
        rows.append(("roofline", f"{roof.device}: {roof.tbps} TB/s, {roof.tflops:.0f} TFLOP/s"))
        if self.resources is not None:
            rows += self.resources.rows()[1:]
        return rows

    def report(self) -> str:
        rows = self.rows()
        width = max(len(k) for k, _ in rows)
        text = "\n".join(f"{k:<{width}}  {v}" for k, v in rows)
        if self.stalls:
            reasons = ", ".join(f"{name} {value:.2f}" for name, value in self.stalls)
            text += f"\nstalls (ncu, warps per issued instruction): {reasons}"
        if self.spill is not None:
            text += "\n" + self.spill.text()
        for note in self.notes:
            text += f"\nnote: {note}"
        return text + "\n"


def tiles(kernel: ir.Kernel) -> list[Tile]:
    """The named tiles of ``kernel`` (declared with a shape), largest share of a thread first."""
    threads = kernel.num_threads
    found: dict[str, Tile] = {}
    for s in walk_stmts(kernel.body):
        if not isinstance(s, ir.Declare) or not s.type.shape:
            continue
        dtype = s.type.dtype
        bits = getattr(dtype, "bits", 64)  # a tile of pointers: 64-bit addresses
        per_thread = math.prod(s.type.shape) * bits // 8 // threads
        name = getattr(dtype, "name", "ptr")
        tile = Tile(s.name, s.type.shape, name, per_thread, f"{s.loc.file}:{s.loc.line}")
        if s.name not in found or found[s.name].bytes_per_thread < per_thread:
            found[s.name] = tile
    return sorted(found.values(), key=lambda t: (-t.bytes_per_thread, t.name))


def diagnose_spills(
    kernel: Kernel, spec: Specialization, found: res.Resources, args: tuple, constexprs: dict
) -> SpillReport | None:
    """A report when ``spec`` spills more than SPILL_LIMIT bytes per thread: its largest tile,
    and the smallest larger num_warps (powers of two to 32) whose compile spills nothing."""
    if found.spilled <= SPILL_LIMIT:
        return None
    warps = spec.kernel.num_warps
    fix = None
    candidate = warps * 2
    while candidate <= 32:
        try:
            other = kernel.specialize(*args, num_warps=candidate, target=spec.target, **constexprs)
            if res.of_specialization(other).spilled == 0:
                fix = candidate
                break
        except TeenyError:  # this many warps does not fit the tile (or the target)
            pass
        candidate *= 2
    return SpillReport(found.spilled, tuple(tiles(spec.kernel)[:3]), warps, fix)


def _array_bytes(args: tuple) -> int:
    return sum(int(getattr(a, "nbytes", 0) or 0) for a in args if not isinstance(a, str))


def _device_roofline(notes: list[str]) -> Roofline:
    from .runtime.launch import device_limits

    name = device_limits().name
    if name in ROOFLINES:
        return ROOFLINES[name]
    notes.append(f"no measured roofline for {name}: compared with the {H200.device}'s")
    return H200


def _time(kernel: Kernel, grid: Any, args: tuple, options: dict, reps: int) -> float:
    """Median milliseconds of ``reps`` launches (after warm-up), by CUDA events."""
    import cupy as cp

    launch = kernel[grid]
    for _ in range(3):
        launch(*args, **options)
    times = []
    for _ in range(reps):
        start, end = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        launch(*args, **options)
        end.record()
        end.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, end))
    return statistics.median(times)


def profile(
    kernel: Kernel,
    grid: Any,
    *args: Any,
    bytes: int | None = None,  # noqa: A002 - the quantity's name
    flops: int = 0,
    reps: int = 20,
    target: Any = None,
    num_warps: int = 4,
    num_stages: int = 2,
    **constexprs: Any,
) -> Profile:
    """Profile ``kernel[grid](*args, **constexprs)``. ``bytes``: what one launch moves (default:
    the arrays' sizes, each read or written once); ``flops``: what it computes (default 0: a
    memory-bound kernel). On a GPU the launch is timed (``reps`` launches, median); without one,
    or with dtype names for arrays, only the resources are read."""
    from .runtime.launch import has_gpu

    notes: list[str] = []
    device_arrays = bool(args) and any(
        hasattr(a, "__cuda_array_interface__") or type(a).__module__.startswith("torch")
        for a in args
    )
    gpu = has_gpu() and device_arrays
    options = {"num_warps": num_warps, "num_stages": num_stages}
    spec = kernel.specialize(
        *args, target=target, num_warps=num_warps, num_stages=num_stages, **constexprs
    )
    try:
        found: res.Resources | None = res.of_specialization(spec)
    except (TeenyError, RuntimeError, OSError) as err:  # NVRTC failed, or is not installed
        found = None
        notes.append(f"resources unavailable: {str(err).splitlines()[0]}")
    roof = _device_roofline(notes) if gpu else H200
    moved = _array_bytes(args) if bytes is None else bytes
    if bytes is None and not moved:
        notes.append("bytes moved unknown (dtype names, no arrays): pass bytes=")
    ms = _time(kernel, grid, args, {**options, **constexprs}, reps) if gpu else None
    spill = None
    if found is not None:
        spill = diagnose_spills(kernel, spec, found, args, {**constexprs, "num_stages": num_stages})
    return Profile(kernel.name, spec, found, roof, moved, flops, ms, spill, notes)


def plot_roofline(profiles: list[Profile], path: str | Path) -> Path:
    """Draw ``profiles`` on their roofline (log-log: flop/B against TFLOP/s) to a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    roof = profiles[0].roofline
    fig, ax = plt.subplots(figsize=(6, 4), dpi=100)
    xs = [2.0**e for e in range(-4, 13)]
    ax.plot(xs, [min(roof.tflops, x * roof.tbps) for x in xs], color="black", lw=1.5)
    for p in profiles:
        x = max(p.intensity, 1 / 16)
        if p.tflops is not None or p.tbps is not None:
            y = p.tflops if p.tflops is not None else x * (p.tbps or 0)
            ax.plot([x], [max(y, 1e-3)], "o", label=f"{p.kernel}: {y:.2f} TFLOP/s")
        else:  # not timed: the ceiling at its intensity
            ax.axvline(x, ls="--", lw=1, label=f"{p.kernel}: {p.intensity:.2f} flop/B (not timed)")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (flop per byte)")
    ax.set_ylabel("TFLOP/s")
    ax.set_title(f"roofline: {roof.device} ({roof.tbps} TB/s, {roof.tflops:.0f} TFLOP/s)")
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, metadata={"Software": None})
    plt.close(fig)
    return out


# ncu's stall metrics: warps stalled for each reason, per issued instruction (the WarpStateStats
# section's source metrics).
NCU_STALLS = r"regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio"
_STALL = re.compile(r"smsp__average_warps_issue_stalled_(\w+?)_per_issue_active\.ratio")


def parse_ncu_stalls(csv_text: str, top: int = 3) -> list[tuple[str, float]]:
    """The ``top`` stall reasons of ``ncu --csv --page raw --metrics NCU_STALLS`` output, largest
    first: (reason, warps stalled per issued instruction). The kernel's last row counts."""
    rows = list(csv.reader(line for line in csv_text.splitlines() if line.startswith('"')))
    if len(rows) < 2:
        return []
    header, values = rows[0], rows[-1]
    found = []
    for name, value in zip(header, values, strict=False):
        m = _STALL.fullmatch(name)
        if m is None:
            continue
        try:
            found.append((m[1], float(value.replace(",", ""))))
        except ValueError:
            continue
    return sorted(found, key=lambda kv: -kv[1])[:top]


def ncu_stalls(argv: list[str], entry: str, top: int = 3) -> list[tuple[str, float]] | None:
    """Run ``argv`` (a program that launches ``entry``) under ncu, one launch profiled; its main
    stall reasons. None where ncu is not on PATH or fails."""
    ncu = shutil.which("ncu")
    if ncu is None:
        return None
    command = [ncu, "--csv", "--page", "raw", "--metrics", NCU_STALLS]
    command += ["--kernel-name", entry, "--launch-count", "1", *argv]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return parse_ncu_stalls(done.stdout, top) if done.returncode == 0 else None
