# cython: language_level=3, binding=True, boundscheck=False, wraparound=False
# cython: cdivision=True, auto_pickle=False, annotation_typing=False
"""DLPack in C: the export's common path, and capsules whose block holds struct, shape, strides.

:func:`dlpack` and :func:`dlpack_device` are the buffers' ``__dlpack__`` and
``__dlpack_device__``; :func:`export` is ``_dlpack.export``. On the export's common path
(``stream`` None, -1 or a handle, ``max_version`` None or a pair of ints, ``dl_device``
None or the buffer's own, ``copy`` None or False, a buffer whose dtype was exported
before and whose context knows its device) it reads the buffer's fields, takes its
lease, orders the consumer's stream when the buffer is stream-ordered
(``_dlpack._order``, in Python) and makes the capsule, without a Python frame of its
own. Anything else goes, before any side effect, to ``_dlpack``'s Python export
(:data:`_export_slow`), which checks every argument and raises what the caller is told.

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
it is fetched before and restored after. Once the interpreter is finalising (or has
finalised), a deleter call does nothing: the block and the lease are left to the
process's end, as a thread that is not Python's may not take the GIL then.
"""

from cpython.exc cimport PyErr_Fetch, PyErr_Restore
from cpython.pycapsule cimport PyCapsule_GetPointer, PyCapsule_IsValid, PyCapsule_New
from cpython.ref cimport PyObject
from cpython.set cimport PySet_Add, PySet_Discard
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_GET_SIZE
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t, uintptr_t
from libc.stdlib cimport free, malloc

from typing import Any

import numpy as np

from cudriver._memory._core cimport BufferCore, buffer_lease

from cudriver._lifetime._coerce import U64_LIMIT as _U64_LIMIT_PY, DeviceMemory as _DeviceMemory

cdef extern from "Python.h":
    int Py_IsInitialized() nogil

cdef extern from *:
    """
    /* sys.is_finalizing() without the GIL (public as Py_IsFinalizing since 3.13). */
    #if PY_VERSION_HEX >= 0x030D0000
    #define cudriver_dl_finalizing() Py_IsFinalizing()
    #else
    #define cudriver_dl_finalizing() _Py_IsFinalizing()
    #endif
    """
    int _finalizing "cudriver_dl_finalizing"() nogil

# The structs of dlpack.h (DLPack 1.x), as C declares them; written here, since no
# header is needed to build.
cdef extern from *:
    """
    typedef struct { int32_t device_type; int32_t device_id; } DLDevice;
    typedef struct { uint8_t code; uint8_t bits; uint16_t lanes; } DLDataType;
    typedef struct {
        void* data; DLDevice device; int32_t ndim; DLDataType dtype;
        int64_t* shape; int64_t* strides; uint64_t byte_offset;
    } DLTensor;
    typedef struct DLManagedTensor {
        DLTensor dl_tensor; void* manager_ctx; void (*deleter)(struct DLManagedTensor*);
    } DLManagedTensor;
    typedef struct { uint32_t major; uint32_t minor; } DLPackVersion;
    typedef struct DLManagedTensorVersioned {
        DLPackVersion version; void* manager_ctx;
        void (*deleter)(struct DLManagedTensorVersioned*);
        uint64_t flags; DLTensor dl_tensor;
    } DLManagedTensorVersioned;
    """
    ctypedef struct DLDevice:
        int32_t device_type
        int32_t device_id
    ctypedef struct DLDataType:
        uint8_t code
        uint8_t bits
        uint16_t lanes
    ctypedef struct DLTensor:
        void* data
        DLDevice device
        int32_t ndim
        DLDataType dtype
        int64_t* shape
        int64_t* strides
        uint64_t byte_offset
    ctypedef struct DLManagedTensor:
        DLTensor dl_tensor
        void* manager_ctx
        void (*deleter)(DLManagedTensor*) noexcept nogil
    ctypedef struct DLPackVersion:
        uint32_t major
        uint32_t minor
    ctypedef struct DLManagedTensorVersioned:
        DLPackVersion version
        void* manager_ctx
        void (*deleter)(DLManagedTensorVersioned*) noexcept nogil
        uint64_t flags
        DLTensor dl_tensor

