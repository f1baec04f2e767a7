"""Pinning memory the caller already has: :class:`RegisteredMemory` (``cuMemHostRegister``).

A registration page-locks (and maps for the device) a span of memory that some other
Python object owns: a numpy array, a ``bytearray``, an ``mmap.mmap``, a ``memoryview``,
an ``array.array``. While it lives, copies between that memory and the device are truly
asynchronous (no staging), as for :class:`~cudriver.PinnedBuffer`, whose protocol base
(:class:`~cudriver._lifetime._coerce.HostMemory`) it shares: the copy functions
recognise it by that base.

**What a registration keeps.** The object and a buffer export of it (a numpy array of
its bytes, over a ``memoryview`` for non-numpy objects) live in the release state's
``keep`` until ``cuMemHostUnregister`` has run: a ``bytearray`` with an export cannot be
resized, an ``mmap`` cannot be closed, so the pinned span never moves or goes away
under the driver. After the release the export is dropped (and the ``bytearray`` can be
resized again, once arrays from :meth:`RegisteredMemory.array` are gone too).

**The release** (:class:`_Unregister`) calls ``cuMemHostUnregister``, which waits for
the whole device as ``cuMemFreeHost`` does (measured on CUDA 13.0): a copy still in
flight when the object is closed or dropped completes before the memory is unpinned.
It waits for the device, so it is listed in
``_runtime._gates.IDLE_WAITERS`` and marked ``waits_for_device`` (never run beside an
open capture, never by a constructor: the releasing thread runs it when dropped).

**The registry** (:data:`_RANGES`): the byte ranges registered through cudriver in this
process, so that an overlapping registration is refused before the driver is called,
naming the registration it overlaps. A range is reserved before ``cuMemHostRegister``
and forgotten after ``cuMemHostUnregister`` (the release hook), so a registration
closed but not yet released still counts.
"""

from __future__ import annotations

import bisect
import builtins
import functools
import itertools
import os
import threading
import weakref
from typing import Any

import numpy as np
import numpy.typing as npt
from cuda.bindings import driver as _drv

from .._context.device import Context, Device, call_in_context, context_arg, current_or_default
from .._lifetime._coerce import (
    HostMemory,
    Memory,
    bool_arg,
    nbytes_arg,
    typed_shape,
    uint_arg,
)
from .._runtime import _calls
from .._runtime._enums import DeviceAttribute
from ..errors import CudaError, error_for
from ._copy import HostBytes
from .managed import ManagedBuffer
from .memory import DeviceBuffer

__all__ = ["RegisteredMemory", "host_span", "registered_ranges"]

_U8 = np.dtype(np.uint8)
_REGISTER_PORTABLE = int(_drv.CU_MEMHOSTREGISTER_PORTABLE)
_REGISTER_DEVICEMAP = int(_drv.CU_MEMHOSTREGISTER_DEVICEMAP)
_REGISTER_READ_ONLY = int(_drv.CU_MEMHOSTREGISTER_READ_ONLY)
_ALREADY_REGISTERED = _drv.CUresult.CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED
_NOT_SUPPORTED = _drv.CUresult.CUDA_ERROR_NOT_SUPPORTED
_INVALID_VALUE = _drv.CUresult.CUDA_ERROR_INVALID_VALUE
_SUCCESS_CODE = _drv.CUresult.CUDA_SUCCESS

#: What to say of memory the driver already has page-locked, when no cudriver
#: registration explains it.
_PINNED_ELSEWHERE = (
    "it is page-locked already: memory from cuMemHostAlloc (a cudriver.PinnedBuffer's, "
    "which needs no registration: use the PinnedBuffer itself) or a registration made "
    "outside cudriver (a raw cuMemHostRegister, cupy.cuda.runtime.hostRegister, "
    "torch's cudaHostRegister)"
)


# -- the registry of ranges registered through cudriver ---------------------------------------
class _Range:
    """One registered byte range ``[start, end)`` and what registered it."""

    __slots__ = ("end", "owner", "start", "token")

    def __init__(self, start: int, end: int, token: int) -> None:
        self.start = start
        self.end = end
        self.token = token
        #: The registration (weak), set once it exists; None while it is being made.
        self.owner: weakref.ref[RegisteredMemory] | None = None

    def describe(self) -> str:
        ref = self.owner
        obj = ref() if ref is not None else None
        where = f"[{self.start:#x}, {self.end:#x})"
        if ref is None:
            return f"a registration at {where} that another thread is making"
        if obj is None:
            return f"a registration at {where} that was dropped, whose release is still queued"
        if obj.closed:
            return (
                f"a registration at {where} that is closed, whose cuMemHostUnregister has "
                "not run yet (something still uses it: a graph, a device view)"
            )
        return f"{obj!r} at {where}"


