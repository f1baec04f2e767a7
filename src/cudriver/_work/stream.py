"""CUDA streams: ordering, queries, host functions, memory operations and capture.

:class:`Stream` holds every public stream method. Where the logic is long, a method
delegates to the module that owns it: host functions to ``_hostfn``, memory
operations to ``memops``, capture bookkeeping to ``capture``.
:class:`AccessPolicyWindow` is the value type of :attr:`Stream.access_policy_window`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cuda.bindings import driver as _drv

from .. import aio
from .._context.device import Context, Device, context_arg, current_or_default
from .._lifetime import _handle, _hostfn, capture
from .._lifetime._coerce import (
    U64_LIMIT,
    StreamBase,
    StreamLike,
    bool_arg,
    deprecated,
    device_address,
    enum_arg,
    int_arg,
    stream_handle,
    uint_arg,
)
from .._lifetime._pins import call_pinned, pin2, pinned, query_result, unpin2
from .._runtime import _calls, _hooks
from .._runtime._bindings import SUCCESS
from .._runtime._enums import (
    AccessProperty,
    CaptureMode,
    CaptureStatus,
    MemAttach,
    SyncPolicy,
    WaitCondition,
)
from ..errors import GUARD, error_for
from . import memops
from ._core import StreamCore
from .event import Event
from .memops import MemOp

if TYPE_CHECKING:
    from .._graph.graph import Graph

__all__ = ["Stream", "AccessPolicyWindow"]


# The hot paths call the bindings directly and test the status by identity.
# Cold paths go through the checking wrapper.

_LEGACY = 0x1
_PER_THREAD = 0x2
_ATTR_ACCESS_POLICY = 1
_ATTR_SYNC_POLICY = 3
_NON_BLOCKING = int(_drv.CUstream_flags.CU_STREAM_NON_BLOCKING)


@dataclass(frozen=True)
class AccessPolicyWindow:
    """An L2 persistence window for a stream (``CUaccessPolicyWindow``).

    The value :attr:`Stream.access_policy_window` takes and returns. ``num_bytes == 0``
    means no window. Validated when made: ``base_ptr`` and ``num_bytes`` are ints within
    ``[0, 2**64)`` whose sum stays below ``2**64``, ``hit_ratio`` a real number within
    ``[0, 1]``, the properties :class:`AccessProperty` values (members of the bindings'
    enum and plain ints are converted). A ``TypeError`` or ``ValueError`` names the
    field; the driver checks ``num_bytes`` against the device's largest window when the
    stream takes it.
    """

    base_ptr: int
    num_bytes: int
    hit_ratio: float = 1.0
    hit_prop: AccessProperty = AccessProperty.PERSISTING
    miss_prop: AccessProperty = AccessProperty.STREAMING

    def __post_init__(self) -> None:
        for name in ("base_ptr", "num_bytes"):
            v = int_arg(getattr(self, name), name)
            if not 0 <= v < U64_LIMIT:
                raise ValueError(f"{name} must be within [0, 2**64), not {v}")
            object.__setattr__(self, name, v)
        base, n = self.base_ptr, self.num_bytes
        if base + n >= U64_LIMIT:
            raise ValueError(f"base_ptr + num_bytes must stay below 2**64, not {base:#x} + {n:#x}")
        ratio = self.hit_ratio
        if isinstance(ratio, bool) or not isinstance(ratio, (int, float)):
            raise TypeError(f"hit_ratio must be a real number, not {type(ratio).__name__}")
        if not 0.0 <= ratio <= 1.0:  # also refuses NaN
            raise ValueError(f"hit_ratio must be within [0, 1], not {ratio}")
        object.__setattr__(self, "hit_ratio", float(ratio))
        for name in ("hit_prop", "miss_prop"):
            value = getattr(self, name)
            if isinstance(value, (bool, float)):
                raise TypeError(f"{name} must be an AccessProperty, not {type(value).__name__}")
            try:
                prop = AccessProperty(int(value))
            except (TypeError, ValueError):
                raise ValueError(f"{name} must be an AccessProperty, not {value!r}") from None
            object.__setattr__(self, name, prop)


AccessPolicyWindow.__module__ = "cudriver"


class Stream(StreamBase, StreamCore, aio.Awaitable):
    """A CUDA stream (``cuStreamCreate``; ``cuStreamDestroy`` on close).

    With a ``priority``, made with ``cuStreamCreateWithPriority`` instead.

    Parameters
    ----------
    non_blocking
        Do not synchronise with the legacy default stream (``CU_STREAM_NON_BLOCKING``).
        The default, False, makes a blocking stream like ``cuStreamCreate`` with flags
        0: buffer operations made without ``stream=`` (which run on the legacy stream,
        or on its stand-in while a capture is open) are then ordered after its work.
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
    ``with stream:`` closes the stream at the end of the block, as for every owning
    cudriver object (in CuPy and PyTorch it makes the stream current instead:
    cudriver has no current stream, every call that enqueues work names its stream).
    """

    __slots__ = ()  # the fields are StreamCore's C fields

    _kind = "Stream"

    _context: Context | None
    _capture: capture.CaptureSession | None
    _special: str | None

    def __init__(
        self,
        *,
        non_blocking: bool = False,
        priority: int | None = None,
        context: Context | None = None,
    ) -> None:
        flags = _NON_BLOCKING if bool_arg(non_blocking, "non_blocking") else 0
        if priority is not None:
            priority = int_arg(priority, "priority")  # checked before any driver call
        ctx = context_arg(context) or current_or_default()
        if priority is not None:
            least, greatest = ctx.stream_priority_range
            if not greatest <= priority <= least:
                raise ValueError(
                    f"stream priority {priority} is outside this context's range "
                    f"[{greatest} (highest), {least} (lowest)]"
                )
        h = ctx._create_stream(flags, priority)
        self._setup(h, ctx, owned=True, owner=None, special=None)
        if not flags:  # stream-less buffer operations wait for it while a capture is open
            capture.BLOCKING[self._key] = (ctx._key, self._state)

    def _setup(
        self, h: Any, ctx: Context | None, *, owned: bool, owner: Any, special: str | None
    ) -> None:
        self._context = ctx
        self._capture = None
        self._special = special
        self._init_handle(
            h,
            release=capture.destroy_stream,
            func="cuStreamDestroy",
            owned=owned,
            owner=owner,
            keep=(ctx,) if ctx is not None else (),
            on_release=_hostfn.watch_stream(int(h)) if owned else None,
        )

    @classmethod
    def _borrow(cls, h: Any, owner: Any, special: str | None = None) -> Stream:
        self = cls.__new__(cls)
        self._setup(h, None, owned=False, owner=owner, special=special)
        return self

    @classmethod
    def from_handle(cls, handle: StreamLike, owner: Any = None) -> Stream:
        """Wrap a foreign stream without owning it (never destroyed by us).

        Parameters
        ----------
        handle
            A ``CUstream``, an int, or any object with ``__cuda_stream__`` (PyTorch,
            CuPy and cuda.core streams) or a ``cuda_stream`` int attribute.
        owner
            Kept alive as long as the returned Stream; defaults to ``handle`` itself
            when it is a Python object owning the stream (e.g. a PyTorch stream).
        """
        if handle is None:
            raise TypeError("from_handle needs a stream handle, not None; see Stream.legacy()")
        h = stream_handle(handle)
        if owner is None and not isinstance(handle, (int, _drv.CUstream)):
            owner = handle
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

    # -- ordering and completion ----------------------------------------------------------
    def _synchronize_slow(self) -> None:
        """The slow path of :meth:`Stream.synchronize` (what the compiled body leaves).

        All of it while an observer is on (``_runtime._hooks``).
        """
        token = None
        if _hooks.ON:
            if self._h is None:
                self._raise_closed()
            token = _hooks.host_wait("Stream.synchronize (cuStreamSynchronize)")
        try:
            # Pinned for the wait: a close() on another thread destroys the stream only
            # after it (that crashed the process).
            r = call_pinned(self, _drv.cuStreamSynchronize)
            if r[0] is not SUCCESS:
                raise error_for(r[0], _drv.cuStreamSynchronize)
            if _handle.deferred or _handle.releasing():
                _handle.settle()
        finally:
            if token is not None:
                _hooks.end(token)
        if _hostfn.PENDING:
            # re-raise errors of host functions that ran on this stream
            _hostfn.after_sync(self._key)

    def _query_slow(self) -> bool:
        """The slow path of :meth:`Stream.query` (what the compiled body leaves)."""
        return query_result(call_pinned(self, _drv.cuStreamQuery), _drv.cuStreamQuery)

    def _wait_slow(self, other: Event | StreamLike) -> None:
        """The slow path of :meth:`Stream.wait` (what the compiled body leaves)."""
        h = self._h
        if h is None:
            self._raise_closed()
        if isinstance(other, Event):
            if GUARD.armed:
                GUARD.check()
            pins = pin2(self, other)
            try:
                r = _drv.cuStreamWaitEvent(self._state.handle, other._state.handle, 0)
            finally:
                unpin2(*pins)
            if r[0] is not SUCCESS:
                raise error_for(r[0], _drv.cuStreamWaitEvent)
            return
        stream_handle(other)  # checked before the event is made
        ev = Event(timing=False, context=self._ctx_or_none())
        try:
            ev.record(other)
            self.wait(ev)
        finally:
            ev.close()  # the driver keeps the recorded state until the wait resolves

    def _record_slow(self, event: Event | None = None) -> Event:
        """The slow path of :meth:`Stream.record` (what the compiled body leaves)."""
        h = self._h
        if h is None:
            self._raise_closed()
        if event is None:
            event = Event(timing=False, context=self._ctx_or_none())
        elif not isinstance(event, Event):
            raise TypeError(f"record() takes a cudriver.Event, not {type(event).__name__}")
        if GUARD.armed:
            GUARD.check()
        pins = pin2(self, event)
        try:
            r = _drv.cuEventRecord(event._state.handle, self._state.handle)
        finally:
            unpin2(*pins)
        if r[0] is not SUCCESS:
            raise error_for(r[0], _drv.cuEventRecord)
        event._recorded_on = self._key or 1  # what event.synchronize() reports on
        return event

    def _cuda_stream_slow(self) -> tuple[int, int]:
        """The slow path of ``Stream.__cuda_stream__`` (what the compiled body leaves)."""
        if self._h is None:
            self._raise_closed()
        return (0, self._key)

    # -- host functions -------------------------------------------------------------------
    def _launch_host_func_slow(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> None:
        """The slow path of :meth:`Stream.launch_host_func` (what the compiled body leaves)."""
        h = self._h
        if h is None:
            self._raise_closed()
        if not callable(fn):
            raise TypeError(f"launch_host_func needs a callable, not {type(fn).__name__}")
        ctx = self._context
        ctx_key = ctx._key if ctx is not None else self.context._key
        _hostfn.launch(self, h, self._key, ctx_key, fn, args, kwargs)

    # -- memory operations ----------------------------------------------------------------
    # The slow paths of the compiled write_value32/64 and wait_value32/64 (what their
    # bodies leave): memops checks and enqueues, with the width in bytes.
    def _write_value32_slow(
        self, addr: Any, value: int, *, no_memory_barrier: bool = False
    ) -> None:
        memops.write_value(self, addr, value, 4, no_memory_barrier)

    def _write_value64_slow(
        self, addr: Any, value: int, *, no_memory_barrier: bool = False
    ) -> None:
        memops.write_value(self, addr, value, 8, no_memory_barrier)

    def _wait_value32_slow(
        self,
        addr: Any,
        value: int,
        cond: WaitCondition | int = WaitCondition.GEQ,
        *,
        flush: bool = False,
    ) -> None:
        memops.wait_value(self, addr, value, cond, flush, 4)

    def _wait_value64_slow(
        self,
        addr: Any,
        value: int,
        cond: WaitCondition | int = WaitCondition.GEQ,
        *,
        flush: bool = False,
    ) -> None:
        memops.wait_value(self, addr, value, cond, flush, 8)

    def batch_mem_ops(self, ops: Iterable[MemOp]) -> None:
        """Enqueue several memory operations at once, in order (``cuStreamBatchMemOp``).

        ::

            stream.batch_mem_ops([MemOp.wait32(flag, 1), MemOp.write32(done, 1)])

        Cheaper than one call per operation, on the host and on the device. Does not
        block or allocate device memory; captured as one node inside a capture.

        Parameters
        ----------
        ops
            One to :data:`~cudriver.MAX_BATCH_MEM_OPS` (255) :class:`~cudriver.MemOp`
            objects.

        Raises
        ------
        NotSupportedError
            An operation needs a feature the device lacks (64-bit operations, ``NOR``,
            flushing remote writes), checked before the call.
        ValueError
            No operations, or more than the driver takes in one batch.
        TypeError
            An item is not a :class:`~cudriver.MemOp`.
        """
        memops.batch(self, ops)

    # -- properties -----------------------------------------------------------------------
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
            if self._special is not None:
                return current_or_default()
            self._context = Context.from_handle(_calls.cuStreamGetCtx(self.handle))
        return self._context

    @property
    def device(self) -> Device:
        """The device of the stream's context."""
        return self.context.device

    @property
    @pinned
    def priority(self) -> int:
        """The stream's priority (``cuStreamGetPriority``)."""
        return int(_calls.cuStreamGetPriority(self.handle))

    @property
    @pinned
    def non_blocking(self) -> bool:
        """Whether the stream does not synchronise with the legacy stream (``cuStreamGetFlags``)."""
        return bool(int(_calls.cuStreamGetFlags(self.handle)) & _NON_BLOCKING)

    @property
    @pinned
    def id(self) -> int:
        """The process-unique stream id (``cuStreamGetId``)."""
        return int(_calls.cuStreamGetId(self.handle))

    # -- attributes -----------------------------------------------------------------------
    @pinned
    def copy_attributes_from(self, other: StreamLike) -> None:
        """Copy ``other``'s attributes to this stream (``cuStreamCopyAttributes``)."""
        _calls.cuStreamCopyAttributes(self.handle, stream_handle(other))

    @pinned
    def _get_attr(self, attr: int) -> Any:
        return _calls.cuStreamGetAttribute(self.handle, _drv.CUstreamAttrID(attr))

    @pinned
    def _set_attr(self, attr: int, value: Any) -> None:
        _calls.cuStreamSetAttribute(self.handle, _drv.CUstreamAttrID(attr), value)

    @property
    def sync_policy(self) -> SyncPolicy:
        """How host threads wait on this stream (``cuStreamGetAttribute``/``...Set...``)."""
        return SyncPolicy(int(self._get_attr(_ATTR_SYNC_POLICY).syncPolicy))

    @sync_policy.setter
    def sync_policy(self, policy: SyncPolicy) -> None:
        p = SyncPolicy(policy)
        v = _drv.CUstreamAttrValue()
        v.syncPolicy = _drv.CUsynchronizationPolicy(int(p))
        self._set_attr(_ATTR_SYNC_POLICY, v)

    @property
    def access_policy_window(self) -> AccessPolicyWindow:
        """The stream's L2 access policy window (``cuStreamGetAttribute``/``...Set...``)."""
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
        v = _drv.CUstreamAttrValue()
        w = v.accessPolicyWindow
        w.base_ptr = window.base_ptr
        w.num_bytes = window.num_bytes
        w.hitRatio = window.hit_ratio
        w.hitProp = _drv.CUaccessProperty(int(window.hit_prop))
        w.missProp = _drv.CUaccessProperty(int(window.miss_prop))
        v.accessPolicyWindow = w
        self._set_attr(_ATTR_ACCESS_POLICY, v)

    @pinned
    def attach_memory(
        self, buffer: Any, nbytes: int = 0, *, attach: MemAttach | int = MemAttach.SINGLE
    ) -> None:
        """Attach managed memory to this stream (``cuStreamAttachMemAsync``).

        Enqueued on this stream; does not block or allocate.

        Parameters
        ----------
        buffer
            A :class:`~cudriver.ManagedBuffer`, or a managed allocation's address (an
            int, a ``CUdeviceptr`` or an object with ``ptr``).
        nbytes
            0 (default): the whole allocation.
        attach
            ``MemAttach.SINGLE`` (default: only this stream may use it), ``GLOBAL`` or
            ``HOST``, as for :class:`~cudriver.ManagedBuffer`'s ``attach=``.
        """
        n = uint_arg(nbytes, "nbytes")
        a, _size, _obj = device_address(buffer)
        if not 0 <= a < U64_LIMIT:
            raise ValueError(f"address {a:#x} does not fit in 64 bits")
        f = enum_arg(attach, MemAttach, "attach")
        _calls.cuStreamAttachMemAsync(self.handle, _drv.CUdeviceptr(a), n, int(f))

    def attach_mem_async(
        self, ptr: Any, length: int = 0, flags: MemAttach | int = MemAttach.SINGLE
    ) -> None:
        """Deprecated: use :meth:`attach_memory` (``flags`` is its ``attach``)."""
        deprecated(
            "Stream.attach_mem_async(ptr, length, flags)",
            "Stream.attach_memory(buffer, nbytes, attach=...)",
        )
        self.attach_memory(ptr, length, attach=flags)

    # -- capture --------------------------------------------------------------------------
    @pinned
    def begin_capture(
        self, mode: CaptureMode | int | None = None, *, into: Graph | None = None
    ) -> None:
        """Start capturing work on this stream into a graph (``cuStreamBeginCapture``).

        Parameters
        ----------
        mode
            A :class:`~cudriver.CaptureMode`; default ``THREAD_LOCAL``.
        into
            An existing :class:`~cudriver.Graph` (e.g. a conditional node's body) that
            the captured work is added to (``cuStreamBeginCaptureToGraph``).

        Raises
        ------
        StreamCaptureError
            The stream is the legacy default stream, or is already capturing.
        """
        h = self._h
        if h is None:
            self._raise_closed()
        legacy = self._key in (0, _LEGACY) or self._special == "legacy"
        from .._graph.graph import Graph  # a higher layer, needed only by captures

        if into is not None and not isinstance(into, Graph):
            raise TypeError(f"into must be a cudriver.Graph, not {type(into).__name__}")
        session = capture.begin(h, mode, legacy=legacy, previous=self._capture, into=into)
        self._capture = session
        session.close_with(self)  # a stream collected mid-capture must not leave it open

    def end_capture(self) -> Graph:
        """End the capture and return the captured :class:`~cudriver.Graph`.

        Calls ``cuStreamEndCapture``. A capture ``into`` a graph returns that graph.

        Raises
        ------
        StreamCaptureError
            The capture was invalidated (saying by what, when known), a stream forked
            into it was not joined back, or the stream was not capturing. The stream
            is usable afterwards.
        """
        into = self._capture.into if self._capture is not None else None
        h, keep = self._end_capture()
        from .._graph.graph import Graph  # a higher layer, needed only by captures

        return into or Graph._from_handle(h, keep=keep, context=self._context)

    @pinned
    def _end_capture(self) -> tuple[Any, list[Any]]:
        return capture.end_on(self)

    @contextlib.contextmanager
    def capture(
        self, mode: CaptureMode | int | None = None, *, into: Graph | None = None
    ) -> Iterator[Graph]:
        """Capture the block's work on this stream into a graph (``into``: an existing one).

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
        self.begin_capture(mode, into=into)
        from .._graph.graph import Graph  # a higher layer, needed only by captures

        graph = into or Graph._pending(self)
        try:
            yield graph
        except BaseException:
            capture.abort_on(self)
            raise
        h, keep = self._end_capture()
        if into is None:
            graph._fill(h, keep, self._context)

    def close(self) -> None:
        """Destroy the stream (``cuStreamDestroy``) for owned streams; idempotent.

        A capture still open on the stream is ended first and its graph discarded.
        Work already enqueued completes; the driver frees the stream afterwards. A
        stream that allocated from a :class:`~cudriver.MemoryPool` still open is
        destroyed after that pool, whose close waits for the stream's work.
        """
        if self._capture is not None:
            capture.abort_on(self)
        super().close()

    def _capture_info(self) -> Any:
        # None for the legacy stream: it never captures, and asking fails during captures.
        return None if self._special == "legacy" else capture.info(self.handle)

    @property
    @pinned
    def capture_status(self) -> CaptureStatus:
        """The :class:`~cudriver.CaptureStatus` (``cuStreamGetCaptureInfo``; legacy: NONE)."""
        ci = self._capture_info()
        return CaptureStatus.NONE if ci is None else CaptureStatus(int(ci.status))

    @property
    def is_capturing(self) -> bool:
        """Whether the stream is capturing, active or invalidated (``cuStreamGetCaptureInfo``)."""
        return self.capture_status is not CaptureStatus.NONE

    @property
    @pinned
    def capture_id(self) -> int | None:
        """The id of the active capture, or None (``cuStreamGetCaptureInfo``)."""
        ci = self._capture_info()
        return ci.id if ci is not None and int(ci.status) == CaptureStatus.ACTIVE else None

    @property
    @pinned
    def capture_graph(self) -> Graph | None:
        """The graph being captured into (borrowed), or None (``cuStreamGetCaptureInfo``)."""
        ci = self._capture_info()
        if ci is None or int(ci.status) != CaptureStatus.ACTIVE or ci.graph is None:
            return None
        from .._graph.graph import Graph  # a higher layer, needed only by captures

        return Graph.from_handle(ci.graph)

    def _repr_extra(self) -> str:
        parts: list[str] = []
        if self._special is not None:
            parts.append(self._special)
        if self._context is not None and self._context._device is not None:
            parts.append(f"device={self._context._device.ordinal}")
        if self._capture is not None:
            parts.append("capturing")
        return " ".join(parts)
