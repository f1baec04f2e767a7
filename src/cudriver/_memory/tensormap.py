"""TMA tensor maps: :class:`TensorMap`, the ``CUtensorMap`` a Hopper kernel takes by value.

On compute capability 9.0 and later the Tensor Memory Accelerator copies tiles between
global and shared memory (``cp.async.bulk.tensor``), described by a 128-byte
``CUtensorMap`` that the host encodes (``cuTensorMapEncodeTiled``) and the kernel takes
as a ``const __grid_constant__ CUtensorMap`` parameter. :class:`TensorMap` encodes one
from a typed device buffer and packs as those 128 bytes in ``Kernel.launch``,
``Kernel.prepare`` and graph kernel nodes (``_packing.pack_arg``'s
``__cudriver_kernel_arg__`` hook).

Every rule the driver documents for ``cuTensorMapEncodeTiled`` is checked here first, so
a bad map is a ``ValueError`` or ``TypeError`` naming the numbers, not a bare
``CUDA_ERROR_INVALID_VALUE``. Everything is given in numpy order (outermost dimension
first, strides in bytes); the driver takes dimensions innermost first and no innermost
stride, and this module does that reversal.
"""

from __future__ import annotations

import ctypes
import enum
import operator
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
from cuda.bindings import driver as _drv

from .._lifetime._coerce import DeviceMemory, MapsMemory, enum_arg
from .._lifetime._handle import Handle
from .._runtime import _bindings
from ..errors import GUARD, NotSupportedError, error_for
from .memory import DeviceBuffer

__all__ = [
    "TensorMap",
    "TensorMapDataType",
    "TensorMapSwizzle",
    "TensorMapInterleave",
    "TensorMapL2Promotion",
    "TensorMapFloatOOBFill",
]

# Looked up here (None in bindings without them) and called through these names, which
# the tests replace.
_cuTensorMapEncodeTiled: Any = getattr(_drv, "cuTensorMapEncodeTiled", None)
_cuTensorMapReplaceAddress: Any = getattr(_drv, "cuTensorMapReplaceAddress", None)
_SUCCESS = _drv.CUresult.CUDA_SUCCESS

#: The size of a ``CUtensorMap`` and of the kernel parameter that takes one.
TENSOR_MAP_BYTES = 128
MAX_RANK = 5
MAX_BOX = 256
MAX_ELEMENT_STRIDE = 8
MAX_DIM = 2**32  # each global dimension: 1 .. 2**32
STRIDE_LIMIT = 2**40  # each global stride: below 2**40 bytes
STRIDE_ALIGN = 16  # each global stride, and the global address: multiples of 16 bytes
BOX_INNER_ALIGN = 16  # the box's inner dimension in bytes (without interleave)


class TensorMapDataType(enum.IntEnum):
    """The element type of a tensor map (``CUtensorMapDataType``, the driver's values).

    The sub-byte packed types (``16U4_ALIGN8B`` and kin) are not offered: their rules
    differ throughout; encode those with ``cudriver.driver.cuTensorMapEncodeTiled``.
    """

    UINT8 = 0
    UINT16 = 1
    UINT32 = 2
    INT32 = 3
    UINT64 = 4
    INT64 = 5
    FLOAT16 = 6
    FLOAT32 = 7
    FLOAT64 = 8
    BFLOAT16 = 9
    FLOAT32_FTZ = 10
    TFLOAT32 = 11
    TFLOAT32_FTZ = 12


class TensorMapSwizzle(enum.IntEnum):
    """How a tile is laid out in shared memory (``CUtensorMapSwizzle``, the driver's values).

    Without interleave, a swizzled box's inner dimension may span at most the swizzle's
    bytes (32, 64, or 128 for every ``SWIZZLE_128B*``). The ``_ATOM`` modes are newer
    (Blackwell): bindings without them raise NotSupportedError, and the driver decides.
    """

    NONE = 0
    SWIZZLE_32B = 1
    SWIZZLE_64B = 2
    SWIZZLE_128B = 3
    SWIZZLE_128B_ATOM_32B = 4
    SWIZZLE_128B_ATOM_32B_FLIP_8B = 5
    SWIZZLE_128B_ATOM_64B = 6


