"""The owning-handle base shared by every handle class, and when releases may run.

An owning object keeps its driver handle in ``_h`` and a small slotted :class:`_State`
that is released exactly once: on ``close()``, at the end of a ``with`` block, or
when the object is collected (through :class:`weakref.finalize`, or with the compiled
core through its root type's deallocator).

When a release runs
-------------------
* **Leases.** Objects that can still touch a handle after its owner is closed (a
  ``LaunchPlan``'s packed arguments, a ``MemOp``, a capture's keep list and so every
  ``Graph``/``GraphExec`` made from it) hold a :class:`Lease`. While a lease is alive,
  ``close()`` only makes the object unusable; the release runs when the last lease goes.
* **Pins.** A call that hands a handle to the driver without the GIL (a launch, a
  record, a wait) pins the handle's state for the call: a ``close()`` on another thread
  meanwhile only marks it closing, and the release runs when the last pin goes. The
  driver never sees a handle destroyed while another thread is inside a call on it.
* **Deferred.** A release triggered by garbage collection may run anywhere: inside a
  cudriver lock, on the driver's host-function thread, during a capture. So it is
  never run there: it goes to a queue. So do explicit releases on the host-function
  thread, on a thread capturing through cudriver (in a mode other than ``RELAXED``),
  and while a ``GLOBAL``-mode capture is open anywhere. :func:`drain` runs the
  queue on an ordinary thread: constructors, ``synchronize()``, ``close()`` and capture
  ends call it, and so does the releasing thread (a daemon thread, woken by
  :func:`wake` whenever a release is queued), so what a collected object kept goes
  without waiting for a later cudriver call, and a release that waits for the device
  never holds up the thread that dropped the object. At interpreter exit the queue is
  left to the driver, which reclaims everything when the process ends: a synchronous
  free waits for the device, and a device still waiting (say in ``wait_value32`` for
  a value no one will write) would hang the exit.
* **Never** in a forked child (the creating pid is recorded) or during interpreter
  shutdown. A failing release becomes a :class:`~cudriver.CudaWarning`.

Objects the state keeps alive (``keep``) are dropped only after the handle is
released, so dependants are always destroyed before what they depend on (a Stream
before its Context, a GraphExec before its Graph).
"""

from __future__ import annotations

import atexit
import collections
import os
import sys
import threading
import warnings
import weakref
from collections.abc import Callable
from typing import Any, ClassVar, NoReturn

from cuda.bindings import driver as _drv
from typing_extensions import Self

from .._core import HandleRoot, State, drop_deps, held, link, release, release_state, unlink
from ..errors import GUARD, ClosedError, CudaWarning, capturing_on_this_thread, pickle_refusal

__all__ = [
    "Handle",
    "Lease",
    "release_state",
    "drain",
    "deferred",
    "pending_releases",
    "unpinned",
    "release_with",
    "wake",
    "settle",
    "start_releasing_thread",
    "releasing",
]

Release = Callable[[Any], Any]


#: The release state of a handle (C fields; see ``_core.State``).
_State = State
__all__ += ["held", "link", "unlink"]


#: States whose release was deferred; see the module docstring.
deferred: collections.deque[_State] = collections.deque()
# Taken only to claim a state's handle (check and clear): never around a driver call,
# and never by code that garbage collection can run.
_claim_lock = threading.Lock()


def _may_release_now() -> bool:
    g = GUARD
    if g.captures or (g.armed and g.in_host_function()):
        return False
    return not (g.restrictive and capturing_on_this_thread())


def _waits(release: Any) -> bool:
    # Releases that may wait for the device or enqueue on a stream: never beside a capture.
    return bool(getattr(release, "waits_for_device", False))


def _collected(state: _State) -> None:
    release_state(state, collected=True)


def drain() -> None:
    """Run the deferred releases, if it is safe here; never raises.

    Where it is not (a capture forbids it on this thread), the releasing thread is
    woken instead.
    """
    if not deferred:
        return
    if not _may_release_now():
        wake()
        return
    later: list[_State] = []
    while not _exiting:
        try:
            state = deferred.popleft()
        except IndexError:
            break
        if held(state):  # held again
            continue
        if GUARD.open and _waits(state.release):
            # A device-wide wait would break the capture another thread has open:
            # left to the releasing thread, which runs it once the captures end.
            later.append(state)
            continue
        release(state)
    if later:
        deferred.extend(later)
        wake()


