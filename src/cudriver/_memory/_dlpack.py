"""DLPack both ways: buffers as producers (``__dlpack__``), ``DeviceBuffer.from_dlpack``.

Producing. :func:`export` describes a buffer's memory, without copying, as a
``DLManagedTensor`` (a ``"dltensor"`` capsule), or as a ``DLManagedTensorVersioned``
1.0 (``"dltensor_versioned"``) when the consumer passes ``max_version >= (1, 0)``,
after making the consumer's stream wait for the buffer's own (the array API rule).

The export's common path runs in C (``_dlpack_core.export``: no Python frame of its
own; the dtype's DLPack type is remembered per dtype); any other call goes to its
Python half, :func:`_export_slow`, which checks every argument, before any side effect.

What an export keeps alive. The capsule is made in C (``_dlpack_core``): one block
holds the managed struct, the shape and the strides; ``manager_ctx`` is an integer key
under which the registry keeps a lease on the buffer. The deleter, a C function,
checks that its pointer is a live export (without reading through it), frees the block
and drops the lease; a second or stale call finds nothing and goes to
:data:`sys.unraisablehook`. The capsule's destructor calls it when no consumer took
the tensor, keeping an exception that was propagating in its caller.

Consuming. :func:`import_buffer` asks the producer for a capsule ordered on the
consumer's stream, checks all it describes before consuming it (a refused capsule is
freed by its own destructor), renames it ``"used_dltensor[_versioned]"`` and wraps the
memory with ``from_handle``, with an owner that calls the producer's deleter once,
when the buffer and its views are gone (never in a forked child or at exit).
:func:`parse_tensor` is the one parser of a tensor (any strides, any device);
:func:`import_tensor` gives it, with the owner, to :class:`~cudriver.StridedView`, and
``import_buffer`` adds a buffer's checks (CUDA memory, C order, not empty, writable).
"""

from __future__ import annotations

import ctypes
import math
import os
import sys
from typing import Any, NamedTuple, TypeVar, cast

import numpy as np
from cuda.bindings import driver as _drv

from .._context.device import Context, Device, enter_context, kept_primary, leave_context
from .._lifetime import _hostfn
from .._lifetime._coerce import U64_LIMIT, DeviceMemory, Memory, StreamLike, stream_handle
from .._runtime import _calls
from ..errors import DriverNotFoundError
from . import _dlpack_core as _core
from ._copy import order_after

__all__ = [
    "KDLCPU",
    "KDLCUDA",
    "KDLCUDAHOST",
    "KDLCUDAMANAGED",
    "VERSION",
    "FLAG_READ_ONLY",
    "DLDevice",
    "DLDataType",
    "DLTensor",
    "DLManagedTensor",
    "DLPackVersion",
    "DLManagedTensorVersioned",
    "dl_dtype",
    "numpy_dtype",
    "export",
    "device",
    "make_capsule",
    "Producer",
    "import_buffer",
    "registry_size",
    "Tensor",
    "extent",
    "parse_tensor",
    "dlpack_device",
    "ask_capsule",
    "open_capsule",
    "claim",
    "import_tensor",
]

KDLCPU = 1
KDLCUDA = 2
KDLCUDAHOST = 3
KDLCUDAMANAGED = 13
#: The version of the versioned capsules made here: the 1.0 layout, and nothing
#: added later (no sub-byte dtypes; strides are always given, as 1.2 requires).
VERSION = (1, 0)
FLAG_READ_ONLY = 1 << 0
_MAX_VERSION = (1, 0)  # what import_buffer asks producers for
_MAX_NDIM = 64

_DEVICE_NAMES = dict(
    zip(
        (1, 2, 3, 4, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18),
        "kDLCPU kDLCUDA kDLCUDAHost kDLOpenCL kDLVulkan kDLMetal kDLVPI kDLROCM kDLROCMHost "  # noqa: SIM905
        "kDLExtDev kDLCUDAManaged kDLOneAPI kDLWebGPU kDLHexagon kDLMAIA kDLTrn".split(),
        strict=True,
    )
)
# The header: "for vanilla CPU memory, pinned memory, or managed memory, this is set to 0".
_ID_ZERO = frozenset((KDLCPU, KDLCUDAHOST, KDLCUDAMANAGED))

