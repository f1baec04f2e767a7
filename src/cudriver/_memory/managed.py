"""Managed (unified) memory: :class:`ManagedBuffer`.

Memory from ``cuMemAllocManaged`` has one address that is valid on the host and on
every device that supports managed memory; the driver migrates its pages to where they
are used. :class:`ManagedBuffer` is a :class:`~cudriver.DeviceBuffer` (copies, fills,
views, kernel arguments and ``__cuda_array_interface__`` work as for any device
buffer) with host access through numpy (:meth:`ManagedBuffer.array`), prefetching
(``cuMemPrefetchAsync``), advice (``cuMemAdvise``) and the advice read back
(``cuMemRangeGetAttribute``). The batch functions (:func:`prefetch_batch`,
:func:`discard_batch`, :func:`discard_and_prefetch_batch`) hand many ranges to the
driver in one call (``cuMemPrefetchBatchAsync`` and kin, CUDA 13.0).

A location (where memory is prefetched to, or what advice is about) is a
:class:`~cudriver.Device`, a device ordinal, the string ``"host"`` (the host as a
whole) or a :class:`HostNuma` (one NUMA node of the host); the properties that read a
location back return one of those (a Device, not an ordinal) or None.
"""

from __future__ import annotations

import functools
import operator
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NoReturn

import numpy as np
import numpy.typing as npt
from cuda.bindings import driver as _drv

from .._context.device import (
    Context,
    Device,
    context_arg,
    current_or_default,
    enter_context,
    leave_context,
)
from .._lifetime._coerce import StreamLike, enum_arg, nbytes_arg, stream_handle, typed_shape
from .._lifetime._handle import reclaim
from .._lifetime._pins import pin_all, pinned, unpin_all
from .._runtime import _bindings, _calls, _hooks
from .._runtime._bindings import DEVICE_CPU, SUCCESS
from .._runtime._enums import DeviceAttribute, MemAdvise, MemAttach
from .._runtime._init import driver_version
from ..errors import CudaError, NotSupportedError, checked, error_for
from . import accounting as _account
from ._copy import HostBytes, fill_new, host_source, new_typed, refuse_capturing
from ._core import mem_free
from .memory import DeviceBuffer

_OUT_OF_MEMORY = _drv.CUresult.CUDA_ERROR_OUT_OF_MEMORY

__all__ = [
    "HostNuma",
    "ManagedBuffer",
    "discard_and_prefetch_batch",
    "discard_batch",
    "prefetch_batch",
]

_U8 = np.dtype(np.uint8)
_HOST: Literal["host"] = "host"
_NOT_SUPPORTED = _drv.CUresult.CUDA_ERROR_NOT_SUPPORTED

_cuMemPrefetchAsync = checked(_bindings.mem_prefetch, name="cuMemPrefetchAsync")
_cuMemAdvise = checked(_bindings.mem_advise, name="cuMemAdvise")

_RANGE = _drv.CUmem_range_attribute
_RANGE_READ_MOSTLY = _RANGE.CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY
_RANGE_ACCESSED_BY = _RANGE.CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY
# The attributes that tell a host NUMA node from the host (CUDA 12.2+; None if unknown),
# by last_prefetch: (type, id).
_RANGE_TYPED = {
    last: tuple(
        getattr(_RANGE, f"CU_MEM_RANGE_ATTRIBUTE_{what}_LOCATION_{part}", None)
        for part in ("TYPE", "ID")
    )
    for last, what in ((False, "PREFERRED"), (True, "LAST_PREFETCH"))
}
#: ``CU_MEM_LOCATION_TYPE_HOST_NUMA`` (bindings for CUDA 12.2+), or None.
_HOST_NUMA_KIND = getattr(_drv.CUmemLocationType, "CU_MEM_LOCATION_TYPE_HOST_NUMA", None)

# Advice whose location the driver ignores: the location may be left out.
_NO_LOCATION = frozenset(
    {MemAdvise.SET_READ_MOSTLY, MemAdvise.UNSET_READ_MOSTLY, MemAdvise.UNSET_PREFERRED_LOCATION}
)
# Advice that needs CONCURRENT_MANAGED_ACCESS on the device it names.
_NEEDS_CONCURRENT = frozenset({MemAdvise.SET_PREFERRED_LOCATION, MemAdvise.SET_ACCESSED_BY})


def _index(value: object, what: str) -> int:
    """``value`` as an int (any ``__index__`` type but bool), else TypeError saying ``what``."""
    if not isinstance(value, bool):
        try:
            return operator.index(value)  # type: ignore[arg-type]
        except TypeError:
            pass
    raise TypeError(f"{what}, not {type(value).__name__}")


def _attach_arg(attach: object) -> int:
    """The ``cuMemAllocManaged`` flags for ``attach``: GLOBAL (1) or HOST (2)."""
    v = _index(attach, "attach must be MemAttach.GLOBAL or MemAttach.HOST")
    if v not in (MemAttach.GLOBAL, MemAttach.HOST):
        hint = (
            " (SINGLE attaches memory to one stream: see Stream.attach_memory)"
            if v == MemAttach.SINGLE
            else ""
        )
        raise ValueError(f"attach must be MemAttach.GLOBAL or MemAttach.HOST, not {v}{hint}")
    return v


def _advice_arg(advice: object) -> MemAdvise:
    return enum_arg(advice, MemAdvise, "advice")


