"""Compile time on the CPU: a new process does not compile the Jinja templates again (their
bytecode is kept in Jinja's per-user cache directory, under $TMPDIR), and the CUDA it renders
is the same either way."""

from __future__ import annotations

import json
import os
import subprocess
import sys

PROGRAM = """
import json, jinja2
compiled = []
original = jinja2.Environment.compile
def counting(self, source, name=None, *args, **kwargs):
    compiled.append(name)
    return original(self, source, name, *args, **kwargs)
jinja2.Environment.compile = counting
import teeny_tx
m = teeny_tx.compile("kernels/softmax.c")
cuda = m.softmax.cuda_source("f16", "f16", 300, 300, 300, 1, 300, BLOCK=512, ROWS=1,
                             target="sm_90")
print(json.dumps({"compiled": compiled, "cuda": cuda}))
"""


def _run(tmp):
    env = {**os.environ, "TMPDIR": str(tmp)}
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM], capture_output=True, text=True, env=env, check=True
    )
    return json.loads(done.stdout.splitlines()[-1])


def test_a_second_process_reuses_the_compiled_templates(tmp_path):
    first, second = _run(tmp_path), _run(tmp_path)
    assert first["compiled"], "the first process compiles its templates"
    assert second["compiled"] == [], "a second process compiled templates again"
    assert second["cuda"] == first["cuda"]
    assert any(p.name.startswith("_jinja2-cache") for p in tmp_path.iterdir())
