"""The autotuner without a GPU: pragmas and their errors, configs, the key, static pruning
(shared memory, register spills, the prune hook), the disk cache and reuse of the winner.

Timing is a fake ``timer`` (milliseconds per config, no launch), so the choice is
deterministic; pruning compiles with NVRTC for sm_90, which needs no GPU.
"""

from __future__ import annotations

import copy
import json
import pickle
import re
import warnings
from pathlib import Path

import numpy as np
import pytest

import teeny_tx
from teeny_tx import Autotuner, Config, LaunchError
from teeny_tx.runtime import autotune as autotune_module
from teeny_tx.runtime import cache
from teeny_tx.runtime.autotune import _register_problem, key_entry, pow2_bucket
from teeny_tx.runtime.elf import cubin_resources

from .conftest import KERNEL_FILE, compile_error

AUTOTUNE_FILE = Path(__file__).parent / "kernels" / "autotune.c"
TRANSPOSE = ("f32", "f32", 100, 70)  # out, x, M, N: what specialize takes (dtype names)


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    """A fresh cache directory (cubins and autotune choices) for every test."""
    monkeypatch.setenv("TEENY_TX_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TEENY_TX_AUTOTUNE_PRINT", raising=False)
    return tmp_path / "cache"


@pytest.fixture
def module():
    return teeny_tx.compile(AUTOTUNE_FILE, name="tests/kernels/autotune.c")


class FakeTimer:
    """Milliseconds per config from ``times`` (by the value of one constexpr); records calls."""

    def __init__(self, name: str, times: dict):
        self.name, self.times, self.calls = name, times, []

    def __call__(self, config: Config, run) -> float:
        self.calls.append(config)
        return self.times[config.kwargs[self.name]]


def tuner_like(tuner: Autotuner, timer, **kwargs) -> Autotuner:
    """A tuner with ``tuner``'s kernel, configs and key, and a fake timer."""
    return Autotuner(tuner.kernel, tuner.configs, key=tuner.key, timer=timer, **kwargs)


# ---------------------------------------------------------------- declarations


def test_pragmas_declare_key_and_configs_in_order(module):
    tuner = module.transpose.tune
    assert tuner.key == ("M", "N", "x")
    assert tuner.configs == (
        Config({"BM": 256, "BN": 256}, num_warps=4),
        Config({"BM": 16, "BN": 32}, num_warps=2),
        Config({"BM": 32, "BN": 32}, num_warps=4, num_stages=3),
    )
    decl = module.unit.autotune["transpose"]
    assert (decl.loc.line, decl.key[2].loc.line, decl.key[2].loc.col) == (5, 5, 28)
    assert [c.loc.line for c in decl.configs] == [6, 7, 8]
    assert module.axpy.tune.key == ("n",) and len(module.axpy.tune.configs) == 4


def test_a_kernel_without_pragmas_has_no_tuner():
    k = teeny_tx.compile("kernels/vector_add.c").vector_add
    with pytest.raises(LaunchError, match="kernel vector_add declares no autotune configs"):
        k.tune  # noqa: B018


SIGNATURE = "kernel k(f32 *out, const f32 *a, i32 n, f32 s, const i32 BLOCK)\n{\n}\n"


