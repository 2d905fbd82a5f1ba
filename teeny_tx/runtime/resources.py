"""What a compiled kernel uses of the GPU: registers, spills, shared memory, occupancy.

Input: NVRTC's log of a compile with ``--ptxas-options=-v`` (one of the library's default
options), the block size and the dynamic shared memory of a launch. Output: a frozen
:class:`Resources` and its :class:`Occupancy` on the target's multiprocessor. No GPU is needed:
the numbers are ptxas's and the occupancy is computed from the architecture's published
limits (CUDA programming guide, "Technical Specifications per Compute Capability"; the
occupancy calculator's allocation granularities), as the driver would schedule the blocks.

:func:`of_specialization` reads the log a specialisation keeps (``spec.compiled``: NVRTC once
more, as the cubin cache keeps cubins, not logs).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..target import REGISTERS_PER_SM

if TYPE_CHECKING:
    from teeny_tx.kernel import Specialization


@dataclass(frozen=True)
class SmLimits:
    """One multiprocessor's limits: threads, blocks, registers and shared memory (bytes)."""

    threads: int
    blocks: int
    registers: int
    shared: int
    shared_reserved_per_block: int = 1024  # the runtime keeps 1 KB per block (sm_80 on)


# By compute capability; a later one takes the last known entry below it.
_SM_LIMITS = {
    80: SmLimits(threads=2048, blocks=32, registers=REGISTERS_PER_SM, shared=167936),
    86: SmLimits(threads=1536, blocks=16, registers=REGISTERS_PER_SM, shared=102400),
    89: SmLimits(threads=1536, blocks=24, registers=REGISTERS_PER_SM, shared=102400),
    90: SmLimits(threads=2048, blocks=32, registers=REGISTERS_PER_SM, shared=233472),
}
_REGISTER_UNIT = 256  # registers are given to a warp in units of 256 (8 per thread)
_SHARED_UNIT = 128  # shared memory is given to a block in units of 128 bytes


def sm_limits(sm: int) -> SmLimits:
    """The limits of compute capability ``sm`` (e.g. 90)."""
    known = [cc for cc in sorted(_SM_LIMITS) if cc <= sm]
    return _SM_LIMITS[known[-1] if known else 80]


@dataclass(frozen=True)
class Occupancy:
    """Blocks and warps one multiprocessor holds at once, and what limits them."""

    blocks: int
    warps: int
    max_warps: int
    limiter: str  # "registers", "shared memory", "threads" or "blocks"

    @property
    def fraction(self) -> float:
        return self.warps / self.max_warps


@dataclass(frozen=True)
class Resources:
    """ptxas's report of one kernel, with the launch's block size and dynamic shared memory."""

    arch: str
    threads: int
    registers: int
    spill_stores: int = 0  # bytes per thread
    spill_loads: int = 0
    stack: int = 0  # bytes of stack frame per thread
    static_shared: int = 0  # bytes per block, declared in the source
    dynamic_shared: int = 0  # bytes per block, passed at launch

    @property
    def spilled(self) -> int:
        """Bytes per thread spilled to local memory (stores; 0 when none)."""
        return self.spill_stores

    @property
    def shared(self) -> int:
        return self.static_shared + self.dynamic_shared

    @property
    def occupancy(self) -> Occupancy:
        sm = int(re.sub(r"\D", "", self.arch) or 90)
        limits = sm_limits(sm)
        warps_per_block = -(-self.threads // 32)
        max_warps = limits.threads // 32
        per_warp = -(-max(self.registers, 1) * 32 // _REGISTER_UNIT) * _REGISTER_UNIT
        shared = self.shared + limits.shared_reserved_per_block
        shared = -(-shared // _SHARED_UNIT) * _SHARED_UNIT
        bounds = {  # on a tie the first is named: a hardware maximum before a resource
            "threads": max_warps // warps_per_block,
            "blocks": limits.blocks,
            "registers": (limits.registers // per_warp) // warps_per_block,
            "shared memory": limits.shared // shared if self.shared else limits.blocks,
        }
        limiter = min(bounds, key=lambda name: bounds[name])
        blocks = bounds[limiter]
        return Occupancy(blocks, blocks * warps_per_block, max_warps, limiter)

    def rows(self) -> list[tuple[str, str]]:
        """(name, value) rows for a table: what a kernel author reads first."""
        occ = self.occupancy
        spills = (
            f"{self.spill_stores} B stored, {self.spill_loads} B loaded per thread"
            if self.spill_stores or self.spill_loads
            else "none"
        )
        return [
            ("target", self.arch),
            ("threads per block", str(self.threads)),
            ("registers per thread", str(self.registers)),
            ("spills", spills),
            ("stack frame", f"{self.stack} B per thread"),
            (
                "shared memory",
                f"{self.shared} B per block ({self.static_shared} static, "
                f"{self.dynamic_shared} dynamic)",
            ),
            (
                "occupancy",
                f"{occ.blocks} blocks, {occ.warps}/{occ.max_warps} warps per SM "
                f"({occ.fraction:.0%}; limited by {occ.limiter})",
            ),
        ]


_REGISTERS = re.compile(r"Used (\d+) registers")
_SMEM = re.compile(r"(\d+) bytes smem")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")


def parse_log(log: str, *, arch: str, threads: int, dynamic_shared: int = 0) -> Resources:
    """The Resources ptxas reported in ``log`` (NVRTC's log of one kernel)."""

    def first(pattern: re.Pattern[str], group: int = 1) -> int:
        m = pattern.search(log)
        return int(m[group]) if m else 0

    return Resources(
        arch=arch,
        threads=threads,
        registers=first(_REGISTERS),
        spill_stores=first(_FRAME, 2),
        spill_loads=first(_FRAME, 3),
        stack=first(_FRAME, 1),
        static_shared=first(_SMEM),
        dynamic_shared=dynamic_shared,
    )


def of_specialization(spec: Specialization) -> Resources:
    """The resources of ``spec`` (compiled by NVRTC for its target; no GPU needed): ptxas's
    report in the log that ``spec.compiled`` keeps. Raises NvrtcError where NVRTC fails."""
    log = spec.compiled.log
    return parse_log(log, arch=spec.arch, threads=spec.block[0], dynamic_shared=spec.shared_mem)
