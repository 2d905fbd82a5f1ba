"""The compilation target: which GPU architecture the generated CUDA is for, and what it has.

Input: an architecture name (``"sm_90"``, ``"sm_90a"``), the ``TEENY_TX_ARCH`` environment
variable, or the current device. Output: a frozen :class:`Target` whose fields say what the
architecture offers (tensor-core instructions, TMA, clusters, shared memory and registers).
Lowering and emission read these fields, never the architecture's name; the runtime compiles
for ``target.arch`` and keys its caches by it.

``TEENY_TX_ARCH`` is read in one place, :meth:`Target.from_env`, which ``teeny_tx.compile``
calls once per module (the public boundary); nothing writes it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from . import switches
from .errors import TeenyError

ENV_VAR = "TEENY_TX_ARCH"
DEFAULT_ARCH = "sm_90"  # without a device and without TEENY_TX_ARCH
HOPPER_ARCH = "sm_90a"  # what the Hopper matmul (wgmma, TMA, setmaxnreg) compiles for
KNOWN_ARCHS = ("sm_80", "sm_86", "sm_89", "sm_90", "sm_90a")  # what the CLI offers
_ARCH = re.compile(r"sm_(\d)(\d)(a?)")

# Dynamic shared memory one block may opt into, by compute capability (CUDA programming
# guide, "Technical Specifications per Compute Capability"); newer ones take the last known.
_SHARED_PER_BLOCK = {(8, 0): 166912, (8, 6): 101376, (8, 7): 166912, (8, 9): 101376, (9, 0): 232448}


REGISTERS_PER_SM = 65536  # 32-bit registers of one multiprocessor, sm_80 through sm_90


@dataclass(frozen=True)
class Target:
    """One GPU architecture, as the compiler sees it.

    ``arch``: the NVRTC name (``sm_90a``); from it, :attr:`sm` (the compute capability as a
    number, 90) and :attr:`arch_specific` (the ``a`` suffix: features that later architectures
    do not keep). Features, each a boolean derived from those two, each read by the stage that
    needs it:

    - ``mma_sync``: warp-level tensor-core ``mma.sync`` with ``ldmatrix`` (sm_80 on;
      ``lower/passes/dot_plan.py``);
    - ``cp_async``: asynchronous global-to-shared copies (sm_80 on; ``lower/passes/pipeline.py``);
    - ``wgmma``: Hopper warpgroup MMA from shared memory (sm_90a only; ``lower/passes/layout.py``
      through ``decide``);
    - ``tma``: the Tensor Memory Accelerator, bulk tensor copies with mbarriers (sm_90 on;
      ``lower/passes/pipeline.py``);
    - ``setmaxnreg``: warpgroup register reallocation (sm_90a only; ``lower/passes/warp_spec.py``);
    - ``clusters``: thread-block clusters and distributed shared memory (sm_90 on;
      ``lower/hopper/matmul.py``'s B multicast).

    Limits: ``max_shared_per_block`` (bytes of dynamic shared memory a block may opt into;
    ``kernel.py``, ``lower/hopper/matmul.py``, ``library/hopper_configs.py``),
    ``max_registers_per_thread`` and ``registers_per_sm`` (``lower/passes/warp_spec.py``,
    ``lower/hopper/matmul.py``, ``runtime/autotune.py``). ``tests/test_target_facts.py`` checks each
    field is read outside this module and no other module spells these numbers.
    """

    arch: str
    mma_sync: bool
    cp_async: bool
    wgmma: bool
    tma: bool
    setmaxnreg: bool
    clusters: bool
    max_shared_per_block: int
    max_registers_per_thread: int = 255
    registers_per_sm: int = REGISTERS_PER_SM

    def __str__(self) -> str:
        return self.arch

    @property
    def sm(self) -> int:
        """The compute capability as a number: 90 for ``sm_90a``."""
        m = _ARCH.fullmatch(self.arch)
        assert m is not None, "from_arch made it"
        return 10 * int(m[1]) + int(m[2])

    @property
    def arch_specific(self) -> bool:
        """The ``a`` suffix: features later architectures do not keep (wgmma, setmaxnreg)."""
        return self.arch.endswith("a")

    @classmethod
    def from_arch(cls, arch: str) -> Target:
        """The target named ``arch`` (``sm_XY`` or ``sm_XYa``)."""
        m = _ARCH.fullmatch(arch) if isinstance(arch, str) else None
        if m is None:
            raise TeenyError(
                f"unknown target architecture {arch!r}: expected sm_XY or sm_XYa, e.g. sm_90 "
                "(portable: mma.sync) or sm_90a (Hopper: wgmma)"
            )
        major, minor, suffix = int(m[1]), int(m[2]), m[3] == "a"
        sm = 10 * major + minor
        known = [cc for cc in sorted(_SHARED_PER_BLOCK) if cc <= (major, minor)]
        shared = _SHARED_PER_BLOCK[known[-1]] if known else 49152
        hopper = sm == 90 and suffix
        return cls(
            arch=arch,
            mma_sync=sm >= 80,
            cp_async=sm >= 80,
            wgmma=hopper,
            tma=sm >= 90,
            setmaxnreg=hopper,
            clusters=sm >= 90,
            max_shared_per_block=shared,
        )

    @classmethod
    def from_env(cls) -> Target | None:
        """The target ``$TEENY_TX_ARCH`` names, or None where it is unset or empty (then each
        kernel compiles for the device: ``runtime.launch.device_target``)."""
        forced = switches.read("ARCH")
        return cls.from_arch(forced) if forced else None

    @classmethod
    def for_capability(
        cls, capability: tuple[int, int] | None, hopper_features: bool = False
    ) -> Target:
        """The target of a device of compute ``capability`` (None: no device, sm_90). A
        compute-capability-9.0 device gives ``sm_90a`` (wgmma; not portable to later GPUs)
        only when ``hopper_features`` is asked for, ``sm_90`` otherwise. The device itself is
        asked by ``runtime.launch.device_target`` (this module reads no device)."""
        if capability is None:
            return cls.from_arch(DEFAULT_ARCH)
        major, minor = capability
        suffix = "a" if hopper_features and (major, minor) == (9, 0) else ""
        return cls.from_arch(f"sm_{major}{minor}{suffix}")

    @classmethod
    def of(cls, target: Target | str) -> Target:
        """``target`` as a Target (a name is looked up with :meth:`from_arch`)."""
        return target if isinstance(target, Target) else cls.from_arch(target)


HOPPER = Target.from_arch(HOPPER_ARCH)  # the Hopper matmul's target: its limits and features
