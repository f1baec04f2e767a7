"""Stream-ordered memory pools: :class:`MemoryPool`.

A pool is where ``pool.allocate(n, stream=s)`` (``DeviceBuffer(n, stream=s, pool=pool)``)
takes its memory from (``cuMemAllocFromPoolAsync``) and where the buffer's stream-ordered
free gives it back.
Memory freed into a pool stays reserved by it up to its release threshold: below it,
the next allocation reuses it without asking the driver, even after a synchronisation.
"""

from __future__ import annotations

import ctypes
import os
import threading
from typing import Any

from cuda.bindings import driver as _drv

from .._context import _share
from .._context.device import (
    Context,
    Device,
    device_arg,
)
from .._lifetime._coerce import (
    NONE_STREAM,
    PoolBase,
    StreamLike,
    deprecated,
    enum_arg,
    handle_arg,
    nbytes_arg,
    uint_arg,
)
from .._lifetime._handle import link, queue_if_free, reclaiming, unlink
from .._lifetime._pins import pin_all, pinned, unpin_all
from .._lifetime._release import _warn
from .._runtime import _calls, _hooks
from .._runtime._bindings import SUCCESS
from .._runtime._enums import MemAccess
from ..errors import NotSupportedError, error_for
from . import accounting as _account
from ._copy import refuse_capturing
from ._core import mem_free, mem_free_async
from ._default_resource import POOLS
from .managed import ManagedBuffer
from .memory import DeviceBuffer, _as_stream
from .pinned import PinnedBuffer
from .resource import MemoryResource, _device_of
from .resource import _home as _kept  # the context pool calls run in

__all__ = ["MemoryPool", "PinnedMemoryPool", "ManagedMemoryPool", "KEEP_ALL"]

_A = _drv.CUmemPool_attribute
_EXPORT_BYTES = 64  # sizeof(CUmemPoolPtrExportData)
_FD = _drv.CUmemAllocationHandleType.CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
_NO_HANDLE = _drv.CUmemAllocationHandleType.CU_MEM_HANDLE_TYPE_NONE
_PINNED_TYPE = _drv.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
_MANAGED_TYPE = getattr(_drv.CUmemAllocationType, "CU_MEM_ALLOCATION_TYPE_MANAGED", None)
_LT = _drv.CUmemLocationType

#: A release threshold that keeps every freed byte in the pool (``UINT64_MAX``).
KEEP_ALL = (1 << 64) - 1


class _Destroy:
    """An owned pool's release: ``cuMemPoolDestroy`` once the frees into it have run.

    The driver documents destroying a pool with frees into it still pending as
    allowed, but with the CUDA 13.0 driver (H100) it crashed the process when other
    threads allocated, filled, synchronised and freed meanwhile, in raw
    ``cuda.bindings`` calls as well; waiting for the pending frees first did not
    (waiting with ``cuCtxSynchronize`` instead deadlocked in the driver). A pool's
    buffers are freed on the streams they were allocated on, so the pool depends on
    those streams (:meth:`note`): a stream closed first is destroyed only after the
    pool, whose release synchronises each of them before ``cuMemPoolDestroy``. Frees
    on a foreign stream (wrapped with ``from_handle`` or taken through
    ``__cuda_stream__``) are not waited for: its owner may destroy it at any time.
    """

    __slots__ = ("last", "lock", "state", "streams")
    # It synchronises streams: never run beside an open capture (_handle), which the
    # synchronize of a stream that began capturing after the note would break; nor
    # while a capture begins (_release.WAITER_LOCK): the legacy stream may be one.
    waits_for_device = True
    device_wide = True

    def __init__(self) -> None:
        self.last: Any = None  # the stream state noted last: the common case is one
        self.state: Any = None  # the pool's release state (set once it exists)
        self.streams: dict[int, Any] = {}  # id(state) -> the release state of a stream
        # Threads allocating from the pool note their streams at once: the pool's
        # ``deps`` is read, extended and written back, so one note at a time.
        self.lock = threading.Lock()

    def note(self, st: Any) -> None:
        """Depend on the stream of state ``st`` (pinned, as is the pool's)."""
        self.last = st
        if st.release is None and int(st.handle) > 2:
            return  # foreign (the legacy and per-thread streams are noted)
        with self.lock:
            streams = self.streams
            if id(st) in streams:
                return
            if len(streams) >= 16:
                self._forget_idle()
            me = self.state
            streams[id(st)] = st
            link(me, st)

    def _forget_idle(self) -> None:
        """Let the closed streams whose work has all run be destroyed now."""
        me = self.state
        for k, st in list(self.streams.items()):
            h = st.handle
            if h is None or not st.closing or _drv.cuStreamQuery(h)[0] is not SUCCESS:
                continue
            del self.streams[k]
            unlink(me, st)
            queue_if_free(st)

    def __call__(self, handle: Any) -> Any:
        for st in list(self.streams.values()):
            _settle(st)
        self.streams.clear()
        self.last = self.state = None
        return _drv.cuMemPoolDestroy(handle)


