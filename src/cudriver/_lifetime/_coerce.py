"""Argument coercion shared by every module: streams, device addresses, integers, shapes.

* :func:`stream_handle` is the one place that turns a stream-like argument (a
  :class:`~cudriver.Stream`, an object with ``__cuda_stream__`` or ``cuda_stream``, a
  ``CUstream``, an int, or None) into a raw ``CUstream``.
* :func:`device_address` is the one place that says what counts as a device address.
* :func:`int_arg`, :func:`nbytes_arg`, :func:`shape_arg`, :func:`dtype_arg`,
  :func:`dims` and :func:`shared_mem` check integers, sizes, shapes, dtypes and launch
  dimensions before any driver call.

The base classes here are what coercion needs to know of the classes defined above
it: :class:`StreamBase` (the base of :class:`cudriver.Stream`), :class:`DeviceMemory`
(of :class:`cudriver.DeviceBuffer`) and :class:`HostMemory` (of
:class:`cudriver.PinnedBuffer`). Checking them with
``isinstance`` keeps the import direction one way: modules below ``stream.py`` and
``memory.py`` recognise streams and buffers without importing them.
"""

from __future__ import annotations

import enum
import math
import numbers
import operator
import warnings
from typing import Any, Protocol, TypeVar, runtime_checkable

import numpy as np
import numpy.typing as npt
from cuda.bindings import driver as _drv

from ..errors import ClosedError
from ._handle import Handle

__all__ = [
    "SupportsCudaStream",
    "StreamLike",
    "StreamBase",
    "Memory",
    "DeviceMemory",
    "HostMemory",
    "PoolBase",
    "stream_handle",
    "raw_stream_handle",
    "NONE_STREAM",
    "deprecated",
    "renamed_keyword",
    "enum_arg",
    "device_address",
    "int_arg",
    "uint_arg",
    "bool_arg",
    "handle_arg",
    "nbytes_arg",
    "dtype_arg",
    "shape_arg",
    "nbytes_of",
    "typed_shape",
    "dims",
    "shared_mem",
    "U32_MAX",
    "U64_LIMIT",
]

U32_MAX = 0xFFFFFFFF
U64_LIMIT = 1 << 64

_NULL_STREAM = _drv.CUstream(0)


@runtime_checkable
class SupportsCudaStream(Protocol):
    """An object exposing a CUDA stream through the ``__cuda_stream__`` protocol."""

    def __cuda_stream__(self) -> tuple[int, int]:
        """Return ``(version, stream handle as int)``."""
        ...


class StreamBase(Handle):
    """The base of :class:`cudriver.Stream`: a handle that is a ``CUstream``."""

    __slots__ = ()


class Memory(Handle):
    """A span of memory: ``_key`` is its address, ``_nbytes`` its size."""

    __slots__ = ()

    _nbytes: int

    @property
    def ptr(self) -> int:
        """The address as an int (device or host memory, as the class says)."""
        if self._h is None:
            self._raise_closed()
        return self._key

    @property
    def nbytes(self) -> int:
        """The size in bytes."""
        return self._nbytes


#: What stream arguments accept: a Stream, a ``__cuda_stream__`` object, a
#: ``CUstream`` or an int handle. Calls that only enqueue work refuse None (see
#: :func:`stream_handle`); calls that may complete the work themselves (copies,
#: fills) take ``stream=None`` to mean "done when the call returns".
StreamLike = StreamBase | SupportsCudaStream | Any | int | None

#: What a call that only enqueues work says when given ``stream=None``.
NONE_STREAM = (
    "a stream is required, not None: this call only enqueues work; pass a "
    "cudriver.Stream, or cudriver.Stream.legacy() for the legacy default stream"
)


class DeviceMemory(Memory):
    """The base of :class:`cudriver.DeviceBuffer`: ``_h`` is a ``CUdeviceptr``."""

    __slots__ = ()

    def _producer_stream(self) -> int | None:
        """The stream (as the CUDA Array Interface writes it) that orders this memory."""
        return None

    def _note_use(self, stream: Any) -> None:
        """Record that work using this memory was enqueued on ``stream`` (a handle or int).

        A stream-ordered free is then ordered after that work.
        """


