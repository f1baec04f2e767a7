# cython: language_level=3, binding=True, boundscheck=False, wraparound=False
# cython: cdivision=True, auto_pickle=False
"""DLPack capsules made in C: the managed struct, its shape and strides in one block.

:func:`capsule` allocates one block holding a ``DLManagedTensor`` (``"dltensor"``) or a
``DLManagedTensorVersioned`` 1.0 (``"dltensor_versioned"``) followed by the shape and
C-order strides, registers it, and wraps it in a capsule. ``manager_ctx`` holds an
integer key (never a pointer to a Python object) under which the registry keeps what
the export keeps alive (a lease on the buffer).

The deleter, a C function, takes the GIL, checks that its pointer is a live export
(:data:`_live`, without reading through it), takes the record by its key, frees the
block and drops the record. A second or stale call finds nothing and goes to
:data:`sys.unraisablehook`. The capsule's destructor calls the deleter when no consumer
took the tensor (the capsule still has its first name). Both keep an exception that
was propagating in their caller (a consumer failing with the capsule on its stack):
it is fetched before and restored after. After the interpreter has finalised, a
deleter call frees nothing.
"""

import itertools

from cpython.exc cimport PyErr_Fetch, PyErr_Restore
from cpython.pycapsule cimport PyCapsule_GetPointer, PyCapsule_IsValid, PyCapsule_New
from cpython.ref cimport PyObject
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t, uintptr_t
from libc.stdlib cimport free, malloc

cdef extern from "Python.h":
    int Py_IsInitialized() nogil

cdef extern from *:
    """
    typedef struct { int32_t device_type; int32_t device_id; } cdl_Device;
    typedef struct { uint8_t code; uint8_t bits; uint16_t lanes; } cdl_DataType;
    typedef struct {
        void* data; cdl_Device device; int32_t ndim; cdl_DataType dtype;
        int64_t* shape; int64_t* strides; uint64_t byte_offset;
    } cdl_Tensor;
    typedef struct cdl_Managed {
        cdl_Tensor dl_tensor; void* manager_ctx; void (*deleter)(struct cdl_Managed*);
    } cdl_Managed;
    typedef struct { uint32_t major; uint32_t minor; } cdl_Version;
    typedef struct cdl_Versioned {
        cdl_Version version; void* manager_ctx; void (*deleter)(struct cdl_Versioned*);
        uint64_t flags; cdl_Tensor dl_tensor;
    } cdl_Versioned;
    """
    ctypedef struct cdl_Device:
        int32_t device_type
        int32_t device_id
    ctypedef struct cdl_DataType:
        uint8_t code
        uint8_t bits
        uint16_t lanes
    ctypedef struct cdl_Tensor:
        void* data
        cdl_Device device
        int32_t ndim
        cdl_DataType dtype
        int64_t* shape
        int64_t* strides
        uint64_t byte_offset
    ctypedef struct cdl_Managed:
        cdl_Tensor dl_tensor
        void* manager_ctx
        void (*deleter)(cdl_Managed*) noexcept nogil
    ctypedef struct cdl_Version:
        uint32_t major
        uint32_t minor
    ctypedef struct cdl_Versioned:
        cdl_Version version
        void* manager_ctx
        void (*deleter)(cdl_Versioned*) noexcept nogil
        uint64_t flags
        cdl_Tensor dl_tensor

# Capsule names: C string constants, since a capsule keeps only a pointer to its name.
cdef const char* _LEGACY_NAME = b"dltensor"
cdef const char* _VERSIONED_NAME = b"dltensor_versioned"

#: key (what ``manager_ctx`` holds) -> what the export keeps alive until its deleter.
cdef dict _exports = {}
#: Addresses of the live managed structs: a deleter's pointer is checked here first.
cdef set _live = set()
_keys = itertools.count(1)
# No lock: each registration and each check-and-take below runs with the GIL held and
# no Python code between its steps (the keys are ints), so each is atomic; a record's
# contents are dropped only after the take. Nothing here can be held at a fork.
cdef object _MISSING = object()
#: Reports an exception raised in a deleter (set by ``_dlpack``: its unraisable hook).
_report = None


def registry_size():
    """How many exports wait for their deleter."""
    return len(_exports)


cdef object _take(uintptr_t ptr, bint versioned):
    """Unregister the export at ``ptr`` and free its block: its record, or ``_MISSING``."""
    cdef void* key
    if ptr not in _live:
        return _MISSING
    _live.discard(ptr)
    if versioned:
        key = (<cdl_Versioned*>ptr).manager_ctx
    else:
        key = (<cdl_Managed*>ptr).manager_ctx
    rec = _exports.pop(<uintptr_t>key, None)
    free(<void*>ptr)
    return rec