# Capsule names: C string constants, since a capsule keeps only a pointer to its name.
cdef const char* _LEGACY_NAME = b"dltensor"
cdef const char* _VERSIONED_NAME = b"dltensor_versioned"

#: key (what ``manager_ctx`` holds) -> what the export keeps alive until its deleter.
cdef dict _exports = {}
#: Addresses of the live managed structs: a deleter's pointer is checked here first.
cdef set _live = set()
# The last key given (a C counter: keys are never reused in a process).
cdef unsigned long long _keys = 0
# No lock: each registration and each check-and-take below runs with the GIL held and
# no Python code between its steps (the keys are ints), so each is atomic; a record's
# contents are dropped only after the take. Nothing here can be held at a fork.
cdef object _MISSING = object()
#: Reports an exception raised in a deleter (set by ``_dlpack``: its unraisable hook).
_report = None

# -- what the export's common path needs from ``_dlpack`` (set there at import) -----------
#: dtype -> DLPack ``(code, bits, lanes)``, filled by ``_dlpack._dl_code`` (which refuses
#: what DLPack lacks); the common path takes only dtypes found here.
CODES = {}
cdef dict _CODES = CODES
#: ``_dlpack``'s export in Python, with its checks: everything off the common path.
_export_slow = None
#: ``_dlpack._order``: makes the consumer's stream wait for a stream-ordered buffer's.
_order = None
#: ``_dlpack.device``, looked up at each call: :func:`dlpack_device` off its common path.
_device_slow = None
# The device types whose device id is 0 (CPU, pinned and managed memory): their device
# comes from ``_dlpack.device``.
cdef int _KDLCPU = 1
cdef int _KDLCUDAHOST = 3
cdef int _KDLCUDAMANAGED = 13
cdef object _U64_LIMIT = _U64_LIMIT_PY
cdef object _DEVICE_MEMORY = _DeviceMemory
cdef object _NP_DTYPE = np.dtype
cdef object _U8 = np.dtype(np.uint8)
cdef int _KDLCUDA = 2
# A buffer whose type keeps this lease (DeviceBuffer's) is leased in C.
cdef object _BUFFER_LEASE = BufferCore._lease


def registry_size():
    """How many exports wait for their deleter."""
    return len(_exports)


cdef object _take(uintptr_t ptr, bint versioned):
    """Unregister the export at ``ptr`` and free its block: its record, or ``_MISSING``."""
    cdef void* key
    if PySet_Discard(_live, ptr) != 1:  # checked and taken in one step
        return _MISSING
    if versioned:
        key = (<DLManagedTensorVersioned*>ptr).manager_ctx
    else:
        key = (<DLManagedTensor*>ptr).manager_ctx
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


cdef void _legacy_deleter(DLManagedTensor* p) noexcept nogil:
    # Any thread, with or without the GIL. Not once the interpreter finalises: a thread
    # that is not Python's would hang (or end) taking the GIL.
    if Py_IsInitialized() and not _finalizing():
        _end_with_gil(<uintptr_t>p, False)


cdef void _versioned_deleter(DLManagedTensorVersioned* p) noexcept nogil:
    if Py_IsInitialized() and not _finalizing():
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


