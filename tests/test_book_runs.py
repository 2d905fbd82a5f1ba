"""The book names each benchmark run by its UTC time and commit, never as a "session" (a word a
reader cannot place), in docs/ and BENCHMARKS.md, image names included; and every benchmark
plot is current: drawn from the newest table of its section in BENCHMARKS.md (the PNG records
it, bench/plots.py writes it), so a table added without redrawing fails here."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
import plots  # noqa: E402 - bench/ is not a package

SESSION = re.compile(r"\bsessions?\b", re.IGNORECASE)


def _session_words(text: str, where: str) -> list[str]:
    return [
        f"{where}:{n}: {line.strip()}"
        for n, line in enumerate(text.splitlines(), 1)
        if SESSION.search(line)
    ]


def test_no_run_is_named_a_session():
    pages = sorted((ROOT / "docs").rglob("*.md")) + [ROOT / "BENCHMARKS.md"]
    found = []
    for page in pages:
        found += _session_words(page.read_text(encoding="utf-8"), str(page.relative_to(ROOT)))
    found += [str(p.relative_to(ROOT)) for p in (ROOT / "docs").rglob("*session*")]
    assert not found, "name runs by UTC time and commit:\n" + "\n".join(found)


def test_the_check_finds_a_session():
    assert _session_words("a\nthe third Session's run\n", "x.md") == [
        "x.md:2: the third Session's run"
    ]
    assert _session_words("sessionless, obsession\n", "x.md") == []


def stale_plots(tables: str, images: Path) -> list[str]:
    """The plots under ``images`` older than (or not drawn from) their section's newest table."""
    stale = []
    for section in plots.parse(tables):
        path = images / f"bench-{plots.slug(section.title)}.png"
        if not path.is_file():
            continue  # test_book checks that every plot is committed
        drawn = plots.png_source(path.read_bytes())
        if drawn != plots.source(section):
            stale.append(f"{path.name}: drawn from {drawn!r}, newest is {plots.source(section)!r}")
    return stale


def test_every_committed_plot_is_drawn_from_its_newest_table():
    stale = stale_plots(plots.BENCHMARKS.read_text(encoding="utf-8"), plots.IMAGES)
    assert not stale, "run `python bench/plots.py`:\n" + "\n".join(stale)


def test_a_newer_table_makes_a_plot_stale(tmp_path):
    pytest.importorskip("matplotlib")
    table = (
        "## Copy\n\ndate: {date}, device: NVIDIA X100\n\n"
        "| case | ours (TB/s) | peer (TB/s) |\n|---|---:|---:|\n| a | 1.0 | 2.0 |\n\n"
    )
    text = table.format(date="2026-01-02T03:04:05Z")
    plots.main([str(_write(tmp_path / "B.md", text)), "--out", str(tmp_path)])
    assert stale_plots(text, tmp_path) == []
    newer = text + table.format(date="2026-02-01T00:00:00Z").replace("## Copy\n\n", "")
    (found,) = stale_plots(newer, tmp_path)
    assert found.startswith("bench-copy.png: drawn from") and "2026-02-01T00:00:00Z" in found


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path
