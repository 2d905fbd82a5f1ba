"""Plots of the benchmark tables, for chapter 9 of the book.

Input: Markdown holding the tables the bench scripts print (``BENCHMARKS.md``, or the ``--out``
file of any ``bench/bench_*.py``): ``## Section`` headings, a ``date: ..., device: ...`` line
before each table (or, for tables recorded without one, a UTC time and an ``NVIDIA ...`` device
named in the section's text), and tables whose rate columns are headed ``name (TB/s)`` or
``name (TFLOP/s)``. Output: one PNG per section with such tables, ``bench-<section>.png``
under ``docs/images/``: grouped bars of every implementation's rate per case, one panel per
table, each titled with its date and device. Bandwidth panels draw the copy rate as a line: the
table's own ``copy_`` column where it has one, else the best rate of the vector-add table (a
stream of two reads and a write, the copy-like ceiling) with its date.

``python bench/plots.py`` redraws the committed plots from BENCHMARKS.md;
``python bench/plots.py /tmp/softmax.md --out /tmp/plots`` draws a fresh bench run's.
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
IMAGES = ROOT / "docs" / "images"
BENCHMARKS = ROOT / "BENCHMARKS.md"
_DATE = re.compile(r"date:\s*(?P<date>[^,]+),\s*device:\s*(?P<device>.+?)\s*$")
_ISO = re.compile(r"\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\b")
_NVIDIA = re.compile(r"\b(NVIDIA [A-Z][\w-]*\d\w*)")
_RATE = re.compile(r"^(?P<name>.+?)\s*\((?P<unit>TB/s|TFLOP/s)\)$")


@dataclass
class Table:
    section: str
    date: str
    device: str
    unit: str  # "TB/s" or "TFLOP/s"
    cases: list[str]
    series: dict[str, list[float | None]]  # implementation -> rate per case
    copy: list[float | None] | None = None  # a copy_ column, when the table has one
    title: str = ""


@dataclass
class Section:
    title: str
    tables: list[Table] = field(default_factory=list)


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _number(cell: str) -> float | None:
    try:
        return float(cell.replace("**", "").split()[0])
    except (ValueError, IndexError):
        return None


def parse(text: str) -> list[Section]:
    """The sections of ``text`` that hold rate tables, in order."""
    sections: list[Section] = []
    lines = text.split("\n")
    title, heading, prose, date = "", "", "", None
    section_prose = ""  # the whole section's text: where a subsection names no device
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("## "):
            title, heading, prose, date = line[3:].strip(), "", "", None
            section_prose = ""
        elif line.startswith("### "):
            heading, prose, date = line[4:].strip(), "", None
        elif _DATE.match(line.strip()):
            date = _DATE.match(line.strip())
        elif line.startswith("|") and i + 1 < len(lines) and set(lines[i + 1]) <= set("|-: "):
            header = _cells(line)
            body = []
            i += 2
            while i < len(lines) and lines[i].startswith("|"):
                body.append(_cells(lines[i]))
                i += 1
            table = _table(title, heading, header, body, date, prose, section_prose)
            if table is not None:
                if not sections or sections[-1].title != title:
                    sections.append(Section(title))
                sections[-1].tables.append(table)
            continue
        else:
            prose += line + "\n"
            section_prose += line + "\n"
        i += 1
    for section in sections:  # several tables under one heading: say which is which
        untitled = [t for t in section.tables if not t.title]
        if len(untitled) > 1:
            for k, t in enumerate(untitled, 1):
                t.title = f"table {k} of {len(untitled)}"
    return sections


def _table(title, heading, header, body, date, prose, section_prose) -> Table | None:
    rates = [(k, _RATE.match(h)) for k, h in enumerate(header)]
    rates = [(k, m) for k, m in rates if m]
    if not rates:
        return None
    if date is not None:
        when, device = date["date"].strip(), date["device"].strip()
    else:
        iso = _ISO.search(prose) or _ISO.search(section_prose)
        gpu = _NVIDIA.search(prose) or _NVIDIA.search(section_prose)
        if not (iso and gpu):
            raise ValueError(f"a table of '{title}' has no date and device")
        when, device = iso.group(0), gpu.group(1)
    cases = [row[0] for row in body]
    series: dict[str, list[float | None]] = {}
    copy = None
    for k, m in rates:
        column = [_number(row[k]) if k < len(row) else None for row in body]
        if m["name"].startswith("copy"):
            copy = column
        else:
            series[m["name"]] = column
    return Table(title, when, device, rates[0][1]["unit"], cases, series, copy, heading)


def slug(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", title.lower().replace("`", "")).strip("-")


def copy_reference(sections: list[Section]) -> tuple[float, str] | None:
    """The best rate of the vector-add table, with its date: the copy-like ceiling."""
    for section in sections:
        if section.title.lower().startswith("vector add"):
            table = section.tables[0]
            best = max(v for col in table.series.values() for v in col if v is not None)
            return best, table.date
    return None


def draw(section: Section, out: Path, reference: tuple[float, str] | None) -> None:
    """One PNG for one section: a panel of grouped bars per table."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colours = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#b07aa1"]
    n = len(section.tables)
    widest = max(len(t.cases) for t in section.tables)
    many = widest > 12  # a wide panel and steep labels, so the case names stay apart
    size = (max(9.0, 0.45 * widest), 3.4 * n + (1.0 if many else 0.0))
    fig, axes = plt.subplots(n, 1, figsize=size, dpi=100, squeeze=False)
    for ax, table in zip(axes[:, 0], section.tables, strict=True):
        # a peer measured in no case of the table (one that did not run) draws nothing; the
        # first series (ours) always shows, its gaps as "n/a"; colours follow the table's order
        every = list(table.series)
        names = [
            k for i, k in enumerate(every) if i == 0 or any(x is not None for x in table.series[k])
        ]
        width = 0.8 / max(1, len(names))
        for k, name in enumerate(names):
            xs = [c + (k - (len(names) - 1) / 2) * width for c in range(len(table.cases))]
            ys = [v if v is not None else 0.0 for v in table.series[name]]
            colour = colours[every.index(name) % len(colours)]
            ax.bar(xs, ys, width, label=name, color=colour)
            for x, v in zip(xs, table.series[name], strict=True):
                if v is None:  # not measured (or failed): say so rather than draw nothing
                    ax.text(x, 0, "n/a", ha="center", va="bottom", fontsize=7, rotation=90)
        if table.unit == "TB/s":
            if table.copy is not None:
                for c, v in enumerate(table.copy):
                    if v is not None:
                        ax.hlines(v, c - 0.45, c + 0.45, colors="black", linestyles="dashed")
                ax.plot([], [], "k--", label="copy_ (same run)")
            elif reference is not None:
                ax.axhline(
                    reference[0],
                    color="black",
                    linestyle="dashed",
                    label=f"vector add, best ({reference[1][:10]})",
                )
        ax.set_xticks(range(len(table.cases)))
        if many:
            ax.set_xticklabels(table.cases, fontsize=7, rotation=60, ha="right")
        else:
            ax.set_xticklabels(table.cases, fontsize=8, rotation=15 if len(table.cases) > 6 else 0)
        ax.set_ylabel(table.unit)
        what = f"{section.title}: {table.title}" if table.title else section.title
        ax.set_title(f"{what}\n{table.date}, {table.device}", fontsize=9)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
        ax.grid(axis="y", linewidth=0.3)
    fig.tight_layout()
    # The newest table drawn, in the PNG's text (tests/test_book_runs.py: a plot older than its
    # section's newest table is stale); no Software entry, so a matplotlib version diffs nothing.
    fig.savefig(out, format="png", metadata={"Software": None, "Source": source(section)})
    plt.close(fig)


