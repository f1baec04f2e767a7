"""Copy operands: host arrays, pinned and device buffers, and CUDA Array Interface objects.

Everything :meth:`cudriver.DeviceBuffer.copy_from`, :meth:`~cudriver.DeviceBuffer.copy_to`
and :meth:`~cudriver.DeviceBuffer.fill` check before the first driver call: what an
operand is (:func:`operand`), its ``__cuda_array_interface__`` (:func:`parse_cai`), the
fill value (:func:`fill_args`); and the CUDA Array Interface's ordering rule for
consumers (:func:`order_after`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any, NamedTuple, Protocol, TypeVar, runtime_checkable

import numpy as np
import numpy.typing as npt
from cuda.bindings import driver as _drv

from .._context.device import enter_context, leave_context
from .._lifetime import _pins, capture
from .._lifetime._coerce import (
    U64_LIMIT,
    DeviceMemory,
    HostMemory,
    StreamLike,
    dtype_arg,
    int_arg,
    nbytes_of,
    shape_arg,
    stream_handle,
)
from .._runtime import _calls, _hooks
from .._runtime._bindings import SUCCESS
from ..errors import ClosedError, StreamCaptureError, error_for

_B = TypeVar("_B")

__all__ = [
    "SupportsCudaArrayInterface",
    "Operand",
    "operand",
    "CaiFields",
    "read_cai",
    "parse_cai",
    "ndarray_address",
    "cai_stream_value",
    "fill_args",
    "order_after",
    "memory_side",
    "enqueue",
    "refuse_capturing",
    "run_copy",
]

_EVENT_NO_TIMING = int(_drv.CUevent_flags.CU_EVENT_DISABLE_TIMING)
_CAPTURE_NONE = _drv.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE


@runtime_checkable
class SupportsCudaArrayInterface(Protocol):
    """An object exposing device memory through ``__cuda_array_interface__``."""

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        """The CUDA Array Interface dictionary (version 3)."""
        ...


def cai_stream_value(h: Any) -> int:
    """A stream handle as the CUDA Array Interface writes it (1 for the legacy stream)."""
    # CAI v3: 1 is the legacy default stream; 0 is not allowed.
    v = int(h)
    return 1 if v == 0 else v


#: The newest CUDA Array Interface version understood (3: with ``stream``).
_CAI_VERSION = 3


class CaiFields(NamedTuple):
    """What a ``__cuda_array_interface__`` describes, checked by :func:`read_cai`."""

    #: The address of element ``[0, ..., 0]`` (0 for an empty array's None).
    ptr: int
    shape: tuple[int, ...]
    dtype: np.dtype[Any]
    #: In bytes; None for C order.
    strides: tuple[int, ...] | None
    readonly: bool
    #: The producer's stream handle (CAI v3; 1 is the legacy default stream), or None.
    stream: int | None


def read_cai(cai: object, role: str) -> CaiFields:
    """The one parser of a CAI dict: any layout; TypeError or ValueError naming ``role``.

    Refuses versions above 3, masks, malformed entries, a ``stream`` that is not a
    handle (0 included), and strides of another length than the shape.
    """
    if not isinstance(cai, dict):
        raise TypeError(f"{role}.__cuda_array_interface__ is a {type(cai).__name__}, not a dict")
    version = cai.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 0:
        raise ValueError(
            f"{role}.__cuda_array_interface__ has no valid 'version' (got {version!r})"
        )
    if version > _CAI_VERSION:
        raise ValueError(
            f"{role}.__cuda_array_interface__ is version {version}; cudriver reads up to "
            f"version {_CAI_VERSION}"
        )
    try:
        data = cai["data"]
        ptr, read_only = data
        ptr = 0 if ptr is None else int_arg(ptr, "data pointer")
        shape = tuple(int_arg(d, "shape entry") for d in cai["shape"])
        dtype = np.dtype(cai["typestr"])
        strides = cai.get("strides")
        if strides is not None:
            strides = tuple(int_arg(st, "stride") for st in strides)
        stream = cai.get("stream")
        if stream is not None:
            stream = int_arg(stream, "stream")
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{role} has a malformed __cuda_array_interface__: {exc!r}") from None
    if not 0 <= ptr < U64_LIMIT or any(d < 0 for d in shape):
        raise ValueError(f"{role} has a malformed __cuda_array_interface__: {cai!r:.200}")
    if stream is not None and not 0 < stream < U64_LIMIT:
        raise ValueError(f"{role}'s __cuda_array_interface__ names stream {stream}, not a handle")
    if cai.get("mask") is not None:
        raise ValueError(f"{role} is a masked array (__cuda_array_interface__ 'mask'): unsupported")
    if strides is not None and len(strides) != len(shape):
        raise ValueError(f"{role} has shape {shape} but strides {strides}")
    return CaiFields(ptr, shape, dtype, strides, bool(read_only), stream)


def parse_cai(cai: object, role: str) -> tuple[int, int, bool, int | None]:
    """``(address, nbytes, read_only, stream or None)`` of a CAI dict (C-contiguous only)."""
    f = read_cai(cai, role)
    shape, strides = f.shape, f.strides
    if strides is not None:
        expected = f.dtype.itemsize
        for dim, st in zip(reversed(shape), reversed(strides), strict=True):
            if dim != 1 and int(st) != expected:
                raise ValueError(
                    f"{role} is not C-contiguous (shape {shape}, strides {tuple(strides)}): "
                    "copy it to a contiguous array first, or wrap it in a cudriver.StridedView"
                )
            expected *= dim
    return f.ptr, math.prod(shape) * f.dtype.itemsize, f.readonly, f.stream


class HostBytes:
    """The numpy ``base`` of arrays onto host-visible memory (pinned or managed).

    ``keep`` (the buffer, or a lease on it) lives as long as any array made from this:
    the memory is not freed meanwhile, even after the buffer is closed.
    """

    __slots__ = ("__weakref__", "keep", "nbytes", "ptr")

    def __init__(self, keep: object, ptr: int, nbytes: int) -> None:
        self.keep = keep
        self.ptr = ptr
        self.nbytes = nbytes

    @property
    def __array_interface__(self) -> dict[str, Any]:
        return {
            "version": 3,
            "shape": (self.nbytes,),
            "typestr": "|u1",
            "data": (self.ptr, False),
            "strides": None,
        }


def host_source(array: object, kind: str) -> npt.NDArray[Any]:
    """The host array a ``from_array`` constructor copies: checked, as an ndarray.

    Raises TypeError for device memory (naming ``kind(n).copy_from(x)``) and object
    arrays, ValueError for an empty or non-contiguous array.
    """
    if isinstance(array, DeviceMemory) or hasattr(array, "__cuda_array_interface__"):
        raise TypeError(
            f"from_array takes a host array; for device memory use {kind}(n).copy_from(x)"
        )
    a = array if isinstance(array, np.ndarray) else np.asarray(array)
    ndarray_address(a, False, "array")
    if a.nbytes == 0:
        raise ValueError(f"array of shape {a.shape} is empty: a buffer needs >= 1 byte")
    return a


def fill_new(buf: Any, a: npt.NDArray[Any], stream: Any) -> None:
    """Give a new buffer ``a``'s dtype and shape and copy ``a`` in; close it on failure."""
    buf._dtype = a.dtype
    buf._shape = a.shape
    try:
        buf.copy_from(a, stream=stream)
    except BaseException:
        buf.close()
        raise


