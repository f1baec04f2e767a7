# cython: language_level=3, binding=True, boundscheck=False, wraparound=False
# cython: cdivision=True, auto_pickle=False
"""The compiled core: C fields for handles and C bodies for the hot methods.

Built at install time (Cython and a C compiler; no CUDA header is needed): the few
driver entry points used here are looked up once, through
``cuda.bindings.driver.cuGetProcAddress``, and called as C function pointers, so one
build serves every cuda-bindings 12.x and 13.x.

Every compiled method handles the common case and otherwise calls its slow path, a
plainly named Python method of the public class (``Stream._synchronize_slow``, ...),
before any side effect: the slow path makes the checks, raises the errors and keeps
the bookkeeping of everything else. The common case is: the driver initialised and
no host function running (the call guard not armed), the object open, a cudriver
(or None, or int) stream, no capture begun through cudriver open, and arguments of
the plain types (ints, floats, cudriver buffers).
"""

#: What ``cudriver.info()`` reports: the compiled core is part of every install.
IMPLEMENTATION = "compiled"
REASON = "compiled core loaded"

cimport cython
from cpython.ref cimport PyObject, Py_INCREF, Py_XDECREF
from cpython.tuple cimport PyTuple_New, PyTuple_SET_ITEM
from libc.stdint cimport int32_t, int64_t, intptr_t, uint32_t, uint64_t, uintptr_t
from posix.unistd cimport write
from libc.math cimport fabs, isinf, isnan
from libc.float cimport FLT_MAX

ctypedef int CUresult
ctypedef void (*HostFn)(void*) noexcept nogil

ctypedef CUresult (*f_p)(void*) noexcept nogil
ctypedef CUresult (*f_pp)(void*, void*) noexcept nogil
ctypedef CUresult (*f_ppu)(void*, void*, unsigned int) noexcept nogil
ctypedef CUresult (*f_launch)(void*, unsigned int, unsigned int, unsigned int, unsigned int,
                              unsigned int, unsigned int, unsigned int, void*, void**,
                              void**) noexcept nogil
ctypedef CUresult (*f_value32)(void*, uint64_t, uint32_t, unsigned int) noexcept nogil
ctypedef CUresult (*f_value64)(void*, uint64_t, uint64_t, unsigned int) noexcept nogil
ctypedef CUresult (*f_capturing)(void*, int*) noexcept nogil
ctypedef CUresult (*f_hostfn)(void*, HostFn, void*) noexcept nogil
ctypedef CUresult (*f_ctx_get)(void**) noexcept nogil
ctypedef CUresult (*f_alloc)(uint64_t*, size_t) noexcept nogil
ctypedef CUresult (*f_free)(uint64_t) noexcept nogil
ctypedef CUresult (*f_alloc_async)(uint64_t*, size_t, void*) noexcept nogil
ctypedef CUresult (*f_alloc_pool)(uint64_t*, size_t, void*, void*) noexcept nogil
ctypedef CUresult (*f_free_async)(uint64_t, void*) noexcept nogil

# CUlaunchConfig (driver ABI since CUDA 11.8); its attributes are a C array of
# CUlaunchAttribute (72 bytes each: the id, padding, a 64-byte value), built once per
# LaunchConfig in Python (LaunchConfig._c_attributes) and read here in place.
ctypedef struct LaunchCfg:
    unsigned int gridDimX
    unsigned int gridDimY
    unsigned int gridDimZ
    unsigned int blockDimX
    unsigned int blockDimY
    unsigned int blockDimZ
    unsigned int sharedMemBytes
    void* hStream
    void* attrs
    unsigned int numAttrs
ctypedef CUresult (*f_launch_ex)(const LaunchCfg*, void*, void**, void**) noexcept nogil

cdef enum:
    SUCCESS = 0
    NOT_READY = 600
    MAX_PARAM_BYTES = 4096
    MAX_PARAMS = 512
    MAX_PARAM_WORDS = 512  # MAX_PARAM_BYTES / 8
    LAUNCH_ATTR_BYTES = 72  # sizeof(CUlaunchAttribute)

from cudriver._runtime._enums import WaitCondition as _WaitConditionEnum

# The default condition of the waits (their slow paths default to it as well).
cdef object _GEQ_DEFAULT = _WaitConditionEnum.GEQ

# -- driver entry points ----------------------------------------------------------------
cdef bint _loaded = False
cdef f_p p_stream_query = NULL
cdef f_p p_stream_sync = NULL
cdef f_ppu p_stream_wait_event = NULL
cdef f_pp p_event_record = NULL
cdef f_p p_event_query = NULL
cdef f_p p_event_sync = NULL
cdef f_launch p_launch = NULL
cdef f_launch_ex p_launch_ex = NULL
cdef f_pp p_graph_launch = NULL
cdef f_pp p_graph_upload = NULL
cdef f_value32 p_write32 = NULL
cdef f_value32 p_wait32 = NULL
cdef f_value64 p_write64 = NULL
cdef f_value64 p_wait64 = NULL
cdef f_capturing p_is_capturing = NULL
cdef f_hostfn p_launch_host_func = NULL
cdef f_ctx_get p_ctx_get_current = NULL
cdef f_p p_ctx_push = NULL
cdef f_ctx_get p_ctx_pop = NULL
cdef f_alloc p_mem_alloc = NULL
cdef f_free p_mem_free = NULL
cdef f_alloc_async p_mem_alloc_async = NULL
cdef f_free_async p_mem_free_async = NULL
cdef f_alloc_pool p_mem_alloc_pool = NULL

# The ABI version asked for: every entry point here has kept its CUDA 12.0 signature.
cdef int _ABI = 12000


cdef uintptr_t _proc(object drv, str name, int flags) except? 0:
    try:
        r = drv.cuGetProcAddress(name.encode(), _ABI, flags)
    except Exception:
        return 0
    if int(r[0]) != SUCCESS:
        return 0
    return <uintptr_t>int(r[1] or 0)


cdef int _load() except -1:
    """Look the entry points up (once, after the driver was initialised)."""
    global _loaded, p_stream_query, p_stream_sync, p_stream_wait_event, p_event_record
    global p_event_query, p_event_sync, p_launch, p_launch_ex, p_graph_launch, p_graph_upload
    global p_write32, p_wait32, p_write64, p_wait64, p_is_capturing, p_launch_host_func
    global p_ctx_get_current, p_ctx_push, p_ctx_pop, p_mem_alloc, p_mem_free
    global p_mem_alloc_async, p_mem_free_async, p_mem_alloc_pool
    import os
    from cuda.bindings import driver as drv
    # The default stream means what it means to cuda.bindings (which reads the same variable).
    flags = 2 if os.environ.get("CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM", "0") not in ("", "0") else 1
    p_stream_query = <f_p>_proc(drv, "cuStreamQuery", flags)
    p_stream_sync = <f_p>_proc(drv, "cuStreamSynchronize", flags)
    p_stream_wait_event = <f_ppu>_proc(drv, "cuStreamWaitEvent", flags)
    p_event_record = <f_pp>_proc(drv, "cuEventRecord", flags)
    p_event_query = <f_p>_proc(drv, "cuEventQuery", flags)
    p_event_sync = <f_p>_proc(drv, "cuEventSynchronize", flags)
    p_launch = <f_launch>_proc(drv, "cuLaunchKernel", flags)
    p_launch_ex = <f_launch_ex>_proc(drv, "cuLaunchKernelEx", flags)
    p_graph_launch = <f_pp>_proc(drv, "cuGraphLaunch", flags)
    p_graph_upload = <f_pp>_proc(drv, "cuGraphUpload", flags)
    p_write32 = <f_value32>_proc(drv, "cuStreamWriteValue32", flags)
    p_wait32 = <f_value32>_proc(drv, "cuStreamWaitValue32", flags)
    p_write64 = <f_value64>_proc(drv, "cuStreamWriteValue64", flags)
    p_wait64 = <f_value64>_proc(drv, "cuStreamWaitValue64", flags)
    p_is_capturing = <f_capturing>_proc(drv, "cuStreamIsCapturing", flags)
    p_launch_host_func = <f_hostfn>_proc(drv, "cuLaunchHostFunc", flags)
    p_ctx_get_current = <f_ctx_get>_proc(drv, "cuCtxGetCurrent", flags)
    p_ctx_push = <f_p>_proc(drv, "cuCtxPushCurrent", flags)
    p_ctx_pop = <f_ctx_get>_proc(drv, "cuCtxPopCurrent", flags)
    p_mem_alloc = <f_alloc>_proc(drv, "cuMemAlloc", flags)
    p_mem_free = <f_free>_proc(drv, "cuMemFree", flags)
    p_mem_alloc_async = <f_alloc_async>_proc(drv, "cuMemAllocAsync", flags)
    p_mem_free_async = <f_free_async>_proc(drv, "cuMemFreeAsync", flags)
    p_mem_alloc_pool = <f_alloc_pool>_proc(drv, "cuMemAllocFromPoolAsync", flags)
    _loaded = True
    return 0


