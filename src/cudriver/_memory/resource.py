"""Memory resources: where a buffer's memory comes from, built in or written in Python.

:class:`MemoryResource` is the protocol: ``allocate(nbytes, stream=)`` gives a buffer,
``deallocate(buffer, stream=)`` frees it, and a resource says what its memory is
(:attr:`~MemoryResource.device`, :attr:`~MemoryResource.is_device_accessible`,
:attr:`~MemoryResource.is_host_accessible`). A resource written in Python implements
``do_allocate(nbytes, *, stream) -> address`` and ``do_deallocate(address, nbytes,
*, stream)``; ``DeviceBuffer(n, resource=mr)`` calls the first and its release the second.
:func:`set_default_memory_resource` makes one serve every ``DeviceBuffer`` of a device.

Built in: :class:`DeviceResource` (``cuMemAlloc``, or ``cuMemAllocAsync`` on a
stream), :class:`PinnedResource` (``cuMemHostAlloc``), :class:`ManagedResource`
(``cuMemAllocManaged``); the pools (:class:`~cudriver.MemoryPool`,
:class:`~cudriver.PinnedMemoryPool`, :class:`~cudriver.ManagedMemoryPool`) and
:class:`~cudriver.VirtualMemoryResource` are resources too.
"""

from __future__ import annotations

from typing import Any

from .._context.device import Context, Device, current_or_default, device_arg, kept_primary
from .._lifetime._coerce import bool_arg
from .._work.stream import Stream
from ._default_resource import DEFAULTS
from .managed import ManagedBuffer
from .memory import DeviceBuffer, _as_stream
from .pinned import PinnedBuffer

__all__ = [
    "MemoryResource",
    "DeviceResource",
    "PinnedResource",
    "ManagedResource",
    "set_default_memory_resource",
    "default_memory_resource",
]


def _device_of(device: object) -> Device:
    return current_or_default().device if device is None else device_arg(device)


def _home(dev: Device) -> Context:
    """The context a resource of ``dev`` allocates in.

    The current one when it is ``dev``'s, else cudriver's retain of ``dev``'s primary
    context.
    """
    ctx = current_or_default()
    return ctx if ctx.device is dev else kept_primary(dev)


class MemoryResource:
    """Where memory comes from: the protocol every memory resource follows.

    Subclass it to write a resource in Python: implement :meth:`do_allocate` and
    :meth:`do_deallocate` (and :attr:`device` when the memory belongs to one device).
    Then ``mr.allocate(n)``, ``DeviceBuffer(n, resource=mr)``,
    ``DeviceBuffer.from_array(a, resource=mr)`` and, once
    :func:`set_default_memory_resource` made it the device's default, every
    ``DeviceBuffer`` of that device takes its memory from it. The buffer keeps the
    resource alive until its memory is freed.

    Notes
    -----
    ``do_allocate`` runs on the allocating thread with the buffer's context current;
    ``do_deallocate`` runs where cudriver releases memory: on the thread that closes or
    drops the buffer, or on the releasing thread (never on the driver's host-function
    thread, nor beside a capture begun through cudriver). An exception from
    ``do_deallocate`` is reported as a :class:`~cudriver.CudaWarning`.
    """

    __slots__ = ()

    # -- what the memory is ---------------------------------------------------------------
    @property
    def name(self) -> str:
        """The name accounting and errors give the resource (its class's, by default)."""
        return type(self).__qualname__

    @property
    def device(self) -> Device | None:
        """The device whose memory this is; None for host memory (and by default)."""
        return None

    @property
    def is_device_accessible(self) -> bool:
        """Whether kernels can use the memory."""
        return True

    @property
    def is_host_accessible(self) -> bool:
        """Whether the host can read and write the memory directly."""
        return False

    # -- what a resource written in Python implements ----------------------------------------
    def do_allocate(self, nbytes: int, *, stream: Stream | None) -> int:
        """Allocate ``nbytes`` and return the address (an int); called by ``allocate``.

        ``stream`` is the stream the buffer is ordered on, or None. Raise
        :class:`~cudriver.OutOfMemoryError` (or any exception) when it cannot.
        """
        raise NotImplementedError(
            f"{type(self).__qualname__} does not implement do_allocate(nbytes, *, stream)"
        )

    def do_deallocate(self, address: int, nbytes: int, *, stream: Stream | None) -> None:
        """Free what :meth:`do_allocate` returned; called once, when the buffer is released."""
        raise NotImplementedError(
            f"{type(self).__qualname__} does not implement "
            "do_deallocate(address, nbytes, *, stream)"
        )

    # -- the protocol -------------------------------------------------------------------------
    def allocate(self, nbytes: int, *, stream: Any = None) -> Any:
        """A new buffer of ``nbytes`` from this resource (``DeviceBuffer(n, resource=self)``).

        ``stream``: the stream the buffer is ordered on (any stream-like object), or None.
        """
        return DeviceBuffer(nbytes, stream=stream, resource=self)

    def deallocate(self, buffer: Any, *, stream: Any = None) -> None:
        """Free ``buffer`` now: its ``close()``, ordered after the work on ``stream``.

        A stream-ordered buffer's free waits for ``stream``'s work as for its own
        stream's (the buffer records the use); closing is idempotent.
        """
        if stream is not None and buffer._h is not None:
            note = getattr(buffer, "_note_use", None)
            if note is None:  # memory with no stream-ordered free: wait instead
                _as_stream(stream).synchronize()
            else:
                note(_as_stream(stream)._h)
        buffer.close()

    def __repr__(self) -> str:
        return f"<cudriver.{type(self).__name__} {self.name}>"


