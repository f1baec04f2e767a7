"""Strided views: the layout of any array's memory (shape, strides, dtype), without copying.

:class:`StridedView` reads what a producer describes through one of three protocols,
in this order: a numpy array (host memory, read directly); ``__dlpack__`` with
``__dlpack_device__`` (any DLPack producer: PyTorch, CuPy, JAX, cudriver's own
buffers; parsed by ``_dlpack.parse_tensor``, the parser ``DeviceBuffer.from_dlpack``
uses too); ``__cuda_array_interface__`` (parsed by ``_copy.read_cai``, the parser of
the copy operands); else ``__array_interface__`` or the buffer protocol (host memory).

The stream rules are each protocol's own, with the consumer's stream given as
``stream=`` (None: the legacy default stream; -1: no ordering):

- DLPack: the consumer's stream goes to ``__dlpack__(stream=...)`` (for host memory,
  ``stream=None``, as the array API says) and the producer orders its work before it.
- CUDA Array Interface v3: the consumer's stream is made to wait for the producer's
  ``stream`` entry (``cuEventRecord`` on the producer's stream, ``cuStreamWaitEvent``
  on the consumer's: ``_copy.order_after``), at construction; every copy made from
  the view waits for it again on the copy's own stream, as the copies of CAI objects
  do.

Copies (:meth:`StridedView.copy_to`, :meth:`StridedView.copy_from`) are one
``cuMemcpy2DAsync`` or ``cuMemcpy3DAsync`` when the layouts of both sides can be
said that way (``copy_shape``); otherwise a ValueError says why. Kernel arguments:
``_launch._packing`` packs a device view as its :attr:`~StridedView.ptr` and refuses
a host view.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple, cast

import numpy as np
import numpy.typing as npt
from cuda.bindings import driver as _drv

from .._context.device import Device, enter_context, kept_primary, leave_context
from .._lifetime._coerce import DeviceMemory, Memory, StreamLike, stream_handle
from .._runtime._bindings import SUCCESS
from .._runtime._init import init
from ..errors import CudaError, error_for
from . import _dlpack
from ._copy import Operand, memory_side, operand, order_after, read_cai, run_copy

__all__ = ["StridedView", "CopyShape", "copy_shape"]

_DEVICE_TYPES = (_dlpack.KDLCUDA, _dlpack.KDLCUDAMANAGED)
_HOST_TYPES = (_dlpack.KDLCPU, _dlpack.KDLCUDAHOST)
_LEGACY = _drv.CUstream(1)
_ATTR_ORDINAL = _drv.CUpointer_attribute.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
_UNKNOWN = -1  # a device view whose ordinal the driver is asked for on first use


def _c_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """C-order strides in elements."""
    out = [1] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        out[i] = out[i + 1] * shape[i + 1]
    return tuple(out)


def _element_strides(strides: tuple[int, ...], itemsize: int, what: str) -> tuple[int, ...]:
    """Byte strides as element strides; ValueError when one is not a multiple of the item."""
    bad = [st for st in strides if st % itemsize]
    if bad:
        raise ValueError(
            f"{what} has byte strides {strides}, not all multiples of its item size "
            f"({itemsize} bytes): a StridedView counts strides in elements"
        )
    return tuple(st // itemsize for st in strides)


def _contiguous(shape: tuple[int, ...], strides: tuple[int, ...], c: bool) -> bool:
    if math.prod(shape) == 0:
        return True
    expected = 1
    pairs = list(zip(shape, strides, strict=True))
    for dim, st in reversed(pairs) if c else pairs:
        if dim != 1 and st != expected:
            return False
        expected *= dim
    return True


# -- copies: which layouts a 2D/3D copy can say ---------------------------------------------
class CopyShape(NamedTuple):
    """A copy as ``cuMemcpy3D`` says it (source and destination sides).

    ``depth`` slices of ``height`` rows of ``width_bytes``; per side, the row pitch in
    bytes and the slice's height in rows, from each side's lowest address.
    """

    width_bytes: int
    height: int
    depth: int
    src_pitch: int
    src_rows: int
    dst_pitch: int
    dst_rows: int


def _try_order(dims: list[tuple[int, int, int]], itemsize: int) -> tuple[CopyShape | None, str]:
    """The copy of ``dims`` (extent, src stride, dst stride in bytes), outermost first."""
    merged: list[list[int]] = []  # innermost first: [extent, stride a, stride b]
    for n, sa, sb in reversed(dims):
        if merged:
            m = merged[-1]
            if sa == m[0] * m[1] and sb == m[0] * m[2]:
                m[0] *= n  # contiguous with the dimension inside it, on both sides
                continue
        merged.append([n, sa, sb])
    if not merged:
        merged = [[1, itemsize, itemsize]]
    n0, sa0, sb0 = merged[0]
    for side, st in (("src", sa0), ("dst", sb0)):
        if st != itemsize:
            return None, (
                f"the innermost stride of {side} is {st // itemsize} elements ({st} "
                "bytes), so its rows are not contiguous: not expressible as a 2D/3D copy"
            )
    width = n0 * itemsize
    if len(merged) > 3:
        return None, (
            f"its layout has {len(merged)} strided dimensions once the contiguous ones are "
            "merged; a 2D/3D copy says at most 3"
        )
    n1, sa1, sb1 = merged[1] if len(merged) > 1 else [1, width, width]
    for side, st in (("src", sa1), ("dst", sb1)):
        if st < width:
            return None, (
                f"the rows of {side} overlap (row stride {st} bytes < row of {width} bytes)"
            )
    if len(merged) < 3:
        return CopyShape(width, n1, 1, sa1, n1, sb1, n1), ""
    n2, sa2, sb2 = merged[2]
    rows = []
    for side, st, pitch in (("src", sa2, sa1), ("dst", sb2, sb1)):
        if st % pitch or st // pitch < n1:
            return None, (
                f"the slice stride of {side} ({st} bytes) is not a whole number of "
                f"row strides ({pitch} bytes) of at least {n1} rows"
            )
        rows.append(st // pitch)
    return CopyShape(width, n1, n2, sa1, rows[0], sb1, rows[1]), ""


def copy_shape(
    shape: tuple[int, ...],
    src_strides: tuple[int, ...],
    dst_strides: tuple[int, ...],
    itemsize: int,
) -> CopyShape:
    """How a copy between two layouts of ``shape`` (strides in bytes) is one 2D/3D copy.

    Pure. Dimensions of extent 1 are dropped, adjacent dimensions contiguous on both
    sides are merged, and the dimensions may be reordered (the same way on both sides:
    the natural order first, then by either side's strides), so a transposed view
    copies to a transposed destination as one contiguous block. What remains must be
    rows of contiguous elements (innermost stride = item size on both sides), at most
    3 dimensions, rows that do not overlap, and slices a whole number of rows apart.
    ``shape`` must not be empty (size 0: no copy at all).

    Raises
    ------
    ValueError
        A negative or zero stride, or a layout no 2D/3D copy can say; the message says
        which, and suggests making the data contiguous first.
    """
    dims = [(n, a, b) for n, a, b in zip(shape, src_strides, dst_strides, strict=True) if n != 1]
    for n, a, b in dims:
        for side, st in (("src", a), ("dst", b)):
            if st < 0:
                raise ValueError(
                    f"{side} has a negative stride ({st} bytes, shape {shape}): copies "
                    "take positive strides only; copy it to a contiguous array first (e.g. "
                    "numpy.ascontiguousarray, tensor.contiguous())"
                )
            if st == 0:
                raise ValueError(
                    f"{side} has stride 0 over an extent of {n} (a broadcast): a "
                    "2D/3D copy cannot repeat elements; make it contiguous first"
                )
    orders = [dims]
    for i in (1, 2):
        by = sorted(dims, key=lambda d: d[i], reverse=True)
        if by not in orders:
            orders.append(by)
    why = ""
    for order in orders:
        found, reason = _try_order(order, itemsize)
        if found is not None:
            return found
        why = why or reason
    raise ValueError(f"{why}; make it contiguous first")


# -- the view ----------------------------------------------------------------------------------
class StridedView:
    """A strided view of another object's memory: shape, strides, dtype, device (no copy).

    Made from any object with ``__dlpack__`` (PyTorch, CuPy, JAX, cudriver buffers),
    ``__cuda_array_interface__`` (Numba, CuPy, PyTorch), or host memory (a numpy array,
    ``__array_interface__``, the buffer protocol): transposed, sliced and
    negative-stride layouts included. The view keeps the producer (``obj``) and,
    for DLPack, the consumed tensor alive; the producer's deleter runs when the view is
    gone. The equivalent of cuda.core's ``StridedMemoryView``.

    A device view goes wherever a device pointer goes (kernel arguments, launch plans,
    graph kernel nodes) as :attr:`ptr`, the address of element ``[0, ..., 0]``; pass
    :attr:`shape` and :attr:`strides` as ints beside it. A host view passed to a kernel
    is refused (TypeError). Copies to and from contiguous memory, or another view, are
    one ``cuMemcpy2DAsync``/``cuMemcpy3DAsync`` where the layout allows
    (:meth:`copy_to`, :meth:`copy_from`).

    Parameters
    ----------
    obj
        The producer.
    stream
        The stream the view will be used on, for the producer's ordering: None (the
        legacy default stream), a :class:`~cudriver.Stream` or any stream-like object
        or handle, or -1 for no ordering. DLPack: passed to ``__dlpack__(stream=...)``
        for device memory (``stream=None`` for host memory). CUDA Array Interface: the
        stream waits for the producer's ``stream`` entry (``cuEventRecord``,
        ``cuStreamWaitEvent``, in the current context or else the device's primary
        one). The host never waits.

    Notes
    -----
    Construction makes no driver call except that CAI ordering (and, for a CAI view,
    :attr:`device` asks ``cuPointerGetAttribute`` once). Allocates nothing on the
    device. ``readonly`` comes from DLPack 1.x's ``DLPACK_FLAG_BITMASK_READ_ONLY``, CAI's
    ``data[1]``, or a read-only numpy array or buffer; a read-only view is refused as a
    copy destination, and is not checked as a kernel argument. Zero-size views are
    allowed (their :attr:`ptr` may be 0); their copies do nothing. Negative strides are
    allowed (``ptr`` is element 0, not the lowest address: see :attr:`span`), and
    refused by copies. A producer whose DLPack tensor is refused (CuPy 14 exports
    negative strides as huge unsigned numbers) but which has a
    ``__cuda_array_interface__`` is read through that instead.

    Raises
    ------
    TypeError
        ``obj`` speaks none of the protocols, or holds Python objects.
    BufferError
        A DLPack tensor that cannot be read (dtype numpy lacks, DLPack 2.x, a device
        that is neither CUDA nor host memory).
    ValueError
        A malformed CUDA Array Interface, or byte strides that are not whole elements.
    """

    __slots__ = (
        "__weakref__",
        "_device",
        "_dtype",
        "_owner",
        "_ptr",
        "_readonly",
        "_shape",
        "_stream",
        "_strides",
        "obj",
    )

    #: The producer, kept alive by the view.
    obj: object
    _ptr: int
    _shape: tuple[int, ...]
    _strides: tuple[int, ...]
    _dtype: np.dtype[Any]
    _readonly: bool
    _device: int | None
    _stream: int | None
    _owner: object

    def __init__(self, obj: object, *, stream: StreamLike = None) -> None:
        self.obj = obj
        self._stream = None
        if isinstance(obj, StridedView):
            self._set(obj._ptr, obj._shape, obj._strides, obj._dtype, obj._readonly)
            self._device, self._stream, self._owner = obj._device, obj._stream, obj._owner
            return
        if isinstance(obj, np.ndarray):
            self._from_host(obj, obj)
            return
        dev = _dlpack.dlpack_device(obj)
        cai = getattr(obj, "__cuda_array_interface__", None)
        if dev is not None:
            try:
                self._from_dlpack(obj, dev, stream)
                return
            except BufferError:
                # A tensor that cannot be read (CuPy 14 exports negative strides
                # divided as unsigned numbers: measured) is read through the CAI
                # when the producer has one; a refused capsule stays its producer's.
                if cai is None:
                    raise
        if cai is not None:
            self._from_cai(cai, stream)
            return
        if hasattr(obj, "__array_interface__"):
            self._from_host(np.asarray(obj), obj)
            return
        try:
            mv = memoryview(obj)  # type: ignore[arg-type]
        except TypeError:
            raise TypeError(
                f"a StridedView takes an object with __dlpack__, __cuda_array_interface__, "
                f"__array_interface__ or the buffer protocol, not {type(obj).__name__}"
            ) from None
        self._from_host(np.asarray(mv), obj)

    def _set(
        self,
        ptr: int,
        shape: tuple[int, ...],
        strides: tuple[int, ...],
        dtype: np.dtype[Any],
        readonly: bool,
    ) -> None:
        self._ptr = ptr
        self._shape = shape
        self._strides = strides
        self._dtype = dtype
        self._readonly = readonly

    def _from_host(self, a: npt.NDArray[Any], obj: object) -> None:
        what = type(obj).__name__
        if a.dtype.hasobject:
            raise TypeError(f"{what} holds Python objects (dtype {a.dtype}): no memory to view")
        strides = _element_strides(tuple(a.strides), a.dtype.itemsize, what)
        ptr = int(a.__array_interface__["data"][0])
        self._set(ptr, tuple(a.shape), strides, a.dtype, not a.flags.writeable)
        self._device = None
        self._owner = a  # the array (or the memoryview under it) keeps the exporter

    def _from_dlpack(self, obj: object, dev: tuple[int, int], stream: StreamLike) -> None:
        what = f"the DLPack tensor of {type(obj).__name__}"
        if dev[0] not in _DEVICE_TYPES + _HOST_TYPES:
            raise BufferError(
                f"{type(obj).__name__} is on {_dlpack._device_name(dev)}: a StridedView reads "
                "CUDA device, managed and host memory"
            )
        tensor, owner = _dlpack.import_tensor(obj, dev, stream)
        kind = tensor.device[0]
        if kind not in _DEVICE_TYPES + _HOST_TYPES:
            raise BufferError(f"{what} describes memory on {_dlpack._device_name(tensor.device)}")
        shape = tensor.shape
        strides = tensor.strides if tensor.strides is not None else _c_strides(shape)
        self._set(tensor.address, shape, strides, tensor.dtype, tensor.readonly)
        self._device = tensor.device[1] if kind in _DEVICE_TYPES else None
        self._owner = owner

    def _from_cai(self, cai: object, stream: StreamLike) -> None:
        what = type(self.obj).__name__
        f = read_cai(cai, what)
        itemsize = f.dtype.itemsize
        strides = _c_strides(f.shape)
        if f.strides is not None:
            strides = _element_strides(f.strides, itemsize, what)
        if math.prod(f.shape):
            lo, hi = _dlpack.extent(f.shape, strides)
            if f.ptr + lo * itemsize < 0 or f.ptr + (hi + 1) * itemsize > 1 << 64:
                raise ValueError(f"{what} describes memory beyond the 64-bit address space")
        self._set(f.ptr, f.shape, strides, f.dtype, f.readonly)
        self._device = _UNKNOWN
        self._owner = None
        no_order = isinstance(stream, int) and not isinstance(stream, bool) and stream == -1
        if f.stream is None or no_order:
            return
        self._stream = other = f.stream
        queue = _LEGACY if stream is None else stream_handle(stream)
        q = int(queue)
        if other == q or (other in (0, 1) and q in (0, 1)):
            return  # the same stream: nothing to order (and no driver call)
        self._in_context(lambda: order_after(queue, other), None)

    # -- what it describes ----------------------------------------------------------------
    @property
    def ptr(self) -> int:
        """The address of element ``[0, ..., 0]`` (may be 0 for a zero-size view)."""
        return self._ptr

    @property
    def shape(self) -> tuple[int, ...]:
        """Extents, outermost first."""
        return self._shape

    @property
    def strides(self) -> tuple[int, ...]:
        """Strides in elements (may be negative or zero)."""
        return self._strides

    @property
    def strides_bytes(self) -> tuple[int, ...]:
        """Strides in bytes."""
        n = self._dtype.itemsize
        return tuple(st * n for st in self._strides)

    @property
    def dtype(self) -> np.dtype[Any]:
        """The element type, as a numpy dtype."""
        return self._dtype

    @property
    def itemsize(self) -> int:
        """Bytes per element."""
        return self._dtype.itemsize

    @property
    def ndim(self) -> int:
        """The number of dimensions."""
        return len(self._shape)

    @property
    def size(self) -> int:
        """The number of elements."""
        return math.prod(self._shape)

    @property
    def nbytes(self) -> int:
        """``size * itemsize``: the bytes of the elements (a contiguous copy's size)."""
        return self.size * self._dtype.itemsize

    @property
    def span(self) -> tuple[int, int]:
        """``(lowest address, bytes)`` of the memory the elements lie in (gaps included).

        ``(ptr, 0)`` for a zero-size view. With negative strides the lowest address is
        below :attr:`ptr`.
        """
        if self.size == 0:
            return self._ptr, 0
        lo, hi = _dlpack.extent(self._shape, self._strides)
        n = self._dtype.itemsize
        return self._ptr + lo * n, (hi - lo + 1) * n

    @property
    def readonly(self) -> bool:
        """Whether the producer says the memory must not be written."""
        return self._readonly

    @property
    def is_device(self) -> bool:
        """True for CUDA device (or managed) memory, False for host memory."""
        return self._device is not None

    @property
    def device(self) -> int | None:
        """The device ordinal; None for host memory (and for a zero-size CAI view).

        For a CUDA Array Interface view, asked once (``cuPointerGetAttribute``).
        """
        if self._device == _UNKNOWN:
            self._device = self._ordinal()
        return self._device

    @property
    def is_c_contiguous(self) -> bool:
        """Whether the elements lie in C order without gaps."""
        return _contiguous(self._shape, self._strides, True)

    @property
    def is_f_contiguous(self) -> bool:
        """Whether the elements lie in Fortran order without gaps."""
        return _contiguous(self._shape, self._strides, False)

    def _ordinal(self) -> int | None:
        if self._ptr == 0:
            return None
        init()
        r = _drv.cuPointerGetAttribute(_ATTR_ORDINAL, self._ptr)
        if r[0] is not SUCCESS:
            raise error_for(r[0], _drv.cuPointerGetAttribute)
        return int(r[1])

    def _in_context(self, fn: Callable[[], None], other: object) -> None:
        """Call ``fn()`` with a context current.

        ``other``'s context when it is a device buffer, else the current one, else the
        primary context of this view's device (device 0 for host views).
        """
        if isinstance(other, DeviceMemory):
            ctx = cast(Any, other).context
        else:
            init()
            r = _drv.cuCtxGetCurrent()
            if r[0] is SUCCESS and r[1] is not None and int(r[1]) != 0:
                fn()
                return
            try:
                ordinal = self.device
            except CudaError:  # memory the driver does not know: any context will do
                ordinal = None
            ctx = kept_primary(Device(0 if ordinal is None else ordinal))
        pushed = enter_context(ctx._live(), ctx._key)
        try:
            fn()
        finally:
            leave_context(pushed)

    # -- copies ----------------------------------------------------------------------------
    def copy_to(self, out: Any = None, *, stream: StreamLike = None) -> Any:
        """Copy the elements into ``out`` (a new numpy array when None) and return ``out``.

        One ``cuMemcpy2DAsync`` (or ``cuMemcpy3DAsync`` for three strided dimensions)
        where the layouts allow it (``copy_shape``); no temporary, no allocation
        but ``out``'s.

        Parameters
        ----------
        out
            None: a new host numpy array of the view's shape and dtype, its memory in
            the view's dimension order (C order for a C-ordered view, Fortran order for
            a transposed one), so that every view whose rows are contiguous copies.
            Else a :class:`StridedView` of the same shape and item size (wrap a strided
            destination in one), or any contiguous copy operand of ``nbytes`` bytes (a
            numpy array, a :class:`~cudriver.DeviceBuffer`, a
            :class:`~cudriver.PinnedBuffer`, a CAI object, a bytes-like object), seen as
            a C-ordered array of the view's shape.
        stream
            Enqueue on this stream and return at once (``out`` and the view must stay
            alive until the stream reaches the copy). Without it, the copy runs on the
            legacy default stream (or its stand-in while a capture is open) and has
            completed on return.

        Raises
        ------
        ValueError
            A layout no 2D/3D copy can say (innermost stride not 1 element, negative or
            zero strides, more than 3 strided dimensions): the message says which. Or
            sizes that differ, or a read-only destination.
        TypeError
            ``out`` is of an unsupported type.
        """
        if out is None:
            out = self._new_host_array()
        self._copy(self, out, stream, "out")
        return out

    def copy_from(self, src: Any, *, stream: StreamLike = None) -> None:
        """Copy ``src`` into the view's elements (``cuMemcpy2DAsync`` / ``cuMemcpy3DAsync``).

        ``src`` is a :class:`StridedView` of the same shape and item size, or a
        contiguous copy operand of :attr:`nbytes` bytes read as a C-ordered array of
        the view's shape (see :meth:`copy_to`). ``stream`` as for :meth:`copy_to`.

        Raises
        ------
        ValueError
            The view is read-only, the layouts cannot be said as a 2D/3D copy, or the
            sizes differ.
        """
        self._copy(src, self, stream, "src")

    def _new_host_array(self) -> npt.NDArray[Any]:
        # numpy's order "K": the dimensions in the view's stride order, largest first.
        order = sorted(range(self.ndim), key=lambda i: abs(self._strides[i]), reverse=True)
        base: npt.NDArray[Any] = np.empty(tuple(self._shape[i] for i in order), self._dtype)
        axes = [0] * self.ndim
        for k, i in enumerate(order):
            axes[i] = k
        out: npt.NDArray[Any] = base.transpose(axes)
        return out

    def _copy(self, src: Any, dst: Any, stream: StreamLike, role: str) -> None:
        """Copy from ``src`` to ``dst``, one of which is this view; ``role`` the other's."""
        if dst is self and self._readonly:
            raise ValueError(
                "this StridedView is read-only (its producer says so): it cannot be a copy "
                "destination"
            )
        other = src if dst is self else dst
        if isinstance(other, np.ndarray) and not other.flags.c_contiguous:
            # A strided numpy array (the new array of copy_to(), a transposed one): its
            # own layout, as a view of it.
            other = StridedView(other)
            if dst is self:
                src = other
            else:
                dst = other
        if isinstance(other, StridedView):
            if role == "out" and other._readonly:
                raise ValueError("out is a read-only StridedView: it cannot be a copy destination")
            if other._shape != self._shape or other.itemsize != self.itemsize:
                raise ValueError(
                    f"shape mismatch: {role} is {other._shape} of {other.itemsize}-byte items, "
                    f"this view {self._shape} of {self.itemsize}-byte items"
                )
            op = other._operand()
            o_strides = other.strides_bytes
        else:
            op = operand(other, writable=role == "out", role=role)
            if op[2] != self.nbytes:
                raise ValueError(
                    f"size mismatch: {role} has {op[2]} bytes, this StridedView's elements "
                    f"{self.nbytes} ({self._shape} of {self._dtype})"
                )
            n = self.itemsize
            o_strides = tuple(st * n for st in _c_strides(self._shape))
        if self.size == 0:
            return
        mine = self._operand()
        s_op, d_op = (op, mine) if dst is self else (mine, op)
        s_st, d_st = (
            (o_strides, self.strides_bytes) if dst is self else (self.strides_bytes, o_strides)
        )
        cs = copy_shape(self._shape, s_st, d_st, self.itemsize)
        if cs.depth == 1:
            p: Any = _drv.CUDA_MEMCPY2D()
            call: Any = _drv.cuMemcpy2DAsync
        else:
            p = _drv.CUDA_MEMCPY3D()
            p.Depth, p.srcHeight, p.dstHeight = cs.depth, cs.src_rows, cs.dst_rows
            call = _drv.cuMemcpy3DAsync
        memory_side(p, "src", s_op[0], s_op[1], s_op[3])
        memory_side(p, "dst", d_op[0], d_op[1], d_op[3])
        p.srcPitch, p.dstPitch = cs.src_pitch, cs.dst_pitch
        p.WidthInBytes, p.Height = cs.width_bytes, cs.height
        keep = (src, dst, s_op[3], d_op[3])
        ops = (s_op, d_op)
        what = "StridedView.copy_from" if dst is self else "StridedView.copy_to"
        self._in_context(lambda: run_copy(stream, keep, call, p, ops=ops, what=what), other)

    def _operand(self) -> Operand:
        """The view as a copy operand: its lowest address (strides are positive here)."""
        # The producer when it is a cudriver buffer: pinned while the copy is enqueued,
        # and pinned memory goes by its unified address (memory_side).
        obj = self.obj if isinstance(self.obj, Memory) else self
        return self.is_device, self._ptr, self.span[1], obj, self._stream

    def __repr__(self) -> str:
        where = "host" if self._device is None else f"device={self.device}"
        flags = " readonly" if self._readonly else ""
        return (
            f"<cudriver.StridedView {self._dtype} shape={self._shape} strides={self._strides} "
            f"{where}{flags} of {type(self.obj).__name__}>"
        )
