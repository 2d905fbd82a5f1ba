"""Rich display of modules, kernels and specialisations, in notebooks and the book.

Input: a :class:`~teeny_tx.kernel.Module`, :class:`~teeny_tx.kernel.Kernel` or
:class:`~teeny_tx.kernel.Specialization`. Output: HTML (``_repr_html_``, what Jupyter shows)
or Markdown (``_repr_markdown_``): the kernel source, the generated CUDA highlighted by
Pygments and cut into blocks, one per DSL statement (the emitter writes each statement as a
``// statement`` comment and a ``#line`` directive), each block linked to its source line and
back, and the resources ptxas reports (registers, spills, shared memory, occupancy; see
``runtime/resources.py``) in a small table. :func:`show` does the same outside a notebook's
cell magic (``notebook.py``).

The HTML carries its styles inline (no stylesheet to install) and its anchors are named from
a checksum of the CUDA, so the same kernel renders the same text every time.
"""

from __future__ import annotations

import html
import re
import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .errors import TeenyError

if TYPE_CHECKING:
    from .kernel import Kernel, Module, Specialization
    from .runtime.resources import Resources

_LINE = re.compile(r'\s*#line (\d+)(?: "([^"]*)")?\s*$')
_STYLE = "font-size: 12px; line-height: 1.35; margin: 0; padding: 4px 8px; overflow-x: auto;"
_BOX = "border: 1px solid #ddd; border-radius: 4px; margin: 4px 0;"


@dataclass(frozen=True)
class Block:
    """A run of generated CUDA and the DSL line it comes from (None: the kernel's preamble)."""

    line: int | None
    file: str | None
    statement: str | None  # the DSL statement, from the emitter's comment
    text: str


def cuda_blocks(source: str) -> list[Block]:
    """``source`` cut before each ``// statement`` comment that a ``#line`` directive follows
    (or before a ``#line`` to another line): one block per DSL statement, in order."""
    lines = source.splitlines()
    blocks: list[Block] = []
    current: list[str] = []
    line: int | None = None
    file: str | None = None
    statement: str | None = None
    for i, text in enumerate(lines):
        m = _LINE.match(text)
        if m is None:
            current.append(text)
            continue
        if int(m[1]) == line and not (current and current[-1].lstrip().startswith("//")):
            current.append(text)  # the same statement goes on
            continue
        carried: list[str] = []
        previous = lines[i - 1].strip() if i else ""
        if current and previous.startswith("//") and current[-1].strip() == previous:
            carried = [current.pop()]
        if current:
            blocks.append(Block(line, file, statement, "\n".join(current)))
        line, file = int(m[1]), m[2] or file
        statement = carried[0].strip()[2:].strip() if carried else None
        current = [*carried, text]
    if current:
        blocks.append(Block(line, file, statement, "\n".join(current)))
    return blocks


def _highlight(text: str, language: str) -> str:
    """``text`` as HTML spans, coloured inline by Pygments (``language``: "c" or "cuda")."""
    from pygments import highlight  # imported when something is displayed
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import CLexer, CppLexer

    lexer = CppLexer() if language == "cuda" else CLexer()
    return highlight(text, lexer, HtmlFormatter(noclasses=True, nowrap=True)).rstrip()


def _code(text: str, language: str) -> str:
    return f'<pre style="{_STYLE}">{_highlight(text, language)}</pre>'


def _uid(text: str) -> str:
    return f"tx{zlib.crc32(text.encode()):08x}"


def _resources(spec: Specialization) -> tuple[Resources | None, str | None]:
    from .runtime import resources

    try:
        return resources.of_specialization(spec), None
    except (TeenyError, OSError, RuntimeError, ImportError) as err:
        return None, f"resources unavailable: {str(err).splitlines()[0]}"


def _table_html(rows: list[tuple[str, str]]) -> str:
    cells = "".join(
        f'<tr><th style="text-align:left; padding-right:1em">{html.escape(k)}</th>'
        f"<td>{html.escape(v)}</td></tr>"
        for k, v in rows
    )
    return f'<table style="font-size: 12px">{cells}</table>'


def _table_markdown(rows: list[tuple[str, str]]) -> str:
    lines = ["| resource | value |", "| --- | --- |"]
    return "\n".join(lines + [f"| {k} | {v} |" for k, v in rows])


def _title(spec: Specialization) -> str:
    header = spec.cuda_source.splitlines()[1:2]
    described = header[0].lstrip("/ ").strip() if header else f"kernel {spec.entry}"
    return f"{described} ({spec.arch})"


