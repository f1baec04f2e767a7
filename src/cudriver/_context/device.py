"""Devices and their contexts: primary (retained) and created, and the current context.

:class:`Device` and :class:`Context` share a module because each returns the other
(:meth:`Device.primary_context`, :attr:`Context.device`): one module keeps the imports
one way. :class:`ComputeCapability` is the value :attr:`Device.compute_capability`
returns.

The one "make this context current for a moment" helper lives in ``_current``
(re-exported here): :func:`enter_context` / :func:`leave_context` and
:func:`call_in_context`.
"""

from __future__ import annotations

import operator
import os
import threading
import uuid as _uuid
import weakref
from collections.abc import Callable
from typing import Any, ClassVar, NamedTuple, SupportsInt

from cuda.bindings import driver as _drv
from typing_extensions import Self

from .. import driver as _cd
from .._lifetime import _handle, _hostfn, _pins
from .._lifetime._coerce import handle_arg, int_arg, uint_arg
from .._lifetime._current import call_in_context, enter_context, leave_context
from .._lifetime._handle import Handle
from .._lifetime._pins import pinned
from .._runtime import _bindings, _hooks
from .._runtime._bindings import SUCCESS
from .._runtime._enums import ContextFlags, DeviceAttribute, Limit
from .._runtime._init import init
from ..errors import GUARD, InvalidDeviceError, NotSupportedError, checked, error_for

__all__ = [
    "ComputeCapability",
    "Device",
    "Context",
    "current_or_default",
    "context_arg",
    "enter_context",
    "leave_context",
    "call_in_context",
]

_cuCtxCreate = checked(_bindings.ctx_create, name="cuCtxCreate")

# Unchecked: the current-context test runs on hot paths and in releases.

_NULL = 0
_R = _drv.CUresult


def _attr_value(attr: Any) -> Any:
    try:
        return _drv.CUdevice_attribute(int(attr))
    except ValueError:
        raise ValueError(
            f"unknown device attribute {int(attr)}: not a CUdevice_attribute of the "
            "installed cuda-bindings (a newer cuda-bindings may know it)"
        ) from None


class ComputeCapability(NamedTuple):
    """A device's compute capability, e.g. ``ComputeCapability(9, 0)``."""

    major: int
    minor: int

    @property
    def arch(self) -> str:
        """The architecture name NVRTC and ptxas take, e.g. ``"sm_90"``."""
        return f"sm_{self.major}{self.minor}"

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"


ComputeCapability.__module__ = "cudriver"


