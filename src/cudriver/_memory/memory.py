"""Device memory: :class:`DeviceBuffer` allocation, views, copies and fills.

:class:`DeviceBuffer` owns device memory from ``cuMemAlloc`` (or, given a stream,
stream-ordered memory from ``cuMemAllocAsync``). Copies accept numpy arrays,
bytes-like objects, pinned and device buffers and any object exposing
``__cuda_array_interface__`` (see ``_copy``); every argument is checked in Python
before the first driver call.
"""

from __future__ import annotations

import functools
import threading
import weakref
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar, cast, overload

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
from .._lifetime import _pins, capture
from .._lifetime._coerce import (
    DeviceMemory,
    PoolBase,
    StreamLike,
    handle_arg,
    int_arg,
    nbytes_arg,
    renamed_keyword,
    typed_shape,
)
from .._lifetime._handle import reclaim
from .._runtime import _hooks
from .._runtime._bindings import SUCCESS
from .._runtime._init import init
from .._work.stream import Stream
from ..errors import OutOfMemoryError, StreamCaptureError, error_for
from . import _dlpack
from . import accounting as _account
from ._copy import cai_stream_value, enqueue, fill_args, fill_new, host_source, new_typed, operand
from ._core import BufferCore, mem_free, mem_free_async
from ._default_resource import DEFAULTS as _DEFAULTS
from ._default_resource import trim_pools
from ._ordered import LEGACY as _LEGACY
from .strided import StridedView

if TYPE_CHECKING:
    from .pool import MemoryPool

__all__ = ["DeviceBuffer"]

_T = TypeVar("_T")

_U8 = np.dtype(np.uint8)
_PTR_ATTR_CONTEXT = _drv.CUpointer_attribute.CU_POINTER_ATTRIBUTE_CONTEXT

_MEMSET = {1: _drv.cuMemsetD8Async, 2: _drv.cuMemsetD16Async, 4: _drv.cuMemsetD32Async}
_OUT_OF_MEMORY = _drv.CUresult.CUDA_ERROR_OUT_OF_MEMORY
_ACCOUNTING = _account.ON  # non-empty while accounting is on


def _allocate(n: int, st: Stream | None, pool: Any) -> Any:
    """The status tuple of the allocation: plain, on ``st``, or from ``pool``.

    ``cuMemAlloc``, ``cuMemAllocAsync`` or ``cuMemAllocFromPoolAsync``.
    With the pinned states' handles: a close() since the pin clears ``_h`` only.
    """
    if st is None:
        return _drv.cuMemAlloc(n)
    if pool is None:
        return _drv.cuMemAllocAsync(n, st._state.handle)
    return _drv.cuMemAllocFromPoolAsync(n, pool._state.handle, st._state.handle)


class _Serving(threading.local):
    depth = 0  # how many do_allocate calls this thread is inside


_SERVING = _Serving()


def _resource_name(st: Stream | None, pool: Any) -> str:
    """The name accounting gives memory from ``cuMemAlloc``, the current pool or ``pool``."""
    if pool is not None:
        return _name_of(pool)
    return "cuMemAlloc" if st is None else "cuMemAllocAsync"


def _name_of(mr: Any) -> str:
    name = getattr(mr, "name", None)
    return name if isinstance(name, str) else type(mr).__qualname__


class _ResourceFree:
    """A resource's buffer's release: ``do_deallocate(address, nbytes, stream)``."""

    __slots__ = ("ctx_h", "mr", "nbytes", "stream")
    # A resource written in Python may call anything, cuMemFree included: never run
    # it beside an open capture or on a host-function thread (see _lifetime._handle),
    # and never while a capture begins (_release.WAITER_LOCK).
    waits_for_device = True
    device_wide = True

    def __init__(self, mr: Any, nbytes: int, stream: Stream | None, ctx_h: Any) -> None:
        self.mr = mr
        self.nbytes = nbytes
        self.stream = stream
        self.ctx_h = ctx_h

    def __call__(self, handle: Any) -> None:
        pushed = enter_context(self.ctx_h, int(self.ctx_h))
        try:
            self.mr.do_deallocate(int(handle), self.nbytes, stream=self.stream)
        finally:
            leave_context(pushed)
            self.mr = self.stream = None


