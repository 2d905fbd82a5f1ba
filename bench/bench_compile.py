"""Compile time: a cold and a warm ``teeny-tx demo``, each bundled kernel's cold and warm
compile against NVRTC of the same generated source, an autotuner's configs compiled one
after another against in parallel, and a small kernel's first launch in a new process by stage.

Input: the golden specialisations of tests/cases.py (every bundled kernel, at the arch it is
rendered for), the demo of the installed teeny_tx, one norm kernel's ``#pragma autotune``
configs. Output: three markdown tables (seconds, wall clock; ``--out`` writes them):

- demo: ``python -m teeny_tx.cli demo`` in a new process, timed with ``time.perf_counter``
  around ``subprocess.run``: cold with a fresh, empty ``TEENY_TX_CACHE_DIR`` (no cubins, no
  autotune choices, no precompiled header image), then warm, the same directory again. The
  issue's baseline (2026-12-01, H200) is 41 s cold and 8 s warm; the target is cold <= 20.5 s.
- kernels: ``cold`` is ``teeny_tx.compile(file)`` + specialise (parse, lower, emit) + the
  cubin, with an empty cubin cache and the process's memo cleared, the runtime's own options
  (its precompiled header on, its image made by an earlier kernel, as after a machine's first
  compile); ``warm`` is the same in a new module with the cubin cache filled (what a new
  process pays, the best of ``--repeats``); ``nvrtc`` is NVRTC alone on the same source with
  the runtime's default options and headers, no precompiled header (the best of
  ``--repeats``); ``cold / nvrtc`` is the ratio.
- first launch: vector add in a new process, each stage (import, parse, lower + render,
  cubin, and on a GPU load and the launch itself) in ms, cold (empty cubin cache and Jinja
  bytecode cache) then warm; the issue's target is <= 100 ms warm on the H200.
- autotune: the configs of layer_norm_fwd at 8192 columns (each specialised, then its cubin
  compiled, empty cache) with ``TEENY_TX_COMPILE_THREADS=1`` and with the default pool.

Run from the repository root (a GPU is not needed for the kernel and autotune tables; the demo
runs on the interpreter without one): python3 bench/bench_compile.py --out /tmp/compile.md
[--repeats 2] [--only layer_norm] [--no-demo]
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from common import base_parser, device_name, utc_now  # noqa: E402

DEMO_BASELINE = (41.0, 8.0)  # issue #12: cold, warm seconds on the H200 (2026-12-01)


def best(fn, repeats: int) -> float:
    times = []
    for _ in range(max(1, repeats)):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def demo_times(timeout: float, no_pch_row: bool = False) -> list[str]:
    """Lines of the demo table: cold then warm, in one fresh cache directory; then cold
    again in another with the precompiled header off (TEENY_TX_PCH=0; ``no_pch_row``). The
    driver's compute
    cache is pointed at a fresh directory too (CUDA_CACHE_PATH)."""
    cache = Path(tempfile.mkdtemp(prefix="teeny_tx_demo_"))
    other = Path(tempfile.mkdtemp(prefix="teeny_tx_demo_nopch_"))
    env = {**os.environ, "TEENY_TX_CACHE_DIR": str(cache), "CUDA_CACHE_PATH": str(cache / "nv")}
    env.pop("TEENY_TX_PCH", None)
    no_pch = {**env, "TEENY_TX_CACHE_DIR": str(other), "CUDA_CACHE_PATH": str(other / "nv")}
    no_pch["TEENY_TX_PCH"] = "0"
    lines = [
        "| run | seconds | baseline (s) | exit | last line |",
        "|---|---:|---:|---:|---|",
    ]
    runs = [("cold", DEMO_BASELINE[0], env), ("warm", DEMO_BASELINE[1], env)]
    if no_pch_row:
        runs.append(("cold, TEENY_TX_PCH=0", DEMO_BASELINE[0], no_pch))
    try:
        for label, baseline, env in runs:
            start = time.perf_counter()
            try:
                done = subprocess.run(
                    [sys.executable, "-m", "teeny_tx.cli", "demo"],
                    env=env,
                    cwd=ROOT,
                    capture_output=True,
                    text=True,
                    timeout=timeout,
                )
                seconds = time.perf_counter() - start
                tail = (done.stdout.strip().splitlines() or ["(no output)"])[-1][:70]
                code = str(done.returncode)
                if done.returncode:
                    print(done.stdout[-2000:], done.stderr[-2000:], sep="\n", flush=True)
            except subprocess.TimeoutExpired:
                seconds, tail, code = (
                    time.perf_counter() - start,
                    f"timed out ({timeout:.0f} s)",
                    "-",
                )
            lines.append(f"| {label} | {seconds:.1f} | {baseline:.0f} | {code} | {tail} |")
            print(lines[-1], flush=True)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
        shutil.rmtree(other, ignore_errors=True)
    return lines


NVRTC_CHILD = r"""
import hashlib, json, sys, time
from teeny_tx.kernel import HEADERS
from teeny_tx.runtime import nvrtc
jobs = json.load(open(sys.argv[1]))
for job in jobs:
    source = open(job["source"]).read()
    row = {"stem": job["stem"]}
    for label in ("seconds", "again")[: 1 + bool(job.get("again"))]:
        start = time.perf_counter()
        cubin = nvrtc.compile_to_cubin(source, name=job["name"], arch=job["arch"],
                                       options=nvrtc.DEFAULT_OPTIONS, headers=HEADERS)
        row[label] = time.perf_counter() - start
    row["sha"] = hashlib.sha256(cubin).hexdigest()
    print(json.dumps(row), flush=True)
