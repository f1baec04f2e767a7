"""Stream capture: the capture session, its keep list, and what invalidated it.

A capture begun through cudriver (:meth:`cudriver.Stream.begin_capture` or
``with stream.capture()``) gets a :class:`CaptureSession`, registered in
:data:`ACTIVE` under the capture id the driver reports. While it is active:

* objects that captured work refers to (buffers passed to kernels, host callables,
  host memory of copies) are appended to the session's keep list by :func:`keep`,
  found by the capture id of the stream the work is enqueued on, which also covers
  streams forked into the capture. When the capture ends the list moves into the
  :class:`~cudriver.Graph`, and every :class:`~cudriver.GraphExec` made from it holds it;
* the first cudriver call on the capturing thread that fails with a capture error is
  recorded in the session (:attr:`CaptureSession.violation`), so that ending an
  invalidated capture can say which call invalidated it. Calls on other threads are
  never blamed.

When no capture is active in the process, :func:`keep` costs one dict test.

Stream-less operations while captures are open
----------------------------------------------
cudriver's buffer operations made without ``stream=`` (copies and fills of buffers
that have no stream of their own) run on the legacy default stream and are waited
for, so they are ordered after the work of every blocking stream. While a blocking
stream captures, though, any legacy-stream operation fails with
``CUDA_ERROR_STREAM_CAPTURE_IMPLICIT`` and can invalidate that capture, whichever
thread makes it. So :func:`run_stream_less` decides, under :data:`BEGIN_LOCK` (which
:func:`begin` holds around ``cuStreamBeginCapture``): with no capture begun through
cudriver open, the operation runs on the legacy stream as always; with one open, it
runs on a private non-blocking stream of its context (the *stand-in*), made to wait
first for the work enqueued so far on every blocking cudriver stream of that context
that is not capturing (:data:`BLOCKING`). Either way it has completed when the call
returns.
"""

from __future__ import annotations

import functools
import threading
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

from cuda.bindings import driver as _drv

from .._runtime import _bindings, _gates, _hooks
from .._runtime._bindings import SUCCESS
from .._runtime._enums import CaptureMode, CaptureStatus
from ..errors import GUARD, StreamCaptureError, error_for, watch_capture_violations
from ._coerce import MapsMemory
from ._handle import Handle, drain_quick, release_with
from ._pins import unpin
from ._release import WAITER_LOCK, wake

__all__ = [
    "CaptureMode",
    "CaptureStatus",
    "CaptureSession",
    "ACTIVE",
    "ORPHANED",
    "is_open",
    "capture_id",
    "keep",
    "hold",
    "begin",
    "end",
    "abort",
    "end_on",
    "abort_on",
    "info",
    "destroy_stream",
    "allocated",
    "free_in_capture",
    "BEGIN_LOCK",
    "BLOCKING",
    "run_stream_less",
    "relaxed",
]

_ACTIVE_STATUS = _drv.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_ACTIVE
_NOT_CAPTURING = _drv.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE
_R = _drv.CUresult
_STREAM_NON_BLOCKING = int(_drv.CUstream_flags.CU_STREAM_NON_BLOCKING)
_EVENT_NO_TIMING = int(_drv.CUevent_flags.CU_EVENT_DISABLE_TIMING)
_RELAXED = _drv.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_RELAXED
#: ``CU_STREAM_LEGACY``, independent of the per-thread-stream build.
LEGACY = _drv.CUstream(1)
_T = TypeVar("_T")


def relaxed(fn: Callable[[], _T]) -> _T:
    """``fn()``, with the calling thread in ``RELAXED`` capture mode while a capture is open.

    For calls that are safe beside a capture but that the driver refuses, breaking the
    capture, on a thread whose mode is ``GLOBAL`` or ``THREAD_LOCAL`` while one is open:
    queries of events and streams that are not being captured (measured: an
    ``await`` resolved on a thread capturing in those modes invalidated its capture).
    ``cuThreadExchangeStreamCaptureMode`` there and back; with no capture begun through
    cudriver open, just ``fn()``.
    """
    if not GUARD.open:
        return fn()
    r = _drv.cuThreadExchangeStreamCaptureMode(_RELAXED)
    try:
        return fn()
    finally:
        if r[0] is SUCCESS:
            _drv.cuThreadExchangeStreamCaptureMode(r[1])