cdef object _capsule(uint64_t address, int32_t device_type, int32_t device_id, uint8_t code,
                     uint8_t bits, tuple shape, bint versioned, object keep):
    """:func:`capsule`, called from C."""
    global _keys
    cdef Py_ssize_t ndim = PyTuple_GET_SIZE(shape)
    cdef Py_ssize_t i
    cdef size_t head = sizeof(DLManagedTensorVersioned) if versioned else sizeof(DLManagedTensor)
    cdef size_t n = ndim if ndim > 0 else 1
    cdef char* block
    cdef int64_t* dims
    cdef int64_t* steps
    cdef DLTensor* t
    cdef DLManagedTensor* m
    cdef DLManagedTensorVersioned* vm
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
            dims[i] = <int64_t><object>PyTuple_GET_ITEM(shape, i)
        for i in range(ndim - 1, -1, -1):
            steps[i] = stride
            stride *= dims[i]
    except BaseException:
        free(block)
        raise
    _keys += 1
    key = <uintptr_t>_keys
    if versioned:
        vm = <DLManagedTensorVersioned*>block
        vm.version.major = 1
        vm.version.minor = 0
        vm.manager_ctx = <void*>key
        vm.deleter = _versioned_deleter
        vm.flags = 0
        t = &vm.dl_tensor
    else:
        m = <DLManagedTensor*>block
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
    try:
        _exports[key] = keep
        PySet_Add(_live, <uintptr_t>block)
    except BaseException:
        _exports.pop(key, None)
        free(block)
        raise
    try:
        return PyCapsule_New(block, _VERSIONED_NAME if versioned else _LEGACY_NAME,
                             <void (*)(object) noexcept>_capsule_destructor)
    except BaseException:
        _take(<uintptr_t>block, versioned)
        raise


def capsule(uint64_t address, int32_t device_type, int32_t device_id, uint8_t code,
            uint8_t bits, tuple shape not None, bint versioned, object keep):
    """A C-contiguous DLPack capsule over ``address``; ``keep`` lives until the deleter.

    ``shape`` is a tuple of ints (its C-order strides are computed here); ``code`` and
    ``bits`` the DLPack type (one lane). Allocates one block (``malloc``), freed by the
    deleter. Raises ``MemoryError`` when ``malloc`` fails, ``OverflowError`` for a
    dimension that does not fit in 64 bits; then nothing is registered.
    """
    return _capsule(address, device_type, device_id, code, bits, shape, versioned, keep)


cdef inline bint _small_int(object v):
    # An int (not a bool, not a subclass) of at most 31 bits either way.
    return type(v) is int and -0x7FFFFFFF <= v <= 0x7FFFFFFF


cdef inline object _arguments(object stream, object max_version, object copy,
                              bint* versioned):
    """The arguments, as _stream_arg, _versioned and the copy check take them: the
    consumer's stream (``versioned`` set) when they are common, else None (the Python
    export's)."""
    if stream is None:
        queue = 1
    elif type(stream) is int and (stream == -1 or 0 < stream < _U64_LIMIT):
        queue = stream
    else:
        return None
    if max_version is not None:
        if (type(max_version) is not tuple or PyTuple_GET_SIZE(max_version) != 2
                or type(<object>PyTuple_GET_ITEM(max_version, 0)) is not int
                or type(<object>PyTuple_GET_ITEM(max_version, 1)) is not int):
            return None
        versioned[0] = <object>PyTuple_GET_ITEM(max_version, 0) >= 1
    if copy is not None and copy is not False:
        return None
    return queue


cdef inline bint _own_device(object dl_device, int t, object ordinal):
    # Only the buffer's own device, as an exact pair of small ints.
    return (type(dl_device) is tuple and PyTuple_GET_SIZE(dl_device) == 2
            and _small_int(<object>PyTuple_GET_ITEM(dl_device, 0))
            and _small_int(<object>PyTuple_GET_ITEM(dl_device, 1))
            and <object>PyTuple_GET_ITEM(dl_device, 0) == t
            and <object>PyTuple_GET_ITEM(dl_device, 1) == ordinal)