# DLDataTypeCode names by code; those up to kDLBool (6) take the bit count in their name.
_CODE_NAMES = dict(
    enumerate(
        "int uint float opaque_handle bfloat complex bool float8_e3m4 float8_e4m3 "  # noqa: SIM905
        "float8_e4m3b11fnuz float8_e4m3fn float8_e4m3fnuz float8_e5m2 float8_e5m2fnuz "
        "float8_e8m0fnu float6_e2m3fn float6_e3m2fn float4_e2m1fn".split()
    )
)
_KIND_CODES = {"i": 0, "u": 1, "f": 2, "c": 5, "b": 6}
# (DLPack code, bits) -> numpy dtype, for the types both sides have.
_NUMPY_TYPES = ("i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f2", "f4", "f8", "c8", "c16", "?")
_TO_NUMPY: dict[tuple[int, int], np.dtype[Any]] = {
    (_KIND_CODES[dt.kind], dt.itemsize * 8): dt for dt in map(np.dtype, _NUMPY_TYPES)
}
_U8 = np.dtype(np.uint8)


# -- the C structs (dlpack.h) -----------------------------------------------------------
class DLDevice(ctypes.Structure):
    """``DLDevice``: device type and id (8 bytes)."""

    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    """``DLDataType``: type code, bits and lanes (4 bytes)."""

    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    """``DLTensor`` (48 bytes on 64-bit platforms); shape and strides count elements."""

    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.c_void_p),  # int64_t*
        ("strides", ctypes.c_void_p),  # int64_t*, NULL for C order (before DLPack 1.2)
        ("byte_offset", ctypes.c_uint64),
    ]


class DLManagedTensor(ctypes.Structure):
    """``DLManagedTensor``, the legacy (unversioned) managed tensor."""

    _fields_ = [
        ("dl_tensor", DLTensor),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),  # void (*)(DLManagedTensor*)
    ]


class DLPackVersion(ctypes.Structure):
    """``DLPackVersion``: major and minor."""

    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    """``DLManagedTensorVersioned`` (DLPack 1.x)."""

    _fields_ = [
        ("version", DLPackVersion),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),  # void (*)(DLManagedTensorVersioned*)
        ("flags", ctypes.c_uint64),
        ("dl_tensor", DLTensor),
    ]


_Managed = DLManagedTensor | DLManagedTensorVersioned

# -- the Python C API, through prototypes of our own (ctypes.pythonapi's are shared) ------
_P, _S, _O = ctypes.c_void_p, ctypes.c_char_p, ctypes.py_object


def _capi(name: str, restype: Any, *argtypes: Any) -> Any:
    return ctypes.PYFUNCTYPE(restype, *argtypes)((name, ctypes.pythonapi))


# On a live capsule (a Python object) ...
_IsValid = _capi("PyCapsule_IsValid", ctypes.c_int, _O, _S)
_GetPointer = _capi("PyCapsule_GetPointer", _P, _O, _S)
_SetName = _capi("PyCapsule_SetName", ctypes.c_int, _O, _S)

# Capsule names: module constants, since a capsule keeps only a pointer to its name.
_LEGACY_NAME = b"dltensor"
_VERSIONED_NAME = b"dltensor_versioned"
_USED_LEGACY_NAME = b"used_dltensor"
_USED_VERSIONED_NAME = b"used_dltensor_versioned"

_DELETER_T = ctypes.CFUNCTYPE(None, _P)


# -- the registry of live exports (kept by _dlpack_core) -----------------------------------
registry_size = _core.registry_size


def _report(exc: BaseException, msg: str) -> None:
    _hostfn._unraisable(exc, msg, None)


_core._report = _report
#: The deleters' addresses, as exported structs hold them.
_LEGACY_DELETER_ADDR, _VERSIONED_DELETER_ADDR = _core.deleter_addresses()