@dataclass(frozen=True)
class HostNuma:
    """One NUMA node of the host, as a location of managed memory.

    The driver's ``CU_MEM_LOCATION_TYPE_HOST_NUMA`` with id ``node``. Accepted wherever
    a location is (:meth:`ManagedBuffer.prefetch`, :meth:`ManagedBuffer.advise` with
    ``SET_PREFERRED_LOCATION``, :func:`prefetch_batch`,
    :func:`discard_and_prefetch_batch`), and returned by
    :attr:`ManagedBuffer.preferred_location` and
    :attr:`ManagedBuffer.last_prefetch_location` where the driver reports a node.
    ``"host"`` stays the host as a whole (``CU_MEM_LOCATION_TYPE_HOST``: the driver
    picks the node). A plain value (no driver call): equal, with equal hashes, when the
    nodes are; never equal to a bare int.

    Parameters
    ----------
    node
        The node's id as the operating system numbers it (``numactl --hardware``;
        :attr:`Device.host_numa_node <cudriver.Device.host_numa_node>` gives the one
        nearest a device); ``>= 0``. Whether the node exists is the driver's check.

    Raises
    ------
    TypeError
        ``node`` is not an int (a bool or a str is refused).
    ValueError
        ``node`` is negative.

    Notes
    -----
    Host NUMA locations need a CUDA 12.2 driver, and a system whose driver reports
    NUMA (``DeviceAttribute.HOST_NUMA_ID`` is not -1); elsewhere the driver refuses
    them (:class:`~cudriver.NotSupportedError` or
    :class:`~cudriver.InvalidValueError`). A driver may take a node as preferred
    location and ignore it: CUDA 13.0 on an H200 host of one NUMA node accepts the
    advice and keeps the preferred location the buffer had (a prefetch to the node
    does read back as the node there).
    """

    node: int

    def __post_init__(self) -> None:
        v = _index(self.node, "node must be an int (a host NUMA node id)")
        if v < 0:
            raise ValueError(f"node must be a host NUMA node id (>= 0), not {v}")
        object.__setattr__(self, "node", v)


#: What a location reads back as.
_LocationValue = Device | Literal["host"] | HostNuma | None

_LOCATION = "location must be a Device, a device ordinal, 'host' or a HostNuma"


def _location_arg(location: object) -> int | HostNuma:
    """A device ordinal, :data:`DEVICE_CPU` for ``"host"``, or the :class:`HostNuma`.

    Raises TypeError/ValueError naming ``location``; an ordinal past the last device
    raises :class:`~cudriver.InvalidDeviceError` (a ValueError), which asks the driver
    how many devices there are.
    """
    if isinstance(location, Device):
        return location.ordinal
    if isinstance(location, HostNuma):
        return location
    if isinstance(location, str):
        if location == _HOST:
            return DEVICE_CPU
        raise ValueError(f"{_LOCATION}, not {location!r}")
    v = _index(location, _LOCATION)
    if v < 0:
        raise ValueError(f"location {v} is not a device ordinal (>= 0); for the host pass 'host'")
    return Device(v).ordinal


def _location_value(ordinal: int) -> Device | Literal["host"] | None:
    if ordinal == DEVICE_CPU:
        return _HOST
    if ordinal < 0:  # DEVICE_INVALID: none, or not the same for the whole range
        return None
    return Device(ordinal)


def _range_location(ptr: Any, nbytes: int, *, last_prefetch: bool) -> tuple[Any, _LocationValue]:
    """``(CUresult, location)``: a managed range's preferred or last prefetch location.

    :func:`_bindings.mem_range_location` says device, host or none; for the host, the
    ``_LOCATION_TYPE`` and ``_ID`` attributes (CUDA 12.2+) tell a NUMA node apart. A
    driver that does not know them leaves the answer ``"host"``.
    """
    rc, ordinal = _bindings.mem_range_location(ptr, nbytes, last_prefetch=last_prefetch)
    if rc is not SUCCESS:
        return rc, None
    if ordinal != DEVICE_CPU:
        return rc, _location_value(ordinal)
    kind_attr, id_attr = _RANGE_TYPED[last_prefetch]
    if kind_attr is None or id_attr is None or _HOST_NUMA_KIND is None:
        return rc, _HOST
    r, kind = _bindings._range_int(kind_attr, ptr, nbytes)
    if r is not SUCCESS or kind != int(_HOST_NUMA_KIND):
        return rc, _HOST
    r, node = _bindings._range_int(id_attr, ptr, nbytes)
    if r is not SUCCESS:
        return r, None
    return rc, (HostNuma(node) if node >= 0 else _HOST)


_cuMemRangeGetLocation = checked(_range_location, name="cuMemRangeGetAttribute")


def _mem_location(where: int | HostNuma) -> Any:
    """The ``CUmemLocation`` of a location from :func:`_location_arg`."""
    if not isinstance(where, HostNuma):
        return _bindings.mem_location(where)
    loc = _drv.CUmemLocation()
    loc.type = _HOST_NUMA_KIND
    loc.id = where.node
    return loc


def _unsupported(name: str, detail: str) -> NotSupportedError:
    return NotSupportedError(_NOT_SUPPORTED, name, detail)


