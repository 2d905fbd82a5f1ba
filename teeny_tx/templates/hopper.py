"""Render a decided Hopper node (``lower/hopper/matmul.py``) into CUDA C++ through its template.

Input: a :class:`~teeny_tx.lower.hopper.matmul.HopperMatmul`. Output: the kernel's CUDA source
(``templates/hopper_matmul.cu.j2`` over ``prelude/hopper.cuh``), deterministic text. This
module only lays out: the node carries every decision; the C spellings of its dtypes come from
the language's one table (``dtypes.py`` through ``cuda_types.py``), the text from the one Jinja
environment (``emitter.environment``); here are the operand lists of the wgmma instruction.
"""

from __future__ import annotations

from ..activations import BY_CODE
from ..dtypes import DTYPES, ELEMENTS
from ..lower.hopper.matmul import HopperMatmul
from .cuda_types import ctype
from .emitter import environment

# operand element types as the kernel stores them: fp8 only moves (TMA) and feeds wgmma
STORAGE = {e.name: e.storage for e in ELEMENTS.values()}


def _wgmma(node: HopperMatmul) -> dict:
    """Name and operand text of the kernel's wgmma m64nNk16 (registers in wgmma's order)."""
    m = node.mainloop
    count = m.bn // 2
    trans = ("k" if node.a.kmajor else "t") + ("k" if node.b.kmajor else "t")
    rows = [
        ", ".join(f"%{i}" for i in range(start, min(start + 16, count)))
        for start in range(0, count, 16)
    ]
    outputs = [
        ", ".join(f'"+f"(d[{i}])' for i in range(start, min(start + 8, count)))
        for start in range(0, count, 8)
    ]
    name = f"tx_wgmma_m64n{m.bn}k{m.k_step}_{m.instruction}_{trans}"
    return {"name": name, "count": count, "rows": rows, "outputs": outputs}


def render_matmul(node: HopperMatmul) -> str:
    """The CUDA source of ``node``'s kernel (entry point ``node.name``)."""
    e = node.epilogue
    name = BY_CODE[e.activation].name
    text = ("scale_a * scale_b * " if e.scaled else "") + "alpha * acc"
    text += " + bias" if e.bias_dtype else ""
    epilogue_text = f"{name}({text})" if name else text  # as a comment: the activation's name
    summary = " ".join(str(x) for x in node.key)
    return (
        environment()
        .get_template("hopper_matmul.cu.j2")
        .render(
            name=node.name,
            summary=f"key: {summary}; {node.shared_bytes} bytes of shared memory",
            m=node.mainloop,
            a=node.a,
            b=node.b,
            e=e,
            group=max(1, node.scheduler.group_m // node.mainloop.cluster),  # in cluster rows
            # a consumer's first row in the tile, and the consumers that read each stage
            row0="0" if node.mainloop.pingpong else "ROWS * consumer",
            readers=1 if node.mainloop.pingpong else "CONSUMERS",
            wgmma=_wgmma(node),
            in_t=STORAGE[node.a.dtype],
            out_t=ctype(DTYPES[e.out_dtype]),
            bias_t=ctype(DTYPES[e.bias_dtype or e.out_dtype]),
            stage_bytes=node.stage_bytes,
            epilogue_text=epilogue_text,
            watchdog=node.watchdog,
            # a unit's K blocks: all of them, or its split-K slice
            k_loop="kb_begin; kb < kb_end" if node.mainloop.split_k > 1 else "0; kb < k_blocks",
        )
    )
