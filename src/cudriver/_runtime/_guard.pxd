# The call guard's C fields and the per-thread "running a host function" flag.

cdef class GuardCore:
    cdef public bint armed
    cdef public bint initialized
    cdef public bint forked
    cdef public int running
    cdef public object captures
    cdef public object restrictive
    cdef public object open

cdef int in_hostfn() noexcept nogil
cdef void set_in_hostfn(int value) noexcept nogil
