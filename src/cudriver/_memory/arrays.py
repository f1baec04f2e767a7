"""CUDA arrays: :class:`CudaArray`, the opaque memory that textures and surfaces read.

A CUDA array (``CUarray``) is device memory in a layout the driver chooses (tiled for
2D and 3D locality), made by ``cuArray3DCreate`` and read by kernels only through a
:class:`~cudriver.TextureObject` or :class:`~cudriver.SurfaceObject`. It has no device
address: data moves in and out with ``cuMemcpy3DAsync`` (``CU_MEMORYTYPE_ARRAY`` on
the array's side), from and to host arrays, pinned buffers and device buffers.

Shapes are given in numpy order, outermost first, without the channels: ``(w,)``,
``(h, w)``, ``(d, h, w)``; a layered array puts its layers first, ``(layers, w)`` or
``(layers, h, w)``. A host array of a ``channels``-channel CUDA array has one more
axis, of ``channels`` entries, last. The pure parts (the format of a dtype, the
descriptor, the extent of a copy) are functions of this module, tested without a GPU.
"""

from __future__ import annotations

import enum
import functools
import math
from typing import Any, NamedTuple, TypeVar, overload

import numpy as np
import numpy.typing as npt
from cuda.bindings import driver as _drv

from .._context.device import Context, Device, call_in_context, context_arg, current_or_default
from .._lifetime._coerce import (
    DeviceMemory,
    StreamLike,
    bool_arg,
    dtype_arg,
    handle_arg,
    int_arg,
    shape_arg,
)
from .._lifetime._handle import Handle, reclaiming
from .._runtime import _calls, _hooks
from . import accounting as _account
from ._copy import Operand, memory_side, ndarray_address, operand, run_copy

__all__ = [
    "ArrayFormat",
    "CudaArray",
    "array_format",
    "array_descriptor",
    "array_extent",
    "ArrayExtent",
    "shape_of_descriptor",
]

_T = TypeVar("_T")


class ArrayFormat(enum.IntEnum):
    """The element format of a CUDA array (``CUarray_format``, the driver's values).

    Made from a numpy dtype (``array_format``): uint8, int8, uint16, int16, uint32,
    int32, float16 and float32. The packed, planar and block-compressed video formats
    are not offered: make those arrays with ``cudriver.driver.cuArray3DCreate``.
    """

    UNSIGNED_INT8 = 0x01
    UNSIGNED_INT16 = 0x02
    UNSIGNED_INT32 = 0x03
    SIGNED_INT8 = 0x08
    SIGNED_INT16 = 0x09
    SIGNED_INT32 = 0x0A
    HALF = 0x10
    FLOAT = 0x20


_FROM_NUMPY: dict[np.dtype[Any], ArrayFormat] = {
    np.dtype(np.uint8): ArrayFormat.UNSIGNED_INT8,
    np.dtype(np.int8): ArrayFormat.SIGNED_INT8,
    np.dtype(np.uint16): ArrayFormat.UNSIGNED_INT16,
    np.dtype(np.int16): ArrayFormat.SIGNED_INT16,
    np.dtype(np.uint32): ArrayFormat.UNSIGNED_INT32,
    np.dtype(np.int32): ArrayFormat.SIGNED_INT32,
    np.dtype(np.float16): ArrayFormat.HALF,
    np.dtype(np.float32): ArrayFormat.FLOAT,
}

#: The channel counts a CUDA array element may have.
CHANNELS = (1, 2, 4)

_LAYERED = int(_drv.CUDA_ARRAY3D_LAYERED)
_SURFACE_LDST = int(_drv.CUDA_ARRAY3D_SURFACE_LDST)
_TEXTURE_GATHER = int(_drv.CUDA_ARRAY3D_TEXTURE_GATHER)
_MT_ARRAY = _drv.CUmemorytype.CU_MEMORYTYPE_ARRAY