class DeviceResource(MemoryResource):
    """Plain device memory: ``cuMemAlloc``, or ``cuMemAllocAsync`` given a stream.

    The device's current pool serves the stream-ordered allocations (as
    ``DeviceBuffer(n, stream=s)``). Made the default, it takes the place of another
    default (:func:`set_default_memory_resource`).
    """

    __slots__ = ("_device",)
    _plain = True  # DeviceBuffer allocates it itself: no do_allocate round trip

    def __init__(self, device: Device | int | None = None) -> None:
        self._device = _device_of(device)

    @property
    def name(self) -> str:
        return "cuMemAlloc"

    @property
    def device(self) -> Device:
        return self._device

    def allocate(self, nbytes: int, *, stream: Any = None) -> DeviceBuffer:
        """``DeviceBuffer(nbytes, stream=stream)`` in this device's context.

        ``cuMemAlloc`` (or ``cuMemAllocAsync`` on ``stream``); does not synchronise.
        """
        ctx = None if stream is not None else _home(self._device)
        return DeviceBuffer(nbytes, stream=stream, context=ctx, resource=self)


class PinnedResource(MemoryResource):
    """Page-locked host memory: ``cuMemHostAlloc``, as :class:`~cudriver.PinnedBuffer`.

    ``mapped`` and ``portable`` are ``PinnedBuffer``'s. ``stream`` is accepted and
    ignored: the memory is not stream-ordered.
    """

    __slots__ = ("_mapped", "_portable")

    def __init__(self, *, mapped: bool = True, portable: bool = True) -> None:
        self._mapped = bool_arg(mapped, "mapped")
        self._portable = bool_arg(portable, "portable")

    @property
    def name(self) -> str:
        return "cuMemHostAlloc"

    @property
    def device(self) -> None:
        return None

    @property
    def is_device_accessible(self) -> bool:
        return self._mapped

    @property
    def is_host_accessible(self) -> bool:
        return True

    def allocate(self, nbytes: int, *, stream: Any = None) -> PinnedBuffer:
        """``PinnedBuffer(nbytes, mapped=..., portable=...)`` (``cuMemHostAlloc``)."""
        return PinnedBuffer(nbytes, mapped=self._mapped, portable=self._portable)

    def deallocate(self, buffer: Any, *, stream: Any = None) -> None:
        """Free ``buffer`` (``cuMemFreeHost``) after the work on ``stream``, if given.

        Waits for ``stream`` (``cuStreamSynchronize``): host memory has no
        stream-ordered free.
        """
        if stream is not None:
            _as_stream(stream).synchronize()
        buffer.close()


