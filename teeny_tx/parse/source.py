"""Kernel text → pycparser AST, with coordinates in the user's file.

Input: the text of a kernel file and the name to report it by. Output: a :class:`Unit` holding
the AST of the kernel file's functions, the prelude's operation prototypes, the
``#pragma autotune`` declarations of its kernels (``parse/pragmas.py``), and the means to turn
a pycparser coordinate into a :class:`~teeny_tx.errors.Location` with the source line.

The prelude and the kernel are joined with a ``# 1 "file"`` line marker, so every coordinate
pycparser reports for kernel code names the kernel file and its own line numbers. Comments are
blanked out first (pycparser expects preprocessed text); line and column positions are kept.
Every syntax error is placed at a token of the file (``_Parser``: pycparser raises some with a
file name alone); the text and the tree are checked (size, nesting, line markers, reserved
names) by ``parse/checks.py``.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from pycparser import c_ast, c_parser

try:  # pycparser 3
    from pycparser.c_parser import Coord
except ImportError:  # pycparser 2
    from pycparser.plyparser import Coord

from .._prelude import FILES
from ..errors import CompileError, Location
from .checks import (
    MAX_NESTING,
    RECURSION_HEADROOM,
    check_filename,
    check_size,
    check_text,
    check_tree,
    end_loc,
    file_loc,
)
from .pragmas import AutotuneDecl, parse_autotune

PRELUDE_NAME = "<teeny_tx prelude>"


_COMMENT_OR_STRING = re.compile(
    r"""//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'""", re.DOTALL
)
_PYCPARSER_ERROR = re.compile(r"^(?P<file>.*?):(?P<line>\d+):(?P<col>\d+): (?P<msg>.*)$", re.DOTALL)


def prelude_text() -> str:
    """The language's declarations: ``language.h``, then every other ``.h`` of the prelude."""
    names = ["language.h"] + sorted(n for n in FILES if n.endswith(".h") and n != "language.h")
    return "\n".join(FILES[n] for n in names)


def strip_comments(text: str) -> str:
    """Blank out C comments, keeping every newline and column (string literals untouched)."""

    def blank(match: re.Match) -> str:
        s = match.group(0)
        if s[0] in "\"'":
            return s
        return re.sub(r"[^\n]", " ", s)

    return _COMMENT_OR_STRING.sub(blank, text)


@dataclass
class Unit:
    """A parsed kernel file: its functions, the prelude prototypes, and its text."""

    filename: str
    text: str
    ast: c_ast.FileAST
    functions: dict[str, c_ast.FuncDef] = field(default_factory=dict)
    prototypes: dict[str, c_ast.Decl] = field(default_factory=dict)
    autotune: dict[str, AutotuneDecl] = field(default_factory=dict)  # kernel -> its pragmas

    @property
    def lines(self) -> list[str]:
        return self.text.split("\n")  # pycparser counts only \n as a line end

    def loc(self, coord) -> Location:
        """The Location of a pycparser coordinate (or node), with the line's text."""
        if coord is not None and not hasattr(coord, "line"):
            coord = getattr(coord, "coord", None)
        if coord is None:
            return Location(self.filename, 1, 1, None)
        line = int(coord.line)
        col = int(coord.column or 1)
        text = (
            self.lines[line - 1]
            if coord.file == self.filename and 0 < line <= len(self.lines)
            else None
        )
        return Location(coord.file or self.filename, line, col, text)

    def start_loc(self) -> Location:
        """The file's first line: where an error about the whole file points."""
        return Location(self.filename, 1, 1, self.lines[0])

    def kernels(self) -> list[str]:
        return [name for name, fn in self.functions.items() if _returns(fn) == "kernel"]


def _returns(fn: c_ast.FuncDef) -> str | None:
    decl = fn.decl.type.type
    while isinstance(decl, (c_ast.PtrDecl,)):
        decl = decl.type
    names = getattr(getattr(decl, "type", None), "names", None)
    return names[0] if names else None


