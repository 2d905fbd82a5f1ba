"""The C text of a translated Python kernel, laid out line for line over the Python file.

Input: pieces of C text, each placed at a line of a Python file, with marks around the parts
that came from one Python expression (``mark``). Output: the kernel file's text, in which the
C of Python line N stands on line N, so that the C front end's coordinates and the CUDA's
``#line N "file.py"`` directives name the Python line; and :meth:`Program.locate`, which turns
a coordinate of that text back into the Python line and column (the innermost marked
expression that holds it), for the errors the C front end raises.

Functions of another file than the kernel's are laid after the kernel file's last line (their
``#line`` directives then name the kernel's file; their errors are mapped back).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..errors import CompileError, Location

_OPEN, _MID, _CLOSE = "\x01", "\x02", "\x03"
_MARKS = re.compile("\x01(\\d+)\x02|\x03")


@dataclass(frozen=True)
class Origin:
    """Where a piece of C came from: a Python file, its 1-based line and column, the line."""

    file: str
    line: int
    col: int
    text: str | None


@dataclass
class Program:
    """The C text being built for one kernel and the helpers it calls."""

    filename: str  # the kernel's Python file: the name the C text is compiled under
    pieces: dict[int, list[str]] = field(default_factory=dict)  # C line -> text pieces
    origins: list[Origin] = field(default_factory=list)  # mark id -> origin
    line_origin: dict[int, Origin] = field(default_factory=dict)  # C line -> first statement
    _spans: dict[int, list[tuple[int, int, int]]] = field(default_factory=dict)
    _text: str | None = None

    def mark(self, origin: Origin, text: str) -> str:
        """``text`` marked as the translation of the expression at ``origin``."""
        self.origins.append(origin)
        return f"{_OPEN}{len(self.origins) - 1}{_MID}{text}{_CLOSE}"

    def put(self, line: int, text: str, origin: Origin) -> None:
        """Append ``text`` to C line ``line`` (the statement of ``origin``)."""
        self.pieces.setdefault(line, []).append(text)
        self.line_origin.setdefault(line, origin)
        self._text = None

    def last_line(self) -> int:
        return max(self.pieces, default=0)

    def text(self) -> str:
        """The kernel file: marks removed, one C line per Python line."""
        if self._text is None:
            out = []
            for n in range(1, self.last_line() + 1):
                raw = " ".join(p for p in self.pieces.get(n, []) if p)
                origin = self.line_origin.get(n)
                source = origin.text if origin is not None and origin.text else ""
                indent = source[: len(source) - len(source.lstrip())] if raw else ""
                out.append(self._strip(n, indent + raw))
            self._text = "\n".join(out) + "\n"
        return self._text

    def _strip(self, n: int, raw: str) -> str:
        clean, stack, spans = [], [], []
        pos = 0
        for m in _MARKS.finditer(raw):
            clean.append(raw[pos : m.start()])
            col = sum(len(c) for c in clean)
            if m.group(1) is not None:
                stack.append((col, int(m.group(1))))
            elif stack:
                start, ident = stack.pop()
                spans.append((start, col, ident))
            pos = m.end()
        clean.append(raw[pos:])
        self._spans[n] = spans
        return "".join(clean)

    def locate(self, line: int, col: int) -> Origin | None:
        """The Python origin of C coordinate (line, col), 1-based; None outside the text."""
        self.text()
        spans = [s for s in self._spans.get(line, []) if s[0] <= col - 1 < max(s[1], s[0] + 1)]
        if spans:
            start, end, ident = min(spans, key=lambda s: s[1] - s[0])
            return self.origins[ident]
        return self.line_origin.get(line)

    def remap(self, err: CompileError) -> CompileError:
        """The C front end's error ``err``, placed at the Python line and column it came from;
        the C the line was translated to goes into the hint."""
        loc = err.loc
        if loc is None or loc.file != self.filename:
            return err
        origin = self.locate(loc.line, loc.col)
        if origin is None:
            return err
        c_line = self.text().split("\n")[loc.line - 1].strip()
        hint = (err.hint + "; " if err.hint else "") + f"translated to C: `{c_line}`"
        where = Location(origin.file, origin.line, origin.col, origin.text)
        return CompileError(err.message, where, hint)
