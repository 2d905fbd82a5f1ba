"""The suite's own hygiene: every random input is seeded from a stable value, so a failure can be
replayed in another process. ``hash()`` of a string changes with PYTHONHASHSEED; tests seed with
tests/conftest.py's stable_seed (zlib.crc32) instead."""

from __future__ import annotations

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parent
# a seed, a generator or a torch.manual_seed fed by hash(...)
SEEDED_BY_HASH = re.compile(r"(seed|rng|default_rng|manual_seed|RandomState)\b.*\bhash\(")


def test_no_test_seeds_with_hash():
    offenders = [
        f"{path.relative_to(TESTS.parent)}:{number}: {line.strip()}"
        for path in sorted(TESTS.rglob("*.py"))
        if path != Path(__file__).resolve()  # this file spells the pattern out
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if SEEDED_BY_HASH.search(line)
    ]
    assert offenders == [], "seed with stable_seed(...) (zlib.crc32), not hash():\n" + "\n".join(
        offenders
    )


def test_the_pattern_catches_the_old_spelling():
    assert SEEDED_BY_HASH.search("rng = np.random.default_rng(hash((op, shape)) % 2**32)")
    assert SEEDED_BY_HASH.search("    seed = hash((shape, causal)) % 2**31")
    assert not SEEDED_BY_HASH.search("assert hash(c) == hash(same)")