class Device:
    """A CUDA device; one object per ordinal (``Device(0) is Device(0)``).

    Parameters
    ----------
    ordinal
        The device's index, ``0 <= ordinal < Device.count()``. None (the default):
        the device of the calling thread's current context, else device 0, as in
        cuda.core and CuPy (``cuCtxGetCurrent``, ``cuCtxGetDevice``; nothing is made
        current).

    Raises
    ------
    InvalidDeviceError
        ``ordinal`` is out of range (a ``ValueError`` too).
    DriverNotFoundError
        No NVIDIA driver is installed.
    """

    __slots__ = ("__weakref__", "_attrs", "_h", "_name", "_ordinal")

    _cache: ClassVar[dict[int, Device]] = {}
    _lock: ClassVar[threading.Lock] = threading.Lock()

    _ordinal: int
    _h: Any
    _name: str | None
    _attrs: dict[int, int]

    def __new__(cls, ordinal: SupportsInt | None = None) -> Device:
        if isinstance(ordinal, Device):
            return ordinal
        if ordinal is None:
            ordinal = _current_ordinal()
        elif isinstance(ordinal, _drv.CUdevice):
            ordinal = int(ordinal)
        elif isinstance(ordinal, bool) or not hasattr(type(ordinal), "__index__"):
            raise TypeError(f"device ordinal must be an int, not {type(ordinal).__name__}")
        else:
            ordinal = operator.index(ordinal)  # type: ignore[arg-type]
        assert isinstance(ordinal, int)
        dev = cls._cache.get(ordinal)
        if dev is not None:
            return dev
        if ordinal < 0:
            raise InvalidDeviceError(
                _drv.CUresult.CUDA_ERROR_INVALID_DEVICE,
                "cuDeviceGet",
                f"device ordinal {ordinal} is out of range: ordinals are >= 0",
            )
        init()
        n = cls.count()
        if not 0 <= ordinal < n:
            raise InvalidDeviceError(
                _drv.CUresult.CUDA_ERROR_INVALID_DEVICE,
                "cuDeviceGet",
                f"device ordinal {ordinal} is out of range: {n} device(s) present",
            )
        with cls._lock:
            dev = cls._cache.get(ordinal)
            if dev is None:
                dev = object.__new__(cls)
                dev._ordinal = ordinal
                dev._h = _cd.cuDeviceGet(ordinal)
                dev._name = None
                dev._attrs = {}
                cls._cache[ordinal] = dev
        return dev

    @staticmethod
    def count() -> int:
        """Number of CUDA devices (``cuDeviceGetCount``; initialises the driver)."""
        init()
        return int(_cd.cuDeviceGetCount())

    @classmethod
    def all(cls) -> list[Device]:
        """Every device, in ordinal order."""
        return [cls(i) for i in range(cls.count())]

    @property
    def ordinal(self) -> int:
        """The device's index."""
        return self._ordinal

    @property
    def handle(self) -> Any:
        """The raw ``CUdevice``."""
        return self._h

    def __int__(self) -> int:
        return self._ordinal

    @property
    def name(self) -> str:
        """The device's name (``cuDeviceGetName``; cached)."""
        if self._name is None:
            raw = _cd.cuDeviceGetName(256, self._h)
            self._name = bytes(raw).split(b"\0", 1)[0].decode(errors="replace")
        return self._name

    @property
    def uuid(self) -> _uuid.UUID:
        """The device's UUID (``cuDeviceGetUuid``)."""
        raw = _cd.cuDeviceGetUuid(self._h).bytes
        if isinstance(raw, str):  # older bindings return a str of the bytes
            raw = raw.encode("latin-1")
        return _uuid.UUID(bytes=bytes(raw)[:16])

    @classmethod
    def from_uuid(cls, uuid: _uuid.UUID | bytes | str) -> Device:
        """The visible device whose UUID is ``uuid`` (``cuDeviceGetUuid`` of each, cached).

        Ordinals depend on ``CUDA_VISIBLE_DEVICES``; a UUID names the same GPU in every
        process of the machine. ``uuid`` is a :class:`uuid.UUID`, its 16 bytes, or its
        text (``"GPU-"`` prefix allowed, as ``nvidia-smi -L`` prints it).

        Raises
        ------
        ValueError
            No visible device has that UUID (the message names it and
            ``CUDA_VISIBLE_DEVICES``).
        """
        key = _uuid_bytes(uuid)
        ordinal = _by_uuid.get(key)
        if ordinal is None:
            for dev in cls.all():
                _by_uuid[dev.uuid.bytes] = dev.ordinal
            ordinal = _by_uuid.get(key)
            if ordinal is None:
                visible = os.environ.get("CUDA_VISIBLE_DEVICES")
                where = "unset" if visible is None else repr(visible)
                raise ValueError(
                    f"device GPU-{_uuid.UUID(bytes=key)} is not visible in this process "
                    f"(CUDA_VISIBLE_DEVICES is {where}; compare it with the process the "
                    "device came from)"
                )
        return cls(ordinal)

    @property
    def pci_bus_id(self) -> str:
        """The PCI bus id, ``"0000:18:00.0"`` (``cuDeviceGetPCIBusId``)."""
        return bytes(_cd.cuDeviceGetPCIBusId(64, self._h)).split(b"\0", 1)[0].decode()

    @property
    def compute_capability(self) -> ComputeCapability:
        """``(major, minor)``, e.g. ``ComputeCapability(major=9, minor=0)``."""
        return ComputeCapability(
            self.attribute(DeviceAttribute.COMPUTE_CAPABILITY_MAJOR),
            self.attribute(DeviceAttribute.COMPUTE_CAPABILITY_MINOR),
        )

    @property
    def arch(self) -> str:
        """``"sm_XY"`` for this device's compute capability."""
        return self.compute_capability.arch

    @property
    def total_memory(self) -> int:
        """Total device memory in bytes (``cuDeviceTotalMem``)."""
        return int(_cd.cuDeviceTotalMem(self._h))

    @property
    def multiprocessor_count(self) -> int:
        """Number of streaming multiprocessors."""
        return self.attribute(DeviceAttribute.MULTIPROCESSOR_COUNT)

    @property
    def host_numa_node(self) -> int | None:
        """The id of the host NUMA node nearest the device, or None where there is none.

        ``DeviceAttribute.HOST_NUMA_ID`` (``cuDeviceGetAttribute``, cached; CUDA 12.2+
        drivers), whose -1 (the system has no NUMA, as far as the driver can tell) reads
        as None. For managed memory: ``cudriver.HostNuma(dev.host_numa_node)``.
        """
        v = self.attribute(DeviceAttribute.HOST_NUMA_ID)
        return v if v >= 0 else None

    def attribute(self, attr: DeviceAttribute | int) -> int:
        """Read one device attribute (``cuDeviceGetAttribute``; cached per device).

        Parameters
        ----------
        attr
            A :class:`DeviceAttribute`, a ``CUdevice_attribute`` member or its int value.
        """
        key = attr if type(attr) is int else int_arg(attr, "attr")
        v = self._attrs.get(key)
        if v is None:
            v = self._attrs[key] = int(_cd.cuDeviceGetAttribute(_attr_value(key), self._h))
        return v

    def set_current(self) -> Context:
        """Make this device's primary context current on the calling thread; return it.

        The context is cudriver's own retain of it (``cuDevicePrimaryCtxRetain`` once,
        kept until exit), made current with ``cuCtxSetCurrent``, as cuda.core's
        ``Device.set_current()`` and the runtime's ``cudaSetDevice`` do.
        """
        ctx = kept_primary(self)
        ctx.set_current()
        return ctx

    def synchronize(self) -> None:
        """Wait for all work in this device's primary context (``cuCtxSynchronize``).

        Blocks the thread; then, as :meth:`Context.synchronize`, raises
        :class:`~cudriver.HostCallbackError` for host functions that raised there.
        Contexts made with :meth:`Context.create` are not waited for.
        """
        kept_primary(self).synchronize()

    def primary_context(self) -> Context:
        """Retain this device's primary context (``cuDevicePrimaryCtxRetain``).

        The returned :class:`Context` releases its retain on ``close()`` or collection
        (``cuDevicePrimaryCtxRelease``). It is not made current.
        """
        return Context._new(_cd.cuDevicePrimaryCtxRetain(self._h), self, primary=True, owned=True)

    def can_access_peer(self, other: Device | int) -> bool:
        """Whether this device can map ``other``'s memory (``cuDeviceCanAccessPeer``)."""
        peer = Device(other) if not isinstance(other, Device) else other
        if peer is self:
            return False
        return bool(_cd.cuDeviceCanAccessPeer(self._h, peer._h))

    def enable_peer_access(self, other: Device | int) -> None:
        """Let kernels and copies on this device use ``other``'s memory.

        Calls ``cuCtxEnablePeerAccess`` in this device's primary context for
        ``other``'s (the retains cudriver keeps); enabling twice is not an error. It
        is one way: call it on both devices for access both ways.

        Raises
        ------
        NotSupportedError
            The devices cannot access each other (see :meth:`can_access_peer`).
        """
        peer = _device_arg(other)
        if peer is self or not self.can_access_peer(peer):
            raise NotSupportedError(
                _R.CUDA_ERROR_PEER_ACCESS_UNSUPPORTED,
                "cuCtxEnablePeerAccess",
                f"device {self._ordinal} cannot access device {peer._ordinal}'s memory "
                "(cuDeviceCanAccessPeer is 0, or it is the same device)",
            )
        with kept_primary(self)._scope():
            r = _drv.cuCtxEnablePeerAccess(kept_primary(peer).handle, 0)
        if r[0] is not SUCCESS and r[0] != _R.CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED:
            raise error_for(r[0], _drv.cuCtxEnablePeerAccess)

    def disable_peer_access(self, other: Device | int) -> None:
        """Undo :meth:`enable_peer_access` (``cuCtxDisablePeerAccess``); no-op if not enabled."""
        peer = _device_arg(other)
        with kept_primary(self)._scope():
            r = _drv.cuCtxDisablePeerAccess(kept_primary(peer).handle)
        if r[0] is not SUCCESS and r[0] != _R.CUDA_ERROR_PEER_ACCESS_NOT_ENABLED:
            raise error_for(r[0], _drv.cuCtxDisablePeerAccess)

    @property
    def mem_info(self) -> tuple[int, int]:
        """``(free, total)`` memory in bytes (``cuMemGetInfo`` in the primary context)."""
        return kept_primary(self).mem_info

    def __repr__(self) -> str:
        name = f" {self._name!r}" if self._name is not None else ""
        return f"<cudriver.Device {self._ordinal}{name}>"

    def __reduce__(self) -> tuple[Any, ...]:
        # By UUID: another process may number the GPUs apart (CUDA_VISIBLE_DEVICES).
        return (_device_of_uuid, (self.uuid.bytes,))


