"""What objects that travel between processes share: the ``multiprocessing`` reduction.

Shareable objects (an IPC-enabled :class:`~cudriver.MemoryPool` and its allocations,
``VirtualBuffer(handle_type="fd")``, ``Event(interprocess=True)``) register a reducer
with ``multiprocessing``'s pickler (:func:`register`), so they go through a ``Queue``,
a ``Pipe``, ``Process`` arguments and a ``ProcessPoolExecutor`` of the ``spawn`` and
``forkserver`` contexts. Their file descriptors travel with
``multiprocessing.reduction.DupFd`` (:func:`send_fd`): passed to the child when it is
spawned, else fetched by the receiver from the sender over a Unix socket. Plain
``pickle.dumps`` never sees the reducer: the classes' ``__reduce__`` refuses with the
reason (``Handle._pickle_refusal``), since a descriptor cannot go into plain bytes.

The receiving side opens each object anew and owns what it opened; a pool arrives once
per process (:data:`POOLS`, by the sender's process and the pool's token), an
allocation once per pool (:data:`BUFFERS`) and an event once (:data:`EVENTS`), however
many times they are sent. An object dropped here is opened again when it comes again,
but only once the release of its last opening has run (:func:`before_open`): the
driver may give a second opening the same pool, address or event, which the late
release of the first would then take away. Unpickling trusts the sender: it opens the
handles it is given (same host, same user).
"""

from __future__ import annotations

import os
import secrets
import threading
import weakref
from collections.abc import Callable
from multiprocessing import context as _mp_context
from multiprocessing import reduction as _reduction
from multiprocessing import util as _mp_util
from typing import Any

from .._lifetime import _handle
from .device import Device

__all__ = [
    "POOLS",
    "BUFFERS",
    "EVENTS",
    "OPENED",
    "opened",
    "before_open",
    "open_once",
    "register",
    "send_fd",
    "receive_fd",
    "EXPORTED",
    "refuse",
    "token",
    "device_uuid",
    "device_of_uuid",
]

#: Imported pools, by (sender's pid, pool token): a pool arrives once per process.
POOLS: weakref.WeakValueDictionary[tuple[int, str], Any] = weakref.WeakValueDictionary()
#: Imported allocations (their root buffers), by (sender's pid, pool token, export data).
BUFFERS: weakref.WeakValueDictionary[tuple[int, str, bytes], Any] = weakref.WeakValueDictionary()
#: Imported events, by (sender's pid, IPC handle bytes).
EVENTS: weakref.WeakValueDictionary[tuple[int, bytes], Any] = weakref.WeakValueDictionary()
#: The release state of each handle opened from a message, by its key in POOLS,
#: BUFFERS or EVENTS, until that release has run (see :func:`before_open`).
OPENED: dict[Any, Any] = {}
#: What this process sent, by what names it in a message (a pool's token; a token and
#: export data; an event's handle): a message received in the process that sent it
#: gives the original back (the driver refuses to open one's own exports).
EXPORTED: weakref.WeakValueDictionary[Any, Any] = weakref.WeakValueDictionary()
#: Serialises imports, so two threads unpickling one object open it once.
LOCK = threading.Lock()

# Guards OPENED alone; never held around a driver call or a release.
_opened_lock = threading.Lock()


def opened(key: Any, obj: Any) -> None:
    """Note that ``obj`` was opened from a message named ``key``, until it is released."""
    state = obj._state
    with _opened_lock:
        OPENED[key] = state
        state.on_release = _Forget(key, state, state.on_release)


class _Forget:
    """A release hook: drop ``key`` from :data:`OPENED` (if it still names this state)."""

    __slots__ = ("key", "state", "then")

    def __init__(self, key: Any, state: Any, then: Callable[[], Any] | None) -> None:
        self.key, self.state, self.then = key, state, then

    def __call__(self) -> None:
        with _opened_lock:
            if OPENED.get(self.key) is self.state:
                del OPENED[self.key]
        self.state = None  # the state refers to this hook: no cycle once it has run
        if self.then is not None:
            self.then()