class MapsMemory:
    """The base of kernel arguments that carry the address of memory they keep.

    A :class:`cudriver.TensorMap` is one: a launch notes its use of that memory, as for
    a buffer passed directly, so a stream-ordered free waits for the launch.
    """

    __slots__ = ()

    def _mapped(self) -> DeviceMemory | None:
        """The cudriver memory whose address the argument carries, if any."""
        return None


def virtual_spaces(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """The virtual-memory spaces behind ``args``: what a prepared launch checks.

    A :class:`cudriver.VirtualBuffer` (or a view of one, or a tensor map over one) that
    is offloaded has no memory mapped: a launch prepared with it would fault.
    """
    found: dict[int, Any] = {}
    for a in args:
        if isinstance(a, MapsMemory):
            a = a._mapped()
        for obj in (a, getattr(a, "_base", None)):
            space = getattr(obj, "_space", None)
            if callable(space):
                sp = space()
                found[id(sp)] = sp
                break
    return tuple(found.values())


def refuse_offloaded(spaces: tuple[Any, ...]) -> None:
    """Raise :class:`~cudriver.ClosedError` if a space of :func:`virtual_spaces` is offloaded."""
    for sp in spaces:
        if sp.asleep and not sp.closed:
            raise ClosedError(
                "a VirtualBuffer this LaunchPlan was prepared with is offloaded: restore() "
                "it before launching (the kernel would fault on its unmapped memory)"
            )


class HostMemory(Memory):
    """The base of :class:`cudriver.PinnedBuffer`: ``_key`` is a host address."""

    __slots__ = ()

    def _note_use(self, stream: Any) -> None:
        """Record that work using this memory was enqueued on ``stream`` (a handle or int).

        Memory from a stream-ordered pool is then freed after that work.
        """


class PoolBase(Handle):
    """The base of :class:`cudriver.MemoryPool`: ``_h`` is a ``CUmemoryPool``."""

    __slots__ = ()

    def _note_stream(self, st: Any) -> None:
        """Memory from this pool is freed on the stream of release state ``st`` (pinned)."""

    @staticmethod
    def _of(buf: Any) -> PoolBase:
        """The pool ``buf`` was allocated from (one it keeps), for ``export_handle``.

        ValueError, saying which allocations travel, for a view or for memory that no
        cudriver pool gave.
        """
        base = getattr(buf, "_base", None)
        if base is not None:
            raise ValueError(
                f"export_handle(): this buffer is a view (at byte offset "
                f"{getattr(buf, '_offset', 0)}) of another allocation; only whole "
                "allocations travel: export its base (buf.base.export_handle()) and send "
                "the offset along"
            )
        for k in buf._state.keep or ():
            if isinstance(k, PoolBase):
                return k
        raise ValueError(
            f"export_handle(): this {buf._kind} was not allocated from a cudriver.MemoryPool; "
            "only an allocation from a MemoryPool made with ipc=True can travel to another "
            "process (pool.allocate(n, stream=s), or DeviceBuffer(n, stream=s, pool=pool))"
        )

    def _export_pointer(self, buf: Any) -> bytes:
        """The bytes that open ``buf`` (an allocation from this pool) in another process.

        :meth:`cudriver.DeviceBuffer.export_handle` calls it on the pool the buffer keeps.
        """
        raise NotImplementedError(f"{type(self).__name__} cannot export its allocations")

    def _import_pointer(self, cls: type[Any], data: Any, nbytes: Any) -> Any:
        """A new owned ``cls`` over the allocation ``data`` opens in this (imported) pool.

        :meth:`cudriver.DeviceBuffer.import_handle` calls it; the arguments are checked here.
        """
        raise NotImplementedError(f"{type(self).__name__} cannot import allocations")


def _foreign_int(obj: Any) -> int | None:
    proto = getattr(obj, "__cuda_stream__", None)
    if proto is not None:
        v = proto() if callable(proto) else proto
        if not (isinstance(v, tuple) and len(v) == 2):
            raise TypeError(
                f"{type(obj).__name__}.__cuda_stream__ returned {v!r}, expected (version, handle)"
            )
        version, handle = v
        if type(version) is not int or version != 0:
            raise ValueError(
                f"{type(obj).__name__}.__cuda_stream__ returned version {version!r}: "
                "cudriver understands version 0 of the protocol"
            )
        if isinstance(handle, bool) or not isinstance(handle, int):
            raise TypeError(
                f"{type(obj).__name__}.__cuda_stream__ returned a {type(handle).__name__} "
                "handle, expected an int"
            )
        return handle
    cs = getattr(obj, "cuda_stream", None)  # torch.cuda.Stream
    if isinstance(cs, int) and not isinstance(cs, bool):
        return cs
    return None


def stream_handle(stream: StreamLike) -> Any:
    """The raw ``CUstream`` for any stream-like argument of a call that enqueues work.

    Accepts a :class:`~cudriver.Stream`, an object with ``__cuda_stream__`` (PyTorch,
    CuPy, cuda.core streams) or ``cuda_stream``, a ``CUstream`` or an int (0 is the
    NULL stream, as the driver reads it). None raises ``TypeError`` naming
    :meth:`~cudriver.Stream.legacy` (the one stream rule: a call that only enqueues
    work never picks a stream for the caller). A closed Stream raises
    :class:`~cudriver.ClosedError`.
    """
    if isinstance(stream, StreamBase):
        h = stream._h
        if h is None:
            stream._raise_closed()
        return h
    if stream is None:
        raise TypeError(NONE_STREAM)
    if isinstance(stream, _drv.CUstream):
        return stream
    if isinstance(stream, int) and not isinstance(stream, bool):
        v: int | None = stream
    else:
        v = _foreign_int(stream)
    if v is not None:
        if not 0 <= v < U64_LIMIT:
            raise ValueError(f"stream handle {v:#x} does not fit in 64 bits")
        return _drv.CUstream(v)
    raise TypeError(
        f"expected a stream (cudriver.Stream, an object with __cuda_stream__, a CUstream "
        f"or an int), not {type(stream).__name__}"
    )


def deprecated(old: str, new: str, *, stacklevel: int = 3) -> None:
    """Warn that ``old`` (a name or a spelling of a call) is deprecated for ``new``.

    A :class:`DeprecationWarning` attributed to the caller of the deprecated API
    (``stacklevel`` 3: the caller of the function that calls this one).
    """
    warnings.warn(
        f"{old} is deprecated and will be removed before cudriver 1.0: use {new}",
        DeprecationWarning,
        stacklevel=stacklevel,
    )


def renamed_keyword(func: str, old: str, old_value: Any, new: str, new_value: Any) -> Any:
    """The value of keyword ``new`` given under its deprecated name ``old``.

    Warns (see :func:`deprecated`, attributed to the caller of ``func``); giving both
    names is a ``TypeError``.
    """
    if new_value is not None:
        raise TypeError(f"{func}() takes {new}= or its deprecated name {old}=, not both")
    deprecated(f"{func}({old}=...)", f"{func}({new}=...)", stacklevel=4)
    return old_value


_E = TypeVar("_E", bound=enum.Enum)


def enum_arg(value: object, enum_cls: type[_E], what: str) -> _E:
    """``value`` as a member of ``enum_cls``: a member, its int value or a bindings member.

    The one rule for enum arguments: ``TypeError`` for another type (a bool too),
    ``ValueError`` naming the enum and its members for a value it does not have.
    """
    if isinstance(value, enum_cls):
        return value
    v = None
    if not isinstance(value, bool):
        try:
            v = operator.index(value)  # type: ignore[arg-type]
        except TypeError:
            pass
    if v is None:
        raise TypeError(
            f"{what} must be a cudriver.{enum_cls.__name__}, not {type(value).__name__}"
        )
    members = list(enum_cls)  # the named members (IntFlag: no combinations)
    if v not in [m.value for m in members]:
        names = ", ".join(f"{m.name}={m.value}" for m in members)
        raise ValueError(f"{what} must be a cudriver.{enum_cls.__name__} ({names}), not {v}")
    return enum_cls(v)


def raw_stream_handle(stream: StreamLike) -> Any:
    """:func:`stream_handle`, with None read as the NULL stream, as the driver reads it.

    Only for the drop-in mirror (:mod:`cudriver.driver`), whose arguments mean what
    the bindings' arguments mean.
    """
    return _NULL_STREAM if stream is None else stream_handle(stream)


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


def device_address(obj: Any) -> tuple[int, int | None, Any]:
    """``(address, size in bytes or None, object to keep alive or None)`` of ``obj``.

    What counts as a device address, in order: an int, a ``CUdeviceptr`` or a numpy
    integer; a :class:`~cudriver.DeviceBuffer`; an object with an int ``device_ptr``
    (a device-mapped pinned buffer); an object with an int ``ptr``; an object with
    ``__cuda_array_interface__``. The size is the object's ``nbytes`` when it has one.

    Raises
    ------
    TypeError
        ``obj`` is none of these.
    ValueError
        ``obj`` has a ``device_ptr`` attribute that is None (pinned memory that is not
        mapped into the device's address space).
    """
    a = _int_address(obj)
    if a is not None:
        return a, None, None
    if isinstance(obj, DeviceMemory):
        if obj._h is None:
            obj._raise_closed()
        return obj._key, obj._nbytes, obj
    dptr = getattr(obj, "device_ptr", None)
    if dptr is None and hasattr(obj, "device_ptr"):
        raise ValueError(
            f"{type(obj).__name__} has no device address: allocate pinned memory device-mapped "
            "(e.g. PinnedBuffer(n, mapped=True)) to use it on the device"
        )
    if dptr is None:
        dptr = getattr(obj, "ptr", None)
    size: Any
    if dptr is not None:
        a = _int_address(dptr)
        if a is None:
            raise TypeError(f"{type(obj).__name__}'s pointer is not an int: {dptr!r}")
        size = getattr(obj, "nbytes", None)
        return a, (int(size) if size is not None else None), obj
    cai = getattr(obj, "__cuda_array_interface__", None)
    if isinstance(cai, dict):
        try:
            a = int(cai["data"][0] or 0)
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise TypeError(
                f"{type(obj).__name__} has a malformed __cuda_array_interface__: {exc!r}"
            ) from None
        size = getattr(obj, "nbytes", None)
        return a, (int(size) if size is not None else None), obj
    raise TypeError(
        f"not a device address: {type(obj).__name__} (pass a device buffer, a device-mapped "
        "pinned buffer, (buffer, byte_offset), a CUdeviceptr or an int)"
    )


def handle_arg(value: Any, cls: type, what: str) -> Any:
    """A non-NULL handle of the bindings type ``cls``: an instance of it, or an int.

    Raises ``TypeError`` for anything else (floats, strings, bools) and ``ValueError``
    for NULL or a value that does not fit 64 bits, naming ``what``.
    """
    h: Any
    if isinstance(value, cls):
        h = value
    elif isinstance(value, int) and not isinstance(value, bool):
        if not 0 <= value < U64_LIMIT:
            raise ValueError(f"{what} {value:#x} does not fit in 64 bits")
        h = cls(value)
    else:
        raise TypeError(f"{what} must be a {cls.__name__} or an int, not {type(value).__name__}")
    if int(h) == 0:
        raise ValueError(f"cannot wrap a NULL {what}")
    return h


def uint_arg(value: object, name: str, bits: int = 64) -> int:
    """An int in ``[0, 2**bits)`` (an unsigned C integer), else TypeError/ValueError naming it."""
    v = int_arg(value, name)
    if not 0 <= v < 1 << bits:
        raise ValueError(f"{name} must be a non-negative int below 2**{bits}, not {v}")
    return v


def bool_arg(value: object, name: str) -> bool:
    """A bool (``True``/``False`` only), else ``TypeError`` naming the argument."""
    if value is True or value is False:
        return value
    raise TypeError(f"{name} must be True or False, not {type(value).__name__}")


# -- integers, sizes, shapes and launch dimensions ------------------------------------
def int_arg(value: object, name: str) -> int:
    """``value`` as an int (any ``__index__`` type but bool), else ``TypeError`` naming it."""
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an int, not bool")
    try:
        return operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"{name} must be an int, not {type(value).__name__}") from None


