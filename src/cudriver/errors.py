"""Exceptions, the shared ``@checked`` decorator and ``check()``.

Every ``cuda.bindings.driver`` function returns a tuple ``(CUresult, *outs)``.
:func:`checked` wraps such a function once so that it returns its outputs (none,
one value, or a tuple) and raises a :class:`CudaError` subclass, chosen from a table
keyed by the status code, when the call failed.

The classes' hot methods (launch, record, query, memory operations) do not go through
the generic wrapper, whose ``*args`` re-packing costs measurably on those paths: they
call the bound bindings function, test ``r[0] is not CUDA_SUCCESS`` by identity, and hand
failures to the same :func:`make_error`, so every error looks alike wherever it came
from.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable, Iterable
from typing import Any, Protocol, TypeVar

from cuda.bindings import driver as _drv

from ._runtime._guard import GuardCore, in_host_function

__all__ = [
    "CudaError",
    "CudaWarning",
    "ClosedError",
    "DriverNotFoundError",
    "OutOfMemoryError",
    "InvalidValueError",
    "InvalidHandleError",
    "InvalidDeviceError",
    "InvalidContextError",
    "NotInitializedError",
    "NoDeviceError",
    "NotReadyError",
    "NotSupportedError",
    "NotPermittedError",
    "NotFoundError",
    "StreamCaptureError",
    "LaunchError",
    "LaunchConfigError",
    "InvalidImageError",
    "GraphUpdateError",
    "HostCallbackError",
    "CompileError",
    "SyncWarning",
    "SyncError",
    "checked",
    "check",
    "error_class",
    "error_for",
    "make_error",
    "watch_capture_violations",
    "capturing_on_this_thread",
    "GUARD",
    "CallGuard",
    "pickle_refusal",
]

_SUCCESS = _drv.CUresult.CUDA_SUCCESS


def pickle_refusal(kind: str, why: str | None) -> str:
    """What pickling a cudriver object says: ``why`` it cannot travel, or None if it can.

    What can travel does so only through ``multiprocessing`` (see ``_share``).
    """
    if why is None:
        return (
            f"cudriver.{kind} travels between processes only through multiprocessing (a "
            "Queue, a Pipe, Process arguments, a ProcessPoolExecutor of the spawn or "
            "forkserver context): it carries file descriptors, which pickle.dumps cannot "
            "put into bytes"
        )
    return (
        f"cannot pickle a cudriver.{kind}: {why}; what travels between processes (through "
        "multiprocessing) is a MemoryPool(ipc=True), a DeviceBuffer allocated from one, a "
        "VirtualBuffer(handle_type='fd') and an Event(interprocess=True)"
    )


#: ``(code, func) -> lines``: what the driver's error log says of this thread's last
#: failed call (set by ``_bindings``, which reads the log).
DRIVER_LINES: Callable[[int, str], tuple[str, ...]] | None = None


def _restore(cls: type[BaseException], message: str) -> BaseException:
    err = cls.__new__(cls)
    RuntimeError.__init__(err, message)
    return err


def _no_calls() -> bool:
    """Whether no driver call may be made here (a forked child, a host function)."""
    return GUARD.forked or GUARD.in_host_function()


class CudaError(RuntimeError):
    """A driver call returned a status other than ``CUDA_SUCCESS``.

    Attributes
    ----------
    code : cuda.bindings.driver.CUresult
        The status the driver returned.
    name : str
        The error's name, e.g. ``"CUDA_ERROR_INVALID_VALUE"``.
    description : str
        The driver's description of the error.
    func : str
        The driver function that failed, e.g. ``"cuStreamCreate"``.

    driver_log : tuple of str
        What the driver's error log (CUDA 12.9+ drivers) says of this failure: the
        lines the failing call logged on this thread, the last being ``"Returning
        <code> (<name>) from <entry point>"``. Empty without a log, or when the
        failure was not a driver call's. The first line is also in ``str(err)``.
    """

    code: Any
    name: str
    description: str
    func: str
    driver_log: tuple[str, ...] = ()

    def __init__(self, code: Any, func: str, detail: str | None = None) -> None:
        self.code = _as_result(code)
        self.func = func
        self.name, self.description = _describe(int(code))
        msg = f"{func} failed: {self.name} ({int(code)}): {self.description}"
        if detail:
            msg = f"{msg} ({detail})"
        lines = DRIVER_LINES
        driver_call = func[:2] == "cu" and func[2:3].isupper()  # not "cudriver"
        if lines is not None and driver_call and not (GUARD.armed and _no_calls()):
            self.driver_log = log = lines(int(code), func)
            if log:
                msg = f"{msg}; the driver says: {log[0]}"
        super().__init__(msg)

    def __reduce__(self) -> tuple[Any, ...]:
        # The message and attributes as they are: made again elsewhere, the error
        # would read that process's driver log.
        state = dict(self.__dict__)
        state["code"] = int(self.code)
        if "node" in state:
            state["node"] = None  # a graph node does not travel
        return (_restore, (type(self), str(self)), state)

    def __setstate__(self, state: dict[str, Any] | None) -> None:
        if not state:
            return
        self.__dict__.update(state)
        if state.get("api") == "runtime":  # a cudaError_t (cudriver.compat.runtime)
            from cuda.bindings import runtime

            self.code = runtime.cudaError_t(state["code"])
        elif "code" in state:
            self.code = _as_result(state["code"])


class CudaWarning(RuntimeWarning):
    """A driver call failed where raising is not possible (e.g. releasing a handle)."""


class ClosedError(ValueError):
    """An operation was attempted on an object that was closed (``"Stream is closed"``)."""


class DriverNotFoundError(CudaError):
    """No NVIDIA driver library (``libcuda``) could be loaded on this machine.

    Raised before any driver call can be made. The message tells what to install.
    """

    def __init__(self, detail: str | None = None) -> None:
        self.code = _drv.CUresult.CUDA_ERROR_NO_DEVICE
        self.func = "cuInit"
        self.name = "DRIVER_NOT_FOUND"
        self.description = (
            "no NVIDIA driver library (libcuda.so.1 / nvcuda.dll) could be loaded: "
            "install the NVIDIA display driver for a CUDA-capable GPU; on a machine "
            "without a GPU cudriver can be imported but not used"
        )
        msg = f"CUDA driver not found: {self.description}"
        RuntimeError.__init__(self, msg)
        self.detail = detail

    def __reduce__(self) -> tuple[Any, ...]:
        return (DriverNotFoundError, (self.detail,))


class OutOfMemoryError(CudaError, MemoryError):
    """``CUDA_ERROR_OUT_OF_MEMORY``: the device (or pinned host) allocation failed."""


class InvalidValueError(CudaError, ValueError):
    """``CUDA_ERROR_INVALID_VALUE``: an argument was out of range or malformed."""


class InvalidHandleError(CudaError, ValueError):
    """``CUDA_ERROR_INVALID_HANDLE`` (and related): a handle the driver does not know."""


class InvalidDeviceError(CudaError, ValueError):
    """``CUDA_ERROR_INVALID_DEVICE``: no such device ordinal."""


class InvalidContextError(CudaError):
    """``CUDA_ERROR_INVALID_CONTEXT`` and ``CUDA_ERROR_CONTEXT_IS_DESTROYED``.

    Usually means no context is current on the calling thread.
    """


class NotInitializedError(CudaError):
    """``CUDA_ERROR_NOT_INITIALIZED`` / ``CUDA_ERROR_DEINITIALIZED``: call :func:`cudriver.init`."""


class NoDeviceError(CudaError):
    """``CUDA_ERROR_NO_DEVICE``: a driver is installed but sees no CUDA device."""


class NotReadyError(CudaError):
    """``CUDA_ERROR_NOT_READY``: the queried work has not completed (not a failure)."""


class NotSupportedError(CudaError, NotImplementedError):
    """``CUDA_ERROR_NOT_SUPPORTED`` and kin: the device or driver lacks the feature."""


class NotPermittedError(CudaError):
    """``CUDA_ERROR_NOT_PERMITTED``: the operation is not allowed in this state."""


class NotFoundError(CudaError, LookupError):
    """``CUDA_ERROR_NOT_FOUND``: e.g. a kernel name missing from a module."""


class StreamCaptureError(CudaError):
    """A stream-capture error (codes 900-908).

    For example a synchronous call made while capturing (``UNSUPPORTED``) invalidates
    the capture, and ending it then fails with ``INVALIDATED``.
    """


class LaunchError(CudaError):
    """A kernel failed on the device (illegal address, launch failure, trap, ...).

    These errors are *sticky*: they poison the context, and every later call in that
    context fails too. The process must exit (or the primary context be reset) to
    use the device again.
    """


class LaunchConfigError(CudaError, ValueError):
    """The launch asked for more than the kernel or device allows; nothing ran.

    ``CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES`` (too many threads or registers per block,
    too much shared memory) and ``CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE``. Unlike
    :class:`LaunchError`, these are not sticky: the context stays usable.
    """


class InvalidImageError(CudaError, ValueError):
    """The module image (PTX, cubin or fatbin) is malformed or built for another GPU."""


class GraphUpdateError(CudaError):
    """``cuGraphExecUpdate`` refused the new graph; the executable graph is unchanged.

    Attributes
    ----------
    result : str
        The driver's update result, e.g. ``"CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED"``.
    reason : str
        A sentence saying why the update was refused.
    node : object or None
        The node the driver blamed, when it named one.
    """

    result: str
    reason: str
    node: Any

    def __init__(self, code: Any, func: str, result: str, reason: str, node: Any = None) -> None:
        self.result = result
        self.reason = reason
        self.node = node
        super().__init__(code, func, f"{result}: {reason}")


class HostCallbackError(RuntimeError):
    """A host function launched on a stream raised; the original is the ``__cause__``.

    Attributes
    ----------
    errors : list of BaseException
        Every uncollected exception, the first of which is the ``__cause__``.
    """

    errors: list[BaseException]


class SyncWarning(CudaWarning):
    """A cudriver call made the host wait for the device (the sync debug mode's "warn").

    See :func:`cudriver.set_sync_debug_mode`; the message names the call.
    """


class SyncError(RuntimeError):
    """A cudriver call would make the host wait for the device (sync debug "error").

    Raised before the wait, so nothing waited. See :func:`cudriver.set_sync_debug_mode`;
    the message names the call.
    """


class CompileError(RuntimeError):
    """NVRTC failed to compile a program; ``log`` holds the compiler's log.

    Attributes
    ----------
    log : str
        The compiler's log.
    """

    def __init__(self, message: str, log: str = "") -> None:
        self.log = log
        super().__init__(f"{message}\n{log}" if log else message)

    def __reduce__(self) -> tuple[Any, ...]:
        return (CompileError, (self.args[0].split("\n", 1)[0], self.log))


# The error table: status code -> subclass. Codes missing here map to CudaError.
_TABLE: dict[int, type[CudaError]] = {}


def _register(cls: type[CudaError], *names: str) -> None:
    for n in names:
        member = getattr(_drv.CUresult, n, None)
        if member is not None:
            _TABLE[int(member)] = cls


_register(OutOfMemoryError, "CUDA_ERROR_OUT_OF_MEMORY")
_register(InvalidValueError, "CUDA_ERROR_INVALID_VALUE")
_register(
    InvalidHandleError,
    "CUDA_ERROR_INVALID_HANDLE",
    "CUDA_ERROR_INVALID_RESOURCE_TYPE",
)
_register(InvalidDeviceError, "CUDA_ERROR_INVALID_DEVICE")
_register(
    InvalidContextError,
    "CUDA_ERROR_INVALID_CONTEXT",
    "CUDA_ERROR_CONTEXT_IS_DESTROYED",
    "CUDA_ERROR_CONTEXT_ALREADY_IN_USE",
)
_register(NotInitializedError, "CUDA_ERROR_NOT_INITIALIZED", "CUDA_ERROR_DEINITIALIZED")
_register(NoDeviceError, "CUDA_ERROR_NO_DEVICE")
_register(NotReadyError, "CUDA_ERROR_NOT_READY")
_register(
    NotSupportedError,
    "CUDA_ERROR_NOT_SUPPORTED",
    "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED",
    "CUDA_ERROR_UNSUPPORTED_LIMIT",
    "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
    "CUDA_ERROR_CDP_NOT_SUPPORTED",
    "CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER",
    "CUDA_ERROR_STUB_LIBRARY",
)
_register(NotPermittedError, "CUDA_ERROR_NOT_PERMITTED")
_register(NotFoundError, "CUDA_ERROR_NOT_FOUND")
_register(
    StreamCaptureError,
    "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
    "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED",
    "CUDA_ERROR_STREAM_CAPTURE_MERGE",
    "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED",
    "CUDA_ERROR_STREAM_CAPTURE_UNJOINED",
    "CUDA_ERROR_STREAM_CAPTURE_ISOLATION",
    "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT",
    "CUDA_ERROR_CAPTURED_EVENT",
    "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD",
)
_register(
    LaunchError,
    "CUDA_ERROR_ILLEGAL_ADDRESS",
    "CUDA_ERROR_LAUNCH_FAILED",
    "CUDA_ERROR_LAUNCH_TIMEOUT",
    "CUDA_ERROR_ASSERT",
    "CUDA_ERROR_HARDWARE_STACK_ERROR",
    "CUDA_ERROR_ILLEGAL_INSTRUCTION",
    "CUDA_ERROR_MISALIGNED_ADDRESS",
    "CUDA_ERROR_INVALID_ADDRESS_SPACE",
    "CUDA_ERROR_INVALID_PC",
)
_register(
    LaunchConfigError,
    "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
    "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE",
)
_register(
    InvalidImageError,
    "CUDA_ERROR_INVALID_IMAGE",
    "CUDA_ERROR_INVALID_PTX",
    "CUDA_ERROR_NO_BINARY_FOR_GPU",
    "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
)
_register(GraphUpdateError, "CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE")


def error_class(code: Any) -> type[CudaError]:
    """Return the :class:`CudaError` subclass used for status ``code``."""
    return _TABLE.get(int(code), CudaError)


def _as_result(code: Any) -> Any:
    try:
        return _drv.CUresult(int(code))
    except ValueError:
        return int(code)


_DESCRIPTIONS: dict[int, tuple[str, str]] = {}
_driver_missing = False


def _describe(code: int) -> tuple[str, str]:
    """``(name, description)`` from the driver, or from the enum name without one."""
    global _driver_missing
    cached = _DESCRIPTIONS.get(code)
    if cached is not None:
        return cached
    try:
        name = _drv.CUresult(code).name
    except ValueError:
        name = f"CUDA_ERROR_{code}"
    desc = name.removeprefix("CUDA_ERROR_").replace("_", " ").lower()
    if not _driver_missing:
        try:
            r1 = _drv.cuGetErrorName(code)
            r2 = _drv.cuGetErrorString(code)
        except Exception:  # no driver library: keep the enum-derived text
            _driver_missing = True
        else:
            if r1[0] is _SUCCESS and r1[1]:
                name = r1[1].decode()
            if r2[0] is _SUCCESS and r2[1]:
                desc = r2[1].decode()
            _DESCRIPTIONS[code] = (name, desc)
    return name, desc


class CallGuard(GuardCore):
    """Whether cudriver may call the driver now, and what must happen first.

    :attr:`armed` is the one flag the hot paths test (``if GUARD.armed:
    GUARD.check()``). It is set until the driver is initialised, in a forked child,
    and while any host function runs; only then does :meth:`check` look closer:

    * in a forked child, every call raises :class:`NotPermittedError`;
    * on a thread running a host function, every call raises
      :class:`NotPermittedError` (the driver forbids CUDA calls there, and
      synchronising the function's own stream would deadlock);
    * before the driver is initialised, :meth:`check` initialises it
      (``cuInit(0)``), so a missing driver is reported as
      :class:`DriverNotFoundError` whatever the first call is.

    :attr:`captures` holds the ids of the ``GLOBAL``-mode captures begun through
    cudriver and not yet ended: they forbid unsafe calls on every thread, so releases
    wait while it is not empty (other captures hold releases back only on their own
    thread; see :func:`capturing_on_this_thread`).
    """

    # The fields the hot paths test are the base's (C fields with the compiled core).
    __slots__ = ("_local", "_lock", "c_inside")

    def __init__(self) -> None:
        self.armed = True  # until the driver is initialised
        self.initialized = False
        self.forked = False
        self.running = 0
        # ids of open GLOBAL-mode capture sessions (add/discard are atomic under the GIL)
        self.captures: set[int] = set()
        # ids of every open capture session that forbids unsafe calls on its thread: when
        # empty (the common case) no thread needs looking at
        self.restrictive: set[int] = set()
        # ids of every open capture session, whatever its mode: the releasing thread
        # waits while any is open (a synchronous free would wait for, or break, it)
        self.open: set[int] = set()
        self._local = threading.local()
        self._lock = threading.Lock()
        # The C trampoline's per-thread flag (it sets the flag and updates ``running``
        # and ``armed`` itself, with the GIL held).
        self.c_inside: Callable[[], bool] | None = in_host_function

    def check_calls(self) -> None:
        """Raise :class:`NotPermittedError` when no driver call may be made here."""
        if self.forked:
            raise NotPermittedError(
                _drv.CUresult.CUDA_ERROR_NOT_PERMITTED,
                "cudriver",
                "CUDA cannot be used in a process forked from one that had initialised it; "
                "start worker processes with the 'spawn' or 'forkserver' method",
            )
        if self.in_host_function():
            raise NotPermittedError(
                _drv.CUresult.CUDA_ERROR_NOT_PERMITTED,
                "cudriver",
                "CUDA calls are not allowed inside a host function (the driver forbids "
                "them, and synchronising the host function's own stream would deadlock)",
            )

    def check(self) -> None:
        """:meth:`check_calls`, then initialise the driver if that was not done yet."""
        self.check_calls()
        if not self.initialized:
            self.initialize()

    def initialize(self) -> None:
        """Call ``cuInit(0)`` once per process (``cudriver.init()``)."""
        with self._lock:
            if self.initialized:
                return
            try:
                r = _drv.cuInit(0)
            except Exception as exc:
                if _is_missing_driver(exc):
                    raise DriverNotFoundError(str(exc)) from None
                raise
            if r[0] is not _SUCCESS:
                raise error_for(r[0], _drv.cuInit)
            self.initialized = True
            self._rearm()

    def _rearm(self) -> None:
        # Caller holds _lock.
        self.armed = self.forked or self.running > 0 or not self.initialized

    def in_host_function(self) -> bool:
        """Whether the calling thread is running a host function."""
        c = self.c_inside
        return bool(getattr(self._local, "inside", False)) or (c is not None and c())

    def enter_host_function(self) -> None:
        """Mark the calling (driver) thread as running a host function."""
        self._local.inside = True
        with self._lock:
            self.running += 1
            self.armed = True

    def leave_host_function(self) -> None:
        """Undo :meth:`enter_host_function`."""
        self._local.inside = False
        with self._lock:
            self.running -= 1
            self._rearm()

    def after_fork_in_child(self) -> None:
        """Refuse every driver call from now on (registered with ``os.register_at_fork``)."""
        self._lock = threading.Lock()  # the parent's may have been held at the fork
        self.forked = True
        self.armed = True


#: The process's call guard; see :class:`CallGuard`.
GUARD = CallGuard()
os.register_at_fork(after_in_child=GUARD.after_fork_in_child)


class CaptureViolationWatcher(Protocol):
    """What :func:`make_error` tells about capture errors: a capture's bookkeeping.

    ``restrictive`` says whether the capture forbids unsafe calls on its thread (every
    mode but ``RELAXED``).
    """

    violation: str | None
    restrictive: bool


class _Watchers(threading.local):
    def __init__(self) -> None:
        self.items: list[CaptureViolationWatcher] = []


# Per thread: the captures begun on this thread and not yet ended. A capture error
# raised on a thread is blamed on that thread's open captures only, so two threads
# capturing at once never blame each other's calls.
_watchers = _Watchers()


def watch_capture_violations(watcher: CaptureViolationWatcher) -> list[Any]:
    """Record in ``watcher.violation`` the first capture error raised on this thread.

    Returns the calling thread's list of watchers: removing ``watcher`` from it (from
    any thread) stops the recording.
    """
    items = _watchers.items
    items.append(watcher)
    return items


def capturing_on_this_thread() -> bool:
    """Whether a capture begun through cudriver on this thread forbids unsafe calls here."""
    items = _watchers.items
    if not items:
        return False
    return any(w.restrictive for w in items)


def make_error(code: Any, func: str, detail: str | None = None) -> CudaError:
    """Build (not raise) the exception for status ``code`` returned by ``func``."""
    cls = error_class(code)
    if cls is StreamCaptureError and func != "cuStreamEndCapture":
        items = _watchers.items
        if items:
            name, _desc = _describe(int(code))
            for w in items:
                if w.violation is None:
                    w.violation = f"{func} ({name})"
    if cls is GraphUpdateError:
        return GraphUpdateError(code, func, "unknown", detail or "the driver gave no reason")
    return cls(code, func, detail)


def error_for(code: Any, func: Callable[..., Any], detail: str | None = None) -> CudaError:
    """Build the exception for status ``code`` returned by the driver function ``func``.

    The hot paths' way to report a failure: the name comes from the function itself.
    """
    return make_error(code, func.__name__, detail)


def _is_missing_driver(exc: BaseException) -> bool:
    return type(exc).__name__ == "DynamicLibNotFoundError" or (
        isinstance(exc, (OSError, RuntimeError))
        and "libcuda" in str(exc)
        and not isinstance(exc, CudaError)
    )


def check(result: tuple[Any, ...], func: str) -> Any:
    """Check one ``(CUresult, *outs)`` tuple and return its outputs.

    Parameters
    ----------
    result
        The tuple a ``cuda.bindings.driver`` function returned.
    func
        The driver function's name, used in the error message.

    Returns
    -------
    object
        None, the single output, or a tuple of the outputs.

    Raises
    ------
    CudaError
        The subclass for the status, when it is not ``CUDA_SUCCESS``.
    """
    status = result[0]
    if status is not _SUCCESS and status != 0:
        raise make_error(status, func)
    n = len(result)
    if n == 1:
        return None
    if n == 2:
        return result[1]
    return result[1:]


F = TypeVar("F", bound=Callable[..., Any])


def checked(
    func: Callable[..., tuple[Any, ...]] | None = None,
    *,
    ok: Iterable[Any] = (),
    name: str | None = None,
) -> Any:
    """Wrap a driver function so that it returns its outputs or raises :class:`CudaError`.

    Usable as ``checked(fn)``, ``@checked`` or ``@checked(ok=(...,))``.

    Parameters
    ----------
    func
        A function returning ``(CUresult, *outs)``.
    ok
        Statuses that are not errors at this call (e.g. ``CUDA_ERROR_NOT_READY`` for a
        query). When ``ok`` is given, the status is returned too, as the first element:
        ``status`` alone for a call with no outputs, else ``(status, *outs)``.
    name
        The name used in error messages; defaults to ``func.__name__``.

    Returns
    -------
    Callable
        The wrapped function: with no ``ok``, it returns None, the single output, or
        the tuple of outputs.
    """

    def decorate(f: Callable[..., tuple[Any, ...]]) -> Callable[..., Any]:
        fname: str = name or str(getattr(f, "__name__", "driver call"))
        ok_codes = frozenset(int(c) for c in ok)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if GUARD.armed:
                GUARD.check_calls()
            try:
                r = f(*args, **kwargs)
            except Exception as exc:
                if _is_missing_driver(exc):
                    raise DriverNotFoundError(str(exc)) from None
                raise
            status = r[0]
            if status is not _SUCCESS:
                if int(status) not in ok_codes:
                    raise make_error(status, fname)
            elif not ok_codes:
                n = len(r)
                return r[1] if n == 2 else None if n == 1 else r[1:]
            return status if len(r) == 1 else r

        try:
            functools.update_wrapper(wrapper, f)
        except (AttributeError, TypeError):  # pragma: no cover - exotic callables
            pass
        wrapper.__wrapped__ = f  # type: ignore[attr-defined]
        return wrapper

    if func is not None:
        return decorate(func)
    return decorate
