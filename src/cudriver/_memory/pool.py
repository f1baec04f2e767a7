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
    current_or_default,
    device_arg,
    kept_primary,
)
from .._lifetime._coerce import (
    NONE_STREAM,
    DeviceMemory,
    PoolBase,
    StreamLike,
    deprecated,
    enum_arg,
    handle_arg,
    nbytes_arg,
    uint_arg,
)
from .._lifetime._handle import link, queue_if_free, reclaiming, unlink
from .._lifetime._pins import pinned
from .._lifetime._release import _warn
from .._runtime import _calls
from .._runtime._bindings import SUCCESS
from .._runtime._enums import MemAccess
from ..errors import error_for
from ._core import mem_free
from .memory import DeviceBuffer

__all__ = ["MemoryPool", "KEEP_ALL"]

_A = _drv.CUmemPool_attribute
_EXPORT_BYTES = 64  # sizeof(CUmemPoolPtrExportData)
_FD = _drv.CUmemAllocationHandleType.CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
_NO_HANDLE = _drv.CUmemAllocationHandleType.CU_MEM_HANDLE_TYPE_NONE

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
    # synchronize of a stream that began capturing after the note would break.
    waits_for_device = True

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


def _device_of(device: Any) -> Device:
    return current_or_default().device if device is None else device_arg(device)


def _access_arg(access: object) -> MemAccess:
    """``access`` checked (:func:`~cudriver._coerce.enum_arg`), for pools and virtual buffers."""
    return enum_arg(access, MemAccess, "access")


def _location(dev: Device) -> Any:
    loc = _drv.CUmemLocation()
    loc.type = _drv.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
    loc.id = dev.ordinal
    return loc


class MemoryPool(PoolBase):
    """A memory pool of one device (``cuMemPoolCreate``; ``cuMemPoolDestroy`` on close).

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
        props = _drv.CUmemPoolProps()
        props.allocType = _drv.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
        props.handleTypes = _FD if ipc else _NO_HANDLE
        props.location = _location(dev)
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
    def device(self) -> Device:
        """The device whose memory the pool holds."""
        return self._device

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
        if dev.ordinal == self._device.ordinal and flags is not MemAccess.READ_WRITE:
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
    def allocate(self, nbytes: int, *, stream: StreamLike) -> DeviceBuffer:
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

    def _export_pointer(self, buf: DeviceMemory) -> bytes:
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
        return f"device={self._device.ordinal}" + (" ipc" if self._ipc else "")

    def _travel_refusal(self) -> str | None:
        if not self._owned:
            return "a borrowed pool (the driver's own, or from_handle) cannot be shared"
        if not self._ipc:
            return "this pool was made without ipc=True"
        if self._imported:
            return "this pool was opened from another process; it travels from its maker"
        return None


# -- travelling through multiprocessing (see _share) -------------------------------------
def _reduce_pool(pool: MemoryPool) -> tuple[Any, ...]:
    _share.refuse(pool)
    tok = _share.token(pool)
    _share.EXPORTED[tok] = pool
    fd = _share.send_fd(pool.export_handle())
    return (_rebuild_pool, (fd, os.getpid(), tok, _share.device_uuid(pool.device)))


def _rebuild_pool(wrapped: Any, pid: int, tok: str, uuid: bytes) -> MemoryPool:
    """The pool a message names: the one this process opened already, else opened now."""
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
                lambda: MemoryPool.import_handle(fd, _share.device_of_uuid(uuid)),
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


_share.register(MemoryPool, _reduce_pool)
_share.register(DeviceBuffer, _reduce_buffer)


def _kept(dev: Device) -> Context:
    """The context pool calls run in: cudriver's retain of the device's primary context."""
    ctx = current_or_default()
    if ctx.device is dev:
        return ctx
    return kept_primary(dev)
