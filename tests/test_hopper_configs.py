"""The Hopper path's configurations on the CPU: the sweep's variants plan and compile for sm_90a
without spills (and assemble to what each one is for: two m64 wgmmas per K step with 128-row
consumers, TMA multicast and cluster barriers with clusters, TMA stores from panel buffers),
the planning rules of the new fields, and the tuner's choice (a fake timer, the disk cache)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from teeny_tx.library import hopper_configs as hc
from teeny_tx.lower.hopper.matmul import HopperConfig, TmaUnsupported, plan_matmul

PRODUCT = dict(
    dtype="bf16",
    out_dtype="bf16",
    a_kmajor=True,
    b_kmajor=False,
    bias_dtype=None,
    activation=0,
    pairs=True,
)


def _cuobjdump() -> str | None:
    found = shutil.which("cuobjdump")
    if found:
        return found
    try:  # the nvidia-cuda-cuobjdump wheel (with nvidia-cuda-nvdisasm beside it)
        import nvidia.cu13 as cu13

        path = Path(next(iter(cu13.__path__))) / "bin" / "cuobjdump"
        return str(path) if path.exists() else None
    except (ImportError, StopIteration):
        return None


def _sass(cubin: bytes, tmp_path) -> str | None:
    tool = _cuobjdump()
    if tool is None:
        return None
    path = tmp_path / "k.cubin"
    path.write_bytes(cubin)
    env = dict(os.environ, PATH=f"{Path(tool).parent}:{os.environ.get('PATH', '')}")
    done = subprocess.run([tool, "-sass", str(path)], capture_output=True, text=True, env=env)
    return done.stdout if done.returncode == 0 else None


def test_every_variant_of_the_large_tile_plans():
    first = hc.with_epilogue(hc.table_candidates(8192, 8192, 132, True)[0], True, 2, 2)
    assert first == hc.Candidate(HopperConfig(128, 256, 64, 3, 8), True)
    found = hc.variants(first, True)
    labels = [hc.label(c) for c in found]
    assert len(set(labels)) == len(labels) == len(found)
    for candidate in found:
        node = plan_matmul(**PRODUCT, tma_store=candidate.tma_store, config=candidate.config)
        assert node.shared_bytes <= 232448, node.label
        m = node.mainloop
        assert m.consumers * m.consumer_rows == m.bm * (2 if m.pingpong else 1)
        assert 128 * m.producer_regs + 128 * m.consumers * m.consumer_regs <= 65536
    clusters = [c for c in found if c.config.cluster == 2]
    assert {(c.config.bm, c.config.bn) for c in clusters} == {(128, 256), (256, 128)}


def test_variants_without_tma_stores_keep_the_register_epilogue():
    first = hc.with_epilogue(hc.table_candidates(4095, 4097, 132, False)[0], False, 2, 2)
    assert first == hc.Candidate(HopperConfig(128, 256, 64, 4, 8, cluster=2), False)
    found = hc.variants(first, False)
    assert not any(c.tma_store or c.config.store_panels for c in found)
    # the unclustered tile (the table's choice before the sweep) is among them
    assert hc.Candidate(HopperConfig(128, 256, 64, 3, 8), False) in found


@pytest.mark.parametrize(
    "m,n,k,dtype,tma_store_ok,expect",
    [
        # the H200 sweep's best candidates of 2026-12-01 (bench/sweep_hopper.py)
        (8192, 8192, 8192, "bf16", True, "128x256x64 s3 g8 tma-store epilogue"),
        (4096, 4096, 4096, "f16", True, "128x256x64 s3 g8 tma-store epilogue"),
        (4095, 4097, 1000, "f16", False, "128x256x64 s4 g8 cluster2 register epilogue"),
    ],
)
def test_the_table_takes_the_sweep_winners(m, n, k, dtype, tma_store_ok, expect):
    hc.CHOICES.clear()
    args = _choose_args() | dict(m=m, n=n, k=k, dtype=dtype, out_dtype=dtype)
    choice = hc.hopper_choose(**(args | {"tma_store_ok": tma_store_ok, "pairs": n % 2 == 0}))
    assert choice is not None and choice.report == f"{expect}: chosen"
    node = choice.kernel.node
    assert hc.label(hc.Candidate(config_of(node), node.epilogue.tma_store)) == expect


def config_of(node) -> HopperConfig:
    m = node.mainloop
    return HopperConfig(m.bm, m.bn, m.bk, m.stages, node.scheduler.group_m, m.atoms, m.cluster)


@pytest.mark.parametrize(
    "config,message",
    [
        (HopperConfig(256, 128, 64, 3, atoms=3), "atoms=3"),
        (HopperConfig(192, 128, 64, 3, atoms=2), "BM=192"),
        (HopperConfig(128, 256, 64, 3, cluster=4), "cluster=4"),
        (HopperConfig(128, 256, 64, 3, store_panels=3), "store_panels=3"),
        (HopperConfig(128, 256, 64, 4), "shared memory"),  # the whole staging tile: 3 stages
        (HopperConfig(128, 16, 64, 3, cluster=2), "multicast"),  # one panel cannot split
        (HopperConfig(256, 128, 64, 3, atoms=2, pingpong=True), "pingpong: BM=256"),
    ],
)
def test_new_fields_are_checked(config, message):
    with pytest.raises(TmaUnsupported, match=message):
        plan_matmul(**PRODUCT, tma_store=True, config=config)


def test_a_cluster_splits_b_between_its_ctas():
    node = plan_matmul(**PRODUCT, config=HopperConfig(128, 256, 64, 4, cluster=2))
    assert node.b.split == 2 and node.b.share == 2  # N-major: two of the four panels each
    assert node.b.box == (64, 64)
    kmajor = plan_matmul(**(PRODUCT | {"b_kmajor": True}), config=node_config(cluster=2))
    assert kmajor.b.share == 128 and kmajor.b.box == (64, 128)  # half the 256 N rows


def node_config(**kw) -> HopperConfig:
    return HopperConfig(128, 256, 64, 4, **kw)


@pytest.mark.parametrize(
    "b_kmajor,tma_store,config,expect",
    [
        (False, True, HopperConfig(256, 128, 64, 3, atoms=2), {"HGMMA": 8, "UTMASTG": 1}),
        (True, False, HopperConfig(256, 128, 64, 4, atoms=2), {"HGMMA": 8}),
        (False, True, node_config(store_panels=2), {"UTMASTG": 1}),
        (False, True, node_config(store_panels=1), {"UTMASTG": 1}),
        (False, True, HopperConfig(128, 256, 64, 3, cluster=2), {"MULTICAST": 1, "UCGABAR": 2}),
        (True, False, node_config(cluster=2), {"MULTICAST": 1, "UCGABAR": 2}),
        (False, True, HopperConfig(128, 128, 64, 5, atoms=2, pingpong=True), {"HGMMA": 8}),
        (True, False, HopperConfig(64, 256, 64, 5, pingpong=True), {"HGMMA": 4}),
        (
            True,
            True,
            HopperConfig(256, 128, 64, 4, atoms=2, cluster=2, store_panels=1),
            {"MULTICAST": 1, "UCGABAR": 2, "HGMMA": 8},
        ),
    ],
)
def test_variants_compile_for_sm90a_without_spills(b_kmajor, tma_store, config, expect, tmp_path):
    from teeny_tx.kernel import HopperSpecialization
    from teeny_tx.runtime import nvrtc

    product = PRODUCT | {"b_kmajor": b_kmajor}
    kernel = HopperSpecialization(plan_matmul(**product, tma_store=tma_store, config=config))
    result = kernel.compiled
    assert nvrtc.spilled_bytes(result.log) == 0, result.log
    assert "0 bytes stack frame" in result.log and "C7508" not in result.log
    assert "warning" not in result.log.lower(), result.log
    sass = _sass(result.cubin, tmp_path)
    if sass is None:
        return  # the SASS half runs where cuobjdump is (tests/gpu/test_hopper_gpu.py always)
    for op, least in expect.items():
        assert sass.count(op) >= least, (op, sass.count(op))
    assert "LDL" not in sass and "STL" not in sass
    if config.cluster == 1:
        assert "MULTICAST" not in sass and "UCGABAR" not in sass


def test_a_cluster_grid_is_a_whole_number_of_clusters():
    from teeny_tx.kernel import HopperSpecialization

    kernel = HopperSpecialization(plan_matmul(**PRODUCT, config=node_config(cluster=2)))
    assert kernel.grid(8192, 8192, 132) == 132  # 66 clusters of 2
    assert kernel.grid(383, 1032, 132) == 2 * 2 * 5  # 3 M tiles -> 2 cluster rows, 5 N tiles
    assert kernel.grid(100, 100, 3) == 2
    assert HopperSpecialization(plan_matmul(**PRODUCT)).grid(100, 100, 3) == 1


def _choose(timer, **kw):
    hc.CHOICES.clear()
    return hc.hopper_choose(
        8192,
        8192,
        8192,
        "bf16",
        "bf16",
        a_kmajor=True,
        b_kmajor=False,
        bias_dtype=None,
        activation=0,
        pairs=True,
        tma_store_ok=True,
        sms=132,
        local_bytes=lambda kernel: 0,
        timer=timer,
        device="a fake GPU",
        **kw,
    )


def test_the_tuner_takes_the_fastest_and_remembers_it_on_disk(tmp_path, monkeypatch):
    monkeypatch.setenv("TEENY_TX_CACHE_DIR", str(tmp_path))
    timed = []

    def timer(kernel):  # the 256 x 128 cluster is the "fastest"
        timed.append(kernel.node.label)
        m = kernel.node.mainloop
        return 1.0 if (m.bm, m.cluster, m.stages) == (256, 2, 3) else 2.0 + len(timed) / 100

    choice = _choose(timer)
    node = choice.kernel.node
    assert (node.mainloop.bm, node.mainloop.atoms, node.mainloop.cluster) == (256, 2, 2)
    # the table's choice, its variants, and the table's smaller tiles (128x128, 64x128)
    first = hc.Candidate(HopperConfig(128, 256, 64, 3), True)
    assert len(timed) == 1 + len(hc.variants(first, True)) + 2
    timed_count = len(timed)
    assert f"{node.label}: 1.0000 ms, chosen" in choice.report
    files = list((tmp_path / "autotune" / "hopper").glob("*.json"))
    assert len(files) == 1
    record = json.loads(files[0].read_text())
    assert record["chosen"] == node.label and record["device"] == "a fake GPU"
    # a new process (the memo emptied) reads the choice without timing
    again = _choose(timer)
    assert len(timed) == timed_count
    assert again.kernel.node.key == node.key and "(cached)" in again.report
    # another device tunes again
    hc.CHOICES.clear()
    other = hc.hopper_choose(
        **_choose_args(),
        timer=timer,
        device="another GPU",
    )
    assert other is not None and len(timed) == 2 * timed_count


@pytest.mark.parametrize(
    "damage, what",
    [
        ("[" * 100_000 + "]" * 100_000, "not JSON"),
        ("[1]", "holds a list"),
        ({"ms": [1.0]}, "'ms' that is not a mapping"),
        ({"ms": {"x": "fast"}}, "'ms' that is not a mapping"),
        ({"chosen": 3}, "no chosen config name"),
    ],
    ids=["deep", "list", "ms-list", "ms-str", "chosen-int"],
)
def test_a_damaged_hopper_record_is_timed_again_with_a_warning(tmp_path, monkeypatch, damage, what):
    monkeypatch.setenv("TEENY_TX_CACHE_DIR", str(tmp_path))
    timed = []

    def timer(kernel):
        timed.append(kernel.node.label)
        return 1.0 + len(timed) / 100

    _choose(timer)
    (path,) = (tmp_path / "autotune" / "hopper").glob("*.json")
    first = len(timed)
    good = json.loads(path.read_text())
    path.write_text(damage if isinstance(damage, str) else json.dumps({**good, **damage}))
    hc._warned.clear()
    with pytest.warns(UserWarning, match=re.escape(what)):
        _choose(timer)
    assert len(timed) == 2 * first  # timed again, not an exception


def _choose_args() -> dict:
    return dict(
        m=8192,
        n=8192,
        k=8192,
        dtype="bf16",
        out_dtype="bf16",
        a_kmajor=True,
        b_kmajor=False,
        bias_dtype=None,
        activation=0,
        pairs=True,
        tma_store_ok=True,
        sms=132,
        local_bytes=lambda kernel: 0,
    )


def test_the_tuner_skips_candidates_that_fail_or_spill(tmp_path, monkeypatch):
    monkeypatch.setenv("TEENY_TX_CACHE_DIR", str(tmp_path))

    def timer(kernel):
        if kernel.node.mainloop.cluster == 2:
            raise RuntimeError("cluster launch refused")
        return 1.0 if kernel.node.mainloop.stages == 4 else 3.0

    spills = lambda kernel: 8 if kernel.node.epilogue.store_panels else 0  # noqa: E731
    hc.CHOICES.clear()
    choice = hc.hopper_choose(**(_choose_args() | {"local_bytes": spills}), timer=timer)
    node = choice.kernel.node
    assert node.mainloop.stages == 4 and not node.epilogue.store_panels
    assert node.mainloop.cluster == 1
    assert "cluster2 tma-store epilogue: failed (cluster launch refused)" in choice.report
    assert "rejected, 8 bytes of local memory" in choice.report


def test_untimed_choice_is_the_table_and_times_nothing():
    choice = _choose(None)
    assert choice.report == "128x256x64 s3 g8 tma-store epilogue: chosen"


# ------------------------------------------------------------------ split-K


@pytest.mark.parametrize(
    "m,n,k,expect",
    [
        (1024, 1024, 1024, (64, 128, 1)),  # 128 tiles of 64 x 128 fill the SMs: unsplit
        (512, 520, 16384, (128, 128, 6)),  # 20 tiles: six K slices each
        (512, 512, 16384, (128, 128, 8)),  # the H200's best of 2026-12-01
        (64, 4096, 8192, (64, 128, 4)),  # M of 64: 32 tiles of 64 rows, 4 slices (the best)
        (300, 1001, 4096, (128, 128, 5)),  # 24 tiles, 120 units
        (2048, 2048, 8192, (128, 256, 1)),  # 128 tiles of 128 x 256 fill the SMs already
        (4096, 4096, 4096, (128, 256, 1)),
        (256, 256, 192, (128, 128, 1)),  # 3 K blocks: too short to split
        (1, 8, 8, (64, 128, 1)),
    ],
)
def test_the_table_splits_k_where_tiles_leave_sms_idle(m, n, k, expect):
    c = hc.table_candidates(m, n, 132, True, k)[0]
    assert (c.bm, c.bn, c.split_k) == expect
    units = -(-m // c.bm) * -(-n // c.bn) * c.split_k
    if c.split_k > 1:
        assert units <= 132 and -(-k // c.bk) >= 4 * c.split_k


def test_split_k_variants_time_other_splits_and_the_unsplit_tiles():
    first = hc.with_epilogue(hc.table_candidates(512, 512, 132, True, 16384)[0], True, 2, 2)
    assert first == hc.Candidate(HopperConfig(128, 128, 64, 5, 8, split_k=8), True)
    found = {(c.config.bm, c.config.bn, c.config.split_k) for c in hc.variants(first, True)}
    assert {(128, 128, 4), (128, 128, 16), (128, 128, 1), (64, 128, 1), (64, 128, 8)} <= found


@pytest.mark.parametrize(
    "config,message",
    [
        (HopperConfig(128, 128, 64, 5, split_k=17), "split_k=17"),
        (HopperConfig(128, 128, 64, 5, split_k=0), "split_k=0"),
        (HopperConfig(128, 128, 64, 5, split_k=2, cluster=2), "without clusters"),
        (HopperConfig(128, 128, 64, 5, atoms=2, pingpong=True, split_k=2), "ping-pong"),
    ],
)
def test_split_k_plans_are_checked(config, message):
    with pytest.raises(TmaUnsupported, match=message):
        plan_matmul(**PRODUCT, tma_store=True, config=config)


def test_split_k_shared_memory_grid_and_workspace():
    from teeny_tx.kernel import HopperSpecialization
    from teeny_tx.runtime.hopper import split_bytes

    plain = plan_matmul(**PRODUCT, tma_store=True, config=HopperConfig(128, 128, 64, 5))
    node = plan_matmul(**PRODUCT, tma_store=True, config=HopperConfig(128, 128, 64, 5, split_k=3))
    assert node.shared_bytes == plain.shared_bytes + 16  # the block's "last unit" flag
    assert node.key[:-1] == plain.key and node.key[-1] == "split3"
    assert "split3" in node.label
    kernel = HopperSpecialization(node)
    assert kernel.grid(1024, 1024, 132) == 132 and kernel.grid(300, 200, 132) == 3 * 2 * 3
    assert split_bytes(node, 300, 200) == (6 * 3 * 128 * 128 * 4, 6)


@pytest.mark.parametrize(
    "b_kmajor,tma_store,config,bias",
    [
        (False, True, HopperConfig(128, 128, 64, 5, split_k=2), None),
        (True, False, HopperConfig(128, 128, 64, 6, split_k=4), "f16"),
        (False, True, HopperConfig(64, 128, 64, 8, split_k=3), "bf16"),
        (True, False, HopperConfig(128, 256, 64, 4, split_k=2), None),
    ],
)
def test_split_k_compiles_for_sm90a_without_spills(b_kmajor, tma_store, config, bias, tmp_path):
    from teeny_tx.kernel import HopperSpecialization
    from teeny_tx.runtime import nvrtc

    product = PRODUCT | {"b_kmajor": b_kmajor, "bias_dtype": bias, "activation": 1 if bias else 0}
    node = plan_matmul(**product, tma_store=tma_store, config=config)
    kernel = HopperSpecialization(node)
    source = kernel.cuda_source
    assert "atomicAdd(&counters[tile], 1)" in source and "__stcg(parts" in source
    assert "for (int kb = kb_begin; kb < kb_end; ++kb)" in source
    result = kernel.compiled
    assert nvrtc.spilled_bytes(result.log) == 0, result.log
    assert "0 bytes stack frame" in result.log
    sass = _sass(result.cubin, tmp_path)
    if sass is None:
        return
    assert "LDL" not in sass and "STL" not in sass
    assert "ATOMG" in sass or "RED" in sass  # the tile counter
    assert sass.count("HGMMA") >= 4 and "UTMALDG" in sass


def test_the_tuner_times_the_splits_of_a_long_k_product(tmp_path, monkeypatch):
    monkeypatch.setenv("TEENY_TX_CACHE_DIR", str(tmp_path))
    timed = []

    def timer(kernel):  # split4 of 128 x 128 is the "fastest"
        m = kernel.node.mainloop
        timed.append((m.bm, m.bn, m.split_k))
        return 1.0 if (m.bm, m.split_k) == (128, 4) else 2.0

    hc.CHOICES.clear()
    args = _choose_args() | dict(m=512, n=512, k=16384)
    choice = hc.hopper_choose(**args, timer=timer, device="a fake GPU")
    m = choice.kernel.node.mainloop
    assert (m.bm, m.bn, m.split_k) == (128, 128, 4)
    assert (128, 128, 8) in timed and (128, 128, 1) in timed and (64, 128, 16) in timed
    assert "split4 tma-store epilogue: 1.0000 ms, chosen" in choice.report