@pytest.mark.parametrize(
    ("pragma", "message", "col"),
    [
        ("#pragma autotune keys(n)", "unknown autotune clause 'keys'", 18),
        ("#pragma once", "unknown pragma 'once'", 9),
        ("#pragma autotune key(n", "expected ')' to close the key, got 'end of line'", 23),
        ("#pragma autotune config(BLOCK=big)", "the value of 'BLOCK' must be a number", 31),
        ("#pragma autotune config(BLOCK 64)", "expected '=' after 'BLOCK', got '64'", 31),
        ("#pragma autotune config(BLOCK=1, BLOCK=2)", "'BLOCK' is set twice in this config", 34),
        ("#pragma autotune config(BLOCK=64) x", "unexpected 'x' after the autotune clause", 35),
        ("#pragma autotune key(n)", "kernel k declares an autotune key but no config", 9),
        ("#pragma autotune key(pow2(n)", "expected ')' to close the key, got 'end of line'", 29),
        ("#pragma autotune key(pow2 n)", "expected ')' to close the key, got 'n'", 27),
        ("#pragma autotune key(pow2(n, s))", "expected ')' to close pow2(...), got ','", 28),
        (
            "#pragma autotune key(log2(n))\n#pragma autotune config(BLOCK=64)",
            "the autotune key buckets 'n' by 'log2', which is not a bucket",
            27,
        ),
        (
            "#pragma autotune key(pow2(a))\n#pragma autotune config(BLOCK=64)",
            "the autotune key buckets 'a', a pointer of kernel k",
            27,
        ),
        # names, checked against the signature when the file is compiled
        (
            "#pragma autotune config(BLOK=64)",
            "an autotune config sets 'BLOK', which is not a constexpr of kernel k",
            25,
        ),
        ("#pragma autotune config(BLOCK=64, num_warps=3)", "num_warps must be 1, 2, 4, 8", 35),
        ("#pragma autotune config(num_stages=9)", "num_stages must be an int from 1 to 8", 25),
        (
            "#pragma autotune key(m)\n#pragma autotune config(BLOCK=64)",
            "the autotune key names 'm', which is not a parameter of kernel k",
            22,
        ),
        (
            "#pragma autotune key(BLOCK)\n#pragma autotune config()",
            "the autotune key names 'BLOCK', a constexpr of kernel k",
            22,
        ),
        (
            "#pragma autotune key(s)\n#pragma autotune config(BLOCK=64)",
            "the autotune key names 's', a f32 parameter",
            22,
        ),
    ],
)
def test_pragma_errors_point_at_the_pragma(pragma, message, col):
    err = compile_error(f"/* tuned */\n{pragma}\n{SIGNATURE}")
    assert err.message.startswith(message)
    assert (err.loc.file, err.loc.line, err.loc.col) == (KERNEL_FILE, 2, col)
    caret = str(err).split("\n")[2]
    assert caret == " " * (4 + col - 1) + "^"


def test_pragma_errors_hint_at_close_names():
    err = compile_error("#pragma autotune config(BLOK=64)\n" + SIGNATURE)
    assert err.hint == "did you mean 'BLOCK'?"
    assert str(err) == (
        f"{KERNEL_FILE}:1:25: error: an autotune config sets 'BLOK', which is not a constexpr "
        "of kernel k\n"
        "    #pragma autotune config(BLOK=64)\n"
        "                            ^\n"
        "  hint: did you mean 'BLOCK'?"
    )


@pytest.mark.parametrize(
    "text",
    [
        SIGNATURE + "#pragma autotune config(BLOCK=64)\n",  # nothing after it
        "#pragma autotune config(BLOCK=64)\nvoid helper(i32 x)\n{\n}\n" + SIGNATURE,
    ],
)
def test_pragmas_belong_directly_before_a_kernel(text):
    err = compile_error(text)
    assert err.message == "#pragma autotune must come directly before a kernel definition"


def test_pragma_values_and_comments():
    text = (
        "#pragma autotune key(n) /* the length */\n"
        "   #  pragma autotune config(BLOCK=0x40, num_stages=1)  // hex\n"
        "#pragma autotune config(SCALE=-1.5e1f, FLAG=true, BLOCK=128)\n"
        "kernel k(f32 *out, i32 n, const f32 SCALE, const bool FLAG, const i32 BLOCK)\n{\n}\n"
    )
    tuner = teeny_tx.compile(text, name=KERNEL_FILE).k.tune
    assert tuner.configs == (
        Config({"BLOCK": 64}, num_stages=1),
        Config({"SCALE": -15.0, "FLAG": True, "BLOCK": 128}),
    )


def test_config_prints_compares_and_hashes():
    c = Config({"BM": 128, "BN": 256, "BK": 64}, num_warps=8, num_stages=3)
    assert str(c) == "BM=128, BN=256, BK=64, num_warps=8, num_stages=3"
    assert repr(c) == "Config(BM=128, BN=256, BK=64, num_warps=8, num_stages=3)"
    same = Config({"BK": 64, "BN": 256, "BM": 128}, num_warps=8, num_stages=3)
    assert c == same and hash(c) == hash(same) and len({c, same}) == 1
    assert c != Config({"BM": 128, "BN": 256, "BK": 64}, num_warps=8)
    assert str(Config({})) == "num_warps=4, num_stages=2"
    with pytest.raises(TypeError):
        c.kwargs["BM"] = 64
    assert copy.deepcopy(c) == pickle.loads(pickle.dumps(c)) == c


