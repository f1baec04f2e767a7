"""CUDA streams: ordering, queries, foreign streams and graph capture."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from enum import IntEnum, IntFlag
from typing import TYPE_CHECKING, Any, Protocol, Union, runtime_checkable

from cuda.bindings import driver as _drv

from . import _bindings, _callbacks, _capture, errors
from ._bindings import SUCCESS
from ._callbacks import PENDING as _CALLBACK_PENDING
from ._callbacks import HostFuncMixin
from ._handle import Handle
from ._memops import MemOpsMixin
from .errors import StreamCaptureError, make_error

if TYPE_CHECKING:
    from .context import Context
    from .device import Device
    from .event import Event
    from .graph import CaptureMode, CaptureStatus, Graph

__all__ = [
    "Stream",
    "StreamLike",
    "SupportsCudaStream",
    "SyncPolicy",
    "AccessProperty",
    "AccessPolicyWindow",
    "MemAttach",
    "stream_handle",
]


@runtime_checkable
class SupportsCudaStream(Protocol):
    """An object exposing a CUDA stream through the ``__cuda_stream__`` protocol."""

    def __cuda_stream__(self) -> tuple[int, int]:
        """Return ``(version, stream handle as int)``."""
        ...


#: What stream arguments accept: a Stream, a ``__cuda_stream__`` object, a
#: ``CUstream``, an int handle, or None (the legacy default stream).
StreamLike = Union["Stream", SupportsCudaStream, Any, int, None]


class SyncPolicy(IntEnum):
    """How a thread waits on a stream (``CUsynchronizationPolicy``)."""

    AUTO = 1
    SPIN = 2
    YIELD = 3
    BLOCKING_SYNC = 4


class AccessProperty(IntEnum):
    """L2 access property for an access policy window (``CUaccessProperty``)."""

    NORMAL = 0
    STREAMING = 1
    PERSISTING = 2


class MemAttach(IntFlag):
    """Flags for :meth:`Stream.attach_mem_async` (``CUmemAttach_flags``)."""

    GLOBAL = 1
    HOST = 2
    SINGLE = 4


for _e in (SyncPolicy, AccessProperty, MemAttach):
    _e.__module__ = "cudriver"


@dataclass(frozen=True)
class AccessPolicyWindow:
    """An L2 persistence window for a stream (``CUaccessPolicyWindow``).

    ``num_bytes == 0`` means no window.
    """

    base_ptr: int
    num_bytes: int
    hit_ratio: float = 1.0
    hit_prop: AccessProperty = AccessProperty.PERSISTING
    miss_prop: AccessProperty = AccessProperty.STREAMING


AccessPolicyWindow.__module__ = "cudriver"

_NOT_READY = _drv.CUresult.CUDA_ERROR_NOT_READY
_cuStreamQuery = _drv.cuStreamQuery
_cuStreamSynchronize = _drv.cuStreamSynchronize
_cuStreamWaitEvent = _drv.cuStreamWaitEvent
_NULL_STREAM = _drv.CUstream(0)
_LEGACY = 0x1
_PER_THREAD = 0x2
_ATTR_ACCESS_POLICY = 1
_ATTR_SYNC_POLICY = 3
_NON_BLOCKING = int(_drv.CUstream_flags.CU_STREAM_NON_BLOCKING)


def _foreign_int(obj: Any) -> int | None:
    proto = getattr(obj, "__cuda_stream__", None)
    if proto is not None:
        v = proto() if callable(proto) else proto
        if not (isinstance(v, tuple) and len(v) == 2):
            raise TypeError(
                f"{type(obj).__name__}.__cuda_stream__ returned {v!r}, expected (version, handle)"
            )
        return int(v[1])
    cs = getattr(obj, "cuda_stream", None)  # torch.cuda.Stream
    if isinstance(cs, int):
        return cs
    return None


def stream_handle(stream: StreamLike) -> Any:
    """The raw ``CUstream`` for any stream-like argument.

    Accepts a :class:`Stream`, an object with ``__cuda_stream__`` (PyTorch, CuPy,
    cuda.core streams) or ``cuda_stream``, a ``CUstream``, an int, or None (the
    legacy default stream).
    """
    if stream is None:
        return _NULL_STREAM
    h = getattr(stream, "_h", None)
    if h is not None and isinstance(stream, Stream):
        return h
    if isinstance(stream, Stream):
        stream._raise_closed()
    if isinstance(stream, _drv.CUstream):
        return stream
    if isinstance(stream, int) and not isinstance(stream, bool):
        return _drv.CUstream(stream)
    v = _foreign_int(stream)
    if v is not None:
        return _drv.CUstream(v)
    raise TypeError(
        f"expected a stream (cudriver.Stream, an object with __cuda_stream__, a CUstream "
        f"or an int), not {type(stream).__name__}"
    )


class Stream(HostFuncMixin, MemOpsMixin, Handle):
    """A CUDA stream (``cuStreamCreateWithPriority``; ``cuStreamDestroy`` on close).

    Parameters
    ----------
    non_blocking
        Do not synchronise with the legacy default stream (``CU_STREAM_NON_BLOCKING``).
    priority
        Scheduling priority; lower numbers are higher priorities. Must lie within
        ``context.stream_priority_range``. None: the default priority.
    context
        The context to create the stream in. Default: the current context, else
        device 0's primary context (which is then made current).

    Notes
    -----
    A stream keeps its context alive. Streams made by :meth:`from_handle`,
    :meth:`legacy` and :meth:`per_thread` are borrowed and never destroyed by us.
    """

    __slots__ = ("_capture_id", "_context", "_special")

    _kind = "Stream"

    _context: Context | None
    _capture_id: int | None
    _special: str | None

    def __init__(
        self,
        *,
        non_blocking: bool = True,
        priority: int | None = None,
        context: Context | None = None,
    ) -> None:
        from .context import current_or_default

        ctx = context if context is not None else current_or_default()
        flags = _NON_BLOCKING if non_blocking else 0
        with ctx._scope():
            if priority is None:
                r = _drv.cuStreamCreate(flags)
            else:
                if isinstance(priority, bool) or not isinstance(priority, int):
                    raise TypeError(f"priority must be an int, not {type(priority).__name__}")
                least, greatest = ctx.stream_priority_range
                if not greatest <= priority <= least:
                    raise ValueError(
                        f"stream priority {priority} is outside this context's range "
                        f"[{greatest} (highest), {least} (lowest)]"
                    )
                r = _drv.cuStreamCreateWithPriority(flags, priority)
        if r[0] is not SUCCESS:
            raise make_error(r[0], "cuStreamCreate")
        self._setup(r[1], ctx, owned=True, owner=None, special=None)

    def _setup(
        self, h: Any, ctx: Context | None, *, owned: bool, owner: Any, special: str | None
    ) -> None:
        self._context = ctx
        self._capture_id = None
        self._special = special
        self._init_handle(
            h,
            release=_drv.cuStreamDestroy,
            func="cuStreamDestroy",
            owned=owned,
            owner=owner,
            keep=(ctx,) if ctx is not None else (),
            on_release=_callbacks.watch_stream(int(h)) if owned else None,
        )

    @classmethod
    def _borrow(cls, h: Any, owner: Any, special: str | None = None) -> Stream:
        self = object.__new__(cls)
        self._setup(h, None, owned=False, owner=owner, special=special)
        return self

    @classmethod
    def from_handle(cls, stream: StreamLike, owner: Any = None) -> Stream:
        """Wrap a foreign stream without owning it (never destroyed by us).

        Parameters
        ----------
        stream
            A ``CUstream``, an int, or any object with ``__cuda_stream__`` (PyTorch,
            CuPy and cuda.core streams) or a ``cuda_stream`` int attribute.
        owner
            Kept alive as long as the returned Stream; defaults to ``stream`` itself
            when it is a Python object owning the handle (e.g. a PyTorch stream).
        """
        if stream is None:
            raise TypeError("from_handle needs a stream handle, not None; see Stream.legacy()")
        h = stream_handle(stream)
        if owner is None and not isinstance(stream, (int, _drv.CUstream)):
            owner = stream
        special = {0: "legacy", _LEGACY: "legacy", _PER_THREAD: "per-thread"}.get(int(h))
        return cls._borrow(h, owner, special)

    @classmethod
    def legacy(cls) -> Stream:
        """The legacy default stream (``CU_STREAM_LEGACY``), borrowed.

        It synchronises with every blocking stream of its context and cannot be
        captured.
        """
        return cls._borrow(_drv.CUstream(_LEGACY), None, "legacy")

    @classmethod
    def per_thread(cls) -> Stream:
        """The calling thread's per-thread default stream (``CU_STREAM_PER_THREAD``)."""
        return cls._borrow(_drv.CUstream(_PER_THREAD), None, "per-thread")

    # -- basic operations -----------------------------------------------------------
    def synchronize(self) -> None:
        """Block until all work on the stream has completed (``cuStreamSynchronize``).

        Then raises :class:`~cudriver.HostCallbackError` if a host function that ran
        on this stream raised since the last synchronisation.
        """
        h = self._h
        if h is None:
            self._raise_closed()
        r = _cuStreamSynchronize(h)
        if r[0] is not SUCCESS:
            raise make_error(r[0], "cuStreamSynchronize")
        if _CALLBACK_PENDING:
            # re-raise errors of host functions that ran on this stream
            _callbacks.after_sync(self._key)

    def query(self) -> bool:
        """Whether all work on the stream has completed (``cuStreamQuery``); never blocks."""
        h = self._h
        if h is None:
            self._raise_closed()
        r = _cuStreamQuery(h)
        s = r[0]
        if s is SUCCESS:
            return True
        if s is _NOT_READY:
            return False
        raise make_error(s, "cuStreamQuery")

    def wait(self, other: Event | StreamLike) -> None:
        """Make later work on this stream wait for ``other`` (``cuStreamWaitEvent``).

        ``other`` is an :class:`~cudriver.Event` (waits for its last record) or a
        stream-like object (waits for the work enqueued on it so far, through a
        temporary event recorded there). Does not block the host.
        """
        from .event import Event

        h = self._h
        if h is None:
            self._raise_closed()
        if isinstance(other, Event):
            r = _cuStreamWaitEvent(h, other.handle, 0)
            if r[0] is not SUCCESS:
                raise make_error(r[0], "cuStreamWaitEvent")
            return
        oh = stream_handle(other)
        ev = Event(timing=False, context=self._ctx_or_none())
        r = _drv.cuEventRecord(ev.handle, oh)
        if r[0] is not SUCCESS:
            ev.close()
            raise make_error(r[0], "cuEventRecord")
        r = _cuStreamWaitEvent(h, ev.handle, 0)
        ev.close()  # the driver keeps the recorded state until the wait resolves
        if r[0] is not SUCCESS:
            raise make_error(r[0], "cuStreamWaitEvent")

    def record(self, event: Event | None = None) -> Event:
        """Record ``event`` (a new timing-less one when None) on this stream.

        Calls ``cuEventRecord``; returns the event. For :meth:`Event.elapsed_ms`,
        pass events created with ``Event(timing=True)``.
        """
        from .event import Event

        h = self._h
        if h is None:
            self._raise_closed()
        if event is None:
            event = Event(timing=False, context=self._ctx_or_none())
        elif not isinstance(event, Event):
            raise TypeError(f"record() takes a cudriver.Event, not {type(event).__name__}")
        r = _drv.cuEventRecord(event.handle, h)
        if r[0] is not SUCCESS:
            raise make_error(r[0], "cuEventRecord")
        return event

    def __cuda_stream__(self) -> tuple[int, int]:
        """The ``__cuda_stream__`` protocol: ``(0, handle as int)``."""
        if self._h is None:
            self._raise_closed()
        return (0, self._key)

    # -- properties --------------------------------------------------------------------
    def _ctx_or_none(self) -> Context | None:
        if self._context is not None:
            return self._context
        if self._special is not None:
            return None
        return self.context

    @property
    def context(self) -> Context:
        """The stream's context (``cuStreamGetCtx`` for foreign streams)."""
        if self._context is None:
            from .context import Context, current_or_default

            if self._special is not None:
                return current_or_default()
            r = _drv.cuStreamGetCtx(self.handle)
            if r[0] is not SUCCESS:
                raise make_error(r[0], "cuStreamGetCtx")
            self._context = Context.from_handle(r[1])
        return self._context

    @property
    def device(self) -> Device:
        """The device of the stream's context."""
        return self.context.device

    @property
    def priority(self) -> int:
        """The stream's priority (``cuStreamGetPriority``)."""
        r = _drv.cuStreamGetPriority(self.handle)
        if r[0] is not SUCCESS:
            raise make_error(r[0], "cuStreamGetPriority")
        return int(r[1])

    @property
    def non_blocking(self) -> bool:
        """Whether the stream does not synchronise with the legacy stream."""
        r = _drv.cuStreamGetFlags(self.handle)
        if r[0] is not SUCCESS:
            raise make_error(r[0], "cuStreamGetFlags")
        return bool(int(r[1]) & _NON_BLOCKING)

    @property
    def id(self) -> int:
        """The process-unique stream id (``cuStreamGetId``)."""
        r = _drv.cuStreamGetId(self.handle)
        if r[0] is not SUCCESS:
            raise make_error(r[0], "cuStreamGetId")
        return int(r[1])

    # -- attributes ---------------------------------------------------------------------
    def copy_attributes_from(self, other: StreamLike) -> None:
        """Copy ``other``'s attributes to this stream (``cuStreamCopyAttributes``)."""
        r = _drv.cuStreamCopyAttributes(self.handle, stream_handle(other))
        if r[0] is not SUCCESS:
            raise make_error(r[0], "cuStreamCopyAttributes")

    def _get_attr(self, attr: int) -> Any:
        r = _drv.cuStreamGetAttribute(self.handle, _drv.CUstreamAttrID(attr))
        if r[0] is not SUCCESS:
            raise make_error(r[0], "cuStreamGetAttribute")
        return r[1]

    def _set_attr(self, attr: int, value: Any) -> None:
        r = _drv.cuStreamSetAttribute(self.handle, _drv.CUstreamAttrID(attr), value)
        if r[0] is not SUCCESS:
            raise make_error(r[0], "cuStreamSetAttribute")

    @property
    def sync_policy(self) -> SyncPolicy:
        """How host threads wait on this stream (stream attribute)."""
        return SyncPolicy(int(self._get_attr(_ATTR_SYNC_POLICY).syncPolicy))

    @sync_policy.setter
    def sync_policy(self, policy: SyncPolicy) -> None:
        p = SyncPolicy(policy)
        v = _drv.CUstreamAttrValue()
        v.syncPolicy = _drv.CUsynchronizationPolicy(int(p))
        self._set_attr(_ATTR_SYNC_POLICY, v)

    @property
    def access_policy_window(self) -> AccessPolicyWindow:
        """The stream's L2 access policy window (stream attribute)."""
        w = self._get_attr(_ATTR_ACCESS_POLICY).accessPolicyWindow
        return AccessPolicyWindow(
            int(w.base_ptr),
            int(w.num_bytes),
            float(w.hitRatio),
            AccessProperty(int(w.hitProp)),
            AccessProperty(int(w.missProp)),
        )

    @access_policy_window.setter
    def access_policy_window(self, window: AccessPolicyWindow | None) -> None:
        if window is None:
            window = AccessPolicyWindow(0, 0, 0.0, AccessProperty.NORMAL, AccessProperty.NORMAL)
        if not isinstance(window, AccessPolicyWindow):
            raise TypeError("access_policy_window takes an AccessPolicyWindow or None")
        if window.num_bytes < 0 or not 0.0 <= window.hit_ratio <= 1.0:
            raise ValueError("num_bytes must be >= 0 and hit_ratio within [0, 1]")
        v = _drv.CUstreamAttrValue()
        w = v.accessPolicyWindow
        w.base_ptr = int(window.base_ptr)
        w.num_bytes = int(window.num_bytes)
        w.hitRatio = float(window.hit_ratio)
        w.hitProp = _drv.CUaccessProperty(int(window.hit_prop))
        w.missProp = _drv.CUaccessProperty(int(window.miss_prop))
        v.accessPolicyWindow = w
        self._set_attr(_ATTR_ACCESS_POLICY, v)

    def attach_mem_async(
        self, ptr: Any, length: int = 0, flags: MemAttach = MemAttach.SINGLE
    ) -> None:
        """Attach managed memory to this stream (``cuStreamAttachMemAsync``).

        ``ptr`` is a managed allocation's address (an int, ``CUdeviceptr`` or an object
        with ``ptr``); ``length`` 0 means the whole allocation.
        """
        if isinstance(length, bool) or not isinstance(length, int) or length < 0:
            raise ValueError(f"length must be a non-negative int, not {length!r}")
        p = getattr(ptr, "ptr", ptr)
        r = _drv.cuStreamAttachMemAsync(
            self.handle, _drv.CUdeviceptr(int(p)), length, int(MemAttach(flags))
        )
        if r[0] is not SUCCESS:
            raise make_error(r[0], "cuStreamAttachMemAsync")

    # -- capture -------------------------------------------------------------------------
    def begin_capture(self, mode: CaptureMode | int | None = None) -> None:
        """Start capturing work on this stream into a graph (``cuStreamBeginCapture``).

        Parameters
        ----------
        mode
            A :class:`~cudriver.CaptureMode`; default ``THREAD_LOCAL``.

        Raises
        ------
        StreamCaptureError
            The stream is the legacy default stream, or is already capturing.
        """
        from .graph import CaptureMode

        h = self._h
        if h is None:
            self._raise_closed()
        m = CaptureMode.THREAD_LOCAL if mode is None else CaptureMode(mode)
        if self._key in (0, _LEGACY) or self._special == "legacy":
            raise StreamCaptureError(
                _drv.CUresult.CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
                "cuStreamBeginCapture",
                "the legacy default stream cannot be captured: capture on a cudriver.Stream()",
            )
        if self._capture_id is not None:
            raise StreamCaptureError(
                _drv.CUresult.CUDA_ERROR_ILLEGAL_STATE,
                "cuStreamBeginCapture",
                "this stream is already capturing",
            )
        errors.last_capture_violation = None
        r = _drv.cuStreamBeginCapture(h, _drv.CUstreamCaptureMode(int(m)))
        if r[0] is not SUCCESS:
            raise make_error(r[0], "cuStreamBeginCapture")
        cid = _capture.capture_id(h)
        if cid is None:  # pragma: no cover - the driver just began it
            raise StreamCaptureError(
                _drv.CUresult.CUDA_ERROR_ILLEGAL_STATE, "cuStreamGetCaptureInfo", "no capture"
            )
        _capture.register(cid)
        self._capture_id = cid

    def end_capture(self) -> Graph:
        """End the capture and return the captured :class:`~cudriver.Graph`.

        Calls ``cuStreamEndCapture``.

        Raises
        ------
        StreamCaptureError
            The capture was invalidated (saying by what, when known), a stream forked
            into it was not joined back, or the stream was not capturing. The stream
            is usable afterwards.
        """
        from .graph import Graph

        h, keep = self._end_capture_raw()
        return Graph._from_handle(h, keep=keep, context=self._context)

    def _end_capture_raw(self) -> tuple[Any, list[Any]]:
        h = self._h
        if h is None:
            self._raise_closed()
        r = _drv.cuStreamEndCapture(h)
        cid = self._capture_id
        self._capture_id = None
        keep = _capture.unregister(cid) if cid is not None else []
        status = r[0]
        if status is not SUCCESS:
            g = r[1] if len(r) > 1 else None
            if g is not None and int(g) != 0:
                _drv.cuGraphDestroy(g)
            raise make_error(status, "cuStreamEndCapture", _capture_detail(int(status)))
        return r[1], keep

    @contextlib.contextmanager
    def capture(self, mode: CaptureMode | int | None = None) -> Iterator[Graph]:
        """Capture the block's work on this stream into a graph.

        ::

            with stream.capture() as g:
                kernel.launch(stream, grid, block, buf, n)
            exe = g.instantiate()

        The yielded :class:`~cudriver.Graph` holds the captured graph once the block
        exits normally. If the block raises, the capture is ended, the partial graph
        destroyed, and the exception propagates unchanged; if the capture was
        invalidated, a :class:`~cudriver.StreamCaptureError` is raised at exit. In
        every case the stream is usable afterwards.
        """
        from .graph import Graph

        self.begin_capture(mode)
        graph = Graph._pending()
        try:
            yield graph
        except BaseException:
            self._abort_capture()
            raise
        h, keep = self._end_capture_raw()
        graph._fill(h, keep, self._context)

    def _abort_capture(self) -> None:
        """End a capture after an error, dropping the graph and any error it gives."""
        h = self._h
        if h is None:
            return
        r = _drv.cuStreamEndCapture(h)
        cid = self._capture_id
        self._capture_id = None
        if cid is not None:
            _capture.unregister(cid)
        g = r[1] if len(r) > 1 else None
        if g is not None and int(g) != 0:
            _drv.cuGraphDestroy(g)

    @property
    def capture_status(self) -> CaptureStatus:
        """The stream's :class:`~cudriver.CaptureStatus` (``cuStreamGetCaptureInfo``)."""
        from .graph import CaptureStatus

        status, info = _bindings.capture_info(self.handle)
        if info is None:
            raise make_error(status, "cuStreamGetCaptureInfo")
        return CaptureStatus(int(info.status))

    @property
    def is_capturing(self) -> bool:
        """Whether the stream is capturing (active or invalidated)."""
        return int(self.capture_status) != 0

    @property
    def capture_id(self) -> int | None:
        """The id of the active capture, or None when not capturing."""
        status, info = _bindings.capture_info(self.handle)
        if info is None:
            raise make_error(status, "cuStreamGetCaptureInfo")
        return info.id if int(info.status) == 1 else None

    @property
    def capture_graph(self) -> Graph | None:
        """The graph being captured into (borrowed), or None when not capturing."""
        from .graph import Graph

        status, info = _bindings.capture_info(self.handle)
        if info is None:
            raise make_error(status, "cuStreamGetCaptureInfo")
        if int(info.status) != 1 or info.graph is None:
            return None
        return Graph.from_handle(info.graph)

    def _repr_extra(self) -> str:
        parts: list[str] = []
        if self._special is not None:
            parts.append(self._special)
        if self._context is not None and self._context._device is not None:
            parts.append(f"device={self._context._device.ordinal}")
        if self._capture_id is not None:
            parts.append("capturing")
        return " ".join(parts)


def _capture_detail(code: int) -> str | None:
    R = _drv.CUresult
    if code == int(R.CUDA_ERROR_STREAM_CAPTURE_INVALIDATED):
        by = errors.last_capture_violation
        msg = (
            "the capture was invalidated by an operation that is not allowed while "
            "capturing (a synchronous call, a query, or legacy-stream work)"
        )
        return f"{msg}; first offending call: {by}" if by else msg
    if code == int(R.CUDA_ERROR_STREAM_CAPTURE_UNJOINED):
        return (
            "work forked to another stream during the capture was not joined back: make "
            "the capturing stream wait on the forked stream before the capture ends"
        )
    if code == int(R.CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD):
        return "the capture was begun on another thread"
    return None
