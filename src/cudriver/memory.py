"""Device memory and pinned host memory: allocation, copies, fills and views.

:class:`DeviceBuffer` owns device memory from ``cuMemAlloc`` (or, given a stream,
stream-ordered memory from ``cuMemAllocAsync``); :class:`PinnedBuffer` owns
page-locked host memory from ``cuMemHostAlloc``. Copies accept numpy arrays,
bytes-like objects, the two buffer classes and any object exposing
``__cuda_array_interface__``; every argument is checked in Python before the first
driver call.
"""

from __future__ import annotations

import math
import operator
import weakref
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, overload, runtime_checkable

import numpy as np
import numpy.typing as npt
from cuda.bindings import driver as _drv

from . import _capture
from ._bindings import SUCCESS
from ._handle import Handle
from ._runtime import init
from .context import Context, current_or_default
from .errors import ClosedError, make_error
from .stream import Stream, stream_handle

if TYPE_CHECKING:
    from .stream import StreamLike

__all__ = ["DeviceBuffer", "PinnedBuffer", "SupportsCudaArrayInterface"]

_T = TypeVar("_T")


@runtime_checkable
class SupportsCudaArrayInterface(Protocol):
    """An object exposing device memory through ``__cuda_array_interface__``."""

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        """The CUDA Array Interface dictionary (version 3)."""
        ...


_LEGACY = _drv.CUstream(1)  # CU_STREAM_LEGACY, independent of the per-thread-stream build
_U8 = np.dtype(np.uint8)
_EVENT_NO_TIMING = int(_drv.CUevent_flags.CU_EVENT_DISABLE_TIMING)
_CAPTURE_NONE = _drv.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE
_HOSTALLOC_PORTABLE = int(_drv.CU_MEMHOSTALLOC_PORTABLE)
_HOSTALLOC_DEVICEMAP = int(_drv.CU_MEMHOSTALLOC_DEVICEMAP)
_HOSTALLOC_WRITECOMBINED = int(_drv.CU_MEMHOSTALLOC_WRITECOMBINED)
_PTR_ATTR_CONTEXT = _drv.CUpointer_attribute.CU_POINTER_ATTRIBUTE_CONTEXT

_cuCtxGetCurrent = _drv.cuCtxGetCurrent
_cuCtxPushCurrent = _drv.cuCtxPushCurrent
_cuCtxPopCurrent = _drv.cuCtxPopCurrent
_cuMemAlloc = _drv.cuMemAlloc
_cuMemAllocAsync = _drv.cuMemAllocAsync
_cuMemFree = _drv.cuMemFree
_cuMemFreeAsync = _drv.cuMemFreeAsync
_cuStreamSynchronize = _drv.cuStreamSynchronize
_cuMemcpyHtoDAsync = _drv.cuMemcpyHtoDAsync
_cuMemcpyDtoHAsync = _drv.cuMemcpyDtoHAsync
_cuMemcpyDtoDAsync = _drv.cuMemcpyDtoDAsync
_MEMSET = {
    1: (_drv.cuMemsetD8Async, "cuMemsetD8Async"),
    2: (_drv.cuMemsetD16Async, "cuMemsetD16Async"),
    4: (_drv.cuMemsetD32Async, "cuMemsetD32Async"),
}


# -- argument checks (pure Python: they run before any driver call) -------------------
def _int_arg(value: object, name: str) -> int:
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an int, not bool")
    try:
        return operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"{name} must be an int, not {type(value).__name__}") from None


def _nbytes_arg(value: object, name: str = "nbytes") -> int:
    n = _int_arg(value, name)
    if n <= 0:
        raise ValueError(f"{name} must be positive, not {n}")
    return n


def _dtype_arg(dtype: npt.DTypeLike) -> np.dtype[Any]:
    try:
        dt = np.dtype(dtype)
    except TypeError as exc:
        raise TypeError(f"not a numpy dtype: {dtype!r} ({exc})") from None
    if dt.hasobject:
        raise TypeError(f"dtype {dt} holds Python objects, which have no meaning on the device")
    if dt.itemsize == 0:
        raise ValueError(f"dtype {dt} has no size")
    return dt


def _shape_arg(shape: object) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        dims: tuple[object, ...] = (shape,)
    elif isinstance(shape, (tuple, list)):
        dims = tuple(shape)
    else:
        raise TypeError(f"shape must be an int or a tuple of ints, not {type(shape).__name__}")
    out = tuple(_int_arg(d, "shape entry") for d in dims)
    if any(d < 0 for d in out):
        raise ValueError(f"shape {out} has a negative dimension")
    return out


def _nbytes_of(shape: tuple[int, ...], dtype: np.dtype[Any]) -> int:
    n = math.prod(shape) * dtype.itemsize
    if n == 0:
        raise ValueError(f"shape {shape} of {dtype} has no elements: a buffer needs >= 1 byte")
    return n


def _context_arg(context: object) -> Context | None:
    if context is None or isinstance(context, Context):
        return context
    raise TypeError(f"context must be a cudriver.Context or None, not {type(context).__name__}")


def _stream_arg(stream: StreamLike) -> Any:
    """The raw ``CUstream`` of a stream argument that is not None."""
    if isinstance(stream, Stream):
        h = stream._h
        if h is None:
            stream._raise_closed()
        return h
    return stream_handle(stream)


