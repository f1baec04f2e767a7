"""Texture and surface objects: :class:`TextureObject` and :class:`SurfaceObject`.

A texture object (``CUtexObject``, ``cuTexObjectCreate``) reads a :class:`CudaArray`
(or a device buffer, as linear or pitched 2D memory) through the texture unit: address
modes at the edges, point or linear filtering, integers read as they are or as
normalised floats, coordinates in texels or normalised to [0, 1). A surface object
(``CUsurfObject``, ``cuSurfObjectCreate``) reads and writes a CUDA array made with
``surface=True``. Both are 64-bit values that a kernel takes as a
``cudaTextureObject_t`` / ``cudaSurfaceObject_t`` parameter: pass the object to
``Kernel.launch``, ``Kernel.prepare`` or a graph kernel node (``_packing.pack_arg``'s
``__cudriver_kernel_arg__`` hook). Each keeps what it reads alive (a lease), so the
array or buffer is freed only after the object is released.

The descriptors are built by pure functions (:func:`texture_descriptor`,
:func:`array_resource`, :func:`linear_resource`, :func:`pitch2d_resource`) that check
every rule they can before the driver, and are tested without a GPU.
"""

from __future__ import annotations

import ctypes
import enum
import functools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from cuda.bindings import driver as _drv

from .._context.device import Context, Device, call_in_context
from .._lifetime._coerce import DeviceMemory, bool_arg, dtype_arg, enum_arg, int_arg, shape_arg
from .._lifetime._handle import Handle
from .._runtime import _calls
from .arrays import ArrayFormat, CudaArray, array_format, channels_arg
from .memory import DeviceBuffer

__all__ = [
    "AddressMode",
    "FilterMode",
    "ReadMode",
    "TextureObject",
    "SurfaceObject",
    "texture_descriptor",
    "array_resource",
    "linear_resource",
    "pitch2d_resource",
]


class AddressMode(enum.IntEnum):
    """What a texture reads outside [0, size) (``CUaddress_mode``, the driver's values).

    ``WRAP`` and ``MIRROR`` need normalised coordinates. ``CLAMP`` repeats the edge
    texel; ``BORDER`` reads the border colour.
    """

    WRAP = 0
    CLAMP = 1
    MIRROR = 2
    BORDER = 3


class FilterMode(enum.IntEnum):
    """How a texture samples between texels (``CUfilter_mode``, the driver's values).

    ``LINEAR`` interpolates (bilinear in 2D, trilinear in 3D) with 9-bit fixed-point
    weights; it needs float results: a float16 or float32 array, or 8/16-bit integers
    read as :attr:`ReadMode.NORMALIZED_FLOAT`.
    """

    POINT = 0
    LINEAR = 1


class ReadMode(enum.IntEnum):
    """What a texture of integers returns (the runtime's ``cudaTextureReadMode`` values).

    ``ELEMENT_TYPE`` returns the stored integers (``CU_TRSF_READ_AS_INTEGER``);
    ``NORMALIZED_FLOAT`` maps 8- and 16-bit integers to [0, 1] (unsigned) or [-1, 1]
    (signed) floats. Float arrays return floats either way.
    """

    ELEMENT_TYPE = 0
    NORMALIZED_FLOAT = 1


_READ_AS_INTEGER = int(_drv.CU_TRSF_READ_AS_INTEGER)
_NORMALIZED_COORDINATES = int(_drv.CU_TRSF_NORMALIZED_COORDINATES)
_FLOAT_FORMATS = frozenset({ArrayFormat.HALF, ArrayFormat.FLOAT})
_INT32_FORMATS = frozenset({ArrayFormat.UNSIGNED_INT32, ArrayFormat.SIGNED_INT32})
_RT = _drv.CUresourcetype


def _address_modes(value: object, ndim: int) -> tuple[AddressMode, ...]:
    """One mode per dimension (numpy order): one mode for all, or a sequence of ``ndim``."""
    if isinstance(value, (str, bytes)):
        raise TypeError(f"address_mode must be a cudriver.AddressMode, not {type(value).__name__}")
    if isinstance(value, Sequence):
        modes = tuple(enum_arg(v, AddressMode, "address_mode") for v in value)
        if len(modes) != ndim:
            raise ValueError(
                f"address_mode has {len(modes)} entries; the texture has {ndim} "
                f"dimension{'s' if ndim > 1 else ''} (give one mode, or one per dimension "
                "in numpy order)"
            )
        return modes
    return (enum_arg(value, AddressMode, "address_mode"),) * ndim