# -- what the core needs from the Python modules (set by configure()) ---------------------
cdef bint _ready = False
cdef GuardCore _GUARD = None       # errors.GUARD (its fields are C fields: see GuardCore)
cdef object _error_for = None      # errors.error_for
cdef object _CUresult = None       # cuda.bindings.driver.CUresult
cdef object _drv = None            # cuda.bindings.driver
cdef dict _ACTIVE = None           # capture.ACTIVE
cdef object _DEFERRED = None       # _handle.deferred (a deque)
cdef object _drain = None          # _handle.drain
cdef object _collected = None      # _handle._collected
cdef object _unpinned = None       # _handle.unpinned
cdef object _wake = None           # _handle.wake (the releasing thread)
cdef object _settle = None         # _handle.settle
cdef object _REAPING = None        # _handle._reaping.locked (the lock is held during the thread's pass)
cdef dict _PENDING = None          # _hostfn.PENDING
cdef object _after_sync = None     # _hostfn.after_sync
cdef object _after_event_sync = None  # _hostfn.after_event_sync
cdef dict _EAGER = None            # _hostfn._eager
cdef object _KEYS = None           # _hostfn._keys
cdef object _find_record = None    # _hostfn._find (captured records)
cdef object _store = None          # _hostfn._store
cdef object _trampoline_failed = None  # _hostfn._trampoline_failed
cdef object _DeviceMemory = None     # _coerce.DeviceMemory
cdef object _PoolBase = None          # _coerce.PoolBase
cdef object _WaitCondition = None    # _enums.WaitCondition
cdef object _LaunchConfig = None     # launch.LaunchConfig
cdef object _STREAM = None           # stream.Stream
cdef object _ATTR_64 = None          # DeviceAttribute.CAN_USE_64_BIT_STREAM_MEM_OPS, as an int
cdef dict _ADOPTED = None          # device._adopted
cdef object _OWNED = None          # device._owned (weak values)
cdef object _LEGACY = None         # memory._LEGACY (the CU_STREAM_LEGACY handle)
cdef object _CUdeviceptr = None    # cuda.bindings.driver.CUdeviceptr
cdef object _free_async_py = None  # _ordered.free_async
cdef object _SUCCESS_TUPLE = None  # (CUresult.CUDA_SUCCESS,): a release's status


def configure():
    """Connect the core to the Python modules; ``cudriver/__init__`` calls it once."""
    global _ready, _GUARD, _error_for, _CUresult, _drv, _ACTIVE, _DEFERRED, _drain
    global _collected, _unpinned, _wake, _settle, _REAPING, _PENDING, _after_sync, _EAGER, _KEYS, _find_record
    global _after_event_sync
    global _trampoline_failed, _DeviceMemory, _WaitCondition, _store
    global _ADOPTED, _OWNED, _LEGACY, _CUdeviceptr, _free_async_py, _SUCCESS_TUPLE, _ATTR_64
    global _LaunchConfig, _PoolBase, _STREAM
    from cuda.bindings import driver as drv
    from cudriver import errors
    from cudriver._context import device
    from cudriver._launch import launch
    from cudriver._lifetime import _coerce, _handle, _hostfn, capture
    from cudriver._memory import _ordered, memory
    from cudriver._runtime import _enums
    from cudriver._work import stream
    _LaunchConfig = launch.LaunchConfig
    _STREAM = stream.Stream
    _drv = drv
    _CUresult = drv.CUresult
    _GUARD = <GuardCore?>errors.GUARD
    _error_for = errors.error_for
    _ACTIVE = capture.ACTIVE
    _DEFERRED = _handle.deferred
    _drain = _handle.drain
    _collected = _handle._collected
    _unpinned = _handle.unpinned
    _wake = _handle.wake
    _settle = _handle.settle
    _REAPING = _handle._reaping.locked
    _PENDING = _hostfn.PENDING
    _after_sync = _hostfn.after_sync
    _after_event_sync = _hostfn.after_event_sync
    _EAGER = _hostfn._eager
    _KEYS = _hostfn._keys
    _find_record = _hostfn._find
    _store = _hostfn._store
    _trampoline_failed = _hostfn._trampoline_failed
    _DeviceMemory = _coerce.DeviceMemory
    _PoolBase = _coerce.PoolBase
    _WaitCondition = _enums.WaitCondition
    _ATTR_64 = int(_enums.DeviceAttribute.CAN_USE_64_BIT_STREAM_MEM_OPS)
    _ADOPTED = device._adopted
    _OWNED = device._owned
    _LEGACY = memory._LEGACY
    _CUdeviceptr = drv.CUdeviceptr
    _free_async_py = _ordered.free_async
    _SUCCESS_TUPLE = (drv.CUresult.CUDA_SUCCESS,)
    configure_releases()
    errors.GUARD.c_inside = in_host_function
    _ready = True


cdef class GuardCore:
    """The fields of :class:`cudriver.errors.CallGuard` as C fields.

    The hot paths test them on every call: a C field costs a load where an instance
    attribute costs a dictionary lookup. The Python class adds the methods.
    """

    cdef public bint armed
    cdef public bint initialized
    cdef public bint forked
    cdef public int running
    cdef public object captures
    cdef public object restrictive
    cdef public object open


cdef object _error(CUresult status, str name):
    """The exception for ``status`` from driver function ``name`` (as the slow paths build it)."""
    try:
        code = _CUresult(status)
    except ValueError:
        code = status
    return _error_for(code, getattr(_drv, name))


cdef inline bint _fast() except -1:
    """Whether the compiled path may run: configured and loaded, on a thread that is not
    running a host function, with the driver initialised, not in a forked child.

    The guard is armed while any thread runs a host function; only that thread is
    refused (its C flag), so other threads keep the compiled paths meanwhile."""
    if not _ready:
        return False
    # Armed whenever a host function runs on any thread (its count is raised, with the
    # GIL held, before the thread's flag is set): the thread-local flag, which costs a
    # call in a shared library, is read only then.
    if _GUARD.armed and (cudriver_in_hostfn or _GUARD.forked or not _GUARD.initialized):
        return False
    if not _loaded:
        _load()
    return True


cdef inline object _done(CUresult st):
    """A query's status as ``_done_now`` answers: True, False (not ready) or None."""
    if st == SUCCESS:
        return True
    if st == NOT_READY:
        return False
    return None


cdef inline bint _int_stream(object s, uintptr_t* out) except -1:
    """The stream handle of ``s`` when it is a plain case; False to fall back."""
    cdef HandleRoot r
    if type(s) is _STREAM or isinstance(s, StreamCore):  # the exact type first: no MRO walk
        r = <HandleRoot>s
        if r._h is None:
            return False
        out[0] = <uintptr_t>r._key
        return True
    return False  # None (refused by the slow path), a foreign stream, an int, ...


cdef inline object _pin(object o):
    """Pin the release state of ``o`` (an open HandleRoot, just checked) for a driver call
    made without the GIL; returns the state to pass to :func:`_unpin`, or None.

    Check and pin run with the GIL held and no Python code between them, so a close()
    on another thread either came before the check or sees the pin."""
    cdef PyObject* p = (<HandleRoot>o)._st
    if p == NULL or type(<object>p) is not State:
        return None
    (<State>p).busy += 1  # a C counter: no allocation, and the GIL is held
    return <object>p


cdef inline int _unpin(object state) except -1:
    cdef State st
    if state is None:
        return 0
    st = <State>state
    st.busy -= 1
    if st.closing and not _held(st):
        _unpinned(st)
    return 0


# -- the root of every handle class --------------------------------------------------------
@cython.no_gc_clear
cdef class HandleRoot:
    """The C fields of every handle: the raw handle, its int value, its release state.

    An object collected while open queues its release (``_handle._collected``). The
    state is held by a reference the garbage collector does not see (as a
    ``weakref.finalize`` registry would hold it): a collection never clears the state
    of an object it frees, and what the state keeps (the objects this one depends on) stays alive
    until the release has run.
    """

    cdef public object _h
    cdef public object _key
    cdef public object _owned
    cdef public object _owner
    cdef public object _finalizer
    cdef object __weakref__
    cdef PyObject* _st

    @property
    def _state(self):
        if self._st == NULL:
            return None
        return <object>self._st

    @_state.setter
    def _state(self, value):
        cdef PyObject* old = self._st
        if value is None:
            self._st = NULL
        else:
            Py_INCREF(value)
            self._st = <PyObject*>value
        Py_XDECREF(old)

    def __dealloc__(self):
        cdef PyObject* st = self._st
        if st == NULL:
            return
        self._st = NULL
        try:
            if self._h is not None and _collected is not None:
                if not _free_async_now(<State>st):
                    _collected(<object>st)
        except BaseException:
            pass
        finally:
            Py_XDECREF(st)