#: Start address -> the range registered there (ranges never overlap); see the module
#: docstring. Guarded by :data:`_lock`, which is never held around a driver call.
_RANGES: dict[int, _Range] = {}
_starts: list[int] = []  # the keys of _RANGES, sorted
_lock = threading.Lock()
_tokens = itertools.count(1)


def _overlapping(start: int, end: int) -> list[_Range]:
    """The registered ranges that share a byte with ``[start, end)`` (under the lock)."""
    found = []
    i = bisect.bisect_right(_starts, start) - 1
    if i >= 0 and _RANGES[_starts[i]].end > start:
        found.append(_RANGES[_starts[i]])
    i += 1
    while i < len(_starts) and _starts[i] < end:
        found.append(_RANGES[_starts[i]])
        i += 1
    return found


def _reserve(start: int, end: int) -> _Range:
    """Reserve ``[start, end)`` for a registration, or refuse an overlap (no driver call)."""
    with _lock:
        clash = _overlapping(start, end)
        if not clash:
            entry = _Range(start, end, next(_tokens))
            _RANGES[start] = entry
            bisect.insort(_starts, start)
            return entry
    raise error_for(
        _ALREADY_REGISTERED,
        _drv.cuMemHostRegister,
        f"refused before the driver call: bytes [{start:#x}, {end:#x}) overlap "
        f"{'; '.join(r.describe() for r in clash)}; a byte can be registered once: close() "
        "that registration first, or register a span that does not overlap it",
    )


def _forget(start: int, token: int) -> None:
    """Drop the range reserved at ``start`` (if it is still the one of ``token``)."""
    with _lock:
        entry = _RANGES.get(start)
        if entry is not None and entry.token == token:
            del _RANGES[start]
            i = bisect.bisect_left(_starts, start)
            if i < len(_starts) and _starts[i] == start:
                del _starts[i]


def registered_ranges() -> list[tuple[int, int]]:
    """The ``(start, end)`` byte ranges registered through cudriver now, in address order.

    A registration counts until its ``cuMemHostUnregister`` has run. No driver call.
    """
    with _lock:
        return [(s, _RANGES[s].end) for s in _starts]


def _after_fork_in_child() -> None:
    # The child registered nothing (it may make no driver call); a lock held by another
    # thread of the parent at the fork would never be released there.
    global _lock
    _lock = threading.Lock()
    _RANGES.clear()
    _starts.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)


# -- what can be registered ---------------------------------------------------------------------
def _cudriver_memory(obj: object) -> Memory | None:
    """The cudriver buffer whose memory ``obj`` (an array or view of it) is, if any."""
    x: Any = obj
    for _ in range(64):  # numpy base chains and memoryview exporters
        if isinstance(x, Memory):
            return x
        if isinstance(x, HostBytes):
            keep = x.keep
            target = getattr(keep, "target", keep)  # a Lease names what it leases
            return target if isinstance(target, Memory) else None
        if isinstance(x, np.ndarray):
            x = x.base
        elif isinstance(x, memoryview):
            x = x.obj
        else:
            return None
        if x is None:
            return None
    return None