def _as_stream(stream: StreamLike) -> Stream:
    if isinstance(stream, Stream):
        if stream._h is None:
            stream._raise_closed()
        return stream
    return Stream.from_handle(stream)


class DeviceBuffer(_dlpack.Producer, DeviceMemory, BufferCore):
    """Device memory (``cuMemAlloc``; ``cuMemFree`` on close).

    Parameters
    ----------
    nbytes
        Size in bytes; must be positive.
    stream
        When given, the memory is allocated in stream order on this stream
        (``cuMemAllocAsync``) and freed there on close (``cuMemFreeAsync``); the
        buffer then keeps the stream alive, and its operations without ``stream=``
        run on this stream. A :class:`~cudriver.Stream` or any stream-like object.
    context
        The context to allocate in; default: the stream's context, else the current
        context (else device 0's primary context). The buffer keeps it alive.
    pool
        A :class:`~cudriver.MemoryPool` to allocate from, in stream order on
        ``stream`` (``cuMemAllocFromPoolAsync``); the buffer keeps the pool alive and
        is freed into it (``cuMemFreeAsync``). Needs ``stream``.
    resource
        A :class:`~cudriver.MemoryResource` to allocate from: a pool (as ``pool=``),
        or one written in Python, whose ``do_allocate(nbytes, stream=)`` gives the
        address and whose ``do_deallocate(address, nbytes, stream=)`` frees it when the
        buffer is released. Default: the device's default resource
        (:func:`~cudriver.set_default_memory_resource`), else ``cuMemAlloc`` /
        ``cuMemAllocAsync``.

    Notes
    -----
    Operations without ``stream=`` (copies, fills) have completed when the call
    returns. A stream-ordered buffer runs them on its own stream and waits with
    ``cuStreamSynchronize`` (refused with :class:`~cudriver.StreamCaptureError` while
    that stream captures); other buffers run them on the legacy default stream, or,
    while a capture begun through cudriver is open, on a private stream ordered after
    the blocking streams, and wait with ``cuEventSynchronize`` on an event recorded
    after them: never the legacy stream beside a capture. With ``stream=``, they are
    only enqueued (the ``...Async`` driver functions) and ordering with other streams
    is the caller's business, except for operands that advertise a stream through
    ``__cuda_array_interface__``, which are waited for as the interface requires.

    A buffer made by :meth:`from_array` or :meth:`empty` (or :meth:`cast`) remembers
    a dtype and shape, used by :meth:`copy_to` and ``__cuda_array_interface__``;
    other buffers are bytes (``uint8`` of ``nbytes``).

    Equality and hash compare the device address: a view at offset 0 equals its
    parent.
    """

    __slots__ = ()  # the fields live in BufferCore (C fields, or slots in pure mode)

    _kind = "DeviceBuffer"
    #: The DLPack device type: ``kDLCUDA``.
    _DL_DEVICE_TYPE: ClassVar[int] = 2

    _base: DeviceBuffer | None
    _context: Context | None
    _dtype: np.dtype[Any] | None
    _nbytes: int
    _offset: int
    _shape: tuple[int, ...] | None
    _stream: Stream | None
    _stream_int: int | None
    _sync_h: Any
    _views: weakref.WeakSet[DeviceBuffer] | None

    def _init_slow(
        self,
        nbytes: int,
        *,
        stream: StreamLike = None,
        context: Context | None = None,
        pool: MemoryPool | None = None,
        resource: Any = None,
    ) -> None:
        """The slow path of ``DeviceBuffer.__init__`` (what the compiled body leaves)."""
        n = nbytes_arg(nbytes)
        ctx = context_arg(context)
        if resource is not None:
            if pool is not None:
                raise ValueError("pass pool= or resource=, not both")
            if isinstance(resource, PoolBase):
                pool, resource = cast("MemoryPool", resource), None
            elif not callable(getattr(resource, "do_allocate", None)):
                raise TypeError(
                    "resource must be a cudriver.MemoryResource (or have do_allocate and "
                    f"do_deallocate methods), not {type(resource).__name__}"
                )
        if pool is not None:
            if not isinstance(pool, PoolBase):
                raise TypeError(f"pool must be a cudriver.MemoryPool, not {type(pool).__name__}")
            if stream is None:
                raise ValueError("pool= allocates in stream order: pass stream= as well")
        st = None if stream is None else _as_stream(stream)
        if st is not None and ctx is not None:
            sctx = st._context
            if sctx is not None and sctx._key != ctx._key:
                raise ValueError("stream belongs to another context than the one given")
        if resource is None and pool is None and _DEFAULTS and not _SERVING.depth:
            # The device's default resource (set_default_memory_resource), if any.
            where = ctx if ctx is not None else st.context if st is not None else None
            if where is None:
                where = current_or_default()
            chosen = _DEFAULTS.get(where.device.ordinal)
            if chosen is not None and not getattr(chosen, "_plain", False):
                if isinstance(chosen, PoolBase):
                    if st is None:  # a stream-ordered resource serves it on the legacy stream
                        if capture.ACTIVE:
                            raise StreamCaptureError(
                                _drv.CUresult.CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
                                "cuMemAllocFromPoolAsync",
                                "DeviceBuffer(nbytes) without stream=: the device's default "
                                "memory resource is a pool, which would allocate on the "
                                "legacy default stream while a capture is open; pass stream=",
                            )
                        st = Stream.legacy()
                    pool = cast("MemoryPool", chosen)
                else:
                    resource = chosen
                ctx = where
        if resource is not None and not getattr(resource, "_plain", False):
            self._init_resource(n, st, ctx, resource)
            return
        # The stream and the pool stay pinned until the buffer holds them (its keep): a
        # close() on another thread in between must not destroy them under the memory.
        states = _pins.pin_all(st, pool)
        try:
            if ctx is None and st is None:
                ctx = current_or_default()  # current already: nothing to push
                pushed = False
            else:
                if ctx is None:
                    assert st is not None
                    ctx = st.context
                # A context given is open (context_arg); one of the stream's may be
                # closed, and keeps working for what was made in it (Context._live).
                pushed = enter_context(ctx._live(), ctx._key)
            try:
                r = _allocate(n, st, pool)
                if r[0] is _OUT_OF_MEMORY:  # once more after the queued frees: see reclaim
                    reclaim()
                    r = _allocate(n, st, pool)
                    # And once more after the pools gave back what they keep.
                    if r[0] is _OUT_OF_MEMORY and trim_pools(ctx.device):
                        r = _allocate(n, st, pool)
            finally:
                leave_context(pushed)
            if r[0] is not SUCCESS:
                if r[0] is _OUT_OF_MEMORY and _ACCOUNTING:
                    _account.failed(n, ctx.device.ordinal, _resource_name(st, pool))
                fn = _drv.cuMemAlloc if st is None else _drv.cuMemAllocAsync
                raise error_for(r[0], fn if pool is None else _drv.cuMemAllocFromPoolAsync)
            if pool is not None and st is not None:
                pool._note_stream(st._state)  # its release waits for the frees made there
            if st is not None and capture.ACTIVE:
                # An allocation node: closing the buffer in this capture frees it there.
                capture.allocated(st._state.handle, int(r[1]))
            self._set_fields(n, ctx, st, None, None, None, 0)
            ctx_h = ctx._live()
            if st is None:
                self._init_handle(
                    r[1],
                    release=mem_free(ctx_h, r[1], n),
                    func="cuMemFree",
                    keep=(ctx,),
                )
            else:
                used_on: set[int] = set()
                self._init_handle(
                    r[1],
                    release=mem_free_async(ctx_h, st, used_on, r[1], n),
                    func="cuMemFreeAsync",
                    keep=(st, ctx) if pool is None else (st, ctx, pool),
                    used_on=used_on,
                )
            if _ACCOUNTING:
                self._account(pool)
            if _hooks.MARKS:
                _hooks.mark(self._kind, n)
        finally:
            _pins.unpin_all(states)

    def _init_resource(self, n: int, st: Stream | None, ctx: Context | None, mr: Any) -> None:
        """Allocate from a memory resource written in Python: its ``do_allocate``.

        The buffer frees through the resource's ``do_deallocate`` (on the releasing
        thread, in the buffer's context), and keeps the resource alive until then.
        """
        if ctx is None:
            ctx = st.context if st is not None else current_or_default()
        name = _name_of(mr)
        with ctx._scope():
            # A DeviceBuffer made inside do_allocate (a slab to carve up) is not served
            # by the default resource, which may be this one: no recursion.
            _SERVING.depth += 1
            try:
                ptr = mr.do_allocate(n, stream=st)
            except OutOfMemoryError:
                if _ACCOUNTING:
                    _account.failed(n, ctx.device.ordinal, name)
                raise
            finally:
                _SERVING.depth -= 1
        if isinstance(ptr, _drv.CUdeviceptr):
            ptr = int(ptr)
        if isinstance(ptr, bool) or not isinstance(ptr, int):
            raise TypeError(
                f"{name}.do_allocate() must return the address (an int), not {type(ptr).__name__}"
            )
        if not 0 < ptr < 1 << 64:
            raise ValueError(f"{name}.do_allocate() returned {ptr:#x}, not a device address")
        self._set_fields(n, ctx, st, None, None, None, 0)
        self._init_handle(
            _drv.CUdeviceptr(ptr),
            release=_ResourceFree(mr, n, st, ctx._live()),
            func=f"{name}.do_deallocate",
            keep=(ctx,) if st is None else (st, ctx),
        )
        if _ACCOUNTING:
            _account.track(self._state, ptr, n, ctx.device.ordinal, name)
        if _hooks.MARKS:
            _hooks.mark(self._kind, n)

    def _account(self, pool: Any) -> None:
        """Count this new allocation (while accounting is on; see ``accounting``)."""
        ctx = self._context
        dev = ctx._device if ctx is not None else None
        _account.track(
            self._state,
            self._key,
            self._nbytes,
            (dev if dev is not None else self.context.device).ordinal,
            _resource_name(self._stream, pool),
        )

    def _set_fields(
        self,
        n: int,
        ctx: Context | None,
        st: Stream | None,
        dtype: np.dtype[Any] | None,
        shape: tuple[int, ...] | None,
        base: DeviceBuffer | None,
        offset: int,
    ) -> None:
        self._nbytes = n
        self._context = ctx
        self._stream = st
        sh = None if st is None else st._state.handle  # set while pinned, even if closing
        self._stream_int = None if sh is None else cai_stream_value(sh)
        self._sync_h = _LEGACY if st is None else sh
        self._dtype = dtype
        self._shape = shape
        self._base = base
        self._offset = offset
        self._views = None

    #: A lease on the allocation: for a view, on the buffer it was made from (compiled;
    #: named here, since Handle's comes first in the method order).
    _lease = BufferCore._lease

    def _note_use(self, stream: Any) -> None:
        st = self._stream
        if st is None or stream is st._h:  # not stream-ordered, or on its own stream
            return
        key = int(stream)
        if key != st._key:
            root = self._base if self._base is not None else self
            used_on = root._state.used_on
            if used_on is not None:  # a stream-ordered allocation's own set
                used_on.add(key)

    def _producer_stream(self) -> int | None:
        st = self._stream
        return self._stream_int if st is not None and st._h is not None else None

    # -- constructors -------------------------------------------------------------------
    @classmethod
    def from_array(
        cls,
        array: npt.ArrayLike,
        *,
        stream: StreamLike = None,
        context: Context | None = None,
        resource: Any = None,
    ) -> DeviceBuffer:
        """Allocate a buffer holding a copy of a host array; it remembers dtype and shape.

        Allocates (``cuMemAlloc``, or ``cuMemAllocAsync`` on ``stream``) and copies
        (``cuMemcpyHtoDAsync``). Without ``stream`` the copy has completed on return;
        with one, the buffer is stream-ordered on it and the copy is only enqueued.
        ``resource``: where the memory comes from (as for the constructor).

        Raises
        ------
        ValueError
            The array is empty or not C-contiguous.
        TypeError
            The array holds Python objects, or is a device array (use
            :meth:`copy_from` on a new buffer).
        """
        a = host_source(array, "DeviceBuffer")
        buf = cls(a.nbytes, stream=stream, context=context, resource=resource)
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
        resource: Any = None,
    ) -> DeviceBuffer:
        """Allocate an uninitialised buffer for ``shape`` elements of ``dtype``.

        Like the constructor (``cuMemAlloc`` / ``cuMemAllocAsync``, or ``resource``);
        the buffer remembers dtype and shape.
        """
        make = functools.partial(cls, stream=stream, context=context, resource=resource)
        return new_typed(make, shape, dtype)

    @classmethod
    def from_handle(
        cls,
        handle: Any,
        nbytes: int,
        owner: Any = None,
        *,
        context: Context | None = None,
    ) -> DeviceBuffer:
        """Wrap device memory owned elsewhere, without freeing it.

        Parameters
        ----------
        handle
            The device address: an int or a ``CUdeviceptr``.
        nbytes
            The size of the memory in bytes.
        owner
            Kept alive as long as the returned buffer (and its views).
        context
            The memory's context; default: looked up on first use
            (``cuPointerGetAttribute``), else the current context. Makes no driver
            call here.
        """
        h = handle_arg(handle, _drv.CUdeviceptr, "device pointer")
        n = nbytes_arg(nbytes)
        ctx = context_arg(context)
        self = cls.__new__(cls)
        self._set_fields(n, ctx, None, None, None, None, 0)
        self._init_handle(h, release=None, func="cuMemFree", owned=False, owner=owner)
        return self

    # -- properties -----------------------------------------------------------------
    @property
    def dtype(self) -> np.dtype[Any]:
        """The remembered dtype; ``uint8`` for a buffer of bytes."""
        return self._dtype if self._dtype is not None else _U8

    @property
    def shape(self) -> tuple[int, ...]:
        """The remembered shape; ``(nbytes,)`` for a buffer of bytes."""
        return self._shape if self._shape is not None else (self._nbytes,)

    @property
    def stream(self) -> Stream | None:
        """The stream of a stream-ordered buffer (its parent's, for a view), else None."""
        return self._stream

    @property
    def base(self) -> DeviceBuffer | None:
        """The buffer a view was made from (the root allocation), else None."""
        return self._base

    @property
    def offset(self) -> int:
        """A view's byte offset into :attr:`base`; 0 for other buffers."""
        return self._offset

    @property
    def context(self) -> Context:
        """The context of the memory."""
        ctx = self._context
        if ctx is None:
            ctx = self._resolve_context()
        return ctx

    @_pins.pinned
    def _resolve_context(self) -> Context:
        init()
        r = _drv.cuPointerGetAttribute(_PTR_ATTR_CONTEXT, self.handle)
        if r[0] is SUCCESS and r[1] is not None and int(r[1]) != 0:
            ctx = Context.from_handle(r[1])
        else:  # e.g. memory from a pool reports no context
            ctx = current_or_default()
        self._context = ctx
        return ctx

    # -- views --------------------------------------------------------------------------
    def view(self, offset: int = 0, nbytes: int | None = None) -> DeviceBuffer:
        """A byte range of this buffer as a new :class:`DeviceBuffer` (no driver call).

        The view keeps the allocation alive and never frees it. When the allocation
        is closed, its views are closed too (using them raises
        :class:`~cudriver.ClosedError`). The view has no dtype (bytes).

        Parameters
        ----------
        offset
            Byte offset from the start of this buffer, ``0 <= offset < nbytes``.
        nbytes
            Length in bytes; default: up to the end of this buffer.
        """
        if self._h is None:
            self._raise_closed()
        off = int_arg(offset, "offset")
        if not 0 <= off < self._nbytes:
            raise ValueError(f"offset {off} is outside a buffer of {self._nbytes} bytes")
        n = self._nbytes - off if nbytes is None else nbytes_arg(nbytes)
        if off + n > self._nbytes:
            raise ValueError(
                f"a view of {n} bytes at offset {off} exceeds the buffer's {self._nbytes} bytes"
            )
        return self._make_view(off, n, None, None)

    def __getitem__(self, key: object) -> DeviceBuffer:
        """``buf[a:b]``: a byte view (see :meth:`view`); only step 1 is supported."""
        if self._h is None:
            self._raise_closed()
        if not isinstance(key, slice):
            raise TypeError(
                f"DeviceBuffer indices must be byte slices like buf[16:32], not "
                f"{type(key).__name__}"
            )
        start, stop, step = key.indices(self._nbytes)
        if step != 1:
            raise ValueError(f"DeviceBuffer slices take step 1 only, not {step}")
        if stop <= start:
            raise ValueError(f"slice {key} of a {self._nbytes}-byte buffer is empty")
        return self._make_view(start, stop - start, None, None)

    def cast(
        self, dtype: npt.DTypeLike, shape: int | tuple[int, ...] | None = None
    ) -> DeviceBuffer:
        """A view of the whole buffer that remembers ``dtype`` and ``shape`` (no driver call).

        ``shape`` defaults to ``(nbytes // itemsize,)``; its size times the item size
        must equal :attr:`nbytes`. Used by :meth:`copy_to` and
        ``__cuda_array_interface__``.
        """
        if self._h is None:
            self._raise_closed()
        dt, shp = typed_shape(self._nbytes, dtype, shape)
        return self._make_view(0, self._nbytes, dt, shp)

    def _make_view(
        self,
        off: int,
        n: int,
        dtype: np.dtype[Any] | None,
        shape: tuple[int, ...] | None,
    ) -> DeviceBuffer:
        root = self._base if self._base is not None else self
        cls = type(self)  # views of a subclass (ManagedBuffer) are of that subclass
        v = cls.__new__(cls)
        v._set_fields(n, self._context, self._stream, dtype, shape, root, self._offset + off)
        v._stream_int = self._stream_int
        v._sync_h = self._sync_h
        v._init_handle(
            _drv.CUdeviceptr(self._key + off),
            release=None,
            func="cuMemFree",
            owned=False,
            owner=root,
        )
        views = root._views
        if views is None:
            views = root._views = weakref.WeakSet()
        views.add(v)
        return v

    # The compiled close, named here: Handle.close comes before it in the method order.
    close = BufferCore.close

    def _close_slow(self) -> None:
        """The slow path of :meth:`DeviceBuffer.close` (what the compiled body leaves)."""
        if self._h is None:
            return
        views = self._views
        if views is not None:
            self._views = None
            for v in list(views):
                v.close()
        if capture.ACTIVE and self._stream is not None and self._base is None:
            st = self._stream
            sh = st._h
            ctx = self._context
            if sh is not None and ctx is not None and capture.free_in_capture(self, sh, ctx):
                return
        super().close()

    # -- copies ---------------------------------------------------------------------------
    def copy_from(self, src: Any, *, stream: StreamLike = None) -> None:
        """Copy ``src`` into this buffer; sizes must match exactly.

        Parameters
        ----------
        src
            A C-contiguous numpy array, a bytes-like object, a
            :class:`PinnedBuffer` (host to device), or a :class:`DeviceBuffer` or
            ``__cuda_array_interface__`` object (device to device). Bytes are copied
            as they are: dtypes are not converted. A :class:`StridedView` is
            copied by :meth:`StridedView.copy_to` (``cuMemcpy2DAsync`` /
            ``cuMemcpy3DAsync``, on the legacy stream when ``stream`` is None).
        stream
            Enqueue on this stream (``cuMemcpyHtoDAsync`` / ``cuMemcpyDtoDAsync``)
            and return at once. Without it (None), the copy has completed on return
            (see the class notes for the stream it runs on and the wait). Host memory
            that is not pinned is staged by the driver, so it may be reused as soon
            as the call returns.

        Raises
        ------
        ValueError
            Sizes differ, or ``src`` is not contiguous.
        TypeError
            ``src`` is of an unsupported type.
        ClosedError
            This buffer or ``src`` is closed.
        """
        dst = self._closed_check()
        if isinstance(src, StridedView):
            src.copy_to(self, stream=stream)
            return
        on_dev, addr, n, keep, other = self._operand(src, "src")
        copy = _drv.cuMemcpyDtoDAsync if on_dev else _drv.cuMemcpyHtoDAsync
        self._enqueue(stream, other, keep, copy, dst, addr, n, what="copy_from")

    def _operand(self, x: Any, role: str) -> tuple[bool, int, int, Any, int | None]:
        """``operand(x)`` (the other side of a copy), checked to be this buffer's size."""
        on_dev, addr, n, keep, other = operand(x, writable=role == "out", role=role)
        if n != self._nbytes:
            raise ValueError(
                f"size mismatch: {role} has {n} bytes, this {self._kind} has {self._nbytes}"
            )
        return on_dev, addr, n, keep, other

    @_pins.pinned
    def _enqueue(
        self, stream: StreamLike, other: int | None, keep: Any, fn: Any, *args: Any, what: str
    ) -> None:
        """Call ``fn(*args, queue)`` in this buffer's context, ordered and kept alive.

        ``what`` is the method the user called (named when it waits). See
        :func:`cudriver._copy.enqueue`.
        """
        enqueue(self, stream, other, keep, fn, args, what)

    @overload
    def copy_to(self, out: None = None, *, stream: StreamLike = None) -> npt.NDArray[Any]: ...

    @overload
    def copy_to(self, out: _T, *, stream: StreamLike = None) -> _T: ...

    def copy_to(self, out: Any = None, *, stream: StreamLike = None) -> Any:
        """Copy this buffer into ``out`` (a new numpy array when None) and return ``out``.

        Parameters
        ----------
        out
            None: a new array of the remembered dtype and shape (``uint8`` of
            ``nbytes`` for a buffer of bytes). Else a writable C-contiguous numpy
            array, a writable bytes-like object, a :class:`PinnedBuffer` (device to
            host), or a :class:`DeviceBuffer` or ``__cuda_array_interface__`` object
            (device to device); its size must equal :attr:`nbytes`. A
            :class:`StridedView` is filled by :meth:`StridedView.copy_from`.
        stream
            Enqueue on this stream (``cuMemcpyDtoHAsync`` / ``cuMemcpyDtoDAsync``)
            and return at once: the data is in ``out`` once the stream reaches the
            copy, and ``out`` must stay alive until then. Without it (None), the
            copy has completed on return (see the class notes).

        Raises
        ------
        ValueError
            Sizes differ, ``out`` is read-only or not contiguous.
        TypeError
            ``out`` is of an unsupported type.
        ClosedError
            This buffer or ``out`` is closed.
        """
        src = self._closed_check()
        if isinstance(out, StridedView):
            out.copy_from(self, stream=stream)
            return out
        result: Any = np.empty(self.shape, dtype=self.dtype) if out is None else out
        on_dev, addr, n, keep, other = self._operand(result, "out")
        copy = _drv.cuMemcpyDtoDAsync if on_dev else _drv.cuMemcpyDtoHAsync
        self._enqueue(stream, other, keep, copy, addr, src, n, what="copy_to")
        return result

    def fill(
        self,
        value: int | np.generic,
        *,
        stream: StreamLike = None,
        element_size: int | None = None,
        width: int | None = None,
    ) -> None:
        """Set every element of the buffer to ``value``.

        Parameters
        ----------
        value
            An int: a byte (0..255) with ``cuMemsetD8Async``, or with
            ``element_size=2``/``4`` a 16/32-bit unsigned value (``cuMemsetD16Async`` /
            ``cuMemsetD32Async``). A numpy scalar of 1, 2 or 4 bytes fills with its bit
            pattern at its own size, e.g. ``np.uint16(7)`` or ``np.float32(1.0)``.
        stream
            Enqueue on this stream and return at once. Without it (None), the fill
            has completed on return (see the class notes).
        element_size
            1, 2 or 4 bytes; ``nbytes`` must be a multiple of it and the address
            aligned to it.
        width
            Deprecated: use ``element_size``.

        Raises
        ------
        ValueError
            The value does not fit the width, or the size or address does not suit it.
        TypeError
            The value is not an int or numpy scalar (floats: pass ``np.float32(x)``).
        """
        dst = self._h
        if dst is None:
            self._raise_closed()
        if width is not None:
            element_size = renamed_keyword("fill", "width", width, "element_size", element_size)
        w, v = fill_args(value, element_size)
        if self._nbytes % w:
            raise ValueError(f"{self._nbytes} bytes is not a multiple of the element size {w}")
        if self._key % w:
            raise ValueError(f"address {self._key:#x} is not aligned to the element size {w}")
        self._enqueue(stream, None, None, _MEMSET[w], dst, v, self._nbytes // w, what="fill")

    # -- interoperability --------------------------------------------------------------------
    # The compiled property (a new dict on each read, typestr cached per dtype).
    __cuda_array_interface__ = BufferCore.__cuda_array_interface__

    @classmethod
    def from_dlpack(cls, obj: Any, *, stream: StreamLike = None) -> DeviceBuffer:
        """Wrap another library's CUDA tensor (PyTorch, CuPy, ...), sharing its memory.

        Calls ``obj.__dlpack__(stream=..., max_version=(1, 0))``, so the memory is
        ready for work on ``stream`` (None: the legacy default stream; -1: no
        ordering), and borrows the tensor: the buffer and its views keep it and ``obj``
        alive, and the producer's deleter runs when they are gone. No copy; the buffer
        remembers the tensor's dtype and shape.

        Raises
        ------
        TypeError
            ``obj`` does not support DLPack.
        BufferError
            The tensor is not on a CUDA device, or is empty, strided (wrap it in a
            :class:`StridedView` instead), read-only, of a DLPack major version other
            than 1, or of a dtype numpy lacks.
        """
        return _dlpack.import_buffer(cls, obj, stream=stream)

    # -- sharing with other processes ----------------------------------------------------
    @_pins.pinned
    def export_handle(self) -> bytes:
        """The 64 bytes that open this allocation in another process (``cuMemPoolExportPointer``).

        Only an allocation (not a view) of a ``MemoryPool(ipc=True)`` travels, else ValueError;
        open it there with :meth:`import_handle`. No synchronisation, no allocation. The
        pool must have been exported first (:meth:`MemoryPool.export_handle`).
        """
        return PoolBase._of(self)._export_pointer(self)

    @classmethod
    def import_handle(cls, data: bytes, nbytes: int, *, pool: MemoryPool) -> DeviceBuffer:
        """Open an allocation another process exported (``cuMemPoolImportPointer``).

        ``data`` and ``nbytes``: its :meth:`export_handle` and size; ``pool``: its pool, from
        :meth:`MemoryPool.import_handle`, kept alive. Owned: closed (``cuMemFree``, in the
        pool's context) before the exporter frees the memory. No synchronisation.
        """
        if not isinstance(pool, PoolBase):
            raise TypeError(f"pool must be a cudriver.MemoryPool, not {type(pool).__name__}")
        return cast(DeviceBuffer, pool._import_pointer(cls, data, nbytes))

    def _travel_refusal(self) -> str | None:
        # Why this buffer cannot travel between processes (pool.py pickles those that can).
        root = self._base if self._base is not None else self
        if any(isinstance(k, PoolBase) for k in (getattr(root._state, "keep", None) or ())):
            return None
        return f"this {self._kind} is not an allocation of a MemoryPool(ipc=True)"

    @property
    def device(self) -> Device:
        """The device of the memory, its :attr:`context`'s (``cuCtxGetDevice`` once per context)."""
        return self.context.device

    def _repr_extra(self) -> str:
        parts = [f"nbytes={self._nbytes}"]
        if self._dtype is not None:
            parts.append(f"dtype={self._dtype} shape={self._shape}")
        if self._base is not None:
            parts.append(f"view+{self._offset}")
        if self._stream is not None:
            parts.append("stream-ordered")
        return " ".join(parts)


# The compiled core's constructor, where it is in use.