# -- streams ------------------------------------------------------------------------------
cdef class StreamCore(HandleRoot):
    """Compiled methods of :class:`cudriver.Stream`."""

    def synchronize(self):
        """Block until all work on the stream has completed (``cuStreamSynchronize``).

        Then runs the releases that waited for a safe moment (objects collected on
        the host-function thread or during a capture), and raises
        :class:`~cudriver.HostCallbackError` if a host function that ran on this
        stream raised since the last synchronisation.
        """
        cdef CUresult st
        cdef void* h
        if not _fast() or self._h is None or p_stream_sync == NULL:
            return self._synchronize_slow()
        h = <void*><uintptr_t>self._key
        # Pinned for the wait: a close() on another thread meanwhile destroys the stream
        # only after it.
        pin = _pin(self)
        with nogil:
            st = p_stream_sync(h)
        _unpin(pin)
        if st != SUCCESS:
            raise _error(st, "cuStreamSynchronize")
        if _DEFERRED or _REAPING():
            _settle()
        if _PENDING:
            _after_sync(self._key)

    def query(self):
        """Whether all work on the stream has completed (``cuStreamQuery``); never blocks."""
        cdef CUresult st
        if not _fast() or self._h is None or p_stream_query == NULL:
            return self._query_slow()
        st = p_stream_query(<void*><uintptr_t>self._key)
        if st == SUCCESS:
            return True
        if st == NOT_READY:
            return False
        raise _error(st, "cuStreamQuery")

    def _done_now(self):
        # aio.Awaitable._done_now in C: a stream of its own, not capturing; True when
        # idle, False when busy, None when unsure (the future's path decides).
        cdef CUresult st
        cdef int status = 0
        cdef void* h
        if (not _fast() or self._h is None or p_is_capturing == NULL
                or p_stream_query == NULL or <uintptr_t>self._key <= 2 or _GUARD.open):
            return None
        h = <void*><uintptr_t>self._key
        st = p_is_capturing(h, &status)
        if st != SUCCESS or status != 0:
            return None
        return _done(p_stream_query(h))

    def wait(self, other):
        """Make later work on this stream wait for ``other`` (``cuStreamWaitEvent``).

        ``other`` is an :class:`~cudriver.Event` (waits for its last record) or a
        stream-like object (waits for the work enqueued on it so far, through a
        temporary event recorded there with ``cuEventRecord``). Does not block the
        host; the temporary event is the only allocation.
        """
        cdef CUresult st
        cdef void* h
        cdef void* e
        if (not _fast() or self._h is None or p_stream_wait_event == NULL
                or not isinstance(other, EventCore) or (<HandleRoot>other)._h is None):
            return self._wait_slow(other)
        h = <void*><uintptr_t>self._key
        e = <void*><uintptr_t>(<HandleRoot>other)._key
        pin = _pin(self)
        pin2 = _pin(other)
        with nogil:
            st = p_stream_wait_event(h, e, 0)
        _unpin(pin2)
        _unpin(pin)
        if st != SUCCESS:
            raise _error(st, "cuStreamWaitEvent")

    def record(self, event=None):
        """Record ``event`` (a new timing-less one when None) on this stream.

        Calls ``cuEventRecord`` (and ``cuEventCreate`` when ``event`` is None); returns
        the event. For :meth:`Event.elapsed_ms`, pass events created with
        ``Event(timing=True)``.
        """
        cdef CUresult st
        cdef void* h
        cdef void* e
        if (not _fast() or self._h is None or p_event_record == NULL
                or not isinstance(event, EventCore) or (<HandleRoot>event)._h is None):
            return self._record_slow(event)
        h = <void*><uintptr_t>self._key
        e = <void*><uintptr_t>(<HandleRoot>event)._key
        pin = _pin(self)
        pin2 = _pin(event)
        with nogil:
            st = p_event_record(e, h)
        _unpin(pin2)
        _unpin(pin)
        if st != SUCCESS:
            raise _error(st, "cuEventRecord")
        (<EventCore>event)._recorded_on = <uintptr_t>self._key if self._key else 1
        return event

    def __cuda_stream__(self):
        """The ``__cuda_stream__`` protocol: ``(0, handle as int)``."""
        if self._h is None:
            return self._cuda_stream_slow()
        return (0, self._key)

    def launch_host_func(self, fn, /, *args, **kwargs):
        """Run ``fn(*args, **kwargs)`` on a driver thread when the stream reaches this point.

        Calls ``cuLaunchHostFunc``. The function runs after all work enqueued on the
        stream before it; work enqueued after it waits until it returns. Does not
        block and does not allocate device memory.

        Inside a capture (``with stream.capture() as g:``) a host node is recorded
        instead; it runs on every replay of every executable graph made from ``g``.
        ``fn`` and its arguments are kept alive until the function has run (eager), or
        as long as the graph and every executable graph made from it (captured),
        also when the caller keeps no reference to them.

        Parameters
        ----------
        fn
            Any callable. It must not call CUDA (no driver call of any kind: the
            driver forbids it in host functions, and a synchronising call would
            deadlock the stream).
        *args, **kwargs
            Passed to ``fn``.

        Notes
        -----
        * The driver thread takes the GIL to run ``fn``; work behind it on the stream
          waits meanwhile. (cuda-bindings 12.x calls do not always release the GIL,
          so waiting on such a stream from Python can deadlock there.)
        * Each one costs several microseconds, mostly the driver's hand-off (see the
          performance page); to signal completion at high rates use
          :meth:`write_value32` on mapped memory.
        * An exception raised by ``fn`` does not stop the stream. The next
          ``synchronize()`` of this stream (for a graph: of the stream it was launched
          on) or ``Context.synchronize()`` re-raises it as
          :class:`~cudriver.HostCallbackError` (all of them in ``.errors``); one
          never collected goes to :data:`sys.unraisablehook` when the stream closes.

        Raises
        ------
        TypeError
            ``fn`` is not callable.
        ClosedError
            The stream is closed.
        """
        cdef CUresult st
        cdef int status = 0
        cdef void* h
        cdef uintptr_t key
        if (not _fast() or self._h is None or p_launch_host_func == NULL
                or p_is_capturing == NULL or not callable(fn)):
            return self._launch_host_func_slow(fn, *args, **kwargs)
        ctx = self._context
        if ctx is None:
            return self._launch_host_func_slow(fn, *args, **kwargs)
        h = <void*><uintptr_t>self._key
        st = p_is_capturing(h, &status)
        if st != SUCCESS:
            raise _error(st, "cuStreamIsCapturing")
        if status != 0:  # captured: the slow path keeps the record with the graph
            return self._launch_host_func_slow(fn, *args, **kwargs)
        k = next(_KEYS)
        key = <uintptr_t>k
        # What the trampoline needs, as a tuple (no record object): registered before
        # the call, since the driver thread may run it before the call returns.
        _EAGER[k] = (fn, args, kwargs, self._key or 1, (<HandleRoot>ctx)._key)
        pin = _pin(self)
        with nogil:
            st = p_launch_host_func(h, _trampoline, <void*>key)
        _unpin(pin)
        if st != SUCCESS:
            _EAGER.pop(k, None)
            raise _error(st, "cuLaunchHostFunc")

    def write_value32(self, addr, value, *, no_memory_barrier=False):
        """Write a 32-bit ``value`` to ``addr`` when the stream reaches this point.

        Calls ``cuStreamWriteValue32``; does not block or allocate. Captured as a
        memory-operation node inside a capture.

        Parameters
        ----------
        addr
            A device buffer, a device-mapped pinned buffer, ``(buffer, byte_offset)``,
            a ``CUdeviceptr`` or an int; 4-byte aligned.
        value
            ``0 <= value < 2**32``.
        no_memory_barrier
            Skip the memory barrier before the write
            (``CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER``): earlier writes by the stream
            may become visible after this one. The CUDA 12+ driver API documents this
            flag as unsupported; a driver that refuses it raises
            :class:`~cudriver.NotSupportedError`.

        Raises
        ------
        ValueError
            The value does not fit, the address is misaligned or beyond the buffer.
        NotSupportedError
            The driver refused ``no_memory_barrier=True``.
        """
        if no_memory_barrier is not False or not _memop(self, addr, value, 4, 0, False):
            return self._write_value32_slow(addr, value, no_memory_barrier=no_memory_barrier)

    def wait_value32(self, addr, value, cond=_GEQ_DEFAULT, *, flush=False):
        """Make later work wait until the 32-bit value at ``addr`` meets ``cond``.

        Calls ``cuStreamWaitValue32``; does not block the host or allocate. Captured
        as a memory-operation node inside a capture.

        Parameters
        ----------
        addr
            As for :meth:`write_value32`; 4-byte aligned.
        value
            Compared with the memory value as ``cond`` says; ``0 <= value < 2**32``.
        cond
            A :class:`~cudriver.WaitCondition`: ``GEQ`` (default), ``EQ``, ``AND`` or
            ``NOR``.
        flush
            Also flush remote writes once the wait ends
            (``CU_STREAM_WAIT_VALUE_FLUSH``).

        Raises
        ------
        NotSupportedError
            ``NOR`` without ``CAN_USE_STREAM_WAIT_VALUE_NOR``, or ``flush`` without
            ``CAN_FLUSH_REMOTE_WRITES``.
        ValueError
            The value does not fit, the address is misaligned or beyond the buffer.
        """
        if flush is not False or not _memop(self, addr, value, 4, _cond(cond), True):
            return self._wait_value32_slow(addr, value, cond, flush=flush)

    def write_value64(self, addr, value, *, no_memory_barrier=False):
        """Write a 64-bit ``value`` to ``addr`` when the stream reaches this point.

        Calls ``cuStreamWriteValue64``; does not block or allocate. As
        :meth:`write_value32`, with ``0 <= value < 2**64`` and an 8-byte aligned
        address.

        Raises
        ------
        NotSupportedError
            The device lacks ``CAN_USE_64_BIT_STREAM_MEM_OPS``.
        ValueError
            The value does not fit, the address is misaligned or beyond the buffer.
        """
        if no_memory_barrier is not False or not _memop(self, addr, value, 8, 0, False):
            return self._write_value64_slow(addr, value, no_memory_barrier=no_memory_barrier)

    def wait_value64(self, addr, value, cond=_GEQ_DEFAULT, *, flush=False):
        """Make later work wait until the 64-bit value at ``addr`` meets ``cond``.

        Calls ``cuStreamWaitValue64``; does not block the host or allocate. As
        :meth:`wait_value32`, with ``0 <= value < 2**64`` and an 8-byte aligned
        address.

        Raises
        ------
        NotSupportedError
            The device lacks ``CAN_USE_64_BIT_STREAM_MEM_OPS`` (or the attribute
            ``NOR`` or ``flush`` need).
        ValueError
            The value does not fit, the address is misaligned or beyond the buffer.
        """
        if flush is not False or not _memop(self, addr, value, 8, _cond(cond), True):
            return self._wait_value64_slow(addr, value, cond, flush=flush)


