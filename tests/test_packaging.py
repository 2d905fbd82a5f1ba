"""Packaging: the build embeds prelude/ into the generated module teeny_tx/_prelude.py.

Input: this checkout (prelude/, pyproject.toml, setup.py, teeny_tx/). Checks: a wheel built from
it ships the module with the current prelude text, installs into a fresh venv and imports from
there; the dev (editable) install is not stale. CPU only. The wheel is built without build
isolation when the running Python has a usable setuptools, else pip fetches one (network).
"""

from __future__ import annotations

import configparser
import hashlib
import json
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PRELUDE_DIR = REPO / "prelude"
TOP_LEVEL_ARTEFACTS = {".git", "build", "dist"}
CACHES = {"__pycache__", ".pytest_cache", ".ruff_cache", ".mypy_cache"}

# Imports teeny_tx._prelude without running teeny_tx/__init__.py (the compiler's code, and its
# dependencies): a bare package object with the installed package's search path stands in.
PROBE = r"""
import importlib, importlib.util, json, sys, sysconfig, types
spec = importlib.util.find_spec("teeny_tx")
if spec is None or spec.submodule_search_locations is None:
    print(json.dumps({"installed": False})); sys.exit()
pkg = types.ModuleType("teeny_tx")
pkg.__path__ = list(spec.submodule_search_locations)
sys.modules["teeny_tx"] = pkg
out = {"installed": True, "package_path": pkg.__path__, "purelib": sysconfig.get_paths()["purelib"]}
try:
    mod = importlib.import_module("teeny_tx._prelude")
except ModuleNotFoundError:
    mod = None
if mod is not None:
    names = ("FILES", "PRELUDE", "DEVICE_HEADER", "PRELUDE_SHA256")
    out.update({name: getattr(mod, name, None) for name in names})
    out["file"] = mod.__file__
    with open(mod.__file__, encoding="utf-8") as f:
        out["text"] = f.read()
print(json.dumps(out))
"""


def prelude_on_disk() -> dict[str, str]:
    """What the build must embed: prelude/ files by relative path (README, dotfiles, *~ out)."""
    files = {}
    for path in sorted(PRELUDE_DIR.rglob("*"), key=lambda p: p.relative_to(PRELUDE_DIR).as_posix()):
        rel = path.relative_to(PRELUDE_DIR).as_posix()
        hidden = any(part.startswith(".") or part == "__pycache__" for part in rel.split("/"))
        if path.is_file() and not hidden and not rel.endswith("~") and rel != "README.md":
            files[rel] = path.read_bytes().decode("utf-8")
    return files


def probe(python: str | Path, cwd: Path) -> dict:
    """Run PROBE under ``python`` in isolated mode from ``cwd`` (so the checkout is not on path)."""
    run = subprocess.run(
        [str(python), "-I", "-c", PROBE], cwd=cwd, capture_output=True, text=True, check=False
    )
    assert run.returncode == 0, f"probe failed under {python}:\n{run.stdout}{run.stderr}"
    return json.loads(run.stdout)


def stale_report(found: dict[str, str] | None, want: dict[str, str]) -> str:
    found = found or {}
    lines = [f"  missing: {rel}" for rel in sorted(set(want) - set(found))]
    lines += [f"  not in prelude/ any more: {rel}" for rel in sorted(set(found) - set(want))]
    lines += [f"  differs: {rel}" for rel in sorted(want) if found.get(rel, want[rel]) != want[rel]]
    return "\n".join(lines)


def check_module(got: dict) -> None:
    """The generated module's constants agree with prelude/ on disk."""
    want = prelude_on_disk()
    assert got["FILES"] == want, "FILES differs from prelude/:\n" + stale_report(got["FILES"], want)
    assert list(got["FILES"]) == list(want), "FILES is not in sorted path order"
    assert got["PRELUDE"] == want["language.h"]
    assert got["DEVICE_HEADER"] == want["teeny_tx.cuh"]
    digest = hashlib.sha256(json.dumps(want, sort_keys=True).encode("ascii")).hexdigest()
    assert got["PRELUDE_SHA256"] == digest