def array_format(dtype: npt.DTypeLike) -> ArrayFormat:
    """The :class:`ArrayFormat` of a numpy dtype; ``TypeError`` for a dtype without one.

    Pure: no driver call.
    """
    dt = dtype_arg(dtype)
    fmt = _FROM_NUMPY.get(dt)
    if fmt is None:
        names = ", ".join(str(d) for d in _FROM_NUMPY)
        raise TypeError(f"a CUDA array holds {names} elements, not {dt}")
    return fmt


def channels_arg(channels: object) -> int:
    """``channels`` checked: 1, 2 or 4 (the driver's ``NumChannels``)."""
    ch = int_arg(channels, "channels")
    if ch not in CHANNELS:
        raise ValueError(f"channels must be 1, 2 or 4, not {ch}")
    return ch


def _dims(shape: tuple[int, ...], layered: bool) -> tuple[int, int, int]:
    """``(Width, Height, Depth)`` as ``cuArray3DCreate`` takes them (0: no such extent)."""
    n = len(shape)
    if layered:
        if n not in (2, 3):
            raise ValueError(
                f"a layered CUDA array has shape (layers, w) or (layers, h, w), not {shape}"
            )
    elif n not in (1, 2, 3):
        raise ValueError(f"a CUDA array has shape (w,), (h, w) or (d, h, w), not {shape}")
    for i, d in enumerate(shape):
        if d < 1:
            raise ValueError(f"shape[{i}] = {d} in {shape}: every extent must be at least 1")
    w = shape[-1]
    if layered:
        return (w, 0, shape[0]) if n == 2 else (w, shape[1], shape[0])
    if n == 1:
        return (w, 0, 0)
    if n == 2:
        return (w, shape[0], 0)
    return (w, shape[1], shape[0])


def array_descriptor(
    shape: tuple[int, ...],
    dtype: npt.DTypeLike,
    channels: int = 1,
    *,
    layered: bool = False,
    surface: bool = False,
    texture_gather: bool = False,
) -> Any:
    """The ``CUDA_ARRAY3D_DESCRIPTOR`` of an array (numpy-order ``shape``); pure.

    Raises ``TypeError`` for a dtype without a format and ``ValueError`` for a shape,
    a channel count or flags the driver refuses (``texture_gather`` is for 2D arrays).
    """
    fmt = array_format(dtype)
    ch = channels_arg(channels)
    width, height, depth = _dims(shape, layered)
    if texture_gather and (layered or len(shape) != 2):
        raise ValueError(f"texture_gather needs a 2D array that is not layered; shape {shape}")
    flags = 0
    if layered:
        flags |= _LAYERED
    if surface:
        flags |= _SURFACE_LDST
    if texture_gather:
        flags |= _TEXTURE_GATHER
    d = _drv.CUDA_ARRAY3D_DESCRIPTOR()
    d.Width, d.Height, d.Depth = width, height, depth
    d.Format = _drv.CUarray_format(int(fmt))
    d.NumChannels = ch
    d.Flags = flags
    return d


def shape_of_descriptor(desc: Any) -> tuple[tuple[int, ...], np.dtype[Any], int, int]:
    """``(shape, dtype, channels, flags)`` of a ``CUDA_ARRAY3D_DESCRIPTOR``; pure.

    The inverse of :func:`array_descriptor`. ``TypeError`` for a format without a
    numpy dtype (the video and block-compressed formats).
    """
    try:
        fmt = ArrayFormat(int(desc.Format))
    except ValueError:
        raise TypeError(
            f"the array's format {desc.Format!r} has no numpy dtype: wrap it with the raw "
            "driver calls"
        ) from None
    dtype = next(dt for dt, f in _FROM_NUMPY.items() if f is fmt)
    w, h, d, flags = int(desc.Width), int(desc.Height), int(desc.Depth), int(desc.Flags)
    if flags & _LAYERED:
        shape: tuple[int, ...] = (d, w) if h == 0 else (d, h, w)
    elif h == 0:
        shape = (w,)
    elif d == 0:
        shape = (h, w)
    else:
        shape = (d, h, w)
    return shape, dtype, int(desc.NumChannels), flags