def nbytes_arg(value: object, name: str = "nbytes") -> int:
    """A positive byte count that fits a ``size_t``."""
    n = int_arg(value, name)
    if not 0 < n < U64_LIMIT:
        raise ValueError(f"{name} must be positive and below 2**64, not {n}")
    return n


def dtype_arg(dtype: npt.DTypeLike) -> np.dtype[Any]:
    """A numpy dtype with a size that holds no Python objects."""
    try:
        dt = np.dtype(dtype)
    except TypeError as exc:
        raise TypeError(f"not a numpy dtype: {dtype!r} ({exc})") from None
    if dt.hasobject:
        raise TypeError(f"dtype {dt} holds Python objects, which have no meaning on the device")
    if dt.itemsize == 0:
        raise ValueError(f"dtype {dt} has no size")
    return dt


def shape_arg(shape: object) -> tuple[int, ...]:
    """A shape: an int or a tuple/list of non-negative ints."""
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        items: tuple[object, ...] = (shape,)
    elif isinstance(shape, (tuple, list)):
        items = tuple(shape)
    else:
        raise TypeError(f"shape must be an int or a tuple of ints, not {type(shape).__name__}")
    out = tuple(int_arg(d, "shape entry") for d in items)
    if any(d < 0 for d in out):
        raise ValueError(f"shape {out} has a negative dimension")
    return out


