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
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

from cuda.bindings import driver as _drv

from .._lifetime import _pins, capture
from .._lifetime._coerce import U64_LIMIT, DeviceMemory, device_address
from .._lifetime._handle import Handle, unpinned
from .._runtime import _gates
from .._runtime._bindings import SUCCESS
from .._runtime._enums import DeviceAttribute, MemOpType, WaitCondition
from ..errors import GUARD, NotSupportedError, error_for

if TYPE_CHECKING:
    from .._context.device import Device

__all__ = [
    "MAX_BATCH_MEM_OPS",
    "MemOp",
    "MemOpType",
    "WaitCondition",
    "address",
    "write_value",
    "wait_value",
    "batch",
]


#: The most operations one ``cuStreamBatchMemOp`` call takes (the driver documents
#: "less than 256").
MAX_BATCH_MEM_OPS = 255

_WAIT_FLUSH = int(_drv.CUstreamWaitValue_flags.CU_STREAM_WAIT_VALUE_FLUSH)
_NO_BARRIER = int(_drv.CUstreamWriteValue_flags.CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER)
_BARRIER_GPU = int(_drv.CUstreamMemoryBarrier_flags.CU_STREAM_MEMORY_BARRIER_TYPE_GPU)
_BARRIER_SYS = int(_drv.CUstreamMemoryBarrier_flags.CU_STREAM_MEMORY_BARRIER_TYPE_SYS)
_WRITES = (MemOpType.WRITE_VALUE_32, MemOpType.WRITE_VALUE_64)
_LIMIT = {4: 1 << 32, 8: U64_LIMIT}

# Features an operation needs, as a bit mask, and the device attribute naming each.
_NEED_64 = 1
_NEED_NOR = 2
_NEED_FLUSH = 4
_FEATURES = (
    (_NEED_64, DeviceAttribute.CAN_USE_64_BIT_STREAM_MEM_OPS, "64-bit stream memory operations"),
    (_NEED_NOR, DeviceAttribute.CAN_USE_STREAM_WAIT_VALUE_NOR, "WaitCondition.NOR"),
    (_NEED_FLUSH, DeviceAttribute.CAN_FLUSH_REMOTE_WRITES, "flushing remote writes"),
)


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


def address(addr: Any, width: int) -> tuple[Any, Any]:
    """``(address, object to keep alive or None)`` for a ``width``-byte operation.

    ``addr`` is anything :func:`~cudriver._coerce.device_address` takes, or
    ``(buffer, byte_offset)``. The address is an int, or a buffer's ``CUdeviceptr``
    (the bindings take it without converting). Checks range, size and alignment.
    """
    if type(addr) is int:
        if 0 < addr < U64_LIMIT and not addr & (width - 1):
            return addr, None
    elif isinstance(addr, DeviceMemory):
        h = addr._h
        if h is not None and not addr._key & (width - 1) and addr._nbytes >= width:
            return h, addr
    return _address(addr, width)


def _address(addr: Any, width: int) -> tuple[int, Any]:
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
        a, size, obj = device_address(buf)
        if size is not None and off + width > size:
            raise ValueError(
                f"byte offset {off} + {width} bytes is beyond the end of the {size}-byte buffer"
            )
        a += off
    else:
        a, size, obj = device_address(addr)
        if size is not None and width > size:
            raise ValueError(f"the {size}-byte buffer is smaller than the {width}-byte value")
    if not 0 < a < U64_LIMIT:
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


