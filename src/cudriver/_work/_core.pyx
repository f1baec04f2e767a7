# cython: language_level=3, binding=True, boundscheck=False, wraparound=False
# cython: cdivision=True, auto_pickle=False
"""The compiled methods of :class:`cudriver.Stream` and :class:`cudriver.Event`.

Each handles the common case in C and otherwise calls its slow path, a plainly named
method of the public class (``Stream._synchronize_slow``, ...), before any side effect:
the driver initialised and no host function running on this thread (``fast()``), the
object open, a cudriver stream or event, no capture begun through cudriver open, and
arguments of the plain types (ints, cudriver buffers).
"""

from libc.stdint cimport intptr_t, uint32_t, uint64_t, uintptr_t
from libc.stdlib cimport free, malloc
from posix.unistd cimport write

from cudriver._lifetime._hostfn cimport trampoline
from cudriver._lifetime._release cimport DEFERRED as _DEFERRED, HandleRoot, pin as _pin, unpin as _unpin
from cudriver._runtime._entry cimport (
    GUARD, NOT_READY, SUCCESS, CUresult, done, error, f_value32, f_value64, fast,
    p_event_query, p_event_record, p_event_sync, p_is_capturing, p_launch_host_func,
    p_stream_query, p_stream_sync, p_stream_wait_event, p_wait32, p_wait64, p_write32,
    p_write64,
)

from cudriver._lifetime import _hostfn, _release
from cudriver._runtime import _hooks
from cudriver._lifetime._coerce import DeviceMemory as _DeviceMemory
from cudriver._runtime._enums import DeviceAttribute, WaitCondition as _WaitCondition

# The default condition of the waits (their slow paths default to it as well).
cdef object _GEQ_DEFAULT = _WaitCondition.GEQ
cdef object _ATTR_64 = int(DeviceAttribute.CAN_USE_64_BIT_STREAM_MEM_OPS)
cdef object _settle = _release.settle
# Non-empty while an observer is on (sync debug, NVTX marks): the waits then take their
# slow paths, which tell it (``_runtime._hooks``); one C truth test when off.
cdef list _HOOKS_ON = _hooks.ON
cdef object _REAPING = _release._reaping.locked  # held during the releasing thread's pass
from cudriver._runtime._gates import WAITING as _WAITING_PY, note as _gates_note

cdef dict _WAITING = _WAITING_PY


cdef inline void _gate(object stream) except *:
    """Note that ``stream`` may wait for the host (``_runtime._gates.note``)."""
    if _WAITING.get(stream._key, 0) is not None:  # an owned stream, once noted: None
        _gates_note(stream)
cdef dict _PENDING = _hostfn.PENDING
cdef object _after_sync = _hostfn.after_sync
cdef object _after_event_sync = _hostfn.after_event_sync
cdef dict _EAGER = _hostfn._eager
cdef object _KEYS = _hostfn._keys