class CaptureSession:
    """The bookkeeping of one capture begun through cudriver.

    Attributes
    ----------
    id : int
        The driver's capture id.
    keep : list
        Objects the captured work refers to, and leases on the handles among them;
        they move into the Graph.
    violation : str or None
        The first cudriver call on the capturing thread that failed with a capture
        error, e.g. ``"cuStreamSynchronize (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED)"``.
    closed : bool
        Whether the session was ended (or abandoned).
    thread : int
        The ident of the thread that began it: in modes other than ``RELAXED`` only
        that thread may end it.
    into : Graph or None
        The existing graph it captures into (``cuStreamBeginCaptureToGraph``), which
        ending or aborting the capture never destroys; the keep list goes into it
        when the session closes, however it closes.
    marks : tuple or None
        While NVTX marks are on (``_runtime._hooks``): the thread that began the
        capture and the token of the range opened there, closed when the session closes
        on that thread (NVTX ranges are per thread).
    """

    __slots__ = (
        "__weakref__",
        "_on_owner_gone",
        "_watchers",
        "allocations",
        "closed",
        "id",
        "into",
        "keep",
        "marks",
        "mode",
        "restrictive",
        "thread",
        "violation",
    )

    def __init__(self, cid: int, mode: CaptureMode) -> None:
        self.id = cid
        self.mode = mode
        self.thread = threading.get_ident()
        # Addresses of stream-ordered buffers allocated in this capture (alloc nodes).
        self.allocations: set[int] = set()
        self.restrictive = mode is not CaptureMode.RELAXED
        self.keep: list[Any] = []
        self.violation: str | None = None
        self.closed = False
        self.into: Any = None
        self.marks: tuple[int, Any] | None = None
        self._on_owner_gone: weakref.finalize[Any, Any] | None = None
        self._watchers = watch_capture_violations(self)
        GUARD.open.add(id(self))
        if mode is CaptureMode.GLOBAL:
            GUARD.captures.add(id(self))
        if self.restrictive:
            GUARD.restrictive.add(id(self))

    def close_with(self, owner: object) -> None:
        """Close the session (without running releases) if ``owner`` is collected first."""
        fin = weakref.finalize(owner, _abandon, weakref.ref(self))
        fin.atexit = False
        self._on_owner_gone = fin

    def close(self, drain_releases: bool = True) -> list[Any]:
        """Unregister the session and return its keep list; idempotent.

        Takes no lock, so garbage collection may call it (with ``drain_releases``
        False); otherwise it also runs the releases that waited for the capture to end.
        """
        if not self.closed:
            self.closed = True
            fin, self._on_owner_gone = self._on_owner_gone, None
            if fin is not None:
                fin.detach()
            try:
                self._watchers.remove(self)
            except ValueError:
                pass
            if ACTIVE.get(self.id) is self:
                ACTIVE.pop(self.id, None)
            GUARD.captures.discard(id(self))
            GUARD.restrictive.discard(id(self))
            GUARD.open.discard(id(self))
            self.allocations = set()
            if self.into is not None:
                self.into._adopt(self.keep)
                self.keep = []
            marks, self.marks = self.marks, None
            if marks is not None and marks[0] == threading.get_ident():
                _hooks.pop(marks[1])
        if drain_releases:  # what the capture held back (those that wait: by the reaper)
            drain_quick()
        return self.keep

    def add(self, objs: tuple[Any, ...]) -> None:
        """Keep ``objs`` (and a lease on each handle among them, or in a tuple of them)."""
        hold(self.keep, objs)


