from __future__ import annotations

import pytest
from cuda.bindings import driver as drv

import cudriver as cu

from ._support import unwrap


def _current() -> int:
    return int(unwrap(drv.cuCtxGetCurrent()))


@pytest.mark.gpu
def test_primary_retained_and_released(device: cu.Device) -> None:
    ctx = device.primary_context()
    assert ctx.is_primary
    assert ctx.owned
    assert ctx.device is device
    ctx2 = device.primary_context()
    assert ctx == ctx2
    assert hash(ctx) == hash(ctx2)
    ctx2.close()
    assert ctx2.closed
    assert not ctx.closed
    ctx.close()


@pytest.mark.gpu
def test_current_and_set_current(ctx: cu.Context) -> None:
    cur = cu.Context.current()
    assert cur == ctx
    assert not cur.owned
    assert cur.device == ctx.device
    cur.close()  # borrowed: releases nothing
    assert _current() == int(ctx)


@pytest.mark.gpu
def test_with_pushes_and_restores(ctx: cu.Context, device: cu.Device) -> None:
    created = cu.Context.create(device)
    try:
        assert _current() == int(ctx)  # create() leaves the current context alone
        with created as c:
            assert c is created
            assert _current() == int(created)
            assert cu.Context.current() == created
        assert _current() == int(ctx)
    finally:
        created.close()
    assert created.closed


@pytest.mark.gpu
def test_with_restores_on_exception(ctx: cu.Context, device: cu.Device) -> None:
    created = cu.Context.create(device, flags=cu.ContextFlags.SCHED_BLOCKING_SYNC)
    with pytest.raises(KeyError), created:
        assert _current() == int(created)
        raise KeyError("boom")
    assert _current() == int(ctx)
    # nested
    with created, ctx:
        assert _current() == int(ctx)
    assert _current() == int(ctx)
    created.close()


@pytest.mark.gpu
def test_synchronize_and_priority_range(ctx: cu.Context) -> None:
    ctx.synchronize()
    least, greatest = ctx.stream_priority_range
    assert greatest <= least
    assert ctx.api_version > 0


@pytest.mark.gpu
def test_limits(ctx: cu.Context) -> None:
    old = ctx.stack_size
    assert old > 0
    ctx.stack_size = old + 1024
    assert ctx.stack_size >= old + 1024
    ctx.set_limit(cu.Limit.STACK_SIZE, old)
    assert ctx.get_limit(cu.Limit.PRINTF_FIFO_SIZE) == ctx.printf_fifo_size > 0
    assert ctx.malloc_heap_size > 0
    with pytest.raises(ValueError, match="non-negative"):
        ctx.set_limit(cu.Limit.STACK_SIZE, -1)
    with pytest.raises(TypeError, match="cudriver.Limit"):
        ctx.get_limit("stack")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown context limit"):
        ctx.get_limit(9999)


@pytest.mark.gpu
def test_closed_context_raises(device: cu.Device) -> None:
    created = cu.Context.create(device)
    created.close()
    with pytest.raises(cu.ClosedError, match="Context is closed"):
        created.synchronize()
    with pytest.raises(cu.ClosedError):
        created.set_current()
    with pytest.raises(cu.ClosedError), created:
        pass
    assert repr(created) == "<cudriver.Context closed>"


@pytest.mark.gpu
def test_from_handle_and_repr(ctx: cu.Context) -> None:
    b = cu.Context.from_handle(ctx.handle)
    assert b == ctx
    assert not b.owned
    assert "borrowed" in repr(b)
    assert "primary" in repr(ctx)
    assert cu.Context.from_handle(int(ctx)) == ctx
    with pytest.raises(ValueError, match="NULL"):
        cu.Context.from_handle(0)
    with pytest.raises(TypeError):
        cu.Context()


@pytest.mark.gpu
def test_raw_calls_accept_objects(ctx: cu.Context) -> None:
    assert cu.driver.cuCtxGetApiVersion(ctx) == ctx.api_version


@pytest.mark.gpu
def test_set_current_keeps_temporary_alive(device: cu.Device, ctx: cu.Context) -> None:
    created = cu.Context.create(device)
    key = int(created)
    created.set_current()
    del created
    import gc

    gc.collect()
    assert _current() == key
    cu.Stream().synchronize()  # the context is alive and usable
    ctx.set_current()