def _as_stream(stream: StreamLike) -> Stream:
    if isinstance(stream, Stream):
        if stream._h is None:
            stream._raise_closed()
        return stream
    return Stream.from_handle(stream)


def _cai_stream_value(h: Any) -> int:
    # CAI v3: 1 is the legacy default stream; 0 is not allowed.
    v = int(h)
    return 1 if v == 0 else v


def _parse_cai(cai: object, role: str) -> tuple[int, int, bool, int | None]:
    """``(address, nbytes, read_only, stream or None)`` of a CAI dict (C-contiguous only)."""
    if not isinstance(cai, dict):
        raise TypeError(f"{role}.__cuda_array_interface__ is a {type(cai).__name__}, not a dict")
    try:
        data = cai["data"]
        shape = tuple(int(d) for d in cai["shape"])
        dtype = np.dtype(cai["typestr"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{role} has a malformed __cuda_array_interface__: {exc!r}") from None
    if cai.get("mask") is not None:
        raise ValueError(f"{role} is a masked array (__cuda_array_interface__ 'mask'): unsupported")
    strides = cai.get("strides")
    if strides is not None:
        strides = tuple(int(st) for st in strides)
        if len(strides) != len(shape):
            raise ValueError(f"{role} has shape {shape} but strides {strides}")
        expected = dtype.itemsize
        for dim, st in zip(reversed(shape), reversed(strides), strict=True):
            if dim != 1 and int(st) != expected:
                raise ValueError(
                    f"{role} is not C-contiguous (shape {shape}, strides {tuple(strides)}): "
                    "copy it to a contiguous array first"
                )
            expected *= dim
    stream = cai.get("stream")
    return (
        int(data[0] or 0),
        math.prod(shape) * dtype.itemsize,
        bool(data[1]),
        None if stream is None else int(stream),
    )


def _ndarray_address(a: npt.NDArray[Any], writable: bool, role: str) -> int:
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
_Operand = tuple[bool, int, int, Any, "int | None"]


def _operand(obj: object, *, writable: bool, role: str) -> _Operand:
    if isinstance(obj, DeviceBuffer):
        if obj._h is None:
            obj._raise_closed()
        st = obj._stream
        live = st is not None and st._h is not None
        return True, obj._key, obj._nbytes, obj, obj._stream_int if live else None
    if isinstance(obj, np.ndarray):
        return False, _ndarray_address(obj, writable, role), obj.nbytes, obj, None
    if isinstance(obj, PinnedBuffer):
        if obj._h is None:
            obj._raise_closed()
        return False, obj._key, obj._nbytes, obj, None
    cai = getattr(obj, "__cuda_array_interface__", None)
    if cai is not None:
        ptr, n, read_only, stream = _parse_cai(cai, role)
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


def _fill_args(value: object, width: object) -> tuple[int, int]:
    """``(width in bytes, unsigned value)`` for ``fill``."""
    if width is not None:
        w = _int_arg(width, "width")
        if w not in (1, 2, 4):
            raise ValueError(f"width must be 1, 2 or 4 bytes, not {w}")
    if isinstance(value, np.generic):
        size = value.dtype.itemsize
        if size not in (1, 2, 4):
            raise ValueError(
                f"a {value.dtype} fill value has {size} bytes; fill takes 1, 2 or 4-byte values"
            )
        if width is not None and w != size:
            raise ValueError(f"fill value is {value.dtype} ({size} bytes) but width={w}")
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
    w = 1 if width is None else w
    top = (1 << (8 * w)) - 1
    if not 0 <= value <= top:
        raise ValueError(f"fill value {value} does not fit in {w} byte(s): 0..{top}")
    return w, value


# -- context and ordering helpers ---------------------------------------------------------
def _enter(ctx: Context) -> bool:
    """Make ``ctx`` current unless it is; True when it was pushed (pop it afterwards)."""
    ch = ctx._h
    if ch is None:
        ctx._raise_closed()
    r = _cuCtxGetCurrent()
    if r[0] is SUCCESS and r[1] is not None and int(r[1]) == ctx._key:
        return False
    r = _cuCtxPushCurrent(ch)
    if r[0] is not SUCCESS:
        raise make_error(r[0], "cuCtxPushCurrent")
    return True


def _order_after(queue: Any, other: int) -> None:
    """Make ``queue`` wait for work already on stream ``other`` (CAI consumer rule).

    Skipped while ``queue`` is capturing: waiting there on an event recorded outside
    the capture is not allowed; ordering is then the caller's business.
    """
    if other == int(queue) or (other in (0, 1) and int(queue) in (0, 1)):
        return
    r = _drv.cuStreamIsCapturing(queue)
    if r[0] is not SUCCESS:
        raise make_error(r[0], "cuStreamIsCapturing")
    if r[1] != _CAPTURE_NONE:
        return
    r = _drv.cuEventCreate(_EVENT_NO_TIMING)
    if r[0] is not SUCCESS:
        raise make_error(r[0], "cuEventCreate")
    ev = r[1]
    try:
        r = _drv.cuEventRecord(ev, _drv.CUstream(other))
        if r[0] is not SUCCESS:
            raise make_error(r[0], "cuEventRecord")
        r = _drv.cuStreamWaitEvent(queue, ev, 0)
        if r[0] is not SUCCESS:
            raise make_error(r[0], "cuStreamWaitEvent")
    finally:
        _drv.cuEventDestroy(ev)


def _free_sync(ctx_h: Any) -> Any:
    key = int(ctx_h)

    def release(dptr: Any) -> Any:
        # The allocating context must be current; push it only when it is not.
        cur = _cuCtxGetCurrent()
        if cur[0] is SUCCESS and cur[1] is not None and int(cur[1]) == key:
            return _cuMemFree(dptr)
        r = _cuCtxPushCurrent(ctx_h)
        if r[0] is not SUCCESS:
            return r
        try:
            return _cuMemFree(dptr)
        finally:
            _cuCtxPopCurrent()

    return release


def _free_async(ctx_h: Any, stream: Stream) -> Any:
    key = int(ctx_h)

    def release(dptr: Any) -> Any:
        sh = stream._h
        if sh is not None:
            cur = _cuCtxGetCurrent()
            if cur[0] is SUCCESS and cur[1] is not None and int(cur[1]) == key:
                return _cuMemFreeAsync(dptr, sh)
        r = _cuCtxPushCurrent(ctx_h)
        if r[0] is not SUCCESS:
            return r
        try:
            if sh is not None:
                return _cuMemFreeAsync(dptr, sh)
            # The stream was closed first: work it still had may use the memory, so
            # wait for the context before freeing in legacy-stream order.
            r = _drv.cuCtxSynchronize()
            if r[0] is not SUCCESS:
                return r
            return _drv.cuMemFreeAsync(dptr, _LEGACY)
        finally:
            _cuCtxPopCurrent()

    return release


def _free_host(ctx_h: Any) -> Any:
    def release(ptr: Any) -> Any:
        r = _cuCtxPushCurrent(ctx_h)
        if r[0] is not SUCCESS:
            return r
        try:
            return _drv.cuMemFreeHost(ptr)
        finally:
            _cuCtxPopCurrent()

    return release


# -- DeviceBuffer ---------------------------------------------------------------------------
class DeviceBuffer(Handle):
    """Device memory (``cuMemAlloc``; ``cuMemFree`` on close).

    Parameters
    ----------
    nbytes
        Size in bytes; must be positive.
    stream
        When given, the memory is allocated in stream order on this stream
        (``cuMemAllocAsync``) and freed there on close (``cuMemFreeAsync``); the
        buffer then keeps the stream alive, and its operations without ``stream=``
        run on this stream. A :class:`~cudriver.Stream` or any stream-like object.
    context
        The context to allocate in; default: the stream's context, else the current
        context (else device 0's primary context). The buffer keeps it alive.

    Notes
    -----
    Operations without ``stream=`` are synchronous: they are enqueued on the
    buffer's stream (the legacy default stream for buffers made without one) and
    waited for (``cuStreamSynchronize``), so the work has completed when the call
    returns. With ``stream=``, they are only enqueued (the ``...Async`` driver
    functions) and ordering with other streams is the caller's business, except for
    operands that advertise a stream through ``__cuda_array_interface__``, which are
    waited for as the interface requires.

    A buffer made by :meth:`from_array` or :meth:`empty` (or :meth:`cast`) remembers
    a dtype and shape, used by :meth:`copy_to` and ``__cuda_array_interface__``;
    other buffers are bytes (``uint8`` of ``nbytes``).

    Equality and hash compare the device address: a view at offset 0 equals its
    parent.
    """

    __slots__ = (
        "_base",
        "_context",
        "_dtype",
        "_nbytes",
        "_offset",
        "_shape",
        "_stream",
        "_stream_int",
        "_sync_h",
        "_views",
    )

    _kind = "DeviceBuffer"

    _base: DeviceBuffer | None
    _context: Context | None
    _dtype: np.dtype[Any] | None
    _nbytes: int
    _offset: int
    _shape: tuple[int, ...] | None
    _stream: Stream | None
    _stream_int: int | None
    _sync_h: Any
    _views: weakref.WeakSet[DeviceBuffer] | None

    def __init__(
        self,
        nbytes: int,
        *,
        stream: StreamLike = None,
        context: Context | None = None,
    ) -> None:
        n = _nbytes_arg(nbytes)
        ctx = _context_arg(context)
        st = None if stream is None else _as_stream(stream)
        if st is not None and ctx is not None:
            sctx = st._context
            if sctx is not None and sctx._key != ctx._key:
                raise ValueError("stream belongs to another context than the one given")
        if ctx is None and st is None:
            ctx = current_or_default()  # current already: nothing to push
            pushed = False
        else:
            if ctx is None:
                assert st is not None
                ctx = st.context
            pushed = _enter(ctx)
        try:
            if st is None:
                r = _cuMemAlloc(n)
                name = "cuMemAlloc"
            else:
                r = _cuMemAllocAsync(n, st._h)
                name = "cuMemAllocAsync"
        finally:
            if pushed:
                _cuCtxPopCurrent()
        if r[0] is not SUCCESS:
            raise make_error(r[0], name)
        self._set_fields(n, ctx, st, None, None, None, 0)
        if st is None:
            self._init_handle(r[1], release=_free_sync(ctx.handle), func="cuMemFree", keep=(ctx,))
        else:
            self._init_handle(
                r[1],
                release=_free_async(ctx.handle, st),
                func="cuMemFreeAsync",
                keep=(st, ctx),
            )

    def _set_fields(
        self,
        n: int,
        ctx: Context | None,
        st: Stream | None,
        dtype: np.dtype[Any] | None,
        shape: tuple[int, ...] | None,
        base: DeviceBuffer | None,
        offset: int,
    ) -> None:
        self._nbytes = n
        self._context = ctx
        self._stream = st
        self._stream_int = None if st is None else _cai_stream_value(st._h)
        self._sync_h = _LEGACY if st is None else st._h
        self._dtype = dtype
        self._shape = shape
        self._base = base
        self._offset = offset
        self._views = None

    # -- constructors -------------------------------------------------------------------
    @classmethod
    def from_array(
        cls,
        array: npt.ArrayLike,
        stream: StreamLike = None,
        *,
        context: Context | None = None,
    ) -> DeviceBuffer:
        """Allocate a buffer holding a copy of a host array; it remembers dtype and shape.

        Allocates (``cuMemAlloc``, or ``cuMemAllocAsync`` on ``stream``) and copies
        (``cuMemcpyHtoDAsync``). Without ``stream`` the copy has completed on return;
        with one, the buffer is stream-ordered on it and the copy is only enqueued.

        Raises
        ------
        ValueError
            The array is empty or not C-contiguous.
        TypeError
            The array holds Python objects, or is a device array (use
            :meth:`copy_from` on a new buffer).
        """
        if isinstance(array, DeviceBuffer) or hasattr(array, "__cuda_array_interface__"):
            raise TypeError(
                "from_array takes a host array; for device memory use DeviceBuffer(n).copy_from(x)"
            )
        a = array if isinstance(array, np.ndarray) else np.asarray(array)
        _ndarray_address(a, False, "array")
        if a.nbytes == 0:
            raise ValueError(f"array of shape {a.shape} is empty: a buffer needs >= 1 byte")
        buf = cls(a.nbytes, stream=stream, context=context)
        buf._dtype = a.dtype
        buf._shape = a.shape
        try:
            buf.copy_from(a, stream=stream)
        except BaseException:
            buf.close()
            raise
        return buf

    @classmethod
    def empty(
        cls,
        shape: int | tuple[int, ...],
        dtype: npt.DTypeLike = np.uint8,
        *,
        stream: StreamLike = None,
        context: Context | None = None,
    ) -> DeviceBuffer:
        """Allocate an uninitialised buffer for ``shape`` elements of ``dtype``.

        Like the constructor (``cuMemAlloc`` / ``cuMemAllocAsync``); the buffer
        remembers dtype and shape.
        """
        shp = _shape_arg(shape)
        dt = _dtype_arg(dtype)
        buf = cls(_nbytes_of(shp, dt), stream=stream, context=context)
        buf._dtype = dt
        buf._shape = shp
        return buf

    @classmethod
    def from_handle(
        cls,
        ptr: Any,
        nbytes: int,
        owner: Any = None,
        *,
        context: Context | None = None,
    ) -> DeviceBuffer:
        """Wrap device memory owned elsewhere, without freeing it.

        Parameters
        ----------
        ptr
            The device address: an int or a ``CUdeviceptr``.
        nbytes
            The size of the memory in bytes.
        owner
            Kept alive as long as the returned buffer (and its views).
        context
            The memory's context; default: looked up on first use
            (``cuPointerGetAttribute``), else the current context. Makes no driver
            call here.
        """
        h = ptr if isinstance(ptr, _drv.CUdeviceptr) else _drv.CUdeviceptr(_int_arg(ptr, "ptr"))
        if int(h) == 0:
            raise ValueError("cannot wrap a NULL device pointer")
        n = _nbytes_arg(nbytes)
        ctx = _context_arg(context)
        self = object.__new__(cls)
        self._set_fields(n, ctx, None, None, None, None, 0)
        self._init_handle(h, release=None, func="cuMemFree", owned=False, owner=owner)
        return self

    # -- properties -----------------------------------------------------------------
    @property
    def ptr(self) -> int:
        """The device address as an int."""
        if self._h is None:
            self._raise_closed()
        return self._key

    @property
    def nbytes(self) -> int:
        """The size in bytes."""
        return self._nbytes

    @property
    def dtype(self) -> np.dtype[Any]:
        """The remembered dtype; ``uint8`` for a buffer of bytes."""
        return self._dtype if self._dtype is not None else _U8

    @property
    def shape(self) -> tuple[int, ...]:
        """The remembered shape; ``(nbytes,)`` for a buffer of bytes."""
        return self._shape if self._shape is not None else (self._nbytes,)

    @property
    def stream(self) -> Stream | None:
        """The stream of a stream-ordered buffer (its parent's, for a view), else None."""
        return self._stream

    @property
    def base(self) -> DeviceBuffer | None:
        """The buffer a view was made from (the root allocation), else None."""
        return self._base

    @property
    def offset(self) -> int:
        """A view's byte offset into :attr:`base`; 0 for other buffers."""
        return self._offset

    @property
    def context(self) -> Context:
        """The context of the memory."""
        ctx = self._context
        if ctx is None:
            ctx = self._resolve_context()
        return ctx

    def _resolve_context(self) -> Context:
        init()
        r = _drv.cuPointerGetAttribute(_PTR_ATTR_CONTEXT, self.handle)
        if r[0] is SUCCESS and r[1] is not None and int(r[1]) != 0:
            ctx = Context.from_handle(r[1])
        else:  # e.g. memory from a pool reports no context
            ctx = current_or_default()
        self._context = ctx
        return ctx

    # -- views --------------------------------------------------------------------------
    def view(self, offset: int = 0, nbytes: int | None = None) -> DeviceBuffer:
        """A byte range of this buffer as a new :class:`DeviceBuffer` (no driver call).

        The view keeps the allocation alive and never frees it. When the allocation
        is closed, its views are closed too (using them raises
        :class:`~cudriver.ClosedError`). The view has no dtype (bytes).

        Parameters
        ----------
        offset
            Byte offset from the start of this buffer, ``0 <= offset < nbytes``.
        nbytes
            Length in bytes; default: up to the end of this buffer.
        """
        if self._h is None:
            self._raise_closed()
        off = _int_arg(offset, "offset")
        if not 0 <= off < self._nbytes:
            raise ValueError(f"offset {off} is outside a buffer of {self._nbytes} bytes")
        n = self._nbytes - off if nbytes is None else _nbytes_arg(nbytes)
        if off + n > self._nbytes:
            raise ValueError(
                f"a view of {n} bytes at offset {off} exceeds the buffer's {self._nbytes} bytes"
            )
        return self._make_view(off, n, None, None)

    def __getitem__(self, key: object) -> DeviceBuffer:
        """``buf[a:b]``: a byte view (see :meth:`view`); only step 1 is supported."""
        if self._h is None:
            self._raise_closed()
        if not isinstance(key, slice):
            raise TypeError(
                f"DeviceBuffer indices must be byte slices like buf[16:32], not "
                f"{type(key).__name__}"
            )
        start, stop, step = key.indices(self._nbytes)
        if step != 1:
            raise ValueError(f"DeviceBuffer slices take step 1 only, not {step}")
        if stop <= start:
            raise ValueError(f"slice {key} of a {self._nbytes}-byte buffer is empty")
        return self._make_view(start, stop - start, None, None)

    def cast(
        self, dtype: npt.DTypeLike, shape: int | tuple[int, ...] | None = None
    ) -> DeviceBuffer:
        """A view of the whole buffer that remembers ``dtype`` and ``shape`` (no driver call).

        ``shape`` defaults to ``(nbytes // itemsize,)``; its size times the item size
        must equal :attr:`nbytes`. Used by :meth:`copy_to` and
        ``__cuda_array_interface__``.
        """
        if self._h is None:
            self._raise_closed()
        dt = _dtype_arg(dtype)
        if shape is None:
            if self._nbytes % dt.itemsize:
                raise ValueError(
                    f"{self._nbytes} bytes is not a whole number of {dt} items "
                    f"({dt.itemsize} bytes each)"
                )
            shp: tuple[int, ...] = (self._nbytes // dt.itemsize,)
        else:
            shp = _shape_arg(shape)
            if math.prod(shp) * dt.itemsize != self._nbytes:
                raise ValueError(
                    f"shape {shp} of {dt} needs {math.prod(shp) * dt.itemsize} bytes, "
                    f"the buffer has {self._nbytes}"
                )
        return self._make_view(0, self._nbytes, dt, shp)

    def _make_view(
        self,
        off: int,
        n: int,
        dtype: np.dtype[Any] | None,
        shape: tuple[int, ...] | None,
    ) -> DeviceBuffer:
        root = self._base if self._base is not None else self
        v = object.__new__(DeviceBuffer)
        v._set_fields(n, self._context, self._stream, dtype, shape, root, self._offset + off)
        v._stream_int = self._stream_int
        v._sync_h = self._sync_h
        v._init_handle(
            _drv.CUdeviceptr(self._key + off),
            release=None,
            func="cuMemFree",
            owned=False,
            owner=root,
        )
        views = root._views
        if views is None:
            views = root._views = weakref.WeakSet()
        views.add(v)
        return v

    def close(self) -> None:
        """Free the memory now (``cuMemFree``, or ``cuMemFreeAsync`` on the buffer's stream).

        Idempotent. Views of the buffer are closed too. Closing a view or a
        :meth:`from_handle` buffer frees nothing.
        """
        if self._h is None:
            return
        views = self._views
        if views is not None:
            self._views = None
            for v in list(views):
                v.close()
        super().close()

    # -- copies ---------------------------------------------------------------------------
    def _queue(self, stream: StreamLike) -> tuple[Any, Any]:
        """``(stream handle or None, the stream to enqueue on)``."""
        if stream is None:
            st = self._stream
            if st is not None and st._h is None:
                raise ClosedError("the stream of this stream-ordered DeviceBuffer is closed")
            return None, self._sync_h
        sh = _stream_arg(stream)
        return sh, sh

    def copy_from(self, src: Any, *, stream: StreamLike = None) -> None:
        """Copy ``src`` into this buffer; sizes must match exactly.

        Parameters
        ----------
        src
            A C-contiguous numpy array, a bytes-like object, a
            :class:`PinnedBuffer` (host to device), or a :class:`DeviceBuffer` or
            ``__cuda_array_interface__`` object (device to device). Bytes are copied
            as they are: dtypes are not converted.
        stream
            Enqueue on this stream (``cuMemcpyHtoDAsync`` / ``cuMemcpyDtoDAsync``)
            and return at once. Without it, the copy runs on the buffer's stream (the
            legacy default stream for buffers made without one) and has completed on
            return (``cuStreamSynchronize``). Host memory that is not pinned is staged
            by the driver, so it may be reused as soon as the call returns.

        Raises
        ------
        ValueError
            Sizes differ, or ``src`` is not contiguous.
        TypeError
            ``src`` is of an unsupported type.
        ClosedError
            This buffer or ``src`` is closed.
        """
        dst = self._h
        if dst is None:
            self._raise_closed()
        on_dev, addr, n, keep, other = _operand(src, writable=False, role="src")
        if n != self._nbytes:
            raise ValueError(
                f"size mismatch: src has {n} bytes, this DeviceBuffer has {self._nbytes}"
            )
        if on_dev:
            self._transfer(
                _cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync", dst, addr, n, stream, other, keep
            )
        else:
            self._transfer(
                _cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync", dst, addr, n, stream, other, keep
            )

    def _transfer(
        self,
        copy: Any,
        name: str,
        dst: Any,
        src: Any,
        n: int,
        stream: StreamLike,
        other: int | None,
        keep: Any,
    ) -> None:
        """Run one ``cuMemcpy*Async`` in this buffer's context, ordered and kept alive.

        Without ``stream`` the copy runs on the buffer's own queue and has completed on
        return (``cuStreamSynchronize``); with one it is only enqueued, and the operands
        are kept alive with a capture in progress.
        """
        sh, q = self._queue(stream)
        ctx = self._context
        if ctx is None:
            ctx = self._resolve_context()
        pushed = _enter(ctx)
        try:
            if other is not None:
                _order_after(q, other)
            r = copy(dst, src, n, q)
            if r[0] is not SUCCESS:
                raise make_error(r[0], name)
            if sh is None:
                r = _cuStreamSynchronize(q)
                if r[0] is not SUCCESS:
                    raise make_error(r[0], "cuStreamSynchronize")
            else:
                _capture.keep(q, keep, self)
        finally:
            if pushed:
                _cuCtxPopCurrent()

    @overload
    def copy_to(self, out: None = None, *, stream: StreamLike = None) -> npt.NDArray[Any]: ...

    @overload
    def copy_to(self, out: _T, *, stream: StreamLike = None) -> _T: ...

    def copy_to(self, out: Any = None, *, stream: StreamLike = None) -> Any:
        """Copy this buffer into ``out`` (a new numpy array when None) and return ``out``.

        Parameters
        ----------
        out
            None: a new array of the remembered dtype and shape (``uint8`` of
            ``nbytes`` for a buffer of bytes). Else a writable C-contiguous numpy
            array, a writable bytes-like object, a :class:`PinnedBuffer` (device to
            host), or a :class:`DeviceBuffer` or ``__cuda_array_interface__`` object
            (device to device); its size must equal :attr:`nbytes`.
        stream
            Enqueue on this stream (``cuMemcpyDtoHAsync`` / ``cuMemcpyDtoDAsync``)
            and return at once: the data is in ``out`` once the stream reaches the
            copy, and ``out`` must stay alive until then. Without it, the copy runs
            on the buffer's stream and has completed on return
            (``cuStreamSynchronize``).

        Raises
        ------
        ValueError
            Sizes differ, ``out`` is read-only or not contiguous.
        TypeError
            ``out`` is of an unsupported type.
        ClosedError
            This buffer or ``out`` is closed.
        """
        src = self._h
        if src is None:
            self._raise_closed()
        if out is None:
            result: Any = np.empty(self.shape, dtype=self.dtype)
            on_dev, addr, n, keep, other = (
                False,
                int(result.__array_interface__["data"][0]),
                self._nbytes,
                result,
                None,
            )
        else:
            result = out
            on_dev, addr, n, keep, other = _operand(out, writable=True, role="out")
            if n != self._nbytes:
                raise ValueError(
                    f"size mismatch: out has {n} bytes, this DeviceBuffer has {self._nbytes}"
                )
        if on_dev:
            self._transfer(
                _cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync", addr, src, n, stream, other, keep
            )
        else:
            self._transfer(
                _cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync", addr, src, n, stream, other, keep
            )
        return result

    def fill(
        self, value: int | np.generic, *, stream: StreamLike = None, width: int | None = None
    ) -> None:
        """Set every element of the buffer to ``value``.

        Parameters
        ----------
        value
            An int: a byte (0..255) with ``cuMemsetD8Async``, or with ``width=2``/``4``
            a 16/32-bit unsigned value (``cuMemsetD16Async`` / ``cuMemsetD32Async``).
            A numpy scalar of 1, 2 or 4 bytes fills with its bit pattern at its own
            width, e.g. ``np.uint16(7)`` or ``np.float32(1.0)``.
        stream
            Enqueue on this stream and return at once. Without it, the fill runs on
            the buffer's stream and has completed on return (``cuStreamSynchronize``).
        width
            1, 2 or 4 bytes; ``nbytes`` must be a multiple of it and the address
            aligned to it.

        Raises
        ------
        ValueError
            The value does not fit the width, or the size or address does not suit it.
        TypeError
            The value is not an int or numpy scalar (floats: pass ``np.float32(x)``).
        """
        dst = self._h
        if dst is None:
            self._raise_closed()
        w, v = _fill_args(value, width)
        if self._nbytes % w:
            raise ValueError(f"{self._nbytes} bytes is not a multiple of the fill width {w}")
        if self._key % w:
            raise ValueError(f"address {self._key:#x} is not aligned to the fill width {w}")
        fn, name = _MEMSET[w]
        sh, q = self._queue(stream)
        ctx = self._context
        if ctx is None:
            ctx = self._resolve_context()
        pushed = _enter(ctx)
        try:
            r = fn(dst, v, self._nbytes // w, q)
            if r[0] is not SUCCESS:
                raise make_error(r[0], name)
            if sh is None:
                r = _cuStreamSynchronize(q)
                if r[0] is not SUCCESS:
                    raise make_error(r[0], "cuStreamSynchronize")
            else:
                _capture.keep(q, self)
        finally:
            if pushed:
                _cuCtxPopCurrent()

    # -- interoperability --------------------------------------------------------------------
    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        """The CUDA Array Interface (version 3) of this buffer.

        ``shape`` and ``typestr`` come from the remembered dtype (else ``(nbytes,)``
        and ``"|u1"``); ``stream`` is the buffer's stream handle for stream-ordered
        buffers (consumers synchronise with it), else None.
        """
        if self._h is None:
            self._raise_closed()
        dt = self.dtype
        d: dict[str, Any] = {
            "version": 3,
            "shape": self.shape,
            "typestr": dt.str,
            "data": (self._key, False),
            "strides": None,
            "stream": self._stream_int,
        }
        if dt.fields is not None:
            d["descr"] = dt.descr
        return d

    def _repr_extra(self) -> str:
        parts = [f"nbytes={self._nbytes}"]
        if self._dtype is not None:
            parts.append(f"dtype={self._dtype} shape={self._shape}")
        if self._base is not None:
            parts.append(f"view+{self._offset}")
        if self._stream is not None:
            parts.append("stream-ordered")
        return " ".join(parts)


# -- PinnedBuffer ------------------------------------------------------------------------------
class _PinnedExport:
    """The numpy ``base`` of arrays and device views made from a PinnedBuffer.

    While one exists, the pinned memory is not freed, even after ``close()``.
    """

    __slots__ = ("__weakref__", "buffer", "nbytes", "ptr")

    def __init__(self, buffer: PinnedBuffer) -> None:
        self.buffer = buffer
        self.ptr = buffer._key
        self.nbytes = buffer._nbytes

    @property
    def __array_interface__(self) -> dict[str, Any]:
        return {
            "version": 3,
            "shape": (self.nbytes,),
            "typestr": "|u1",
            "data": (self.ptr, False),
            "strides": None,
        }


class PinnedBuffer(Handle):
    """Page-locked host memory (``cuMemHostAlloc``; ``cuMemFreeHost`` on close).

    Copies between pinned memory and the device run at full speed and, on a stream,
    truly asynchronously. Use it as ``src``/``out`` of :class:`DeviceBuffer`
    copies, or through numpy with :meth:`array`.

    Parameters
    ----------
    nbytes
        Size in bytes; must be positive.
    mapped
        Map the memory into the device address space (``CU_MEMHOSTALLOC_DEVICEMAP``),
        so kernels and device copies can read it at :attr:`device_ptr`.
    portable
        Pinned for every context, not only the allocating one
        (``CU_MEMHOSTALLOC_PORTABLE``).
    write_combined
        Write-combined memory (``CU_MEMHOSTALLOC_WRITECOMBINED``): faster to
        transfer to the device, very slow to read from the host.
    context
        The context to allocate in; default: the current context (else device 0's
        primary context). The buffer keeps it alive.

    Notes
    -----
    numpy arrays from :meth:`array` (and views from :meth:`device_buffer`) keep the
    memory alive: :meth:`close` makes the buffer itself unusable at once, and the
    memory is freed when the last such array or view is gone.
    """

    __slots__ = ("_context", "_device_ptr", "_export", "_flags", "_nbytes")

    _kind = "PinnedBuffer"

    _context: Context
    _device_ptr: int | None
    _export: weakref.ref[_PinnedExport] | None
    _flags: int
    _nbytes: int

    def __init__(
        self,
        nbytes: int,
        *,
        mapped: bool = True,
        portable: bool = True,
        write_combined: bool = False,
        context: Context | None = None,
    ) -> None:
        n = _nbytes_arg(nbytes)
        ctx = _context_arg(context)
        flags = 0
        if mapped:
            flags |= _HOSTALLOC_DEVICEMAP
        if portable:
            flags |= _HOSTALLOC_PORTABLE
        if write_combined:
            flags |= _HOSTALLOC_WRITECOMBINED
        if ctx is None:
            ctx = current_or_default()
        with ctx._scope():
            r = _drv.cuMemHostAlloc(n, flags)
        if r[0] is not SUCCESS:
            raise make_error(r[0], "cuMemHostAlloc")
        self._context = ctx
        self._nbytes = n
        self._flags = flags
        self._device_ptr = None
        self._export = None
        self._init_handle(
            int(r[1]), release=_free_host(ctx.handle), func="cuMemFreeHost", keep=(ctx,)
        )

    @property
    def ptr(self) -> int:
        """The host address as an int."""
        if self._h is None:
            self._raise_closed()
        return self._key

    @property
    def nbytes(self) -> int:
        """The size in bytes."""
        return self._nbytes

    @property
    def mapped(self) -> bool:
        """Whether the memory is mapped into the device address space."""
        return bool(self._flags & _HOSTALLOC_DEVICEMAP)

    @property
    def portable(self) -> bool:
        """Whether the memory is pinned for every context."""
        return bool(self._flags & _HOSTALLOC_PORTABLE)

    @property
    def context(self) -> Context:
        """The context the memory was allocated in."""
        return self._context

    @property
    def device_ptr(self) -> int:
        """The device address of mapped memory (``cuMemHostGetDevicePointer``, cached).

        Raises
        ------
        ValueError
            The buffer was allocated with ``mapped=False``.
        """
        if self._h is None:
            self._raise_closed()
        if not self._flags & _HOSTALLOC_DEVICEMAP:
            raise ValueError(
                "this PinnedBuffer is not mapped (mapped=False): it has no device pointer"
            )
        dp = self._device_ptr
        if dp is None:
            with self._context._scope():
                r = _drv.cuMemHostGetDevicePointer(self._key, 0)
            if r[0] is not SUCCESS:
                raise make_error(r[0], "cuMemHostGetDevicePointer")
            dp = self._device_ptr = int(r[1])
        return dp

    def _holder(self) -> _PinnedExport:
        ref = self._export
        holder = ref() if ref is not None else None
        if holder is None:
            holder = _PinnedExport(self)
            self._export = weakref.ref(holder)
        return holder

    def array(
        self, dtype: npt.DTypeLike = np.uint8, shape: int | tuple[int, ...] | None = None
    ) -> npt.NDArray[Any]:
        """A numpy array onto the pinned memory (no copy, no driver call).

        The array keeps the memory alive, also after the buffer is dropped or closed.
        ``shape`` defaults to ``(nbytes // itemsize,)``; otherwise its size times the
        item size must equal :attr:`nbytes`.
        """
        if self._h is None:
            self._raise_closed()
        dt = _dtype_arg(dtype)
        n = self._nbytes
        if shape is None:
            if n % dt.itemsize:
                raise ValueError(
                    f"{n} bytes is not a whole number of {dt} items ({dt.itemsize} bytes each)"
                )
            shp: tuple[int, ...] = (n // dt.itemsize,)
        else:
            shp = _shape_arg(shape)
            if math.prod(shp) * dt.itemsize != n:
                raise ValueError(
                    f"shape {shp} of {dt} needs {math.prod(shp) * dt.itemsize} bytes, "
                    f"the buffer has {n}"
                )
        raw: npt.NDArray[Any] = np.asarray(self._holder())
        if dt != _U8:
            raw = raw.view(dt)
        return raw.reshape(shp)

    def device_buffer(self) -> DeviceBuffer:
        """A :class:`DeviceBuffer` over the mapped memory (at :attr:`device_ptr`).

        Like :meth:`array`, it keeps the memory alive; it never frees. Device copies
        from or to it read or write the host memory through the bus.
        """
        dp = self.device_ptr
        return DeviceBuffer.from_handle(dp, self._nbytes, self._holder(), context=self._context)

    def close(self) -> None:
        """Make the buffer unusable and free the memory (``cuMemFreeHost``); idempotent.

        While arrays from :meth:`array` or views from :meth:`device_buffer` are alive,
        the memory is freed only when the last of them is gone.
        """
        if self._h is None:
            return
        ref = self._export
        holder = ref() if ref is not None else None
        if holder is None:
            super().close()
            return
        self._h = None
        fin = weakref.finalize(holder, self._finalizer)
        fin.atexit = False  # no driver calls at interpreter exit

    def __array__(
        self, dtype: npt.DTypeLike | None = None, copy: bool | None = None
    ) -> npt.NDArray[Any]:
        a = self.array()
        if dtype is not None and np.dtype(dtype) != a.dtype:
            if copy is False:
                raise ValueError("converting a PinnedBuffer to another dtype needs a copy")
            return a.astype(dtype)
        return a.copy() if copy else a

    def __buffer__(self, flags: int) -> memoryview:
        """The buffer protocol (Python 3.12+): a writable view of the bytes."""
        arr: Any = self.array()
        return memoryview(arr)

    def _repr_extra(self) -> str:
        parts = [f"nbytes={self._nbytes}"]
        if self.mapped:
            parts.append("mapped")
        if self.portable:
            parts.append("portable")
        return " ".join(parts)
