"""lower/interface.py: the parameter list (tensor maps after the user's), the shared-memory
layout and size, the block and launch bounds are decided before rendering, the CUDA declares
exactly them, and a kernel that asks more of the target than it has is refused at its line
before any text exists."""

from __future__ import annotations

import dataclasses
import re

import pytest

import teeny_tx
import teeny_tx.kernel as kernel_module
from teeny_tx.errors import ResourceError
from teeny_tx.library.loader import kernel_text as library_text
from teeny_tx.lower.interface import (
    TMA_SWIZZLE,
    Interface,
    TensorMapParam,
    ValueParam,
    build_interface,
    check_resources,
)
from teeny_tx.lower.passes.driver import decide
from teeny_tx.target import Target
from teeny_tx.templates import emitter
from tests.cases import GOLDEN
from tests.conftest import KERNEL_FILE, kernel_text, lower

CASES = {g.stem: g for g in GOLDEN}


def _render(stem: str, monkeypatch) -> tuple[Interface, str, int]:
    """A golden case's interface (as decide() built it), its CUDA and shared bytes."""
    seen = []
    real = kernel_module.emit_cuda

    def spy(decided):
        seen.append(decided)
        source, shared = real(decided)
        seen.append(shared)
        return source, shared

    monkeypatch.setattr(kernel_module, "emit_cuda", spy)
    g = CASES[stem]
    for name, value in g.env:
        monkeypatch.setenv(name, value)
    k = getattr(teeny_tx.compile(library_text(g.file), name=f"kernels/{g.file}"), g.kernel)
    options = {"num_warps": g.num_warps, "num_stages": g.num_stages}
    source = k.cuda_source(*g.args, **options, target=g.arch, strided=g.strided, **g.constexprs)
    assert source == g.path.read_text()  # the golden: what the interface is checked against
    decided, shared = seen
    assert build_interface(decided.kernel).params == decided.interface.params  # deterministic
    return decided.interface, source, shared


def _signature(source: str) -> list[tuple[str, str]]:
    """The (type, name) pairs of the generated kernel's parameter list."""
    head = re.search(r"__launch_bounds__\([^)]*\)\n\w+\((.*)\)\n\{", source)
    assert head is not None
    out = []
    for part in head.group(1).split(", "):
        ctype, name = part.rsplit(" ", 1)
        out.append((ctype.replace(" __restrict__", ""), name))
    return out


def test_a_plain_kernel_takes_the_users_parameters_and_no_shared_memory(monkeypatch):
    iface, source, shared = _render("vector_add.f32", monkeypatch)
    assert [p.name for p in iface.params] == [name for _, name in _signature(source)]
    assert all(isinstance(p, ValueParam) for p in iface.params)
    assert iface.tensor_maps == () and iface.workspaces == () and iface.includes == ()
    assert iface.shared.total_bytes == shared == 0 and iface.shared.regions == ()
    assert iface.block == (128, 1, 1) and iface.min_blocks == 0
    assert "__launch_bounds__(128)\n" in source and "tx_smem" not in source


@pytest.mark.parametrize(
    "stem", ["attention_fwd.f16.d128.tma.sm90a", "attention_fwd.f16.d128.ws.sm90a"]
)
def test_tensor_maps_follow_the_users_parameters(stem, monkeypatch):
    iface, source, _ = _render(stem, monkeypatch)
    signature = _signature(source)
    assert [p.name for p in iface.params] == [name for _, name in signature]
    maps = iface.tensor_maps
    assert len(maps) == 2  # K and V
    first = iface.params.index(maps[0])
    assert all(isinstance(p, ValueParam) for p in iface.params[:first])
    assert all(isinstance(p, TensorMapParam) for p in iface.params[first:])
    users = [p for p in iface.params if isinstance(p, ValueParam)]
    for m in maps:
        assert (
            signature[iface.params.index(m)][0] == "const __grid_constant__ tx::hopper::TensorMap"
        )
        mapped = users[m.pointer_index]
        assert mapped.name == m.pointer and mapped.type.is_pointer
        assert mapped.type.dtype.elem.name == m.dtype == "f16"
        assert m.swizzle == TMA_SWIZZLE and m.box[0] * 2 <= TMA_SWIZZLE
        assert all(c.param == m.name and c.base == m.pointer for c in m.copies)
        assert m.copies[0].box == m.box
    assert iface.includes == ("hopper.cuh",) and '#include "hopper.cuh"' in source
    (loop,) = iface.pipelines
    assert loop.maps == tuple(m.name for m in maps)
    # one stage brings a K box and a V box: rows x D f16 each, what thread 0 arms the barrier with
    assert loop.tma_bytes == 2 * 128 * 128 * 2
    assert f", {loop.tma_bytes}" in source or f"{loop.tma_bytes})" in source


