"""Pins: what keeps a handle's release waiting while a driver call uses the handle.

A call that hands a handle to the driver (a launch, a record, a wait, a query) pins the
handle's release state (:class:`~cudriver._handle._State`) for the call: a ``close()``
on another thread meanwhile only marks the state closing, and the release runs when
the last pin goes (:func:`~cudriver._handle.unpinned`). Pinned, then checked: a
``close()`` either came first (:class:`~cudriver.ClosedError`, nothing left pinned) or
sees the pin. The compiled core pins with a C counter instead (``State.busy``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Concatenate, TypeVar

from cuda.bindings import driver as _drv
from typing_extensions import ParamSpec

from .._runtime._bindings import SUCCESS
from ..errors import GUARD, error_for
from ._handle import Handle, _State, unpinned

_NOT_READY = _drv.CUresult.CUDA_ERROR_NOT_READY

__all__ = [
    "call_pinned",
    "call_pinned2",
    "pin",
    "pin2",
    "pin_all",
    "pinned",
    "query_result",
    "unpin",
    "unpin2",
    "unpin_all",
]


def pin2(a: Handle | None, b: Any = None) -> tuple[_State | None, _State | None]:
    """Pin ``a`` and ``b`` for a driver call, then check that both are open.

    The hot paths' pin: ``a`` is the object whose handle the call uses (None: none),
    ``b`` an argument, pinned when it is a cudriver handle (a stream-like raw handle
    is not). Pinned, then checked: a ``close()`` on another thread either came first
    (:class:`~cudriver.ClosedError` here, nothing left pinned) or sees the pin and
    leaves the release to :func:`unpin2`. The states' ``handle`` fields stay set
    while pinned. Pair with ``unpin2(*pins)`` in a ``finally``.
    """
    sa = sb = None
    if a is not None:
        if a._h is None:
            a._raise_closed()
        sa = a._state
        sa.pins.append(None)
    if isinstance(b, Handle) and b._h is not None:
        sb = b._state
        sb.pins.append(None)
    if (a is not None and a._h is None) or (isinstance(b, Handle) and b._h is None):
        unpin2(sa, sb)
        (a if a is not None and a._h is None else b)._raise_closed()
    return sa, sb


def call_pinned(obj: Handle, fn: Any) -> Any:
    """``fn(handle)`` for ``obj``'s own handle, ``obj`` pinned for the call.

    The pure hot paths of the one-handle calls (a query, a wait): the call guard, the
    pin (see :func:`pin2`), the call; returns the status tuple.
    """
    st = obj._state
    if st is None:  # never opened (made without its constructor): nothing to pin
        obj._raise_closed()
    if GUARD.armed:
        GUARD.check()
    # pin2(obj) and unpin2, written out: this is every query's and wait's path.
    pins = st.pins
    pins.append(None)
    try:
        if obj._h is None:
            obj._raise_closed()
        return fn(st.handle)
    finally:
        pins.pop()
        if st.closing:
            unpinned(st)


def call_pinned2(a: Handle, b: Handle, fn: Any) -> Any:
    """``fn(a's handle, b's handle)`` for two cudriver objects, both pinned for the call.

    :func:`call_pinned` for a call on an object and a cudriver argument (an event
    recorded on a stream, a stream waiting for an event); returns the status tuple.
    """
    if GUARD.armed:
        GUARD.check()
    sa = a._state
    sb = b._state
    sa.pins.append(None)
    sb.pins.append(None)
    try:
        if a._h is None:
            a._raise_closed()
        if b._h is None:
            b._raise_closed()
        return fn(sa.handle, sb.handle)
    finally:
        sb.pins.pop()
        sa.pins.pop()
        if sb.closing:
            unpinned(sb)
        if sa.closing:
            unpinned(sa)


def query_result(r: Any, fn: Any) -> bool:
    """A query's answer from its status tuple: done, not yet, or the error raised."""
    s = r[0]
    if s is SUCCESS:
        return True
    if s is _NOT_READY:
        return False
    raise error_for(s, fn)


def unpin2(a: _State | None, b: _State | None) -> None:
    """End a :func:`pin2` (or the pins a hot path took on an object and its argument)."""
    if b is not None:
        b.pins.pop()
        if b.closing:
            unpinned(b)
    if a is not None:
        a.pins.pop()
        if a.closing:
            unpinned(a)


def pin(obj: Handle) -> _State:
    """Pin ``obj``'s release state for a driver call (see the module docstring).

    Pins what ``obj._pin_target()`` names (itself; a kernel's module; a conditional
    body's graph), then checks that both are open (raising
    :class:`~cudriver.ClosedError` if not): a ``close()`` on another thread either came
    first or sees the pin. Pair with :func:`unpin` in a ``finally``.
    """
    t = obj._pin_target()
    st = t._state
    if st is None:  # never opened (made without its constructor)
        (obj if obj._h is None else t)._raise_closed()
    st.pins.append(None)
    if obj._h is None or t._h is None:
        unpin(st)
        (obj if obj._h is None else t)._raise_closed()
    return st


def unpin(state: _State) -> None:
    """End a :func:`pin`; runs the release that waited for it, if any."""
    pins = state.pins
    pins.pop()
    if state.closing and not pins:
        unpinned(state)


def pin_all(*objs: Any) -> list[_State]:
    """:func:`pin` each cudriver handle among ``objs``; all or none.

    Others (raw handles, None) are skipped. A closed one unpins the others and raises.
    """
    states: list[_State] = []
    try:
        for o in objs:
            if isinstance(o, Handle):
                states.append(pin(o))
    except BaseException:
        unpin_all(states)
        raise
    return states


def unpin_all(states: list[_State]) -> None:
    """End a :func:`pin_all`."""
    for st in states:
        unpin(st)


_H = TypeVar("_H", bound="Handle")
_P = ParamSpec("_P")
_R = TypeVar("_R")


def pinned(method: Callable[Concatenate[_H, _P], _R]) -> Callable[Concatenate[_H, _P], _R]:
    """Keep ``self`` and the handles among the arguments pinned while the method runs.

    For the methods that call the driver off the hot paths (those pin by hand); see
    :func:`pin`. A closed ``self`` raises its own :class:`~cudriver.ClosedError` first.
    """

    @functools.wraps(method)
    def call(self: _H, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        if self._h is None:
            self._raise_closed()
        states = pin_all(self, *args, *kwargs.values())
        try:
            return method(self, *args, **kwargs)
        finally:
            unpin_all(states)

    return call