cdef inline int _cond(object cond) except -2:
    """A wait condition's driver value; -1 for anything the compiled path leaves alone."""
    if cond is _GEQ_DEFAULT:
        return 0
    if type(cond) is _WaitCondition:
        return cond._value_
    return -1


cdef bint _memop(StreamCore self, object addr, object value, int width, int cond,
                 bint wait) except -1:
    """A write or wait of ``width`` bytes (4 or 8) in C; False to take the slow path.

    ``cond`` is the wait's condition (0-2) or 0 for a write; no flush or barrier flag."""
    cdef uint64_t a
    cdef uint64_t v
    cdef CUresult st
    cdef void* h
    cdef int kind = 0
    cdef f_value32 f32 = p_wait32 if wait else p_write32
    cdef f_value64 f64 = p_wait64 if wait else p_write64
    if (not _fast() or self._h is None or _ACTIVE or not 0 <= cond <= 2
            or type(value) is not int or value < 0):
        return False
    if width == 4:
        if f32 == NULL or value > 4294967295:
            return False
    elif f64 == NULL or value > 0xFFFFFFFFFFFFFFFF or not _can_use_64(self):
        return False
    kind = _memop_address(addr, width, &a)
    if not kind:
        return False
    v = value
    h = <void*><uintptr_t>self._key
    pin = _pin(self)
    pin2 = _pin(addr) if kind == 2 else None
    with nogil:
        if width == 4:
            st = f32(h, a, <uint32_t>v, <unsigned int>cond)
        else:
            st = f64(h, a, v, <unsigned int>cond)
    _unpin(pin2)
    _unpin(pin)
    if st != SUCCESS:
        raise _error(st, ("cuStreamWaitValue" if wait else "cuStreamWriteValue") + str(width * 8))
    return True


cdef inline bint _can_use_64(object stream) except -1:
    """Whether the stream's device is known (from its attribute cache) to take 64-bit
    memory operations; when not known yet, the slow path asks the driver and fills the
    cache, or raises the NotSupportedError."""
    ctx = stream._context
    if ctx is None:
        return False
    dev = ctx._device
    if dev is None:
        return False
    v = dev._attrs.get(_ATTR_64)
    return v is not None and v != 0


cdef inline int _memop_address(object addr, uint64_t width, uint64_t* out) except -1:
    """A plain int address (1) or an open cudriver device buffer (2), aligned and big
    enough; 0 to fall back. (Stream memory operations on stream-ordered memory are
    refused by the driver, so no free needs ordering after them.)"""
    cdef uint64_t a
    cdef HandleRoot r
    cdef int kind
    if type(addr) is int:
        if not 0 < addr <= 0xFFFFFFFFFFFFFFFF:
            return 0
        a = addr
        kind = 1
    elif isinstance(addr, _DeviceMemory):
        r = <HandleRoot>addr
        if r._h is None or addr._nbytes < width:
            return 0
        a = <uint64_t>r._key
        kind = 2
    else:
        return 0
    if a & (width - 1):
        return 0
    out[0] = a
    return kind


# -- host functions ---------------------------------------------------------------------------
cdef extern from *:
    """
    /* Set once a driver thread keeps a Python thread state for its host functions. */
    static __thread int cudriver_primed = 0;
    /* Set while this thread runs a host function (through the C trampoline). */
    static __thread int cudriver_in_hostfn = 0;
    """
    int cudriver_primed
    int cudriver_in_hostfn

cdef extern from "Python.h":
    ctypedef int PyGILState_STATE
    PyGILState_STATE PyGILState_Ensure() nogil
    void* PyEval_SaveThread() nogil


cdef void _trampoline(void* data) noexcept nogil:
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


cdef void _run_record(uintptr_t key) noexcept with gil:
    # An eager host function's entry is a tuple (fn, args, kwargs or None, stream key,
    # context key); a record otherwise (the slow enqueue, captured host functions).
    global cudriver_in_hostfn
    try:
        k = key
        rec = _EAGER.pop(k, None)
        if rec is None:  # a captured record: _hostfn finds and accounts for it
            rec = _find_record(k)
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
        # count that arms the slow paths' check. Only C code changes the count, always with the GIL held, so it needs no lock.
        _GUARD.running += 1
        _GUARD.armed = True
        cudriver_in_hostfn = 1
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
            cudriver_in_hostfn = 0
            _GUARD.running -= 1
            if not _GUARD.running and _GUARD.initialized and not _GUARD.forked:
                _GUARD.armed = False
    except BaseException as exc:
        try:
            _trampoline_failed(exc)
        except BaseException:
            pass


def in_host_function():
    """Whether the calling thread runs a host function through the C trampoline."""
    return bool(cudriver_in_hostfn)


def run_record(key):
    """Run host function ``key`` as the trampoline does, on this thread (for tests)."""
    _run_record(<uintptr_t>key)


def trampoline_address():
    """The address of the C host-function trampoline (it lives as long as the process)."""
    return <uintptr_t>_trampoline


cdef void _eventfd_post(void* data) noexcept nogil:
    # ``cudriver._wakeup.Eventfds``' host function: add 1 to the eventfd ``data`` (one
    # write; nothing else runs on the driver's thread, and no GIL is taken).
    cdef uint64_t one = 1
    cdef ssize_t ignored = write(<int><intptr_t>data, &one, 8)


def eventfd_post_address():
    """The address of the C host function that posts an eventfd (lives as long as the process)."""
    return <uintptr_t>_eventfd_post


# -- events -------------------------------------------------------------------------------------
cdef class EventCore(HandleRoot):
    """Compiled methods of :class:`cudriver.Event`, and the stream of its last record."""

    # The stream (handle value; the NULL stream as 1) of the last record, 0 before any:
    # synchronize() re-raises the errors of host functions that ran there.
    cdef public unsigned long long _recorded_on

    def record(self, stream):
        """Record the event on ``stream`` (``cuEventRecord``); returns ``self``.

        ``stream`` is a :class:`~cudriver.Stream`, any ``__cuda_stream__`` object, a
        ``CUstream`` or an int; None is refused (``TypeError``): for the legacy
        default stream pass :meth:`Stream.legacy`. Does not block or allocate.
        """
        cdef CUresult st
        cdef uintptr_t s = 0
        cdef void* e
        if (not _fast() or self._h is None or p_event_record == NULL
                or not _int_stream(stream, &s)):
            return self._record_slow(stream)
        e = <void*><uintptr_t>self._key
        pin = _pin(self)
        pin2 = _pin(stream) if s else None
        with nogil:
            st = p_event_record(e, <void*>s)
        _unpin(pin2)
        _unpin(pin)
        if st != SUCCESS:
            raise _error(st, "cuEventRecord")
        self._recorded_on = s if s else 1
        return self

    def _done_now(self):
        # aio.Awaitable._done_now in C (see StreamCore._done_now).
        if not _fast() or self._h is None or p_event_query == NULL or _GUARD.open:
            return None
        return _done(p_event_query(<void*><uintptr_t>self._key))

    def query(self):
        """Whether the work before the last record has completed (``cuEventQuery``)."""
        cdef CUresult st
        if not _fast() or self._h is None or p_event_query == NULL:
            return self._query_slow()
        st = p_event_query(<void*><uintptr_t>self._key)
        if st == SUCCESS:
            return True
        if st == NOT_READY:
            return False
        raise _error(st, "cuEventQuery")

    def synchronize(self):
        """Block until the recorded work has completed (``cuEventSynchronize``).

        Then, as :meth:`Stream.synchronize` does, runs the releases that waited for a
        safe moment and raises :class:`~cudriver.HostCallbackError` if a host function
        that ran on the stream of the last :meth:`record` raised since errors were
        last collected there.
        """
        cdef CUresult st
        cdef void* e
        if not _fast() or self._h is None or p_event_sync == NULL:
            return self._synchronize_slow()
        e = <void*><uintptr_t>self._key
        pin = _pin(self)  # see StreamCore.synchronize
        with nogil:
            st = p_event_sync(e)
        _unpin(pin)
        if st != SUCCESS:
            raise _error(st, "cuEventSynchronize")
        if _DEFERRED or _REAPING():
            _settle()
        if _PENDING and self._recorded_on:
            _after_event_sync(self._recorded_on)