@pytest.mark.parametrize(
    "stem", ["attention_fwd.f16.d128.tma.sm90a", "attention_fwd.f16.d128.ws.sm90a"]
)
def test_the_tensor_maps_are_the_ones_the_runtime_encodes(stem, monkeypatch):
    """What runtime/tma.py derives from the IR today is what the interface says."""
    from teeny_tx.runtime import tma

    seen = []
    real = kernel_module.emit_cuda
    monkeypatch.setattr(kernel_module, "emit_cuda", lambda d: seen.append(d) or real(d))
    _render(stem, monkeypatch)
    decided = seen[-1]
    copies = tma.pipeline_copies(decided.kernel)
    maps = decided.interface.tensor_maps
    assert [(c.param, c.base, c.dtype, c.box) for c in copies] == [
        (m.name, m.pointer, m.dtype, m.box) for m in maps
    ]
    runtime = [p.name for p in decided.kernel.runtime_params]
    assert [runtime.index(c.base) for c in copies] == [m.pointer_index for m in maps]


def test_a_warp_specialised_kernel_states_its_launch_bounds(monkeypatch):
    iface, source, _ = _render("attention_fwd.f16.d128.ws.sm90a", monkeypatch)
    assert iface.block == (384, 1, 1) and iface.min_blocks == 1
    assert "__launch_bounds__(384, 1)" in source


@pytest.mark.parametrize(
    "stem",
    [
        "attention_fwd.f16.d128.tma.sm90a",
        "attention_fwd.f16.d128.pingpong.sm90a",
        "attention_fwd.bf16.d64.causal.sm90",
        "softmax.f32",
        "vector_add.f32",
    ],
)
def test_the_shared_layout_is_what_the_cuda_declares(stem, monkeypatch):
    iface, source, shared = _render(stem, monkeypatch)
    layout = iface.shared
    assert shared == layout.total_bytes
    scratch = re.search(r"tx_smem\[\];  // (\d+) bytes of scratch", source)
    assert (int(scratch.group(1)) if scratch else 0) == layout.scratch_bytes
    pipeline = re.search(
        r"tx::align1024\(tx_smem \+ (\d+)\);  // (\d+) bytes of pipeline stages", source
    )
    if layout.pipeline_bytes:
        assert pipeline is not None
        assert int(pipeline.group(1)) == layout.pipeline_offset >= layout.scratch_bytes
        assert int(pipeline.group(2)) == layout.pipeline_bytes
        assert layout.pipeline_offset % 16 == 0
    else:
        assert pipeline is None
    staged = sorted(
        (r.offset, r.offset + r.bytes, r.name) for r in layout.regions if r.base == "tx_pipeline"
    )
    for (_, end, name), (start, _, _) in zip(staged, staged[1:], strict=False):
        assert end <= start, f"{name} overlaps the next buffer"
    for start, end, name in staged:
        assert end <= layout.pipeline_bytes - 1024  # the run-time 1024 alignment stays free
        plus = f" + {start}" if start else ""
        assert re.search(
            rf"{name} = reinterpret_cast<[^>]*\*>\(tx_pipeline{re.escape(plus)}\)", source
        )
    if iface.scratch_ops:
        assert max(iface.scratch_ops.values()) == layout.scratch_bytes


def test_pingpong_turns_are_the_loops_dots(monkeypatch):
    iface, source, _ = _render("attention_fwd.f16.d128.pingpong.sm90a", monkeypatch)
    (loop,) = iface.pipelines
    assert loop.pingpong and len(iface.turn_dots) == 2  # S = QK^T and O += PV
    iface, _, _ = _render("attention_fwd.f16.d128.ws.sm90a", monkeypatch)
    assert not iface.pipelines[0].pingpong and iface.turn_dots == frozenset()


# ---------------------------------------------------------------- resources, before rendering