class TensorMapInterleave(enum.IntEnum):
    """Interleaved layouts such as NC/8HWC8 (``CUtensorMapInterleave``, the driver's values).

    With interleave the rank must be 3 to 5; ``INTERLEAVE_32B`` needs a 32-byte aligned
    address and strides, and ``SWIZZLE_32B``.
    """

    NONE = 0
    INTERLEAVE_16B = 1
    INTERLEAVE_32B = 2


class TensorMapL2Promotion(enum.IntEnum):
    """The L2 fetch size (``CUtensorMapL2promotion``, the driver's values)."""

    NONE = 0
    L2_64B = 1
    L2_128B = 2
    L2_256B = 3


class TensorMapFloatOOBFill(enum.IntEnum):
    """What fills a box's elements outside the tensor (``CUtensorMapFloatOOBfill``).

    ``NONE`` fills zeros; ``NAN_REQUEST_ZERO_FMA`` a NaN that FMA treats as zero, for
    floating-point data types only.
    """

    NONE = 0
    NAN_REQUEST_ZERO_FMA = 1


_DT = TensorMapDataType
_ELEMENT_SIZE = {
    _DT.UINT8: 1,
    _DT.UINT16: 2,
    _DT.UINT32: 4,
    _DT.INT32: 4,
    _DT.UINT64: 8,
    _DT.INT64: 8,
    _DT.FLOAT16: 2,
    _DT.FLOAT32: 4,
    _DT.FLOAT64: 8,
    _DT.BFLOAT16: 2,
    _DT.FLOAT32_FTZ: 4,
    _DT.TFLOAT32: 4,
    _DT.TFLOAT32_FTZ: 4,
}
# FLOAT16, FLOAT32, FLOAT64, BFLOAT16, FLOAT32_FTZ, TFLOAT32, TFLOAT32_FTZ
_FLOAT_TYPES = frozenset(t for t in _DT if "FLOAT" in t.name)
_FROM_NUMPY = {
    np.dtype(np.uint8): _DT.UINT8,
    np.dtype(np.uint16): _DT.UINT16,
    np.dtype(np.uint32): _DT.UINT32,
    np.dtype(np.int32): _DT.INT32,
    np.dtype(np.uint64): _DT.UINT64,
    np.dtype(np.int64): _DT.INT64,
    np.dtype(np.float16): _DT.FLOAT16,
    np.dtype(np.float32): _DT.FLOAT32,
    np.dtype(np.float64): _DT.FLOAT64,
}
# The bytes a swizzled box's inner dimension may span: 32, 64, and 128 for every 128B mode.
_SWIZZLE_SPAN = {sw: 32 << min(sw - 1, 2) for sw in TensorMapSwizzle if sw}
_TensorMapBytes = ctypes.c_ubyte * TENSOR_MAP_BYTES


def _driver_ready() -> None:
    """Initialise the driver before the first call (and refuse calls where none may be made)."""
    if GUARD.armed:
        GUARD.check()


def _unsupported(func: str, what: str) -> NotSupportedError:
    return NotSupportedError(
        _drv.CUresult.CUDA_ERROR_NOT_SUPPORTED,
        func,
        f"the installed cuda-bindings {_bindings.version_string()} has no {what}; "
        "install a newer cuda-bindings",
    )


def _raw_enum(func: str, type_name: str, prefix: str, member: enum.IntEnum) -> Any:
    """``member`` as the bindings' enum ``type_name``; NotSupportedError where it lacks it."""
    cls = getattr(_drv, type_name, None)
    try:
        if cls is None:
            raise ValueError(type_name)
        return cls(int(member))
    except ValueError:
        word = prefix.rstrip("_").rsplit("_", 1)[-1] + "_"  # SWIZZLE_ in SWIZZLE_32B
        name = prefix + member.name.removeprefix(word)
        raise _unsupported(func, f"{name} ({type_name} {int(member)})") from None


