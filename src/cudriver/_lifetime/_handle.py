"""The owning-handle base shared by every handle class, and leases.

:class:`Handle` is the Python base of every handle class; its C fields and the release
machinery (states, pins, the queue of deferred releases and the thread that runs it)
are in ``_release``, whose docstring says when a release runs. Its names used across
the package are re-exported here.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, NoReturn

from typing_extensions import Self

from ..errors import ClosedError, OutOfMemoryError, pickle_refusal
from ._release import (
    HandleRoot,
    Lease,
    State,
    deferred,
    drain,
    drain_quick,
    drop_deps,
    held,
    link,
    pending_releases,
    queue_if_free,
    reclaim,
    release,
    release_state,
    release_with,
    releasing,
    settle,
    start_releasing_thread,
    unlink,
    unpinned,
    wake,
)

__all__ = [
    "Handle",
    "Lease",
    "release_state",
    "drain",
    "drain_quick",
    "deferred",
    "pending_releases",
    "unpinned",
    "release_with",
    "wake",
    "settle",
    "start_releasing_thread",
    "releasing",
    "reclaim",
    "reclaiming",
]

Release = Callable[[Any], Any]


def reclaiming(call: Callable[..., Any], *args: Any) -> Any:
    """``call(*args)``, a checked call that allocates; on OutOfMemoryError, once more.

    The second try comes after the queued releases ran (:func:`reclaim`): a dropped
    buffer is freed on the releasing thread, soon but not at once, and an allocation
    right after it must not fail for memory that is about to come back.
    """
    try:
        return call(*args)
    except OutOfMemoryError:
        reclaim()
    return call(*args)


#: The release state of a handle (C fields; see ``_release.State``).
_State = State
__all__ += ["held", "link", "unlink", "drop_deps", "release", "queue_if_free"]


class NeverOpenedError(ClosedError, AttributeError):
    """A field of an object made without its constructor: closed, and missing.

    A :class:`~cudriver.ClosedError` for the caller, and an ``AttributeError`` for
    ``getattr(obj, name, default)`` and ``hasattr``, which then answer as for any
    missing attribute.
    """


class Handle(HandleRoot):
    """Base class of every object that wraps a driver handle.

    Subclasses call :meth:`_init_handle` from their constructors and keep the raw
    handle in ``_h`` (``None`` once closed), so a hot method tests ``self._h`` and
    raises :class:`~cudriver.ClosedError` before any driver call.

    ``_h``, ``_key``, ``_state``, ``_owned``, ``_owner``, ``_finalizer`` and the weak
    reference slot are C fields of the compiled root type (``_release.HandleRoot``). An
    object collected while open queues its release from that type's deallocator, so
    no ``weakref.finalize`` is made per object (``_finalizer`` is None, except for
    the few classes that arm one themselves).
    """

    __slots__ = ()  # the fields are HandleRoot's C fields

    _kind: ClassVar[str] = "Handle"

    _h: Any
    _key: int
    _owned: bool
    _owner: Any
    _state: _State
    _finalizer: weakref.finalize[Any, Any] | None

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
        used_on: set[int] | None = None,
    ) -> None:
        self._h = handle
        self._key = int(handle)
        self._owned = owned
        self._owner = owner
        start_releasing_thread()
        if deferred:  # those that may wait for the device: by the releasing thread
            drain_quick()
        state = _State(handle, release if owned else None, func, self._kind, keep, on_release)
        if used_on is not None:
            state.used_on = used_on
        self._state = state
        self._finalizer = None  # the root type's deallocator queues the release

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
        fin = self._finalizer
        if fin is not None:
            fin.detach()
        release_state(self._state)
        if deferred:  # those that may wait for the device: by the releasing thread
            drain_quick()

    def _pin_target(self) -> Handle:
        """What a driver call on this object pins: itself (a kernel: its module)."""
        return self

    def _lease(self) -> Lease:
        """A lease that keeps this handle's release waiting while it lives."""
        if self._h is None:
            self._raise_closed()
        return Lease(self._state, self)

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

    if not TYPE_CHECKING:  # at run time only: type checkers keep catching misspelt names

        def __getattr__(self, name: str) -> Any:
            # Only when the attribute is missing: on an object that was never opened (made
            # with ``cls.__new__(cls)``, no constructor ran) that is one of its fields, and
            # the answer is the one a closed object gives, not an AttributeError.
            # (A property whose field is missing lands here too, under its own name.)
            never_opened: Any = self._key is None
            if never_opened and not name.startswith("__"):
                raise NeverOpenedError(
                    f"{self._kind} is closed (never opened: made without its constructor)"
                )
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

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
        raise TypeError(self._pickle_refusal())

    def _travel_refusal(self) -> str | None:
        """Why this object cannot travel to another process; None if it can (see _share)."""
        return "it owns a driver handle of this process"

    def _pickle_refusal(self) -> str:
        """What ``pickle.dumps`` says (and ``multiprocessing``, for what cannot travel)."""
        return pickle_refusal(self._kind, self._travel_refusal())