"""


def nvrtc_in_new_process(
    jobs: list[dict], timeout: float, extra_env: dict | None = None
) -> dict[str, dict]:
    """Plain NVRTC (the runtime's options and headers, no precompiled header) of each job's
    source in one new process that has compiled nothing before: no memo, no cubin cache, no
    header image of this process can take part (jobs marked ``again`` are compiled a second
    time, the same text: what a compile cache below ours would answer). stem -> row."""
    if not jobs:
        return {}
    folder = Path(tempfile.mkdtemp(prefix="teeny_tx_nvrtc_"))
    try:
        listing = folder / "jobs.json"
        listing.write_text(json.dumps(jobs))
        env = {**os.environ, "TEENY_TX_PCH": "0", **(extra_env or {})}
        try:
            done = subprocess.run(
                [sys.executable, "-c", NVRTC_CHILD, str(listing)],
                env=env,
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=timeout,
            )
            out = done.stdout
            if done.returncode:
                print(done.stderr[-2000:], flush=True)
        except subprocess.TimeoutExpired as exc:
            out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        found = {}
        for line in out.splitlines():
            if line.startswith("{"):
                row = json.loads(line)
                found[row["stem"]] = row
        return found
    finally:
        shutil.rmtree(folder, ignore_errors=True)


FIRST_LAUNCH_CHILD = r"""
import json, time
t0 = time.perf_counter()
import teeny_tx
from teeny_tx.runtime.launch import has_gpu
t1 = time.perf_counter()
m = teeny_tx.compile("kernels/vector_add.c")
t2 = time.perf_counter()
n = 1 << 20
spec = m.vector_add.specialize("f32", "f32", "f32", n, BLOCK=1024)
t3 = time.perf_counter()
spec.cubin
t4 = time.perf_counter()
row = {"import teeny_tx": t1 - t0, "parse (teeny_tx.compile)": t2 - t1,
       "lower + render (specialize)": t3 - t2, "cubin (NVRTC or the disk cache)": t4 - t3}
if has_gpu():
    import cupy as cp
    spec.loaded
    t5 = time.perf_counter()
    a = cp.ones(n, cp.float32)
    out = cp.empty_like(a)
    t6 = time.perf_counter()
    m.vector_add[(n // 1024,)](a, a, out, n, BLOCK=1024)
    cp.cuda.Device().synchronize()
    t7 = time.perf_counter()
    row["load (cuModuleLoadData)"] = t5 - t4
    row["first launch (bind, pack, launch, sync)"] = t7 - t6
row["total"] = sum(row.values())
print(json.dumps(row))
"""


def first_launch_times() -> list[str]:
    """Each stage of vector add's first launch in a new process (ms): cold (empty cubin cache
    and Jinja bytecode cache), then warm (the same directories again)."""
    root = Path(tempfile.mkdtemp(prefix="teeny_tx_first_"))
    env = {**os.environ, "TEENY_TX_CACHE_DIR": str(root / "cache"), "TMPDIR": str(root)}
    rows = []
    try:
        for _ in ("cold", "warm"):
            done = subprocess.run(
                [sys.executable, "-c", FIRST_LAUNCH_CHILD],
                capture_output=True,
                text=True,
                env=env,
                cwd=ROOT,
                timeout=300,
            )
            if done.returncode != 0:
                print(done.stderr[-2000:], flush=True)
                return []
            rows.append(json.loads(done.stdout.splitlines()[-1]))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    lines = ["| stage | cold (ms) | warm (ms) |", "|---|---:|---:|"]
    for stage in rows[0]:
        lines.append(f"| {stage} | {1e3 * rows[0][stage]:.1f} | {1e3 * rows[1][stage]:.1f} |")
        print(lines[-1], flush=True)
    return lines


def _nonce(text: str) -> str:
    """``text`` made a program no compile cache has seen (a comment of random bytes at the
    end): the same work for NVRTC, never a cached answer."""
    return f"{text}\n// bench_compile {uuid.uuid4().hex}\n"


def kernel_times(repeats: int, only: str, budget: float) -> list[str]:
    """Lines of the per-kernel table (and a total), within ``budget`` seconds (the kernels
    not reached are named in a line under the table). Every compile timed is of a source
    with a fresh comment appended (:func:`_nonce`), so no cache answers it."""
    import hashlib

    import teeny_tx
    from teeny_tx.runtime import cache
    from tests.cases import GOLDEN, KERNELS
    from tests.conftest import target_arch

    root = Path(os.environ["TEENY_TX_CACHE_DIR"])
    started = time.perf_counter()
    sources = Path(tempfile.mkdtemp(prefix="teeny_tx_sources_"))

    def empty_cache() -> None:  # keep the precompiled header image: made once per machine
        for entry in root.iterdir():
            if entry.name != "pch":
                shutil.rmtree(entry) if entry.is_dir() else entry.unlink()

    def runtime_cubin(spec, source: str, pch: bool) -> tuple[float, bytes]:
        saved = os.environ.get("TEENY_TX_PCH")
        os.environ["TEENY_TX_PCH"] = "1" if pch else "0"
        try:
            spec.cuda_source = source  # a dataclass field; its cubin is compiled on first use
            spec.__dict__.pop("cubin", None)
            start = time.perf_counter()
            cubin = spec.cubin
            return time.perf_counter() - start, cubin
        finally:
            if saved is None:
                os.environ.pop("TEENY_TX_PCH")
            else:
                os.environ["TEENY_TX_PCH"] = saved

    rows, jobs, skipped = [], [], []
    primed: set[str] = set()
    for g in GOLDEN:
        if only and only not in g.stem:
            continue
        if time.perf_counter() - started > budget:
            skipped.append(g.stem)
            continue
        with target_arch(g.arch):

            def specialise(g=g):
                cache.clear_memo()
                k = getattr(teeny_tx.compile(KERNELS / g.file, name=f"kernels/{g.file}"), g.kernel)
                return k.specialize(
                    *g.args, num_warps=g.num_warps, num_stages=g.num_stages, **g.constexprs
                )

            empty_cache()
            start = time.perf_counter()
            spec = specialise()
            ours = time.perf_counter() - start
            source = spec.cuda_source
            if spec.arch not in primed:  # the header image of this arch, made once per machine
                primed.add(spec.arch)
                image, _ = runtime_cubin(spec, _nonce(source), True)
                print(f"{spec.arch}: header image made in {image:.3f} s", flush=True)
                empty_cache()
            timed = _nonce(source)
            with_pch, cubin = runtime_cubin(spec, timed, True)

            def warm_once(g=g, timed=timed):  # a new module, the cubin cache filled
                again = specialise(g)
                again.cuda_source = timed
                return again.cubin

            warm = best(warm_once, repeats)
            empty_cache()
            without_pch, plain = runtime_cubin(spec, _nonce(source), False)
        path = sources / f"{g.stem}.cu"
        path.write_text(_nonce(source))
        again = (
            len(jobs) < 3
            or spec.arch.endswith("a")
            and not any(j.get("again") and j["arch"] == spec.arch for j in jobs)
        )
        job = {"stem": g.stem, "source": str(path), "name": spec.entry, "arch": spec.arch}
        jobs.append({**job, "again": again})
        sha = hashlib.sha256(cubin).hexdigest()
        rows.append((g.stem, spec.arch, ours, with_pch, without_pch, warm, sha))
        print(
            f"{g.stem}: ours {ours:.3f} s, cubin {with_pch:.3f} s (-pch) / {without_pch:.3f} s, "
            f"warm {warm:.3f} s",
            flush=True,
        )
    child_budget = max(30.0, 2 * sum(r[4] for r in rows) + 20)
    plain_rows = nvrtc_in_new_process(jobs, child_budget)
    # the texts compiled twice, once more in another new process with the driver's compute
    # cache off: slow again if that is the cache that answered the second compile
    repeat_jobs = [{**j, "again": False} for j in jobs if j.get("again")]
    uncached = nvrtc_in_new_process(repeat_jobs, child_budget, {"CUDA_CACHE_DISABLE": "1"})
    shutil.rmtree(sources, ignore_errors=True)
    lines = [
        "| kernel (golden) | arch | specialise | cubin, -pch | cubin, no PCH | cold (-pch) "
        "| warm | NVRTC alone, new process | same cubin | cold / NVRTC |",
        "|---|---|---:|---:|---:|---:|---:|---:|---|---:|",
    ]
    totals = [0.0] * 6
    repeated = []
    for stem, arch, ours, with_pch, without_pch, warm, sha in rows:
        got = plain_rows.get(stem)
        raw = got["seconds"] if got else None
        if got and "again" in got:
            off = uncached.get(stem)
            tail = "" if off is None else f", then {off['seconds']:.3f} s (CUDA_CACHE_DISABLE=1)"
            repeated.append(f"{stem} {got['seconds']:.3f} s, then {got['again']:.3f} s{tail}")
        cold = ours + with_pch
        same = "n/a" if got is None else ("yes" if got["sha"] == sha else "no")
        ratio = "n/a" if not raw else f"{cold / raw:.2f}"
        raw_text = "n/a" if raw is None else f"{raw:.3f}"
        lines.append(
            f"| {stem} | {arch} | {ours:.3f} | {with_pch:.3f} | {without_pch:.3f} | {cold:.3f} "
            f"| {warm:.3f} | {raw_text} | {same} | {ratio} |"
        )
        if raw is not None:
            values = (ours, with_pch, without_pch, cold, warm, raw)
            totals = [t + v for t, v in zip(totals, values, strict=True)]
    if totals[5]:
        lines.append(
            f"| total (kernels with all columns) | | {totals[0]:.2f} | {totals[1]:.2f} | "
            f"{totals[2]:.2f} | {totals[3]:.2f} | {totals[4]:.2f} | {totals[5]:.2f} | | "
            f"{totals[3] / totals[5]:.2f} |"
        )
    lines.append("")
    lines.append(
        "specialise = teeny_tx.compile + parse, lower, emit; cubin = the runtime's NVRTC compile "
        "of it, with its precompiled header (-pch, the arch's header image made beforehand, as "
        "after a machine's first kernel) and without (TEENY_TX_PCH=0); cold = specialise + "
        "cubin with -pch, empty cubin cache; warm = a new module with the cubin cache filled "
        f"(best of {repeats}); NVRTC alone = the same source, options and headers, no "
        "precompiled header, in one new process; same cubin: its bytes equal the runtime's. "
        "Every timed compile is of the source with a new random comment appended, so no cache "
        "below ours can answer it"
    )
    if repeated:
        lines.append(
            "- the same text compiled twice in the new process (a cache below ours would make "
            "the second fast), then once more in another new process: " + "; ".join(repeated)
        )
    if skipped:
        lines.append(f"- not reached within the {budget:.0f} s budget: {', '.join(skipped)}")
    return lines


def autotune_times(cols: int = 8192) -> list[str]:
    """Lines of the autotune table: layer_norm_fwd's configs compiled serially and in
    parallel (each from an empty cubin cache)."""
    import teeny_tx
    from teeny_tx.runtime import autotune, cache

    root = Path(os.environ["TEENY_TX_CACHE_DIR"])
    block = 1 << (cols - 1).bit_length()
    args = ("f16", "f32", "f32", "f16", "f16", "f16", 8192, cols, cols, 1, cols, 1e-5)
    lines = [
        f"| layer_norm_fwd f16, {cols} columns | configs | threads | specialise (s) "
        "| cubins (s) | total (s) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for threads in ("prime", "1", str(autotune.compile_workers())):
        for entry in root.iterdir():
            if entry.name != "pch":
                shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
        cache.clear_memo()
        os.environ["TEENY_TX_COMPILE_THREADS"] = "1" if threads == "prime" else threads
        start = time.perf_counter()
        path = ROOT / "kernels" / "layernorm.c"  # a new module: no specialisation memoised
        kernel = teeny_tx.compile(path, name="kernels/layernorm.c").layer_norm_fwd
        specs = [
            kernel.specialize(
                *args,
                num_warps=c.num_warps,
                num_stages=c.num_stages,
                BLOCK=block,
                EVEN=int(block == cols),
                **c.kwargs,
            )
            for c in (kernel.tune.configs[:1] if threads == "prime" else kernel.tune.configs)
        ]
        specialised = time.perf_counter()
        autotune.compile_cubins(specs)
        for spec in specs:  # compiles here when the pool did not (one thread)
            _ = spec.cubin
        end = time.perf_counter()
        if threads == "prime":  # the precompiled header image, as after a machine's first kernel
            continue
        label = "one after another" if threads == "1" else "in parallel"
        lines.append(
            f"| {label} | {len(specs)} | {threads} | {specialised - start:.2f} | "
            f"{end - specialised:.2f} | {end - start:.2f} |"
        )
        print(lines[-1], flush=True)
    os.environ.pop("TEENY_TX_COMPILE_THREADS", None)
    return lines


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--only", default="", help="kernels whose golden stem contains this")
    parser.add_argument("--no-demo", action="store_true")
    parser.add_argument("--demo-no-pch", action="store_true", help="a third demo: no PCH")
    parser.add_argument("--no-autotune", action="store_true")
    parser.add_argument("--no-first-launch", action="store_true")
    parser.add_argument("--demo-timeout", type=float, default=60.0)
    parser.add_argument(
        "--budget", type=float, default=20.0, help="seconds for the per-kernel table's loop"
    )
    options = parser.parse_args()
    warnings.simplefilter("ignore")
    date, device = utc_now(), device_name()
    sections: list[tuple[str, list[str]]] = []

    def publish() -> None:  # after each section: a step stopped at its limit keeps the rest
        text = "\n".join(
            f"### {title}\n\ndate: {date}, device: {device}, CPUs: {os.cpu_count()}\n\n"
            + "\n".join(lines)
            + "\n"
            for title, lines in sections
        )
        if options.out:
            Path(options.out).parent.mkdir(parents=True, exist_ok=True)
            Path(options.out).write_text(text)
        return text

    if not options.no_demo:
        print("demo (a new process each):", flush=True)
        lines = demo_times(options.demo_timeout, options.demo_no_pch)
        sections.append(("Compile time: `teeny-tx demo`, cold and warm", lines))
        publish()
    if not options.no_first_launch:
        print("vector add's first launch in a new process:", flush=True)
        lines = first_launch_times()
        sections.append(("Compile time: a small kernel's first launch, by stage", lines))
        publish()
    saved = os.environ.get("TEENY_TX_CACHE_DIR")
    root = Path(tempfile.mkdtemp(prefix="teeny_tx_compile_"))
    os.environ["TEENY_TX_CACHE_DIR"] = str(root)
    try:
        from teeny_tx.runtime import nvrtc

        version = ".".join(map(str, nvrtc.nvrtc_version()))
        if not options.no_autotune:
            print("autotune:", flush=True)
            sections.append(("Compile time: an autotuner's configs", autotune_times()))
            publish()
        print(f"kernels (NVRTC {version}):", flush=True)
        sections.append(
            (
                f"Compile time of each bundled kernel vs NVRTC {version} (s)",
                kernel_times(options.repeats, options.only, options.budget),
            )
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)
        if saved is None:
            os.environ.pop("TEENY_TX_CACHE_DIR", None)
        else:
            os.environ["TEENY_TX_CACHE_DIR"] = saved
    print("\n" + publish(), flush=True)


if __name__ == "__main__":
    main()