# -- executable graphs --------------------------------------------------------------------------
cdef class GraphExecCore(HandleRoot):
    """Compiled methods of :class:`cudriver.GraphExec`, and the fields its launch reads."""

    cdef public object _host_records  # the graph's host-function records (a list)
    cdef public object _streams       # streams launched on (a set), or None

    def launch(self, stream):
        """Launch the graph on ``stream`` (``cuGraphLaunch``); does not block.

        ``stream`` is required: None is refused (``TypeError``; :meth:`Stream.legacy`
        is the legacy default stream). Exceptions raised by host functions in the
        graph are re-raised by the next ``synchronize()`` of this stream.
        """
        cdef CUresult st
        cdef uintptr_t s = 0
        cdef void* g
        if (not _fast() or self._h is None or p_graph_launch == NULL or _ACTIVE
                or self._host_records or not _int_stream(stream, &s)):
            return self._launch_slow(stream)
        g = <void*><uintptr_t>self._key
        pin = _pin(self)
        pin2 = _pin(stream) if s else None
        with nogil:
            st = p_graph_launch(g, <void*>s)
        _unpin(pin2)
        _unpin(pin)
        if st != SUCCESS:
            raise _error(st, "cuGraphLaunch")
        if self._streams is not None:
            self._streams.add(<object>s)

    def upload(self, stream):
        """Upload the executable graph's resources on ``stream`` (``cuGraphUpload``).

        Enqueued, not waited for; ``stream`` is required (None is refused, as for
        :meth:`launch`).
        """
        cdef CUresult st
        cdef uintptr_t s = 0
        cdef void* g
        if (not _fast() or self._h is None or p_graph_upload == NULL
                or not _int_stream(stream, &s)):
            return self._upload_slow(stream)
        g = <void*><uintptr_t>self._key
        pin = _pin(self)
        pin2 = _pin(stream) if s else None
        with nogil:
            st = p_graph_upload(g, <void*>s)
        _unpin(pin2)
        _unpin(pin)
        if st != SUCCESS:
            raise _error(st, "cuGraphUpload")


# -- kernels ------------------------------------------------------------------------------------
cdef inline bint _dim3(object v, unsigned int* out) except -1:
    """An int or a tuple of 1 to 3 ints, each in [1, 2**32 - 1]; False to fall back."""
    cdef Py_ssize_t n, i
    out[0] = 1
    out[1] = 1
    out[2] = 1
    if type(v) is int:
        if not 1 <= v <= 4294967295:
            return False
        out[0] = <unsigned int>v
        return True
    if type(v) is not tuple:
        return False
    n = len(<tuple>v)
    if n < 1 or n > 3:
        return False
    for i in range(n):
        x = (<tuple>v)[i]
        if type(x) is not int or not 1 <= x <= 4294967295:
            return False
        out[i] = <unsigned int>x
    return True


cdef inline int _pack(object items, tuple args, char* buf, void** ptrs, Py_ssize_t total,
                      PyObject** held, Py_ssize_t* nheld) except -1:
    """Pack ``args`` into ``buf`` by ``items`` (index, size, offset).

    Returns 0 when something needs the slow packer, 1 when done, 2 when done and a
    cudriver device buffer is among the arguments. Each such buffer is pinned as its
    address is read (check, read and pin with no Python code between them), its state
    stored with a new reference in ``held`` (``nheld`` counts them, whatever the
    outcome): the caller ends the pins with :func:`_unpin_held`.
    """
    cdef Py_ssize_t i, s, o
    cdef int res = 1
    cdef double d
    cdef int64_t q
    cdef HandleRoot r
    for item in <tuple>items:
        i = (<tuple>item)[0]
        s = (<tuple>item)[1]
        o = (<tuple>item)[2]
        if o + s > total:
            return 0
        v = args[i]
        t = type(v)
        if t is float:
            d = v
            if s == 8:
                (<double*>(buf + o))[0] = d
            elif s == 4:
                if not (isnan(d) or isinf(d) or fabs(d) <= FLT_MAX):
                    return 0
                (<float*>(buf + o))[0] = <float>d
            else:
                return 0
        elif t is int:
            if s == 4:
                if not -2147483648 <= v <= 2147483647:
                    return 0
                (<int32_t*>(buf + o))[0] = <int32_t>v
            elif s == 8:
                if not -9223372036854775808 <= v <= 9223372036854775807:
                    return 0
                q = v
                (<int64_t*>(buf + o))[0] = q
            else:
                return 0
        elif s == 8 and isinstance(v, _DeviceMemory):
            r = <HandleRoot>v
            if r._h is None:
                return 0
            pinned = _pin(v)
            if pinned is not None:
                Py_INCREF(pinned)
                held[nheld[0]] = <PyObject*>pinned
                nheld[0] += 1
            (<uint64_t*>(buf + o))[0] = <uint64_t>r._key
            res = 2
        else:
            return 0
        ptrs[i] = buf + o
    return res


cdef int _unpin_held(PyObject** held, Py_ssize_t n) except -1:
    """End the pins :func:`_pack` took (every one, even if a release raises)."""
    cdef Py_ssize_t i
    err = None
    for i in range(n):
        st = <object>held[i]
        Py_XDECREF(held[i])
        try:
            _unpin(st)
        except BaseException as exc:
            if err is None:
                err = exc
    if err is not None:
        raise err
    return 0


#: ``block`` of ``Kernel.launch(stream, config, *args)`` when no argument follows the
#: config (``launch.NO_BLOCK`` is this object in compiled mode).
NO_BLOCK = object()


