"""Kernels (``CUfunction``): parameters, attributes, occupancy and launches.

:meth:`cudriver.Module.kernel` returns a :class:`Kernel`, which launches with
``cuLaunchKernel``, packing its arguments by the rules of ``_packing``. The driver
calls of its occupancy methods (``cuOccupancy*``) are here with them.
:meth:`Kernel.prepare` packs once and returns a :class:`~cudriver.LaunchPlan` (module
``plan``), whose :meth:`~cudriver.LaunchPlan.launch` is the fast path.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple, NoReturn, cast

from cuda.bindings import driver as _drv

from .._context.device import Context, current_or_default
from .._lifetime import _pins, capture
from .._lifetime._coerce import (
    U32_MAX,
    DeviceMemory,
    MapsMemory,
    StreamLike,
    dims,
    handle_arg,
    int_arg,
    stream_handle,
    uint_arg,
)
from .._lifetime._coerce import shared_mem as _shared
from .._lifetime._handle import Handle, Lease
from .._runtime import _bindings, _calls
from .._runtime._bindings import SUCCESS
from .._runtime._enums import FunctionAttribute
from ..errors import GUARD, ClosedError, NotSupportedError, error_for
from ._core import KernelCore
from ._packing import ArgLayout, PackedArgs, count_error, pack_fast
from .launch import (
    NO_BLOCK,
    LaunchConfig,
    launch_error_detail,
    launch_ex,
    native_config,
    shape_of,
)
from .plan import LaunchPlan

if TYPE_CHECKING:
    from .library import Library
    from .module import Module

__all__ = ["Kernel", "ParamInfo"]


class ParamInfo(NamedTuple):
    """Where one kernel parameter lives in the device-side parameter buffer."""

    offset: int
    size: int


ParamInfo.__module__ = "cudriver"

_R = _drv.CUresult
# cuFuncGetParamInfo answers INVALID_VALUE past the last parameter; the parameter
# buffer is at most 32 KiB, so no kernel has more parameters than this.
_MAX_PARAMS = 32768


def read_params(h: Any, fn: Callable[..., tuple[Any, ...]] | None = None) -> tuple[ParamInfo, ...]:
    """A function's parameters (``cuFuncGetParamInfo`` until it answers INVALID_VALUE).

    ``fn`` asks another entry point of the same form (``cuKernelGetParamInfo`` for a
    ``CUkernel``).
    """
    if fn is None:
        fn = _bindings.func_get_param_info
    if fn is None:
        raise NotSupportedError(
            _R.CUDA_ERROR_NOT_SUPPORTED,
            "cuFuncGetParamInfo",
            "kernel argument packing needs cuda-bindings 12.4 or newer",
        )
    infos: list[ParamInfo] = []
    for i in range(_MAX_PARAMS):
        r = fn(h, i)
        if r[0] is not SUCCESS:
            if r[0] is _R.CUDA_ERROR_INVALID_VALUE:
                break
            raise error_for(r[0], fn, "kernel argument packing needs a CUDA 12.4 or newer driver")
        infos.append(ParamInfo(int(r[1]), int(r[2])))
    return tuple(infos)


# What a driver without cuFuncLoad answers: it loads every function eagerly anyway.
_NO_FUNC_LOAD = frozenset(int(c) for c in (_R.CUDA_ERROR_NOT_SUPPORTED, _R.CUDA_ERROR_NOT_FOUND))


def _func_attr(attr: Any) -> Any:
    if isinstance(attr, bool) or not isinstance(attr, int):
        raise TypeError(f"attribute must be a cudriver.FunctionAttribute, not {attr!r}")
    try:
        return _drv.CUfunction_attribute(int(attr))
    except ValueError:
        raise ValueError(
            f"unknown function attribute {int(attr)}: not a CUfunction_attribute of the "
            "installed cuda-bindings (a newer cuda-bindings may know it)"
        ) from None


# -- occupancy: the driver calls of Kernel's occupancy methods ---------------------------
def _occupancy(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)``'s answer (a tuple when it has several); raises on an error status."""
    r = fn(*args)
    if r[0] is not SUCCESS:
        raise error_for(r[0], fn)
    return r[1:] if len(r) > 2 else r[1]


def _blocks_per_sm(func: Any, block_size: int, shmem: int) -> int:
    """``cuOccupancyMaxActiveBlocksPerMultiprocessor``."""
    fn = _drv.cuOccupancyMaxActiveBlocksPerMultiprocessor
    return int(_occupancy(fn, func, block_size, shmem))


