"""The Hopper TMA + wgmma matmul path on the CPU: planning rules, golden files, NVRTC compile for
sm_90a (and the SASS it assembles to, where cuobjdump is installed). The device run is
tests/gpu/test_hopper_gpu.py.

The golden files are tests/cases.py's HOPPER_GOLDENS: the test only compares; re-bless on
purpose with ``teeny-tx golden --bless``."""

from __future__ import annotations

import difflib
import shutil
import subprocess
from pathlib import Path

import pytest

from teeny_tx.lower.hopper.matmul import (
    HopperConfig,
    TmaUnsupported,
    plan_matmul,
    tma_operand_view,
)
from teeny_tx.templates.hopper import render_matmul

from .cases import HOPPER_GOLDENS, render_hopper_golden

ROOT = Path(__file__).resolve().parents[1]
GOLDENS = HOPPER_GOLDENS


@pytest.mark.parametrize("name", sorted(GOLDENS))
def test_golden(name):
    path = ROOT / "golden" / name
    text = render_hopper_golden(name)
    expected = path.read_text()
    if text != expected:
        diff = "".join(difflib.unified_diff(expected.splitlines(True), text.splitlines(True)))
        pytest.fail(
            f"generated Hopper CUDA changed; re-bless with `teeny-tx golden --bless`\n{diff}"
        )


def test_golden_names_each_part():
    text = (ROOT / "golden" / "hopper_matmul.f16.bias_gelu.sm90a.cu").read_text()
    for part in (
        "---- pipeline stages",
        "---- producer",
        "---- consumer loop",
        "---- epilogue",
        "---- tile scheduler",
        "producer_registers<40>",
        "consumer_registers<232>",
        "__launch_bounds__(384, 1)",
        "const __grid_constant__ tx::hopper::TensorMap tma_a",
        "tma_load_2d",
        "barrier_expect_bytes",
        "gelu(alpha * acc + bias)",
    ):
        assert part in text, part


def test_rendering_is_deterministic():
    kw = GOLDENS["hopper_matmul.bf16.linear.sm90a.cu"]
    assert render_matmul(plan_matmul(**kw)) == render_matmul(plan_matmul(**kw))


@pytest.mark.parametrize(
    "kw,message",
    [
        (dict(dtype="f64"), "f32 as TF32, not f64"),
        (dict(dtype="f32", a_kmajor=False), "f32 operands K-major only"),
        (dict(dtype="f8e4m3", b_kmajor=False), "K-major only"),
        (dict(config=HopperConfig(bm=96)), "BM=96"),
        (dict(config=HopperConfig(bn=512)), "BN=512"),
        (dict(config=HopperConfig(bk=48)), "BK=48"),
        (dict(config=HopperConfig(stages=8)), "shared memory"),
    ],
)
def test_plan_rejects_what_tma_and_wgmma_cannot_do(kw, message):
    args = dict(dtype="f16", out_dtype="f16", a_kmajor=True, b_kmajor=True) | kw
    with pytest.raises(TmaUnsupported, match=message) as err:
        plan_matmul(**args)
    assert "error:" in str(err.value)


def test_tma_view_rules():
    assert tma_operand_view("a", "f16", 100, 64, 64, 1, 0x1000) == (True, 128)
    assert tma_operand_view("b", "bf16", 64, 100, 1, 72, 0x1000) == (False, 144)
    with pytest.raises(TmaUnsupported, match="one unit stride"):
        tma_operand_view("a", "f16", 100, 64, 128, 2, 0x1000)
    with pytest.raises(TmaUnsupported, match="multiple of 16 bytes"):
        tma_operand_view("b", "f16", 1000, 4097, 4097, 1, 0x1000)
    with pytest.raises(TmaUnsupported, match="16-byte aligned"):
        tma_operand_view("a", "f16", 100, 64, 64, 1, 0x1002)