def _border(value: object) -> tuple[float, float, float, float]:
    try:
        items = [float(v) for v in value]  # type: ignore[attr-defined]
    except TypeError:
        raise TypeError(
            f"border_color must be 4 floats (one per channel), not {type(value).__name__}"
        ) from None
    if len(items) != 4:
        raise ValueError(f"border_color must be 4 floats (one per channel), not {len(items)}")
    return (items[0], items[1], items[2], items[3])


def texture_descriptor(
    fmt: ArrayFormat,
    ndim: int,
    *,
    address_mode: object = AddressMode.CLAMP,
    filter_mode: object = FilterMode.POINT,
    read_mode: object = ReadMode.ELEMENT_TYPE,
    normalized_coords: bool = False,
    border_color: object = (0.0, 0.0, 0.0, 0.0),
    linear: bool = False,
) -> Any:
    """The ``CUDA_TEXTURE_DESC`` of a texture of ``ndim`` dimensions of ``fmt``; pure.

    Checks the rules the driver leaves to the kernel's results: ``WRAP``/``MIRROR``
    need ``normalized_coords``; ``LINEAR`` filtering needs float results;
    ``NORMALIZED_FLOAT`` reads 8- and 16-bit integers only; a ``linear`` (1D buffer)
    texture is read by index (``tex1Dfetch``) and takes no filtering, address mode or
    normalised coordinates.
    """
    modes = _address_modes(address_mode, ndim)
    fm = enum_arg(filter_mode, FilterMode, "filter_mode")
    rm = enum_arg(read_mode, ReadMode, "read_mode")
    normalized = bool_arg(normalized_coords, "normalized_coords")
    border = _border(border_color)
    if linear and (
        fm is not FilterMode.POINT or normalized or any(m is not AddressMode.CLAMP for m in modes)
    ):
        raise ValueError(
            "a texture over linear memory (a 1D buffer) is read by index with "
            "tex1Dfetch: it takes no filter_mode, address_mode or normalized_coords "
            "(give the buffer a 2D shape for a pitched texture that does)"
        )
    for m in modes:
        if m in (AddressMode.WRAP, AddressMode.MIRROR) and not normalized:
            raise ValueError(
                f"address mode {m.name} needs normalized_coords=True (the driver supports "
                "it for normalised coordinates only)"
            )
    if rm is ReadMode.NORMALIZED_FLOAT and fmt in _INT32_FORMATS:
        raise ValueError(
            f"read_mode NORMALIZED_FLOAT maps 8- and 16-bit integers to floats; {fmt.name} "
            "elements are never converted"
        )
    floats = fmt in _FLOAT_FORMATS or rm is ReadMode.NORMALIZED_FLOAT
    if fm is FilterMode.LINEAR and not floats:
        raise ValueError(
            f"filter_mode LINEAR needs float results: {fmt.name} elements read as "
            "ELEMENT_TYPE are integers (use read_mode=ReadMode.NORMALIZED_FLOAT for 8- and "
            "16-bit integers, or a float16/float32 array)"
        )
    flags = 0
    if rm is ReadMode.ELEMENT_TYPE and fmt not in _FLOAT_FORMATS:
        flags |= _READ_AS_INTEGER
    if normalized:
        flags |= _NORMALIZED_COORDINATES
    d = _drv.CUDA_TEXTURE_DESC()
    # The driver's order: x (innermost) first; unused dimensions CLAMP.
    driver_modes = [*modes[::-1], *(AddressMode.CLAMP,) * (3 - ndim)]
    d.addressMode = [_drv.CUaddress_mode(int(m)) for m in driver_modes]
    d.filterMode = _drv.CUfilter_mode(int(fm))
    d.flags = flags
    d.borderColor = list(border)
    return d


def array_resource(handle: Any) -> Any:
    """The ``CUDA_RESOURCE_DESC`` of a CUDA array (``CU_RESOURCE_TYPE_ARRAY``); pure."""
    r = _drv.CUDA_RESOURCE_DESC()
    r.resType = _RT.CU_RESOURCE_TYPE_ARRAY
    r.res.array.hArray = handle
    return r