def open_once(registry: Any, key: Any, what: str, open_: Callable[[], Any]) -> tuple[Any, bool]:
    """``registry[key]`` if it is open, else ``open_()``, registered: (object, fresh).

    The caller holds :data:`LOCK`. A new opening waits for the release of the last one
    (:func:`before_open`) and is tracked until its own release (:func:`opened`).
    """
    obj = registry.get(key)
    if obj is not None and not obj.closed:
        return obj, False
    before_open(key, what)
    obj = open_()
    registry[key] = obj
    opened(key, obj)
    return obj, True


def before_open(key: Any, what: str) -> None:
    """Let the release of the last opening of ``key`` run before it is opened again.

    An object opened from a message and then closed or dropped has its release queued
    (see ``_handle``); it runs here first. Raises ``RuntimeError`` when it cannot run
    yet: something still uses the old opening (a graph or a launch leases it), or a
    capture forbids releases now.
    """
    state = OPENED.get(key)
    if state is None:
        return
    if state.handle is not None:
        _handle.drain()
    if state.handle is None:
        # Claimed: released, or being released by the releasing thread (the handle is
        # claimed before the driver call): wait for that thread's pass.
        _handle.settle()
        with _opened_lock:
            if OPENED.get(key) is state:
                del OPENED[key]
        return
    if _handle.held(state):
        why = "something still uses it (a graph, a launch or an allocation made from it)"
    else:
        why = "a stream capture is open, and releases wait for it to end"
    raise RuntimeError(
        f"cannot open the {what} this message names: this process opened it before, "
        f"closed or dropped it, and that opening is not released yet: {why}. Keep the "
        "first object open instead of receiving it again."
    )


def register(cls: type, reducer: Callable[[Any], tuple[Any, ...]]) -> None:
    """Let ``multiprocessing`` pickle instances of exactly ``cls`` with ``reducer``."""
    _reduction.ForkingPickler.register(cls, reducer)


def send_fd(fd: int) -> Any:
    """A picklable stand-in for ``fd`` that gives the receiver its own descriptor.

    Takes ownership of ``fd``. While a process is being spawned (``Process``
    arguments) the descriptor is handed to the child at its start and closed here once
    the ``Process`` is gone; otherwise (a ``Queue``, a ``Pipe``) the sender keeps a
    duplicate that the receiver fetches over a Unix socket (``multiprocessing``'s
    resource sharer), and ``fd`` is closed at once.
    """
    popen = _mp_context.get_spawning_popen()
    if popen is not None:
        wrapped = _reduction.DupFd(fd)
        _mp_util.Finalize(popen, os.close, args=(fd,))
        return wrapped
    try:
        return _reduction.DupFd(fd)
    finally:
        os.close(fd)


def receive_fd(wrapped: Any) -> int:
    """The descriptor :func:`send_fd` sent: this process's own, to close when done."""
    fd = wrapped.detach()
    if isinstance(fd, bool) or not isinstance(fd, int):
        raise TypeError(f"expected a file descriptor from the sender, got {type(fd).__name__}")
    return fd


def refuse(obj: Any) -> None:
    """Raise ``TypeError`` if ``obj`` cannot travel (a reducer's first step)."""
    if obj._travel_refusal() is not None:
        raise TypeError(obj._pickle_refusal())


def token(obj: Any) -> str:
    """A random token naming ``obj`` (a pool) across processes, made on first use."""
    t: str | None = getattr(obj, "_token", None)
    if t is None:
        t = secrets.token_hex(8)
        obj._token = t
    return t


def device_uuid(device: Device) -> bytes:
    """What names ``device`` in another process: its UUID (ordinals may differ there)."""
    return device.uuid.bytes


def device_of_uuid(uuid: bytes) -> Device:
    """The device of this process whose UUID is ``uuid`` (:meth:`Device.from_uuid`)."""
    return Device.from_uuid(uuid)
