"""CUDA contexts: primary (retained) and created, and the current-context stack."""

from __future__ import annotations

import threading
from collections.abc import Callable
from enum import IntEnum, IntFlag
from typing import Any, TypeVar

from cuda.bindings import driver as _drv
from typing_extensions import Self

from . import _bindings, _callbacks
from ._bindings import SUCCESS
from ._handle import Handle
from ._runtime import init
from .device import Device
from .errors import make_error

__all__ = ["Context", "ContextFlags", "Limit", "current_or_default"]

T = TypeVar("T")


class ContextFlags(IntFlag):
    """Flags for :meth:`Context.create` (``CUctx_flags``)."""

    SCHED_AUTO = 0
    SCHED_SPIN = 1
    SCHED_YIELD = 2
    SCHED_BLOCKING_SYNC = 4
    MAP_HOST = 8
    LMEM_RESIZE_TO_MAX = 16


class Limit(IntEnum):
    """Context limits (``CUlimit``) for :meth:`Context.get_limit` / :meth:`Context.set_limit`."""

    STACK_SIZE = 0
    PRINTF_FIFO_SIZE = 1
    MALLOC_HEAP_SIZE = 2
    DEV_RUNTIME_SYNC_DEPTH = 3
    DEV_RUNTIME_PENDING_LAUNCH_COUNT = 4
    MAX_L2_FETCH_GRANULARITY = 5
    PERSISTING_L2_CACHE_SIZE = 6


ContextFlags.__module__ = "cudriver"
Limit.__module__ = "cudriver"

_NULL = 0


