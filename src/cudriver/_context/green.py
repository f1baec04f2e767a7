"""Green contexts: a device's SMs split into partitions, with a context on each.

A green context (``cuGreenCtxCreate``, CUDA 12.4+ drivers) runs the kernels launched on
its streams only on the SMs of the resources it was made from, so a latency-critical
stream can keep SMs that a long kernel elsewhere cannot fill. Start from the device's
:class:`SMResource` (``cuDeviceGetDevResource``), :meth:`~SMResource.split` it into
groups (``cuDevSmResourceSplitByCount``), make a :class:`GreenContext` of a group and
create streams on it. On drivers newer than CUDA 13.0 a :class:`WorkqueueConfig` also says
how many stream-ordered workloads the green context runs at once and whether its work
queues are its own.

A :class:`GreenContext` is a :class:`~cudriver.Context`: ``with gc:`` makes it current,
and modules, memory, events and streams made in it (``Stream(non_blocking=True,
context=gc)`` or :meth:`GreenContext.create_stream`) are ordinary cudriver objects.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from cuda.bindings import driver as _drv

from .._lifetime._coerce import bool_arg, enum_arg, int_arg, uint_arg
from .._runtime import _calls
from .._runtime._enums import WorkqueueScope
from .._runtime._init import driver_version, init
from ..errors import NotFoundError, NotSupportedError, error_for
from .device import Context, Device, _forget_borrowed, _owned, device_arg, kept_primary

if TYPE_CHECKING:
    from .._work.stream import Stream

__all__ = ["SMResource", "WorkqueueConfig", "GreenContext"]

_T = _drv.CUdevResourceType
_SM = _T.CU_DEV_RESOURCE_TYPE_SM
_WQ_CONFIG = getattr(_T, "CU_DEV_RESOURCE_TYPE_WORKQUEUE_CONFIG", None)
_IGNORE_COSCHEDULING = 1  # CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING
_DEFAULT_STREAM = 1  # CU_GREEN_CTX_DEFAULT_STREAM
_NON_BLOCKING = 1  # CU_STREAM_NON_BLOCKING

_cuDevSmResourceSplit = getattr(_drv, "cuDevSmResourceSplit", None)  # CUDA 13.1

# Partition rules the driver documents per architecture, for bindings whose
# CUdevSmResource lacks minSmPartitionSize/smCoscheduledAlignment (cuda-bindings 12):
# (min compute capability major, minimum SMs of a group, alignment).
_RULES = ((9, 8, 8), (8, 4, 2), (0, 2, 2))

#: Numbers each split, so groups of two splits are told apart (next() is atomic).
_split_ids = itertools.count(1)


def _unsupported(func: str, what: str) -> NotSupportedError:
    try:
        major, minor = driver_version()
        found = f"this driver supports CUDA {major}.{minor}"
    except Exception:  # pragma: no cover - no driver at all
        found = "no driver version could be read"
    return NotSupportedError(_drv.CUresult.CUDA_ERROR_NOT_SUPPORTED, func, f"{what}; {found}")


class SMResource:
    """Streaming multiprocessors of one device: all of them, or a group from a split.

    Get a device's with :meth:`of` (``cuDeviceGetDevResource``), a green context's with
    :attr:`GreenContext.sm_resource`; :meth:`split` it into groups. A value object (no
    handle to release): pass it, with others of the same split, to
    :class:`GreenContext`.
    """

    __slots__ = ("_device", "_res", "_role", "_split")

    _device: Device
    _res: Any
    _split: int  # 0: not from a split; else the split it came from
    _role: str  # "device", "green context", "group i of a split", "remainder of a split"

    def __init__(self) -> None:
        raise TypeError("use SMResource.of(device), GreenContext.sm_resource or split()")

    @classmethod
    def _wrap(cls, res: Any, device: Device, split: int, role: str) -> SMResource:
        self = object.__new__(cls)
        self._res, self._device, self._split, self._role = res, device, split, role
        return self

    @classmethod
    def of(cls, device: Device | int) -> SMResource:
        """All SMs of ``device`` (``cuDeviceGetDevResource``, type SM); no allocation."""
        dev = device_arg(device)
        init()
        return cls._wrap(_calls.cuDeviceGetDevResource(dev.handle, _SM), dev, 0, "device")

    @property
    def device(self) -> Device:
        """The device the SMs belong to."""
        return self._device

    @property
    def sm_count(self) -> int:
        """How many SMs the resource holds."""
        return int(self._res.sm.smCount)

    def _rules(self) -> tuple[int, int]:
        sm = self._res.sm
        least = int(getattr(sm, "minSmPartitionSize", 0) or 0)
        align = int(getattr(sm, "smCoscheduledAlignment", 0) or 0)
        if least and align:
            return least, align
        major = self._device.compute_capability.major
        for since, lo, al in _RULES:  # pragma: no branch - the last rule matches all
            if major >= since:
                return lo, al
        raise AssertionError("unreachable")  # pragma: no cover

    @property
    def min_partition_size(self) -> int:
        """The fewest SMs a group of a split can hold (``minSmPartitionSize``)."""
        return self._rules()[0]

    @property
    def alignment(self) -> int:
        """A group's SM count is a multiple of this (``smCoscheduledAlignment``)."""
        return self._rules()[1]

    @property
    def raw(self) -> Any:
        """The ``CUdevResource``, for raw calls."""
        return self._res

    def split(
        self, sm_count: int, groups: int | None = None, *, coscheduled: bool = True
    ) -> tuple[list[SMResource], SMResource]:
        """Split into ``groups`` groups of ``sm_count`` SMs, and the SMs left over.

        ``cuDevSmResourceSplitByCount``; no allocation, no synchronisation.

        Parameters
        ----------
        sm_count
            SMs in each group: at least :attr:`min_partition_size` and a multiple of
            :attr:`alignment` (the driver's rules, checked before it is called).
        groups
            How many groups; None: as many as fit. A split the driver cannot make in
            full raises instead of returning fewer groups than asked for.
        coscheduled
            False lowers the minimum and the alignment to single SMs
            (``CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING``), at the cost of
            large thread-block clusters on compute capability 9.0+.

        Returns
        -------
        tuple[list[SMResource], SMResource]
            The groups (disjoint) and the remainder (possibly of 0 SMs; it has none of
            the groups' guarantees and is best not split again).

        Raises
        ------
        ValueError
            A count of 0, above this resource's SMs, below the minimum or not a
            multiple of the alignment; more groups than fit; a group of an earlier
            split (the driver splits those only once they are a green context's).
        """
        n = int_arg(sm_count, "sm_count")
        co = bool_arg(coscheduled, "coscheduled")
        total = self.sm_count
        if self._split:
            raise ValueError(
                f"this resource is the {self._role} and cannot be split again: make a "
                "GreenContext of it and split its sm_resource"
            )
        if n < 1:
            raise ValueError(f"sm_count must be at least 1, not {n}")
        if n > total:
            raise ValueError(f"sm_count {n} is more than the {total} SMs of this resource")
        if co:
            least, align = self._rules()
            if n < least:
                raise ValueError(
                    f"sm_count {n} is below the {least} SMs a group needs on this device "
                    "(coscheduled=False lowers the minimum)"
                )
            if n % align:
                lo, hi = n - n % align, n - n % align + align
                raise ValueError(
                    f"sm_count {n} is not a multiple of this device's alignment of {align} "
                    f"SMs (say {max(lo, least)} or {hi})"
                )
        if groups is None:
            want = total // n
        else:
            want = int_arg(groups, "groups")
            if want < 1:
                raise ValueError(f"groups must be at least 1, not {want}")
            if want * n > total:
                raise ValueError(
                    f"{want} groups of {n} SMs need {want * n} SMs; this resource has {total}"
                )
        flags = 0 if co else _IGNORE_COSCHEDULING
        res, made, rest = _calls.cuDevSmResourceSplitByCount(want, self._res, flags, n)
        made = int(made)
        if (made < want and groups is not None) or made < 1:
            raise ValueError(
                f"the driver made {made} of the {want} groups of {n} SMs asked for from "
                f"{total} SMs (it keeps groups symmetrical and aligned); ask for fewer"
            )
        sid = next(_split_ids)
        dev = self._device
        parts = [
            SMResource._wrap(r, dev, sid, f"group {i} of a split") for i, r in enumerate(res[:made])
        ]
        return parts, SMResource._wrap(rest, dev, sid, "remainder of a split")

    def split_by(
        self, sm_counts: Iterable[int], *, coscheduled_sm_count: int | None = None
    ) -> tuple[list[SMResource], SMResource]:
        """Split into groups of the given sizes, and the SMs left over (CUDA 13.1+).

        ``cuDevSmResourceSplit``, the driver's general split: groups may differ in
        size (``split_by([8, 16, 100])``). A count of 0 takes what the driver finds
        for that group. No allocation, no synchronisation.

        Parameters
        ----------
        sm_counts
            SMs in each group, in order; their sum at most :attr:`sm_count`.
        coscheduled_sm_count
            SMs of each group guaranteed to run on one GPU processing cluster; each
            count must be a multiple of it. None: the driver's default.

        Raises
        ------
        NotSupportedError
            The bindings or the driver have no ``cuDevSmResourceSplit`` (before CUDA
            13.1); the message names the driver's CUDA version.
        ValueError
            A negative count, counts that add up to more than :attr:`sm_count`, a
            count that is not a multiple of ``coscheduled_sm_count``, no counts, or a
            group of an earlier split.
        """
        if isinstance(sm_counts, (str, bytes)) or not isinstance(sm_counts, Iterable):
            raise TypeError(f"sm_counts must be a list of ints, not {type(sm_counts).__name__}")
        counts = [int_arg(c, "each of sm_counts") for c in sm_counts]
        co = (
            0
            if coscheduled_sm_count is None
            else int_arg(coscheduled_sm_count, "coscheduled_sm_count")
        )
        total = self.sm_count
        if self._split:
            raise ValueError(
                f"this resource is the {self._role} and cannot be split again: make a "
                "GreenContext of it and split its sm_resource"
            )
        if not counts:
            raise ValueError("sm_counts is empty: give the size of each group")
        if any(c < 0 for c in counts):
            raise ValueError(f"SM counts cannot be negative: {counts}")
        if sum(counts) > total:
            raise ValueError(
                f"groups of {counts} SMs need {sum(counts)}; this resource has {total}"
            )
        if coscheduled_sm_count is not None:
            if co < 1:
                raise ValueError(f"coscheduled_sm_count must be at least 1, not {co}")
            odd = [c for c in counts if c % co]
            if odd:
                raise ValueError(f"SM counts {odd} are not multiples of coscheduled_sm_count {co}")
        fn = _cuDevSmResourceSplit
        params_t = getattr(_drv, "CU_DEV_SM_RESOURCE_GROUP_PARAMS", None)
        if fn is None or params_t is None:
            raise _unsupported("cuDevSmResourceSplit", "these cuda-bindings have no general split")
        params = []
        for c in counts:
            p = params_t()
            p.smCount = c
            p.coscheduledSmCount = co
            params.append(p)
        try:
            r = fn(len(counts), self._res, 0, params)
        except RuntimeError as exc:  # the bindings found no such entry point in the driver
            raise _unsupported("cuDevSmResourceSplit", f"the driver has none ({exc})") from None
        if r[0] != _drv.CUresult.CUDA_SUCCESS:
            err = error_for(r[0], fn)
            if isinstance(err, (NotSupportedError, NotFoundError)):
                raise _unsupported("cuDevSmResourceSplit", f"refused ({err})") from err
            raise err
        res, rest = r[1], r[2]
        sid = next(_split_ids)
        dev = self._device
        parts = [SMResource._wrap(g, dev, sid, f"group {i} of a split") for i, g in enumerate(res)]
        return parts, SMResource._wrap(rest, dev, sid, "remainder of a split")

    def __repr__(self) -> str:
        dev = self._device.ordinal
        return f"<cudriver.SMResource {self.sm_count} SMs of device {dev}, {self._role}>"


