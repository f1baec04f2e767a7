"""How a host function tells an event loop's notifier that its work is done.

Two channels, both with no Python on the driver's thread:

- :class:`Eventfds` (Linux, compiled core): a Linux ``eventfd`` counter that the core's
  C host function adds 1 to (one ``write``). The event loop watches the descriptor
  itself (``loop.add_reader``), so a completion wakes the loop directly.
- :class:`Semaphores` (any POSIX C library, also in pure mode): an unnamed POSIX
  semaphore posted by libc's ``sem_post``; a waiter thread takes the posts and wakes
  the loop (``call_soon_threadsafe``): one hand-off more.

The loop-side helpers the notifiers share live here too: whether a loop runs on this
thread, and making and destroying the driver handles (events, private streams) they
keep.

Both channels give the same four operations on an int handle (the semaphore's address or the
descriptor): ``new``, ``post`` (from Python), ``take`` (the posts arrived, waiting up to
a timeout) and ``free``, which may run only once every post enqueued has been taken:
a post to a freed semaphore writes freed memory, and one to a closed descriptor could
reach whatever file reuses its number.
"""

from __future__ import annotations

import asyncio
import ctypes
import errno
import os
import select
import sys
import time
import warnings
from typing import Any

from cuda.bindings import driver as _drv

from .._context.device import Context, enter_context, leave_context
from .._runtime._bindings import SUCCESS
from ..errors import GUARD, CudaWarning, NotSupportedError, error_for
from ._core import eventfd_post_address

__all__ = [
    "Eventfds",
    "Semaphores",
    "channel",
    "create",
    "eventfds",
    "on_loop_thread",
    "release",
    "semaphores",
]

_SEM_BYTES = 64