def _settle(st: Any) -> None:
    """Wait for the work on the stream of state ``st``.

    No pin: the stream is released only after the pool, which depends on it.
    """
    h = st.handle
    if h is None:
        return
    r = _drv.cuStreamSynchronize(h)
    if r[0] is not SUCCESS:
        _warn(f"waiting for a pool's frees failed: {error_for(r[0], _drv.cuStreamSynchronize)}")


def _access_arg(access: object) -> MemAccess:
    """``access`` checked (:func:`~cudriver._coerce.enum_arg`), for pools and virtual buffers."""
    return enum_arg(access, MemAccess, "access")


def _location(dev: Device) -> Any:
    loc = _drv.CUmemLocation()
    loc.type = _drv.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
    loc.id = dev.ordinal
    return loc


class MemoryPool(PoolBase, MemoryResource):
    """A memory pool of one device (``cuMemPoolCreate``; ``cuMemPoolDestroy`` on close).

    A :class:`~cudriver.MemoryResource`: stream-ordered device memory.

    Parameters
    ----------
    device
        A :class:`~cudriver.Device` or ordinal; default: the current context's device.
    release_threshold
        Bytes of freed memory the pool keeps reserved across synchronisations.
        Default :data:`KEEP_ALL` (keep everything, as cuda.core does); 0 gives
        freed memory back to the driver at every synchronisation (the driver's
        default for its own pools).
    max_size
        The most the pool may reserve, in bytes; 0: no limit but the device's.
    ipc
        Make the pool shareable with other processes (a POSIX file descriptor, see
        :meth:`export_handle`), and so its allocations
        (:meth:`DeviceBuffer.export_handle`).

    Notes
    -----
    A pool is destroyed only after its allocations are freed (each
    :class:`~cudriver.DeviceBuffer` allocated from it keeps it alive), and only once
    those frees have run on the device: the release (on :meth:`close`, or after the
    last buffer when closed earlier) **synchronises** each stream that allocated from
    the pool (``cuStreamSynchronize``), then calls ``cuMemPoolDestroy``; such a
    stream, when closed first, is destroyed after the pool (or once its work has run,
    checked with ``cuStreamQuery`` as the pool meets new streams). Destroying a pool
    with frees still pending crashed the driver when other threads were allocating
    and synchronising meanwhile. So closing a pool waits for that work, like a
    synchronous ``cuMemFree``.
    :meth:`default` and :meth:`current` wrap the driver's own pools without owning them.
    """

    __slots__ = ("_device", "_imported", "_ipc", "_token")

    _kind = "MemoryPool"
    _HOST = False  # a pool of host memory: no device of its own

    _device: Device
    _ipc: bool
    _imported: bool
    _token: str | None  # names the pool in messages to other processes (_share.token)

    def __init__(
        self,
        device: Device | int | None = None,
        *,
        release_threshold: int = KEEP_ALL,
        max_size: int = 0,
        ipc: bool = False,
    ) -> None:
        threshold = uint_arg(release_threshold, "release_threshold")
        size = uint_arg(max_size, "max_size")
        if not isinstance(ipc, bool):
            raise TypeError(f"ipc must be a bool, not {type(ipc).__name__}")
        dev = _device_of(device)
        self._create(dev, _location(dev), _PINNED_TYPE, size, ipc, threshold)

    def _create(
        self, dev: Device, loc: Any, alloc_type: Any, size: int, ipc: bool, threshold: int
    ) -> None:
        """``cuMemPoolCreate`` in ``dev``'s context, then the release threshold."""
        props = _drv.CUmemPoolProps()
        props.allocType = alloc_type
        props.handleTypes = _FD if ipc else _NO_HANDLE
        props.location = loc
        props.maxSize = size
        ctx = _kept(dev)
        with ctx._scope():
            h = reclaiming(_calls.cuMemPoolCreate, props)
        self._setup(h, dev, ipc, home=ctx)
        if threshold:
            self.release_threshold = threshold

    def _setup(
        self, h: Any, dev: Device, ipc: bool, *, home: Context | None, imported: bool = False
    ) -> None:
        self._device = dev
        self._ipc = ipc
        self._imported = imported
        self._token = None
        if home is not None:
            POOLS.add(self)  # trimmed when an allocation runs out of memory
            rel = _Destroy()
            self._init_handle(h, release=rel, func="cuMemPoolDestroy", keep=(home,))
            rel.state = self._state
        else:
            self._init_handle(h, release=None, func="cuMemPoolDestroy", owned=False)

    def _note_stream(self, st: Any) -> None:
        rel = self._state.release
        if isinstance(rel, _Destroy) and rel.last is not st:
            rel.note(st)

    @classmethod
    def _borrowed(cls, h: Any, dev: Device) -> MemoryPool:
        self = cls.__new__(cls)
        self._setup(h, dev, False, home=None)
        return self

    @classmethod
    def default(cls, device: Device | int | None = None) -> MemoryPool:
        """The device's default pool (``cuDeviceGetDefaultMemPool``), borrowed.

        Its settings are the driver's (release threshold 0) until changed here;
        changing them affects every user of the default pool in the process.
        """
        dev = _device_of(device)
        return cls._borrowed(_calls.cuDeviceGetDefaultMemPool(dev.handle), dev)

    @classmethod
    def current(cls, device: Device | int | None = None) -> MemoryPool:
        """The device's current pool (``cuDeviceGetMemPool``), borrowed.

        ``DeviceBuffer(n, stream=s)`` without ``pool=`` allocates from it.
        """
        dev = _device_of(device)
        return cls._borrowed(_calls.cuDeviceGetMemPool(dev.handle), dev)

    @classmethod
    def from_handle(cls, handle: Any, owner: Any = None, *, device: Device | int = 0) -> MemoryPool:
        """Wrap a foreign ``CUmemoryPool`` of ``device`` without owning it."""
        h = handle_arg(handle, _drv.CUmemoryPool, "memory pool handle")
        dev = _device_of(device)
        self = cls.__new__(cls)
        self._device = dev
        self._ipc = self._imported = False
        self._token = None
        self._init_handle(h, release=None, func="cuMemPoolDestroy", owned=False, owner=owner)
        return self

    @property
    def device(self) -> Device | None:
        """The device whose memory the pool holds (None for a pool of host memory)."""
        return self._device

    @property
    def name(self) -> str:
        """``"MemoryPool 0x..."``: the class and the pool's handle, for accounting."""
        return f"{type(self).__name__} {self._key:#x}"

    # -- attributes ---------------------------------------------------------------------
    def _get(self, attr: Any) -> int:
        return int(_calls.cuMemPoolGetAttribute(self.handle, attr))

    @property
    @pinned
    def release_threshold(self) -> int:
        """Freed bytes the pool keeps reserved across synchronisations.

        ``CU_MEMPOOL_ATTR_RELEASE_THRESHOLD``: read with ``cuMemPoolGetAttribute``, set
        with ``cuMemPoolSetAttribute``.
        """
        return self._get(_A.CU_MEMPOOL_ATTR_RELEASE_THRESHOLD)

    @release_threshold.setter
    @pinned
    def release_threshold(self, value: int) -> None:
        v = uint_arg(value, "release_threshold")
        _calls.cuMemPoolSetAttribute(
            self.handle, _A.CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, _drv.cuuint64_t(v)
        )

    @property
    @pinned
    def reserved_current(self) -> int:
        """Bytes the pool holds from the driver now (``CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT``)."""
        return self._get(_A.CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT)

    @property
    @pinned
    def reserved_high(self) -> int:
        """The most bytes reserved since the last reset (``..._RESERVED_MEM_HIGH``)."""
        return self._get(_A.CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH)

    @property
    @pinned
    def used_current(self) -> int:
        """Bytes allocated from the pool and not yet freed (``..._USED_MEM_CURRENT``)."""
        return self._get(_A.CU_MEMPOOL_ATTR_USED_MEM_CURRENT)

    @property
    @pinned
    def used_high(self) -> int:
        """The most bytes in use since the last reset (``..._USED_MEM_HIGH``)."""
        return self._get(_A.CU_MEMPOOL_ATTR_USED_MEM_HIGH)

    @pinned
    def reset_high_watermarks(self) -> None:
        """Reset :attr:`reserved_high` and :attr:`used_high` to the current values."""
        zero = _drv.cuuint64_t(0)
        _calls.cuMemPoolSetAttribute(self.handle, _A.CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, zero)
        _calls.cuMemPoolSetAttribute(self.handle, _A.CU_MEMPOOL_ATTR_USED_MEM_HIGH, zero)

    @pinned
    def trim(self, keep: int = 0) -> None:
        """Give freed memory back to the driver, keeping at least ``keep`` bytes reserved.

        Calls ``cuMemPoolTrimTo``; memory of allocations not yet freed stays.
        """
        _calls.cuMemPoolTrimTo(self.handle, uint_arg(keep, "keep"))

    # -- access from other devices ------------------------------------------------------
    @pinned
    def set_access(
        self, device: Device | int, access: MemAccess | int = MemAccess.READ_WRITE
    ) -> None:
        """Let ``device`` use the pool's memory as ``access`` says (``cuMemPoolSetAccess``).

        For allocations made before and after the call. The pool's own device always
        has read-write access; another device needs peer access to this one
        (:meth:`Device.can_access_peer`). No synchronisation, no allocation.

        Parameters
        ----------
        device
            A :class:`~cudriver.Device` or ordinal.
        access
            A :class:`~cudriver.MemAccess` (or its int value): ``READ_WRITE`` (default),
            ``READ``, or ``NONE`` to take access away.

        Raises
        ------
        TypeError
            ``access`` is not a MemAccess or int (a bool is refused).
        ValueError
            ``access`` is no MemAccess value, or is not ``READ_WRITE`` for the pool's
            own device.
        """
        flags = _access_arg(access)
        dev = _device_of(device)
        if (
            not self._HOST
            and dev.ordinal == self._device.ordinal
            and flags is not MemAccess.READ_WRITE
        ):
            raise ValueError(
                f"the pool's own device keeps read-write access, not MemAccess.{flags.name}"
            )
        desc = _drv.CUmemAccessDesc()
        desc.location = _location(dev)
        desc.flags = _drv.CUmemAccess_flags(int(flags))
        _calls.cuMemPoolSetAccess(self.handle, [desc], 1)

    @pinned
    def access(self, device: Device | int) -> MemAccess:
        """How ``device`` may use the pool's memory (``cuMemPoolGetAccess``)."""
        dev = _device_of(device)
        return MemAccess(int(_calls.cuMemPoolGetAccess(self.handle, _location(dev))))

    # -- allocating -------------------------------------------------------------------------
    def allocate(self, nbytes: int, *, stream: StreamLike = None) -> DeviceBuffer:
        """A new :class:`~cudriver.DeviceBuffer` of ``nbytes`` from this pool, on ``stream``.

        ``DeviceBuffer(nbytes, stream=stream, pool=self)``: stream-ordered
        (``cuMemAllocFromPoolAsync``, and ``cuMemFreeAsync`` on ``stream`` when the
        buffer is closed); the memory may be used by work on ``stream`` from this point
        on. Allocates (from the pool's reserve, else from the driver); does not
        synchronise. The buffer keeps the pool and the stream alive.

        Raises
        ------
        TypeError
            ``stream`` is None (a stream is required: see
            :meth:`Stream.legacy <cudriver.Stream.legacy>`) or not stream-like.
        ValueError
            ``nbytes`` is not positive.
        """
        if stream is None:
            raise TypeError(NONE_STREAM)
        return DeviceBuffer(nbytes, stream=stream, pool=self)

    # -- sharing with other processes -----------------------------------------------------
    @pinned
    def export_handle(self) -> int:
        """A POSIX file descriptor for the pool (``cuMemPoolExportToShareableHandle``).

        The pool must have been made with ``ipc=True``. Send the descriptor to another
        process (over a Unix socket: ``socket.send_fds``), which opens the pool
        with :meth:`import_handle`; close it with :func:`os.close` when done. The
        pool's allocations travel on their own, once the pool has been exported:
        :meth:`DeviceBuffer.export_handle`.
        """
        if not self._ipc:
            raise ValueError("this pool was not made with ipc=True: it cannot be exported")
        return int(_calls.cuMemPoolExportToShareableHandle(self.handle, _FD, 0))

    @classmethod
    def import_handle(cls, fd: int, device: Device | int | None = None) -> MemoryPool:
        """Open a pool exported by another process (``cuMemPoolImportFromShareableHandle``).

        ``fd`` is the file descriptor received (it is not closed here). The pool is
        owned: closing it destroys this process's handle only. Open its allocations
        with :meth:`DeviceBuffer.import_handle` (``pool=`` this pool).

        Raises
        ------
        TypeError
            ``fd`` is not an int (a bool is refused), or ``device`` is not a Device or
            ordinal.
        ValueError
            ``fd`` is negative.
        OSError
            ``fd`` is not an open file descriptor (``os.fstat``'s error).
        """
        if isinstance(fd, bool) or not isinstance(fd, int):
            raise TypeError(f"fd must be a file descriptor (an int), not {type(fd).__name__}")
        if fd < 0:
            raise ValueError(f"fd must be a file descriptor (an int >= 0), not {fd}")
        os.fstat(fd)  # a closed descriptor fails here, with the OS's message
        dev = _device_of(device)
        ctx = _kept(dev)
        with ctx._scope():
            h = _calls.cuMemPoolImportFromShareableHandle(fd, _FD, 0)
        self = cls.__new__(cls)
        self._setup(h, dev, True, home=ctx, imported=True)
        return self

    def _export_pointer(self, buf: Any) -> bytes:
        """:meth:`DeviceBuffer.export_handle` of ``buf``, allocated from this pool.

        ``buf`` is pinned by the caller and keeps this pool, which may have been closed
        meanwhile: its allocations still travel.
        """
        if not self._ipc:
            raise ValueError(
                "export_handle(): the buffer's pool was not made with ipc=True; only an "
                "allocation from a MemoryPool(ipc=True) can travel to another process"
            )
        r = _drv.cuMemPoolExportPointer(buf.handle)
        if r[0] is not SUCCESS:
            raise error_for(
                r[0],
                _drv.cuMemPoolExportPointer,
                "the driver exports an allocation only once its pool is shared: call "
                "pool.export_handle() first (measured: refused before, accepted after, "
                "also for an allocation still pending on its stream)",
            )
        return ctypes.string_at(r[1].getPtr(), _EXPORT_BYTES)

    @pinned
    def _import_pointer(self, cls: Any, data: Any, nbytes: Any) -> Any:
        """:meth:`DeviceBuffer.import_handle` into this (imported) pool: a new ``cls``."""
        if not isinstance(data, bytes | bytearray):
            raise TypeError(
                f"data must be the {_EXPORT_BYTES} bytes export_handle() returned, not "
                f"{type(data).__name__}"
            )
        if len(data) != _EXPORT_BYTES:
            raise ValueError(
                f"data must be the {_EXPORT_BYTES} bytes export_handle() returned, not "
                f"{len(data)} bytes"
            )
        n = nbytes_arg(nbytes)
        share = _drv.CUmemPoolPtrExportData()
        ctypes.memmove(share.getPtr(), bytes(data), _EXPORT_BYTES)
        ctx = _kept(self._device)
        with ctx._scope():
            ptr = _calls.cuMemPoolImportPointer(self.handle, share)
        if issubclass(cls, PinnedBuffer):
            return cls._adopt(
                int(ptr), n, ctx, mem_free(ctx.handle, ptr, n), "cuMemFree", (ctx, self)
            )
        buf = cls.__new__(cls)
        buf._set_fields(n, ctx, None, None, None, None, 0)
        buf._init_handle(
            ptr,
            release=mem_free(ctx.handle, ptr, n),
            func="cuMemFree",
            keep=(ctx, self),
        )
        return buf

    def export_pointer(self, buffer: DeviceBuffer) -> bytes:
        """Deprecated: use ``buffer.export_handle()`` (:meth:`DeviceBuffer.export_handle`)."""
        deprecated("MemoryPool.export_pointer(buf)", "buf.export_handle()")
        if not isinstance(buffer, DeviceBuffer):
            raise TypeError(f"expected a cudriver.DeviceBuffer, not {type(buffer).__name__}")
        return buffer.export_handle()

    def import_pointer(self, data: bytes, nbytes: int) -> DeviceBuffer:
        """Deprecated: use ``DeviceBuffer.import_handle(data, nbytes, pool=pool)``.

        See :meth:`DeviceBuffer.import_handle`.
        """
        deprecated(
            "MemoryPool.import_pointer(data, nbytes)",
            "DeviceBuffer.import_handle(data, nbytes, pool=pool)",
        )
        return DeviceBuffer.import_handle(data, nbytes, pool=self)

    def _repr_extra(self) -> str:
        where = "host" if self._HOST else f"device={self._device.ordinal}"
        return where + (" ipc" if self._ipc else "")

    def _travel_refusal(self) -> str | None:
        if not self._owned:
            return "a borrowed pool (the driver's own, or from_handle) cannot be shared"
        if not self._ipc:
            return "this pool was made without ipc=True"
        if self._imported:
            return "this pool was opened from another process; it travels from its maker"
        return None