class Context(Handle):
    """A CUDA context.

    Obtain one with :meth:`Device.primary_context` (retained, released on close),
    :meth:`Context.create` (destroyed on close), :meth:`Context.current` or
    :meth:`Context.from_handle` (borrowed).

    ``with ctx:`` pushes the context on the calling thread's stack
    (``cuCtxPushCurrent``) and pops it on exit (``cuCtxPopCurrent``), restoring the
    context that was current before, also when the block raises. Unlike other
    handle classes, leaving the block does not close the context; call
    :meth:`close`.
    """

    __slots__ = ("_device", "_primary")

    _kind = "Context"

    _device: Device | None
    _primary: bool

    def __init__(self) -> None:
        raise TypeError(
            "use Device.primary_context(), Context.create(), Context.current() "
            "or Context.from_handle()"
        )

    @classmethod
    def _new(
        cls, h: Any, device: Device | None, *, primary: bool, owned: bool, owner: Any = None
    ) -> Context:
        self = object.__new__(cls)
        self._device = device
        self._primary = primary
        if primary and owned:
            assert device is not None
            cudev = device.handle
            self._init_handle(
                h,
                release=lambda _h: _drv.cuDevicePrimaryCtxRelease(cudev),
                func="cuDevicePrimaryCtxRelease",
                owner=owner,
                on_release=_forget_borrowed(int(h)),
            )
        else:
            self._init_handle(
                h,
                release=_drv.cuCtxDestroy,
                func="cuCtxDestroy",
                owned=owned,
                owner=owner,
                on_release=_forget_borrowed(int(h)) if owned else None,
            )
        return self

    @classmethod
    def _retain_primary(cls, device: Device) -> Context:
        r = _drv.cuDevicePrimaryCtxRetain(device.handle)
        if r[0] is not SUCCESS:
            raise make_error(r[0], "cuDevicePrimaryCtxRetain")
        return cls._new(r[1], device, primary=True, owned=True)

    @classmethod
    def create(
        cls, device: Device | int = 0, flags: ContextFlags | int = ContextFlags.SCHED_AUTO
    ) -> Context:
        """Create a new context on ``device`` (``cuCtxCreate``); destroyed on close.

        The driver makes a new context current; this method pops it again so that
        the calling thread's current context is unchanged. Use ``with ctx:`` or
        :meth:`set_current` to make it current. Allocates device resources.
        """
        dev = Device(device) if not isinstance(device, Device) else device
        r = _bindings.ctx_create(int(flags), dev.handle)
        if r[0] is not SUCCESS:
            raise make_error(r[0], "cuCtxCreate")
        ctx = cls._new(r[1], dev, primary=False, owned=True)
        p = _drv.cuCtxPopCurrent()
        if p[0] is not SUCCESS:  # pragma: no cover - the driver just pushed it
            ctx.close()
            raise make_error(p[0], "cuCtxPopCurrent")
        return ctx

    @classmethod
    def from_handle(cls, handle: Any, owner: Any = None) -> Context:
        """Wrap a foreign ``CUcontext`` (or int) without owning it.

        ``owner`` is kept alive as long as the returned object.
        """
        h = handle if isinstance(handle, _drv.CUcontext) else _drv.CUcontext(int(handle))
        if int(h) == _NULL:
            raise ValueError("cannot wrap a NULL context handle")
        return cls._new(h, None, primary=False, owned=False, owner=owner)

    @classmethod
    def current(cls) -> Context | None:
        """The calling thread's current context (``cuCtxGetCurrent``), or None.

        The result is borrowed: closing it does not release anything.
        """
        init()
        r = _drv.cuCtxGetCurrent()
        if r[0] is not SUCCESS:
            raise make_error(r[0], "cuCtxGetCurrent")
        if int(r[1]) == _NULL:
            return None
        return cls._new(r[1], None, primary=False, owned=False)

    # -- current-context stack ----------------------------------------------------
    def set_current(self) -> None:
        """Make this context current on the calling thread (``cuCtxSetCurrent``).

        The calling thread keeps a reference to this object until another context is
        made current through :meth:`set_current`, so
        ``dev.primary_context().set_current()`` does not release the context at once.
        """
        r = _drv.cuCtxSetCurrent(self.handle)
        if r[0] is not SUCCESS:
            raise make_error(r[0], "cuCtxSetCurrent")
        _thread_current.ctx = self

    def push(self) -> None:
        """Push this context on the calling thread's stack (``cuCtxPushCurrent``)."""
        r = _drv.cuCtxPushCurrent(self.handle)
        if r[0] is not SUCCESS:
            raise make_error(r[0], "cuCtxPushCurrent")

    @staticmethod
    def pop() -> None:
        """Pop the calling thread's current context (``cuCtxPopCurrent``)."""
        r = _drv.cuCtxPopCurrent()
        if r[0] is not SUCCESS:
            raise make_error(r[0], "cuCtxPopCurrent")

    def __enter__(self) -> Self:
        self.push()
        return self

    def __exit__(self, *exc: object) -> None:
        self.pop()

    def _scope(self) -> _Scope:
        """Make this context current for a ``with`` block, pushing only when it is not."""
        return _Scope(self)

    def _call(self, fn: Callable[..., tuple[Any, ...]], name: str, *args: Any) -> Any:
        with self._scope():
            r = fn(*args)
        if r[0] is not SUCCESS:
            raise make_error(r[0], name)
        return r[1] if len(r) == 2 else r[1:]

    # -- properties -----------------------------------------------------------------
    @property
    def device(self) -> Device:
        """The context's device (``cuCtxGetDevice`` on first use)."""
        if self._device is None:
            dev = self._call(_drv.cuCtxGetDevice, "cuCtxGetDevice")
            self._device = Device(int(dev))
        return self._device

    @property
    def is_primary(self) -> bool:
        """Whether this object was obtained from :meth:`Device.primary_context`."""
        return self._primary

    @property
    def api_version(self) -> int:
        """The context's API version (``cuCtxGetApiVersion``)."""
        r = _drv.cuCtxGetApiVersion(self.handle)
        if r[0] is not SUCCESS:
            raise make_error(r[0], "cuCtxGetApiVersion")
        return int(r[1])

    @property
    def stream_priority_range(self) -> tuple[int, int]:
        """``(least, greatest)`` stream priorities (``cuCtxGetStreamPriorityRange``).

        Numerically lower values are higher priorities: greatest is e.g. ``-5``.
        """
        least, greatest = self._call(
            _drv.cuCtxGetStreamPriorityRange, "cuCtxGetStreamPriorityRange"
        )
        return int(least), int(greatest)

    def synchronize(self) -> None:
        """Wait for all work in this context (``cuCtxSynchronize``); blocks the thread.

        Then raises :class:`~cudriver.HostCallbackError` if a host function that ran
        on a stream of this context raised and no ``synchronize()`` collected it yet.
        """
        self._call(_drv.cuCtxSynchronize, "cuCtxSynchronize")
        if _callbacks.PENDING:
            # re-raise errors of host functions that ran on this context's streams
            _callbacks.after_context_sync(self._key)

    # -- limits -----------------------------------------------------------------------
    def get_limit(self, limit: Limit | int) -> int:
        """Read a context limit (``cuCtxGetLimit``)."""
        return int(self._call(_drv.cuCtxGetLimit, "cuCtxGetLimit", _limit(limit)))

    def set_limit(self, limit: Limit | int, value: int) -> None:
        """Set a context limit (``cuCtxSetLimit``); may allocate device memory."""
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"limit value must be a non-negative int, not {value!r}")
        with self._scope():
            r = _drv.cuCtxSetLimit(_limit(limit), value)
        if r[0] is not SUCCESS:
            raise make_error(r[0], "cuCtxSetLimit")

    @property
    def stack_size(self) -> int:
        """Per-thread stack size in bytes (``CU_LIMIT_STACK_SIZE``)."""
        return self.get_limit(Limit.STACK_SIZE)

    @stack_size.setter
    def stack_size(self, value: int) -> None:
        self.set_limit(Limit.STACK_SIZE, value)

    @property
    def printf_fifo_size(self) -> int:
        """Size of the device ``printf`` FIFO in bytes (``CU_LIMIT_PRINTF_FIFO_SIZE``)."""
        return self.get_limit(Limit.PRINTF_FIFO_SIZE)

    @printf_fifo_size.setter
    def printf_fifo_size(self, value: int) -> None:
        self.set_limit(Limit.PRINTF_FIFO_SIZE, value)

    @property
    def malloc_heap_size(self) -> int:
        """Size of the device ``malloc`` heap in bytes (``CU_LIMIT_MALLOC_HEAP_SIZE``)."""
        return self.get_limit(Limit.MALLOC_HEAP_SIZE)

    @malloc_heap_size.setter
    def malloc_heap_size(self, value: int) -> None:
        self.set_limit(Limit.MALLOC_HEAP_SIZE, value)

    def _repr_extra(self) -> str:
        parts = []
        if self._device is not None:
            parts.append(f"device={self._device.ordinal}")
        if self._primary:
            parts.append("primary")
        return " ".join(parts)


