"""The disk cache trusts nothing it did not write: entries carry an HMAC of key and cubin under
the directory's secret (a flipped byte, another specialisation's entry or a planted file is
rebuilt with a warning, never loaded); file names are not computable from kernel text alone;
directories are created 0700 and refused, for a private temporary one, when another user owns
or can write them."""

from __future__ import annotations

import os
import stat
import tempfile
import time
import warnings

import pytest

from teeny_tx.runtime import cache, nvrtc

ADD = r"""extern "C" __global__ void add(float *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] += %s;
}
"""
ONE, TWO = ADD % "1.0f", ADD % "2.0f"


@pytest.fixture
def env(tmp_path, monkeypatch):
    """A fresh cache directory and memo, and the NVRTC compilations counted."""
    monkeypatch.setenv("TEENY_TX_CACHE_DIR", str(tmp_path / "cache"))
    cache.clear_memo()
    calls = []
    real = nvrtc.compile_with_log

    def counting(*args, **kwargs):
        calls.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(nvrtc, "compile_with_log", counting)
    yield calls
    cache.clear_memo()


def compile_(source: str) -> bytes:
    return cache.load_or_compile(source, name="add", arch="sm_90")


def path_of(source: str):
    return cache.entry_path(cache.cache_key(source, "add", "sm_90"))


def reload(source: str, calls: list, warned: bool) -> bytes:
    """Compile ``source`` again from a cold memo: from disk, or (``warned``) rebuilt."""
    cache.clear_memo()
    before = len(calls)
    if warned:
        with pytest.warns(RuntimeWarning, match="failed verification"):
            cubin = compile_(source)
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            cubin = compile_(source)
    assert len(calls) - before == (1 if warned else 0)
    return cubin


def test_a_verified_entry_is_loaded_without_nvrtc(env):
    good = compile_(ONE)
    assert reload(ONE, env, warned=False) == good


@pytest.mark.parametrize("where", [0, 20, 40, -1])  # magic, digest, cubin header, cubin end
def test_a_flipped_byte_is_never_loaded(env, where):
    good = compile_(ONE)
    path = path_of(ONE)
    data = bytearray(path.read_bytes())
    data[where] ^= 0x01
    path.write_bytes(bytes(data))
    assert reload(ONE, env, warned=True) == good
    assert path.read_bytes() != bytes(data)  # replaced by the rebuilt entry
    assert reload(ONE, env, warned=False) == good


def test_another_specialisations_entry_is_never_loaded(env):
    one, two = compile_(ONE), compile_(TWO)
    assert one != two
    path_of(ONE).write_bytes(path_of(TWO).read_bytes())  # a whole, valid entry of TWO
    assert reload(ONE, env, warned=True) == one


def test_a_planted_cubin_without_the_secret_is_never_loaded(env):
    one, two = compile_(ONE), compile_(TWO)
    forged = cache.ENTRY_MAGIC + bytes(32) + two  # a real cubin, a digest made without the key
    path_of(ONE).write_bytes(forged)
    assert reload(ONE, env, warned=True) == one


def test_entry_names_depend_on_the_directorys_secret(env, tmp_path, monkeypatch):
    compile_(ONE)
    key = cache.cache_key(ONE, "add", "sm_90")
    first = path_of(ONE)
    assert key not in first.name  # the name is not the key anyone can compute from the text
    monkeypatch.setenv("TEENY_TX_CACHE_DIR", str(tmp_path / "other"))
    assert path_of(ONE).name != first.name
    secret = tmp_path / "other" / "secret"
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600


def test_directories_are_created_private_under_any_umask(env, tmp_path, monkeypatch):
    monkeypatch.setenv("TEENY_TX_CACHE_DIR", str(tmp_path / "a" / "b" / "cache"))
    old = os.umask(0)
    try:
        compile_(ONE)
    finally:
        os.umask(old)
    for d in (tmp_path / "a", tmp_path / "a" / "b", tmp_path / "a" / "b" / "cache"):
        assert stat.S_IMODE(d.stat().st_mode) == 0o700, d
    assert stat.S_IMODE(path_of(ONE).parent.stat().st_mode) == 0o700