class WorkqueueConfig:
    """How a green context uses the device's work queues (drivers newer than CUDA 13.0).

    ``CU_DEV_RESOURCE_TYPE_WORKQUEUE_CONFIG``: the number of stream-ordered workloads
    expected to run at once (:attr:`concurrency_limit`) and whose queues they use
    (:attr:`scope`). Get the device's with :meth:`of`, change it with
    :meth:`configured`, and pass it to :class:`GreenContext` beside an SM resource.
    """

    __slots__ = ("_device", "_res")

    _device: Device
    _res: Any

    def __init__(self) -> None:
        raise TypeError("use WorkqueueConfig.of(device)")

    @classmethod
    def of(cls, device: Device | int) -> WorkqueueConfig:
        """``device``'s work-queue configuration (``cuDeviceGetDevResource``).

        Raises
        ------
        NotSupportedError
            The bindings or the driver have no work-queue resources (a CUDA 13.0 driver
            refused the resource type);
            the message names the driver's CUDA version.
        """
        dev = device_arg(device)
        if _WQ_CONFIG is None:
            raise _unsupported(
                "cuDeviceGetDevResource", "these cuda-bindings have no work-queue resources"
            )
        init()
        r = _drv.cuDeviceGetDevResource(dev.handle, _WQ_CONFIG)
        if r[0] != _drv.CUresult.CUDA_SUCCESS:
            err = error_for(r[0], _drv.cuDeviceGetDevResource)
            raise _unsupported(
                "cuDeviceGetDevResource", f"work-queue resources refused ({err})"
            ) from err
        self = object.__new__(cls)
        self._device, self._res = dev, r[1]
        return self

    @property
    def device(self) -> Device:
        """The device whose queues these are."""
        return self._device

    @property
    def concurrency_limit(self) -> int:
        """The expected number of stream-ordered workloads at once (``wqConcurrencyLimit``)."""
        return int(self._res.wqConfig.wqConcurrencyLimit)

    @property
    def scope(self) -> WorkqueueScope:
        """Whose queues the green context uses (``sharingScope``)."""
        return WorkqueueScope(int(self._res.wqConfig.sharingScope))

    @property
    def raw(self) -> Any:
        """The ``CUdevResource``, for raw calls."""
        return self._res

    def configured(
        self, *, concurrency_limit: int | None = None, scope: WorkqueueScope | int | None = None
    ) -> WorkqueueConfig:
        """A copy with ``concurrency_limit`` and/or ``scope`` changed; no driver call."""
        res = _drv.CUdevResource()
        res.type = _WQ_CONFIG
        res.wqConfig.device = self._res.wqConfig.device
        limit = self.concurrency_limit
        if concurrency_limit is not None:
            limit = uint_arg(concurrency_limit, "concurrency_limit", 32)
            if limit < 1:
                raise ValueError("concurrency_limit must be at least 1, not 0")
        res.wqConfig.wqConcurrencyLimit = limit
        sc = self.scope if scope is None else enum_arg(scope, WorkqueueScope, "scope")
        res.wqConfig.sharingScope = _drv.CUdevWorkqueueConfigScope(int(sc))
        new = object.__new__(WorkqueueConfig)
        new._device, new._res = self._device, res
        return new

    def __repr__(self) -> str:
        return (
            f"<cudriver.WorkqueueConfig device {self._device.ordinal}, "
            f"concurrency_limit={self.concurrency_limit}, scope={self.scope.name}>"
        )