# -- dtypes, devices, arguments -------------------------------------------------------------
def _dtype_name(code: int, bits: int, lanes: int) -> str:
    name = _CODE_NAMES.get(code)
    if name is None:
        text = f"code {code}, {bits} bits"
    elif code <= 6:
        text = f"{name}{bits}"
    else:
        text = name
    return text if lanes == 1 else f"{text}x{lanes}"


def dl_dtype(dtype: np.dtype[Any]) -> tuple[int, int, int]:
    """``(code, bits, lanes)`` of a numpy dtype, or ``BufferError`` when DLPack lacks it."""
    dt = np.dtype(dtype)
    code = _KIND_CODES.get(dt.kind)
    bits = dt.itemsize * 8
    if code is None or dt.fields is not None or dt.subdtype is not None:
        raise BufferError(
            f"dtype {dt} has no DLPack equivalent: export a byte view instead "
            "(buffer.cast(numpy.uint8))"
        )
    if not dt.isnative:
        raise BufferError(
            f"dtype {dt.str} is not in native byte order, which DLPack requires: convert "
            "the data or export a byte view (buffer.cast(numpy.uint8))"
        )
    if (code, bits) not in _TO_NUMPY:
        raise BufferError(f"dtype {dt} ({bits} bits) has no DLPack equivalent")
    return code, bits, 1


#: dtype -> (code, bits, lanes), for the dtypes exported so far (the compiled export's
#: common path reads it too).
_CODES: dict[np.dtype[Any], tuple[int, int, int]] = _core.CODES


def _dl_code(dtype: np.dtype[Any]) -> tuple[int, int, int]:
    """:func:`dl_dtype`, remembered per dtype."""
    hit = _CODES.get(dtype)
    if hit is None:
        hit = dl_dtype(dtype)
        if isinstance(dtype, np.dtype) and len(_CODES) < 1024:
            _CODES[dtype] = hit
    return hit


def numpy_dtype(code: int, bits: int, lanes: int) -> np.dtype[Any]:
    """The numpy dtype of a DLPack ``(code, bits, lanes)``, or ``BufferError``."""
    name = _dtype_name(code, bits, lanes)
    if lanes != 1:
        raise BufferError(
            f"DLPack dtype {name} has {lanes} lanes: cudriver imports scalar types only"
        )
    dt = _TO_NUMPY.get((code, bits))
    if dt is None:
        raise BufferError(
            f"DLPack dtype {name} (code {code}, {bits} bits) has no numpy equivalent, so "
            "cudriver cannot import it; convert it in the producer first (e.g. to float32)"
        )
    return dt


def _device_name(dev: tuple[int, int]) -> str:
    return f"{_DEVICE_NAMES.get(dev[0], 'unknown device type')} {dev}"


def _device_pair(value: object, what: str) -> tuple[int, int]:
    if isinstance(value, (tuple, list)) and len(value) == 2:
        t, i = value
        if all(isinstance(x, int) and not isinstance(x, bool) for x in (t, i)):
            return int(t), int(i)
    raise TypeError(f"{what} must be a (device_type, device_id) pair of ints, not {value!r}")


def _stream_arg(stream: object) -> int:
    """The consumer's stream by the array API rule; None is the legacy default stream."""
    if stream is None:
        return 1
    if isinstance(stream, bool) or not isinstance(stream, int):
        raise TypeError(
            f"stream must be an int or None (a CUDA stream handle, as __dlpack__ takes it), "
            f"not {type(stream).__name__}"
        )
    if stream == 0:
        raise ValueError(
            "stream=0 is not allowed by DLPack (it could mean None, 1 or 2): pass 1 for the "
            "legacy default stream, 2 for the per-thread default stream, or None"
        )
    if not -1 <= stream < U64_LIMIT:
        raise ValueError(f"stream must be -1, None or a stream handle, not {stream}")
    return stream


def _versioned(max_version: object) -> bool:
    if max_version is None:
        return False
    if (
        isinstance(max_version, (tuple, list))
        and len(max_version) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) for v in max_version)
    ):
        return int(max_version[0]) >= 1
    raise TypeError(f"max_version must be a (major, minor) pair of ints, not {max_version!r}")


