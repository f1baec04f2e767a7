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
"""

from __future__ import annotations

import weakref
from typing import Any

from cuda.bindings import driver as _drv

from . import _bindings
from ._bindings import SUCCESS
from ._enums import CaptureMode, CaptureStatus
from ._handle import Handle, drain
from .errors import GUARD, StreamCaptureError, error_for, watch_capture_violations

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
]

_cuStreamBeginCapture = _drv.cuStreamBeginCapture
_cuStreamEndCapture = _drv.cuStreamEndCapture
_cuGraphDestroy = _drv.cuGraphDestroy
_ACTIVE_STATUS = _drv.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_ACTIVE
_NOT_CAPTURING = _drv.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE
_R = _drv.CUresult


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
    into : Graph or None
        The existing graph it captures into (``cuStreamBeginCaptureToGraph``), which
        ending or aborting the capture never destroys; the keep list goes into it
        when the session closes, however it closes.
    """

    __slots__ = (
        "__weakref__",
        "_on_owner_gone",
        "_watchers",
        "closed",
        "id",
        "into",
        "keep",
        "mode",
        "restrictive",
        "violation",
    )

    def __init__(self, cid: int, mode: CaptureMode) -> None:
        self.id = cid
        self.mode = mode
        self.restrictive = mode is not CaptureMode.RELAXED
        self.keep: list[Any] = []
        self.violation: str | None = None
        self.closed = False
        self.into: Any = None
        self._on_owner_gone: weakref.finalize[Any, Any] | None = None
        self._watchers = watch_capture_violations(self)
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
            if self.into is not None:
                self.into._adopt(self.keep)
                self.keep = []
        if drain_releases:
            drain()
        return self.keep

    def add(self, objs: tuple[Any, ...]) -> None:
        """Keep ``objs`` (and a lease on each handle among them, or in a tuple of them)."""
        hold(self.keep, objs)


def hold(keep: list[Any], objs: tuple[Any, ...]) -> None:
    """Append ``objs`` to ``keep``, with a lease on each open handle among them.

    A tuple among ``objs`` (kernel arguments) is kept with a lease on each handle in it.
    The one rule for what a graph keeps, captured or built node by node.
    """
    for o in objs:
        keep.append(o)
        if isinstance(o, Handle):
            if o._h is not None:
                keep.append(o._lease())
        elif type(o) is tuple:
            keep.extend(a._lease() for a in o if isinstance(a, Handle) and a._h is not None)


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
    if into is None:
        r = _cuStreamBeginCapture(stream_h, cmode)
        if r[0] is not SUCCESS:
            raise error_for(r[0], _cuStreamBeginCapture)
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
    r = _cuStreamEndCapture(stream_h)
    status = r[0]
    g = r[1] if len(r) > 1 else None
    if status is not SUCCESS and g is not None and int(g) != 0:
        if session is None or session.into is None:
            _cuGraphDestroy(g)
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
        raise error_for(status, _cuStreamEndCapture, _detail(int(status), violation))
    return g, kept


def abort(stream_h: Any, session: CaptureSession | None) -> None:
    """End a capture after an error, dropping the graph and any error it gives.

    A graph captured into (``into``) is kept, with what was captured into it so far.
    """
    into = session is not None and session.into is not None
    status, g, _kept = _end_raw(stream_h, session)
    if status is SUCCESS and g is not None and int(g) != 0 and not into:
        _cuGraphDestroy(g)


def end_on(stream: Any) -> tuple[Any, list[Any]]:
    """:func:`end` the capture of cudriver ``stream`` and clear its session.

    A refused end (the capture goes on) leaves the session on the stream.
    """
    h = stream._h
    if h is None:
        stream._raise_closed()
    session, stream._capture = stream._capture, None
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
    r = _drv.cuStreamIsCapturing(h)
    if r[0] is SUCCESS and r[1] != _NOT_CAPTURING:
        abort(h, None)
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
