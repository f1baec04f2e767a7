"""Handles are really released: finalisers run and device memory comes back."""

from __future__ import annotations

import gc
import weakref

import pytest
from cuda.bindings import driver as drv

import cudriver as cu
from cudriver._lifetime import _handle

from ._support import unwrap


def _live_finalizers() -> int:
    gc.collect()
    # Releases found by garbage collection are queued for the releasing thread: run
    # them (or wait for that thread's pass) before counting.
    _handle.settle()
    return sum(1 for f in list(weakref.finalize._registry) if f.alive)  # type: ignore[attr-defined]


def _free_bytes() -> int:
    free, _total = unwrap(drv.cuMemGetInfo())
    return int(free)


@pytest.mark.gpu
def test_streams_events_graphs_released(ctx: cu.Context) -> None:
    # The first object made in a primary context takes cudriver's own retain of it,
    # kept until exit by design: take it before counting.
    cu.Stream().close()
    base = _live_finalizers()
    side = cu.Stream()
    for _ in range(200):
        s = cu.Stream()
        with s.capture() as g:
            ev = s.record()
            side.wait(ev)  # fork and join: events recorded inside the capture
            s.wait(side.record())
        g.instantiate().launch(s)
        s.synchronize()
    side.close()
    del s, ev, g
    assert _live_finalizers() <= base


@pytest.mark.gpu
@pytest.mark.device_memory
def test_device_memory_comes_back(ctx: cu.Context) -> None:
    from cudriver import DeviceBuffer

    ctx.synchronize()
    before = _free_bytes()
    bufs = [DeviceBuffer(64 << 20) for _ in range(8)]
    assert _free_bytes() <= before - 8 * (64 << 20)
    del bufs
    gc.collect()
    ctx.synchronize()
    assert _free_bytes() >= before - (16 << 20)