def _driver_has_not(name: str, since: str, what: str, exc: BaseException) -> NotSupportedError:
    try:
        major, minor = driver_version()
        found = f"this driver supports CUDA {major}.{minor}"
    except Exception:  # no driver version could be read
        found = "no driver version could be read"
    return _unsupported(name, f"{what} needs a CUDA {since} driver; {found} ({exc})")


def _entry(name: str, bindings: str, driver: str, what: str) -> Callable[..., Any]:
    """The bindings' ``name``, checked; NotSupportedError where they or the driver lack it.

    ``bindings`` and ``driver`` are the versions that have it, ``what`` the feature
    named in the message. Looked up at each call (cold paths only).
    """
    fn = getattr(_drv, name, None)
    if fn is None:
        raise _unsupported(
            name,
            f"{what} needs cuda-bindings {bindings} or newer (which have {name}); "
            f"{_bindings.version_string()} is installed",
        )

    def call(*args: Any) -> tuple[Any, ...]:
        try:
            return fn(*args)  # type: ignore[no-any-return]
        except RuntimeError as exc:  # the bindings found no such entry point in the driver
            if isinstance(exc, CudaError) or type(exc).__name__ == "DynamicLibNotFoundError":
                raise
            raise _driver_has_not(name, driver, what, exc) from None

    return checked(call, name=name)  # type: ignore[no-any-return]


_NUMA = "a host NUMA node as location (HostNuma)"


def _numa_entry(base: str) -> Callable[..., Any]:
    """``cuMemPrefetchAsync``/``cuMemAdvise`` taking a ``CUmemLocation``, for a HostNuma.

    13.x bindings: the call itself; 12.x: its ``_v2`` (CUDA 12.2). Raises
    NotSupportedError (before any driver call) where the bindings lack either.
    """
    name = base if _bindings._LOCATIONS else f"{base}_v2"
    if _HOST_NUMA_KIND is None:
        raise _unsupported(
            name,
            f"{_NUMA} needs cuda-bindings 12.2 or newer (CU_MEM_LOCATION_TYPE_HOST_NUMA); "
            f"{_bindings.version_string()} is installed",
        )
    return _entry(name, "12.2", "12.2", _NUMA)


def _no_resource(resource: object) -> None:
    """Refuse ``resource=``: a ManagedBuffer's memory comes from ``cuMemAllocManaged``."""
    if resource is not None:
        raise TypeError(
            "a ManagedBuffer is allocated with cuMemAllocManaged: resource= is not taken "
            "(allocate from a cudriver.ManagedMemoryPool with pool.allocate(n, stream=s))"
        )


def _require_concurrent(dev: Device, fn: Any) -> None:
    """Raise NotSupportedError unless ``dev`` can access managed memory concurrently."""
    if not dev.attribute(DeviceAttribute.CONCURRENT_MANAGED_ACCESS):
        raise NotSupportedError(
            _NOT_SUPPORTED,
            fn.__name__,
            f"device {dev.ordinal} cannot access managed memory concurrently with the host "
            "(DeviceAttribute.CONCURRENT_MANAGED_ACCESS is 0)",
        )