def _numa_arg(numa_node: object) -> int | None:
    if numa_node is None:
        return None
    if isinstance(numa_node, bool) or not isinstance(numa_node, int):
        raise TypeError(f"numa_node must be an int or None, not {type(numa_node).__name__}")
    if numa_node < 0:
        raise ValueError(f"numa_node must be >= 0, not {numa_node}")
    return numa_node


def _host_location(numa_node: int | None) -> Any:
    loc = _drv.CUmemLocation()
    if numa_node is None:
        loc.type = _LT.CU_MEM_LOCATION_TYPE_HOST
        loc.id = 0
    else:
        loc.type = _LT.CU_MEM_LOCATION_TYPE_HOST_NUMA
        loc.id = numa_node
    return loc


def _pool_allocate(pool: MemoryPool, nbytes: int, stream: StreamLike, what: str) -> Any:
    """``cuMemAllocFromPoolAsync`` of ``nbytes`` from ``pool`` on ``stream``.

    Returns ``(ptr, stream, context, release)``; the caller wraps the memory and
    unpins. Refused on a capturing stream (the buffer types a pinned or managed pool
    gives cannot be freed inside the graph).
    """
    n = nbytes_arg(nbytes)
    if stream is None:
        raise TypeError(NONE_STREAM)
    st = _as_stream(stream)
    refuse_capturing(
        st._h,
        _drv.cuMemAllocFromPoolAsync,
        f"a {what} cannot be allocated in a capture: allocate before it begins",
    )
    states = pin_all(st, pool)
    try:
        ctx = _kept(pool._device)
        with ctx._scope():
            try:
                ptr = reclaiming(
                    _calls.cuMemAllocFromPoolAsync, n, pool._state.handle, st._state.handle
                )
            except MemoryError:
                if _account.ON:
                    dev = pool.device
                    _account.failed(n, None if dev is None else dev.ordinal, pool.name)
                raise
        pool._note_stream(st._state)
        used_on: set[int] = set()
        release = mem_free_async(ctx._live(), st, used_on, ptr, n)
        return int(ptr), n, st, ctx, release, used_on
    finally:
        unpin_all(states)


