# Release states, the root of every handle class, pins, and the release itself.

from cpython.ref cimport PyObject

from cudriver._runtime._entry cimport CUresult


cdef class State:
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


cdef class Lease:
    cdef State _lstate
    cdef public object target
    cdef object __weakref__


cdef class HandleRoot:
    cdef public object _h
    cdef public object _key
    cdef public object _owned
    cdef public object _owner
    cdef public object _finalizer
    cdef object __weakref__
    cdef PyObject* _st


cdef class FastRelease:
    # 1 when it released (its status in ``out``), 0 to be called from Python instead.
    cdef int run(self, CUresult* out) except -1
    # Whether it may run where collection dropped its object (it neither waits for the
    # device nor takes a lock, and needs nothing ordered first).
    cdef bint at_collection(self) except -1
    # Whether it would enqueue on a stream that is capturing now (a capture begun
    # outside cudriver): the release then waits for the capture's end.
    cdef bint capturing(self) except -1


cdef bint held_(State st) except -1
cdef Lease new_lease(State st, object target)
cdef object pin(object o)
cdef int unpin(object state) except -1
cdef State new_state(object handle, object release, object func, object kind, tuple keep,
                     object on_release)
cdef int release_state_(State st, bint collected) except -1
cdef object DEFERRED
