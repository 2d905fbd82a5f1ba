"""Checks of kernel text before and after pycparser sees it, and locations in the file.

Input: the kernel file's text (and, after parsing, its syntax tree). Output: nothing, or a
located :class:`~teeny_tx.errors.CompileError`: a name that cannot be a line marker, a file past
the size limit, line markers, line splices and control characters, brackets or a syntax tree
nested past the limit, and identifiers the language reserves (``parse/reserved.py``).
"""

from __future__ import annotations

import bisect
import re

from pycparser import c_ast

from ..errors import CompileError, Location
from .reserved import reserved_hint, why_reserved

# Limits on what one kernel file may be: the largest bundled kernel is under 8 KiB and nests a
# dozen levels deep. Beyond these the parser and the recursive passes would take seconds or
# overflow Python's stack; a located error says so instead.
MAX_SOURCE_BYTES = 64 * 1024
MAX_NESTING = 64  # brackets open at once, and the depth of the syntax tree (expressions + blocks)
MAX_BLOCKS = 32  # blocks inside a function's body (pycparser 3 loses typedef names past 33)
MAX_TERMS = 128  # operands of one flat chain of one operator (a + b + c ...)
RECURSION_HEADROOM = 40  # Python frames one nesting level may take in the parser and passes


def file_loc(coord, filename: str, text: str) -> Location:
    """The Location of a pycparser coordinate in the kernel file (its end when outside)."""
    lines = text.split("\n")
    line = int(coord.line or 1)
    if coord.file != filename or not 0 < line <= len(lines):
        return end_loc(filename, text)
    return Location(filename, line, int(coord.column or 1), lines[line - 1])


def end_loc(filename: str, text: str) -> Location:
    """The end of the file's last non-blank line: where a missing token would have been."""
    lines = text.split("\n")
    for n in range(len(lines), 0, -1):
        if lines[n - 1].strip():
            return Location(filename, n, len(lines[n - 1].rstrip()) + 1, lines[n - 1])
    return Location(filename, 1, 1, lines[0] if lines else "")


# ---------------------------------------------------------------- checks before and after parsing

_FILENAME_BAD = re.compile(r'["\\\x00-\x1f\x7f]')
_LINE_MARKER = re.compile(r"^[ \t]*#[ \t]*(line\b|\d)")
_BRACKETS = re.compile(r""""(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'|[()\[\]{}]""")


def check_filename(filename: str) -> None:
    """A kernel's name is written into a line marker and ``#line`` directives: no quotes,
    backslashes or control characters."""
    bad = _FILENAME_BAD.search(filename)
    if bad:
        raise CompileError(
            f"the kernel file name {filename!r} holds {bad.group(0)!r}, which cannot appear in "
            "a #line directive",
            None,
            "name it with a plain path, e.g. name='kernels/mine.c'",
        )


def check_size(text: str, filename: str) -> None:
    """At most MAX_SOURCE_BYTES of UTF-8, else an error at the line that crosses the limit."""
    if len(text) <= MAX_SOURCE_BYTES // 4:  # 4 bytes a character at most
        return
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= MAX_SOURCE_BYTES:
        return
    head = data[:MAX_SOURCE_BYTES]
    n = head.count(b"\n") + 1
    start = head.rfind(b"\n") + 1
    end = data.find(b"\n", start)
    line = data[start : end if end >= 0 else len(data)].decode("utf-8", "replace").rstrip("\r")
    raise CompileError(
        f"the kernel file is {len(data)} bytes; the limit is {MAX_SOURCE_BYTES}",
        Location(filename, n, 1, line),
        "split it into several files",
    )


def check_text(text: str, stripped: str, filename: str) -> None:
    """Size, line markers, line splices and bracket depth, before pycparser sees the text."""
    lines = text.split("\n")
    for n, line in enumerate(stripped.split("\n"), 1):
        if _LINE_MARKER.match(line):
            col = line.index("#") + 1
            raise CompileError(
                'line markers (#line, # N "file") are not allowed in kernel text',
                Location(filename, n, col, lines[n - 1]),
                "errors and the generated #line directives point at this file's own lines",
            )
        if lines[n - 1].endswith("\\"):
            raise CompileError(
                "a line may not end in a backslash (C would join the next line to it)",
                Location(filename, n, len(lines[n - 1]), lines[n - 1]),
                "remove the backslash; statements may span lines without one",
            )
        bad = next((c for c in line if ord(c) < 32 and c not in "\t\f\v"), None)
        if bad is not None:
            col = line.index(bad) + 1
            raise CompileError(
                f"the character {bad!r} cannot appear in kernel text",
                Location(filename, n, col, lines[n - 1]),
                "remove it (a stray control character)",
            )
    depth, blocks, line_starts = 0, 0, _line_starts(stripped)
    for m in _BRACKETS.finditer(stripped):
        c = m.group(0)
        if c in "([{":
            depth += 1
            blocks += c == "{"
            if blocks > MAX_BLOCKS + 1:  # the function's own braces are not a nesting level
                raise _nesting_error(filename, lines, line_starts, m.start(), blocks=True)
            if depth > MAX_NESTING:
                raise _nesting_error(filename, lines, line_starts, m.start())
        elif c in ")]}":
            depth = max(depth - 1, 0)
            blocks = max(blocks - (c == "}"), 0)