def pending_releases() -> int:
    """How many releases wait in the queue (for leak tests)."""
    return len(deferred)


def release_with(state: _State, release: Release) -> Any:
    """Release ``state``'s handle once with ``release`` instead of its own, now.

    Leases are not waited for: for a release that the caller knows is ordered after
    every use (a free captured into the graph that holds the leases). Returns what
    ``release`` returned, or None when the handle was already released.
    """
    with _claim_lock:
        handle = state.handle
        if handle is None:
            return None
        state.closing = True
        state.handle = None
        state.release = None
        state.on_release = None
    try:
        return release(handle)
    finally:
        drop_deps(state)


def _queue_if_free(state: _State) -> None:
    """Queue ``state`` if it was closed and nothing holds it any more."""
    if state.closing and state.handle is not None and not held(state):
        deferred.append(state)
        wake()


def unpinned(state: _State) -> None:
    """Called when the last pin of a closing state went: release it now if it is safe."""
    _queue_if_free(state)
    drain()


# -- the releasing thread ----------------------------------------------------------------
# A daemon thread that runs the queue soon after a release is queued. It is woken by
# releasing ``_wake``, a plain lock held while it sleeps: releasing one takes no other
# lock, so garbage collection may wake it from anywhere. It is started by the first
# handle made (never in a forked child, which frees nothing); at exit it stops.
_wake = threading.Lock()
_wake.acquire()
_reaping = threading.Lock()  # held by the thread while it drains
_reaper_started = False
_reaper_start_lock = threading.Lock()
_exiting = False
_reaper_ident = 0
_RELAXED = _drv.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_RELAXED
_NOT_READY = _drv.CUresult.CUDA_ERROR_NOT_READY


def start_releasing_thread() -> None:
    """Start the releasing thread, once per process."""
    global _reaper_started
    with _reaper_start_lock:
        if _reaper_started:
            return
        threading.Thread(target=_reap, name="cudriver-releases", daemon=True).start()
        _reaper_started = True


def wake() -> None:
    """Have the releasing thread run the queue; never blocks, never raises."""
    try:
        _wake.release()
    except RuntimeError:  # already awake: it drains again before sleeping
        pass


def settle() -> None:
    """Run the queue here if allowed, then wait for the releasing thread's pass.

    What ``synchronize()`` calls: once it returns, every release queued before it has
    run (or waits for what forbids it here, such as a capture). Waiting is no worse
    than running those releases on this thread, which is what would happen otherwise.
    """
    drain()
    if _reaping.locked() and threading.get_ident() != _reaper_ident:
        with _reaping:
            pass


def releasing() -> bool:
    """Whether the releasing thread is running releases now."""
    return _reaping.locked()


def _reap() -> None:
    global _reaper_ident
    _reaper_ident = threading.get_ident()
    # RELAXED: a capture in GLOBAL mode that another thread begins while this thread
    # is about to release does not make the release's call (cuMemFree, say) fail and
    # invalidate that capture. No release here touches the legacy stream.
    try:
        _drv.cuThreadExchangeStreamCaptureMode(_RELAXED)
    except Exception:  # the driver went away: the releases warn instead
        pass
    while True:
        _wake.acquire()
        if _exiting:
            return
        if GUARD.open:
            # No release runs beside an open capture (a synchronous free would
            # wait for, or break, it): the capture's end runs the queue (or wakes
            # this thread again).
            continue
        with _reaping:
            drain()


def _at_exit() -> None:
    global _exiting
    _exiting = True


def _in_forked_child() -> None:
    global _reaper_started
    _reaper_started = True  # a child frees nothing: it never needs the thread


atexit.register(_at_exit)
os.register_at_fork(after_in_child=_in_forked_child)


class Lease:
    """Keeps a handle's release waiting while something can still use the handle.

    Made by :meth:`Handle._lease`. When the last lease of a closed (or collected)
    handle goes, its release is queued and runs at the next :func:`drain`.
    """

    __slots__ = ("__weakref__", "_state", "target")

    def __init__(self, state: _State, target: Any) -> None:
        self._state = state
        self.target = target  # the leased object, for diagnostics and fences
        state.leases.add(id(self))

    def __del__(self) -> None:
        st = self._state
        st.leases.discard(id(self))
        try:
            _queue_if_free(st)
        except TypeError:  # at interpreter exit, once this module's globals are gone
            pass