cdef class KernelCore(HandleRoot):
    """Compiled methods of :class:`cudriver.Kernel`."""

    def launch(self, stream, grid, block=NO_BLOCK, *args, shared_mem=0, config=None):
        """Launch the kernel on ``stream`` (``cuLaunchKernel``); does not block.

        Written ``launch(stream, grid, block, *args)``, or, with a
        :class:`~cudriver.LaunchConfig` that carries the shape (cuda.core's way),
        ``launch(stream, LaunchConfig(grid=..., block=...), *args)``.

        Parameters
        ----------
        stream
            A :class:`~cudriver.Stream` or any stream-like object. None is refused
            (``TypeError``): for the legacy default stream pass :meth:`Stream.legacy`.
        grid, block
            An int or a tuple of 1 to 3 ints, each >= 1; or, in place of both, a
            ``LaunchConfig`` with ``grid`` and ``block`` (and its ``shared_mem`` and
            attributes).
        *args
            One value per kernel parameter, packed by the rules of :func:`pack_arg`.
        shared_mem
            Dynamic shared memory per block, in bytes.
        config
            A :class:`~cudriver.LaunchConfig` of attributes only (clusters,
            cooperative launch, programmatic dependent launch, priority, memory
            synchronisation domain): the launch then goes through
            ``cuLaunchKernelEx``, and a refusal names the attributes set.

        Notes
        -----
        Packs the arguments on every call (into a reused host buffer: the driver
        copies them at launch); use :meth:`prepare` to pack once and launch many
        times. While the stream is capturing, the
        arguments are kept alive with the captured graph.

        Raises
        ------
        TypeError
            Wrong argument count, or an argument that cannot be packed (the message
            names the argument's index and the kernel); raised before launching.
        ValueError
            A bad grid, block or ``shared_mem``.
        ClosedError
            The kernel, its module or the stream is closed.
        """
        cdef unsigned int g[3]
        cdef unsigned int b[3]
        cdef uintptr_t s = 0
        cdef unsigned int shmem
        cdef CUresult st
        cdef void* f
        cdef uint64_t storage[MAX_PARAM_WORDS]
        cdef void* ptrs[MAX_PARAMS]
        cdef void** params = NULL
        cdef int packed = 1
        cdef Py_ssize_t n
        cdef PyObject* held[MAX_PARAMS]
        cdef Py_ssize_t nheld = 0
        cdef object attrs = None
        if config is not None:
            attrs = _config_attrs(config)
        if (not _fast() or self._h is None or p_launch == NULL or _ACTIVE
                or (config is not None and (attrs is None or p_launch_ex == NULL))
                or type(shared_mem) is not int or not 0 <= shared_mem <= 4294967295
                or not _dim3(grid, g) or not _dim3(block, b) or not _int_stream(stream, &s)):
            return self._launch_slow(stream, grid, block, *args, shared_mem=shared_mem, config=config)
        lay = self._layout
        if lay is None:
            return self._launch_slow(stream, grid, block, *args, shared_mem=shared_mem, config=config)
        n = len(args)
        if n != lay.n:
            return self._launch_slow(stream, grid, block, *args, shared_mem=shared_mem, config=config)
        if n:
            if n > MAX_PARAMS or lay.total > MAX_PARAM_BYTES:
                return self._launch_slow(stream, grid, block, *args, shared_mem=shared_mem, config=config)
            # The buffers among the arguments stay pinned until this launch's use is
            # noted (a close() on another thread then releases after it).
            try:
                packed = _pack(lay.items, args, <char*>storage, ptrs, MAX_PARAM_BYTES,
                               held, &nheld)
            except BaseException:
                _unpin_held(held, nheld)
                raise
            if not packed:
                _unpin_held(held, nheld)
                return self._launch_slow(stream, grid, block, *args, shared_mem=shared_mem, config=config)
            params = ptrs
        shmem = shared_mem
        f = <void*><uintptr_t>self._key
        # The module, not the kernel: unloading the module is what frees the function.
        m = self._module
        pin = _pin(m) if m is not None else None
        pin2 = _pin(stream) if s else None
        if attrs:
            st = _launch_ex(f, g, b, shmem, s, params, <bytes>attrs)
        else:
            with nogil:
                st = p_launch(f, g[0], g[1], g[2], b[0], b[1], b[2], shmem, <void*>s, params, NULL)
        try:
            if st != SUCCESS:
                raise self._launch_error(
                    _code(st), (g[0], g[1], g[2]), (b[0], b[1], b[2]), shmem,
                    config if attrs else None
                )
            if packed == 2:
                key = <object>s
                for a in args:
                    if isinstance(a, _DeviceMemory):
                        a._note_use(key)
        finally:
            try:
                _unpin_held(held, nheld)
            finally:
                _unpin(pin2)
                _unpin(pin)


cdef object _config_attrs(config):
    """A LaunchConfig's C attribute array (empty: none set), or None for another type."""
    if type(config) is not _LaunchConfig or config.grid is not None:
        return None  # the slow path checks it (a config with a shape goes in its place)
    c = config.__dict__.get("_cattrs")
    if c is None:
        c = config._c_attributes()
    return c