def hold(keep: list[Any], objs: tuple[Any, ...]) -> None:
    """Append ``objs`` to ``keep``, with a lease on each open handle among them.

    A tuple among ``objs`` (kernel arguments) is kept with a lease on each handle in it,
    and on the memory a :class:`~cudriver.TensorMap` among them maps (so a graph's
    launches order that memory's stream-ordered free after them, as for a buffer).
    The one rule for what a graph keeps, captured or built node by node.
    """
    for o in objs:
        keep.append(o)
        if isinstance(o, Handle):
            if o._h is not None:
                keep.append(o._lease())
        elif type(o) is tuple:
            for a in o:
                if isinstance(a, MapsMemory):
                    a = a._mapped()
                if isinstance(a, Handle) and a._h is not None:
                    keep.append(a._lease())


def allocated(stream_h: Any, address: int) -> None:
    """Note a stream-ordered allocation made on ``stream_h`` while it captures."""
    cid = capture_id(stream_h)
    session = ACTIVE.get(cid) if cid is not None else None
    if session is not None:
        session.allocations.add(address)


def free_in_capture(buf: Any, stream_h: Any, context: Any) -> bool:
    """Free ``buf`` in the capture that allocated it, if ``stream_h`` still captures it.

    Captures ``cuMemFreeAsync`` on ``stream_h`` (a free node) and marks ``buf`` closed;
    its leases (held by this capture's keep list) are bypassed, since the memory only
    exists while the graph runs. Returns False, doing nothing, when the buffer was not
    allocated in the capture ``stream_h`` is part of, or a call on it is in flight.
    """
    cid = capture_id(stream_h)
    session = ACTIVE.get(cid) if cid is not None else None
    key = buf._key
    if session is None or key not in session.allocations:
        return False
    state = buf._state
    if state.pins or state.busy:
        return False
    buf._h = None
    fin = buf._finalizer
    if fin is not None:
        fin.detach()
    session.allocations.discard(key)
    with context._scope():
        r = release_with(state, functools.partial(_free_captured, stream_h))
    if r is not None and r[0] is not SUCCESS:
        raise error_for(r[0], _drv.cuMemFreeAsync)
    return True


def _free_captured(stream_h: Any, dptr: Any) -> Any:
    return _drv.cuMemFreeAsync(dptr, stream_h)


def _abandon(ref: weakref.ref[CaptureSession]) -> None:
    session = ref()
    if session is not None:
        session.close(drain_releases=False)


#: capture id -> session, for captures begun through cudriver and not yet ended.
ACTIVE: dict[int, CaptureSession] = {}
#: Keep lists of captures ended behind cudriver's back (a raw ``cuStreamEndCapture``):
#: the graph they went into is unknown to us, so what they keep lives until exit.
ORPHANED: list[list[Any]] = []


def info(stream_h: Any) -> _bindings.CaptureInfo:
    """``cuStreamGetCaptureInfo`` of ``stream_h``, normalised; raises on failure."""
    status, ci = _bindings.capture_info(stream_h)
    if ci is None:
        raise error_for(status, _drv.cuStreamGetCaptureInfo)
    return ci


def capture_id(stream_h: Any) -> int | None:
    """The id of the active capture ``stream_h`` is part of, or None."""
    _status, ci = _bindings.capture_info(stream_h)
    if ci is None or ci.status != _ACTIVE_STATUS:
        return None
    return ci.id


def keep(stream_h: Any, *objs: Any) -> None:
    """Keep ``objs`` alive with the graph being captured on ``stream_h``, if any."""
    if not ACTIVE:
        return
    cid = capture_id(stream_h)
    if cid is None:
        return
    session = ACTIVE.get(cid)
    if session is not None:
        session.add(objs)