def _line_starts(text: str) -> list[int]:
    return [0] + [m.end() for m in re.finditer("\n", text)]


def _nesting_error(
    filename: str, lines: list[str], starts: list[int], pos: int, blocks: bool = False
) -> CompileError:
    n = bisect.bisect_right(starts, pos)
    loc = Location(filename, n, pos - starts[n - 1] + 1, lines[n - 1])
    if blocks:
        return CompileError(
            f"blocks nest more than {MAX_BLOCKS} deep (loops, ifs and {{ }} inside the body)",
            loc,
            "move the inner levels into a helper function",
        )
    return CompileError(
        f"brackets nest more than {MAX_NESTING} deep", loc, "split the expression into named steps"
    )


def check_tree(ast: c_ast.FileAST, filename: str, text: str) -> None:
    """The kernel file's syntax tree: no deeper than MAX_NESTING, no reserved identifier."""
    lines = text.split("\n")
    # top-level functions: kernels and helpers alike avoid the global names (R4), since a
    # helper becomes a kernel by an edit of one word
    functions = {id(f.decl) for f in ast.ext if isinstance(f, c_ast.FuncDef)}
    stack = [
        (node, 1) for node in ast.ext if node.coord is not None and node.coord.file == filename
    ]
    while stack:
        node, depth = stack.pop()
        coord = node.coord
        if depth > MAX_NESTING:
            raise CompileError(
                f"the code nests more than {MAX_NESTING} levels deep",
                file_loc(coord, filename, text) if coord else end_loc(filename, text),
                "split long expressions into named steps (a sum of many terms nests too)",
            )
        for name in _names(node):
            why = why_reserved(name, kernel=id(node) in functions)
            if why is not None:
                loc = _name_loc(coord, name, filename, lines, text)
                raise CompileError(f"'{name}' is reserved: {why}", loc, reserved_hint(name))
        if isinstance(node, c_ast.BinaryOp):
            terms = _chain_terms(node)
            if terms > MAX_TERMS:
                raise CompileError(
                    f"one '{node.op}' chain has {terms} terms; at most {MAX_TERMS}",
                    file_loc(coord, filename, text) if coord else end_loc(filename, text),
                    "sum the terms in named steps",
                )
        for _, child in reversed(list(node.children())):
            stack.append((child, depth + _level(node, child)))


# nodes that are no level of their own as the user writes the code: a loop's or an if's block
# is the statement's level, and declarations, lists and statements wrap what they hold
_WRAPPERS = (
    c_ast.Decl, c_ast.TypeDecl, c_ast.FuncDecl, c_ast.ParamList, c_ast.ExprList, c_ast.DeclList,
    c_ast.IdentifierType, c_ast.PtrDecl, c_ast.ArrayDecl, c_ast.Typename, c_ast.Return,
    c_ast.Assignment, c_ast.FuncDef,
)  # fmt: skip
_STATEMENTS = (c_ast.For, c_ast.While, c_ast.DoWhile, c_ast.If, c_ast.FuncDef)


def _level(parent: c_ast.Node, child: c_ast.Node) -> int:
    """How many levels deeper ``child`` is than ``parent`` as the user counts: a block that is a
    statement's body, a wrapper, and the left operand of a flat chain (``a + b + c``: one level,
    not one per ``+``) add none."""
    if isinstance(child, c_ast.Compound) and isinstance(parent, _STATEMENTS):
        return 0
    if isinstance(parent, _WRAPPERS):
        return 0
    if (
        isinstance(parent, c_ast.BinaryOp)
        and isinstance(child, c_ast.BinaryOp)
        and child is parent.left
        and child.op == parent.op
    ):
        return 0
    return 1


def _chain_terms(node: c_ast.BinaryOp) -> int:
    """Operands of the flat chain of ``node``'s operator that ends at ``node``."""
    terms = 1
    while isinstance(node, c_ast.BinaryOp):
        terms += 1
        left = node.left
        if not (isinstance(left, c_ast.BinaryOp) and left.op == node.op):
            break
        node = left
    return terms


def _names(node: c_ast.Node) -> tuple[str, ...]:
    """The identifiers a node spells itself (its children spell theirs)."""
    if isinstance(node, (c_ast.ID, c_ast.Struct, c_ast.Union, c_ast.Enum, c_ast.Enumerator)):
        return (node.name,) if node.name else ()
    if isinstance(node, c_ast.Decl):
        return (node.name,) if node.name else ()
    if isinstance(node, (c_ast.Label, c_ast.Goto)):
        return (node.name,)
    return ()


def _name_loc(coord, name: str, filename: str, lines: list[str], text: str) -> Location:
    """The name's own column on the node's line (pycparser places a declaration at its
    type or its name, depending on the form)."""
    loc = file_loc(coord, filename, text) if coord else end_loc(filename, text)
    if loc.source_line is None:
        return loc
    line = loc.source_line
    for m in re.finditer(rf"(?<![\w]){re.escape(name)}(?![\w])", line):
        if m.start() + 1 >= loc.col:
            return Location(loc.file, loc.line, m.start() + 1, line)
    first = re.search(rf"(?<![\w]){re.escape(name)}(?![\w])", line)
    return Location(loc.file, loc.line, first.start() + 1, line) if first else loc