def _warn(msg: str) -> None:
    try:
        warnings.warn(msg, CudaWarning, stacklevel=3)
    except Exception:  # warnings turned into errors must not escape a finaliser
        try:
            sys.stderr.write(f"cudriver: {msg}\n")
        except Exception:  # pragma: no cover - stderr gone at shutdown
            pass


class Handle(HandleRoot):
    """Base class of every object that wraps a driver handle.

    Subclasses call :meth:`_init_handle` from their constructors and keep the raw
    handle in ``_h`` (``None`` once closed), so a hot method tests ``self._h`` and
    raises :class:`~cudriver.ClosedError` before any driver call.

    ``_h``, ``_key``, ``_state``, ``_owned``, ``_owner``, ``_finalizer`` and the weak
    reference slot are C fields of the compiled root type (``_core.HandleRoot``). An
    object collected while open queues its release from that type's deallocator, so
    no ``weakref.finalize`` is made per object (``_finalizer`` is None, except for
    the few classes that arm one themselves).
    """

    __slots__ = ()  # the fields are HandleRoot's C fields

    _kind: ClassVar[str] = "Handle"

    _h: Any
    _key: int
    _owned: bool
    _owner: Any
    _state: _State
    _finalizer: weakref.finalize[Any, Any] | None

    def _init_handle(
        self,
        handle: Any,
        *,
        release: Release | None,
        func: str,
        owned: bool = True,
        owner: Any = None,
        keep: tuple[Any, ...] = (),
        on_release: Callable[[], None] | None = None,
        used_on: set[int] | None = None,
    ) -> None:
        self._h = handle
        self._key = int(handle)
        self._owned = owned
        self._owner = owner
        if not _reaper_started:
            start_releasing_thread()
        if deferred:
            drain()
        state = _State(handle, release if owned else None, func, self._kind, keep, on_release)
        if used_on is not None:
            state.used_on = used_on
        self._state = state
        self._finalizer = None  # the root type's deallocator queues the release

    # -- life cycle ---------------------------------------------------------------
    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called (or the object was never opened)."""
        return getattr(self, "_h", None) is None

    @property
    def owned(self) -> bool:
        """Whether this object frees its handle (False for ``from_handle`` objects)."""
        return self._owned

    def close(self) -> None:
        """Release the handle now (for owned objects); idempotent.

        Borrowed objects only forget the handle. A failing release is reported as a
        :class:`~cudriver.CudaWarning`.
        """
        if getattr(self, "_h", None) is None:
            return
        self._h = None
        fin = self._finalizer
        if fin is not None:
            fin.detach()
        release_state(self._state)
        if deferred:
            drain()

    def _pin_target(self) -> Handle:
        """What a driver call on this object pins: itself (a kernel: its module)."""
        return self

    def _lease(self) -> Lease:
        """A lease that keeps this handle's release waiting while it lives."""
        if self._h is None:
            self._raise_closed()
        return Lease(self._state, self)

    def __enter__(self) -> Self:
        self._closed_check()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _closed_check(self) -> Any:
        h = getattr(self, "_h", None)
        if h is None:
            self._raise_closed()
        return h

    def _raise_closed(self) -> NoReturn:
        raise ClosedError(f"{self._kind} is closed")

    @property
    def handle(self) -> Any:
        """The raw ``cuda.bindings.driver`` handle, for raw calls."""
        h = self._h
        if h is None:
            self._raise_closed()
        return h

    def __int__(self) -> int:
        if self._h is None:
            self._raise_closed()
        return self._key

    # -- identity -----------------------------------------------------------------
    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Handle):
            return NotImplemented
        return type(self) is type(other) and self._key == other._key

    def __hash__(self) -> int:
        return hash((type(self).__name__, self._key))

    def _repr_extra(self) -> str:
        return ""

    def __repr__(self) -> str:
        name = f"cudriver.{type(self).__name__}"
        if getattr(self, "_h", None) is None:
            return f"<{name} closed>"
        extra = self._repr_extra()
        own = "owned" if self._owned else "borrowed"
        return f"<{name} {self._key:#x}{' ' + extra if extra else ''} {own}>"

    def __reduce__(self) -> NoReturn:
        raise TypeError(self._pickle_refusal())

    def _travel_refusal(self) -> str | None:
        """Why this object cannot travel to another process; None if it can (see _share)."""
        return "it owns a driver handle of this process"

    def _pickle_refusal(self) -> str:
        """What ``pickle.dumps`` says (and ``multiprocessing``, for what cannot travel)."""
        return pickle_refusal(self._kind, self._travel_refusal())
