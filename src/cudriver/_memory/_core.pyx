# cython: language_level=3, binding=True, boundscheck=False, wraparound=False
# cython: cdivision=True, auto_pickle=False
"""The compiled constructor and close of :class:`cudriver.DeviceBuffer`, and its frees.

``BufferCore.__init__`` allocates in C (``cuMemAlloc``, ``cuMemAllocAsync`` or
``cuMemAllocFromPoolAsync``) for a plain size with ``stream`` None or an open cudriver
``Stream`` and no ``context``; anything else goes to ``DeviceBuffer._init_slow``.
:class:`MemFree` and :class:`MemFreeAsync` are the buffers' releases, run in C by
``_release`` (a stream-ordered free that must be ordered after other streams goes to
``_ordered.free_async``).
"""

from cpython.ref cimport PyObject, Py_INCREF, Py_XDECREF
from libc.stdint cimport uint64_t, uintptr_t

from cudriver._lifetime._release cimport (
    DEFERRED as _DEFERRED, FastRelease, HandleRoot, State, new_lease, new_state, pin as _pin,
    release_state_, unpin as _unpin,
)
from cudriver._runtime._freed cimport note as _note_freed
from cudriver._runtime._entry cimport (
    GUARD, OUT_OF_MEMORY, SUCCESS, CUresult, code, ensure_loaded, error, fast, in_context, p_ctx_get_current,
    p_ctx_pop, p_ctx_push, p_is_capturing, p_mem_alloc, p_mem_alloc_async, p_mem_alloc_pool, p_mem_free,
    p_mem_free_async, pop_context,
)
from cudriver._work._core cimport StreamCore

from cuda.bindings import driver as _drv

from cudriver._context.device import _adopted, _owned
from cudriver._lifetime._coerce import PoolBase as _PoolBase
from cudriver._lifetime._release import drain_quick as _drain_quick, reclaim as _reclaim
from cudriver._memory._ordered import LEGACY as _LEGACY, free_async as _free_async_py
from cudriver._memory import accounting as _accounting
from cudriver._memory._default_resource import DEFAULTS as _DEFAULTS_DICT
from cudriver._runtime import _hooks

cdef dict _ADOPTED = _adopted
# Tested for truth in C: empty while accounting is off, and while no device has a
# default memory resource (both are then free).
cdef list _ACCOUNTING = _accounting.ON
# Non-empty while NVTX marks are on (``_runtime._hooks``): one C truth test when off.
cdef list _MARKS = _hooks.MARKS
cdef object _mark = _hooks.mark
cdef dict _DEFAULTS = _DEFAULTS_DICT
cdef object _OWNED = _owned  # weak values
cdef object _CUdeviceptr = _drv.CUdeviceptr
cdef object _SUCCESS_TUPLE = (_drv.CUresult.CUDA_SUCCESS,)  # a release's status
# dtype -> (typestr, descr or None) for __cuda_array_interface__: numpy builds dtype.str
# anew on each read.
cdef dict _TYPESTR = {}

cdef class MemFree(FastRelease):
    """The release of a ``cuMemAlloc`` buffer: ``cuMemFree`` with its context current.

    Called with the buffer's handle, returns a status tuple as the bindings do.
    """

    cdef uintptr_t ctx
    cdef uint64_t ptr  # the buffer's address (the handle the release is called with)
    cdef uint64_t size

    cdef CUresult free(self) noexcept:
        cdef CUresult st
        cdef bint pushed = False
        cdef uint64_t ptr = self.ptr
        cdef uintptr_t ctx = self.ctx
        with nogil:
            st = in_context(ctx, &pushed)
            if st == SUCCESS:
                st = p_mem_free(ptr)
                if pushed:
                    pop_context()
        if st == SUCCESS:
            _note_freed(ptr, self.size)  # the mirrors refuse it from now on
        return st

    cdef int run(self, CUresult* out) except -1:
        out[0] = self.free()
        return 1

    def __call__(self, handle):
        cdef CUresult st
        if <uint64_t>int(handle) != self.ptr:
            raise ValueError("MemFree called with another buffer's handle")
        st = self.free()
        return _SUCCESS_TUPLE if st == SUCCESS else (code(st),)


