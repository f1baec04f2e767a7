"""The machinery of :class:`cudriver.VirtualBuffer`: its handles, their releases, the wait.

A VirtualBuffer is three kinds of handle, each released through :mod:`cudriver._handle`
like every other one:

* the **reservation** (:class:`Reservation`, ``cuMemAddressReserve``): its release is
  ``cuMemAddressFree``; it outlives every chunk (each chunk's state depends on it);
* one **chunk** per physical allocation (:class:`Chunk`, ``cuMemCreate`` or imported):
  its release (:class:`Unmap`) waits for the device, then ``cuMemUnmap`` and
  ``cuMemRelease``;
* the **buffer** itself, whose release state is what leases (graphs, prepared launches,
  DLPack exports) and pins hold: its release (:class:`Teardown`) waits once, unmaps
  every chunk and lets the reservation go.

Releases call the raw bindings (``_drv``) and report a failure as a warning; the
methods call the checked mirror (``cudriver.driver``).

**The wait** before an unmap is ``cuCtxSynchronize`` in the buffer's context and in the
primary context of each device given access (:func:`wait`): every work item enqueued
before it has run, whatever stream or graph enqueued it. A device-wide wait invalidates
a capture open on the device, so the methods that unmap refuse to run while a capture
begun through cudriver is open (:func:`refuse_in_capture`), and ``close()`` then queues
the release: the releasing thread idles while a capture is open.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from collections.abc import Iterable
from typing import Any

from cuda.bindings import driver as _drv

from .. import driver as _cd
from .._context import _share
from .._context.device import Context, Device, call_in_context
from .._lifetime._coerce import nbytes_arg
from .._lifetime._handle import Handle, reclaiming, release_with
from .._lifetime._release import _warn
from .._runtime import _freed, _hooks
from .._runtime._bindings import SUCCESS
from .._runtime._enums import DeviceAttribute
from ..errors import (
    GUARD,
    NotSupportedError,
    StreamCaptureError,
    capturing_on_this_thread,
    error_for,
    make_error,
)
from . import accounting as _account
from .pinned import PinnedBuffer
from .pool import _location

__all__ = [
    "KINDS",
    "FABRIC_BYTES",
    "RW",
    "READ",
    "Reservation",
    "Unmap",
    "Chunk",
    "Space",
    "Teardown",
    "wait",
    "refuse_in_capture",
    "kind_arg",
    "devices_arg",
    "import_args",
    "require",
    "round_up",
    "travel_refusal",
    "reduce_virtual",
    "rebuild_virtual",
]

_T = _drv.CUmemAllocationHandleType
#: handle_type -> (the driver's handle type, the device attribute that says it works)
KINDS: dict[str | None, tuple[Any, DeviceAttribute | None]] = {
    None: (_T.CU_MEM_HANDLE_TYPE_NONE, None),
    "fd": (
        _T.CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
        DeviceAttribute.HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED,
    ),
    "fabric": (_T.CU_MEM_HANDLE_TYPE_FABRIC, DeviceAttribute.HANDLE_TYPE_FABRIC_SUPPORTED),
}
FABRIC_BYTES = 64  # sizeof(CUmemFabricHandle)
RW = _drv.CUmemAccess_flags.CU_MEM_ACCESS_FLAGS_PROT_READWRITE
READ = _drv.CUmemAccess_flags.CU_MEM_ACCESS_FLAGS_PROT_READ
_CAPTURE_UNSUPPORTED = _drv.CUresult.CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED
_NOT_SUPPORTED = _drv.CUresult.CUDA_ERROR_NOT_SUPPORTED


def round_up(n: int, g: int) -> int:
    """``n`` rounded up to a multiple of ``g``."""
    return -(-n // g) * g


def wait(contexts: list[Any]) -> Any:
    """``cuCtxSynchronize`` in each context of ``contexts`` (raw handles), in order.

    Returns the first failing status tuple, else None. Blocks the calling thread until
    the work in those contexts has run; the GIL is released meanwhile (cuda-bindings 13).
    """
    for ctx_h in list(contexts):
        r = call_in_context(ctx_h, _drv.cuCtxSynchronize)
        if r[0] is not SUCCESS:
            return r
    return None


def calls_done(state: Any, views: list[Any]) -> None:
    """Wait until no other thread is inside a driver call with the buffer or its views.

    For :meth:`~cudriver.VirtualBuffer.offload`, once new use is refused (the handles
    cleared): a call pins, then checks the handle, so only the calls already past the
    check are left, each inside one driver call (an enqueue, or a synchronous copy for
    its duration). ``state`` (the buffer's) carries one pin of the caller's own;
    ``views`` are the release states of the views it closed. Sleeps between looks.
    """
    while len(state.pins) > 1 or state.busy or any(v.pins or v.busy for v in views):
        time.sleep(50e-6)


def refuse_in_capture(what: str, *, waits: bool) -> None:
    """Raise :class:`~cudriver.StreamCaptureError` where ``what`` would break a capture.

    ``waits``: the method waits for the device (refused while any capture begun through
    cudriver is open); else it only maps memory (refused on a capturing thread and while
    a ``GLOBAL`` capture is open). Checks the call guard (host functions) first.
    """
    if GUARD.armed:
        GUARD.check()
    if waits:
        if GUARD.open:
            raise StreamCaptureError(
                _CAPTURE_UNSUPPORTED,
                _drv.cuCtxSynchronize.__name__,
                f"VirtualBuffer.{what}() waits for the device, which would invalidate the "
                "capture that is open; call it once the capture has ended",
            )
    elif GUARD.captures or capturing_on_this_thread():
        raise StreamCaptureError(
            _CAPTURE_UNSUPPORTED,
            _drv.cuMemCreate.__name__,
            f"VirtualBuffer.{what}() maps memory, which a capture in progress forbids; "
            "call it once the capture has ended",
        )


class Reservation(Handle):
    """A reserved address range (``cuMemAddressReserve``; ``cuMemAddressFree`` on release)."""

    __slots__ = ()

    _kind = "VirtualBuffer reservation"

    def __init__(self, base: Any, size: int, ctx: Context) -> None:
        h = _drv.CUdeviceptr(int(base))
        rel = _FreeAddress(ctx.handle, size)
        self._init_handle(h, release=rel, func=_drv.cuMemAddressFree.__name__, keep=(ctx,))


class _FreeAddress:
    __slots__ = ("ctx_h", "size")

    def __init__(self, ctx_h: Any, size: int) -> None:
        self.ctx_h = ctx_h
        self.size = size

    def __call__(self, ptr: Any) -> Any:
        r = call_in_context(self.ctx_h, _drv.cuMemAddressFree, ptr, self.size)
        if r[0] is SUCCESS:
            _freed.noted(int(ptr), self.size)  # the mirrors refuse it from now on
        return r


class Unmap:
    """A chunk's release: :func:`wait`, then ``cuMemUnmap`` (if mapped) and ``cuMemRelease``."""

    __slots__ = ("addr", "ctx_h", "mapped", "size", "waits")
    # Runs cuCtxSynchronize: never drained beside an open capture (_handle.drain).
    waits_for_device = True

    def __init__(self, ctx_h: Any, addr: int, size: int, waits: list[Any]) -> None:
        self.ctx_h = ctx_h
        self.addr = addr
        self.size = size
        self.mapped = False
        self.waits = waits  # the buffer's list of contexts to wait for (shared)

    def __call__(self, handle: Any) -> Any:
        if self.mapped:
            r = wait(self.waits)
            if r is not None:
                return r
        return self.now(handle)

    def now(self, handle: Any) -> Any:
        """Unmap and release without waiting: the caller waited."""
        return call_in_context(self.ctx_h, self._unmap_release, handle)

    def _unmap_release(self, handle: Any) -> Any:
        if self.mapped:
            r = _drv.cuMemUnmap(self.addr, self.size)
            if r[0] is not SUCCESS:
                return r
            self.mapped = False
        return _drv.cuMemRelease(handle)

    def failed_call(self) -> Any:
        """The driver function that failed: the unmap while still mapped, else the release."""
        return _drv.cuMemUnmap if self.mapped else _drv.cuMemRelease


class Chunk(Handle):
    """One physical allocation (``cuMemCreate`` or imported), mapped at ``addr``."""

    __slots__ = ("addr", "rel", "size")

    _kind = "VirtualBuffer chunk"

    def __init__(self, h: Any, rel: Unmap, reservation: Reservation) -> None:
        self.rel = rel
        self.addr = rel.addr
        self.size = rel.size
        self._init_handle(h, release=rel, func=_drv.cuMemRelease.__name__, keep=(reservation,))

    def unmap_now(self) -> Any:
        """Unmap and release now, without the wait (the caller waited); the status tuple."""
        self._h = None
        return release_with(self._state, self.rel.now)


class Space:
    """A VirtualBuffer's mutable state; never refers back to the buffer."""

    __slots__ = (
        "access",
        "asleep",
        "base",
        "busy",
        "chunks",
        "closed",
        "ctx",
        "device",
        "gate",
        "gran",
        "host",
        "kind",
        "made",
        "mapped",
        "own_host",
        "prop",
        "reservation",
        "reserve",
        "sizes",
        "waits",
    )

    def __init__(
        self,
        device: Device,
        ctx: Context,
        prop: Any,
        gran: int,
        kind: str | None,
        base: int,
        reserve: int,
        reservation: Reservation,
    ) -> None:
        self.device = device
        self.ctx = ctx
        self.prop = prop
        self.gran = gran
        self.kind = kind
        self.base = base
        self.reserve = reserve
        self.reservation = reservation
        self.access: dict[int, Any] = {device.ordinal: RW}  # ordinal -> access flags
        self.made: list[Any] | None = None  # the access descriptors, made from ``access``
        self.waits: list[Any] = [ctx.handle]  # the contexts an unmap waits for
        self.chunks: list[Chunk] = []
        self.mapped = 0
        self.asleep = False
        self.closed = False
        self.sizes: list[int] = []  # the chunk sizes while offloaded
        self.host: PinnedBuffer | None = None
        self.own_host = False
        self.gate = threading.Lock()  # close() against restore() publishing the handle
        self.busy = threading.Lock()  # one resize/offload/restore at a time (never waited for)

    def enter(self, what: str) -> None:
        """Claim the buffer for ``what``; a second thread at once gets RuntimeError."""
        if not self.busy.acquire(blocking=False):
            raise RuntimeError(
                f"VirtualBuffer.{what}(): another thread is resizing, offloading or "
                "restoring this buffer"
            )

    def descs(self) -> list[Any]:
        """A ``CUmemAccessDesc`` per device with access (made once per change of access).

        A device whose access was taken away (``NONE``) needs none: new memory is not
        accessible until granted.
        """
        out = self.made
        if out is None:
            out = []
            for ordinal, flags in self.access.items():
                if int(flags) == 0:  # CU_MEM_ACCESS_FLAGS_PROT_NONE
                    continue
                d = _drv.CUmemAccessDesc()
                d.location = _location(Device(ordinal))
                d.flags = flags
                out.append(d)
            self.made = out
        return out

    def set_access(self, ordinal: int, flags: Any) -> None:
        """Record ``ordinal``'s access for the chunks mapped from now on."""
        self.access[ordinal] = flags
        self.made = None

    def map(self, size: int, imported: Any) -> None:
        """Map a chunk of ``size`` bytes after the end: new (``cuMemCreate``) or ``imported``.

        ``cuMemMap`` and ``cuMemSetAccess``; on failure the chunk is released again.
        """
        ctx = self.ctx
        rel = Unmap(ctx.handle, self.base + self.mapped, size, self.waits)
        with ctx._scope():
            h = reclaiming(_cd.cuMemCreate, size, self.prop, 0) if imported is None else imported
            chunk = Chunk(h, rel, self.reservation)
            if _account.ON and imported is None:
                _account.track(chunk._state, rel.addr, size, self.device.ordinal, "cuMemCreate")
            if _hooks.MARKS and imported is None:
                _hooks.mark("VirtualBuffer chunk", size)
            try:
                _cd.cuMemMap(rel.addr, size, 0, h, 0)
                rel.mapped = True
                descs = self.descs()
                _cd.cuMemSetAccess(rel.addr, size, descs, len(descs))
            except BaseException:
                chunk.close()  # unmaps (after the wait) if mapped, and releases
                raise
        self.chunks.append(chunk)
        self.mapped += size

    def unmap_last(self, k: int, *, waited: bool) -> None:
        """Unmap and release the last ``k`` chunks, after :func:`wait` unless ``waited``."""
        if not waited:
            r = wait(self.waits)
            if r is not None:
                raise error_for(r[0], _drv.cuCtxSynchronize)
        for _ in range(k):
            c = self.chunks.pop()
            self.mapped -= c.size
            r = c.unmap_now()
            if r is not None and r[0] is not SUCCESS:
                raise error_for(r[0], c.rel.failed_call())

    def trailing(self) -> list[int]:
        """The sizes that whole chunks at the end add up to: what shrink() can remove."""
        return list(itertools.accumulate(c.size for c in reversed(self.chunks)))


class Teardown:
    """The buffer's release: :func:`wait` once, unmap every chunk, let the reservation go."""

    __slots__ = ("reservation", "space")
    waits_for_device = True  # see Unmap

    def __init__(self, space: Space, reservation: Reservation) -> None:
        self.space = space
        self.reservation = reservation

    def __call__(self, handle: Any) -> None:
        sp = self.space
        chunks, sp.chunks = sp.chunks, []
        host, sp.host = sp.host, None
        try:
            if chunks:
                r = wait(sp.waits)
                if r is not None:
                    err = make_error(r[0], _drv.cuCtxSynchronize.__name__)
                    _warn(f"waiting to unmap a VirtualBuffer failed: {err}")
                for c in reversed(chunks):
                    r = c.unmap_now()
                    if r is not None and r[0] is not SUCCESS:
                        err = make_error(r[0], c.rel.failed_call().__name__)
                        _warn(f"releasing a VirtualBuffer chunk failed: {err}")
            if host is not None and sp.own_host:
                host.close()
        finally:
            self.reservation.close()  # freed once the last chunk's release has run


def kind_arg(handle_type: object) -> str | None:
    """``handle_type`` checked: ``"fd"``, ``"fabric"`` or None."""
    if handle_type is not None and not isinstance(handle_type, str):
        raise TypeError(
            f"handle_type must be 'fd', 'fabric' or None, not {type(handle_type).__name__}"
        )
    if handle_type not in KINDS:
        raise ValueError(f"handle_type must be 'fd', 'fabric' or None, not {handle_type!r}")
    return handle_type


def devices_arg(access: object) -> list[Device | int]:
    """``access`` checked: an iterable of Devices or ordinals (not yet looked up)."""
    if isinstance(access, Device | int | str | bytes) or not isinstance(access, Iterable):
        raise TypeError(
            f"access must be an iterable of devices (Device or ordinal), not "
            f"{type(access).__name__}"
        )
    out: list[Device | int] = []
    for d in access:
        if isinstance(d, bool) or not isinstance(d, Device | int):
            raise TypeError(f"access entries must be Devices or ordinals, not {type(d).__name__}")
        out.append(d)
    return out


def import_args(
    handles: object, sizes: object, reserve: object
) -> tuple[list[Any], list[int], str, int]:
    """``VirtualBuffer.import_handle``'s arguments checked: ``(handles, sizes, kind, reserve)``.

    TypeError for a wrong type (a bool is no descriptor; bytes are no sequence of
    handles: the 64 bytes of a pool allocation open with ``DeviceBuffer.import_handle``),
    ValueError for a bad value, OSError for a descriptor that is not open.
    """
    if isinstance(handles, bytes | bytearray | str) or not isinstance(handles, Iterable):
        raise TypeError(
            "handles must be a sequence of file descriptors (ints) or 64-byte fabric "
            f"handles, as export_handle() returns, not {type(handles).__name__} (the 64 "
            "bytes of a pool allocation open with DeviceBuffer.import_handle)"
        )
    if isinstance(sizes, bytes | bytearray | str) or not isinstance(sizes, Iterable):
        raise TypeError(
            f"sizes must be a sequence of ints (the exporter's chunks), not {type(sizes).__name__}"
        )
    hs = list(handles)
    ss = [nbytes_arg(s, "sizes entry") for s in sizes]
    if not hs or len(hs) != len(ss):
        raise ValueError(
            f"handles and sizes must be non-empty and of one length, not {len(hs)} and {len(ss)}"
        )
    if all(isinstance(h, int) and not isinstance(h, bool) for h in hs):
        kind = "fd"
        for h in hs:
            if h < 0:
                raise ValueError(f"handles entry {h} is not a file descriptor")
            os.fstat(h)  # a closed descriptor fails here, with the OS's message
    elif all(isinstance(h, bytes | bytearray) and len(h) == FABRIC_BYTES for h in hs):
        kind = "fabric"
    else:
        raise TypeError(
            "handles must be file descriptors (ints) or 64-byte fabric handles (bytes), as "
            "export_handle() returns"
        )
    total = sum(ss)
    rsv = total if reserve is None else nbytes_arg(reserve, "reserve")
    if rsv < total:
        raise ValueError(f"reserve {rsv} is smaller than the {total} bytes to import")
    return hs, ss, kind, rsv


def require(dev: Device, attr: DeviceAttribute, what: str) -> None:
    """Raise :class:`~cudriver.NotSupportedError` unless ``dev`` has ``attr``."""
    if not dev.attribute(attr):
        raise NotSupportedError(
            _NOT_SUPPORTED,
            _drv.cuMemCreate.__name__,
            f"device {dev.ordinal} does not support {what} (DeviceAttribute.{attr.name} is 0)",
        )


# -- travelling through multiprocessing (see _share) -------------------------------------
def travel_refusal(sp: Space) -> str | None:
    """Why a VirtualBuffer over ``sp`` cannot travel to another process, or None."""
    if sp.closed:
        return "it is closed"
    if sp.kind != "fd":
        return "it was made without handle_type='fd' (file descriptors are what travel)"
    if sp.asleep:
        return "it is offloaded: restore() it first"
    return None


def reduce_virtual(buf: Any) -> tuple[Any, ...]:
    """``multiprocessing``'s reduction of a VirtualBuffer: one descriptor per chunk."""
    _share.refuse(buf)
    root = buf._base if buf._base is not None else buf
    fds = root.export_handle()
    sent: list[Any] = []
    try:
        for fd in fds:
            sent.append(_share.send_fd(fd))  # owns fd from here
    except BaseException:
        for fd in fds[len(sent) + 1 :]:
            os.close(fd)
        raise
    layout = (buf._offset, buf._nbytes, buf._dtype, buf._shape)
    dev = _share.device_uuid(root._vm.device)
    return (rebuild_virtual, (type(root), sent, list(root.chunks), dev, *layout))


def rebuild_virtual(
    cls: Any,
    sent: list[Any],
    sizes: list[int],
    uuid: bytes,
    offset: int,
    nbytes: int,
    dtype: Any,
    shape: tuple[int, ...] | None,
) -> Any:
    """The VirtualBuffer a message carries, mapped here (its descriptors closed after)."""
    fds: list[int] = []
    try:
        for w in sent:
            fds.append(_share.receive_fd(w))
        buf = cls.import_handle(fds, sizes, device=_share.device_of_uuid(uuid))
    finally:
        for fd in fds:
            os.close(fd)
    if offset == 0 and nbytes == buf._nbytes:
        buf._dtype, buf._shape = dtype, shape
        return buf
    return buf._make_view(offset, nbytes, dtype, shape)