def test_tile_counts_fit_the_registers_and_shared_memory():
    for cfg in (HopperConfig(), HopperConfig(128, 128, 64, 6), HopperConfig(64, 128, 64, 8)):
        node = plan_matmul(
            dtype="bf16", out_dtype="bf16", a_kmajor=True, b_kmajor=False, config=cfg
        )
        m = node.mainloop
        assert 128 * m.producer_regs + 128 * m.consumers * m.consumer_regs <= 65536
        assert node.shared_bytes <= 232448
        assert m.threads == 128 * (1 + cfg.bm // 64)


def _cuobjdump():
    found = shutil.which("cuobjdump")
    if found:
        return found
    try:
        import triton

        path = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
        return str(path) if path.exists() else None
    except ImportError:
        return None


@pytest.mark.parametrize(
    "a_kmajor,b_kmajor,cfg",
    [
        (True, True, HopperConfig()),
        (True, False, HopperConfig(128, 128, 64, 6)),
        (False, False, HopperConfig(64, 128, 64, 8)),
    ],
)
def test_nvrtc_compiles_for_sm90a_without_spills(a_kmajor, b_kmajor, cfg, tmp_path):
    from teeny_tx.kernel import HopperSpecialization
    from teeny_tx.runtime import nvrtc

    node = plan_matmul(
        dtype="f16", out_dtype="f16", a_kmajor=a_kmajor, b_kmajor=b_kmajor, config=cfg
    )
    result = HopperSpecialization(node).compiled
    assert result.cubin[:4] == b"\x7fELF"
    assert nvrtc.spilled_bytes(result.log) == 0
    assert "C7508" not in result.log  # setmaxnreg was not ignored
    tool = _cuobjdump()
    if tool is None:
        return  # the SASS check runs where cuobjdump is (the GPU test always runs it)
    path = tmp_path / "k.cubin"
    path.write_bytes(result.cubin)
    sass = subprocess.run([tool, "-sass", str(path)], capture_output=True, text=True).stdout
    for op in ("UTMALDG", "HGMMA", "SYNCS", "USETMAXREG"):
        assert op in sass, op
    assert "LDL" not in sass and "STL" not in sass


@pytest.mark.parametrize("dtype", ["f8e4m3", "f8e5m2"])
def test_fp8_compiles_to_qgmma(dtype, tmp_path):
    """fp8 operands: BK = 128 (128 bytes of K per row), wgmma m64nNk32 without transpose bits,
    per-tensor scales read in the epilogue; QGMMA in the SASS, no spills."""
    from teeny_tx.kernel import HopperSpecialization
    from teeny_tx.runtime import nvrtc

    node = plan_matmul(dtype=dtype, out_dtype="bf16", a_kmajor=True, b_kmajor=True, scaled=True)
    assert node.mainloop.bk == 128 and node.mainloop.k_step == 32
    kernel = HopperSpecialization(node)
    assert "k32.f32." in kernel.cuda_source and "scale_a[0] * scale_b[0]" in kernel.cuda_source
    result = kernel.compiled
    assert nvrtc.spilled_bytes(result.log) == 0
    tool = _cuobjdump()
    if tool is None:
        return
    path = tmp_path / "k.cubin"
    path.write_bytes(result.cubin)
    sass = subprocess.run([tool, "-sass", str(path)], capture_output=True, text=True).stdout
    assert "QGMMA" in sass and "UTMALDG" in sass and "LDL" not in sass


def test_tma_store_epilogue_compiles_to_utmastg(tmp_path):
    """The TMA-store epilogue: a swizzled staging tile per consumer, an async-proxy fence and a
    named barrier before the stores, and a read-wait before the tile is reused."""
    from teeny_tx.kernel import HopperSpecialization
    from teeny_tx.runtime import nvrtc

    kw = GOLDENS["hopper_matmul.bf16.tma_store.sm90a.cu"]
    node = plan_matmul(**kw)
    assert node.shared_bytes <= 232448
    kernel = HopperSpecialization(node)
    src = kernel.cuda_source
    fence = src.index("tx::fence_async_proxy();  // the generic stores above")
    assert src.index("tma_store_wait_read<0>()") < fence < src.index("tx::hopper::tma_store_2d(")
    result = kernel.compiled
    assert nvrtc.spilled_bytes(result.log) == 0
    with pytest.raises(TmaUnsupported, match="shared memory"):
        plan_matmul(**(kw | {"config": HopperConfig(128, 256, 64, 4)}))
    tool = _cuobjdump()
    if tool is None:
        return
    path = tmp_path / "k.cubin"
    path.write_bytes(result.cubin)
    sass = subprocess.run([tool, "-sass", str(path)], capture_output=True, text=True).stdout
    assert "UTMASTG" in sass and "UTMALDG" in sass and "LDL" not in sass


@pytest.mark.parametrize(
    "mn,tile",
    [
        ((8192, 8192), (128, 256)),
        ((2048, 2048), (128, 256)),
        ((2048, 1024), (128, 128)),
        ((1024, 1024), (64, 128)),
        ((1, 8), (64, 128)),
    ],
)
def test_linalg_hopper_tiles_fill_the_machine(mn, tile):
    """The largest Hopper tile that still gives 3/4 of a wave of tiles on 132 SMs, and it
    plans (fits shared memory and the registers)."""
    from teeny_tx.library import linalg

    config = linalg.hopper_config(*mn)
    assert (config.bm, config.bn) == tile
    plan_matmul(dtype="bf16", out_dtype="bf16", a_kmajor=True, b_kmajor=False, config=config)


def _choose(local_bytes, out_dtype="bf16", tma_store_ok=True, mn=(8192, 8192)):
    from teeny_tx.library import linalg

    linalg.HOPPER_CHOICES.clear()
    return linalg.hopper_choose(
        *mn,
        4096,
        "bf16",
        out_dtype,
        a_kmajor=True,
        b_kmajor=False,
        bias_dtype=None,
        activation=0,
        pairs=True,
        tma_store_ok=tma_store_ok,
        sms=132,
        local_bytes=local_bytes,
    )


def test_hopper_choice_takes_the_measured_tma_store_config():
    choice = _choose(lambda kernel: 0)
    c = choice.kernel.node
    assert (c.mainloop.bm, c.mainloop.bn, c.mainloop.stages) == (128, 256, 3)
    assert c.epilogue.tma_store
    assert choice.report == "128x256x64 s3 g8 tma-store epilogue: chosen"


def test_hopper_choice_register_epilogue_where_tma_store_cannot_apply():
    choice = _choose(lambda kernel: 0, tma_store_ok=False)
    node = choice.kernel.node
    # the table's register row: 4 stages as a 2-CTA cluster (the ragged product's sweep winner)
    assert not node.epilogue.tma_store and node.mainloop.stages == 4
    assert node.mainloop.cluster == 2
    # an f32 staging tile of 128x256 would leave 2 stages: the register epilogue instead
    node = _choose(lambda kernel: 0, out_dtype="f32").kernel.node
    assert not node.epilogue.tma_store and (node.mainloop.bn, node.mainloop.stages) == (256, 4)
    # 128x128 with f32 out keeps TMA stores: 5 stages of 32 KiB and 64 KiB of staging fit
    node = _choose(lambda kernel: 0, out_dtype="f32", mn=(2048, 1024)).kernel.node
    assert node.epilogue.tma_store and (node.mainloop.bn, node.mainloop.stages) == (128, 5)


def test_hopper_choice_rejects_configs_that_spill():
    from teeny_tx.library import linalg

    spills = lambda kernel: 24 if kernel.node.mainloop.bn == 256 else 0  # noqa: E731
    choice = _choose(spills)
    assert choice.kernel.node.mainloop.bn == 128
    assert "128x256x64 s3 g8 tma-store epilogue: rejected, 24 bytes of local memory" in (
        choice.report
    )
    assert "128x128x64 s5 g8 tma-store epilogue: chosen" in linalg.hopper_report()
    assert _choose(lambda kernel: 8) is None  # every config spills: the cp.async kernel
    assert "rejected" in linalg.hopper_report() and "chosen" not in linalg.hopper_report()
