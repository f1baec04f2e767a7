"""The compile cache: keys, the two layers, corrupt entries, eviction, many processes."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import cudriver as cu
from cudriver._launch import _compile_cache as cc

from ._support import AXPY_KERNEL, needs_nvrtc, package_root

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh cache directory of this test's, and empty counters and memory."""
    d = tmp_path / "kernels"
    monkeypatch.setenv("CUDRIVER_CACHE_DIR", str(d))
    monkeypatch.delenv("CUDRIVER_CACHE", raising=False)
    monkeypatch.delenv("CUDRIVER_CACHE_MAX_BYTES", raising=False)
    monkeypatch.setattr(cc, "_warned", set())
    cu.clear_compile_cache(disk=False)
    yield d
    cu.clear_compile_cache(disk=False)


def entries(d: Path) -> list[Path]:
    return sorted(d.glob("*.bin"))


# -- the machinery, without NVRTC ------------------------------------------------------------
def test_the_key_separates_its_parts() -> None:
    assert cc.key([b"ab", b"c"]) == cc.key([b"ab", b"c"])
    assert cc.key([b"ab", b"c"]) != cc.key([b"a", b"bc"])
    assert len(cc.key([])) == 64


@pytest.mark.parametrize(
    ("options", "ok"),
    [
        ([b"--use_fast_math", b"--gpu-architecture=sm_90"], True),
        ([b"-I/opt/include"], False),
        ([b"--include-path=/opt/include"], False),
        ([b"-include", b"x.h"], False),
        ([b"--pre-include=x.h"], False),
    ],
)
def test_headers_from_disk_are_not_cached(options: list[bytes], ok: bool) -> None:
    assert cc.cacheable(options) is ok


def test_the_directory_is_made_for_its_owner_only(cache_dir: Path) -> None:
    assert cc.directory() == cache_dir
    if hasattr(os, "getuid"):
        assert cache_dir.stat().st_mode & 0o777 == 0o700


def test_xdg_cache_home_is_the_default_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CUDRIVER_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cc.directory() == tmp_path / "cudriver" / "kernels"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/path")  # ignored, as the spec says
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cc.directory() == tmp_path / "home" / ".cache" / "cudriver" / "kernels"