def linear_resource(address: int, fmt: ArrayFormat, channels: int, nbytes: int) -> Any:
    """The ``CUDA_RESOURCE_DESC`` of linear memory (``CU_RESOURCE_TYPE_LINEAR``); pure."""
    r = _drv.CUDA_RESOURCE_DESC()
    r.resType = _RT.CU_RESOURCE_TYPE_LINEAR
    r.res.linear.devPtr = _drv.CUdeviceptr(address)
    r.res.linear.format = _drv.CUarray_format(int(fmt))
    r.res.linear.numChannels = channels
    r.res.linear.sizeInBytes = nbytes
    return r


def pitch2d_resource(
    address: int, fmt: ArrayFormat, channels: int, width: int, height: int, pitch: int
) -> Any:
    """The ``CUDA_RESOURCE_DESC`` of pitched 2D memory (``CU_RESOURCE_TYPE_PITCH2D``); pure."""
    r = _drv.CUDA_RESOURCE_DESC()
    r.resType = _RT.CU_RESOURCE_TYPE_PITCH2D
    r.res.pitch2D.devPtr = _drv.CUdeviceptr(address)
    r.res.pitch2D.format = _drv.CUarray_format(int(fmt))
    r.res.pitch2D.numChannels = channels
    r.res.pitch2D.width = width
    r.res.pitch2D.height = height
    r.res.pitch2D.pitchInBytes = pitch
    return r


