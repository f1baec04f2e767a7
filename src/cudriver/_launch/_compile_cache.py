"""The compile cache: what NVRTC made, kept in memory and on disk.

:func:`cudriver.compile` looks here first. An entry's key is a SHA-256 of everything
that changes NVRTC's output: the source, the program name, the options (the
architecture included), the in-memory headers, the target, NVRTC's version, the
cuda-bindings version and cudriver's. Headers read from disk (``-I``, ``--include-path``,
``--pre-include``) are not part of the key, so such compilations are not cached.
Compile errors are never cached. An entry holds the compiled code with what
:func:`cudriver.compile` returns beside it (the lowered names of the name expressions,
the compiler's log), as JSON before the code (:func:`pack_entry`, :func:`unpack_entry`):
never pickle, so reading an entry runs no code.

Two layers:

- in memory, for the process: up to :data:`MEMORY_BYTES` of results, least recently
  used first out;
- on disk, shared by processes: one file per entry under ``$CUDRIVER_CACHE_DIR``, else
  ``$XDG_CACHE_HOME/cudriver/kernels``, else ``~/.cache/cudriver/kernels``; at most
  ``$CUDRIVER_CACHE_MAX_BYTES`` (default :data:`DISK_BYTES`), least recently used
  first out. ``CUDRIVER_CACHE=off`` (or ``0``, ``false``, ``no``) turns both layers off.

Safety: an entry is written to a temporary file and renamed into place, so a reader
sees a whole entry or none, and many processes may compile the same source at once.
Each entry stores a SHA-256 of its contents, checked before it is returned: a
truncated or corrupt entry is deleted and the source compiled again. The directory is
created readable by its owner only; a directory that another user owns, or that others
may write to, is not used (a :class:`~cudriver.CudaWarning` says why, once), because
whoever may write there chooses the code the driver loads.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import struct
import tempfile
import threading
import time
import warnings
from collections import OrderedDict
from pathlib import Path
from typing import Any

from ..errors import CudaWarning

__all__ = ["clear_compile_cache", "compile_cache_info", "MEMORY_BYTES", "DISK_BYTES"]

#: Bytes of results the in-memory layer keeps.
MEMORY_BYTES = 64 << 20
#: Default size limit of the on-disk layer (``CUDRIVER_CACHE_MAX_BYTES`` overrides it).
DISK_BYTES = 1 << 30

_MAGIC = b"CUDRVK1\n"
# The payload of an entry of compile(): this, the JSON's length, the JSON, the code.
_ENTRY_MAGIC = b"CUDRVE1\n"
_ENTRY_HEAD = struct.Struct("<I")
_HEADER = struct.Struct("<32sQ")  # SHA-256 of the payload, its length
_SUFFIX = ".bin"
_TMP_PREFIX = ".tmp-"
_STALE_TMP_S = 3600.0
_OFF = frozenset({"0", "off", "false", "no"})
# Options that make NVRTC read headers from disk: their contents are not in the key.
_DISK_INCLUDES = ("-I", "--include-path", "-include", "--pre-include")

_lock = threading.Lock()
_memory: OrderedDict[str, bytes] = OrderedDict()
_memory_bytes = 0
_stats = {"memory_hits": 0, "disk_hits": 0, "misses": 0, "corrupt": 0}
_warned: set[str] = set()


def enabled() -> bool:
    """Whether ``CUDRIVER_CACHE`` leaves the cache on (the default)."""
    return os.environ.get("CUDRIVER_CACHE", "").strip().lower() not in _OFF


def cacheable(options: list[bytes]) -> bool:
    """False when the options make NVRTC read headers from disk (not in the key)."""
    for o in options:
        for flag in _DISK_INCLUDES:
            if o.decode(errors="replace").startswith(flag):
                return False
    return True


def key(parts: list[bytes]) -> str:
    """The entry's name: a SHA-256 over ``parts``, each length-prefixed."""
    h = hashlib.sha256(b"cudriver-compile-cache/1")
    for p in parts:
        h.update(struct.pack("<Q", len(p)))
        h.update(p)
    return h.hexdigest()


