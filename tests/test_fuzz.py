"""The front-end fuzzer in CI: a few hundred token-level mutants of the bundled kernels, fixed
seed; none may end in an internal error, pass the per-input time limit, or give an error
without a real line and caret. ``python -m tests.fuzz --mutants 10000 --seed 1`` runs more."""

from __future__ import annotations

import random

import pytest

import teeny_tx

from .fuzz.mutate import MUTATIONS, mutate, tokens
from .fuzz.run import FAILURES, ROOT, Target, fuzz, located, run_one

MUTANTS, SEED, LIMIT = 240, 13, 30.0


def test_a_few_hundred_mutants_end_in_code_or_a_located_error():
    outcomes = list(fuzz(MUTANTS, SEED, LIMIT))
    failed = [o for o in outcomes if o.kind in FAILURES]
    report = "\n".join(
        f"mutant {o.index} ({o.file}, {o.mutation}): {o.kind}: {o.detail}" for o in failed
    )
    assert not failed, f"reproduce with python -m tests.fuzz --seed {SEED} --only N\n{report}"
    kinds = {o.kind for o in outcomes}
    assert {"accepted", "located"} <= kinds  # the mix is real: some mutants compile, most do not
    assert {o.mutation for o in outcomes} == set(MUTATIONS)


def test_tokens_join_back_to_the_text():
    text = (ROOT / "kernels/softmax.c").read_text()
    assert "".join(t for _, t in tokens(text)) == text


def test_mutants_are_reproducible_from_seed_and_index():
    text = (ROOT / "kernels/vector_add.c").read_text()
    assert mutate(text, random.Random(5)) == mutate(text, random.Random(5))


def test_the_classifier_flags_what_it_must():
    target = Target("kernels/t.c", "", {})
    rng = random.Random(0)
    good = "kernel k(f32 *out)\n{\n    store(out, 1.0f);\n}\n"
    assert run_one(0, target, good, "none", rng, LIMIT).kind == "accepted"
    bad = good.replace("1.0f)", "1.0f")
    o = run_one(0, target, bad, "none", rng, LIMIT)
    assert o.kind == "located", o.detail
    err = teeny_tx.CompileError("x", teeny_tx.errors.Location("kernels/t.c", 1, 1, None))
    assert located(err, "kernels/t.c", good) == "the shown line is not the file's"
    assert located(teeny_tx.CompileError("x"), "kernels/t.c", good) == "no location"
    slow = run_one(0, target, good * 40, "repeat", rng, 1e-6)  # no time for anything
    assert slow.kind == "hang"


@pytest.mark.parametrize("mutation", sorted(set(MUTATIONS)))
def test_every_mutation_changes_the_text(mutation):
    from .fuzz import mutate as m

    text = (ROOT / "kernels/layernorm.c").read_text()
    changed = sum(m._MUTATORS[mutation](text, random.Random(i)) != text for i in range(10))
    assert changed >= 8