def parse(text: str, filename: str) -> Unit:
    """Parse a kernel file's text joined to the prelude; syntax errors point into the file."""
    check_filename(filename)
    check_size(text, filename)  # first: a huge text costs time in everything below
    text = text.replace("\r\n", "\n")  # files saved with Windows line ends: pycparser rejects \r
    text = text.removeprefix("\ufeff")  # a byte-order mark, as gcc, clang and nvcc skip it
    stripped = strip_comments(text)
    check_text(text, stripped, filename)
    joined = f'{strip_comments(prelude_text())}\n# 1 "{filename}"\n{stripped}'
    parser = _Parser()
    try:
        with _recursion_room(MAX_NESTING * RECURSION_HEADROOM):
            ast = parser.parse(joined, PRELUDE_NAME)
    except c_parser.ParseError as exc:
        raise _syntax_error(str(exc), filename, text) from None
    except RecursionError:
        coord = parser.error_coord()
        raise CompileError(
            "the code nests too deeply to parse",
            file_loc(coord, filename, text),
            f"split the expression into named steps (at most {MAX_NESTING} levels)",
        ) from None
    check_tree(ast, filename, text)
    unit = Unit(filename, text, ast)
    pragmas: list[c_ast.Pragma] = []  # the autotune lines before the next definition
    for node in ast.ext:
        in_prelude = node.coord is not None and node.coord.file == PRELUDE_NAME
        if isinstance(node, c_ast.Pragma) and not in_prelude:
            pragmas.append(node)
            continue
        if pragmas:
            _attach(unit, pragmas, node, stripped)
            pragmas = []
        if isinstance(node, c_ast.FuncDef):
            name = node.decl.name
            if name in unit.functions:
                raise CompileError(f"function '{name}' is defined twice", unit.loc(node.decl.coord))
            unit.functions[name] = node
        elif in_prelude and isinstance(node, c_ast.Decl) and isinstance(node.type, c_ast.FuncDecl):
            unit.prototypes[node.name] = node
        elif not in_prelude:
            raise CompileError(
                "only functions may appear at the top level of a kernel file",
                unit.loc(node.coord),
                "declare constants as `const` kernel parameters instead",
            )
    if pragmas:
        _attach(unit, pragmas, None, stripped)
    for name, fn in unit.functions.items():
        if name in unit.prototypes:
            raise CompileError(
                f"'{name}' is an operation of the language and cannot be redefined",
                unit.loc(fn.decl.coord),
                "rename the function",
            )
    return unit


def _attach(
    unit: Unit, pragmas: list[c_ast.Pragma], node: c_ast.Node | None, stripped: str
) -> None:
    """Give the pragma lines before ``node`` to it: it must be a kernel definition."""
    decl = node.decl if isinstance(node, c_ast.FuncDef) else None
    name = decl.name if decl is not None else ""
    autotune = parse_autotune(name, pragmas, unit.filename, unit.lines, stripped.split("\n"))
    if decl is None or _returns(node) != "kernel":
        raise CompileError(
            "#pragma autotune must come directly before a kernel definition",
            autotune.loc,
            "move it to the lines just above `kernel name(...)`",
        )
    if not autotune.configs:
        raise CompileError(
            f"kernel {name} declares an autotune key but no config",
            autotune.loc,
            "add `#pragma autotune config(...)` lines, one per config to try",
        )
    unit.autotune[name] = autotune