def _best_block_size(
    func: Any, shmem_of: Callable[[int], int], most: int, sm_count: int
) -> tuple[int, int]:
    """``(min_grid_size, block_size)`` with the shared memory a function of the block size.

    Tries every multiple of the warp size from ``most`` down and keeps the first best,
    as the driver does.
    """
    best_threads, best_block = 0, 0
    for b in range(most - most % 32, 0, -32):
        threads = _blocks_per_sm(func, b, shmem_of(b)) * b
        if threads > best_threads:
            best_threads, best_block = threads, b
    if best_block == 0:
        raise ValueError("no block size fits the kernel with that shared memory")
    return (best_threads // best_block) * sm_count, best_block


class Kernel(Handle, KernelCore):
    """A kernel of a :class:`Module` (a ``CUfunction``); never freed by itself.

    Obtain one with :meth:`Module.kernel`. A kernel keeps its module alive and is
    closed when the module is closed. Its parameter layout is read once, on first
    use (``cuFuncGetParamInfo``), and drives argument packing. A kernel of a
    :class:`~cudriver.Library` is a :class:`~cudriver.LibraryKernel`, this class's
    subclass, launched the same way on any context's stream.
    """

    __slots__ = ()  # the fields are KernelCore's C fields

    _kind = "Kernel"

    _module: Module | Library | None  # a LibraryKernel's is its Library
    _name: str
    _params: tuple[ParamInfo, ...] | None
    _sizes: tuple[int, ...] | None
    _layout: ArgLayout | None

    def __init__(self) -> None:
        raise TypeError("use Module.kernel(name) or Kernel.from_handle()")

    @classmethod
    def _new(cls, h: Any, name: str, module: Module | Library | None, owner: Any = None) -> Kernel:
        self = cls.__new__(cls)
        self._module = module
        self._name = name
        self._params = None
        self._sizes = None
        self._layout = None
        self._init_handle(
            h,
            release=None,
            func="cuModuleUnload",
            owned=False,
            owner=owner if owner is not None else module,
        )
        return self

    @classmethod
    def from_handle(cls, handle: Any, owner: Any = None, *, name: str | None = None) -> Kernel:
        """Wrap a foreign ``CUfunction`` (or int); ``owner`` is kept alive with it.

        ``name`` defaults to the driver's (``cuFuncGetName``).
        """
        h = handle_arg(handle, _drv.CUfunction, "function handle")
        if name is None:
            raw = _calls.cuFuncGetName(h)
            name = raw.decode() if isinstance(raw, bytes) else str(raw)
        return cls._new(h, name, None, owner)

    @_pins.pinned
    def _load(self) -> None:
        """Load the kernel's code now (``cuFuncLoad``) unless it is loaded already.

        Under lazy loading the first launch would load it, and that load waits for
        the device; a kernel loaded here never does. Drivers without ``cuFuncLoad``
        (before CUDA 12.4) load eagerly unless told otherwise, so nothing is lost.
        """
        load = _bindings.func_load
        if load is None:
            return
        ctx = self._home_context()
        if ctx is not None:
            with ctx._scope():
                r = load(self._h)
        else:
            r = load(self._h)
        if r[0] is not SUCCESS and int(r[0]) not in _NO_FUNC_LOAD:
            raise error_for(r[0], load, f"loading kernel {self._name!r}")

    def _lease(self) -> Lease:
        """A lease on the kernel's module: its code stays loaded while the lease lives."""
        mod = self._module
        if mod is not None and mod._h is not None:
            return mod._lease()
        return super()._lease()

    def _pin_target(self) -> Handle:
        """A driver call on the kernel pins its module (unloading it frees the code)."""
        mod = self._module
        return mod if mod is not None else self

    def _raise_closed(self) -> NoReturn:
        mod = self._module
        why = " (its Module was closed)" if mod is not None and mod._h is None else ""
        raise ClosedError(f"Kernel {self._name!r} is closed{why}")

    # -- identity ----------------------------------------------------------------------
    @property
    def name(self) -> str:
        """The kernel's name."""
        return self._name

    @property
    def module(self) -> Module | None:
        """The module the kernel belongs to (None for :meth:`from_handle` kernels)."""
        return cast("Module | None", self._module)

    def _home_context(self) -> Context | None:
        """The context the kernel's function lives in (its module's), or None if unknown."""
        mod = self.module
        return mod.context if mod is not None else None

    def _function(self) -> Any:
        """The ``CUfunction`` that attribute and occupancy queries take (the handle)."""
        return self.handle

    def __repr__(self) -> str:
        if self._h is None:
            return f"<cudriver.Kernel {self._name!r} closed>"
        return f"<cudriver.Kernel {self._name!r} {self._key:#x}>"

    # -- parameters --------------------------------------------------------------------
    @property
    def param_info(self) -> tuple[ParamInfo, ...]:
        """``(offset, size)`` of each parameter in the device-side layout.

        Read once with ``cuFuncGetParamInfo`` (CUDA 12.4+ drivers) and cached.
        """
        p = self._params
        if p is None:
            p = self._load_params()
        return p

    @property
    def num_params(self) -> int:
        """The number of parameters the kernel takes."""
        return len(self.param_info)

    @property
    def param_sizes(self) -> tuple[int, ...]:
        """The size in bytes of each parameter."""
        s = self._sizes
        if s is None:
            self._load_params()
            s = self._sizes
            assert s is not None
        return s

    @_pins.pinned
    def _load_params(self) -> tuple[ParamInfo, ...]:
        return self._set_params(read_params(self._closed_check()))

    def _set_params(self, params: tuple[ParamInfo, ...]) -> tuple[ParamInfo, ...]:
        """Keep ``params`` (read here, or by the eager load of the module)."""
        sizes = tuple(p.size for p in params)
        self._layout = ArgLayout(sizes)
        self._sizes = sizes
        self._params = params
        return params

    def _arg_layout(self) -> ArgLayout:
        lay = self._layout
        if lay is None:
            self._load_params()
            lay = self._layout
            assert lay is not None
        return lay

    # -- attributes --------------------------------------------------------------------
    @_pins.pinned
    def attribute(self, attr: FunctionAttribute | int) -> int:
        """Read a kernel attribute (``cuFuncGetAttribute``)."""
        a = _func_attr(attr)
        r = _drv.cuFuncGetAttribute(a, self.handle)
        if r[0] is not SUCCESS:
            raise error_for(r[0], _drv.cuFuncGetAttribute, f"attribute {a.name}")
        return int(r[1])

    @_pins.pinned
    def set_attribute(self, attr: FunctionAttribute | int, value: int) -> None:
        """Set a kernel attribute (``cuFuncSetAttribute``).

        Settable: ``MAX_DYNAMIC_SHARED_SIZE_BYTES``,
        ``PREFERRED_SHARED_MEMORY_CARVEOUT`` and the cluster attributes.
        """
        v = int_arg(value, "attribute value")
        if not -(1 << 31) <= v < 1 << 31:
            raise ValueError(f"attribute value {v} does not fit a C int")
        a = _func_attr(attr)
        r = _drv.cuFuncSetAttribute(self.handle, a, v)
        if r[0] is not SUCCESS:
            raise error_for(r[0], _drv.cuFuncSetAttribute, f"{a.name} = {v}")

    @property
    def max_threads_per_block(self) -> int:
        """The most threads a block of this kernel may have."""
        return self.attribute(FunctionAttribute.MAX_THREADS_PER_BLOCK)

    @property
    def num_registers(self) -> int:
        """Registers used by each thread."""
        return self.attribute(FunctionAttribute.NUM_REGS)

    @property
    def shared_size_bytes(self) -> int:
        """Statically allocated shared memory per block, in bytes."""
        return self.attribute(FunctionAttribute.SHARED_SIZE_BYTES)

    @property
    def const_size_bytes(self) -> int:
        """Constant memory the kernel uses, in bytes."""
        return self.attribute(FunctionAttribute.CONST_SIZE_BYTES)

    @property
    def local_size_bytes(self) -> int:
        """Local memory per thread, in bytes."""
        return self.attribute(FunctionAttribute.LOCAL_SIZE_BYTES)

    @property
    def ptx_version(self) -> int:
        """The PTX virtual architecture the kernel was compiled for (e.g. 90)."""
        return self.attribute(FunctionAttribute.PTX_VERSION)

    @property
    def binary_version(self) -> int:
        """The binary architecture the kernel was compiled for (e.g. 90)."""
        return self.attribute(FunctionAttribute.BINARY_VERSION)

    @property
    def max_dynamic_shared_size_bytes(self) -> int:
        """The most dynamic shared memory a launch may request, in bytes.

        Setting it (``cuFuncSetAttribute``) opts in to more than the default 48 KiB.
        """
        return self.attribute(FunctionAttribute.MAX_DYNAMIC_SHARED_SIZE_BYTES)

    @max_dynamic_shared_size_bytes.setter
    def max_dynamic_shared_size_bytes(self, value: int) -> None:
        self.set_attribute(FunctionAttribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, value)

    # -- occupancy ---------------------------------------------------------------------
    @_pins.pinned
    def max_active_blocks_per_sm(self, block_size: int, shared_mem: int = 0) -> int:
        """How many blocks of ``block_size`` threads fit on one multiprocessor at once.

        Calls ``cuOccupancyMaxActiveBlocksPerMultiprocessor`` (in the current
        context); with ``shared_mem`` bytes of dynamic shared memory per block. Times
        the device's multiprocessor count, the largest grid a cooperative launch takes.
        """
        b = uint_arg(block_size, "block_size", 32)
        return _blocks_per_sm(self._function(), b, _shared(shared_mem))

    @_pins.pinned
    def suggested_block_size(
        self, shared_mem: int | Callable[[int], int] = 0, *, max_block_size: int = 0
    ) -> tuple[int, int]:
        """The block size with the highest occupancy, as ``(min_grid_size, block_size)``.

        ``min_grid_size`` is the smallest grid that reaches that occupancy on the whole
        device. ``shared_mem`` is the dynamic shared memory per block: bytes, or a
        function of the block size returning bytes. ``max_block_size`` caps the answer
        (0: the kernel's own limit). Calls ``cuOccupancyMaxPotentialBlockSize`` for a
        fixed size; for a function, asks ``cuOccupancyMaxActiveBlocksPerMultiprocessor``
        for every multiple of the warp size, as the driver does.
        """
        limit = uint_arg(max_block_size, "max_block_size", 32)
        if not callable(shared_mem):
            fn = _drv.cuOccupancyMaxPotentialBlockSize
            grid, block = _occupancy(fn, self._function(), None, _shared(shared_mem), limit)
            return int(grid), int(block)
        ctx = self._home_context() or current_or_default()
        most = min(self.max_threads_per_block, limit or U32_MAX)
        sms = ctx.device.multiprocessor_count
        return _best_block_size(self._function(), lambda b: _shared(shared_mem(b)), most, sms)

    @_pins.pinned
    def max_potential_cluster_size(self, block: Any, shared_mem: int = 0) -> int:
        """The largest cluster size for blocks of ``block`` threads.

        Calls ``cuOccupancyMaxPotentialClusterSize``.
        """
        h, b, shmem = self._function(), dims(block, "block"), _shared(shared_mem)
        cfg = native_config((1, 1, 1), b, shmem, None, None)
        return int(_occupancy(_drv.cuOccupancyMaxPotentialClusterSize, h, cfg))

    @_pins.pinned
    def max_active_clusters(self, grid: Any, block: Any, cluster: Any, shared_mem: int = 0) -> int:
        """How many clusters of this launch can run at once (``cuOccupancyMaxActiveClusters``)."""
        g, b = dims(grid, "grid"), dims(block, "block")
        h, shmem = self._function(), _shared(shared_mem)
        cfg = native_config(g, b, shmem, None, LaunchConfig(cluster=cluster))
        return int(_occupancy(_drv.cuOccupancyMaxActiveClusters, h, cfg))

    # -- launching ---------------------------------------------------------------------
    def pack(self, *args: Any) -> PackedArgs:
        """Pack ``args`` for this kernel (no driver call once the layout is known)."""
        lay = self._arg_layout()
        return PackedArgs._with_layout(lay, args, self._name)

    def _launch_slow(
        self,
        stream: StreamLike,
        grid: Any,
        block: Any = NO_BLOCK,
        *args: Any,
        shared_mem: int = 0,
        config: LaunchConfig | None = None,
    ) -> None:
        """The slow path of :meth:`Kernel.launch` (what the compiled body leaves)."""
        if GUARD.armed:
            GUARD.check()
        h = self._h
        if h is None:
            self._raise_closed()
        if isinstance(grid, LaunchConfig):
            # The shape from the config; launched again, so the compiled core takes it.
            grid, block, args, shmem, cfg = shape_of(grid, block, args, shared_mem, config)
            return self.launch(stream, grid, block, *args, shared_mem=shmem, config=cfg)
        if config is not None or block is NO_BLOCK:
            grid, block, args, shared_mem, config = shape_of(grid, block, args, shared_mem, config)
        # The module, the stream and the buffers among the arguments stay pinned
        # through every driver call below (a close() on another thread releases them
        # afterwards, after this launch's use is noted); pinned, then checked.
        pins = _pins.pin2(self._module, stream)
        held: list[Any] = []
        try:
            held = _pins.pin_all(*args)
            if self._h is None:
                self._raise_closed()
            # Inline fast paths for int grid/block and no shared memory; _dims and
            # _shared validate everything else.
            if type(grid) is int and 0 < grid <= U32_MAX:
                gx, gy, gz = grid, 1, 1
            else:
                gx, gy, gz = dims(grid, "grid")
            if type(block) is int and 0 < block <= U32_MAX:
                bx, by, bz = block, 1, 1
            else:
                bx, by, bz = dims(block, "block")
            shmem = shared_mem
            if shared_mem != 0 or type(shared_mem) is not int:
                shmem = _shared(shared_mem)
            lay = self._layout
            if lay is None:
                lay = self._arg_layout()
            if len(args) != lay.n:
                raise count_error(self._name, lay.n, len(args))
            sh = stream_handle(stream)
            if not args:
                if capture.ACTIVE:
                    capture.keep(sh, self)
                if config is None:
                    r = _drv.cuLaunchKernel(h, gx, gy, gz, bx, by, bz, shmem, sh, 0, 0)
                else:
                    r = launch_ex(h, (gx, gy, gz), (bx, by, bz), shmem, sh, 0, config)
                if r[0] is not SUCCESS:
                    raise self._launch_error(r[0], (gx, gy, gz), (bx, by, bz), shmem, config)
                return
            pool = lay.pool
            try:
                scratch = pool.pop()
            except IndexError:
                scratch = lay.storage()
            try:
                pack_fast(scratch[0], lay.items, args, self._name)
                if capture.ACTIVE:
                    capture.keep(sh, self, args)
                if config is None:
                    r = _drv.cuLaunchKernel(h, gx, gy, gz, bx, by, bz, shmem, sh, scratch[3], 0)
                else:
                    g, b = (gx, gy, gz), (bx, by, bz)
                    r = launch_ex(h, g, b, shmem, sh, scratch[3], config)
            finally:
                pool.append(scratch)
            if r[0] is not SUCCESS:
                raise self._launch_error(r[0], (gx, gy, gz), (bx, by, bz), shmem, config)
            for a in args:
                if isinstance(a, DeviceMemory):
                    a._note_use(sh)
                elif isinstance(a, MapsMemory) and (m := a._mapped()) is not None:
                    m._note_use(sh)
        finally:
            _pins.unpin_all(held)
            _pins.unpin2(*pins)

    def prepare(
        self,
        grid: Any,
        block: Any = NO_BLOCK,
        *args: Any,
        shared_mem: int = 0,
        config: LaunchConfig | None = None,
    ) -> LaunchPlan:
        """Pack the arguments once; :meth:`LaunchPlan.launch` then reuses them.

        Validates and packs like :meth:`launch` (same errors, same two ways to give
        the shape: ``prepare(grid, block, *args)`` or ``prepare(config, *args)``),
        without launching. The plan keeps the kernel and the arguments alive. With a
        ``config`` that sets attributes, the plan launches through
        ``cuLaunchKernelEx``.
        """
        if self._h is None:
            self._raise_closed()
        grid, block, args, shared_mem, cfg = shape_of(grid, block, args, shared_mem, config)
        return LaunchPlan._new(
            self, dims(grid, "grid"), dims(block, "block"), _shared(shared_mem), args, cfg
        )

    def _launch_error(
        self,
        code: Any,
        grid: tuple[int, ...],
        block: tuple[int, ...],
        shmem: int,
        config: LaunchConfig | None = None,
    ) -> Exception:
        """The exception for a failed launch, with what we can tell about why."""
        detail = f"kernel {self._name!r}, grid {grid}, block {block}, shared_mem {shmem}"
        if config is not None:
            detail += launch_error_detail(code, config)
        c = int(code)
        if c == int(_R.CUDA_ERROR_INVALID_VALUE) or c == int(_R.CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES):
            threads = block[0] * block[1] * block[2]
            try:
                most = self.max_threads_per_block
                dyn = self.max_dynamic_shared_size_bytes
            except Exception:  # a sticky error: keep the launch's own message
                most = dyn = -1
            if 0 <= most < threads:
                detail += (
                    f": the block has {threads} threads, more than the kernel's "
                    f"max_threads_per_block ({most})"
                )
            elif 0 <= dyn < shmem:
                detail += (
                    f": shared_mem exceeds the kernel's max_dynamic_shared_size_bytes "
                    f"({dyn}); raise it first"
                )
        elif c == int(_R.CUDA_ERROR_INVALID_CONTEXT) or c == int(_R.CUDA_ERROR_INVALID_HANDLE):
            detail += (
                ": the kernel's context must be current and the stream must belong to it "
                "(use `with module.context:`)"
            )
        return error_for(
            code, _drv.cuLaunchKernel if config is None else _drv.cuLaunchKernelEx, detail
        )
