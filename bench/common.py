"""Helpers shared by the benchmarks in bench/: timing, checking, and the result table.

Input: callables that launch GPU work, output arrays and their references, measured rates.
Output: medians of CUDA-event timings, a raised error on a wrong result, and a markdown table
(with date and device) printed and optionally written to the path given by ``--out``.

torch, cupy and teeny_tx are imported lazily, so ``--help`` and the table code run anywhere.
"""

from __future__ import annotations

import argparse
import datetime
import statistics
import sys
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # bench scripts run as `python3 bench/x.py`: find teeny_tx too
    sys.path.append(str(REPO))

NA = "n/a"


def cdiv(a: int, b: int) -> int:
    """Ceiling division of non-negative integers."""
    return -(-a // b)


def parse_size(text: str) -> int:
    """An element count from the command line: '268435456', '2^28' or '2**28'."""
    text = text.strip().replace("**", "^")
    if "^" in text:
        base, exp = text.split("^", 1)
        return int(base) ** int(exp)
    return int(text)


def utc_now() -> str:
    """The current time in UTC, ISO 8601 to the second (as `date -u +%FT%TZ` prints it)."""
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def device_name() -> str:
    """The GPU's name as torch reports it, else CuPy's, else 'unknown device'."""
    try:
        import torch

        if torch.cuda.is_available():
            return torch.cuda.get_device_name()
    except Exception:
        pass
    try:
        import cupy

        props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
        name = props["name"]
        return name.decode() if isinstance(name, bytes) else str(name)
    except Exception:
        return "unknown device"


def short_error(exc: BaseException, limit: int = 300) -> str:
    """One line naming an exception, cut to ``limit`` characters, for tables and logs."""
    text = " ".join(f"{type(exc).__name__}: {exc}".split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def report_failure(what: str, exc: BaseException) -> str:
    """Print a failed implementation's traceback (to the log) and return a one-line summary."""
    print(f"!! {what} failed: {short_error(exc, 2000)}", flush=True)
    traceback.print_exc()
    return short_error(exc)


# ---------------------------------------------------------------------------------------------
# Timing


def gpu_times_ms(
    fn: Callable[[], object],
    warmup_ms: float = 25.0,
    rep_ms: float = 200.0,
    min_reps: int = 10,
    max_reps: int = 5000,
) -> list[float]:
    """Time ``fn`` with one CUDA event pair per call on torch's current stream; sorted ms.

    Warms up for about ``warmup_ms`` first (module load, compilation and caches stay out of the
    numbers), then times about ``rep_ms`` worth of calls, at least ``min_reps``. Work launched by
    CuPy must go to the same stream: run inside :func:`cupy_on_torch_stream`.
    """
    import torch

    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(5):
        fn()
    end.record()
    torch.cuda.synchronize()
    estimate = max(start.elapsed_time(end) / 5, 1e-3)
    for _ in range(max(1, int(warmup_ms / estimate))):
        fn()
    reps = min(max_reps, max(min_reps, int(rep_ms / estimate)))
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    torch.cuda.synchronize()
    for s, e in zip(starts, ends, strict=True):
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    return sorted(s.elapsed_time(e) for s, e in zip(starts, ends, strict=True))


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def rate(nbytes: int, ms: float, unit: str = "GB/s") -> float:
    """Bytes moved per second, in ``unit`` (GB/s or TB/s, decimal)."""
    scale = {"GB/s": 1e9, "TB/s": 1e12}[unit]
    return nbytes / (ms * 1e-3) / scale


class cupy_on_torch_stream:
    """Context manager: CuPy (and teeny_tx, which launches through CuPy) uses torch's stream.

    With both on the default stream this changes nothing; it keeps events recorded by torch
    around work launched by CuPy meaningful if torch's current stream is ever another one.
    """

    def __enter__(self) -> cupy_on_torch_stream:
        import cupy
        import torch

        handle = torch.cuda.current_stream().cuda_stream
        self._ctx = cupy.cuda.ExternalStream(handle) if handle else None
        if self._ctx is not None:
            self._ctx.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._ctx is not None:
            self._ctx.__exit__(*exc)


# ---------------------------------------------------------------------------------------------
# Correctness


def poison(x: object) -> None:
    """Fill an output (torch tensor, CuPy or NumPy array) with NaN before a correctness run."""
    if hasattr(x, "fill_"):  # torch
        x.fill_(float("nan"))
    else:  # cupy / numpy
        x.fill(float("nan"))


def check_close(out: object, ref: object, rtol: float, atol: float, name: str) -> float:
    """Raise AssertionError naming ``name`` and the largest error unless out ≈ ref everywhere.

    Compares in float64: |out - ref| <= atol + rtol * |ref| elementwise; NaN never passes, so a
    poisoned element that was never written fails. Takes torch tensors (compared on their
    device) or CuPy / NumPy arrays (compared with CuPy / NumPy). Returns the largest error.
    """
    if hasattr(out, "double") and hasattr(ref, "double"):  # torch
        o, r = out.detach().double().flatten(), ref.detach().double().flatten()
    else:
        xp = _array_module(out)
        o, r = xp.asarray(out, dtype=xp.float64).ravel(), xp.asarray(ref, dtype=xp.float64).ravel()
    if o.shape != r.shape:
        raise AssertionError(f"{name}: {o.shape[0]} elements, reference has {r.shape[0]}")
    err = abs(o - r)
    bad = ~(err <= atol + rtol * abs(r))  # NaN compares False, so it lands in bad
    n_bad = int(bad.sum())
    finite = err[err == err]
    max_err = float(finite.max()) if finite.shape[0] else 0.0
    if n_bad:
        first = int(bad.nonzero()[0][0])  # torch: (k, 1) tensor; numpy/cupy: tuple of arrays
        n_nan = int((o != o).sum())
        raise AssertionError(
            f"{name}: {n_bad} of {o.shape[0]} elements wrong (rtol={rtol}, atol={atol}), "
            f"{n_nan} of them NaN; max finite error {max_err:.3g}; first at [{first}]: "
            f"got {float(o[first])!r}, expected {float(r[first])!r}"
        )
    return max_err


def _array_module(x: object):
    if hasattr(x, "__cuda_array_interface__"):
        import cupy

        return cupy
    import numpy

    return numpy


# ---------------------------------------------------------------------------------------------
# Result table


@dataclass
class Table:
    """Rows of (case, ours, peers..., ratio); ratio is ours over the best peer or a named one.

    ``higher_is_better`` picks the best peer (a rate: the largest; a time: the smallest).
    ``ratio_to`` names one peer to divide by instead of the best. Missing values are None and
    print as n/a. ``notes`` are lines printed under the table (configurations, failures).
    """

    title: str
    unit: str
    peers: list[str]
    higher_is_better: bool = True
    ratio_to: str | None = None
    digits: int = 1
    rows: list[tuple[str, float | None, dict[str, float | None]]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, case: str, ours: float | None, peers: dict[str, float | None]) -> None:
        unknown = set(peers) - set(self.peers)
        if unknown:
            raise ValueError(f"unknown peer column(s) {sorted(unknown)}; table has {self.peers}")
        self.rows.append((case, ours, dict(peers)))

    def ratio(self, ours: float | None, peers: dict[str, float | None]) -> float | None:
        if self.ratio_to is not None:
            base = peers.get(self.ratio_to)
        else:
            known = [v for v in peers.values() if v is not None]
            base = (max(known) if self.higher_is_better else min(known)) if known else None
        if ours is None or base is None or base == 0:
            return None
        return ours / base

    def ratio_label(self) -> str:
        return f"ours / {self.ratio_to}" if self.ratio_to else "ours / best peer"

    def markdown(self, date: str, device: str) -> str:
        def fmt(v: float | None) -> str:
            return NA if v is None else f"{v:.{self.digits}f}"

        head = ["case", f"ours ({self.unit})", *[f"{p} ({self.unit})" for p in self.peers]]
        head.append(self.ratio_label())
        lines = [
            f"### {self.title}",
            "",
            f"date: {date}, device: {device}",
            "",
            "| " + " | ".join(head) + " |",
            "|" + "|".join(["---"] + ["---:"] * (len(head) - 1)) + "|",
        ]
        for case, ours, peers in self.rows:
            r = self.ratio(ours, peers)
            cells = [case, fmt(ours), *[fmt(peers.get(p)) for p in self.peers]]
            cells.append(NA if r is None else f"{r:.2f}")
            lines.append("| " + " | ".join(cells) + " |")
        if self.notes:
            lines.append("")
            lines.extend(f"- {note}" for note in self.notes)
        return "\n".join(lines) + "\n"


def emit_tables(tables: Sequence[Table], out: str | None) -> str:
    """Print the tables under one date and device line; write them as markdown to ``out``."""
    date, device = utc_now(), device_name()
    text = "\n".join(t.markdown(date, device) for t in tables)
    print("\n" + text, flush=True)
    if out:
        path = Path(out)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(f"(table written to {path})", flush=True)
    return text


def base_parser(description: str) -> argparse.ArgumentParser:
    """Arguments every benchmark takes: where to write its table, and how long to time."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--out", default=None, help="write the result table as markdown here")
    parser.add_argument("--seed", type=int, default=0, help="random seed for the inputs")
    return parser


def _selftest() -> None:
    """Exercise the table and checks with made-up numbers (no GPU); prints a sample table."""
    import numpy as np

    t = Table("Self-test (made-up numbers)", "TB/s", ["torch", "Triton", "CuPy vec16"], digits=3)
    t.add("fp32 n=2^28", 4.1, {"torch": 4.2, "Triton": 4.3, "CuPy vec16": None})
    t.add("fp16 n=2^28", None, {"torch": 4.0, "Triton": 4.1, "CuPy vec16": 4.2})
    t.notes.append("made-up numbers: this is the table printer's self-test")
    u = Table("Self-test launch", "µs", ["RawModule", "Triton"], False, "RawModule", 2)
    u.add("f32 n=4096", 9.0, {"RawModule": 7.5, "Triton": 20.0})
    emit_tables([t, u], None)
    assert t.ratio(4.1, {"torch": 4.2, "Triton": 4.3}) == 4.1 / 4.3
    assert u.ratio(9.0, {"RawModule": 7.5, "Triton": 20.0}) == 9.0 / 7.5
    a = np.random.default_rng(0).standard_normal(1000).astype(np.float32)
    out = a.copy()
    assert check_close(out, a.astype(np.float64), 1e-6, 0.0, "same") == 0.0
    poison(out)
    try:
        check_close(out, a, 1e-6, 0.0, "poisoned")
    except AssertionError as exc:
        print("expected failure:", exc)
    else:
        raise SystemExit("check_close passed a poisoned output")
    print("self-test passed")


if __name__ == "__main__":
    _selftest()
