"""CUDA events: ordering between streams, completion queries and timing."""

from __future__ import annotations

import os
from typing import Any

from cuda.bindings import driver as _drv

from .. import aio
from .._context import _share
from .._context.device import Context, context_arg, current_or_default, kept_primary
from .._lifetime import _handle, _hostfn
from .._lifetime._coerce import (
    StreamBase,
    StreamLike,
    bool_arg,
    deprecated,
    handle_arg,
    stream_handle,
)
from .._lifetime._handle import Handle
from .._lifetime._pins import call_pinned, call_pinned2, pin2, pinned, query_result, unpin2
from .._runtime import _bindings, _calls, _hooks
from .._runtime._bindings import SUCCESS
from ..errors import GUARD, checked, error_for
from ._core import EventCore

__all__ = ["Event"]

_F = _drv.CUevent_flags
_cuEventElapsedTime = checked(_bindings.event_elapsed_time, name="cuEventElapsedTime")


class Event(Handle, EventCore, aio.Awaitable):
    """A CUDA event (``cuEventCreate``; destroyed with ``cuEventDestroy`` on close).

    Parameters
    ----------
    timing
        Record timestamps, for :meth:`elapsed_ms`. Off by default (as in cuda.core,
        PyTorch and :meth:`Stream.record`): events without timing are cheaper to
        record and wait on.
    blocking
        :meth:`synchronize` blocks the thread (yields the CPU) instead of spinning.
    interprocess
        May be shared with another process (:meth:`export_handle`); requires
        ``timing=False``.
    context
        The context to create the event in; default: the current one (else device
        0's primary context).
    """

    __slots__ = ("_context", "_flags", "_timing")  # _recorded_on: in EventCore

    _kind = "Event"

    _context: Context
    _timing: bool
    _flags: int
    _recorded_on: int

    def __init__(
        self,
        *,
        timing: bool = False,
        blocking: bool = False,
        interprocess: bool = False,
        context: Context | None = None,
    ) -> None:
        timing = bool_arg(timing, "timing")
        blocking = bool_arg(blocking, "blocking")
        interprocess = bool_arg(interprocess, "interprocess")
        if interprocess and timing:
            raise ValueError("an interprocess event cannot record timing: pass timing=False")
        flags = 0
        if not timing:
            flags |= int(_F.CU_EVENT_DISABLE_TIMING)
        if blocking:
            flags |= int(_F.CU_EVENT_BLOCKING_SYNC)
        if interprocess:
            flags |= int(_F.CU_EVENT_INTERPROCESS)
        ctx = context_arg(context) or current_or_default()
        with ctx._scope():
            h = _calls.cuEventCreate(flags)
        self._context = ctx
        self._timing = timing
        self._flags = flags
        self._recorded_on = 0
        self._init_handle(h, release=_drv.cuEventDestroy, func="cuEventDestroy", keep=(ctx,))

    @classmethod
    def from_handle(cls, handle: Any, owner: Any = None, *, timing: bool = False) -> Event:
        """Wrap a foreign ``CUevent`` (or int) without owning it."""
        h = handle_arg(handle, _drv.CUevent, "event handle")
        timing = bool_arg(timing, "timing")
        self = cls.__new__(cls)
        self._context = current_or_default()
        self._timing = timing
        self._flags = 0
        self._recorded_on = 0
        self._init_handle(h, release=None, func="cuEventDestroy", owned=False, owner=owner)
        return self

    @property
    def context(self) -> Context:
        """The context the event belongs to."""
        return self._context

    @property
    def timing(self) -> bool:
        """Whether the event records timestamps."""
        return self._timing

    def _record_slow(self, stream: StreamLike) -> Event:
        """The slow path of :meth:`Event.record` (what the compiled body leaves)."""
        if isinstance(stream, StreamBase):  # the common case, in one call
            r = call_pinned2(self, stream, _drv.cuEventRecord)
            if r[0] is not SUCCESS:
                raise error_for(r[0], _drv.cuEventRecord)
            self._recorded_on = stream._key or 1
            return self
        if GUARD.armed:
            GUARD.check()
        # The event and the stream stay pinned for the call.
        pins = pin2(self, stream)
        try:
            sh = stream_handle(stream)
            r = _drv.cuEventRecord(self._state.handle, sh)
        finally:
            unpin2(*pins)
        if r[0] is not SUCCESS:
            raise error_for(r[0], _drv.cuEventRecord)
        self._recorded_on = int(sh) or 1  # NULL: the legacy stream, as _hostfn keys it
        return self

    def _query_slow(self) -> bool:
        """The slow path of :meth:`Event.query` (what the compiled body leaves)."""
        return query_result(call_pinned(self, _drv.cuEventQuery), _drv.cuEventQuery)

    def _synchronize_slow(self) -> None:
        """The slow path of :meth:`Event.synchronize` (what the compiled body leaves).

        All of it while an observer is on (``_runtime._hooks``).
        """
        token = None
        if _hooks.ON:
            if self._h is None:
                self._raise_closed()
            token = _hooks.host_wait("Event.synchronize (cuEventSynchronize)")
        try:
            r = call_pinned(self, _drv.cuEventSynchronize)  # a close() meanwhile waits for it
            if r[0] is not SUCCESS:
                raise error_for(r[0], _drv.cuEventSynchronize)
            if _handle.deferred or _handle.releasing():
                _handle.settle()
        finally:
            if token is not None:
                _hooks.end(token)
        if _hostfn.PENDING and self._recorded_on:
            _hostfn.after_event_sync(self._recorded_on)

    @pinned
    def elapsed_ms(self, later: Event) -> float:
        """Milliseconds between this event and ``later`` (``cuEventElapsedTime``).

        Both must have been made with ``timing=True`` and have completed.

        Raises
        ------
        ValueError
            One of them records no timing (events do not by default): make them with
            ``Event(timing=True)``.
        """
        if not isinstance(later, Event):
            raise TypeError(f"later must be an Event, not {type(later).__name__}")
        for which, ev in (("this event", self), ("later", later)):
            if not ev._timing:
                raise ValueError(
                    f"elapsed_ms needs two events that record timing, and {which} does not: "
                    "make both with Event(timing=True) (events record no timing by default)"
                )
        return float(_cuEventElapsedTime(self.handle, later.handle))

    @pinned
    def export_handle(self) -> bytes:
        """Export an interprocess event (``cuIpcGetEventHandle``) as 64 bytes.

        Another process opens it with :meth:`import_handle`. No synchronisation; any
        thread may call it (the event's context is made current for the call).
        """
        if not self._flags & int(_F.CU_EVENT_INTERPROCESS):
            raise ValueError("only an Event(interprocess=True) can be exported")
        # In the event's context: a Queue pickles on its feeder thread, where no context
        # is current (measured: CUDA_ERROR_INVALID_CONTEXT there).
        with self._context._scope():
            return _bindings.struct_bytes(_calls.cuIpcGetEventHandle(self.handle), 64)

    def ipc_handle(self) -> bytes:
        """Deprecated: use :meth:`export_handle`."""
        deprecated("Event.ipc_handle()", "Event.export_handle()")
        return self.export_handle()

    @classmethod
    def from_ipc_handle(cls, data: bytes, *, context: Context | None = None) -> Event:
        """Deprecated: use :meth:`import_handle`."""
        deprecated("Event.from_ipc_handle()", "Event.import_handle()")
        return cls.import_handle(data, context=context)

    @classmethod
    def import_handle(cls, data: bytes, *, context: Context | None = None) -> Event:
        """Open an event exported by another process (``cuIpcOpenEventHandle``).

        ``data`` is what :meth:`export_handle` returned there. The returned event is
        owned: closing it releases this process's reference.
        """
        if not isinstance(data, bytes | bytearray | memoryview):
            raise TypeError(
                f"data must be the 64 bytes export_handle() returned, not {type(data).__name__}"
            )
        raw = bytes(data)
        if len(raw) != 64:
            raise ValueError(f"an IPC event handle has 64 bytes, not {len(raw)}")
        ipc = _drv.CUipcEventHandle()
        _bindings.set_struct_bytes(ipc, raw)
        ctx = context_arg(context) or current_or_default()
        with ctx._scope():
            h = _calls.cuIpcOpenEventHandle(ipc)
        self = cls.__new__(cls)
        self._context = ctx
        self._timing = False
        self._flags = int(_F.CU_EVENT_INTERPROCESS | _F.CU_EVENT_DISABLE_TIMING)
        self._recorded_on = 0
        self._init_handle(h, release=_drv.cuEventDestroy, func="cuEventDestroy", keep=(ctx,))
        return self

    def _repr_extra(self) -> str:
        return "timing" if self._timing else "no-timing"

    def _travel_refusal(self) -> str | None:
        if self._flags & int(_F.CU_EVENT_INTERPROCESS):
            return None
        return "this event was made without interprocess=True"


# -- travelling through multiprocessing (see _share) -------------------------------------
def _reduce_event(ev: Event) -> tuple[Any, ...]:
    _share.refuse(ev)
    data = ev.export_handle()
    _share.EXPORTED[data] = ev
    return (_rebuild_event, (data, os.getpid(), _share.device_uuid(ev.context.device)))


def _rebuild_event(data: bytes, pid: int, uuid: bytes) -> Event:
    """The event a message names, opened once per process in its device's primary context."""
    if pid == os.getpid():  # the driver refuses to open an event of this process
        ev = _share.EXPORTED.get(data)
        if ev is not None:
            return ev  # type: ignore[no-any-return]
    with _share.LOCK:
        ev, _ = _share.open_once(
            _share.EVENTS,
            (pid, data),
            "event",
            lambda: Event.import_handle(data, context=kept_primary(_share.device_of_uuid(uuid))),
        )
    return ev  # type: ignore[no-any-return]


_share.register(Event, _reduce_event)