cdef void _end(uintptr_t ptr, bint versioned, str where) noexcept:
    """End an export (the GIL held), keeping any exception set by the caller."""
    cdef PyObject* t
    cdef PyObject* v
    cdef PyObject* tb
    PyErr_Fetch(&t, &v, &tb)
    try:
        if not ptr:
            raise ValueError("DLPack deleter called with a NULL tensor; nothing was done")
        rec = _take(ptr, versioned)
        if rec is _MISSING:
            raise LookupError(
                f"DLPack deleter called for {ptr:#x}, which is not a live cudriver export "
                "(a second call, or a pointer cudriver never exported); nothing was done"
            )
        rec = None  # the lease goes here, after the take
    except BaseException as exc:
        try:
            if _report is not None:
                _report(exc, f"Exception ignored in the cudriver DLPack {where}")
        except BaseException:
            pass
    PyErr_Restore(t, v, tb)


cdef void _end_with_gil(uintptr_t ptr, bint versioned) noexcept with gil:
    _end(ptr, versioned, "deleter")


cdef void _legacy_deleter(cdl_Managed* p) noexcept nogil:
    if Py_IsInitialized():
        _end_with_gil(<uintptr_t>p, False)


cdef void _versioned_deleter(cdl_Versioned* p) noexcept nogil:
    if Py_IsInitialized():
        _end_with_gil(<uintptr_t>p, True)


cdef void _capsule_destructor(object cap) noexcept:
    # Called with the GIL held, as the capsule is deallocated: a capsule that still
    # has its first name was not consumed, and its tensor is ours to end.
    cdef void* p
    if PyCapsule_IsValid(cap, _LEGACY_NAME):
        p = PyCapsule_GetPointer(cap, _LEGACY_NAME)
        _end(<uintptr_t>p, False, "capsule destructor")
    elif PyCapsule_IsValid(cap, _VERSIONED_NAME):
        p = PyCapsule_GetPointer(cap, _VERSIONED_NAME)
        _end(<uintptr_t>p, True, "capsule destructor")


def deleter_addresses():
    """``(legacy deleter, versioned deleter)`` addresses, as exported structs hold them."""
    return <uintptr_t>&_legacy_deleter, <uintptr_t>&_versioned_deleter


def capsule(uint64_t address, int32_t device_type, int32_t device_id, uint8_t code,
            uint8_t bits, tuple shape, bint versioned, object keep):
    """A C-contiguous DLPack capsule over ``address``; ``keep`` lives until the deleter.

    ``shape`` is a tuple of ints (its C-order strides are computed here); ``code`` and
    ``bits`` the DLPack type (one lane). Allocates one block (``malloc``), freed by the
    deleter. Raises ``MemoryError`` when ``malloc`` fails, ``OverflowError`` for a
    dimension that does not fit in 64 bits.
    """
    cdef Py_ssize_t ndim = len(shape)
    cdef Py_ssize_t i
    cdef size_t head = sizeof(cdl_Versioned) if versioned else sizeof(cdl_Managed)
    cdef size_t n = ndim if ndim > 0 else 1
    cdef char* block
    cdef int64_t* dims
    cdef int64_t* steps
    cdef cdl_Tensor* t
    cdef cdl_Managed* m
    cdef cdl_Versioned* vm
    cdef int64_t stride = 1
    cdef uintptr_t key
    head = (head + 7) & ~(<size_t>7)
    block = <char*>malloc(head + 2 * n * sizeof(int64_t))
    if block == NULL:
        raise MemoryError("no host memory for a DLPack tensor")
    try:
        dims = <int64_t*>(block + head)
        steps = dims + n
        dims[0] = 0
        steps[0] = 1
        for i in range(ndim):
            dims[i] = <int64_t>shape[i]
        for i in range(ndim - 1, -1, -1):
            steps[i] = stride
            stride *= dims[i]
        key = next(_keys)
        if versioned:
            vm = <cdl_Versioned*>block
            vm.version.major = 1
            vm.version.minor = 0
            vm.manager_ctx = <void*>key
            vm.deleter = _versioned_deleter
            vm.flags = 0
            t = &vm.dl_tensor
        else:
            m = <cdl_Managed*>block
            m.manager_ctx = <void*>key
            m.deleter = _legacy_deleter
            t = &m.dl_tensor
        t.data = <void*><uintptr_t>address
        t.device.device_type = device_type
        t.device.device_id = device_id
        t.ndim = <int32_t>ndim
        t.dtype.code = code
        t.dtype.bits = bits
        t.dtype.lanes = 1
        t.shape = dims
        t.strides = steps
        t.byte_offset = 0
    except BaseException:
        free(block)
        raise
    _exports[key] = keep
    _live.add(<uintptr_t>block)
    try:
        return PyCapsule_New(block, _VERSIONED_NAME if versioned else _LEGACY_NAME,
                             <void (*)(object) noexcept>_capsule_destructor)
    except BaseException:
        _take(<uintptr_t>block, versioned)
        raise
