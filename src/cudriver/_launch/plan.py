"""Launch plans: a kernel launch with its arguments packed once.

:meth:`cudriver.Kernel.prepare` packs the arguments once and returns a
:class:`LaunchPlan`, whose :meth:`~LaunchPlan.launch` is the fast path (compiled in
``_core``'s ``PlanCore``, which leaves the rest to ``LaunchPlan._launch_slow``).

This module comes before ``kernel`` in the layer table: a plan is given its kernel
(:meth:`LaunchPlan._new`) and names the class only for type checking, so ``kernel``
imports this module and not the other way round.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, NoReturn

from cuda.bindings import driver as _drv

from .._lifetime import _pins, capture
from .._lifetime._coerce import (
    DeviceMemory,
    MapsMemory,
    StreamLike,
    refuse_offloaded,
    stream_handle,
    virtual_spaces,
)
from .._lifetime._handle import Handle, Lease
from .._runtime._bindings import SUCCESS
from ..errors import GUARD, pickle_refusal
from ._core import PlanCore
from ._packing import PackedArgs
from .launch import LaunchConfig, launch_ex

if TYPE_CHECKING:
    from .kernel import Kernel

__all__ = ["LaunchPlan"]


class LaunchPlan(PlanCore):
    """A kernel launch with its arguments packed once (from :meth:`Kernel.prepare`).

    :meth:`launch` is the fast path: one closed check, the stream's handle, and
    ``cuLaunchKernel`` with the pre-built ``void*[]`` array. :meth:`set_arg` re-packs
    one argument in place, for later launches (launches already enqueued or
    captured keep the values they had).
    """

    __slots__ = (
        "__weakref__",
        "_args",
        "_bx",
        "_by",
        "_bz",
        "_call",
        "_config",
        "_gx",
        "_gy",
        "_gz",
        "_kernel",
        "_leases",
        "_packed",
        "_params",
        "_shmem",
        "_spaces",
        "_used",
    )

    _kernel: Kernel
    _gx: int
    _gy: int
    _gz: int
    _bx: int
    _by: int
    _bz: int
    _shmem: int
    _packed: PackedArgs
    _params: int
    _args: tuple[Any, ...]
    _call: Any
    _config: LaunchConfig | None
    _leases: tuple[Lease, ...]
    _used: tuple[DeviceMemory, ...]
    _spaces: tuple[Any, ...]  # of VirtualBuffer arguments: checked before each launch

    def __init__(self) -> None:
        raise TypeError("use Kernel.prepare(grid, block, *args)")

    @classmethod
    def _new(
        cls,
        kernel: Kernel,
        grid: tuple[int, int, int],
        block: tuple[int, int, int],
        shmem: int,
        args: tuple[Any, ...],
        config: LaunchConfig | None = None,
    ) -> LaunchPlan:
        packed = kernel.pack(*args)
        self = cls.__new__(cls)
        self._kernel = kernel
        self._gx, self._gy, self._gz = grid
        self._bx, self._by, self._bz = block
        self._shmem = shmem
        self._config = config
        self._packed = packed
        self._params = packed.address
        self._hold(packed.args)
        # The constant leading arguments bound once: a launch passes only the stream.
        if config is None:
            self._call = functools.partial(_drv.cuLaunchKernel, kernel._h, *grid, *block, shmem)
        else:
            self._call = functools.partial(_launch_ex, kernel._h, grid, block, shmem, config)
        return self

    def _hold(self, args: tuple[Any, ...]) -> None:
        """Keep what the packed arguments point to allocated while the plan lives.

        Closing a buffer the plan was packed with makes the buffer unusable, but its
        memory is freed only once the plan is gone too, so a later launch never
        writes into memory reused by another allocation.
        """
        self._args = args
        held = [a for a in args if isinstance(a, Handle) and a._h is not None]
        self._leases = (self._kernel._lease(), *(a._lease() for a in held))
        maps = (a._mapped() for a in args if isinstance(a, MapsMemory))
        self._used = (*(a for a in held if isinstance(a, DeviceMemory)), *filter(None, maps))
        self._spaces = sp = virtual_spaces(args)
        k, grid, block = self._kernel, self.grid, self.block
        attrs = self._config._c_attributes() if self._config is not None else b""
        self._core_set(k, k._key, grid, block, self._shmem, self._params, self._used, attrs, sp)

    def _launch_slow(self, stream: StreamLike) -> None:
        """The slow path of :meth:`LaunchPlan.launch` (what the compiled body leaves)."""
        if GUARD.armed:
            GUARD.check()
        if self._kernel._h is None:
            self._kernel._raise_closed()
        if self._spaces:
            refuse_offloaded(self._spaces)
        k = self._kernel
        pins = _pins.pin2(k._module, stream)
        try:
            if k._h is None:
                k._raise_closed()
            sh = stream_handle(stream)
            if capture.ACTIVE:
                capture.keep(sh, self._kernel, self._args)
            r = self._call(sh, self._params, 0)
        finally:
            _pins.unpin2(*pins)
        if r[0] is not SUCCESS:
            raise self._kernel._launch_error(r[0], self.grid, self.block, self._shmem, self._config)
        for a in self._used:
            a._note_use(sh)

    def set_arg(self, index: int, value: Any) -> None:
        """Re-pack argument ``index`` (same rules and errors as packing at prepare)."""
        self._packed.set(index, value)
        self._hold(self._packed.args)

    @property
    def kernel(self) -> Kernel:
        """The kernel this plan launches."""
        return self._kernel

    @property
    def grid(self) -> tuple[int, int, int]:
        """The grid, as ``(x, y, z)``."""
        return (self._gx, self._gy, self._gz)

    @property
    def block(self) -> tuple[int, int, int]:
        """The block, as ``(x, y, z)``."""
        return (self._bx, self._by, self._bz)

    @property
    def shared_mem(self) -> int:
        """Dynamic shared memory per block, in bytes."""
        return self._shmem

    @property
    def args(self) -> tuple[Any, ...]:
        """The arguments as last packed."""
        return self._args

    @property
    def packed(self) -> PackedArgs:
        """The packed arguments (``packed.address`` is the ``kernelParams`` value)."""
        return self._packed

    def __reduce__(self) -> NoReturn:
        raise TypeError(pickle_refusal("LaunchPlan", "it launches a kernel of this process"))

    def __repr__(self) -> str:
        return (
            f"<cudriver.LaunchPlan {self._kernel._name!r} grid={self.grid} "
            f"block={self.block} shared_mem={self._shmem}>"
        )


def _launch_ex(
    func: Any,
    grid: tuple[int, int, int],
    block: tuple[int, int, int],
    shmem: int,
    config: LaunchConfig,
    stream_h: Any,
    params: Any,
    extra: Any,
) -> Any:
    """A configured plan's launch (``cuLaunchKernelEx``), called as the plain one is.

    A plan binds the leading arguments once; a launch passes ``(stream, params,
    extra)``, as to ``cuLaunchKernel``.
    """
    return launch_ex(func, grid, block, shmem, stream_h, params, config)
