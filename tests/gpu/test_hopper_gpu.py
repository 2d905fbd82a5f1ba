"""The Hopper TMA + wgmma matmul on the device, against float64 references.

Two ways to run it:

- ``pytest -q tests/gpu/test_hopper_gpu.py``: the same cases as tests (skipped without a GPU).
- ``python tests/gpu/test_hopper_gpu.py``: a self-diagnosing report for one device run. Each
  stage prints ``STAGE <name>: OK`` or ``FAIL`` with details: the device and tools, a tensor
  map encoded on the host, NVRTC compile and SASS checks (UTMALDG, HGMMA, SYNCS, USETMAXREG
  present; LDL/STL absent) per config, then every correctness case in its own subprocess
  (a timeout or a trapped mbarrier watchdog is reported, and cannot take the rest of the run
  down), the linalg path, and compute-sanitizer (memcheck, racecheck) on small shapes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import zlib
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]

# (name, dtype, out dtype, A K-major, B K-major, (BM, BN, BK, stages), bias, act, (M, N, K), sms)
# sms = 0: one block per SM; "tmastore" in a name: the epilogue goes through TMA stores
K, T = True, False  # an operand K-major, or transposed (M- or N-major)
# fmt: off
CASES = [
    ("bf16-kk-128x256", "bf16", "bf16", K, K, (128, 256, 64, 4), None, 0, (1024, 1024, 1024), 0),
    ("f16-kn-128x256", "f16", "f16", K, T, (128, 256, 64, 4), None, 0, (1024, 1024, 1024), 0),
    ("f16-mk-128x256", "f16", "f16", T, K, (128, 256, 64, 4), None, 0, (512, 768, 384), 0),
    ("bf16-mn-128x256", "bf16", "bf16", T, T, (128, 256, 64, 4), None, 0, (512, 768, 384), 0),
    ("f16-kn-128x128", "f16", "f16", K, T, (128, 128, 64, 6), None, 0, (1024, 1024, 1024), 0),
    ("bf16-kk-64x128", "bf16", "bf16", K, K, (64, 128, 64, 8), None, 0, (1024, 1024, 1024), 0),
    ("f16-kk-ragged", "f16", "f16", K, K, (128, 256, 64, 4), None, 0, (1001, 517, 336), 0),
    ("f16-kn-small-k", "f16", "f16", K, T, (128, 256, 64, 4), None, 0, (256, 256, 40), 0),
    ("f16-kn-one", "f16", "f16", K, T, (64, 128, 64, 8), None, 0, (1, 8, 8), 0),
    ("bf16-kk-persistent3", "bf16", "bf16", K, K, (128, 256, 64, 4), None, 0, (1000, 1100, 520), 3),
    ("f16-kn-bias-gelu", "f16", "f16", K, T, (128, 256, 64, 4), "f16", 1, (1024, 768, 512), 0),
    ("bf16-kk-bias-tanh-f32", "bf16", "f32", K, K, (128, 128, 64, 6), "f32", 2, (640, 384, 256), 0),
    ("f16-kn-relu-silu", "f16", "f16", K, T, (128, 256, 64, 4), None, 4, (512, 512, 512), 0),
    ("bf16-kn-4096", "bf16", "bf16", K, T, (128, 256, 64, 4), None, 0, (4096, 4096, 4096), 0),
    ("bf16-kn-tmastore", "bf16", "bf16", K, T, (128, 256, 64, 3), None, 0, (1024, 1024, 1024), 0),
    ("f16-kk-tmastore-odd", "f16", "f16", K, K, (128, 128, 64, 5), "f16", 1, (1001, 520, 336), 3),
    ("bf16-kk-tmastore-f32", "bf16", "f32", K, K, (128, 128, 64, 4), None, 0, (640, 384, 256), 0),
    ("bf16-kn-sanitize", "bf16", "bf16", K, T, (128, 128, 64, 6), "bf16", 3, (300, 384, 200), 2),
    # the sweep's configurations (EXTRA below): 128-row consumers, panel-buffer TMA stores,
    # 2-CTA clusters with B multicast; odd sizes, persistent grids that revisit the buffers,
    # and (cluster) an odd number of M tiles, whose last cluster has a CTA past M
    ("bf16-kn-a2-tmastore", "bf16", "bf16", K, T, (256, 128, 64, 3), None, 0, (1001, 520, 336), 3),
    ("f16-kk-a2", "f16", "f16", K, K, (256, 128, 64, 4), None, 0, (1001, 517, 336), 0),
    ("bf16-mn-a2-bias", "bf16", "f32", T, T, (256, 128, 64, 4), "f32", 2, (640, 384, 256), 2),
    ("bf16-kn-p2-tmastore", "bf16", "bf16", K, T, (128, 256, 64, 4), None, 0, (1001, 1032, 328), 3),
    ("f16-kk-a2-p1-tmastore", "f16", "f16", K, K, (256, 128, 64, 4), "f16", 1, (777, 640, 200), 2),
    ("f16-kn-p1-tmastore-f32", "f16", "f32", K, T, (128, 128, 64, 5), None, 0, (515, 392, 136), 0),
    ("bf16-kn-c2-tmastore", "bf16", "bf16", K, T, (128, 256, 64, 3), None, 0, (383, 1032, 520), 0),
    ("bf16-kk-c2-many", "bf16", "bf16", K, K, (128, 256, 64, 4), None, 0, (1001, 1100, 520), 4),
    ("f16-mn-c2", "f16", "f16", T, T, (128, 256, 64, 4), None, 0, (328, 776, 250), 0),
    ("f16-kk-c2a2p1-tmastore", "f16", "f16", K, K, (256, 128, 64, 4), "f16", 3, (600, 392, 264), 4),
    ("bf16-kk-c2-bias-f32", "bf16", "f32", K, K, (128, 128, 64, 5), "f32", 2, (200, 300, 104), 0),
    # ping-pong (pp): the consumers take turns, a tile each; few SMs, so each block has many
    ("bf16-kn-pp-tmastore", "bf16", "bf16", K, T, (128, 128, 64, 5), None, 0, (1001, 520, 336), 3),
    ("f16-kk-pp-many", "f16", "f16", K, K, (128, 128, 64, 6), None, 0, (1001, 517, 336), 2),
    ("f16-kn-pp64-bias", "f16", "f16", K, T, (64, 256, 64, 5), "f16", 1, (777, 640, 200), 0),
    ("f16-kn-pp-small-k", "f16", "f16", K, T, (128, 128, 64, 6), None, 0, (520, 520, 40), 1),
    ("bf16-mn-ppc2-tmastore", "bf16", "bf16", T, T, (128, 128, 64, 5), None, 0, (600, 392, 264), 4),
    # split-K (sk<n>: units per tile): odd sizes, persistent grids of few blocks (a block runs
    # several units, of one tile or of several), units with no K blocks at all (sk16 of 4
    # blocks), every epilogue, 128-row consumers
    ("f16-kn-sk2-tmastore", "f16", "f16", K, T, (128, 128, 64, 5), None, 0, (1024, 1024, 1024), 0),
    ("bf16-kk-sk4-odd", "bf16", "bf16", K, K, (128, 128, 64, 6), None, 0, (1001, 517, 1000), 0),
    ("f16-kn-sk3-gelu-tmastore",
     "f16", "f16", K, T, (64, 128, 64, 8), "f16", 1, (300, 520, 1000), 3),
    ("bf16-mn-sk8-f32", "bf16", "f32", T, T, (128, 128, 64, 6), "f32", 2, (200, 136, 2000), 0),
    ("f16-kk-sk16-short", "f16", "f16", K, K, (128, 128, 64, 6), None, 0, (130, 130, 200), 0),
    ("bf16-kn-a2-sk2-tmastore",
     "bf16", "bf16", K, T, (256, 128, 64, 3), None, 0, (515, 392, 1000), 5),
    # TF32 (f32 operands, wgmma tf32 k8, BK = 32): K-major only; every epilogue, split-K
    ("f32-kk-tf32", "f32", "f32", K, K, (128, 256, 32, 4), None, 0, (1001, 517, 336), 0),
    ("f32-kk-tf32-p1-tmastore",
     "f32", "f32", K, K, (128, 256, 32, 4), "f32", 1, (640, 520, 1000), 3),
    ("f32-kk-tf32-a2-bf16out", "f32", "bf16", K, K, (256, 128, 32, 4), None, 0, (515, 392, 200), 0),
    ("f32-kk-tf32-sk3-tmastore",
     "f32", "f32", K, K, (128, 128, 32, 5), None, 0, (300, 392, 1000), 0),
    ("f16-kk-8192", "f16", "f16", K, K, (128, 256, 64, 4), None, 0, (8192, 8192, 8192), 0),
]
# fmt: on
# HopperConfig fields beyond the tile and stages, by case name (a2: two m64 atoms per consumer,
# p1/p2: TMA stores from one or two panel buffers, c2: a 2-CTA cluster, pp: ping-pong)
EXTRA = {
    "bf16-kn-a2-tmastore": dict(atoms=2),
    "f16-kk-a2": dict(atoms=2),
    "bf16-mn-a2-bias": dict(atoms=2),
    "bf16-kn-p2-tmastore": dict(store_panels=2),
    "f16-kk-a2-p1-tmastore": dict(atoms=2, store_panels=1),
    "f16-kn-p1-tmastore-f32": dict(store_panels=1),
    "bf16-kn-c2-tmastore": dict(cluster=2),
    "bf16-kk-c2-many": dict(cluster=2),
    "f16-mn-c2": dict(cluster=2),
    "f16-kk-c2a2p1-tmastore": dict(atoms=2, cluster=2, store_panels=1),
    "bf16-kk-c2-bias-f32": dict(cluster=2),
    "bf16-kn-pp-tmastore": dict(atoms=2, pingpong=True),
    "f16-kk-pp-many": dict(atoms=2, pingpong=True),
    "f16-kn-pp64-bias": dict(pingpong=True),
    "f16-kn-pp-small-k": dict(atoms=2, pingpong=True),
    "bf16-mn-ppc2-tmastore": dict(atoms=2, pingpong=True, cluster=2),
    "f16-kn-sk2-tmastore": dict(split_k=2),
    "bf16-kk-sk4-odd": dict(split_k=4),
    "f16-kn-sk3-gelu-tmastore": dict(split_k=3),
    "bf16-mn-sk8-f32": dict(split_k=8),
    "f16-kk-sk16-short": dict(split_k=16),
    "bf16-kn-a2-sk2-tmastore": dict(atoms=2, split_k=2),
    "f32-kk-tf32-p1-tmastore": dict(store_panels=1),
    "f32-kk-tf32-a2-bf16out": dict(atoms=2),
    "f32-kk-tf32-sk3-tmastore": dict(split_k=3),
}
SASS_NAMES = (
    "bf16-kk-128x256",
    "f16-kn-128x256",
    "f16-mk-128x256",
    "f16-kn-128x128",
    "bf16-kk-64x128",
    "f16-kn-bias-gelu",
    "bf16-kn-tmastore",
    "bf16-kn-a2-tmastore",
    "bf16-kn-p2-tmastore",
    "f16-kk-c2a2p1-tmastore",
    "bf16-kn-pp-tmastore",
    "f16-kn-sk2-tmastore",
    "f32-kk-tf32",
)
SASS_CONFIGS = [c for c in CASES if c[0] in SASS_NAMES]
WATCHDOG = 1 << 26
# Element-wise bound of C = act(alpha * A @ B + bias) against float64 (no norm-wise slack):
# OUT_ROUNDING unit roundoffs of the output dtype of |C| (its one rounding, with margin), plus
# the products' error relative to M = |alpha| * |A| @ |B|, the op's condition: f16 and bf16
# products are exact in f32 and K of them accumulate in f32 (at most K * 2^-24 * M, the
# deterministic bound of any summation order); f32 inputs read as TF32 by truncation (unit
# roundoff 2^-10 each: 2 * 2^-10 * M for a product of two) plus the same f32 sum. An
# activation's slope is at most 1.13 (GELU), so it scales the products' term by at most that.
OUT_ROUNDING = 2.0
U = {"f16": 2.0**-11, "bf16": 2.0**-8, "f32": 2.0**-24}
TF32_ROUNDING = 2 * 2.0**-10
ACT_SLOPE = 1.13
# linalg_check's element-wise bound of each wrapper path's output (which path runs is what it
# checks; check_case bounds the kernels): two roundings to the output dtype of |C| plus
# 2 (K + 2) f32 roundings of the products' magnitudes (tensor cores' adders may truncate),
# times the activation's slope for the fused GELU
PATH_OUTPUT_ROUNDING = {"f16": 2.0**-11, "bf16": 2.0**-8}


def _node(case, watchdog=WATCHDOG):
    from teeny_tx.lower.hopper.matmul import HopperConfig, plan_matmul

    name, dtype, odt, ak, bk, (bm, bn, bkk, st), bias, act, (_, n, _), _ = case
    return plan_matmul(
        dtype=dtype,
        out_dtype=odt,
        a_kmajor=ak,
        b_kmajor=bk,
        bias_dtype=bias,
        activation=act,
        pairs=n % 2 == 0,
        tma_store="tmastore" in name,
        config=HopperConfig(bm, bn, bkk, st, 8, **EXTRA.get(name, {})),
        watchdog=watchdog,
    )


def _clustered(case) -> bool:
    return EXTRA.get(case[0], {}).get("cluster", 1) > 1


def _activate(x, act):
    from math import sqrt

    if act == 1:
        import math

        erf = np.vectorize(math.erf, otypes=[np.float64])
        return 0.5 * x * (1 + erf(x / sqrt(2)))
    if act == 2:
        return 0.5 * x * (1 + np.tanh(0.7978845608028654 * (x + 0.044715 * x**3)))
    if act == 3:
        return np.maximum(x, 0)
    if act == 4:
        return x / (1 + np.exp(-x))
    return x


def run_case(case) -> dict:
    """Launch one case; return its errors and a description of where they are."""
    import cupy as cp

    from teeny_tx.dtypes import DTYPES
    from teeny_tx.kernel import HopperSpecialization

    name, dtype, odt, ak, bk, _, bias_dt, act, (m, n, k), sms = case
    node = _node(case)
    kernel = HopperSpecialization(node)
    npdt = DTYPES[dtype].np
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    a_host = rng.standard_normal((m, k), dtype=np.float32).astype(npdt)
    b_host = rng.standard_normal((k, n), dtype=np.float32).astype(npdt)

    def device(x):  # 16-bit floats travel as their bits (CuPy has no bfloat16)
        x = np.ascontiguousarray(x)
        return cp.asarray(x.view(np.uint16) if x.dtype.itemsize == 2 else x)

    # the layouts the node reads: A [M][K] (K-major) or [K][M]; B [N][K] (K-major) or [K][N]
    a_store = device(a_host if ak else a_host.T)
    b_store = device(b_host.T if bk else b_host)
    a_stride = k if ak else m
    b_stride = k if bk else n
    bias = bias_host = None
    if bias_dt:
        bias_host = rng.standard_normal(n, dtype=np.float32).astype(DTYPES[bias_dt].np)
        bias = device(bias_host)
    out_np = DTYPES[odt].np
    c = cp.zeros((m, n), np.uint16 if out_np.itemsize == 2 else out_np)
    c.fill(0x7FFF if out_np.itemsize == 2 else np.nan)  # NaN in f16 and bf16 alike
    alpha = 0.5 if act else 1.0
    t0 = time.perf_counter()
    kernel.launch(
        c.data.ptr,
        a_store.data.ptr,
        b_store.data.ptr,
        (bias if bias is not None else c).data.ptr,
        m,
        n,
        k,
        a_stride,
        b_stride,
        n,
        1,
        alpha,
        sms or cp.cuda.Device().attributes["MultiProcessorCount"],
    )
    cp.cuda.Device().synchronize()
    elapsed = time.perf_counter() - t0
    a64 = cp.asarray(a_host.astype(np.float64))
    b64 = cp.asarray(b_host.astype(np.float64))
    ref = cp.asnumpy(cp.matmul(a64, b64)) * alpha
    mags = cp.asnumpy(cp.matmul(cp.abs(a64), cp.abs(b64))) * abs(alpha)
    if bias_host is not None:
        ref += bias_host.astype(np.float64)[None, :]
    ref = _activate(ref, act)
    raw = cp.asnumpy(c)
    got = (raw.view(out_np) if raw.dtype == np.uint16 else raw).astype(np.float64)
    nan = int(np.isnan(got).sum())
    err = float(
        np.linalg.norm(np.nan_to_num(got, nan=1e30) - ref) / max(np.linalg.norm(ref), 1e-30)
    )
    products = (k * U["f32"] + (TF32_ROUNDING if dtype == "f32" else 0.0)) * mags
    if bias_host is not None:  # added in f32 before the activation
        products += U["f32"] * np.abs(bias_host.astype(np.float64))[None, :]
    bound = OUT_ROUNDING * U[odt] * np.abs(ref) + (ACT_SLOPE if act else 1.0) * products
    bad = ~(np.abs(got - ref) <= bound)  # NaN counts as bad
    where = {}
    if bad.any():
        rows, cols = np.nonzero(bad)
        where = {
            "bad": int(bad.sum()),
            "first": [int(rows[0]), int(cols[0])],
            "rows_mod_64": sorted({int(r) % 64 for r in rows[:2000]})[:16],
            "cols_mod_64": sorted({int(q) % 64 for q in cols[:2000]})[:16],
            "got": float(got[rows[0], cols[0]]),
            "want": float(ref[rows[0], cols[0]]),
        }
    ok = nan == 0 and not bad.any()  # every element within its bound
    if node.mainloop.split_k > 1:  # again: the same bits (a fixed order of partial sums), and
        c.fill(0)  # the counters the first launch left at 0 serve the second
        kernel.launch(
            c.data.ptr,
            a_store.data.ptr,
            b_store.data.ptr,
            (bias if bias is not None else c).data.ptr,
            m,
            n,
            k,
            a_stride,
            b_stride,
            n,
            1,
            alpha,
            sms or cp.cuda.Device().attributes["MultiProcessorCount"],
        )
        from teeny_tx.runtime.hopper import split_workspace

        counters = split_workspace(node, m, n, cp.cuda.Device().id, None)[1]
        tiles = -(-m // node.mainloop.bm) * -(-n // node.mainloop.bn)
        left = counters[:tiles]
        where["relaunch_same_bits"] = bool((cp.asnumpy(c) == raw).all())
        where["counters_left"] = int(cp.count_nonzero(left))
        ok = ok and where["relaunch_same_bits"] and where["counters_left"] == 0
    return {
        "case": name,
        "ok": ok,
        "rel_err": err,
        "nan": nan,
        "where": where,
        "first_launch_s": elapsed,
    }


# ------------------------------------------------------------------ pytest


cp = None


@pytest.fixture(scope="module")
def hopper_device():
    global cp
    try:
        import cupy

        visible = cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # noqa: BLE001 - no cupy, driver or device: skip
        visible = False
    if not visible:
        pytest.skip("no CUDA device visible to CuPy")
    cp = cupy
    if cupy.cuda.Device().compute_capability != "90":
        pytest.skip("not a compute capability 9.0 device")


@pytest.mark.parametrize("case", CASES[:-1], ids=[c[0] for c in CASES[:-1]])
def test_hopper_matmul_matches_float64(hopper_device, case):
    result = run_case(case)
    assert result["ok"], result


def test_hopper_sass(hopper_device, tmp_path):
    tool = cuobjdump()
    if tool is None:
        pytest.skip("no cuobjdump")
    for case in SASS_CONFIGS:
        report = sass_report(case, tool, tmp_path)
        assert report["ok"], report


def test_fp8_scaled_matmul(hopper_device):
    result = fp8_check()
    assert result["ok"], result


def test_linalg_takes_the_hopper_path(hopper_device):
    result = linalg_check()
    assert result["ok"], result


# ------------------------------------------------------------------ diagnostics


def cuobjdump() -> str | None:
    found = shutil.which("cuobjdump")
    if found:
        return found
    try:
        import triton

        candidate = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
        return str(candidate) if candidate.exists() else None
    except ImportError:
        return None


def sass_report(case, tool, directory) -> dict:
    from teeny_tx.kernel import HopperSpecialization

    kernel = HopperSpecialization(_node(case, watchdog=0))
    compiled = kernel.compiled
    path = Path(directory) / f"{case[0]}.cubin"
    path.write_bytes(compiled.cubin)
    sass = subprocess.run([tool, "-sass", str(path)], capture_output=True, text=True).stdout
    ops = ("UTMALDG", "HGMMA", "SYNCS", "USETMAXREG", "LDL", "STL", "MULTICAST", "UCGABAR")
    counts = {op: sass.count(op) for op in ops}
    ptxas = [
        line.strip()
        for line in compiled.log.splitlines()
        if "Used" in line or "spill" in line or "C7508" in line or "arning" in line
    ]
    ok = (
        all(counts[op] > 0 for op in ("UTMALDG", "HGMMA", "SYNCS", "USETMAXREG"))
        and counts["LDL"] == 0
        and counts["STL"] == 0
        # a cluster's B is multicast and the CTAs meet at cluster barriers; nothing else is
        and (counts["MULTICAST"] > 0 and counts["UCGABAR"] > 0) == _clustered(case)
    )
    return {"case": case[0], "ok": ok, "sass": counts, "ptxas": ptxas}


_LAST_STEP = ["(none)"]
LINALG_CASES = {  # name: (M, N, K, dtype)
    "2048-bf16": (2048, 2048, 2048, "bf16"),
    "ragged-f16": (4095, 4097, 1000, "f16"),  # padded copies of A, B and linear's w
    "small-f16": (300, 200, 136, "f16"),
}


def linalg_check(name: str | None = None) -> dict:
    """linalg.matmul / linear / linear_backward on the Hopper path (both epilogues, a replayed
    plan) and linear on the cp.async path, against float64. Each call is announced on stdout
    (``STEP ...``) before it runs, so a process that dies names the call that killed it."""
    import torch

    from teeny_tx.library import linalg

    torch.manual_seed(7)
    out = {}
    ok = True
    for case, (m, n, k, dt) in LINALG_CASES.items():
        if name is not None and case != name:
            continue
        tdt = torch.float16 if dt == "f16" else torch.bfloat16
        a = torch.randn(m, k, device="cuda", dtype=tdt)
        b = torch.randn(k, n, device="cuda", dtype=tdt)
        w = b.t().contiguous()
        bias = torch.randn(n, device="cuda", dtype=tdt)
        ref = a.double() @ b.double()
        ref_y = torch.nn.functional.gelu(ref + bias.double())
        dy = torch.randn(m, n, device="cuda", dtype=tdt)
        ref_dx = dy.double() @ w.double()
        ref_dw = dy.double().t() @ a.double()
        # each output's condition (the magnitudes its products sum) and its K
        cond_ab = a.double().abs() @ b.double().abs()
        conds = {
            "matmul": (cond_ab, k),
            "linear+bias+gelu": (ACT_SLOPE * (cond_ab + bias.double().abs()), k),
            "linear_backward dx": (dy.double().abs() @ w.double().abs(), n),
            "linear_backward dw": (dy.double().abs().t() @ a.double().abs(), m),
        }
        steps = []
        paths = ((True, False), (True, True))
        if case == "ragged-f16":  # the padded copies are the cp.async path's too
            paths += ((False, False),)
        for hopper, tma_store in paths:
            linalg.HOPPER, linalg.TMA_STORE = hopper, tma_store
            linalg.TUNE = hopper  # the cp.async kernel with matmul_config's tiles (no tuning)
            path = "cp.async" if not hopper else "tma-store" if tma_store else "register"
            linalg._PLANS.clear()
            calls = [("matmul", ref), ("matmul replayed", ref), ("linear+bias+gelu", ref_y)]
            if tma_store or not hopper:  # dx = dy @ w, dw = dy^T @ x (dy's strides swapped)
                calls += [("linear_backward dx", ref_dx), ("linear_backward dw", ref_dw)]
            for call, want in calls:
                label = f"{case} {path} {call}"
                print(f"STEP {label}", flush=True)
                _LAST_STEP[0] = label
                if call.startswith("matmul"):
                    got = linalg.matmul(a, b)
                elif call.startswith("linear+"):
                    got = linalg.linear(a, w, bias, "gelu")
                else:
                    got = linalg.linear_backward(dy, a, w, False)[call.endswith("dw")]
                torch.cuda.synchronize()
                cond, terms = conds[call.removesuffix(" replayed")]
                bound = 2 * PATH_OUTPUT_ROUNDING[dt] * want.abs()
                bound += 2 * (terms + 2) * 2.0**-24 * cond
                ratio = float(((got.double() - want).abs() / bound).max())
                steps.append((label, ratio))
        linalg.HOPPER, linalg.TMA_STORE, linalg.TUNE = True, True, True
        good = all(r <= 1.0 for _, r in steps)
        ok = ok and good
        out[case] = {"max error / bound": dict(steps), "ok": good}
    from teeny_tx import kernel as hopper_matmul

    built = hopper_matmul._hopper_specs
    out["hopper kernels built"] = [" ".join(map(str, key[:9])) for key in built]
    out["hopper choices"] = linalg.hopper_report()
    ok = ok and bool(hopper_matmul._hopper_specs)
    return {"ok": ok, **out}


def fp8_check() -> dict:
    """linalg.scaled_matmul on fp8 (e4m3 and e5m2) against the dequantised float64 product,
    and next to torch._scaled_mm; a ragged shape and 4096^3."""
    import torch

    from teeny_tx.library import linalg

    torch.manual_seed(3)
    out, ok = {}, True
    for dt in (torch.float8_e4m3fn, torch.float8_e5m2):
        for m, n, k in ((4096, 4096, 4096), (1000, 520, 384), (256, 256, 128)):
            a = (torch.randn(m, k, device="cuda") * 2).to(dt)
            b = (torch.randn(n, k, device="cuda") * 2).to(dt).t()  # [K, N] column-major
            sa = torch.tensor([0.5], device="cuda")
            sb = torch.tensor([0.25], device="cuda")
            bias = torch.randn(n, device="cuda", dtype=torch.bfloat16)
            c = linalg.scaled_matmul(a, b, sa, sb)
            cb = linalg.scaled_matmul(a, b, sa, sb, bias=bias, out_dtype=torch.float32)
            ref = (a.double() @ b.double()) * 0.125
            errs = [
                float((c.double() - ref).norm() / ref.norm()),
                float((cb.double() - ref - bias.double()).norm() / ref.norm()),
            ]
            try:
                peer = torch._scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16)
                errs.append(float((peer.double() - ref).norm() / ref.norm()))
            except Exception as err:  # noqa: BLE001 - the peer is a comparison only
                errs.append(repr(err)[:200])
            # element by element: wgmma accumulates fp8 products with about 14 mantissa bits
            # (DeepGEMM's measurement), each of its K / 32 steps erring by up to 2^-14 of the
            # products' magnitudes; then the output's rounding (bf16; f32 with the bias)
            cond = (a.double().abs() @ b.double().abs()) * 0.125
            acc = (k // 32 + 2) * 2.0**-14 * cond
            bounds = [2.0**-7 * ref.abs() + acc, 2.0**-23 * (ref + bias.double()).abs() + acc]
            ratios = [
                float(((c.double() - ref).abs() / bounds[0]).max()),
                float(((cb.double() - ref - bias.double()).abs() / bounds[1]).max()),
            ]
            good = max(ratios) <= 1.0
            ok = ok and good
            out[f"{dt} {m}x{n}x{k}"] = {
                "rel_err(bf16, f32+bias, torch._scaled_mm)": errs,
                "max error / bound (bf16, f32+bias)": ratios,
                "ok": good,
            }
    return {"ok": ok, **out}


def _stage(name: str, ok: bool, detail) -> bool:
    print(f"STAGE {name}: {'OK' if ok else 'FAIL'}  {json.dumps(detail, default=str)}", flush=True)
    return ok


def _first_failure(text: str) -> str:
    """The last STEP announced and the first line that reports an error: the call that failed
    and why, above CuPy's teardown noise (every module unload fails after a fault)."""
    lines = text.splitlines()
    steps = [line for line in lines if line.startswith("STEP ")]
    errors = [
        line.strip()
        for line in lines
        if "Error" in line or "CUDA_ERROR" in line or "error:" in line.lower()
    ]
    return (
        f"last call: {steps[-1][5:] if steps else '(none)'}; first error: "
        f"{errors[0] if errors else '(none)'}"
    )


