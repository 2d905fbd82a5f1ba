"""The one family of errors teeny_tx raises at its users.

Every error a user can provoke (bad kernel text, bad launch arguments, a compiler failure)
is a :class:`TeenyError`. Errors that come from the kernel text carry a :class:`Location`
and render as ``file:line:col: error: message``, the offending line, a caret and a hint.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Location:
    """A point in a kernel file: 1-based line and column, plus the file's text for display."""

    file: str
    line: int
    col: int = 1
    source_line: str | None = None

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


class TeenyError(Exception):
    """Base class of every error teeny_tx raises on purpose."""


class CompileError(TeenyError):
    """An error in kernel text: syntax, names, types, shapes, unsupported constructs."""

    def __init__(self, message: str, loc: Location | None = None, hint: str | None = None):
        self.message = message
        self.loc = loc
        self.hint = hint
        super().__init__(self.render())

    def render(self) -> str:
        if self.loc is None:
            text = f"error: {self.message}"
        else:
            text = f"{self.loc}: error: {self.message}"
            if self.loc.source_line is not None:
                raw = self.loc.source_line.rstrip("\n")
                line = raw.expandtabs(4)
                caret = " " * len(raw[: max(self.loc.col - 1, 0)].expandtabs(4)) + "^"
                text += f"\n    {line}\n    {caret}"
        if self.hint:
            text += f"\n  hint: {self.hint}"
        return text


class LaunchError(TeenyError):
    """Bad launch: wrong argument count or types, host memory, bad grid, missing constexprs."""


class NvrtcError(TeenyError):
    """NVRTC rejected the generated CUDA; the log points at kernel lines through #line."""

    def __init__(self, log: str, kernel: str = "", arch: str = ""):
        self.log = log
        where = f" for kernel '{kernel}'" if kernel else ""
        super().__init__(
            f"NVRTC failed to compile the generated CUDA{where} ({arch}):\n{log.rstrip()}"
        )


class ResourceError(TeenyError):
    """A specialisation needs more of the device (shared memory, registers) than it has.

    ``needed`` and ``limit`` are the bytes of shared memory per block it needs and the target
    allows, where that is the resource (None otherwise)."""

    def __init__(self, message: str, needed: int | None = None, limit: int | None = None):
        self.needed = needed
        self.limit = limit
        super().__init__(message)


class InterpreterError(TeenyError):
    """The NumPy interpreter caught an illegal access (an unmasked out-of-bounds load or store)."""


class PerformanceWarning(UserWarning):
    """A kernel compiles, but slower than it could, and the kernel text can fix it: a ``dot`` on
    sm_90a whose tiles do not fit wgmma runs as mma.sync (the message names the tile dimension
    to change). ``TEENY_TX_PERF_WARNINGS=0`` silences it, as does
    ``warnings.filterwarnings("ignore", category=teeny_tx.PerformanceWarning)``."""


class RegisterSpillWarning(UserWarning):
    """A specialisation compiled, but ptxas spilled registers to (slow) local memory:
    ``spilled`` bytes per thread."""

    def __init__(self, message: str, spilled: int = 0):
        self.spilled = spilled
        super().__init__(message)
