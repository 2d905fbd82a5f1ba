"""docs/architecture.md and CONTRIBUTING.md name every module of the package, and
CONTRIBUTING.md states the rules a change follows (adding an op, a pass, a switch; commit
messages)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "teeny_tx"
MODULES = sorted(
    p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts
)


def test_the_modules_are_found() -> None:
    assert {"kernel.py", "lower/ir.py", "runtime/binder.py", "switches.py"} <= set(MODULES)


def test_architecture_names_every_module() -> None:
    """Each ``teeny_tx/**/*.py`` appears as `path` (relative to teeny_tx/) in the page."""
    text = (ROOT / "docs/architecture.md").read_text(encoding="utf-8")
    named = set(re.findall(r"`([\w/]+\.py)`", text))
    missing = [m for m in MODULES if m not in named]
    assert not missing, f"docs/architecture.md does not name: {', '.join(missing)}"


def _layout_map() -> dict[str, set[str]]:
    """CONTRIBUTING.md's layout block: the files it lists under teeny_tx/ and each package."""
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    block = text[text.index("```\nteeny_tx/\n") :].split("```")[1]
    listed: dict[str, set[str]] = {"": set()}
    package = ""
    for line in block.splitlines()[2:]:
        if not line.startswith("  "):
            break
        if not line.startswith("   "):  # an entry of teeny_tx/: a package or modules
            first = line.split()[0]
            package = first[:-1] if first.endswith("/") else ""
            words = [] if package else line[: line.index("  ", 2)].split()
            listed.setdefault(package, set()).update(w for w in words if w.endswith(".py"))
            continue
        listed[package].update(w for w in line.split() if w.endswith(".py"))
    return listed


def test_contributing_maps_every_module() -> None:
    listed = _layout_map()
    missing = []
    for m in MODULES:
        package, _, name = m.rpartition("/")
        if name not in listed.get(package, set()):
            missing.append(m)
    assert not missing, f"CONTRIBUTING.md's layout does not list: {', '.join(missing)}"


def test_the_architecture_map_names_only_modules_that_exist() -> None:
    text = (ROOT / "docs/architecture.md").read_text(encoding="utf-8")
    start = text.index("## Every module")
    table = re.findall(r"^\| `([\w/]+\.py)` \|", text[start:], re.M)
    assert sorted(table) == MODULES


@pytest.mark.parametrize(
    "heading",
    ["## Adding a library op", "## Adding a pass", "## Adding a switch", "## Commit messages"],
)
def test_contributing_says_how(heading: str) -> None:
    assert heading in (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")


def test_the_commit_rule_is_stated() -> None:
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    assert "72 characters" in text and "`area: what`" in text