def begin(
    stream_h: Any,
    mode: CaptureMode | int | None,
    *,
    legacy: bool = False,
    previous: CaptureSession | None = None,
    into: Any = None,
) -> CaptureSession:
    """Begin capturing on ``stream_h`` (``cuStreamBeginCapture``) and register a session.

    ``legacy`` says the stream is the legacy default stream (refused); ``previous`` is
    the stream's last session (refused while still open); ``into``, a
    :class:`~cudriver.Graph` to capture into (``cuStreamBeginCaptureToGraph``) instead
    of a new graph: what the capture keeps goes into it (``Graph._adopt``).
    """
    if legacy:
        raise StreamCaptureError(
            _R.CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
            "cuStreamBeginCapture",
            "the legacy default stream cannot be captured: capture on a cudriver.Stream()",
        )
    if mode is None:
        m = CaptureMode.THREAD_LOCAL
    elif isinstance(mode, bool) or not isinstance(mode, int):
        raise TypeError(f"mode must be a cudriver.CaptureMode, not {type(mode).__name__}")
    else:
        m = CaptureMode(mode)
    if previous is not None and is_open(stream_h, previous):
        raise StreamCaptureError(
            _R.CUDA_ERROR_ILLEGAL_STATE, "cuStreamBeginCapture", "this stream is already capturing"
        )
    if GUARD.armed:
        GUARD.check()
    cmode = _drv.CUstreamCaptureMode(int(m))
    # Open before it begins, then past WAITER_LOCK: a release that waits for the device
    # (cuMemFree, cuMemFreeHost) and is already running ends first, and none starts
    # until the capture has ended (a device-wide wait in flight on another thread
    # invalidated a capture of a blocking stream begun meanwhile).
    pending = object()
    GUARD.open.add(id(pending))
    try:
        with WAITER_LOCK:
            pass
        session = _begin(stream_h, m, cmode, into)
        if _hooks.MARKS:
            session.marks = (session.thread, _hooks.push("Stream.capture"))
        return session
    finally:
        GUARD.open.discard(id(pending))
        if not GUARD.open:
            wake()  # what a failed begin held back


def _begin(stream_h: Any, m: CaptureMode, cmode: Any, into: Any) -> CaptureSession:
    # Under BEGIN_LOCK until the session is registered: a stream-less operation either
    # ran on the legacy stream before the capture began, or sees it (run_stream_less).
    with BEGIN_LOCK:
        if into is None:
            r = _drv.cuStreamBeginCapture(stream_h, cmode)
            if r[0] is not SUCCESS:
                raise error_for(r[0], _drv.cuStreamBeginCapture)
        else:
            r = _bindings.begin_capture_to_graph(stream_h, into.handle, cmode)
            if r[0] is not SUCCESS:
                raise error_for(r[0], _drv.cuStreamBeginCaptureToGraph)
        cid = capture_id(stream_h)
        if cid is None:  # pragma: no cover - the driver just began it
            raise StreamCaptureError(
                _R.CUDA_ERROR_ILLEGAL_STATE, "cuStreamGetCaptureInfo", "no capture"
            )
        session = CaptureSession(cid, m)
        session.into = into
        ACTIVE[cid] = session
    return session


def is_open(stream_h: Any, session: CaptureSession) -> bool:
    """Whether ``session`` is still the capture running on ``stream_h``.

    A session whose capture was ended behind cudriver's back (a raw
    ``cuStreamEndCapture``) is closed here, its keep list moved to :data:`ORPHANED`.
    """
    if session.closed:
        return False
    if capture_id(stream_h) == session.id:
        return True
    ORPHANED.append(session.close())
    return False


def _end_raw(stream_h: Any, session: CaptureSession | None) -> tuple[Any, Any, list[Any]]:
    if GUARD.armed:
        GUARD.check()
    r = _drv.cuStreamEndCapture(stream_h)
    status = r[0]
    g = r[1] if len(r) > 1 else None
    if status is not SUCCESS and g is not None and int(g) != 0:
        if session is None or session.into is None:
            _drv.cuGraphDestroy(g)
        g = None
    kept: list[Any] = []
    # A refused end (e.g. from another thread than the one that began a thread-local
    # capture) leaves the capture running: then its bookkeeping stays.
    if session is not None and (status is SUCCESS or capture_id(stream_h) != session.id):
        kept = session.close()
    return status, g, kept


