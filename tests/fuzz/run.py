"""Run mutants through the front end and classify what happens.

Input: kernel files with a specialisation per kernel (the golden ones where they exist), and a
seed. Output: one :class:`Outcome` per mutant: ``accepted`` (the CUDA was generated),
``located`` (a CompileError at a real line of the file, with that line and a caret),
``refused`` (a TeenyError of the launch kind: the mutant changed the signature the arguments
were made for), or a failure: ``unlocated`` (an error without a usable location), ``internal``
(any other exception) or ``hang`` (past the per-input time limit).
"""

from __future__ import annotations

import os
import random
import signal
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .mutate import mutate

ROOT = Path(__file__).resolve().parents[2]
FAILURES = ("unlocated", "internal", "hang")


@dataclass(frozen=True)
class Spec:
    args: tuple
    constexprs: dict[str, Any]
    num_warps: int = 4
    num_stages: int = 2


@dataclass
class Target:
    file: str  # the name the kernel text is compiled under (kernels/x.c)
    text: str
    specs: dict[str, Spec] = field(default_factory=dict)  # kernel name -> its specialisation


@dataclass
class Outcome:
    index: int
    file: str
    mutation: str
    kind: str  # accepted | located | refused | unlocated | internal | hang
    detail: str
    seconds: float
    text: str


class _Timeout(BaseException):
    """Raised by the alarm; a BaseException, so no `except Exception` in the library eats it."""


@contextmanager
def deadline(seconds: float) -> Iterator[None]:
    def ring(signum, frame):
        raise _Timeout

    previous = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _guess(params) -> Spec:
    """Arguments for a kernel without a golden specialisation: f32 pointers, small scalars."""
    args, constexprs = [], {}
    for p in params:
        if p.kind == "pointer":
            args.append(p.dtype.name if p.dtype else "f32")
        elif p.kind == "constexpr":
            constexprs[p.name] = 64 if p.name.upper().startswith("B") else 0
        else:
            args.append(3 if p.dtype.is_int else (False if p.dtype.kind == "b" else 1.5))
    return Spec(tuple(args), constexprs)


def targets(files: list[str] | None = None) -> list[Target]:
    """Every kernel file of kernels/ (or ``files``), each kernel with the specialisation of its
    first golden file, else a guess; kernels whose unmutated text does not compile are left out."""
    import teeny_tx

    try:
        from tests.cases import GOLDEN
    except ImportError:  # the library moved: fuzz with guessed specialisations
        GOLDEN = ()
    paths = files or sorted(str(p.relative_to(ROOT)) for p in (ROOT / "kernels").glob("*.c"))
    out = []
    for rel in paths:
        text = (ROOT / rel).read_text()
        target = Target(rel, text)
        module = teeny_tx.compile(text, name=rel)
        for g in GOLDEN:
            if Path(g.file).name == Path(rel).name and g.kernel not in target.specs:
                target.specs[g.kernel] = Spec(g.args, dict(g.constexprs), g.num_warps, g.num_stages)
        for name, kernel in module.kernels.items():
            spec = target.specs.get(name) or _guess(kernel.params)
            try:
                _specialise(kernel, spec)
            except teeny_tx.TeenyError:
                target.specs.pop(name, None)
                continue
            target.specs[name] = spec
        if target.specs:
            out.append(target)
    return out


def _specialise(kernel, spec: Spec) -> str:
    return kernel.cuda_source(
        *spec.args, num_warps=spec.num_warps, num_stages=spec.num_stages, **spec.constexprs
    )


def located(err, file: str, text: str) -> str | None:
    """Why ``err`` is not located at a real line of ``file`` with its text and a caret, or None."""
    loc = err.loc
    if loc is None:
        return "no location"
    if loc.file.startswith("prelude/"):
        return None if loc.source_line is not None else "prelude location without its line"
    if loc.file != file:
        return f"location in {loc.file!r}"
    lines = text.replace("\r\n", "\n").split("\n")
    if not 1 <= loc.line <= len(lines):
        return f"line {loc.line} of a {len(lines)}-line file"
    if loc.source_line != lines[loc.line - 1]:
        return "the shown line is not the file's"
    if not 1 <= loc.col <= len(lines[loc.line - 1]) + 1:
        return f"column {loc.col} past the line's end"
    if "^" not in str(err).split("\n")[2]:
        return "no caret"
    return None


def run_one(index: int, target: Target, text: str, mutation: str, rng, limit: float) -> Outcome:
    import teeny_tx

    start = time.perf_counter()
    kind, detail = "accepted", ""
    try:
        with deadline(limit):
            module = teeny_tx.compile(text, name=target.file)
            names = sorted(module.kernels)
            if names:
                name = rng.choice(names)
                kernel = module.kernels[name]
                spec = target.specs.get(name) or _guess(kernel.params)
                _specialise(kernel, spec)
    except _Timeout:
        kind, detail = "hang", f"over {limit} s"
    except teeny_tx.CompileError as err:
        why = located(err, target.file, text)
        kind, detail = ("located", err.message) if why is None else ("unlocated", f"{why}: {err}")
    except teeny_tx.TeenyError as err:
        kind, detail = "refused", f"{type(err).__name__}: {str(err).splitlines()[0]}"
    except Exception as err:  # noqa: BLE001 - what the fuzzer is for
        frame = traceback.extract_tb(err.__traceback__)[-1]
        where = f"{Path(frame.filename).name}:{frame.lineno}"
        kind, detail = "internal", f"{type(err).__name__} at {where}: {str(err)[:120]}"
    return Outcome(index, target.file, mutation, kind, detail, time.perf_counter() - start, text)


def fuzz(
    mutants: int,
    seed: int,
    limit: float = 10.0,
    files: list[str] | None = None,
    progress=None,
    only: int | None = None,
) -> Iterator[Outcome]:
    """``mutants`` outcomes (or mutant ``only`` alone); mutant ``i`` is reproducible from
    (seed, i) alone."""
    os.environ.setdefault("TEENY_TX_ARCH", "sm_90")
    pool = targets(files)
    for i in range(mutants) if only is None else [only]:
        rng = random.Random(seed * 1_000_003 + i)
        target = pool[i % len(pool)]
        text, mutation = mutate(target.text, rng)
        outcome = run_one(i, target, text, mutation, rng, limit)
        if progress is not None:
            progress(outcome)
        yield outcome
