"""Launch configuration beyond grid, block and shared memory, and launching with it.

A :class:`LaunchConfig` holds the launch attributes of ``cuLaunchKernelEx``: thread-block
clusters, cooperative launches, programmatic dependent launch, priority and the memory
synchronisation domain. :meth:`cudriver.Kernel.launch` and :meth:`cudriver.Kernel.prepare`
take one as ``config=``; a launch without one (or with an empty one) keeps the cheaper
``cuLaunchKernel`` path. :func:`shape_of` reads the two ways a launch's shape is written,
:func:`launch_ex` makes the ``cuLaunchKernelEx`` call, and :func:`native_config` the
``CUlaunchConfig`` it (and the occupancy methods of :class:`~cudriver.Kernel`) takes.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cuda.bindings import driver as _drv

from .._lifetime._coerce import bool_arg, dims, int_arg, uint_arg
from .._lifetime._coerce import shared_mem as _shared

__all__ = [
    "LaunchConfig",
    "config_arg",
    "shape_of",
    "NO_BLOCK",
    "native_config",
    "launch_ex",
    "launch_error_detail",
]

_A = _drv.CUlaunchAttributeID
#: sizeof(CUlaunchAttribute): the id, padding to 8 bytes, a 64-byte value.
_ATTR_BYTES = 72
_R = _drv.CUresult

# Per thread: the CUlaunchConfig last made for each (config, grid, block, shared memory),
# at most this many (then the cache starts again).
_local = threading.local()
_CACHED_CONFIGS = 64

# What a launch attribute is called in errors, by attribute id.
_NAMES = {
    int(_A.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION): "cluster",
    int(_A.CU_LAUNCH_ATTRIBUTE_COOPERATIVE): "cooperative",
    int(_A.CU_LAUNCH_ATTRIBUTE_PRIORITY): "priority",
    int(_A.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION): (
        "programmatic_stream_serialization"
    ),
    int(_A.CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN): "mem_sync_domain",
}


@dataclass(frozen=True, init=False)
class LaunchConfig:
    """A launch's shape and attributes, for :meth:`Kernel.launch` and :meth:`Kernel.prepare`.

    Two ways to use one:

    * **attributes only**, beside the shape: ``kernel.launch(stream, grid, block, *args,
      config=LaunchConfig(cooperative=True))``;
    * **shape and attributes**, in place of grid and block (cuda.core's way):
      ``kernel.launch(stream, LaunchConfig(grid=64, block=256), *args)``.

    Each attribute maps to one ``CUlaunchAttribute`` of ``cuLaunchKernelEx``; those left
    at their defaults add none, and a launch whose config adds none goes through
    ``cuLaunchKernel``. Every field is keyword-only and checked when the config is made
    (``TypeError``/``ValueError`` naming it); the driver checks the rest at launch, and
    a refusal names the attributes that were set. Frozen: one config may be shared by
    threads and launches.

    Parameters
    ----------
    grid, block
        The launch's shape (an int or a tuple of 1 to 3 ints, each >= 1), stored as
        ``(x, y, z)``; give both or neither. ``grid`` counts blocks, as everywhere in
        cudriver.
    shared_mem
        Dynamic shared memory per block, in bytes (only with ``grid`` and ``block``).
        ``shmem_size`` is accepted as cuda.core's name for it.
    cluster
        Thread-block cluster dimensions (an int or a tuple of 1 to 3 ints); the grid
        must be a multiple of them. Needs compute capability 9.0 or later. Not
        together with ``grid``: cuda.core counts a clustered grid in clusters and
        cudriver in blocks, so that combination is refused rather than guessed.
    cooperative
        A cooperative launch: every block of the grid is resident at once, so blocks
        may wait for each other (a grid-wide barrier). The grid must fit the device,
        see :meth:`Kernel.max_active_blocks_per_sm`. ``cooperative_launch`` is
        accepted as cuda.core's name for it.
    priority
        The launch's priority (as a stream priority: lower is higher).
    programmatic_stream_serialization
        Let this kernel start before the previous kernel on the stream has finished;
        it must wait for the data it needs (``cudaGridDependencySynchronize``), and
        the previous kernel may signal early (``cudaTriggerProgrammaticLaunchCompletion``).
    mem_sync_domain
        The memory synchronisation domain: 0 (default) or 1 (remote).
    """

    grid: tuple[int, int, int] | None
    block: tuple[int, int, int] | None
    shared_mem: int
    cluster: tuple[int, int, int] | None
    cooperative: bool
    priority: int | None
    programmatic_stream_serialization: bool
    mem_sync_domain: int | None

    def __init__(
        self,
        *args: Any,
        grid: Any = None,
        block: Any = None,
        shared_mem: int | None = None,
        cluster: tuple[int, int, int] | int | None = None,
        cooperative: bool | None = None,
        priority: int | None = None,
        programmatic_stream_serialization: bool = False,
        mem_sync_domain: int | None = None,
        shmem_size: int | None = None,
        cooperative_launch: bool | None = None,
    ) -> None:
        if args:
            raise TypeError(
                "LaunchConfig takes keyword arguments only, e.g. "
                "LaunchConfig(grid=64, block=256, shared_mem=0, cooperative=True)"
            )
        shared_mem = _one_of("shared_mem", shared_mem, "shmem_size", shmem_size, 0)
        cooperative = _one_of(
            "cooperative", cooperative, "cooperative_launch", cooperative_launch, False
        )
        if (grid is None) != (block is None):
            raise ValueError("LaunchConfig takes grid and block together, or neither")
        if grid is not None and cluster is not None:
            raise ValueError(
                "LaunchConfig(grid=..., cluster=...) is refused: cuda.core counts such a "
                "grid in clusters and cudriver in blocks. Give the grid in blocks to the "
                "launch instead: kernel.launch(stream, grid, block, *args, "
                "config=LaunchConfig(cluster=...))"
            )
        if grid is None and shared_mem:
            raise ValueError(
                "shared_mem in a LaunchConfig goes with grid and block; without them, "
                "pass shared_mem= to the launch"
            )
        sets = object.__setattr__
        sets(self, "grid", None if grid is None else dims(grid, "grid"))
        sets(self, "block", None if block is None else dims(block, "block"))
        sets(self, "shared_mem", _shared(shared_mem))
        sets(self, "cluster", None if cluster is None else dims(cluster, "cluster"))
        sets(self, "cooperative", bool_arg(cooperative, "cooperative"))
        if priority is not None:
            priority = int_arg(priority, "priority")
            if not -(1 << 31) <= priority < 1 << 31:
                raise ValueError(f"priority must fit a C int, not {priority}")
        sets(self, "priority", priority)
        sets(
            self,
            "programmatic_stream_serialization",
            bool_arg(programmatic_stream_serialization, "programmatic_stream_serialization"),
        )
        if mem_sync_domain is not None:
            mem_sync_domain = uint_arg(mem_sync_domain, "mem_sync_domain", 32)
            if mem_sync_domain not in (0, 1):
                raise ValueError(
                    f"mem_sync_domain is 0 (default) or 1 (remote), not {mem_sync_domain}"
                )
        sets(self, "mem_sync_domain", mem_sync_domain)

    def _attributes_only(self) -> LaunchConfig | None:
        """The config without its shape (None when it sets no attribute); made once."""
        d = self.__dict__
        if "_bare" not in d:
            bare: LaunchConfig | None = None
            if not self.plain:
                bare = LaunchConfig(
                    cluster=self.cluster,
                    cooperative=self.cooperative,
                    priority=self.priority,
                    programmatic_stream_serialization=self.programmatic_stream_serialization,
                    mem_sync_domain=self.mem_sync_domain,
                )
            object.__setattr__(self, "_bare", bare)
        return d["_bare"]  # type: ignore[no-any-return]

    @property
    def plain(self) -> bool:
        """Whether no attribute is set (a launch then uses ``cuLaunchKernel``)."""
        return (
            self.cluster is None
            and not self.cooperative
            and self.priority is None
            and not self.programmatic_stream_serialization
            and self.mem_sync_domain is None
        )

    def attributes(self) -> list[Any]:
        """The ``CUlaunchAttribute`` list this config adds (new objects each call)."""
        return self._build()

    def _native_attributes(self) -> list[Any]:
        # Built once per config and never changed after: launches only read it (the
        # bindings copy it into each CUlaunchConfig), so threads may share it.
        attrs: list[Any] | None = self.__dict__.get("_attrs")
        if attrs is None:
            attrs = self._build()
            object.__setattr__(self, "_attrs", attrs)
        return attrs

    def _c_attributes(self) -> bytes:
        """The attributes as a C ``CUlaunchAttribute[]`` array, for the compiled core.

        Built once (72 bytes per attribute, copied out of the bindings' structs); empty
        when the config sets none.
        """
        c: bytes | None = self.__dict__.get("_cattrs")
        if c is None:
            c = b"".join(
                ctypes.string_at(a.getPtr(), _ATTR_BYTES) for a in self._native_attributes()
            )
            object.__setattr__(self, "_cattrs", c)
        return c

    def _build(self) -> list[Any]:
        attrs: list[Any] = []

        def add(attr_id: Any, set_value: Callable[[Any], None]) -> None:
            a = _drv.CUlaunchAttribute()
            a.id = attr_id
            set_value(a.value)
            attrs.append(a)

        self._each(add)
        return attrs

    def node_attributes(self) -> list[tuple[Any, Any]]:
        """``(CUkernelNodeAttrID, CUkernelNodeAttrValue)`` pairs for a graph kernel node.

        Raises
        ------
        ValueError
            ``programmatic_stream_serialization`` is set: it orders a launch after the
            previous one on its stream, which a node built explicitly does not have
            (capture such launches instead, which records the programmatic edge).
        """
        if self.programmatic_stream_serialization:
            raise ValueError(
                "programmatic_stream_serialization applies to launches on a stream, not "
                "to nodes added to a graph: launch the kernel with this config inside a "
                "capture instead"
            )
        pairs: list[tuple[Any, Any]] = []

        def add(attr_id: Any, set_value: Callable[[Any], None]) -> None:
            v = _drv.CUkernelNodeAttrValue()
            set_value(v)
            pairs.append((attr_id, v))

        self._each(add)
        return pairs

    def _each(self, add: Callable[[Any, Callable[[Any], None]], None]) -> None:

        cluster = self.cluster
        if cluster is not None:
            assert isinstance(cluster, tuple)

            def set_cluster(v: Any) -> None:
                v.clusterDim.x, v.clusterDim.y, v.clusterDim.z = cluster

            add(_A.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, set_cluster)
        if self.cooperative:
            add(_A.CU_LAUNCH_ATTRIBUTE_COOPERATIVE, lambda v: setattr(v, "cooperative", 1))
        if self.priority is not None:
            p = self.priority
            add(_A.CU_LAUNCH_ATTRIBUTE_PRIORITY, lambda v: setattr(v, "priority", p))
        if self.programmatic_stream_serialization:
            add(
                _A.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION,
                lambda v: setattr(v, "programmaticStreamSerializationAllowed", 1),
            )
        if self.mem_sync_domain is not None:
            dom = _drv.CUlaunchMemSyncDomain(self.mem_sync_domain)
            add(_A.CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN, lambda v: setattr(v, "memSyncDomain", dom))

    def names(self) -> list[str]:
        """The names of the attributes this config sets, for error messages."""
        return [_NAMES[int(a.id)] for a in self._native_attributes()]


LaunchConfig.__module__ = "cudriver"


def _one_of(name: str, value: Any, alias: str, alias_value: Any, default: Any) -> Any:
    """A field given under its name or cuda.core's alias (not both), else ``default``."""
    if alias_value is None:
        return default if value is None else value
    if value is not None:
        raise TypeError(f"give {name} or {alias} (cuda.core's name for it), not both")
    return alias_value


def config_arg(config: Any) -> LaunchConfig | None:
    """``config`` checked: a LaunchConfig without a shape, or None when it sets no attribute.

    A config that carries grid and block goes in their place, not in ``config=``.
    """
    if not isinstance(config, LaunchConfig):
        raise TypeError(f"config must be a cudriver.LaunchConfig, not {type(config).__name__}")
    if config.grid is not None:
        raise TypeError(
            "this LaunchConfig carries grid and block: pass it in their place, "
            "e.g. kernel.launch(stream, config, *args)"
        )
    return None if config.plain else config


#: ``block`` when a launch's grid is a LaunchConfig and no argument follows it (the
#: compiled ``Kernel.launch`` has it as its default).
NO_BLOCK: Any = object()


def shape_of(
    grid: Any, block: Any, args: tuple[Any, ...], shared_mem: Any, config: Any
) -> tuple[Any, Any, tuple[Any, ...], Any, LaunchConfig | None]:
    """``(grid, block, args, shared_mem, config)`` of a launch written either way.

    ``launch(stream, grid, block, *args, shared_mem=, config=)`` passes through (the
    config checked by :func:`config_arg`); ``launch(stream, config, *args)``, where
    ``grid`` is a LaunchConfig with a shape, takes the shape from it: ``block`` is then
    the first kernel argument, and the config's attributes come along.
    """
    if not isinstance(grid, LaunchConfig):
        if block is NO_BLOCK:
            raise TypeError("a launch needs grid and block (or a LaunchConfig that has them)")
        return grid, block, args, shared_mem, (None if config is None else config_arg(config))
    cfg = grid
    if cfg.grid is None:
        raise TypeError(
            "this LaunchConfig has no grid and block: give them, "
            "launch(stream, grid, block, *args, config=config), or make the config "
            "with LaunchConfig(grid=..., block=...)"
        )
    if config is not None:
        raise TypeError("the LaunchConfig is given twice: in place of grid and as config=")
    if shared_mem is not None and shared_mem != 0:
        raise TypeError(
            "with a LaunchConfig in place of grid and block, shared memory is its shared_mem"
        )
    if block is not NO_BLOCK:
        args = (block, *args)
    return cfg.grid, cfg.block, args, cfg.shared_mem, cfg._attributes_only()


def native_config(
    grid: tuple[int, int, int],
    block: tuple[int, int, int],
    shmem: int,
    stream_h: Any,
    config: LaunchConfig | None,
) -> Any:
    """A ``CUlaunchConfig`` for these dimensions, stream and attributes."""
    c = _drv.CUlaunchConfig()
    c.gridDimX, c.gridDimY, c.gridDimZ = grid
    c.blockDimX, c.blockDimY, c.blockDimZ = block
    c.sharedMemBytes = shmem
    c.hStream = stream_h
    attrs = config._native_attributes() if config is not None else []
    c.attrs = attrs
    c.numAttrs = len(attrs)
    return c


def launch_ex(
    func: Any,
    grid: tuple[int, int, int],
    block: tuple[int, int, int],
    shmem: int,
    stream_h: Any,
    params: Any,
    config: LaunchConfig,
) -> Any:
    """``cuLaunchKernelEx``; returns its status tuple (the caller raises).

    The ``CUlaunchConfig`` is made once per thread for each config and shape, and only
    its stream is set again: a thread never shares one with another, whose launch could
    change the stream under this one's call.
    """
    try:
        cache: dict[tuple[Any, ...], tuple[LaunchConfig, Any]] = _local.configs
    except AttributeError:
        cache = _local.configs = {}
    key = (id(config), grid, block, shmem)
    entry = cache.get(key)
    if entry is not None and entry[0] is config:
        c = entry[1]
        c.hStream = stream_h
    else:
        if len(cache) >= _CACHED_CONFIGS:
            cache.clear()
        c = native_config(grid, block, shmem, stream_h, config)
        cache[key] = (config, c)
    return _drv.cuLaunchKernelEx(c, func, params, 0)


def launch_error_detail(code: Any, config: LaunchConfig | None) -> str:
    """What to add to a refused launch's message about the attributes it set."""
    if config is None or config.plain:
        return ""
    c = int(code)
    if c == int(_R.CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE):
        return (
            "; the cooperative grid is larger than the blocks the device can hold at once "
            "(see Kernel.max_active_blocks_per_sm)"
        )
    return f"; launch attributes set: {', '.join(config.names())}"
