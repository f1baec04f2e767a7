"""Pinned (page-locked) host memory: :class:`PinnedBuffer`."""

from __future__ import annotations

import functools
import weakref
from typing import Any, ClassVar, cast

import numpy as np
import numpy.typing as npt
from cuda.bindings import driver as _drv

from .._context.device import Context, Device, call_in_context, context_arg, current_or_default
from .._lifetime import _release
from .._lifetime._coerce import HostMemory, PoolBase, bool_arg, nbytes_arg, typed_shape
from .._lifetime._handle import reclaiming
from .._runtime import _calls, _hooks
from . import _dlpack
from . import accounting as _account
from ._copy import HostBytes
from .memory import DeviceBuffer

__all__ = ["PinnedBuffer"]

_U8 = np.dtype(np.uint8)
_HOSTALLOC_PORTABLE = int(_drv.CU_MEMHOSTALLOC_PORTABLE)
_HOSTALLOC_DEVICEMAP = int(_drv.CU_MEMHOSTALLOC_DEVICEMAP)
_HOSTALLOC_WRITECOMBINED = int(_drv.CU_MEMHOSTALLOC_WRITECOMBINED)


class PinnedBuffer(_dlpack.Producer, HostMemory):
    """Page-locked host memory (``cuMemHostAlloc``; ``cuMemFreeHost`` on close).

    Copies between pinned memory and the device run at full speed and, on a stream,
    truly asynchronously. Use it as ``src``/``out`` of :class:`DeviceBuffer`
    copies, or through numpy with :meth:`array`.

    Parameters
    ----------
    nbytes
        Size in bytes; must be positive.
    mapped
        Map the memory into the device address space (``CU_MEMHOSTALLOC_DEVICEMAP``),
        so kernels and device copies can read it at :attr:`device_ptr`.
    portable
        Pinned for every context, not only the allocating one
        (``CU_MEMHOSTALLOC_PORTABLE``).
    write_combined
        Write-combined memory (``CU_MEMHOSTALLOC_WRITECOMBINED``): faster to
        transfer to the device, very slow to read from the host.
    context
        The context to allocate in; default: the current context (else device 0's
        primary context). The buffer keeps it alive.

    Notes
    -----
    numpy arrays from :meth:`array` (and views from :meth:`device_buffer`) keep the
    memory alive: :meth:`close` makes the buffer itself unusable at once, and the
    memory is freed when the last such array or view is gone.
    """

    __slots__ = ("_context", "_device_ptr", "_export", "_flags", "_nbytes", "_stream_key")

    _kind = "PinnedBuffer"
    #: The DLPack device type of the memory: ``kDLCUDAHost`` (pinned host memory).
    _DL_DEVICE_TYPE: ClassVar[int] = 3

    _context: Context
    _device_ptr: int | None
    _export: weakref.ref[HostBytes] | None
    _flags: int
    _nbytes: int
    _stream_key: int | None  # a pool allocation's stream (its free's); else None

    def __init__(
        self,
        nbytes: int,
        *,
        mapped: bool = True,
        portable: bool = True,
        write_combined: bool = False,
        context: Context | None = None,
    ) -> None:
        n = nbytes_arg(nbytes)
        ctx = context_arg(context)
        mapped = bool_arg(mapped, "mapped")
        portable = bool_arg(portable, "portable")
        write_combined = bool_arg(write_combined, "write_combined")
        flags = 0
        if mapped:
            flags |= _HOSTALLOC_DEVICEMAP
        if portable:
            flags |= _HOSTALLOC_PORTABLE
        if write_combined:
            flags |= _HOSTALLOC_WRITECOMBINED
        if ctx is None:
            ctx = current_or_default()
        with ctx._scope():
            try:
                ptr = reclaiming(_calls.cuMemHostAlloc, n, flags)
            except MemoryError:
                if _account.ON:
                    _account.failed(n, None, "cuMemHostAlloc")
                raise
        self._context = ctx
        self._nbytes = n
        self._flags = flags
        self._device_ptr = None
        self._export = None
        self._stream_key = None
        self._init_handle(
            int(ptr),
            release=functools.partial(call_in_context, ctx.handle, _drv.cuMemFreeHost),
            func="cuMemFreeHost",
            keep=(ctx,),
        )
        if _account.ON:
            _account.track(self._state, self._key, n, None, "cuMemHostAlloc")
        if _hooks.MARKS:
            _hooks.mark("PinnedBuffer", n)

    @classmethod
    def _adopt(
        cls,
        ptr: int,
        nbytes: int,
        ctx: Context,
        release: Any,
        func: str,
        keep: tuple[Any, ...],
        used_on: set[int] | None = None,
        stream_key: int | None = None,
    ) -> PinnedBuffer:
        """A buffer over page-locked memory a pool gave (mapped at the same address).

        ``used_on`` and ``stream_key``: for memory freed in stream order, the set of
        the other streams its free waits for, and the free's own stream.
        """
        self = cls.__new__(cls)
        self._stream_key = stream_key
        self._context = ctx
        self._nbytes = nbytes
        self._flags = _HOSTALLOC_DEVICEMAP | _HOSTALLOC_PORTABLE
        self._device_ptr = ptr
        self._export = None
        self._init_handle(ptr, release=release, func=func, keep=keep, used_on=used_on)
        return self

    def _note_use(self, stream: Any) -> None:
        # Memory from a PinnedMemoryPool is freed on its allocation's stream: after the
        # copies enqueued on other streams too (as for a stream-ordered DeviceBuffer).
        own = self._stream_key
        if own is None or self._h is None:
            return
        key = int(stream)
        if key != own:
            used_on = self._state.used_on
            if used_on is not None:
                used_on.add(key)

    def export_handle(self) -> bytes:
        """The 64 bytes that open this allocation in another process (``cuMemPoolExportPointer``).

        Only memory of a ``PinnedMemoryPool(ipc=True)`` travels, else ValueError; the
        pool must have been exported first (``pool.export_handle()``). Open it there
        with :meth:`import_handle`. No synchronisation, no allocation.
        """
        if self._h is None:
            self._raise_closed()
        return PoolBase._of(self)._export_pointer(self)

    @classmethod
    def import_handle(cls, data: bytes, nbytes: int, *, pool: Any) -> PinnedBuffer:
        """Open pinned pool memory another process exported (``cuMemPoolImportPointer``).

        ``data`` and ``nbytes``: its :meth:`export_handle` and size; ``pool``: its
        :class:`~cudriver.PinnedMemoryPool`, opened with ``import_handle``, kept alive.
        Owned: closed (``cuMemFree``) before the exporter frees the memory.
        """
        if not isinstance(pool, PoolBase):
            raise TypeError(f"pool must be a cudriver.PinnedMemoryPool, not {type(pool).__name__}")
        return cast(PinnedBuffer, pool._import_pointer(cls, data, nbytes))

    def _travel_refusal(self) -> str | None:
        if any(isinstance(k, PoolBase) for k in (getattr(self._state, "keep", None) or ())):
            return None
        return "only memory of a PinnedMemoryPool(ipc=True) travels between processes"

    @property
    def mapped(self) -> bool:
        """Whether the memory is mapped into the device address space."""
        return bool(self._flags & _HOSTALLOC_DEVICEMAP)

    @property
    def portable(self) -> bool:
        """Whether the memory is pinned for every context."""
        return bool(self._flags & _HOSTALLOC_PORTABLE)

    @property
    def context(self) -> Context:
        """The context the memory was allocated in."""
        return self._context

    @property
    def device(self) -> Device:
        """The device of the context the memory was allocated in (:attr:`context`'s).

        No driver call once the context knows its device (``cuCtxGetDevice`` once per
        context). Pinned memory is host memory: with ``portable=True`` (the default)
        every context may use it, whatever this device.
        """
        return self._context.device

    @property
    def device_ptr(self) -> int:
        """The device address of mapped memory (``cuMemHostGetDevicePointer``, cached).

        Raises
        ------
        ValueError
            The buffer was allocated with ``mapped=False``.
        """
        if self._h is None:
            self._raise_closed()
        if not self._flags & _HOSTALLOC_DEVICEMAP:
            raise ValueError(
                "this PinnedBuffer is not mapped (mapped=False): it has no device pointer"
            )
        dp = self._device_ptr
        if dp is None:
            with self._context._scope():
                dp = self._device_ptr = int(_calls.cuMemHostGetDevicePointer(self._key, 0))
        return dp

    def _holder(self) -> HostBytes:
        ref = self._export
        holder = ref() if ref is not None else None
        if holder is None:
            holder = HostBytes(self, self._key, self._nbytes)
            self._export = weakref.ref(holder)
        return holder

    def array(
        self, dtype: npt.DTypeLike = np.uint8, shape: int | tuple[int, ...] | None = None
    ) -> npt.NDArray[Any]:
        """A numpy array onto the pinned memory (no copy, no driver call).

        The array keeps the memory alive, also after the buffer is dropped or closed.
        ``shape`` defaults to ``(nbytes // itemsize,)``; otherwise its size times the
        item size must equal :attr:`nbytes`.
        """
        if self._h is None:
            self._raise_closed()
        dt, shp = typed_shape(self._nbytes, dtype, shape)
        raw: npt.NDArray[Any] = np.asarray(self._holder())
        if dt != _U8:
            raw = raw.view(dt)
        return raw.reshape(shp)

    def device_buffer(self) -> DeviceBuffer:
        """A :class:`DeviceBuffer` over the mapped memory (at :attr:`device_ptr`).

        Like :meth:`array`, it keeps the memory alive; it never frees. Device copies
        from or to it read or write the host memory through the bus.
        """
        dp = self.device_ptr
        return DeviceBuffer.from_handle(dp, self._nbytes, self._holder(), context=self._context)

    def close(self) -> None:
        """Make the buffer unusable and free the memory (``cuMemFreeHost``); idempotent.

        While arrays from :meth:`array` or views from :meth:`device_buffer` are alive,
        the memory is freed only when the last of them is gone.
        """
        if self._h is None:
            return
        ref = self._export
        holder = ref() if ref is not None else None
        if holder is None:
            super().close()
            return
        self._h = None
        # The release runs once the last export is gone (pure mode: this object's own
        # finaliser, which then runs only once).
        release: Any = self._finalizer
        if release is None:
            release = functools.partial(_release._collected, self._state)
        fin = weakref.finalize(holder, release)
        fin.atexit = False  # no driver calls at interpreter exit

    def __array__(
        self, dtype: npt.DTypeLike | None = None, copy: bool | None = None
    ) -> npt.NDArray[Any]:
        a = self.array()
        if dtype is not None and np.dtype(dtype) != a.dtype:
            if copy is False:
                raise ValueError("converting a PinnedBuffer to another dtype needs a copy")
            return a.astype(dtype)
        return a.copy() if copy else a

    def __buffer__(self, flags: int) -> memoryview:
        """The buffer protocol (Python 3.12+): a writable view of the bytes."""
        arr: Any = self.array()
        return memoryview(arr)

    def _repr_extra(self) -> str:
        parts = [f"nbytes={self._nbytes}"]
        if self.mapped:
            parts.append("mapped")
        if self.portable:
            parts.append("portable")
        return " ".join(parts)
