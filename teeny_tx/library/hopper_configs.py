"""The Hopper matmul's configurations: a measured table per shape class, the variants a tuner
times, and the choice of one per product class (remembered in memory and, when timed, on disk).

Input: a product's sizes, dtypes, operand majorness, epilogue and the device's SM count.
Output: :class:`HopperChoice` (the kernel to launch and a printable account of every config
tried and why it was or was not taken), made by :func:`hopper_choose`.

Without timing (the default) the first configuration of the product's class that plans and
does not spill is taken: the table below holds the H200's measured best. With timing
(``TEENY_TX_HOPPER_TUNE=1``, or ``tune=`` given) the candidates of the class (the table's
choice, then the variants of :func:`variants`: stages, group size, 256 x 128 with two 128-row
consumers, the TMA-store epilogue through panel buffers, 2-CTA clusters with B multicast) are
timed with CUDA events on the product's own operands and the fastest kept, in memory and as
JSON under ``<cache dir>/autotune/hopper/`` (the row kernels' autotune directory), keyed by
the device, NVRTC, the prelude, every candidate kernel's source and the product's class: a
new process on the same device launches the winner without timing.

A shape class is the product's tile grid at 128-row/column granularity and K's power of two
(``cdiv(M, 128)``, ``cdiv(N, 128)``, ``K.bit_length()``), the dtypes, the operands'
majorness, the epilogue and whether C allows TMA stores.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import statistics
import warnings
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from .. import switches
from ..kernel import hopper_specialization
from ..lower.hopper.matmul import (
    ITEMSIZE,
    MAX_SPLIT_K,
    HopperConfig,
    TmaUnsupported,
    plan_matmul,
)
from ..runtime.grid import cdiv
from ..target import HOPPER

TUNE: bool = switches.read("HOPPER_TUNE")
TUNE_FORMAT = 1  # bump when the cache file's recipe or contents change
GROUP_M = 8
SHARED_LIMIT = HOPPER.max_shared_per_block  # dynamic shared memory of an sm_90 block
MIN_STAGES = 3  # fewer (an f32 staging tile of 128x256) and the register epilogue is taken
SPLIT_MIN_BLOCKS = 4  # K blocks of a split-K unit at least (its partial tile costs a round trip)
SPLIT_MAX_BN = 128  # split-K tiles: 128 x 256 spills with split-K's reduction (ptxas, sm_90a)

# Tiles from the largest, (BM, BN, BK, the other HopperConfig fields with the register
# epilogue, and with the TMA-store epilogue): the first that gives at least 3/4 of a wave of tiles
# is taken (a persistent grid of one block per SM walks them). From the H200 sweeps (TFLOP/s,
# 2026-12-01): at 8192^3 bf16, 128x256 register s3 661 / s4 653, TMA-store s3 699 (792 in the
# afternoon run, 1.03x cuBLAS); 128x128 register s6 618, TMA-store s5 685; f16 4096^3: the
# 128x256 s3 TMA-store choice was the best of every candidate (704); the register epilogue
# (C's rows not 16-byte aligned: f16 4095 x 4097 x 1000) was fastest at 128x256 s4 as a 2-CTA
# cluster with B multicast (259, against 217 for s3 without a cluster and 101 for cuBLAS).
# 64x128 (small products) was not swept: the most stages that fit.
TILES: tuple[tuple[int, int, int, dict, dict], ...] = (
    (128, 256, 64, dict(stages=4, cluster=2), dict(stages=3)),
    (128, 128, 64, dict(stages=6), dict(stages=5)),
    (64, 128, 64, dict(stages=8), dict(stages=8)),
)
# f32 operands multiplied as TF32 (wgmma k8): stages of BK = 32 (one 128-byte panel), as many
# as fit beside each epilogue's staging (an f32 output tile of 128 x 256 is 128 KiB: TMA stores
# through one panel buffer per consumer there). H200, 2026-12-01 (15:23Z), 4096^3 through
# linalg: 341 TFLOP/s with B K-major (cuBLAS-TF32 363, 0.94x), 285 with B row-major (its
# K-contiguous copy in the call; cuBLAS 357); only the table's choice was timed.
TF32_TILES: tuple[tuple[int, int, int, dict, dict], ...] = (
    (128, 256, 32, dict(stages=4), dict(stages=4, store_panels=1)),
    (128, 128, 32, dict(stages=6), dict(stages=5)),
    (64, 128, 32, dict(stages=8), dict(stages=8)),
)


class Candidate(NamedTuple):
    """One configuration to try: the tiles and whether the epilogue stores through TMA."""

    config: HopperConfig
    tma_store: bool


class HopperChoice(NamedTuple):
    """The Hopper kernel a product takes and why: ``report`` names each config tried and
    what ruled it out, or its time when the candidates were timed."""

    kernel: Any
    report: str


CHOICES: dict[tuple, HopperChoice] = {}  # by product class (see hopper_choose)


def table_configs(tma_store: bool, tf32: bool = False) -> list[HopperConfig]:
    """TILES (TF32_TILES for f32 operands) as configs, with the fields of one epilogue."""
    rows = TF32_TILES if tf32 else TILES
    return [
        HopperConfig(bm, bn, bk, group_m=GROUP_M, **(stores if tma_store else registers))
        for bm, bn, bk, registers, stores in rows
    ]


def split_for(config: HopperConfig, m: int, n: int, k: int, sms: int) -> int:
    """Split-K units per tile for ``config``'s tiles: 1 where the tiles fill half a wave or
    more, or the tile is wider than SPLIT_MAX_BN (its split kernels spill); else as many as
    fill the SMs, each of at least SPLIT_MIN_BLOCKS K blocks, up to MAX_SPLIT_K."""
    tiles = cdiv(m, config.bm) * cdiv(n, config.bn)
    if 2 * tiles > sms or config.bn > SPLIT_MAX_BN:
        return 1
    split = min(MAX_SPLIT_K, sms // tiles, cdiv(k, config.bk) // SPLIT_MIN_BLOCKS)
    return split if split >= 2 else 1


def table_candidates(
    m: int, n: int, sms: int, tma_store: bool, k: int = 0, tf32: bool = False
) -> list[HopperConfig]:
    """TILES as configs, the wave-filling choice first and the smaller tiles after it (what a
    config that spills falls back to). Where no tile gives 3/4 of a wave and ``k`` (> 0)
    allows, the products of few tiles and long K, the tile of 128 (M > 64) or 64 rows and 128
    columns is split along K (:func:`split_for`) and leads. Measured on the H200 (2026-12-01,
    fp16, TFLOP/s): 1024^3 runs fastest unsplit on 128 tiles of 64 x 128 (223, as cuBLAS;
    split in two on 128 x 128: 150); 512 x 512 x 16384 on 128 x 128 in 8 K slices (278, unsplit
    107, cuBLAS 353); 64 x 4096 x 8192 on 64 x 128 in 4 slices (139, unsplit 124, cuBLAS 139)."""
    configs = table_configs(tma_store, tf32)
    fills = [cdiv(m, c.bm) * cdiv(n, c.bn) * 4 >= 3 * sms for c in configs]
    if any(fills) or k <= 0:
        return configs[fills.index(True) if any(fills) else len(configs) - 1 :]
    rows = 128 if m > 64 else 64
    lead = next(c for c in configs if (c.bm, c.bn) == (rows, 128))
    split = dataclasses.replace(lead, split_k=split_for(lead, m, n, k, sms))
    return [split, *(c for c in configs if c.bn <= 128 and c != lead)]


def staging_bytes(config: HopperConfig, dtype_size: int, out_size: int) -> int:
    """Shared memory of a config with its TMA-store staging (the whole tile, or
    ``store_panels`` buffers of 128 bytes of columns of every consumer's rows)."""
    ring = config.stages * (config.bm + config.bn) * config.bk * dtype_size
    staging = config.store_panels * config.bm * 128 or config.bm * config.bn * out_size
    return ring + staging + 16 * config.stages + 1024


def with_epilogue(
    base: HopperConfig, tma_store_ok: bool, dtype_size: int, out_size: int
) -> Candidate:
    """``base`` with the TMA-store epilogue where C allows it, its stages reduced until the
    staging tile fits; the register epilogue (and the table's register stages) where fewer
    than MIN_STAGES would remain."""
    if not tma_store_ok:
        return Candidate(base, False)
    config = base
    while config.stages > 2 and staging_bytes(config, dtype_size, out_size) > SHARED_LIMIT:
        config = dataclasses.replace(config, stages=config.stages - 1)
    if config.stages >= MIN_STAGES:
        return Candidate(config, True)
    tf32 = dtype_size == 4
    for registers, stores in zip(
        table_configs(False, tf32), table_configs(True, tf32), strict=True
    ):
        if stores == base:
            return Candidate(registers, False)
    return Candidate(dataclasses.replace(base, stages=MIN_STAGES), False)


def variants(first: Candidate, tma_store_ok: bool) -> list[Candidate]:
    """What a tuner times besides the table's choice ``first``: the other group sizes; for the
    large tiles, 4 stages (the register epilogue, or TMA stores through panel buffers),
    256 x 128 with two consumers of 128 rows, and each of those as a 2-CTA cluster with B
    multicast; for 128 x 128, the cluster. Only what plans survives (plan_matmul decides)."""
    c, store = first
    out = [Candidate(dataclasses.replace(c, group_m=g), store) for g in (16, 4)]
    if c.cluster > 1:  # the table's tile without the cluster, at its stages and at 3
        alone = [dataclasses.replace(c, cluster=1, stages=s) for s in (c.stages, 3)]
        out += [Candidate(x, store) for x in alone]
    if (c.bm, c.bn) == (128, 256):
        wide = HopperConfig(256, 128, 64, 3, GROUP_M, atoms=2)
        four = [
            Candidate(HopperConfig(128, 256, 64, 4, GROUP_M), False),
            Candidate(HopperConfig(256, 128, 64, 4, GROUP_M, atoms=2), False),
        ]
        if tma_store_ok:
            four = [
                Candidate(HopperConfig(128, 256, 64, 4, GROUP_M, store_panels=2), True),
                Candidate(HopperConfig(128, 256, 64, 4, GROUP_M, store_panels=1), True),
                Candidate(HopperConfig(256, 128, 64, 4, GROUP_M, atoms=2, store_panels=1), True),
                *four,
            ]
        out += [Candidate(wide, store), *four, *pingpong(store)]
        clustered = [first, Candidate(wide, store), four[0]]
        out += [Candidate(dataclasses.replace(x.config, cluster=2), x.tma_store) for x in clustered]
    elif c.split_k > 1:  # few tiles, long K: other splits, and the unsplit tile
        splits = dict.fromkeys((max(2, c.split_k // 2), min(MAX_SPLIT_K, 2 * c.split_k), 1))
        out += [Candidate(dataclasses.replace(c, split_k=s), store) for s in splits]
        small = table_configs(store)[-1]
        for s in dict.fromkeys((1, c.split_k, 2 * c.split_k)):
            out.append(Candidate(dataclasses.replace(small, split_k=min(MAX_SPLIT_K, s)), store))
    elif (c.bm, c.bn) == (128, 128):
        out.append(Candidate(dataclasses.replace(c, cluster=2), store))
        out += pingpong(store)
    elif (c.bm, c.bn) == (64, 128):  # few tiles: larger ones (fewer, each more efficient)
        for bigger in table_configs(store)[:2]:
            out.append(Candidate(dataclasses.replace(bigger, group_m=c.group_m), store))
    return out


def pingpong(tma_store: bool) -> list[Candidate]:
    """The ping-pong schedule's tiles: 128 x 128 (two m64 atoms per consumer) and 64 x 256,
    with the stages that fit beside each epilogue's staging."""
    return [
        Candidate(HopperConfig(128, 128, 64, 5 if tma_store else 6, GROUP_M, atoms=2,
                               pingpong=True), tma_store),
        Candidate(HopperConfig(64, 256, 64, 4 if tma_store else 5, GROUP_M, pingpong=True),
                  tma_store),
    ]  # fmt: skip


def shape_class(m: int, n: int, k: int) -> tuple[int, int, int]:
    """The part of a product's sizes that decides its best config (see the module doc)."""
    return (cdiv(m, 128), cdiv(n, 128), k.bit_length())


def label(candidate: Candidate) -> str:
    """A candidate in the words of :attr:`HopperMatmul.label`."""
    c, store = candidate
    text = f"{c.bm}x{c.bn}x{c.bk} s{c.stages} g{c.group_m}"
    consumers = 2 if c.pingpong else c.bm // (64 * c.atoms)
    text += f" {consumers}x{64 * c.atoms}rows" if c.atoms > 1 or c.pingpong else ""
    text += " pingpong" if c.pingpong else ""
    text += f" cluster{c.cluster}" if c.cluster > 1 else ""
    text += f" split{c.split_k}" if c.split_k > 1 else ""
    panels = f"/{c.store_panels}panel" if c.store_panels and store else ""
    return f"{text} {'tma-store' + panels if store else 'register'} epilogue"


Timer = Callable[[Any], float]  # kernel -> milliseconds per launch


def hopper_choose(
    m: int,
    n: int,
    k: int,
    dtype: str,
    out_dtype: str,
    *,
    a_kmajor: bool,
    b_kmajor: bool,
    bias_dtype: str | None,
    activation: int,
    pairs: bool,
    tma_store_ok: bool,
    sms: int,
    local_bytes: Callable[[Any], int],
    watchdog: int = 0,
    timer: Timer | None = None,
    device: str = "",
) -> HopperChoice | None:
    """The Hopper kernel of a product, memoised per product class. Untimed (``timer`` None):
    the table's wave-filling tile, then the smaller ones, the TMA-store epilogue where
    ``tma_store_ok``; a config whose kernel uses local memory (``local_bytes(kernel) > 0``:
    spills) is rejected and the next one tried. Timed: every candidate of the class that
    plans and does not spill is timed by ``timer`` and the fastest taken (the choice read
    from, and written to, the disk cache of ``device``, a description of the GPU). None when
    none plans or all spill (the cp.async kernel then runs)."""
    key: tuple = (m, n, k, dtype, out_dtype, a_kmajor, b_kmajor, bias_dtype, activation, pairs)
    key += (tma_store_ok, sms, timer is not None)
    found = CHOICES.get(key)
    if found is not None:
        return found if found.kernel is not None else None
    dsize, osize = ITEMSIZE[dtype], ITEMSIZE[out_dtype]
    bases = table_candidates(m, n, sms, tma_store_ok, k, tf32=dtype == "f32")
    candidates = [with_epilogue(b, tma_store_ok, dsize, osize) for b in bases]
    if timer is not None:
        candidates = candidates[:1] + variants(candidates[0], tma_store_ok) + candidates[1:]
    tried: list[str] = []
    kernels: list[tuple[Candidate, Any]] = []
    for candidate in dict.fromkeys(candidates):  # in order, without repeats
        name = label(candidate)
        try:
            node = plan_matmul(
                dtype=dtype,
                out_dtype=out_dtype,
                a_kmajor=a_kmajor,
                b_kmajor=b_kmajor,
                bias_dtype=bias_dtype,
                activation=activation,
                pairs=pairs,
                tma_store=candidate.tma_store,
                config=candidate.config,
                watchdog=watchdog,
            )
        except TmaUnsupported as err:
            tried.append(f"{name}: {str(err).splitlines()[0]}")
            continue
        kernel = hopper_specialization(node)
        spilled = local_bytes(kernel)
        if spilled:
            tried.append(f"{name}: rejected, {spilled} bytes of local memory per thread (spills)")
            continue
        kernels.append((candidate, kernel))
        if timer is None:
            tried.append(f"{name}: chosen")
            break
    chosen = None
    if timer is None:
        chosen = kernels[0][1] if kernels else None
    elif kernels:
        cls = (shape_class(m, n, k), *key[3:12])
        chosen, lines = _timed_choice(cls, kernels, timer, device)
        tried += lines
    choice = HopperChoice(chosen, "; ".join(tried) or "no config")
    CHOICES[key] = choice
    return choice if chosen is not None else None


def _timed_choice(
    cls: tuple, kernels: Sequence[tuple[Candidate, Any]], timer: Timer, device: str
) -> tuple[Any, list[str]]:
    """The fastest of ``kernels`` for the product class ``cls``: read from the disk cache, or
    timed and written to it. Returns the kernel and one report line per candidate."""
    path = _cache_path(cls, [k for _, k in kernels], device)
    record = _read(path)
    names = [label(c) for c, _ in kernels]
    if record is not None and record.get("chosen") in names:
        best = names.index(record["chosen"])
        cached = record.get("ms", {})
        lines = [f"{n}: {cached.get(n, float('nan')):.4f} ms (cached)" for n in names]
        lines[best] += ", chosen"
        return kernels[best][1], lines
    times: dict[str, float] = {}
    lines = []
    for name, (_, kernel) in zip(names, kernels, strict=True):
        try:
            times[name] = timer(kernel)
            lines.append(f"{name}: {times[name]:.4f} ms")
        except Exception as err:  # noqa: BLE001 - a failed candidate is reported and skipped
            lines.append(f"{name}: failed ({str(err).splitlines()[0]})")
    if not times:
        return None, lines
    best_name = min(times, key=times.__getitem__)
    best = names.index(best_name)
    lines[best] += ", chosen"
    _write(path, {"format": TUNE_FORMAT, "class": list(cls), "device": device, "ms": times,
                  "chosen": best_name})  # fmt: skip
    return kernels[best][1], lines


def _cache_path(cls: tuple, kernels: Sequence[Any], device: str):
    from .._prelude import PRELUDE_SHA256
    from ..runtime import cache, nvrtc

    recipe = [
        TUNE_FORMAT,
        device,
        list(nvrtc.nvrtc_version()),
        PRELUDE_SHA256,
        [hashlib.sha256(k.cuda_source.encode()).hexdigest() for k in kernels],
        [str(x) for x in cls],
    ]
    digest = hashlib.sha256(json.dumps(recipe).encode()).hexdigest()
    try:
        directory = cache.cache_dir()
    except OSError:
        return None
    return directory / "autotune" / "hopper" / f"{digest}.json"


def _read(path) -> dict | None:
    """The Hopper tuning record at ``path``: an object of this TUNE_FORMAT with ``chosen`` a
    name and ``ms`` a mapping of names to non-negative times; else None (a miss), with a
    warning once per file when the record is damaged rather than missing or of another
    format."""
    if path is None:
        return None
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    try:
        record = json.loads(text)
    except (ValueError, RecursionError):
        _damaged(path, "is not JSON (or nests too deeply)")
        return None
    if not isinstance(record, dict):
        _damaged(path, f"holds a {type(record).__name__}, not an object")
        return None
    if record.get("format") != TUNE_FORMAT:
        return None
    ms = record.get("ms")
    if not isinstance(record.get("chosen"), str):
        _damaged(path, "has no chosen config name")
        return None
    if not isinstance(ms, dict) or not all(
        isinstance(k, str) and type(v) in (int, float) and 0 <= v < float("inf")
        for k, v in ms.items()
    ):
        _damaged(path, "has 'ms' that is not a mapping of names to times")
        return None
    return record


_warned: set = set()


def _damaged(path, problem: str) -> None:
    if path not in _warned:
        _warned.add(path)
        warnings.warn(f"Hopper tuning record {path} {problem}: ignored, timed again", stacklevel=5)
    return None


def _write(path, record: dict) -> None:
    if path is None:
        return
    from ..runtime.files import atomic_write

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, json.dumps(record, indent=1, sort_keys=True).encode())
    except OSError:
        pass  # the choice stays in memory


def event_timer(launch: Callable[[Any], Callable[[], None]], warmup: int = 2, rep: int = 5):
    """A Timer: median milliseconds of ``rep`` launches (after ``warmup``) of
    ``launch(kernel)()``, by CUDA events on CuPy's current stream."""
    import cupy

    def timer(kernel: Any) -> float:
        run = launch(kernel)
        for _ in range(warmup):
            run()
        stream = cupy.cuda.get_current_stream()
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        times = []
        for _ in range(rep):
            start.record(stream)
            run()
            end.record(stream)
            end.synchronize()
            times.append(cupy.cuda.get_elapsed_time(start, end))
        return statistics.median(times)

    return timer


def report() -> str:
    """One line per product class that took (or was refused) the Hopper path."""
    lines = []
    for key, choice in CHOICES.items():
        m, n, k, dtype, odt = key[:5]
        lines.append(f"{m}x{n}x{k} {dtype}->{odt}: {choice.report}")
    return "\n".join(lines)
