"""``python -m tests.fuzz --mutants N --seed S``: run N mutants and print the figures.

Exit status 0 when no mutant failed (internal error, hang, unlocated error), 1 otherwise.
``--save DIR`` writes each failing mutant to DIR/<index>.c; ``--only I`` reruns mutant I.
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path

from .run import FAILURES, fuzz


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__)
    p.add_argument("--mutants", type=int, default=1000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--timeout", type=float, default=10.0, help="seconds allowed per input")
    p.add_argument("--files", nargs="*", help="kernel files (default: kernels/*.c)")
    p.add_argument("--save", type=Path, help="write failing mutants here")
    p.add_argument("--only", type=int, help="run only mutant I of this seed (and show it)")
    args = p.parse_args(argv)

    start = time.perf_counter()
    counts: collections.Counter = collections.Counter()
    by_mutation: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    kinds: dict[str, list] = collections.defaultdict(list)
    slowest = None

    def progress(o) -> None:
        done = o.index + 1
        if done % 500 == 0:
            rate = done / (time.perf_counter() - start)
            print(f"  {done} mutants, {rate:.1f}/s, failures {sum(counts[f] for f in FAILURES)}")
            sys.stdout.flush()

    for o in fuzz(args.mutants, args.seed, args.timeout, args.files, progress, args.only):
        counts[o.kind] += 1
        by_mutation[o.mutation][o.kind] += 1
        if slowest is None or o.seconds > slowest.seconds:
            slowest = o
        if o.kind in FAILURES:
            key = o.detail.split(":")[0] if o.kind != "unlocated" else o.detail[:60]
            kinds[f"{o.kind}: {key}"].append(o)
            if args.save:
                args.save.mkdir(parents=True, exist_ok=True)
                (args.save / f"{o.index}.c").write_text(o.text)
        if args.only is not None:
            print(o.text if len(o.text) < 20000 else o.text[:20000] + "\n...")
            print(f"{o.kind} ({o.mutation}, {o.seconds:.2f} s): {o.detail}")

    n = sum(counts.values())
    took = time.perf_counter() - start
    print(f"teeny_tx fuzz: {n} mutants, seed {args.seed}, {took:.0f} s ({n / took:.1f}/s)")
    for kind in ("accepted", "located", "refused", *FAILURES):
        print(f"  {kind:<10} {counts[kind]:>6}")
    if slowest is not None:
        print(f"  slowest    {slowest.seconds:.2f} s (mutant {slowest.index}, {slowest.mutation})")
    print(
        "  by mutation: "
        + ", ".join(
            f"{m} {sum(c.values())} ({c['accepted']} accepted)"
            for m, c in sorted(by_mutation.items())
        )
    )
    for key, found in sorted(kinds.items(), key=lambda kv: -len(kv[1])):
        first = found[0]
        print(
            f"  FAIL x{len(found)} {key}\n       e.g. mutant {first.index} ({first.file}, "
            f"{first.mutation}): {first.detail[:300]}"
        )
    failures = sum(counts[f] for f in FAILURES)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