class ManagedResource(MemoryResource):
    """Managed (unified) memory: ``cuMemAllocManaged``, as :class:`~cudriver.ManagedBuffer`.

    ``attach`` is ``ManagedBuffer``'s. ``stream`` is accepted and ignored: the memory
    is not stream-ordered.
    """

    __slots__ = ("_attach", "_device")

    def __init__(self, device: Device | int | None = None, *, attach: Any = None) -> None:
        self._device = _device_of(device)
        self._attach = attach

    @property
    def name(self) -> str:
        return "cuMemAllocManaged"

    @property
    def device(self) -> Device:
        return self._device

    @property
    def is_host_accessible(self) -> bool:
        return True

    def allocate(self, nbytes: int, *, stream: Any = None) -> ManagedBuffer:
        """``ManagedBuffer(nbytes)`` in this device's context (``cuMemAllocManaged``)."""
        ctx = _home(self._device)
        if self._attach is None:
            return ManagedBuffer(nbytes, context=ctx)
        return ManagedBuffer(nbytes, attach=self._attach, context=ctx)

    def deallocate(self, buffer: Any, *, stream: Any = None) -> None:
        """Free ``buffer`` (``cuMemFree``) after the work on ``stream``, if given (waits)."""
        if stream is not None:
            _as_stream(stream).synchronize()
        buffer.close()


# -- the default of each device -------------------------------------------------------------
def set_default_memory_resource(resource: Any, device: Device | int | None = None) -> None:
    """Make ``resource`` serve the ``DeviceBuffer`` allocations of ``device``.

    Those made without ``pool=`` or ``resource=``; None goes back to ``cuMemAlloc`` /
    ``cuMemAllocAsync``.

    As CuPy's ``set_allocator`` and RMM's per-device resource: ``DeviceBuffer(n)``,
    ``from_array``, ``empty`` and the copies that make a buffer allocate from it. A
    pool serves them on their stream, and a buffer made without one on the legacy
    default stream. For the whole process, every thread. No driver call.

    Raises
    ------
    TypeError
        ``resource`` is no MemoryResource (nor has ``do_allocate``), or serves host
        memory only (``PinnedResource``): a ``DeviceBuffer`` needs memory kernels use.
    """
    if resource is not None:
        if not isinstance(resource, MemoryResource) and not callable(
            getattr(resource, "do_allocate", None)
        ):
            raise TypeError(
                f"resource must be a cudriver.MemoryResource or None, not {type(resource).__name__}"
            )
        if isinstance(resource, PinnedResource | ManagedResource):
            made = "PinnedBuffer" if isinstance(resource, PinnedResource) else "ManagedBuffer"
            raise TypeError(
                f"a {type(resource).__name__} makes {made}s, not DeviceBuffers: it cannot be "
                "a device's default resource"
            )
    dev = _device_of(device)
    if resource is None:
        DEFAULTS.pop(dev.ordinal, None)
        return
    other = getattr(resource, "device", None)
    if isinstance(other, Device) and other.ordinal != dev.ordinal:
        raise ValueError(f"the resource serves device {other.ordinal}, not device {dev.ordinal}")
    DEFAULTS[dev.ordinal] = resource


def default_memory_resource(device: Device | int | None = None) -> Any:
    """The resource :func:`set_default_memory_resource` gave ``device``.

    Else a :class:`DeviceResource` of it (what ``DeviceBuffer`` uses then).
    """
    dev = _device_of(device)
    mr = DEFAULTS.get(dev.ordinal)
    return mr if mr is not None else DeviceResource(dev)
