# cython: language_level=3, binding=True, auto_pickle=False
"""The call guard's fields in C, and the flag a thread running a host function sets.

:class:`cudriver.errors.CallGuard` derives from :class:`GuardCore`: the hot paths test
its fields on every call, and a C field costs a load where an instance attribute costs a
dictionary lookup. The trampoline (``_lifetime._hostfn``) sets this thread's flag while
it runs a host function; the hot paths read it only while the guard is armed.
"""

cdef extern from *:
    """
    /* Set while this thread runs a host function (through the C trampoline). */
    static __thread int cudriver_in_hostfn = 0;
    """
    int cudriver_in_hostfn


cdef class GuardCore:
    """The fields of :class:`cudriver.errors.CallGuard` as C fields (the methods are its)."""


cdef int in_hostfn() noexcept nogil:
    return cudriver_in_hostfn


cdef void set_in_hostfn(int value) noexcept nogil:
    global cudriver_in_hostfn
    cudriver_in_hostfn = value


def in_host_function():
    """Whether the calling thread runs a host function through the C trampoline."""
    return bool(cudriver_in_hostfn)