def _c_strides(shape: tuple[int, ...]) -> list[int]:
    out = [1] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        out[i] = out[i + 1] * shape[i + 1]
    return out


# -- producing --------------------------------------------------------------------------------
def device(buf: Memory) -> tuple[int, int]:
    """``__dlpack_device__``: ``(device type, device id)`` of a buffer.

    The type is the class's ``_DL_DEVICE_TYPE``; the id is the device ordinal, or 0
    for pinned and managed memory, as the DLPack header says. May ask the driver for
    the context of a :meth:`~cudriver.DeviceBuffer.from_handle` buffer (once).
    """
    if buf._h is None:
        buf._raise_closed()
    t = getattr(type(buf), "_DL_DEVICE_TYPE", None)
    if not isinstance(t, int):
        raise TypeError(f"{type(buf).__name__} has no DLPack device type")
    if t in _ID_ZERO:
        return t, 0
    return t, int(cast(Any, buf).context.device.ordinal)


def _device_fast(buf: Memory) -> tuple[int, int]:
    """:func:`device`, read from the fields when the buffer's context knows its device."""
    ctx = getattr(buf, "_context", None)
    dev = getattr(ctx, "_device", None) if ctx is not None else None
    t = getattr(type(buf), "_DL_DEVICE_TYPE", None)
    if dev is None or not isinstance(t, int) or t in _ID_ZERO:
        return device(buf)
    return t, dev._ordinal


def _layout(buf: Memory) -> tuple[np.dtype[Any], tuple[int, ...]]:
    dt, shape = getattr(buf, "_dtype", None), getattr(buf, "_shape", None)
    if dt is not None and shape is not None:  # a typed device buffer's, checked when set
        return dt, shape
    dt = np.dtype(getattr(buf, "dtype", _U8))
    shape = tuple(int(d) for d in getattr(buf, "shape", (buf._nbytes,)))
    if math.prod(shape) * dt.itemsize != buf._nbytes:
        raise BufferError(f"shape {shape} of {dt} does not cover the {buf._nbytes}-byte buffer")
    return dt, shape


def export(
    buf: Memory,
    *,
    stream: object = None,
    max_version: object = None,
    dl_device: object = None,
    copy: object = None,
) -> Any:
    """``__dlpack__``: a DLPack capsule over ``buf``'s memory, without copying.

    Parameters
    ----------
    buf
        A device buffer (or view) or pinned buffer.
    stream
        The consumer's stream as an int: None or 1 the legacy default stream, 2 the
        per-thread default stream, another positive int a ``CUstream`` handle, -1 no
        ordering at all; 0 is refused. Unless -1, the stream is made to wait
        (``cuEventRecord`` and ``cuStreamWaitEvent``) for the work on a stream-ordered
        buffer's stream, and a stream-ordered free is ordered after work on it.
    max_version
        ``(major, minor)``: with major >= 1, a versioned capsule (DLPack 1.0).
    dl_device
        Must be the buffer's own ``__dlpack_device__()``; pinned memory may also be
        exported as ``(kDLCPU, 0)``.
    copy
        True is refused (nothing is ever copied); False and None export in place.

    Raises
    ------
    ClosedError
        ``buf`` is closed.
    BufferError
        ``copy=True``, another ``dl_device``, or a dtype DLPack lacks.
    TypeError, ValueError
        An argument of the wrong type or value (``stream=0``).
    """
    return _export(buf, stream, max_version, dl_device, copy)