class ArrayExtent(NamedTuple):
    """What a copy of a whole array moves: ``CUDA_MEMCPY3D``'s three extents."""

    #: A row, in bytes: width x channels x item size (also the packed pitch).
    width_bytes: int
    #: Rows per slice (1 for 1D arrays and 1D layers).
    height: int
    #: Slices: the depth of a 3D array, the layers of a layered one, else 1.
    depth: int


def array_extent(
    shape: tuple[int, ...], itemsize: int, channels: int, layered: bool
) -> ArrayExtent:
    """The extent of a copy of a whole array (a 1D layered array: rows of 1, layers as depth)."""
    width, height, depth = _dims(shape, layered)
    return ArrayExtent(width * channels * itemsize, max(height, 1), max(depth, 1))


def _host_shape(shape: tuple[int, ...], channels: int) -> tuple[int, ...]:
    return shape if channels == 1 else (*shape, channels)


def _destroy(ctx_h: Any) -> Any:
    """The release of an array: ``cuArrayDestroy`` with its context current.

    Marked as one that may wait for the device (as ``cuMemFree`` does): it runs on the
    releasing thread, never beside an open capture.
    """
    release: Any = functools.partial(call_in_context, ctx_h, _drv.cuArrayDestroy)
    release.waits_for_device = True
    return release


