# cython: language_level=3, binding=True, auto_pickle=False, annotation_typing=False
"""Host functions on streams: the trampoline, the keep-alive registry and error delivery.

How a host function reaches the driver
--------------------------------------
``cuLaunchHostFunc`` is called in ``libcuda`` directly through ctypes, never through
``cuda.bindings`` (its wrapper block is freed after the first call, so a captured host
node would run freed memory on its second replay). Every call passes the same
trampoline, a C function of the compiled core (``_core.trampoline_address()``),
which lives as long as the process, and as user data an integer key, not a pointer.
The trampoline looks the key up in a registry of :class:`HostFuncRecord` objects, so
a stale key can never crash: at worst the record is not found and that is reported.

How long a record lives
-----------------------
* Eager (the stream is not capturing): the registry holds the record strongly until
  the trampoline has run it once.
* Captured by a capture begun through cudriver: the record joins the capture's keep
  list (``capture.keep``), which moves into the :class:`~cudriver.Graph` and into every
  :class:`~cudriver.GraphExec` made from it; the registry holds it only weakly. In
  addition, ``GraphExec.launch`` writes :attr:`HostFuncRecord.stream_key` before each
  launch, and that write holds the record strongly until the launch has run it (or
  the stream or its context has been synchronised). This is what makes dropping a
  GraphExec while a launch is still in flight safe: ``cuGraphExecDestroy`` does not
  wait for in-flight launches (the driver frees the executable graph once they
  complete), so the host node still fires after the Python objects are gone, and the
  record must still be there.
* Added to a graph explicitly (:meth:`~cudriver.Graph.add_host_func`): as when
  captured, the graph's keep list holds it and the registry holds it weakly.
* Captured by a capture begun some other way (raw ``cuStreamBeginCapture``, another
  library): the graph's lifetime is unknown to us, so the record is kept until the
  process exits.

Errors
------
An exception raised by a host function is stored under the stream it ran on (for a
graph, the stream its executable graph was last launched on) and re-raised, as
:class:`~cudriver.HostCallbackError` with the original as ``__cause__``, by the next
successful ``Stream.synchronize()`` of that stream or ``Context.synchronize()`` of its
context. Errors still uncollected when an owned stream is closed or collected, or at
interpreter exit, are passed to :data:`sys.unraisablehook`.
"""

from __future__ import annotations

from libc.stdint cimport uintptr_t

from cudriver._runtime._entry cimport GUARD as _GUARD_C
from cudriver._runtime._guard cimport set_in_hostfn

import atexit
import functools
import itertools
import os
import sys
import threading
import traceback
import weakref
from collections.abc import Callable
from typing import Any, NoReturn

from cuda.bindings import driver as _drv

from .._runtime import _bindings, _gates, _hooks
from .._runtime._bindings import SUCCESS
from ..errors import GUARD, HostCallbackError, error_for
from . import capture
from ._handle import Handle
from ._pins import pin2, unpin2

__all__ = [
    "HostFuncRecord",
    "launch",
    "graph_record",
    "PENDING",
    "after_sync",
    "after_event_sync",
    "after_context_sync",
    "watch_stream",
    "registry_size",
]

_cuStreamIsCapturing = _drv.cuStreamIsCapturing
_NOT_CAPTURING = _drv.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE

# One entry per pending error: (context key, the callable, the exception).
_Err = tuple[int, Any, BaseException]

#: stream key -> errors not yet collected (possibly empty while records launched on
#: that stream are held). ``Stream.synchronize`` tests only this dict's truthiness.
PENDING: dict[int, list[_Err]] = {}

_lock = threading.Lock()
_keys = itertools.count(1)
# Eager records, held until they have run once.
# Eager host functions by key: a HostFuncRecord, or (compiled enqueue) the tuple
# (fn, args, kwargs, stream key, context key), which only the core's trampoline reads.
_eager: dict[int, Any] = {}
# Captured records, held by their graphs; looked up here weakly.
_captured: dict[int, weakref.ref[HostFuncRecord]] = {}
# Captured records with a graph launch in flight (see HostFuncRecord.stream_key).
_holds: dict[int, HostFuncRecord] = {}
# Records captured by captures cudriver did not begin: kept until exit.
_forever: dict[int, HostFuncRecord] = {}
# Keys of owned streams that were closed (insertion-ordered, bounded): an error
# arriving for one of them is reported at once instead of waiting for a sync that
# can never come.
_dead: dict[int, None] = {}
_DEAD_MAX = 4096


