"""The book's code blocks, as the tests run them.

Input: the Markdown pages of ``docs/``. Output: :func:`blocks`, every fenced code block of a
page with the instruction that says how the tests treat it. Each fence is preceded, on the line
just above it, by an HTML comment (invisible on the site) naming its kind:

``<!-- book: run -->``
    Python, run on the CPU (the interpreter) by ``tests/test_book.py``. The ``run`` blocks of a
    page share one namespace, in page order, like the cells of a notebook: a module named
    ``__book__``, importable while the page runs (as a script's ``__main__`` is, so that
    ``torch.compile`` can import the module of a function it traces); the working directory is
    the repository root.
``<!-- book: gpu -->``
    Python that needs a GPU, run by ``tests/gpu/test_book_gpu.py`` after the page's ``run``
    blocks (so it may use their names).
``<!-- book: output -->``
    What the code run just before printed, exactly (trailing blanks aside).
``<!-- book: output excerpt -->``
    Lines of that output, in order; a line ``...`` stands for any number of lines left out.
``<!-- book: output of`` *code* ``-->``, ``<!-- book: output excerpt of`` *code* ``-->``
    The output (or lines of it) of the Python code written inside the comment itself, run in
    the page's namespace: for outputs, such as an error message, whose code would distract
    the reader.
``<!-- book: file PATH -->``
    The whole of PATH, included by the snippets extension: the block's only line is
    ``--8<-- "PATH"``, so the site shows the file as it is.
``<!-- book: excerpt PATH -->``
    Lines of PATH, as written there but for their indentation, following each other; ``...``
    lines separate such runs, in order.
``<!-- book: readme -->``
    A shell command that README.md holds verbatim (the command CI runs).
``<!-- book: shell -->``
    Shell commands run with ``bash`` from the repository root (the output blocks after it
    compare their output).
``<!-- book: figure -->``
    A diagram in a ``text`` block: not code.

A block with no instruction, or with an unknown one, is an error: every block of the book runs
or is checked. ``tests/test_book.py`` runs :func:`check_page` on every page (CPU) and
``tests/gpu/test_book_gpu.py`` with ``gpu=True``.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import subprocess
import sys
import types
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"

BOOK_MODULE = "__book__"  # the module a page's blocks run in
KINDS = ("run", "gpu", "output", "file", "excerpt", "readme", "shell", "figure")
_FENCE = re.compile(r"^(?P<indent> *)(?P<fence>```+)(?P<info>[^`]*)$")
_COMMENT = re.compile(r"<!--\s*book:\s*(?P<body>.*?)\s*-->\s*$", re.DOTALL)


class BookError(Exception):
    """A page whose code blocks the tests cannot run as written."""


@dataclass(frozen=True)
class Block:
    page: str  # path relative to docs/
    line: int  # 1-based line of the opening fence
    lang: str
    kind: str
    arg: str  # PATH for file/excerpt, "excerpt" for output excerpts
    text: str  # the block's contents, without the fences
    code: str = ""  # the Python code of an ``output of`` comment

    @property
    def where(self) -> str:
        return f"docs/{self.page}:{self.line}"


def _instruction(lines: list[str], fence_at: int) -> tuple[str, str, str] | None:
    """The ``book:`` comment that ends on the line just above the fence at ``fence_at``."""
    end = fence_at - 1
    if end < 0 or not lines[end].rstrip().endswith("-->"):
        return None
    start = end
    while start >= 0 and "<!--" not in lines[start]:
        start -= 1
    if start < 0:
        return None
    m = _COMMENT.search("\n".join(lines[start : end + 1]))
    if not m:
        return None
    body = m["body"]
    head, _, rest = body.partition("\n")
    words = head.split(None, 1)
    kind = words[0] if words else ""
    arg = words[1].strip() if len(words) > 1 else ""
    if kind == "output" and arg.endswith("of") and arg in ("of", "excerpt of"):
        return "output", arg.removesuffix("of").strip(), rest
    return kind, arg, ""


def blocks(page: Path) -> list[Block]:
    """Every fenced block of one page, with its instruction; :class:`BookError` when a block
    has none or an unknown one."""
    rel = page.relative_to(DOCS).as_posix() if page.is_relative_to(DOCS) else page.name
    lines = page.read_text(encoding="utf-8").split("\n")
    out = []
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, lang = m["fence"], m["info"].strip().split(" ")[0]
        j = i + 1
        while j < len(lines) and lines[j].strip() != fence:
            j += 1
        if j == len(lines):
            raise BookError(f"docs/{rel}:{i + 1}: a code block is not closed")
        found = _instruction(lines, i)
        if found is None:
            raise BookError(
                f"docs/{rel}:{i + 1}: a code block without a `<!-- book: ... -->` line above "
                "it (see tools/book.py for the kinds)"
            )
        kind, arg, code = found
        if kind not in KINDS:
            raise BookError(f"docs/{rel}:{i + 1}: unknown block kind {kind!r}")
        text = "\n".join(lines[i + 1 : j])
        out.append(Block(rel, i + 1, lang, kind, arg, text, code))
        i = j + 1
    return out


def snippet_path(block: Block) -> str:
    """The path a ``file`` block includes; :class:`BookError` unless the block is exactly one
    include line of the path its instruction names."""
    m = re.fullmatch(r'--8<-- "(?P<path>[^"]+)"', block.text.strip())
    if not m or m["path"] != block.arg:
        raise BookError(
            f'{block.where}: a `file {block.arg}` block holds exactly `--8<-- "{block.arg}"`'
        )
    if not (ROOT / block.arg).is_file():
        raise BookError(f"{block.where}: {block.arg} does not exist")
    return block.arg


def _runs(text: str) -> list[list[str]]:
    runs: list[list[str]] = [[]]
    for line in text.split("\n"):
        if line.strip() == "...":
            runs.append([])
        else:
            runs[-1].append(line.rstrip())
    return [r for r in runs if r]


def excerpt_mismatch(excerpt: str, whole: str, contiguous: bool, indent: bool = True) -> str | None:
    """None when ``excerpt`` is lines of ``whole`` in order (``...`` lines skip any number of
    lines; with ``contiguous``, the lines between two ``...`` follow each other in ``whole``;
    without ``indent``, leading blanks do not count); else the first line that is not found."""
    lines = [line.rstrip() if indent else line.strip() for line in whole.split("\n")]
    at = 0
    for run in _runs(excerpt):
        run = run if indent else [line.strip() for line in run]
        if contiguous:
            for start in range(at, len(lines) - len(run) + 1):
                if lines[start : start + len(run)] == run:
                    at = start + len(run)
                    break
            else:
                return run[0]
        else:
            for line in run:
                try:
                    at = lines.index(line, at) + 1
                except ValueError:
                    return line
    return None


def output_mismatch(block: Block, printed: str) -> str | None:
    """None when ``block`` (an output block) shows what ``printed`` holds, else why not."""
    shown = block.text.rstrip()
    if block.arg == "excerpt":
        missing = excerpt_mismatch(shown, printed, contiguous=False)
        return None if missing is None else f"not printed (in this order): {missing!r}"
    got = "\n".join(line.rstrip() for line in printed.rstrip().split("\n"))
    want = "\n".join(line.rstrip() for line in shown.split("\n"))
    return None if got == want else f"printed:\n{got}\n--- the book shows:\n{want}"


def pages() -> list[Path]:
    """The book's Markdown pages: every ``.md`` file under ``docs/``."""
    return sorted(DOCS.rglob("*.md"))


