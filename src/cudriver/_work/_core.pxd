# The compiled bases of Stream and Event, and the stream test the other compiled
# modules share.

from libc.stdint cimport uintptr_t

from cudriver._lifetime._release cimport HandleRoot


cdef class StreamCore(HandleRoot):
    # Stream's fields (C fields: the compiled methods read _context).
    cdef public object _capture
    cdef public object _context
    cdef public object _special


cdef class EventCore(HandleRoot):
    # The stream (handle value; the NULL stream as 1) of the last record, 0 before any.
    cdef public unsigned long long _recorded_on


cdef bint int_stream(object s, uintptr_t* out) except -1