def _stream_key(key: int) -> int:
    # A NULL stream handle means the legacy default stream, like CU_STREAM_LEGACY.
    return key if key else 1


class HostFuncRecord:
    """One launched host function: the callable, its arguments and where it reports.

    Attributes
    ----------
    key : int
        The registry key passed to the driver as user data.
    fn, args, kwargs
        What runs: ``fn(*args, **kwargs)``.
    ctx_key : int
        The context (``int(CUcontext)``) of the stream it was launched on.
    """

    __slots__ = (
        "__weakref__",
        "_launches",
        "_stream_key",
        "args",
        "ctx_key",
        "fn",
        "key",
        "kwargs",
    )

    def __init__(
        self,
        key: int,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        stream_key: int,
        ctx_key: int,
    ) -> None:
        self.key = key
        self.fn = fn
        self.args = args
        self.kwargs = kwargs
        self._stream_key = _stream_key(stream_key)
        self.ctx_key = ctx_key
        self._launches = 0

    @property
    def stream_key(self) -> int:
        """The stream (``int(CUstream)``) whose ``synchronize()`` re-raises this one's errors.

        Writing it (``GraphExec.launch`` does, before each launch) also holds the
        record strongly until that launch has run it, or until the stream or its
        context is synchronised.
        """
        return self._stream_key

    @stream_key.setter
    def stream_key(self, key: int) -> None:
        k = _stream_key(int(key))
        with _lock:
            self._stream_key = k
            self._launches += 1
            _holds[self.key] = self
            if k not in PENDING:
                PENDING[k] = []

    def __repr__(self) -> str:
        return f"<cudriver HostFuncRecord {self.key} {_fn_name(self.fn)}>"


def _fn_name(fn: Any) -> str:
    try:
        return _qualified_name(fn)
    except BaseException:
        return f"<{type(fn).__name__} object>"


def _qualified_name(fn: Any) -> str:
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
    if not isinstance(name, str):
        return repr(fn)
    mod = getattr(fn, "__module__", None)
    return f"{mod}.{name}" if isinstance(mod, str) and mod != "builtins" else name


# -- the trampoline -------------------------------------------------------------------
def _find(key: int) -> HostFuncRecord | None:
    """The record of a captured host function about to run (None: reported, skip it).

    Accounts for the launch that runs it: the last launch in flight lets go of the hold
    that kept the record past its graph.
    """
    ref = _captured.get(key)
    rec = ref() if ref is not None else None
    if rec is None:
        _unraisable(
            RuntimeError(
                f"host function record {key} was not found: the graph holding it was "
                "destroyed while a launch made outside GraphExec.launch was in flight; "
                "the host function did not run"
            ),
            "Exception ignored in the cudriver host-function trampoline",
            None,
        )
        return None
    if rec._launches:
        with _lock:
            if rec._launches:
                rec._launches -= 1
                if not rec._launches:
                    _holds.pop(key, None)
    return rec


def _trampoline_failed(exc: BaseException) -> None:
    """Report an error of the trampoline itself (never of the host function)."""
    _unraisable(exc, "Exception ignored in the cudriver host-function trampoline", None)


#: The trampoline every launch passes (:func:`trampoline`: it takes the GIL only to run
#: the record; it lives as long as the process, as graphs need).
_TRAMPOLINE_ADDR = <uintptr_t>trampoline


def launch(
    stream: Handle | None,
    h: Any,
    stream_key: int,
    ctx_key: int,
    fn: Callable[..., Any],
    args: Any,
    kwargs: Any,
) -> HostFuncRecord:
    """Register ``fn(*args, **kwargs)`` and enqueue it on ``stream`` (``cuLaunchHostFunc``).

    ``h`` is the stream's handle; ``stream`` (None for a raw handle) stays pinned
    through the driver calls.
    """
    if GUARD.armed:
        GUARD.check()
    if stream is None:
        rec = _launch(h, stream_key, ctx_key, fn, args, kwargs)
        _gates.note(h)  # the function may wait for the program
        return rec
    pins = pin2(stream)
    try:
        rec = _launch(h, stream_key, ctx_key, fn, args, kwargs)
    finally:
        unpin2(*pins)
    _gates.note(stream)
    return rec