class _Timespec(ctypes.Structure):
    _fields_ = (("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long))


def _open_libc() -> Any:
    """The C library, with errno kept by ctypes (``use_errno``)."""
    if os.name != "posix":
        raise OSError(errno.ENOSYS, f"{sys.platform} is not a POSIX system")
    return ctypes.CDLL(None, use_errno=True)


def _bind(lib: Any, name: str, restype: Any, *argtypes: Any) -> Any:
    fn = getattr(lib, name)
    fn.restype = restype
    fn.argtypes = argtypes
    return fn


class Semaphores:
    """libc's unnamed POSIX semaphores through ctypes, and ``sem_post``'s address.

    The constructor makes and frees one, so ``sem_init`` failing (``ENOSYS``) refuses.
    """

    __slots__ = ("_alloc", "_destroy", "_free", "_init", "_post", "_timed", "_try", "post_address")

    #: Whether the event loop reads the channel itself (``add_reader``): no.
    loop_reads = False

    def __init__(self, lib: Any) -> None:
        vp, i = ctypes.c_void_p, ctypes.c_int
        self._init = _bind(lib, "sem_init", i, vp, i, ctypes.c_uint)
        self._destroy = _bind(lib, "sem_destroy", i, vp)
        self._post = _bind(lib, "sem_post", i, vp)
        self._timed = _bind(lib, "sem_timedwait", i, vp, ctypes.POINTER(_Timespec))
        self._try = _bind(lib, "sem_trywait", i, vp)
        self._alloc = _bind(
            lib, "posix_memalign", i, ctypes.POINTER(vp), ctypes.c_size_t, ctypes.c_size_t
        )
        self._free = _bind(lib, "free", None, vp)
        addr = ctypes.cast(self._post, vp).value
        if not addr:
            raise OSError(errno.ENOSYS, "sem_post has no address")
        #: The address of ``sem_post``: the host function every future enqueues.
        self.post_address: int = addr
        self.free(self.new())

    def new(self) -> int:
        """A new semaphore (value 0) in 64 bytes of C memory; its address."""
        p = ctypes.c_void_p()
        rc = self._alloc(ctypes.byref(p), _SEM_BYTES, _SEM_BYTES)
        if rc or not p.value:
            raise OSError(rc or errno.ENOMEM, f"posix_memalign failed: {os.strerror(rc)}")
        ctypes.memset(p.value, 0, _SEM_BYTES)
        if self._init(p.value, 0, 0):
            e = ctypes.get_errno()
            self._free(p.value)
            raise OSError(e, f"sem_init failed: {os.strerror(e)}")
        return p.value

    def free(self, sem: int) -> None:
        """Destroy ``sem`` and free its memory: only once no post can reach it."""
        self._destroy(sem)
        self._free(sem)

    def post(self, sem: int) -> None:
        """``sem_post`` from Python (a wake)."""
        self._post(sem)

    def take(self, sem: int, timeout: float) -> int:
        """Wait up to ``timeout`` seconds for a post; take every post waiting; their number.

        Blocks in ``sem_timedwait`` without the GIL; 0 when the time ran out.
        """
        t = time.time() + timeout
        ts = _Timespec(int(t), int((t - int(t)) * 1e9))
        while self._timed(sem, ctypes.byref(ts)):
            e = ctypes.get_errno()
            if e == errno.ETIMEDOUT:
                return 0
            if e != errno.EINTR:
                raise OSError(e, f"sem_timedwait failed: {os.strerror(e)}")
        n = 1
        while True:
            if self._try(sem) == 0:
                n += 1
            elif ctypes.get_errno() != errno.EINTR:
                return n


class Eventfds:
    """Linux ``eventfd`` counters, posted by the compiled core's C host function.

    ``post_address`` is a C function of one argument (the descriptor, as a pointer)
    that adds 1 to the counter with one ``write``; it takes no GIL.
    """

    __slots__ = ("post_address",)

    #: Whether the event loop reads the channel itself (``add_reader``): yes.
    loop_reads = True

    def __init__(self, post_address: int) -> None:
        self.post_address = post_address

    def new(self) -> int:
        """A new counter (0), non-blocking and closed on exec; its descriptor."""
        return os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)

    def free(self, fd: int) -> None:
        """Close ``fd``: only once no post can reach it."""
        os.close(fd)

    def post(self, fd: int) -> None:
        """Add 1 from Python (a wake)."""
        os.eventfd_write(fd, 1)

    def take(self, fd: int, timeout: float) -> int:
        """Wait up to ``timeout`` seconds (0: not at all) for posts; take them; their number."""
        if timeout > 0:
            select.select([fd], [], [], timeout)  # retried on EINTR by Python (PEP 475)
        try:
            return os.eventfd_read(fd)
        except BlockingIOError:
            return 0


_API: Semaphores | None = None
_API_ERROR: str | None = None
_EVENTFDS: Eventfds | None = None


def semaphores() -> Semaphores:
    """The process's :class:`Semaphores`; :class:`~cudriver.NotSupportedError` without them."""
    global _API, _API_ERROR
    # No lock: two threads that race here each make a working object; one is kept.
    if _API is None and _API_ERROR is None:
        try:
            _API = Semaphores(_open_libc())
        except (OSError, AttributeError, TypeError, ValueError) as exc:
            _API_ERROR = str(exc) or type(exc).__name__
    if _API is not None:
        return _API
    raise NotSupportedError(
        _drv.CUresult.CUDA_ERROR_NOT_SUPPORTED,
        "cudriver.aio",
        "awaiting streams and events needs unnamed POSIX semaphores (sem_init, "
        f"sem_post, sem_timedwait) from the C library, as Linux has: {_API_ERROR}",
    )


def eventfds() -> Eventfds | None:
    """:class:`Eventfds` where there is ``eventfd``; else None."""
    global _EVENTFDS
    if _EVENTFDS is None and hasattr(os, "eventfd"):
        _EVENTFDS = Eventfds(eventfd_post_address())
    return _EVENTFDS


def channel() -> Semaphores | Eventfds:
    """The channel new notifiers use: eventfds where possible, else semaphores.

    Raises :class:`~cudriver.NotSupportedError` where the C library has no semaphores
    (they are checked either way: the refusal does not depend on the build).
    """
    sems = semaphores()
    fds = eventfds()
    return fds if fds is not None else sems


def on_loop_thread(loop: Any) -> bool:
    """Whether ``loop`` is the loop running in this thread."""
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:  # no loop runs here
        return False


def create(ctx: Context, fn: Any, flags: int) -> Any:
    """``fn(flags)`` (``cuEventCreate`` or ``cuStreamCreate``) in ``ctx``; the new handle."""
    pushed = enter_context(ctx._closed_check(), ctx._key)
    try:
        r = fn(flags)
    finally:
        leave_context(pushed)
    if r[0] is not SUCCESS:
        raise error_for(r[0], fn)
    return r[1]


def release(fn: Any, h: Any, what: str) -> None:
    """Destroy a handle of cudriver.aio's; a failure becomes a :class:`~cudriver.CudaWarning`."""
    if GUARD.forked or sys.is_finalizing():
        return
    try:
        r = fn(h)
    except Exception as exc:  # the driver library went away
        msg = f"destroying a cudriver.aio {what} failed: {exc!r}"
    else:
        if r[0] is SUCCESS:
            return
        msg = f"destroying a cudriver.aio {what} failed: {error_for(r[0], fn)}"
    try:
        warnings.warn(msg, CudaWarning, stacklevel=2)
    except Exception:  # warnings turned into errors must not escape
        pass
