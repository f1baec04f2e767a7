"""The observers' hooks: where cudriver's own operations tell who watches them.

Two kinds of observer register here, from the top layer (``_observe``): the sync debug
mode (:mod:`cudriver._observe.sync_debug`), told before the host waits for the device,
and the NVTX marks (:mod:`cudriver._observe.nvtx`), told of captures, graph launches,
allocations, host functions and those waits. This module imports nothing of cudriver:
every layer may call it, and the bottom never reaches up (an observer puts itself into
the lists below).

Off by default, and then free: every call site tests a list's truth first (the
compiled ones in C, reading the list bound at import, as ``accounting.ON`` is read)
and does nothing more while it is empty:

* :data:`ON`, non-empty while any observer is registered: the host waits test it;
* :data:`MARKS`, the NVTX observers: the marks and ranges that are not waits test it.

The lists are never rebound (registering changes them in place, under :data:`LOCK`), so
a compiled module's reference stays the one the observers change.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Protocol

__all__ = [
    "ON",
    "SYNC",
    "MARKS",
    "LOCK",
    "Marker",
    "host_wait",
    "end",
    "push",
    "pop",
    "mark",
    "register_sync",
    "unregister_sync",
    "register_marks",
    "unregister_marks",
]


class Marker(Protocol):
    """An observer of :data:`MARKS`: a timeline (NVTX) that shows cudriver's operations.

    ``push``/``pop`` open and close a range on the calling thread (``pop`` closes the
    last one its ``push`` opened there); ``mark`` is an instant, with an int ``value``
    (a size in bytes) or None. None of them may raise.
    """

    def push(self, name: str) -> None: ...

    def pop(self) -> None: ...

    def mark(self, name: str, value: int | None = None) -> None: ...


#: A sync observer: ``cb(call, can_raise)``, before the host waits for the device in
#: ``call`` (what the user called, e.g. ``"Stream.synchronize (cuStreamSynchronize)"``).
#: It may raise when ``can_raise`` (the wait is then not made); a release, which must
#: never raise, passes False.
SyncCallback = Callable[[str, bool], None]

#: Non-empty while any observer is registered (the host waits test its truth).
ON: list[bool] = []
#: The sync observers (:data:`SyncCallback`).
SYNC: list[SyncCallback] = []
#: The NVTX observers (:class:`Marker`); non-empty only while marking is on.
MARKS: list[Marker] = []
#: Held while an observer is registered or removed (never around a driver call).
LOCK = threading.Lock()

# Per thread: how many host waits are open. Only the outermost is reported to SYNC (a
# synchronize whose releases wait too is one wait of the user's), every one is marked.
_depth = threading.local()


def _sync_on() -> None:
    # Under LOCK: ON follows the other two lists.
    if SYNC or MARKS:
        if not ON:
            ON.append(True)
    else:
        ON.clear()


def register_sync(cb: SyncCallback) -> None:
    """Add a sync observer (once)."""
    with LOCK:
        if cb not in SYNC:
            SYNC.append(cb)
        _sync_on()


def unregister_sync(cb: SyncCallback) -> None:
    """Remove a sync observer; nothing if it is not registered."""
    with LOCK:
        if cb in SYNC:
            SYNC.remove(cb)
        _sync_on()


def register_marks(marker: Marker) -> None:
    """Add an NVTX observer (once)."""
    with LOCK:
        if marker not in MARKS:
            MARKS.append(marker)
        _sync_on()


def unregister_marks(marker: Marker) -> None:
    """Remove an NVTX observer; nothing if it is not registered."""
    with LOCK:
        if marker in MARKS:
            MARKS.remove(marker)
        _sync_on()


def host_wait(name: str, can_raise: bool = True) -> tuple[Marker, ...]:
    """The host is about to wait for the device in ``name``: tell the observers.

    Called while :data:`ON`, before the wait (and before the operation that waits, for
    copies and fills without a stream). The sync observers run first, for the outermost
    wait of this thread only, and may raise (``can_raise``: then nothing was pushed);
    then each marker opens a range named ``name``. Returns the markers that did, for
    :func:`end`, which the caller calls once the wait is over, also when it failed.
    """
    depth = getattr(_depth, "n", 0)
    if depth == 0 and SYNC:
        for cb in tuple(SYNC):
            cb(name, can_raise)
    pushed = tuple(MARKS)
    for m in pushed:
        m.push(name)
    _depth.n = depth + 1
    return pushed


def end(token: tuple[Marker, ...]) -> None:
    """The wait :func:`host_wait` announced is over: close its ranges."""
    _depth.n = getattr(_depth, "n", 1) - 1
    for m in reversed(token):
        m.pop()


def push(name: str) -> tuple[Marker, ...]:
    """Open a range named ``name`` on this thread in every marker; the token for :func:`pop`."""
    pushed = tuple(MARKS)
    for m in pushed:
        m.push(name)
    return pushed


def pop(token: tuple[Marker, ...]) -> None:
    """Close the ranges :func:`push` opened (in the markers that opened them)."""
    for m in reversed(token):
        m.pop()


def mark(name: str, value: int | None = None) -> None:
    """An instant named ``name`` (with ``value``, e.g. a size) in every marker."""
    for m in tuple(MARKS):
        m.mark(name, value)