def _resources_arg(
    resources: object, device: Device | int | None
) -> tuple[Device, list[SMResource | WorkqueueConfig]]:
    """Check what a green context is made of, before the driver sees it."""
    if isinstance(resources, (SMResource, WorkqueueConfig)):
        items: list[Any] = [resources]
    elif isinstance(resources, Iterable) and not isinstance(resources, (str, bytes)):
        items = list(resources)
    else:
        raise TypeError(
            "resources must be an SMResource, a WorkqueueConfig or a list of them, "
            f"not {type(resources).__name__}"
        )
    if not items:
        raise ValueError("a green context needs at least one resource")
    for r in items:
        if not isinstance(r, (SMResource, WorkqueueConfig)):
            raise TypeError(
                f"not a resource: {type(r).__name__} (an SMResource or WorkqueueConfig)"
            )
    devs = {id(r.device): r.device for r in items}
    if len(devs) > 1:
        ords = sorted(d.ordinal for d in devs.values())
        raise ValueError(f"the resources belong to devices {ords}; a green context has one")
    dev = items[0].device
    if device is not None and device_arg(device) is not dev:
        raise ValueError(
            f"the resources belong to device {dev.ordinal}, not to device "
            f"{device_arg(device).ordinal}"
        )
    sms = [r for r in items if isinstance(r, SMResource)]
    if len({id(r) for r in items}) < len(items):
        raise ValueError("a resource is given twice")
    for r in sms:
        if r.sm_count == 0:
            raise ValueError(f"the {r._role} holds no SMs")
    if len(sms) > 1 and (len({r._split for r in sms}) > 1 or not sms[0]._split):
        raise ValueError("several SM resources must all come from one split")
    if sum(isinstance(r, WorkqueueConfig) for r in items) > 1:
        raise ValueError("give at most one WorkqueueConfig")
    return dev, items