class Context(Handle):
    """A CUDA context.

    Obtain one with :meth:`Device.primary_context` (retained, released on close),
    :meth:`Context.create` (destroyed on close), :meth:`Context.current` or
    :meth:`Context.from_handle` (borrowed).

    ``with ctx:`` pushes the context on the calling thread's stack
    (``cuCtxPushCurrent``) and pops it on exit (``cuCtxPopCurrent``), restoring the
    context that was current before, also when the block raises. Unlike other
    handle classes, leaving the block does not close the context; call
    :meth:`close`.
    """

    __slots__ = ("_device", "_primary")

    _kind = "Context"

    _device: Device | None
    _primary: bool

    def __init__(self) -> None:
        raise TypeError(
            "use Device.primary_context(), Context.create(), Context.current() "
            "or Context.from_handle()"
        )

    @classmethod
    def _new(
        cls, h: Any, device: Device | None, *, primary: bool, owned: bool, owner: Any = None
    ) -> Context:
        self = cls.__new__(cls)
        self._device = device
        self._primary = primary
        if owned and not primary:
            _owned[int(h)] = self
        if primary and owned:
            assert device is not None
            cudev = device.handle
            self._init_handle(
                h,
                release=lambda _h: _drv.cuDevicePrimaryCtxRelease(cudev),
                func="cuDevicePrimaryCtxRelease",
                owner=owner,
                on_release=_forget_borrowed(int(h)),
            )
        else:
            self._init_handle(
                h,
                release=_drv.cuCtxDestroy,
                func="cuCtxDestroy",
                owned=owned,
                owner=owner,
                on_release=_forget_borrowed(int(h)) if owned else None,
            )
        return self

    @classmethod
    def create(
        cls, device: Device | int = 0, flags: ContextFlags | int = ContextFlags.SCHED_AUTO
    ) -> Context:
        """Create a new context on ``device`` (``cuCtxCreate``); destroyed on close.

        The driver makes a new context current; this method pops it again so that
        the calling thread's current context is unchanged. Use ``with ctx:`` or
        :meth:`set_current` to make it current. Allocates device resources.
        """
        dev = Device(device) if not isinstance(device, Device) else device
        f = uint_arg(flags, "flags", 32)
        ctx = cls._new(_cuCtxCreate(f, dev.handle), dev, primary=False, owned=True)
        try:
            _cd.cuCtxPopCurrent()
        except BaseException:  # pragma: no cover - the driver just pushed it
            ctx.close()
            raise
        return ctx

    @classmethod
    def from_handle(cls, handle: Any, owner: Any = None) -> Context:
        """Wrap a foreign ``CUcontext`` (or int) without owning it.

        ``owner`` is kept alive as long as the returned object.
        """
        h = handle_arg(handle, _drv.CUcontext, "context handle")
        return cls._new(h, None, primary=False, owned=False, owner=owner)

    @classmethod
    def current(cls) -> Context | None:
        """The calling thread's current context (``cuCtxGetCurrent``), or None.

        The result is borrowed: closing it does not release anything.
        """
        init()
        h = _cd.cuCtxGetCurrent()
        if int(h) == _NULL:
            return None
        return cls._new(h, None, primary=False, owned=False)

    # -- current-context stack ----------------------------------------------------
    @pinned
    def set_current(self) -> None:
        """Make this context current on the calling thread (``cuCtxSetCurrent``).

        The calling thread keeps a reference to this object until another context is
        made current through :meth:`set_current`, so
        ``dev.primary_context().set_current()`` does not release the context at once.
        """
        _cd.cuCtxSetCurrent(self.handle)
        _thread_current.ctx = self

    @pinned
    def push(self) -> None:
        """Push this context on the calling thread's stack (``cuCtxPushCurrent``)."""
        _cd.cuCtxPushCurrent(self.handle)

    @staticmethod
    def pop() -> None:
        """Pop the calling thread's current context (``cuCtxPopCurrent``)."""
        _cd.cuCtxPopCurrent()

    def __enter__(self) -> Self:
        self.push()
        return self

    def __exit__(self, *exc: object) -> None:
        self.pop()

    def _scope(self) -> _Scope:
        """Make this context current for a ``with`` block, pushing only when it is not.

        For the objects made in the context: it works after :meth:`close` while the
        driver context still exists (:meth:`_live`). The context's own methods use
        :meth:`_own_scope`, which refuses a closed context.
        """
        return _Scope(self, False)

    def _own_scope(self) -> _Scope:
        """:meth:`_scope` for the context's own methods: ``ClosedError`` once closed."""
        return _Scope(self, True)

    def _live(self) -> Any:
        """The handle while the driver context exists, also after :meth:`close`.

        ``close()`` destroys the context only after the last object made in it is
        released (each holds it); until then those objects keep working in it, so
        the results of work in flight at ``close()`` can still be read.
        ``ClosedError`` once the context is destroyed.
        """
        h = self._h
        if h is None:
            h = self._state.handle  # None once released
            if h is None:
                self._raise_closed()
        return h

    # -- properties -----------------------------------------------------------------
    @property
    def device(self) -> Device:
        """The context's device (``cuCtxGetDevice`` on first use)."""
        if self._device is None:
            with self._scope():
                dev = _cd.cuCtxGetDevice()
            self._device = Device(int(dev))
        return self._device

    @property
    def is_primary(self) -> bool:
        """Whether this object was obtained from :meth:`Device.primary_context`."""
        return self._primary

    @property
    @pinned
    def api_version(self) -> int:
        """The context's API version (``cuCtxGetApiVersion``)."""
        return int(_cd.cuCtxGetApiVersion(self.handle))

    @property
    def stream_priority_range(self) -> tuple[int, int]:
        """``(least, greatest)`` stream priorities (``cuCtxGetStreamPriorityRange``).

        Numerically lower values are higher priorities: greatest is e.g. ``-5``.
        """
        with self._own_scope():
            least, greatest = _cd.cuCtxGetStreamPriorityRange()
        return int(least), int(greatest)

    def _create_stream(self, flags: int, priority: int | None) -> Any:
        """A new stream of this context (``cuStreamCreate``, or ``...WithPriority``)."""
        with self._own_scope():
            if priority is None:
                return _cd.cuStreamCreate(flags)
            return _cd.cuStreamCreateWithPriority(flags, priority)

    def synchronize(self) -> None:
        """Wait for all work in this context (``cuCtxSynchronize``); blocks the thread.

        The releases queued before the call (objects dropped, closed while in use) run
        first, and those queued meanwhile after it: what was dropped before the call is
        freed when it returns (stream-ordered memory back in its pool, and trimmed to
        the pool's release threshold by the wait). Then raises
        :class:`~cudriver.HostCallbackError` if a host function that ran on a stream of
        this context raised and no ``synchronize()`` collected it yet.
        """
        token = None
        if _hooks.ON:
            self._closed_check()
            token = _hooks.host_wait("Context.synchronize (cuCtxSynchronize)")
        try:
            if _handle.pending_releases() or _handle.releasing():
                _handle.settle()
            st = _pins.pin(self)  # a close() on another thread waits for the call
            try:
                with self._own_scope():
                    _cd.cuCtxSynchronize()
            finally:
                _pins.unpin(st)
            if _handle.pending_releases() or _handle.releasing():
                _handle.settle()
        finally:
            if token is not None:
                _hooks.end(token)
        if _hostfn.PENDING:
            # re-raise errors of host functions that ran on this context's streams
            _hostfn.after_context_sync(self._key)

    @property
    def mem_info(self) -> tuple[int, int]:
        """``(free, total)`` memory of the context's device in bytes (``cuMemGetInfo``)."""
        with self._own_scope():
            free, total = _cd.cuMemGetInfo()
        return int(free), int(total)

    # -- limits -----------------------------------------------------------------------
    def get_limit(self, limit: Limit | int) -> int:
        """Read a context limit (``cuCtxGetLimit``)."""
        lim = _limit(limit)
        with self._own_scope():
            return int(_cd.cuCtxGetLimit(lim))

    def set_limit(self, limit: Limit | int, value: int) -> None:
        """Set a context limit (``cuCtxSetLimit``); may allocate device memory."""
        v = uint_arg(value, "limit value")
        lim = _limit(limit)
        with self._own_scope():
            _cd.cuCtxSetLimit(lim, v)

    @property
    def stack_size(self) -> int:
        """Per-thread stack size in bytes (``CU_LIMIT_STACK_SIZE``)."""
        return self.get_limit(Limit.STACK_SIZE)

    @stack_size.setter
    def stack_size(self, value: int) -> None:
        self.set_limit(Limit.STACK_SIZE, value)

    @property
    def printf_fifo_size(self) -> int:
        """Size of the device ``printf`` FIFO in bytes (``CU_LIMIT_PRINTF_FIFO_SIZE``)."""
        return self.get_limit(Limit.PRINTF_FIFO_SIZE)

    @printf_fifo_size.setter
    def printf_fifo_size(self, value: int) -> None:
        self.set_limit(Limit.PRINTF_FIFO_SIZE, value)

    @property
    def malloc_heap_size(self) -> int:
        """Size of the device ``malloc`` heap in bytes (``CU_LIMIT_MALLOC_HEAP_SIZE``)."""
        return self.get_limit(Limit.MALLOC_HEAP_SIZE)

    @malloc_heap_size.setter
    def malloc_heap_size(self, value: int) -> None:
        self.set_limit(Limit.MALLOC_HEAP_SIZE, value)

    def _repr_extra(self) -> str:
        parts = []
        if self._device is not None:
            parts.append(f"device={self._device.ordinal}")
        if self._primary:
            parts.append("primary")
        return " ".join(parts)