def _launch(
    h: Any, stream_key: int, ctx_key: int, fn: Callable[..., Any], args: Any, kwargs: Any
) -> HostFuncRecord:
    call = _bindings.launch_host_func()
    key = next(_keys)
    rec = HostFuncRecord(key, fn, args, kwargs, stream_key, ctx_key)
    r = _cuStreamIsCapturing(h)
    if r[0] is not SUCCESS:
        raise error_for(r[0], _cuStreamIsCapturing)
    if r[1] is _NOT_CAPTURING:
        # Registered before the call: the driver thread may run it before the call returns.
        _eager[key] = rec
        code = call(stream_key, _TRAMPOLINE_ADDR, key)
        if code:
            _eager.pop(key, None)
            raise error_for(code, call)
        return rec
    cid = capture.capture_id(h)
    ours = cid is not None and cid in capture.ACTIVE
    if ours:
        capture.keep(h, rec)
    else:
        _forever[key] = rec
    _captured[key] = weakref.ref(rec, functools.partial(_forget, key))
    code = call(stream_key, _TRAMPOLINE_ADDR, key)
    if code:
        _forever.pop(key, None)
        _captured.pop(key, None)
        raise error_for(code, call)
    return rec


def graph_record(
    fn: Callable[..., Any], args: Any, kwargs: Any, ctx_key: int
) -> tuple[HostFuncRecord, int]:
    """A record for a host node added to a graph explicitly; ``(record, trampoline)``.

    The registry holds it weakly, as for a captured host function: the caller keeps
    it in the graph's keep list (see the module docstring for how launches hold it).
    """
    key = next(_keys)
    rec = HostFuncRecord(key, fn, args, kwargs, 0, ctx_key)
    _captured[key] = weakref.ref(rec, functools.partial(_forget, key))
    return rec, _TRAMPOLINE_ADDR


def _forget(key: int, _ref: object) -> None:
    _captured.pop(key, None)


def registry_size() -> int:
    """Number of host-function records the registry refers to (for leak tests)."""
    return len(_eager) + len(_captured) + len(_holds) + len(_forever)


# -- errors -----------------------------------------------------------------------------
def _store(stream_key: int, ctx_key: int, fn: Any, exc: BaseException) -> None:
    """Keep ``exc``, raised by host function ``fn``, for its stream's next synchronize."""
    k = stream_key
    with _lock:
        dead = k in _dead
        if not dead:
            PENDING.setdefault(k, []).append((ctx_key, fn, exc))
    if dead:
        _report([(ctx_key, fn, exc)], f"stream {k:#x} was closed before it ran")


def _describe(exc: BaseException) -> str:
    """``str(exc)``, or what can be said of it when its ``__str__`` itself fails."""
    try:
        return str(exc)
    except BaseException:
        try:
            return f"<{type(exc).__name__} whose __str__ failed: {object.__repr__(exc)}>"
        except BaseException:
            return "<an exception whose __str__ failed>"


def _error(errs: list[_Err]) -> HostCallbackError:
    _ctx, fn, first = errs[0]
    msg = f"host function {_fn_name(fn)} raised {type(first).__name__}: {_describe(first)}"
    if len(errs) > 1:
        n = len(errs) - 1
        msg += f" (and {n} more host-function error{'s' if n > 1 else ''}: see .errors)"
    err = HostCallbackError(msg)
    err.__cause__ = first
    # All of them, in the order they were raised; the first is also the __cause__.
    err.errors = [e[2] for e in errs]
    return err


def _raise(errs: list[_Err]) -> NoReturn:
    err = _error(errs)
    raise err from errs[0][2]


