"""Memory accounting: live and peak bytes per device and resource, and a history.

Off by default, and then free: the allocation paths test :data:`ON` (a list, empty
while off, so that the compiled path tests it in C) and do nothing more. When on
(:func:`set_memory_accounting`), every allocation cudriver makes is counted where it
is made (:func:`track`) and uncounted when its release has run (the release state's
``on_release`` hook, a :class:`_Record`): device buffers (plain, stream-ordered, from
pools and from memory resources), pinned, managed and virtual memory, and CUDA
arrays. Memory cudriver only wraps (``from_handle``, imports from other processes,
registered host memory) is not cudriver's allocation and is not counted.

:func:`record_memory_history` also keeps the events (allocations, frees, allocations
the driver refused) with their Python call site and, on demand, their stack;
:func:`memory_snapshot` returns them as a JSON-ready dict (the format that
``python -m cudriver memory`` draws).
"""

from __future__ import annotations

import collections
import dataclasses
import json
import os
import sys
import threading
import time
from collections.abc import Mapping
from typing import Any, Literal

__all__ = [
    "ON",
    "MemoryStats",
    "MemoryUsage",
    "set_memory_accounting",
    "memory_accounting_enabled",
    "record_memory_history",
    "memory_stats",
    "reset_peak_memory_stats",
    "reset_memory_stats",
    "memory_summary",
    "memory_snapshot",
    "save_memory_snapshot",
    "track",
    "failed",
]

#: Non-empty while accounting is on (the compiled allocation path tests its truth).
ON: list[bool] = []

# Reentrant: a collection inside a locked section may run a release hook on this thread.
_LOCK = threading.RLock()
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_FORMAT = "cudriver.memory-snapshot"

DeviceKey = int | None  # a device ordinal; None: host memory


class _Counter:
    __slots__ = ("cur", "failures", "n", "npeak", "peak", "peak_t", "total", "total_bytes")

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        self.cur = self.peak = self.n = self.npeak = self.total = self.total_bytes = 0
        self.failures = 0
        self.peak_t = 0.0

    def usage(self) -> MemoryUsage:
        return MemoryUsage(
            self.cur, self.peak, self.n, self.npeak, self.total, self.total_bytes, self.failures
        )


@dataclasses.dataclass(frozen=True)
class MemoryUsage:
    """What one resource (or one device, all resources together) has allocated.

    Counted since accounting was turned on (or since :func:`reset_memory_stats`):
    memory allocated before then is not in ``current_bytes``, and its free is not
    subtracted.
    """

    #: Bytes allocated and not yet freed.
    current_bytes: int
    #: The most :attr:`current_bytes` has been.
    peak_bytes: int
    #: Allocations not yet freed.
    current_count: int
    #: The most :attr:`current_count` has been.
    peak_count: int
    #: Allocations made.
    total_count: int
    #: Bytes allocated, summed over every allocation made.
    total_bytes: int
    #: Allocations the driver refused for lack of memory (after cudriver's retry).
    failures: int


@dataclasses.dataclass(frozen=True)
class MemoryStats:
    """:func:`memory_stats`' answer: one device's (or every device's) accounting."""

    #: The device: an ordinal, ``"host"`` for pinned host memory, None for everything.
    device: int | Literal["host"] | None
    #: Every resource of :attr:`device` together (its peak is the peak of the sum).
    total: MemoryUsage
    #: Per memory resource, by its name (``"cuMemAlloc"``, ``"cuMemAllocAsync"``, a
    #: pool's or a user resource's name).
    by_resource: Mapping[str, MemoryUsage]


class _History:
    __slots__ = ("dropped", "events", "max_entries", "stacks", "start")

    def __init__(self, stacks: bool, max_entries: int) -> None:
        self.events: collections.deque[dict[str, Any]] = collections.deque(maxlen=max_entries)
        self.stacks = stacks
        self.start = time.perf_counter()
        self.dropped = 0
        self.max_entries = max_entries

    def add(self, event: dict[str, Any]) -> None:
        if len(self.events) == self.max_entries:
            self.dropped += 1
        self.events.append(event)


# Counters: per (device, resource), per device (all resources) and over everything.
_BY_RESOURCE: dict[tuple[DeviceKey, str], _Counter] = {}
_BY_DEVICE: dict[DeviceKey, _Counter] = {}
_ALL = _Counter()
_HISTORY: _History | None = None
_T0 = time.perf_counter()