cdef object _export_device_buffer(BufferCore b, stream, max_version, dl_device, copy):
    """The export of device memory of a ``DeviceBuffer``: its fields read in C, its lease
    made here.

    What ``_export`` does, in the same order, without the attribute lookups and the
    Python ``_lease`` calls; anything uncommon goes to :data:`_export_slow`.
    """
    cdef bint versioned = False
    cdef object queue = None
    queue = _arguments(stream, max_version, copy, &versioned)
    if queue is None:
        return _export_slow(b, stream, max_version, dl_device, copy)
    ctx = b._context
    dev = getattr(ctx, "_device", None) if ctx is not None else None
    ordinal = getattr(dev, "_ordinal", None) if dev is not None else None
    if not _small_int(ordinal):
        return _export_slow(b, stream, max_version, dl_device, copy)
    dt = b._dtype
    shape = b._shape
    if dt is None or shape is None:  # as _export reads it: the attributes
        layout = _attribute_layout(b)
        if layout is None:
            return _export_slow(b, stream, max_version, dl_device, copy)
        dt, shape = layout
    elif type(shape) is not tuple:
        return _export_slow(b, stream, max_version, dl_device, copy)
    return _finish(b, stream, max_version, dl_device, copy, queue, versioned, _KDLCUDA,
                   ordinal, dt, shape, True)


cdef object _export(buf, stream, max_version, dl_device, copy):
    """The export: its common path here, anything else to :data:`_export_slow`.

    Off the common path nothing is done here: the Python export checks everything, in
    its order, and raises what the caller is told.
    """
    cdef bint versioned = False
    cdef object queue = None
    cdef int t
    if buf._h is None:
        return _export_slow(buf, stream, max_version, dl_device, copy)
    if isinstance(buf, BufferCore) and getattr(type(buf), "_DL_DEVICE_TYPE", None) == _KDLCUDA:
        return _export_device_buffer(<BufferCore>buf, stream, max_version, dl_device, copy)
    queue = _arguments(stream, max_version, copy, &versioned)
    if queue is None:
        return _export_slow(buf, stream, max_version, dl_device, copy)
    # The device (_device_fast), when the buffer's context knows it (first: pinned and
    # managed memory go to the Python export before their layout is read).
    ctx = getattr(buf, "_context", None)
    dev = getattr(ctx, "_device", None) if ctx is not None else None
    kind = getattr(type(buf), "_DL_DEVICE_TYPE", None)
    if dev is None or not _small_int(kind):
        return _export_slow(buf, stream, max_version, dl_device, copy)
    t = kind
    if t == _KDLCPU or t == _KDLCUDAHOST or t == _KDLCUDAMANAGED:
        return _export_slow(buf, stream, max_version, dl_device, copy)
    ordinal = getattr(dev, "_ordinal", None)
    if not _small_int(ordinal):
        return _export_slow(buf, stream, max_version, dl_device, copy)
    # The layout, as _layout reads it: a typed buffer's fields, else its dtype (a numpy
    # dtype here) and shape (ints here), which must cover its bytes (else the Python
    # export raises). Then its DLPack type (_dl_code), as remembered.
    dt = getattr(buf, "_dtype", None)
    shape = getattr(buf, "_shape", None)
    if dt is None or shape is None:
        layout = _attribute_layout(buf)
        if layout is None:
            return _export_slow(buf, stream, max_version, dl_device, copy)
        dt, shape = layout
    elif type(shape) is not tuple:
        return _export_slow(buf, stream, max_version, dl_device, copy)
    return _finish(buf, stream, max_version, dl_device, copy, queue, versioned, t, ordinal,
                   dt, shape, False)


cdef object _attribute_layout(buf):
    """``(dtype, shape)`` from the ``dtype`` and ``shape`` attributes of a buffer that
    remembers no layout (a subclass may define them): a numpy dtype and a tuple of ints
    covering its bytes; else None (the Python export's)."""
    dt = getattr(buf, "dtype", _U8)
    shape = getattr(buf, "shape", None)
    if not isinstance(dt, _NP_DTYPE) or type(shape) is not tuple:
        return None
    count = 1
    for d in <tuple>shape:
        if type(d) is not int:
            return None
        count *= d
    if count * dt.itemsize != buf._nbytes:
        return None
    return dt, shape