def _forget_borrowed(key: int) -> Callable[[], None]:
    def forget() -> None:
        _borrowed.pop(key, None)

    return forget


class _Scope:
    """``with ctx._scope():`` makes ``ctx`` current for the block (push/pop if needed)."""

    __slots__ = ("ctx", "own", "pushed")

    def __init__(self, ctx: Context, own: bool) -> None:
        self.ctx = ctx
        self.own = own
        self.pushed = False

    def __enter__(self) -> None:
        ctx = self.ctx
        h = ctx._closed_check() if self.own else ctx._live()
        self.pushed = enter_context(h, ctx._key)

    def __exit__(self, *exc: object) -> None:
        pushed, self.pushed = self.pushed, False
        leave_context(pushed)


#: Device ordinals by UUID bytes (``Device.from_uuid``'s cache).
_by_uuid: dict[bytes, int] = {}


def _uuid_bytes(value: object) -> bytes:
    """The 16 bytes of a UUID given as a ``uuid.UUID``, bytes or text."""
    if isinstance(value, _uuid.UUID):
        return value.bytes
    if isinstance(value, (bytes, bytearray)) and len(value) == 16:
        return bytes(value)
    if isinstance(value, str):
        text = value[4:] if value.upper().startswith("GPU-") else value
        try:
            return _uuid.UUID(text).bytes
        except ValueError:
            raise ValueError(f"not a device UUID: {value!r}") from None
    raise TypeError(f"uuid must be a uuid.UUID, 16 bytes or a str, not {type(value).__name__}")