def _write_error(status: Any, func: Callable[..., Any], no_memory_barrier: bool) -> Exception:
    """The error for a failed write; explains a refused ``NO_MEMORY_BARRIER`` flag."""
    if no_memory_barrier and int(status) in _REFUSED:
        return NotSupportedError(
            status,
            func.__name__,
            "the driver refused CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER: the stream "
            "memory operations of CUDA 12 and later (the v2 API that cuda.bindings "
            "calls) document it as unsupported; drop no_memory_barrier=True",
        )
    return error_for(status, func)


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
        self = cls.__new__(cls)
        self._kind = kind
        self._address = address
        self._value = value
        self._flags = flags
        # What the address points into stays allocated while the MemOp lives: a lease
        # on a handle (closing it frees the memory only once the MemOp is gone too).
        self._target = (
            target._lease() if isinstance(target, Handle) and target._h is not None else target
        )
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
    def _write(cls, addr: Any, value: int, width: int, no_memory_barrier: bool) -> MemOp:
        a, obj = _address(addr, width)
        v = _value(value, width * 8)
        flags = _NO_BARRIER if no_memory_barrier else 0
        kind = MemOpType.WRITE_VALUE_32 if width == 4 else MemOpType.WRITE_VALUE_64
        return cls._new(kind, a, v, flags, obj, 0 if width == 4 else _NEED_64)

    @classmethod
    def _wait(cls, addr: Any, value: int, cond: Any, flush: bool, width: int) -> MemOp:
        a, obj = _address(addr, width)
        v = _value(value, width * 8)
        c = _condition(cond)
        needs = 0 if width == 4 else _NEED_64
        needs |= (_NEED_NOR if c == WaitCondition.NOR else 0) | (_NEED_FLUSH if flush else 0)
        flags = c | (_WAIT_FLUSH if flush else 0)
        kind = MemOpType.WAIT_VALUE_32 if width == 4 else MemOpType.WAIT_VALUE_64
        return cls._new(kind, a, v, flags, obj, needs)

    @classmethod
    def write32(cls, addr: Any, value: int, *, no_memory_barrier: bool = False) -> MemOp:
        """Write a 32-bit ``value`` to ``addr`` (like :meth:`Stream.write_value32`).

        ``no_memory_barrier`` is documented as unsupported by the CUDA 12+ driver; a
        batch the driver refuses for it raises :class:`~cudriver.NotSupportedError`.
        """
        return cls._write(addr, value, 4, no_memory_barrier)

    @classmethod
    def write64(cls, addr: Any, value: int, *, no_memory_barrier: bool = False) -> MemOp:
        """Write a 64-bit ``value`` to ``addr`` (like :meth:`Stream.write_value64`).

        Needs the device attribute ``CAN_USE_64_BIT_STREAM_MEM_OPS``.
        """
        return cls._write(addr, value, 8, no_memory_barrier)

    @classmethod
    def wait32(
        cls, addr: Any, value: int, cond: Any = WaitCondition.GEQ, *, flush: bool = False
    ) -> MemOp:
        """Wait until the 32-bit value at ``addr`` meets ``cond`` (a :class:`WaitCondition`).

        Like :meth:`Stream.wait_value32`.
        """
        return cls._wait(addr, value, cond, flush, 4)

    @classmethod
    def wait64(
        cls, addr: Any, value: int, cond: Any = WaitCondition.GEQ, *, flush: bool = False
    ) -> MemOp:
        """Wait until the 64-bit value at ``addr`` meets ``cond`` (a :class:`WaitCondition`).

        Like :meth:`Stream.wait_value64`; needs ``CAN_USE_64_BIT_STREAM_MEM_OPS``.
        """
        return cls._wait(addr, value, cond, flush, 8)

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


# -- enqueueing, for the methods of Stream -------------------------------------------------
class _Stream(Protocol):
    """What the enqueue functions need of a stream.

    Its handle and release state (to pin it), and its device (for feature checks).
    """

    _h: Any
    _key: Any
    _state: Any

    @property
    def device(self) -> Device:
        """The stream's device."""
        ...

    def _raise_closed(self) -> NoReturn:
        """Raise the stream's ClosedError."""
        ...


def require(device: Device, needs: int, func: Callable[..., Any]) -> None:
    """Raise :class:`~cudriver.NotSupportedError` if ``device`` lacks a feature in ``needs``."""
    for bit, attr, what in _FEATURES:
        if needs & bit and not device.attribute(attr):
            raise NotSupportedError(
                _drv.CUresult.CUDA_ERROR_NOT_SUPPORTED,
                func.__name__,
                f"{what} need the device attribute CU_DEVICE_ATTRIBUTE_{attr.name}, "
                f"which is 0 on device {device.ordinal}",
            )


