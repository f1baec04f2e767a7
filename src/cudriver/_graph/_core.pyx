# cython: language_level=3, binding=True, boundscheck=False, wraparound=False
# cython: cdivision=True, auto_pickle=False
"""The compiled methods of :class:`cudriver.GraphExec`: launch and upload.

Each handles the common case in C and otherwise calls its slow path
(``GraphExec._launch_slow``, ``GraphExec._upload_slow``) before any side effect: a graph
with host functions, a capture begun through cudriver open, a stream other than an open
cudriver ``Stream``, or the call guard armed.
"""

from libc.stdint cimport uintptr_t

from cudriver._lifetime._release cimport HandleRoot, pin as _pin, unpin as _unpin
from cudriver._runtime._entry cimport (
    GUARD, SUCCESS, CUresult, error, fast, p_graph_launch, p_graph_upload,
)
from cudriver._work._core cimport int_stream

from cudriver._runtime import _hooks

# Non-empty while NVTX marks are on (``_runtime._hooks``): one C truth test when off.
cdef list _MARKS = _hooks.MARKS
cdef object _mark = _hooks.mark


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
        if (not fast() or self._h is None or p_graph_launch == NULL or GUARD.open
                or self._host_records or not int_stream(stream, &s)):
            return self._launch_slow(stream)
        g = <void*><uintptr_t>self._key
        if _MARKS:
            _mark("GraphExec.launch")
        pin = _pin(self)
        pin2 = _pin(stream) if s else None
        with nogil:
            st = p_graph_launch(g, <void*>s)
        _unpin(pin2)
        _unpin(pin)
        if st != SUCCESS:
            raise error(st, "cuGraphLaunch")
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
        if (not fast() or self._h is None or p_graph_upload == NULL
                or not int_stream(stream, &s)):
            return self._upload_slow(stream)
        g = <void*><uintptr_t>self._key
        pin = _pin(self)
        pin2 = _pin(stream) if s else None
        with nogil:
            st = p_graph_upload(g, <void*>s)
        _unpin(pin2)
        _unpin(pin)
        if st != SUCCESS:
            raise error(st, "cuGraphUpload")