def _device_of_uuid(raw: bytes) -> Device:
    """Unpickle a :class:`Device`: the visible device with that UUID."""
    return Device.from_uuid(raw)


def _limit(limit: Any) -> Any:
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise TypeError(f"limit must be a cudriver.Limit, not {type(limit).__name__}")
    try:
        return _drv.CUlimit(int(limit))
    except ValueError:
        raise ValueError(f"unknown context limit {int(limit)}") from None


def _current_ordinal() -> int:
    """The ordinal of the current context's device; 0 when none is current."""
    init()
    if GUARD.armed:
        GUARD.check()
    r = _drv.cuCtxGetCurrent()
    if r[0] is not SUCCESS:
        raise error_for(r[0], _drv.cuCtxGetCurrent)
    return 0 if int(r[1]) == _NULL else int(_cd.cuCtxGetDevice())


def _device_arg(value: object) -> Device:
    if isinstance(value, Device):
        return value
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"expected a cudriver.Device or an ordinal, not {type(value).__name__}")
    return Device(value)


def mem_get_info(context: Context | None = None) -> tuple[int, int]:
    """``(free, total)`` device memory in bytes (``cuMemGetInfo``).

    For ``context``'s device; by default the current context's (device 0's primary
    context when none is current, made current as for any call).
    """
    ctx = context_arg(context) or current_or_default()
    return ctx.mem_info


