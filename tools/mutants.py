"""The mutant catalogue: small, realistic wrong edits that the tests must catch.

Input: tools/mutants.toml, one ``[[mutant]]`` table per wrong edit (``name``, ``file``, the exact
text to ``find`` — it must occur exactly once in the file, else the catalogue is stale and the
tool fails loudly —, its ``replace``ment, the ``tests`` to run (pytest arguments, narrow:
a file and ``-k``), ``device`` "cpu" or "gpu", and ``why``: the bug it stands for). Output, per
mutant: killed (the targeted tests fail on the mutated tree), survived (they pass: a hole in
the suite) or an error (the tests selected nothing, or the mutant no longer applies).

Each mutant runs in a scratch copy of the working tree (the files git tracks or would track,
uncommitted edits included): the edit applied, teeny_tx/_prelude.py and _kernels.py regenerated
there by setup.py's generated_modules when prelude/ or kernels/ changed (they are embedded at
build time), then ``python -m pytest -x -q`` of its tests with the copy first on PYTHONPATH.
Mutants run one after the other (the machine is shared).

    python3 tools/mutants.py                  # the CPU mutants
    python3 tools/mutants.py --device gpu     # the GPU ones (on a machine with a GPU)
    python3 tools/mutants.py --list           # names, files and tests
    python3 tools/mutants.py NAME ...         # just these

tests/test_mutants.py runs the CPU part in the test suite; tests/gpu/test_mutants_gpu.py the
GPU part. Grow the catalogue with every bug fixed: its wrong edit, and the test that caught it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]
TABLE = Path(__file__).with_name("mutants.toml")
EMBEDDED = ("prelude/", "kernels/")  # built into teeny_tx/_prelude.py and _kernels.py

_GENERATE = """
import runpy
from pathlib import Path

import setuptools

setuptools.setup = lambda **kwargs: None  # setup.py calls setup() at import
ns = runpy.run_path("setup.py", run_name="teeny_tx_setup")
for module, text in ns["generated_modules"]().items():
    ns["_write_if_changed"](Path(f"teeny_tx/{module}.py"), text)
"""


class MutantError(Exception):
    """The catalogue does not apply to this tree (its text is gone or ambiguous), or a
    mutant's tests select nothing: the catalogue needs updating, not the code."""


@dataclass(frozen=True)
class Mutant:
    name: str
    file: str
    find: str
    replace: str
    tests: tuple[str, ...]
    device: str
    why: str

    def apply(self, root: Path) -> None:
        """Make the edit in the tree at ``root``; MutantError unless ``find`` occurs once."""
        path = root / self.file
        if not path.is_file():
            raise MutantError(f"mutant {self.name}: {self.file} does not exist")
        text = path.read_text()
        count = text.count(self.find)
        if count != 1:
            raise MutantError(
                f"mutant {self.name}: the text to find occurs {count} times in {self.file} "
                f"(it must occur exactly once; update tools/mutants.toml):\n{self.find}"
            )
        path.write_text(text.replace(self.find, self.replace))


@dataclass(frozen=True)
class Result:
    mutant: Mutant
    status: str  # "killed", "survived" or "error"
    seconds: float
    output: str


def load(table: Path = TABLE) -> list[Mutant]:
    """Every mutant of the table, checked for its fields and unique names."""
    data = tomllib.loads(table.read_text())
    mutants, seen = [], set()
    for entry in data.get("mutant", []):
        missing = {"name", "file", "find", "replace", "tests", "device", "why"} - set(entry)
        if missing:
            raise MutantError(f"{table.name}: mutant {entry.get('name')!r} lacks {missing}")
        if entry["name"] in seen:
            raise MutantError(f"{table.name}: two mutants named {entry['name']!r}")
        if entry["device"] not in ("cpu", "gpu"):
            raise MutantError(f"{table.name}: mutant {entry['name']}: device must be cpu or gpu")
        if entry["find"] == entry["replace"]:
            raise MutantError(f"{table.name}: mutant {entry['name']} changes nothing")
        seen.add(entry["name"])
        mutants.append(Mutant(**{**entry, "tests": tuple(entry["tests"])}))
    return mutants


