"""A token-level fuzzer of the front end: ``python -m tests.fuzz --mutants 10000 --seed 1``.

``mutate.py`` makes mutants of the kernel files, ``run.py`` compiles and specialises each one
under a time limit and classifies the outcome; ``tests/test_fuzz.py`` runs a few hundred with a
fixed seed in CI. A failure is an internal exception, a hang or an error without a real line
and caret; every one is reproducible from the seed and its index (``--only``).
"""