cdef class MemFreeAsync(FastRelease):
    """The release of a stream-ordered buffer: ``cuMemFreeAsync`` on its stream.

    When no other stream used the buffer and its stream is open, the free is
    enqueued here; otherwise ``_ordered.free_async`` orders it first.
    """

    cdef object ctx_h
    cdef object stream
    cdef object used_on
    cdef uintptr_t ctx  # ctx_h as an int
    cdef uint64_t ptr   # the buffer's address (the handle the release is called with)
    cdef uint64_t size

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
            st = in_context(ctx, &pushed)
            if st == SUCCESS:
                st = p_mem_free_async(ptr, sh)
                if pushed:
                    pop_context()
        if st == SUCCESS:
            _note_freed(ptr, self.size)
        out[0] = st
        return True

    cdef int run(self, CUresult* out) except -1:
        return 1 if self.free(out) else 0

    cdef bint at_collection(self) except -1:
        # cuMemFreeAsync neither waits nor takes a lock: fine where the buffer was
        # dropped, when nothing needs ordering first and its stream is open.
        return not self.used_on and (<HandleRoot>self.stream)._h is not None

    cdef bint capturing(self) except -1:
        # The free and its ordering (an event recorded on each other stream that used
        # the buffer) go on streams: none of them may be capturing, or they would be
        # captured into a graph cudriver does not know (cuStreamIsCapturing).
        if not _is_capturing((<HandleRoot>self.stream)._key):
            for key in self.used_on or ():
                if _is_capturing(key):
                    return True
            return False
        return True

    def __call__(self, handle):
        cdef CUresult st = SUCCESS
        if <uint64_t>int(handle) != self.ptr:
            raise ValueError("MemFreeAsync called with another buffer's handle")
        if not self.free(&st):
            r = _free_async_py(self.ctx_h, self.stream, self.used_on, handle)
            if r[0] is _SUCCESS_TUPLE[0]:
                _note_freed(self.ptr, self.size)
            return r
        return _SUCCESS_TUPLE if st == SUCCESS else (code(st),)


cdef bint _is_capturing(object key) except -1:
    """Whether the stream of int handle ``key`` captures now (not for the NULL streams)."""
    cdef int status = 0
    cdef uintptr_t k = <uintptr_t>key
    if k <= 2:  # the legacy and per-thread streams: asking would break a blocking capture
        return False
    ensure_loaded()
    if p_is_capturing == NULL:
        return False
    with nogil:
        if p_is_capturing(<void*>k, &status) != SUCCESS:
            return False
    return status != 0


def mem_free(ctx_h, ptr, size):
    """The release of ``size`` bytes at ``ptr`` from ``cuMemAlloc`` in context ``ctx_h``."""
    cdef MemFree release = MemFree.__new__(MemFree)
    release.ctx = <uintptr_t>int(ctx_h)
    release.ptr = <uint64_t>int(ptr)
    release.size = <uint64_t>size
    return release