class ManagedBuffer(DeviceBuffer):
    """Managed memory (``cuMemAllocManaged``; ``cuMemFree`` on close).

    One address, valid on the host and on the devices: the driver moves the pages to
    the processor that uses them. Everything a :class:`~cudriver.DeviceBuffer` does
    works on it (copies, fills, views, kernel arguments, the CUDA Array Interface);
    views of a ManagedBuffer are ManagedBuffers.

    Parameters
    ----------
    nbytes
        Size in bytes; must be positive.
    attach
        ``MemAttach.GLOBAL`` (default): any stream on any device may use the memory.
        ``MemAttach.HOST``: the memory is attached to the host; devices without
        ``CONCURRENT_MANAGED_ACCESS`` may use it only once it is attached to a stream
        (:meth:`Stream.attach_memory`).
    context
        The context to allocate in; default: the current context (else device 0's
        primary context). The buffer keeps it alive.

    Raises
    ------
    NotSupportedError
        The context's device has no managed memory
        (``DeviceAttribute.MANAGED_MEMORY`` is 0).

    Notes
    -----
    **Host access** (:meth:`array`). Work on the device is asynchronous: the host sees
    what a kernel wrote only once that work has completed (synchronise the stream),
    and a kernel sees host writes made before its launch. Beyond that, the device's
    ``CONCURRENT_MANAGED_ACCESS`` attribute decides:

    * 1 (Linux, Pascal and later): host and devices may access the memory at the same
      time; the driver keeps it coherent (data races are still races).
    * 0 (Windows, older GPUs, some virtualised setups): the host must not touch
      managed memory while any kernel runs on the device, even one that does not use
      this buffer (the process gets a segmentation fault). Synchronise the context
      first, or attach the memory to the host (``attach=MemAttach.HOST``) or to one
      stream (:meth:`Stream.attach_memory`, ``attach=MemAttach.SINGLE``) and touch
      it only while that stream is idle.

    **Prefetching** (:meth:`prefetch`) and the advice to prefer a device or to be
    accessed by one (:meth:`advise`) need ``CONCURRENT_MANAGED_ACCESS`` on that device.

    :meth:`from_handle` wraps managed memory allocated elsewhere, without freeing it.
    """

    __slots__ = ()  # a subclass of DeviceBuffer may not add fields (see _core.BufferCore)

    _kind = "ManagedBuffer"
    #: The DLPack device type: ``kDLCUDAManaged``.
    _DL_DEVICE_TYPE = 13

    def __init__(
        self,
        nbytes: int,
        *,
        attach: MemAttach | int = MemAttach.GLOBAL,
        context: Context | None = None,
    ) -> None:
        n = nbytes_arg(nbytes)
        flags = _attach_arg(attach)
        ctx = context_arg(context)
        if ctx is None:
            ctx = current_or_default()
        ctx._closed_check()
        dev = ctx.device
        if not dev.attribute(DeviceAttribute.MANAGED_MEMORY):
            raise NotSupportedError(
                _NOT_SUPPORTED,
                _drv.cuMemAllocManaged.__name__,
                f"device {dev.ordinal} has no managed memory (DeviceAttribute.MANAGED_MEMORY is 0)",
            )
        pushed = enter_context(ctx._closed_check(), ctx._key)
        try:
            r = _drv.cuMemAllocManaged(n, flags)
            if r[0] is _OUT_OF_MEMORY:  # once more after the queued frees: see reclaim
                reclaim()
                r = _drv.cuMemAllocManaged(n, flags)
        finally:
            leave_context(pushed)
        if r[0] is not SUCCESS:
            if r[0] is _OUT_OF_MEMORY and _account.ON:
                _account.failed(n, dev.ordinal, "cuMemAllocManaged")
            raise error_for(r[0], _drv.cuMemAllocManaged)
        self._set_fields(n, ctx, None, None, None, None, 0)
        self._init_handle(
            r[1],
            release=mem_free(ctx.handle, r[1], n),
            func="cuMemFree",
            keep=(ctx,),
        )
        if _account.ON:
            _account.track(self._state, self._key, n, dev.ordinal, "cuMemAllocManaged")
        if _hooks.MARKS:
            _hooks.mark("ManagedBuffer", n)

    # -- constructors -------------------------------------------------------------------
    @classmethod
    def from_array(
        cls,
        array: npt.ArrayLike,
        *,
        stream: StreamLike = None,
        context: Context | None = None,
        attach: MemAttach | int = MemAttach.GLOBAL,
        resource: None = None,
    ) -> ManagedBuffer:
        """Allocate managed memory holding a copy of a host array; it remembers dtype and shape.

        Allocates (``cuMemAllocManaged``) and copies (``cuMemcpyHtoDAsync``). Without
        ``stream`` the copy has completed on return; with one it is only enqueued
        there (the memory itself is never stream-ordered).

        Raises
        ------
        ValueError
            The array is empty or not C-contiguous.
        TypeError
            The array holds Python objects, or is a device array (use
            :meth:`copy_from` on a new buffer).
        """
        a = host_source(array, "ManagedBuffer")
        if stream is not None:
            stream_handle(stream)  # a bad stream fails before the allocation
        _no_resource(resource)
        buf = cls(a.nbytes, attach=attach, context=context)
        fill_new(buf, a, stream)
        return buf

    @classmethod
    def empty(
        cls,
        shape: int | tuple[int, ...],
        dtype: npt.DTypeLike = np.uint8,
        *,
        stream: StreamLike = None,
        context: Context | None = None,
        attach: MemAttach | int = MemAttach.GLOBAL,
        resource: None = None,
    ) -> ManagedBuffer:
        """Allocate uninitialised managed memory for ``shape`` elements of ``dtype``.

        Like the constructor (``cuMemAllocManaged``); the buffer remembers dtype and
        shape. ``stream`` must be None: managed memory is not allocated in stream
        order (it is accepted for the signature :meth:`DeviceBuffer.empty` has, and a
        stream given raises ``TypeError``, as every inherited parameter that does not
        apply does).
        """
        if stream is not None:
            raise TypeError(
                "ManagedBuffer.empty() takes no stream: managed memory is not allocated in "
                "stream order (prefetch it on a stream with buf.prefetch(location, stream=s))"
            )
        _no_resource(resource)
        return new_typed(functools.partial(cls, attach=attach, context=context), shape, dtype)

    @classmethod
    def import_handle(cls, *args: Any, **kwargs: Any) -> NoReturn:
        """Not available: memory of another process's pool is not managed memory.

        Open it with :meth:`DeviceBuffer.import_handle`.
        """
        raise TypeError(
            "ManagedBuffer.import_handle is not available: an allocation exported from "
            "another process's memory pool is device memory, not managed memory; open it "
            "with DeviceBuffer.import_handle(data, nbytes, pool=pool)"
        )

    # -- views --------------------------------------------------------------------------
    def view(self, offset: int = 0, nbytes: int | None = None) -> ManagedBuffer:
        """A byte range of this buffer as a new :class:`ManagedBuffer` (no driver call).

        See :meth:`DeviceBuffer.view`.
        """
        v = super().view(offset, nbytes)
        assert isinstance(v, ManagedBuffer)
        return v

    def __getitem__(self, key: object) -> ManagedBuffer:
        """``buf[a:b]``: a byte view (see :meth:`view`); only step 1 is supported."""
        v = super().__getitem__(key)
        assert isinstance(v, ManagedBuffer)
        return v

    def cast(
        self, dtype: npt.DTypeLike, shape: int | tuple[int, ...] | None = None
    ) -> ManagedBuffer:
        """A typed view of the whole buffer (no driver call); see :meth:`DeviceBuffer.cast`."""
        v = super().cast(dtype, shape)
        assert isinstance(v, ManagedBuffer)
        return v

    # -- host access --------------------------------------------------------------------
    def array(
        self,
        dtype: npt.DTypeLike | None = None,
        shape: int | tuple[int, ...] | None = None,
    ) -> npt.NDArray[Any]:
        """A numpy array onto the managed memory, for the host (no copy, no driver call).

        Parameters
        ----------
        dtype
            The array's dtype; default: the remembered dtype (``uint8`` for a buffer
            of bytes).
        shape
            The array's shape; its size times the item size must equal
            :attr:`nbytes`. Default: the remembered shape when ``dtype`` is None too,
            else ``(nbytes // itemsize,)``.

        Notes
        -----
        The array keeps the memory alive, also after the buffer is dropped or closed:
        the memory is freed when the last such array is gone. When the host may touch
        it is said in the class's notes: always on devices with
        ``CONCURRENT_MANAGED_ACCESS``, else only while no kernel runs on the device.
        """
        if self._h is None:
            self._raise_closed()
        if dtype is None and shape is None:
            dt, shp = self.dtype, self.shape
        else:
            dt, shp = typed_shape(self._nbytes, self.dtype if dtype is None else dtype, shape)
        raw: npt.NDArray[Any] = np.asarray(HostBytes(self._lease(), self._key, self._nbytes))
        if dt != _U8:
            raw = raw.view(dt)
        return raw.reshape(shp)

    # -- prefetch and advice ------------------------------------------------------------
    @pinned
    def prefetch(
        self, location: Device | int | Literal["host"] | HostNuma, *, stream: StreamLike
    ) -> None:
        """Migrate the whole buffer to ``location`` (``cuMemPrefetchAsync``).

        Enqueued on ``stream``, which is required: the prefetch never goes to a stream
        the caller did not name (the legacy default stream would break a capture open
        on a blocking stream). A prefetch cannot be captured (the driver refuses it,
        which would break the capture): on a capturing stream it raises
        :class:`~cudriver.StreamCaptureError` first and the capture goes on. Does not
        synchronise and allocates nothing of cudriver's own (the driver may populate
        or evict pages). A hint: accesses stay correct while the data moves.

        Parameters
        ----------
        location
            A :class:`~cudriver.Device`, a device ordinal, ``"host"``, or a
            :class:`HostNuma` (one NUMA node of the host).
        stream
            The stream to enqueue the prefetch on: a :class:`~cudriver.Stream` or any
            stream-like object (:meth:`Stream.legacy() <cudriver.Stream.legacy>` for
            the legacy default stream).

        Raises
        ------
        TypeError
            ``stream`` is None or not stream-like; ``location`` is of another type.
        StreamCaptureError
            ``stream`` is capturing (checked with ``cuStreamIsCapturing``).
        NotSupportedError
            The target device (for the host: the buffer's device) lacks
            ``DeviceAttribute.CONCURRENT_MANAGED_ACCESS``; or a :class:`HostNuma`
            where the bindings or the driver lack host NUMA locations (CUDA 12.2).
        """
        where = _location_arg(location)
        numa = _numa_entry("cuMemPrefetchAsync") if isinstance(where, HostNuma) else None
        sh = stream_handle(stream)
        ctx = self.context
        target = Device(where) if isinstance(where, int) and where >= 0 else ctx.device
        _require_concurrent(target, _drv.cuMemPrefetchAsync)
        refuse_capturing(
            sh,
            _drv.cuMemPrefetchAsync,
            "a prefetch cannot be captured (the driver refuses it, breaking the capture): "
            "prefetch before the capture, or on a stream that is not capturing",
        )
        with ctx._scope():
            if numa is None:
                _cuMemPrefetchAsync(self.handle, self._nbytes, where, sh)
            else:
                numa(self.handle, self._nbytes, _mem_location(where), 0, sh)

    @pinned
    def advise(
        self,
        advice: MemAdvise | int,
        location: Device | int | Literal["host"] | HostNuma | None = None,
    ) -> None:
        """Tell the driver how the buffer will be used (``cuMemAdvise``).

        A synchronous host call that enqueues nothing and allocates nothing; it applies
        to the whole buffer. Read the advice back with :attr:`read_mostly`,
        :attr:`preferred_location` and :attr:`accessed_by`.

        Parameters
        ----------
        advice
            A :class:`~cudriver.MemAdvise` (or a ``CUmem_advise`` member).
        location
            A :class:`~cudriver.Device`, a device ordinal, or ``"host"``: the preferred
            location, or the processor that accesses the memory; for
            ``SET_PREFERRED_LOCATION`` also a :class:`HostNuma`. Needed by
            ``SET_PREFERRED_LOCATION``, ``SET_ACCESSED_BY`` and ``UNSET_ACCESSED_BY``;
            ignored by the others.

        Raises
        ------
        ValueError
            A needed location is missing; a :class:`HostNuma` for ``SET_ACCESSED_BY``
            or ``UNSET_ACCESSED_BY`` (the driver maps memory for processors: a device
            or the host).
        NotSupportedError
            ``SET_PREFERRED_LOCATION`` or ``SET_ACCESSED_BY`` names a device without
            ``DeviceAttribute.CONCURRENT_MANAGED_ACCESS``; or a :class:`HostNuma` where
            the bindings or the driver lack host NUMA locations (CUDA 12.2).
        """
        adv = _advice_arg(advice)
        if location is None and adv not in _NO_LOCATION:
            raise ValueError(
                f"location: MemAdvise.{adv.name} needs one (a Device, a device ordinal or 'host')"
            )
        where = None if location is None else _location_arg(location)
        numa = None
        if isinstance(where, HostNuma):
            if adv in _NO_LOCATION:
                where = None  # ignored by the driver
            elif adv in (MemAdvise.SET_ACCESSED_BY, MemAdvise.UNSET_ACCESSED_BY):
                raise ValueError(
                    f"location: MemAdvise.{adv.name} takes a Device, a device ordinal or "
                    f"'host', not {where!r} (the driver maps memory for processors, not for "
                    "NUMA nodes)"
                )
            else:
                numa = _numa_entry("cuMemAdvise")
        ctx = self.context
        if where is None:  # ignored by the driver: name the buffer's own device
            where = ctx.device.ordinal
        elif isinstance(where, int) and where >= 0 and adv in _NEEDS_CONCURRENT:
            _require_concurrent(Device(where), _drv.cuMemAdvise)
        with ctx._scope():
            if numa is None:
                assert isinstance(where, int)
                _cuMemAdvise(self.handle, self._nbytes, _drv.CUmem_advise(int(adv)), where)
            else:
                numa(self.handle, self._nbytes, _drv.CUmem_advise(int(adv)), _mem_location(where))

    # -- the advice read back -------------------------------------------------------------
    @property
    @pinned
    def read_mostly(self) -> bool:
        """Whether the whole buffer is advised ``SET_READ_MOSTLY``.

        Read with ``cuMemRangeGetAttribute`` (``CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY``);
        does not synchronise.
        """
        with self.context._scope():
            v = _calls.cuMemRangeGetAttribute(4, _RANGE_READ_MOSTLY, self.handle, self._nbytes)
        return bool(v)

    @property
    @pinned
    def preferred_location(self) -> Device | Literal["host"] | HostNuma | None:
        """The preferred location set by :meth:`advise`, or None.

        A Device, ``"host"``, or a :class:`HostNuma` for a NUMA node of the host; None
        when no preferred location is set, or when parts of the buffer have different
        ones. Read with ``cuMemRangeGetAttribute`` (the ``PREFERRED_LOCATION_TYPE`` and
        ``_ID`` attributes; ``PREFERRED_LOCATION`` with cuda-bindings 12.x, then the
        ``_TYPE`` and ``_ID`` ones for the host where the driver has them); does not
        synchronise.
        """
        with self.context._scope():
            v: _LocationValue = _cuMemRangeGetLocation(
                self.handle, self._nbytes, last_prefetch=False
            )
        return v

    @property
    @pinned
    def last_prefetch_location(self) -> Device | Literal["host"] | HostNuma | None:
        """The location the whole buffer was last prefetched to.

        A Device, ``"host"``, or a :class:`HostNuma`; None when it was never
        prefetched, or when parts of it went to different places. The location asked
        for, not a sign that the prefetch has completed or even begun. Read with
        ``cuMemRangeGetAttribute`` (the ``LAST_PREFETCH_LOCATION_TYPE`` and ``_ID``
        attributes; ``LAST_PREFETCH_LOCATION`` with cuda-bindings 12.x, then the
        ``_TYPE`` and ``_ID`` ones for the host where the driver has them); does not
        synchronise.
        """
        with self.context._scope():
            v: _LocationValue = _cuMemRangeGetLocation(
                self.handle, self._nbytes, last_prefetch=True
            )
        return v

    @property
    @pinned
    def accessed_by(self) -> list[Device | Literal["host"]]:
        """The processors advised ``SET_ACCESSED_BY`` for the whole buffer.

        Devices in ordinal order as the driver lists them (``"host"`` if the host is
        among them; never a :class:`HostNuma`, which this advice does not take). Read
        with ``cuMemRangeGetAttribute`` (``CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY``, one
        entry per device and one for the host); does not synchronise.
        """
        slots = Device.count() + 1
        with self.context._scope():
            ids = _calls.cuMemRangeGetAttribute(
                4 * slots, _RANGE_ACCESSED_BY, self.handle, self._nbytes
            )
        out: list[Device | Literal["host"]] = []
        for i in ids:
            loc = _location_value(int(i))  # None for the unused entries (DEVICE_INVALID)
            if loc is not None:
                out.append(loc)
        return out