def _forget_borrowed(key: int) -> Callable[[], None]:
    def forget() -> None:
        _borrowed.pop(key, None)

    return forget


class _Scope:
    """``with ctx._scope():`` makes ``ctx`` current for the block (push/pop if needed)."""

    __slots__ = ("ctx", "pushed")

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.pushed = False

    def __enter__(self) -> None:
        ctx = self.ctx
        h = ctx._closed_check()
        r = _cuCtxGetCurrent()
        if r[0] is SUCCESS and r[1] is not None and int(r[1]) == ctx._key:
            return
        p = _drv.cuCtxPushCurrent(h)
        if p[0] is not SUCCESS:
            raise make_error(p[0], "cuCtxPushCurrent")
        self.pushed = True

    def __exit__(self, *exc: object) -> None:
        if self.pushed:
            self.pushed = False
            _drv.cuCtxPopCurrent()


def _limit(limit: Any) -> Any:
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise TypeError(f"limit must be a cudriver.Limit, not {type(limit).__name__}")
    try:
        return _drv.CUlimit(int(limit))
    except ValueError:
        raise ValueError(f"unknown context limit {int(limit)}") from None


_cuCtxGetCurrent = _drv.cuCtxGetCurrent
_thread_current = threading.local()
#: Borrowed wrappers of contexts seen current, by handle value: made once, so finding
#: the current context costs one driver call and a dict lookup. Forgotten when an
#: owned Context of the same handle is closed (the handle may then be reused).
_borrowed: dict[int, Context] = {}
_default_lock = threading.Lock()
_default: Context | None = None


def current_or_default() -> Context:
    """The current context; if none, device 0's primary context, made current.

    Like the CUDA runtime API, a thread with no current context gets device 0's
    primary context (retained once per process and kept until exit).
    """
    global _default
    r = _cuCtxGetCurrent()
    if r[0] is not SUCCESS:
        init()  # the usual reason: cuInit has not been called yet
        r = _cuCtxGetCurrent()
        if r[0] is not SUCCESS:
            raise make_error(r[0], "cuCtxGetCurrent")
    key = int(r[1])
    if key != _NULL:
        ctx = _borrowed.get(key)
        if ctx is None or ctx._h is None:
            ctx = _borrowed[key] = Context._new(r[1], None, primary=False, owned=False)
        return ctx
    init()
    with _default_lock:
        if _default is None:
            _default = Device(0).primary_context()
    _default.set_current()
    return _default
