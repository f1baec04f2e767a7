"""Stream memory operations: wait on and write 32/64-bit values from a stream.

``cuStreamWriteValue32/64`` make a stream write a value to memory when it reaches
that point; ``cuStreamWaitValue32/64`` make it wait until a value in memory meets a
condition; ``cuStreamBatchMemOp`` enqueues several such operations at once. With
device-mapped pinned host memory they signal between the GPU and the host without a
host thread blocking in the driver, and with device memory between streams and
devices. All of them can be captured into graphs.

Addresses are given as a device buffer (any object with an int ``ptr`` or
``device_ptr`` and ``nbytes``, e.g. :class:`cudriver.DeviceBuffer`), a device-mapped
pinned buffer (its ``device_ptr`` is used), ``(buffer, byte_offset)``, an object with
``__cuda_array_interface__``, a ``CUdeviceptr`` or an int. Values, alignment, offsets
and the batch size are checked in Python before the driver is called.

The driver orders these operations only through memory: CUDA does not know that one
stream waits for another through them. Work that depends on such an order should also
express it with events where possible, or the scheduler may serialise work in an
order that deadlocks.
"""

from __future__ import annotations

import numbers
import operator
from collections.abc import Iterable
from enum import IntEnum
from typing import TYPE_CHECKING, Any, NoReturn

from cuda.bindings import driver as _drv

from . import _capture
from ._bindings import SUCCESS
from .device import DeviceAttribute
from .errors import NotSupportedError, make_error

if TYPE_CHECKING:
    from .context import Context
    from .device import Device

__all__ = ["MAX_BATCH_MEM_OPS", "MemOp", "MemOpType", "MemOpsMixin", "WaitCondition"]


class WaitCondition(IntEnum):
    """When a stream wait on a memory value ends (``CUstreamWaitValue_flags``).

    GEQ
        ``(int32_t)(*addr - value) >= 0``: the value reached ``value``, counting
        cyclically (wrap-around safe for counters).
    EQ
        ``*addr == value``.
    AND
        ``(*addr & value) != 0``.
    NOR
        ``~(*addr | value) != 0``; needs the device attribute
        ``CAN_USE_STREAM_WAIT_VALUE_NOR``.
    """

    GEQ = 0
    EQ = 1
    AND = 2
    NOR = 3


class MemOpType(IntEnum):
    """The kind of a :class:`MemOp` (``CUstreamBatchMemOpType``)."""

    WAIT_VALUE_32 = 1
    WRITE_VALUE_32 = 2
    FLUSH_REMOTE_WRITES = 3
    WAIT_VALUE_64 = 4
    WRITE_VALUE_64 = 5
    BARRIER = 6


WaitCondition.__module__ = "cudriver"
MemOpType.__module__ = "cudriver"

#: The most operations one ``cuStreamBatchMemOp`` call takes (the driver documents
#: "less than 256").
MAX_BATCH_MEM_OPS = 255

_WAIT_FLUSH = int(_drv.CUstreamWaitValue_flags.CU_STREAM_WAIT_VALUE_FLUSH)
_NO_BARRIER = int(_drv.CUstreamWriteValue_flags.CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER)
_BARRIER_GPU = int(_drv.CUstreamMemoryBarrier_flags.CU_STREAM_MEMORY_BARRIER_TYPE_GPU)
_BARRIER_SYS = int(_drv.CUstreamMemoryBarrier_flags.CU_STREAM_MEMORY_BARRIER_TYPE_SYS)
_WRITES = (MemOpType.WRITE_VALUE_32, MemOpType.WRITE_VALUE_64)
_U32 = 1 << 32
_U64 = 1 << 64

# Features an operation needs, as a bit mask, and the device attribute naming each.
_NEED_64 = 1
_NEED_NOR = 2
_NEED_FLUSH = 4
_FEATURES = (
    (_NEED_64, DeviceAttribute.CAN_USE_64_BIT_STREAM_MEM_OPS, "64-bit stream memory operations"),
    (_NEED_NOR, DeviceAttribute.CAN_USE_STREAM_WAIT_VALUE_NOR, "WaitCondition.NOR"),
    (_NEED_FLUSH, DeviceAttribute.CAN_FLUSH_REMOTE_WRITES, "flushing remote writes"),
)