def source(section: Section) -> str:
    """What a section's PNG says it was drawn from: BENCHMARKS.md, its title, its newest table."""
    newest = max(t.date for t in section.tables)
    return f"BENCHMARKS.md: {section.title}; newest table {newest}"


def png_source(data: bytes) -> str | None:
    """The ``Source`` text chunk of a PNG (None: none; an older plot)."""
    pos = 8
    while pos + 8 <= len(data):
        length = int.from_bytes(data[pos : pos + 4], "big")
        kind = data[pos + 4 : pos + 8]
        body = data[pos + 8 : pos + 8 + length]
        if kind == b"tEXt" and body.startswith(b"Source\0"):
            return body[len(b"Source\0") :].decode("latin-1")
        if kind == b"iTXt" and body.startswith(b"Source\0\0"):  # not Latin-1: UTF-8, as is
            _language, _translated, text = body[len(b"Source\0\0\0") :].split(b"\0", 2)
            return text.decode("utf-8")
        pos += 12 + length
    return None


def main(argv: list[str] | None = None) -> list[Path]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tables", nargs="?", type=Path, default=BENCHMARKS)
    parser.add_argument("--out", type=Path, default=IMAGES, help="directory for the PNGs")
    args = parser.parse_args(argv)
    sections = parse(args.tables.read_text(encoding="utf-8"))
    reference = copy_reference(sections)
    args.out.mkdir(parents=True, exist_ok=True)
    written = []
    for section in sections:
        path = args.out / f"bench-{slug(section.title)}.png"
        draw(section, path, reference)
        written.append(path)
        print(path)
    return written


if __name__ == "__main__":
    main()