def nbytes_of(shape: tuple[int, ...], dtype: np.dtype[Any]) -> int:
    """The byte size of ``shape`` elements of ``dtype``; at least one byte."""
    n = math.prod(shape) * dtype.itemsize
    if n == 0:
        raise ValueError(f"shape {shape} of {dtype} has no elements: a buffer needs >= 1 byte")
    return n


def typed_shape(
    nbytes: int, dtype: npt.DTypeLike, shape: object
) -> tuple[np.dtype[Any], tuple[int, ...]]:
    """``(dtype, shape)`` viewing ``nbytes`` bytes; ``shape`` None means 1-D.

    The shape's size times the item size must equal ``nbytes``.
    """
    dt = dtype_arg(dtype)
    if shape is None:
        if nbytes % dt.itemsize:
            raise ValueError(
                f"{nbytes} bytes is not a whole number of {dt} items ({dt.itemsize} bytes each)"
            )
        return dt, (nbytes // dt.itemsize,)
    shp = shape_arg(shape)
    if math.prod(shp) * dt.itemsize != nbytes:
        raise ValueError(
            f"shape {shp} of {dt} needs {math.prod(shp) * dt.itemsize} bytes, "
            f"the buffer has {nbytes}"
        )
    return dt, shp


def dims(value: Any, what: str) -> tuple[int, int, int]:
    """``(x, y, z)`` from an int or a tuple of 1 to 3 ints, each in [1, 2**32 - 1]."""
    if type(value) is int and 1 <= value <= U32_MAX:
        return (value, 1, 1)
    if isinstance(value, (tuple, list)):
        items = list(value)
        if not 1 <= len(items) <= 3:
            raise ValueError(
                f"{what} must be an int or a tuple of 1 to 3 ints, not a "
                f"{len(items)}-tuple {tuple(items)!r}"
            )
    else:
        items = [value]
    out: list[int] = []
    for v in items:
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise TypeError(
                f"{what} must be an int or a tuple of 1 to 3 ints, not {value!r} "
                f"(contains a {type(v).__name__})"
            )
        iv = int(v)
        if not 1 <= iv <= U32_MAX:
            raise ValueError(f"every {what} dimension must be >= 1 (and < 2**32), got {value!r}")
        out.append(iv)
    while len(out) < 3:
        out.append(1)
    return (out[0], out[1], out[2])


def shared_mem(value: Any) -> int:
    """Dynamic shared memory in bytes: an int in [0, 2**32 - 1]."""
    if type(value) is int and 0 <= value <= U32_MAX:
        return value
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"shared_mem must be an int, not {type(value).__name__}")
    v = int(value)
    if not 0 <= v <= U32_MAX:
        raise ValueError(f"shared_mem must be >= 0 bytes (and < 2**32), got {v}")
    return v