def host_span(obj: object, *, read_only: bool) -> tuple[npt.NDArray[np.uint8], bool]:
    """``(its bytes as a 1-D uint8 array, is it read-only?)`` for a registration of ``obj``.

    The array is a view of ``obj``'s memory (no copy) and holds a buffer export of it.
    Makes no driver call: every refusal that can be made before ``cuMemHostRegister``
    is made here.

    Raises
    ------
    TypeError
        ``obj`` has no buffer interface, is device memory, or is an array of Python
        objects.
    ValueError
        ``obj`` is empty, not one contiguous span, read-only without ``read_only=True``,
        or memory of a cudriver buffer (pinned or managed already).
    """
    mem = _cudriver_memory(obj)
    if isinstance(mem, ManagedBuffer):
        raise ValueError(
            f"cannot register the memory of a cudriver.{mem._kind}: managed memory is the "
            "driver's already, reachable from the host and the device; it needs no registration"
        )
    if isinstance(mem, HostMemory):
        raise ValueError(
            f"cannot register the memory of a cudriver.{mem._kind}: {_PINNED_ELSEWHERE}"
        )
    if mem is not None:
        raise TypeError(
            f"cannot register a {mem._kind}: cuMemHostRegister page-locks host memory, "
            "and this is device memory"
        )
    if hasattr(obj, "__cuda_array_interface__"):
        raise TypeError(
            f"cannot register a {type(obj).__name__}: it exposes device memory "
            "(__cuda_array_interface__); cuMemHostRegister page-locks host memory"
        )
    u8: npt.NDArray[Any]
    if isinstance(obj, np.ndarray):
        if obj.dtype.hasobject:
            raise TypeError(
                f"cannot register an array of dtype {obj.dtype}: it holds pointers to Python "
                "objects, which have no meaning on the device"
            )
        if not (obj.flags.c_contiguous or obj.flags.f_contiguous):
            raise ValueError(
                f"cannot register a non-contiguous array (shape {obj.shape}, strides "
                f"{obj.strides}): a registration covers one contiguous span of memory; "
                "register the array it is a view of, or a contiguous copy that you keep"
            )
        if obj.nbytes == 0:
            raise ValueError(f"cannot register an empty array (shape {obj.shape}): no bytes")
        readonly = not obj.flags.writeable
        _refuse_read_only(obj, readonly, read_only)
        # One span of bytes, as a view: "A" reads an F-contiguous array in memory order.
        u8 = obj.reshape(-1, order="A").view(np.uint8)
        if u8.__array_interface__["data"][0] != obj.__array_interface__["data"][0]:
            raise ValueError(  # pragma: no cover - a contiguous array reshapes in place
                f"cannot register this array (shape {obj.shape}, strides {obj.strides}): "
                "its bytes are not one span"
            )
        return u8, readonly
    try:
        mv = memoryview(obj)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(
            f"cannot register a {type(obj).__name__}: cuMemHostRegister takes an object "
            "with the buffer interface (a numpy array, bytearray, mmap.mmap, memoryview, "
            "array.array)"
        ) from None
    except ValueError as exc:  # a closed mmap, a released memoryview
        raise ValueError(f"cannot register this {type(obj).__name__}: {exc}") from None
    try:
        if mv.nbytes == 0:
            raise ValueError(f"cannot register an empty {type(obj).__name__}: no bytes")
        if not mv.c_contiguous:
            raise ValueError(
                f"cannot register a non-contiguous {type(obj).__name__}: a registration "
                "covers one contiguous span of memory"
            )
        readonly = mv.readonly
        _refuse_read_only(obj, readonly, read_only)
    except BaseException:
        mv.release()  # a refused object keeps no export (a bytearray stays resizable)
        raise
    u8 = np.frombuffer(mv, dtype=np.uint8)  # its base is mv, which holds the export
    return u8, readonly


def _refuse_read_only(obj: object, readonly: bool, read_only: bool) -> None:
    if readonly and not read_only:
        raise ValueError(
            f"cannot register read-only memory (this {type(obj).__name__} is read-only: "
            "bytes, a read-only numpy array, an mmap opened with ACCESS_READ) without "
            "read_only=True (CU_MEMHOSTREGISTER_READ_ONLY): the device may then only read it"
        )


# -- the release ----------------------------------------------------------------------------------
def _unregister(ptr: int) -> Any:
    # cuMemHostUnregister waits for the whole device itself, as cuMemFreeHost does
    # (measured on CUDA 13.0: 0.7 s behind a kernel of another stream), so work in
    # flight on the memory is done before it is unpinned. No cuCtxSynchronize: that
    # would also invalidate a capture begun outside cudriver, which the unregister, run
    # in RELAXED capture mode like every release, does not.
    return _drv.cuMemHostUnregister(ptr)


class _Unregister:
    """A registration's release: ``cuMemHostUnregister`` in its context."""

    __slots__ = ("ctx_h",)
    # Waits for the device: never beside an open capture, never by a constructor, and
    # held while a stream may wait for the host (_runtime._gates.IDLE_WAITERS).
    waits_for_device = True

    def __init__(self, ctx_h: Any) -> None:
        self.ctx_h = ctx_h

    def __call__(self, ptr: Any) -> Any:
        return call_in_context(self.ctx_h, _unregister, ptr)