cdef bint int_stream(object s, uintptr_t* out) except -1:
    """The stream handle of ``s`` when it is a plain case; False to fall back."""
    cdef HandleRoot r
    if isinstance(s, StreamCore):
        r = <HandleRoot>s
        if r._h is None:
            return False
        out[0] = <uintptr_t>r._key
        return True
    return False  # None (refused by the slow path), a foreign stream, an int, ...



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
        if not fast() or self._h is None or p_stream_sync == NULL or _HOOKS_ON:
            return self._synchronize_slow()
        h = <void*><uintptr_t>self._key
        # Pinned for the wait: a close() on another thread meanwhile destroys the stream
        # only after it.
        pin = _pin(self)
        with nogil:
            st = p_stream_sync(h)
        _unpin(pin)
        if st != SUCCESS:
            raise error(st, "cuStreamSynchronize")
        if _DEFERRED or _REAPING():
            _settle()
        if _PENDING:
            _after_sync(self._key)

    def query(self):
        """Whether all work on the stream has completed (``cuStreamQuery``); never blocks."""
        cdef CUresult st
        if not fast() or self._h is None or p_stream_query == NULL:
            return self._query_slow()
        st = p_stream_query(<void*><uintptr_t>self._key)
        if st == SUCCESS:
            return True
        if st == NOT_READY:
            return False
        raise error(st, "cuStreamQuery")

    def _done_now(self):
        # aio.Awaitable._done_now in C: a stream of its own, not capturing; True when
        # idle, False when busy, None when unsure (the future's path decides).
        cdef CUresult st
        cdef int status = 0
        cdef void* h
        if (not fast() or self._h is None or p_is_capturing == NULL
                or p_stream_query == NULL or <uintptr_t>self._key <= 2 or GUARD.open):
            return None
        h = <void*><uintptr_t>self._key
        st = p_is_capturing(h, &status)
        if st != SUCCESS or status != 0:
            return None
        return done(p_stream_query(h))

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
        if (not fast() or self._h is None or p_stream_wait_event == NULL
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
            raise error(st, "cuStreamWaitEvent")

    def record(self, event=None):
        """Record ``event`` (a new timing-less one when None) on this stream.

        Calls ``cuEventRecord`` (and ``cuEventCreate`` when ``event`` is None); returns
        the event. For :meth:`Event.elapsed_ms`, pass events created with
        ``Event(timing=True)``.
        """
        cdef CUresult st
        cdef void* h
        cdef void* e
        if (not fast() or self._h is None or p_event_record == NULL
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
            raise error(st, "cuEventRecord")
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
        if (not fast() or self._h is None or p_launch_host_func == NULL
                or p_is_capturing == NULL or not callable(fn)):
            return self._launch_host_func_slow(fn, *args, **kwargs)
        ctx = self._context
        if ctx is None:
            return self._launch_host_func_slow(fn, *args, **kwargs)
        h = <void*><uintptr_t>self._key
        st = p_is_capturing(h, &status)
        if st != SUCCESS:
            raise error(st, "cuStreamIsCapturing")
        if status != 0:  # captured: the slow path keeps the record with the graph
            return self._launch_host_func_slow(fn, *args, **kwargs)
        k = next(_KEYS)
        key = <uintptr_t>k
        # What the trampoline needs, as a tuple (no record object): registered before
        # the call, since the driver thread may run it before the call returns.
        _EAGER[k] = (fn, args, kwargs, self._key or 1, (<HandleRoot>ctx)._key)
        pin = _pin(self)
        with nogil:
            st = p_launch_host_func(h, trampoline, <void*>key)
        _unpin(pin)
        if st != SUCCESS:
            _EAGER.pop(k, None)
            raise error(st, "cuLaunchHostFunc")
        _gate(self)  # the function may wait for the program

    def launch_host_funcs(self, fns, /):
        """Run each callable of ``fns`` in order on a driver thread, as one batch.

        What :meth:`launch_host_func` does for each function (``cuLaunchHostFunc``),
        with the GIL released once for the whole batch rather than once per function:
        the driver thread runs the first functions while the later ones are being
        enqueued, and the calling thread does not wait to get the GIL back between
        them. Each function is called with no arguments (bind them with
        ``functools.partial``); each keeps the rules of :meth:`launch_host_func`
        (no CUDA calls inside, exceptions re-raised by the next ``synchronize()``).
        Does not block and does not allocate device memory.

        Inside a capture each function becomes a host node, in order, as
        :meth:`launch_host_func` records it.

        Raises
        ------
        TypeError
            An item of ``fns`` is not callable; nothing was enqueued.
        ClosedError
            The stream is closed; nothing was enqueued.
        CudaError
            The driver refused an enqueue: the functions before it were enqueued and
            will run, the rest were not (the exception's note says how many).
        """
        cdef CUresult st = SUCCESS
        cdef int status = 0
        cdef void* h
        cdef Py_ssize_t i, n, done = 0
        cdef uintptr_t* keys
        calls = tuple(fns)
        n = len(calls)
        for i in range(n):
            if not callable(calls[i]):
                raise TypeError(
                    f"launch_host_funcs needs callables; item {i} is a "
                    f"{type(calls[i]).__name__}"
                )
        ctx = self._context
        if (not fast() or self._h is None or p_launch_host_func == NULL
                or p_is_capturing == NULL or ctx is None):
            if self._h is None:
                self._launch_host_func_slow(None)  # raises ClosedError
            for fn in calls:
                self._launch_host_func_slow(fn)
            return
        if n == 0:
            return
        h = <void*><uintptr_t>self._key
        st = p_is_capturing(h, &status)
        if st != SUCCESS:
            raise error(st, "cuStreamIsCapturing")
        if status != 0:  # captured: host nodes, each recorded with the graph
            for fn in calls:
                self._launch_host_func_slow(fn)
            return
        keys = <uintptr_t*>malloc(n * sizeof(uintptr_t))
        if keys == NULL:
            raise MemoryError("no host memory for a batch of host functions")
        try:
            stream_key = self._key or 1
            ctx_key = (<HandleRoot>ctx)._key
            i = 0
            try:
                while i < n:
                    k = next(_KEYS)
                    # Registered before the call: the driver thread may run it at once.
                    _EAGER[k] = (calls[i], (), {}, stream_key, ctx_key)
                    keys[i] = <uintptr_t>k
                    i += 1
            except BaseException:  # (no memory): none was enqueued, none stays registered
                while i > 0:
                    i -= 1
                    _EAGER.pop(keys[i], None)
                raise
            pin = _pin(self)
            with nogil:
                for i in range(n):
                    st = p_launch_host_func(h, trampoline, <void*>keys[i])
                    if st != SUCCESS:
                        break
                    done += 1
            _unpin(pin)
            for i in range(done, n):
                _EAGER.pop(keys[i], None)
        finally:
            free(keys)
        if done:
            _gate(self)  # the functions may wait for the program
        if st != SUCCESS:
            exc = error(st, "cuLaunchHostFunc")
            exc.add_note(f"{done} of {n} host functions were enqueued and will run; the "
                         "rest were not")
            raise exc

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
    if (not fast() or self._h is None or GUARD.open or not 0 <= cond <= 2
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
        raise error(st, ("cuStreamWaitValue" if wait else "cuStreamWriteValue") + str(width * 8))
    if wait:
        _gate(self)  # it may wait for the host: see _runtime._gates
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

    # _recorded_on (see _core.pxd): the stream of the last record, whose host functions'
    # errors synchronize() re-raises.

    def record(self, stream):
        """Record the event on ``stream`` (``cuEventRecord``); returns ``self``.

        ``stream`` is a :class:`~cudriver.Stream`, any ``__cuda_stream__`` object, a
        ``CUstream`` or an int; None is refused (``TypeError``): for the legacy
        default stream pass :meth:`Stream.legacy`. Does not block or allocate.
        """
        cdef CUresult st
        cdef uintptr_t s = 0
        cdef void* e
        if (not fast() or self._h is None or p_event_record == NULL
                or not int_stream(stream, &s)):
            return self._record_slow(stream)
        e = <void*><uintptr_t>self._key
        pin = _pin(self)
        pin2 = _pin(stream) if s else None
        with nogil:
            st = p_event_record(e, <void*>s)
        _unpin(pin2)
        _unpin(pin)
        if st != SUCCESS:
            raise error(st, "cuEventRecord")
        self._recorded_on = s if s else 1
        return self

    def _done_now(self):
        # aio.Awaitable._done_now in C (see StreamCore._done_now).
        if not fast() or self._h is None or p_event_query == NULL or GUARD.open:
            return None
        return done(p_event_query(<void*><uintptr_t>self._key))

    def query(self):
        """Whether the work before the last record has completed (``cuEventQuery``)."""
        cdef CUresult st
        if not fast() or self._h is None or p_event_query == NULL:
            return self._query_slow()
        st = p_event_query(<void*><uintptr_t>self._key)
        if st == SUCCESS:
            return True
        if st == NOT_READY:
            return False
        raise error(st, "cuEventQuery")

    def synchronize(self):
        """Block until the recorded work has completed (``cuEventSynchronize``).

        Then, as :meth:`Stream.synchronize` does, runs the releases that waited for a
        safe moment and raises :class:`~cudriver.HostCallbackError` if a host function
        that ran on the stream of the last :meth:`record` raised since errors were
        last collected there.
        """
        cdef CUresult st
        cdef void* e
        if not fast() or self._h is None or p_event_sync == NULL or _HOOKS_ON:
            return self._synchronize_slow()
        e = <void*><uintptr_t>self._key
        pin = _pin(self)  # see StreamCore.synchronize
        with nogil:
            st = p_event_sync(e)
        _unpin(pin)
        if st != SUCCESS:
            raise error(st, "cuEventSynchronize")
        if _DEFERRED or _REAPING():
            _settle()
        if _PENDING and self._recorded_on:
            _after_event_sync(self._recorded_on)