def _syntax_error(message: str, filename: str, text: str) -> CompileError:
    m = _PYCPARSER_ERROR.match(message)
    if not m:  # _Parser gives every error a coordinate; this is a safety net
        return CompileError(f"syntax error: {message}", end_loc(filename, text))
    line, col = int(m["line"]), int(m["col"])
    lines = text.split("\n")
    source = lines[line - 1] if m["file"] == filename and 0 < line <= len(lines) else None
    detail = m["msg"].strip()
    hint = None
    if detail.startswith("Comments are not supported"):  # what is left of an unclosed /*
        detail = "unterminated comment: this /* has no closing */"
    elif detail.startswith("Directives not supported"):
        detail = "preprocessor directives (#define, #include, ...) are not supported"
        hint = "pass constants as `const` kernel parameters; helpers live in the same file"
    elif detail.startswith("before:"):
        token = detail[len("before:") :].strip()
        detail = f"syntax error before '{token}'"
        hint = "check for a missing ';', ')' or '}' just before it, or an unknown type name"
    elif detail.startswith("At end of input"):
        detail = "unexpected end of file"
        hint = "a closing '}', ')' or ';' is missing"
    elif m["file"] == filename:
        detail, hint = _detail(detail)
    if m["file"] != filename or source is None:  # a coordinate outside the kernel file
        return CompileError(f"syntax error: {detail}", end_loc(filename, text), hint)
    return CompileError(detail, Location(m["file"], line, col, source), hint)


def _detail(detail: str) -> tuple[str, str | None]:
    """pycparser's messages without a token, said as the user sees the problem."""
    what = re.match(r"(Invalid \w+(?: \w+)?) at '(.*)'$", detail, re.DOTALL)
    if what:
        thing = what[1][len("Invalid ") :]
        return f"syntax error: expected {_article(thing)} {thing}, got '{what[2]}'", None
    if detail.startswith("Invalid "):
        hint = "a C keyword or a misspelt type name may stand where a name or type belongs"
        return f"syntax error: {detail[0].lower()}{detail[1:]}", hint
    return detail, None


def _article(word: str) -> str:
    return "an" if word[:1] in "aeiou" else "a"


class _Parser(c_parser.CParser):
    """pycparser's parser, with every syntax error at a token of the file: the errors it raises
    with a file name alone (``Invalid expression``, ``At end of input``) are placed at the token
    the parser stopped at, or just after the last token at the end of the file."""

    def _parse_error(self, msg, coord):
        if getattr(coord, "line", None) is None:
            coord = self.error_coord()
            token = self._next_token()
            if token is not None and not msg.startswith("At end"):
                msg = f"{msg} at '{token.value}'"
        raise c_parser.ParseError(f"{coord}: {msg}")

    def _parse_argument_expression_list(self):
        """Arguments of a call; a lone type name is one too (``bitcast(x, u32)``), as a
        ``Typename`` node. (pycparser 3's recursive-descent parser; pycparser 2 never calls
        this, and there a type argument stays a syntax error.)"""
        exprs = [self._argument()]
        while self._accept("COMMA"):
            exprs.append(self._argument())
        return c_ast.ExprList(exprs, exprs[0].coord)

    def _argument(self):
        first, after = self._peek(), self._peek(2)
        if (
            first is not None
            and first.type == "TYPEID"
            and after is not None
            and after.type in ("COMMA", "RPAREN")
        ):
            return self._parse_type_name()
        return self._parse_assignment_expression()

    def _next_token(self):
        stream = getattr(self, "_tokens", None)
        try:
            return stream.peek(1) if stream is not None else None
        except Exception:  # the lexer failed on the next token: no token to show
            return None

    def error_coord(self) -> Coord:
        """Where the parser stands: the next token, or the end of the last one at the end."""
        token = self._next_token()
        if token is not None:
            return Coord(token.filename, token.lineno, token.column)
        buffer = getattr(getattr(self, "_tokens", None), "_buffer", None) or []
        seen = [t for t in buffer if t is not None]
        last = seen[-1] if seen else getattr(self.clex, "last_token", None)
        if last is None:
            return Coord(self.clex.filename, 1, 1)
        column = (getattr(last, "column", None) or 1) + len(str(last.value))
        return Coord(getattr(last, "filename", self.clex.filename), last.lineno, column)


@contextmanager
def _recursion_room(frames: int) -> Iterator[None]:
    """At least ``frames`` more Python frames than now, for the recursive-descent parser."""
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(old + frames)
    try:
        yield
    finally:
        sys.setrecursionlimit(old)
