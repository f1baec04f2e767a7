"""Thousands of create/use/close cycles leave device memory, objects and registries flat.

Each cycle makes and uses every owning class (streams, events, plain and stream-ordered
buffers, pinned buffers, prepared launches, memory operations, host functions,
captures, graphs, executable graphs and their updates), closing some explicitly and
dropping the others to garbage collection. Modules and created contexts, which are
slow to make, cycle fewer times.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import Any

import pytest
from cuda.bindings import driver as drv

import cudriver as cu
from cudriver import errors
from cudriver._context import device
from cudriver._lifetime import _handle, _hostfn, capture

from ._support import AXPY_KERNEL, load_kernels, unwrap

CYCLES = 10_000


def _free_bytes() -> int:
    free, _total = unwrap(drv.cuMemGetInfo())
    return int(free)


def _registries() -> dict[str, int]:
    return {
        "host-function records": _hostfn.registry_size(),
        "pending host-function errors": len(_hostfn.PENDING),
        "open captures": len(capture.ACTIVE),
        "orphaned keep lists": len(capture.ORPHANED),
        "captures the guard counts": len(errors.GUARD.captures),
        "capture-error watchers": len(errors._watchers.items),
        "waiting releases": _handle.pending_releases(),
        "borrowed contexts": len(device._borrowed),
        "adopted contexts": len(device._adopted),
        "owned contexts": len(device._owned),
    }


def _settle(ctx: cu.Context) -> None:
    gc.collect()
    ctx.synchronize()  # also runs the releases that waited
    _handle.settle()  # and waits for the releasing thread's


@pytest.fixture
def flat(ctx: cu.Context) -> Callable[[Callable[[], None], int], None]:
    """Run a cycle ``n`` times; assert memory, objects and registries did not grow."""

    def run(cycle: Callable[[], None], n: int) -> None:
        for _ in range(20):  # warm caches and pools
            cycle()
        _settle(ctx)
        mem0, objs0, reg0 = _free_bytes(), len(gc.get_objects()), _registries()
        for _ in range(n):
            cycle()
        _settle(ctx)
        mem1, objs1, reg1 = _free_bytes(), len(gc.get_objects()), _registries()
        assert mem1 >= mem0 - (8 << 20), f"device memory: {mem0 - mem1} bytes lost"
        assert objs1 - objs0 < 500, f"Python objects: {objs1 - objs0} more"
        assert reg1 == reg0, (reg0, reg1)
        assert len(_hostfn._dead) <= _hostfn._DEAD_MAX  # bounded by design

    return run


def _noop(*_args: Any) -> None:
    pass


@pytest.mark.gpu
@pytest.mark.device_memory
def test_every_owning_class_cycles_flat(ctx: cu.Context, flat: Any) -> None:
    axpy = load_kernels(ctx, AXPY_KERNEL, "axpy")["axpy"]
    n = 64

    def cycle() -> None:
        s = cu.Stream()
        ev = cu.Event(timing=False)
        x = cu.DeviceBuffer(4 * n)
        y = cu.DeviceBuffer(4 * n, stream=s)
        pin = cu.PinnedBuffer(4 * n)
        x.fill(0, stream=s)
        y.fill(0, stream=s)
        plan = axpy.prepare(1, n, 1.0, x, y, n)
        plan.launch(s)
        s.batch_mem_ops([cu.MemOp.write32(x, 1)])
        s.write_value32(pin.device_ptr, 2)
        s.launch_host_func(_noop, pin)
        with s.capture() as g:
            plan.launch(s)
            s.launch_host_func(_noop, x)
        exe = g.instantiate()
        exe.launch(s)
        with s.capture() as g2:
            axpy.launch(s, 1, n, 2.0, x, y, n)
            s.launch_host_func(_noop, y)
        exe.update(g2)
        exe.launch(s)
        ev.record(s)
        ev.synchronize()
        s.synchronize()
        # Half closed explicitly, half left to garbage collection.
        exe.close()
        g.close()
        y.close()
        pin.close()
        s.close()
        del plan, g2, x, ev

    flat(cycle, CYCLES)


@pytest.mark.gpu
@pytest.mark.device_memory
def test_modules_cycle_flat(ctx: cu.Context, flat: Any) -> None:
    image = cu.compile(AXPY_KERNEL, arch=ctx.device, target="cubin")
    x = cu.DeviceBuffer(256)

    def cycle() -> None:
        m = cu.Module.load(image, eager=True)
        plan = m.kernel("axpy").prepare(1, 64, 1.0, x, x, 64)
        m.close()  # the plan's lease keeps the code loaded until the plan goes
        del plan

    flat(cycle, 1_000)


@pytest.mark.gpu
@pytest.mark.device_memory
def test_created_contexts_cycle_flat(ctx: cu.Context, flat: Any) -> None:
    def cycle() -> None:
        c = cu.Context.create(ctx.device)
        with c:
            s = cu.Stream()
            b = cu.DeviceBuffer(1024)
        b.fill(1, stream=s)
        s.synchronize()
        del c, s, b  # the stream and buffer keep the context until they go

    flat(cycle, 100)