def _release_holds(match: Callable[[HostFuncRecord], bool]) -> None:
    # Caller holds _lock.
    for key in [k for k, r in _holds.items() if match(r)]:
        rec = _holds.pop(key)
        rec._launches = 0


def after_sync(stream_key: int) -> None:
    """Called after a successful ``Stream.synchronize()``: raise the stream's errors.

    Also drops the holds of graph launches on that stream, which have all completed.
    """
    k = _stream_key(stream_key)
    with _lock:
        errs = PENDING.pop(k, None)
        if errs is None:
            return
        if _holds:
            _release_holds(lambda r: r._stream_key == k)
    if errs:
        _raise(errs)


def after_event_sync(stream_key: int) -> None:
    """Called after a successful ``Event.synchronize()``: raise its stream's errors.

    The errors of the host functions that ran on the stream the event was last
    recorded on. Unlike :func:`after_sync`, keeps the holds of graph launches on that stream: work
    enqueued there after the record may still be running.
    """
    k = _stream_key(stream_key)
    with _lock:
        errs = PENDING.get(k)
        if not errs:
            return
        PENDING[k] = []
    _raise(errs)


def after_context_sync(ctx_key: int) -> None:
    """Called after a successful ``Context.synchronize()``: raise its streams' errors."""
    with _lock:
        errs: list[_Err] = []
        for k in list(PENDING):
            lst = PENDING[k]
            mine = [e for e in lst if e[0] == ctx_key]
            if mine:
                errs.extend(mine)
                lst[:] = [e for e in lst if e[0] != ctx_key]
        if _holds:
            _release_holds(lambda r: r.ctx_key == ctx_key)
        held = {r._stream_key for r in _holds.values()}
        for k in [k for k, lst in PENDING.items() if not lst and k not in held]:
            del PENDING[k]
    if errs:
        _raise(errs)


def _stream_released(key: int) -> None:
    with _lock:
        errs = PENDING.pop(key, None)
        _dead[key] = None
        if len(_dead) > _DEAD_MAX:
            del _dead[next(iter(_dead))]
    if errs:
        _report(errs, f"stream {key:#x} was closed before synchronize() collected it")


def watch_stream(key: int) -> Callable[[], None]:
    """The ``on_release`` hook of a new owned stream with handle value ``key``.

    On release, errors its ``synchronize()`` never collected go to
    :data:`sys.unraisablehook`.
    """
    if _dead:
        with _lock:
            _dead.pop(key, None)  # the handle value was reused by a new stream
    return functools.partial(_stream_released, key)


def _report(errs: list[_Err], why: str) -> None:
    err = _error(errs)
    _unraisable(
        err, f"Exception ignored: a host-function error was never collected ({why})", errs[0][1]
    )


_args_type: Any = None


def _unraisable_args_type() -> Any:
    """The interpreter's ``UnraisableHookArgs`` type (not exposed under a public name)."""
    global _args_type
    if _args_type is not None:
        return _args_type

    class _Probe(Exception):
        pass

    class _Raiser:
        def __del__(self) -> None:
            raise _Probe

    seen: list[Any] = []
    old = sys.unraisablehook
    sys.unraisablehook = seen.append
    try:
        _Raiser()
    finally:
        sys.unraisablehook = old
    for a in seen:
        if isinstance(a.exc_value, _Probe):
            _args_type = type(a)
        else:  # another thread's, caught in the window: pass it on
            old(a)
    return _args_type


class _Args:
    __slots__ = ("err_msg", "exc_traceback", "exc_type", "exc_value", "object")

    def __init__(self, *values: Any) -> None:
        self.exc_type, self.exc_value, self.exc_traceback, self.err_msg, self.object = values


def _unraisable(exc: BaseException, msg: str, obj: Any) -> None:
    """Pass ``exc`` to :data:`sys.unraisablehook`; never raises."""
    values = (type(exc), exc, exc.__traceback__, msg, obj)
    try:
        t = _unraisable_args_type()
        args = t(values) if t is not None else _Args(*values)
        sys.unraisablehook(args)
    except BaseException:
        try:
            sys.stderr.write(f"cudriver: {msg}: {obj!r}\n")
            traceback.print_exception(type(exc), exc, exc.__traceback__)
        except BaseException:
            pass