def _subprocess(args, timeout, blocking=False):
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    if blocking:
        env["CUDA_LAUNCH_BLOCKING"] = "1"
    try:
        done = subprocess.run(
            [sys.executable, __file__, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            cwd=ROOT,
        )
    except subprocess.TimeoutExpired as err:
        return None, f"timed out after {timeout} s; output: {str(err.stdout or '')[-2000:]}"
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        text = done.stdout + "\n" + done.stderr
        summary = _first_failure(text)
        print(f"FAILED {' '.join(args)}: {summary}", flush=True)
        return None, f"exit {done.returncode}: {summary}; tail: {text[-1500:]}"
    return json.loads(lines[-1][len("RESULT ") :]), None


def main(argv) -> int:
    if argv[:1] == ["--one"]:
        case = next(c for c in CASES if c[0] == argv[1])
        print("RESULT " + json.dumps(run_case(case)), flush=True)
        return 0
    if argv[:1] == ["--fp8"]:
        print("RESULT " + json.dumps(fp8_check(), default=str), flush=True)
        return 0
    if argv[:1] == ["--linalg"]:
        try:
            result = linalg_check(argv[1] if len(argv) > 1 else None)
        except Exception as err:  # noqa: BLE001 - the report names the call and the error
            result = {"ok": False, "failed call": _LAST_STEP[0], "error": repr(err)[:2000]}
        print("RESULT " + json.dumps(result, default=str), flush=True)
        return 0
    # --only linalg,fp8: just those stages (names: tensor-map sass run linalg fp8 sanitizer)
    only = set(argv[argv.index("--only") + 1].split(",")) if "--only" in argv else None

    def want(stage: str) -> bool:
        return only is None or stage in only

    failures = 0
    # 1. device and tools
    try:
        import cupy as cp

        dev = cp.cuda.Device()
        info = {
            "cc": dev.compute_capability,
            "sms": dev.attributes["MultiProcessorCount"],
            "cupy": cp.__version__,
            "cuobjdump": cuobjdump(),
            "compute-sanitizer": shutil.which("compute-sanitizer"),
        }
        ok = dev.compute_capability == "90"
    except Exception as err:  # noqa: BLE001 - a report
        info, ok = {"error": repr(err)}, False
    if not _stage("device", ok, info):
        return 1
    # 2. a tensor map encoded on the host, passed by value
    if want("tensor-map"):
        try:
            from teeny_tx.runtime import tma

            x = cp.zeros((256, 512), cp.float16)
            value = tma.tensor_map_2d(x.data.ptr, "f16", 512, 256, 1024, (64, 128))
            ok = value.nbytes == 128 and value.view(np.uint64).any()
            detail = {
                "encoder": "libcuda" if tma._libcuda() else "cuda.bindings",
                "nonzero": bool(ok),
            }
        except Exception as err:  # noqa: BLE001
            ok, detail = False, {"error": repr(err)}
        failures += not _stage("tensor-map", ok, detail)
    # 3. compile + SASS per config
    if want("sass"):
        tool = cuobjdump()
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            for case in SASS_CONFIGS:
                try:
                    report = (
                        sass_report(case, tool, tmp)
                        if tool
                        else {"ok": False, "error": "no cuobjdump"}
                    )
                except Exception as err:  # noqa: BLE001
                    report = {"ok": False, "error": repr(err)[:3000]}
                failures += not _stage(f"compile+sass {case[0]}", report["ok"], report)
    # 4. correctness, one subprocess per case
    if want("run"):
        for case in CASES:
            timeout = 180 if case[8][0] >= 8192 else 90
            result, error = _subprocess(["--one", case[0]], timeout)
            if result is None:
                failures += not _stage(f"run {case[0]}", False, {"error": error})
            else:
                failures += not _stage(f"run {case[0]}", result["ok"], result)
    # 5. linalg integration, one subprocess per case with CUDA_LAUNCH_BLOCKING=1: a fault
    if want("linalg"):
        # raises at the launch that made it, and the last STEP line names that call
        for case in LINALG_CASES:
            result, error = _subprocess(["--linalg", case], 240, blocking=True)
            failures += not _stage(
                f"linalg {case}", result is not None and result["ok"], result or {"error": error}
            )
    # 6. fp8 through linalg.scaled_matmul
    if want("fp8"):
        result, error = _subprocess(["--fp8"], 240)
        failures += not _stage(
            "fp8", result is not None and result["ok"], result or {"error": error}
        )
    # 7. compute-sanitizer on one small case of each majorness
    if want("sanitizer"):
        sanitizer = shutil.which("compute-sanitizer")
        if sanitizer and "--no-sanitizer" not in argv:
            for tool_name in ("memcheck", "racecheck"):
                for case_name in ("bf16-kn-sanitize",):
                    cmd = [
                        sanitizer,
                        "--tool",
                        tool_name,
                        "--error-exitcode",
                        "9",
                        sys.executable,
                        __file__,
                        "--one",
                        case_name,
                    ]
                    try:
                        done = subprocess.run(
                            cmd, capture_output=True, text=True, timeout=150, cwd=ROOT
                        )
                        tail = (done.stdout + done.stderr)[-1500:]
                        ok = done.returncode == 0 and "RESULT" in done.stdout
                    except subprocess.TimeoutExpired:
                        ok, tail = False, "timed out after 150 s"
                    failures += not _stage(f"sanitizer {tool_name} {case_name}", ok, {"tail": tail})
    print(f"HOPPER GPU REPORT: {failures} stage(s) failed", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main(sys.argv[1:]))