@pytest.mark.parametrize("mode", [0o777, 0o770, 0o722, 0o1777])
def test_a_directory_others_can_write_is_refused_for_a_private_one(
    env, tmp_path, monkeypatch, mode
):
    shared = tmp_path / f"shared{mode:o}"
    shared.mkdir()
    shared.chmod(mode)
    monkeypatch.setenv("TEENY_TX_CACHE_DIR", str(shared))
    with pytest.warns(
        RuntimeWarning, match="refuses the kernel cache directory .*other users can write"
    ):
        directory = cache.cache_dir()
    assert directory != shared and stat.S_IMODE(directory.stat().st_mode) == 0o700
    cubin = compile_(ONE)
    assert path_of(ONE).parent.parent == directory
    assert [p for p in shared.rglob("*")] == []  # nothing written where others could swap it
    assert reload(ONE, env, warned=False) == cubin  # the private directory serves this process


def test_a_directory_of_another_user_is_refused(env, tmp_path, monkeypatch):
    if os.getuid() != 0:
        pytest.skip("needs root to give a directory to another user")
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o700)
    os.chown(theirs, 12345, 12345)
    monkeypatch.setenv("TEENY_TX_CACHE_DIR", str(theirs))
    with pytest.warns(RuntimeWarning, match="belongs to another user"):
        assert cache.cache_dir() != theirs


def test_a_secret_others_can_read_disables_the_disk_cache(env, tmp_path):
    compile_(ONE)
    secret = tmp_path / "cache" / "secret"
    secret.chmod(0o644)
    cache.clear_memo()
    with pytest.warns(RuntimeWarning, match="cannot write its kernel cache"):
        assert compile_(TWO).startswith(b"\x7fELF")


def test_refused_directories_share_one_private_fallback(env, tmp_path, monkeypatch):
    """Processes whose directory is refused cache in one private directory per user, not a
    new temporary directory each (which nothing removed); an unsafe one of that name is not
    used (a fresh one is, removed at exit)."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    monkeypatch.setenv("TEENY_TX_CACHE_DIR", str(shared))
    found = []
    for _ in range(3):  # three processes: each its own memo of refused directories
        monkeypatch.setattr(cache, "_fallbacks", {})
        with pytest.warns(RuntimeWarning, match="refuses the kernel cache directory"):
            found.append(cache.cache_dir())
    fallback = tmp_path / "tmp" / f"teeny_tx-cache-{os.getuid()}"
    assert found == [fallback] * 3 and stat.S_IMODE(fallback.stat().st_mode) == 0o700
    assert sorted(p.name for p in (tmp_path / "tmp").iterdir()) == [fallback.name]
    fallback.chmod(0o777)  # someone opened it up: not used again
    monkeypatch.setattr(cache, "_fallbacks", {})
    with pytest.warns(RuntimeWarning, match="refuses the kernel cache directory"):
        fresh = cache.cache_dir()
    assert fresh != fallback and stat.S_IMODE(fresh.stat().st_mode) == 0o700


def test_a_killed_writers_temporary_files_are_removed(env, tmp_path):
    """atomic_write removes the temporary files that writers killed mid-write left beside
    its target (older than an hour); a live writer's (fresh) is left alone."""
    from teeny_tx.runtime import files

    directory = tmp_path / "entries"
    directory.mkdir()
    stale, live = directory / ".abc.123.tmp", directory / ".abc.456.tmp"
    for p in (stale, live):
        p.write_bytes(b"half a cubin")
    old = time.time() - 2 * files.STALE_SECONDS
    os.utime(stale, (old, old))
    files.atomic_write(directory / "entry", b"whole")
    assert (directory / "entry").read_bytes() == b"whole"
    assert not stale.exists() and live.exists()