# a [256, 256] f64 tile moved between layouts: 512 KiB of scratch at the permute (line 5)
TOO_MUCH_SCRATCH = kernel_text(
    "    tile r = arange(0, 256);\n"
    "    tile x = load(a + expand_dims(r, 1) * 256 + expand_dims(r, 0));\n"
    "    tile y = permute(x, 1, 0);\n"
    "    store(out + expand_dims(r, 1) * 256 + expand_dims(r, 0), y);",
    "f64 *out, const f64 *a, i32 n, const i32 BLOCK",
)


def _no_rendering(monkeypatch):
    def refuse(self):
        raise AssertionError("the emitter rendered a kernel that the target cannot run")

    monkeypatch.setattr(emitter.Emitter, "render", refuse)


def test_too_much_scratch_is_refused_at_its_op_before_rendering(monkeypatch):
    _no_rendering(monkeypatch)
    k = teeny_tx.compile(TOO_MUCH_SCRATCH, name=KERNEL_FILE).k
    with pytest.raises(ResourceError) as info:
        k.cuda_source("f64", "f64", 10, BLOCK=1, target="sm_90")
    err = info.value
    assert (
        err.needed == 256 * 256 * 8 and err.limit == Target.from_arch("sm_90").max_shared_per_block
    )
    text = str(err)
    assert text.startswith(f"{KERNEL_FILE}:5:")
    assert "needs 524288 bytes of shared memory" in text and "sm_90 allows 232448" in text
    line, caret = text.split("\n")[1:3]
    assert line.strip() == "tile y = permute(x, 1, 0);"
    assert line[caret.index("^") :].startswith("permute")


@pytest.fixture(scope="module")
def dot_kernels():
    return teeny_tx.compile("tests/kernels/dot.c", name="tests/kernels/dot.c")


ROW = (256, 256, 256, 256, 1, 256, 1, 256)  # M N K sam sak sbk sbn scm: row-major operands


def test_too_many_pipeline_stages_are_refused_at_the_loop(dot_kernels, monkeypatch):
    _no_rendering(monkeypatch)
    with pytest.raises(ResourceError) as info:
        dot_kernels.mm.specialize(
            "f32", "f16", "f16", *ROW, PRECISION=20, BM=128, BN=128, BK=128, num_stages=8,
            target="sm_90",
        )  # fmt: skip
    text = str(info.value)
    assert text.startswith("tests/kernels/dot.c:"), text
    assert "pipeline stages take" in text and "fewer num_stages" in text
    assert text.split("\n")[1].strip().startswith("for ("), text
    assert info.value.needed > info.value.limit


def test_the_check_reads_the_targets_limit():
    text = TOO_MUCH_SCRATCH.replace("256", "64")
    decided = decide(lower(text, constexprs=(("BLOCK", 1),)))
    need = decided.interface.shared.total_bytes
    assert need == 64 * 64 * 8
    sm90 = Target.from_arch("sm_90")
    check_resources(decided.interface, sm90)
    small = dataclasses.replace(sm90, max_shared_per_block=need - 1)
    with pytest.raises(ResourceError, match=f"needs {need} bytes"):
        check_resources(decided.interface, small)
    with pytest.raises(ResourceError, match="needs"):
        decide(lower(text, constexprs=(("BLOCK", 1),)), target=small)


@pytest.mark.parametrize("stem", ["attention_fwd.f16.d128.sm90a", "matmul.f16.bias_gelu.sm90a"])
def test_wgmma_functions_are_decided_once_each(stem, monkeypatch):
    iface, source, _ = _render(stem, monkeypatch)
    names = [i.name for i in iface.instructions]
    assert names and len(set(names)) == len(names)
    assert set(iface.dot_instructions.values()) == set(names)
    for instr in iface.instructions:
        assert source.count(f"void {instr.name}(") == 1  # defined once, before the kernel
        assert source.index(f"void {instr.name}(") < source.index('extern "C"')
        assert f"m64n{instr.n}k{instr.k}" in instr.name and instr.dtype in instr.name


def test_too_many_threads_are_refused_before_rendering():
    decided = decide(lower(VECTOR_ADD, num_warps=4))
    check_resources(decided.interface, Target.from_arch("sm_90"))
    wide = dataclasses.replace(decided.interface, block=(1056, 1, 1))
    with pytest.raises(ResourceError, match="runs 1056 threads per block; sm_90 allows 1024"):
        check_resources(wide, Target.from_arch("sm_90"))


VECTOR_ADD = kernel_text(
    "    tile i = program_id(0) * BLOCK + arange(0, BLOCK);\n"
    "    store(out + i, load(a + i, i < n), i < n);",
)