# -- batches -----------------------------------------------------------------------------------
#: One operation of a batch: (buffer, offset, nbytes, location or None).
_Op = tuple[ManagedBuffer, int, int, int | HostNuma | None]

_BATCH_BINDINGS = "13.0"
_BATCH_DRIVER = "13.0"
_TARGET = "a ManagedBuffer or a (ManagedBuffer, offset, nbytes) range"


def _target_arg(obj: object, where: str) -> tuple[ManagedBuffer, int, int]:
    """``(buffer, offset, nbytes)`` of one batch target; TypeError/ValueError/ClosedError."""
    if isinstance(obj, ManagedBuffer):
        buf, off, n = obj, 0, None
    elif isinstance(obj, tuple) and len(obj) == 3:
        buf, off, n = obj
        if not isinstance(buf, ManagedBuffer):
            raise TypeError(
                f"{where}: a range is (ManagedBuffer, offset, nbytes), and "
                f"{type(buf).__name__} is not a ManagedBuffer"
                + (" (not managed memory)" if isinstance(buf, DeviceBuffer) else "")
            )
    elif isinstance(obj, DeviceBuffer):
        raise TypeError(
            f"{where}: a {type(obj).__name__} is not managed memory; the batch calls take "
            f"{_TARGET} (wrap managed memory allocated elsewhere with "
            "ManagedBuffer.from_handle)"
        )
    else:
        raise TypeError(f"{where} must be {_TARGET}, not {type(obj).__name__}")
    if buf._h is None:
        buf._raise_closed()
    size = buf._nbytes
    off = _index(off, f"{where}: offset must be an int")
    n = size - off if n is None else _index(n, f"{where}: nbytes must be an int")
    if off < 0 or n <= 0 or off + n > size:
        raise ValueError(
            f"{where}: the range of {n} bytes at offset {off} is not within the buffer's "
            f"{size} bytes (offset >= 0, nbytes > 0, offset + nbytes <= {size})"
        )
    return buf, off, n


