"""The declared switches (teeny_tx/switches.py): the table against the package, the docs and
the specialisation key.

Each switch that changes generated code, flipped, gives a new specialisation key (and, where it
changes the text, new CUDA); flipping it between two calls on one kernel gets the new code,
never the specialisation made under the old value.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

import teeny_tx as tx
from teeny_tx import switches
from teeny_tx.errors import TeenyError
from teeny_tx.library.loader import kernel_text
from teeny_tx.switches import PREFIX, SWITCHES

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "teeny_tx"
MENTION = re.compile(r"TEENY_TX_([A-Z0-9_]+)")


def _sources(*dirs: str) -> dict[Path, str]:
    out = {}
    for d in dirs:
        for path in sorted((ROOT / d).rglob("*.py")):
            if path.name not in ("_prelude.py", "_kernels.py"):
                out[path] = path.read_text(encoding="utf-8")
    return out


def test_every_mentioned_variable_is_declared() -> None:
    """Every ``TEENY_TX_*`` the package, the benchmarks, the tests and the docs name is in the
    table, and every entry of the table is read somewhere."""
    texts = _sources("teeny_tx", "bench", "tests", "tools")
    docs = [*ROOT.glob("*.md"), *(ROOT / "docs").glob("*.md")]
    # BENCHMARKS.md is the record of past runs: its tables name the switches of their day
    texts.update({p: p.read_text() for p in docs if p.name != "BENCHMARKS.md"})
    named = {(p, m) for p, t in texts.items() for m in MENTION.findall(t)}
    unknown = sorted(
        {f"{p.relative_to(ROOT)}: TEENY_TX_{m}" for p, m in named if m not in switches.SWITCHES}
    )
    assert not unknown, unknown
    code = _sources("teeny_tx", "bench")
    used = {m for p, m in named if p in code and p.name != "switches.py"}
    used |= {m for t in code.values() for m in re.findall(r'switches\.read\("([A-Z0-9_]+)"\)', t)}
    assert set(switches.SWITCHES) <= used, set(switches.SWITCHES) - used


def _environ_reads(tree: ast.AST) -> list[int]:
    """Lines that read ``os.environ`` / ``os.getenv`` with a ``TEENY_TX_`` name."""
    lines = []
    for node in ast.walk(tree):
        key = None
        if isinstance(node, ast.Call) and node.args:
            f = node.func
            if (isinstance(f, ast.Attribute) and f.attr in ("get", "pop", "setdefault")
                    and isinstance(f.value, ast.Attribute) and f.value.attr == "environ") or (
                    isinstance(f, ast.Attribute) and f.attr == "getenv"):  # fmt: skip
                key = node.args[0]
        elif isinstance(node, ast.Subscript) and getattr(node.value, "attr", "") == "environ":
            key = node.slice
        if isinstance(key, ast.Constant) and str(key.value).startswith("TEENY_TX_"):
            lines.append(node.lineno)
    return lines


def test_only_switches_reads_the_environment() -> None:
    """``switches.read`` is the one reader of ``TEENY_TX_*`` in the package; the passes of
    lower/ read no environment at all (their switches come on the kernel)."""
    found = []
    for path, text in _sources("teeny_tx").items():
        if path.name == "switches.py":
            continue
        found += [f"{path.relative_to(ROOT)}:{n}" for n in _environ_reads(ast.parse(text))]
        if path.is_relative_to(PACKAGE / "lower"):
            assert "environ" not in text and "getenv" not in text, path
    assert not found, found


def test_the_docs_page_is_the_table() -> None:
    page = (ROOT / "docs" / "switches.md").read_text(encoding="utf-8")
    assert page == switches.markdown(), (
        "regenerate: python -m teeny_tx.docs switches > docs/switches.md"
    )
    assert "switches.md" in (ROOT / "mkdocs.yml").read_text()
    for name in switches.SWITCHES:
        assert f"`TEENY_TX_{name}`" in page


def test_read_defaults_parses_and_refuses(monkeypatch) -> None:
    for s in switches.SWITCHES.values():
        monkeypatch.delenv(s.env, raising=False)
        assert switches.read(s.name) == s.default
        monkeypatch.setenv(s.env, "  ")
        assert switches.read(s.env) == s.default  # empty: the default; the prefix is optional
    monkeypatch.setenv("TEENY_TX_DEFER_WAITS", "0")
    assert switches.read("DEFER_WAITS") is False
    monkeypatch.setenv("TEENY_TX_HOPPER_WATCHDOG", " 4096 ")
    assert switches.read("HOPPER_WATCHDOG") == 4096
    monkeypatch.setenv("TEENY_TX_HOPPER_WATCHDOG", "lots")
    with pytest.raises(TeenyError, match=r"\$TEENY_TX_HOPPER_WATCHDOG='lots'.*expected int"):
        switches.read("HOPPER_WATCHDOG")
    with pytest.raises(TeenyError, match="not a declared switch"):
        switches.read("NO_SUCH")


def test_codegen_switches_are_the_specialize_ones() -> None:
    """:class:`CodegenSwitches` holds exactly the code-changing switches read per
    specialisation (the others change code through the target, the module or a config)."""
    per_spec = {s.name.lower() for s in switches.SWITCHES.values() if s.when == "specialize"}
    fields = set(switches.CodegenSwitches.__dataclass_fields__)
    assert fields == per_spec
    assert all(s.codegen for s in switches.SWITCHES.values() if s.when == "specialize")
    assert switches.CodegenSwitches().tma_for("k") is False
    assert switches.CodegenSwitches(pipeline_tma="a, k").tma_for("k") is True


# ---------------------------------------------------------------- the key and the code

OVERLAP = """
kernel overlap(f32 *out, const f16 *a, const f16 *b, const f16 *v, i32 n, const i32 M,
               const i32 N, const i32 K)
{
    tile rm = arange(0, M);
    tile rn = arange(0, N);
    tile rk = expand_dims(arange(0, K), 0);
    tile a_t = load(a + expand_dims(rm, 1) * K + rk);
    f32 acc[M][K] = 0;
    tile p = (f16)dot(a_t, trans(load(b + expand_dims(rn, 1) * K + rk)));
    for (i32 start = 0; start < n; start += N) {
        tile b_t = load(b + (expand_dims(rn, 1) + start) * K + rk);
        tile v_t = load(v + (expand_dims(rn, 1) + start) * K + rk);
        tile s = dot(a_t, trans(b_t));
        acc = dot(p, v_t, acc);
        tile e = exp2(s - expand_dims(max(s, 1), 1));
        acc = acc * expand_dims(1.0f / (sum(e, 1) + 1.0f), 1);
        p = (f16)e;
    }
    store(out + expand_dims(rm, 1) * K + rk, acc);
}
"""


def _overlap(k):
    return k.specialize("f32", "f16", "f16", "f16", 256, M=128, N=64, K=64, num_warps=8,
                        target="sm_90a")  # fmt: skip


ATTN_STRIDES = (4096 * 32 * 128, 128, 32 * 128, 1)


def _attention(k, ws=0):
    args = ("f16", "f32", "f16", "f16", "f16", 4096, 4096, 32, 1, -(1 << 30), 0)
    args += ATTN_STRIDES * 4 + (0.18, 0.0, 0.0, "f32", 0, 0)  # scale, softcap, ALiBi off
    flags = {"BAND": 0, "SOFTCAP": 0, "ALIBI": 0, "BF16": 0, "D": 128, "DH": 128, "BM": 128}
    flags |= {"BN": 128, "WARP_SPECIALIZE": ws}
    return k.specialize(*args, num_warps=8, num_stages=3, target="sm_90a", strided=True, **flags)


# switch -> (value that changes the code, how to compile, text the new code has)
CASES = {
    "DEFER_WAITS": ("0", "overlap", None),
    "PIPELINE_TMA": ("attention_fwd", "attention", "tx::hopper::tma_load_4d("),
    "WS_PINGPONG": ("1", "attention_ws2", "tx_warpgroup"),
}


def _specialize(how: str, mods: dict):
    if how == "overlap":
        return _overlap(mods["overlap"].overlap)
    if how == "attention":
        return _attention(mods["attention"].attention_fwd)
    return _attention(mods["attention_tma"].attention_fwd, ws=2)


@pytest.fixture(scope="module")
def mods():
    tma = tx.compile(kernel_text("attention.c"), name="kernels/attention.c")
    tma.pipeline_tma = True  # the ping-pong needs the TMA loop
    return {
        "overlap": tx.compile(OVERLAP, name="overlap.c"),
        "attention": tx.compile(kernel_text("attention.c"), name="kernels/attention.c"),
        "attention_tma": tma,
    }


def test_every_specialize_switch_has_a_case() -> None:
    assert set(CASES) == {s.name for s in switches.SWITCHES.values() if s.when == "specialize"}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_flipped_switch_is_a_new_key_and_new_code(name, mods, monkeypatch) -> None:
    """The same kernel, the same arguments, one process: the switch flipped between two calls
    gives a new key and new CUDA; flipped back, the first specialisation again (memoised)."""
    value, how, marker = CASES[name]
    for s in switches.SWITCHES.values():
        monkeypatch.delenv(s.env, raising=False)
    before = _specialize(how, mods)
    monkeypatch.setenv(f"TEENY_TX_{name}", value)
    after = _specialize(how, mods)
    assert after.cache_key != before.cache_key and after.key == before.key
    assert after.switches != before.switches
    assert after.cuda_source != before.cuda_source
    if marker is not None:
        assert marker in after.cuda_source and marker not in before.cuda_source
    if name == "DEFER_WAITS":  # no wait of its own before the scores' first use
        assert "// s ready" in before.cuda_source and "// s ready" not in after.cuda_source
    monkeypatch.delenv(f"TEENY_TX_{name}")
    assert _specialize(how, mods) is before


def test_the_cuda_source_call_sees_the_flip(monkeypatch) -> None:
    """The stale-cubin regression: ``cuda_source`` twice on one kernel object with the switch
    flipped between the calls (before the switches were in the key, the second call returned
    the first call's text)."""
    monkeypatch.delenv("TEENY_TX_DEFER_WAITS", raising=False)
    k = tx.compile(OVERLAP, name="overlap.c").overlap
    args = ("f32", "f16", "f16", "f16", 256)
    meta = {"M": 128, "N": 64, "K": 64, "num_warps": 8, "target": "sm_90a"}
    deferred = k.cuda_source(*args, **meta)
    monkeypatch.setenv("TEENY_TX_DEFER_WAITS", "0")
    waiting = k.cuda_source(*args, **meta)
    assert waiting != deferred
    assert "// s ready" in deferred and "// s ready" not in waiting
    assert len(k._specs) == 2


@pytest.mark.parametrize("name", ["ARCH", "DEBUG"])
def test_compile_switches_change_the_module(name, monkeypatch) -> None:
    """ARCH and DEBUG are read by teeny_tx.compile, once per module: a module compiled after
    the flip has the new target (in the key) or the debug code."""
    src = "kernel k(f32 *out) { device_assert(program_id(0) >= 0); store(out + 0, 1.0f); }"
    for s in ("ARCH", "DEBUG"):
        monkeypatch.delenv(f"TEENY_TX_{s}", raising=False)
    monkeypatch.setenv("TEENY_TX_ARCH", "sm_90")
    before = tx.compile(src, name="k.c").k.specialize("f32")
    monkeypatch.setenv(f"TEENY_TX_{name}", "sm_90a" if name == "ARCH" else "1")
    after = tx.compile(src, name="k.c").k.specialize("f32")
    if name == "ARCH":  # (the text of a kernel without dot is the same for both)
        assert after.cache_key != before.cache_key and after.arch == "sm_90a"
    else:
        assert "__trap()" not in before.cuda_source and "__trap()" in after.cuda_source


def test_library_settings_read_at_import() -> None:
    """The library's switches are module settings read once at import (the Hopper matmul's
    TMA store and watchdog then enter its config, and so its key)."""
    env = {s.env: "" for s in switches.SWITCHES.values()}
    settings = {"HOPPER": "0", "HOPPER_TMA_STORE": "0", "HOPPER_TUNE": "1",
                "HOPPER_WATCHDOG": "77", "ATTENTION_WS": "2"}  # fmt: skip
    env.update({switches.PREFIX + k: v for k, v in settings.items()})
    code = (
        "from teeny_tx.library import linalg, hopper_configs, attention\n"
        "print(linalg.HOPPER, linalg.TMA_STORE, linalg.WATCHDOG, hopper_configs.TUNE,"
        " attention.WARP_SPECIALIZE)"
    )
    import os

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, **env}, check=True)  # fmt: skip
    assert out.stdout.split() == ["False", "False", "77", "True", "2"]


@pytest.mark.parametrize("name", [s.name for s in SWITCHES.values() if s.when == "specialize"])
def test_a_flipped_switch_changes_the_fingerprint_and_empties_the_plans(name, monkeypatch):
    """Launches key their prepared entries on switches.fingerprint() and the library's plan
    cache empties when it changes: a replay after a flip never launches the old cubin."""
    from teeny_tx.library.plans import PlanCache

    monkeypatch.delenv(PREFIX + name, raising=False)
    cache = PlanCache()
    cache[("softmax", (3, 4))] = "plan"
    before = switches.fingerprint()
    assert cache.get(("softmax", (3, 4))) == "plan"  # nothing flipped: replayed
    monkeypatch.setenv(PREFIX + name, "0" if SWITCHES[name].default else "1")
    assert switches.fingerprint() != before
    assert cache.get(("softmax", (3, 4))) is None and not cache
    cache[("softmax", (3, 4))] = "new plan"
    assert cache.get(("softmax", (3, 4))) == "new plan"
    monkeypatch.delenv(PREFIX + name)
    assert switches.fingerprint() == before and cache.get(("softmax", (3, 4))) is None
