"""The language's named integer constants: memory orders, scopes, dot precisions, cache
modifiers and eviction policies, NaN propagation and float roundings.

Input: nothing (declarations). Output: one table per family, each entry a :class:`Named`
(the name a kernel writes, which is also the ``tx::`` enumerator of the device header; its
value; a one-line doc), and :data:`CONSTANTS`, every entry by name, which the builder resolves
identifiers against. ``prelude/language.h`` declares each name (``extern const i32``) and
``prelude/teeny_tx.cuh`` enumerates the memory orders and scopes with these values:
tests/test_facts.py checks that they agree.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Named:
    """One named constant of the language: ``name`` in kernel text, ``value`` as an i32."""

    name: str
    value: int
    doc: str
    python: str = ""  # how the Python API spells it, where it has one (dot precisions)


# Memory orders of the atomics (Triton's sem=): fences around the access at its scope.
MEMORY_ORDERS: tuple[Named, ...] = (
    Named("RELAXED", 0, "no ordering beyond the atomicity of the access"),
    Named("ACQUIRE", 1, "later accesses stay after it"),
    Named("RELEASE", 2, "earlier accesses stay before it"),
    Named("ACQ_REL", 3, "both (the default, as in Triton)"),
)
DEFAULT_ORDER = "ACQ_REL"

# Scopes of the atomics' fences (Triton's scope=).
SCOPES: tuple[Named, ...] = (
    Named("SCOPE_CTA", 10, "the threads of one program (block)"),
    Named("SCOPE_GPU", 11, "the whole device (the default)"),
    Named("SCOPE_SYS", 12, "the device, the host and peer devices"),
)
DEFAULT_SCOPE = "SCOPE_GPU"

# Input precisions of dot() on f32 operands (Triton's input_precision=).
PRECISIONS: tuple[Named, ...] = (
    Named("IEEE", 20, "f32 FMAs, no tensor cores (the default)", "ieee"),
    Named("TF32", 21, "inputs rounded to TF32 (10-bit mantissa), one tensor-core product", "tf32"),
    Named("TF32X3", 22, "three TF32 products (big + small parts), near f32 accuracy", "tf32x3"),
)
DEFAULT_PRECISION = "IEEE"

# Cache modifiers of loads and stores (Triton's cache_modifier=): PTX's cache operators
# (ld.global.cg ...); ``python`` is Triton's string. A hint: the interpreter ignores them.
CACHE_MODIFIERS: tuple[Named, ...] = (
    Named("CACHE_CA", 30, "cache at every level (ld.ca, a load's default)", ".ca"),
    Named("CACHE_CG", 31, "cache in L2, not L1 (ld.cg / st.cg)", ".cg"),
    Named("CACHE_CS", 32, "streaming: likely read or written once (ld.cs / st.cs)", ".cs"),
    Named("CACHE_LU", 33, "last use: the line is not needed again (ld.lu)", ".lu"),
    Named("CACHE_CV", 34, "fetch again, do not cache (ld.cv)", ".cv"),
    Named("CACHE_WB", 35, "write back at every level (st.wb, a store's default)", ".wb"),
    Named("CACHE_WT", 36, "write through to system memory (st.wt)", ".wt"),
)
LOAD_CACHES = ("CACHE_CA", "CACHE_CG", "CACHE_CS", "CACHE_LU", "CACHE_CV")
STORE_CACHES = ("CACHE_WB", "CACHE_CG", "CACHE_CS", "CACHE_WT")

# L2 eviction priorities of loads and stores (Triton's eviction_policy=): an L2 cache policy
# (createpolicy ... L2::cache_hint) on the access. A hint: the interpreter ignores them.
EVICTION_POLICIES: tuple[Named, ...] = (
    Named("EVICT_NORMAL", 40, "the default priority", "evict_normal"),
    Named("EVICT_FIRST", 41, "evicted first: data used once", "evict_first"),
    Named("EVICT_LAST", 42, "evicted last: data used again soon", "evict_last"),
)

# NaN handling of maximum/minimum (Triton's propagate_nan=).
PROPAGATE_NAN: tuple[Named, ...] = (
    Named("PROPAGATE_NAN_NONE", 50, "a NaN operand yields the other (fmax; the default)", "none"),
    Named("PROPAGATE_NAN_ALL", 51, "a NaN operand yields NaN", "all"),
)

# Roundings of float conversions that narrow (Triton's fp_downcast_rounding=).
ROUNDINGS: tuple[Named, ...] = (
    Named("RTNE", 60, "to the nearest, ties to even (the default)", "rtne"),
    Named("RTZ", 61, "toward zero", "rtz"),
)

CONSTANTS: dict[str, Named] = {
    c.name: c
    for c in (
        *MEMORY_ORDERS,
        *SCOPES,
        *PRECISIONS,
        *CACHE_MODIFIERS,
        *EVICTION_POLICIES,
        *PROPAGATE_NAN,
        *ROUNDINGS,
    )
}


def values(table: tuple[Named, ...]) -> dict[str, int]:
    """{name: value} of one table."""
    return {c.name: c.value for c in table}


def name_of(table: tuple[Named, ...], value: int) -> str:
    """The name of ``value`` in ``table`` (a KeyError where it has none)."""
    for c in table:
        if c.value == value:
            return c.name
    raise KeyError(value)


def names(table: tuple[Named, ...], sep: str = ", ", last: str = " or ") -> str:
    """The names of a table as prose: ``RELAXED, ACQUIRE, RELEASE or ACQ_REL``."""
    *head, tail = (c.name for c in table)
    return f"{sep.join(head)}{last}{tail}" if head else tail
