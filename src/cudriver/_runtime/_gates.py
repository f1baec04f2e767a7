"""Streams that may wait for the host: where a value wait or a host function was enqueued.

A synchronous free (``cuMemFree``, ``cuMemFreeHost``) waits for the whole device to be
idle, and while it waits it holds a lock of the driver that almost every other call of
any thread needs (measured on CUDA 13.0: event records, launches, allocations, copies,
stream and event creation, ``cuModuleGetFunction`` all blocked behind it). A stream that
waits for a value the host writes later, or runs a host function that waits for the
program, then stops the whole process: the thread that would open the gate blocks in
its next driver call. So cudriver notes every stream where it enqueues such a wait
(``wait_value32/64``, batches with waits, host functions; and the mirrors'
``cuStreamWaitValue*``, ``cuStreamBatchMemOp``, ``cuLaunchHostFunc``), and releases
that wait for the device run only once those streams have no work pending
(:func:`busy`, which never waits). Waits enqueued by code that does not go through
cudriver are not seen; nor is a wait enqueued while such a release already runs.
"""

from __future__ import annotations

import threading
from typing import Any

from cuda.bindings import driver as _drv

__all__ = ["WAITING", "note", "retire", "busy", "IDLE_WAITERS"]

#: The streams that may wait for the host, by int handle: None for a stream cudriver
#: owns (its release calls :func:`retire` before destroying it, so asking about it is
#: safe while it is here); for any other, an event recorded on it after the wait
#: (cudriver's own, destroyed once done).
WAITING: dict[int, Any] = {}
#: Held while :func:`busy` asks about owned streams, and by :func:`retire`: a stream is
#: never destroyed while it is asked about.
_lock = threading.Lock()

#: The releases (by driver function) that wait for the whole device to be idle.
IDLE_WAITERS = frozenset(
    {
        "cuMemFree",
        "cuMemFreeHost",
        "cuMemHostUnregister",
        "cuArrayDestroy",
        "cuModuleUnload",
        "cuLibraryUnload",
        "cuMemUnmap",
        "cuMemRelease",
        "cuCtxDestroy",
        "cuDevicePrimaryCtxRelease",
        "cuGreenCtxDestroy",
    }
)

_SUCCESS = _drv.CUresult.CUDA_SUCCESS
_NOT_READY = _drv.CUresult.CUDA_ERROR_NOT_READY
_NONE = _drv.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE
_NO_TIMING = _drv.CUevent_flags.CU_EVENT_DISABLE_TIMING
_RELAXED = _drv.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_RELAXED


def _relaxed(fn: Any, *args: Any) -> Any:
    """``fn(*args)`` with this thread's capture mode RELAXED.

    Its queries, records and creations then never break a capture that another thread
    has open in GLOBAL mode.
    """
    r = _drv.cuThreadExchangeStreamCaptureMode(_RELAXED)
    try:
        return fn(*args)
    finally:
        if r[0] == _SUCCESS:
            _drv.cuThreadExchangeStreamCaptureMode(r[1])


class _Recorded:
    """An event recorded on a raw stream after its wait: done when the event is."""

    __slots__ = ("event",)

    def __init__(self, event: Any) -> None:
        self.event = event

    def __del__(self) -> None:
        try:
            _drv.cuEventDestroy(self.event)
        except Exception:  # the driver went away at exit
            pass


def note(stream: Any) -> None:
    """Note that ``stream`` (a cudriver stream, or a raw handle) may wait for the host.

    Never raises: a stream that cannot be noted is left out.
    """
    try:
        key = int(stream)
        if key in (0, 1, 2):  # a NULL stream: its meaning depends on the thread
            return
        if getattr(stream, "_owned", False) and getattr(stream, "_lease", None) is not None:
            WAITING[key] = None  # covers every later wait on it, until busy() marks it
            return
        rec = _relaxed(_record, _drv.CUstream(key))
        if rec is not None:
            WAITING[key] = rec  # after the newest wait
    except Exception:  # not a stream, or the driver refused: nothing to note
        return


def _record(h: Any) -> _Recorded | None:
    """An event of cudriver's recorded on ``h`` now; None if ``h`` captures or refuses."""
    cap = _drv.cuStreamIsCapturing(h)
    if cap[0] != _SUCCESS or cap[1] != _NONE:
        return None  # captured: nothing runs now
    ctx = _drv.cuStreamGetCtx(h)
    if ctx[0] != _SUCCESS or _drv.cuCtxPushCurrent(ctx[1])[0] != _SUCCESS:
        return None
    try:
        r = _drv.cuEventCreate(_NO_TIMING)
        if r[0] != _SUCCESS:
            return None
        rec = _Recorded(r[1])
        return rec if _drv.cuEventRecord(r[1], h)[0] == _SUCCESS else None
    finally:
        _drv.cuCtxPopCurrent()


def retire(h: Any) -> None:
    """An owned stream is about to be destroyed: keep its pending work noted by an event."""
    key = int(h)
    with _lock:
        if key not in WAITING or WAITING[key] is not None:
            return  # not noted, or already followed by an event of cudriver's
        del WAITING[key]
    if _drv.cuStreamQuery(h)[0] == _NOT_READY:
        rec = _relaxed(_record, h)
        if rec is not None:
            WAITING[key] = rec


def busy() -> bool:
    """Whether a noted stream still has work pending; forgets those that have none.

    Never waits: ``cuEventQuery`` of a recorded event; for an owned stream,
    ``cuStreamIsCapturing`` then ``cuStreamQuery`` (a capturing stream counts as busy:
    querying it would break its capture), and when it has work pending, an event
    recorded on it then, asked about from then on: a release waits for the work
    enqueued before it, as ``cuMemFree`` itself would, never for later work. A new
    wait on the stream notes it again. In RELAXED capture mode, as every release.
    """
    return bool(_relaxed(_busy))


def _busy() -> bool:
    with _lock:
        for key, holder in list(WAITING.items()):
            if holder is not None:
                if _drv.cuEventQuery(holder.event)[0] == _NOT_READY:
                    return True
            else:
                h = _drv.CUstream(key)
                cap = _drv.cuStreamIsCapturing(h)
                if cap[0] == _SUCCESS and cap[1] != _NONE:
                    return True
                if cap[0] == _SUCCESS and _drv.cuStreamQuery(h)[0] == _NOT_READY:
                    # Busy: from now on, wait only for what was enqueued so far (the
                    # waits noted among it), not for work enqueued later, which may
                    # never let the stream go idle.
                    WAITING[key] = _record(h)
                    return True
            if WAITING.get(key) is holder:
                del WAITING[key]
    return False
