"""The memory resources of each device: its default, and the pools to trim.

:func:`~cudriver.set_default_memory_resource` fills :data:`DEFAULTS`;
``DeviceBuffer(nbytes)`` (and everything that allocates through it: ``from_array``,
``empty``, copies that make a buffer) asks it when no ``pool=`` or ``resource=`` is
given. The compiled allocation path tests the dict's truth in C, so an empty one
costs nothing.
"""

from __future__ import annotations

import weakref
from typing import Any

from cuda.bindings import driver as _drv

from .._runtime._bindings import SUCCESS

__all__ = ["DEFAULTS", "POOLS", "trim_pools"]

#: Device ordinal -> the memory resource that serves its allocations by default.
DEFAULTS: dict[int, Any] = {}

#: The pools cudriver made and that live (each ``MemoryPool`` adds itself).
POOLS: weakref.WeakSet[Any] = weakref.WeakSet()


def trim_pools(device: Any) -> bool:
    """Give the driver back what ``device``'s pools keep of freed memory.

    ``cuMemPoolTrimTo(pool, 0)`` on the device's current pool and on each live pool
    cudriver made for it: an allocation that ran out of memory tries once more after
    it (memory a pool keeps serves only that pool). No synchronisation: memory whose
    stream-ordered free has not run yet stays. Returns whether any pool gave back
    memory.
    """
    pools = [p.handle for p in list(POOLS) if p._h is not None and p._device is device]
    r = _drv.cuDeviceGetMemPool(device.handle)
    if r[0] is SUCCESS:
        pools.append(r[1])
    gave = False
    for h in pools:
        attr = _drv.CUmemPool_attribute.CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT
        before = _drv.cuMemPoolGetAttribute(h, attr)
        if _drv.cuMemPoolTrimTo(h, 0)[0] is not SUCCESS:
            continue
        after = _drv.cuMemPoolGetAttribute(h, attr)
        if before[0] is SUCCESS and after[0] is SUCCESS and int(after[1]) < int(before[1]):
            gave = True
    return gave
