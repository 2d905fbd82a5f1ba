"""A one-line progress meter on stderr for long steps: autotuning, bulk compiles.

Input: the number of steps, a label, and a note per step (the config just timed and the best
so far; the file just compiled). Output: ``label  i/n  note`` rewritten in place on stderr
(``\\r``, the rest of the line cleared), and a newline at the end. Off, writing nothing, when
stderr is not a terminal (logs, CI, pipes) or ``$TEENY_TX_QUIET`` is set to anything but
``0``. No dependency: tqdm's bar would be one more package for one line of text.
"""

from __future__ import annotations

import sys
from typing import IO

from . import switches


def enabled(stream: IO[str] | None = None) -> bool:
    """Whether progress is shown on ``stream`` (default: the current stderr)."""
    if switches.read("QUIET"):
        return False
    stream = sys.stderr if stream is None else stream
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


class Progress:
    """``with Progress(n, "label") as p: ... p.step("note")``: step ``i`` of ``n``."""

    def __init__(self, total: int, label: str, stream: IO[str] | None = None):
        self.total = total
        self.label = label
        self.done = 0
        self.stream = sys.stderr if stream is None else stream
        self.on = enabled(self.stream)
        self._width = 0

    def step(self, note: str = "") -> None:
        """One more step done; ``note`` says which (and, for a search, the best so far)."""
        self.done += 1
        if self.on:
            text = f"{self.label}  {self.done}/{self.total}  {note}".rstrip()
            pad = " " * max(0, self._width - len(text))
            self._width = len(text)
            self.stream.write(f"\r{text}{pad}")
            self.stream.flush()

    def clear(self) -> None:
        """Blank the meter's line, so that a line printed next starts clean (it is redrawn at
        the next step)."""
        if self.on and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
            self._width = 0

    def close(self) -> None:
        if self.on and self.done:
            self.stream.write("\n")
            self.stream.flush()
        self.on = False

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