class _BufferLayout:
    """What a texture over a device buffer reads: checked before the driver."""

    __slots__ = ("channels", "dtype", "fmt", "nbytes", "pitch", "shape")

    def __init__(
        self,
        nbytes: int,
        buffer_dtype: np.dtype[Any],
        dtype: npt.DTypeLike | None,
        channels: int | None,
        shape: object,
        pitch: int | None,
    ) -> None:
        dt = buffer_dtype if dtype is None else dtype_arg(dtype)
        self.fmt = array_format(dt)
        self.dtype = dt
        ch = self.channels = 1 if channels is None else channels_arg(channels)
        elem = dt.itemsize * ch
        if shape is None:
            if nbytes % elem:
                raise ValueError(
                    f"the buffer's {nbytes} bytes are not a whole number of {elem}-byte "
                    f"elements ({dt} x {ch}): give shape="
                )
            shp: tuple[int, ...] = (nbytes // elem,)
        else:
            shp = shape_arg(shape)
            if len(shp) not in (1, 2) or any(d < 1 for d in shp):
                raise ValueError(
                    f"a texture over a buffer has shape (n,) (linear) or (h, w) (pitched 2D), "
                    f"each at least 1; not {shp}"
                )
        row = shp[-1] * elem
        if len(shp) == 1:
            if pitch is not None:
                raise ValueError("pitch= is for a 2D shape (h, w), not a linear texture")
            p = row
            need = row
        else:
            p = row if pitch is None else int_arg(pitch, "pitch")
            if p < row:
                raise ValueError(f"pitch {p} is smaller than a row ({shp[-1]} x {elem} bytes)")
            need = p * (shp[0] - 1) + row
        if need > nbytes:
            raise ValueError(
                f"a texture of shape {shp} of {dt} x {ch} (pitch {p}) needs {need} bytes; the "
                f"buffer holds {nbytes}"
            )
        self.shape = shp
        self.pitch = p
        self.nbytes = math.prod(shp) * elem if len(shp) == 1 else need


class _Bound(Handle):
    """What a texture and a surface object share: a resource, a context, a kernel argument."""

    __slots__ = ("_context", "_resource")

    _context: Context
    _resource: Any

    @property
    def resource(self) -> Any:
        """The :class:`CudaArray` or device buffer the object reads (kept alive)."""
        return self._resource

    @property
    def context(self) -> Context:
        """The context the object was made in (its resource's)."""
        return self._context

    @property
    def device(self) -> Device:
        """The device of :attr:`context`."""
        return self._context.device

    def __cudriver_kernel_arg__(self) -> ctypes.c_uint64:
        """The kernel-argument hook of ``pack_arg``: the 64-bit object handle."""
        if self._h is None:
            self._raise_closed()
        return ctypes.c_uint64(self._key)


def _destroy(ctx_h: Any, fn: Any) -> Any:
    return functools.partial(call_in_context, ctx_h, fn)


class TextureObject(_Bound):
    """A texture object (``cuTexObjectCreate``; ``cuTexObjectDestroy`` on close).

    Reads a :class:`CudaArray` (1D, 2D, 3D or layered: ``tex1D``, ``tex2D``,
    ``tex3D``, ``tex2DLayered``...), or a device buffer as linear memory (shape
    ``(n,)``: ``tex1Dfetch``) or as pitched 2D memory (shape ``(h, w)``: ``tex2D``).
    A kernel takes it as a ``cudaTextureObject_t`` parameter; pass the object itself
    (an 8-byte value). Made in the resource's context; allocates no device memory and
    does not synchronise. The object keeps its resource alive (a lease): closing or
    dropping the array or buffer frees it only once the texture is released.

    Unnormalised coordinates address texel centres at ``i + 0.5``: ``tex2D(t, x, y)``
    with linear filtering interpolates at ``(x - 0.5, y - 0.5)`` in index space.

    Parameters
    ----------
    resource
        A :class:`CudaArray`, or a device buffer (:class:`DeviceBuffer`; its address
        must be aligned to the device's ``TEXTURE_ALIGNMENT``, as allocations are).
    address_mode
        An :class:`AddressMode` for every dimension, or one per dimension in numpy order
        (outermost first; a layered array's layers have none). ``WRAP`` and ``MIRROR``
        need ``normalized_coords``. Default ``CLAMP``.
    filter_mode
        :class:`FilterMode` ``POINT`` (default) or ``LINEAR`` (float results only).
    read_mode
        :class:`ReadMode`: integers as they are (``ELEMENT_TYPE``, the default) or as
        normalised floats (``NORMALIZED_FLOAT``, 8- and 16-bit integers).
    normalized_coords
        Coordinates in [0, 1) across each dimension (``CU_TRSF_NORMALIZED_COORDINATES``)
        instead of [0, size).
    border_color
        The 4 channel values ``BORDER`` reads outside the texture.
    dtype, channels, shape, pitch
        For a buffer only: the element type (default: the buffer's dtype), channels per
        element (1, 2 or 4; default 1), ``(n,)`` for linear memory (the default: the
        whole buffer) or ``(h, w)`` for pitched 2D memory, and the row pitch in bytes
        (default: a packed row; the driver requires a multiple of the device's
        ``TEXTURE_PITCH_ALIGNMENT``).

    Raises
    ------
    TypeError
        A resource of another type, a dtype without a format, or an argument of the
        wrong type.
    ValueError
        A rule above is broken, or the buffer is too small for ``shape``.
    ClosedError
        The resource is closed.
    CudaError
        The driver refused the texture (e.g. a misaligned address or pitch).
    """

    __slots__ = ("_address_mode", "_border_color", "_filter_mode", "_normalized", "_read_mode")

    _kind = "TextureObject"

    def __init__(
        self,
        resource: CudaArray | DeviceBuffer,
        *,
        address_mode: AddressMode | int | Sequence[AddressMode | int] = AddressMode.CLAMP,
        filter_mode: FilterMode | int = FilterMode.POINT,
        read_mode: ReadMode | int = ReadMode.ELEMENT_TYPE,
        normalized_coords: bool = False,
        border_color: Sequence[float] = (0.0, 0.0, 0.0, 0.0),
        dtype: npt.DTypeLike | None = None,
        channels: int | None = None,
        shape: int | tuple[int, ...] | None = None,
        pitch: int | None = None,
    ) -> None:
        fmt: ArrayFormat
        if isinstance(resource, CudaArray):
            given = [
                n
                for n, v in (
                    ("dtype", dtype),
                    ("channels", channels),
                    ("shape", shape),
                    ("pitch", pitch),
                )
                if v is not None
            ]
            if given:
                raise TypeError(
                    f"{', '.join(given)}: for a texture over a buffer; a CudaArray has its own"
                )
            fmt, ndim, linear = resource.format, resource.ndim, False
        elif isinstance(resource, DeviceMemory):
            buf: Any = resource
            buf_dtype = np.dtype(getattr(buf, "dtype", np.uint8))
            layout = _BufferLayout(resource.nbytes, buf_dtype, dtype, channels, shape, pitch)
            fmt, ndim = layout.fmt, len(layout.shape)
            linear = ndim == 1
        else:
            raise TypeError(
                "a TextureObject reads a cudriver.CudaArray or a cudriver.DeviceBuffer, not "
                f"{type(resource).__name__}"
            )
        modes = _address_modes(address_mode, ndim)
        rm = enum_arg(read_mode, ReadMode, "read_mode")
        tex = texture_descriptor(
            fmt,
            ndim,
            address_mode=modes,
            filter_mode=filter_mode,
            read_mode=rm,
            normalized_coords=normalized_coords,
            border_color=border_color,
            linear=linear,
        )
        lease = resource._lease()  # ClosedError for a closed resource
        if isinstance(resource, CudaArray):
            res = array_resource(resource.handle)
            ctx = resource.context
        else:
            if linear:
                res = linear_resource(resource.ptr, fmt, layout.channels, layout.nbytes)
            else:
                h, w = layout.shape
                res = pitch2d_resource(resource.ptr, fmt, layout.channels, w, h, layout.pitch)
            ctx = buf.context
        with ctx._scope():
            handle = _calls.cuTexObjectCreate(res, tex, None)
        self._resource = resource
        self._context = ctx
        self._address_mode = modes
        self._filter_mode = FilterMode(int(tex.filterMode))
        self._read_mode = rm
        self._normalized = bool(int(tex.flags) & _NORMALIZED_COORDINATES)
        self._border_color = _border(border_color)
        self._init_handle(
            handle,
            release=_destroy(ctx.handle, _drv.cuTexObjectDestroy),
            func="cuTexObjectDestroy",
            keep=(ctx, resource, lease),
        )

    @property
    def address_mode(self) -> tuple[AddressMode, ...]:
        """The address mode of each dimension, numpy order (outermost first)."""
        return self._address_mode

    @property
    def filter_mode(self) -> FilterMode:
        """Point or linear filtering."""
        return self._filter_mode

    @property
    def read_mode(self) -> ReadMode:
        """Integers as they are, or as normalised floats."""
        return self._read_mode

    @property
    def normalized_coords(self) -> bool:
        """Whether coordinates are normalised to [0, 1)."""
        return self._normalized

    @property
    def border_color(self) -> tuple[float, float, float, float]:
        """What ``BORDER`` reads outside the texture, per channel."""
        return self._border_color

    def _repr_extra(self) -> str:
        modes = ",".join(m.name for m in self._address_mode)
        parts = [f"of {type(self._resource).__name__}", self._filter_mode.name, modes]
        if self._normalized:
            parts.append("normalized")
        if self._read_mode is ReadMode.NORMALIZED_FLOAT:
            parts.append("NORMALIZED_FLOAT")
        return " ".join(parts)


class SurfaceObject(_Bound):
    """A surface object (``cuSurfObjectCreate``; ``cuSurfObjectDestroy`` on close).

    Reads and writes a :class:`CudaArray` made with ``surface=True`` from a kernel
    (``surf2Dread``, ``surf2Dwrite``, ``surf3Dwrite``, ``surf2DLayeredwrite``...; the x
    coordinate is in bytes). A kernel takes it as a ``cudaSurfaceObject_t`` parameter;
    pass the object itself. Made in the array's context; allocates no device memory and
    does not synchronise. It keeps the array alive (a lease) until it is released.

    Raises
    ------
    TypeError
        ``array`` is not a :class:`CudaArray`.
    ValueError
        The array was made without ``surface=True``.
    ClosedError
        The array is closed.
    """

    __slots__ = ()

    _kind = "SurfaceObject"

    def __init__(self, array: CudaArray) -> None:
        if not isinstance(array, CudaArray):
            raise TypeError(
                f"a SurfaceObject writes a cudriver.CudaArray, not {type(array).__name__}"
            )
        if not array.surface:
            raise ValueError(
                "this CudaArray was made without surface=True (CUDA_ARRAY3D_SURFACE_LDST): "
                "make it with CudaArray(..., surface=True) to bind a surface"
            )
        lease = array._lease()
        res = array_resource(array.handle)
        ctx = array.context
        with ctx._scope():
            handle = _calls.cuSurfObjectCreate(res)
        self._resource = array
        self._context = ctx
        self._init_handle(
            handle,
            release=_destroy(ctx.handle, _drv.cuSurfObjectDestroy),
            func="cuSurfObjectDestroy",
            keep=(ctx, array, lease),
        )

    def _repr_extra(self) -> str:
        return f"of CudaArray shape={self._resource.shape}"