@pytest.mark.parametrize("value", ["off", "0", "false", "NO"])
def test_cudriver_cache_turns_it_off(
    cache_dir: Path, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("CUDRIVER_CACHE", value)
    assert not cc.enabled() and cc.directory() is None
    assert cu.compile_cache_info()["directory"] is None


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX owners and modes")
def test_a_directory_others_may_write_is_refused(
    cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache_dir.mkdir(mode=0o700)
    cache_dir.chmod(0o777)
    with pytest.warns(cu.CudaWarning, match="may be written by others.*777"):
        assert cc.directory() is None
    cache_dir.chmod(0o700)
    real = os.getuid()
    monkeypatch.setattr(os, "getuid", lambda: real + 1)
    with pytest.warns(cu.CudaWarning, match=f"belongs to another user \\(uid {real}\\)"):
        assert cc.directory() is None


def test_a_directory_that_cannot_be_made_leaves_memory_working(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("CUDRIVER_CACHE_DIR", str(blocker / "kernels"))
    monkeypatch.setattr(cc, "_warned", set())
    cu.clear_compile_cache(disk=False)
    with pytest.warns(cu.CudaWarning, match="cannot use .*a-file.*not caching"):
        cc.store("k1", b"payload")
    assert cc.lookup("k1") == b"payload"  # from memory; no second warning
    assert cu.compile_cache_info()["directory"] is None
    cu.clear_compile_cache(disk=False)


def test_an_entry_comes_back_from_memory_then_from_disk(cache_dir: Path) -> None:
    cc.store("k1", b"payload")
    assert cc.lookup("k1") == b"payload"
    cu.clear_compile_cache(disk=False)  # a new process, as far as memory goes
    assert cc.lookup("k1") == b"payload"
    assert cc.lookup("k1") == b"payload"
    info = cu.compile_cache_info()
    assert (info["memory_hits"], info["disk_hits"], info["misses"]) == (1, 1, 0)
    assert info["disk_entries"] == 1 and info["directory"] == str(cache_dir)
    assert cc.lookup("other") is None and cu.compile_cache_info()["misses"] == 1


@pytest.mark.parametrize("damage", ["truncate", "flip", "empty", "foreign"])
def test_a_damaged_entry_is_deleted_not_returned(cache_dir: Path, damage: str) -> None:
    cc.store("k1", b"x" * 1000)
    cu.clear_compile_cache(disk=False)
    (path,) = entries(cache_dir)
    blob = path.read_bytes()
    if damage == "truncate":
        path.write_bytes(blob[:-10])
    elif damage == "flip":
        path.write_bytes(blob[:-1] + bytes([blob[-1] ^ 1]))
    elif damage == "empty":
        path.write_bytes(b"")
    else:
        path.write_bytes(b"\x7fELF" + blob[4:])
    assert cc.lookup("k1") is None
    assert not path.exists()
    assert cu.compile_cache_info()["corrupt"] == 1


def test_the_least_recently_used_entries_go_first(
    cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for i in range(4):
        cc.store(f"k{i}", bytes(1000))
    now = time.time()
    for i, p in enumerate(sorted(entries(cache_dir))):  # k0 oldest ... k3 newest
        os.utime(p, (now - 100 + i, now - 100 + i))
    cu.clear_compile_cache(disk=False)
    assert cc.lookup("k0") is not None  # used again: now the newest
    monkeypatch.setenv("CUDRIVER_CACHE_MAX_BYTES", "2500")
    cc.store("k4", bytes(1000))
    kept = {p.stem for p in entries(cache_dir)}
    assert kept == {"k0", "k4"}, kept


def test_a_bad_size_limit_warns_and_keeps_the_default(
    cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDRIVER_CACHE_MAX_BYTES", "lots")
    with pytest.warns(cu.CudaWarning, match="not a byte count"):
        assert cc.max_bytes() == cc.DISK_BYTES


def test_a_stale_temporary_file_is_swept(cache_dir: Path) -> None:
    cc.store("k1", b"a")
    stale = cache_dir / ".tmp-dead"
    stale.write_bytes(b"half")
    old = time.time() - 2 * cc._STALE_TMP_S
    os.utime(stale, (old, old))
    fresh = cache_dir / ".tmp-busy"
    fresh.write_bytes(b"half")  # another process writing now: left alone
    cc.store("k2", b"b")
    assert not stale.exists() and fresh.exists()
    assert cu.compile_cache_info()["disk_entries"] == 2


def test_memory_keeps_the_most_recent_within_its_bytes(
    cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDRIVER_CACHE", "1")
    monkeypatch.setattr(cc, "MEMORY_BYTES", 2500)
    for i in range(3):
        cc._remember(f"k{i}", bytes(1000))
    assert list(cc._memory) == ["k1", "k2"] and cc._memory_bytes == 2000
    cc._remember("big", bytes(3000))  # larger than the whole layer: not kept
    assert "big" not in cc._memory


# -- through compile(), with NVRTC (no GPU: the architecture is given) ---------------------------
def fresh_source() -> str:
    """A kernel no earlier run has compiled: the cache has to miss once."""
    return AXPY_KERNEL + f"\n// {uuid.uuid4().hex}\n"


@needs_nvrtc
def test_compile_hits_memory_then_disk_and_gives_the_same_bytes(cache_dir: Path) -> None:
    src = fresh_source()
    first = cu.compile(src, arch="sm_90", target="cubin")
    assert cu.compile(src, arch="sm_90", target="cubin") == first
    info = cu.compile_cache_info()
    assert (info["misses"], info["memory_hits"], info["disk_hits"]) == (1, 1, 0)
    cu.clear_compile_cache(disk=False)  # also resets the counters
    assert cu.compile(src, arch="sm_90", target="cubin") == first
    info = cu.compile_cache_info()
    assert (info["misses"], info["memory_hits"], info["disk_hits"]) == (0, 0, 1)
    # Anything in the key changed: a new entry.
    cu.compile(src, arch="sm_90", target="ptx")
    cu.compile(src, arch="sm_80", target="cubin")
    cu.compile(src, arch="sm_90", target="cubin", options=["--use_fast_math"])
    cu.compile(src, arch="sm_90", target="cubin", name="other.cu")
    assert cu.compile_cache_info()["disk_entries"] == 5


@needs_nvrtc
def test_what_is_not_cached(cache_dir: Path) -> None:
    bad = fresh_source() + "this is not C++;\n"
    for _ in range(2):
        with pytest.raises(cu.CompileError):
            cu.compile(bad, arch="sm_90")
    assert cu.compile_cache_info()["disk_entries"] == 0
    src = fresh_source()
    cu.compile(src, arch="sm_90", cache=False)
    cu.compile(src, arch="sm_90", options=[f"-I{cache_dir.parent}"])
    info = cu.compile_cache_info()
    assert info["disk_entries"] == 0 and info["memory_entries"] == 0
    with pytest.raises(TypeError, match="cache must be True or False"):
        cu.compile(src, arch="sm_90", cache=1)  # type: ignore[arg-type]


@needs_nvrtc
def test_in_memory_headers_are_in_the_key(cache_dir: Path) -> None:
    src = '#include "scale.h"\n' + fresh_source().replace("a * x[i]", "SCALE * a * x[i]")
    one = cu.compile(src, arch="sm_90", headers={"scale.h": "#define SCALE 1.0f\n"})
    two = cu.compile(src, arch="sm_90", headers={"scale.h": "#define SCALE 2.0f\n"})
    assert one != two and cu.compile_cache_info()["misses"] == 2


@needs_nvrtc
def test_a_truncated_entry_is_compiled_again(cache_dir: Path) -> None:
    src = fresh_source()
    first = cu.compile(src, arch="sm_90", target="cubin")
    cu.clear_compile_cache(disk=False)
    (path,) = entries(cache_dir)
    path.write_bytes(path.read_bytes()[: len(first) // 2])
    assert cu.compile(src, arch="sm_90", target="cubin") == first
    info = cu.compile_cache_info()
    assert (info["corrupt"], info["misses"], info["disk_entries"]) == (1, 1, 1)
    cu.clear_compile_cache(disk=False)
    assert cu.compile(src, arch="sm_90", target="cubin") == first  # whole again
    assert cu.compile_cache_info()["disk_hits"] == 1


@needs_nvrtc
def test_eight_processes_compiling_one_new_source_leave_one_entry(cache_dir: Path) -> None:
    src = fresh_source()
    script = textwrap.dedent(
        """
        import hashlib, sys, time
        import cudriver as cu
        start = float(sys.argv[2])
        while time.time() < start:  # all eight compile at once
            time.sleep(0.001)
        out = cu.compile(open(sys.argv[1]).read(), arch="sm_90", target="cubin")
        print(hashlib.sha256(out).hexdigest())
        """
    )
    src_file = cache_dir.parent / "kernel.cu"
    src_file.write_text(src)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([package_root(), *sys.path]))
    start = str(time.time() + 3.0)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(src_file), start],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(8)
    ]
    outs = []
    for p in procs:
        try:
            out, err = p.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            pytest.fail("a compiling process ran past 120 s")
        assert p.returncode == 0, err
        outs.append(out.strip())
    assert len(set(outs)) == 1, outs
    assert len(entries(cache_dir)) == 1
    assert [p.name for p in cache_dir.iterdir()] == [entries(cache_dir)[0].name]
    assert cu.compile(src, arch="sm_90", target="cubin") is not None
    assert cu.compile_cache_info()["disk_hits"] == 1