def _export_slow(
    buf: Memory, stream: object, max_version: object, dl_device: object, copy: object
) -> Any:
    """:func:`export` off its compiled common path: every check, in order, then the export."""
    if buf._h is None:
        buf._raise_closed()
    queue = 1 if stream is None else _stream_arg(stream)
    versioned = False if max_version is None else _versioned(max_version)
    if copy is True:
        raise BufferError(
            "copy=True: cudriver exports its buffers in place and never copies; copy the "
            "data into a new buffer first (DeviceBuffer.copy_from) and export that"
        )
    if copy is not None and copy is not False:
        raise TypeError(f"copy must be True, False or None, not {copy!r}")
    dt, shape = _layout(buf)
    code, bits, _ = _dl_code(dt)  # refuse what DLPack cannot describe before anything
    own = _device_fast(buf)
    target = own
    if dl_device is not None:
        req = _device_pair(dl_device, "dl_device")
        if req != own:
            if not (own[0] == KDLCUDAHOST and req == (KDLCPU, 0)):
                raise BufferError(
                    f"dl_device={req} is not this {type(buf).__name__}'s device "
                    f"({_device_name(own)}): cudriver exports without copying"
                )
            target = req  # pinned memory is host memory too
    lease = buf._lease()
    if queue != -1 and isinstance(buf, DeviceMemory):
        _order(buf, queue)
    shape = shape if type(shape) is tuple else tuple(shape)
    return _core.capsule(buf._key, target[0], target[1], code, bits, shape, versioned, lease)


def _device_now(buf: Memory) -> tuple[int, int]:
    """:func:`device`, looked up when called: the compiled ``__dlpack_device__``'s other path."""
    return device(buf)


def _order(buf: DeviceMemory, queue: int) -> None:
    """Make the consumer's stream wait for ``buf``'s own stream, and note its use."""
    if getattr(buf, "_stream", True) is None:
        return  # not stream-ordered: nothing to wait for, no use to note
    q = _drv.CUstream(queue)
    other = buf._producer_stream()
    if other is not None:
        ctx = cast(Any, buf).context
        pushed = enter_context(ctx._live(), ctx._key)
        try:
            order_after(q, other)
        finally:
            leave_context(pushed)
    if queue != 2:  # the per-thread stream of whichever thread frees: no use to record
        buf._note_use(q)


def make_capsule(
    address: int,
    dl_device: tuple[int, int],
    dtype: np.dtype[Any],
    shape: tuple[int, ...],
    *,
    versioned: bool,
    keep: object,
) -> Any:
    """A C-contiguous DLPack capsule over ``address``; ``keep`` lives until the deleter.

    The record (a lease, or whatever ``keep`` is) is registered before the capsule
    exists and dropped by the deleter, or by the capsule's destructor when no consumer
    took it. ``BufferError`` for a dtype DLPack lacks.
    """
    code, bits, _ = _dl_code(dtype)
    shape = shape if type(shape) is tuple else tuple(shape)
    return _core.capsule(address, dl_device[0], dl_device[1], code, bits, shape, versioned, keep)


# The compiled export's common path, and where it sends everything else.
_core._export_slow = _export_slow
_core._order = _order
_core._device_slow = _device_now
_export = _core.export


class Producer(Memory):
    """The DLPack producer methods of the buffer classes (``__dlpack__``, ``__dlpack_device__``).

    A base of :class:`~cudriver.DeviceBuffer` and :class:`~cudriver.PinnedBuffer`, whose
    ``_DL_DEVICE_TYPE`` says the device type. The methods are :func:`export` and
    :func:`device` with the buffer as ``buf``.
    """

    __slots__ = ()

    # Compiled (``_dlpack_core``), with their docstrings: the export's common path runs
    # there without a Python frame; anything else goes to :func:`_export_slow`.
    __dlpack__ = _core.dlpack
    __dlpack_device__ = _core.dlpack_device


# -- consuming --------------------------------------------------------------------------------
class _ForeignTensor:
    """The owner of an imported tensor: calls the producer's deleter once, when dropped."""

    __slots__ = ("_deleter", "_pid", "_ptr", "armed", "source")

    def __init__(self, ptr: int, deleter: int | None, source: object) -> None:
        self._ptr = ptr
        self._deleter = _DELETER_T(deleter) if deleter else None
        self._pid = os.getpid()
        self.armed = False  # set once the capsule is consumed: from then on it is ours
        # A producer that gives no deleter keeps its memory as long as its object.
        self.source = source if not deleter else None

    def release(self) -> None:
        """Call the producer's deleter (once; not in a forked child or at exit)."""
        fn, self._deleter = self._deleter, None
        if fn is None or not self.armed:
            return
        if os.getpid() != self._pid or sys.is_finalizing():
            return
        fn(self._ptr)

    def __del__(self) -> None:
        try:
            self.release()
        except BaseException as exc:
            _report(exc, "Exception ignored calling a DLPack producer's deleter")