def new_typed(make: Callable[[int], _B], shape: object, dtype: npt.DTypeLike) -> _B:
    """``make(nbytes)`` for ``shape`` elements of ``dtype``; the buffer remembers both.

    The arguments are checked before ``make`` allocates.
    """
    shp = shape_arg(shape)
    dt = dtype_arg(dtype)
    buf = make(nbytes_of(shp, dt))
    fields: Any = buf
    fields._dtype = dt
    fields._shape = shp
    return buf


def ndarray_address(a: npt.NDArray[Any], writable: bool, role: str) -> int:
    if a.dtype.hasobject:
        raise TypeError(f"{role} has dtype {a.dtype}: arrays of Python objects cannot be copied")
    if not a.flags.c_contiguous:
        raise ValueError(
            f"{role} is not C-contiguous (shape {a.shape}, strides {a.strides}): "
            "pass np.ascontiguousarray(...)"
        )
    if writable and not a.flags.writeable:
        raise ValueError(f"{role} is a read-only array")
    return int(a.__array_interface__["data"][0])


# An operand: (on the device?, address, nbytes, object to keep alive, its stream or None).
Operand = tuple[bool, int, int, Any, "int | None"]


def operand(obj: object, *, writable: bool, role: str) -> Operand:
    """Classify a copy operand: ``(on the device?, address, nbytes, keep, its stream)``.

    ``obj`` is a :class:`~cudriver.DeviceBuffer`, a numpy array, a
    :class:`~cudriver.PinnedBuffer`, an object with ``__cuda_array_interface__``, or a
    bytes-like object. ``role`` (``"src"``, ``"out"``) names it in error messages.
    """
    if isinstance(obj, DeviceMemory):
        if obj._h is None:
            obj._raise_closed()
        return True, obj._key, obj._nbytes, obj, obj._producer_stream()
    if isinstance(obj, np.ndarray):
        return False, ndarray_address(obj, writable, role), obj.nbytes, obj, None
    if isinstance(obj, HostMemory):
        if obj._h is None:
            obj._raise_closed()
        if writable and getattr(obj, "read_only", False):
            raise ValueError(
                f"{role} is registered read-only (read_only=True): nothing may write it"
            )
        return False, obj._key, obj._nbytes, obj, None
    cai = getattr(obj, "__cuda_array_interface__", None)
    if cai is not None:
        ptr, n, read_only, stream = parse_cai(cai, role)
        if writable and read_only:
            raise ValueError(f"{role} is read-only (its __cuda_array_interface__ says so)")
        return True, ptr, n, obj, stream
    try:
        mv = memoryview(obj)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(
            f"{role} must be a numpy array, a bytes-like object, a DeviceBuffer, a "
            f"PinnedBuffer or an object with __cuda_array_interface__, not {type(obj).__name__}"
        ) from None
    if not mv.c_contiguous:
        raise ValueError(f"{role} is a non-contiguous buffer: copy it to a contiguous one first")
    if writable and mv.readonly:
        raise ValueError(f"{role} is a read-only buffer ({type(obj).__name__})")
    if mv.nbytes == 0:
        return False, 0, 0, mv, None
    arr = np.frombuffer(mv, dtype=np.uint8)  # the view keeps the exporter alive
    return False, int(arr.__array_interface__["data"][0]), mv.nbytes, arr, None