cdef CUresult _launch_ex(void* f, unsigned int* g, unsigned int* b, unsigned int shmem,
                         uintptr_t s, void** params, bytes attrs):
    """``cuLaunchKernelEx`` with the attributes ``attrs`` (the GIL released around it)."""
    cdef LaunchCfg cfg
    cdef CUresult st
    cfg.gridDimX = g[0]
    cfg.gridDimY = g[1]
    cfg.gridDimZ = g[2]
    cfg.blockDimX = b[0]
    cfg.blockDimY = b[1]
    cfg.blockDimZ = b[2]
    cfg.sharedMemBytes = shmem
    cfg.hStream = <void*>s
    cfg.attrs = <void*><char*>attrs
    cfg.numAttrs = <unsigned int>(len(attrs) // LAUNCH_ATTR_BYTES)
    with nogil:
        st = p_launch_ex(&cfg, f, params, NULL)
    return st


cdef object _code(CUresult status):
    try:
        return _CUresult(status)
    except ValueError:
        return status


cdef class PlanCore:
    """C fields and the compiled launch of :class:`cudriver.LaunchPlan`.

    ``_core_set`` (called whenever the plan is (re)packed) copies what a launch needs
    into C fields: the function, the dimensions, the parameter array's address.
    """

    cdef object _c_kernel
    cdef object _c_used
    cdef void* _c_func
    cdef void** _c_params
    cdef unsigned int _c_dims[6]
    cdef unsigned int _c_shmem
    # The launch attributes as a C array (LaunchConfig._c_attributes); empty: cuLaunchKernel.
    cdef bytes _c_attrs
    # The virtual-memory spaces of the arguments: a plan with any launches through the
    # Python method, which refuses an offloaded one.
    cdef tuple _c_spaces

    def _core_set(self, kernel, func, grid, block, shmem, params, used, attrs=b"", spaces=()):
        self._c_attrs = attrs
        self._c_spaces = tuple(spaces)
        self._c_kernel = kernel
        self._c_used = tuple(used)
        self._c_func = <void*><uintptr_t>func
        self._c_params = <void**><uintptr_t>params
        for i in range(3):
            self._c_dims[i] = grid[i]
            self._c_dims[3 + i] = block[i]
        self._c_shmem = shmem

    def launch(self, stream):
        """Launch on ``stream`` (``cuLaunchKernel``) with the packed arguments.

        Does not block or allocate. ``stream`` is required: None is refused
        (``TypeError``; :meth:`Stream.legacy` is the legacy default stream). While the
        stream is capturing, the kernel and the current arguments are kept alive with
        the captured graph.

        Raises
        ------
        ClosedError
            The kernel, its module or the stream is closed, or a
            :class:`~cudriver.VirtualBuffer` argument is offloaded.
        """
        cdef uintptr_t s = 0
        cdef CUresult st
        cdef void* f = self._c_func
        cdef void** params = self._c_params
        cdef unsigned int* d = self._c_dims
        cdef unsigned int shmem = self._c_shmem
        k = self._c_kernel
        attrs = self._c_attrs
        if (not _fast() or k is None or (<HandleRoot>k)._h is None or p_launch == NULL
                or _ACTIVE or (attrs and p_launch_ex == NULL) or self._c_spaces
                or not _int_stream(stream, &s)):
            return self._launch_slow(stream)
        m = k._module
        pin = _pin(m) if m is not None else None
        pin2 = _pin(stream) if s else None
        if attrs:
            st = _launch_ex(f, d, d + 3, shmem, s, params, attrs)
        else:
            with nogil:
                st = p_launch(f, d[0], d[1], d[2], d[3], d[4], d[5], shmem, <void*>s, params, NULL)
        _unpin(pin2)
        _unpin(pin)
        if st != SUCCESS:
            raise k._launch_error(_code(st), self.grid, self.block, shmem, self._config)
        used = self._c_used
        if used:
            key = <object>s
            for a in <tuple>used:
                a._note_use(key)


# -- release states ------------------------------------------------------------------------------
@cython.freelist(64)
cdef class State:
    """What a handle's release needs (``_handle._State``).

    Never refers back to the owning object. ``deps`` holds the states of the handles
    in ``keep``; ``dependants`` counts the unreleased states that keep this one (it
    changes in C with the GIL held, so atomically). ``leases`` and ``pins`` are made
    when first asked for: most handles never need them.
    """

    cdef public bint closing
    cdef public int dependants
    cdef public object deps
    cdef public object func
    cdef public object handle
    cdef public object keep
    cdef public object kind
    cdef object _leases
    cdef public object on_release
    cdef public long pid
    cdef object _pins
    # The pins taken by the compiled methods (the slow paths use ``pins``).
    cdef public int busy
    cdef public object release
    cdef public object used_on

    def __init__(self, handle, release, func, kind, keep, on_release):
        _state_init(self, handle, release, func, kind, keep, on_release)

    @property
    def leases(self):
        """The ids of the live leases (a set, made when first asked for)."""
        cdef object made
        if self._leases is None:
            made = set()
            if self._leases is None:  # a collection while allocating may have made it
                self._leases = made
        return self._leases

    @property
    def pins(self):
        """One entry per slow-path driver call in flight (a list, made when first asked for)."""
        cdef object made
        if self._pins is None:
            made = []
            if self._pins is None:  # a collection while allocating may have made it
                self._pins = made
        return self._pins


cdef inline bint _held(State st) except -1:
    """Whether anything keeps ``st`` from being released: leases, dependants, pins."""
    return bool(st.busy or st.dependants or st._pins or st._leases)


def held(state):
    """Whether anything keeps ``state`` from being released (the compiled ``_handle.held``)."""
    return _held(<State?>state)


def link(state, dep):
    """Make ``dep`` outlive ``state`` (the compiled ``_handle.link``)."""
    cdef State me = <State?>state
    cdef State d = <State?>dep
    me.deps = tuple(me.deps) + (d,)
    d.dependants += 1


def unlink(state, dep):
    """Undo :func:`link` (the compiled ``_handle.unlink``); nothing if not linked."""
    cdef State me = <State?>state
    cdef State d = <State?>dep
    deps = tuple(me.deps)
    if not any(x is d for x in deps):
        return
    me.deps = tuple([x for x in deps if x is not d])
    d.dependants -= 1


cdef extern from "<unistd.h>":
    int getpid() nogil


# This process's id: cached (a system call each time costs more than the rest of a
# state's set-up on a virtual machine) and refreshed in a forked child.
cdef long _PID = getpid()


def _refresh_pid():
    global _PID
    _PID = getpid()


import os as _os
_os.register_at_fork(after_in_child=_refresh_pid)


cdef inline State _state_init(State self, object handle, object release, object func,
                              object kind, object keep, object on_release):
    cdef PyObject* p
    cdef Py_ssize_t n = 0, i = 0
    self.handle = handle
    self.release = release
    self.func = func
    self.pid = _PID
    self.kind = kind
    self.keep = keep
    self.on_release = on_release
    self.closing = False
    self.used_on = None
    deps = ()
    if keep:
        for k in keep:
            if isinstance(k, HandleRoot):
                p = (<HandleRoot>k)._st
                if p != NULL and type(<object>p) is State:
                    n += 1
        if n:
            deps = PyTuple_New(n)
            for k in keep:
                if isinstance(k, HandleRoot):
                    p = (<HandleRoot>k)._st
                    if p != NULL and type(<object>p) is State:
                        Py_INCREF(<object>p)
                        PyTuple_SET_ITEM(deps, i, <object>p)
                        (<State>p).dependants += 1
                        i += 1
    self.deps = deps
    return self


cdef inline CUresult _in_context(uintptr_t ctx, bint* pushed) noexcept nogil:
    """Make ``ctx`` current unless it is; ``pushed`` says whether to pop afterwards."""
    cdef void* cur = NULL
    cdef CUresult st = p_ctx_get_current(&cur)
    pushed[0] = False
    if st == SUCCESS and <uintptr_t>cur == ctx:
        return SUCCESS
    st = p_ctx_push(<void*>ctx)
    if st == SUCCESS:
        pushed[0] = True
    return st


cdef inline void _pop_context() noexcept nogil:
    cdef void* ignored = NULL
    p_ctx_pop(&ignored)


@cython.freelist(16)
cdef class MemFree:
    """The release of a ``cuMemAlloc`` buffer: ``cuMemFree`` with its context current.

    Called with the buffer's handle, returns a status tuple as the bindings do.
    """

    cdef uintptr_t ctx
    cdef uint64_t ptr  # the buffer's address (the handle the release is called with)

    cdef CUresult free(self) noexcept:
        cdef CUresult st
        cdef bint pushed = False
        cdef uint64_t ptr = self.ptr
        cdef uintptr_t ctx = self.ctx
        with nogil:
            st = _in_context(ctx, &pushed)
            if st == SUCCESS:
                st = p_mem_free(ptr)
                if pushed:
                    _pop_context()
        return st

    def __call__(self, handle):
        cdef CUresult st
        if <uint64_t>int(handle) != self.ptr:
            raise ValueError("MemFree called with another buffer's handle")
        st = self.free()
        return _SUCCESS_TUPLE if st == SUCCESS else (_code(st),)


@cython.freelist(64)
cdef class MemFreeAsync:
    """The release of a stream-ordered buffer: ``cuMemFreeAsync`` on its stream.

    When no other stream used the buffer and its stream is open, the free is
    enqueued here; otherwise ``_ordered.free_async`` orders it first.
    """

    cdef object ctx_h
    cdef object stream
    cdef object used_on
    cdef uintptr_t ctx  # ctx_h as an int
    cdef uint64_t ptr   # the buffer's address (the handle the release is called with)

    @property
    def waits_for_device(self):
        """True: it enqueues on a stream, which may be capturing (see ``_handle``)."""
        return True

    cdef bint free(self, CUresult* out) except -1:
        """Enqueue the free from C; False when it needs ordering after other streams
        (or the stream is closed), which ``_ordered.free_async`` does."""
        cdef bint pushed = False
        cdef CUresult st
        cdef uint64_t ptr = self.ptr
        cdef uintptr_t ctx = self.ctx
        cdef void* sh
        s = self.stream
        if self.used_on or (<HandleRoot>s)._h is None or p_mem_free_async == NULL:
            return False
        sh = <void*><uintptr_t>(<HandleRoot>s)._key
        with nogil:
            st = _in_context(ctx, &pushed)
            if st == SUCCESS:
                st = p_mem_free_async(ptr, sh)
                if pushed:
                    _pop_context()
        out[0] = st
        return True

    def __call__(self, handle):
        cdef CUresult st = SUCCESS
        if <uint64_t>int(handle) != self.ptr:
            raise ValueError("MemFreeAsync called with another buffer's handle")
        if not self.free(&st):
            return _free_async_py(self.ctx_h, self.stream, self.used_on, handle)
        return _SUCCESS_TUPLE if st == SUCCESS else (_code(st),)


# -- device buffers ------------------------------------------------------------------------------
cdef object _current_context():
    """The current context's owning Context, when it is one cudriver knows; else None."""
    cdef void* cur = NULL
    if p_ctx_get_current(&cur) != SUCCESS or cur == NULL:
        return None
    key = <uintptr_t>cur
    ctx = _ADOPTED.get(key)
    if ctx is not None:
        return ctx
    ctx = _OWNED.get(key)
    if ctx is not None and (<HandleRoot>ctx)._h is not None:
        return ctx
    return None


cdef class BufferCore(HandleRoot):
    """The fields and the compiled constructor of :class:`cudriver.DeviceBuffer`.

    Allocates in C for a plain size with ``stream`` None or a cudriver ``Stream``
    and no ``context``; anything else goes to ``DeviceBuffer._init_slow``.
    """

    cdef public object _nbytes
    cdef public object _context
    cdef public object _stream
    cdef public object _stream_int
    cdef public object _sync_h
    cdef public object _dtype
    cdef public object _shape
    cdef public object _base
    cdef public object _offset
    cdef public object _views

    def __init__(self, nbytes, *, stream=None, context=None, pool=None):
        cdef CUresult st
        cdef uint64_t ptr = 0
        cdef size_t n
        cdef bint pushed = False
        cdef uintptr_t cctx
        cdef void* sh
        cdef void* ph = NULL
        if (not _fast() or context is not None or type(nbytes) is not int
                or not 0 < nbytes <= 0x7FFFFFFFFFFFFFFF or p_mem_alloc == NULL
                or p_mem_free == NULL or p_ctx_get_current == NULL or p_ctx_push == NULL or p_ctx_pop == NULL
                or (stream is not None and _ACTIVE)
                or (pool is not None and (stream is None or p_mem_alloc_pool == NULL
                                          or not isinstance(pool, _PoolBase)
                                          or (<HandleRoot>pool)._h is None))):
            self._init_slow(nbytes, stream=stream, context=context, pool=pool)
            return
        n = nbytes
        if stream is None:
            ctx = _current_context()
            if ctx is None:
                self._init_slow(nbytes, stream=stream, context=context, pool=pool)
                return
            with nogil:
                st = p_mem_alloc(&ptr, n)
            if st != SUCCESS:
                raise _error(st, "cuMemAlloc")
            release = MemFree.__new__(MemFree)
            (<MemFree>release).ctx = <uintptr_t>(<HandleRoot>ctx)._key
            (<MemFree>release).ptr = ptr
            _buffer_fields(self, nbytes, ctx, None, None, _LEGACY)
            _handle_fields(self, _CUdeviceptr(ptr), ptr, release, "cuMemFree", (ctx,), None)
            return
        if (not isinstance(stream, StreamCore) or (<HandleRoot>stream)._h is None
                or p_mem_alloc_async == NULL or p_mem_free_async == NULL):
            self._init_slow(nbytes, stream=stream, context=context, pool=pool)
            return
        ctx = stream._context
        if ctx is None or (<HandleRoot>ctx)._h is None:
            self._init_slow(nbytes, stream=stream, context=context, pool=pool)
            return
        cctx = <uintptr_t>(<HandleRoot>ctx)._key
        sh = <void*><uintptr_t>(<HandleRoot>stream)._key
        # The stream and the pool stay pinned until the buffer holds them (its keep):
        # a close() on another thread in between must not destroy them under memory
        # allocated on or from them (measured: a pool destroyed there crashed).
        sst = _pin(stream)
        pst = _pin(pool) if pool is not None else None
        try:
            if (<HandleRoot>stream)._h is None or (pool is not None and (<HandleRoot>pool)._h is None):
                self._init_slow(nbytes, stream=stream, context=context, pool=pool)  # raises
                return
            if pool is None:
                with nogil:
                    st = _in_context(cctx, &pushed)
                    if st == SUCCESS:
                        st = p_mem_alloc_async(&ptr, n, sh)
                        if pushed:
                            _pop_context()
                if st != SUCCESS:
                    raise _error(st, "cuMemAllocAsync")
                keep = (stream, ctx)
            else:
                ph = <void*><uintptr_t>(<HandleRoot>pool)._key
                with nogil:
                    st = _in_context(cctx, &pushed)
                    if st == SUCCESS:
                        st = p_mem_alloc_pool(&ptr, n, ph, sh)
                        if pushed:
                            _pop_context()
                if st != SUCCESS:
                    raise _error(st, "cuMemAllocFromPoolAsync")
                rel = (<State>pst).release if pst is not None else None
                if rel is not None and getattr(rel, "last", None) is not sst:
                    pool._note_stream(sst)  # its release waits for the frees made there
                keep = (stream, ctx, pool)
            used_on = set()
            release = MemFreeAsync.__new__(MemFreeAsync)
            (<MemFreeAsync>release).ctx_h = (<HandleRoot>ctx)._h
            (<MemFreeAsync>release).ctx = cctx
            (<MemFreeAsync>release).ptr = ptr
            (<MemFreeAsync>release).stream = stream
            (<MemFreeAsync>release).used_on = used_on
            # The pinned state's handle: a close() since the pin clears ``_h`` only.
            sh_obj = (<State>sst).handle if sst is not None else (<HandleRoot>stream)._h
            k = (<HandleRoot>stream)._key
            _buffer_fields(self, nbytes, ctx, stream, k if k else 1, sh_obj)
            _handle_fields(self, _CUdeviceptr(ptr), ptr, release, "cuMemFreeAsync", keep, used_on)
        finally:
            _unpin(pst)
            _unpin(sst)


    def close(self):
        """Free the memory (``cuMemFree``, or ``cuMemFreeAsync`` on the buffer's stream).

        Idempotent. Views of the buffer are closed too. Closing a view or a
        :meth:`from_handle` buffer frees nothing. While a prepared launch, a ``MemOp``
        or a graph made with the buffer (or a view of it) lives, the buffer is unusable
        at once and its memory is freed when the last of them is gone.

        A stream-ordered buffer allocated inside a capture that is still open, closed
        while its stream captures, is freed in the graph: ``cuMemFreeAsync`` is
        captured as a free node, so the graph frees what it allocates and can be
        launched again.
        """
        cdef BufferCore me = self
        if me._h is None:
            return
        if (me._views is not None or me._finalizer is not None or me._st == NULL
                or (_ACTIVE and me._stream is not None)):
            return self._close_slow()
        me._h = None
        _release_state(<State>me._st, False)
        if _DEFERRED:
            _drain()


cdef inline void _buffer_fields(BufferCore self, object n, object ctx, object st,
                                object stream_int, object sync_h) except *:
    # DeviceBuffer._set_fields(n, ctx, st, None, None, None, 0), written out.
    self._nbytes = n
    self._context = ctx
    self._stream = st
    self._stream_int = stream_int
    self._sync_h = sync_h
    self._dtype = None
    self._shape = None
    self._base = None
    self._offset = 0
    self._views = None


cdef inline void _handle_fields(HandleRoot self, object h, uint64_t key, object release,
                                object func, tuple keep, object used_on) except *:
    # Handle._init_handle(h, release=..., func=..., keep=..., used_on=...), written out.
    cdef State state
    self._h = h
    self._key = key
    self._owned = True
    self._owner = None
    if _DEFERRED:
        _drain()
    state = State.__new__(State)
    _state_init(state, h, release, func, self._kind, keep, None)
    if used_on is not None:
        state.used_on = used_on
    old = self._st
    Py_INCREF(state)
    self._st = <PyObject*>state
    Py_XDECREF(old)
    self._finalizer = None


# -- releases (the compiled _handle.release_state and _handle._release) -------------------------
cdef object _may_release_now_py = None  # _handle._may_release_now
cdef object _warn = None                # _handle._warn
cdef object _make_error = None          # errors.make_error
cdef object _SUCCESS_CODE = None        # CUresult.CUDA_SUCCESS


cdef extern from *:
    """
    /* sys.is_finalizing() without the call (public as Py_IsFinalizing since 3.13). */
    #if PY_VERSION_HEX >= 0x030D0000
    #define cudriver_finalizing() Py_IsFinalizing()
    #else
    #define cudriver_finalizing() _Py_IsFinalizing()
    #endif
    """
    int _finalizing "cudriver_finalizing"()


def configure_releases():
    """Connect the release functions to ``_handle``; called by ``configure()``."""
    global _may_release_now_py, _warn, _make_error, _SUCCESS_CODE
    from cuda.bindings import driver as drv
    from cudriver import errors
    from cudriver._lifetime import _handle
    _may_release_now_py = _handle._may_release_now
    _warn = _handle._warn
    _make_error = errors.make_error
    _SUCCESS_CODE = drv.CUresult.CUDA_SUCCESS


cdef inline bint _may_release_now() except -1:
    if _GUARD.captures:
        return False
    if _GUARD.armed or _GUARD.restrictive:
        return bool(_may_release_now_py())
    return True


cdef bint _free_async_now(State st) except -1:
    """Run a dropped stream-ordered buffer's free here, when that is safe; else False.

    ``cuMemFreeAsync`` neither waits for the device nor takes a lock, so where the
    general rule would queue a collected object's release (collection can run inside a
    cudriver lock, on a host function's thread, during a capture), this free may run
    at once when: no capture begun through cudriver is open (the free would be captured,
    or break one), this thread runs no host function, releases may run here, nothing
    holds the buffer (leases, pins, dependants), it is this process's, and the free
    needs no ordering after other streams. Queuing it instead cost a wake of the
    releasing thread per buffer (about 10 µs of GIL traffic on an H100 host).
    """
    rel = st.release
    if (type(rel) is not MemFreeAsync or _ACTIVE or cudriver_in_hostfn or st.pid != _PID
            or st.handle is None or _held(st)
            or (<MemFreeAsync>rel).used_on
            or (<HandleRoot>(<MemFreeAsync>rel).stream)._h is None
            or not _may_release_now()):
        return False
    st.closing = True
    _release(st)
    return True


def release_state(state, *, collected=False):
    """Release ``state``'s handle once, now or later (see ``_handle``). Never raises."""
    _release_state(<State?>state, collected)


cdef int _release_state(State st, bint collected) except -1:
    if st.handle is None:
        return 0
    # Closing first, then the leases: a lease dying on another thread in between
    # then sees the closing flag and queues the release (queuing twice is harmless).
    st.closing = True
    if _held(st):
        return 0
    if collected or not _may_release_now() or (
            _GUARD.open and getattr(st.release, "waits_for_device", False)):
        # (a release that waits for the device or enqueues on a stream: see _handle)
        _DEFERRED.append(st)
        _wake()
        return 0
    _release(st)
    return 0


def release(state):
    """Run ``state``'s release now, once (the compiled ``_handle._release``).

    Claiming the handle (test and clear) runs in C with the GIL held and no Python
    code in between, so two threads never both claim it.
    """
    _release(<State?>state)


cdef int _release(State st) except -1:
    cdef CUresult code
    cdef State d
    handle = st.handle
    if handle is None:
        return 0
    st.handle = None
    rel = st.release
    st.release = None
    on_release = st.on_release
    st.on_release = None
    try:
        if type(rel) is MemFree and st.pid == _PID and not _finalizing():
            # A plain buffer's free, without the Python call.
            code = (<MemFree>rel).free()
            if code != SUCCESS:
                _warn(f"releasing a {st.kind} failed: {_make_error(_code(code), st.func)}")
        elif (type(rel) is MemFreeAsync and st.pid == _PID and not _finalizing()
                and (<MemFreeAsync>rel).free(&code)):
            # A stream-ordered free with nothing to order it after, likewise.
            if code != SUCCESS:
                _warn(f"releasing a {st.kind} failed: {_make_error(_code(code), st.func)}")
        elif rel is not None and not _finalizing() and st.pid == _PID:
            try:
                r = rel(handle)
            except Exception as exc:  # the driver or its library went away
                _warn(f"{st.kind} release failed: {exc!r}")
            else:
                if r is not None and r[0] is not _SUCCESS_CODE:
                    _warn(f"releasing a {st.kind} failed: {_make_error(r[0], st.func)}")
        if on_release is not None and st.pid == _PID:
            try:
                on_release()
            except Exception as exc:
                _warn(f"{st.kind} release hook failed: {exc!r}")
    finally:
        _drop_deps(st)
    return 0


cdef int _drop_deps(State st) except -1:
    # Dependencies go only after the handle: dependants are released first.
    cdef State d
    deps = st.deps
    st.deps = ()
    for dep in deps:
        d = <State?>dep
        d.dependants -= 1
        if d.closing and d.handle is not None and not _held(d):
            _DEFERRED.append(d)
            _wake()
    st.keep = None
    return 0


def drop_deps(state):
    """Let ``state``'s dependencies go (the compiled ``_handle._drop_deps``)."""
    _drop_deps(<State?>state)
