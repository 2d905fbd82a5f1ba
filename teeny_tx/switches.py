"""The declared switches: every ``TEENY_TX_*`` environment variable, in one table.

Input: the process environment. Output: :data:`SWITCHES` (each switch's name, type, default,
meaning, who reads it and whether it changes generated code), :func:`read` (the one function
that reads ``os.environ`` for a switch) and :func:`codegen` (the switches that change
generated code, as a frozen :class:`CodegenSwitches` that the compiler's passes receive).

Where a switch is read matters:

- ``when="compile"``: read by ``teeny_tx.compile`` once per module (the target, debug);
- ``when="specialize"``: read each time a specialisation is looked up (``kernel.py``): its
  value is part of the specialisation's key, so flipping it between two calls gets new code,
  never a stale cubin; the passes see it only through :class:`CodegenSwitches` on the kernel;
- ``when="import"``: read once when the module that holds the setting is imported (a module
  attribute that tests and benchmarks may also assign);
- ``when="call"``: read at each use (paths, thread counts, printing).

A launch of a signature that has launched before keeps the specialisation it launched (the
hot path reads no environment); ``specialize``, ``cuda_source``, ``direct`` and a new
signature read the switches again.

``docs/switches.md`` is generated from this table (``python -m teeny_tx.docs switches``);
``tests/test_switches.py`` checks that the page, the table and the package's reads agree.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .errors import TeenyError

PREFIX = "TEENY_TX_"


def _flag(text: str) -> bool:
    """``""``/``"0"`` off, anything else on."""
    return text.strip() not in ("", "0")


def _int(text: str) -> int:
    return int(text.strip())


def _text(text: str) -> str:
    return text.strip()


@dataclass(frozen=True)
class Switch:
    """One environment variable: ``name`` without the ``TEENY_TX_`` prefix; ``parse`` turns
    its text into the value (``default`` where unset or empty); ``codegen``: it changes the
    generated CUDA (then it is part of a specialisation's key or of the target)."""

    name: str
    type: str  # what the docs call its values
    default: Any
    codegen: bool
    when: str  # "compile", "specialize", "import" or "call" (see the module)
    reader: str  # the module that reads it
    parse: Callable[[str], Any]
    doc: str

    @property
    def env(self) -> str:
        return PREFIX + self.name


def _table(*switches: Switch) -> dict[str, Switch]:
    return {s.name: s for s in switches}


SWITCHES: dict[str, Switch] = _table(
    # ---------------------------------------------------------------- the compiler
    Switch(
        "ARCH",
        type="sm_XY[a]",
        default=None,
        codegen=True,
        when="compile",
        reader="target.py",
        parse=_text,
        doc=(
            "the target architecture every module compiles for (unset: each kernel's device; "
            "sm_90 without a GPU)"
        ),
    ),
    Switch(
        "DEBUG",
        type="0/1",
        default=False,
        codegen=True,
        when="compile",
        reader="kernel.py",
        parse=_flag,
        doc="compile device_print and device_assert in (the default of compile(debug=...))",
    ),
    Switch(
        "PIPELINE_TMA",
        type="1 or kernel names",
        default="",
        codegen=True,
        when="specialize",
        reader="lower/passes/pipeline.py",
        parse=_text,
        doc=(
            "pipelined loads by TMA bulk copies: 1 for every kernel, or a comma-separated list of "
            "kernel names"
        ),
    ),
    Switch(
        "DEFER_WAITS",
        type="0/1",
        default=True,
        codegen=True,
        when="specialize",
        reader="lower/passes/dot_plan.py",
        parse=_flag,
        doc=(
            "0: every wgmma waits right after its issue (no deferred waits; measures what the "
            "deferral buys)"
        ),
    ),
    Switch(
        "PERF_WARNINGS",
        type="0/1",
        default=True,
        codegen=False,
        when="call",
        reader="lower/passes/layout.py",
        parse=_flag,
        doc=(
            "0: no PerformanceWarning when a dot on sm_90a falls back from wgmma to mma.sync "
            "(the warning names the tile dimension to change)"
        ),
    ),
    Switch(
        "WS_PINGPONG",
        type="0/1",
        default=False,
        codegen=True,
        when="specialize",
        reader="lower/passes/warp_spec.py",
        parse=_flag,
        doc="1: WARP_SPECIALIZE=2 takes the experimental compute warpgroups' ping-pong",
    ),
    # ---------------------------------------------------------------- the runtime
    Switch(
        "CACHE_DIR",
        type="path",
        default=None,
        codegen=False,
        when="call",
        reader="runtime/cache.py",
        parse=_text,
        doc=(
            "the cubin and autotune cache directory (unset: $XDG_CACHE_HOME/teeny_tx, else "
            "~/.cache/teeny_tx)"
        ),
    ),
    Switch(
        "PCH",
        type="0/1",
        default=None,
        codegen=False,
        when="call",
        reader="runtime/nvrtc.py",
        parse=_text,
        doc=(
            "NVRTC precompiled headers: unset, on except for arch-specific targets; 1 on for "
            "every target; 0 off (the cubin is the same)"
        ),
    ),
    Switch(
        "COMPILE_THREADS",
        type="int",
        default=None,
        codegen=False,
        when="call",
        reader="runtime/autotune.py",
        parse=_int,
        doc="threads that compile an autotuner's configs (unset: one per CPU, at most 16)",
    ),
    Switch(
        "AUTOTUNE_PRINT",
        type="0/1",
        default=False,
        codegen=False,
        when="call",
        reader="runtime/autotune.py",
        parse=_flag,
        doc="print each autotuner choice to stderr",
    ),
    Switch(
        "QUIET",
        type="0/1",
        default=False,
        codegen=False,
        when="call",
        reader="progress.py",
        parse=_flag,
        doc="1: no progress lines on stderr (autotuning, bulk compiles), even on a terminal",
    ),
    # ---------------------------------------------------------------- the kernel library
    Switch(
        "HOPPER",
        type="0/1",
        default=True,
        codegen=False,
        when="import",
        reader="library/linalg.py",
        parse=_flag,
        doc=(
            "0: f16/bf16 products on sm_90a keep the cp.async kernel instead of the TMA + wgmma "
            "matmul"
        ),
    ),
    Switch(
        "HOPPER_TUNE",
        type="0/1",
        default=False,
        codegen=False,
        when="import",
        reader="library/hopper_configs.py",
        parse=_flag,
        doc="1: the Hopper matmul times its candidate configs instead of taking the table's",
    ),
    Switch(
        "HOPPER_TMA_STORE",
        type="0/1",
        default=True,
        codegen=True,
        when="import",
        reader="library/linalg.py",
        parse=_flag,
        doc=(
            "0: the Hopper matmul's epilogue stores from registers, not through TMA (a field of "
            "its config, so in its key)"
        ),
    ),
    Switch(
        "HOPPER_WATCHDOG",
        type="int",
        default=0,
        codegen=True,
        when="import",
        reader="library/linalg.py",
        parse=_int,
        doc=(
            "the Hopper matmul's mbarrier waits trap after this many tries (0: plain waits; a "
            "field of its config, so in its key)"
        ),
    ),
    Switch(
        "ATTENTION_WS",
        type="0/1/2",
        default=None,
        codegen=False,
        when="import",
        reader="library/attention.py",
        parse=_int,
        doc=(
            "forces attention's WARP_SPECIALIZE constexpr (in the key as a constexpr) for the "
            "forward and dQ at every head dim (unset: the config tables')"
        ),
    ),
    # ---------------------------------------------------------------- the benchmarks
    Switch(
        "BENCH_CONFIGS",
        type="0/1",
        default=False,
        codegen=False,
        when="call",
        reader="bench/",
        parse=_flag,
        doc="the row benchmarks (softmax, layernorm, rmsnorm) also time every config",
    ),
    Switch(
        "BENCH_VARIANTS",
        type="0/1",
        default=False,
        codegen=False,
        when="call",
        reader="bench/",
        parse=_flag,
        doc="the layernorm benchmark also times its variants",
    ),
)


def read(name: str) -> Any:
    """The value of switch ``name`` (``"DEFER_WAITS"`` or ``"TEENY_TX_DEFER_WAITS"``) in the
    environment now: its default where unset or empty, else its text parsed; a value that does
    not parse is a TeenyError naming the variable."""
    switch = SWITCHES.get(name.removeprefix(PREFIX))
    if switch is None:
        raise TeenyError(f"{name} is not a declared switch (teeny_tx/switches.py)")
    text = os.environ.get(switch.env, "")
    if not text.strip():
        return switch.default
    try:
        return switch.parse(text)
    except ValueError:
        raise TeenyError(
            f"${switch.env}={text!r} is not a valid value: expected {switch.type}"
        ) from None


@dataclass(frozen=True)
class CodegenSwitches:
    """The switches the passes read (``when="specialize"``), as one specialisation was made
    under: part of its key. The defaults are the switches' defaults, not the environment."""

    pipeline_tma: str = ""  # "1", or comma-separated kernel names
    defer_waits: bool = True
    ws_pingpong: bool = False

    def tma_for(self, kernel: str) -> bool:
        """Whether :attr:`pipeline_tma` names ``kernel`` (or is ``1``)."""
        value = self.pipeline_tma
        return value == "1" or kernel in {n.strip() for n in value.split(",")}


# The raw text of the specialise-time switches, read cheaply: a launch looks them up each time
# (a switch flipped between two calls must not replay the first call's cubin), and
# os.environ.get costs ~0.8 us a name where CPython's mapping under it costs ~60 ns.
_SPECIALIZE = tuple(s.env for s in SWITCHES.values() if s.when == "specialize")
_RAW: Any = getattr(os.environ, "_data", None)
_KEYS: tuple = tuple(os.environ.encodekey(e) for e in _SPECIALIZE) if _RAW is not None else ()


def fingerprint() -> tuple:
    """The raw values of the specialise-time switches now (None where unset): equal
    fingerprints mean equal :func:`codegen` values, so launches and plans key on it."""
    if _RAW is not None:
        get = _RAW.get
        return tuple([get(k) for k in _KEYS])
    return tuple(os.environ.get(e) for e in _SPECIALIZE)  # pragma: no cover - not CPython


def codegen() -> CodegenSwitches:
    """The :class:`CodegenSwitches` of the environment now."""
    return CodegenSwitches(
        pipeline_tma=read("PIPELINE_TMA"),
        defer_waits=read("DEFER_WAITS"),
        ws_pingpong=read("WS_PINGPONG"),
    )


def markdown() -> str:
    """``docs/switches.md``: the table as a page."""
    lines = [
        "# Switches",
        "",
        "<!-- generated by `python -m teeny_tx.docs switches > docs/switches.md`; do not edit -->",
        "",
        "Every environment variable teeny_tx reads, declared in `teeny_tx/switches.py`. "
        "*Code*: whether it changes generated CUDA (then it is part of a specialisation's key, "
        "or of the target). *Read*: `compile` once per `teeny_tx.compile`; `specialize` at each "
        "specialisation look-up (a flip gets new code); `import` once, as a module setting; "
        "`call` at each use.",
        "",
        "| variable | values | default | code | read | by | meaning |",
        "|---|---|---|---|---|---|---|",
    ]
    for s in SWITCHES.values():
        default = "unset" if s.default is None else repr(s.default)
        code = "yes" if s.codegen else "no"
        lines.append(
            f"| `{s.env}` | {s.type} | {default} | {code} | {s.when} | `{s.reader}` | {s.doc} |"
        )
    return "\n".join(lines) + "\n"