def _sequence(items: object, what: str) -> list[Any]:
    """``items`` as a list; TypeError for what is not a collection of batch items."""
    # A buffer is iterable through __getitem__, and a str by character: neither is a batch.
    if not isinstance(items, (str, bytes, DeviceBuffer)):
        try:
            return list(items)  # type: ignore[call-overload,no-any-return]
        except TypeError:
            pass
    raise TypeError(f"{what} must be a sequence of batch items, not {type(items).__name__}")


def _located_ops(items: object) -> list[_Op]:
    """The operations of ``items``: ``(target, location)`` pairs, checked."""
    ops: list[_Op] = []
    for i, item in enumerate(_sequence(items, "items")):
        if not isinstance(item, (tuple, list)) or len(item) != 2:
            raise TypeError(
                f"items[{i}] must be a pair (target, location), the target {_TARGET}; "
                f"not {type(item).__name__}"
                + (f" of {len(item)}" if isinstance(item, (tuple, list)) else "")
            )
        buf, off, n = _target_arg(item[0], f"items[{i}][0]")
        try:
            where = _location_arg(item[1])
        except (TypeError, ValueError) as exc:
            if type(exc) not in (TypeError, ValueError):  # InvalidDeviceError: says enough
                raise
            raise type(exc)(f"items[{i}][1]: {exc}") from None
        ops.append((buf, off, n, where))
    return ops