def device_arg(device: object) -> Device:
    """``device`` when it is a :class:`Device`, else the device of that ordinal.

    ``TypeError`` for anything else (a bool included), naming what it got.
    """
    if isinstance(device, Device):
        return device
    if isinstance(device, bool) or not isinstance(device, int):
        raise TypeError(
            f"device must be a cudriver.Device or an ordinal, not {type(device).__name__}"
        )
    return Device(device)


def context_arg(context: object) -> Context | None:
    """``context`` when it is an open :class:`Context` or None.

    ``TypeError`` for another type; ``ClosedError`` for a closed context (nothing new
    is made in a context its owner closed).
    """
    if context is None:
        return None
    if isinstance(context, Context):
        if context._h is None:
            context._raise_closed()
        return context
    raise TypeError(f"context must be a cudriver.Context or None, not {type(context).__name__}")


_thread_current = threading.local()
#: Owned Context objects of created contexts, by handle value (weak): the current
#: context's owning object, so that objects made under ``with ctx:`` keep it alive.
_owned: weakref.WeakValueDictionary[int, Context] = weakref.WeakValueDictionary()
#: Primary contexts that cudriver found current (or made current for a thread that
#: had none), each retained once by cudriver, like the runtime API does, until exit:
#: what objects made in them hold, so no user ``close()`` can reset them under them.
_adopted: dict[int, Context] = {}
#: Borrowed wrappers of foreign contexts seen current (neither created through
#: cudriver nor primary), by handle value: cudriver cannot keep those alive.
_borrowed: dict[int, Context] = {}
_adopt_lock = threading.Lock()