def _forget_after_fork() -> None:
    """In a forked child: the parent's host functions and their errors are not ours."""
    global _lock
    _lock = threading.Lock()  # the parent's may have been held at the fork
    for registry in (PENDING, _eager, _captured, _holds, _forever, _dead):
        registry.clear()


os.register_at_fork(after_in_child=_forget_after_fork)


@atexit.register
def _report_leftovers() -> None:
    with _lock:
        leftovers = [(k, lst) for k, lst in PENDING.items() if lst]
        PENDING.clear()
    for k, lst in leftovers:
        _report(lst, f"the interpreter exited before stream {k:#x} was synchronized")


# -- the trampoline ----------------------------------------------------------------------------
cdef extern from *:
    """
    /* Set once a driver thread keeps a Python thread state for its host functions. */
    static __thread int cudriver_primed = 0;
    """
    int cudriver_primed

cdef extern from "Python.h":
    ctypedef int PyGILState_STATE
    PyGILState_STATE PyGILState_Ensure() nogil
    void* PyEval_SaveThread() nogil


cdef void trampoline(void* data) noexcept nogil:
    # Runs on a driver thread; takes the GIL only to run the record's callable.
    global cudriver_primed
    if not cudriver_primed:
        # A thread without a Python thread state gets a new one from every
        # PyGILState_Ensure and loses it at the matching release: a few microseconds
        # per host function, with the GIL held. One Ensure never released keeps this
        # thread's state for good (driver threads are few and live as long as the
        # process), so later host functions only take and drop the GIL.
        PyGILState_Ensure()
        PyEval_SaveThread()
        cudriver_primed = 1
    _run_record(<uintptr_t>data)


# Non-empty while NVTX marks are on (``_runtime._hooks``): a range around each host
# function's run, on the driver's thread. One C truth test when off.
cdef list _MARKS = _hooks.MARKS


cdef object _marks_push(object fn):
    try:
        return _hooks.push("host function " + _fn_name(fn))
    except BaseException:  # an observer's failure never stops the host function
        return None


cdef void _marks_pop(object token):
    try:
        _hooks.pop(token)
    except BaseException:
        pass


cdef void _run_record(uintptr_t key) noexcept with gil:
    # An eager host function's entry is a tuple (fn, args, kwargs or None, stream key,
    # context key) made by Stream.launch_host_func; a record otherwise (the slow
    # enqueue, captured host functions).
    try:
        k = key
        rec = _eager.pop(k, None)
        if rec is None:  # a captured record: found, and accounted for, by _find
            rec = _find(k)
            if rec is None:
                return
        if type(rec) is tuple:
            fn = (<tuple>rec)[0]
            args = (<tuple>rec)[1]
            kwargs = (<tuple>rec)[2]
        else:
            fn = rec.fn
            args = rec.args
            kwargs = rec.kwargs
        # The guard: this thread's C flag (the compiled paths) and the process-wide
        # count that arms the slow paths' check. Only C code changes the count, always
        # with the GIL held, so it needs no lock.
        token = _marks_push(fn) if _MARKS else None
        _GUARD_C.running += 1
        _GUARD_C.armed = True
        set_in_hostfn(1)
        try:
            if kwargs:
                fn(*args, **kwargs)
            else:
                fn(*args)
        except BaseException as exc:
            if type(rec) is tuple:
                _store((<tuple>rec)[3], (<tuple>rec)[4], fn, exc)
            else:
                _store(rec._stream_key, rec.ctx_key, fn, exc)
        finally:
            set_in_hostfn(0)
            _GUARD_C.running -= 1
            if not _GUARD_C.running and _GUARD_C.initialized and not _GUARD_C.forked:
                _GUARD_C.armed = False
            if token is not None:
                _marks_pop(token)
    except BaseException as exc:
        try:
            _trampoline_failed(exc)
        except BaseException:
            pass


def run_record(key):
    """Run host function ``key`` as the trampoline does, on this thread (for tests)."""
    _run_record(<uintptr_t>key)


def trampoline_address():
    """The address of the C host-function trampoline (it lives as long as the process)."""
    return <uintptr_t>trampoline