def end(stream_h: Any, session: CaptureSession | None) -> tuple[Any, list[Any]]:
    """End the capture on ``stream_h`` (``cuStreamEndCapture``).

    Returns ``(CUgraph, keep list)``. On failure the partial graph is destroyed and a
    :class:`~cudriver.StreamCaptureError` says why (and, for an invalidated capture,
    which call invalidated it, when it went through cudriver on the capturing thread).
    """
    violation = session.violation if session is not None else None
    status, g, kept = _end_raw(stream_h, session)
    if status is not SUCCESS:
        raise error_for(status, _drv.cuStreamEndCapture, _detail(int(status), violation))
    return g, kept


def abort(stream_h: Any, session: CaptureSession | None) -> None:
    """End a capture after an error, dropping the graph and any error it gives.

    A graph captured into (``into``) is kept, with what was captured into it so far.
    """
    into = session is not None and session.into is not None
    status, g, _kept = _end_raw(stream_h, session)
    if status is SUCCESS and g is not None and int(g) != 0 and not into:
        _drv.cuGraphDestroy(g)


def end_on(stream: Any) -> tuple[Any, list[Any]]:
    """:func:`end` the capture of cudriver ``stream`` and clear its session.

    A refused end (the capture goes on) leaves the session on the stream.
    """
    h = stream._h
    if h is None:
        stream._raise_closed()
    session = stream._capture
    if (
        session is not None
        and not session.closed
        and session.mode is not CaptureMode.RELAXED
        and session.thread != threading.get_ident()
    ):
        # The driver refuses this end but breaks the capture doing so (measured with
        # CUDA 13.0: the right thread's end then failed with ILLEGAL_STATE): refuse it
        # here, so the capture and its keep list stay usable.
        raise StreamCaptureError(
            _R.CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD,
            "cuStreamEndCapture",
            f"the capture was begun on another thread in {session.mode.name} mode: end it "
            "on that thread (or capture in CaptureMode.RELAXED)",
        )
    stream._capture = None
    try:
        return end(h, session)
    finally:
        if session is not None and not session.closed:
            stream._capture = session


def abort_on(stream: Any) -> None:
    """:func:`abort` the capture of cudriver ``stream`` (or close its session if closed)."""
    session, stream._capture = stream._capture, None
    h = stream._h
    if h is not None:
        abort(h, session)
    elif session is not None:
        session.close()


def destroy_stream(h: Any) -> Any:
    """The release of an owned stream: end a capture left open on it, then destroy it.

    Returns ``cuStreamDestroy``'s status tuple; raises nothing of its own.
    """
    BLOCKING.pop(int(h), None)
    r = _drv.cuStreamIsCapturing(h)
    if r[0] is SUCCESS and r[1] != _NOT_CAPTURING:
        abort(h, None)
    if _gates.WAITING:
        _gates.retire(h)  # it may still wait for the host: noted by an event instead
    return _drv.cuStreamDestroy(h)


def _detail(code: int, violation: str | None) -> str | None:
    if code == int(_R.CUDA_ERROR_STREAM_CAPTURE_INVALIDATED):
        msg = (
            "the capture was invalidated by an operation that is not allowed while "
            "capturing (a synchronous call, a query, or legacy-stream work)"
        )
        return f"{msg}; first offending call: {violation}" if violation else msg
    if code == int(_R.CUDA_ERROR_STREAM_CAPTURE_UNJOINED):
        return (
            "work forked to another stream during the capture was not joined back: make "
            "the capturing stream wait on the forked stream before the capture ends"
        )
    if code == int(_R.CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD):
        return "the capture was begun on another thread"
    return None


# -- stream-less operations while captures are open ------------------------------------

#: Held around ``cuStreamBeginCapture`` and a capture's registration, and by
#: :func:`run_stream_less` while it chooses its stream and enqueues: never around a
#: wait for the device, and never by a release.
BEGIN_LOCK = threading.Lock()
#: stream key -> (context key, the stream's release state), for every open blocking
#: stream cudriver created: what stream-less operations are ordered after while a
#: capture is open. Entries go when the stream is destroyed (:func:`destroy_stream`).
BLOCKING: dict[int, tuple[int, Any]] = {}
# context key -> (stand-in stream, its ordering event, its done event): created on
# first use in that context, kept until exit (like cudriver's primary-context retain).
_STANDIN: dict[int, tuple[Any, Any, Any]] = {}