_cuStreamWriteValue32 = _drv.cuStreamWriteValue32
_cuStreamWriteValue64 = _drv.cuStreamWriteValue64
_cuStreamWaitValue32 = _drv.cuStreamWaitValue32
_cuStreamWaitValue64 = _drv.cuStreamWaitValue64
_cuStreamBatchMemOp = _drv.cuStreamBatchMemOp


# -- validation -------------------------------------------------------------------------
def _value(value: Any, bits: int) -> int:
    if type(value) is int:
        v = value
    else:
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise TypeError(f"a memop value must be an int, not {type(value).__name__}")
        v = operator.index(value)
    if not 0 <= v < (1 << bits):
        raise ValueError(
            f"value {v} does not fit in an unsigned {bits}-bit integer "
            f"(0 <= value < 2**{bits}; for a negative value pass value & {(1 << bits) - 1:#x})"
        )
    return v


def _int_address(x: Any) -> int | None:
    """The address of an int-like (int, ``CUdeviceptr``, numpy integer), else None."""
    if isinstance(x, bool):
        raise TypeError("a bool is not a device address")
    if isinstance(x, int):
        return x
    if isinstance(x, _drv.CUdeviceptr):
        return int(x)
    if isinstance(x, numbers.Integral):  # numpy integers
        return operator.index(x)
    return None


def _base(buf: Any) -> tuple[int, int | None, Any]:
    """``(address, size in bytes or None, object to keep alive or None)`` of ``buf``."""
    a = _int_address(buf)
    if a is not None:
        return a, None, None
    dptr = getattr(buf, "device_ptr", None)
    if dptr is None and hasattr(buf, "device_ptr"):
        raise ValueError(
            f"{type(buf).__name__} has no device address: allocate pinned memory device-mapped "
            "(e.g. PinnedBuffer(n, mapped=True)) to use it in stream memory operations"
        )
    if dptr is None:
        dptr = getattr(buf, "ptr", None)
    size: Any
    if dptr is not None:
        a = _int_address(dptr)
        if a is None:
            raise TypeError(f"{type(buf).__name__}'s pointer is not an int: {dptr!r}")
        size = getattr(buf, "nbytes", None)
        return a, (int(size) if size is not None else None), buf
    cai = getattr(buf, "__cuda_array_interface__", None)
    if isinstance(cai, dict):
        a = int(cai["data"][0])
        size = getattr(buf, "nbytes", None)
        return a, (int(size) if size is not None else None), buf
    raise TypeError(
        f"not a device address: {type(buf).__name__} (pass a device buffer, a device-mapped "
        "pinned buffer, (buffer, byte_offset), a CUdeviceptr or an int)"
    )


#: cudriver.memory.DeviceBuffer, set when that module is imported: the fast path of
#: the single memory operations takes its handle without resolving an address.
_DEVICE_BUFFER: Any = None


def _address(addr: Any, width: int) -> tuple[int, Any]:
    """``(address, object to keep alive or None)`` for a ``width``-byte operation."""
    if type(addr) is int:
        a = addr
        obj = None
    elif isinstance(addr, tuple):
        if len(addr) != 2:
            raise TypeError(f"an address tuple is (buffer, byte_offset), not {len(addr)} items")
        buf, off = addr
        if isinstance(off, bool) or not isinstance(off, numbers.Integral):
            raise TypeError(f"byte offset must be an int, not {type(off).__name__}")
        off = operator.index(off)
        if off < 0:
            raise ValueError(f"byte offset must be >= 0, not {off}")
        a, size, obj = _base(buf)
        if size is not None and off + width > size:
            raise ValueError(
                f"byte offset {off} + {width} bytes is beyond the end of the {size}-byte buffer"
            )
        a += off
    else:
        a, size, obj = _base(addr)
        if size is not None and width > size:
            raise ValueError(f"the {size}-byte buffer is smaller than the {width}-byte value")
    if not 0 < a < _U64:
        raise ValueError(f"device address {a:#x} is out of range (NULL or beyond 64 bits)")
    if a & (width - 1):
        raise ValueError(
            f"device address {a:#x} is not {width}-byte aligned, as a {width * 8}-bit "
            "memory operation needs"
        )
    return a, obj


