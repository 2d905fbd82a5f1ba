"""The one name allocator: every identifier the compiler makes up, in the builder, the lower
passes and the emitter.

Input: the names already taken (a kernel's user identifiers as the builder meets them, or every
name of a lowered kernel's IR). Output: fresh names, each ``GENERATED_PREFIX`` + a base + a
per-base counter (``tx_load``, ``tx_load_1``, ...), unique among everything taken before.

User identifiers cannot start with the prefix (the parser refuses them), so a generated name
can never shadow a user's, and the counters keep generated names apart from each other. The
counters only depend on the order of the requests: the same kernel always gets the same names.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ..parse.reserved import GENERATED_PREFIX
from .ir import Declare, PipelinedLoop, Staged, Var, walk_exprs, walk_stmts

# the parameters of a reduction's or scan's combiner (a lambda without captures in the CUDA)
COMBINE_ARGS = (f"{GENERATED_PREFIX}a", f"{GENERATED_PREFIX}b")
# the register index of a tile loop, the element index of a relayout's index map, the
# accumulator of a wgmma issue; and the C++ alias of layout n
REGISTER = f"{GENERATED_PREFIX}i"
ELEMENT = f"{GENERATED_PREFIX}r"
ACCUMULATOR = f"{GENERATED_PREFIX}d"


def layout_alias(n: int) -> str:
    return f"{GENERATED_PREFIX}L{n}"


# names the emitter spells itself: never handed out by the allocator
FIXED = frozenset(
    {REGISTER, *COMBINE_ARGS, f"{GENERATED_PREFIX}smem", f"{GENERATED_PREFIX}pipeline"}
)
_FIXED_FORMS = re.compile(rf"{GENERATED_PREFIX}(L\d+|wgmma_\w+)")


def is_generated(name: str) -> bool:
    return name.startswith(GENERATED_PREFIX)


class Names:
    """Hands out generated names; ``taken`` names (and every name handed out) are never reused."""

    def __init__(self, taken: Iterable[str] = ()) -> None:
        self.taken: set[str] = set(taken)
        self.counters: dict[str, int] = {}

    def take(self, name: str) -> None:
        """Mark a name (a user's, or one generated elsewhere) as used."""
        self.taken.add(name)

    def fresh(self, base: str) -> str:
        """A new name for ``base``: ``tx_base`` the first time, then ``tx_base_1``, ..."""
        n = self.counters.get(base, 0)
        while True:
            name = GENERATED_PREFIX + base + (f"_{n}" if n else "")
            n += 1
            if name not in self.taken and name not in FIXED and not _FIXED_FORMS.fullmatch(name):
                break
        self.counters[base] = n
        self.taken.add(name)
        return name

    @classmethod
    def of_kernel(cls, kernel) -> Names:
        """An allocator for later passes over ``kernel``: every name its IR uses is taken."""
        names = cls(p.name for p in kernel.params)
        for s in walk_stmts(kernel.body):
            if isinstance(s, (Declare, Staged)):
                names.take(s.name)
            elif isinstance(s, PipelinedLoop):
                for name in (s.stage, s.stage_ahead, s.k_ahead, s.prologue):
                    names.take(name)
                for extra in (s.barriers, s.iteration):
                    if extra is not None:
                        names.take(extra)
                for load in s.loads:
                    names.take(load.tile)
                    names.take(load.buffer)
        for e in walk_exprs(kernel.body):
            if isinstance(e, Var):
                names.take(e.name)
        return names