class PinnedMemoryPool(MemoryPool):
    """A stream-ordered pool of page-locked host memory (``cuMemPoolCreate`` on the host).

    A :class:`~cudriver.MemoryResource` whose :meth:`allocate` gives
    :class:`~cudriver.PinnedBuffer` objects: host memory, read and written through
    numpy (:meth:`PinnedBuffer.array`), that kernels of the devices given access use at
    the same address. Freed in stream order into the pool (``cuMemFreeAsync``), so a
    loop of staging buffers costs no ``cuMemHostAlloc`` after the first.

    Parameters
    ----------
    numa_node
        The host NUMA node the memory comes from (``CU_MEM_LOCATION_TYPE_HOST_NUMA``);
        None (default): the host, wherever the driver places it
        (``CU_MEM_LOCATION_TYPE_HOST``, CUDA 13 drivers; older ones need a node), or,
        with ``ipc=True``, the device's node (:attr:`Device.host_numa_node
        <cudriver.Device.host_numa_node>`, else 0): the driver shares only pools of a
        NUMA node.
    device
        The device whose context the pool is made in and which gets read-write
        access (``cuMemPoolSetAccess``); default: the current context's.
    access
        More devices to give read-write access to.
    release_threshold, max_size, ipc
        As for :class:`~cudriver.MemoryPool`; ``ipc=True`` makes the pool and its
        allocations shareable with other processes (also through ``multiprocessing``).

    Raises
    ------
    NotSupportedError
        The driver has no pools of host memory (of a NUMA node).
    """

    __slots__ = ("_numa",)

    _kind = "PinnedMemoryPool"
    _HOST = True
    _numa: int | None

    def __init__(
        self,
        numa_node: int | None = None,
        *,
        device: Device | int | None = None,
        access: Any = (),
        release_threshold: int = KEEP_ALL,
        max_size: int = 0,
        ipc: bool = False,
    ) -> None:
        numa = _numa_arg(numa_node)
        threshold = uint_arg(release_threshold, "release_threshold")
        size = uint_arg(max_size, "max_size")
        if not isinstance(ipc, bool):
            raise TypeError(f"ipc must be a bool, not {type(ipc).__name__}")
        dev = _device_of(device)
        others = [device_arg(d) for d in access]
        if numa is None and ipc:
            # The driver shares only pools of a NUMA node: "handleTypes must be 0 for
            # HOST memory location type" (CUDA 13.0, measured). The device's node.
            numa = dev.host_numa_node or 0
        self._numa = numa
        self._create(dev, _host_location(numa), _PINNED_TYPE, size, ipc, threshold)
        for d in (dev, *others):
            self.set_access(d)

    @property
    def device(self) -> None:
        """None: the memory is the host's (:attr:`numa_node` says where)."""
        return None

    @property
    def numa_node(self) -> int | None:
        """The host NUMA node of the memory; None when the driver chose."""
        return self._numa

    @property
    def is_host_accessible(self) -> bool:
        return True

    # A pool like MemoryPool whose buffers are host memory: PinnedBuffer, not DeviceBuffer.
    def allocate(  # type: ignore[override]
        self, nbytes: int, *, stream: StreamLike = None
    ) -> PinnedBuffer:
        """A new :class:`~cudriver.PinnedBuffer` of ``nbytes`` from the pool, on ``stream``.

        ``cuMemAllocFromPoolAsync``: the memory may be used by work on ``stream``
        from this point on, and by the host once that work has run (synchronise
        first); closing the buffer frees it into the pool on ``stream``
        (``cuMemFreeAsync``), after the copies enqueued with the buffer on other
        streams too. Work on another stream that uses the memory through
        :attr:`PinnedBuffer.device_ptr` or :meth:`PinnedBuffer.device_buffer` is not
        seen: order it before the close (``stream.wait(other)``). Does not synchronise.

        Raises
        ------
        TypeError
            ``stream`` is None or not stream-like.
        StreamCaptureError
            ``stream`` is capturing.
        """
        ptr, n, st, ctx, release, used_on = _pool_allocate(self, nbytes, stream, "pinned buffer")
        keep = (st, ctx, self)
        buf = PinnedBuffer._adopt(ptr, n, ctx, release, "cuMemFreeAsync", keep, used_on, st._key)
        if _account.ON:
            _account.track(buf._state, ptr, n, None, self.name)
        if _hooks.MARKS:
            _hooks.mark("PinnedBuffer", n)
        return buf

    @classmethod
    def import_handle(cls, fd: int, device: Device | int | None = None) -> PinnedMemoryPool:
        """Open a pinned pool another process exported (``cuMemPoolImportFromShareableHandle``).

        As :meth:`MemoryPool.import_handle`; ``device`` is the one whose context holds
        the handle, and it is given read-write access here (``cuMemPoolSetAccess``:
        access is granted per process). Open its allocations with
        :meth:`PinnedBuffer.import_handle`.
        """
        pool = super().import_handle(fd, device)
        assert isinstance(pool, PinnedMemoryPool)
        pool._numa = None
        # Device access is per process: the importer grants its own (without it a
        # kernel here read the memory at an illegal address, measured).
        pool.set_access(pool._device)
        return pool