class CudaArray(Handle):
    """A CUDA array (``cuArray3DCreate``; ``cuArrayDestroy`` on close).

    Memory for textures and surfaces, in a layout of the driver's: a kernel reads it
    through a :class:`TextureObject` (filtered, with address modes) or reads and
    writes it through a :class:`SurfaceObject`; the host fills and reads it with
    :meth:`copy_from` and :meth:`copy_to`. Allocates device memory; does not
    synchronise.

    Parameters
    ----------
    shape
        The extents in elements, numpy order, without the channels: ``(w,)`` (1D),
        ``(h, w)`` (2D), ``(d, h, w)`` (3D); with ``layered=True``, ``(layers, w)`` or
        ``(layers, h, w)``. The device's texture limits apply (the driver checks).
    dtype
        The element type of each channel: uint8, int8, uint16, int16, uint32, int32,
        float16 or float32 (its :class:`ArrayFormat`).
    channels
        1, 2 or 4 channels per element (``float2``, ``uchar4``, ... in a kernel). Host
        arrays copied in or out have a last axis of ``channels`` entries when it is
        more than 1.
    layered
        A layered array (``CUDA_ARRAY3D_LAYERED``): a stack of 1D or 2D layers, read
        with ``tex1DLayered``/``tex2DLayered``; filtering never crosses layers.
    surface
        Allow surface loads and stores (``CUDA_ARRAY3D_SURFACE_LDST``): needed for a
        :class:`SurfaceObject`.
    texture_gather
        Allow ``tex2Dgather`` (``CUDA_ARRAY3D_TEXTURE_GATHER``); 2D arrays only.
    context
        The context to allocate in; default: the current context (else device 0's
        primary context). The array keeps it alive.

    Raises
    ------
    TypeError
        A dtype without a format, or an argument of the wrong type.
    ValueError
        A shape of the wrong rank or with an empty extent, channels other than 1, 2
        or 4, or ``texture_gather`` on an array that is not 2D.

    Notes
    -----
    Texture and surface objects made from the array keep it alive (a lease): after
    :meth:`close` the array is unusable at once, and its memory is freed once the last
    of them is released. Releasing the array (``cuArrayDestroy``) may wait for the
    device, as ``cuMemFree`` does: it runs on cudriver's releasing thread.
    """

    __slots__ = ("_channels", "_context", "_dtype", "_flags", "_format", "_shape")

    _kind = "CudaArray"

    _channels: int
    _context: Context
    _dtype: np.dtype[Any]
    _flags: int
    _format: ArrayFormat
    _shape: tuple[int, ...]

    def __init__(
        self,
        shape: int | tuple[int, ...],
        dtype: npt.DTypeLike,
        *,
        channels: int = 1,
        layered: bool = False,
        surface: bool = False,
        texture_gather: bool = False,
        context: Context | None = None,
    ) -> None:
        shp = shape_arg(shape)
        dt = dtype_arg(dtype)
        ch = channels_arg(channels)
        layered = bool_arg(layered, "layered")
        surface = bool_arg(surface, "surface")
        texture_gather = bool_arg(texture_gather, "texture_gather")
        desc = array_descriptor(
            shp, dt, ch, layered=layered, surface=surface, texture_gather=texture_gather
        )
        ctx = context_arg(context)
        if ctx is None:
            ctx = current_or_default()
        with ctx._scope():
            h = reclaiming(_calls.cuArray3DCreate, desc)
        self._shape = shp
        self._dtype = dt
        self._format = array_format(dt)
        self._channels = ch
        self._flags = int(desc.Flags)
        self._context = ctx
        self._init_handle(h, release=_destroy(ctx.handle), func="cuArrayDestroy", keep=(ctx,))
        if _account.ON:
            _account.track(
                self._state, self._key, self.nbytes, ctx.device.ordinal, "cuArray3DCreate"
            )
        if _hooks.MARKS:
            _hooks.mark("CudaArray", self.nbytes)

    @classmethod
    def from_handle(
        cls, handle: Any, owner: Any = None, *, context: Context | None = None
    ) -> CudaArray:
        """Wrap a CUDA array made elsewhere, without destroying it.

        Reads its shape, format, channels and flags (``cuArray3DGetDescriptor``, one
        driver call; no allocation, no synchronisation). ``owner`` is kept alive as long
        as the returned object; ``context`` is the array's context (default: the current
        one, else device 0's primary context).

        Raises
        ------
        TypeError
            ``handle`` is not a ``CUarray`` or an int, or the array's format has no
            numpy dtype.
        ValueError
            ``handle`` is NULL.
        """
        h = handle_arg(handle, _drv.CUarray, "CUDA array")
        ctx = context_arg(context)
        if ctx is None:
            ctx = current_or_default()
        with ctx._scope():
            desc = _calls.cuArray3DGetDescriptor(h)
        shape, dtype, channels, flags = shape_of_descriptor(desc)
        self = cls.__new__(cls)
        self._shape = shape
        self._dtype = dtype
        self._format = array_format(dtype)
        self._channels = channels
        self._flags = flags
        self._context = ctx
        self._init_handle(h, release=None, func="cuArrayDestroy", owned=False, owner=owner)
        return self

    @classmethod
    def from_array(
        cls,
        array: npt.ArrayLike,
        *,
        channels: int = 1,
        layered: bool = False,
        surface: bool = False,
        texture_gather: bool = False,
        stream: StreamLike = None,
        context: Context | None = None,
    ) -> CudaArray:
        """A new array holding a copy of a host array, of its dtype and shape.

        With ``channels`` above 1, the host array's last axis holds the channels (and
        must have that many entries). Allocates (``cuArray3DCreate``) and copies
        (``cuMemcpy3DAsync``): without ``stream`` the copy has completed on return;
        with one it is only enqueued (see :meth:`copy_from`).

        Raises
        ------
        TypeError
            ``array`` is device memory (make a ``CudaArray(shape, dtype)`` and
            :meth:`copy_from` it), holds Python objects or a dtype without a format.
        ValueError
            ``array`` is not C-contiguous, or its shape does not suit ``channels`` and
            ``layered``.
        """
        if isinstance(array, DeviceMemory) or hasattr(array, "__cuda_array_interface__"):
            raise TypeError(
                "CudaArray.from_array takes a host array; for device memory make a "
                "CudaArray(shape, dtype, channels=...) and copy_from() the buffer"
            )
        a = array if isinstance(array, np.ndarray) else np.asarray(array)
        ndarray_address(a, False, "array")
        ch = channels_arg(channels)
        shape = a.shape
        if ch > 1:
            if not shape or shape[-1] != ch:
                raise ValueError(
                    f"array of shape {shape} has no last axis of {ch} channels (channels={ch})"
                )
            shape = shape[:-1]
        arr = cls(
            shape,
            a.dtype,
            channels=ch,
            layered=layered,
            surface=surface,
            texture_gather=texture_gather,
            context=context,
        )
        try:
            arr.copy_from(a, stream=stream)
        except BaseException:
            arr.close()
            raise
        return arr

    # -- what it is -----------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        """The extents in elements, numpy order, without the channels (layers first)."""
        return self._shape

    @property
    def dtype(self) -> np.dtype[Any]:
        """The numpy dtype of each channel."""
        return self._dtype

    @property
    def channels(self) -> int:
        """The channels of each element (1, 2 or 4)."""
        return self._channels

    @property
    def format(self) -> ArrayFormat:
        """The driver's element format."""
        return self._format

    @property
    def layered(self) -> bool:
        """Whether the array is a stack of layers (``CUDA_ARRAY3D_LAYERED``)."""
        return bool(self._flags & _LAYERED)

    @property
    def surface(self) -> bool:
        """Whether surface objects can be made (``CUDA_ARRAY3D_SURFACE_LDST``)."""
        return bool(self._flags & _SURFACE_LDST)

    @property
    def texture_gather(self) -> bool:
        """Whether textures of it may gather (``CUDA_ARRAY3D_TEXTURE_GATHER``)."""
        return bool(self._flags & _TEXTURE_GATHER)

    @property
    def ndim(self) -> int:
        """How many dimensions a texture addresses (1, 2 or 3; a layered array's without layers)."""
        return len(self._shape) - (1 if self.layered else 0)

    @property
    def host_shape(self) -> tuple[int, ...]:
        """The shape of a host array holding the data (:attr:`shape`, plus the channels)."""
        return _host_shape(self._shape, self._channels)

    @property
    def nbytes(self) -> int:
        """The bytes of the data (not of the driver's layout, which may be larger)."""
        return math.prod(self._shape) * self._channels * self._dtype.itemsize

    @property
    def context(self) -> Context:
        """The context the array was allocated in."""
        return self._context

    @property
    def device(self) -> Device:
        """The device of :attr:`context`."""
        return self._context.device

    # -- copies ---------------------------------------------------------------------------
    def _operand(self, obj: Any, role: str) -> Operand:
        """``operand(obj)``, checked against this array's size, dtype and shape."""
        op = operand(obj, writable=role == "dst", role=role)
        what = self._describe()
        described: tuple[Any, Any] | None = None
        if isinstance(obj, np.ndarray):
            described = (obj.dtype, obj.shape)
        elif isinstance(obj, DeviceMemory) and getattr(obj, "_dtype", None) is not None:
            described = (getattr(obj, "_dtype", None), getattr(obj, "_shape", None))
        if described is not None:
            dt, shp = described
            if dt != self._dtype:
                raise ValueError(f"dtype mismatch: {role} holds {dt}, this CudaArray {what}")
            if shp != self.host_shape:
                raise ValueError(f"shape mismatch: {role} has shape {shp}, this CudaArray {what}")
        if op[2] != self.nbytes:
            raise ValueError(
                f"size mismatch: {role} has {op[2]} bytes, this CudaArray {what} "
                f"({self.nbytes} bytes)"
            )
        return op

    def _describe(self) -> str:
        return f"holds {self._dtype} of shape {self.host_shape}"

    def _copy(self, stream: StreamLike, obj: Any, op: Operand, to_array: bool) -> None:
        """``cuMemcpy3DAsync`` of the whole array between it and ``op``, in its context."""
        h = self._closed_check()
        ext = array_extent(self._shape, self._dtype.itemsize, self._channels, self.layered)
        p = _drv.CUDA_MEMCPY3D()
        mine, other = ("dst", "src") if to_array else ("src", "dst")
        memory_side(p, other, op[0], op[1], op[3])
        setattr(p, f"{other}Pitch", ext.width_bytes)
        setattr(p, f"{other}Height", ext.height)
        setattr(p, f"{mine}MemoryType", _MT_ARRAY)
        setattr(p, f"{mine}Array", h)
        p.WidthInBytes, p.Height, p.Depth = ext
        with self._context._scope():
            what = "CudaArray.copy_from" if to_array else "CudaArray.copy_to"
            run_copy(stream, (self, obj), _drv.cuMemcpy3DAsync, p, ops=(op,), what=what)

    def copy_from(self, src: Any, *, stream: StreamLike = None) -> None:
        """Copy all of ``src`` into the array (``cuMemcpy3DAsync``).

        Parameters
        ----------
        src
            A C-contiguous numpy array of :attr:`dtype` and :attr:`host_shape`, a
            bytes-like object or :class:`PinnedBuffer` (host to array), or a
            :class:`DeviceBuffer` or ``__cuda_array_interface__`` object (device to
            array), packed: rows of ``width x channels`` elements, one after another.
            Buffers without a dtype are checked by size only.
        stream
            Enqueue on this stream and return at once. Without it (None), the copy
            has completed on return: it runs on the legacy default stream (on a
            private stream while a capture begun through cudriver is open) and is
            waited for, which synchronises with that work. Either way the copy is
            ordered after the stream a device operand advertises (a stream-ordered
            buffer's, a CUDA Array Interface ``stream``). Host memory that is not
            pinned is staged by the driver, as for :meth:`DeviceBuffer.copy_from`.

        Raises
        ------
        ValueError
            ``src`` is of another dtype, shape or size (the message names both), or
            is not contiguous.
        TypeError
            ``src`` is of an unsupported type.
        ClosedError
            The array or ``src`` is closed.
        """
        self._closed_check()
        op = self._operand(src, "src")
        self._copy(stream, src, op, True)

    @overload
    def copy_to(self, dst: None = None, *, stream: StreamLike = None) -> npt.NDArray[Any]: ...

    @overload
    def copy_to(self, dst: _T, *, stream: StreamLike = None) -> _T: ...

    def copy_to(self, dst: Any = None, *, stream: StreamLike = None) -> Any:
        """Copy the array into ``dst`` (a new numpy array when None) and return ``dst``.

        ``cuMemcpy3DAsync``. ``dst``: None (a new array of :attr:`dtype` and
        :attr:`host_shape`), a writable C-contiguous numpy array of those, a writable
        bytes-like object or :class:`PinnedBuffer`, or a :class:`DeviceBuffer` or
        ``__cuda_array_interface__`` object (packed rows). Without ``stream`` the
        copy has completed on return (see :meth:`copy_from`); with one it is only
        enqueued, and ``dst`` holds the data once the stream reaches the copy.

        Raises
        ------
        ValueError
            ``dst`` is of another dtype, shape or size, read-only or not contiguous.
        TypeError
            ``dst`` is of an unsupported type.
        ClosedError
            The array or ``dst`` is closed.
        """
        self._closed_check()
        out: Any = np.empty(self.host_shape, self._dtype) if dst is None else dst
        op = self._operand(out, "dst")
        self._copy(stream, out, op, False)
        return out

    def _repr_extra(self) -> str:
        kind = f"{self._dtype}x{self._channels}" if self._channels > 1 else str(self._dtype)
        parts = [f"shape={self._shape}", kind]
        if self.layered:
            parts.append("layered")
        if self.surface:
            parts.append("surface")
        if self.texture_gather:
            parts.append("texture_gather")
        return " ".join(parts)