_REFUSED = (
    int(_drv.CUresult.CUDA_ERROR_INVALID_VALUE),
    int(_drv.CUresult.CUDA_ERROR_NOT_SUPPORTED),
)


def _write_error(status: Any, func: str, no_memory_barrier: bool) -> Exception:
    """The error for a failed write; explains a refused ``NO_MEMORY_BARRIER`` flag."""
    if no_memory_barrier and int(status) in _REFUSED:
        return NotSupportedError(
            status,
            func,
            "the driver refused CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER: the stream "
            "memory operations of CUDA 12 and later (the v2 API that cuda.bindings "
            "calls) document it as unsupported; drop no_memory_barrier=True",
        )
    return make_error(status, func)


def _condition(cond: Any) -> int:
    if isinstance(cond, bool) or not isinstance(cond, int):
        raise TypeError(f"cond must be a cudriver.WaitCondition, not {type(cond).__name__}")
    c = int(cond)
    if not 0 <= c <= 3:
        raise ValueError(
            f"cond {c} is not a WaitCondition (GEQ, EQ, AND or NOR); pass flush=True "
            "for CU_STREAM_WAIT_VALUE_FLUSH"
        )
    return c


# -- MemOp ---------------------------------------------------------------------------------
class MemOp:
    """One operation for :meth:`Stream.batch_mem_ops` (a ``CUstreamBatchMemOpParams``).

    Made by the class methods :meth:`write32`, :meth:`write64`, :meth:`wait32`,
    :meth:`wait64`, :meth:`flush` and :meth:`barrier`, which validate their arguments
    (value width, alignment, offsets) at once and build the driver's parameter
    structure once, so a batch can be enqueued many times cheaply. Immutable.
    """

    __slots__ = ("_address", "_flags", "_kind", "_needs", "_params", "_target", "_value")

    _kind: MemOpType
    _address: int | None
    _value: int | None
    _flags: int
    _target: Any
    _needs: int
    _params: Any

    def __init__(self) -> None:
        raise TypeError("use MemOp.write32(), write64(), wait32(), wait64(), flush() or barrier()")

    @classmethod
    def _new(
        cls,
        kind: MemOpType,
        address: int | None,
        value: int | None,
        flags: int,
        target: Any,
        needs: int,
    ) -> MemOp:
        self = object.__new__(cls)
        self._kind = kind
        self._address = address
        self._value = value
        self._flags = flags
        self._target = target
        self._needs = needs
        p = _drv.CUstreamBatchMemOpParams()
        if kind in (MemOpType.WAIT_VALUE_32, MemOpType.WAIT_VALUE_64):
            sub = p.waitValue
        elif kind in (MemOpType.WRITE_VALUE_32, MemOpType.WRITE_VALUE_64):
            sub = p.writeValue
        elif kind is MemOpType.FLUSH_REMOTE_WRITES:
            sub = p.flushRemoteWrites
        else:
            sub = p.memoryBarrier
        sub.operation = _drv.CUstreamBatchMemOpType(int(kind))
        if address is not None:
            sub.address = address
            if kind in (MemOpType.WAIT_VALUE_32, MemOpType.WRITE_VALUE_32):
                sub.value = value
            else:
                sub.value64 = value
        sub.flags = flags
        self._params = p
        return self

    # -- constructors --------------------------------------------------------------------
    @classmethod
    def write32(cls, addr: Any, value: int, *, no_memory_barrier: bool = False) -> MemOp:
        """Write a 32-bit ``value`` to ``addr`` (like :meth:`Stream.write_value32`).

        ``no_memory_barrier`` is documented as unsupported by the CUDA 12+ driver; a
        batch the driver refuses for it raises :class:`~cudriver.NotSupportedError`.
        """
        a, obj = _address(addr, 4)
        v = _value(value, 32)
        flags = _NO_BARRIER if no_memory_barrier else 0
        return cls._new(MemOpType.WRITE_VALUE_32, a, v, flags, obj, 0)

    @classmethod
    def write64(cls, addr: Any, value: int, *, no_memory_barrier: bool = False) -> MemOp:
        """Write a 64-bit ``value`` to ``addr`` (like :meth:`Stream.write_value64`).

        Needs the device attribute ``CAN_USE_64_BIT_STREAM_MEM_OPS``.
        """
        a, obj = _address(addr, 8)
        v = _value(value, 64)
        flags = _NO_BARRIER if no_memory_barrier else 0
        return cls._new(MemOpType.WRITE_VALUE_64, a, v, flags, obj, _NEED_64)

    @classmethod
    def wait32(
        cls,
        addr: Any,
        value: int,
        cond: WaitCondition | int = WaitCondition.GEQ,
        *,
        flush: bool = False,
    ) -> MemOp:
        """Wait until the 32-bit value at ``addr`` meets ``cond`` against ``value``.

        Like :meth:`Stream.wait_value32`.
        """
        a, obj = _address(addr, 4)
        v = _value(value, 32)
        c = _condition(cond)
        needs = (_NEED_NOR if c == WaitCondition.NOR else 0) | (_NEED_FLUSH if flush else 0)
        flags = c | (_WAIT_FLUSH if flush else 0)
        return cls._new(MemOpType.WAIT_VALUE_32, a, v, flags, obj, needs)

    @classmethod
    def wait64(
        cls,
        addr: Any,
        value: int,
        cond: WaitCondition | int = WaitCondition.GEQ,
        *,
        flush: bool = False,
    ) -> MemOp:
        """Wait until the 64-bit value at ``addr`` meets ``cond`` against ``value``.

        Like :meth:`Stream.wait_value64`.
        """
        a, obj = _address(addr, 8)
        v = _value(value, 64)
        c = _condition(cond)
        needs = _NEED_64 | (_NEED_NOR if c == WaitCondition.NOR else 0)
        needs |= _NEED_FLUSH if flush else 0
        flags = c | (_WAIT_FLUSH if flush else 0)
        return cls._new(MemOpType.WAIT_VALUE_64, a, v, flags, obj, needs)

    @classmethod
    def flush(cls) -> MemOp:
        """Flush remote writes (``CU_STREAM_MEM_OP_FLUSH_REMOTE_WRITES``).

        Makes writes by remote agents (e.g. RDMA from a NIC) that reached the GPU before
        this point visible to later work. Needs the device attribute
        ``CAN_FLUSH_REMOTE_WRITES``.
        """
        return cls._new(MemOpType.FLUSH_REMOTE_WRITES, None, None, 0, None, _NEED_FLUSH)

    @classmethod
    def barrier(cls, *, gpu_scope: bool = False) -> MemOp:
        """A memory barrier (``CU_STREAM_MEM_OP_BARRIER``).

        Parameters
        ----------
        gpu_scope
            Order memory only among work on this GPU
            (``CU_STREAM_MEMORY_BARRIER_TYPE_GPU``) instead of system-wide
            (``CU_STREAM_MEMORY_BARRIER_TYPE_SYS``, the default).
        """
        flags = _BARRIER_GPU if gpu_scope else _BARRIER_SYS
        return cls._new(MemOpType.BARRIER, None, None, flags, None, 0)

    # -- read-only view --------------------------------------------------------------------
    @property
    def kind(self) -> MemOpType:
        """The operation's :class:`MemOpType`."""
        return self._kind

    @property
    def address(self) -> int | None:
        """The device address it reads or writes (None for flush and barrier)."""
        return self._address

    @property
    def value(self) -> int | None:
        """The value written or compared with (None for flush and barrier)."""
        return self._value

    @property
    def flags(self) -> int:
        """The driver flags (wait condition and flush bit, write flags, barrier type)."""
        return self._flags

    @property
    def condition(self) -> WaitCondition | None:
        """A wait's :class:`WaitCondition` (None for other operations)."""
        if self._kind in (MemOpType.WAIT_VALUE_32, MemOpType.WAIT_VALUE_64):
            return WaitCondition(self._flags & 3)
        return None

    @property
    def params(self) -> Any:
        """The ``cuda.bindings.driver.CUstreamBatchMemOpParams``, for raw calls."""
        return self._params

    def _key(self) -> tuple[int, int | None, int | None, int]:
        return (int(self._kind), self._address, self._value, self._flags)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MemOp):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        k = self._kind
        if k is MemOpType.FLUSH_REMOTE_WRITES:
            return "MemOp.flush()"
        if k is MemOpType.BARRIER:
            return f"MemOp.barrier(gpu_scope={self._flags == _BARRIER_GPU})"
        bits = 32 if k in (MemOpType.WAIT_VALUE_32, MemOpType.WRITE_VALUE_32) else 64
        addr = f"{self._address:#x}"
        if k in (MemOpType.WRITE_VALUE_32, MemOpType.WRITE_VALUE_64):
            nb = ", no_memory_barrier=True" if self._flags & _NO_BARRIER else ""
            return f"MemOp.write{bits}({addr}, {self._value}{nb})"
        cond = WaitCondition(self._flags & 3).name
        fl = ", flush=True" if self._flags & _WAIT_FLUSH else ""
        return f"MemOp.wait{bits}({addr}, {self._value}, WaitCondition.{cond}{fl})"

    def __reduce__(self) -> NoReturn:
        raise TypeError("a MemOp refers to device memory of this process and cannot be pickled")


