"""The teeny-tx command line: compile's target and pipeline options, and the demo's matmul."""

import os

import numpy as np

from teeny_tx import cli, demo

DEFINES = (
    "c=f16 a=f16 b=f16 bias=f16 M=4096 N=4096 K=4096 sam=4096 sbk=4096 scm=4096 HAS_BIAS=0 "
    "sab=0 sbb=0 scb=0 ACT=0 PRECISION=20 A_T=0 B_T=0 BM=128 BN=256 BK=64 GROUP_M=8 "
    "sak=1 sbn=1 scn=1 alpha=1.0"
)
MATMUL = ["kernels/matmul.c", "-k", "matmul", "--num-warps", "8"]
for define in DEFINES.split():
    MATMUL += ["-D", define]


def test_compile_takes_the_target_and_the_pipeline_depth(tmp_path, monkeypatch):
    # --arch is the module's target; TEENY_TX_ARCH (read, never written) does not override it
    monkeypatch.setenv("TEENY_TX_ARCH", "sm_90")
    out = tmp_path / "mm.cu"
    assert (
        cli.main(["compile", *MATMUL, "--arch", "sm_90a", "--num-stages", "4", "-o", str(out)]) == 0
    )
    text = out.read_text()
    assert "wgmma.mma_async" in text and "tx::cp_async_wait<1>();" in text
    assert (
        cli.main(["compile", *MATMUL, "--arch", "sm_90", "--num-stages", "1", "-o", str(out)]) == 0
    )
    text = out.read_text()
    assert "wgmma" not in text and "cp_async" not in text and "tx::MmaF16" in text
    assert os.environ["TEENY_TX_ARCH"] == "sm_90"


def test_demo_matmul_case_on_the_interpreter():
    rng = np.random.default_rng(0)
    assert demo._matmul("bf16", None, rng, gpu=False) < 1e-5
    assert 1e-5 < demo._matmul("f32", "tf32", rng, gpu=False) < 2e-3
