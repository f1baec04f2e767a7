"""Shared fixtures; the ``gpu`` marker skips with a reason when no GPU is usable."""

from __future__ import annotations

import functools
from collections.abc import Iterator

import pytest

import cudriver as cu


@functools.cache
def gpu_unavailable_reason() -> str | None:
    """None when a driver and a device are usable, else why not (probed once)."""
    try:
        cu.init()
        n = cu.Device.count()
    except cu.DriverNotFoundError:
        return "no NVIDIA driver on this machine"
    except cu.CudaError as exc:
        return f"the CUDA driver is unusable: {exc}"
    if n == 0:
        return "the CUDA driver sees no device"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gpu_items = [it for it in items if it.get_closest_marker("gpu") is not None]
    if not gpu_items:
        return
    reason = gpu_unavailable_reason()
    if reason is None:
        return
    skip = pytest.mark.skip(reason=f"gpu test: {reason}")
    for it in gpu_items:
        it.add_marker(skip)


@pytest.fixture(scope="session")
def device() -> cu.Device:
    return cu.Device(0)


@pytest.fixture(scope="session")
def primary(device: cu.Device) -> Iterator[cu.Context]:
    ctx = device.primary_context()
    yield ctx
    ctx.close()


@pytest.fixture
def ctx(primary: cu.Context) -> Iterator[cu.Context]:
    """Device 0's primary context, current for the test."""
    primary.set_current()
    yield primary
    primary.set_current()


@pytest.fixture
def stream(ctx: cu.Context) -> Iterator[cu.Stream]:
    """A new non-blocking stream on device 0's primary context, closed after the test."""
    s = cu.Stream(context=ctx)
    yield s
    if not s.closed:
        s.synchronize()
        s.close()