def _now() -> float:
    h = _HISTORY
    return time.perf_counter() - (h.start if h is not None else _T0)


def _site_and_stack(want_stack: bool) -> tuple[str, list[str] | None]:
    """The first frame outside cudriver (``"file.py:12 in fn"``) and, if asked, the stack."""
    f: Any = sys._getframe(2)
    while f is not None and f.f_code.co_filename.startswith(_PACKAGE):
        f = f.f_back
    if f is None:
        return "unknown", [] if want_stack else None
    site = f"{f.f_code.co_filename}:{f.f_lineno} in {f.f_code.co_name}"
    if not want_stack:
        return site, None
    stack: list[str] = []
    while f is not None and len(stack) < 32:
        stack.append(f"{f.f_code.co_filename}:{f.f_lineno} in {f.f_code.co_name}")
        f = f.f_back
    return site, stack


class _Record:
    """One counted allocation; called (as its state's ``on_release``) once it is freed."""

    __slots__ = ("address", "chain", "chained", "gen", "key", "nbytes", "site")

    def __init__(
        self,
        key: tuple[DeviceKey, str],
        chain: tuple[_Counter, ...],
        nbytes: int,
        address: int,
        site: str | None,
        chained: Any,
    ) -> None:
        self.key = key
        self.chain = chain  # its resource's counter, its device's, the total
        self.nbytes = nbytes
        self.address = address
        self.site = site
        self.chained = chained  # an on_release the state had already
        self.gen = _GENERATION[0]

    def __call__(self) -> None:
        try:
            if self.gen == _GENERATION[0]:
                n = self.nbytes
                with _LOCK:
                    for c in self.chain:
                        c.cur -= n
                        c.n -= 1
                    h = _HISTORY
                    if h is not None:
                        h.add(self._event("free", _now()))
        finally:
            if self.chained is not None:
                self.chained()

    def _event(self, action: str, t: float) -> dict[str, Any]:
        return {
            "t": t,
            "action": action,
            "address": self.address,
            "nbytes": self.nbytes,
            "device": self.key[0],
            "resource": self.key[1],
            "site": self.site or "unknown",
            "stack": None,
        }


# Bumped by reset_memory_stats: records made before it are not subtracted after it.
_GENERATION = [0]
# (device, resource) -> the counters an allocation there moves: the resource's, the
# device's and the total.
_CHAINS: dict[tuple[DeviceKey, str], tuple[_Counter, ...]] = {}


def _chain(key: tuple[DeviceKey, str]) -> tuple[_Counter, ...]:
    with _LOCK:
        chain = _CHAINS.get(key)
        if chain is None:
            c = _BY_RESOURCE.get(key)
            if c is None:
                c = _BY_RESOURCE[key] = _Counter()
            d = _BY_DEVICE.get(key[0])
            if d is None:
                d = _BY_DEVICE[key[0]] = _Counter()
            chain = _CHAINS[key] = (c, d, _ALL)
        return chain


def track(state: Any, address: int, nbytes: int, device: DeviceKey, resource: str) -> None:
    """Count an allocation whose release state is ``state`` (while :data:`ON`).

    ``device``: the ordinal whose memory it is, None for host memory; ``resource``:
    the name of where it came from. The state's ``on_release`` uncounts it once the
    release has run (an ``on_release`` already there still runs after).
    """
    key = (device, resource)
    chain = _CHAINS.get(key)
    if chain is None:
        chain = _chain(key)
    h = _HISTORY
    site: str | None = None
    stack: list[str] | None = None
    if h is not None:
        site, stack = _site_and_stack(h.stacks)
    rec = _Record(key, chain, nbytes, address, site, state.on_release)
    state.on_release = rec
    with _LOCK:
        t = -1.0
        for c in chain:
            cur = c.cur = c.cur + nbytes
            n = c.n = c.n + 1
            c.total += 1
            c.total_bytes += nbytes
            if cur > c.peak:
                c.peak = cur
                if t < 0:
                    t = _now()
                c.peak_t = t
            if n > c.npeak:
                c.npeak = n
        if h is not None and h is _HISTORY:
            ev = rec._event("alloc", t if t >= 0 else _now())
            ev["stack"] = stack
            h.add(ev)