cdef object _finish(buf, stream, max_version, dl_device, copy, queue, bint versioned, int t,
                    ordinal, dt, shape, bint fields):
    """The end of both common paths: the dtype's DLPack type, the device check, then the
    side effects in the Python export's order (the lease, the ordering, the capsule).

    ``fields``: ``buf`` is a BufferCore whose fields were read in C (its lease, when
    its type keeps DeviceBuffer's, is made in C too).
    """
    cdef tuple entry = _CODES.get(dt)
    if entry is None:
        return _export_slow(buf, stream, max_version, dl_device, copy)
    if dl_device is not None and not _own_device(dl_device, t, ordinal):
        return _export_slow(buf, stream, max_version, dl_device, copy)
    if fields:
        # DeviceBuffer's lease: a view's is on the buffer it was made from.
        lease = buffer_lease(<BufferCore>buf) if type(buf)._lease is _BUFFER_LEASE else buf._lease()
        if queue != -1 and (<BufferCore>buf)._stream is not None:
            _order(buf, queue)
    else:
        lease = buf._lease()
        if (queue != -1 and isinstance(buf, _DEVICE_MEMORY)
                and getattr(buf, "_stream", True) is not None):
            _order(buf, queue)
    return _capsule(buf._key, t, <int32_t>ordinal, <uint8_t>entry[0], <uint8_t>entry[1],
                    <tuple>shape, versioned, lease)


def export(buf, stream, max_version, dl_device, copy):
    """``_dlpack.export``: ``__dlpack__`` of ``buf``, its arguments by position."""
    return _export(buf, stream, max_version, dl_device, copy)


def dlpack(
    self,
    *,
    stream: int | None = None,
    max_version: tuple[int, int] | None = None,
    dl_device: tuple[int, int] | None = None,
    copy: bool | None = None,
) -> Any:
    """A DLPack capsule over this buffer's memory (no copy), as the array API says.

    The tensor has a device buffer's remembered dtype and shape (else ``uint8`` of
    ``nbytes``); a pinned buffer's is its bytes. ``stream`` is the consumer's (None
    or 1 legacy, 2 per-thread, a handle, -1 no ordering; 0 is refused): unless -1,
    it waits for a stream-ordered buffer's stream (``cuEventRecord``,
    ``cuStreamWaitEvent``); for pinned memory, which has no stream, it is only
    checked. The host never waits. ``max_version >= (1, 0)`` gives a versioned
    capsule; ``dl_device`` must be this buffer's own, or for pinned memory
    ``(kDLCPU, 0)``, the same memory as plain host memory (what
    ``numpy.from_dlpack(buf, device="cpu")`` asks for); ``copy=True`` is refused.
    The memory stays allocated, also after :meth:`close`, until the consumer is
    done. See the DLPack page.

    Raises
    ------
    ClosedError
        The buffer is closed.
    BufferError
        ``copy=True`` (nothing is copied), another ``dl_device``, or a dtype DLPack
        cannot describe.
    """
    return _export(self, stream, max_version, dl_device, copy)


def dlpack_device(self) -> tuple[int, int]:
    """``(kDLCUDA, ordinal)`` for device memory, ``(kDLCUDAHost, 0)`` for pinned memory.

    Managed memory is ``(kDLCUDAManaged, 0)``: the device id of pinned and managed
    memory is 0, as DLPack says.
    """
    # Read from the fields when the buffer's context knows its device (as
    # ``_dlpack._device_fast``); otherwise (closed, no context yet, a device type
    # whose id is 0) ``_dlpack.device``, through :data:`_device_slow`.
    cdef int t
    if self._h is not None:
        ctx = getattr(self, "_context", None)
        dev = getattr(ctx, "_device", None) if ctx is not None else None
        kind = getattr(type(self), "_DL_DEVICE_TYPE", None)
        if dev is not None and _small_int(kind):
            t = kind
            if t != _KDLCPU and t != _KDLCUDAHOST and t != _KDLCUDAMANAGED:
                ordinal = getattr(dev, "_ordinal", None)
                if _small_int(ordinal):
                    return kind, ordinal
    return _device_slow(self)
