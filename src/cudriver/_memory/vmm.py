"""Virtual memory: :class:`VirtualBuffer`, a device buffer that grows in place.

A :class:`VirtualBuffer` reserves a range of device addresses (``cuMemAddressReserve``)
and maps physical memory at its start in chunks (``cuMemCreate``, ``cuMemMap``,
``cuMemSetAccess``). Its address never changes: :meth:`~VirtualBuffer.grow` maps a new
chunk after the last one, :meth:`~VirtualBuffer.shrink` unmaps chunks from the end, and
:meth:`~VirtualBuffer.offload` gives the physical memory back (the contents go to pinned
host memory) until :meth:`~VirtualBuffer.restore` maps fresh memory at the same
addresses. Chunks made with ``handle_type="fd"`` (or ``"fabric"``) are exported to other
processes with :meth:`~VirtualBuffer.export_handle` and mapped there with
:meth:`~VirtualBuffer.import_handle`. Its handles, their releases and the wait before
an unmap (``cuCtxSynchronize``) are in :mod:`cudriver._vmm`.
"""

from __future__ import annotations

import ctypes
import os
import weakref
from collections.abc import Iterable, Sequence
from typing import Any, NoReturn

from cuda.bindings import driver as _drv

from .. import driver as _cd
from .._context import _share
from .._context.device import Device, kept_primary
from .._lifetime import _handle
from .._lifetime._coerce import (
    U64_LIMIT,
    bool_arg,
    deprecated,
    int_arg,
    nbytes_arg,
    renamed_keyword,
)
from .._lifetime._handle import Lease, release_state
from .._lifetime._pins import pinned
from .._runtime._enums import DeviceAttribute, MemAccess
from ..errors import GUARD, ClosedError, error_for
from ._copy import enqueue
from ._vmm import (
    FABRIC_BYTES,
    KINDS,
    Reservation,
    Space,
    Teardown,
    calls_done,
    devices_arg,
    import_args,
    kind_arg,
    reduce_virtual,
    refuse_in_capture,
    require,
    round_up,
    travel_refusal,
    wait,
)
from .memory import DeviceBuffer
from .pinned import PinnedBuffer
from .pool import _access_arg, _location
from .resource import MemoryResource, _device_of
from .resource import _home as _kept

__all__ = ["VirtualBuffer", "VirtualMemoryResource"]

_MINIMUM = _drv.CUmemAllocationGranularity_flags.CU_MEM_ALLOC_GRANULARITY_MINIMUM