def failed(nbytes: int, device: DeviceKey, resource: str) -> None:
    """Count an allocation the driver refused for lack of memory (while :data:`ON`)."""
    h = _HISTORY
    site: str | None = None
    stack: list[str] | None = None
    if h is not None:
        site, stack = _site_and_stack(h.stacks)
    chain = _chain((device, resource))
    with _LOCK:
        for c in chain:
            c.failures += 1
        if h is not None and h is _HISTORY:
            h.add(
                {
                    "t": _now(),
                    "action": "oom",
                    "address": 0,
                    "nbytes": nbytes,
                    "device": device,
                    "resource": resource,
                    "site": site or "unknown",
                    "stack": stack,
                }
            )


# -- switching on and off -------------------------------------------------------------------
def set_memory_accounting(enabled: bool) -> None:
    """Turn the accounting of every cudriver allocation on or off.

    Off (the default) costs the allocation paths nothing but a test. On, each
    allocation and free updates counters under a lock (``benchmarks/alloc_breakdown``
    measures what that costs); no driver call is made. Turning it off keeps the
    numbers (:func:`memory_stats`) and stops the history; allocations counted while
    it was on are still uncounted when freed.
    """
    if not isinstance(enabled, bool):
        raise TypeError(f"enabled must be a bool, not {type(enabled).__name__}")
    global _HISTORY
    with _LOCK:
        if enabled:
            if not ON:
                ON.append(True)
        else:
            ON.clear()
            _HISTORY = None


def memory_accounting_enabled() -> bool:
    """Whether :func:`set_memory_accounting` turned accounting on."""
    return bool(ON)


def record_memory_history(
    enabled: bool = True, *, stacks: bool = False, max_entries: int = 1_000_000
) -> None:
    """Keep (or stop keeping) every allocation, free and refused allocation.

    Turns accounting on (:func:`set_memory_accounting`). Each event keeps its time, its
    address and size, device and resource, and the first line of Python outside
    cudriver that made it (its site); with ``stacks=True`` also the Python stack
    (up to 32 frames, innermost first), which costs more per allocation. At most
    ``max_entries`` events are kept (the oldest are dropped, and counted). Starting
    again clears the events. :func:`memory_snapshot` returns them.
    """
    if not isinstance(enabled, bool):
        raise TypeError(f"enabled must be a bool, not {type(enabled).__name__}")
    if not isinstance(stacks, bool):
        raise TypeError(f"stacks must be a bool, not {type(stacks).__name__}")
    if isinstance(max_entries, bool) or not isinstance(max_entries, int):
        raise TypeError(f"max_entries must be an int, not {type(max_entries).__name__}")
    if max_entries < 1:
        raise ValueError(f"max_entries must be at least 1, not {max_entries}")
    global _HISTORY
    if enabled:
        set_memory_accounting(True)
        with _LOCK:
            _HISTORY = _History(stacks, max_entries)
    else:
        with _LOCK:
            _HISTORY = None


# -- reading --------------------------------------------------------------------------------
def _device_key(device: object) -> tuple[bool, DeviceKey]:
    """(all devices?, the key) for ``device``: None, ``"host"``, an ordinal or a Device."""
    if device is None:
        return True, None
    if device == "host":
        return False, None
    ordinal = getattr(device, "ordinal", device)
    if isinstance(ordinal, bool) or not isinstance(ordinal, int):
        raise TypeError(
            f"device must be a Device, an ordinal, 'host' or None, not {type(device).__name__}"
        )
    if ordinal < 0:
        raise ValueError(f"device must be an ordinal >= 0, not {ordinal}")
    return False, ordinal


def _label(key: DeviceKey) -> int | Literal["host"]:
    return "host" if key is None else key


def memory_stats(device: object = None) -> MemoryStats:
    """Live and peak bytes and counts, per resource, of one device or all together.

    No driver call; reads the counters kept while accounting is on
    (:func:`set_memory_accounting`). For what the driver itself reports, see
    :attr:`Device.mem_info <cudriver.Device.mem_info>` (``cuMemGetInfo``).

    Parameters
    ----------
    device
        A :class:`~cudriver.Device` or ordinal, ``"host"`` (pinned host memory), or
        None for every device and the host together.
    """
    every, key = _device_key(device)
    with _LOCK:
        if every:
            by: dict[str, _Counter] = {}
            for (dev, res), c in _BY_RESOURCE.items():
                by[f"{res} [{_label(dev)}]"] = c
            total = _ALL.usage()
            return MemoryStats(None, total, {k: v.usage() for k, v in sorted(by.items())})
        d = _BY_DEVICE.get(key)
        mine = {r: c.usage() for (dev, r), c in sorted(_BY_RESOURCE.items(), key=str) if dev == key}
        return MemoryStats(_label(key), (d or _Counter()).usage(), mine)


