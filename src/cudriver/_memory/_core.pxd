# The C fields of cudriver.DeviceBuffer, for the compiled modules of _memory that read them.

from cudriver._lifetime._release cimport HandleRoot


cdef class BufferCore(HandleRoot):
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


cdef object buffer_lease(BufferCore b)