def _not_available(name: str, hint: str) -> Any:
    """A classmethod of DeviceBuffer that VirtualBuffer refuses (with TypeError)."""

    def refuse(cls: Any, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError(
            f"VirtualBuffer.{name} is not available: a VirtualBuffer owns its reservation; "
            "use VirtualBuffer(reserve, nbytes=...) or a DeviceBuffer"
        )

    refuse.__name__ = refuse.__qualname__ = name
    refuse.__doc__ = f"Not available: {hint}."
    return classmethod(refuse)


class VirtualBuffer(DeviceBuffer):
    """Device memory at a fixed address that grows, shrinks, sleeps and is shared.

    Reserves ``reserve`` bytes of device addresses (``cuMemAddressReserve``, rounded
    up to :attr:`granularity`) and maps ``nbytes`` bytes of physical memory at its start
    (``cuMemCreate``, ``cuMemMap``, ``cuMemSetAccess``). Everything a
    :class:`~cudriver.DeviceBuffer` does works on it (copies, fills, kernel arguments,
    ``__cuda_array_interface__``, DLPack, views); :attr:`nbytes` is the size mapped now,
    a multiple of :attr:`granularity`.

    Parameters
    ----------
    reserve
        The most bytes the buffer may ever map (rounded up to the granularity). Address
        space is cheap: reserve generously.
    device
        A :class:`~cudriver.Device` or ordinal; default: the current context's device.
        The buffer keeps that device's context (the current one when it is that
        device's, else cudriver's retain of its primary context).
    nbytes
        Bytes to map now (rounded up to the granularity); 0 or None (default) maps nothing.
    access
        Other devices to give read-write access (see :meth:`set_access`).
    handle_type
        ``"fd"`` to make the memory exportable as POSIX file descriptors, ``"fabric"``
        as fabric handles (see :meth:`export_handle`); None (default): not exportable.
    size
        Deprecated: use ``nbytes``.

    Raises
    ------
    NotSupportedError
        The device lacks virtual memory management, or the handle type.

    Notes
    -----
    **When memory is unmapped.** :meth:`shrink`, :meth:`offload` and the release on
    ``close()`` (or collection) first wait with ``cuCtxSynchronize`` in the buffer's
    context and in the primary context of every device given access, so work
    enqueued before the call has run; then ``cuMemUnmap`` and ``cuMemRelease``.
    ``close()`` blocks for that wait when it releases in place; while a lease holds
    the buffer (a graph, a prepared launch, a DLPack export), the release runs when
    the last one goes; while a capture begun through cudriver is open, or on a
    host-function thread, it is queued for the releasing thread.
    :meth:`Kernel.launch <cudriver.Kernel.launch>` pins every cudriver buffer among its
    arguments for the duration of the launch, so a ``close()`` or :meth:`offload` on
    another thread unmaps only after a launch already under way has reached the
    driver (and the wait has let it run); later launches see a
    :class:`~cudriver.ClosedError`. A :class:`~cudriver.LaunchPlan`, a graph or a DLPack
    export holds a lease, which keeps the memory mapped until it is gone. Work that
    another thread enqueues *while* the buffer is being shrunk is the caller's race: the
    wait before the unmap covers the work enqueued before it.

    While :meth:`offload`-ed the buffer refuses every use (:class:`~cudriver.ClosedError`
    saying so), and its views are closed; graphs that use it must not be launched until
    :meth:`restore`. Views of a VirtualBuffer are VirtualBuffers that cannot grow,
    shrink or offload; shrinking closes the views that reach past the new end. Two
    threads resizing, offloading or restoring one buffer at once: the second gets a
    RuntimeError (nothing waits).
    """

    __slots__ = ("_vm",)

    _kind = "VirtualBuffer"

    _vm: Space

    def __init__(
        self,
        reserve: int,
        *,
        device: Device | int | None = None,
        nbytes: int | None = None,
        access: Iterable[Device | int] = (),
        handle_type: str | None = None,
        size: int | None = None,
    ) -> None:
        rsv = nbytes_arg(reserve, "reserve")
        if size is not None:
            nbytes = renamed_keyword("VirtualBuffer", "size", size, "nbytes", nbytes)
        n = 0 if nbytes is None else int_arg(nbytes, "nbytes")
        if not 0 <= n < U64_LIMIT:
            raise ValueError(f"nbytes must be >= 0 and below 2**64, not {n}")
        if n > rsv:
            raise ValueError(f"nbytes {n} exceeds the reservation of {rsv} bytes")
        kind = kind_arg(handle_type)
        peers = devices_arg(access)
        dev = _device_of(device)
        ctx = _kept(dev)
        require(dev, DeviceAttribute.VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, "virtual memory")
        enum, attr = KINDS[kind]
        if attr is not None:
            require(dev, attr, f"{kind} handles")
        prop = _drv.CUmemAllocationProp()
        prop.type = _drv.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
        prop.location = _location(dev)
        prop.requestedHandleTypes = enum
        with ctx._scope():
            gran = int(_cd.cuMemGetAllocationGranularity(prop, _MINIMUM))
            rsize = round_up(rsv, gran)
            base = _cd.cuMemAddressReserve(rsize, gran, 0, 0)
        reservation = Reservation(base, rsize, ctx)
        sp = Space(dev, ctx, prop, gran, kind, int(base), rsize, reservation)
        self._vm = sp
        self._set_fields(0, ctx, None, None, None, None, 0)
        self._init_handle(
            _drv.CUdeviceptr(int(base)),
            release=Teardown(sp, reservation),
            func=_drv.cuMemUnmap.__name__,
            keep=(reservation, ctx),
        )
        try:
            for p in peers:
                self.set_access(p)
            if n:
                self.grow(n)
        except BaseException:
            self.close()
            raise

    # -- what it is -------------------------------------------------------------------
    def _space(self) -> Space:
        base = self._base
        root = base if isinstance(base, VirtualBuffer) else self
        return root._vm

    def _own(self, what: str) -> Space:
        if self._base is not None:
            raise TypeError(
                f"a view of a VirtualBuffer cannot {what}(): call it on the buffer it was made from"
            )
        sp = self._vm
        if sp.closed:
            self._raise_closed()
        return sp

    @property
    def granularity(self) -> int:
        """The mapping granularity in bytes (``cuMemGetAllocationGranularity``, minimum)."""
        return self._space().gran

    @property
    def reserved(self) -> int:
        """The bytes of address space reserved (the most :attr:`nbytes` can grow to)."""
        return self._space().reserve

    @property
    def chunks(self) -> tuple[int, ...]:
        """The sizes of the physical chunks mapped, or to be mapped again by :meth:`restore`."""
        sp = self._space()
        return tuple(sp.sizes) if sp.asleep else tuple(c.size for c in sp.chunks)

    @property
    def offloaded(self) -> bool:
        """Whether :meth:`offload` gave the memory back and :meth:`restore` is pending."""
        return self._space().asleep

    @property
    def device(self) -> Device:
        """The device whose memory is mapped."""
        return self._space().device

    @property
    def handle_type(self) -> str | None:
        """Which handles :meth:`export_handle` gives (``"fd"`` or ``"fabric"``), or None."""
        return self._space().kind

    def _travel_refusal(self) -> str | None:
        return travel_refusal(self._space())

    def _vm_or_none(self) -> Any:
        """The buffer's space, or None when it has none (closed, or never opened)."""
        try:
            return self._vm
        except (AttributeError, ClosedError):
            return None

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called (an offloaded buffer is not closed)."""
        sp = self._vm_or_none()
        return getattr(self, "_h", None) is None if sp is None else sp.closed

    def _raise_closed(self) -> NoReturn:
        sp = self._vm_or_none()
        if sp is not None and sp.asleep and not sp.closed:
            raise ClosedError("VirtualBuffer is offloaded: restore() it before using it")
        super()._raise_closed()

    # -- growing and shrinking ----------------------------------------------------------
    @pinned
    def grow(self, nbytes: int) -> int:
        """Map ``nbytes`` more (rounded up to :attr:`granularity`) after the end; the new size.

        One new chunk: ``cuMemCreate``, ``cuMemMap``, ``cuMemSetAccess`` (allocates
        device memory, no synchronisation). The address does not change, so kernels,
        prepared launches and captured graphs that use the old range keep working.

        Raises
        ------
        ValueError
            ``nbytes`` is not positive, or does not fit what is left of the reservation
            (the message has the numbers).
        StreamCaptureError
            Called on a capturing thread, or while a ``GLOBAL`` capture is open.
        ClosedError
            The buffer is closed or offloaded.
        """
        sp = self._own("grow")
        n = nbytes_arg(nbytes)
        add = round_up(n, sp.gran)
        if sp.mapped + add > sp.reserve:
            raise ValueError(
                f"grow({n}) needs {add} bytes (whole granules of {sp.gran}), but only "
                f"{sp.reserve - sp.mapped} of the {sp.reserve} bytes reserved are left "
                f"({sp.mapped} mapped)"
            )
        refuse_in_capture("grow", waits=False)
        sp.enter("grow")
        try:
            self._vm.map(add, None)
            self._nbytes = sp.mapped
        finally:
            sp.busy.release()
        return sp.mapped

    @pinned
    def shrink(self, nbytes: int) -> int:
        """Unmap the last ``nbytes`` (whole chunks, rounded to :attr:`granularity`); the new size.

        Waits for the device (``cuCtxSynchronize`` in the buffer's context and in those
        of the devices given access: **blocks**), then ``cuMemUnmap`` and
        ``cuMemRelease`` per chunk. Views reaching past the new end are closed.

        Raises
        ------
        ValueError
            ``nbytes`` is not positive, exceeds :attr:`nbytes`, or does not end on a
            chunk boundary (the message lists the sizes that do).
        StreamCaptureError
            A capture begun through cudriver is open (the wait would invalidate it).
        """
        sp = self._own("shrink")
        n = nbytes_arg(nbytes)
        cut = round_up(n, sp.gran)
        ends = sp.trailing()
        if cut not in ends:
            if cut > sp.mapped:
                raise ValueError(f"shrink({n}): only {sp.mapped} bytes are mapped")
            raise ValueError(
                f"shrink({n}): chunks are unmapped whole; from the end, this buffer can "
                f"shrink by {', '.join(map(str, ends))} bytes"
            )
        refuse_in_capture("shrink", waits=True)
        sp.enter("shrink")
        try:
            new = sp.mapped - cut
            self._close_views(new)
            self._nbytes = new
            self._vm.unmap_last(ends.index(cut) + 1, waited=False)
        finally:
            sp.busy.release()
        return new

    def _close_views(self, end: int) -> None:
        views = self._views
        if views:
            for v in list(views):
                if v._offset + v._nbytes > end:
                    v.close()

    # -- sleep and wake -------------------------------------------------------------------
    @pinned
    def offload(self, *, host: PinnedBuffer | None = None) -> None:
        """Copy the contents to pinned host memory and give the physical memory back.

        The address range stays reserved; :meth:`restore` maps fresh memory there and
        copies the contents back. In order: the buffer refuses new use, the device is
        waited for (``cuCtxSynchronize``, as for :meth:`shrink`: **blocks**), the
        contents are copied out (``cuMemcpyDtoHAsync`` on the legacy stream, waited
        for; calls that other threads had begun with the buffer are let reach the
        driver first), and each chunk is unmapped and released (``cuMemUnmap``,
        ``cuMemRelease``): ``mem_get_info()`` shows the memory free on return. Views
        are closed.

        Parameters
        ----------
        host
            A :class:`~cudriver.PinnedBuffer` of at least :attr:`nbytes` to copy into,
            kept until :meth:`restore` (never freed here). Default: a new one
            (``cuMemHostAlloc``), freed by :meth:`restore` or ``close()``.

        Raises
        ------
        StreamCaptureError
            A capture begun through cudriver is open.
        """
        sp = self._own("offload")
        n = self._nbytes
        if host is not None:
            if not isinstance(host, PinnedBuffer):
                raise TypeError(
                    f"host must be a cudriver.PinnedBuffer or None, not {type(host).__name__}"
                )
            if host.closed:
                host._raise_closed()
            if host.nbytes < n:
                raise ValueError(f"host has {host.nbytes} bytes; this buffer has {n} to offload")
        refuse_in_capture("offload", waits=True)
        sp.enter("offload")
        try:
            buf = (
                host
                if host is not None or n == 0
                else PinnedBuffer(n, mapped=False, context=sp.ctx)
            )
            views = [v._state for v in (self._views or ())]
            self._close_views(0)
            with sp.gate:
                self._h = None  # from here on, every use is refused
                sp.asleep = True
            self._arm_finalizer()
            try:
                # A launch on another thread that read the address before that may
                # still be on its way to the driver: let it get there first.
                calls_done(self._state, views)
                r = wait(sp.waits)
                if r is not None:
                    raise error_for(r[0], _drv.cuCtxSynchronize)
                if n and buf is not None:
                    dptr = self._state.handle
                    args = (buf._key, dptr, n)
                    enqueue(self, None, None, buf, _drv.cuMemcpyDtoHAsync, args, "offload")
            except BaseException:
                with sp.gate:
                    self._h = self._state.handle
                    sp.asleep = False
                if buf is not host and buf is not None:
                    buf.close()
                raise
            sp.sizes = [c.size for c in sp.chunks]
            sp.host = buf
            sp.own_host = host is None
            self._vm.unmap_last(len(sp.chunks), waited=True)
        finally:
            sp.busy.release()

    def restore(self) -> None:
        """Map fresh physical memory at the same addresses and copy the contents back.

        ``cuMemCreate``, ``cuMemMap`` and ``cuMemSetAccess`` per chunk (the sizes the
        buffer had), then ``cuMemcpyHtoDAsync`` on the legacy stream, waited for; the
        host copy made by :meth:`offload` is freed (``cuMemFreeHost``). Graphs captured
        before :meth:`offload` replay correctly afterwards. On failure (out of memory)
        the buffer stays offloaded. Allocates device memory; blocks for the copy.

        Raises
        ------
        ValueError
            The buffer is not offloaded.
        StreamCaptureError
            Called on a capturing thread, or while a ``GLOBAL`` capture is open.
        """
        sp = self._own("restore")
        if not sp.asleep:
            raise ValueError("restore(): this VirtualBuffer is not offloaded")
        refuse_in_capture("restore", waits=False)
        hold = Lease(self._state, self)  # a close() meanwhile waits for it
        try:
            sp.enter("restore")
            try:
                self._wake(sp)
            finally:
                sp.busy.release()
        finally:
            del hold

    def _wake(self, sp: Space) -> None:
        if not sp.asleep:
            raise ValueError("restore(): this VirtualBuffer is not offloaded")
        try:
            for size in sp.sizes:
                self._vm.map(size, None)
            n = sum(sp.sizes)
            host = sp.host
            if n and host is not None:
                enqueue(
                    self,
                    None,
                    None,
                    host,
                    _drv.cuMemcpyHtoDAsync,
                    (self._state.handle, host._key, n),
                    "restore",
                )
        except BaseException:
            self._vm.unmap_last(len(sp.chunks), waited=False)
            raise
        with sp.gate:
            if sp.closed:
                raise ClosedError("VirtualBuffer was closed during restore()")
            self._h = self._state.handle
            sp.asleep = False
        sp.sizes = []
        host, sp.host = sp.host, None
        if host is not None and sp.own_host:
            host.close()

    def _arm_finalizer(self) -> None:
        # Collection releases a handle through the compiled core's deallocator only while
        # ``_h`` is set: an offloaded buffer needs the finaliser pure mode always has.
        if self._finalizer is None:
            fin = weakref.finalize(self, release_state, self._state, collected=True)
            fin.atexit = False  # nothing is released at exit
            self._finalizer = fin

    # -- access and sharing -----------------------------------------------------------------
    def set_access(
        self,
        device: Device | int,
        access: MemAccess | int = MemAccess.READ_WRITE,
        *,
        read_write: bool | None = None,
    ) -> None:
        """Let ``device`` use the buffer as ``access`` says (``cuMemSetAccess`` per chunk).

        Applies to the memory mapped now and to every chunk mapped later (growth,
        :meth:`restore`). The device needs peer access to the buffer's device
        (:meth:`Device.can_access_peer`); no ``cuCtxEnablePeerAccess`` is needed.
        No synchronisation, no allocation. Unmapping then also waits for that device's
        primary context.

        Parameters
        ----------
        device
            A :class:`~cudriver.Device` or ordinal.
        access
            A :class:`~cudriver.MemAccess` (or its int value): ``READ_WRITE``
            (default), ``READ``, or ``NONE`` to take access away.
        read_write
            Deprecated: use ``access`` (``read_write=False`` is ``MemAccess.READ``).

        Raises
        ------
        TypeError
            ``access`` is not a MemAccess or int (a bool is refused), or both
            ``access`` and ``read_write`` are given.
        ValueError
            ``access`` is no MemAccess value, or is not ``READ_WRITE`` for the buffer's
            own device.
        """
        if read_write is not None:
            rw = bool_arg(read_write, "read_write")
            if access is not MemAccess.READ_WRITE:
                raise TypeError(
                    "set_access() takes access= or its deprecated form read_write=, not both"
                )
            deprecated(
                "VirtualBuffer.set_access(device, read_write=...)",
                "VirtualBuffer.set_access(device, MemAccess.READ_WRITE or MemAccess.READ)",
            )
            access = MemAccess.READ_WRITE if rw else MemAccess.READ
        acc = _access_arg(access)
        sp = self._own("set_access")
        dev = _device_of(device)
        if dev.ordinal == sp.device.ordinal and acc is not MemAccess.READ_WRITE:
            raise ValueError(
                f"the buffer's own device keeps read-write access, not MemAccess.{acc.name}"
            )
        hold = Lease(self._state, self)
        try:
            sp.enter("set_access")
            try:
                flags = _drv.CUmemAccess_flags(int(acc))
                d = _drv.CUmemAccessDesc()
                d.location = _location(dev)
                d.flags = flags
                with sp.ctx._scope():
                    for c in sp.chunks:
                        _cd.cuMemSetAccess(c.addr, c.size, [d], 1)
                sp.set_access(dev.ordinal, flags)  # for the chunks mapped later
                if dev.ordinal != sp.device.ordinal and acc is not MemAccess.NONE:
                    h = kept_primary(dev).handle  # unmapping waits for its work too
                    if all(int(x) != int(h) for x in sp.waits):
                        sp.waits.append(h)
            finally:
                sp.busy.release()
        finally:
            del hold

    def access(self, device: Device | int) -> MemAccess:
        """How ``device`` may use the buffer (no driver call).

        Answered from the buffer's own record of what :meth:`set_access` (and the
        ``access=`` of the constructor) set, which every chunk mapped gets: the
        buffer's device has ``READ_WRITE``, a device never given access ``NONE``.
        ``cuMemGetAccess`` would answer the same for each mapped chunk.
        """
        sp = self._space()
        if sp.closed:
            self._raise_closed()
        dev = _device_of(device)
        flags = sp.access.get(dev.ordinal)
        return MemAccess.NONE if flags is None else MemAccess(int(flags))

    # Overrides DeviceBuffer.export_handle (the 64 bytes of a pool allocation) with
    # another return type: a VirtualBuffer travels as one handle per chunk.
    @pinned
    def export_handle(self) -> list[int | bytes]:  # type: ignore[override]
        """One shareable handle per chunk (``cuMemExportToShareableHandle``), in order.

        POSIX file descriptors (ints; the caller owns them and closes them with
        :func:`os.close`) for ``handle_type="fd"``, 64-byte fabric handles for
        ``"fabric"``. Send them with :attr:`chunks` to another process (descriptors over
        a Unix socket, ``socket.send_fds``), which maps them with
        :meth:`import_handle`. No synchronisation. Memory mapped by :meth:`restore` is
        new: export again.

        Raises
        ------
        ValueError
            The buffer was made without ``handle_type``.
        TypeError
            The buffer is a view.
        """
        sp = self._own("export_handle")
        if sp.kind is None:
            raise ValueError(
                "this VirtualBuffer was made without handle_type: its memory cannot be "
                "exported (pass handle_type='fd' or 'fabric')"
            )
        enum = KINDS[sp.kind][0]
        out: list[int | bytes] = []
        try:
            for c in sp.chunks:
                sh = _cd.cuMemExportToShareableHandle(c._state.handle, enum, 0)
                if sp.kind == "fd":
                    out.append(int(sh))
                else:
                    out.append(ctypes.string_at(sh.getPtr(), FABRIC_BYTES))
        except BaseException:
            for x in out:
                if isinstance(x, int):
                    os.close(x)
            raise
        return out

    def export(self) -> list[int | bytes]:
        """Deprecated: use :meth:`export_handle`."""
        deprecated("VirtualBuffer.export()", "VirtualBuffer.export_handle()")
        return self.export_handle()

    # Overrides DeviceBuffer.import_handle(data, nbytes, *, pool) with another signature:
    # a VirtualBuffer maps one handle per chunk. A call meant for DeviceBuffer's (pool=,
    # or the 64 bytes of a pool allocation) is refused with a TypeError.
    @classmethod
    def import_handle(  # type: ignore[override]
        cls,
        handles: Sequence[int | bytes],
        sizes: Sequence[int],
        *,
        device: Device | int | None = None,
        reserve: int | None = None,
    ) -> VirtualBuffer:
        """Map memory another process exported (:meth:`export_handle`) into a new buffer.

        ``handles`` are the file descriptors received (not closed here: close them
        afterwards, since an open descriptor keeps the memory allocated) or the fabric
        handles, ``sizes`` the exporter's :attr:`chunks`. Reserves ``reserve`` bytes
        (default: their sum), then per handle ``cuMemImportFromShareableHandle``,
        ``cuMemMap`` and ``cuMemSetAccess``. The buffer may grow further with memory
        of its own; closing it unmaps and releases this process's handles only.
        (An allocation of a :class:`~cudriver.MemoryPool` is opened with
        :meth:`DeviceBuffer.import_handle` instead.)

        Raises
        ------
        TypeError
            ``handles`` is not a sequence of file descriptors (ints; a bool is refused)
            or of 64-byte fabric handles, or ``sizes`` not a sequence of ints.
        ValueError
            ``handles`` is empty or of another length than ``sizes``, a descriptor is
            negative, a size not positive, or ``reserve`` smaller than their sum.
        OSError
            A descriptor is not open (``os.fstat``'s error).
        """
        hs, ss, kind, rsv = import_args(handles, sizes, reserve)
        buf = cls(rsv, device=device, handle_type=kind)
        try:
            sp = buf._vm
            for s in ss:
                if s % sp.gran:
                    raise ValueError(f"sizes entry {s} is not a multiple of {sp.gran}")
            enum = KINDS[kind][0]
            with sp.ctx._scope():
                for h, s in zip(hs, ss, strict=True):
                    if isinstance(h, int):
                        ah = _cd.cuMemImportFromShareableHandle(h, enum)
                    else:
                        fh = _drv.CUmemFabricHandle()
                        ctypes.memmove(fh.getPtr(), bytes(h), FABRIC_BYTES)
                        ah = _cd.cuMemImportFromShareableHandle(fh.getPtr(), enum)
                    sp.map(s, ah)
            buf._nbytes = sp.mapped
        except BaseException:
            buf.close()
            raise
        return buf

    @classmethod
    def import_handles(
        cls,
        handles: Sequence[int | bytes],
        sizes: Sequence[int],
        *,
        device: Device | int | None = None,
        reserve: int | None = None,
    ) -> VirtualBuffer:
        """Deprecated: use :meth:`import_handle`."""
        deprecated("VirtualBuffer.import_handles(...)", "VirtualBuffer.import_handle(...)")
        return cls.import_handle(handles, sizes, device=device, reserve=reserve)

    # -- closing ----------------------------------------------------------------------------
    def close(self) -> None:
        """Unmap everything and free the reservation; idempotent.

        The release waits for the device (``cuCtxSynchronize``), then ``cuMemUnmap``
        and ``cuMemRelease`` per chunk and ``cuMemAddressFree``; it frees the host copy
        of an offloaded buffer. It runs here (**blocking** for the wait) unless a lease
        or another thread's call holds the buffer (then it runs when they are done), a
        capture begun through cudriver is open, or this is a host-function or capturing
        thread (then it is queued for the releasing thread). Views are closed.
        """
        sp = self._vm_or_none()
        if sp is None:  # a view
            super().close()
            return
        with sp.gate:
            if sp.closed:
                return
            sp.closed = True
            self._h = None
        self._close_views(0)
        fin = self._finalizer
        if fin is not None:
            fin.detach()
        capture_open = bool(GUARD.open)
        release_state(self._state, collected=capture_open)
        if _handle.deferred and not capture_open:
            _handle.drain_quick()

    # -- constructors of DeviceBuffer that do not apply -------------------------------------------
    from_array = _not_available(
        "from_array", "make a VirtualBuffer, then ``buf.view(0, a.nbytes).copy_from(a)``"
    )
    empty = _not_available("empty", "make a VirtualBuffer and :meth:`cast` it")
    from_handle = _not_available(
        "from_handle", "wrap foreign memory with :meth:`DeviceBuffer.from_handle`"
    )
    from_dlpack = _not_available(
        "from_dlpack", "wrap foreign memory with :meth:`DeviceBuffer.from_dlpack`"
    )

    def _repr_extra(self) -> str:
        sp = self._vm_or_none()
        if sp is None:
            return super()._repr_extra()
        return f"nbytes={self._nbytes} reserved={sp.reserve} chunks={len(sp.chunks)}"

    def __repr__(self) -> str:
        sp = self._vm_or_none()
        if sp is not None and sp.asleep and not sp.closed:
            return f"<cudriver.VirtualBuffer {self._key:#x} offloaded nbytes={self._nbytes}>"
        return super().__repr__()


_share.register(VirtualBuffer, reduce_virtual)


class VirtualMemoryResource(MemoryResource):
    """Virtual memory as a :class:`~cudriver.MemoryResource`.

    Each allocation is a :class:`VirtualBuffer` that reserves and maps what it asks for.

    ``cuMemAddressReserve``, ``cuMemCreate``, ``cuMemMap`` and ``cuMemSetAccess`` per
    allocation (the size rounded up to the granularity); the release waits for the
    device and unmaps (see :class:`VirtualBuffer`). ``stream`` is accepted and
    ignored: virtual memory is not stream-ordered. ``reserve``: extra address space
    for each buffer to grow into (bytes), 0 by default.

    Parameters
    ----------
    device, access, handle_type
        As for :class:`VirtualBuffer`.
    """

    __slots__ = ("_access", "_device", "_extra", "_kind")

    def __init__(
        self,
        device: Device | int | None = None,
        *,
        access: Iterable[Device | int] = (),
        handle_type: str | None = None,
        reserve: int = 0,
    ) -> None:
        self._device = _device_of(device)
        self._access = list(devices_arg(access))
        self._kind = kind_arg(handle_type)
        if isinstance(reserve, bool) or not isinstance(reserve, int) or reserve < 0:
            raise ValueError(f"reserve must be an int >= 0, not {reserve!r}")
        self._extra = reserve

    @property
    def name(self) -> str:
        return "cuMemCreate"

    @property
    def device(self) -> Device:
        return self._device

    def allocate(self, nbytes: int, *, stream: Any = None) -> VirtualBuffer:
        """A new :class:`VirtualBuffer` with ``nbytes`` mapped (rounded up to the granularity)."""
        n = nbytes_arg(nbytes)
        return VirtualBuffer(
            n + self._extra,
            device=self._device,
            nbytes=n,
            access=self._access,
            handle_type=self._kind,
        )

    def deallocate(self, buffer: Any, *, stream: Any = None) -> None:
        """Close ``buffer``: its release waits for the device, then unmaps."""
        buffer.close()