class ManagedMemoryPool(MemoryPool):
    """A stream-ordered pool of managed memory (``CU_MEM_ALLOCATION_TYPE_MANAGED``).

    A :class:`~cudriver.MemoryResource` whose :meth:`allocate` gives
    :class:`~cudriver.ManagedBuffer` objects (prefetch, advice and host access as for
    ``cuMemAllocManaged`` memory), freed into the pool in stream order. Needs
    cuda-bindings 13 and a CUDA 13 driver that has managed pools.

    Parameters
    ----------
    device
        The device the memory prefers (the pool's location); default: the current
        context's.
    release_threshold, max_size
        As for :class:`~cudriver.MemoryPool`.

    Raises
    ------
    NotSupportedError
        The bindings or the driver have no managed pools (the message says which).
    """

    __slots__ = ()

    _kind = "ManagedMemoryPool"

    def __init__(
        self,
        device: Device | int | None = None,
        *,
        release_threshold: int = KEEP_ALL,
        max_size: int = 0,
    ) -> None:
        threshold = uint_arg(release_threshold, "release_threshold")
        size = uint_arg(max_size, "max_size")
        if _MANAGED_TYPE is None:
            raise NotSupportedError(
                _drv.CUresult.CUDA_ERROR_NOT_SUPPORTED,
                "cuMemPoolCreate",
                "managed memory pools need cuda-bindings 13 or newer "
                "(CU_MEM_ALLOCATION_TYPE_MANAGED)",
            )
        dev = _device_of(device)
        try:
            self._create(dev, _location(dev), _MANAGED_TYPE, size, False, threshold)
        except (NotSupportedError, ValueError) as exc:
            raise NotSupportedError(
                _drv.CUresult.CUDA_ERROR_NOT_SUPPORTED,
                "cuMemPoolCreate",
                f"this driver made no managed memory pool ({exc}); managed pools need a "
                "CUDA 13 driver that supports them",
            ) from exc

    @property
    def is_host_accessible(self) -> bool:
        return True

    def allocate(self, nbytes: int, *, stream: StreamLike = None) -> ManagedBuffer:
        """A new :class:`~cudriver.ManagedBuffer` of ``nbytes`` from the pool, on ``stream``.

        ``cuMemAllocFromPoolAsync``; freed into the pool on ``stream``
        (``cuMemFreeAsync``) when closed. Does not synchronise.
        """
        ptr, n, st, ctx, release, used_on = _pool_allocate(self, nbytes, stream, "managed buffer")
        buf = ManagedBuffer.__new__(ManagedBuffer)
        buf._set_fields(n, ctx, st, None, None, None, 0)
        buf._init_handle(
            _drv.CUdeviceptr(ptr),
            release=release,
            func="cuMemFreeAsync",
            keep=(st, ctx, self),
            used_on=used_on,
        )
        if _account.ON:
            _account.track(buf._state, ptr, n, self._device.ordinal, self.name)
        if _hooks.MARKS:
            _hooks.mark("ManagedBuffer", n)
        return buf

    def _travel_refusal(self) -> str | None:
        return "a managed memory pool cannot be shared between processes"