def _consumer_stream(stream: StreamLike) -> int:
    if stream is None:
        return 1
    if isinstance(stream, int) and not isinstance(stream, bool) and stream == -1:
        return -1
    v = int(stream_handle(stream))
    return 1 if v == 0 else v  # the NULL stream is the legacy default stream


def _context_for(ordinal: int) -> Context | None:
    """The device's primary context if it is already active (nothing initialised), else None."""
    try:
        dev = Device(ordinal)
        _flags, active = _calls.cuDevicePrimaryCtxGetState(dev.handle)
    except DriverNotFoundError:  # nothing to ask: from_handle looks it up on first use
        return None
    return kept_primary(dev) if active else None


class Tensor(NamedTuple):
    """What a DLPack tensor describes, checked by :func:`parse_tensor`."""

    #: ``data + byte_offset``: the address of element ``[0, ..., 0]`` (0 when empty).
    address: int
    #: ``(device type, device id)`` as the tensor says.
    device: tuple[int, int]
    dtype: np.dtype[Any]
    shape: tuple[int, ...]
    #: In elements; None for C order (a NULL ``strides``).
    strides: tuple[int, ...] | None
    #: ``DLPACK_FLAG_BITMASK_READ_ONLY`` of a versioned capsule.
    readonly: bool


def extent(shape: tuple[int, ...], strides: tuple[int, ...]) -> tuple[int, int]:
    """``(lowest, highest)`` element offsets (in elements) a layout touches; shape not empty."""
    lo = hi = 0
    for d, st in zip(shape, strides, strict=True):
        if st < 0:
            lo += (d - 1) * st
        else:
            hi += (d - 1) * st
    return lo, hi


def parse_tensor(t: DLTensor, what: str, readonly: bool = False) -> Tensor:
    """The one parser of a ``DLTensor``: any device, any strides; BufferError naming the issue.

    Checks the dimensions, the dtype (numpy must have it), the shape (no negative
    extent) and that every element lies in the 64-bit address space; the data
    pointer may be NULL only for an empty tensor. Reads the structs only (no driver
    call). ``what`` names the tensor in messages.
    """
    dev = (int(t.device.device_type), int(t.device.device_id))
    ndim = int(t.ndim)
    if not 0 <= ndim <= _MAX_NDIM:
        raise BufferError(f"{what} has ndim {ndim}")
    dtype = numpy_dtype(int(t.dtype.code), int(t.dtype.bits), int(t.dtype.lanes))
    if ndim and not t.shape:
        raise BufferError(f"{what} has {ndim} dimensions and no shape")
    shape = tuple((ctypes.c_int64 * ndim).from_address(t.shape)) if ndim else ()
    if any(d < 0 for d in shape):
        raise BufferError(f"{what} has a negative dimension: shape {shape}")
    strides = None
    if ndim and t.strides:
        strides = tuple((ctypes.c_int64 * ndim).from_address(t.strides))
    # As C computes it: a producer may say element 0 is below ``data`` with a byte
    # offset that wraps around (measured: CuPy for negative strides).
    address = (int(t.data or 0) + int(t.byte_offset)) & (U64_LIMIT - 1)
    if math.prod(shape):
        if not t.data:
            raise BufferError(f"{what} has a NULL data pointer")
        lo, hi = extent(shape, strides if strides is not None else tuple(_c_strides(shape)))
        if address + lo * dtype.itemsize < 0 or address + (hi + 1) * dtype.itemsize > U64_LIMIT:
            raise BufferError(
                f"{what} describes memory beyond the 64-bit address space (data "
                f"{int(t.data or 0):#x}, byte_offset {int(t.byte_offset)}, shape {shape}, "
                f"strides {strides} in elements of {dtype.itemsize} bytes)"
            )
    return Tensor(address, dev, dtype, shape, strides, readonly)