_WRITE = {4: (_drv.cuStreamWriteValue32, 0), 8: (_drv.cuStreamWriteValue64, _NEED_64)}
_WAIT = {4: (_drv.cuStreamWaitValue32, 0), 8: (_drv.cuStreamWaitValue64, _NEED_64)}


def write_value(
    stream: _Stream, addr: Any, value: Any, width: int, no_memory_barrier: bool
) -> None:
    """Enqueue ``cuStreamWriteValue32`` (``width`` 4) or ``...64`` (8) on ``stream``."""
    if stream._h is None:
        stream._raise_closed()
    a, obj = address(addr, width)
    v = value if type(value) is int and 0 <= value < _LIMIT[width] else _value(value, width * 8)
    fn, needs = _WRITE[width]
    if GUARD.armed:
        GUARD.check()
    flags = _NO_BARRIER if no_memory_barrier else 0
    _enqueue(stream, obj, needs, fn, a, v, flags, no_memory_barrier)


def wait_value(stream: _Stream, addr: Any, value: Any, cond: Any, flush: bool, width: int) -> None:
    """Enqueue ``cuStreamWaitValue32`` (``width`` 4) or ``...64`` (8) on ``stream``."""
    if stream._h is None:
        stream._raise_closed()
    a, obj = address(addr, width)
    v = value if type(value) is int and 0 <= value < _LIMIT[width] else _value(value, width * 8)
    flags: int = cond._value_ if type(cond) is WaitCondition else _condition(cond)
    fn, needs = _WAIT[width]
    needs |= (_NEED_NOR if flags == 3 else 0) | (_NEED_FLUSH if flush else 0)
    if GUARD.armed:
        GUARD.check()
    if flush:
        flags |= _WAIT_FLUSH
    _enqueue(stream, obj, needs, fn, a, v, flags, None)


def _enqueue(
    stream: _Stream,
    obj: Any,
    needs: int,
    fn: Any,
    a: int,
    v: int,
    flags: int,
    no_memory_barrier: bool | None,
) -> None:
    # The stream and the target buffer stay pinned through the driver calls (pin2 and
    # unpin2, written out: this is every write's and wait's path).
    ss = stream._state
    so = obj._state if isinstance(obj, Handle) else None
    ss.pins.append(None)
    if so is not None:
        so.pins.append(None)
    try:
        if stream._h is None:
            stream._raise_closed()
        if so is not None and obj._h is None:
            obj._raise_closed()
        h = ss.handle
        if needs:
            require(stream.device, needs, fn)
        r = fn(h, a, v, flags)
        if r[0] is not SUCCESS:
            if no_memory_barrier is None:
                raise error_for(r[0], fn)
            raise _write_error(r[0], fn, no_memory_barrier)
        if no_memory_barrier is None:  # a wait: it may wait for the host
            _gates.note(stream)
        if obj is not None and capture.ACTIVE:
            capture.keep(h, obj)
    finally:
        if so is not None:
            so.pins.pop()
            if so.closing:
                unpinned(so)
        ss.pins.pop()
        if ss.closing:
            unpinned(ss)


@_pins.pinned
def batch(stream: Handle, ops: Iterable[MemOp]) -> None:
    """Enqueue ``ops`` with one ``cuStreamBatchMemOp`` on ``stream``."""
    h = stream._h
    lst = _check_ops(ops)
    needs = 0
    for op in lst:
        needs |= op._needs
    if GUARD.armed:
        GUARD.check()
    if needs:
        require(stream.device, needs, _drv.cuStreamBatchMemOp)  # type: ignore[attr-defined]
    r = _drv.cuStreamBatchMemOp(h, len(lst), [op._params for op in lst], 0)
    if r[0] is not SUCCESS:
        nmb = any(op._kind in _WRITES and op._flags & _NO_BARRIER for op in lst)
        raise _write_error(r[0], _drv.cuStreamBatchMemOp, nmb)
    if any(op._kind not in _WRITES for op in lst):  # a wait: it may wait for the host
        _gates.note(stream)
    if capture.ACTIVE:
        targets = [op._target for op in lst if op._target is not None]
        if targets:
            capture.keep(h, *targets)