def mem_free_async(ctx_h, stream, used_on, ptr, size):
    """The release of a stream-ordered allocation: ``cuMemFreeAsync`` on ``stream``.

    ``used_on`` is the buffer's set of other streams that used it (the free is
    ordered after their work).
    """
    cdef MemFreeAsync release = MemFreeAsync.__new__(MemFreeAsync)
    release.ctx_h = ctx_h
    release.ctx = <uintptr_t>int(ctx_h)
    release.ptr = <uint64_t>int(ptr)
    release.size = <uint64_t>size
    release.stream = stream
    release.used_on = used_on
    return release



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

    # The fields are declared in _core.pxd (the DLPack export reads them in C).

    def __init__(self, nbytes, *, stream=None, context=None, pool=None, resource=None):
        cdef CUresult st
        cdef uint64_t ptr = 0
        cdef size_t n
        cdef bint pushed = False
        cdef uintptr_t cctx
        cdef void* sh
        cdef void* ph = NULL
        if (not fast() or context is not None or resource is not None or _DEFAULTS
                or type(nbytes) is not int
                or not 0 < nbytes <= 0x7FFFFFFFFFFFFFFF or p_mem_alloc == NULL
                or p_mem_free == NULL or p_ctx_get_current == NULL or p_ctx_push == NULL or p_ctx_pop == NULL
                or (stream is not None and GUARD.open)
                or (pool is not None and (stream is None or p_mem_alloc_pool == NULL
                                          or not isinstance(pool, _PoolBase)
                                          or (<HandleRoot>pool)._h is None))):
            self._init_slow(nbytes, stream=stream, context=context, pool=pool, resource=resource)
            return
        n = nbytes
        if stream is None:
            ctx = _current_context()
            if ctx is None:
                self._init_slow(nbytes, stream=stream, context=context, pool=pool, resource=resource)
                return
            with nogil:
                st = p_mem_alloc(&ptr, n)
            if st != SUCCESS:
                if st == OUT_OF_MEMORY:  # the slow path tries again after the queued frees
                    self._init_slow(nbytes, stream=stream, context=context, pool=pool, resource=resource)
                    return
                raise error(st, "cuMemAlloc")
            release = MemFree.__new__(MemFree)
            (<MemFree>release).ctx = <uintptr_t>(<HandleRoot>ctx)._key
            (<MemFree>release).ptr = ptr
            (<MemFree>release).size = n
            _buffer_fields(self, nbytes, ctx, None, None, _LEGACY)
            _handle_fields(self, _CUdeviceptr(ptr), ptr, release, "cuMemFree", (ctx,), None)
            if _ACCOUNTING:
                self._account(None)
            if _MARKS:
                _mark("DeviceBuffer", nbytes)
            return
        if (not isinstance(stream, StreamCore) or (<HandleRoot>stream)._h is None
                or p_mem_alloc_async == NULL or p_mem_free_async == NULL):
            self._init_slow(nbytes, stream=stream, context=context, pool=pool, resource=resource)
            return
        ctx = stream._context
        if ctx is None or (<HandleRoot>ctx)._h is None:
            self._init_slow(nbytes, stream=stream, context=context, pool=pool, resource=resource)
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
                self._init_slow(nbytes, stream=stream, context=context, pool=pool, resource=resource)  # raises
                return
            if pool is None:
                with nogil:
                    st = in_context(cctx, &pushed)
                    if st == SUCCESS:
                        st = p_mem_alloc_async(&ptr, n, sh)
                        if pushed:
                            pop_context()
                if st != SUCCESS:
                    if st == OUT_OF_MEMORY:  # the slow path tries again after the queued frees
                        self._init_slow(nbytes, stream=stream, context=context, pool=pool, resource=resource)
                        return
                    raise error(st, "cuMemAllocAsync")
                keep = (stream, ctx)
            else:
                ph = <void*><uintptr_t>(<HandleRoot>pool)._key
                with nogil:
                    st = in_context(cctx, &pushed)
                    if st == SUCCESS:
                        st = p_mem_alloc_pool(&ptr, n, ph, sh)
                        if pushed:
                            pop_context()
                if st != SUCCESS:
                    if st == OUT_OF_MEMORY:  # the slow path tries again after the queued frees
                        self._init_slow(nbytes, stream=stream, context=context, pool=pool, resource=resource)
                        return
                    raise error(st, "cuMemAllocFromPoolAsync")
                rel = (<State>pst).release if pst is not None else None
                if rel is not None and getattr(rel, "last", None) is not sst:
                    pool._note_stream(sst)  # its release waits for the frees made there
                keep = (stream, ctx, pool)
            used_on = set()
            release = MemFreeAsync.__new__(MemFreeAsync)
            (<MemFreeAsync>release).ctx_h = (<HandleRoot>ctx)._h
            (<MemFreeAsync>release).ctx = cctx
            (<MemFreeAsync>release).ptr = ptr
            (<MemFreeAsync>release).size = n
            (<MemFreeAsync>release).stream = stream
            (<MemFreeAsync>release).used_on = used_on
            # The pinned state's handle: a close() since the pin clears ``_h`` only.
            sh_obj = (<State>sst).handle if sst is not None else (<HandleRoot>stream)._h
            k = (<HandleRoot>stream)._key
            _buffer_fields(self, nbytes, ctx, stream, k if k else 1, sh_obj)
            _handle_fields(self, _CUdeviceptr(ptr), ptr, release, "cuMemFreeAsync", keep, used_on)
            if _ACCOUNTING:
                self._account(pool)
            if _MARKS:
                _mark("DeviceBuffer", nbytes)
        finally:
            _unpin(pst)
            _unpin(sst)


    @property
    def __cuda_array_interface__(self):
        """The CUDA Array Interface (version 3) of this buffer.

        ``shape`` and ``typestr`` come from the remembered dtype (else ``(nbytes,)``
        and ``"|u1"``); ``stream`` is the buffer's stream handle for stream-ordered
        buffers (consumers synchronise with it), else None. A new dict on each read;
        no driver call.
        """
        if self._h is None:
            return self._raise_closed()
        dt = self._dtype
        shape = self._shape
        if shape is None:
            shape = (self._nbytes,)
        if dt is None:
            return {"version": 3, "shape": shape, "typestr": "|u1",
                    "data": (self._key, False), "strides": None, "stream": self._stream_int}
        entry = _TYPESTR.get(dt)
        if entry is None:
            entry = (dt.str, dt.descr if dt.fields is not None else None)
            if len(_TYPESTR) < 1024:
                _TYPESTR[dt] = entry
        d = {"version": 3, "shape": shape, "typestr": entry[0],
             "data": (self._key, False), "strides": None, "stream": self._stream_int}
        if entry[1] is not None:
            d["descr"] = entry[1]
        return d

    def _lease(self):
        """A lease on the allocation: for a view, on the buffer it was made from."""
        return buffer_lease(self)

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
                or (GUARD.open and me._stream is not None)):
            return self._close_slow()
        me._h = None
        release_state_(<State>me._st, False)
        if _DEFERRED:
            _drain_quick()


cdef object buffer_lease(BufferCore b):
    """``b._lease()``: a lease on ``b``'s state, or on its parent's while the parent is open."""
    base = b._base
    if base is not None and (<HandleRoot>base)._h is not None:
        return new_lease(<State?>(<HandleRoot>base)._state, b)
    if b._h is None:
        return b._raise_closed()
    return new_lease(<State?>b._state, b)


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
        _drain_quick()
    state = new_state(h, release, func, self._kind, keep, None)
    if used_on is not None:
        state.used_on = used_on
    old = self._st
    Py_INCREF(state)
    self._st = <PyObject*>state
    Py_XDECREF(old)
    self._finalizer = None