def fill_args(value: object, element_size: object) -> tuple[int, int]:
    """``(element size in bytes, unsigned value)`` for ``fill`` and memset nodes."""
    if element_size is not None:
        w = int_arg(element_size, "element_size")
        if w not in (1, 2, 4):
            raise ValueError(f"element_size must be 1, 2 or 4 bytes, not {w}")
    if isinstance(value, np.generic):
        size = value.dtype.itemsize
        if size not in (1, 2, 4):
            raise ValueError(
                f"a {value.dtype} fill value has {size} bytes; fill takes 1, 2 or 4-byte values"
            )
        if element_size is not None and w != size:
            raise ValueError(f"fill value is {value.dtype} ({size} bytes) but element_size={w}")
        # The value's bit pattern, so np.float32(1.0) or np.int16(-1) fill as expected.
        bits = np.asarray(value).reshape(1).view(f"u{size}")[0]
        return size, int(bits)
    if isinstance(value, bool) or not isinstance(value, int):
        hint = (
            " (use e.g. np.float32(x) to fill with a float's bits)"
            if isinstance(value, float)
            else ""
        )
        raise TypeError(
            f"fill value must be an int or a numpy scalar, not {type(value).__name__}{hint}"
        )
    w = 1 if element_size is None else w
    top = (1 << (8 * w)) - 1
    if not 0 <= value <= top:
        raise ValueError(f"fill value {value} does not fit in {w} byte(s): 0..{top}")
    return w, value


def order_after(queue: Any, other: int) -> None:
    """Make ``queue`` wait for work already on stream ``other`` (CAI consumer rule).

    Skipped while ``queue`` is capturing: waiting there on an event recorded outside
    the capture is not allowed; ordering is then the caller's business.
    """
    if other == int(queue) or (other in (0, 1) and int(queue) in (0, 1)):
        return
    if _calls.cuStreamIsCapturing(queue) != _CAPTURE_NONE:
        return
    ev = _calls.cuEventCreate(_EVENT_NO_TIMING)
    try:
        _calls.cuEventRecord(ev, _drv.CUstream(other))
        _calls.cuStreamWaitEvent(queue, ev, 0)
    finally:
        _drv.cuEventDestroy(ev)


_MT = _drv.CUmemorytype


def memory_side(p: Any, side: str, on_dev: bool, addr: int, obj: Any) -> None:
    """Set ``p``'s ``<side>MemoryType`` and address fields (``CUDA_MEMCPY2D``/``3D``).

    Device, managed and pinned (page-locked) memory go by their unified address;
    pageable host memory (numpy arrays, bytes) as host memory. ``side`` is ``"src"``
    or ``"dst"``; the rest is what :func:`operand` returned.
    """
    if on_dev or isinstance(obj, HostMemory):
        setattr(p, f"{side}MemoryType", _MT.CU_MEMORYTYPE_UNIFIED)
        setattr(p, f"{side}Device", addr)
    else:
        setattr(p, f"{side}MemoryType", _MT.CU_MEMORYTYPE_HOST)
        setattr(p, f"{side}Host", addr)


def _no_order(queue: Any) -> None:
    pass


def _order_after_stream(other: int, queue: Any) -> None:
    order_after(queue, other)


def refuse_capturing(q: Any, refused: Callable[..., Any], why: str) -> None:
    """Raise :class:`~cudriver.StreamCaptureError` (naming ``refused``) if ``q`` captures.

    For calls that a capture cannot hold and whose refusal by the driver would break
    it: they are refused here first (``cuStreamIsCapturing``), and the capture goes on.
    """
    if _calls.cuStreamIsCapturing(q) != _CAPTURE_NONE:
        raise StreamCaptureError(
            _drv.CUresult.CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, refused.__name__, why
        )