def reset_peak_memory_stats() -> None:
    """Set every peak to the current value (bytes and counts)."""
    with _LOCK:
        for c in (*_BY_RESOURCE.values(), *_BY_DEVICE.values(), _ALL):
            c.peak = c.cur
            c.npeak = c.n
            c.peak_t = _now()


def reset_memory_stats() -> None:
    """Forget every number: live allocations are no longer counted, nor their frees."""
    with _LOCK:
        _GENERATION[0] += 1
        _CHAINS.clear()
        _BY_RESOURCE.clear()
        _BY_DEVICE.clear()
        _ALL.clear()


def _size(n: int) -> str:
    v = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(v) < 1024 or unit == "TiB":
            return f"{v:.0f} {unit}" if unit == "B" else f"{v:.2f} {unit}"
        v /= 1024
    raise AssertionError("unreachable")


def memory_summary(device: object = None) -> str:
    """A table of :func:`memory_stats`, for people: one row per resource and a total."""
    s = memory_stats(device)
    where = "every device and the host" if s.device is None else f"device {s.device}"
    head = ("resource", "live", "peak", "live #", "peak #", "allocs", "refused")
    rows = [
        (name, _size(u.current_bytes), _size(u.peak_bytes), str(u.current_count),
         str(u.peak_count), str(u.total_count), str(u.failures))
        for name, u in s.by_resource.items()
    ]  # fmt: skip
    t = s.total
    rows.append(
        ("total", _size(t.current_bytes), _size(t.peak_bytes), str(t.current_count),
         str(t.peak_count), str(t.total_count), str(t.failures))
    )  # fmt: skip
    widths = [max(len(r[i]) for r in (head, *rows)) for i in range(len(head))]

    def line(r: tuple[str, ...]) -> str:
        cells = [r[0].ljust(widths[0])] + [
            c.rjust(w) for c, w in zip(r[1:], widths[1:], strict=True)
        ]
        return "  ".join(cells)

    state = "on" if ON else "off"
    out = [f"cudriver memory accounting ({state}), {where}", line(head)]
    out.append("-" * len(out[-1]))
    out += [line(r) for r in rows[:-1]]
    out.append("-" * len(out[1]))
    out.append(line(rows[-1]))
    return "\n".join(out)


def memory_snapshot() -> dict[str, Any]:
    """The history and the live allocations, as a JSON-ready dict.

    The format ``python -m cudriver memory`` and
    :func:`~cudriver.draw_memory_snapshot` read (``"format":
    "cudriver.memory-snapshot"``, version 1): ``events`` (oldest first; each with
    ``t`` in seconds since the history began, ``action`` ``"alloc"``, ``"free"`` or
    ``"oom"``, ``address``, ``nbytes``, ``device`` (None for host memory),
    ``resource``, ``site`` and ``stack``), ``dropped``, ``live`` and the ``peak`` per
    device. Without :func:`record_memory_history` the events are empty.
    """
    with _LOCK:
        h = _HISTORY
        events = list(h.events) if h is not None else []
        peak = {
            ("host" if k is None else str(k)): {"bytes": c.peak, "t": c.peak_t}
            for k, c in _BY_DEVICE.items()
        }
    # The live allocations: those allocated in the history and not freed in it.
    live: dict[tuple[Any, int], dict[str, Any]] = {}
    for ev in events:
        k = (ev["device"], ev["address"])
        if ev["action"] == "alloc":
            live[k] = ev
        elif ev["action"] == "free":
            live.pop(k, None)
    return {
        "format": _FORMAT,
        "version": 1,
        "pid": os.getpid(),
        "created": time.time(),
        "stacks": bool(h is not None and h.stacks),
        "dropped": h.dropped if h is not None else 0,
        "events": events,
        "live": [
            {k: ev[k] for k in ("address", "nbytes", "device", "resource", "site", "t")}
            for ev in live.values()
        ],
        "peak": peak,
    }


def save_memory_snapshot(path: str | os.PathLike[str]) -> None:
    """Write :func:`memory_snapshot` to ``path`` as JSON.

    Draw it with ``python -m cudriver memory PATH`` (or
    :func:`~cudriver.draw_memory_snapshot`).
    """
    snap = memory_snapshot()
    with open(path, "w", encoding="utf-8") as f:
        json.dump(snap, f)
