"""Shared owning-handle machinery reused by every handle class.

An owning object keeps its driver handle in ``_h`` and a small slotted
:class:`_State` that a :class:`weakref.finalize` releases exactly once: on
``close()``, at the end of a ``with`` block, or when the object is collected.
The release never runs during interpreter shutdown or in a forked child, and a
failing release becomes a :class:`~cudriver.CudaWarning`, never an exception
from a finaliser. Objects the state keeps alive (``keep``) are dropped only after
the handle is released, so dependants are always destroyed before what they
depend on (a Stream before its Context, a GraphExec before its Graph).
"""

from __future__ import annotations

import os
import sys
import warnings
import weakref
from collections.abc import Callable
from typing import Any, ClassVar, NoReturn

from typing_extensions import Self

from ._bindings import SUCCESS
from .errors import ClosedError, CudaWarning, make_error

__all__ = ["Handle", "release_state"]

Release = Callable[[Any], Any]


class _State:
    """What the finaliser needs; never refers back to the owning object."""

    __slots__ = ("func", "handle", "keep", "kind", "on_release", "pid", "release")

    def __init__(
        self,
        handle: Any,
        release: Release | None,
        func: str,
        kind: str,
        keep: tuple[Any, ...],
        on_release: Callable[[], None] | None,
    ) -> None:
        self.handle = handle
        self.release = release
        self.func = func
        self.pid = os.getpid()
        self.kind = kind
        self.keep: tuple[Any, ...] | None = keep
        self.on_release = on_release


def release_state(state: _State) -> None:
    """Release ``state``'s handle once; never raises (failures become warnings)."""
    handle = state.handle
    if handle is None:
        return
    state.handle = None
    release, state.release = state.release, None
    on_release, state.on_release = state.on_release, None
    try:
        if release is not None and not sys.is_finalizing() and os.getpid() == state.pid:
            try:
                r = release(handle)
            except Exception as exc:  # the driver or its library went away
                _warn(f"{state.kind} release failed: {exc!r}")
            else:
                if r is not None and r[0] is not SUCCESS:
                    _warn(f"releasing a {state.kind} failed: {make_error(r[0], state.func)}")
        if on_release is not None:
            try:
                on_release()
            except Exception as exc:
                _warn(f"{state.kind} release hook failed: {exc!r}")
    finally:
        # Dependencies go only after the handle: dependants are released first.
        state.keep = None


def _warn(msg: str) -> None:
    try:
        warnings.warn(msg, CudaWarning, stacklevel=3)
    except Exception:  # warnings turned into errors must not escape a finaliser
        try:
            sys.stderr.write(f"cudriver: {msg}\n")
        except Exception:  # pragma: no cover - stderr gone at shutdown
            pass


class Handle:
    """Base class of every object that wraps a driver handle.

    Subclasses call :meth:`_init_handle` from their constructors and keep the raw
    handle in ``_h`` (``None`` once closed), so a hot method tests ``self._h`` and
    raises :class:`~cudriver.ClosedError` before any driver call.
    """

    __slots__ = ("__weakref__", "_finalizer", "_h", "_key", "_owned", "_owner", "_state")

    _kind: ClassVar[str] = "Handle"

    _h: Any
    _key: int
    _owned: bool
    _owner: Any
    _state: _State
    _finalizer: weakref.finalize[Any, Any]

    def _init_handle(
        self,
        handle: Any,
        *,
        release: Release | None,
        func: str,
        owned: bool = True,
        owner: Any = None,
        keep: tuple[Any, ...] = (),
        on_release: Callable[[], None] | None = None,
    ) -> None:
        self._h = handle
        self._key = int(handle)
        self._owned = owned
        self._owner = owner
        state = _State(handle, release if owned else None, func, self._kind, keep, on_release)
        self._state = state
        fin = weakref.finalize(self, release_state, state)
        fin.atexit = False  # no driver calls at interpreter exit: the driver cleans up
        self._finalizer = fin

    # -- life cycle ---------------------------------------------------------------
    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called (or the object was never opened)."""
        return getattr(self, "_h", None) is None

    @property
    def owned(self) -> bool:
        """Whether this object frees its handle (False for ``from_handle`` objects)."""
        return self._owned

    def close(self) -> None:
        """Release the handle now (for owned objects); idempotent.

        Borrowed objects only forget the handle. A failing release is reported as a
        :class:`~cudriver.CudaWarning`.
        """
        if getattr(self, "_h", None) is None:
            return
        self._h = None
        self._finalizer()

    def __enter__(self) -> Self:
        self._closed_check()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _closed_check(self) -> Any:
        h = getattr(self, "_h", None)
        if h is None:
            self._raise_closed()
        return h

    def _raise_closed(self) -> NoReturn:
        raise ClosedError(f"{self._kind} is closed")

    @property
    def handle(self) -> Any:
        """The raw ``cuda.bindings.driver`` handle, for raw calls."""
        h = self._h
        if h is None:
            self._raise_closed()
        return h

    def __int__(self) -> int:
        if self._h is None:
            self._raise_closed()
        return self._key

    # -- identity -----------------------------------------------------------------
    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Handle):
            return NotImplemented
        return type(self) is type(other) and self._key == other._key

    def __hash__(self) -> int:
        return hash((type(self).__name__, self._key))

    def _repr_extra(self) -> str:
        return ""

    def __repr__(self) -> str:
        name = f"cudriver.{type(self).__name__}"
        if getattr(self, "_h", None) is None:
            return f"<{name} closed>"
        extra = self._repr_extra()
        own = "owned" if self._owned else "borrowed"
        return f"<{name} {self._key:#x}{' ' + extra if extra else ''} {own}>"

    def __reduce__(self) -> NoReturn:
        raise TypeError(f"cannot pickle a {self._kind}: it owns a driver handle")