# -- the class ------------------------------------------------------------------------------------
class RegisteredMemory(HostMemory):
    """Memory you already have, page-locked and device-mapped (``cuMemHostRegister``).

    The object's memory stays where it is and stays yours: a numpy array is still the
    same numpy array. While registered, copies between it and the device run at full
    bus speed and, with ``stream=``, truly asynchronously: pass the registration (or
    the object itself) as ``src``/``out`` of :class:`DeviceBuffer` copies and of
    :func:`copy_2d`/:func:`copy_3d`, where it counts as page-locked host memory, as a
    :class:`PinnedBuffer` does. ``close()`` (or collection) unregisters it
    (``cuMemHostUnregister``) after waiting for the work of its context.

    The constructor makes one driver call, ``cuMemHostRegister``: it allocates nothing
    and does not wait for the device, but pinning takes time in proportion to the
    size (the pages are faulted in and locked), so register once and reuse.

    Parameters
    ----------
    obj
        An object with the buffer interface whose memory is one contiguous span: a
        C- or F-contiguous numpy array, ``bytearray``, ``mmap.mmap``, ``memoryview``,
        ``array.array``. It is kept, with a buffer export of it, until the memory is
        unregistered: a ``bytearray`` cannot be resized and an ``mmap`` cannot be
        closed meanwhile.
    mapped
        Map the memory into the device address space (``CU_MEMHOSTREGISTER_DEVICEMAP``),
        so kernels and device copies reach it at :attr:`device_ptr`.
    portable
        Page-locked for every context, not only ``context`` (``CU_MEMHOSTREGISTER_PORTABLE``).
        True by default, as for :class:`PinnedBuffer`.
    read_only
        Register it for the device to read only (``CU_MEMHOSTREGISTER_READ_ONLY``):
        required for read-only memory (``bytes``, a read-only array, an ``mmap``
        opened with ``ACCESS_READ``), and supported where the device attribute
        ``READ_ONLY_HOST_REGISTER_SUPPORTED`` is 1. Do not copy from the device into
        such a registration.
    context
        The context to register in; default: the current context (else device 0's
        primary context). The registration keeps it alive.

    Raises
    ------
    TypeError
        ``obj`` has no buffer interface, is device memory or an array of Python objects;
        an option is not a bool, ``context`` not a Context.
    ValueError
        ``obj`` is empty, not contiguous, read-only without ``read_only=True``, or a
        cudriver buffer's memory.
    CudaError
        ``CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED``: the memory overlaps a live
        registration made through cudriver (refused before the driver call, naming
        it), or the driver has it page-locked already (a :class:`PinnedBuffer`'s memory,
        a registration made outside cudriver).
    NotSupportedError
        The device cannot register host memory, or not read-only.

    Notes
    -----
    Registering pins whole pages: page-locking much memory slows the whole system.
    The wait of the release covers the registration's context only: with
    ``portable=True``, work of other contexts that uses the memory must be waited for
    before ``close()``.
    """

    __slots__ = ("_bytes", "_context", "_device_ptr", "_flags", "_nbytes", "_obj")

    _kind = "RegisteredMemory"

    _bytes: npt.NDArray[np.uint8] | None
    _context: Context | None
    _device_ptr: int | None
    _flags: int
    _nbytes: int
    _obj: Any

    def __init__(
        self,
        obj: Any,
        *,
        mapped: bool = True,
        portable: bool = True,
        read_only: bool = False,
        context: Context | None = None,
    ) -> None:
        mapped = bool_arg(mapped, "mapped")
        portable = bool_arg(portable, "portable")
        read_only = bool_arg(read_only, "read_only")
        ctx = context_arg(context)
        u8, _readonly = host_span(obj, read_only=read_only)
        ptr = int(u8.__array_interface__["data"][0])
        n = int(u8.nbytes)
        flags = 0
        if mapped:
            flags |= _REGISTER_DEVICEMAP
        if portable:
            flags |= _REGISTER_PORTABLE
        if read_only:
            flags |= _REGISTER_READ_ONLY
        entry: _Range | None = None
        try:
            entry = _reserve(ptr, ptr + n)
            if ctx is None:
                ctx = current_or_default()
            with ctx._scope():
                try:
                    _calls.cuMemHostRegister(ptr, n, flags)
                except CudaError as exc:
                    raise _register_error(exc, ptr, n, read_only, ctx) from None
        except BaseException:
            if entry is not None:
                _forget(ptr, entry.token)
            del u8  # the export: the traceback keeps this frame, not the object locked
            raise
        self._context = ctx
        self._nbytes = n
        self._flags = flags
        self._device_ptr = None
        self._bytes = u8
        self._obj = obj
        self._init_handle(
            ptr,
            release=_Unregister(ctx.handle),
            func="cuMemHostUnregister",
            keep=(ctx, obj, u8),
            on_release=functools.partial(_forget, ptr, entry.token),
        )
        entry.owner = weakref.ref(self)

    @classmethod
    def from_handle(
        cls,
        handle: int,
        nbytes: int,
        owner: Any = None,
        *,
        mapped: bool = True,
        context: Context | None = None,
    ) -> RegisteredMemory:
        """Wrap host memory registered elsewhere, without ever unregistering it.

        For memory page-locked by another library (``cupy.cuda.runtime.hostRegister``,
        a raw ``cuMemHostRegister``): the result is a page-locked operand of copies
        and gives numpy views, like a registration made here. No driver call.

        Parameters
        ----------
        handle
            The host address (an int), as :attr:`handle` gives it back.
        nbytes
            The size of the registered span in bytes.
        owner
            Kept alive as long as the returned object (and arrays from it): what owns
            the memory and its registration.
        mapped
            Whether the registration was made device-mapped (:attr:`device_ptr`).
        context
            The context to ask for :attr:`device_ptr` in; default: the current one
            (else device 0's primary context), looked up when first needed.
        """
        h = uint_arg(handle, "handle")
        if h == 0:
            raise ValueError("cannot wrap a NULL host pointer")
        n = nbytes_arg(nbytes)
        mapped = bool_arg(mapped, "mapped")
        ctx = context_arg(context)
        self = cls.__new__(cls)
        self._context = ctx  # None: the current context, resolved on first use
        self._nbytes = n
        self._flags = _REGISTER_DEVICEMAP if mapped else 0
        self._device_ptr = None
        self._obj = owner
        self._bytes = np.asarray(HostBytes(owner, h, n))
        self._init_handle(h, release=None, func="cuMemHostUnregister", owned=False, owner=owner)
        return self

    # -- properties -----------------------------------------------------------------------
    @property
    def obj(self) -> Any:
        """The object whose memory is registered (for :meth:`from_handle`: its ``owner``)."""
        if self._h is None:
            self._raise_closed()
        return self._obj

    @property
    def mapped(self) -> bool:
        """Whether the memory is mapped into the device address space."""
        return bool(self._flags & _REGISTER_DEVICEMAP)

    @property
    def portable(self) -> bool:
        """Whether the memory is page-locked for every context."""
        return bool(self._flags & _REGISTER_PORTABLE)

    @property
    def read_only(self) -> bool:
        """Whether it was registered for the device to read only (``read_only=True``)."""
        return bool(self._flags & _REGISTER_READ_ONLY)

    @property
    def context(self) -> Context:
        """The context the memory was registered in."""
        ctx = self._context
        if ctx is None:
            ctx = self._context = current_or_default()
        return ctx

    @property
    def device(self) -> Device:
        """The device of :attr:`context` (``cuCtxGetDevice`` once per context)."""
        return self.context.device

    @property
    def device_ptr(self) -> int:
        """The device address of mapped memory (``cuMemHostGetDevicePointer``, cached).

        Raises
        ------
        ValueError
            The memory was registered with ``mapped=False``.
        """
        if self._h is None:
            self._raise_closed()
        if not self._flags & _REGISTER_DEVICEMAP:
            raise ValueError(
                "this RegisteredMemory is not mapped (mapped=False): it has no device pointer"
            )
        dp = self._device_ptr
        if dp is None:
            with self.context._scope():
                dp = self._device_ptr = int(_calls.cuMemHostGetDevicePointer(self._key, 0))
        return dp

    @property
    def memoryview(self) -> builtins.memoryview:
        """A memoryview of the registered bytes (no copy, no driver call).

        Read-only when the object is. It holds a buffer export of the object while it
        lives (a ``bytearray`` cannot be resized meanwhile).
        """
        raw: Any = self._open_bytes()
        return builtins.memoryview(raw)

    # -- views ------------------------------------------------------------------------------
    def _open_bytes(self) -> npt.NDArray[np.uint8]:
        b = self._bytes
        if self._h is None or b is None:
            self._raise_closed()
        return b

    def array(
        self, dtype: npt.DTypeLike = np.uint8, shape: int | tuple[int, ...] | None = None
    ) -> npt.NDArray[Any]:
        """A numpy array onto the registered memory (no copy, no driver call).

        ``shape`` defaults to ``(nbytes // itemsize,)``; otherwise its size times the
        item size must equal :attr:`nbytes`. The array views the object's memory in
        memory order and holds a buffer export of it; it stays valid after
        :meth:`close` (the memory is the object's), as ordinary pageable memory.
        """
        b = self._open_bytes()
        dt, shp = typed_shape(self._nbytes, dtype, shape)
        raw: npt.NDArray[Any] = b if dt == _U8 else b.view(dt)
        return raw.reshape(shp)

    def device_buffer(self) -> DeviceBuffer:
        """A :class:`DeviceBuffer` over the mapped memory (at :attr:`device_ptr`).

        It never frees, and it holds a lease on this registration: :meth:`close`
        makes the registration unusable at once, and unregisters the memory only once
        the last such view is gone. Device copies from or to it read or write the host
        memory through the bus.
        """
        dp = self.device_ptr
        return DeviceBuffer.from_handle(dp, self._nbytes, self._lease(), context=self.context)

    def close(self) -> None:
        """Unregister the memory (``cuMemHostUnregister``).

        Idempotent. The driver's unregister waits for the whole device, as
        ``cuMemFreeHost`` does, so copies in flight complete before the memory is
        unpinned. While something still uses the registration (a graph
        that captured a copy with it, a :meth:`device_buffer` view) the release waits
        for it to be gone; so does it while a stream where cudriver enqueued a value
        wait or a host function has work pending, and while a capture begun through
        cudriver is open. The object and its export are let go once the memory is
        unregistered.
        """
        if self._h is None:
            return
        self._bytes = None
        self._obj = None
        super().close()

    def __array__(
        self, dtype: npt.DTypeLike | None = None, copy: bool | None = None
    ) -> npt.NDArray[Any]:
        a = self.array()
        if dtype is not None and np.dtype(dtype) != a.dtype:
            if copy is False:
                raise ValueError("converting a RegisteredMemory to another dtype needs a copy")
            return a.astype(dtype)
        return a.copy() if copy else a

    def __buffer__(self, flags: int) -> builtins.memoryview:
        """The buffer protocol (Python 3.12+): a view of the bytes."""
        return self.memoryview

    def _repr_extra(self) -> str:
        parts = [f"nbytes={self._nbytes}"]
        if self.mapped:
            parts.append("mapped")
        if self.portable:
            parts.append("portable")
        if self.read_only:
            parts.append("read_only")
        if self._obj is not None:
            parts.append(f"of={type(self._obj).__name__}")
        return " ".join(parts)