# -- travelling through multiprocessing (see _share) -------------------------------------
def _reduce_pool(pool: MemoryPool) -> tuple[Any, ...]:
    _share.refuse(pool)
    tok = _share.token(pool)
    _share.EXPORTED[tok] = pool
    fd = _share.send_fd(pool.export_handle())
    return (_rebuild_pool, (fd, os.getpid(), tok, _share.device_uuid(pool._device)))


def _rebuild_pool(wrapped: Any, pid: int, tok: str, uuid: bytes) -> MemoryPool:
    """The pool a message names: the one this process opened already, else opened now."""
    return _rebuild_any(MemoryPool, wrapped, pid, tok, uuid)


def _rebuild_pinned_pool(wrapped: Any, pid: int, tok: str, uuid: bytes) -> PinnedMemoryPool:
    """:func:`_rebuild_pool` of a :class:`PinnedMemoryPool`."""
    pool = _rebuild_any(PinnedMemoryPool, wrapped, pid, tok, uuid)
    assert isinstance(pool, PinnedMemoryPool)
    return pool


def _rebuild_any(cls: Any, wrapped: Any, pid: int, tok: str, uuid: bytes) -> MemoryPool:
    fd = _share.receive_fd(wrapped)
    try:
        with _share.LOCK:
            if pid == os.getpid():
                pool = _share.EXPORTED.get(tok)
                if pool is not None:
                    return pool  # type: ignore[no-any-return]
            pool, _ = _share.open_once(
                _share.POOLS,
                (pid, tok),
                "memory pool",
                lambda: cls.import_handle(fd, _share.device_of_uuid(uuid)),
            )
        return pool  # type: ignore[no-any-return]
    finally:
        os.close(fd)