MemOp.__module__ = "cudriver"


def _check_ops(ops: Any) -> list[MemOp]:
    """Validate a batch: a non-empty sequence of at most MAX_BATCH_MEM_OPS MemOps."""
    lst = ops if isinstance(ops, list) else list(ops)
    n = len(lst)
    if n == 0:
        raise ValueError("batch_mem_ops needs at least one MemOp")
    if n > MAX_BATCH_MEM_OPS:
        raise ValueError(
            f"{n} memory operations in one batch: cuStreamBatchMemOp takes at most "
            f"{MAX_BATCH_MEM_OPS}; split the batch"
        )
    for op in lst:
        if not isinstance(op, MemOp):
            raise TypeError(f"batch_mem_ops takes MemOp objects, not {type(op).__name__}")
    return lst


# -- the Stream mixin ------------------------------------------------------------------------
class MemOpsMixin:
    """Stream memory operations for :class:`~cudriver.Stream`."""

    __slots__ = ()

    if TYPE_CHECKING:
        _h: Any
        _context: Context | None

        @property
        def device(self) -> Device: ...

        def _raise_closed(self) -> NoReturn: ...

    def _memop_require(self, needs: int, func: str) -> None:
        ctx = self._context
        dev = ctx._device if ctx is not None and ctx._device is not None else self.device
        for bit, attr, what in _FEATURES:
            if needs & bit and not dev.attribute(attr):
                raise NotSupportedError(
                    _drv.CUresult.CUDA_ERROR_NOT_SUPPORTED,
                    func,
                    f"{what} need the device attribute CU_DEVICE_ATTRIBUTE_{attr.name}, "
                    f"which is 0 on device {dev.ordinal}",
                )

    def write_value32(self, addr: Any, value: int, *, no_memory_barrier: bool = False) -> None:
        """Write a 32-bit ``value`` to ``addr`` when the stream reaches this point.

        Calls ``cuStreamWriteValue32``; does not block or allocate. Captured as a
        memory-operation node inside a capture.

        Parameters
        ----------
        addr
            A device buffer, a device-mapped pinned buffer, ``(buffer, byte_offset)``,
            a ``CUdeviceptr`` or an int; 4-byte aligned.
        value
            ``0 <= value < 2**32``.
        no_memory_barrier
            Skip the memory barrier before the write
            (``CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER``): earlier writes by the stream
            may become visible after this one. The CUDA 12+ driver API documents this
            flag as unsupported; a driver that refuses it raises
            :class:`~cudriver.NotSupportedError`.

        Raises
        ------
        ValueError
            The value does not fit, the address is misaligned or beyond the buffer.
        NotSupportedError
            The driver refused ``no_memory_barrier=True``.
        """
        h = self._h
        if h is None:
            self._raise_closed()
        if type(addr) is int and not addr & 3 and 0 < addr < _U64:
            a, obj = addr, None  # the common case, without a call
        elif (
            type(addr) is _DEVICE_BUFFER
            and addr._h is not None
            and not addr._key & 3
            and addr._nbytes >= 4
        ):
            a, obj = addr._h, addr  # its CUdeviceptr: no conversion in the bindings
        else:
            a, obj = _address(addr, 4)
        v = value if type(value) is int and 0 <= value < _U32 else _value(value, 32)
        r = _cuStreamWriteValue32(h, a, v, _NO_BARRIER if no_memory_barrier else 0)
        if r[0] is not SUCCESS:
            raise _write_error(r[0], "cuStreamWriteValue32", no_memory_barrier)
        if obj is not None and _capture.ACTIVE:
            _capture.keep(h, obj)

    def write_value64(self, addr: Any, value: int, *, no_memory_barrier: bool = False) -> None:
        """Write a 64-bit ``value`` to ``addr`` when the stream reaches this point.

        Calls ``cuStreamWriteValue64``; does not block or allocate. As
        :meth:`write_value32`, with ``0 <= value < 2**64`` and an 8-byte aligned
        address.

        Raises
        ------
        NotSupportedError
            The device lacks ``CAN_USE_64_BIT_STREAM_MEM_OPS``.
        ValueError
            The value does not fit, the address is misaligned or beyond the buffer.
        """
        h = self._h
        if h is None:
            self._raise_closed()
        if type(addr) is int and not addr & 7 and 0 < addr < _U64:
            a, obj = addr, None  # the common case, without a call
        elif (
            type(addr) is _DEVICE_BUFFER
            and addr._h is not None
            and not addr._key & 7
            and addr._nbytes >= 8
        ):
            a, obj = addr._h, addr  # its CUdeviceptr: no conversion in the bindings
        else:
            a, obj = _address(addr, 8)
        v = value if type(value) is int and 0 <= value < _U64 else _value(value, 64)
        self._memop_require(_NEED_64, "cuStreamWriteValue64")
        r = _cuStreamWriteValue64(h, a, v, _NO_BARRIER if no_memory_barrier else 0)
        if r[0] is not SUCCESS:
            raise _write_error(r[0], "cuStreamWriteValue64", no_memory_barrier)
        if obj is not None and _capture.ACTIVE:
            _capture.keep(h, obj)

    def wait_value32(
        self,
        addr: Any,
        value: int,
        cond: WaitCondition | int = WaitCondition.GEQ,
        *,
        flush: bool = False,
    ) -> None:
        """Make later work wait until the 32-bit value at ``addr`` meets ``cond``.

        Calls ``cuStreamWaitValue32``; does not block the host or allocate. Captured
        as a memory-operation node inside a capture.

        Parameters
        ----------
        addr
            As for :meth:`write_value32`; 4-byte aligned.
        value
            Compared with the memory value as ``cond`` says; ``0 <= value < 2**32``.
        cond
            A :class:`~cudriver.WaitCondition`: ``GEQ`` (default), ``EQ``, ``AND`` or
            ``NOR``.
        flush
            Also flush remote writes once the wait ends
            (``CU_STREAM_WAIT_VALUE_FLUSH``).

        Raises
        ------
        NotSupportedError
            ``NOR`` without ``CAN_USE_STREAM_WAIT_VALUE_NOR``, or ``flush`` without
            ``CAN_FLUSH_REMOTE_WRITES``.
        ValueError
            The value does not fit, the address is misaligned or beyond the buffer.
        """
        h = self._h
        if h is None:
            self._raise_closed()
        if type(addr) is int and not addr & 3 and 0 < addr < _U64:
            a, obj = addr, None  # the common case, without a call
        elif (
            type(addr) is _DEVICE_BUFFER
            and addr._h is not None
            and not addr._key & 3
            and addr._nbytes >= 4
        ):
            a, obj = addr._h, addr  # its CUdeviceptr: no conversion in the bindings
        else:
            a, obj = _address(addr, 4)
        v = value if type(value) is int and 0 <= value < _U32 else _value(value, 32)
        flags: int = cond._value_ if type(cond) is WaitCondition else _condition(cond)
        if flags == 3 or flush:
            self._memop_require(
                (_NEED_NOR if flags == 3 else 0) | (_NEED_FLUSH if flush else 0),
                "cuStreamWaitValue32",
            )
            if flush:
                flags |= _WAIT_FLUSH
        r = _cuStreamWaitValue32(h, a, v, flags)
        if r[0] is not SUCCESS:
            raise make_error(r[0], "cuStreamWaitValue32")
        if obj is not None and _capture.ACTIVE:
            _capture.keep(h, obj)

    def wait_value64(
        self,
        addr: Any,
        value: int,
        cond: WaitCondition | int = WaitCondition.GEQ,
        *,
        flush: bool = False,
    ) -> None:
        """Make later work wait until the 64-bit value at ``addr`` meets ``cond``.

        Calls ``cuStreamWaitValue64``; does not block the host or allocate. As
        :meth:`wait_value32`, with ``0 <= value < 2**64`` and an 8-byte aligned
        address.

        Raises
        ------
        NotSupportedError
            The device lacks ``CAN_USE_64_BIT_STREAM_MEM_OPS`` (or the attribute
            ``NOR`` or ``flush`` need).
        ValueError
            The value does not fit, the address is misaligned or beyond the buffer.
        """
        h = self._h
        if h is None:
            self._raise_closed()
        if type(addr) is int and not addr & 7 and 0 < addr < _U64:
            a, obj = addr, None  # the common case, without a call
        elif (
            type(addr) is _DEVICE_BUFFER
            and addr._h is not None
            and not addr._key & 7
            and addr._nbytes >= 8
        ):
            a, obj = addr._h, addr  # its CUdeviceptr: no conversion in the bindings
        else:
            a, obj = _address(addr, 8)
        v = value if type(value) is int and 0 <= value < _U64 else _value(value, 64)
        flags: int = cond._value_ if type(cond) is WaitCondition else _condition(cond)
        needs = _NEED_64 | (_NEED_NOR if flags == 3 else 0) | (_NEED_FLUSH if flush else 0)
        self._memop_require(needs, "cuStreamWaitValue64")
        if flush:
            flags |= _WAIT_FLUSH
        r = _cuStreamWaitValue64(h, a, v, flags)
        if r[0] is not SUCCESS:
            raise make_error(r[0], "cuStreamWaitValue64")
        if obj is not None and _capture.ACTIVE:
            _capture.keep(h, obj)

    def batch_mem_ops(self, ops: Iterable[MemOp]) -> None:
        """Enqueue several memory operations at once, in order (``cuStreamBatchMemOp``).

        ::

            stream.batch_mem_ops([MemOp.wait32(flag, 1), MemOp.write32(done, 1)])

        Cheaper than one call per operation, on the host and on the device. Does not
        block or allocate device memory; captured as one node inside a capture.

        Parameters
        ----------
        ops
            One to :data:`MAX_BATCH_MEM_OPS` (255) :class:`~cudriver.MemOp` objects.

        Raises
        ------
        NotSupportedError
            An operation needs a feature the device lacks (64-bit operations, ``NOR``,
            flushing remote writes), checked before the call.
        ValueError
            No operations, or more than the driver takes in one batch.
        TypeError
            An item is not a :class:`~cudriver.MemOp`.
        """
        h = self._h
        if h is None:
            self._raise_closed()
        lst = _check_ops(ops)
        needs = 0
        for op in lst:
            needs |= op._needs
        if needs:
            self._memop_require(needs, "cuStreamBatchMemOp")
        r = _cuStreamBatchMemOp(h, len(lst), [op._params for op in lst], 0)
        if r[0] is not SUCCESS:
            nmb = any(op._kind in _WRITES and op._flags & _NO_BARRIER for op in lst)
            raise _write_error(r[0], "cuStreamBatchMemOp", nmb)
        if _capture.ACTIVE:
            targets = [op._target for op in lst if op._target is not None]
            if targets:
                _capture.keep(h, *targets)
