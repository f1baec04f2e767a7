"""Managed (unified) memory: :class:`ManagedBuffer`.

Memory from ``cuMemAllocManaged`` has one address that is valid on the host and on
every device that supports managed memory; the driver migrates its pages to where they
are used. :class:`ManagedBuffer` is a :class:`~cudriver.DeviceBuffer` (copies, fills,
views, kernel arguments and ``__cuda_array_interface__`` work as for any device
buffer) with host access through numpy (:meth:`ManagedBuffer.array`), prefetching
(``cuMemPrefetchAsync``), advice (``cuMemAdvise``) and the advice read back
(``cuMemRangeGetAttribute``).

A location (where memory is prefetched to, or what advice is about) is a
:class:`~cudriver.Device`, a device ordinal, or the string ``"host"``; the properties
that read a location back return a :class:`~cudriver.Device`, ``"host"`` or None.
"""

from __future__ import annotations

import functools
import operator
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
from .._lifetime._pins import pinned
from .._runtime import _bindings, _calls
from .._runtime._bindings import DEVICE_CPU, SUCCESS
from .._runtime._enums import DeviceAttribute, MemAdvise, MemAttach
from ..errors import NotSupportedError, checked, error_for
from ._copy import HostBytes, fill_new, host_source, new_typed, refuse_capturing
from ._core import mem_free
from .memory import DeviceBuffer

_OUT_OF_MEMORY = _drv.CUresult.CUDA_ERROR_OUT_OF_MEMORY

__all__ = ["ManagedBuffer"]

_U8 = np.dtype(np.uint8)
_HOST: Literal["host"] = "host"
_NOT_SUPPORTED = _drv.CUresult.CUDA_ERROR_NOT_SUPPORTED

_cuMemPrefetchAsync = checked(_bindings.mem_prefetch, name="cuMemPrefetchAsync")
_cuMemAdvise = checked(_bindings.mem_advise, name="cuMemAdvise")
_cuMemRangeGetLocation = checked(_bindings.mem_range_location, name="cuMemRangeGetAttribute")

_RANGE_READ_MOSTLY = _drv.CUmem_range_attribute.CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY
_RANGE_ACCESSED_BY = _drv.CUmem_range_attribute.CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY

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


_LOCATION = "location must be a Device, a device ordinal or 'host'"


def _location_arg(location: object) -> int:
    """A device ordinal, or :data:`DEVICE_CPU` for ``"host"``.

    Raises TypeError/ValueError naming ``location``; an ordinal past the last device
    raises :class:`~cudriver.InvalidDeviceError` (a ValueError), which asks the driver
    how many devices there are.
    """
    if isinstance(location, Device):
        return location.ordinal
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
            raise error_for(r[0], _drv.cuMemAllocManaged)
        self._set_fields(n, ctx, None, None, None, None, 0)
        self._init_handle(
            r[1],
            release=mem_free(ctx.handle, r[1], n),
            func="cuMemFree",
            keep=(ctx,),
        )

    # -- constructors -------------------------------------------------------------------
    @classmethod
    def from_array(
        cls,
        array: npt.ArrayLike,
        *,
        stream: StreamLike = None,
        context: Context | None = None,
        attach: MemAttach | int = MemAttach.GLOBAL,
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
    def prefetch(self, location: Device | int | Literal["host"], *, stream: StreamLike) -> None:
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
            A :class:`~cudriver.Device`, a device ordinal, or ``"host"``.
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
            The target device (for ``"host"``: the buffer's device) lacks
            ``DeviceAttribute.CONCURRENT_MANAGED_ACCESS``.
        """
        ordinal = _location_arg(location)
        sh = stream_handle(stream)
        ctx = self.context
        target = Device(ordinal) if ordinal >= 0 else ctx.device
        _require_concurrent(target, _drv.cuMemPrefetchAsync)
        refuse_capturing(
            sh,
            _drv.cuMemPrefetchAsync,
            "a prefetch cannot be captured (the driver refuses it, breaking the capture): "
            "prefetch before the capture, or on a stream that is not capturing",
        )
        with ctx._scope():
            _cuMemPrefetchAsync(self.handle, self._nbytes, ordinal, sh)

    @pinned
    def advise(
        self, advice: MemAdvise | int, location: Device | int | Literal["host"] | None = None
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
            location, or the processor that accesses the memory. Needed by
            ``SET_PREFERRED_LOCATION``, ``SET_ACCESSED_BY`` and ``UNSET_ACCESSED_BY``;
            ignored by the others.

        Raises
        ------
        NotSupportedError
            ``SET_PREFERRED_LOCATION`` or ``SET_ACCESSED_BY`` names a device without
            ``DeviceAttribute.CONCURRENT_MANAGED_ACCESS``.
        """
        adv = _advice_arg(advice)
        if location is None and adv not in _NO_LOCATION:
            raise ValueError(
                f"location: MemAdvise.{adv.name} needs one (a Device, a device ordinal or 'host')"
            )
        ordinal = None if location is None else _location_arg(location)
        ctx = self.context
        if ordinal is None:  # ignored by the driver: name the buffer's own device
            ordinal = ctx.device.ordinal
        elif ordinal >= 0 and adv in _NEEDS_CONCURRENT:
            _require_concurrent(Device(ordinal), _drv.cuMemAdvise)
        with ctx._scope():
            _cuMemAdvise(self.handle, self._nbytes, _drv.CUmem_advise(int(adv)), ordinal)

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
    def preferred_location(self) -> Device | Literal["host"] | None:
        """The preferred location set by :meth:`advise` (a Device or ``"host"``), or None.

        None when no preferred location is set, or when parts of the buffer have
        different ones. Read with ``cuMemRangeGetAttribute`` (the
        ``PREFERRED_LOCATION_TYPE`` and ``_ID`` attributes; ``PREFERRED_LOCATION``
        with cuda-bindings 12.x); does not synchronise.
        """
        with self.context._scope():
            v = _cuMemRangeGetLocation(self.handle, self._nbytes, last_prefetch=False)
        return _location_value(int(v))

    @property
    @pinned
    def last_prefetch_location(self) -> Device | Literal["host"] | None:
        """The location the whole buffer was last prefetched to (a Device or ``"host"``).

        None when it was never prefetched, or when parts of it went to different
        places. The location asked for, not a sign that the prefetch has completed or
        even begun. Read with ``cuMemRangeGetAttribute`` (the
        ``LAST_PREFETCH_LOCATION_TYPE`` and ``_ID`` attributes;
        ``LAST_PREFETCH_LOCATION`` with cuda-bindings 12.x); does not synchronise.
        """
        with self.context._scope():
            v = _cuMemRangeGetLocation(self.handle, self._nbytes, last_prefetch=True)
        return _location_value(int(v))

    @property
    @pinned
    def accessed_by(self) -> list[Device | Literal["host"]]:
        """The processors advised ``SET_ACCESSED_BY`` for the whole buffer.

        Devices in ordinal order as the driver lists them (``"host"`` if the host is
        among them). Read with ``cuMemRangeGetAttribute``
        (``CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY``, one entry per device and one for
        the host); does not synchronise.
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