def _warn_once(what: str, message: str) -> None:
    if what not in _warned:
        _warned.add(what)
        warnings.warn(message, CudaWarning, stacklevel=4)


def directory() -> Path | None:
    """The on-disk layer's directory, created if needed; None when off or unsafe."""
    if not enabled():
        return None
    env = os.environ.get("CUDRIVER_CACHE_DIR", "").strip()
    if env:
        path = Path(env).expanduser()
    else:
        xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
        base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".cache"
        path = base / "cudriver" / "kernels"
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = path.stat()
    except OSError as exc:
        _warn_once(f"mkdir {path}", f"the compile cache cannot use {path}: {exc}; not caching")
        return None
    getuid = getattr(os, "getuid", None)
    if getuid is not None:  # POSIX: ours, and no one else may write there
        if st.st_uid != getuid():
            _warn_once(
                f"owner {path}",
                f"the compile cache directory {path} belongs to another user (uid "
                f"{st.st_uid}); not using it: set CUDRIVER_CACHE_DIR to a directory of yours",
            )
            return None
        if st.st_mode & 0o022:
            _warn_once(
                f"mode {path}",
                f"the compile cache directory {path} may be written by others (mode "
                f"{st.st_mode & 0o777:o}); not using it: chmod go-w it or set "
                "CUDRIVER_CACHE_DIR",
            )
            return None
    return path


def max_bytes() -> int:
    """The on-disk layer's size limit (``CUDRIVER_CACHE_MAX_BYTES``, else the default)."""
    raw = os.environ.get("CUDRIVER_CACHE_MAX_BYTES", "").strip()
    if not raw:
        return DISK_BYTES
    try:
        n = int(raw)
    except ValueError:
        n = -1
    if n < 0:
        _warn_once(
            f"max {raw}",
            f"CUDRIVER_CACHE_MAX_BYTES={raw!r} is not a byte count; using {DISK_BYTES}",
        )
        return DISK_BYTES
    return n


# -- in memory --------------------------------------------------------------------------------
def _remember(k: str, data: bytes) -> None:
    global _memory_bytes
    if len(data) > MEMORY_BYTES:
        return
    with _lock:
        old = _memory.pop(k, None)
        if old is not None:
            _memory_bytes -= len(old)
        _memory[k] = data
        _memory_bytes += len(data)
        while _memory_bytes > MEMORY_BYTES:
            _, gone = _memory.popitem(last=False)
            _memory_bytes -= len(gone)


def _recall(k: str) -> bytes | None:
    with _lock:
        data = _memory.get(k)
        if data is not None:
            _memory.move_to_end(k)
            _stats["memory_hits"] += 1
        return data


# -- on disk ------------------------------------------------------------------------------------
def _read(path: Path) -> bytes | None:
    """The entry at ``path`` if it is whole and unaltered; a bad one is deleted."""
    try:
        with open(path, "rb") as f:
            blob = f.read()
    except FileNotFoundError:
        return None
    except OSError:
        return None
    head = len(_MAGIC) + _HEADER.size
    ok = len(blob) >= head and blob.startswith(_MAGIC)
    if ok:
        digest, n = _HEADER.unpack_from(blob, len(_MAGIC))
        data = blob[head:]
        ok = len(data) == n and hashlib.sha256(data).digest() == digest
    if not ok:
        with _lock:
            _stats["corrupt"] += 1
        with contextlib.suppress(OSError):
            path.unlink()
        return None
    with contextlib.suppress(OSError):
        os.utime(path)  # most recently used
    return data


def _write(folder: Path, k: str, data: bytes) -> None:
    """Store ``data`` as entry ``k`` atomically (a temporary file renamed into place)."""
    blob = _MAGIC + _HEADER.pack(hashlib.sha256(data).digest(), len(data)) + data
    try:
        fd, tmp = tempfile.mkstemp(prefix=_TMP_PREFIX, dir=folder)
    except OSError:
        return
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(blob)
        os.replace(tmp, folder / (k + _SUFFIX))
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        return
    _evict(folder, max_bytes())