def _tensor_fields(t: DLTensor, what: str) -> tuple[int, int, np.dtype[Any], tuple[int, ...], int]:
    """``(address, nbytes, dtype, shape, device id)`` of a buffer's tensor (CUDA, C order)."""
    dev = (int(t.device.device_type), int(t.device.device_id))
    if dev[0] not in (KDLCUDA, KDLCUDAMANAGED):
        raise BufferError(f"{what} describes memory on {_device_name(dev)}, not CUDA memory")
    tensor = parse_tensor(t, what)
    shape, strides, dtype = tensor.shape, tensor.strides, tensor.dtype
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes == 0:
        raise BufferError(
            f"{what} is empty (shape {shape}): a DeviceBuffer needs at least one byte"
        )
    if strides is not None:
        expected = 1
        for dim, st in zip(reversed(shape), reversed(strides), strict=True):
            if dim != 1 and st != expected:
                raise BufferError(
                    f"{what} is not C-contiguous (shape {shape}, strides {strides} in "
                    "elements): a DeviceBuffer is contiguous memory; wrap it in a "
                    "cudriver.StridedView instead (kernel arguments, 2D/3D copies), or make "
                    "it contiguous first (e.g. tensor.contiguous())"
                )
            expected *= dim
    return tensor.address, nbytes, dtype, shape, dev[1]


_B = TypeVar("_B", bound=DeviceMemory)


def import_buffer(cls: type[_B], obj: object, *, stream: StreamLike = None) -> _B:
    """``DeviceBuffer.from_dlpack``: wrap a producer's CUDA memory, without copying.

    Asks ``obj.__dlpack__(stream=..., max_version=(1, 0))`` (without ``max_version``
    for producers that do not take it) for a capsule ordered on ``stream``, checks
    it, consumes it and returns ``cls.from_handle(...)`` with the tensor's dtype and
    shape. The buffer holds the tensor until it and its views are gone; then the
    producer's deleter runs. Makes no driver call on the memory; may ask whether the
    device's primary context is active (``cuDevicePrimaryCtxGetState``).

    Parameters
    ----------
    cls
        The class to build (``DeviceBuffer`` or a subclass).
    obj
        An object with ``__dlpack__`` and ``__dlpack_device__`` on a CUDA device.
    stream
        The stream on which the memory will be used: None (the legacy default stream),
        a :class:`~cudriver.Stream`, any stream-like object or handle, or -1 to ask
        the producer for no ordering at all.

    Raises
    ------
    TypeError
        ``obj`` does not support DLPack.
    BufferError
        ``obj`` is not on a CUDA device, or its tensor is empty, not C-contiguous
        (the message points to :class:`~cudriver.StridedView`), read-only, of a DLPack
        version other than 1.x, or of a dtype numpy lacks.
    """
    what = type(obj).__name__
    dev = dlpack_device(obj)
    if dev is None:
        raise TypeError(
            f"{what} does not support DLPack (no __dlpack__ and __dlpack_device__); for a "
            "host array use DeviceBuffer.from_array"
        )
    if dev[0] not in (KDLCUDA, KDLCUDAMANAGED):
        raise BufferError(
            f"{what} is on {_device_name(dev)}, not a CUDA device: DeviceBuffer.from_dlpack "
            "shares device memory; copy host data with DeviceBuffer.from_array(...)"
        )
    return _consume(cls, ask_capsule(obj, dev, stream), obj)


def dlpack_device(obj: object) -> tuple[int, int] | None:
    """``obj.__dlpack_device__()`` checked, or None when ``obj`` does not speak DLPack."""
    dlpack = getattr(obj, "__dlpack__", None)
    where = getattr(obj, "__dlpack_device__", None)
    if not callable(dlpack) or not callable(where):
        return None
    return _device_pair(where(), f"{type(obj).__name__}.__dlpack_device__()")