def specialization_html(
    spec: Specialization, source: str | None = None, first_line: int = 1, filename: str = ""
) -> str:
    """The HTML of ``spec``: resources, DSL lines (``source``: the text of kernel file
    ``filename``, shown from ``first_line``, the kernel's signature, to its last statement's
    closing line; else the statements recorded in the CUDA), and the CUDA blocks, linked both
    ways."""
    uid = _uid(spec.cuda_source)
    blocks = cuda_blocks(spec.cuda_source)
    found, why = _resources(spec)
    parts = [f'<div class="teeny-tx" id="{uid}"><p><b>{html.escape(_title(spec))}</b></p>']
    parts.append(_table_html(found.rows()) if found else f"<p><i>{html.escape(str(why))}</i></p>")
    own = [b for b in blocks if b.line is not None and (source is None or b.file == filename)]
    has_block = {b.line for b in own if b.line is not None}
    parts.append(f'<details open><summary>kernel source</summary><div style="{_BOX}">')
    if source is not None:
        lines = source.split("\n")
        lo, hi = first_line, max(has_block, default=first_line) + 1  # through the closing brace
        for n, text in enumerate(lines[lo - 1 : hi], start=lo):
            code = _highlight(text or " ", "c")
            mark = f'<a href="#{uid}-c{n}">{n:4d}</a>' if n in has_block else f"{n:4d}"
            parts.append(
                f'<pre id="{uid}-L{n}" style="{_STYLE} padding-top:0; padding-bottom:0">'
                f"{mark}  {code}</pre>"
            )
    else:
        listed: set[int] = set()
        for b in blocks:
            if b.line is not None and b.statement and b.line not in listed:
                listed.add(b.line)
                stmt = html.escape(b.statement)
                parts.append(
                    f'<pre id="{uid}-L{b.line}" style="{_STYLE} padding-top:0; padding-bottom:0">'
                    f'<a href="#{uid}-c{b.line}">{b.line:4d}</a>  {stmt}</pre>'
                )
    parts.append("</div></details>")
    parts.append("<details open><summary>generated CUDA</summary>")
    seen: set[int] = set()
    for b in blocks:
        anchor, where = "", "preamble"
        if b.line is not None:
            where = f"{html.escape(b.file or '')}:{b.line}"
        if b in own and b.line is not None:
            where = f'<a href="#{uid}-L{b.line}">{where}</a>'
            if b.line not in seen:
                seen.add(b.line)
                anchor = f' id="{uid}-c{b.line}"'
        parts.append(
            f'<div{anchor} style="{_BOX}"><div style="font-size: 11px; color: #666; '
            f'padding: 2px 8px">{where}</div>{_code(b.text, "cuda")}</div>'
        )
    parts.append("</details></div>")
    return "\n".join(parts)


def specialization_markdown(spec: Specialization) -> str:
    """The Markdown of ``spec``: a title, the resources table and the CUDA in one block."""
    found, why = _resources(spec)
    table = _table_markdown(found.rows()) if found else f"*{why}*"
    return f"**{_title(spec)}**\n\n{table}\n\n```cuda\n{spec.cuda_source.rstrip()}\n```\n"


def _signature(kernel: Kernel) -> str:
    return f"kernel {kernel.name}({', '.join(p.describe() for p in kernel.params)})"


def kernel_html(kernel: Kernel) -> str:
    """The HTML of a kernel: its signature, its specialisations so far, and its file."""
    built = [spec for key, spec in sorted(kernel._specs.items(), key=lambda kv: repr(kv[0]))]
    items = "".join(f"<li><code>{html.escape(_title(s))}</code></li>" for s in built)
    listing = f"<p>specialisations built: <ul>{items}</ul></p>" if built else ""
    return (
        f'<div class="teeny-tx"><p><code>{html.escape(_signature(kernel))}</code></p>{listing}'
        f"<details><summary>{html.escape(kernel.module.unit.filename)}</summary>"
        f'<div style="{_BOX}">{_code(kernel.module.unit.text, "c")}</div></details></div>'
    )


def kernel_markdown(kernel: Kernel) -> str:
    return f"`{_signature(kernel)}`\n\n```c\n{kernel.module.unit.text.rstrip()}\n```\n"


def module_html(module: Module) -> str:
    """The HTML of a module: each kernel's signature and the file, highlighted."""
    items = "".join(
        f"<li><code>{html.escape(_signature(k))}</code></li>" for k in module.kernels.values()
    )
    return (
        f'<div class="teeny-tx"><p>module <b>{html.escape(module.unit.filename)}</b></p>'
        f'<ul>{items}</ul><details><summary>source</summary><div style="{_BOX}">'
        f"{_code(module.unit.text, 'c')}</div></details></div>"
    )


def module_markdown(module: Module) -> str:
    items = "\n".join(f"- `{_signature(k)}`" for k in module.kernels.values())
    return f"module **{module.unit.filename}**\n\n{items}\n"


def located(err: TeenyError) -> TeenyError:
    """``err``, which IPython then shows as its message alone (file:line:col, the line, a
    caret), not a traceback into the compiler: IPython asks ``_render_traceback_``."""
    message = str(err)
    err._render_traceback_ = lambda: [message]  # type: ignore[attr-defined]
    return err


class Shown:
    """A specialisation with its kernel's source: what :func:`show` returns and displays."""

    def __init__(self, spec: Specialization, source: str, first_line: int, filename: str):
        self.spec = spec
        self.source = source
        self.first_line = first_line
        self.filename = filename

    def _repr_html_(self) -> str:
        return specialization_html(self.spec, self.source, self.first_line, self.filename)

    def _repr_markdown_(self) -> str:
        return specialization_markdown(self.spec)

    def __repr__(self) -> str:
        found, why = _resources(self.spec)
        rows = found.rows() if found else [("resources", str(why))]
        width = max(len(k) for k, _ in rows)
        table = "\n".join(f"  {k:<{width}}  {v}" for k, v in rows)
        return f"{_title(self.spec)}\n{table}\n\n{self.spec.cuda_source}"


def show(kernel: Kernel, *args: Any, **constexprs: Any) -> None:
    """Specialise ``kernel`` for ``args`` (arrays or dtype names) and ``constexprs`` (with
    ``num_warps``, ``num_stages``, ``target`` as for ``specialize``) and display it: in
    IPython, rich output (:class:`Shown`); elsewhere, the resources and the CUDA printed."""
    try:
        spec = kernel.specialize(*args, **constexprs)
    except TeenyError as err:
        raise located(err) from None
    unit = kernel.module.unit
    shown = Shown(spec, unit.text, int(unit.functions[kernel.name].coord.line), unit.filename)
    try:
        import IPython

        shell = IPython.get_ipython()
    except ImportError:
        shell = None
    if shell is not None:
        from IPython.display import display

        display(shown)
    else:
        print(repr(shown))