def test_python_configs_are_checked_against_the_kernel():
    k = teeny_tx.compile("kernels/vector_add.c").vector_add
    with pytest.raises(LaunchError, match="sets 'BLOK', which is not a constexpr.*'BLOCK'"):
        Autotuner(k, [Config({"BLOK": 64})])
    with pytest.raises(LaunchError, match="the autotune key names 'm', which is not a param"):
        Autotuner(k, [Config({"BLOCK": 64})], key=("m",))
    with pytest.raises(LaunchError, match="num_warps must be 1, 2, 4"):
        Autotuner(k, [Config({"BLOCK": 64}, num_warps=5)])
    with pytest.raises(LaunchError, match="has no config"):
        Autotuner(k, [])


# ---------------------------------------------------------------- the key


def test_the_key_holds_key_values_pointer_dtypes_and_other_constexprs(module):
    tuner = module.axpy.tune
    x = np.zeros(10, np.float32)
    assert tuner._key((x, x, x, 2.0, np.int64(10)), {}) == ((10,), (), (), -1)
    transpose = module.transpose.tune
    # key(M, N, x): x's dtype is in the key values; out (any *) joins as a dtype
    assert transpose._key(("f16", np.zeros(4, np.float16), 4, 8), {}) == (
        (4, 8, "f16"),
        ("f16",),
        (),
        -1,
    )
    text = (
        "#pragma autotune key(n)\n#pragma autotune config(BLOCK=64)\n"
        "kernel k(f32 *out, i32 n, const i32 SCALE, const i32 BLOCK)\n{\n}\n"
    )
    k = teeny_tx.compile(text, name=KERNEL_FILE).k
    assert k.tune._key(("f32", 10), {"SCALE": 3}) == ((10,), (), (("SCALE", 3),), -1)


ROWS_KERNEL = (
    "#pragma autotune key(n_cols, pow2(n_rows))\n"
    "#pragma autotune config(BLOCK=64, num_warps=2)\n#pragma autotune config(BLOCK=128)\n"
    "kernel k(f32 *out, i32 n_rows, i32 n_cols, const i32 BLOCK)\n{\n}\n"
)


def test_pow2_bucket():
    assert [pow2_bucket(n) for n in (0, 1, 2, 3, 64, 65, 4097, 8192, 8193)] == [
        0, 1, 2, 4, 64, 128, 8192, 8192, 16384
    ]  # fmt: skip
    assert key_entry("n") == ("n", None) and key_entry("pow2(n_rows)") == ("n_rows", "pow2")


def test_a_bucketed_key_holds_the_bucket_of_the_value():
    tuner = teeny_tx.compile(ROWS_KERNEL, name=KERNEL_FILE).k.tune
    assert tuner.key == ("n_cols", "pow2(n_rows)")
    assert tuner._key(("f32", 5000, 1000), {}) == ((1000, 8192), (), (), -1)
    assert tuner._key(("f32", 8192, 1000), {}) == tuner._key(("f32", 4097, 1000), {})
    assert tuner._key(("f32", 64, 1000), {}) == ((1000, 64), (), (), -1)
    assert tuner._key(("f32", 0, 1000), {})[0] == (1000, 0)
    with pytest.raises(LaunchError, match="argument 'n_rows' \\(i32 n_rows\\) must be an integer"):
        tuner._key(("f32", 64.0, 1000), {})
    # given in Python, the same spelling
    python = Autotuner(tuner.kernel, tuner.configs, key=["pow2(n_rows)"])
    assert python._key(("f32", 100, 7), {}) == ((128,), (), (), -1)
    with pytest.raises(LaunchError, match="names a parameter twice"):
        Autotuner(tuner.kernel, tuner.configs, key=["n_rows", "pow2(n_rows)"])
    with pytest.raises(LaunchError, match="buckets 'n_rows' by 'log2', which is not a bucket"):
        Autotuner(tuner.kernel, tuner.configs, key=["log2(n_rows)"])