def _reduce_buffer(buf: DeviceBuffer) -> tuple[Any, ...]:
    _share.refuse(buf)
    root = buf._base if buf._base is not None else buf
    pool = PoolBase._of(root)
    assert isinstance(pool, MemoryPool)
    pool_args = _reduce_pool(pool)[1]  # shares the pool first, as the driver requires
    data = root.export_handle()
    _share.EXPORTED[(pool_args[2], data)] = root
    layout = (root._nbytes, buf._offset, buf._nbytes, buf._dtype, buf._shape)
    return (_rebuild_buffer, (*pool_args, data, *layout))


def _rebuild_buffer(
    wrapped: Any,
    pid: int,
    tok: str,
    uuid: bytes,
    data: bytes,
    root_nbytes: int,
    offset: int,
    nbytes: int,
    dtype: Any,
    shape: tuple[int, ...] | None,
) -> DeviceBuffer:
    """The allocation a message names, opened once per process; a view when shared."""
    pool = _rebuild_pool(wrapped, pid, tok, uuid)
    with _share.LOCK:
        root = _share.EXPORTED.get((tok, data)) if pid == os.getpid() else None
        fresh = False
        if root is None:
            root, fresh = _share.open_once(
                _share.BUFFERS,
                (pid, tok, data),
                "allocation",
                lambda: DeviceBuffer.import_handle(data, root_nbytes, pool=pool),
            )
    assert root is not None
    if fresh and offset == 0 and nbytes == root_nbytes:
        root._dtype, root._shape = dtype, shape  # the root itself: it owns the import
        return root  # type: ignore[no-any-return]
    return root._make_view(offset, nbytes, dtype, shape)  # type: ignore[no-any-return]