class GreenContext(Context):
    """A context that runs its kernels on a subset of its device's SMs.

    ``cuDevResourceGenerateDesc`` then ``cuGreenCtxCreate`` (with its own default
    stream); destroyed with ``cuGreenCtxDestroy`` on :meth:`~cudriver.Context.close`,
    after every object made in it was released. It is a :class:`~cudriver.Context`
    (its :attr:`~cudriver.Context.handle` is the ``CUcontext`` of
    ``cuCtxFromGreenCtx``): ``with gc:`` makes it current, and modules, memory and
    events made there are ordinary objects.

    Parameters
    ----------
    resources
        An :class:`SMResource` (a group of a split, or a whole device's), several groups
        of one split, and at most one :class:`WorkqueueConfig`: all of one device.
    device
        Checked against the resources' device when given.

    Notes
    -----
    The green context keeps its device's primary context initialised (cudriver's own
    retain of it, as the driver advises), and the driver retains it too until the
    green context is destroyed. Streams must be non-blocking
    (``cuGreenCtxStreamCreate`` requires it): ``Stream(context=gc)`` without
    ``non_blocking=True`` raises ``ValueError``.
    """

    __slots__ = ("_green", "_made_of")

    _kind = "GreenContext"

    _green: Any
    _made_of: tuple[SMResource | WorkqueueConfig, ...]

    def __init__(
        self,
        resources: SMResource | WorkqueueConfig | Iterable[SMResource | WorkqueueConfig],
        *,
        device: Device | int | None = None,
    ) -> None:
        dev, items = _resources_arg(resources, device)
        init()
        primary = kept_primary(dev)
        raws = [r.raw for r in items]
        desc = _calls.cuDevResourceGenerateDesc(raws, len(raws))
        g = _calls.cuGreenCtxCreate(desc, dev.handle, _DEFAULT_STREAM)
        try:
            h = _calls.cuCtxFromGreenCtx(g)
        except BaseException:
            _drv.cuGreenCtxDestroy(g)
            raise
        self._device = dev
        self._primary = False
        self._green = g
        self._made_of = tuple(items)
        key = int(h)
        _owned[key] = self  # objects made under ``with gc:`` keep it alive
        self._init_handle(
            h,
            release=lambda _h: _drv.cuGreenCtxDestroy(g),
            func="cuGreenCtxDestroy",
            keep=(primary,),
            on_release=_forget_borrowed(key),
        )

    @property
    def green_handle(self) -> Any:
        """The raw ``CUgreenCtx``, for raw ``cuGreenCtx*`` calls."""
        self._closed_check()
        return self._green

    @property
    def resources(self) -> tuple[SMResource | WorkqueueConfig, ...]:
        """The resources the green context was made from."""
        return self._made_of

    @property
    def sm_resource(self) -> SMResource:
        """The SMs the green context holds (``cuGreenCtxGetDevResource``, type SM).

        Split it to partition the green context's SMs further.
        """
        res = _calls.cuGreenCtxGetDevResource(self.green_handle, _SM)
        return SMResource._wrap(res, self.device, 0, "green context's SMs")

    @property
    def sm_count(self) -> int:
        """How many SMs the green context's kernels run on."""
        return self.sm_resource.sm_count

    def _create_stream(self, flags: int, priority: int | None) -> Any:
        if not flags & _NON_BLOCKING:
            raise ValueError(
                "a green context's streams are non-blocking (cuGreenCtxStreamCreate "
                "requires it): pass non_blocking=True, or use create_stream()"
            )
        return _calls.cuGreenCtxStreamCreate(self.green_handle, flags, priority or 0)

    def create_stream(self, *, priority: int | None = None) -> Stream:
        """A new non-blocking :class:`~cudriver.Stream` of this green context.

        ``cuGreenCtxStreamCreate``; the same as ``Stream(non_blocking=True,
        priority=priority, context=self)``.
        """
        from .._work.stream import Stream  # a higher layer: streams are made in contexts

        return Stream(non_blocking=True, priority=priority, context=self)

    def _repr_extra(self) -> str:
        sms = sum(r.sm_count for r in self._made_of if isinstance(r, SMResource))
        return f"device={self.device.ordinal} sms={sms}"
