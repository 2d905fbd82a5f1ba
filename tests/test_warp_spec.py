"""lower/passes/warp_spec.py: a TMA-pipelined loop fed by a producer warpgroup, when it applies.

A kernel that declares the constexpr WARP_SPECIALIZE and is launched with 1 gets, where its
one top-level pipelined loop loads every stage by TMA, a producer warpgroup after its warps
(the loop's ir.WarpSpec: the scalar slice the copies read, the threads, setmaxnreg's counts);
where a rule refuses, the loop keeps its form and the kernel says why. The generated CUDA
splits the roles after the barriers' initialisation, the compute warps meet at named barrier 1
from then on, and NVRTC compiles it for sm_90a without spills.
"""

import subprocess

import numpy as np
import pytest

import teeny_tx as tx
from teeny_tx.kernel import HEADERS
from teeny_tx.library import attention as tattn
from teeny_tx.library.loader import kernel_text
from teeny_tx.lower import ir
from teeny_tx.lower.ir import walk_stmts
from teeny_tx.lower.passes import warp_spec
from teeny_tx.runtime import nvrtc
from tests.cases import _attention_fwd_args, _attention_fwd_flags

from .test_hopper import _cuobjdump


@pytest.fixture(scope="module")
def tma_attention():
    mod = tx.compile(kernel_text("attention.c"), name="kernels/attention.c")
    mod.pipeline_tma = True
    return mod


def _fwd(mod, d=128, causal=1, ws=1, dtype="f16", arch="sm_90a", stages=3, warps=8):
    bn = 128 if d == 128 else 64
    return mod.attention_fwd.specialize(
        *_attention_fwd_args(dtype, d),
        num_warps=warps,
        num_stages=stages,
        target=arch,
        strided=True,
        **_attention_fwd_flags(dtype, d, causal, 16 * warps, bn, ws),
    )


def _loop(spec) -> ir.PipelinedLoop:
    (p,) = [s for s in walk_stmts(spec.kernel.body) if isinstance(s, ir.PipelinedLoop)]
    return p


# ---------------------------------------------------------------- the decision


def test_the_attention_forward_is_warp_specialized(tma_attention):
    """The producer computes only what the K/V boxes and the key loop read: the program ids,
    the batch and key/value head, and the causal bound; 4 warps after the 8 compute warps."""
    spec = _fwd(tma_attention)
    p = _loop(spec)
    ws = p.warp_spec
    assert ws is not None and spec.kernel.warp_spec_refused is None
    assert [s.name for s in ws.slice] == ["pid_m", "bh", "b", "h", "hk", "m0", "first", "last"]
    assert (ws.compute_threads, ws.producer_registers, ws.consumer_registers) == (256, 24, 240)
    assert spec.kernel.producer_warps == 4 and spec.block == (384, 1, 1)


def test_off_unless_asked(tma_attention):
    spec = _fwd(tma_attention, ws=0)
    assert _loop(spec).warp_spec is None and spec.kernel.producer_warps == 0
    assert spec.kernel.warp_spec_refused is None and spec.block == (256, 1, 1)
    assert "warp specialisation" not in spec.cuda_source
    assert "__launch_bounds__(256)" in spec.cuda_source