def _exec(code: str, namespace: dict, where: str) -> str:
    """Run Python ``code`` in ``namespace``; what it printed."""
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        exec(compile(code, where, "exec"), namespace)  # noqa: S102 - the book's own code
    return buffer.getvalue()


def _shell(code: str) -> str:
    env = dict(os.environ)  # the commands of this Python's environment (teeny-tx) come first
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    done = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    if done.returncode != 0:
        raise BookError(f"exit {done.returncode}: {done.stderr.strip()[-2000:]}")
    return done.stdout


def check_page(page: Path, gpu: bool = False) -> list[str]:
    """Run and check every block of one page; the failures, one string each (empty: all good).

    Without ``gpu``, ``gpu`` blocks and the output blocks after them are not run; with it,
    ``run`` and ``gpu`` blocks run in page order and only what follows ``gpu`` blocks is
    compared (the CPU test compares the rest).
    """
    failures: list[str] = []
    # The blocks run in a module of their own, importable while the page runs (as a script's
    # __main__ is): torch.compile imports the module of each function whose globals it reads.
    module = types.ModuleType(BOOK_MODULE)
    namespace = module.__dict__
    printed: str | None = None  # the output of the last code that ran, for output blocks
    source = ""  # the kind of that code
    try:
        page_blocks = blocks(page)
    except BookError as e:
        return [str(e)]
    old = os.getcwd()
    os.chdir(ROOT)
    sys.modules[BOOK_MODULE] = module
    try:
        for block in page_blocks:
            try:
                if block.kind in ("run", "gpu"):
                    source = block.kind
                    printed = None
                    if block.kind == "run" or gpu:
                        printed = _exec(block.text, namespace, block.where)
                elif block.kind == "output":
                    if block.code:
                        if gpu:
                            continue
                        source, printed = "run", _exec(block.code, namespace, block.where)
                    if (source == "gpu") != gpu:
                        continue
                    if printed is None:
                        raise BookError("an output block with no code run before it")
                    why = output_mismatch(block, printed)
                    if why:
                        raise BookError(why)
                elif gpu:
                    continue
                elif block.kind == "shell":
                    source, printed = "run", _shell(block.text)
                elif block.kind == "file":
                    snippet_path(block)
                elif block.kind == "excerpt":
                    whole = (ROOT / block.arg).read_text(encoding="utf-8")
                    missing = excerpt_mismatch(block.text, whole, contiguous=True, indent=False)
                    if missing is not None:
                        raise BookError(f"{block.arg} has no line {missing!r} (in this order)")
                elif block.kind == "readme":
                    if block.text.strip() not in (ROOT / "README.md").read_text(encoding="utf-8"):
                        raise BookError("README.md does not hold this command")
                elif block.kind == "figure" and block.lang != "text":
                    raise BookError("a figure is a `text` block")
            except Exception as e:  # noqa: BLE001 - reported with the block's place
                failures.append(f"{block.where} ({block.kind}): {type(e).__name__}: {e}")
    finally:
        os.chdir(old)
        if sys.modules.get(BOOK_MODULE) is module:
            del sys.modules[BOOK_MODULE]
    return failures


def main(argv: list[str] | None = None) -> int:
    """``python -m tools.book [--gpu] [PAGE...]``: check the pages (all by default); print the
    failures; exit 1 if there are any."""
    args = list(sys.argv[1:] if argv is None else argv)
    gpu = "--gpu" in args
    chosen = [Path(a).resolve() for a in args if a != "--gpu"] or pages()
    failures = [f for page in chosen for f in check_page(page, gpu=gpu)]
    for failure in failures:
        print(failure, end="\n\n")
    print(f"{len(chosen)} pages, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