def _grouped(
    ops: Sequence[tuple[int, int, int | HostNuma | None]],
) -> tuple[list[int], list[int], list[int | HostNuma], list[int]]:
    """``(addresses, sizes, locations, first indices)`` for the driver's batch arrays.

    The operations ``(address, nbytes, location)`` grouped by location, in the order
    each location first appears (the order within a batch is the driver's anyway):
    ``locations[k]`` applies to operations ``first[k]`` up to ``first[k + 1] - 1``.
    """
    groups: dict[int | HostNuma | None, list[tuple[int, int]]] = {}
    for addr, n, where in ops:
        groups.setdefault(where, []).append((addr, n))
    addrs: list[int] = []
    sizes: list[int] = []
    locs: list[int | HostNuma] = []
    first: list[int] = []
    for where, members in groups.items():
        if where is not None:
            locs.append(where)
            first.append(len(addrs))
        for addr, n in members:
            addrs.append(addr)
            sizes.append(n)
    return addrs, sizes, locs, first


def _refuse_legacy(sh: Any, name: str) -> None:
    """ValueError for the legacy NULL stream, which the batch calls refuse."""
    v = int(sh)
    per_thread = os.environ.get("CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM", "0") not in ("", "0")
    if v == 1 or (v == 0 and not per_thread):
        raise ValueError(
            f"stream: {name} does not take the legacy default stream (the driver's rule); "
            "pass a stream of your own (cudriver.Stream()) or Stream.per_thread()"
        )


def _run_batch(name: str, ops: list[_Op], stream: StreamLike, *, prefetch: bool) -> None:
    """The common body of the batch functions: checks, pins, the one driver call."""
    sh = stream_handle(stream)
    fn = _entry(name, _BATCH_BINDINGS, _BATCH_DRIVER, "a batch of managed-memory operations")
    if not ops:
        return
    if _HOST_NUMA_KIND is None and any(isinstance(op[3], HostNuma) for op in ops):
        raise _unsupported(name, f"{_NUMA} needs CU_MEM_LOCATION_TYPE_HOST_NUMA in the bindings")
    _refuse_legacy(sh, name)
    raw = getattr(_drv, name)
    for dev in Device.all():  # the driver's rule: every device of the system
        _require_concurrent(dev, raw)
    refuse_capturing(
        sh,
        raw,
        f"{name} cannot be captured into a graph: run the batch before the capture, or "
        "on a stream that is not capturing",
    )
    ctx = ops[0][0].context
    states = pin_all(*(op[0] for op in ops), stream)
    try:
        addrs, sizes, locs, first = _grouped(
            [(int(buf.handle) + off, n, where) for buf, off, n, where in ops]
        )
        ptrs = [_drv.CUdeviceptr(a) for a in addrs]
        with ctx._scope():
            if prefetch:
                fn(
                    ptrs,
                    sizes,
                    len(ptrs),
                    [_mem_location(w) for w in locs],
                    first,
                    len(locs),
                    0,
                    sh,
                )
            else:
                fn(ptrs, sizes, len(ptrs), 0, sh)
    finally:
        unpin_all(states)


