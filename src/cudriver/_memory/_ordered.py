"""Stream-ordered frees, ordered after the other streams that used the memory.

The release of a stream-ordered :class:`~cudriver.DeviceBuffer` (from
``cuMemAllocAsync`` or a :class:`~cudriver.MemoryPool`) is ``cuMemFreeAsync`` on the
buffer's stream, made to wait first for the work cudriver enqueued on other streams
using the buffer (see the architecture page, "Stream-ordered frees").
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cuda.bindings import driver as _drv

from .._context.device import call_in_context
from .._runtime._bindings import SUCCESS

if TYPE_CHECKING:
    from .._work.stream import Stream

__all__ = ["LEGACY", "order_free", "free_async_now", "free_async"]

#: ``CU_STREAM_LEGACY``, independent of the per-thread-stream build.
LEGACY = _drv.CUstream(1)

_EVENT_NO_TIMING = int(_drv.CUevent_flags.CU_EVENT_DISABLE_TIMING)


def order_free(sh: Any, used_on: set[int]) -> bool:
    """Make ``sh`` wait for the work enqueued so far on each stream in ``used_on``.

    False when that could not be done (a stream is gone): then the caller waits for
    the whole context instead.
    """
    own = int(sh)
    for key in used_on:
        if key == own:
            continue
        r = _drv.cuEventCreate(_EVENT_NO_TIMING)
        if r[0] is not SUCCESS:
            return False
        ev = r[1]
        try:
            if _drv.cuEventRecord(ev, _drv.CUstream(key))[0] is not SUCCESS:
                return False
            if _drv.cuStreamWaitEvent(sh, ev, 0)[0] is not SUCCESS:
                return False
        finally:
            _drv.cuEventDestroy(ev)
    return True


def free_async_now(stream: Stream, used_on: set[int], dptr: Any) -> Any:
    # A stream closed before the buffer keeps its handle until the buffer's release
    # (the buffer is one of its dependants): the free still goes on that stream, never
    # on the legacy stream, which would break any capture open on a blocking stream.
    sh = stream._h
    if sh is None:
        sh = stream._state.handle
    if sh is not None and (not used_on or order_free(sh, used_on)):
        return _drv.cuMemFreeAsync(dptr, sh)
    # Work on another stream that used the memory could not be ordered before the
    # free (that stream is gone): wait for the whole context, then free.
    r = _drv.cuCtxSynchronize()
    if r[0] is not SUCCESS:
        return r
    return _drv.cuMemFreeAsync(dptr, LEGACY if sh is None else sh)


def free_async(ctx_h: Any, stream: Stream, used_on: set[int], dptr: Any) -> Any:
    """The release of a stream-ordered buffer: ``cuMemFreeAsync`` on its stream.

    Ordered after the work that cudriver enqueued on other streams using the buffer
    (kernel launches, prepared launches, graph launches, copies), which ``used_on``
    lists.
    """
    return call_in_context(ctx_h, free_async_now, stream, used_on, dptr)