def _tree_files(root: Path) -> list[str]:
    """The working tree's files that git tracks or would track (not the ignored ones)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=root,
        check=True,
        capture_output=True,
    ).stdout.decode()
    return [f for f in listed.split("\0") if f and (root / f).is_file()]


def scratch_copy(root: Path, into: Path) -> Path:
    """A copy of the working tree at ``root`` in ``into``/tree, with its generated modules."""
    tree = into / "tree"
    for rel in _tree_files(root):
        target = tree / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / rel, target)
    for module in ("_prelude", "_kernels"):  # git-ignored: regenerated when they are stale
        source = root / "teeny_tx" / f"{module}.py"
        if source.is_file():
            shutil.copy2(source, tree / "teeny_tx" / f"{module}.py")
    return tree


def _env(tree: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(tree), *filter(None, [env.get("PYTHONPATH")])])
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.pop("PYTEST_ADDOPTS", None)
    return env


def run(mutant: Mutant, root: Path = ROOT, timeout: float = 600) -> Result:
    """Apply ``mutant`` to a scratch copy of ``root`` and run its tests there."""
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=f"mutant-{mutant.name}-") as scratch:
        tree = scratch_copy(root, Path(scratch))
        mutant.apply(tree)
        env = _env(tree)
        if mutant.file.startswith(EMBEDDED):
            subprocess.run([sys.executable, "-c", _GENERATE], cwd=tree, env=env, check=True)
        where = subprocess.run(
            [sys.executable, "-c", "import teeny_tx; print(teeny_tx.__file__)"],
            cwd=tree,
            env=env,
            capture_output=True,
            text=True,
        )
        if not where.stdout.strip().startswith(str(tree)):
            raise MutantError(
                f"mutant {mutant.name}: the scratch copy imports teeny_tx from "
                f"{where.stdout.strip() or where.stderr.strip()}, not from {tree}"
            )
        command = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider"]
        proc = subprocess.run(
            [*command, *mutant.tests],
            cwd=tree,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    output = proc.stdout[-4000:] + proc.stderr[-2000:]
    seconds = time.monotonic() - start
    if proc.returncode == 5:  # no tests collected: the -k no longer selects anything
        raise MutantError(f"mutant {mutant.name}: its tests {mutant.tests} select nothing")
    # 1: a test failed (killed); 0: all passed (survived); anything else (collection error,
    # usage error, interrupt) says nothing about the mutant: an error to look at, not a kill.
    # The same tests pass unmutated: CI runs them in the whole suite.
    status = {0: "survived", 1: "killed"}.get(proc.returncode, "error")
    return Result(mutant, status, seconds, output)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="run only these mutants")
    parser.add_argument("--device", choices=("cpu", "gpu", "all"), default="cpu")
    parser.add_argument("--list", action="store_true", help="list the catalogue and exit")
    parser.add_argument("--verbose", action="store_true", help="print each survivor's output")
    args = parser.parse_args(argv)
    mutants = load()
    if args.names:
        unknown = set(args.names) - {m.name for m in mutants}
        if unknown:
            parser.error(f"no mutants named {sorted(unknown)}")
        mutants = [m for m in mutants if m.name in args.names]
    elif args.device != "all":
        mutants = [m for m in mutants if m.device == args.device]
    if args.list:
        for m in mutants:
            print(f"{m.name:32} {m.device}  {m.file}  {' '.join(m.tests)}")
        return 0
    results = []
    for m in mutants:
        result = run(m)
        results.append(result)
        print(f"{result.status:8} {m.name:32} {result.seconds:6.1f} s  ({m.why})", flush=True)
        if result.status != "killed" and args.verbose:
            print(result.output)
    killed = sum(r.status == "killed" for r in results)
    print(f"{killed} of {len(results)} mutants killed")
    return 0 if killed == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