# context key -> the event recorded on the legacy stream after a stream-less operation,
# waited for outside BEGIN_LOCK (records on one stream complete in order, so a later
# record by another thread only makes a wait longer). Kept until exit.
_LEGACY_DONE: dict[int, Any] = {}


def _event() -> Any:
    e = _drv.cuEventCreate(_EVENT_NO_TIMING)
    if e[0] is not SUCCESS:
        raise error_for(e[0], _drv.cuEventCreate)
    return e[1]


def _standin(ctx_key: int) -> tuple[Any, Any, Any]:
    """The stand-in stream of the current context (``ctx_key``) and its two events."""
    found = _STANDIN.get(ctx_key)
    if found is not None:
        return found
    r = _drv.cuStreamCreate(_STREAM_NON_BLOCKING)
    if r[0] is not SUCCESS:
        raise error_for(r[0], _drv.cuStreamCreate)
    found = (r[1], _event(), _event())
    _STANDIN[ctx_key] = found
    return found


def _order_after_blocking(q: Any, order: Any, ctx_key: int, pinned: list[Any]) -> None:
    """Make ``q`` wait for the work so far on every non-capturing blocking stream.

    Runs under :data:`BEGIN_LOCK` (no capture can begin meanwhile); the states of the
    streams used are pinned and appended to ``pinned`` for the caller to unpin.
    """
    for ckey, st in list(BLOCKING.values()):
        if ckey != ctx_key:
            continue
        st.pins.append(None)
        pinned.append(st)
        sh = st.handle
        if sh is None:
            continue
        r = _drv.cuStreamIsCapturing(sh)
        if r[0] is not SUCCESS or r[1] != _NOT_CAPTURING:
            continue  # its captured work does not run now; pre-capture work: see docs
        r = _drv.cuEventRecord(order, sh)
        if r[0] is not SUCCESS:
            raise error_for(r[0], _drv.cuEventRecord)
        r = _drv.cuStreamWaitEvent(q, order, 0)
        if r[0] is not SUCCESS:
            raise error_for(r[0], _drv.cuStreamWaitEvent)


def run_stream_less(
    ctx_key: int | None,
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    before: Callable[[Any], None],
) -> None:
    """Run the stream-less operation ``fn(*args, queue)`` and wait for it.

    The context ``ctx_key`` (None: look it up) is current. ``before(queue)`` orders
    the queue after what the operands need (their streams) and runs first. See the
    module docstring for which queue is used.
    """
    pinned: list[Any] = []
    try:
        if ctx_key is None:
            c = _drv.cuCtxGetCurrent()
            if c[0] is not SUCCESS:
                raise error_for(c[0], _drv.cuCtxGetCurrent)
            ctx_key = int(c[1])
        with BEGIN_LOCK:
            if ACTIVE:
                q, order, done = _standin(ctx_key)
                _order_after_blocking(q, order, ctx_key, pinned)
            else:
                q = LEGACY
                done = _LEGACY_DONE.get(ctx_key)
                if done is None:
                    done = _LEGACY_DONE[ctx_key] = _event()
            before(q)
            r = fn(*args, q)
            if r[0] is not SUCCESS:
                raise error_for(r[0], fn)
            # The wait happens outside the lock, on an event: a thread beginning a
            # capture or making another stream-less operation meanwhile is not held
            # up, and an event recorded before a capture began stays waitable (a
            # legacy-stream synchronize would be refused once one has).
            r = _drv.cuEventRecord(done, q)
            if r[0] is not SUCCESS:
                raise error_for(r[0], _drv.cuEventRecord)
        # RELAXED while a capture is open: a thread that captures (THREAD_LOCAL, GLOBAL)
        # may wait for this work, which is not captured, without breaking its capture.
        r = relaxed(functools.partial(_drv.cuEventSynchronize, done))
        if r[0] is not SUCCESS:
            raise error_for(r[0], _drv.cuEventSynchronize)
    finally:
        for st in pinned:
            unpin(st)