def _ignore_for_copy(directory: str, names: list[str]) -> set[str]:
    here = Path(directory)
    skip = {n for n in names if n in CACHES or n.endswith(".egg-info")}
    skip |= {n for n in names if (here / n / "pyvenv.cfg").is_file()}  # virtual environments
    if here == REPO:
        skip |= TOP_LEVEL_ARTEFACTS & set(names)
    if here == REPO / "teeny_tx":
        skip.add("_prelude.py")  # left by an editable install; the build must make its own
    return skip


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A wheel of this checkout, built from a clean copy (an in-tree build would leave build/ and
    *.egg-info in the checkout and could pick up stale files from an old build/lib)."""
    src = tmp_path_factory.mktemp("src") / "teeny_tx_src"
    shutil.copytree(REPO, src, ignore=_ignore_for_copy)
    out = tmp_path_factory.mktemp("wheelhouse")
    pip_wheel = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(src)]
    logs = []
    for extra in (["--no-build-isolation"], []):  # offline first; pip fetches setuptools if needed
        run = subprocess.run(pip_wheel + extra, capture_output=True, text=True, check=False)
        logs.append(f"$ {' '.join(pip_wheel + extra)}\n{run.stdout}{run.stderr}")
        if run.returncode == 0:
            break
    wheels = sorted(out.glob("teeny_tx-*.whl"))
    assert len(wheels) == 1, "could not build a wheel:\n" + "\n".join(logs)
    return wheels[0]


def test_wheel_contents(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        dist_info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
        entry_points = zf.read(f"{dist_info}/entry_points.txt").decode()
    package = REPO / "teeny_tx"
    sources = [p for p in package.rglob("*.py") if "__pycache__" not in p.parts]
    templates = list((package / "templates").rglob("*.j2"))
    expected = {p.relative_to(REPO).as_posix() for p in sources + templates}
    expected.add("teeny_tx/_prelude.py")
    assert sorted(expected - names) == [], "files of the package missing from the wheel"
    strays = sorted(n for n in names if not n.startswith(("teeny_tx/", dist_info + "/")))
    assert strays == [], "the wheel holds files outside the package"
    scripts = configparser.ConfigParser()
    scripts.read_string(entry_points)
    assert scripts["console_scripts"]["teeny-tx"] == "teeny_tx.cli:main"


def install_wheel(wheel: Path, env: Path) -> Path:
    """A fresh venv at ``env`` with ``wheel`` installed (no deps, no index); its python."""
    venv.EnvBuilder(with_pip=False).create(env)
    python = env / ("Scripts/python.exe" if sys.platform == "win32" else "bin/python")
    args = ["install", "-q", "--no-deps", "--no-index", str(wheel)]
    run = subprocess.run(  # this pip installs into the venv: fast, no pip copy needed (pip>=22.3)
        [sys.executable, "-m", "pip", "--python", str(python), *args],
        capture_output=True,
        text=True,
        check=False,
    )
    if run.returncode != 0 and "--python" in run.stderr:  # an older pip: give the venv its own
        subprocess.run([str(python), "-m", "ensurepip", "-q"], check=True, capture_output=True)
        run = subprocess.run(
            [str(python), "-m", "pip", *args], capture_output=True, text=True, check=False
        )
    assert run.returncode == 0, f"installing the wheel failed:\n{run.stdout}{run.stderr}"
    return python


def test_wheel_install_embeds_prelude(wheel: Path, tmp_path: Path) -> None:
    python = install_wheel(wheel, tmp_path / "venv")
    got = probe(python, cwd=tmp_path)
    assert got["installed"], "teeny_tx is not importable from the venv it was installed into"
    assert "file" in got, f"teeny_tx/_prelude.py is missing from the wheel ({got['package_path']})"
    module = Path(got["file"]).resolve()
    assert module.is_relative_to(Path(got["purelib"]).resolve()), module
    assert not module.is_relative_to(REPO), module
    check_module(got)
    assert str(REPO) not in got["text"] and str(tmp_path) not in got["text"], "paths leak in"


def test_dev_install_is_current(tmp_path: Path) -> None:
    """The module the dev install imports matches prelude/ (editing prelude/ needs a rebuild)."""
    got = probe(sys.executable, cwd=tmp_path)
    want = prelude_on_disk()
    problem = None
    if not got["installed"]:
        problem = f"teeny_tx is not installed in {sys.prefix}."
    elif "file" not in got:
        problem = f"No generated teeny_tx/_prelude.py in {got['package_path']}."
    elif got["FILES"] != want:
        report = stale_report(got["FILES"], want)
        problem = f"{got['file']} is stale: prelude/ changed since it was built.\n{report}"
    if problem:
        fix = f"Re-run `pip install -e .` in {REPO} (with {sys.executable})."
        pytest.fail(f"{problem}\n{fix}", pytrace=False)
    check_module(got)