def ask_capsule(obj: object, dev: tuple[int, int], stream: StreamLike) -> Any:
    """``obj.__dlpack__(stream=..., max_version=(1, 0))``: the capsule, by the stream rule.

    For CUDA and managed memory the consumer's stream is passed (:func:`_consumer_stream`:
    None the legacy default stream, -1 no ordering); for other devices (host memory)
    ``stream=None``, as the array API says. Producers that do not take ``max_version``
    are asked again without it.
    """
    dlpack: Any = getattr(obj, "__dlpack__")  # noqa: B009 - typed Any on purpose
    s = _consumer_stream(stream) if dev[0] in (KDLCUDA, KDLCUDAMANAGED) else None
    try:
        return dlpack(stream=s, max_version=_MAX_VERSION)
    except TypeError:  # a producer older than max_version
        return dlpack(stream=s)


def open_capsule(capsule: Any, obj: object) -> tuple[_Managed, int, bool, bool]:
    """``(managed struct, its address, versioned?, read-only?)`` of an unconsumed capsule.

    Refuses (BufferError) what is not a DLPack capsule and versions other than 1.x; a
    refused capsule is left to its producer (its own destructor frees it).
    """
    versioned = bool(_IsValid(capsule, _VERSIONED_NAME))
    if not versioned and not _IsValid(capsule, _LEGACY_NAME):
        raise BufferError(
            f"{type(obj).__name__}.__dlpack__() returned {capsule!r:.80}, not an unconsumed "
            "DLPack capsule"
        )
    ptr = int(_GetPointer(capsule, _VERSIONED_NAME if versioned else _LEGACY_NAME))
    managed: _Managed
    readonly = False
    if versioned:
        managed = DLManagedTensorVersioned.from_address(ptr)
        major, minor = int(managed.version.major), int(managed.version.minor)
        if major != 1:
            # Not consumed: the capsule's own destructor calls the deleter.
            raise BufferError(
                f"the DLPack tensor of {type(obj).__name__} is DLPack {major}.{minor}; "
                "cudriver reads 1.x"
            )
        readonly = bool(int(managed.flags) & FLAG_READ_ONLY)
    else:
        managed = DLManagedTensor.from_address(ptr)
    return managed, ptr, versioned, readonly


def claim(capsule: Any, ptr: int, managed: _Managed, versioned: bool, obj: object) -> Any:
    """Consume ``capsule`` (rename it ``used_...``): the owner returned calls the deleter.

    Call once everything the tensor describes has been checked: from here on the
    producer's memory is the caller's until the owner is dropped.
    """
    owner = _ForeignTensor(ptr, managed.deleter, obj)
    used = _USED_VERSIONED_NAME if versioned else _USED_LEGACY_NAME
    if _SetName(capsule, used) != 0:  # pragma: no cover - fails only on a non-capsule
        raise BufferError(f"could not consume {capsule!r}")
    owner.armed = True  # from here on, dropping the owner calls the deleter
    return owner


def import_tensor(obj: object, dev: tuple[int, int], stream: StreamLike) -> tuple[Tensor, Any]:
    """``(tensor, owner)``: ask ``obj`` for a capsule, parse it (any layout) and consume it.

    What :class:`~cudriver.StridedView` reads. The owner calls the producer's deleter
    when dropped. Makes no driver call.
    """
    capsule = ask_capsule(obj, dev, stream)
    managed, ptr, versioned, readonly = open_capsule(capsule, obj)
    tensor = parse_tensor(managed.dl_tensor, f"the DLPack tensor of {type(obj).__name__}", readonly)
    return tensor, claim(capsule, ptr, managed, versioned, obj)


def _consume(cls: type[_B], capsule: Any, obj: object) -> _B:
    what = f"the DLPack tensor of {type(obj).__name__}"
    managed, ptr, versioned, readonly = open_capsule(capsule, obj)
    if readonly:
        raise BufferError(
            f"{what} is read-only (DLPACK_FLAG_BITMASK_READ_ONLY), and cudriver buffers "
            "are always writable: export a writable tensor or copy it first (a "
            "cudriver.StridedView takes read-only tensors)"
        )
    address, nbytes, dtype, shape, dev_id = _tensor_fields(managed.dl_tensor, what)
    ctx = _context_for(dev_id)
    owner = claim(capsule, ptr, managed, versioned, obj)
    buf = cast(Any, cls).from_handle(address, nbytes, owner=owner, context=ctx)
    buf._dtype = dtype
    buf._shape = shape
    return cast(_B, buf)