def test_one_choice_serves_a_bucket_of_row_counts(cache_dir):
    k = teeny_tx.compile(ROWS_KERNEL, name=KERNEL_FILE).k
    timer = FakeTimer("BLOCK", {64: 0.2, 128: 0.1})
    tuner = tuner_like(k.tune, timer)
    assert tuner.best("f32", 5000, 1000).kwargs == {"BLOCK": 128}
    assert len(timer.calls) == 2
    assert tuner.best("f32", 8000, 1000).kwargs == {"BLOCK": 128}  # the same bucket: no timing
    assert len(timer.calls) == 2
    timer.times = {64: 0.1, 128: 0.2}  # 64 rows is another bucket: tuned on its own
    assert tuner.best("f32", 64, 1000).kwargs == {"BLOCK": 64}
    assert len(timer.calls) == 4
    assert "k[n_cols=1000, pow2(n_rows)=64]: BLOCK=64, num_warps=2" in tuner.describe()
    records = [json.loads(p.read_text()) for p in (cache_dir / "autotune").glob("*/*.json")]
    assert sorted(r["key"]["pow2(n_rows)"] for r in records) == [64, 8192]
    # a new process reads the bucket's choice for any row count in it
    fresh = FakeTimer("BLOCK", {64: 0.1, 128: 0.2})
    again = tuner_like(teeny_tx.compile(ROWS_KERNEL, name=KERNEL_FILE).k.tune, fresh)
    assert again.best("f32", 4097, 1000).kwargs == {"BLOCK": 128} and fresh.calls == []


@pytest.mark.parametrize("file", ["layernorm.c", "rmsnorm.c"])
def test_the_norm_kernels_key_on_the_bucket_of_the_row_count(file):
    from teeny_tx.library.loader import module as library_module

    for name, kernel in library_module(file).kernels.items():
        if "dw" not in name.split("_")[-1]:  # the partial-sum kernels are not tuned
            assert kernel.tune.key == ("n_cols", "pow2(n_rows)"), name


def test_a_tuned_launch_refuses_what_the_configs_choose(module):
    x = np.zeros(10, np.float32)
    with pytest.raises(LaunchError, match="BLOCK of kernel axpy is chosen by its autotuner"):
        module.axpy.tune.interpret[(1,)](x, x, x, 2.0, 10, BLOCK=64)
    with pytest.raises(LaunchError, match="num_warps of kernel axpy is chosen"):
        module.axpy.tune.interpret[(1,)](x, x, x, 2.0, 10, num_warps=4)
    with pytest.raises(LaunchError, match=r"axpy\(\) takes 5 positional arguments"):
        module.axpy.tune.interpret[(1,)](x, x, 10)
    with pytest.raises(LaunchError, match="argument 'n' \\(i32 n\\) must be an integer"):
        module.axpy.tune.interpret[(1,)](x, x, x, 2.0, 10.0)


# ---------------------------------------------------------------- static pruning


def test_shared_memory_prunes_a_config(module):
    with pytest.raises(teeny_tx.ResourceError, match="needs 262144 bytes of shared memory"):
        module.transpose.specialize(*TRANSPOSE, BM=256, BN=256)
    timer = FakeTimer("BM", {16: 0.2, 32: 0.1})
    tuner = tuner_like(module.transpose.tune, timer)
    assert tuner.best(*TRANSPOSE) == Config({"BM": 32, "BN": 32}, num_warps=4, num_stages=3)
    assert [c.kwargs["BM"] for c in timer.calls] == [16, 32]
    assert tuner.describe() == (
        "transpose[M=100, N=70, x=f32]: BM=32, BN=32, num_warps=4, num_stages=3 (0.100 ms; "
        "2 of 3 configs timed, 1 pruned: BM=256, BN=256, num_warps=4, num_stages=2: "
        "shared memory 262144 > 232448 bytes)"
    )