def _entries(folder: Path) -> list[tuple[float, int, Path]]:
    out = []
    now = time.time()
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    for name in names:
        p = folder / name
        try:
            st = p.stat()
        except OSError:
            continue
        if name.startswith(_TMP_PREFIX):
            if now - st.st_mtime > _STALE_TMP_S:  # left by a process that died mid-write
                with contextlib.suppress(OSError):
                    p.unlink()
            continue
        if name.endswith(_SUFFIX):
            out.append((st.st_mtime, st.st_size, p))
    return out


def _evict(folder: Path, limit: int) -> None:
    """Delete the least recently used entries while the total is above ``limit``."""
    entries = _entries(folder)
    total = sum(size for _, size, _ in entries)
    if total <= limit:
        return
    for _, size, p in sorted(entries):
        with contextlib.suppress(OSError):
            p.unlink()
            total -= size
        if total <= limit * 0.9:
            break


# -- what compile() calls ----------------------------------------------------------------------
def lookup(k: str) -> bytes | None:
    """The cached output for key ``k`` (memory, then disk), or None."""
    data = _recall(k)
    if data is not None:
        return data
    folder = directory()
    if folder is not None:
        data = _read(folder / (k + _SUFFIX))
        if data is not None:
            with _lock:
                _stats["disk_hits"] += 1
            _remember(k, data)
            return data
    with _lock:
        _stats["misses"] += 1
    return None


def store(k: str, data: bytes) -> None:
    """Keep ``data`` as the output for key ``k`` in both layers."""
    _remember(k, data)
    folder = directory()
    if folder is not None:
        _write(folder, k, data)


def pack_entry(code: bytes, meta: dict[str, Any]) -> bytes:
    """One payload holding ``code`` and ``meta`` (JSON: strings, lists and dicts only)."""
    js = json.dumps(meta, sort_keys=True, separators=(",", ":")).encode()
    return _ENTRY_MAGIC + _ENTRY_HEAD.pack(len(js)) + js + bytes(code)


def unpack_entry(payload: bytes) -> tuple[bytes, dict[str, Any]] | None:
    """``(code, meta)`` from :func:`pack_entry`'s payload; None when it is not one."""
    head = len(_ENTRY_MAGIC) + _ENTRY_HEAD.size
    if len(payload) < head or not payload.startswith(_ENTRY_MAGIC):
        return None
    (n,) = _ENTRY_HEAD.unpack_from(payload, len(_ENTRY_MAGIC))
    if head + n > len(payload):
        return None
    try:
        meta = json.loads(payload[head : head + n].decode())
    except (UnicodeDecodeError, ValueError):
        return None
    if not isinstance(meta, dict):
        return None
    return payload[head + n :], meta


# -- public --------------------------------------------------------------------------------------
def compile_cache_info() -> dict[str, Any]:
    """What the compile cache holds and has done in this process; no compilation.

    Returns
    -------
    dict
        ``enabled``; ``directory`` (the on-disk layer's path as a str, or None when it
        is off or refused); ``disk_entries`` and ``disk_bytes`` (entries on disk now);
        ``max_bytes`` (its limit); ``memory_entries`` and ``memory_bytes``;
        ``memory_hits``, ``disk_hits``, ``misses`` and ``corrupt`` (entries found bad
        and deleted) since the process started or :func:`clear_compile_cache`.
    """
    folder = directory()
    entries = _entries(folder) if folder is not None else []
    with _lock:
        info: dict[str, Any] = {
            "enabled": enabled(),
            "directory": str(folder) if folder is not None else None,
            "disk_entries": len(entries),
            "disk_bytes": sum(size for _, size, _ in entries),
            "max_bytes": max_bytes(),
            "memory_entries": len(_memory),
            "memory_bytes": _memory_bytes,
        }
        info.update(_stats)
    return info


def clear_compile_cache(*, disk: bool = True) -> None:
    """Forget the cached compilations: this process's, and with ``disk`` the on-disk ones.

    Also resets the counters of :func:`compile_cache_info`. Other processes keep what
    they hold in memory.
    """
    global _memory_bytes
    with _lock:
        _memory.clear()
        _memory_bytes = 0
        for name in _stats:
            _stats[name] = 0
    if disk:
        folder = directory()
        if folder is not None:
            for _, _, p in _entries(folder):
                with contextlib.suppress(OSError):
                    p.unlink()
