"""Kernel text → pycparser AST, with coordinates in the user's file.

Input: the text of a kernel file and the name to report it by. Output: a :class:`Unit` holding
the AST of the kernel file's functions, the prelude's operation prototypes, the
``#pragma autotune`` declarations of its kernels (``parse/pragmas.py``), and the means to turn
a pycparser coordinate into a :class:`~teeny_tx.errors.Location` with the source line.

The prelude and the kernel are joined with a ``# 1 "file"`` line marker, so every coordinate
pycparser reports for kernel code names the kernel file and its own line numbers. Comments are
blanked out first (pycparser expects preprocessed text); line and column positions are kept.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from pycparser import c_ast, c_parser

from .._prelude import FILES
from ..errors import CompileError, Location
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
    text = text.replace("\r\n", "\n")  # files saved with Windows line ends: pycparser rejects \r
    stripped = strip_comments(text)
    joined = f'{strip_comments(prelude_text())}\n# 1 "{filename}"\n{stripped}'
    try:
        ast = c_parser.CParser().parse(joined, PRELUDE_NAME)
    except c_parser.ParseError as exc:
        raise _syntax_error(str(exc), filename, text) from None
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
    if not m:
        return CompileError(f"syntax error: {message}", Location(filename, 1, 1, None))
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
    return CompileError(detail, Location(m["file"], line, col, source), hint)
