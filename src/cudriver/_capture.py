"""Keep-alive bookkeeping for stream captures.

While a capture started by :meth:`cudriver.Stream.begin_capture` is active, objects
that captured work refers to (buffers passed to kernels, host callables, host memory
of copies) are appended to the capture's keep list, found by the capture id the
driver reports for the stream the work is enqueued on. This also covers streams
forked into the capture. When the capture ends, the list moves into the
:class:`~cudriver.Graph`, and every :class:`~cudriver.GraphExec` made from it holds it.

When no capture is active in the process, :func:`keep` costs one dict test.
"""

from __future__ import annotations

import threading
from typing import Any

from cuda.bindings import driver as _drv

from . import _bindings

__all__ = ["ACTIVE", "keep", "register", "unregister", "capture_id"]

#: capture id -> objects to keep alive; non-empty only while a capture is active.
ACTIVE: dict[int, list[Any]] = {}
_lock = threading.Lock()
_ACTIVE_STATUS = _drv.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_ACTIVE


def register(cid: int) -> list[Any]:
    """Start a keep list for capture ``cid``."""
    with _lock:
        lst = ACTIVE.setdefault(cid, [])
    return lst


def unregister(cid: int) -> list[Any]:
    """End capture ``cid``'s keep list and return it."""
    with _lock:
        return ACTIVE.pop(cid, [])


def capture_id(stream_handle: Any) -> int | None:
    """The id of the capture ``stream_handle`` is part of, or None."""
    _status, info = _bindings.capture_info(stream_handle)
    if info is None or info.status != _ACTIVE_STATUS:
        return None
    return info.id


def keep(stream_handle: Any, *objs: Any) -> None:
    """Keep ``objs`` alive with the graph being captured on ``stream_handle``, if any."""
    if not ACTIVE:
        return
    cid = capture_id(stream_handle)
    if cid is None:
        return
    lst = ACTIVE.get(cid)
    if lst is not None:
        lst.extend(objs)