def _register_error(exc: CudaError, ptr: int, n: int, read_only: bool, ctx: Context) -> CudaError:
    """``exc`` from ``cuMemHostRegister``, with what the refusal means for this call."""
    code = exc.code
    span = f"bytes [{ptr:#x}, {ptr + n:#x})"
    if code == _ALREADY_REGISTERED:
        # The driver pins whole pages: name a registration of ours on the same pages.
        page = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
        lo, hi = ptr - ptr % page, -(-(ptr + n) // page) * page
        with _lock:
            near = [r for r in _overlapping(lo, hi) if r.start != ptr]
        why = (
            f"it shares pages with {'; '.join(r.describe() for r in near)}"
            if near
            else _PINNED_ELSEWHERE
        )
        return error_for(code, _drv.cuMemHostRegister, f"{span}: {why}")
    if code == _INVALID_VALUE and _drv.cuMemHostGetFlags(ptr)[0] is _SUCCESS_CODE:
        # Memory of cuMemHostAlloc: the CUDA 13.0 driver says INVALID_VALUE ("a VA range
        # previously allocated with a CUDA API"), not ALREADY_REGISTERED (measured).
        return error_for(code, _drv.cuMemHostRegister, f"{span}: {_PINNED_ELSEWHERE}")
    if code == _NOT_SUPPORTED:
        dev = ctx.device
        try:
            host_ok = dev.attribute(DeviceAttribute.HOST_REGISTER_SUPPORTED)
            ro_ok = dev.attribute(DeviceAttribute.READ_ONLY_HOST_REGISTER_SUPPORTED)
        except CudaError:
            return exc
        if not host_ok:
            why = f"device {dev.ordinal} cannot register host memory (HOST_REGISTER_SUPPORTED is 0)"
        elif read_only and not ro_ok:
            why = (
                f"read_only=True needs READ_ONLY_HOST_REGISTER_SUPPORTED, which device "
                f"{dev.ordinal} lacks"
            )
        else:
            return exc
        return error_for(code, _drv.cuMemHostRegister, f"{span}: {why}")
    return exc