_SYNC_IN_CAPTURE = (
    "this stream-ordered buffer's stream is capturing: an operation without stream= "
    "completes before returning, which a capture forbids; pass stream= to capture it"
)


# Memory whose uses a copy notes (a stream-ordered free waits for them): a tuple made
# once, not a union per call.
_NOTED = (DeviceMemory, HostMemory)


def enqueue(
    buf: Any,
    stream: StreamLike,
    other: int | None,
    keep: Any,
    fn: Any,
    args: tuple[Any, ...],
    what: str = "",
) -> None:
    """Call ``fn(*args, queue)`` for device buffer ``buf`` in its context.

    The work is ordered after ``other`` (the stream an operand advertises); ``buf`` and
    ``keep`` are kept alive. With ``stream`` the work is only enqueued there, and the
    operands are kept alive with a capture in progress. Without it the work runs on
    the buffer's own stream (stream-ordered buffers) or on the legacy stream (or its
    stand-in while a capture is open: ``capture.run_stream_less``), and has completed
    on return: a host wait, which the observers hear of first (``_runtime._hooks``),
    named after ``what`` (the method the user called on ``buf``, e.g. ``"copy_to"``).
    """
    token = None
    if stream is None:
        st = buf._stream
        if st is not None:
            if st._h is None:
                raise ClosedError("the stream of this stream-ordered DeviceBuffer is closed")
            refuse_capturing(buf._sync_h, _drv.cuStreamSynchronize, _SYNC_IN_CAPTURE)
        sh, q = None, buf._sync_h
        if _hooks.ON:
            wait = "cuStreamSynchronize" if st is not None else "cuEventSynchronize"
            name = f"{buf._kind}.{what}" if what else f"{buf._kind} {fn.__name__}"
            token = _hooks.host_wait(f"{name} without stream= ({wait})")
    else:
        sh = q = stream_handle(stream)
    try:
        ctx = buf._context
        if ctx is None:
            ctx = buf._resolve_context()
        pushed = enter_context(ctx._live(), ctx._key)
        try:
            if sh is None and buf._stream is None:
                before = (
                    _no_order if other is None else functools.partial(_order_after_stream, other)
                )
                capture.run_stream_less(ctx._key, fn, args, before)
                return
            if other is not None:
                order_after(q, other)
            r = fn(*args, q)
            if r[0] is not SUCCESS:
                raise error_for(r[0], fn)
            if sh is None:
                r = _drv.cuStreamSynchronize(q)
                if r[0] is not SUCCESS:
                    raise error_for(r[0], _drv.cuStreamSynchronize)
            else:
                buf._note_use(q)
                if isinstance(keep, _NOTED):
                    keep._note_use(q)
                capture.keep(q, keep, buf)
        finally:
            leave_context(pushed)
    finally:
        if token is not None:
            _hooks.end(token)


def run_copy(
    stream: StreamLike,
    objs: tuple[Any, ...],
    call: Any,
    *args: Any,
    ops: tuple[Operand, ...] = (),
    what: str = "",
) -> None:
    """Enqueue ``call(*args, queue)`` with the objects pinned; wait when no stream.

    Ordered first after the streams the operands ``ops`` advertise (the CUDA Array
    Interface's rule for consumers). Without a stream the queue is the legacy stream,
    or its stand-in while a capture is open (``capture.run_stream_less``), in the
    current context, and the call has completed on return (a host wait, which the
    observers hear of first, named after ``what``, the call the user made); with one
    it is only enqueued, and ``objs`` are kept alive with a capture in progress there.
    The copies of ``copies`` and :class:`~cudriver.StridedView` go through here.
    """
    states = _pins.pin_all(*objs, stream)
    try:
        if stream is None:
            token = None
            if _hooks.ON:
                name = what or call.__name__
                token = _hooks.host_wait(f"{name} without stream= (cuEventSynchronize)")
            try:
                capture.run_stream_less(None, call, args, functools.partial(_ordered, ops))
            finally:
                if token is not None:
                    _hooks.end(token)
            return
        queue = stream_handle(stream)
        _ordered(ops, queue)
        r = call(*args, queue)
        if r[0] is not SUCCESS:
            raise error_for(r[0], call)
        for o in objs:
            if isinstance(o, _NOTED):
                o._note_use(queue)  # a stream-ordered free waits for this copy
        capture.keep(queue, *objs)
    finally:
        _pins.unpin_all(states)


def _ordered(ops: tuple[Operand, ...], queue: Any) -> None:
    for op in ops:
        if op[4] is not None:
            order_after(queue, op[4])