def _reduce_pinned_pool(pool: PinnedMemoryPool) -> tuple[Any, ...]:
    return (_rebuild_pinned_pool, _reduce_pool(pool)[1])


def _reduce_pinned_buffer(buf: PinnedBuffer) -> tuple[Any, ...]:
    _share.refuse(buf)
    pool = PoolBase._of(buf)
    assert isinstance(pool, PinnedMemoryPool)
    pool_args = _reduce_pool(pool)[1]  # shares the pool first, as the driver requires
    data = buf.export_handle()
    _share.EXPORTED[(pool_args[2], data)] = buf
    return (_rebuild_pinned_buffer, (*pool_args, data, buf.nbytes))


def _rebuild_pinned_buffer(
    wrapped: Any, pid: int, tok: str, uuid: bytes, data: bytes, nbytes: int
) -> PinnedBuffer:
    """The pinned pool allocation a message names, opened once per process."""
    pool = _rebuild_pinned_pool(wrapped, pid, tok, uuid)
    with _share.LOCK:
        buf = _share.EXPORTED.get((tok, data)) if pid == os.getpid() else None
        if buf is None:
            buf, _ = _share.open_once(
                _share.BUFFERS,
                (pid, tok, data),
                "allocation",
                lambda: PinnedBuffer.import_handle(data, nbytes, pool=pool),
            )
    assert isinstance(buf, PinnedBuffer)
    return buf


_share.register(MemoryPool, _reduce_pool)
_share.register(DeviceBuffer, _reduce_buffer)
_share.register(PinnedMemoryPool, _reduce_pinned_pool)
_share.register(PinnedBuffer, _reduce_pinned_buffer)