def _int_tuple(value: object, name: str) -> tuple[int, ...]:
    """A sequence of ints (or one int) as a tuple; TypeError for anything else."""
    items: Any = (value,) if isinstance(value, int) else value
    if isinstance(value, (str, bytes)) or not isinstance(items, Sequence | np.ndarray):
        raise TypeError(f"{name} must be a sequence of ints, not {type(value).__name__}")
    out: list[int] = []
    for i, v in enumerate(items):
        if isinstance(v, bool):
            raise TypeError(f"{name}[{i}] must be an int, not bool")
        try:
            out.append(operator.index(v))
        except TypeError:
            raise TypeError(f"{name}[{i}] must be an int, not {type(v).__name__}") from None
    return tuple(out)


def _c_strides(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    """The byte strides of a C-contiguous array of ``shape``."""
    out = []
    step = itemsize
    for d in reversed(shape):
        out.append(step)
        step *= d
    return tuple(reversed(out))


def _span(shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int) -> int:
    """Bytes from the first element to the end of the last (0 for an empty shape)."""
    if any(d == 0 for d in shape):
        return 0
    return sum((d - 1) * s for d, s in zip(shape, strides, strict=True)) + itemsize


class _Source(NamedTuple):
    address: int
    dtype: np.dtype[Any]
    shape: tuple[int, ...]
    strides: tuple[int, ...]  # bytes, numpy order
    extent: int  # bytes the object describes from address
    keep: Any  # what the map keeps alive
    lease: Any  # a lease on it, when it is a cudriver buffer


def _source(obj: object) -> _Source:
    """Address, dtype, shape and strides of a device array (CUDA Array Interface or DLPack)."""
    what = type(obj).__name__
    if isinstance(obj, np.ndarray):
        raise TypeError(
            f"a host numpy array (shape {obj.shape}) cannot be mapped: copy it to the device "
            "(DeviceBuffer.from_array) and map that"
        )
    keep: Any = obj
    cai = getattr(obj, "__cuda_array_interface__", None)
    if cai is None:
        if callable(getattr(obj, "__dlpack__", None)) and callable(
            getattr(obj, "__dlpack_device__", None)
        ):
            # No stream ordering (-1): encoding reads the tensor's description, not its data.
            keep = DeviceBuffer.from_dlpack(obj, stream=-1)
            cai = keep.__cuda_array_interface__
        else:
            raise TypeError(
                f"a TensorMap maps a device array: a cudriver.DeviceBuffer with a dtype, or an "
                f"object with __cuda_array_interface__ or DLPack; not a {what}"
            )
    if not isinstance(cai, dict):
        raise TypeError(f"{what}.__cuda_array_interface__ is a {type(cai).__name__}, not a dict")
    try:
        ptr = cai["data"][0]
        address = 0 if ptr is None else operator.index(ptr)
        shape = _int_tuple(cai["shape"], "shape")
        dtype = np.dtype(cai["typestr"])
        raw_strides = cai.get("strides")
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise ValueError(f"{what} has a malformed __cuda_array_interface__: {exc!r}") from None
    if cai.get("descr") is not None and len(cai["descr"]) > 1:
        raise TypeError(f"{what} holds structured elements ({cai['descr']!r:.80}): unsupported")
    if cai.get("mask") is not None:
        raise ValueError(f"{what} is a masked array (__cuda_array_interface__ 'mask')")
    if raw_strides is None:
        strides = _c_strides(shape, dtype.itemsize)
    else:
        strides = _int_tuple(raw_strides, "strides")
        if len(strides) != len(shape):
            raise ValueError(f"{what} has shape {shape} but strides {strides}")
    if any(s < 0 for s in strides):
        raise ValueError(f"{what} has a negative stride {strides}: a TensorMap cannot map it")
    lease = keep._lease() if isinstance(keep, Handle) else None
    return _Source(
        address, dtype, shape, strides, _span(shape, strides, dtype.itemsize), keep, lease
    )


def _data_type(dtype: np.dtype[Any], given: TensorMapDataType | None) -> TensorMapDataType:
    """The map's data type: ``given`` (of the elements' size), else the dtype's own."""
    if given is not None:
        size = _ELEMENT_SIZE[given]
        if dtype.itemsize != size:
            raise TypeError(
                f"data_type {given.name} has {size}-byte elements but the buffer's dtype "
                f"{dtype} has {dtype.itemsize}: view the buffer as a dtype of {size} bytes "
                "first (DeviceBuffer.cast)"
            )
        return given
    found = _FROM_NUMPY.get(dtype)
    if found is None and dtype.name == "bfloat16" and dtype.itemsize == 2:  # ml_dtypes
        found = _DT.BFLOAT16
    if found is None:
        names = ", ".join(str(d) for d in _FROM_NUMPY)
        raise TypeError(
            f"no tensor map data type for dtype {dtype}; supported: {names}, bfloat16 "
            "(ml_dtypes); or pass data_type= (e.g. TensorMapDataType.UINT8 to move int8 "
            "bits unchanged, TFLOAT32 for float32 data)"
        )
    return found


def _check_address(address: int, interleave: TensorMapInterleave) -> None:
    if address == 0:
        raise ValueError("the buffer's address is NULL")
    align = 32 if interleave is TensorMapInterleave.INTERLEAVE_32B else STRIDE_ALIGN
    if address % align:
        raise ValueError(
            f"the global address {address:#x} is not {align}-byte aligned "
            f"(address % {align} = {address % align})"
            + (" as INTERLEAVE_32B requires" if align == 32 else "")
        )


def _check_extent(span: int, extent: int, what: str) -> None:
    if span > extent:
        raise ValueError(
            f"the map spans {span} bytes from the address but the {what} describes {extent} "
            "bytes: give a shape and strides within it"
        )


def _check_layout(
    shape: tuple[int, ...],
    strides: tuple[int, ...],
    size: int,
    interleave: TensorMapInterleave,
) -> None:
    """The rank, dimension and stride rules of ``cuTensorMapEncodeTiled`` (numpy order)."""
    rank = len(shape)
    if not 1 <= rank <= MAX_RANK:
        raise ValueError(f"a tensor map has rank 1 to {MAX_RANK}; shape {shape} has rank {rank}")
    if interleave is not TensorMapInterleave.NONE and rank < 3:
        raise ValueError(
            f"with interleave {interleave.name} the rank must be 3 to {MAX_RANK}, not {rank}"
        )
    if len(strides) != rank:
        raise ValueError(f"strides {strides} must have one entry per dimension of shape {shape}")
    for i, d in enumerate(shape):
        if not 1 <= d <= MAX_DIM:
            raise ValueError(f"shape[{i}] = {d} is out of range: each dimension is 1 to 2**32")
    inner = strides[-1]
    if shape[-1] != 1 and inner != size:
        raise ValueError(
            f"the innermost stride strides[{rank - 1}] = {inner} bytes must be the element "
            f"size ({size} bytes): TMA reads the innermost dimension contiguously"
        )
    align = 32 if interleave is TensorMapInterleave.INTERLEAVE_32B else STRIDE_ALIGN
    for i, s in enumerate(strides[:-1]):
        if s < 0:
            raise ValueError(f"strides[{i}] = {s} is negative: a TensorMap cannot map it")
        if s % align:
            raise ValueError(
                f"strides[{i}] = {s} bytes is not a multiple of {align} (remainder {s % align})"
                + (" as INTERLEAVE_32B requires" if align == 32 else "")
            )
        if s >= STRIDE_LIMIT:
            raise ValueError(f"strides[{i}] = {s} bytes is not below 2**40 ({STRIDE_LIMIT})")


def _check_box(
    box: tuple[int, ...],
    element_strides: tuple[int, ...],
    rank: int,
    size: int,
    interleave: TensorMapInterleave,
    swizzle: TensorMapSwizzle,
) -> None:
    """The box, element-stride, interleave and swizzle rules (numpy order)."""
    if len(box) != rank:
        raise ValueError(f"box {box} has {len(box)} dimensions; the tensor has {rank}")
    for i, b in enumerate(box):
        if not 1 <= b <= MAX_BOX:
            raise ValueError(f"box[{i}] = {b} is out of range 1..{MAX_BOX}")
    if len(element_strides) != rank:
        raise ValueError(
            f"element_strides {element_strides} has {len(element_strides)} entries; the "
            f"tensor has {rank} dimensions"
        )
    for i, e in enumerate(element_strides):
        if not 1 <= e <= MAX_ELEMENT_STRIDE:
            raise ValueError(f"element_strides[{i}] = {e} is out of range 1..{MAX_ELEMENT_STRIDE}")
    if (
        interleave is TensorMapInterleave.INTERLEAVE_32B
        and swizzle is not TensorMapSwizzle.SWIZZLE_32B
    ):
        raise ValueError(f"interleave INTERLEAVE_32B needs swizzle SWIZZLE_32B, not {swizzle.name}")
    if interleave is not TensorMapInterleave.NONE:
        return
    inner = box[-1] * size
    if inner % BOX_INNER_ALIGN:
        raise ValueError(
            f"the box's inner dimension box[{rank - 1}] = {box[-1]} elements x {size} bytes = "
            f"{inner} bytes is not a multiple of {BOX_INNER_ALIGN} bytes"
        )
    span = _SWIZZLE_SPAN.get(swizzle)
    if span is not None and inner > span:
        raise ValueError(
            f"the box's inner dimension box[{rank - 1}] = {box[-1]} elements x {size} bytes = "
            f"{inner} bytes exceeds the {span}-byte span of swizzle {swizzle.name}"
        )


def _u64(values: Sequence[int]) -> list[Any]:
    return [_drv.cuuint64_t(v) for v in values]


def _u32(values: Sequence[int]) -> list[Any]:
    return [_drv.cuuint32_t(v) for v in values]


class TensorMap(MapsMemory):
    """A TMA tiled tensor map (``CUtensorMap``) over a device array, for kernel arguments.

    Encoded once, here, by ``cuTensorMapEncodeTiled``, after every rule the driver
    documents has been checked. A kernel takes it as ``const __grid_constant__
    CUtensorMap``: pass the map to :meth:`Kernel.launch`, :meth:`Kernel.prepare` or a
    graph kernel node and its 128 bytes are copied into that parameter (another
    parameter size is a ``TypeError`` naming the kernel and the argument). Needs
    compute capability 9.0 to be used by a kernel; encoding needs the driver but no
    current context. Allocates nothing on the device and does not synchronise.

    Everything is given in numpy order, outermost dimension first: for a row-major
    ``(rows, cols)`` matrix, ``box=(box_rows, box_cols)``, and in the kernel the
    coordinates are ``{col, row}`` (innermost first), as the driver stores them. The
    map keeps the buffer alive (for a cudriver buffer, also its memory after a
    ``close()``) as long as it lives.

    Parameters
    ----------
    buffer
        The device array: a :class:`DeviceBuffer` with a dtype (``DeviceBuffer.empty(shape,
        dtype)``, ``from_array``, ``cast``), any object with ``__cuda_array_interface__``
        (CuPy, PyTorch, Numba), or a DLPack producer (``__dlpack__`` and
        ``__dlpack_device__``; C-contiguous only). Not stream-ordered: make sure the data
        is ready before a kernel reads it.
    box
        The tile's shape in elements, one entry per dimension, each 1 to 256. Without
        interleave the innermost entry times the element size must be a multiple of 16
        bytes, and with a swizzle at most the swizzle's span (32, 64 or 128 bytes).
    shape
        The tensor's shape in elements (default: the buffer's); each 1 to 2**32, rank 1 to
        5 (3 to 5 with interleave).
    strides
        The tensor's strides in bytes, as numpy gives them (default: the buffer's when
        ``shape`` is not given, else C-contiguous for ``shape``). The innermost must be the
        element size; the others multiples of 16 (32 with ``INTERLEAVE_32B``), below 2**40.
        The map must lie within the buffer.
    element_strides
        The traversal step in each dimension, 1 to 8 (default all 1). With a step ``e`` a
        box entry ``b`` loads ``ceil(b / e)`` elements; without interleave the innermost
        step is ignored by the hardware.
    data_type
        A :class:`TensorMapDataType` to use instead of the dtype's (same element size),
        e.g. ``TFLOAT32`` for float32 data or ``UINT8`` for int8 bits. Default: uint8,
        uint16, uint32, int32, uint64, int64, float16, float32, float64 and ml_dtypes'
        bfloat16 map to their types; other dtypes are refused.
    swizzle, interleave, l2_promotion, oob_fill
        :class:`TensorMapSwizzle`, :class:`TensorMapInterleave`,
        :class:`TensorMapL2Promotion`, :class:`TensorMapFloatOOBFill` (members or their
        int values); all ``NONE`` by default. ``oob_fill=NAN_REQUEST_ZERO_FMA`` needs a
        floating-point data type.

    Raises
    ------
    TypeError
        ``buffer`` is not a device array, a dtype without a data type, ``data_type`` of
        another element size, or an argument of the wrong type.
    ValueError
        A rule above is broken (the message gives the numbers, in numpy order).
    BufferError
        A DLPack tensor is not on a CUDA device, or not C-contiguous.
    ClosedError
        The cudriver buffer is closed.
    NotSupportedError
        The installed cuda-bindings lacks ``cuTensorMapEncodeTiled`` or the enum member
        asked for.
    CudaError
        The driver refused the map (e.g. a swizzle the driver does not know).
    """

    __slots__ = (
        "__weakref__",
        "_address",
        "_box",
        "_bytes",
        "_data_type",
        "_dtype",
        "_element_strides",
        "_explicit",
        "_interleave",
        "_l2_promotion",
        "_lease",
        "_map",
        "_oob_fill",
        "_shape",
        "_source",
        "_strides",
        "_swizzle",
    )

    def __init__(
        self,
        buffer: Any,
        box: Sequence[int],
        *,
        shape: Sequence[int] | None = None,
        strides: Sequence[int] | None = None,
        element_strides: Sequence[int] | None = None,
        data_type: TensorMapDataType | int | None = None,
        swizzle: TensorMapSwizzle | int = TensorMapSwizzle.NONE,
        interleave: TensorMapInterleave | int = TensorMapInterleave.NONE,
        l2_promotion: TensorMapL2Promotion | int = TensorMapL2Promotion.NONE,
        oob_fill: TensorMapFloatOOBFill | int = TensorMapFloatOOBFill.NONE,
    ) -> None:
        sw = enum_arg(swizzle, TensorMapSwizzle, "swizzle")
        il = enum_arg(interleave, TensorMapInterleave, "interleave")
        l2 = enum_arg(l2_promotion, TensorMapL2Promotion, "l2_promotion")
        oob = enum_arg(oob_fill, TensorMapFloatOOBFill, "oob_fill")
        explicit = (
            None if data_type is None else enum_arg(data_type, TensorMapDataType, "data_type")
        )
        bx = _int_tuple(box, "box")
        src = _source(buffer)
        dt = _data_type(src.dtype, explicit)
        size = _ELEMENT_SIZE[dt]
        if shape is None:
            shp = src.shape
            st = src.strides if strides is None else _int_tuple(strides, "strides")
        else:
            shp = _int_tuple(shape, "shape")
            st = _c_strides(shp, size) if strides is None else _int_tuple(strides, "strides")
        es = (
            (1,) * len(shp)
            if element_strides is None
            else _int_tuple(element_strides, "element_strides")
        )
        _check_layout(shp, st, size, il)
        _check_address(src.address, il)
        _check_extent(_span(shp, st, size), src.extent, type(buffer).__name__)
        _check_box(bx, es, len(shp), size, il, sw)
        if oob is TensorMapFloatOOBFill.NAN_REQUEST_ZERO_FMA and dt not in _FLOAT_TYPES:
            raise ValueError(
                f"oob_fill NAN_REQUEST_ZERO_FMA needs a floating-point data type, not {dt.name}"
            )
        self._map = self._encode(src.address, dt, shp, st, bx, es, il, sw, l2, oob)
        self._bytes = self._read_bytes()
        self._source = src.keep
        self._lease = src.lease
        self._dtype = src.dtype
        self._data_type = dt
        self._explicit = explicit
        self._address = src.address
        self._shape, self._strides, self._box, self._element_strides = shp, st, bx, es
        self._swizzle, self._interleave, self._l2_promotion, self._oob_fill = sw, il, l2, oob

    @staticmethod
    def _encode(
        address: int,
        dt: TensorMapDataType,
        shape: tuple[int, ...],
        strides: tuple[int, ...],
        box: tuple[int, ...],
        element_strides: tuple[int, ...],
        il: TensorMapInterleave,
        sw: TensorMapSwizzle,
        l2: TensorMapL2Promotion,
        oob: TensorMapFloatOOBFill,
    ) -> Any:
        """``cuTensorMapEncodeTiled`` with everything reversed to the driver's order."""
        func = "cuTensorMapEncodeTiled"
        fn = _cuTensorMapEncodeTiled
        if fn is None:
            raise _unsupported(func, func)
        args = (
            _raw_enum(func, "CUtensorMapDataType", "CU_TENSOR_MAP_DATA_TYPE_", dt),
            len(shape),
            address,
            _u64(shape[::-1]),  # globalDim: innermost first
            _u64(strides[-2::-1]),  # globalStrides: bytes, innermost first, rank - 1 of them
            _u32(box[::-1]),  # boxDim
            _u32(element_strides[::-1]),  # elementStrides
            _raw_enum(func, "CUtensorMapInterleave", "CU_TENSOR_MAP_INTERLEAVE_", il),
            _raw_enum(func, "CUtensorMapSwizzle", "CU_TENSOR_MAP_SWIZZLE_", sw),
            _raw_enum(func, "CUtensorMapL2promotion", "CU_TENSOR_MAP_L2_PROMOTION_", l2),
            _raw_enum(func, "CUtensorMapFloatOOBfill", "CU_TENSOR_MAP_FLOAT_OOB_FILL_", oob),
        )
        _driver_ready()
        r = fn(*args)
        if r[0] != _SUCCESS:
            raise error_for(
                r[0],
                fn,
                f"{dt.name}, shape {shape}, strides {strides}, box {box}, element_strides "
                f"{element_strides}, {il.name}, {sw.name}, {l2.name}, {oob.name} (numpy order)",
            )
        return r[1]

    def _read_bytes(self) -> Any:
        return _TensorMapBytes.from_buffer_copy(
            ctypes.string_at(self._map.getPtr(), TENSOR_MAP_BYTES)
        )

    def replace_address(self, buffer: Any) -> None:
        """Point the map at another buffer (``cuTensorMapReplaceAddress``), e.g. a reallocation.

        Everything else stays: the new buffer must hold elements of the map's data type
        (of the same dtype, unless ``data_type`` was given: then of the same size), be
        aligned as the map requires (16 bytes, 32 with ``INTERLEAVE_32B``) and be large
        enough for the map's shape and strides. The map then keeps the new buffer, and
        lets the old one go. Launches prepared and graph nodes made before this keep the
        bytes packed then, with the old address: re-pack them (``LaunchPlan.set_arg``,
        ``GraphExec.set_kernel_args``) or keep the old buffer alive yourself. Allocates
        nothing on the device and does not synchronise.

        Raises
        ------
        TypeError
            ``buffer`` is not a device array, or holds other elements.
        ValueError
            The address is misaligned or NULL, or the buffer is too small.
        NotSupportedError
            The installed cuda-bindings lacks ``cuTensorMapReplaceAddress``.
        """
        src = _source(buffer)
        dt = _data_type(src.dtype, self._explicit)
        if dt is not self._data_type or (self._explicit is None and src.dtype != self._dtype):
            raise TypeError(
                f"the map holds {self._dtype} elements ({self._data_type.name}); the new "
                f"buffer holds {src.dtype}"
            )
        _check_address(src.address, self._interleave)
        size = _ELEMENT_SIZE[dt]
        _check_extent(_span(self._shape, self._strides, size), src.extent, type(buffer).__name__)
        func = "cuTensorMapReplaceAddress"
        fn = _cuTensorMapReplaceAddress
        if fn is None:
            raise _unsupported(func, func)
        _driver_ready()
        r = fn(self._map, src.address)
        if r[0] != _SUCCESS:
            raise error_for(r[0], fn, f"address {src.address:#x}")
        self._bytes = self._read_bytes()
        self._address = src.address
        self._source, self._lease = src.keep, src.lease

    # -- what it is (read-only: the map was encoded with these) ---------------------------------
    @property
    def address(self) -> int:
        """The global address the map points at (the buffer's)."""
        return self._address

    @property
    def shape(self) -> tuple[int, ...]:
        """The tensor's shape in elements, numpy order."""
        return self._shape

    @property
    def strides(self) -> tuple[int, ...]:
        """The tensor's strides in bytes, numpy order (the last is the element size)."""
        return self._strides

    @property
    def box(self) -> tuple[int, ...]:
        """The box (tile) shape in elements, numpy order."""
        return self._box

    @property
    def element_strides(self) -> tuple[int, ...]:
        """The traversal step in each dimension, numpy order."""
        return self._element_strides

    @property
    def swizzle(self) -> TensorMapSwizzle:
        """The shared-memory swizzle."""
        return self._swizzle

    @property
    def interleave(self) -> TensorMapInterleave:
        """The interleaved layout."""
        return self._interleave

    @property
    def l2_promotion(self) -> TensorMapL2Promotion:
        """The L2 fetch size."""
        return self._l2_promotion

    @property
    def oob_fill(self) -> TensorMapFloatOOBFill:
        """What fills a box's elements outside the tensor."""
        return self._oob_fill

    @property
    def data_type(self) -> TensorMapDataType:
        """The element type encoded in the map."""
        return self._data_type

    @property
    def dtype(self) -> np.dtype[Any]:
        """The numpy dtype of the buffer the map was made from."""
        return self._dtype

    @property
    def element_size(self) -> int:
        """Bytes per element of :attr:`data_type`."""
        return _ELEMENT_SIZE[self._data_type]

    @property
    def source(self) -> Any:
        """The object the map was made from (kept alive by the map)."""
        return self._source

    @property
    def tensor_map(self) -> Any:
        """The encoded ``cuda.bindings.driver.CUtensorMap``, for raw driver calls."""
        return self._map

    def __bytes__(self) -> bytes:
        """The 128 bytes a kernel receives."""
        return bytes(self._bytes)

    def _mapped(self) -> DeviceMemory | None:
        src = self._source
        return src if isinstance(src, DeviceMemory) else None

    def __cudriver_kernel_arg__(self) -> Any:
        """The kernel-argument hook of ``pack_arg``: the 128 bytes as a ctypes array."""
        return self._bytes

    def __repr__(self) -> str:
        opts = ("swizzle", "interleave", "l2_promotion", "oob_fill")
        tail = "".join(f" {n}={v.name}" for n in opts if (v := getattr(self, n)))
        return (
            f"<cudriver.TensorMap {self._data_type.name} shape={self._shape} box={self._box}"
            f"{tail} at {self._address:#x}>"
        )