def test_registers_split_the_file():
    """24 per producer thread; the compute warps take what the block was launched with and the
    producer gave back (384 threads start at 168 each, 640 at 96), at most 240, multiples of 8."""
    assert warp_spec.consumer_registers(8) == 240  # 384 * 168 = 128 * 24 + 256 * 240
    assert warp_spec.consumer_registers(4) == 248  # 256 threads start at 248: kept
    assert warp_spec.consumer_registers(16) == 112  # 640 * 96 >= 128 * 24 + 512 * 112
    for warps in (4, 8, 16):
        regs = warp_spec.consumer_registers(warps)
        threads = 32 * (warps + 4)
        entry = min(255, 65536 // threads) // 8 * 8
        assert regs % 8 == 0 and (32 * warps * regs + 128 * 24 <= threads * entry or regs == entry)


@pytest.mark.parametrize(
    ("arch", "tma", "why"),
    [
        ("sm_90", True, "does not load its stages by TMA"),  # no wgmma: no mbarrier hand-over
        ("sm_90a", False, "does not load its stages by TMA"),  # cp.async copies
    ],
)
def test_refused_without_tma(arch, tma, why):
    mod = tx.compile(kernel_text("attention.c"), name="kernels/attention.c")
    mod.pipeline_tma = tma
    spec = _fwd(mod, arch=arch, stages=2)  # sm_90's mma.sync takes a scratch beside 2 stages
    assert spec.kernel.producer_warps == 0 and _loop(spec).warp_spec is None
    assert why in spec.kernel.warp_spec_refused
    assert f"not warp-specialised: {spec.kernel.warp_spec_refused}" in spec.cuda_source
    assert "__launch_bounds__(256)" in spec.cuda_source


# A dot loop whose B tiles TMA can copy (64 f16 columns: one 128-byte panel, rows bounded by
# n); {pre} and {post} are statements before and after the loop, {start} its first key, {head}
# and {tail} what wraps it. 2 stages: with 3, its one dot would run on into the next iteration,
# and such a loop's stages change hands without mbarriers.
DOT = """
kernel ws_dot(f32 *out, const f16 *a, const f16 *b, const i32 *offsets, i32 n, i32 sa, i32 sb,
              const i32 WARP_SPECIALIZE)
{{
    i32 pid = program_id(0);
    tile rm = pid * 128 + arange(0, 128);
    tile rk = expand_dims(arange(0, 64), 0);
    tile rn = expand_dims(arange(0, 64), 1);
    tile a_t = load(a + expand_dims(rm, 1) * sa + rk);
    f32 acc[128][64] = 0;
    {pre}
    {head}
    for (i32 start = {start}; start < n; start += 64) {{
        tile b_t = load(b + (rn + start) * sb + rk, rn + start < n, 0);
        acc = dot(a_t, trans(b_t), acc);
    }}
    {tail}
    {post}
    store(out + expand_dims(rm, 1) * 64 + rk, acc);
}}
"""


def _dot_spec(pre="", start="0", head="", tail="", post="", ws=1):
    src = DOT.format(pre=pre, start=start, head=head, tail=tail, post=post)
    mod = tx.compile(src, name="ws_dot.c")
    mod.pipeline_tma = True
    return mod.ws_dot.specialize(
        "f32", "f16", "f16", "i32", 1000, 64, 64,
        WARP_SPECIALIZE=ws, num_warps=8, num_stages=2, target="sm_90a",
    )  # fmt: skip


def test_a_kernel_of_its_own_is_warp_specialized():
    spec = _dot_spec(pre="i32 first = pid % 2 * 64;", start="first")
    ws = _loop(spec).warp_spec
    assert ws is not None, spec.kernel.warp_spec_refused
    assert [s.name for s in ws.slice] == ["pid", "first"]


@pytest.mark.parametrize(
    ("parts", "why"),
    [
        ({"pre": "i32 first = load(offsets + pid);", "start": "first"}, "whose value reads memory"),
        ({"pre": "i32 first = 0; first = pid;", "start": "first"}, "`first`, which is assigned"),
        ({"head": "if (pid < 4) {", "tail": "}"}, "is nested in a loop or an if"),
        ({"post": "if (pid > 1000) return;"}, "returns early"),
        ({"post": "debug_barrier();"}, "debug_barrier"),
        (
            {
                "post": "for (i32 s2 = 0; s2 < n; s2 += 64) { tile c_t = load(b + (rn + s2) * sb"
                " + rk, rn + s2 < n, 0); acc = dot(a_t, trans(c_t), acc); }"
            },
            "2 pipelined loops",
        ),
    ],
)
def test_refusals_keep_the_loop(parts, why):
    """Each rule of lower/passes/warp_spec.py: the loop keeps today's form (thread 0 issues the
    copies ahead) and the generated CUDA says why it is not warp-specialised."""
    spec = _dot_spec(**parts)
    refused = spec.kernel.warp_spec_refused
    assert refused is not None and why in refused, refused
    assert spec.kernel.producer_warps == 0
    assert all(p.warp_spec is None for p in walk_stmts(spec.kernel.body) if hasattr(p, "warp_spec"))
    assert "not warp-specialised: " in spec.cuda_source


def test_num_warps_of_whole_warpgroups(tma_attention):
    spec = _fwd(tma_attention, warps=4, d=64)
    assert _loop(spec).warp_spec is not None  # 4 warps: one compute warpgroup
    assert spec.block == (256, 1, 1)
    src = spec.cuda_source  # 248 registers at launch: no setmaxnreg.inc (it would lower them)
    assert "tx::hopper::producer_registers<24>();" in src
    assert "consumer_registers<" not in src and "with the 248 registers they started" in src


# ---------------------------------------------------------------- the CUDA


def test_the_roles_in_the_cuda(tma_attention):
    """One __syncthreads (after the barriers' initialisation), then the producer's branch
    (setmaxnreg.dec, its slice, the boxes of every iteration after its stage's release) and
    the compute warps' (setmaxnreg.inc, the scratch helpers and barriers on named barrier 1)."""
    src = _fwd(tma_attention).cuda_source
    assert "__launch_bounds__(384, 1)" in src
    assert src.count("__syncthreads();") == 1
    producer, compute = src.split("tx::hopper::consumer_registers<240>();")
    assert "tx::stage_barriers_init_tma(tx_stage_barriers, 3, 256);" in producer
    assert "tx::hopper::producer_registers<24>();" in producer
    assert "if (threadIdx.x >= 256) {" in producer and "if (threadIdx.x == 256) {" in producer
    assert producer.count("tx::hopper::tma_load_4d(") == 4  # K and V, two panels each
    assert "tx::stage_wait_empty(&tx_stage_barriers[3 + tx_stage]" in producer
    assert "const tx::Threads<256> tx_scratch{tx_smem};" in compute
    assert "tx::hopper::tma_load_4d(" not in compute
    assert "tx::relayout<tx_L0, tx_L1>(tx_rm_cvt, rm, tx_scratch," in compute
    assert compute.count("tx::hopper::named_barrier(1, 256);") == 2  # Q staged; the loop's end
    assert "tx::stage_arrive_empty(&tx_stage_barriers[3 + tx_stage]);" in compute
    assert "stage_barriers_drain" not in src  # the producer issues no copy past the end


def test_golden_is_the_launch_config():
    """The golden of the new form is the wrapper's D = 128 config, warp-specialised."""
    from tests.cases import GOLDEN

    (g,) = [g for g in GOLDEN if g.stem == "attention_fwd.f16.d128.ws.sm90a"]
    c = tattn.FORWARD[128]
    assert (g.num_warps, g.num_stages, g.constexprs["BN"]) == (c.num_warps, c.num_stages, c.bn)
    assert g.constexprs["WARP_SPECIALIZE"] == 1


@pytest.mark.parametrize(
    ("d", "causal", "dtype", "stages"),
    [(64, 0, "f16", 3), (64, 1, "bf16", 4), (128, 0, "f16", 3), (128, 1, "bf16", 2)],
)
def test_nvrtc_compiles_without_spills(tma_attention, d, causal, dtype, stages):
    """sm_90a, the compute warps' code under the 240-register cap: no spills; in the SASS
    (where cuobjdump is installed) the two setmaxnreg, one block-wide barrier, the rest on
    barrier 1, no local memory, and at D = 128 registers past the entry cap of 168."""
    spec = _fwd(tma_attention, d=d, causal=causal, dtype=dtype, stages=stages)
    result = nvrtc.compile_with_log(
        spec.cuda_source, name="attention_fwd", arch="sm_90a", headers=HEADERS,
        options=nvrtc.DEFAULT_OPTIONS + ("-Xptxas=-v",),
    )  # fmt: skip
    assert result.cubin[:4] == b"\x7fELF"
    assert nvrtc.spilled_bytes(result.log) == 0, result.log
    tool = _cuobjdump()
    if tool is None:
        return
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "k.cubin"
        path.write_bytes(result.cubin)
        sass = subprocess.run(
            [tool, "-sass", str(path)], capture_output=True, text=True, check=True
        ).stdout
    assert "USETMAXREG.DEALLOC.CTAPOOL 0x18" in sass
    assert "USETMAXREG.TRY_ALLOC.CTAPOOL" in sass and ", 0xf0" in sass
    assert sass.count("BAR.SYNC.DEFER_BLOCKING 0x0 ;") == 1
    assert "BAR.SYNC.DEFER_BLOCKING 0x1, 0x100" in sass
    assert "STL" not in sass and "LDL" not in sass
    import re

    top = max(int(r) for r in re.findall(r"\bR(\d+)\b", sass))
    assert top < 240
    if d == 128:  # more than the entry cap of 384 threads: allocated under setmaxnreg's 240
        assert top > 168


# ---------------------------------------------------------------- the interpreter


@pytest.mark.parametrize("causal", [False, True])
def test_interpreter_results_unchanged(causal):
    """Warp specialisation changes the schedule only: the interpreter (which runs the typed IR)
    gives the same bits with WARP_SPECIALIZE on as off, through the wrapper."""
    rng = np.random.default_rng(3)
    q = rng.standard_normal((1, 67, 4, 64)).astype(np.float16)
    k, v = (rng.standard_normal((1, 67, 2, 64)).astype(np.float16) for _ in range(2))
    outs = []
    for ws in (False, True):
        tattn.WARP_SPECIALIZE, before = ws, tattn.WARP_SPECIALIZE
        try:
            outs.append(tattn.attention(q, k, v, causal, interpret=True))
        finally:
            tattn.WARP_SPECIALIZE = before
    (o0, l0), (o1, l1) = outs
    assert np.array_equal(o0, o1) and np.array_equal(l0, l1)
    want, _ = tattn.attention_reference(q, k, v, causal)
    assert np.abs(o1.astype(np.float64) - want).max() < 6e-3


# ---------------------------------------------------------------- ping-pong (WARP_SPECIALIZE=2)


def _fresh_tma_attention():
    """attention.c compiled again (its specialisations are memoised per module: one made under
    another switch would be found instead), K/V by TMA."""
    mod = tx.compile(kernel_text("attention.c"), name="kernels/attention.c")
    mod.pipeline_tma = True
    return mod


@pytest.fixture
def pingpong(monkeypatch):
    """The experimental ping-pong switched on ($TEENY_TX_WS_PINGPONG=1): a module made under it."""
    monkeypatch.setenv("TEENY_TX_WS_PINGPONG", "1")
    return _fresh_tma_attention()


def test_pingpong_is_off_unless_switched_on(monkeypatch):
    """WARP_SPECIALIZE=2 alone is the producer warpgroup (the ping-pong is experimental)."""
    monkeypatch.delenv("TEENY_TX_WS_PINGPONG", raising=False)
    spec = _fwd(_fresh_tma_attention(), ws=2)
    ws = _loop(spec).warp_spec
    assert ws is not None and not ws.pingpong and "experimental" in ws.pingpong_refused
    assert "tx_warpgroup" not in spec.cuda_source
    assert "WARP_SPECIALIZE=2, but no ping-pong: the ping-pong is experimental" in spec.cuda_source


def test_pingpong_takes_turns_at_each_dot(pingpong):
    """Both dots of the loop are turns: the operands' registers fenced and the block ended
    (so neither NVVM nor ptxas moves the softmax into the turn), the warpgroup's own barrier
    (2 + w) before the issue, a bar.arrive on the other's after it, then the wait; warpgroup 1
    gives the first turn and warpgroup 0 takes the last pass after the loop."""
    spec = _fwd(pingpong, ws=2)
    ws = _loop(spec).warp_spec
    assert ws is not None and ws.pingpong and ws.pingpong_refused is None
    src = spec.cuda_source
    compute = src.split("tx::hopper::consumer_registers<240>();")[1]
    assert "const int tx_warpgroup = tx::hopper::warpgroup();" in compute
    loop = compute.split(
        "for (int start = first; start < last; start = tx::wrap_add<int>(start, BN)) {"
    )[1]
    turn = "tx::hopper::named_barrier(2 + tx_warpgroup, 256);"
    pass_ = "tx::hopper::named_barrier_arrive(2 + (tx_warpgroup ^ 1), 256);"
    order = [line.strip().split("  //")[0] for line in loop.split("\n")]
    order = [x for x in order if x in (turn, pass_) or x.startswith("tx::wgmma")]
    assert [x.split("<")[0] if x.startswith("tx::") and "barrier" not in x else x for x in order][
        :8
    ] == [turn, "tx::wgmma_async", pass_, "tx::wgmma_wait"] + [
        turn, "tx::wgmma_rs_async", pass_, "tx::wgmma_wait"
    ]  # fmt: skip
    assert loop.count("tx::wgmma_wait<0>();  // this warpgroup's product") == 2
    assert (
        "tx::hopper::named_barrier_arrive(2, 256);  // warpgroup 0 takes the first turn" in compute
    )
    assert "tx::hopper::named_barrier(2, 256);  // warpgroup 1's last pass" in compute
    assert loop.count("tx::block_boundary();") == 2
    assert "tx::fence_registers<tx_L4>(tx_value);" in loop  # P, the second product's A
    result = nvrtc.compile_with_log(
        src, name="attention_fwd", arch="sm_90a", headers=HEADERS,
        options=nvrtc.DEFAULT_OPTIONS + ("-Xptxas=-v",),
    )  # fmt: skip
    assert nvrtc.spilled_bytes(result.log) == 0, result.log


def test_pingpong_refused_keeps_the_producer(pingpong):
    """One compute warpgroup (num_warps = 4) has no partner: warp-specialised, no ping-pong."""
    spec = _fwd(pingpong, ws=2, warps=4, d=64)
    ws = _loop(spec).warp_spec
    assert ws is not None and not ws.pingpong
    assert "two compute warpgroups" in ws.pingpong_refused
    assert "WARP_SPECIALIZE=2, but no ping-pong: ping-pong takes two" in spec.cuda_source
    assert "tx_warpgroup" not in spec.cuda_source


def test_pingpong_refused_for_a_dot_under_an_if(pingpong):
    spec = _dot_spec(pre="", ws=2).kernel  # the plain loop: takes it
    assert _loop_of(spec).warp_spec.pingpong
    src = DOT.replace(
        "acc = dot(a_t, trans(b_t), acc);", "if (start > 64) {{ acc = dot(a_t, trans(b_t), acc); }}"
    )
    mod = tx.compile(src.format(pre="", start="0", head="", tail="", post=""), name="ws_dot.c")
    mod.pipeline_tma = True
    spec = mod.ws_dot.specialize(
        "f32", "f16", "f16", "i32", 1000, 64, 64,
        WARP_SPECIALIZE=2, num_warps=8, num_stages=2, target="sm_90a",
    )  # fmt: skip
    ws = _loop(spec).warp_spec
    assert ws is not None and not ws.pingpong and "inside an if" in ws.pingpong_refused


def _loop_of(kernel: ir.Kernel) -> ir.PipelinedLoop:
    (p,) = [s for s in walk_stmts(kernel.body) if isinstance(s, ir.PipelinedLoop)]
    return p


# ---------------------------------------------------------------- dQ


@pytest.mark.parametrize(("d", "warps", "mode"), [(64, 4, 1), (128, 8, 1), (128, 8, 2)])
def test_dq_is_warp_specialized(pingpong, d, warps, mode):
    """attention_bwd_dq's key loop: the producer reads the same slice as the forward's; no
    spills under the compute warps' cap (240 at 4 warps and at 8)."""
    from tests.cases import _attention_bwd_args

    spec = pingpong.attention_bwd_dq.specialize(
        *_attention_bwd_args("attention_bwd_dq", "f16", d),
        num_warps=warps, num_stages=2, target="sm_90a", strided=True,
        **_attention_fwd_flags("f16", d, 1, 16 * warps, d, mode),
    )  # fmt: skip
    ws = _loop(spec).warp_spec
    slice_names = ["pid_m", "bh", "b", "h", "hk", "m0", "first", "last"]
    assert ws is not None and [s.name for s in ws.slice] == slice_names
    assert ws.pingpong == (mode == 2)
    result = nvrtc.compile_with_log(
        spec.cuda_source, name="attention_bwd_dq", arch="sm_90a", headers=HEADERS,
        options=nvrtc.DEFAULT_OPTIONS + ("-Xptxas=-v",),
    )  # fmt: skip
    assert nvrtc.spilled_bytes(result.log) == 0, result.log