def _keep_adopted(key: int, ctx: Context) -> Context:
    """Record ``ctx`` as cudriver's retain of primary context ``key``; one per context.

    The Context is made outside the lock (making a handle may run waiting releases,
    which never run under a cudriver lock); a thread that lost the race gives its
    retain back.
    """
    with _adopt_lock:
        kept = _adopted.setdefault(key, ctx)
    if kept is not ctx:
        ctx.close()
    return kept


def _adopt(h: Any, key: int) -> Context:
    """The Context that keeps the current context ``h`` alive, or a borrowed wrapper."""
    ctx = _adopted.get(key)
    if ctx is not None:
        return ctx
    dev = Device(int(_cd.cuCtxGetDevice()))
    primary = _cd.cuDevicePrimaryCtxRetain(dev._h)
    if int(primary) == key:
        return _keep_adopted(key, Context._new(primary, dev, primary=True, owned=True))
    _drv.cuDevicePrimaryCtxRelease(dev._h)  # not the primary context: give it back
    ctx = _borrowed.get(key)
    if ctx is None or ctx._h is None:
        ctx = _borrowed[key] = Context._new(h, None, primary=False, owned=False)
    return ctx


def kept_primary(dev: Device) -> Context:
    """Cudriver's own retain of ``dev``'s primary context (one per context, until exit)."""
    h = _cd.cuDevicePrimaryCtxRetain(dev._h)
    key = int(h)
    ctx = _adopted.get(key)
    if ctx is not None:
        _drv.cuDevicePrimaryCtxRelease(dev._h)  # one retain is kept already
        return ctx
    return _keep_adopted(key, Context._new(h, dev, primary=True, owned=True))


def _make_default_current() -> Context:
    dev = Device(0)
    h = _cd.cuDevicePrimaryCtxRetain(dev._h)
    key = int(h)
    ctx = _adopted.get(key)
    if ctx is None:
        ctx = _keep_adopted(key, Context._new(h, dev, primary=True, owned=True))
    else:
        _drv.cuDevicePrimaryCtxRelease(dev._h)  # one retain is kept already
    _cd.cuCtxSetCurrent(h)
    return ctx


def current_or_default() -> Context:
    """The current context's owning object; with none current, device 0's primary one.

    For a primary context, that is cudriver's own retain of it (taken once, kept until
    exit); for a context made by :meth:`Context.create`, its Context object; for a
    foreign context, a borrowed wrapper. Like the CUDA runtime API, a thread with no
    current context gets device 0's primary context, made current.
    """
    if GUARD.armed:
        GUARD.check()
    init()
    r = _drv.cuCtxGetCurrent()
    if r[0] is not SUCCESS:
        raise error_for(r[0], _drv.cuCtxGetCurrent)
    key = int(r[1])
    if key == _NULL:
        return _make_default_current()
    ctx = _adopted.get(key)
    if ctx is not None:
        return ctx
    ctx = _owned.get(key)
    if ctx is not None and ctx._h is not None:
        return ctx
    return _adopt(r[1], key)