def prefetch_batch(
    items: Iterable[
        tuple[
            ManagedBuffer | tuple[ManagedBuffer, int, int],
            Device | int | Literal["host"] | HostNuma,
        ]
    ],
    *,
    stream: StreamLike,
) -> None:
    """Prefetch many managed ranges, each to its location, in one call.

    One ``cuMemPrefetchBatchAsync`` (CUDA 13.0) enqueued on ``stream``: what
    :meth:`ManagedBuffer.prefetch` does for each item. The batch runs in stream order
    as a whole; its prefetches in no particular order among themselves. The items are
    grouped by location for the driver's ``prefetchLocs``/``prefetchLocIdxs`` arrays.
    Does not synchronise and allocates nothing of cudriver's own (the driver may
    populate or evict pages). Every buffer (and a cudriver ``stream``) stays pinned for
    the call: a ``close()`` on another thread meanwhile waits for it.

    Parameters
    ----------
    items
        ``(target, location)`` pairs. A target is a :class:`ManagedBuffer` (all of
        it) or a ``(ManagedBuffer, offset, nbytes)`` range of one; a location a
        :class:`~cudriver.Device`, a device ordinal, ``"host"`` or a :class:`HostNuma`.
        Empty: nothing is done (no driver call).
    stream
        The stream to enqueue the batch on, required; not the legacy default stream
        (the driver refuses it).

    Raises
    ------
    TypeError
        An item, target or location of another type; a buffer that is not a
        :class:`ManagedBuffer`; ``stream`` None or not stream-like.
    ValueError
        A range outside its buffer; a bad location; the legacy default stream.
    ClosedError
        A buffer (or the stream) is closed.
    StreamCaptureError
        ``stream`` is capturing (checked with ``cuStreamIsCapturing``).
    NotSupportedError
        The bindings lack ``cuMemPrefetchBatchAsync`` (cuda-bindings 13.0) or the
        driver does (CUDA 13.0); a device of the system lacks
        ``DeviceAttribute.CONCURRENT_MANAGED_ACCESS`` (the driver needs it on all).

    Notes
    -----
    All the checks are made before the driver is called: a failing batch enqueues
    nothing.
    """
    ops = _located_ops(items)
    _run_batch("cuMemPrefetchBatchAsync", ops, stream, prefetch=True)


def discard_batch(
    buffers: Iterable[ManagedBuffer | tuple[ManagedBuffer, int, int]], *, stream: StreamLike
) -> None:
    """Discard the contents of many managed ranges, in one call.

    One ``cuMemDiscardBatchAsync`` (CUDA 13.0) enqueued on ``stream``. Discarding tells
    the driver the data is no longer needed: it may drop pages instead of migrating
    them. The memory stays allocated and usable; what a discarded range holds is
    undefined until it is written (or prefetched) again, and accesses racing with the
    discard are undefined behaviour. Does not synchronise and allocates nothing. Every
    buffer (and a cudriver ``stream``) stays pinned for the call.

    Parameters
    ----------
    buffers
        Targets: :class:`ManagedBuffer` objects (all of each) or
        ``(ManagedBuffer, offset, nbytes)`` ranges. Empty: nothing is done (no driver
        call).
    stream
        The stream to enqueue the batch on, required; not the legacy default stream.

    Raises
    ------
    TypeError, ValueError, ClosedError, StreamCaptureError, NotSupportedError
        As :func:`prefetch_batch` (``cuMemDiscardBatchAsync``).
    """
    ops: list[_Op] = [
        (*_target_arg(t, f"buffers[{i}]"), None)
        for i, t in enumerate(_sequence(buffers, "buffers"))
    ]
    _run_batch("cuMemDiscardBatchAsync", ops, stream, prefetch=False)


def discard_and_prefetch_batch(
    items: Iterable[
        tuple[
            ManagedBuffer | tuple[ManagedBuffer, int, int],
            Device | int | Literal["host"] | HostNuma,
        ]
    ],
    *,
    stream: StreamLike,
) -> None:
    """Discard many managed ranges and prefetch each to its location, in one call.

    One ``cuMemDiscardAndPrefetchBatchAsync`` (CUDA 13.0) enqueued on ``stream``: as
    :func:`discard_batch` followed by :func:`prefetch_batch`, in one step, so the
    driver populates the pages at their location without moving the old contents. For
    memory about to be overwritten there. The contents are undefined afterwards. Does
    not synchronise and allocates nothing of cudriver's own. Every buffer (and a
    cudriver ``stream``) stays pinned for the call.

    Parameters
    ----------
    items, stream
        As :func:`prefetch_batch`.

    Raises
    ------
    TypeError, ValueError, ClosedError, StreamCaptureError, NotSupportedError
        As :func:`prefetch_batch` (``cuMemDiscardAndPrefetchBatchAsync``).
    """
    ops = _located_ops(items)
    _run_batch("cuMemDiscardAndPrefetchBatchAsync", ops, stream, prefetch=True)
