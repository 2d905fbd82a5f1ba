"""Packaging: the build embeds prelude/ and kernels/ into the generated modules
teeny_tx/_prelude.py and teeny_tx/_kernels.py, and a plain (non-editable) install works.

Input: this checkout (prelude/, kernels/, pyproject.toml, setup.py, teeny_tx/). Checks: a wheel
built from it ships both modules with the current text; installed into a fresh venv (no
`-e`), it runs `teeny-tx demo`, teeny_tx.nn and teeny_tx.linalg on the interpreter from another
directory; the sdist holds what rebuilds them; the dev (editable) install is not stale. CPU
only. The wheel is built without build isolation when the running Python has a usable
setuptools, else pip fetches one (network). The fresh venv reuses this environment's
dependencies (a .pth file naming its site-packages) instead of downloading them again.
"""

from __future__ import annotations

import configparser
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import venv
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PRELUDE_DIR = REPO / "prelude"
KERNELS_DIR = REPO / "kernels"
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
        skip |= {
            "_prelude.py",
            "_kernels.py",
        }  # left by an editable install; the build makes its own
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
    expected |= {"teeny_tx/_prelude.py", "teeny_tx/_kernels.py"}
    assert sorted(expected - names) == [], "files of the package missing from the wheel"
    strays = sorted(n for n in names if not n.startswith(("teeny_tx/", dist_info + "/")))
    assert strays == [], "the wheel holds files outside the package"
    scripts = configparser.ConfigParser()
    scripts.read_string(entry_points)
    assert scripts["console_scripts"]["teeny-tx"] == "teeny_tx.cli:main"


def install_wheel(wheel: Path, env: Path) -> Path:
    """A fresh venv at ``env`` with ``wheel`` installed (no deps, no index); its python. The
    venv sees this environment's site-packages after its own (a .pth file), so the dependencies
    import without a download while teeny_tx comes from the wheel."""
    venv.EnvBuilder(with_pip=False).create(env)
    python = env / ("Scripts/python.exe" if sys.platform == "win32" else "bin/python")
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    ours = [p for p in sys.path if Path(p).name in ("site-packages", "dist-packages")]
    Path(purelib, "teeny_tx_test_deps.pth").write_text("".join(f"{p}\n" for p in ours))
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


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The python of a fresh venv with the wheel installed (shared by the tests below)."""
    return install_wheel(wheel, tmp_path_factory.mktemp("installed") / "venv")


def test_wheel_install_embeds_prelude(installed: Path, tmp_path: Path) -> None:
    python = installed
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


def kernels_on_disk() -> dict[str, str]:
    """What the build must embed of kernels/: each *.c by file name, sorted."""
    return {p.name: p.read_bytes().decode("utf-8") for p in sorted(KERNELS_DIR.glob("*.c"))}


def test_dev_install_kernels_are_current() -> None:
    """teeny_tx._kernels (what the library compiles) matches kernels/ (editing a kernel needs
    a rebuild: `pip install -e .`)."""
    from teeny_tx import _kernels

    want = kernels_on_disk()
    if want != _kernels.FILES:
        report = stale_report(_kernels.FILES, want)
        pytest.fail(
            f"{_kernels.__file__} is stale: kernels/ changed since it was built.\n{report}\n"
            f"Re-run `pip install -e .` in {REPO} (with {sys.executable}).",
            pytrace=False,
        )
    digest = hashlib.sha256(json.dumps(want, sort_keys=True).encode("ascii")).hexdigest()
    assert digest == _kernels.KERNELS_SHA256


def test_the_library_compiles_the_embedded_text() -> None:
    """The loader compiles the package's copy under the stable name kernels/<file>."""
    from teeny_tx.library import KERNEL_FILES, kernel_text, module

    assert set(KERNEL_FILES) == set(kernels_on_disk())
    assert module("softmax.c").unit.filename == "kernels/softmax.c"
    assert kernel_text("vector_add.c") == (KERNELS_DIR / "vector_add.c").read_text()
    with pytest.raises(teeny_tx_error(), match="did you mean 'softmax.c'"):
        kernel_text("softmax.cu")


def teeny_tx_error() -> type:
    from teeny_tx import TeenyError

    return TeenyError


USE = r"""
import sys, numpy as np, teeny_tx
from pathlib import Path
import teeny_tx.linalg, teeny_tx.nn
installed = Path(teeny_tx.__file__).resolve()
assert installed.is_relative_to(Path(sys.argv[1]).resolve()), installed
rng = np.random.default_rng(0)
x = rng.standard_normal((5, 1001)).astype(np.float32)
e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
y = teeny_tx.nn.softmax(x, interpret=True)
assert np.allclose(y, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)
a = rng.standard_normal((33, 70)).astype(np.float32)
b = rng.standard_normal((70, 17)).astype(np.float32)
c = teeny_tx.linalg.matmul(a, b, interpret=True)
assert np.allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
print("ok")
"""


def test_installed_wheel_runs_from_another_directory(installed: Path, tmp_path: Path) -> None:
    """A plain install: the demo (interpreter path), teeny_tx.nn and teeny_tx.linalg run with
    the kernels the wheel ships, from a directory that is not the checkout."""
    python = installed
    purelib = probe(python, cwd=tmp_path)["purelib"]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TEENY_TX_ARCH")}
    env["TEENY_TX_CACHE_DIR"] = str(tmp_path / "cache")
    # NVRTC (cuda-toolkit's wheels) is found through site.getsitepackages(), which in the fresh
    # venv is its own directory only: name this environment's copy as the toolkit root.
    toolkits = [Path(p, "nvidia", "cu13") for p in sys.path if Path(p, "nvidia", "cu13").is_dir()]
    if toolkits and not env.get("CUDA_PATH"):
        env["CUDA_PATH"] = str(toolkits[0])
    scripts = python.parent
    use = subprocess.run(
        [str(python), "-I", "-c", USE, purelib], cwd=elsewhere, capture_output=True, text=True
    )
    assert use.returncode == 0 and use.stdout.strip() == "ok", use.stdout + use.stderr
    demo = subprocess.run(
        [str(scripts / "teeny-tx"), "demo", "--interpret"],
        cwd=elsewhere,
        capture_output=True,
        text=True,
        env=env,
    )
    assert demo.returncode == 0, demo.stdout + demo.stderr
    assert "all cases verified" in demo.stdout and "FAIL" not in demo.stdout
    golden = subprocess.run(
        [str(scripts / "teeny-tx"), "golden"],
        cwd=elsewhere,
        capture_output=True,
        text=True,
        env=env,
    )
    assert golden.returncode != 0 and "run it in a teeny_tx source checkout" in golden.stderr


def test_sdist_holds_the_embedded_sources(tmp_path: Path) -> None:
    """The sdist carries prelude/ and kernels/, so a wheel built from it embeds both."""
    src = tmp_path / "src"
    shutil.copytree(REPO, src, ignore=_ignore_for_copy)
    run = subprocess.run(
        [sys.executable, "setup.py", "-q", "sdist", "-d", str(tmp_path / "dist")],
        cwd=src,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    (sdist,) = (tmp_path / "dist").glob("teeny*-0.1.0.tar.gz")
    with tarfile.open(sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    assert {f"kernels/{name}" for name in kernels_on_disk()} <= names
    assert {f"prelude/{name}" for name in prelude_on_disk()} <= names
    assert not {"teeny_tx/_prelude.py", "teeny_tx/_kernels.py"} & names  # generated, not shipped