def test_register_spills_prune_a_config_from_ptxas_or_from_the_cubin():
    k = teeny_tx.compile("kernels/vector_add.c").vector_add
    cache.clear_memo()  # NVRTC runs: ptxas reports the spill
    # n % 16 != 0: the masks are tested lane by lane (with n = 4096 one test per vector: no spill)
    spilling = k.specialize("f32", "f32", "f32", 4095, BLOCK=4096, num_warps=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the spill warning is caught, not shown
        # the byte counts are ptxas's (they change with the toolchain): bounds, not values
        problem = _register_problem(spilling)
        spilled = re.fullmatch(r"spills (\d+) bytes per thread to local memory", problem or "")
        assert spilled and int(spilled[1]) > 0, problem
    # the same cubin again (memo: no ptxas report): the cubin's own numbers tell
    again = teeny_tx.compile("kernels/vector_add.c").vector_add
    spilling = again.specialize("f32", "f32", "f32", 4095, BLOCK=4096, num_warps=1)
    registers, frame = cubin_resources(spilling.cubin)
    assert registers == 255 and frame > 0  # all of them (the cap), and a stack frame
    assert _register_problem(spilling) == (
        f"uses all 255 registers and a {frame}-byte stack frame (spills)"
    )
    fine = again.specialize("f32", "f32", "f32", 4096, BLOCK=1024, num_warps=4)
    registers, frame = cubin_resources(fine.cubin)
    assert 0 < registers < 255 and frame == 0 and _register_problem(fine) is None
    assert cubin_resources(b"not an ELF") == (0, 0)


def test_the_prune_hook_drops_configs(module):
    timer = FakeTimer("BLOCK", {256: 0.3, 1024: 0.2, 2048: 0.1})
    seen = []

    def prune(config, args):
        seen.append(args[4])
        return config.kwargs["BLOCK"] > 1024

    tuner = tuner_like(module.axpy.tune, timer, prune=prune)
    assert tuner.best("f32", "f32", "f32", 1.0, 5000) == Config({"BLOCK": 1024}, num_warps=4)
    assert seen == [5000] * 4
    assert "BLOCK=2048, num_warps=8, num_stages=2: dropped by the prune hook" in tuner.describe()
    assert "BLOCK=4096, num_warps=1, num_stages=2: dropped by the prune hook" in tuner.describe()


def test_when_every_config_is_pruned_the_error_lists_why(module):
    configs = (Config({"BM": 256, "BN": 256}), Config({"BM": 16, "BN": 32}, num_warps=2))
    prune = lambda config, args: config.num_warps < 4  # noqa: E731
    tuner = Autotuner(module.transpose, configs, timer=FakeTimer("BM", {}), prune=prune)
    with pytest.raises(LaunchError) as info:
        tuner.best(*TRANSPOSE)
    assert str(info.value) == (
        "every autotune config of kernel transpose was pruned:\n"
        "  BM=256, BN=256, num_warps=4, num_stages=2: shared memory 262144 > 232448 bytes\n"
        "  BM=16, BN=32, num_warps=2, num_stages=2: dropped by the prune hook"
    )


def test_one_survivor_is_chosen_without_timing(module):
    timer = FakeTimer("BM", {})
    configs = module.transpose.tune.configs[:2]
    tuner = Autotuner(module.transpose, configs, key=("M", "N"), timer=timer)
    assert tuner.best(*TRANSPOSE) == configs[1] and timer.calls == []
    assert "(not timed: the only config left; 0 of 2 configs timed, 1 pruned" in tuner.describe()


def test_tuning_with_the_event_timer_needs_the_grid(module):
    with pytest.raises(LaunchError, match="times launches, which need the grid"):
        module.axpy.tune.best("f32", "f32", "f32", 1.0, 5000)


# ---------------------------------------------------------------- choosing, and the disk cache


def test_the_winner_is_reused_without_timing_again(module):
    timer = FakeTimer("BLOCK", {256: 0.3, 1024: 0.1, 2048: 0.2})
    tuner = tuner_like(module.axpy.tune, timer)
    args = ("f32", "f32", "f32", 2.0, 5000)
    assert tuner.best(*args) == Config({"BLOCK": 1024}, num_warps=4)
    assert len(timer.calls) == 3  # BLOCK=4096 with one warp spills: pruned, not timed
    assert tuner.best(*args) == tuner[(1,)].best(*args) == Config({"BLOCK": 1024}, num_warps=4)
    assert len(timer.calls) == 3
    tuner.best("f32", "f32", "f32", 2.0, 6001)  # another key: tuned (n % 16 != 0: spills)
    assert len(timer.calls) == 6
    assert len(tuner.describe().split("\n")) == 2


def test_the_choice_survives_the_process_in_the_disk_cache(module, cache_dir):
    args = ("f32", "f32", "f32", 2.0, 5000)
    first = FakeTimer("BLOCK", {256: 0.3, 1024: 0.2, 2048: 0.1})
    assert tuner_like(module.axpy.tune, first).best(*args) == Config({"BLOCK": 2048}, num_warps=8)
    (path,) = (cache_dir / "autotune").glob("*/*.json")
    record = json.loads(path.read_text())
    assert record["kernel"] == "axpy" and record["key"] == {"n": 5000}
    assert record["config"] == {"kwargs": {"BLOCK": 2048}, "num_warps": 8, "num_stages": 2}
    assert record["ms"] == 0.1 and record["device"] == "no GPU, target sm_90"
    assert list(path.parent.parent.glob("*/.*.tmp")) == []  # written by rename

    # a new process: a new module, a new tuner; the file answers, nothing is timed
    fresh = teeny_tx.compile(AUTOTUNE_FILE, name="tests/kernels/autotune.c")
    second = FakeTimer("BLOCK", {256: 0.1, 1024: 0.2, 2048: 0.3})
    tuner = tuner_like(fresh.axpy.tune, second)
    assert tuner.best(*args) == Config({"BLOCK": 2048}, num_warps=8) and second.calls == []
    assert tuner.describe().endswith("; from the disk cache)")

    # other configs are another question: tuned again
    third = FakeTimer("BLOCK", {256: 0.1, 1024: 0.2})
    configs = fresh.axpy.tune.configs[1:3]
    assert Autotuner(fresh.axpy, configs, key=("n",), timer=third).best(*args).kwargs == {
        "BLOCK": 256
    }
    assert len(third.calls) == 2


def test_a_damaged_or_stale_cache_file_is_a_miss(module, cache_dir):
    args = ("f32", "f32", "f32", 2.0, 5000)
    tuner_like(module.axpy.tune, FakeTimer("BLOCK", {256: 0.3, 1024: 0.2, 2048: 0.1})).best(*args)
    (path,) = (cache_dir / "autotune").glob("*/*.json")
    good = json.loads(path.read_text())
    damaged = ("{not json", json.dumps({"format": 1, "config": {"kwargs": {"BLOCK": 8}}}))
    stale = (json.dumps({**good, "format": 0}),)  # an older format: a miss, no warning
    for text in damaged + stale:
        path.write_text(text)
        autotune_module._record_warned.clear()
        timer = FakeTimer("BLOCK", {256: 0.1, 1024: 0.2, 2048: 0.3})
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert tuner_like(module.axpy.tune, timer).best(*args).kwargs == {"BLOCK": 256}
        assert len(caught) == (text in damaged) and len(timer.calls) == 3


def _damaged_records(record: dict) -> list[tuple[str, str]]:
    """(text, what the warning says) of records that are not winners records."""

    def with_(**changes):
        return json.dumps({**record, **changes})

    deep = "[" * 100_000 + "]" * 100_000
    config = record["config"]
    return [
        (deep, "not JSON"),
        ("[1, 2]", "holds a list"),
        (with_(ms=[0.1]), "'ms' of type list"),
        (with_(ms="fast"), "'ms' of type str"),
        (with_(ms=-1.0), "'ms' = -1.0"),
        (with_(timed="3"), "'timed' of type str"),
        (with_(timed=True), "'timed' of type bool"),
        (with_(pruned=[{"a": 1}]), "'pruned' entries"),
        (with_(config={**config, "num_warps": "8"}), "num_warps or num_stages"),
        (with_(config={**config, "kwargs": {"BLOCK": [2048]}}), "kwargs are not names"),
        (json.dumps({k: v for k, v in record.items() if k != "total"}), "no 'total'"),
    ]


def test_a_record_not_of_the_schema_is_a_miss_with_a_warning(module, cache_dir):
    """Each way a winners record can be wrong (types, nesting, ranges) is a miss: a warning
    naming the file and what is wrong, then a re-tune — never an exception."""
    args = ("f32", "f32", "f32", 2.0, 5000)
    tuner_like(module.axpy.tune, FakeTimer("BLOCK", {256: 0.3, 1024: 0.2, 2048: 0.1})).best(*args)
    (path,) = (cache_dir / "autotune").glob("*/*.json")
    good = json.loads(path.read_text())
    for text, what in _damaged_records(good):
        path.write_text(text)
        autotune_module._record_warned.clear()
        timer = FakeTimer("BLOCK", {256: 0.1, 1024: 0.2, 2048: 0.3})
        with pytest.warns(UserWarning, match=re.escape(what)):
            assert tuner_like(module.axpy.tune, timer).best(*args).kwargs == {"BLOCK": 256}
        assert len(timer.calls) == 3, what


def test_a_record_whose_config_is_pruned_now_is_tuned_again(module, cache_dir, monkeypatch):
    """A record names a config that today's static checks prune (here: the prune hook): it
    is not used; the kernel is tuned again with a warning."""
    args = ("f32", "f32", "f32", 2.0, 5000)
    first = FakeTimer("BLOCK", {256: 0.3, 1024: 0.2, 2048: 0.1})
    assert tuner_like(module.axpy.tune, first).best(*args).kwargs == {"BLOCK": 2048}
    fresh = teeny_tx.compile(AUTOTUNE_FILE, name="tests/kernels/autotune.c")
    timer = FakeTimer("BLOCK", {256: 0.1, 1024: 0.2, 2048: 0.3})
    tuner = tuner_like(fresh.axpy.tune, timer)
    tuner.prune = lambda c, a: c.kwargs["BLOCK"] == 2048
    autotune_module._record_warned.clear()
    with pytest.warns(UserWarning, match="which is pruned now: dropped by the prune hook"):
        assert tuner.best(*args).kwargs == {"BLOCK": 256}
    assert len(timer.calls) == 2


def test_threads_asking_for_one_key_tune_it_once(module):
    """8 threads asking one tuner for one new key at once: one tuning (3 timings), and every
    thread gets its choice."""
    import threading

    timer = FakeTimer("BLOCK", {256: 0.3, 1024: 0.1, 2048: 0.2})
    tuner = tuner_like(module.axpy.tune, timer)
    args = ("f32", "f32", "f32", 2.0, 5000)
    start, got = threading.Barrier(8), []

    def ask():
        start.wait()
        got.append(tuner.best(*args))

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == [Config({"BLOCK": 1024}, num_warps=4)] * 8
    assert len(timer.calls) == 3


def test_the_kernel_text_is_part_of_the_cache_key(module, cache_dir):
    args = ("f32", "f32", "f32", 2.0, 5000)
    tuner_like(module.axpy.tune, FakeTimer("BLOCK", {256: 0.3, 1024: 0.2, 2048: 0.1})).best(*args)
    edited = teeny_tx.compile(
        AUTOTUNE_FILE.read_text() + "\n/* edited */\n", name="tests/kernels/autotune.c"
    )
    timer = FakeTimer("BLOCK", {256: 0.1, 1024: 0.2, 2048: 0.3})
    assert tuner_like(edited.axpy.tune, timer).best(*args).kwargs == {"BLOCK": 256}
    assert len(list((cache_dir / "autotune").glob("*/*.json"))) == 2


def test_the_print_variable_prints_each_choice(module, monkeypatch, capsys):
    monkeypatch.setenv("TEENY_TX_AUTOTUNE_PRINT", "1")
    tuner = tuner_like(module.axpy.tune, FakeTimer("BLOCK", {256: 0.3, 1024: 0.25, 2048: 0.5}))
    tuner.best("f32", "f32", "f32", 2.0, 5000)
    tuner.best("f32", "f32", "f32", 2.0, 5000)
    printed = capsys.readouterr().err
    assert printed.startswith(
        "axpy[n=5000]: BLOCK=1024, num_warps=4, num_stages=2 (0.250 ms; 3 of 4 configs timed, "
        "1 pruned: BLOCK=4096, num_warps=1, num_stages=2: "  # spills (ptxas's or the cubin's)
    )
    assert printed.count("\n") == 1 and printed.endswith(")\n")  # printed once


# ---------------------------------------------------------------- the interpreter


def test_the_interpreter_runs_the_first_surviving_config(module):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((100, 70)).astype(np.float32)
    out = np.zeros((70, 100), np.float32)
    seen = []

    def grid(meta):
        seen.append((meta["M"], meta["N"], meta["BM"], meta["BN"], meta["num_warps"]))
        return teeny_tx.cdiv(meta["M"], meta["BM"]), teeny_tx.cdiv(meta["N"], meta["BN"])

    module.transpose.tune.interpret[grid](out, x, 100, 70)
    assert np.array_equal(out, x.T)
    assert seen == [(100, 70, 16, 32, 2)]  # BM=BN=256 needs too much shared memory


def test_the_interpreter_path_needs_no_timer_and_no_nvrtc(module, monkeypatch):
    from teeny_tx.runtime import nvrtc

    def refuse(*args, **kwargs):
        raise AssertionError("the interpreter path compiled a cubin")

    monkeypatch.setattr(nvrtc, "compile_with_log", refuse)
    x, y = np.arange(3000, dtype=np.float32), np.ones(3000, np.float32)
    out = np.zeros_like(x)
    grid = lambda meta: (teeny_tx.cdiv(meta["n"], meta["BLOCK"]),)  # noqa: E731
    module.axpy.tune.interpret[grid](out, x, y, 2.0, 3000)
    assert np.array_equal(out, 2 * x + 1)


@pytest.mark.parametrize(
    ("name", "dtype"), [("softmax_looped", "f32"), ("log_softmax_backward_looped", "bf16")]
)
def test_the_looped_softmax_configs_compile_without_spills(name, dtype):
    """Every config the autotuner may pick for a looped softmax kernel compiles for sm_90
    with no register problem (the tuner would prune it on the device)."""
    from teeny_tx.library.loader import module as library_module

    kernel = getattr(library_module("softmax.c"), name)
    assert kernel.tune.key == ("n_cols",) and len(kernel.tune.configs) >= 4
    pointers = sum(p.kind == "pointer" for p in kernel.binder.runtime)
    scalars = len(kernel.binder.runtime) - pointers
    args = (dtype,) * pointers + (262147,) + (1,) * (scalars - 1)
    for c in kernel.tune.configs:
        spec = kernel.specialize(*args, num_warps=c.num_warps, target="sm_90", **c.kwargs)
        assert _register_problem(spec) is None, c


@pytest.mark.parametrize("dtype", ["f16", "bf16", "f32"])
def test_the_norm_prune_keeps_one_16_byte_access_per_thread(dtype):
    """A norm config whose tile gives a thread fewer elements than one 16-byte access of x's
    dtype is pruned (its layout wraps onto copies, stored element by element), at every row
    length wide enough to allow another; x may be an array or a dtype name."""
    from teeny_tx.dtypes import DTYPES
    from teeny_tx.library import nn

    vector = 16 // DTYPES[dtype].itemsize
    for file, name in [("layernorm.c", "layer_norm_fwd"), ("rmsnorm.c", "rms_norm_bwd_dx")]:
        kernel = nn._norm_kernel(file, name)
        names = [p.name for p in kernel.binder.runtime]
        for cols in (1024, 1000, 4096, 8192):
            for x in (dtype, np.zeros(1, DTYPES[dtype].np)):
                launch = [8192 if n == "n_rows" else x if n == "x" else 0 for n in names]
                launch[names.index("n_cols")] = cols
                kept = [c for c in kernel.tune.configs if not nn.norm_prune(c, launch, kernel)]
                elements = [nn._norm_elements(c, nn.norm_block(cols)) for c in kept]
                assert kept and min(elements) >= vector, (name, cols, elements)
