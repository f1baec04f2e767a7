"""The one "make this context current for a moment" helper.

:func:`enter_context` / :func:`leave_context` push a context only when it is not
current already; :func:`call_in_context` is their form for releases, which never
raise. They work on raw handles, below every class (``device`` re-exports them).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cuda.bindings import driver as _drv

from .._runtime._bindings import SUCCESS
from ..errors import GUARD, error_for

__all__ = ["enter_context", "leave_context", "call_in_context"]

# Unchecked: the current-context test runs on hot paths and in releases.


def enter_context(ctx_h: Any, key: int) -> bool:
    """Make the context ``ctx_h`` (whose int value is ``key``) current unless it is.

    Returns True when it was pushed (``cuCtxPushCurrent``): then call
    :func:`leave_context` with that result when done.
    """
    if GUARD.armed:
        GUARD.check()
    r = _drv.cuCtxGetCurrent()
    if r[0] is SUCCESS and r[1] is not None and int(r[1]) == key:
        return False
    p = _drv.cuCtxPushCurrent(ctx_h)
    if p[0] is not SUCCESS:
        raise error_for(p[0], _drv.cuCtxPushCurrent)
    return True


def leave_context(pushed: bool) -> None:
    """Undo :func:`enter_context`: pop the context it pushed, if it pushed one."""
    if pushed:
        _drv.cuCtxPopCurrent()


def call_in_context(ctx_h: Any, fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` with the context ``ctx_h`` current; returns ``fn``'s status tuple.

    For releases: it raises nothing of its own; a failed push is returned as the
    push's status tuple.
    """
    r = _drv.cuCtxGetCurrent()
    if r[0] is SUCCESS and r[1] is not None and int(r[1]) == int(ctx_h):
        return fn(*args)
    p = _drv.cuCtxPushCurrent(ctx_h)
    if p[0] is not SUCCESS:
        return p
    try:
        return fn(*args)
    finally:
        _drv.cuCtxPopCurrent()
